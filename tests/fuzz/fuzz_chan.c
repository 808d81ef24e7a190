/*
 * fuzz_chan.c: the byte stream of a connection before the node sees it:
 * the handshake's messages on the wire, then sealed records.
 *
 * Input: see fuzz.h (FUZZ_CHAN_*). Whatever the bytes, the channel
 * answers 0 or one of the codes a peer can cause (a notice's among them,
 * only where the response belongs), a failure is sticky,
 * nothing reaches the caller before the channel opened, it opens at most
 * once, and no more plaintext comes out than bytes went in.
 */
#include <string.h>

#include "fuzz.h"

#include "core/ded_err.h"
#include "fuzz_chan_world.h"

typedef struct seen {
  int opens;
  size_t plain;
} seen;

static bool on_open(void *u, const uint8_t pk[DED_PK_BYTES]) {
  (void)pk;
  ((seen *)u)->opens++;
  return true;
}

static bool on_plain(void *u, const uint8_t *p, size_t n) {
  seen *s = u;
  (void)p;
  FUZZ_CHECK(s->opens == 1);
  s->plain += n;
  return true;
}

static const fuzz_chan_world *world_get(void) {
  static fuzz_chan_world w;
  static int ready;
  if (!ready) {
    fuzz_chan_world_build(&w);
    ready = 1;
  }
  return &w;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  const fuzz_chan_world *w = world_get();
  unsigned sel = data[0] % 3;
  size_t cut = data[1];
  data += 2;
  size -= 2;
  ded_chan a, b, *to;
  seen s = {0, 0};
  if (sel == 2) {
    fuzz_chan_open_pair(w, &a, &b);
    s.opens = 1;
  } else {
    fuzz_chan_fresh(w, &a, &b);
  }
  to = sel == 1 ? &a : &b;
  static const ded_chan_cb cb = {on_open, on_plain};
  int failed = 0;
  size_t fed = 0;
  while (fed < size) {
    size_t n = cut && cut < size - fed ? cut : size - fed;
    int rv = ded_chan_recv(to, data + fed, n, &cb, &s);
    fed += n;
    FUZZ_CHECK(rv == 0 || rv == DED_ERR_AUTH || rv == DED_ERR_VERSION || rv == DED_ERR_PROTO ||
               rv == DED_ERR_FRAME_SIZE || rv == DED_ERR_LIMIT || rv == DED_ERR_PEER_LOST);
    /* Only an initiator awaiting the response reads a notice, and only a
     * notice fails it as full or leaving. */
    FUZZ_CHECK(!to->notice || (sel == 1 && rv));
    FUZZ_CHECK((rv != DED_ERR_LIMIT && rv != DED_ERR_PEER_LOST) || to->notice);
    FUZZ_CHECK(!failed || rv == failed); /* broken stays broken */
    if (rv) failed = rv;
    FUZZ_CHECK(s.opens <= 1);
    FUZZ_CHECK(s.plain <= fed);
  }
  if (failed) FUZZ_CHECK(!ded_chan_can_seal(to));
  ded_chan_free(&a);
  ded_chan_free(&b);
  return 0;
}
