/*
 * fuzz_chan_world.h: the fixed channels fuzz_chan feeds, built the same
 * way by the target and by gen_corpus.c, so the corpus's genuine bytes are
 * genuine to the target (fuzz.h, FUZZ_CHAN_*).
 */
#ifndef DED_FUZZ_CHAN_WORLD_H
#define DED_FUZZ_CHAN_WORLD_H

#include <string.h>

#include "fuzz.h"

#include "crypto/ded_chan.h"
#include "crypto/ded_ident.h"

typedef struct fuzz_chan_world {
  ded_ident i_id, r_id;
  uint8_t psk[DED_NOISE_PSK_BYTES], run[DED_RUN_ID_BYTES], eph_i[32], eph_r[32];
} fuzz_chan_world;

static inline void fuzz_chan_world_build(fuzz_chan_world *w) {
  memset(w, 0, sizeof *w);
  FUZZ_CHECK(ded_crypto_init() == 0);
  uint8_t seed[DED_SEED_BYTES];
  memset(seed, FUZZ_NOISE_I_SEED_BYTE, sizeof seed);
  ded_ident_from_seed(&w->i_id, seed);
  memset(seed, FUZZ_NOISE_R_SEED_BYTE, sizeof seed);
  ded_ident_from_seed(&w->r_id, seed);
  memset(w->psk, FUZZ_NOISE_PSK_BYTE, sizeof w->psk);
  memset(w->eph_i, FUZZ_NOISE_EPH_I_BYTE, sizeof w->eph_i);
  memset(w->eph_r, FUZZ_NOISE_EPH_R_BYTE, sizeof w->eph_r);
  ded_hash32(FUZZ_RUN, FUZZ_RUN_LEN, w->run);
}

static inline bool fuzz_chan_noop_open(void *u, const uint8_t pk[DED_PK_BYTES]) {
  (void)u, (void)pk;
  return true;
}
static inline bool fuzz_chan_noop_plain(void *u, const uint8_t *p, size_t n) {
  (void)u, (void)p, (void)n;
  return true;
}

/* The initiator |a| (its initiation queued) and the responder |b|, fresh;
 * XChaCha20-Poly1305 whatever the machine has. */
static inline void fuzz_chan_fresh(const fuzz_chan_world *w, ded_chan *a, ded_chan *b) {
  FUZZ_CHECK(ded_chan_init(a, NULL, &w->i_id, w->psk, w->run, true, w->r_id.id, w->eph_i,
                           FUZZ_NOW_NS) == 0);
  FUZZ_CHECK(ded_chan_init(b, NULL, &w->r_id, w->psk, w->run, false, NULL, w->eph_r,
                           FUZZ_NOW_NS) == 0);
  a->hs.caps = b->hs.caps = 0;
}

/* Moves |from|'s output into |to|; every byte must be taken. */
static inline void fuzz_chan_pump(ded_chan *from, ded_chan *to) {
  static const ded_chan_cb cb = {fuzz_chan_noop_open, fuzz_chan_noop_plain};
  const uint8_t *p;
  size_t n;
  while ((n = ded_chan_out(from, &p)) > 0) {
    FUZZ_CHECK(ded_chan_recv(to, p, n, &cb, NULL) == 0);
    ded_chan_out_done(from, n);
  }
}

/* |a| and |b| of fuzz_chan_fresh, through the handshake: both open. */
static inline void fuzz_chan_open_pair(const fuzz_chan_world *w, ded_chan *a, ded_chan *b) {
  fuzz_chan_fresh(w, a, b);
  fuzz_chan_pump(a, b);
  fuzz_chan_pump(b, a);
  fuzz_chan_pump(a, b);
  FUZZ_CHECK(a->open && b->open);
}

#endif /* DED_FUZZ_CHAN_WORLD_H */
