/*
 * test_chan.c: crypto/ded_chan, the secure channel on a byte stream.
 *
 * Two channels pumped into each other open, with each other's keys, and
 * carry a stream intact in any cut; the wire carries none of it in the
 * clear. A peer with another secret (told so by a notice, and nothing
 * else), a peer other than the one called, a
 * stream of another protocol or version (at its first wrong byte), a record changed, replayed,
 * dropped or of impossible length: each closes the channel with the right
 * code, and nothing of it reaches the caller.
 */
#include "unit_util.h"

#include "crypto/ded_chan.h"

#define NOW_NS 1000000000ull

typedef struct side {
  ded_chan ch;
  bool opened;
  uint8_t peer_pk[DED_PK_BYTES];
  uint8_t *got; /* plaintext received */
  size_t ngot;
} side;

typedef struct link {
  ded_ident a_id, b_id; /* a calls b */
  side a, b;
} link;

static bool on_open(void *user, const uint8_t pk[DED_PK_BYTES]) {
  side *s = user;
  assert_false(s->opened);
  assert_int_equal(s->ngot, 0);
  s->opened = true;
  memcpy(s->peer_pk, pk, DED_PK_BYTES);
  return true;
}

static bool on_plain(void *user, const uint8_t *p, size_t len) {
  side *s = user;
  assert_true(s->opened);
  s->got = realloc(s->got, s->ngot + len);
  assert_non_null(s->got);
  memcpy(s->got + s->ngot, p, len);
  s->ngot += len;
  return true;
}

static const ded_chan_cb cb = {on_open, on_plain};

static const uint8_t eph_a[32] = {7, 7, 7};
static const uint8_t eph_b[32] = {9, 9, 9};

/* |a| (secret |psk_a|, expecting |expect| or anyone) calls |b| (psk_b). */
static void link_init(link *l, const uint8_t *psk_a, const uint8_t *psk_b, const uint8_t *expect) {
  memset(l, 0, sizeof *l);
  uint8_t run[DED_RUN_ID_BYTES];
  unit_run_id(run);
  unit_ident(&l->a_id, 0x31);
  unit_ident(&l->b_id, 0x32);
  assert_int_equal(ded_chan_init(&l->a.ch, NULL, &l->a_id, psk_a, run, true, expect, eph_a, NOW_NS), 0);
  assert_int_equal(ded_chan_init(&l->b.ch, NULL, &l->b_id, psk_b, run, false, NULL, eph_b, NOW_NS), 0);
}

static void link_free(link *l) {
  ded_chan_free(&l->a.ch);
  ded_chan_free(&l->b.ch);
  free(l->a.got);
  free(l->b.got);
}

/* Moves |from|'s output into |to|, |cut| bytes at a time (0: at once).
 * Returns ded_chan_recv's first error, or 0. Appends what moved to
 * |wire| if given. */
static int pump(side *from, side *to, size_t cut, uint8_t **wire, size_t *nwire) {
  const uint8_t *p;
  size_t len;
  while ((len = ded_chan_out(&from->ch, &p)) > 0) {
    size_t n = cut && cut < len ? cut : len;
    if (wire) {
      *wire = realloc(*wire, *nwire + n);
      memcpy(*wire + *nwire, p, n);
      *nwire += n;
    }
    uint8_t tmp[2 * (DED_CHAN_HDR_BYTES + DED_CHAN_SEALED_MAX)];
    assert_true(n <= sizeof tmp);
    memcpy(tmp, p, n); /* |p| may move once consumed */
    ded_chan_out_done(&from->ch, n);
    int rv = ded_chan_recv(&to->ch, tmp, n, &cb, to);
    if (rv) return rv;
  }
  return 0;
}

