/*
 * ded_route.c: which all-reduces go to the swarm, the census of the job's
 * all-reduces and the warnings about large ones that stay (ded_route.h).
 */
#define _GNU_SOURCE
#include "ded_route.h"

#include <stdio.h>
#include <string.h>

#include "ded_driver.h"

void ded_route_init(ded_route *rt, uint32_t min_elements, uint64_t min_bytes, bool rank0,
                    ded_route_log_fn log) {
  memset(rt, 0, sizeof *rt);
  rt->min_elements = min_elements ? min_elements : 1;
  rt->min_bytes = min_bytes;
  rt->census = rank0;
  rt->log = log;
}

int64_t ded_route_min_count(const ded_route *rt) {
  /* The widest routed type is 8 bytes. */
  uint64_t by_bytes = (rt->min_bytes + sizeof(double) - 1) / sizeof(double);
  uint64_t n = rt->min_elements > by_bytes ? rt->min_elements : by_bytes;
  return n > 1 ? (int64_t)n : 1;
}

bool ded_route_comm_is_world(MPI_Comm comm) {
  if (comm == MPI_COMM_WORLD) return true;
  if (comm == MPI_COMM_NULL) return false;
  int inter = 0, cmp = MPI_UNEQUAL;
  if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter) return false;
  if (PMPI_Comm_compare(comm, MPI_COMM_WORLD, &cmp) != MPI_SUCCESS) return false;
  return cmp == MPI_IDENT || cmp == MPI_CONGRUENT;
}

static bool route_predefined_op(MPI_Op op) {
  static const MPI_Op ops[] = {MPI_MAX,  MPI_MIN,  MPI_SUM,    MPI_PROD,   MPI_LAND,
                               MPI_BAND, MPI_LOR,  MPI_BOR,    MPI_LXOR,   MPI_BXOR,
                               MPI_MAXLOC, MPI_MINLOC, MPI_REPLACE, MPI_NO_OP};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (op == ops[i]) return true;
  return false;
}

ded_route_why ded_route_tensor(const ded_route *rt, int count, MPI_Datatype dt, ded_route_why comm,
                               uint8_t *dtype, size_t *es) {
  if (count <= 0) return DED_ROUTE_ODD;
  /* C's types, and Fortran's REAL and DOUBLE PRECISION (the same bytes). */
  if (dt == MPI_FLOAT || dt == MPI_REAL || dt == MPI_REAL4) {
    *dtype = DED_DTYPE_F32;
    *es = 4;
  } else if (dt == MPI_DOUBLE || dt == MPI_DOUBLE_PRECISION || dt == MPI_REAL8) {
    *dtype = DED_DTYPE_F64;
    *es = 8;
  } else {
    return DED_ROUTE_TYPE; /* a derived type takes a user-defined op, not MPI_SUM */
  }
  if ((uint64_t)count < rt->min_elements) return DED_ROUTE_SCALAR;
  if ((uint64_t)count * *es < rt->min_bytes) return DED_ROUTE_SMALL;
  return comm;
}

ded_route_why ded_route_classify(const ded_route *rt, const void *sendbuf, const void *recvbuf,
                                 int count, MPI_Datatype dt, MPI_Op op, ded_route_why comm,
                                 uint8_t *dtype, size_t *es) {
  if (count <= 0 || !recvbuf || !sendbuf || sendbuf == recvbuf) return DED_ROUTE_ODD;
  if (op != MPI_SUM) return route_predefined_op(op) ? DED_ROUTE_OP : DED_ROUTE_USER_OP;
  return ded_route_tensor(rt, count, dt, comm, dtype, es);
}

/* ---------------------------------------------------------------- what the job is told */

static const char *route_type_name(MPI_Datatype dt) {
  if (dt == MPI_FLOAT || dt == MPI_REAL || dt == MPI_REAL4) return "float";
  if (dt == MPI_DOUBLE || dt == MPI_DOUBLE_PRECISION || dt == MPI_REAL8) return "double";
  static __thread char name[MPI_MAX_OBJECT_NAME];
  int len = 0;
  if (PMPI_Type_get_name(dt, name, &len) != MPI_SUCCESS || len == 0) return "a derived type";
  return name;
}

/* Why a call of outcome |why| stays with the job, in a few words. */
static const char *route_why_text(const ded_route *rt, ded_route_why why, char *buf, size_t len) {
  switch (why) {
  case DED_ROUTE_YES: return "to the swarm";
  case DED_ROUTE_SCALAR:
    snprintf(buf, len, "fewer than DEDMPI_MIN_ELEMENTS=%u elements: a metric or a count, left "
             "as it is", rt->min_elements);
    return buf;
  case DED_ROUTE_SMALL:
    snprintf(buf, len, "under DEDMPI_MIN_BYTES=%llu", (unsigned long long)rt->min_bytes);
    return buf;
  case DED_ROUTE_OP: return "an op other than MPI_SUM";
  case DED_ROUTE_USER_OP: return "a user-defined op";
  case DED_ROUTE_TYPE: return "not floats or doubles";
  case DED_ROUTE_NOT_WORLD: return "a communicator other than the whole job's or a group of it";
  case DED_ROUTE_NOT_DP:
    return "a group of MPI_Comm_split whose rank 0 broadcast it no state before its first sum "
           "(tensor-parallel, not averaged across jobs)";
  case DED_ROUTE_ODD: return "arguments MPI judges (aliased or empty buffers)";
  case DED_ROUTE_WHY_N: break;
  }
  return "?";
}

