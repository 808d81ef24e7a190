/*
 * ar_check.c: an MPI client that checks, from inside a job, what dedmpi
 * routes to the swarm and what it leaves alone.
 *
 * Every rank of job j contributes value (j_value + rank) to every element,
 * so the job's local sum is known in closed form, and so is the swarm's
 * answer when every job of the run uses the same layout: the test driver
 * passes the run-wide numbers in. Each case prints one line
 *
 *     case <name> rc <code> got <first> <last> want <value> ok|BAD
 *
 * and the program exits 1 if any case was BAD. It sets MPI_ERRORS_RETURN
 * so that error codes can be checked instead of aborting.
 *
 * Usage: ar_check --value V --swarm-sum T --swarm-ranks R [--count N]
 *                 [--rounds K] [--nonblocking] [--expect-error CODE]
 *                 [--cases all|swarm] [--inflight N]
 * T is the sum over all ranks of all jobs of (j_value + rank) and R the
 * number of ranks in all jobs: a routed call must give n_j * T / R.
 * --inflight N posts N MPI_Iallreduce at once (bucket i adds i to every
 * value) and completes them with one MPI_Waitall.
 */
#include <dlfcn.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dedmpi.h"

static int bad;

static void report(const char *name, int rc, double first, double last, double want,
                   int want_rc) {
  int ok = rc == want_rc && (rc != MPI_SUCCESS || (fabs(first - want) <= 1e-4 * fabs(want) + 1e-6 &&
                                                   fabs(last - want) <= 1e-4 * fabs(want) + 1e-6));
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  printf("rank %d case %s rc %d got %.9g %.9g want %.9g %s\n", rank, name, rc, first, last, want,
         ok ? "ok" : "BAD");
  bad |= !ok;
}

/* A float all-reduce of |n| elements on |comm| with |op|; returns rc. */
/* MPI_SUM of floats, as a user-defined op. */
static void float_sum(void *in, void *inout, int *len, MPI_Datatype *dt) {
  (void)dt;
  for (int i = 0; i < *len; i++) ((float *)inout)[i] += ((const float *)in)[i];
}

static int run_float(MPI_Comm comm, MPI_Op op, int n, float v, int in_place, int nonblocking,
                     float *out_first, float *out_last) {
  float *buf = malloc(sizeof(float) * (size_t)n), *src = malloc(sizeof(float) * (size_t)n);
  for (int i = 0; i < n; i++) src[i] = buf[i] = v;
  int rc;
  if (nonblocking) {
    MPI_Request r[2];
    int dummy_in = 1, dummy_out = 0;
    rc = MPI_Iallreduce(in_place ? MPI_IN_PLACE : src, buf, n, MPI_FLOAT, op, comm, &r[0]);
    /* An ordinary request completed in the same Waitall. */
    MPI_Iallreduce(&dummy_in, &dummy_out, 1, MPI_INT, MPI_SUM, comm, &r[1]);
    if (rc == MPI_SUCCESS) {
      MPI_Status st[2];
      rc = MPI_Waitall(2, r, st);
      if (rc == MPI_ERR_IN_STATUS) rc = st[0].MPI_ERROR;
    }
  } else {
    rc = MPI_Allreduce(in_place ? MPI_IN_PLACE : src, buf, n, MPI_FLOAT, op, comm);
  }
  *out_first = buf[0];
  *out_last = buf[n - 1];
  free(buf);
  free(src);
  return rc;
}

