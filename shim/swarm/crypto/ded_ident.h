/*
 * ded_ident.h: a peer's identity, and the only door to libsodium.
 *
 * Every peer holds an Ed25519 key pair; its peer id is the BLAKE2b-256
 * hash of the public key, so an id cannot be claimed without the key.
 * This directory is the only place that includes sodium.h
 * (docs/architecture.md, the layers): everything else sees fixed-size byte
 * arrays and these functions.
 *
 * The engine is sans-I/O, so keys come from a seed the driver supplies
 * (from the OS RNG, or from the simulator's seeded RNG).
 */
#ifndef DED_IDENT_H
#define DED_IDENT_H

#include <stddef.h>
#include <stdint.h>

#include "../core/ded_assert.h"
#include "../core/ded_types.h"

typedef struct ded_ident {
  uint8_t pk[DED_PK_BYTES];
  uint8_t sk[DED_SK_BYTES];
  uint8_t id[DED_ID_BYTES];
} ded_ident;

/* Initialises libsodium; safe to call many times. 0 or DED_ERR_INTERNAL. */
int ded_crypto_init(void);

/* Derives a key pair and id from |seed|. */
void ded_ident_from_seed(ded_ident *ident, const uint8_t seed[DED_SEED_BYTES]);

/* Wipes the secret key. */
void ded_ident_wipe(ded_ident *ident);

/* Detached Ed25519 signature of |msg|. */
void ded_ident_sign(const ded_ident *ident, const uint8_t *msg, size_t len,
                    uint8_t sig[DED_SIG_BYTES]);

/* 0 if |sig| is |pk|'s signature of |msg|, -1 otherwise. */
DED_UNUSED_RESULT int ded_ident_verify(const uint8_t pk[DED_PK_BYTES], const uint8_t *msg,
                                       size_t len, const uint8_t sig[DED_SIG_BYTES]);

/* The peer id of |pk|. */
void ded_peer_id(const uint8_t pk[DED_PK_BYTES], uint8_t id[DED_ID_BYTES]);

/* BLAKE2b-256 of |in|; names a run (run id = hash of the run name). */
void ded_hash32(const void *in, size_t len, uint8_t out[32]);

/* |len| bytes as 2 * |len| lowercase hex digits and a NUL, into |hex|
 * (constant time: used for secrets). */
void ded_hex_encode(const uint8_t *bin, size_t len, char *hex);

/* Exactly |hex_len| hex digits into exactly |len| bytes: 0, or -1 for
 * anything else (a non-hex character, too few or too many digits). */
DED_UNUSED_RESULT int ded_hex_decode(const char *hex, size_t hex_len, uint8_t *bin, size_t len);

/* The run's secret (DEDMPI_SWARM_KEY): 32 bytes, the Noise psk. */
#define DED_SWARM_KEY_BYTES 32
/* A passphrase shorter than this is refused. */
#define DED_PASSPHRASE_MIN 16

/*
 * Whether the text of DEDMPI_SWARM_KEY (|len| bytes) looks like a key
 * gone wrong, so that it must be refused rather than stretched as a
 * passphrase (a key with a digit lost, doubled or pasted with a blank
 * would otherwise make a key of its own and lock the job out, with no
 * peer able to say more than "another key"):
 * - hex digits only, blanks (space, tab, CR, LF) at either end aside,
 *   other than exactly 64 digits and nothing else: a passphrase of hex
 *   digits only is refused, at any length;
 * - exactly 64 characters that are not all hex digits.
 * True with the reason in |why| (never the text, only its counts: "63 hex
 * digits: ..."), false for text that is a key or a passphrase.
 */
bool ded_swarm_key_suspect(const char *text, size_t len, char *why, size_t cap);

/*
 * The run's secret from the text of DEDMPI_SWARM_KEY (|len| bytes): 64
 * hex digits are the key itself; text ded_swarm_key_suspect refuses is
 * refused; anything else is a passphrase of at least DED_PASSPHRASE_MIN
 * bytes, stretched with Argon2id (libsodium's interactive limits: about
 * 64 MiB and a tenth of a second) and salted with the run id. 0,
 * DED_ERR_INVALID_ARG (too short, or suspect) or DED_ERR_NOMEM.
 */
DED_UNUSED_RESULT int ded_swarm_key_derive(const char *text, size_t len,
                                           const uint8_t run_id[DED_RUN_ID_BYTES],
                                           uint8_t psk[DED_SWARM_KEY_BYTES]);

/* Zeroes |len| bytes in a way the compiler cannot elide. */
void ded_wipe(void *p, size_t len);

#endif /* DED_IDENT_H */
