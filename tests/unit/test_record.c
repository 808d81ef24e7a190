/*
 * test_record.c: dht/ded_record, signed and expiring discovery records.
 *
 * A record must survive encode/decode/verify unchanged, and nothing a
 * forger can do to the bytes may pass: no single flipped bit, no record
 * moved to another run, no replay outside its time window, no signature
 * borrowed from another key. An invitation (dht/ded_invite) checks only
 * for its owner, invitee, run and expiry, survives its text form and the
 * record's extension, and no other text parses.
 */
#include <stdio.h>

#include "unit_util.h"

#include "core/ded_limits.h"
#include "dht/ded_invite.h"
#include "dht/ded_record.h"

#define NOW_MS 1700000000000ull /* a plausible wall clock, Unix ms */

/* Offset of naddr in the encoding: version, mode, flags, pk, run, seq,
 * issued, ttl. */
#define REC_OFF_NADDR (1 + 1 + 2 + DED_PK_BYTES + DED_RUN_ID_BYTES + 8 + 8 + 4)
#define REC_OFF_TTL (REC_OFF_NADDR - 4)
#define REC_ADDR_BYTES (1 + 16 + 2)

static size_t rec_encode(const ded_record *rec, uint8_t *buf) {
  int n = ded_record_encode(rec, buf, DED_RECORD_BYTES_MAX);
  assert_true(n > 0);
  return (size_t)n;
}

static void rec_assert_same(const ded_record *a, const ded_record *b) {
  assert_int_equal(a->mode, b->mode);
  assert_int_equal(a->flags, b->flags);
  assert_memory_equal(a->pk, b->pk, DED_PK_BYTES);
  assert_memory_equal(a->run_id, b->run_id, DED_RUN_ID_BYTES);
  assert_int_equal(a->seq, b->seq);
  assert_int_equal(a->issued_ms, b->issued_ms);
  assert_int_equal(a->ttl_ms, b->ttl_ms);
  assert_int_equal(a->naddr, b->naddr);
  for (unsigned i = 0; i < a->naddr; i++) assert_true(ded_addr_equal(&a->addr[i], &b->addr[i]));
  assert_int_equal(a->ext_len, b->ext_len);
  assert_memory_equal(a->ext, b->ext, a->ext_len);
  assert_memory_equal(a->sig, b->sig, DED_SIG_BYTES);
}

static void test_record_round_trip(void **state) {
  (void)state;
  ded_ident id;
  unit_ident(&id, 1);
  ded_record rec;
  unit_record(&rec, &id, 42, NOW_MS, 300000);
  assert_memory_equal(rec.pk, id.pk, DED_PK_BYTES);
  uint8_t buf[DED_RECORD_BYTES_MAX];
  size_t n = rec_encode(&rec, buf);
  assert_int_equal(n, REC_OFF_NADDR + 1 + 2 * REC_ADDR_BYTES + 2 + 3 + DED_SIG_BYTES);
  ded_record out;
  assert_int_equal(ded_record_decode(buf, n, &out), 0);
  rec_assert_same(&rec, &out);
  uint8_t run_id[DED_RUN_ID_BYTES];
  unit_run_id(run_id);
  assert_int_equal(ded_record_verify(&out, run_id, NOW_MS), 0);
  assert_int_equal(ded_record_expiry_ms(&out), NOW_MS + 300000);
  /* Encoding the decoded record gives the same bytes. */
  uint8_t again[DED_RECORD_BYTES_MAX];
  assert_int_equal(rec_encode(&out, again), n);
  assert_memory_equal(again, buf, n);
}

/* The largest record: every address, every extension byte, every mode. */
static void test_record_largest(void **state) {
  (void)state;
  ded_ident id;
  unit_ident(&id, 2);
  uint8_t run_id[DED_RUN_ID_BYTES];
  unit_run_id(run_id);
  for (uint8_t mode = DED_MODE_NODE; mode <= DED_MODE_AUX; mode++) {
    ded_record rec;
    unit_record(&rec, &id, 1, NOW_MS, DED_RECORD_TTL_MS_MAX);
    rec.mode = mode;
    rec.flags = DED_RECORD_F_NO_ROUNDS;
    rec.naddr = DED_RECORD_ADDRS_MAX;
    for (unsigned i = 0; i < DED_RECORD_ADDRS_MAX; i++) {
      rec.addr[i].family = i % 2 ? 6 : 4;
      rec.addr[i].ip[0] = (uint8_t)(i + 1);
      rec.addr[i].port = (uint16_t)(65535 - i);
    }
    rec.ext_len = DED_RECORD_EXT_MAX; /* entries of an unknown tag fill it */
    for (unsigned i = 0; i < DED_RECORD_EXT_MAX; i++) rec.ext[i] = (uint8_t)i;
    for (unsigned i = 0; i < DED_RECORD_EXT_MAX;) {
      unsigned len = DED_MIN(DED_RECORD_EXT_MAX - i - 2, 255u);
      if (DED_RECORD_EXT_MAX - i - 2 - len == 1) len--; /* no 1-byte tail */
      rec.ext[i] = 0x7f;
      rec.ext[i + 1] = (uint8_t)len;
      i += 2 + len;
    }
    ded_record_sign(&rec, &id);
    uint8_t buf[DED_RECORD_BYTES_MAX];
    size_t n = rec_encode(&rec, buf);
    assert_true(n <= DED_RECORD_BYTES_MAX);
    ded_record out;
    assert_int_equal(ded_record_decode(buf, n, &out), 0);
    rec_assert_same(&rec, &out);
    assert_int_equal(ded_record_verify(&out, run_id, NOW_MS), 0);
  }
}

/* Every single-bit change of the encoding is refused: by the decoder, or
 * by the signature even when the forged fields are otherwise acceptable
 * (the run and the time are taken from the forged record itself, so that
 * only the signature can catch it). */