static void route_census_log(ded_route *rt) {
  rt->census = false;
  char line[1400], why[128];
  size_t n = 0;
  n += (size_t)snprintf(line + n, sizeof line - n, "the first %llu all-reduces: ",
                        (unsigned long long)rt->calls);
  const struct ded_route_tally *y = &rt->tally[DED_ROUTE_YES];
  if (y->calls)
    n += (size_t)snprintf(line + n, sizeof line - n,
                          "%llu to the swarm (%s, %llu to %llu elements, %llu bytes in all)",
                          (unsigned long long)y->calls, route_type_name(y->dt),
                          (unsigned long long)y->elems_min, (unsigned long long)y->elems_max,
                          (unsigned long long)y->bytes);
  else
    n += (size_t)snprintf(line + n, sizeof line - n, "none to the swarm");
  for (int w = DED_ROUTE_YES + 1; w < DED_ROUTE_WHY_N && n < sizeof line; w++) {
    const struct ded_route_tally *t = &rt->tally[w];
    if (!t->calls) continue;
    char sizes[64];
    if (t->elems_min == t->elems_max)
      snprintf(sizes, sizeof sizes, "%llu", (unsigned long long)t->elems_min);
    else
      snprintf(sizes, sizeof sizes, "%llu to %llu", (unsigned long long)t->elems_min,
               (unsigned long long)t->elems_max);
    n += (size_t)snprintf(line + n, sizeof line - n, "; %llu left to this job (%s, %s element%s): "
                          "%s", (unsigned long long)t->calls, route_type_name(t->dt), sizes,
                          t->elems_max == 1 ? "" : "s",
                          route_why_text(rt, (ded_route_why)w, why, sizeof why));
  }
  rt->log(DED_LOG_INFO, "%s", line);
}

/* A large call of outcome |why| that may be a gradient the swarm does
 * not average: said once per reason. */
static void route_warn(ded_route *rt, ded_route_why why, int count, MPI_Datatype dt,
                       uint64_t bytes) {
  if (rt->warned[why]) return;
  const char *what = NULL;
  switch (why) {
  case DED_ROUTE_USER_OP:
    what = "with a user-defined op (Horovod's --fp16-allreduce makes one): the swarm averages "
           "only MPI_SUM of floats and doubles, so these values are this job's alone";
    break;
  case DED_ROUTE_NOT_WORLD:
    what = "on a communicator that is neither the whole job's nor a group of an MPI_Comm_split "
           "of it (MPI_Comm_create, a split of a split?): not routed, so these values are this "
           "job's alone";
    break;
  default: return;
  }
  rt->warned[why] = true;
  rt->log(DED_LOG_WARN, "an MPI_Allreduce of %d %s (%llu bytes) %s", count, route_type_name(dt),
          (unsigned long long)bytes, what);
}

void ded_route_note(ded_route *rt, ded_route_why why, int count, MPI_Datatype dt, MPI_Op op,
                    uint64_t now_ns) {
  if (why == DED_ROUTE_USER_OP || why == DED_ROUTE_NOT_WORLD) {
    int size = 0;
    if (count > 0 && PMPI_Type_size(dt, &size) == MPI_SUCCESS && size > 0) {
      uint64_t bytes = (uint64_t)count * (uint64_t)size;
      if (bytes >= DED_ROUTE_LARGE_BYTES) route_warn(rt, why, count, dt, bytes);
    }
  }
  if (!rt->census) return;
  if (rt->calls++ == 0) rt->first_ns = now_ns;
  struct ded_route_tally *t = &rt->tally[why];
  uint64_t n = count > 0 ? (uint64_t)count : 0;
  if (t->calls++ == 0) {
    t->dt = dt;
    t->op = op;
    t->elems_min = t->elems_max = n;
  }
  if (n < t->elems_min) t->elems_min = n;
  if (n > t->elems_max) t->elems_max = n;
  int size = 0;
  if (why == DED_ROUTE_YES && PMPI_Type_size(dt, &size) == MPI_SUCCESS && size > 0)
    t->bytes += n * (uint64_t)size;
  if (rt->calls >= DED_ROUTE_CENSUS_CALLS || now_ns - rt->first_ns >= DED_ROUTE_CENSUS_NS)
    route_census_log(rt);
}

void ded_route_census_flush(ded_route *rt) {
  if (rt->census && rt->calls) route_census_log(rt);
  rt->census = false;
}
