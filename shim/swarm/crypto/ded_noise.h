/*
 * ded_noise.h: the handshake that opens every connection, and the keys it
 * leaves for the session.
 *
 * Noise XXpsk0 over libsodium (X25519, ChaCha20-Poly1305, BLAKE2b), written
 * like WireGuard's noise.c: one create and one consume function per message,
 * each consume working in local copies and committing to the handshake
 * state only once every check passed, secrets wiped on every way out.
 *
 *   prologue: "dedmpi noise v1" || run id
 *   -> psk, e                 initiation   e, {}, mac1
 *   <- e, ee, s, es           response     e, {s}, {caps}
 *   -> s, se                  final        {s}, {caps}
 *
 * psk is the run's secret (DEDMPI_SWARM_KEY), all zeros when the run has
 * none. It enters the chaining key before anything else, so a peer without
 * it cannot read the responder's identity in the response nor produce a
 * final the responder accepts, and mac1 (a MAC of the initiation under a
 * key from the psk and the run id) lets the responder turn such a peer
 * away before any Diffie-Hellman. A static key "s" is the peer's Ed25519
 * public key (its id is the hash of it); the Diffie-Hellman uses its
 * X25519 form, so only the holder of the secret key completes "es" or
 * "se". Both sides end knowing each other's Ed25519 key, authenticated.
 *
 * What it does not do, so the caller must:
 * - The psk must be 32 random bytes: the initiation (mac1 and its tag
 *   depend only on the psk, the run id and the public e) lets anyone who
 *   captures one test guesses offline. A passphrase must be stretched
 *   (crypto_pwhash) before it becomes the psk.
 * - A captured initiation replays with a valid mac1; each replay costs
 *   the responder its response (three X25519 operations) and gains the
 *   sender nothing, since it lacks e's secret. Bound handshakes in flight.
 * - An initiator finishes with whoever holds the psk and answers: before
 *   create_final it must compare ded_noise_peer_pk with the peer it meant
 *   to call (its record), or it tells an impostor its identity.
 * - Ed25519 keys A and -A have one X25519 form, so a key pair can present
 *   two public keys (two peer ids); only the holder of the secret key can.
 *
 * Sans-I/O: the caller supplies the ephemeral keys' 32 random bytes.
 * ded_crypto_init must have run (init asks libsodium about AES).
 */
#ifndef DED_NOISE_H
#define DED_NOISE_H

#include <stdbool.h>
#include <stdint.h>

#include "../core/ded_assert.h"
#include "../core/ded_types.h"
#include "ded_ident.h"

#define DED_NOISE_KEY_BYTES 32
#define DED_NOISE_TAG_BYTES 16
#define DED_NOISE_PSK_BYTES 32
#define DED_NOISE_MAC1_BYTES 16
/* e, AEAD of nothing, mac1. */
#define DED_NOISE_INITIATION_BYTES (32 + DED_NOISE_TAG_BYTES + DED_NOISE_MAC1_BYTES)
/* e, AEAD of s, AEAD of the caps byte. */
#define DED_NOISE_RESPONSE_BYTES (32 + DED_PK_BYTES + 1 + 2 * DED_NOISE_TAG_BYTES)
/* AEAD of s, AEAD of the caps byte. */
#define DED_NOISE_FINAL_BYTES (DED_PK_BYTES + 1 + 2 * DED_NOISE_TAG_BYTES)

/* Caps: what a side's machine can do, sent encrypted in the response and
 * the final. The session uses AES-256-GCM when both have it in hardware
 * (libsodium has no software AES), XChaCha20-Poly1305 otherwise. */
#define DED_NOISE_CAP_AES256GCM 0x01

/* What happened last, so what may come next. */
typedef enum ded_noise_state {
  DED_NOISE_ZEROED,               /* initialised, nothing sent or heard */
  DED_NOISE_CREATED_INITIATION,   /* initiator: awaiting the response */
  DED_NOISE_CONSUMED_INITIATION,  /* responder: the response is due */
  DED_NOISE_CREATED_RESPONSE,     /* responder: awaiting the final */
  DED_NOISE_CONSUMED_RESPONSE,    /* initiator: the final is due */
  DED_NOISE_ESTABLISHED,          /* both sides hold the session keys */
  DED_NOISE_FAILED,               /* wiped: a create failed, or the caller gave up */
} ded_noise_state;