int main(int argc, char **argv) {
  double value = 1, swarm_sum = 0, swarm_ranks = 1;
  int count = 100000, rounds = 1, nonblocking = 0, expect = MPI_SUCCESS, only_swarm = 0, inflight = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--value")) value = atof(argv[++i]);
    else if (!strcmp(argv[i], "--swarm-sum")) swarm_sum = atof(argv[++i]);
    else if (!strcmp(argv[i], "--swarm-ranks")) swarm_ranks = atof(argv[++i]);
    else if (!strcmp(argv[i], "--count")) count = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--nonblocking")) nonblocking = 1;
    else if (!strcmp(argv[i], "--expect-error")) expect = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--cases")) only_swarm = !strcmp(argv[++i], "swarm");
    else if (!strcmp(argv[i], "--inflight")) inflight = atoi(argv[++i]);
    else {
      fprintf(stderr, "ar_check: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank, size, query;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Query_thread(&query);
  /* The shim upgrades the thread level for itself; the application must
   * still see what it asked for. */
  if (query != provided || provided > MPI_THREAD_SERIALIZED) {
    printf("rank %d case thread_level provided %d query %d BAD\n", rank, provided, query);
    bad = 1;
  }
  float v = (float)(value + rank), f, l;
  double local_sum = value * size + size * (size - 1) / 2.0;
  double swarm = size * swarm_sum / swarm_ranks;
  if (inflight > 0) {
    /* More requests outstanding than a node holds rounds at once; they
     * finish in any order but must all be right. */
    float **bufs = calloc((size_t)inflight, sizeof *bufs);
    MPI_Request *reqs = calloc((size_t)inflight, sizeof *reqs);
    for (int b = 0; b < inflight; b++) {
      bufs[b] = malloc(sizeof(float) * (size_t)count);
      for (int i = 0; i < count; i++) bufs[b][i] = v + (float)b;
      MPI_Iallreduce(MPI_IN_PLACE, bufs[b], count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &reqs[b]);
    }
    int rc = MPI_Waitall(inflight, reqs, MPI_STATUSES_IGNORE);
    for (int b = 0; b < inflight; b++) {
      char name[32];
      snprintf(name, sizeof name, "inflight_%d", b);
      report(name, rc, bufs[b][0], bufs[b][count - 1],
             size * (swarm_sum + b * swarm_ranks) / swarm_ranks, MPI_SUCCESS);
      free(bufs[b]);
    }
    free(bufs);
    free(reqs);
  }
  for (int r = 0; r < rounds; r++) {
    int rc = run_float(MPI_COMM_WORLD, MPI_SUM, count, v, 1, nonblocking, &f, &l);
    report("swarm_world_in_place", rc, f, l, swarm, expect);
  }
  if (!only_swarm && expect == MPI_SUCCESS) {
    int rc = run_float(MPI_COMM_WORLD, MPI_SUM, count, v, 0, nonblocking, &f, &l);
    report("swarm_world_sendbuf", rc, f, l, swarm, MPI_SUCCESS);
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    rc = run_float(dup, MPI_SUM, count, v, 1, nonblocking, &f, &l);
    report("swarm_congruent_dup", rc, f, l, swarm, MPI_SUCCESS);
    MPI_Comm_free(&dup);
    /* A small tensor (a bias) is a gradient too. */
    rc = run_float(MPI_COMM_WORLD, MPI_SUM, 16, v, 1, nonblocking, &f, &l);
    report("swarm_small", rc, f, l, swarm, MPI_SUCCESS);
    /* Everything below stays inside the job: a single value is a metric. */
    rc = run_float(MPI_COMM_WORLD, MPI_SUM, 1, v, 1, nonblocking, &f, &l);
    report("local_scalar", rc, f, l, local_sum, MPI_SUCCESS);
    rc = run_float(MPI_COMM_WORLD, MPI_MAX, count, v, 1, nonblocking, &f, &l);
    report("local_max", rc, f, l, value + size - 1, MPI_SUCCESS);
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    int hsize;
    MPI_Comm_size(half, &hsize);
    double hsum = 0;
    for (int q = rank % 2; q < size; q += 2) hsum += value + q;
    if (size > 1) {
      rc = run_float(half, MPI_SUM, count, v, 1, nonblocking, &f, &l);
      report("local_subcomm", rc, f, l, hsum, MPI_SUCCESS);
    }
    MPI_Comm_free(&half);
    /* A user-defined op (as Horovod's fp16 sum): the job's own sum, and a
     * warning from rank 0 that the swarm does not average it. */
    MPI_Op user_sum;
    MPI_Op_create(float_sum, 1, &user_sum);
    rc = run_float(MPI_COMM_WORLD, user_sum, count, v, 1, nonblocking, &f, &l);
    report("local_user_op", rc, f, l, local_sum, MPI_SUCCESS);
    MPI_Op_free(&user_sum);
    int *iv = malloc(sizeof(int) * (size_t)count);
    for (int i = 0; i < count; i++) iv[i] = (int)v;
    rc = MPI_Allreduce(MPI_IN_PLACE, iv, count, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    report("local_int", rc, iv[0], iv[count - 1], local_sum, MPI_SUCCESS);
    free(iv);
    double *dv = malloc(sizeof(double) * (size_t)count);
    for (int i = 0; i < count; i++) dv[i] = v;
    rc = MPI_Allreduce(MPI_IN_PLACE, dv, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    report("swarm_double", rc, dv[0], dv[count - 1], swarm, MPI_SUCCESS);
    free(dv);
    /* A wrong argument is MPI's to report, with the shim as without. */
    float one = 1;
    rc = MPI_Allreduce(MPI_IN_PLACE, &one, -1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d case bad_count rc %d %s\n", rank, rc, rc == MPI_ERR_COUNT ? "ok" : "BAD");
    bad |= rc != MPI_ERR_COUNT;
    rc = MPI_Allreduce(MPI_IN_PLACE, &one, count, MPI_FLOAT, MPI_SUM, MPI_COMM_NULL);
    printf("rank %d case bad_comm rc %d %s\n", rank, rc, rc == MPI_ERR_COMM ? "ok" : "BAD");
    bad |= rc != MPI_ERR_COMM;
  }
  /* dedmpi.h, looked up at run time: present only under the shim. */
  int (*last_round)(dedmpi_round_info *) =
      (int (*)(dedmpi_round_info *))dlsym(RTLD_DEFAULT, "dedmpi_last_round");
  if (last_round) {
    dedmpi_round_info info;
    int rc = last_round(&info);
    printf("rank %d round_info rc %d round %llu contributors %d weight %g alone %d error %d\n", rank,
           rc, info.round, info.contributors, info.total_weight, info.alone, info.error);
  }
  int (*last_codec)(char *, int) = (int (*)(char *, int))dlsym(RTLD_DEFAULT, "dedmpi_last_codec");
  if (last_codec) {
    char name[24], tiny[2];
    int rc = last_codec(name, (int)sizeof name);
    printf("rank %d codec rc %d %s short %d null %d\n", rank, rc, rc == MPI_SUCCESS ? name : "-",
           last_codec(tiny, (int)sizeof tiny), last_codec(NULL, 8));
  }
  MPI_Finalize();
  return bad;
}
