/*
 * fuzz_noise.c: the handshake messages and the sealed frames of a session,
 * the first bytes a stranger sends to a listening peer.
 *
 * Input: see fuzz.h (FUZZ_NOISE_*). Each consume must answer 0 or
 * DED_ERR_AUTH, and a refused message must leave the handshake exactly as
 * it was (commit only after every check); a message that is accepted
 * must lead on to the next one. A sealed frame opens or not, and a refused
 * one does not move the receiver's counter.
 */
#include <string.h>

#include "fuzz.h"

#include "core/ded_err.h"
#include "crypto/ded_aead.h"
#include "crypto/ded_ident.h"
#include "crypto/ded_noise.h"
#include "fuzz_noise_world.h"

static const fuzz_noise_world *world_get(void) {
  static fuzz_noise_world w;
  static int ready;
  if (!ready) {
    fuzz_noise_world_build(&w);
    ready = 1;
  }
  return &w;
}

/* |data| zero-padded or cut to |n| bytes. */
static void fit(uint8_t *out, size_t n, const uint8_t *data, size_t size) {
  memset(out, 0, n);
  memcpy(out, data, size < n ? size : n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const fuzz_noise_world *w = world_get();
  unsigned sel = data[0] % 4;
  data++;
  size--;
  int rv;
  switch (sel) {
  case 0: {
    uint8_t m1[DED_NOISE_INITIATION_BYTES], m2[DED_NOISE_RESPONSE_BYTES];
    fit(m1, sizeof m1, data, size);
    ded_noise r; /* copies by memcpy: padding compares too */
    memcpy(&r, &w->r0, sizeof r);
    rv = ded_noise_consume_initiation(&r, m1);
    FUZZ_CHECK(rv == 0 || rv == DED_ERR_AUTH);
    if (rv) {
      FUZZ_CHECK(memcmp(&r, &w->r0, sizeof r) == 0);
      break;
    }
    rv = ded_noise_create_response(&r, w->eph_r, m2); /* AUTH: e was a low-order point */
    FUZZ_CHECK(rv == 0 || rv == DED_ERR_AUTH);
    ded_noise_wipe(&r);
    break;
  }
  case 1: {
    uint8_t m2[DED_NOISE_RESPONSE_BYTES], m3[DED_NOISE_FINAL_BYTES];
    fit(m2, sizeof m2, data, size);
    ded_noise i;
    memcpy(&i, &w->i1, sizeof i);
    rv = ded_noise_consume_response(&i, m2);
    FUZZ_CHECK(rv == 0 || rv == DED_ERR_AUTH);
    if (rv) {
      FUZZ_CHECK(memcmp(&i, &w->i1, sizeof i) == 0);
      break;
    }
    FUZZ_CHECK(ded_noise_create_final(&i, m3) == 0);
    ded_noise_keys k;
    FUZZ_CHECK(ded_noise_split(&i, &k) == 0);
    break;
  }
  case 2: {
    uint8_t m3[DED_NOISE_FINAL_BYTES];
    fit(m3, sizeof m3, data, size);
    ded_noise r;
    memcpy(&r, &w->r2, sizeof r);
    rv = ded_noise_consume_final(&r, m3);
    FUZZ_CHECK(rv == 0 || rv == DED_ERR_AUTH);
    if (rv) {
      FUZZ_CHECK(memcmp(&r, &w->r2, sizeof r) == 0);
      break;
    }
    ded_noise_keys k;
    FUZZ_CHECK(ded_noise_split(&r, &k) == 0);
    /* Only the genuine initiator gets this far. */
    FUZZ_CHECK(memcmp(k.peer_pk, w->i_id.pk, DED_PK_BYTES) == 0);
    break;
  }
  default: {
    if (size < 4) break;
    ded_aead rx;
    ded_aead_init(&rx, w->kr.recv, false, FUZZ_NOW_NS);
    uint8_t plain[4096];
    size_t len = size - 4 < sizeof plain ? size - 4 : sizeof plain;
    rv = ded_aead_open(&rx, data, 4, data + 4, len, plain);
    FUZZ_CHECK(rv == 0 || rv == DED_ERR_AUTH);
    FUZZ_CHECK(rx.n == (rv == 0 ? 1u : 0u));
    ded_aead_wipe(&rx);
    break;
  }
  }
  return 0;
}