/* The handshake, to the end; both open with the other's key. */
static void link_open(link *l, size_t cut) {
  assert_int_equal(pump(&l->a, &l->b, cut, NULL, NULL), 0); /* initiation */
  assert_int_equal(pump(&l->b, &l->a, cut, NULL, NULL), 0); /* response */
  assert_true(l->a.opened);
  assert_int_equal(pump(&l->a, &l->b, cut, NULL, NULL), 0); /* final */
  assert_true(l->b.opened);
  assert_memory_equal(l->a.peer_pk, l->b_id.pk, DED_PK_BYTES);
  assert_memory_equal(l->b.peer_pk, l->a_id.pk, DED_PK_BYTES);
}

/* Seals all of |msg| from |s| in pieces of at most |piece| bytes (a
 * whole record's worth as one iov, sealed in place; less as two). */
static void send_all(side *s, const uint8_t *msg, size_t len, size_t piece, uint64_t now_ns) {
  size_t off = 0;
  while (off < len) {
    size_t n = len - off < piece ? len - off : piece;
    ded_iov iov[2] = {{msg + off, n / 2}, {msg + off + n / 2, n - n / 2}};
    if (n >= DED_CHAN_RECORD_MAX) iov[0].len = n;
    assert_true(ded_chan_can_seal(&s->ch));
    size_t took = ded_chan_seal(&s->ch, iov, n >= DED_CHAN_RECORD_MAX ? 1 : 2, now_ns);
    assert_true(took > 0 && took <= n);
    off += took;
  }
}

static uint8_t *pattern(size_t len, uint8_t seed) {
  uint8_t *m = malloc(len);
  for (size_t i = 0; i < len; i++) m[i] = (uint8_t)(seed + i * 131 + (i >> 9));
  return m;
}

static bool contains(const uint8_t *hay, size_t n, const uint8_t *needle, size_t k) {
  for (size_t i = 0; i + k <= n; i++)
    if (memcmp(hay + i, needle, k) == 0) return true;
  return false;
}

static void test_chan_carries_stream(void **state) {
  (void)state;
  static const size_t cuts[] = {0, 1, 7, 4096};
  uint8_t psk[DED_NOISE_PSK_BYTES];
  memset(psk, 0x5a, sizeof psk);
  for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
    ded_ident b; /* the one a calls */
    unit_ident(&b, 0x32);
    link l;
    link_init(&l, psk, psk, b.id);
    link_open(&l, cuts[c]);
    size_t len = 3 * DED_CHAN_RECORD_MAX + 1234;
    uint8_t *msg = pattern(len, (uint8_t)c);
    uint8_t *wire = NULL;
    size_t nwire = 0;
    size_t off = 0;
    while (off < len) { /* the output holds a few records at a time */
      size_t n = len - off < DED_CHAN_RECORD_MAX ? len - off : DED_CHAN_RECORD_MAX;
      send_all(&l.a, msg + off, n, c % 2 ? 5000 : DED_CHAN_RECORD_MAX, NOW_NS);
      off += n;
      assert_int_equal(pump(&l.a, &l.b, cuts[c], &wire, &nwire), 0);
    }
    assert_int_equal(l.b.ngot, len);
    assert_memory_equal(l.b.got, msg, len);
    /* No 16-byte run of the stream appears on the wire. */
    for (size_t i = 0; i + 16 <= len; i += 997) assert_false(contains(wire, nwire, msg + i, 16));
    /* And back the other way. */
    send_all(&l.b, msg, 1000, 1000, NOW_NS);
    assert_int_equal(pump(&l.b, &l.a, cuts[c], NULL, NULL), 0);
    assert_int_equal(l.a.ngot, 1000);
    assert_memory_equal(l.a.got, msg, 1000);
    free(wire);
    free(msg);
    link_free(&l);
  }
}

/* Another secret: the responder refuses, and its only answer is the
 * notice (no response: nothing learnt), which the initiator, fed it whole
 * or a byte at a time, reads as "refused our key". */
