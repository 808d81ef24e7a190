/*
 * ded_secrets.h: what a job reads from its own files and environment to
 * prove who it is and whom it admits: the identity's seed
 * (DEDMPI_IDENTITY_FILE), the run's secret (DEDMPI_SWARM_KEY or
 * DEDMPI_SWARM_KEY_FILE) and access control (DEDMPI_OWNER,
 * DEDMPI_ALLOW_FILE, DEDMPI_INVITE).
 *
 * Owns no state: each call reads what it is given and fills the caller's
 * buffers. Invariants it keeps: a file holding a secret (an identity, a
 * swarm key) is used only if it is a regular file of this user that no
 * one else may read or write, and an allow file only if no one else may
 * write it; a file that fails a check is refused with a message naming
 * its variable and never changed; the buffers a secret passes through
 * here are wiped on every way out. Errors are DED_ERR_INVALID_ARG (the
 * user's to fix) or DED_ERR_INTERNAL (the system failed), with a message
 * in |err|.
 */
#ifndef DED_SECRETS_H
#define DED_SECRETS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crypto/ded_noise.h"
#include "ded_node.h"

struct ded_driver_config;

/*
 * The seed of this job's identity: kept in |path| (created on first use,
 * mode 0600, written whole under a temporary name and linked into place,
 * so a process that races us reads either nothing or all of it; |*created|
 * says the file is new) or, for NULL or "", fresh from the OS.
 */
int ded_secrets_identity_seed(const char *path, uint8_t seed[DED_SEED_BYTES], bool *created,
                              char *err, size_t errlen);

/*
 * The run's secret into |psk|, derived for the run |run_id|
 * (ded_swarm_key_derive) from |key_file|'s first line when |key_file| is
 * set, else from |key|'s text. With neither, |*has| is false and |psk|
 * untouched: the run has no secret.
 */
int ded_secrets_swarm_key(const char *key, const char *key_file,
                          const uint8_t run_id[DED_RUN_ID_BYTES],
                          uint8_t psk[DED_NOISE_PSK_BYTES], bool *has, char *err, size_t errlen);

/*
 * Checks, without deriving anything, what ded_secrets_swarm_key would
 * refuse: the file (private, readable) and the text's shape (a key, or a
 * passphrase it would stretch). 0 when neither is set. For a launcher
 * that must stop before it starts anything.
 */
int ded_secrets_swarm_key_check(const char *key, const char *key_file, char *err, size_t errlen);

/*
 * Sets up |st|'s access control from |cfg| (its owner, allow file and
 * invitation) for the identity of |seed| in the run |st->run|: the allow
 * file's keys go to |*allow| (malloc'd, NULL without one), which must
 * outlive ded_node_new; the invitation must be for this identity and run
 * and, with an owner, signed by it and unexpired.
 */
int ded_secrets_access(const struct ded_driver_config *cfg, const uint8_t seed[DED_SEED_BYTES],
                       ded_node_settings *st, uint8_t (**allow)[DED_PK_BYTES], char *err,
                       size_t errlen);

#endif /* DED_SECRETS_H */
