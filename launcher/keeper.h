/*
 * keeper.h: a backbone's checkpoints (docs/architecture.md,
 * "Checkpoints"): at start the newest valid checkpoint in
 * DEDMPI_CHECKPOINT_DIR goes to the node, which serves it to joiners once
 * no trainer is left; then a thread pulls the run's state every
 * DEDMPI_CHECKPOINT_EVERY (steps or seconds) while trainers go on, writes
 * it there (ded_ckpt.h: atomically, the newest DEDMPI_CHECKPOINT_KEEP
 * kept) and hands it to the node in place of the one before.
 *
 * Owns: struct keeper (its thread, the settings, the round and step of
 * the last checkpoint). The file I/O happens on its thread, never on the
 * driver's.
 */
#ifndef DEDRUN_KEEPER_H
#define DEDRUN_KEEPER_H

#include <stddef.h>

#include "ded_config.h"
#include "ded_driver.h"

typedef struct keeper keeper;

/* Loads the newest checkpoint of |cfg|'s directory (creating the
 * directory if missing) into the node of |d| and starts the thread. 0,
 * or -1 with a message in |err| (a directory that cannot be made or
 * read, no memory, no thread). */
int keeper_start(ded_driver *d, const ded_config *cfg, keeper **out, char *err, size_t errlen);

/* Stops the thread (a pull under way ends within the node's bounds) and
 * frees |k|; NULL is fine. */
void keeper_stop(keeper *k);

#endif /* DEDRUN_KEEPER_H */