static void test_chan_wrong_secret(void **state) {
  (void)state;
  uint8_t psk[DED_NOISE_PSK_BYTES], other[DED_NOISE_PSK_BYTES];
  memset(psk, 0x5a, sizeof psk);
  memset(other, 0x5b, sizeof other);
  const uint8_t *pairs[][2] = {{psk, other}, {NULL, psk}, {psk, NULL}};
  for (size_t i = 0; i < 6; i++) {
    link l;
    link_init(&l, pairs[i % 3][0], pairs[i % 3][1], NULL);
    assert_int_equal(pump(&l.a, &l.b, 0, NULL, NULL), DED_ERR_AUTH);
    assert_false(l.b.opened);
    assert_string_equal(l.b.ch.why, "handshake refused: another swarm key or run name");
    const uint8_t *p;
    assert_int_equal(ded_chan_out(&l.b.ch, &p), DED_CHAN_NOTICE_BYTES);
    assert_memory_equal(p, "dedmpi\x00\xff" "K", DED_CHAN_NOTICE_BYTES);
    assert_false(ded_chan_can_seal(&l.b.ch));
    assert_int_equal(pump(&l.b, &l.a, i < 3 ? 0 : 1, NULL, NULL), DED_ERR_AUTH);
    assert_false(l.a.opened);
    assert_int_equal(l.a.ch.notice, DED_CHAN_NOTICE_KEY);
    assert_string_equal(l.a.ch.why, "refused our key: another swarm key or run name");
    assert_int_equal(ded_chan_out(&l.a.ch, &p), 0); /* no final: our identity stays ours */
    link_free(&l);
  }
}

/* Each notice an initiator can get, in the response's place: its code and
 * reason; a notice with a reason it does not know is a protocol error; a
 * response that only starts like a notice is not one. */