static void test_record_every_bit_flip(void **state) {
  (void)state;
  ded_ident id;
  unit_ident(&id, 3);
  ded_record rec;
  unit_record(&rec, &id, 7, NOW_MS, 300000);
  uint8_t buf[DED_RECORD_BYTES_MAX];
  size_t n = rec_encode(&rec, buf);
  uint8_t run_id[DED_RUN_ID_BYTES];
  unit_run_id(run_id);
  unsigned decoded = 0;
  for (size_t bit = 0; bit < n * 8; bit++) {
    buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    ded_record out;
    if (ded_record_decode(buf, n, &out) == 0) {
      decoded++;
      assert_int_not_equal(ded_record_verify(&out, run_id, NOW_MS), 0);
      if (ded_record_verify(&out, out.run_id, out.issued_ms) != DED_ERR_SIGNATURE)
        fail_msg("flipping bit %zu gave a record that verifies", bit);
    }
    buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
  }
  /* Most flips decode (keys, ids, addresses, signature): the signature is
   * what refuses them, so this test exercises it. */
  assert_true(decoded > n * 8 / 2);
}

static void test_record_wrong_run(void **state) {
  (void)state;
  ded_ident id;
  unit_ident(&id, 4);
  ded_record rec;
  unit_record(&rec, &id, 1, NOW_MS, 300000);
  uint8_t other[DED_RUN_ID_BYTES];
  ded_hash32("another run", 11, other);
  assert_int_equal(ded_record_verify(&rec, other, NOW_MS), DED_ERR_WRONG_RUN);
  /* Signed for the other run, it verifies there and only there. */
  memcpy(rec.run_id, other, DED_RUN_ID_BYTES);
  ded_record_sign(&rec, &id);
  assert_int_equal(ded_record_verify(&rec, other, NOW_MS), 0);
  uint8_t run_id[DED_RUN_ID_BYTES];
  unit_run_id(run_id);
  assert_int_equal(ded_record_verify(&rec, run_id, NOW_MS), DED_ERR_WRONG_RUN);
}

/* The window is [issued - skew, issued + ttl + skew] on our clock. */
static void test_record_time_window(void **state) {
  (void)state;
  ded_ident id;
  unit_ident(&id, 5);
  uint8_t run_id[DED_RUN_ID_BYTES];
  unit_run_id(run_id);
  const uint32_t ttl = 300000;
  ded_record rec;
  unit_record(&rec, &id, 1, NOW_MS, ttl);
  assert_int_equal(ded_record_verify(&rec, run_id, NOW_MS - DED_CLOCK_SKEW_MS_MAX), 0);
  assert_int_equal(ded_record_verify(&rec, run_id, NOW_MS - DED_CLOCK_SKEW_MS_MAX - 1),
                   DED_ERR_EXPIRED);
  assert_int_equal(ded_record_verify(&rec, run_id, NOW_MS - 86400000), DED_ERR_EXPIRED);
  assert_int_equal(ded_record_verify(&rec, run_id, NOW_MS + ttl + DED_CLOCK_SKEW_MS_MAX), 0);
  assert_int_equal(ded_record_verify(&rec, run_id, NOW_MS + ttl + DED_CLOCK_SKEW_MS_MAX + 1),
                   DED_ERR_EXPIRED);
  assert_int_equal(ded_record_verify(&rec, run_id, NOW_MS + 86400000), DED_ERR_EXPIRED);
  /* Issued at the end of time: refused, without the sum wrapping around. */
  unit_record(&rec, &id, 1, UINT64_MAX - 10, ttl);
  assert_int_equal(ded_record_verify(&rec, run_id, NOW_MS), DED_ERR_EXPIRED);
}

/* A valid signature, but by another key than the one the record names. */
static void test_record_other_keys_signature(void **state) {
  (void)state;
  ded_ident alice, mallory;
  unit_ident(&alice, 6);
  unit_ident(&mallory, 7);
  uint8_t run_id[DED_RUN_ID_BYTES];
  unit_run_id(run_id);
  ded_record rec;
  unit_record(&rec, &mallory, 1, NOW_MS, 300000);
  assert_int_equal(ded_record_verify(&rec, run_id, NOW_MS), 0);
  memcpy(rec.pk, alice.pk, DED_PK_BYTES);
  assert_int_equal(ded_record_verify(&rec, run_id, NOW_MS), DED_ERR_SIGNATURE);
  /* Also through the wire: encode, decode, verify. */
  uint8_t buf[DED_RECORD_BYTES_MAX];
  size_t n = rec_encode(&rec, buf);
  ded_record out;
  assert_int_equal(ded_record_decode(buf, n, &out), 0);
  assert_int_equal(ded_record_verify(&out, run_id, NOW_MS), DED_ERR_SIGNATURE);
  /* And Alice's own signature on Mallory's address is not hers either. */
  ded_record a;
  unit_record(&a, &alice, 1, NOW_MS, 300000);
  a.addr[0].port = 6666;
  assert_int_equal(ded_record_verify(&a, run_id, NOW_MS), DED_ERR_SIGNATURE);
}

/* Fields the encoder writes as given but the decoder must refuse. */
static void test_record_decode_invalid_fields(void **state) {
  (void)state;
  ded_ident id;
  unit_ident(&id, 8);
  uint8_t buf[DED_RECORD_BYTES_MAX];
  ded_record rec, out;
  const uint8_t families[] = {0, 1, 5, 7, 255};
  for (size_t i = 0; i < sizeof families; i++) {
    unit_record(&rec, &id, 1, NOW_MS, 300000);
    rec.addr[1].family = families[i];
    assert_int_equal(ded_record_decode(buf, rec_encode(&rec, buf), &out), DED_ERR_PROTO);
  }
  unit_record(&rec, &id, 1, NOW_MS, 300000);
  rec.addr[0].port = 0;
  assert_int_equal(ded_record_decode(buf, rec_encode(&rec, buf), &out), DED_ERR_PROTO);
  unit_record(&rec, &id, 1, NOW_MS, 0);
  assert_int_equal(ded_record_decode(buf, rec_encode(&rec, buf), &out), DED_ERR_PROTO);
  unit_record(&rec, &id, 1, NOW_MS, DED_RECORD_TTL_MS_MAX + 1);
  assert_int_equal(ded_record_decode(buf, rec_encode(&rec, buf), &out), DED_ERR_PROTO);
  unit_record(&rec, &id, 1, NOW_MS, UINT32_MAX);
  assert_int_equal(ded_record_decode(buf, rec_encode(&rec, buf), &out), DED_ERR_PROTO);
  unit_record(&rec, &id, 1, NOW_MS, 1);
  assert_int_equal(ded_record_decode(buf, rec_encode(&rec, buf), &out), 0);
  unit_record(&rec, &id, 1, NOW_MS, 300000);
  rec.mode = DED_MODE_AUX + 1;
  assert_int_equal(ded_record_decode(buf, rec_encode(&rec, buf), &out), DED_ERR_PROTO);
  /* Version. */
  unit_record(&rec, &id, 1, NOW_MS, 300000);
  size_t n = rec_encode(&rec, buf);
  buf[0] = DED_RECORD_VERSION + 1;
  assert_int_equal(ded_record_decode(buf, n, &out), DED_ERR_PROTO);
}