typedef struct ded_noise {
  ded_noise_state state;
  bool initiator;
  const ded_ident *self;
  uint8_t psk[DED_NOISE_PSK_BYTES];
  uint8_t mac1_key[32];
  uint8_t h[32];  /* transcript hash */
  uint8_t ck[32]; /* chaining key */
  uint8_t k[DED_NOISE_KEY_BYTES]; /* the current handshake key */
  uint64_t n;                     /* its next nonce */
  uint8_t caps, rcaps;            /* ours (set by init), the peer's */
  uint8_t e_sk[32], e_pk[32]; /* our ephemeral X25519 pair */
  uint8_t re[32];             /* the peer's ephemeral */
  uint8_t rs[DED_PK_BYTES];   /* the peer's Ed25519 key, once heard */
} ded_noise;

/* The session a handshake leaves: a key per direction, the cipher, and
 * who the peer is. */
typedef struct ded_noise_keys {
  uint8_t send[DED_NOISE_KEY_BYTES];
  uint8_t recv[DED_NOISE_KEY_BYTES];
  bool aes256gcm; /* else XChaCha20-Poly1305 */
  uint8_t peer_pk[DED_PK_BYTES];
} ded_noise_keys;

/* Starts a handshake as |initiator| (we called) or responder, for the run
 * |run_id| with secret |psk| (NULL: the run has none). |self| must outlive
 * the handshake. Our caps are this machine's (a test may change hs->caps
 * before the first message). */
void ded_noise_init(ded_noise *hs, const ded_ident *self, const uint8_t *psk,
                    const uint8_t run_id[DED_RUN_ID_BYTES], bool initiator);

/* Initiator. |eph| is 32 random bytes. 0, or DED_ERR_INVALID_ARG when out
 * of turn. */
DED_UNUSED_RESULT int ded_noise_create_initiation(ded_noise *hs, const uint8_t eph[32],
                                                  uint8_t out[DED_NOISE_INITIATION_BYTES]);
/* Responder. 0, or DED_ERR_AUTH (another run or secret, tampered) with
 * the state unchanged, or DED_ERR_INVALID_ARG when out of turn. */
DED_UNUSED_RESULT int ded_noise_consume_initiation(ded_noise *hs,
                                                   const uint8_t in[DED_NOISE_INITIATION_BYTES]);
/* Responder, after a consumed initiation. DED_ERR_AUTH if the peer's e
 * is a low-order point: |hs| is then wiped (DED_NOISE_FAILED). */
DED_UNUSED_RESULT int ded_noise_create_response(ded_noise *hs, const uint8_t eph[32],
                                                uint8_t out[DED_NOISE_RESPONSE_BYTES]);
/* Initiator: 0, DED_ERR_AUTH (state unchanged) or DED_ERR_INVALID_ARG. */
DED_UNUSED_RESULT int ded_noise_consume_response(ded_noise *hs,
                                                 const uint8_t in[DED_NOISE_RESPONSE_BYTES]);
/* Initiator, after a consumed response and a check of ded_noise_peer_pk:
 * the last message. The handshake is then established on our side.
 * DED_ERR_AUTH (wiped) only for a low-order e, which the response's
 * consumption already refused. */
DED_UNUSED_RESULT int ded_noise_create_final(ded_noise *hs, uint8_t out[DED_NOISE_FINAL_BYTES]);
/* Responder: 0 (established), DED_ERR_AUTH (state unchanged) or
 * DED_ERR_INVALID_ARG. */
DED_UNUSED_RESULT int ded_noise_consume_final(ded_noise *hs,
                                              const uint8_t in[DED_NOISE_FINAL_BYTES]);

/* The peer's Ed25519 key once it is proven (after consume_response, or
 * consume_final), else NULL. */
const uint8_t *ded_noise_peer_pk(const ded_noise *hs);

/* An established handshake's session keys and peer; then wipes |hs|.
 * DED_ERR_INVALID_ARG if not established. */
DED_UNUSED_RESULT int ded_noise_split(ded_noise *hs, ded_noise_keys *keys);

/* Wipes every secret of |hs| (a handshake abandoned half way, or a consume
 * refused: those leave |hs| as it was, psk and ephemeral included). */
void ded_noise_wipe(ded_noise *hs);

#endif /* DED_NOISE_H */