static void test_chan_notices(void **state) {
  (void)state;
  static const struct {
    uint8_t reason;
    int rv;
    const char *why;
  } cases[] = {
      {DED_CHAN_NOTICE_KEY, DED_ERR_AUTH, "refused our key"},
      {DED_CHAN_NOTICE_VERSION, DED_ERR_VERSION, "another protocol version"},
      {DED_CHAN_NOTICE_FULL, DED_ERR_LIMIT, "no room"},
      {DED_CHAN_NOTICE_LEAVING, DED_ERR_PEER_LOST, "leaving"},
      {'?', DED_ERR_PROTO, "a reason we do not know"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    link l;
    link_init(&l, NULL, NULL, NULL);
    uint8_t notice[DED_CHAN_NOTICE_BYTES];
    ded_chan_notice_bytes(cases[i].reason, notice);
    assert_int_equal(ded_chan_recv(&l.a.ch, notice, 4, &cb, &l.a), 0);
    assert_int_equal(ded_chan_recv(&l.a.ch, notice + 4, sizeof notice - 4, &cb, &l.a), cases[i].rv);
    assert_non_null(strstr(l.a.ch.why, cases[i].why));
    assert_int_equal(l.a.ch.notice, cases[i].rv == DED_ERR_PROTO ? 0 : cases[i].reason);
    assert_false(l.a.opened);
    link_free(&l);
  }
  /* A responder only ever reads an initiation: a notice sent to it is not one. */
  link l;
  link_init(&l, NULL, NULL, NULL);
  uint8_t notice[DED_CHAN_MAGIC_BYTES + DED_NOISE_INITIATION_BYTES];
  memset(notice, 0, sizeof notice);
  ded_chan_notice_bytes(DED_CHAN_NOTICE_KEY, notice);
  assert_int_equal(ded_chan_recv(&l.b.ch, notice, sizeof notice, &cb, &l.b), DED_ERR_VERSION);
  assert_int_equal(l.b.ch.notice, 0);
  link_free(&l);
  /* The prefix's first 8 bytes alone (a response that starts like it)
   * wait for more; the 9th makes it a notice, whatever it is. */
  link_init(&l, NULL, NULL, NULL);
  ded_chan_notice_bytes(DED_CHAN_NOTICE_KEY, notice);
  assert_int_equal(ded_chan_recv(&l.a.ch, notice, DED_CHAN_NOTICE_BYTES - 1, &cb, &l.a), 0);
  link_free(&l);
}

static void test_chan_unexpected_peer(void **state) {
  (void)state;
  ded_ident c;
  unit_ident(&c, 0x33);
  link l;
  link_init(&l, NULL, NULL, c.id); /* a calls c's id; b answers */
  assert_int_equal(pump(&l.a, &l.b, 0, NULL, NULL), 0);
  assert_int_equal(pump(&l.b, &l.a, 0, NULL, NULL), DED_ERR_AUTH);
  assert_false(l.a.opened);
  const uint8_t *p;
  assert_int_equal(ded_chan_out(&l.a.ch, &p), 0); /* a's final (its identity) never leaves */
  link_free(&l);
}

static void test_chan_not_dedmpi(void **state) {
  (void)state;
  link l;
  link_init(&l, NULL, NULL, NULL);
  uint8_t junk[DED_CHAN_MAGIC_BYTES + DED_NOISE_INITIATION_BYTES];
  memset(junk, 'G', sizeof junk);
  assert_int_equal(ded_chan_recv(&l.b.ch, junk, sizeof junk, &cb, &l.b), DED_ERR_PROTO);
  link_free(&l);
  link_init(&l, NULL, NULL, NULL);
  const uint8_t *p;
  size_t n = ded_chan_out(&l.a.ch, &p);
  assert_int_equal(n, sizeof junk);
  memcpy(junk, p, n);
  junk[DED_CHAN_MAGIC_BYTES - 1] = 7; /* a version 7 peer */
  assert_int_equal(ded_chan_recv(&l.b.ch, junk, sizeof junk, &cb, &l.b), DED_ERR_VERSION);
  /* Broken stays broken. */
  assert_int_equal(ded_chan_recv(&l.b.ch, junk, 1, &cb, &l.b), DED_ERR_VERSION);
  /* It is told why; not a dedmpi peer is told nothing. */
  assert_int_equal(pump(&l.b, &l.a, 0, NULL, NULL), DED_ERR_VERSION);
  assert_int_equal(l.a.ch.notice, DED_CHAN_NOTICE_VERSION);
  link_free(&l);
  link_init(&l, NULL, NULL, NULL);
  memset(junk, 'G', sizeof junk);
  assert_int_equal(ded_chan_recv(&l.b.ch, junk, sizeof junk, &cb, &l.b), DED_ERR_PROTO);
  assert_int_equal(ded_chan_out(&l.b.ch, &p), 0);
  link_free(&l);
  /* Refused at the first byte that is not the magic, not when a whole
   * initiation's worth came: a short request ("GET / HTTP/1.1...") or one
   * junk byte does not hold the connection open. */
  link_init(&l, NULL, NULL, NULL);
  assert_int_equal(ded_chan_recv(&l.b.ch, (const uint8_t *)"G", 1, &cb, &l.b), DED_ERR_PROTO);
  link_free(&l);
  link_init(&l, NULL, NULL, NULL);
  assert_int_equal(ded_chan_recv(&l.b.ch, (const uint8_t *)"ded", 3, &cb, &l.b), 0);
  assert_int_equal(ded_chan_recv(&l.b.ch, (const uint8_t *)"x", 1, &cb, &l.b), DED_ERR_PROTO);
  link_free(&l);
  link_init(&l, NULL, NULL, NULL);
  assert_int_equal(ded_chan_recv(&l.b.ch, (const uint8_t *)"dedmpi\0\7", 8, &cb, &l.b),
                   DED_ERR_VERSION);
  link_free(&l);
  /* The genuine magic byte by byte, then the initiation: it opens. */
  link_init(&l, NULL, NULL, NULL);
  n = ded_chan_out(&l.a.ch, &p);
  for (size_t i = 0; i < n; i++)
    assert_int_equal(ded_chan_recv(&l.b.ch, p + i, 1, &cb, &l.b), 0);
  ded_chan_out_done(&l.a.ch, n);
  link_open(&l, 1);
  assert_true(l.a.opened && l.b.opened);
  link_free(&l);
}

/* One record from a to b, captured; |l| is open. */
static size_t capture_record(link *l, uint8_t *rec, const uint8_t *msg, size_t len) {
  send_all(&l->a, msg, len, len, NOW_NS);
  const uint8_t *p;
  size_t n = ded_chan_out(&l->a.ch, &p);
  memcpy(rec, p, n);
  ded_chan_out_done(&l->a.ch, n);
  return n;
}

static void test_chan_tamper_replay_drop(void **state) {
  (void)state;
  uint8_t msg[300], rec[400], rec2[400];
  for (size_t i = 0; i < sizeof msg; i++) msg[i] = (uint8_t)i;
  /* Every bit of a record flipped: refused, nothing delivered. */
  for (size_t bit = 0; bit < (DED_CHAN_HDR_BYTES + sizeof msg + DED_AEAD_TAG_BYTES) * 8;
       bit += bit == 30 ? 1 : 3) { /* every third, and bit 31: the rekey flag */
    link l;
    link_init(&l, NULL, NULL, NULL);
    link_open(&l, 0);
    size_t n = capture_record(&l, rec, msg, sizeof msg);
    rec[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    int rv = ded_chan_recv(&l.b.ch, rec, n, &cb, &l.b);
    /* A changed length either is impossible or leaves the record short
     * (nothing yet), else it fails to open. */
    if (bit < 32 && rv == 0)
      assert_int_equal(l.b.ngot, 0);
    else
      assert_true(rv == DED_ERR_AUTH || rv == DED_ERR_FRAME_SIZE);
    assert_int_equal(l.b.ngot, 0);
    link_free(&l);
  }
  /* Replayed, and dropped: the counter does not match. */
  link l;
  link_init(&l, NULL, NULL, NULL);
  link_open(&l, 0);
  size_t n = capture_record(&l, rec, msg, sizeof msg);
  size_t n2 = capture_record(&l, rec2, msg, 10);
  assert_int_equal(ded_chan_recv(&l.b.ch, rec, n, &cb, &l.b), 0);
  assert_int_equal(l.b.ngot, sizeof msg);
  assert_int_equal(ded_chan_recv(&l.b.ch, rec, n, &cb, &l.b), DED_ERR_AUTH); /* replay */
  assert_int_equal(l.b.ngot, sizeof msg);
  link_free(&l);
  link_init(&l, NULL, NULL, NULL);
  link_open(&l, 0);
  n = capture_record(&l, rec, msg, sizeof msg);
  n2 = capture_record(&l, rec2, msg, 10);
  assert_int_equal(ded_chan_recv(&l.b.ch, rec2, n2, &cb, &l.b), DED_ERR_AUTH); /* first dropped */
  assert_int_equal(l.b.ngot, 0);
  link_free(&l);
}

static void test_chan_impossible_length(void **state) {
  (void)state;
  static const uint32_t lens[] = {0, DED_AEAD_TAG_BYTES, DED_CHAN_SEALED_MAX + 1, 0x7fffffff};
  for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
    link l;
    link_init(&l, NULL, NULL, NULL);
    link_open(&l, 0);
    uint8_t hdr[4] = {(uint8_t)lens[i], (uint8_t)(lens[i] >> 8), (uint8_t)(lens[i] >> 16),
                      (uint8_t)(lens[i] >> 24)};
    assert_int_equal(ded_chan_recv(&l.b.ch, hdr, 4, &cb, &l.b), DED_ERR_FRAME_SIZE);
    link_free(&l);
  }
}

static void test_chan_rekeys(void **state) {
  (void)state;
  link l;
  link_init(&l, NULL, NULL, NULL);
  link_open(&l, 0);
  uint8_t msg[100];
  memset(msg, 0xab, sizeof msg);
  /* Past the time bound the sender rotates and flags the record. */
  uint64_t later = NOW_NS + DED_AEAD_REKEY_NS + 1;
  uint8_t key_before[DED_AEAD_KEY_BYTES];
  memcpy(key_before, l.a.ch.tx.key, sizeof key_before);
  for (int i = 0; i < 3; i++) {
    send_all(&l.a, msg, sizeof msg, sizeof msg, i == 1 ? later : NOW_NS);
    const uint8_t *p;
    ded_chan_out(&l.a.ch, &p);
    uint32_t hdr = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    assert_int_equal((hdr & DED_CHAN_F_REKEY) != 0, i == 1);
    assert_int_equal(pump(&l.a, &l.b, 0, NULL, NULL), 0);
  }
  assert_memory_not_equal(l.a.ch.tx.key, key_before, sizeof key_before);
  assert_int_equal(l.b.ngot, 3 * sizeof msg);
  link_free(&l);
}

/* The output drained a few bytes at a time while more is sealed: the
 * unsent rest moves to the front and the stream stays whole. */
static void test_chan_partial_writes(void **state) {
  (void)state;
  link l;
  link_init(&l, NULL, NULL, NULL);
  link_open(&l, 0);
  size_t len = 5 * DED_CHAN_RECORD_MAX + 77, off = 0;
  uint8_t *msg = pattern(len, 3);
  while (off < len || ded_chan_out(&l.a.ch, &(const uint8_t *){NULL}) > 0) {
    while (off < len && ded_chan_can_seal(&l.a.ch)) {
      ded_iov iov = {msg + off, len - off};
      off += ded_chan_seal(&l.a.ch, &iov, 1, NOW_NS);
    }
    const uint8_t *p;
    size_t n = ded_chan_out(&l.a.ch, &p);
    n = n < 6000 ? n : 6000; /* a short write */
    uint8_t tmp[6000];
    memcpy(tmp, p, n);
    ded_chan_out_done(&l.a.ch, n);
    assert_int_equal(ded_chan_recv(&l.b.ch, tmp, n, &cb, &l.b), 0);
  }
  assert_int_equal(l.b.ngot, len);
  assert_memory_equal(l.b.got, msg, len);
  free(msg);
  link_free(&l);
}

static bool stop_plain(void *user, const uint8_t *p, size_t len) {
  side *s = user;
  (void)p;
  s->ngot += len;
  return false;
}

/* A callback that says stop: nothing more is delivered, then or later. */
static void test_chan_stop(void **state) {
  (void)state;
  link l;
  link_init(&l, NULL, NULL, NULL);
  link_open(&l, 0);
  uint8_t msg[100] = {1};
  send_all(&l.a, msg, sizeof msg, 60, NOW_NS); /* two records */
  const uint8_t *p;
  size_t n = ded_chan_out(&l.a.ch, &p);
  uint8_t tmp[512];
  memcpy(tmp, p, n);
  ded_chan_out_done(&l.a.ch, n);
  static const ded_chan_cb stopper = {on_open, stop_plain};
  assert_int_equal(ded_chan_recv(&l.b.ch, tmp, n, &stopper, &l.b), 0);
  assert_int_equal(l.b.ngot, 60); /* the first record only */
  assert_int_equal(ded_chan_recv(&l.b.ch, tmp, n, &cb, &l.b), DED_ERR_CLOSING);
  assert_int_equal(l.b.ngot, 60);
  assert_false(ded_chan_can_seal(&l.b.ch));
  link_free(&l);
}

int main(void) {
  assert_int_equal(ded_crypto_init(), 0);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_chan_carries_stream),
      cmocka_unit_test(test_chan_wrong_secret),
      cmocka_unit_test(test_chan_notices),
      cmocka_unit_test(test_chan_unexpected_peer),
      cmocka_unit_test(test_chan_not_dedmpi),
      cmocka_unit_test(test_chan_tamper_replay_drop),
      cmocka_unit_test(test_chan_impossible_length),
      cmocka_unit_test(test_chan_rekeys),
      cmocka_unit_test(test_chan_partial_writes),
      cmocka_unit_test(test_chan_stop),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