/* Counts the encoder will not even write, patched into the bytes. */
static void test_record_decode_bad_counts(void **state) {
  (void)state;
  ded_ident id;
  unit_ident(&id, 9);
  ded_record rec, out;
  unit_record(&rec, &id, 1, NOW_MS, 300000);
  rec.naddr = DED_RECORD_ADDRS_MAX;
  for (unsigned i = 0; i < DED_RECORD_ADDRS_MAX; i++) {
    rec.addr[i].family = 4;
    rec.addr[i].port = (uint16_t)(1000 + i);
  }
  ded_record_sign(&rec, &id);
  uint8_t buf[DED_RECORD_BYTES_MAX + 64];
  size_t n = rec_encode(&rec, buf);
  assert_int_equal(buf[REC_OFF_NADDR], DED_RECORD_ADDRS_MAX);
  const uint8_t naddrs[] = {DED_RECORD_ADDRS_MAX + 1, 255};
  for (size_t i = 0; i < sizeof naddrs; i++) {
    buf[REC_OFF_NADDR] = naddrs[i];
    assert_int_equal(ded_record_decode(buf, n, &out), DED_ERR_PROTO);
  }
  buf[REC_OFF_NADDR] = DED_RECORD_ADDRS_MAX;
  assert_int_equal(ded_record_decode(buf, n, &out), 0);
  /* ext_len above the bound, with the bytes actually present. */
  size_t ext_off = REC_OFF_NADDR + 1 + DED_RECORD_ADDRS_MAX * REC_ADDR_BYTES;
  assert_int_equal(buf[ext_off], 3);
  buf[ext_off] = (uint8_t)(DED_RECORD_EXT_MAX + 1);
  buf[ext_off + 1] = (uint8_t)((DED_RECORD_EXT_MAX + 1) >> 8);
  assert_int_equal(ded_record_decode(buf, n, &out), DED_ERR_PROTO);
  /* The encoder refuses such records outright. */
  rec.naddr = DED_RECORD_ADDRS_MAX + 1;
  assert_int_equal(ded_record_encode(&rec, buf, sizeof buf), DED_ERR_INVALID_ARG);
  rec.naddr = 1;
  rec.ext_len = DED_RECORD_EXT_MAX + 1;
  assert_int_equal(ded_record_encode(&rec, buf, sizeof buf), DED_ERR_INVALID_ARG);
}

/* Each shorter prefix, one byte more, and more than any record may be. */
static void test_record_decode_lengths(void **state) {
  (void)state;
  ded_ident id;
  unit_ident(&id, 10);
  ded_record rec, out;
  unit_record(&rec, &id, 1, NOW_MS, 300000);
  uint8_t buf[DED_RECORD_BYTES_MAX + 1];
  size_t n = rec_encode(&rec, buf);
  for (size_t cut = 0; cut < n; cut++) {
    uint8_t *copy = malloc(cut ? cut : 1);
    assert_non_null(copy);
    memcpy(copy, buf, cut);
    assert_int_equal(ded_record_decode(copy, cut, &out), DED_ERR_PROTO);
    free(copy);
  }
  buf[n] = 0;
  assert_int_equal(ded_record_decode(buf, n + 1, &out), DED_ERR_PROTO);
  static uint8_t huge[DED_RECORD_BYTES_MAX + 1];
  memcpy(huge, buf, n);
  assert_int_equal(ded_record_decode(huge, sizeof huge, &out), DED_ERR_PROTO);
}

static void test_record_encode_small_buffer(void **state) {
  (void)state;
  ded_ident id;
  unit_ident(&id, 11);
  ded_record rec;
  unit_record(&rec, &id, 1, NOW_MS, 300000);
  uint8_t buf[DED_RECORD_BYTES_MAX];
  size_t n = rec_encode(&rec, buf);
  for (size_t cap = 0; cap < n; cap++)
    assert_int_equal(ded_record_encode(&rec, buf, cap), DED_ERR_INVALID_ARG);
  assert_int_equal(ded_record_encode(&rec, buf, n), n);
}

