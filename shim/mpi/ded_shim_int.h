/*
 * ded_shim_int.h: what the shim's other MPI calls (ded_requests.c) take
 * from its core (ded_shim.c). Application threads only.
 */
#ifndef DED_SHIM_INT_H
#define DED_SHIM_INT_H

#include <stdbool.h>

#define DED_EXPORT __attribute__((visibility("default")))

/* Moves the routed ops as far as they can go (one atomic load when none
 * is pending). */
void ded_shim_progress(void);

/* No routed op is pending: completion calls may go straight to PMPI. */
bool ded_shim_idle(void);

/* Waits a little between polls (spin, then yield, then sleep). */
void ded_shim_backoff(unsigned spins);

#endif /* DED_SHIM_INT_H */
