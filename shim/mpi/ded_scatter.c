/*
 * ded_scatter.c: ZeRO-style reduce-scatters (MPI_Reduce_scatter_block,
 * MPI_Reduce_scatter) of a sum the routing rule routes, as routed
 * all-reduces of the whole buffer (docs/architecture.md, "Routing").
 *
 * Owns: the scratch buffers, one per receive buffer, under their own lock.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ded_node.h" /* DED_LOG_* */
#include "ded_shim_int.h"

/*
 * ZeRO-style sharded gradients: a reduce-scatter of a sum the rule routes
 * is the routed all-reduce of the whole buffer, of which each rank keeps
 * its block, so every job's stream holds the whole gradient whatever its
 * number of ranks (docs/architecture.md, "Routing"). The whole buffer is
 * reduced in place when the application gave MPI_IN_PLACE (it is then in
 * the receive buffer), else in a scratch buffer kept per receive buffer,
 * so that a step's calls keep their buffers and the step is learnt.
 */

#define SCRATCH_MAX 256

static struct {
  pthread_mutex_t mu;
  struct scratch_buf {
    const void *recvbuf;
    void *p;
    size_t bytes;
    unsigned busy; /* calls reducing into it now (threads) */
    uint64_t used; /* when last handed out, in calls */
  } v[SCRATCH_MAX];
  unsigned n;
  uint64_t calls;
} scratch = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* The scratch buffer of |recvbuf|, |bytes| at least, marked busy until
 * scratch_done; NULL without memory, or with every buffer busy. A trainer
 * has a buffer per bucket; one that makes a new one every step recycles
 * the least recently used. */
static struct scratch_buf *scratch_for(const void *recvbuf, size_t bytes) {
  pthread_mutex_lock(&scratch.mu);
  struct scratch_buf *b = NULL;
  for (unsigned i = 0; i < scratch.n && !b; i++)
    if (scratch.v[i].recvbuf == recvbuf && !scratch.v[i].busy) b = &scratch.v[i];
  if (!b && scratch.n < SCRATCH_MAX) {
    b = &scratch.v[scratch.n++];
    memset(b, 0, sizeof *b);
  }
  for (unsigned i = 0; i < scratch.n && !b; i++)
    if (!scratch.v[i].busy && (!b || scratch.v[i].used < b->used)) b = &scratch.v[i];
  if (b && b->bytes < bytes) {
    void *p = realloc(b->p, bytes);
    if (p) {
      b->p = p;
      b->bytes = bytes;
    }
  }
  if (b && b->bytes >= bytes) {
    b->recvbuf = recvbuf;
    b->busy++;
    b->used = ++scratch.calls;
  } else {
    b = NULL;
  }
  pthread_mutex_unlock(&scratch.mu);
  return b;
}

static void scratch_done(struct scratch_buf *b) {
  pthread_mutex_lock(&scratch.mu);
  b->busy--;
  pthread_mutex_unlock(&scratch.mu);
}

/* This rank's block, |mine| elements at |offset|, of the routed
 * all-reduce of |total| elements. Returns an MPI error code; -1 when the
 * call is not one to route (the caller passes it to PMPI). Whether it is
 * depends only on what every rank passes alike (counts, type, op,
 * communicator, MPI_IN_PLACE): a rank whose block is empty may pass no
 * receive buffer, and a rank short of memory fails rather than leave the
 * others waiting in a collective it does not make. */
static int scatter_reduce(const void *sendbuf, void *recvbuf, int total, int offset,
                               int mine, MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
  size_t es;
  static char any; /* a buffer to classify with when this rank receives nothing */
  if (!ded_shim_sum_routes(sendbuf, sendbuf == MPI_IN_PLACE || recvbuf ? recvbuf : &any, total,
                           dt, op, comm, &es))
    return -1;
  struct scratch_buf *b = NULL;
  if (sendbuf != MPI_IN_PLACE && !(b = scratch_for(recvbuf, (size_t)total * es))) {
    ded_shim_log(DED_LOG_ERROR, "no memory for a reduce-scatter's %llu bytes",
             (unsigned long long)((size_t)total * es));
    PMPI_Comm_call_errhandler(comm, MPI_ERR_NO_MEM);
    return MPI_ERR_NO_MEM;
  }
  void *whole = b ? b->p : recvbuf;
  int rc = ded_shim_allreduce(sendbuf, whole, total, dt, op, comm);
  if (rc == MPI_SUCCESS && mine > 0)
    memmove(recvbuf, (char *)whole + (size_t)offset * es, (size_t)mine * es);
  if (b) scratch_done(b);
  return rc;
}

DED_EXPORT int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                                        MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  int size = 0;
  if (recvcount > 0 && PMPI_Comm_size(comm, &size) == MPI_SUCCESS && size > 0 &&
      recvcount <= INT_MAX / size) {
    int rank = 0;
    PMPI_Comm_rank(comm, &rank);
    int rc = scatter_reduce(sendbuf, recvbuf, recvcount * size, recvcount * rank, recvcount,
                                 datatype, op, comm);
    if (rc >= 0) return rc;
  }
  return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm);
}

DED_EXPORT int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[],
                                  MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  int size = 0, rank = 0;
  if (recvcounts && PMPI_Comm_size(comm, &size) == MPI_SUCCESS &&
      PMPI_Comm_rank(comm, &rank) == MPI_SUCCESS) {
    long long total = 0, offset = 0;
    bool sane = true;
    for (int i = 0; i < size && sane; i++) {
      sane = recvcounts[i] >= 0;
      if (i < rank) offset += recvcounts[i];
      total += recvcounts[i];
    }
    if (sane && total > 0 && total <= INT_MAX) {
      int rc = scatter_reduce(sendbuf, recvbuf, (int)total, (int)offset, recvcounts[rank],
                                   datatype, op, comm);
      if (rc >= 0) return rc;
    }
  }
  return PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm);
}
