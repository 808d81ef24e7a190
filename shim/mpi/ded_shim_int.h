/*
 * ded_shim_int.h: what the shim's other MPI calls (ded_requests.c) take
 * from its core (ded_shim.c). Application threads only.
 */
#ifndef DED_SHIM_INT_H
#define DED_SHIM_INT_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/ded_assert.h"

#define DED_EXPORT __attribute__((visibility("default")))

/* Moves the routed ops as far as they can go (one atomic load when none
 * is pending). */
void ded_shim_progress(void);

/* No routed op is pending: completion calls may go straight to PMPI. */
bool ded_shim_idle(void);

/* Waits a little between polls (spin, then yield, then sleep). */
void ded_shim_backoff(unsigned spins);

/* Whether a sum of |count| elements the routing rule routes (the shim is
 * active, the count and the buffers as ded_route_classify wants); |*es|
 * the element size. */
bool ded_shim_sum_routes(const void *sendbuf, const void *recvbuf, int count, MPI_Datatype dt,
                         MPI_Op op, MPI_Comm comm, size_t *es);

/* A routed all-reduce, as the application's MPI_Allreduce of it. */
int ded_shim_allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op,
                       MPI_Comm comm);

/* One line of the shim's log at a DED_LOG_* level. */
void ded_shim_log(int level, const char *fmt, ...) DED_PRINTF(2, 3);

#endif /* DED_SHIM_INT_H */
