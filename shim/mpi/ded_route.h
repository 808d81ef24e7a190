/*
 * ded_route.h: which all-reduces go to the swarm, and what the job is told
 * about the others (docs/architecture.md, "Routing").
 *
 * Owns: the rule's thresholds (DEDMPI_MIN_ELEMENTS, DEDMPI_MIN_BYTES);
 * on rank 0, a census of the job's all-reduces by outcome (routed, or the
 * reason it was not), with counts and the smallest and largest sizes,
 * logged once early in the run; and the warnings, once per reason, when
 * a large all-reduce that looks like a gradient does not reach the swarm.
 *
 * The rule is a function of the call alone (its type, op, count and
 * communicator), never of the job's history, so every job of a run
 * routes the same calls and their gradient streams line up: an MPI_SUM
 * of MPI_FLOAT or MPI_DOUBLE (or Fortran's REAL, REAL*4, REAL*8, DOUBLE
 * PRECISION) on a communicator congruent to MPI_COMM_WORLD or on a
 * data-parallel group of an MPI_Comm_split of it (ded_shim_int.h), of at least
 * DEDMPI_MIN_ELEMENTS elements (2: a single value is a metric, a loss or
 * a count, far more often than a gradient) and DEDMPI_MIN_BYTES bytes.
 *
 * Invariants: the census only counts until it is logged (a few compares
 * per call, on rank 0, for the first DED_ROUTE_CENSUS_CALLS calls or
 * DED_ROUTE_CENSUS_NS); each warning is logged at most once.
 *
 * Threads: the application's; the census and the warnings are under the
 * caller's lock (ded_route_note is called with the shim's lock held).
 */
#ifndef DED_ROUTE_H
#define DED_ROUTE_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/ded_assert.h"

/* The census is logged after this many all-reduces, or this long after
 * the first one, whichever comes first (or at MPI_Finalize). */
#define DED_ROUTE_CENSUS_CALLS 1024
#define DED_ROUTE_CENSUS_NS (10ull * 1000000000ull)

/* From this many bytes an all-reduce that does not reach the swarm is
 * worth a warning if it looks like a gradient. */
#define DED_ROUTE_LARGE_BYTES (64u * 1024u)

/* Why an all-reduce goes to the swarm or not. */
typedef enum ded_route_why {
  DED_ROUTE_YES,
  DED_ROUTE_SCALAR,    /* fewer than DEDMPI_MIN_ELEMENTS elements: a metric */
  DED_ROUTE_SMALL,     /* fewer than DEDMPI_MIN_BYTES bytes */
  DED_ROUTE_OP,        /* a predefined op other than MPI_SUM */
  DED_ROUTE_USER_OP,   /* a user-defined op (Horovod's fp16 sum, say) */
  DED_ROUTE_TYPE,      /* a type that is not a float or a double */
  DED_ROUTE_NOT_WORLD, /* a communicator neither the whole job's nor a group of a split of it */
  DED_ROUTE_NOT_DP,    /* a group whose rank 0 broadcast it no state before its first sum */
  DED_ROUTE_ODD,       /* null buffers, aliasing, no elements: MPI's to judge */
  DED_ROUTE_WHY_N
} ded_route_why;

/* The log: a line at a DED_LOG_* level, formatted as printf does. */
typedef void (*ded_route_log_fn)(int level, const char *fmt, ...) DED_PRINTF(2, 3);

typedef struct ded_route {
  uint32_t min_elements; /* DEDMPI_MIN_ELEMENTS */
  uint64_t min_bytes;    /* DEDMPI_MIN_BYTES */
  bool census;           /* rank 0: counting, not yet logged */
  ded_route_log_fn log;
  uint64_t first_ns; /* the first all-reduce counted */
  uint64_t calls;
  struct ded_route_tally {
    uint64_t calls, elems_min, elems_max, bytes;
    MPI_Datatype dt; /* of the first one */
    MPI_Op op;
  } tally[DED_ROUTE_WHY_N];
  bool warned[DED_ROUTE_WHY_N];
} ded_route;

/* Sets up |rt|; |rank0| counts and warns (the others only route). */
void ded_route_init(ded_route *rt, uint32_t min_elements, uint64_t min_bytes, bool rank0,
                    ded_route_log_fn log);

/* The smallest count a routed call may have (the fast path's test). */
int64_t ded_route_min_count(const ded_route *rt);

/* Whether the call goes to the swarm, and if not why; for a routed call
 * the engine's type (DED_DTYPE_*) and element size. |comm| is what the
 * shim says of the communicator: DED_ROUTE_YES when it carries a channel
 * whose sums route, else DED_ROUTE_NOT_WORLD or DED_ROUTE_NOT_DP. */
ded_route_why ded_route_classify(const ded_route *rt, const void *sendbuf, const void *recvbuf,
                                 int count, MPI_Datatype dt, MPI_Op op, ded_route_why comm,
                                 uint8_t *dtype, size_t *es);

/* Whether |count| elements of |dt| (on a communicator |comm| as above) are
 * a tensor the rule would
 * route (as ded_route_classify for an MPI_SUM of sane buffers): the start-up
 * broadcasts that are state are those. */
ded_route_why ded_route_tensor(const ded_route *rt, int count, MPI_Datatype dt, ded_route_why comm,
                               uint8_t *dtype, size_t *es);

/* Rank 0: counts a call of outcome |why| into the census (logging it once
 * it is due, at |now_ns|), and warns once if a large call that looks like
 * a gradient stays with the job. */
void ded_route_note(ded_route *rt, ded_route_why why, int count, MPI_Datatype dt, MPI_Op op,
                    uint64_t now_ns);

/* Rank 0: logs the census now if it was not yet (MPI_Finalize). */
void ded_route_census_flush(ded_route *rt);

/* A communicator with the ranks of MPI_COMM_WORLD in the same order. */
bool ded_route_comm_is_world(MPI_Comm comm);

#endif /* DED_ROUTE_H */
