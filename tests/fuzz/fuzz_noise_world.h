/*
 * fuzz_noise_world.h: the fixed handshake fuzz_noise runs in, built the
 * same way by the target and by gen_corpus.c, so the corpus's genuine
 * messages are genuine to the target (fuzz.h, FUZZ_NOISE_*).
 */
#ifndef DED_FUZZ_NOISE_WORLD_H
#define DED_FUZZ_NOISE_WORLD_H

#include <string.h>

#include "fuzz.h"

#include "crypto/ded_aead.h"
#include "crypto/ded_ident.h"
#include "crypto/ded_noise.h"

typedef struct fuzz_noise_world {
  ded_ident i_id, r_id;
  uint8_t psk[DED_NOISE_PSK_BYTES], run[DED_RUN_ID_BYTES], eph_i[32], eph_r[32];
  ded_noise i0, r0; /* fresh */
  ded_noise i1;     /* initiator, initiation sent */
  ded_noise r2;     /* responder, response sent */
  /* The genuine messages, and the session's keys. */
  uint8_t m1[DED_NOISE_INITIATION_BYTES], m2[DED_NOISE_RESPONSE_BYTES], m3[DED_NOISE_FINAL_BYTES];
  ded_noise_keys ki, kr;
} fuzz_noise_world;

static inline void fuzz_noise_ident(ded_ident *id, uint8_t byte) {
  uint8_t seed[DED_SEED_BYTES];
  memset(seed, byte, sizeof seed);
  ded_ident_from_seed(id, seed);
}

static inline void fuzz_noise_world_build(fuzz_noise_world *w) {
  memset(w, 0, sizeof *w);
  FUZZ_CHECK(ded_crypto_init() == 0);
  fuzz_noise_ident(&w->i_id, FUZZ_NOISE_I_SEED_BYTE);
  fuzz_noise_ident(&w->r_id, FUZZ_NOISE_R_SEED_BYTE);
  memset(w->psk, FUZZ_NOISE_PSK_BYTE, sizeof w->psk);
  memset(w->eph_i, FUZZ_NOISE_EPH_I_BYTE, sizeof w->eph_i);
  memset(w->eph_r, FUZZ_NOISE_EPH_R_BYTE, sizeof w->eph_r);
  ded_hash32(FUZZ_RUN, FUZZ_RUN_LEN, w->run);
  ded_noise_init(&w->i0, &w->i_id, w->psk, w->run, true);
  ded_noise_init(&w->r0, &w->r_id, w->psk, w->run, false);
  w->i0.caps = w->r0.caps = 0; /* the same messages on every machine */
  w->i1 = w->i0;
  ded_noise r = w->r0;
  FUZZ_CHECK(ded_noise_create_initiation(&w->i1, w->eph_i, w->m1) == 0);
  FUZZ_CHECK(ded_noise_consume_initiation(&r, w->m1) == 0);
  FUZZ_CHECK(ded_noise_create_response(&r, w->eph_r, w->m2) == 0);
  w->r2 = r;
  ded_noise i = w->i1;
  FUZZ_CHECK(ded_noise_consume_response(&i, w->m2) == 0);
  FUZZ_CHECK(ded_noise_create_final(&i, w->m3) == 0);
  FUZZ_CHECK(ded_noise_consume_final(&r, w->m3) == 0);
  FUZZ_CHECK(ded_noise_split(&i, &w->ki) == 0 && ded_noise_split(&r, &w->kr) == 0);
}

#endif /* DED_FUZZ_NOISE_WORLD_H */