/* Signing fills in the key, and a change after signing is caught. */
static void test_record_sign_covers_fields(void **state) {
  (void)state;
  ded_ident id;
  unit_ident(&id, 12);
  uint8_t run_id[DED_RUN_ID_BYTES];
  unit_run_id(run_id);
  ded_record rec;
  unit_record(&rec, &id, 1, NOW_MS, 300000);
  ded_record base = rec;
#define REC_TAMPER(field_change)                                                                  \
  do {                                                                                            \
    rec = base;                                                                                   \
    field_change;                                                                                 \
    if (ded_record_verify(&rec, run_id, NOW_MS) != DED_ERR_SIGNATURE)                             \
      fail_msg("unsigned change: %s", #field_change);                                            \
  } while (0)
  REC_TAMPER(rec.mode = DED_MODE_CLIENT);
  REC_TAMPER(rec.flags = DED_RECORD_F_NO_ROUNDS);
  REC_TAMPER(rec.seq++);
  REC_TAMPER(rec.issued_ms--);
  REC_TAMPER(rec.ttl_ms++);
  REC_TAMPER(rec.naddr = 1);
  REC_TAMPER(rec.addr[1].ip[15] = 2);
  REC_TAMPER(rec.addr[0].family = 6);
  REC_TAMPER(rec.ext_len = 2);
  REC_TAMPER(rec.ext[2] ^= 1);
  REC_TAMPER(rec.sig[63] ^= 0x80);
#undef REC_TAMPER
  rec = base;
  assert_int_equal(ded_record_verify(&rec, run_id, NOW_MS), 0);
}

/* The rates a record with extension |ext| (|len| bytes) publishes, once
 * signed, encoded and decoded. */
static ded_perf ext_perf(ded_record *rec, const ded_ident *id, const uint8_t *ext, size_t len) {
  memcpy(rec->ext, ext, len);
  rec->ext_len = (uint16_t)len;
  ded_record_sign(rec, id);
  uint8_t buf[DED_RECORD_BYTES_MAX];
  size_t n = rec_encode(rec, buf);
  ded_record out;
  assert_int_equal(ded_record_decode(buf, n, &out), 0);
  ded_perf perf;
  assert_int_equal(ded_record_perf(&out, &perf), 1);
  return perf;
}

/* The rates a record publishes: set, carried, read back (and the early
 * flags, absent from an older version's); malformed extensions are
 * refused by the decoder. */
static void test_record_perf(void **state) {
  (void)state;
  ded_ident id;
  unit_ident(&id, 13);
  ded_record rec, out;
  unit_record(&rec, &id, 1, NOW_MS, 300000);
  ded_perf perf;
  assert_int_equal(ded_record_perf(&rec, &perf), 0); /* only an unknown tag */
  assert_int_equal(perf.up_kBps, 0);
  ded_perf want = {12500, 6250, 4000000, DED_PERF_F_UP_EARLY};
  ded_record_perf_set(&rec, &want);
  assert_int_equal(rec.ext_len, 2 + DED_RECORD_PERF_BYTES);
  ded_record_sign(&rec, &id);
  uint8_t buf[DED_RECORD_BYTES_MAX];
  size_t n = rec_encode(&rec, buf);
  assert_int_equal(ded_record_decode(buf, n, &out), 0);
  assert_int_equal(ded_record_perf(&out, &perf), 1);
  assert_int_equal(perf.up_kBps, 12500);
  assert_int_equal(perf.down_kBps, 6250);
  assert_int_equal(perf.add_kBps, 4000000);
  assert_int_equal(perf.flags, DED_PERF_F_UP_EARLY);
  /* After an unknown entry, and longer than this version reads (flags it
   * does not know of are dropped). */
  const uint8_t later[] = {0x42, 2, 9, 9, DED_RECORD_EXT_PERF, 14, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 6, 7};
  perf = ext_perf(&rec, &id, later, sizeof later);
  assert_true(perf.up_kBps == 1 && perf.down_kBps == 2 && perf.add_kBps == 3);
  assert_int_equal(perf.flags, DED_PERF_F_DOWN_EARLY);
  /* An older version's, without flags: none early. */
  const uint8_t older[] = {DED_RECORD_EXT_PERF, 12, 4, 0, 0, 0, 5, 0, 0, 0, 6, 0, 0, 0};
  perf = ext_perf(&rec, &id, older, sizeof older);
  assert_true(perf.up_kBps == 4 && perf.down_kBps == 5 && perf.add_kBps == 6 && perf.flags == 0);
  /* Malformed: an entry past the end, a header cut short, a rates entry
   * too short, two rates entries. */
  const struct {
    uint8_t ext[40];
    uint16_t len;
  } bad[] = {
      {{0x42, 5, 1, 2}, 4},
      {{0x42}, 1},
      {{DED_RECORD_EXT_PERF, 11, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 13},
      {{DED_RECORD_EXT_PERF, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, DED_RECORD_EXT_PERF, 12, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
       28},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    memcpy(rec.ext, bad[i].ext, bad[i].len);
    rec.ext_len = bad[i].len;
    ded_record_sign(&rec, &id);
    n = rec_encode(&rec, buf);
    if (ded_record_decode(buf, n, &out) != DED_ERR_PROTO) fail_msg("bad extension %zu decoded", i);
  }
}

static void test_invite_check(void **state) {
  (void)state;
  ded_ident owner, guest, other;
  unit_ident(&owner, 21);
  unit_ident(&guest, 22);
  unit_ident(&other, 23);
  uint8_t run[DED_RUN_ID_BYTES], run2[DED_RUN_ID_BYTES];
  unit_run_id(run);
  ded_hash32("another", 7, run2);
  ded_invite inv;
  ded_invite_sign(&inv, &owner, run, guest.pk, NOW_MS + 1000);
  assert_int_equal(ded_invite_check(owner.pk, run, guest.pk, inv.expires_ms, inv.sig, NOW_MS), 0);
  /* Its expiry: valid up to the ms before. 0 never expires. */
  assert_int_equal(ded_invite_check(owner.pk, run, guest.pk, inv.expires_ms, inv.sig, NOW_MS + 999), 0);
  assert_int_equal(ded_invite_check(owner.pk, run, guest.pk, inv.expires_ms, inv.sig, NOW_MS + 1000),
                   DED_ERR_EXPIRED);
  /* Anything else than what was signed: another owner, invitee, run, or
   * a later expiry. */
  assert_int_equal(ded_invite_check(other.pk, run, guest.pk, inv.expires_ms, inv.sig, NOW_MS),
                   DED_ERR_SIGNATURE);
  assert_int_equal(ded_invite_check(owner.pk, run, other.pk, inv.expires_ms, inv.sig, NOW_MS),
                   DED_ERR_SIGNATURE);
  assert_int_equal(ded_invite_check(owner.pk, run2, guest.pk, inv.expires_ms, inv.sig, NOW_MS),
                   DED_ERR_SIGNATURE);
  assert_int_equal(ded_invite_check(owner.pk, run, guest.pk, 0, inv.sig, NOW_MS), DED_ERR_SIGNATURE);
  /* Signed by the invitee itself, or by another: no. */
  ded_invite self;
  ded_invite_sign(&self, &guest, run, guest.pk, 0);
  assert_int_equal(ded_invite_check(owner.pk, run, guest.pk, 0, self.sig, NOW_MS), DED_ERR_SIGNATURE);
  ded_invite_sign(&self, &owner, run, guest.pk, 0);
  assert_int_equal(ded_invite_check(owner.pk, run, guest.pk, 0, self.sig, UINT64_MAX), 0);
  /* Every bit of the signature. */
  for (size_t bit = 0; bit < DED_SIG_BYTES * 8; bit++) {
    inv.sig[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    assert_int_equal(ded_invite_check(owner.pk, run, guest.pk, inv.expires_ms, inv.sig, NOW_MS),
                     DED_ERR_SIGNATURE);
    inv.sig[bit / 8] ^= (uint8_t)(1u << (bit % 8));
  }
}

static void test_invite_text(void **state) {
  (void)state;
  ded_ident owner, guest;
  unit_ident(&owner, 21);
  unit_ident(&guest, 22);
  uint8_t run[DED_RUN_ID_BYTES];
  unit_run_id(run);
  ded_invite inv, back;
  ded_invite_sign(&inv, &owner, run, guest.pk, 0x0102030405060708ull);
  char text[DED_INVITE_TEXT_LEN + 1];
  ded_invite_format(&inv, text);
  assert_int_equal(strlen(text), DED_INVITE_TEXT_LEN);
  assert_int_equal(ded_invite_parse(text, strlen(text), &back), 0);
  assert_memory_equal(back.run_id, run, DED_RUN_ID_BYTES);
  assert_memory_equal(back.pk, guest.pk, DED_PK_BYTES);
  assert_int_equal(back.expires_ms, 0x0102030405060708ull);
  assert_memory_equal(back.sig, inv.sig, DED_SIG_BYTES);
  /* Cut, lengthened, another prefix, a non-hex digit: not an invitation. */
  assert_int_equal(ded_invite_parse(text, strlen(text) - 1, &back), DED_ERR_PROTO);
  char longer[DED_INVITE_TEXT_LEN + 3];
  snprintf(longer, sizeof longer, "%s00", text);
  assert_int_equal(ded_invite_parse(longer, strlen(longer), &back), DED_ERR_PROTO);
  char bad[DED_INVITE_TEXT_LEN + 1];
  memcpy(bad, text, sizeof bad);
  bad[3] = 'X';
  assert_int_equal(ded_invite_parse(bad, strlen(bad), &back), DED_ERR_PROTO);
  memcpy(bad, text, sizeof bad);
  bad[DED_INVITE_PREFIX_LEN + 10] = 'g';
  assert_int_equal(ded_invite_parse(bad, strlen(bad), &back), DED_ERR_PROTO);
  assert_int_equal(ded_invite_parse("", 0, &back), DED_ERR_PROTO);
}

static void test_record_invite(void **state) {
  (void)state;
  ded_ident owner, guest;
  unit_ident(&owner, 21);
  unit_ident(&guest, 22);
  ded_record rec, out;
  unit_record(&rec, &guest, 1, NOW_MS, 300000);
  uint64_t exp;
  uint8_t sig[DED_SIG_BYTES];
  assert_int_equal(ded_record_invite(&rec, &exp, sig), 0);
  ded_perf perf = {1, 2, 3, 0};
  ded_record_perf_set(&rec, &perf);
  ded_invite inv;
  ded_invite_sign(&inv, &owner, rec.run_id, guest.pk, 77);
  ded_record_invite_add(&rec, inv.expires_ms, inv.sig);
  ded_record_sign(&rec, &guest);
  uint8_t buf[DED_RECORD_BYTES_MAX];
  size_t n = rec_encode(&rec, buf);
  assert_int_equal(ded_record_decode(buf, n, &out), 0);
  assert_int_equal(ded_record_invite(&out, &exp, sig), 1);
  assert_int_equal(exp, 77);
  assert_memory_equal(sig, inv.sig, DED_SIG_BYTES);
  assert_int_equal(ded_record_perf(&out, &perf), 1);
  assert_int_equal(perf.add_kBps, 3);
  /* Two invitations, or one of another length: malformed. */
  ded_record_invite_add(&rec, inv.expires_ms, inv.sig);
  ded_record_sign(&rec, &guest);
  n = rec_encode(&rec, buf);
  assert_int_equal(ded_record_decode(buf, n, &out), DED_ERR_PROTO);
  rec.ext_len = (uint16_t)(2 + DED_RECORD_PERF_BYTES + 2 + DED_RECORD_INVITE_BYTES - 1);
  rec.ext[2 + DED_RECORD_PERF_BYTES + 1] = DED_RECORD_INVITE_BYTES - 1;
  ded_record_sign(&rec, &guest);
  n = rec_encode(&rec, buf);
  assert_int_equal(ded_record_decode(buf, n, &out), DED_ERR_PROTO);
}

/* The last completed round a record publishes (what a backbone shows):
 * carried beside the rates and an invitation; one entry only, and one too
 * short is malformed. */
static void test_record_progress(void **state) {
  (void)state;
  ded_ident id;
  unit_ident(&id, 23);
  ded_record rec, out;
  unit_record(&rec, &id, 1, NOW_MS, 300000);
  ded_progress prog;
  assert_int_equal(ded_record_progress(&rec, &prog), 0);
  assert_true(prog.round == 0 && prog.round_ms == 0 && prog.contributors == 0);
  ded_record_perf_set(&rec, &(ded_perf){1, 2, 3, 0});
  uint8_t sig[DED_SIG_BYTES] = {7};
  ded_record_invite_add(&rec, 99, sig);
  ded_record_progress_add(&rec, &(ded_progress){(1ull << 40) + 5, 4470, 12, 0x8877665544332211ull,
                                                 4, 10000});
  ded_record_sign(&rec, &id);
  uint8_t buf[DED_RECORD_BYTES_MAX];
  size_t n = rec_encode(&rec, buf);
  assert_int_equal(ded_record_decode(buf, n, &out), 0);
  assert_int_equal(ded_record_progress(&out, &prog), 1);
  assert_true(prog.round == (1ull << 40) + 5 && prog.round_ms == 4470 && prog.contributors == 12);
  assert_true(prog.attempt == 0x8877665544332211ull);
  assert_true(prog.codec == 4 && prog.codec_ppm == 10000);
  ded_perf perf;
  assert_int_equal(ded_record_perf(&out, &perf), 1);
  assert_int_equal(perf.down_kBps, 2);
  /* Twice: malformed. */
  ded_record_progress_add(&rec, &prog);
  ded_record_sign(&rec, &id);
  n = rec_encode(&rec, buf);
  assert_int_equal(ded_record_decode(buf, n, &out), DED_ERR_PROTO);
  /* Shorter than the least a version reads: malformed; longer: read, the
   * attempt only when all of it is there (an older peer's 16 bytes: 0). */
  const uint8_t shorter[] = {DED_RECORD_EXT_PROGRESS, 15, 1, 0, 0, 0, 0, 0, 0, 0,
                             2, 0, 0, 0, 3, 0, 0};
  const uint8_t longer[] = {DED_RECORD_EXT_PROGRESS, 17, 1, 0, 0, 0, 0, 0, 0, 0,
                            2, 0, 0, 0, 3, 0, 0, 0, 9};
  memcpy(rec.ext, shorter, sizeof shorter);
  rec.ext_len = sizeof shorter;
  ded_record_sign(&rec, &id);
  n = rec_encode(&rec, buf);
  assert_int_equal(ded_record_decode(buf, n, &out), DED_ERR_PROTO);
  memcpy(rec.ext, longer, sizeof longer);
  rec.ext_len = sizeof longer;
  ded_record_sign(&rec, &id);
  n = rec_encode(&rec, buf);
  assert_int_equal(ded_record_decode(buf, n, &out), 0);
  assert_int_equal(ded_record_progress(&out, &prog), 1);
  assert_true(prog.round == 1 && prog.round_ms == 2 && prog.contributors == 3);
  assert_true(prog.attempt == 0);
  const uint8_t full[] = {DED_RECORD_EXT_PROGRESS, 25, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0,
                          0, 5, 0, 0, 0, 0, 0, 0, 0, 7};
  memcpy(rec.ext, full, sizeof full);
  rec.ext_len = sizeof full;
  ded_record_sign(&rec, &id);
  n = rec_encode(&rec, buf);
  assert_int_equal(ded_record_decode(buf, n, &out), 0);
  assert_int_equal(ded_record_progress(&out, &prog), 1);
  assert_true(prog.round == 1 && prog.contributors == 3 && prog.attempt == 5);
}

/* ---------------------------------------------------------- GROUPS */

/* |n| group peers, ids 3, 5, 7, ... on |nhost| hosts (alternately IPv4
 * and IPv6). */
static void groups_make(ded_group_addr *g, unsigned n, unsigned nhost) {
  for (unsigned i = 0; i < n; i++) {
    memset(&g[i], 0, sizeof g[i]);
    g[i].id = (uint16_t)(3 + 2 * i);
    unsigned h = i % nhost;
    g[i].addr.family = h % 2 ? 6 : 4;
    g[i].addr.ip[0] = 10;
    g[i].addr.ip[1] = (uint8_t)h;
    g[i].addr.ip[3] = 1;
    if (h % 2) g[i].addr.ip[15] = (uint8_t)(h + 1);
    g[i].addr.port = (uint16_t)(7000 + i);
  }
}

static void groups_assert_same(const ded_group_addr *a, const ded_group_addr *b, unsigned n) {
  for (unsigned i = 0; i < n; i++) {
    assert_int_equal(a[i].id, b[i].id);
    assert_true(ded_addr_equal(&a[i].addr, &b[i].addr));
  }
}

/* |rec| with extension bytes |ext|, signed, encoded and decoded again. */
static int groups_decode_ext(ded_record *rec, const ded_ident *id, const uint8_t *ext, size_t len,
                             ded_record *out) {
  assert_true(len <= DED_RECORD_EXT_MAX);
  memcpy(rec->ext, ext, len);
  rec->ext_len = (uint16_t)len;
  ded_record_sign(rec, id);
  uint8_t buf[DED_RECORD_BYTES_MAX];
  size_t n = rec_encode(rec, buf);
  return ded_record_decode(buf, n, out);
}

/* A list of group peers: set, carried, read back, beside the other
 * entries; none, and an empty list, told apart. */
static void test_record_groups(void **state) {
  (void)state;
  ded_ident id;
  unit_ident(&id, 31);
  ded_record rec, out;
  unit_record(&rec, &id, 1, NOW_MS, 300000);
  ded_group_addr got[DED_RECORD_GROUPS_MAX];
  assert_int_equal(ded_record_groups(&rec, got), -1);
  ded_record_perf_set(&rec, &(ded_perf){1, 2, 3, 0});
  assert_int_equal(ded_record_groups(&rec, got), -1);
  ded_record_progress_add(&rec, &(ded_progress){9, 10, 2, 0, 0, 0});
  ded_group_addr g[5];
  groups_make(g, 5, 2);
  assert_int_equal(ded_record_groups_add(&rec, g, 5), 0);
  /* Two hosts, five entries, in one entry of the extension. */
  assert_int_equal(rec.ext_len, 2 + DED_RECORD_PERF_BYTES + 2 + DED_RECORD_PROGRESS_CODEC_BYTES + 2 +
                                    1 + 2 * 17 + 1 + 5 * 5);
  ded_record_sign(&rec, &id);
  uint8_t buf[DED_RECORD_BYTES_MAX];
  size_t n = rec_encode(&rec, buf);
  assert_int_equal(ded_record_decode(buf, n, &out), 0);
  rec_assert_same(&rec, &out);
  assert_int_equal(ded_record_groups(&out, got), 5);
  groups_assert_same(g, got, 5);
  ded_progress prog;
  assert_int_equal(ded_record_progress(&out, &prog), 1);
  assert_int_equal(prog.round, 9);
  /* An empty list is a list. */
  ded_record_perf_set(&rec, &(ded_perf){1, 2, 3, 0});
  assert_int_equal(ded_record_groups_add(&rec, NULL, 0), 0);
  assert_int_equal(rec.ext_len, 2 + DED_RECORD_PERF_BYTES + 2 + 2);
  ded_record_sign(&rec, &id);
  n = rec_encode(&rec, buf);
  assert_int_equal(ded_record_decode(buf, n, &out), 0);
  assert_int_equal(ded_record_groups(&out, got), 0);
  /* The encoder refuses what the decoder would: too many, ids not
   * increasing, a bad family, port 0; the record is left as it was. */
  ded_group_addr many[DED_RECORD_GROUPS_MAX + 1];
  groups_make(many, DED_RECORD_GROUPS_MAX + 1, 3);
  ded_record before = rec;
  assert_int_equal(ded_record_groups_add(&rec, many, DED_RECORD_GROUPS_MAX + 1), DED_ERR_INVALID_ARG);
  ded_group_addr bad[3];
  groups_make(bad, 3, 1);
  bad[2].id = bad[1].id;
  assert_int_equal(ded_record_groups_add(&rec, bad, 3), DED_ERR_INVALID_ARG);
  groups_make(bad, 3, 1);
  bad[1].addr.family = 5;
  assert_int_equal(ded_record_groups_add(&rec, bad, 3), DED_ERR_INVALID_ARG);
  groups_make(bad, 3, 1);
  bad[0].addr.port = 0;
  assert_int_equal(ded_record_groups_add(&rec, bad, 3), DED_ERR_INVALID_ARG);
  assert_int_equal(rec.ext_len, before.ext_len);
  assert_memory_equal(rec.ext, before.ext, rec.ext_len);
}

/* The largest list, every entry on a host of its own, beside rates, an
 * invitation and progress: it fits, in three entries of the extension,
 * and reads back whole; cut anywhere, or split differently among
 * entries with an unknown one between, it is read the same or refused. */
static void test_record_groups_largest(void **state) {
  (void)state;
  ded_ident id;
  unit_ident(&id, 32);
  ded_record rec, out;
  unit_record(&rec, &id, 1, NOW_MS, 300000);
  rec.naddr = DED_RECORD_ADDRS_MAX;
  for (unsigned i = 0; i < DED_RECORD_ADDRS_MAX; i++) {
    rec.addr[i].family = 6;
    rec.addr[i].port = (uint16_t)(1000 + i);
  }
  ded_record_perf_set(&rec, &(ded_perf){1, 2, 3, 0});
  uint8_t isig[DED_SIG_BYTES] = {7};
  ded_record_invite_add(&rec, 99, isig);
  ded_record_progress_add(&rec, &(ded_progress){9, 10, 2, 0, 0, 0});
  size_t head = rec.ext_len;
  ded_group_addr g[DED_RECORD_GROUPS_MAX];
  groups_make(g, DED_RECORD_GROUPS_MAX, DED_RECORD_GROUPS_MAX);
  assert_int_equal(ded_record_groups_add(&rec, g, DED_RECORD_GROUPS_MAX), 0);
  assert_int_equal(rec.ext_len - head, DED_RECORD_GROUPS_EXT_MAX);
  assert_int_equal(rec.ext[head + 1], 255);
  assert_int_equal(rec.ext[head + 2 + 255 + 1], 255);
  assert_int_equal(rec.ext[head + 2 * 257], DED_RECORD_EXT_GROUPS);
  ded_record_sign(&rec, &id);
  uint8_t buf[DED_RECORD_BYTES_MAX];
  size_t n = rec_encode(&rec, buf);
  assert_true(n <= DED_RECORD_BYTES_MAX);
  assert_int_equal(ded_record_decode(buf, n, &out), 0);
  ded_group_addr got[DED_RECORD_GROUPS_MAX];
  assert_int_equal(ded_record_groups(&out, got), DED_RECORD_GROUPS_MAX);
  groups_assert_same(g, got, DED_RECORD_GROUPS_MAX);
  uint64_t expires;
  uint8_t sig[DED_SIG_BYTES];
  assert_int_equal(ded_record_invite(&out, &expires, sig), 1);
  /* No room for a second list. */
  assert_int_equal(ded_record_groups_add(&rec, g, DED_RECORD_GROUPS_MAX), DED_ERR_INVALID_ARG);
  /* The value split into entries of 100 bytes with an unknown entry
   * between the first two: the same list. */
  uint8_t value[DED_RECORD_GROUPS_VALUE_MAX], ext[DED_RECORD_EXT_MAX];
  size_t vlen = 0;
  for (size_t i = head; i < rec.ext_len; i += 2 + rec.ext[i + 1]) {
    memcpy(value + vlen, rec.ext + i + 2, rec.ext[i + 1]);
    vlen += rec.ext[i + 1];
  }
  assert_int_equal(vlen, DED_RECORD_GROUPS_VALUE_MAX);
  ded_record plain;
  unit_record(&plain, &id, 1, NOW_MS, 300000);
  size_t e = 0;
  for (size_t off = 0; off < vlen; off += 100) {
    size_t k = DED_MIN(vlen - off, (size_t)100);
    ext[e++] = DED_RECORD_EXT_GROUPS;
    ext[e++] = (uint8_t)k;
    memcpy(ext + e, value + off, k);
    e += k;
    if (off == 0) {
      ext[e++] = 0x7e;
      ext[e++] = 1;
      ext[e++] = 0xaa;
    }
  }
  assert_int_equal(groups_decode_ext(&plain, &id, ext, e, &out), 0);
  assert_int_equal(ded_record_groups(&out, got), DED_RECORD_GROUPS_MAX);
  groups_assert_same(g, got, DED_RECORD_GROUPS_MAX);
  /* Every shorter value (in entries of 255 bytes) is malformed. */
  for (size_t cut = 0; cut < vlen; cut++) {
    e = 0;
    for (size_t off = 0; off < cut || (cut == 0 && off == 0); off += 255) {
      size_t k = DED_MIN(cut - off, (size_t)255);
      ext[e++] = DED_RECORD_EXT_GROUPS;
      ext[e++] = (uint8_t)k;
      memcpy(ext + e, value + off, k);
      e += k;
    }
    if (groups_decode_ext(&plain, &id, ext, e, &out) != DED_ERR_PROTO)
      fail_msg("a list cut at %zu bytes decoded", cut);
  }
}

/* Each malformed shape of a GROUPS value makes the record malformed, as a
 * malformed rates or progress entry does. */
static void test_record_groups_malformed(void **state) {
  (void)state;
  ded_ident id;
  unit_ident(&id, 33);
  ded_record rec, out;
  unit_record(&rec, &id, 1, NOW_MS, 300000);
  /* A good value: 1 host (10.0.0.1), 2 entries: ids 4 and 9. */
  const uint8_t good[] = {1, 4, 10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                          2, 4, 0, 0, 0x58, 0x1b, 9, 0, 0, 0x59, 0x1b};
  enum { NHOST = 0, FAMILY = 1, N = 18, ID0 = 19, HOST0 = 21, PORT0 = 22, ID1 = 24, HOST1 = 26,
         PORT1 = 27 };
  uint8_t ext[2 + DED_RECORD_EXT_MAX];
  ext[0] = DED_RECORD_EXT_GROUPS;
  ext[1] = sizeof good;
  memcpy(ext + 2, good, sizeof good);
  assert_int_equal(groups_decode_ext(&rec, &id, ext, 2 + sizeof good, &out), 0);
  ded_group_addr got[DED_RECORD_GROUPS_MAX];
  assert_int_equal(ded_record_groups(&out, got), 2);
  assert_int_equal(got[0].id, 4);
  assert_int_equal(got[1].id, 9);
  assert_int_equal(got[0].addr.port, 7000);
  assert_int_equal(got[1].addr.family, 4);
  assert_int_equal(got[1].addr.ip[0], 10);
  static const struct {
    const char *what;
    int at;
    uint8_t val;
  } bad[] = {
      {"nhost above the bound", NHOST, DED_RECORD_GROUPS_MAX + 1},
      {"n above the bound", N, DED_RECORD_GROUPS_MAX + 1},
      {"n above what follows", N, 3},
      {"ids equal", ID1, 4},
      {"ids decreasing", ID0, 10},
      {"host index out of range", HOST1, 1},
      {"host index far out", HOST0, 255},
      {"family 0", FAMILY, 0},
      {"family 5", FAMILY, 5},
      {"port 0", PORT0, 0},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    memcpy(ext + 2, good, sizeof good);
    ext[2 + bad[i].at] = bad[i].val;
    if (bad[i].at == PORT0) ext[2 + PORT0 + 1] = 0;
    if (groups_decode_ext(&rec, &id, ext, 2 + sizeof good, &out) != DED_ERR_PROTO)
      fail_msg("%s decoded", bad[i].what);
  }
  (void)PORT1;
  /* Truncated anywhere, and a byte too many. */
  for (size_t cut = 0; cut < sizeof good; cut++) {
    memcpy(ext + 2, good, sizeof good);
    ext[1] = (uint8_t)cut;
    if (groups_decode_ext(&rec, &id, ext, 2 + cut, &out) != DED_ERR_PROTO)
      fail_msg("a value cut at %zu decoded", cut);
  }
  memcpy(ext + 2, good, sizeof good);
  ext[2 + sizeof good] = 0;
  ext[1] = sizeof good + 1;
  assert_int_equal(groups_decode_ext(&rec, &id, ext, 3 + sizeof good, &out), DED_ERR_PROTO);
  /* Two complete lists in two entries are one value with bytes left. */
  memcpy(ext + 2, good, sizeof good);
  ext[1] = sizeof good;
  memcpy(ext + 2 + sizeof good, ext, 2 + sizeof good);
  assert_int_equal(groups_decode_ext(&rec, &id, ext, 2 * (2 + sizeof good), &out), DED_ERR_PROTO);
  /* 33 hosts or entries with every byte present: still refused. */
  uint8_t big[DED_RECORD_EXT_MAX];
  size_t e = 0;
  big[e++] = 1;
  big[e++] = 4;
  memset(big + e, 0, 16);
  e += 16;
  big[e++] = DED_RECORD_GROUPS_MAX + 1;
  for (unsigned i = 0; i < DED_RECORD_GROUPS_MAX + 1; i++) {
    big[e++] = (uint8_t)i;
    big[e++] = 0;
    big[e++] = 0;
    big[e++] = 1;
    big[e++] = 1;
  }
  e = 0;
  size_t vlen = 1 + 17 + 1 + (DED_RECORD_GROUPS_MAX + 1) * 5;
  for (size_t off = 0; off < vlen; off += 255) {
    size_t k = DED_MIN(vlen - off, (size_t)255);
    ext[e++] = DED_RECORD_EXT_GROUPS;
    ext[e++] = (uint8_t)k;
    memcpy(ext + e, big + off, k);
    e += k;
  }
  assert_int_equal(groups_decode_ext(&rec, &id, ext, e, &out), DED_ERR_PROTO);
  /* The same with 32 entries decodes: the bound, not the shape, refused it. */
  big[18] = DED_RECORD_GROUPS_MAX;
  vlen -= 5;
  e = 0;
  for (size_t off = 0; off < vlen; off += 255) {
    size_t k = DED_MIN(vlen - off, (size_t)255);
    ext[e++] = DED_RECORD_EXT_GROUPS;
    ext[e++] = (uint8_t)k;
    memcpy(ext + e, big + off, k);
    e += k;
  }
  assert_int_equal(groups_decode_ext(&rec, &id, ext, e, &out), 0);
  assert_int_equal(ded_record_groups(&out, got), DED_RECORD_GROUPS_MAX);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_record_round_trip),
      cmocka_unit_test(test_record_progress),
      cmocka_unit_test(test_record_groups),
      cmocka_unit_test(test_record_groups_largest),
      cmocka_unit_test(test_record_groups_malformed),
      cmocka_unit_test(test_record_perf),
      cmocka_unit_test(test_invite_check),
      cmocka_unit_test(test_invite_text),
      cmocka_unit_test(test_record_invite),
      cmocka_unit_test(test_record_largest),
      cmocka_unit_test(test_record_every_bit_flip),
      cmocka_unit_test(test_record_wrong_run),
      cmocka_unit_test(test_record_time_window),
      cmocka_unit_test(test_record_other_keys_signature),
      cmocka_unit_test(test_record_decode_invalid_fields),
      cmocka_unit_test(test_record_decode_bad_counts),
      cmocka_unit_test(test_record_decode_lengths),
      cmocka_unit_test(test_record_encode_small_buffer),
      cmocka_unit_test(test_record_sign_covers_fields),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
