/*
 * test_msg.c: core/ded_msg, every message of the wire protocol (version 15).
 *
 * Each message is encoded, cut out of its frame by the frame decoder, and
 * decoded again. Every decoder must then refuse each shorter prefix of a
 * valid payload and the payload with a byte too many, and the semantic
 * bounds (ded_limits.h and the COMMIT invariants) must hold: a peer that
 * breaks them is a protocol error, never an assertion. Decoders that
 * allocate (COMMIT, JOIN with status, DECIDE) run on a counting allocator:
 * whatever they hand out is given back by their _free, and nothing is
 * left behind when they refuse.
 */
#include <math.h>

#include "unit_util.h"

#include "avg/ded_codec.h"
#include "core/ded_limits.h"
#include "core/ded_msg.h"

/* Room for any test frame but the large COMMITs, which allocate. */
#define MSG_BUF_BYTES 4096

/* Payload offsets of the fields versions 2 and 3 added or moved, and
 * of version 15's compression fields (ded_msg.h). */
#define JOIN_OFF_VIEW 8
#define JOIN_OFF_POS 21
#define JOIN_OFF_STEP 29
#define JOIN_OFF_COMPRESS 49
#define JOIN_OFF_COMPRESS_PPM 50
#define JOIN_OFF_COMPUTE_US 54
#define JOIN_OFF_FLAGS 58
#define JOIN_BASE_BYTES 59
#define JOIN_OFF_ACC_VIEW 59 /* with status */
#define JOIN_OFF_PLAN 63     /* with status: the COMMIT body */
#define COMMIT_OFF_ATTEMPT 8
#define COMMIT_OFF_BASE 16
#define COMMIT_OFF_POS 33
#define COMMIT_OFF_STEP 41
#define COMMIT_OFF_CHUNK 49
#define COMMIT_OFF_CODEC 53
#define COMMIT_OFF_CODEC_PPM 54
#define COMMIT_OFF_K 58
#define COMMIT_OFF_NACC 60
#define COMMIT_OFF_MEMBERS 62
#define MEMBER_OFF_FLAGS (DED_ID_BYTES + 20) /* within a member entry */
#define DECIDE_OFF_FLAGS 12
#define DECIDE_OFF_PLAN 13
#define HAVE_OFF_FLAGS 20
#define HAVE_OFF_DIGEST 21
/* round | attempt | view | flags | digest */
#define HAVE_BYTES (HAVE_OFF_DIGEST + DED_RESULT_DIGEST_BYTES)

static uint64_t msg_le(const uint8_t *p, unsigned n) {
  uint64_t v = 0;
  for (unsigned i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

static void msg_put_le(uint8_t *p, uint64_t v, unsigned n) {
  for (unsigned i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Cuts the single frame out of |buf|: checks the header and that the
 * encoder wrote exactly one frame. */
static ded_frame msg_unframe(const uint8_t *buf, size_t len, uint8_t type) {
  ded_frame_dec dec;
  ded_frame_dec_init(&dec, NULL);
  ded_frame fr;
  const uint8_t *p = buf;
  size_t left = len;
  assert_int_equal(ded_frame_dec_next(&dec, &p, &left, &fr), 1);
  assert_int_equal(left, 0);
  assert_int_equal(fr.type, type);
  assert_ptr_equal(fr.payload, buf + DED_FRAME_HDR_BYTES);
  ded_frame_dec_free(&dec);
  return fr;
}

/* Walks a whole RECORDS payload; 0 or the first error. */
static int msg_records_walk(const uint8_t *p, size_t len, unsigned *count) {
  ded_msg_records_rd it;
  int rv = ded_msg_records_begin_rd(&it, p, len);
  const uint8_t *rec;
  size_t rec_len;
  unsigned n = 0;
  if (rv == 0)
    while ((rv = ded_msg_records_next(&it, &rec, &rec_len)) == 1) n++;
  if (count) *count = n;
  return rv;
}

/* Runs the decoder of |type| on |len| bytes; 0 or its error. Decoders
 * that allocate do it from a counting allocator, and must have given
 * everything back once their _free ran (or, on error, by themselves). */
static int msg_decode_any(uint8_t type, const uint8_t *p, size_t len) {
  unit_failmem fm;
  unit_failmem_init(&fm, -1);
  int rv;
  switch (type) {
  case DED_MSG_HELLO: {
    ded_msg_hello m;
    return ded_msg_hello_decode(p, len, &m);
  }
  case DED_MSG_RECORDS: return msg_records_walk(p, len, NULL);
  case DED_MSG_JOIN: {
    ded_msg_join m;
    rv = ded_msg_join_decode(p, len, &fm.mem, &m);
    if (rv == 0) {
      assert_true((m.flags & DED_JOIN_F_STATUS) ? m.plan.members != NULL && m.have != NULL
                                                : m.plan.members == NULL && m.have == NULL);
      ded_msg_join_free(&m, &fm.mem);
      assert_null(m.plan.members);
    } else {
      assert_null(m.plan.members); /* nothing is left to free on error */
    }
    break;
  }
  case DED_MSG_COMMIT: {
    ded_msg_commit m;
    rv = ded_msg_commit_decode(p, len, &fm.mem, &m);
    if (rv == 0) ded_msg_commit_free(&m, &fm.mem);
    else assert_null(m.members); /* nothing is left to free on error */
    break;
  }
  case DED_MSG_DECIDE: {
    ded_msg_decide m;
    rv = ded_msg_decide_decode(p, len, &fm.mem, &m);
    if (rv == 0) {
      assert_non_null(m.holders);
      ded_msg_decide_free(&m, &fm.mem);
    }
    assert_null(m.plan.members);
    assert_null(m.holders);
    break;
  }
  case DED_MSG_FETCH: {
    ded_msg_fetch m;
    return ded_msg_fetch_decode(p, len, &m);
  }
  case DED_MSG_HAVE: {
    ded_msg_have m;
    return ded_msg_have_decode(p, len, &m);
  }
  case DED_MSG_PROBE: {
    ded_msg_probe m;
    return ded_msg_probe_decode(p, len, &m);
  }
  case DED_MSG_ABSTAIN: {
    ded_msg_abstain m;
    return ded_msg_abstain_decode(p, len, &m);
  }
  case DED_MSG_REDIRECT: {
    ded_msg_redirect m;
    return ded_msg_redirect_decode(p, len, &m);
  }
  case DED_MSG_DATA:
  case DED_MSG_RESULT: {
    ded_msg_data m;
    return ded_msg_data_decode(p, len, &m);
  }
  case DED_MSG_LEAVE: {
    uint8_t reason;
    return ded_msg_leave_decode(p, len, &reason);
  }
  case DED_MSG_STALE: {
    ded_msg_stale m;
    return ded_msg_stale_decode(p, len, &m);
  }
  case DED_MSG_AHEAD: {
    ded_msg_stale m;
    return ded_msg_ahead_decode(p, len, &m);
  }
  case DED_MSG_STATE_ASK: {
    ded_msg_state_ask m;
    return ded_msg_state_ask_decode(p, len, &m);
  }
  case DED_MSG_STATE_OFFER: {
    ded_msg_state_offer m;
    rv = ded_msg_state_offer_decode(p, len, &m);
    /* The lineage stays in the payload: its ids and client bits end it. */
    if (rv == 0)
      assert_true(m.lin != NULL && m.lin >= p && m.lin + DED_LIN_BYTES(m.nlin) == p + len);
    return rv;
  }
  case DED_MSG_STATE_GET: {
    ded_msg_state_get m;
    return ded_msg_state_get_decode(p, len, &m);
  }
  case DED_MSG_STATE_DATA: {
    ded_msg_state_data m;
    return ded_msg_state_data_decode(p, len, &m);
  }
  case DED_MSG_SPEED: {
    ded_msg_speed m;
    return ded_msg_speed_decode(p, len, &m);
  }
  default: fail_msg("no decoder for type %u", type); return DED_ERR_INTERNAL;
  }
  if (fm.live != 0) fail_msg("%s decoder: %ld blocks not given back", ded_msg_name(type), fm.live);
  return rv;
}

/*
 * A valid payload of |type|: its decoder accepts it, and refuses every
 * shorter prefix and the payload with one byte more. Each attempt gets a
 * buffer of exactly its length, so that an over-read shows under ASan.
 * |min_valid| is the shortest length that may still decode (DATA's
 * element bytes make any longer prefix a valid DATA); 0 = only |len|.
 */
static void msg_check_bounds(uint8_t type, const uint8_t *payload, size_t len, size_t min_valid) {
  assert_int_equal(msg_decode_any(type, payload, len), 0);
  for (size_t cut = 0; cut < len; cut++) {
    uint8_t *copy = malloc(cut ? cut : 1);
    assert_non_null(copy);
    memcpy(copy, payload, cut);
    int rv = msg_decode_any(type, copy, cut);
    if (min_valid && cut >= min_valid)
      assert_int_equal(rv, 0);
    else if (rv >= 0)
      fail_msg("%s decoder accepted %zu of %zu bytes", ded_msg_name(type), cut, len);
    free(copy);
  }
  if (min_valid) return; /* a longer DATA is just more elements */
  uint8_t *longer = malloc(len + 1);
  assert_non_null(longer);
  memcpy(longer, payload, len);
  longer[len] = 0;
  assert_true(msg_decode_any(type, longer, len + 1) < 0);
  free(longer);
}

/* ------------------------------------------------------------- HELLO */

static size_t msg_hello_build(uint8_t *buf, size_t cap, const uint8_t *rec, size_t rec_len) {
  uint8_t run_id[DED_RUN_ID_BYTES];
  unit_run_id(run_id);
  ded_wr w = ded_wr_init(buf, cap);
  ded_msg_hello_encode(&w, run_id, rec, rec_len);
  assert_false(w.err);
  assert_int_equal(w.pos, DED_HELLO_FRAME_BYTES(rec_len));
  return w.pos;
}

static void test_msg_hello_round_trip(void **state) {
  (void)state;
  ded_ident id;
  unit_ident(&id, 1);
  ded_record rec;
  unit_record(&rec, &id, 5, 1000, 60000);
  uint8_t rb[DED_RECORD_BYTES_MAX];
  int rl = ded_record_encode(&rec, rb, sizeof rb);
  assert_true(rl > 0);
  uint8_t buf[MSG_BUF_BYTES];
  size_t n = msg_hello_build(buf, sizeof buf, rb, (size_t)rl);
  ded_frame fr = msg_unframe(buf, n, DED_MSG_HELLO);
  ded_msg_hello h;
  assert_int_equal(ded_msg_hello_decode(fr.payload, fr.len, &h), 0);
  assert_int_equal(h.version, DED_PROTO_VERSION);
  uint8_t run_id[DED_RUN_ID_BYTES];
  unit_run_id(run_id);
  assert_memory_equal(h.run_id, run_id, DED_RUN_ID_BYTES);
  assert_int_equal(h.rec_len, rl);
  assert_memory_equal(h.rec, rb, (size_t)rl);
  /* The record points into the payload: no copy. */
  assert_true(h.rec > fr.payload && h.rec + h.rec_len == fr.payload + fr.len);
  msg_check_bounds(DED_MSG_HELLO, fr.payload, fr.len, 0);
}

static void test_msg_hello_bad_magic_and_version(void **state) {
  (void)state;
  uint8_t rec[10] = {1, 2, 3};
  uint8_t buf[MSG_BUF_BYTES];
  size_t n = msg_hello_build(buf, sizeof buf, rec, sizeof rec);
  uint8_t *payload = buf + DED_FRAME_HDR_BYTES;
  size_t len = n - DED_FRAME_HDR_BYTES;
  ded_msg_hello h;
  for (size_t i = 0; i < DED_HELLO_MAGIC_LEN; i++) {
    payload[i] ^= 0x20;
    assert_int_equal(ded_msg_hello_decode(payload, len, &h), DED_ERR_PROTO);
    payload[i] ^= 0x20;
  }
  /* Versions other than ours, either side of it: a version 2 peer and a
   * version 3 one refuse each other at HELLO. */
  const uint16_t versions[] = {0, 1, 2, DED_PROTO_VERSION - 1, DED_PROTO_VERSION + 1,
                               0x100, 0xffff};
  for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++) {
    payload[DED_HELLO_MAGIC_LEN] = (uint8_t)versions[i];
    payload[DED_HELLO_MAGIC_LEN + 1] = (uint8_t)(versions[i] >> 8);
    assert_int_equal(ded_msg_hello_decode(payload, len, &h), DED_ERR_VERSION);
  }
  payload[DED_HELLO_MAGIC_LEN] = DED_PROTO_VERSION;
  payload[DED_HELLO_MAGIC_LEN + 1] = 0;
  assert_int_equal(ded_msg_hello_decode(payload, len, &h), 0);
}

static void test_msg_hello_record_too_long(void **state) {
  (void)state;
  static uint8_t rec[DED_RECORD_BYTES_MAX + 1];
  uint8_t buf[MSG_BUF_BYTES];
  size_t n = msg_hello_build(buf, sizeof buf, rec, DED_RECORD_BYTES_MAX);
  ded_msg_hello h;
  assert_int_equal(ded_msg_hello_decode(buf + DED_FRAME_HDR_BYTES, n - DED_FRAME_HDR_BYTES, &h), 0);
  n = msg_hello_build(buf, sizeof buf, rec, DED_RECORD_BYTES_MAX + 1);
  assert_int_equal(ded_msg_hello_decode(buf + DED_FRAME_HDR_BYTES, n - DED_FRAME_HDR_BYTES, &h),
                   DED_ERR_PROTO);
}

/* ----------------------------------------------------------- RECORDS */

static void test_msg_records_round_trip(void **state) {
  (void)state;
  /* Real records of different lengths, plus an empty one (the iterator
   * hands out bytes; judging them is ded_record_decode's job). */
  uint8_t recs[4][DED_RECORD_BYTES_MAX];
  size_t lens[4];
  for (int i = 0; i < 3; i++) {
    ded_ident id;
    unit_ident(&id, (uint8_t)(10 + i));
    ded_record rec;
    unit_record(&rec, &id, (uint64_t)i + 1, 1000, 60000);
    rec.naddr = (uint8_t)i;
    rec.ext_len = (uint16_t)(i * 50);
    ded_record_sign(&rec, &id);
    int n = ded_record_encode(&rec, recs[i], sizeof recs[i]);
    assert_true(n > 0);
    lens[i] = (size_t)n;
  }
  lens[3] = 0;
  uint8_t buf[MSG_BUF_BYTES];
  ded_wr w = ded_wr_init(buf, sizeof buf);
  ded_msg_records_wr rw;
  ded_msg_records_begin(&rw, &w);
  for (int i = 0; i < 4; i++) assert_int_equal(ded_msg_records_add(&rw, recs[i], lens[i]), 0);
  ded_msg_records_end(&rw);
  assert_false(w.err);
  ded_frame fr = msg_unframe(buf, w.pos, DED_MSG_RECORDS);
  ded_msg_records_rd it;
  assert_int_equal(ded_msg_records_begin_rd(&it, fr.payload, fr.len), 0);
  for (int i = 0; i < 4; i++) {
    const uint8_t *rec;
    size_t len;
    assert_int_equal(ded_msg_records_next(&it, &rec, &len), 1);
    assert_int_equal(len, lens[i]);
    if (len) assert_memory_equal(rec, recs[i], len);
    /* In place, no copy. */
    assert_true(rec >= fr.payload && rec + len <= fr.payload + fr.len);
  }
  const uint8_t *rec;
  size_t len;
  assert_int_equal(ded_msg_records_next(&it, &rec, &len), 0);
  assert_int_equal(ded_msg_records_next(&it, &rec, &len), 0);
  msg_check_bounds(DED_MSG_RECORDS, fr.payload, fr.len, 0);
}

static void test_msg_records_empty(void **state) {
  (void)state;
  uint8_t buf[64];
  ded_wr w = ded_wr_init(buf, sizeof buf);
  ded_msg_records_wr rw;
  ded_msg_records_begin(&rw, &w);
  ded_msg_records_end(&rw);
  ded_frame fr = msg_unframe(buf, w.pos, DED_MSG_RECORDS);
  assert_int_equal(fr.len, 2);
  unsigned n = 99;
  assert_int_equal(msg_records_walk(fr.payload, fr.len, &n), 0);
  assert_int_equal(n, 0);
}

/* The writer stops at DED_RECORDS_PER_FRAME_MAX and when the buffer is
 * full, writing nothing for the record it refuses. */
static void test_msg_records_writer_limits(void **state) {
  (void)state;
  uint8_t *buf = malloc(MSG_BUF_BYTES);
  assert_non_null(buf);
  ded_wr w = ded_wr_init(buf, MSG_BUF_BYTES);
  ded_msg_records_wr rw;
  ded_msg_records_begin(&rw, &w);
  uint8_t one = 0x42;
  for (int i = 0; i < DED_RECORDS_PER_FRAME_MAX; i++)
    assert_int_equal(ded_msg_records_add(&rw, &one, 1), 0);
  size_t pos = w.pos;
  assert_int_equal(ded_msg_records_add(&rw, &one, 1), -1);
  assert_int_equal(w.pos, pos);
  ded_msg_records_end(&rw);
  ded_frame fr = msg_unframe(buf, w.pos, DED_MSG_RECORDS);
  unsigned n = 0;
  assert_int_equal(msg_records_walk(fr.payload, fr.len, &n), 0);
  assert_int_equal(n, DED_RECORDS_PER_FRAME_MAX);

  /* A small buffer: 5 (header) + 2 (count) + 3 x (2 + 4) = 25 bytes. */
  uint8_t small[25], four[4] = {1, 2, 3, 4};
  w = ded_wr_init(small, sizeof small);
  ded_msg_records_begin(&rw, &w);
  for (int i = 0; i < 3; i++) assert_int_equal(ded_msg_records_add(&rw, four, 4), 0);
  assert_int_equal(w.pos, sizeof small);
  assert_int_equal(ded_msg_records_add(&rw, four, 1), -1);
  assert_false(w.err);
  ded_msg_records_end(&rw);
  fr = msg_unframe(small, w.pos, DED_MSG_RECORDS);
  assert_int_equal(msg_records_walk(fr.payload, fr.len, &n), 0);
  assert_int_equal(n, 3);
  free(buf);
}

static void test_msg_records_bad(void **state) {
  (void)state;
  /* More records than a frame may carry. */
  uint8_t too_many[2] = {(uint8_t)(DED_RECORDS_PER_FRAME_MAX + 1),
                         (uint8_t)((DED_RECORDS_PER_FRAME_MAX + 1) >> 8)};
  ded_msg_records_rd it;
  assert_int_equal(ded_msg_records_begin_rd(&it, too_many, sizeof too_many), DED_ERR_PROTO);
  /* A record longer than any record can be. */
  static uint8_t big[2 + 2 + DED_RECORD_BYTES_MAX + 1];
  big[0] = 1;
  big[2] = (uint8_t)(DED_RECORD_BYTES_MAX + 1);
  big[3] = (uint8_t)((DED_RECORD_BYTES_MAX + 1) >> 8);
  assert_int_equal(msg_records_walk(big, sizeof big, NULL), DED_ERR_PROTO);
  /* The longest allowed is fine. */
  big[2] = (uint8_t)DED_RECORD_BYTES_MAX;
  big[3] = (uint8_t)(DED_RECORD_BYTES_MAX >> 8);
  assert_int_equal(msg_records_walk(big, sizeof big - 1, NULL), 0);
  /* Count says 2 but only one is there. */
  uint8_t short_by_one[2 + 2 + 1] = {2, 0, 1, 0, 7};
  assert_int_equal(msg_records_walk(short_by_one, sizeof short_by_one, NULL), DED_ERR_PROTO);
  /* No count at all. */
  assert_int_equal(msg_records_walk(short_by_one, 1, NULL), DED_ERR_PROTO);
}

/* ------------------------------------------------------------ plans */

/* A valid plan (COMMIT body) of |k| members for |round|: ids in
 * increasing order, uneven weights and rank counts, shards of 10
 * elements, and an attempt and base that use every byte. Every fourth
 * member (3, 7, ...) is no acceptor, the last acceptor is the primary, and
 * one acceptor of the round is not listed (nacc counts it). Members 1, 6,
 * 11, ... are clients and 2, 7, 12, ... aux members (weight 0); member 0
 * is a node, so there is always a contributor. The contributions travel
 * as top-k (version 15), so that both codec fields are on the wire. Free
 * c->members with free(). */
static void msg_plan_make(ded_msg_commit *c, unsigned k, uint64_t round) {
  memset(c, 0, sizeof *c);
  c->round = round;
  c->attempt = (uint64_t)3 << 32 | 0xa1b2c3d4u;
  c->base = 0x0807060504030201ull;
  c->dtype = DED_DTYPE_F32;
  c->count = 10 * (uint64_t)k;
  c->chunk_elems = 16;
  c->codec = DED_CODEC_TOPK;
  c->codec_ppm = 12345;
  c->k = (uint16_t)k;
  c->members = calloc(k ? k : 1, sizeof *c->members);
  assert_non_null(c->members);
  for (unsigned i = 0; i < k; i++) {
    memset(c->members[i].id, 0x5a, DED_ID_BYTES);
    c->members[i].id[0] = (uint8_t)((i + 1) >> 8);
    c->members[i].id[1] = (uint8_t)(i + 1);
    c->members[i].weight = 1.0 + (double)(i % 3);
    c->members[i].n_local = i % 4 + 1;
    c->members[i].shard_off = 10 * (uint64_t)i;
    if (i % 4 != 3) {
      c->members[i].flags = DED_MEMBER_F_ACCEPTOR;
      c->nacc++;
    }
    if (i % 5 == 1) c->members[i].flags |= DED_MEMBER_F_CLIENT;
    if (i % 5 == 2) {
      c->members[i].flags |= DED_MEMBER_F_AUX;
      c->members[i].weight = 0.0;
    }
  }
  if (k > 0) c->members[k - 1 - (k % 4 == 0)].flags |= DED_MEMBER_F_PRIMARY;
  c->nacc++;
}

/* Every field of |got| equals |want|'s, members included. */
static void msg_plan_equal(const ded_msg_commit *got, const ded_msg_commit *want) {
  assert_int_equal(got->round, want->round);
  assert_int_equal(got->attempt, want->attempt);
  assert_int_equal(got->base, want->base);
  assert_int_equal(got->dtype, want->dtype);
  assert_int_equal(got->count, want->count);
  assert_int_equal(got->chunk_elems, want->chunk_elems);
  assert_int_equal(got->codec, want->codec);
  assert_int_equal(got->codec_ppm, want->codec_ppm);
  assert_int_equal(got->k, want->k);
  assert_int_equal(got->nacc, want->nacc);
  for (unsigned i = 0; i < want->k; i++) {
    assert_memory_equal(got->members[i].id, want->members[i].id, DED_ID_BYTES);
    assert_memory_equal(&got->members[i].weight, &want->members[i].weight, sizeof(double));
    assert_int_equal(got->members[i].n_local, want->members[i].n_local);
    assert_int_equal(got->members[i].shard_off, want->members[i].shard_off);
    assert_int_equal(got->members[i].flags, want->members[i].flags);
  }
}

/* -------------------------------------------------------------- JOIN */

static ded_msg_join msg_join_valid(void) {
  ded_msg_join j;
  memset(&j, 0, sizeof j);
  j.round = 0x0102030405060708ull;
  j.view = 0x11223344u;
  j.dtype = DED_DTYPE_F64;
  j.count = 123456;
  j.pos = 0x0a0b0c0d0e0full;
  j.step = 0x1b2c3d4e5full;
  j.weight = 2.5;
  j.n_local = 4;
  j.flags = DED_JOIN_F_GENESIS;
  return j;
}

static size_t msg_join_build(uint8_t *buf, const ded_msg_join *j) {
  ded_wr w = ded_wr_init(buf, DED_JOIN_FRAME_BYTES);
  ded_msg_join_encode(&w, j);
  assert_false(w.err);
  assert_int_equal(w.pos, DED_JOIN_FRAME_BYTES);
  return w.pos;
}

static int msg_join_try(const ded_msg_join *j) {
  uint8_t buf[DED_JOIN_FRAME_BYTES];
  msg_join_build(buf, j);
  return msg_decode_any(DED_MSG_JOIN, buf + DED_FRAME_HDR_BYTES,
                        DED_JOIN_FRAME_BYTES - DED_FRAME_HDR_BYTES);
}

static void test_msg_join_round_trip(void **state) {
  (void)state;
  ded_msg_join j = msg_join_valid();
  /* Version 15: auto compression down to top-k 1%, and the trainer's
   * compute time. */
  j.compress = DED_CODEC_TOPK | DED_JOIN_COMPRESS_AUTO;
  j.compress_ppm = 10000;
  j.compute_us = 0x0a0b0c0du;
  uint8_t buf[DED_JOIN_FRAME_BYTES];
  msg_join_build(buf, &j);
  ded_frame fr = msg_unframe(buf, sizeof buf, DED_MSG_JOIN);
  assert_int_equal(fr.len, JOIN_BASE_BYTES);
  /* The layout of ded_msg.h: the view right after the round. */
  assert_int_equal(msg_le(fr.payload, 8), j.round);
  assert_int_equal(msg_le(fr.payload + JOIN_OFF_VIEW, 4), j.view);
  assert_int_equal(msg_le(fr.payload + JOIN_OFF_POS, 8), j.pos);
  assert_int_equal(msg_le(fr.payload + JOIN_OFF_STEP, 8), j.step);
  /* compress | compress_ppm | compute_us between n_local and the flags. */
  assert_int_equal(msg_le(fr.payload + JOIN_OFF_COMPRESS - 4, 4), j.n_local);
  assert_int_equal(fr.payload[JOIN_OFF_COMPRESS], DED_CODEC_TOPK | DED_JOIN_COMPRESS_AUTO);
  assert_int_equal(msg_le(fr.payload + JOIN_OFF_COMPRESS_PPM, 4), 10000);
  assert_int_equal(msg_le(fr.payload + JOIN_OFF_COMPUTE_US, 4), 0x0a0b0c0du);
  assert_int_equal(fr.payload[JOIN_OFF_FLAGS], DED_JOIN_F_GENESIS);
  ded_msg_join out;
  assert_int_equal(ded_msg_join_decode(fr.payload, fr.len, NULL, &out), 0);
  assert_int_equal(out.round, j.round);
  assert_int_equal(out.view, j.view);
  assert_int_equal(out.dtype, j.dtype);
  assert_int_equal(out.count, j.count);
  assert_int_equal(out.pos, j.pos);
  assert_int_equal(out.step, j.step);
  assert_memory_equal(&out.weight, &j.weight, sizeof j.weight);
  assert_int_equal(out.n_local, j.n_local);
  assert_int_equal(out.compress, DED_CODEC_TOPK | DED_JOIN_COMPRESS_AUTO);
  assert_int_equal(out.compress_ppm, 10000);
  assert_int_equal(out.compute_us, 0x0a0b0c0du);
  assert_int_equal(out.flags, j.flags);
  assert_null(out.plan.members);
  assert_null(out.have);
  ded_msg_join_free(&out, NULL);
  msg_check_bounds(DED_MSG_JOIN, fr.payload, fr.len, 0);
  /* The other dtype, no flags, zero weight, the largest count, view 0. */
  j.dtype = DED_DTYPE_F32;
  j.flags = 0;
  j.weight = 0.0;
  j.count = DED_COUNT_MAX;
  j.view = 0;
  assert_int_equal(msg_join_try(&j), 0);
  /* The largest view and weight; an intent. */
  j.view = UINT32_MAX;
  j.weight = DED_WEIGHT_MAX;
  j.flags = DED_JOIN_F_INTENT;
  assert_int_equal(msg_join_try(&j), 0);
  j.flags = DED_JOIN_F_INTENT | DED_JOIN_F_GENESIS;
  assert_int_equal(msg_join_try(&j), 0);
}

/* The plain encoder never claims a status it does not carry, nor DONE,
 * which only a status may carry. */
static void test_msg_join_plain_encoder_drops_status(void **state) {
  (void)state;
  const uint8_t in[] = {DED_JOIN_F_GENESIS | DED_JOIN_F_STATUS,
                        DED_JOIN_F_GENESIS | DED_JOIN_F_DONE,
                        DED_JOIN_F_GENESIS | DED_JOIN_F_STATUS | DED_JOIN_F_DONE};
  for (size_t i = 0; i < sizeof in; i++) {
    ded_msg_join j = msg_join_valid();
    j.flags = in[i];
    j.acc_view = 7; /* not on the wire without status */
    uint8_t buf[DED_JOIN_FRAME_BYTES];
    msg_join_build(buf, &j);
    ded_frame fr = msg_unframe(buf, sizeof buf, DED_MSG_JOIN);
    assert_int_equal(fr.payload[JOIN_OFF_FLAGS], DED_JOIN_F_GENESIS);
    ded_msg_join out;
    assert_int_equal(ded_msg_join_decode(fr.payload, fr.len, NULL, &out), 0);
    assert_int_equal(out.flags, DED_JOIN_F_GENESIS);
    assert_null(out.plan.members);
    ded_msg_join_free(&out, NULL);
  }
}

static void test_msg_join_invalid(void **state) {
  (void)state;
  /* Every flag byte, written as is: only GENESIS, INTENT, CLIENT and AUX
   * may stand without a status tail, CLIENT and AUX not together; STATUS
   * without one is short, DONE is refused without STATUS, and unknown
   * bits (64, 128) are refused. */
  ded_msg_join j = msg_join_valid();
  uint8_t buf[DED_JOIN_FRAME_BYTES];
  msg_join_build(buf, &j);
  uint8_t *payload = buf + DED_FRAME_HDR_BYTES;
  unsigned accepted = 0;
  for (unsigned f = 0; f < 256; f++) {
    payload[JOIN_OFF_FLAGS] = (uint8_t)f;
    const unsigned plain =
        DED_JOIN_F_GENESIS | DED_JOIN_F_INTENT | DED_JOIN_F_CLIENT | DED_JOIN_F_AUX;
    const unsigned both = DED_JOIN_F_CLIENT | DED_JOIN_F_AUX;
    int want = (f & ~plain) || (f & both) == both ? DED_ERR_PROTO : 0;
    if (msg_decode_any(DED_MSG_JOIN, payload, JOIN_BASE_BYTES) != want)
      fail_msg("JOIN with flags 0x%02x: want %d", f, want);
    accepted += want == 0;
  }
  /* GENESIS x INTENT x {none, CLIENT, AUX}. */
  assert_int_equal(accepted, 12);
  /* DONE alone, or with the flags that may stand without status. */
  const uint8_t done[] = {DED_JOIN_F_DONE, DED_JOIN_F_DONE | DED_JOIN_F_GENESIS,
                          DED_JOIN_F_DONE | DED_JOIN_F_INTENT, DED_JOIN_F_DONE | DED_JOIN_F_CLIENT,
                          DED_JOIN_F_DONE | DED_JOIN_F_AUX};
  for (size_t i = 0; i < sizeof done; i++) {
    payload[JOIN_OFF_FLAGS] = done[i];
    assert_int_equal(msg_decode_any(DED_MSG_JOIN, payload, JOIN_BASE_BYTES), DED_ERR_PROTO);
  }
  /* ... and with an acc_view after it, as if a status were there. */
  uint8_t longer[JOIN_BASE_BYTES + 4];
  memcpy(longer, payload, JOIN_BASE_BYTES);
  msg_put_le(longer + JOIN_OFF_ACC_VIEW, 0, 4);
  longer[JOIN_OFF_FLAGS] = DED_JOIN_F_DONE;
  assert_int_equal(msg_decode_any(DED_MSG_JOIN, longer, sizeof longer), DED_ERR_PROTO);
  const uint8_t dtypes[] = {0, 3, 255};
  for (size_t i = 0; i < sizeof dtypes; i++) {
    j = msg_join_valid();
    j.dtype = dtypes[i];
    assert_int_equal(msg_join_try(&j), DED_ERR_PROTO);
  }
  j = msg_join_valid();
  j.count = 0;
  assert_int_equal(msg_join_try(&j), DED_ERR_PROTO);
  j.count = DED_COUNT_MAX + 1;
  assert_int_equal(msg_join_try(&j), DED_ERR_PROTO);
  j = msg_join_valid();
  j.pos = DED_POS_MAX;
  assert_int_equal(msg_join_try(&j), 0);
  j.pos = DED_POS_MAX + 1;
  assert_int_equal(msg_join_try(&j), DED_ERR_PROTO);
  j = msg_join_valid();
  j.step = DED_POS_MAX;
  assert_int_equal(msg_join_try(&j), 0);
  j.step = DED_POS_MAX + 1;
  assert_int_equal(msg_join_try(&j), DED_ERR_PROTO);
  j = msg_join_valid();
  const double weights[] = {-1.0, -1e-300, NAN, INFINITY, -INFINITY, DED_WEIGHT_MAX * 2};
  for (size_t i = 0; i < sizeof weights / sizeof weights[0]; i++) {
    j.weight = weights[i];
    assert_int_equal(msg_join_try(&j), DED_ERR_PROTO);
  }
  j = msg_join_valid();
  j.n_local = 0;
  assert_int_equal(msg_join_try(&j), DED_ERR_PROTO);
}

/* A JOIN with status: |plan| and |have|, into a fresh buffer of exactly
 * the frame's size; the caller frees it. */
static uint8_t *msg_join_status_build(const ded_msg_join *j, const ded_msg_commit *plan,
                                      const uint8_t *have, size_t *len) {
  size_t cap = DED_JOIN_STATUS_FRAME_BYTES(plan->k);
  uint8_t *buf = malloc(cap);
  assert_non_null(buf);
  ded_wr w = ded_wr_init(buf, cap);
  ded_msg_join_status_encode(&w, j, plan, have);
  assert_false(w.err);
  assert_int_equal(w.pos, cap);
  *len = cap;
  return buf;
}

static int msg_join_status_try(const ded_msg_join *j, const ded_msg_commit *plan,
                               const uint8_t *have) {
  size_t len;
  uint8_t *buf = msg_join_status_build(j, plan, have, &len);
  int rv = msg_decode_any(DED_MSG_JOIN, buf + DED_FRAME_HDR_BYTES, len - DED_FRAME_HDR_BYTES);
  free(buf);
  return rv;
}

/* A failover report: the view the attempt was accepted in, the attempt
 * as a COMMIT body, then one bit per shard, for memberships on both sides
 * of a byte boundary; every other report says it completed the round. */
static void test_msg_join_status_round_trip(void **state) {
  (void)state;
  const unsigned ks[] = {1, 3, 7, 8, 9, 16, 17};
  const uint32_t acc_views[] = {0, DED_VIEW_NONE, 1, 0x80000000u, DED_VIEW_NONE - 1, 0x01020304u,
                                DED_VIEW_NONE};
  for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
    unsigned k = ks[t];
    ded_msg_join j = msg_join_valid();
    j.acc_view = acc_views[t];
    const uint8_t done = t % 2 ? DED_JOIN_F_DONE : 0;
    j.flags |= done;
    ded_msg_commit plan;
    msg_plan_make(&plan, k, j.round);
    uint8_t have[4] = {0};
    size_t nb = (k + 7) / 8;
    for (unsigned s = 0; s < k; s++)
      if (s % 3 != 1) have[s / 8] |= (uint8_t)(1u << (s % 8));
    size_t len;
    uint8_t *buf = msg_join_status_build(&j, &plan, have, &len);
    assert_int_equal(len, DED_JOIN_FRAME_BYTES + 4 + DED_COMMIT_BODY_BYTES(k) + nb);
    ded_frame fr = msg_unframe(buf, len, DED_MSG_JOIN);
    assert_int_equal(fr.payload[JOIN_OFF_FLAGS], DED_JOIN_F_GENESIS | DED_JOIN_F_STATUS | done);
    /* The status: acc_view, then a COMMIT body, byte for byte. */
    assert_int_equal(msg_le(fr.payload + JOIN_OFF_ACC_VIEW, 4), j.acc_view);
    size_t clen;
    uint8_t *cf = unit_commit_frame(&plan, &clen);
    assert_memory_equal(fr.payload + JOIN_OFF_PLAN, cf + DED_FRAME_HDR_BYTES,
                        clen - DED_FRAME_HDR_BYTES);
    free(cf);
    unit_failmem fm;
    unit_failmem_init(&fm, -1);
    ded_msg_join out;
    assert_int_equal(ded_msg_join_decode(fr.payload, fr.len, &fm.mem, &out), 0);
    assert_int_equal(out.flags, DED_JOIN_F_GENESIS | DED_JOIN_F_STATUS | done);
    assert_int_equal(out.round, j.round);
    assert_int_equal(out.view, j.view);
    assert_int_equal(out.count, j.count);
    assert_int_equal(out.acc_view, j.acc_view);
    msg_plan_equal(&out.plan, &plan);
    /* The bitmap stays in the payload, after the body. */
    assert_ptr_equal(out.have, fr.payload + JOIN_OFF_PLAN + DED_COMMIT_BODY_BYTES(k));
    assert_memory_equal(out.have, have, nb);
    assert_int_equal(fm.live, 1);
    ded_msg_join_free(&out, &fm.mem);
    assert_null(out.plan.members);
    assert_null(out.have);
    assert_int_equal(fm.live, 0);
    msg_check_bounds(DED_MSG_JOIN, fr.payload, fr.len, 0);

    /* Every other flag combination with STATUS (a client's or an aux
     * member's report included). */
    const uint8_t others[] = {0,
                              DED_JOIN_F_INTENT,
                              DED_JOIN_F_INTENT | DED_JOIN_F_GENESIS,
                              DED_JOIN_F_DONE,
                              DED_JOIN_F_DONE | DED_JOIN_F_INTENT,
                              DED_JOIN_F_DONE | DED_JOIN_F_INTENT | DED_JOIN_F_GENESIS,
                              DED_JOIN_F_CLIENT,
                              DED_JOIN_F_AUX,
                              DED_JOIN_F_DONE | DED_JOIN_F_CLIENT,
                              DED_JOIN_F_DONE | DED_JOIN_F_AUX | DED_JOIN_F_INTENT};
    for (size_t i = 0; i < sizeof others; i++) {
      j.flags = others[i];
      assert_int_equal(msg_join_status_try(&j, &plan, have), 0);
    }
    j = msg_join_valid();
    /* All shards held, and none. */
    uint8_t all[4] = {0};
    for (unsigned s = 0; s < k; s++) all[s / 8] |= (uint8_t)(1u << (s % 8));
    assert_int_equal(msg_join_status_try(&j, &plan, all), 0);
    uint8_t none[4] = {0};
    assert_int_equal(msg_join_status_try(&j, &plan, none), 0);

    /* Without the STATUS flag the tail is trailing garbage, with DONE or
     * without. */
    buf[DED_FRAME_HDR_BYTES + JOIN_OFF_FLAGS] = DED_JOIN_F_GENESIS | DED_JOIN_F_DONE;
    assert_int_equal(msg_decode_any(DED_MSG_JOIN, fr.payload, fr.len), DED_ERR_PROTO);
    buf[DED_FRAME_HDR_BYTES + JOIN_OFF_FLAGS] = DED_JOIN_F_GENESIS;
    assert_int_equal(msg_decode_any(DED_MSG_JOIN, fr.payload, fr.len), DED_ERR_PROTO);
    free(buf);
    free(plan.members);
  }
}

static void test_msg_join_status_invalid(void **state) {
  (void)state;
  const unsigned ks[] = {1, 3, 7, 9, 15};
  for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
    unsigned k = ks[t];
    ded_msg_join j = msg_join_valid();
    ded_msg_commit plan;
    msg_plan_make(&plan, k, j.round);
    size_t nb = (k + 7) / 8;
    /* Each unused high bit of the last bitmap byte, alone or with all the
     * used ones, is refused. */
    for (unsigned b = k % 8; b < 8; b++) {
      uint8_t have[2] = {0, 0};
      have[nb - 1] = (uint8_t)(1u << b);
      if (msg_join_status_try(&j, &plan, have) != DED_ERR_PROTO)
        fail_msg("k=%u: unused bit %u accepted", k, b);
      memset(have, 0xff, nb);
      if (msg_join_status_try(&j, &plan, have) != DED_ERR_PROTO)
        fail_msg("k=%u: all bits set accepted", k);
    }
    uint8_t have[2] = {1, 0};
    assert_int_equal(msg_join_status_try(&j, &plan, have), 0);
    /* The attempt reported must be of the round joined. */
    plan.round = j.round + 1;
    assert_int_equal(msg_join_status_try(&j, &plan, have), DED_ERR_PROTO);
    plan.round = j.round - 1;
    assert_int_equal(msg_join_status_try(&j, &plan, have), DED_ERR_PROTO);
    plan.round = j.round;
    /* A body that breaks the COMMIT invariants. */
    if (k > 1) {
      memcpy(plan.members[1].id, plan.members[0].id, DED_ID_BYTES);
      assert_int_equal(msg_join_status_try(&j, &plan, have), DED_ERR_PROTO);
      plan.members[1].id[1]++;
      assert_int_equal(msg_join_status_try(&j, &plan, have), 0);
    }
    plan.chunk_elems = 1;
    assert_int_equal(msg_join_status_try(&j, &plan, have), DED_ERR_PROTO);
    plan.chunk_elems = 16;
    plan.members[0].shard_off = 1;
    assert_int_equal(msg_join_status_try(&j, &plan, have), DED_ERR_PROTO);
    plan.members[0].shard_off = 0;
    /* ... or the rules of acceptors: an unknown member flag, nacc short
     * of the acceptors listed, none listed. */
    plan.members[k - 1].flags |= 0x80;
    assert_int_equal(msg_join_status_try(&j, &plan, have), DED_ERR_PROTO);
    plan.members[k - 1].flags &= (uint8_t)~0x80;
    uint16_t nacc = plan.nacc;
    plan.nacc = (uint16_t)(nacc - 2); /* one less than listed */
    assert_int_equal(msg_join_status_try(&j, &plan, have), DED_ERR_PROTO);
    plan.nacc = nacc;
    uint8_t f0 = plan.members[0].flags;
    for (unsigned i = 0; i < k; i++) plan.members[i].flags = 0;
    assert_int_equal(msg_join_status_try(&j, &plan, have), DED_ERR_PROTO);
    plan.members[0].flags = f0;
    for (unsigned i = 1; i < k; i++) plan.members[i].flags = i % 4 != 3 ? DED_MEMBER_F_ACCEPTOR : 0;
    plan.members[k - 1 - (k % 4 == 0)].flags |= DED_MEMBER_F_PRIMARY;
    assert_int_equal(msg_join_status_try(&j, &plan, have), 0);
    /* Any acc_view decodes: the engine judges it. */
    j.acc_view = DED_VIEW_NONE;
    assert_int_equal(msg_join_status_try(&j, &plan, have), 0);
    j.acc_view = 0;
    assert_int_equal(msg_join_status_try(&j, &plan, have), 0);
    /* The JOIN's own fields are still checked. */
    j.n_local = 0;
    assert_int_equal(msg_join_status_try(&j, &plan, have), DED_ERR_PROTO);
    j = msg_join_valid();
    /* A bitmap sized for another membership: a byte short or a byte over. */
    size_t len;
    uint8_t *buf = msg_join_status_build(&j, &plan, have, &len);
    uint8_t *payload = buf + DED_FRAME_HDR_BYTES;
    size_t plen = len - DED_FRAME_HDR_BYTES;
    assert_int_equal(msg_decode_any(DED_MSG_JOIN, payload, plen - 1), DED_ERR_PROTO);
    uint8_t *longer = malloc(plen + 1);
    assert_non_null(longer);
    memcpy(longer, payload, plen);
    longer[plen] = 0;
    assert_int_equal(msg_decode_any(DED_MSG_JOIN, longer, plen + 1), DED_ERR_PROTO);
    free(longer);
    /* k in the body saying one member more or fewer than are there. */
    uint8_t *kf = payload + JOIN_OFF_PLAN + COMMIT_OFF_K;
    assert_int_equal(msg_le(kf, 2), k);
    msg_put_le(kf, k + 1, 2);
    assert_int_equal(msg_decode_any(DED_MSG_JOIN, payload, plen), DED_ERR_PROTO);
    msg_put_le(kf, k - 1, 2);
    assert_int_equal(msg_decode_any(DED_MSG_JOIN, payload, plen), DED_ERR_PROTO);
    free(buf);
    free(plan.members);
  }
}

/*
 * Version 6: a JOIN says what its sender is, a client (DEDMPI_MODE=client,
 * it accepts no connections) or an aux peer (it reduces, brings no
 * vector), at most one of the two, with or without a status; the flags
 * survive a round trip and the plain encoder keeps them.
 */
/* DED_JOIN_F_VOID: the round of the voucher's last result and its
 * attempt, right after the flags; round trips, and every field judged. */
static void test_msg_join_void(void **state) {
  (void)state;
  assert_int_equal(DED_JOIN_F_VOID, 64);
  ded_msg_join j = msg_join_valid();
  j.flags = DED_JOIN_F_VOID | DED_JOIN_F_AUX;
  j.round = 1000;
  j.void_round = 997;
  j.void_attempt = 0x300000abcdull;
  uint8_t buf[DED_JOIN_FRAME_BYTES + DED_JOIN_VOID_BYTES];
  ded_wr w = ded_wr_init(buf, sizeof buf);
  ded_msg_join_encode(&w, &j);
  assert_false(w.err);
  assert_int_equal(w.pos, sizeof buf);
  ded_frame fr = msg_unframe(buf, sizeof buf, DED_MSG_JOIN);
  assert_int_equal(fr.len, JOIN_BASE_BYTES + DED_JOIN_VOID_BYTES);
  assert_int_equal(fr.payload[JOIN_OFF_FLAGS], DED_JOIN_F_VOID | DED_JOIN_F_AUX);
  assert_int_equal(msg_le(fr.payload + JOIN_BASE_BYTES, 8), 997);
  assert_int_equal(msg_le(fr.payload + JOIN_BASE_BYTES + 8, 8), 0x300000abcdull);
  ded_msg_join out;
  assert_int_equal(ded_msg_join_decode(fr.payload, fr.len, NULL, &out), 0);
  assert_int_equal(out.flags, DED_JOIN_F_VOID | DED_JOIN_F_AUX);
  assert_int_equal(out.void_round, 997);
  assert_int_equal(out.void_attempt, 0x300000abcdull);
  ded_msg_join_free(&out, NULL);
  msg_check_bounds(DED_MSG_JOIN, fr.payload, fr.len, 0);
  /* Without the flag, no fields: a frame that has them is too long. */
  uint8_t *flags = (uint8_t *)fr.payload + JOIN_OFF_FLAGS;
  *flags = DED_JOIN_F_AUX;
  assert_int_equal(ded_msg_join_decode(fr.payload, fr.len, NULL, &out), DED_ERR_PROTO);
  *flags = DED_JOIN_F_VOID | DED_JOIN_F_AUX;
  /* A result at or after the round before (nothing between to vouch for),
   * a wrapped round, attempt 0; with a first round's or an intent's flag. */
  const struct {
    uint64_t round, void_round, attempt;
    uint8_t more;
  } bad[] = {
      {1000, 999, 1, 0},         {1000, 1000, 1, 0}, {1000, 5000, 1, 0},
      {1000, UINT64_MAX, 1, 0},  {1000, 10, 0, 0},   {1000, 10, 1, DED_JOIN_F_GENESIS},
      {1000, 10, 1, DED_JOIN_F_INTENT}, {1, 0, 1, 0},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    j = msg_join_valid();
    j.round = bad[i].round;
    j.void_round = bad[i].void_round;
    j.void_attempt = bad[i].attempt;
    j.flags = (uint8_t)(DED_JOIN_F_VOID | bad[i].more);
    w = ded_wr_init(buf, sizeof buf);
    ded_msg_join_encode(&w, &j);
    assert_false(w.err);
    fr = msg_unframe(buf, sizeof buf, DED_MSG_JOIN);
    if (ded_msg_join_decode(fr.payload, fr.len, NULL, &out) != DED_ERR_PROTO)
      fail_msg("JOIN with VOID case %zu accepted", i);
  }
  /* With a failover report: the void fields come first, then the report. */
  {
    ded_msg_commit plan;
    msg_plan_make(&plan, 3, 1000);
    ded_msg_join js = msg_join_valid();
    js.round = 1000;
    js.flags = DED_JOIN_F_VOID;
    js.void_round = 990;
    js.void_attempt = 5;
    js.acc_view = DED_VIEW_NONE;
    const uint8_t have[1] = {0x05};
    size_t cap = DED_JOIN_STATUS_FRAME_BYTES(plan.k) + DED_JOIN_VOID_BYTES;
    uint8_t *sb = malloc(cap);
    assert_non_null(sb);
    w = ded_wr_init(sb, cap);
    ded_msg_join_status_encode(&w, &js, &plan, have);
    assert_false(w.err);
    assert_int_equal(w.pos, cap);
    fr = msg_unframe(sb, cap, DED_MSG_JOIN);
    assert_int_equal(msg_le(fr.payload + JOIN_BASE_BYTES, 8), 990);
    assert_int_equal(ded_msg_join_decode(fr.payload, fr.len, NULL, &out), 0);
    assert_int_equal(out.flags, DED_JOIN_F_VOID | DED_JOIN_F_STATUS);
    assert_int_equal(out.void_round, 990);
    assert_int_equal(out.void_attempt, 5);
    assert_int_equal(out.plan.k, plan.k);
    assert_int_equal(out.have[0], 0x05);
    ded_msg_join_free(&out, NULL);
    msg_check_bounds(DED_MSG_JOIN, fr.payload, fr.len, 0);
    free(sb);
    free(plan.members);
  }
  /* The smallest gap: one round between. */
  j = msg_join_valid();
  j.flags = DED_JOIN_F_VOID;
  j.round = 2;
  j.void_round = 0;
  j.void_attempt = 7;
  w = ded_wr_init(buf, sizeof buf);
  ded_msg_join_encode(&w, &j);
  fr = msg_unframe(buf, sizeof buf, DED_MSG_JOIN);
  assert_int_equal(ded_msg_join_decode(fr.payload, fr.len, NULL, &out), 0);
  ded_msg_join_free(&out, NULL);
}

/* DED_JOIN_F_HELD: the newest result the out-of-step member holds, as
 * its round + 1 (0: none) and attempt (0: not known), in VOID's slots;
 * never with VOID, a first round's or an intent's flag; at most the
 * round before's. */
static void test_msg_join_held(void **state) {
  (void)state;
  assert_int_equal(DED_JOIN_F_HELD, 128);
  ded_msg_join j = msg_join_valid();
  j.flags = DED_JOIN_F_HELD | DED_JOIN_F_CLIENT;
  j.round = 1000;
  j.held_round = 998; /* round 997's result */
  j.held_attempt = 0x200000beefull;
  uint8_t buf[DED_JOIN_FRAME_BYTES + DED_JOIN_VOID_BYTES];
  ded_wr w = ded_wr_init(buf, sizeof buf);
  ded_msg_join_encode(&w, &j);
  assert_false(w.err);
  assert_int_equal(w.pos, sizeof buf);
  ded_frame fr = msg_unframe(buf, sizeof buf, DED_MSG_JOIN);
  assert_int_equal(fr.len, JOIN_BASE_BYTES + DED_JOIN_VOID_BYTES);
  assert_int_equal(fr.payload[JOIN_OFF_FLAGS], DED_JOIN_F_HELD | DED_JOIN_F_CLIENT);
  assert_int_equal(msg_le(fr.payload + JOIN_BASE_BYTES, 8), 998);
  assert_int_equal(msg_le(fr.payload + JOIN_BASE_BYTES + 8, 8), 0x200000beefull);
  ded_msg_join out;
  assert_int_equal(ded_msg_join_decode(fr.payload, fr.len, NULL, &out), 0);
  assert_int_equal(out.flags, DED_JOIN_F_HELD | DED_JOIN_F_CLIENT);
  assert_int_equal(out.held_round, 998);
  assert_int_equal(out.held_attempt, 0x200000beefull);
  assert_int_equal(out.void_round, 0); /* not a voucher */
  ded_msg_join_free(&out, NULL);
  msg_check_bounds(DED_MSG_JOIN, fr.payload, fr.len, 0);
  /* Good: none at all; the round before's result with its attempt
   * unknown (a loaded state); the smallest round. */
  const struct {
    uint64_t round, held_round, attempt;
  } good[] = {{1000, 0, 0}, {1000, 999, 0}, {1, 0, 0}};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    j = msg_join_valid();
    j.flags = DED_JOIN_F_HELD;
    j.round = good[i].round;
    j.held_round = good[i].held_round;
    j.held_attempt = good[i].attempt;
    w = ded_wr_init(buf, sizeof buf);
    ded_msg_join_encode(&w, &j);
    fr = msg_unframe(buf, sizeof buf, DED_MSG_JOIN);
    if (ded_msg_join_decode(fr.payload, fr.len, NULL, &out) != 0)
      fail_msg("JOIN with HELD case %zu refused", i);
    assert_int_equal(out.held_round, good[i].held_round);
    ded_msg_join_free(&out, NULL);
  }
  /* Bad: the round itself or later, none with an attempt, with VOID, a
   * first round's or an intent's flag. */
  const struct {
    uint64_t round, held_round, attempt;
    uint8_t more;
  } bad[] = {
      {1000, 1000, 1, 0}, {1000, UINT64_MAX, 1, 0}, {1000, 0, 5, 0},
      {1000, 10, 1, DED_JOIN_F_GENESIS}, {1000, 10, 1, DED_JOIN_F_INTENT},
      {1000, 10, 1, DED_JOIN_F_VOID}, {0, 0, 0, 0},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    j = msg_join_valid();
    j.round = bad[i].round;
    j.held_round = bad[i].held_round;
    j.held_attempt = bad[i].attempt;
    j.void_round = 1; /* (VOID's own slots: the case with both flags) */
    j.void_attempt = 1;
    j.flags = (uint8_t)(DED_JOIN_F_HELD | bad[i].more);
    w = ded_wr_init(buf, sizeof buf);
    ded_msg_join_encode(&w, &j);
    assert_false(w.err);
    fr = msg_unframe(buf, sizeof buf, DED_MSG_JOIN);
    if (ded_msg_join_decode(fr.payload, fr.len, NULL, &out) != DED_ERR_PROTO)
      fail_msg("JOIN with HELD case %zu accepted", i);
  }
}

static void test_msg_join_modes(void **state) {
  (void)state;
  assert_int_equal(DED_JOIN_F_CLIENT, 16);
  assert_int_equal(DED_JOIN_F_AUX, 32);
  const uint8_t ok[] = {DED_JOIN_F_CLIENT,
                        DED_JOIN_F_AUX,
                        DED_JOIN_F_CLIENT | DED_JOIN_F_GENESIS,
                        DED_JOIN_F_AUX | DED_JOIN_F_GENESIS,
                        DED_JOIN_F_CLIENT | DED_JOIN_F_INTENT,
                        DED_JOIN_F_AUX | DED_JOIN_F_INTENT | DED_JOIN_F_GENESIS};
  for (size_t i = 0; i < sizeof ok; i++) {
    ded_msg_join j = msg_join_valid();
    j.flags = ok[i];
    uint8_t buf[DED_JOIN_FRAME_BYTES];
    msg_join_build(buf, &j);
    ded_frame fr = msg_unframe(buf, sizeof buf, DED_MSG_JOIN);
    assert_int_equal(fr.len, JOIN_BASE_BYTES);
    assert_int_equal(fr.payload[JOIN_OFF_FLAGS], ok[i]);
    ded_msg_join out;
    assert_int_equal(ded_msg_join_decode(fr.payload, fr.len, NULL, &out), 0);
    assert_int_equal(out.flags, ok[i]);
    assert_null(out.plan.members);
    ded_msg_join_free(&out, NULL);
    msg_check_bounds(DED_MSG_JOIN, fr.payload, fr.len, 0);
    /* The plain encoder drops STATUS and DONE, never what the sender is. */
    j.flags = (uint8_t)(ok[i] | DED_JOIN_F_STATUS | DED_JOIN_F_DONE);
    msg_join_build(buf, &j);
    assert_int_equal(buf[DED_FRAME_HDR_BYTES + JOIN_OFF_FLAGS], ok[i]);
  }

  /* Both at once: refused, whatever else the flags say. */
  const uint8_t both = DED_JOIN_F_CLIENT | DED_JOIN_F_AUX;
  const uint8_t with[] = {0, DED_JOIN_F_GENESIS, DED_JOIN_F_INTENT,
                          DED_JOIN_F_GENESIS | DED_JOIN_F_INTENT};
  for (size_t i = 0; i < sizeof with; i++) {
    ded_msg_join j = msg_join_valid();
    j.flags = (uint8_t)(both | with[i]);
    if (msg_join_try(&j) != DED_ERR_PROTO) fail_msg("JOIN 0x%02x accepted", j.flags);
  }

  /* With a status: each of them, with the plan's own clients and aux
   * members, round trips; every flag byte written into the report is
   * judged as without one, STATUS (which the tail needs) and DONE
   * allowed. */
  ded_msg_commit plan;
  msg_plan_make(&plan, 9, msg_join_valid().round);
  const uint8_t have[2] = {0x03, 0x01};
  for (size_t i = 0; i < sizeof ok; i++) {
    ded_msg_join j = msg_join_valid();
    j.flags = ok[i];
    j.acc_view = 5;
    size_t len;
    uint8_t *buf = msg_join_status_build(&j, &plan, have, &len);
    ded_frame fr = msg_unframe(buf, len, DED_MSG_JOIN);
    assert_int_equal(fr.payload[JOIN_OFF_FLAGS], ok[i] | DED_JOIN_F_STATUS);
    unit_failmem fm;
    unit_failmem_init(&fm, -1);
    ded_msg_join out;
    assert_int_equal(ded_msg_join_decode(fr.payload, fr.len, &fm.mem, &out), 0);
    assert_int_equal(out.flags, ok[i] | DED_JOIN_F_STATUS);
    msg_plan_equal(&out.plan, &plan);
    ded_msg_join_free(&out, &fm.mem);
    assert_int_equal(fm.live, 0);
    free(buf);
  }
  ded_msg_join j = msg_join_valid();
  j.flags = both;
  assert_int_equal(msg_join_status_try(&j, &plan, have), DED_ERR_PROTO);
  j.flags = both | DED_JOIN_F_DONE;
  assert_int_equal(msg_join_status_try(&j, &plan, have), DED_ERR_PROTO);
  j = msg_join_valid();
  size_t len;
  uint8_t *buf = msg_join_status_build(&j, &plan, have, &len);
  uint8_t *payload = buf + DED_FRAME_HDR_BYTES;
  unsigned accepted = 0;
  for (unsigned f = 0; f < 256; f++) {
    payload[JOIN_OFF_FLAGS] = (uint8_t)f;
    const unsigned known = DED_JOIN_F_GENESIS | DED_JOIN_F_STATUS | DED_JOIN_F_INTENT |
                           DED_JOIN_F_DONE | DED_JOIN_F_CLIENT | DED_JOIN_F_AUX;
    int want = !(f & DED_JOIN_F_STATUS) || (f & ~known) || (f & both) == both ? DED_ERR_PROTO : 0;
    if (msg_decode_any(DED_MSG_JOIN, payload, len - DED_FRAME_HDR_BYTES) != want)
      fail_msg("JOIN with status and flags 0x%02x: want %d", f, want);
    accepted += want == 0;
  }
  /* GENESIS x INTENT x DONE x {none, CLIENT, AUX}. */
  assert_int_equal(accepted, 24);
  free(buf);
  free(plan.members);
}

/*
 * Version 15: JOIN's u8 compress | u32 compress_ppm | u32 compute_us.
 * |compress| is a contribution codec (NONE to TOPK), maybe with
 * DED_JOIN_COMPRESS_AUTO; |compress_ppm| is top-k's fraction, 1 to a
 * million, and 0 for every other codec. |compute_us| is any value.
 */
static void test_msg_join_compress(void **state) {
  (void)state;
  assert_int_equal(DED_JOIN_COMPRESS_AUTO, 0x80);
  const uint32_t computes[] = {0, 1, 250000, UINT32_MAX};
  const uint32_t topk_ppms[] = {1, 10000, DED_CODEC_PPM};
  unsigned n = 0;
  for (unsigned kind = DED_CODEC_NONE; kind <= DED_CODEC_TOPK; kind++)
    for (unsigned a = 0; a < 2; a++)
      for (size_t p = 0; p < (kind == DED_CODEC_TOPK ? 3u : 1u); p++, n++) {
        ded_msg_join j = msg_join_valid();
        j.compress = (uint8_t)(kind | (a ? DED_JOIN_COMPRESS_AUTO : 0));
        j.compress_ppm = kind == DED_CODEC_TOPK ? topk_ppms[p] : 0;
        j.compute_us = computes[n % 4];
        uint8_t buf[DED_JOIN_FRAME_BYTES];
        msg_join_build(buf, &j);
        ded_frame fr = msg_unframe(buf, sizeof buf, DED_MSG_JOIN);
        assert_int_equal(fr.len, JOIN_BASE_BYTES);
        assert_int_equal(fr.payload[JOIN_OFF_COMPRESS], j.compress);
        assert_int_equal(msg_le(fr.payload + JOIN_OFF_COMPRESS_PPM, 4), j.compress_ppm);
        assert_int_equal(msg_le(fr.payload + JOIN_OFF_COMPUTE_US, 4), j.compute_us);
        ded_msg_join out;
        assert_int_equal(ded_msg_join_decode(fr.payload, fr.len, NULL, &out), 0);
        assert_int_equal(out.compress, j.compress);
        assert_int_equal(out.compress_ppm, j.compress_ppm);
        assert_int_equal(out.compute_us, j.compute_us);
        assert_int_equal(out.n_local, j.n_local);
        assert_int_equal(out.flags, j.flags);
        ded_msg_join_free(&out, NULL);
        msg_check_bounds(DED_MSG_JOIN, fr.payload, fr.len, 0);
      }

  /* With a status the fields stay where they are, before the flags. */
  {
    ded_msg_commit plan;
    ded_msg_join j = msg_join_valid();
    msg_plan_make(&plan, 3, j.round);
    j.compress = DED_CODEC_INT8 | DED_JOIN_COMPRESS_AUTO;
    j.compute_us = 77;
    const uint8_t have[1] = {0x07};
    size_t len;
    uint8_t *buf = msg_join_status_build(&j, &plan, have, &len);
    ded_frame fr = msg_unframe(buf, len, DED_MSG_JOIN);
    assert_int_equal(fr.payload[JOIN_OFF_COMPRESS], DED_CODEC_INT8 | DED_JOIN_COMPRESS_AUTO);
    assert_int_equal(msg_le(fr.payload + JOIN_OFF_COMPUTE_US, 4), 77);
    ded_msg_join out;
    assert_int_equal(ded_msg_join_decode(fr.payload, fr.len, NULL, &out), 0);
    assert_int_equal(out.compress, DED_CODEC_INT8 | DED_JOIN_COMPRESS_AUTO);
    assert_int_equal(out.compress_ppm, 0);
    assert_int_equal(out.compute_us, 77);
    msg_plan_equal(&out.plan, &plan);
    ded_msg_join_free(&out, NULL);
    free(buf);
    /* ... and are judged there too. */
    j.compress_ppm = 7;
    assert_int_equal(msg_join_status_try(&j, &plan, have), DED_ERR_PROTO);
    j.compress = DED_CODEC_TOPK;
    assert_int_equal(msg_join_status_try(&j, &plan, have), 0);
    j.compress_ppm = 0;
    assert_int_equal(msg_join_status_try(&j, &plan, have), DED_ERR_PROTO);
    free(plan.members);
  }

  /* Refused: a kind past top-k (SPARSE is a result's codec only, never a
   * member's), top-k without a fraction or with more than all of it, and
   * a fraction for a codec that takes none; AUTO changes none of that. */
  const struct {
    uint8_t compress;
    uint32_t ppm;
  } bad[] = {
      {DED_CODEC_SPARSE, 0},
      {DED_CODEC_SPARSE, 10000},
      {DED_CODEC_SPARSE | DED_JOIN_COMPRESS_AUTO, 0},
      {6, 0},
      {0x7f, 0},
      {0xff, 10000},
      {0x40, 0}, /* a bit beside AUTO */
      {DED_CODEC_TOPK, 0},
      {DED_CODEC_TOPK, DED_CODEC_PPM + 1},
      {DED_CODEC_TOPK, UINT32_MAX},
      {DED_CODEC_TOPK | DED_JOIN_COMPRESS_AUTO, 0},
      {DED_CODEC_TOPK | DED_JOIN_COMPRESS_AUTO, DED_CODEC_PPM + 1},
      {DED_CODEC_FP16, 7},
      {DED_CODEC_NONE, 1},
      {DED_CODEC_BF16 | DED_JOIN_COMPRESS_AUTO, DED_CODEC_PPM},
      {DED_CODEC_INT8, 10000},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ded_msg_join j = msg_join_valid();
    j.compress = bad[i].compress;
    j.compress_ppm = bad[i].ppm;
    if (msg_join_try(&j) != DED_ERR_PROTO)
      fail_msg("JOIN with compress 0x%02x ppm %u accepted", bad[i].compress, bad[i].ppm);
  }

  /* Every compress byte, written as is, without a fraction and with one:
   * NONE to INT8 take none, top-k needs one; each with AUTO or not. */
  ded_msg_join j = msg_join_valid();
  uint8_t buf[DED_JOIN_FRAME_BYTES];
  msg_join_build(buf, &j);
  uint8_t *payload = buf + DED_FRAME_HDR_BYTES;
  for (unsigned with_ppm = 0; with_ppm < 2; with_ppm++) {
    msg_put_le(payload + JOIN_OFF_COMPRESS_PPM, with_ppm ? 10000 : 0, 4);
    unsigned accepted = 0;
    for (unsigned c = 0; c < 256; c++) {
      payload[JOIN_OFF_COMPRESS] = (uint8_t)c;
      unsigned kind = c & ~(unsigned)DED_JOIN_COMPRESS_AUTO;
      bool ok = with_ppm ? kind == DED_CODEC_TOPK : kind < DED_CODEC_TOPK;
      if (msg_decode_any(DED_MSG_JOIN, payload, JOIN_BASE_BYTES) != (ok ? 0 : DED_ERR_PROTO))
        fail_msg("JOIN with compress 0x%02x, ppm %u: want %s", c, with_ppm ? 10000 : 0,
                 ok ? "accepted" : "refused");
      accepted += ok;
    }
    assert_int_equal(accepted, with_ppm ? 2 : 8);
  }
}

/* ------------------------------------------------------------ COMMIT */

typedef struct msg_commit_fixture {
  ded_msg_commit c;
  ded_msg_member members[3];
} msg_commit_fixture;

/* Three members with ids 0x10.., 0x20.., 0x30.., shards 0, 40, 70 of 100;
 * attempt 2 of the coordinator 0x10.., on a base that uses every byte.
 * All three are acceptors, the first the primary, of three. */
static void msg_commit_valid(msg_commit_fixture *f) {
  memset(f, 0, sizeof *f);
  f->c.round = 77;
  f->c.attempt = (uint64_t)2 << 32 | 0x10101010u;
  f->c.base = 0xfedcba9876543210ull;
  f->c.dtype = DED_DTYPE_F32;
  f->c.count = 100;
  f->c.pos = 0x123456789aull;
  f->c.step = 0x2233445566ull;
  f->c.chunk_elems = 16;
  f->c.k = 3;
  f->c.nacc = 3;
  f->c.members = f->members;
  const uint64_t offs[3] = {0, 40, 70};
  for (int i = 0; i < 3; i++) {
    memset(f->members[i].id, 0x10 * (i + 1), DED_ID_BYTES);
    f->members[i].weight = 1.0 + i;
    f->members[i].n_local = (uint32_t)(i + 1);
    f->members[i].shard_off = offs[i];
    f->members[i].flags = DED_MEMBER_F_ACCEPTOR;
  }
  f->members[0].flags |= DED_MEMBER_F_PRIMARY;
}

static int msg_commit_try(const ded_msg_commit *c) {
  size_t len;
  uint8_t *buf = unit_commit_frame(c, &len);
  int rv = msg_decode_any(DED_MSG_COMMIT, buf + DED_FRAME_HDR_BYTES, len - DED_FRAME_HDR_BYTES);
  free(buf);
  return rv;
}

static void test_msg_commit_round_trip(void **state) {
  (void)state;
  msg_commit_fixture f;
  msg_commit_valid(&f);
  /* nacc and flags that differ from the defaults: a listed member that is
   * no acceptor, an acceptor that is not listed, the primary last. */
  f.c.nacc = 4;
  f.members[0].flags = DED_MEMBER_F_ACCEPTOR;
  f.members[1].flags = 0;
  f.members[2].flags = DED_MEMBER_F_ACCEPTOR | DED_MEMBER_F_PRIMARY;
  /* Version 15: the contributions travel as top-k. */
  f.c.codec = DED_CODEC_TOPK;
  f.c.codec_ppm = 987654;
  size_t len;
  uint8_t *buf = unit_commit_frame(&f.c, &len);
  ded_frame fr = msg_unframe(buf, len, DED_MSG_COMMIT);
  assert_int_equal(fr.len, DED_COMMIT_BODY_BYTES(3));
  /* The layout of ded_msg.h: attempt and base right after the round. */
  assert_int_equal(msg_le(fr.payload, 8), f.c.round);
  assert_int_equal(msg_le(fr.payload + COMMIT_OFF_ATTEMPT, 8), f.c.attempt);
  assert_int_equal(msg_le(fr.payload + COMMIT_OFF_BASE, 8), f.c.base);
  assert_int_equal(msg_le(fr.payload + COMMIT_OFF_POS, 8), f.c.pos);
  assert_int_equal(msg_le(fr.payload + COMMIT_OFF_STEP, 8), f.c.step);
  /* codec | codec_ppm between chunk_elems and k. */
  assert_int_equal(msg_le(fr.payload + COMMIT_OFF_CHUNK, 4), f.c.chunk_elems);
  assert_int_equal(fr.payload[COMMIT_OFF_CODEC], DED_CODEC_TOPK);
  assert_int_equal(msg_le(fr.payload + COMMIT_OFF_CODEC_PPM, 4), 987654);
  assert_int_equal(msg_le(fr.payload + COMMIT_OFF_K, 2), 3);
  assert_int_equal(msg_le(fr.payload + COMMIT_OFF_NACC, 2), 4);
  /* Each member entry ends with its flags. */
  for (int i = 0; i < 3; i++) {
    const uint8_t *e = fr.payload + COMMIT_OFF_MEMBERS + (size_t)i * DED_COMMIT_MEMBER_BYTES;
    assert_memory_equal(e, f.members[i].id, DED_ID_BYTES);
    assert_int_equal(msg_le(e + DED_ID_BYTES + 12, 8), f.members[i].shard_off);
    assert_int_equal(e[MEMBER_OFF_FLAGS], f.members[i].flags);
  }
  ded_msg_commit out;
  assert_int_equal(ded_msg_commit_decode(fr.payload, fr.len, NULL, &out), 0);
  assert_int_equal(out.round, f.c.round);
  assert_int_equal(out.attempt, f.c.attempt);
  assert_int_equal(out.base, f.c.base);
  assert_int_equal(out.dtype, f.c.dtype);
  assert_int_equal(out.count, f.c.count);
  assert_int_equal(out.pos, f.c.pos);
  assert_int_equal(out.step, f.c.step);
  assert_int_equal(out.chunk_elems, f.c.chunk_elems);
  assert_int_equal(out.codec, DED_CODEC_TOPK);
  assert_int_equal(out.codec_ppm, 987654);
  assert_int_equal(out.k, 3);
  assert_int_equal(out.nacc, 4);
  for (int i = 0; i < 3; i++) {
    assert_memory_equal(out.members[i].id, f.members[i].id, DED_ID_BYTES);
    assert_true(out.members[i].weight == f.members[i].weight);
    assert_int_equal(out.members[i].n_local, f.members[i].n_local);
    assert_int_equal(out.members[i].shard_off, f.members[i].shard_off);
    assert_int_equal(out.members[i].flags, f.members[i].flags);
  }
  ded_msg_commit_free(&out, NULL);
  assert_null(out.members);
  msg_check_bounds(DED_MSG_COMMIT, fr.payload, fr.len, 0);
  free(buf);
}

/* What the flags and nacc of a COMMIT may be: at least one acceptor,
 * no more than nacc, at most one primary, which is an acceptor; a member
 * may besides be a client or an aux member (test_msg_commit_modes). */
static void test_msg_commit_acceptors(void **state) {
  (void)state;
  msg_commit_fixture f;
#define COMMIT_ACCEPTS(mutation)                                                                  \
  do {                                                                                            \
    msg_commit_valid(&f);                                                                         \
    mutation;                                                                                     \
    if (msg_commit_try(&f.c) != 0) fail_msg("COMMIT refused with %s", #mutation);                 \
  } while (0)
#define COMMIT_REJECTS(mutation)                                                                  \
  do {                                                                                            \
    msg_commit_valid(&f);                                                                         \
    mutation;                                                                                     \
    if (msg_commit_try(&f.c) != DED_ERR_PROTO) fail_msg("COMMIT accepted with %s", #mutation);    \
  } while (0)
  COMMIT_ACCEPTS((void)0);
  /* No primary at all; the primary anywhere. */
  COMMIT_ACCEPTS(f.members[0].flags = DED_MEMBER_F_ACCEPTOR);
  COMMIT_ACCEPTS(f.members[0].flags = DED_MEMBER_F_ACCEPTOR;
                 f.members[2].flags |= DED_MEMBER_F_PRIMARY);
  /* One acceptor is enough, listed anywhere, primary or not. */
  COMMIT_ACCEPTS(f.members[1].flags = f.members[2].flags = 0);
  COMMIT_ACCEPTS(f.members[0].flags = f.members[1].flags = 0);
  COMMIT_ACCEPTS(f.members[0].flags = f.members[2].flags = 0;
                 f.members[1].flags = DED_MEMBER_F_ACCEPTOR | DED_MEMBER_F_PRIMARY);
  /* Acceptors that are not listed: nacc above the acceptors listed, up to
   * the most a round may have; and exactly as many. */
  COMMIT_ACCEPTS(f.c.nacc = 4);
  COMMIT_ACCEPTS(f.c.nacc = DED_ROUND_MEMBERS_MAX);
  COMMIT_ACCEPTS(f.members[1].flags = f.members[2].flags = 0; f.c.nacc = 1);
  COMMIT_ACCEPTS(f.members[2].flags = 0; f.c.nacc = 2);

  /* The founder of an attempt that took an older result's acceptors: any
   * one member but an aux one; never two. */
  assert_int_equal(DED_MEMBER_F_FOUNDER, 16);
  for (int i = 0; i < 3; i++) {
    COMMIT_ACCEPTS(f.members[i].flags |= DED_MEMBER_F_FOUNDER);
    COMMIT_ACCEPTS(f.members[i].flags |= DED_MEMBER_F_FOUNDER | DED_MEMBER_F_CLIENT);
    COMMIT_REJECTS(f.members[i].weight = 0.0;
                   f.members[i].flags |= DED_MEMBER_F_FOUNDER | DED_MEMBER_F_AUX);
    COMMIT_REJECTS(f.members[i].flags |= DED_MEMBER_F_FOUNDER;
                   f.members[(i + 1) % 3].flags |= DED_MEMBER_F_FOUNDER);
  }
  /* Flags nobody defined (32 .. 128), on any member, be it a node, a
   * client or an aux member. */
  for (int i = 0; i < 3; i++)
    for (unsigned bit = 5; bit < 8; bit++) {
      COMMIT_REJECTS(f.members[i].flags |= (uint8_t)(1u << bit));
      COMMIT_REJECTS(f.members[i].flags |= (uint8_t)(DED_MEMBER_F_CLIENT | 1u << bit));
      COMMIT_REJECTS(f.members[i].weight = 0.0;
                     f.members[i].flags |= (uint8_t)(DED_MEMBER_F_AUX | 1u << bit));
    }
  /* A primary that is no acceptor, with or without another primary. */
  COMMIT_REJECTS(f.members[0].flags = DED_MEMBER_F_PRIMARY);
  COMMIT_REJECTS(f.members[0].flags = DED_MEMBER_F_ACCEPTOR;
                 f.members[1].flags = DED_MEMBER_F_PRIMARY);
  COMMIT_REJECTS(f.members[2].flags = DED_MEMBER_F_PRIMARY);
  /* Two primaries, three. */
  COMMIT_REJECTS(f.members[1].flags |= DED_MEMBER_F_PRIMARY);
  COMMIT_REJECTS(f.members[2].flags |= DED_MEMBER_F_PRIMARY);
  COMMIT_REJECTS(f.members[1].flags |= DED_MEMBER_F_PRIMARY;
                 f.members[2].flags |= DED_MEMBER_F_PRIMARY);
  /* No acceptor listed, whatever nacc says. */
  COMMIT_REJECTS(f.members[0].flags = f.members[1].flags = f.members[2].flags = 0);
  COMMIT_REJECTS(f.members[0].flags = f.members[1].flags = f.members[2].flags = 0; f.c.nacc = 0);
  /* More acceptors listed than nacc. */
  COMMIT_REJECTS(f.c.nacc = 2);
  COMMIT_REJECTS(f.c.nacc = 0);
  COMMIT_REJECTS(f.members[1].flags = f.members[2].flags = 0; f.c.nacc = 0);
  /* nacc above the largest round, even with the acceptors in it. */
  COMMIT_REJECTS(f.c.nacc = DED_ROUND_MEMBERS_MAX + 1);
  COMMIT_REJECTS(f.c.nacc = UINT16_MAX);
#undef COMMIT_ACCEPTS
#undef COMMIT_REJECTS

  /* Every value of one member's flag byte, written into the frame: with
   * member 0 the primary and the others acceptors, member 1 may only be
   * an acceptor or not; member 0 may also drop being the primary. Either
   * may be a client or, with weight 0 (the second pass), an aux member,
   * never both. */
  size_t len;
  uint8_t *buf, *payload;
  for (int zero_w = 0; zero_w <= 1; zero_w++)
    for (unsigned m = 0; m < 2; m++) {
      msg_commit_valid(&f);
      if (zero_w) f.members[m].weight = 0.0;
      buf = unit_commit_frame(&f.c, &len);
      payload = buf + DED_FRAME_HDR_BYTES;
      uint8_t *flag =
          payload + COMMIT_OFF_MEMBERS + m * DED_COMMIT_MEMBER_BYTES + MEMBER_OFF_FLAGS;
      unsigned accepted = 0;
      for (unsigned v = 0; v < 256; v++) {
        *flag = (uint8_t)v;
        unsigned role = v & (DED_MEMBER_F_ACCEPTOR | DED_MEMBER_F_PRIMARY);
        unsigned mode =
            v & ~(unsigned)(DED_MEMBER_F_ACCEPTOR | DED_MEMBER_F_PRIMARY | DED_MEMBER_F_FOUNDER);
        bool ok = (role == 0 || role == DED_MEMBER_F_ACCEPTOR ||
                   (m == 0 && role == (DED_MEMBER_F_ACCEPTOR | DED_MEMBER_F_PRIMARY))) &&
                  (mode == 0 || mode == DED_MEMBER_F_CLIENT ||
                   (zero_w && mode == DED_MEMBER_F_AUX && !(v & DED_MEMBER_F_FOUNDER)));
        accepted += ok;
        int rv = msg_decode_any(DED_MSG_COMMIT, payload, len - DED_FRAME_HDR_BYTES);
        if (rv != (ok ? 0 : DED_ERR_PROTO))
          fail_msg("member %u (weight %s) flags 0x%02x: %d", m, zero_w ? "0" : "> 0", v, rv);
      }
      /* Roles (3 for member 0, 2 for member 1) x modes (node, client, and
       * aux with weight 0) x founder or not (never an aux one). */
      assert_int_equal(accepted, (m == 0 ? 3u : 2u) * (zero_w ? 5u : 4u));
      free(buf);
    }
  /* Every nacc from 0 up past the largest round. */
  msg_commit_valid(&f);
  buf = unit_commit_frame(&f.c, &len);
  payload = buf + DED_FRAME_HDR_BYTES;
  for (unsigned n = 0; n <= DED_ROUND_MEMBERS_MAX + 2; n++) {
    msg_put_le(payload + COMMIT_OFF_NACC, n, 2);
    bool ok = n >= 3 && n <= DED_ROUND_MEMBERS_MAX;
    int rv = msg_decode_any(DED_MSG_COMMIT, payload, len - DED_FRAME_HDR_BYTES);
    if (rv != (ok ? 0 : DED_ERR_PROTO)) fail_msg("nacc %u: %d", n, rv);
  }
  free(buf);
}

/*
 * Version 6: a member may be a client (DED_MEMBER_F_CLIENT) or an aux
 * member (DED_MEMBER_F_AUX), not both. An aux member brings no vector:
 * its weight is exactly 0. The others are the round's contributors: at
 * least one, with a positive total weight.
 */
static void test_msg_commit_modes(void **state) {
  (void)state;
  assert_int_equal(DED_MEMBER_F_CLIENT, 4);
  assert_int_equal(DED_MEMBER_F_AUX, 8);
  msg_commit_fixture f;
  /* A round trip: a node (the primary), a client (an acceptor), an aux
   * member (no acceptor, of nacc 2). */
  msg_commit_valid(&f);
  f.c.nacc = 2;
  f.members[1].flags = DED_MEMBER_F_ACCEPTOR | DED_MEMBER_F_CLIENT;
  f.members[2].flags = DED_MEMBER_F_AUX;
  f.members[2].weight = 0.0;
  size_t len;
  uint8_t *buf = unit_commit_frame(&f.c, &len);
  ded_frame fr = msg_unframe(buf, len, DED_MSG_COMMIT);
  for (int i = 0; i < 3; i++)
    assert_int_equal(
        fr.payload[COMMIT_OFF_MEMBERS + (size_t)i * DED_COMMIT_MEMBER_BYTES + MEMBER_OFF_FLAGS],
        f.members[i].flags);
  ded_msg_commit out;
  assert_int_equal(ded_msg_commit_decode(fr.payload, fr.len, NULL, &out), 0);
  msg_plan_equal(&out, &f.c);
  assert_int_equal(out.members[1].flags, DED_MEMBER_F_ACCEPTOR | DED_MEMBER_F_CLIENT);
  assert_int_equal(out.members[2].flags, DED_MEMBER_F_AUX);
  assert_true(out.members[2].weight == 0.0);
  ded_msg_commit_free(&out, NULL);
  msg_check_bounds(DED_MSG_COMMIT, fr.payload, fr.len, 0);
  free(buf);

#define COMMIT_ACCEPTS(mutation)                                                                  \
  do {                                                                                            \
    msg_commit_valid(&f);                                                                         \
    mutation;                                                                                     \
    if (msg_commit_try(&f.c) != 0) fail_msg("COMMIT refused with %s", #mutation);                 \
  } while (0)
#define COMMIT_REJECTS(mutation)                                                                  \
  do {                                                                                            \
    msg_commit_valid(&f);                                                                         \
    mutation;                                                                                     \
    if (msg_commit_try(&f.c) != DED_ERR_PROTO) fail_msg("COMMIT accepted with %s", #mutation);    \
  } while (0)
  /* Clients are contributors: any of them, all of them, a client alone;
   * one may bring weight 0 when another brings some. */
  COMMIT_ACCEPTS(f.members[1].flags |= DED_MEMBER_F_CLIENT);
  COMMIT_ACCEPTS(for (int i = 0; i < 3; i++) f.members[i].flags |= DED_MEMBER_F_CLIENT);
  COMMIT_ACCEPTS(f.members[0].flags |= DED_MEMBER_F_CLIENT; f.members[0].weight = 0.0);
  COMMIT_ACCEPTS(f.c.k = 1; f.members[0].flags |= DED_MEMBER_F_CLIENT);
  /* Aux members of weight 0, wherever they are, acceptors or not, the
   * primary included, as long as a contributor is left. */
  COMMIT_ACCEPTS(f.members[2].flags |= DED_MEMBER_F_AUX; f.members[2].weight = 0.0);
  COMMIT_ACCEPTS(f.members[0].flags |= DED_MEMBER_F_AUX; f.members[0].weight = 0.0);
  COMMIT_ACCEPTS(f.members[1].flags = DED_MEMBER_F_AUX; f.members[1].weight = 0.0);
  COMMIT_ACCEPTS(f.members[0].flags |= DED_MEMBER_F_AUX; f.members[0].weight = 0.0;
                 f.members[1].flags |= DED_MEMBER_F_AUX; f.members[1].weight = 0.0);
  /* ... the contributor a client. */
  COMMIT_ACCEPTS(f.members[0].flags |= DED_MEMBER_F_CLIENT;
                 f.members[1].flags |= DED_MEMBER_F_AUX; f.members[1].weight = 0.0;
                 f.members[2].flags |= DED_MEMBER_F_AUX; f.members[2].weight = 0.0);
  /* An aux member with any weight but 0: the smallest, its own, the
   * largest a JOIN may carry. */
  COMMIT_REJECTS(f.members[1].flags |= DED_MEMBER_F_AUX);
  COMMIT_REJECTS(f.members[1].flags |= DED_MEMBER_F_AUX; f.members[1].weight = 5e-324);
  COMMIT_REJECTS(f.members[1].flags |= DED_MEMBER_F_AUX; f.members[1].weight = DED_WEIGHT_MAX);
  COMMIT_REJECTS(f.members[0].flags |= DED_MEMBER_F_AUX; f.members[0].weight = 1.0);
  /* A client and an aux member at once, with weight 0 or not, acceptor,
   * primary or neither. */
  COMMIT_REJECTS(f.members[1].flags |= DED_MEMBER_F_CLIENT | DED_MEMBER_F_AUX;
                 f.members[1].weight = 0.0);
  COMMIT_REJECTS(f.members[1].flags |= DED_MEMBER_F_CLIENT | DED_MEMBER_F_AUX);
  COMMIT_REJECTS(f.members[0].flags |= DED_MEMBER_F_CLIENT | DED_MEMBER_F_AUX;
                 f.members[0].weight = 0.0);
  COMMIT_REJECTS(f.members[2].flags = DED_MEMBER_F_CLIENT | DED_MEMBER_F_AUX;
                 f.members[2].weight = 0.0);
  /* No contributor: every member aux (acceptors or not), a lone aux
   * member. */
  COMMIT_REJECTS(for (int i = 0; i < 3; i++) {
    f.members[i].flags |= DED_MEMBER_F_AUX;
    f.members[i].weight = 0.0;
  });
  COMMIT_REJECTS(for (int i = 0; i < 3; i++) {
    f.members[i].flags = DED_MEMBER_F_AUX;
    f.members[i].weight = 0.0;
  } f.members[0].flags |= DED_MEMBER_F_ACCEPTOR);
  COMMIT_REJECTS(f.c.k = 1; f.members[0].flags |= DED_MEMBER_F_AUX; f.members[0].weight = 0.0);
  /* Contributors whose weights add up to 0, beside aux members. */
  COMMIT_REJECTS(f.members[0].weight = f.members[1].weight = 0.0;
                 f.members[2].flags |= DED_MEMBER_F_AUX; f.members[2].weight = 0.0);
  COMMIT_REJECTS(f.members[0].weight = 0.0; f.members[0].flags |= DED_MEMBER_F_CLIENT;
                 f.members[1].flags |= DED_MEMBER_F_AUX; f.members[1].weight = 0.0;
                 f.members[2].flags |= DED_MEMBER_F_AUX; f.members[2].weight = 0.0);
#undef COMMIT_ACCEPTS
#undef COMMIT_REJECTS
}

/* Limits that are legal: the largest membership, the largest chunk, empty
 * shards (equal offsets, an offset equal to the count), a zero weight. */
static void test_msg_commit_edges_accepted(void **state) {
  (void)state;
  msg_commit_fixture f;
  msg_commit_valid(&f);
  f.c.chunk_elems = DED_CHUNK_BYTES_MAX / 4;
  assert_int_equal(msg_commit_try(&f.c), 0);
  f.c.dtype = DED_DTYPE_F64;
  f.c.chunk_elems = DED_CHUNK_BYTES_MAX / 8;
  assert_int_equal(msg_commit_try(&f.c), 0);
  /* Top-k's smallest and largest fractions. */
  msg_commit_valid(&f);
  f.c.codec = DED_CODEC_TOPK;
  f.c.codec_ppm = 1;
  assert_int_equal(msg_commit_try(&f.c), 0);
  f.c.codec_ppm = DED_CODEC_PPM;
  assert_int_equal(msg_commit_try(&f.c), 0);
  msg_commit_valid(&f);
  f.members[1].shard_off = 0;
  f.members[2].shard_off = 100;
  f.members[0].weight = 0.0;
  assert_int_equal(msg_commit_try(&f.c), 0);
  f.c.count = DED_COUNT_MAX;
  assert_int_equal(msg_commit_try(&f.c), 0);
  /* Attempt and base are the engine's to judge: any value decodes. */
  const uint64_t attempts[] = {0, 1, UINT32_MAX, (uint64_t)UINT32_MAX << 32, UINT64_MAX};
  for (size_t i = 0; i < sizeof attempts / sizeof attempts[0]; i++) {
    f.c.attempt = attempts[i];
    f.c.base = attempts[(i + 1) % (sizeof attempts / sizeof attempts[0])];
    assert_int_equal(msg_commit_try(&f.c), 0);
  }

  ded_msg_commit big = f.c;
  big.k = DED_ROUND_MEMBERS_MAX;
  big.nacc = DED_ROUND_MEMBERS_MAX;
  big.count = DED_ROUND_MEMBERS_MAX;
  big.members = calloc(big.k, sizeof *big.members);
  assert_non_null(big.members);
  for (unsigned i = 0; i < big.k; i++) {
    big.members[i].id[0] = (uint8_t)(i >> 8);
    big.members[i].id[1] = (uint8_t)i;
    big.members[i].weight = 1.0;
    big.members[i].n_local = 1;
    big.members[i].shard_off = i;
    big.members[i].flags = DED_MEMBER_F_ACCEPTOR;
  }
  big.members[big.k - 1].flags |= DED_MEMBER_F_PRIMARY;
  assert_int_equal(msg_commit_try(&big), 0);
  free(big.members);
}

static void test_msg_commit_invalid(void **state) {
  (void)state;
  msg_commit_fixture f;
#define COMMIT_REJECTS(mutation)                                                                  \
  do {                                                                                            \
    msg_commit_valid(&f);                                                                         \
    mutation;                                                                                     \
    if (msg_commit_try(&f.c) != DED_ERR_PROTO) fail_msg("COMMIT accepted with %s", #mutation);    \
  } while (0)
  COMMIT_REJECTS(f.c.k = 0);
  COMMIT_REJECTS(memcpy(f.members[1].id, f.members[0].id, DED_ID_BYTES)); /* duplicate */
  COMMIT_REJECTS(memcpy(f.members[2].id, f.members[1].id, DED_ID_BYTES)); /* duplicate, last */
  COMMIT_REJECTS(f.members[0].id[0] = 0x25);                              /* unsorted */
  /* Unsorted in the last byte only. */
  COMMIT_REJECTS(memcpy(f.members[2].id, f.members[1].id, DED_ID_BYTES);
                 f.members[2].id[DED_ID_BYTES - 1] = 0x1f);
  COMMIT_REJECTS(f.members[0].shard_off = 1);
  COMMIT_REJECTS(f.members[2].shard_off = 39); /* decreasing */
  COMMIT_REJECTS(f.members[1].shard_off = 71);
  COMMIT_REJECTS(f.members[2].shard_off = 101); /* past the count */
  COMMIT_REJECTS(f.members[1].weight = -1.0);
  COMMIT_REJECTS(f.members[1].weight = NAN);
  COMMIT_REJECTS(f.members[2].weight = INFINITY);
  COMMIT_REJECTS(f.members[0].weight = -INFINITY);
  COMMIT_REJECTS(f.members[1].n_local = 0);
  COMMIT_REJECTS(f.members[0].weight = f.members[1].weight = f.members[2].weight = 0.0);
  /* Finite weights whose sum is not. */
  COMMIT_REJECTS(f.members[0].weight = f.members[1].weight = 1e308);
  COMMIT_REJECTS(f.c.chunk_elems = 0);
  COMMIT_REJECTS(f.c.chunk_elems = DED_CHUNK_BYTES_MAX / 4 + 1);
  COMMIT_REJECTS(f.c.dtype = DED_DTYPE_F64; f.c.chunk_elems = DED_CHUNK_BYTES_MAX / 8 + 1);
  COMMIT_REJECTS(f.c.chunk_elems = UINT32_MAX); /* the product must not wrap */
  COMMIT_REJECTS(f.c.dtype = 0);
  COMMIT_REJECTS(f.c.dtype = 3);
  COMMIT_REJECTS(f.c.count = 0; f.members[1].shard_off = f.members[2].shard_off = 0);
  COMMIT_REJECTS(f.c.count = DED_COUNT_MAX + 1);
  COMMIT_REJECTS(f.c.pos = DED_POS_MAX + 1);
  COMMIT_REJECTS(f.c.pos = UINT64_MAX);
  COMMIT_REJECTS(f.c.step = DED_POS_MAX + 1);
  /* Version 15's codec: a kind past top-k (SPARSE is a result's only), a
   * fraction top-k lacks or another codec has, a codec on float64. */
  COMMIT_REJECTS(f.c.codec = DED_CODEC_SPARSE);
  COMMIT_REJECTS(f.c.codec = 6);
  COMMIT_REJECTS(f.c.codec = UINT8_MAX);
  COMMIT_REJECTS(f.c.codec = DED_CODEC_TOPK);
  COMMIT_REJECTS(f.c.codec = DED_CODEC_TOPK; f.c.codec_ppm = DED_CODEC_PPM + 1);
  COMMIT_REJECTS(f.c.codec = DED_CODEC_TOPK; f.c.codec_ppm = UINT32_MAX);
  COMMIT_REJECTS(f.c.codec = DED_CODEC_FP16; f.c.codec_ppm = 7);
  COMMIT_REJECTS(f.c.codec_ppm = 1);
  COMMIT_REJECTS(f.c.dtype = DED_DTYPE_F64; f.c.codec = DED_CODEC_FP16);
  COMMIT_REJECTS(f.c.dtype = DED_DTYPE_F64; f.c.codec = DED_CODEC_TOPK; f.c.codec_ppm = 10000);
#undef COMMIT_REJECTS

  /* One member more than a round may have. */
  ded_msg_commit big;
  msg_commit_valid(&f);
  big = f.c;
  big.k = DED_ROUND_MEMBERS_MAX + 1;
  big.nacc = 1; /* acceptors that would pass: only k is wrong */
  big.count = big.k;
  big.members = calloc(big.k, sizeof *big.members);
  assert_non_null(big.members);
  for (unsigned i = 0; i < big.k; i++) {
    big.members[i].id[0] = (uint8_t)(i >> 8);
    big.members[i].id[1] = (uint8_t)i;
    big.members[i].weight = 1.0;
    big.members[i].n_local = 1;
    big.members[i].shard_off = i;
  }
  big.members[0].flags = DED_MEMBER_F_ACCEPTOR;
  assert_int_equal(msg_commit_try(&big), DED_ERR_PROTO);
  free(big.members);
}

/* k says more members than the payload holds, or fewer. */
static void test_msg_commit_k_mismatch(void **state) {
  (void)state;
  msg_commit_fixture f;
  msg_commit_valid(&f);
  size_t len;
  uint8_t *buf = unit_commit_frame(&f.c, &len);
  uint8_t *k_field = buf + DED_FRAME_HDR_BYTES + COMMIT_OFF_K;
  assert_int_equal(k_field[0], 3);
  const uint8_t ks[] = {2, 4, 0xff};
  for (size_t i = 0; i < sizeof ks; i++) {
    k_field[0] = ks[i];
    assert_int_equal(msg_decode_any(DED_MSG_COMMIT, buf + DED_FRAME_HDR_BYTES,
                                    len - DED_FRAME_HDR_BYTES),
                     DED_ERR_PROTO);
  }
  free(buf);
}

/* A deep copy: every field, members in memory of their own. */
static void test_msg_commit_copy(void **state) {
  (void)state;
  const unsigned ks[] = {1, 3, 100};
  for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
    ded_msg_commit src;
    msg_plan_make(&src, ks[t], 1234);
    unit_failmem fm;
    unit_failmem_init(&fm, -1);
    ded_msg_commit dst;
    memset(&dst, 0xee, sizeof dst);
    assert_int_equal(ded_msg_commit_copy(&dst, &src, &fm.mem), 0);
    assert_int_equal(fm.live, 1);
    assert_non_null(dst.members);
    assert_ptr_not_equal(dst.members, src.members);
    msg_plan_equal(&dst, &src);
    /* Changing or freeing the source leaves the copy whole. */
    ded_msg_commit keep;
    msg_plan_make(&keep, ks[t], 1234);
    memset(src.members, 0xab, (size_t)src.k * sizeof *src.members);
    src.attempt = 0;
    free(src.members);
    msg_plan_equal(&dst, &keep);
    /* The copy encodes to a valid COMMIT. */
    size_t len;
    uint8_t *buf = unit_commit_frame(&dst, &len);
    assert_int_equal(msg_decode_any(DED_MSG_COMMIT, buf + DED_FRAME_HDR_BYTES,
                                    len - DED_FRAME_HDR_BYTES),
                     0);
    free(buf);
    ded_msg_commit_free(&dst, &fm.mem);
    assert_null(dst.members);
    assert_int_equal(fm.live, 0);
    free(keep.members);
  }
  /* Out of memory: DED_ERR_NOMEM, nothing held. */
  ded_msg_commit src;
  msg_plan_make(&src, 5, 9);
  unit_failmem fm;
  unit_failmem_init(&fm, 0);
  ded_msg_commit dst;
  assert_int_equal(ded_msg_commit_copy(&dst, &src, &fm.mem), DED_ERR_NOMEM);
  assert_true(fm.failed);
  assert_null(dst.members);
  assert_int_equal(fm.live, 0);
  ded_msg_commit_free(&dst, &fm.mem); /* harmless */
  free(src.members);
}

/* ------------------------------------------------------------ DECIDE */

/* A DECIDE for |plan| in |view| with |flags|, into a fresh buffer of
 * exactly the frame's size; the caller frees it. */
static uint8_t *msg_decide_build(uint32_t view, uint8_t flags, const ded_msg_commit *plan,
                                 const uint16_t *holders, size_t *len) {
  size_t cap = DED_DECIDE_FRAME_BYTES(plan->k);
  uint8_t *buf = malloc(cap);
  assert_non_null(buf);
  ded_wr w = ded_wr_init(buf, cap);
  ded_msg_decide_encode(&w, view, flags, plan, holders);
  assert_false(w.err);
  assert_int_equal(w.pos, cap);
  *len = cap;
  return buf;
}

static int msg_decide_try(uint32_t view, uint8_t flags, const ded_msg_commit *plan,
                          const uint16_t *holders) {
  size_t len;
  uint8_t *buf = msg_decide_build(view, flags, plan, holders, &len);
  int rv = msg_decode_any(DED_MSG_DECIDE, buf + DED_FRAME_HDR_BYTES, len - DED_FRAME_HDR_BYTES);
  free(buf);
  return rv;
}

static void test_msg_decide_round_trip(void **state) {
  (void)state;
  const unsigned ks[] = {1, 2, 3, 9};
  for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
    unsigned k = ks[t];
    ded_msg_commit plan;
    msg_plan_make(&plan, k, 0x0a0b0c0d0e0f1011ull);
    uint16_t holders[16];
    for (unsigned s = 0; s < k; s++) holders[s] = (uint16_t)((s * 7 + 1) % k);
    const uint32_t view = 0xdeadbeefu;
    /* Chosen (someone completed the round with it) or not. */
    const uint8_t flags = t % 2 ? 0 : DED_DECIDE_F_CHOSEN;
    size_t len;
    uint8_t *buf = msg_decide_build(view, flags, &plan, holders, &len);
    ded_frame fr = msg_unframe(buf, len, DED_MSG_DECIDE);
    /* round | view | flags | COMMIT body | k x u16 holder. */
    assert_int_equal(fr.len, 8 + 4 + 1 + DED_COMMIT_BODY_BYTES(k) + 2 * (size_t)k);
    assert_int_equal(msg_le(fr.payload, 8), plan.round);
    assert_int_equal(msg_le(fr.payload + 8, 4), view);
    assert_int_equal(fr.payload[DECIDE_OFF_FLAGS], flags);
    size_t clen;
    uint8_t *cf = unit_commit_frame(&plan, &clen);
    assert_memory_equal(fr.payload + DECIDE_OFF_PLAN, cf + DED_FRAME_HDR_BYTES,
                        clen - DED_FRAME_HDR_BYTES);
    free(cf);
    for (unsigned s = 0; s < k; s++)
      assert_int_equal(msg_le(fr.payload + DECIDE_OFF_PLAN + DED_COMMIT_BODY_BYTES(k) + 2 * s, 2),
                       holders[s]);
    unit_failmem fm;
    unit_failmem_init(&fm, -1);
    ded_msg_decide d;
    assert_int_equal(ded_msg_decide_decode(fr.payload, fr.len, &fm.mem, &d), 0);
    assert_int_equal(d.round, plan.round);
    assert_int_equal(d.view, view);
    assert_int_equal(d.flags, flags);
    msg_plan_equal(&d.plan, &plan);
    for (unsigned s = 0; s < k; s++) assert_int_equal(d.holders[s], holders[s]);
    assert_int_equal(fm.live, 2);
    ded_msg_decide_free(&d, &fm.mem);
    assert_null(d.plan.members);
    assert_null(d.holders);
    assert_int_equal(fm.live, 0);
    msg_check_bounds(DED_MSG_DECIDE, fr.payload, fr.len, 0);
    /* The other flag value decodes too. */
    assert_int_equal(msg_decide_try(view, flags ^ DED_DECIDE_F_CHOSEN, &plan, holders), 0);
    free(buf);
    free(plan.members);
  }
}

static void test_msg_decide_invalid(void **state) {
  (void)state;
  const unsigned ks[] = {1, 3, 9};
  for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
    unsigned k = ks[t];
    const uint8_t fl = t % 2 ? DED_DECIDE_F_CHOSEN : 0;
    ded_msg_commit plan;
    msg_plan_make(&plan, k, 500);
    uint16_t holders[16] = {0};
    assert_int_equal(msg_decide_try(1, fl, &plan, holders), 0);
    /* Every holder must be a member of the attempt: k - 1 is the last. */
    for (unsigned s = 0; s < k; s++) {
      const uint16_t bad[] = {(uint16_t)k, (uint16_t)(k + 1), DED_ROUND_MEMBERS_MAX, UINT16_MAX};
      for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
        holders[s] = bad[b];
        if (msg_decide_try(1, fl, &plan, holders) != DED_ERR_PROTO)
          fail_msg("k=%u: holder %u of shard %u accepted", k, bad[b], s);
      }
      holders[s] = (uint16_t)(k - 1);
      assert_int_equal(msg_decide_try(1, fl, &plan, holders), 0);
    }
    memset(holders, 0, sizeof holders);
    /* Holders for one shard more or fewer than the plan has. */
    size_t len;
    uint8_t *buf = msg_decide_build(1, fl, &plan, holders, &len);
    uint8_t *payload = buf + DED_FRAME_HDR_BYTES;
    size_t plen = len - DED_FRAME_HDR_BYTES;
    /* Every flag byte: CHOSEN or nothing, no other bit. */
    for (unsigned v = 0; v < 256; v++) {
      payload[DECIDE_OFF_FLAGS] = (uint8_t)v;
      int want = v & ~(unsigned)DED_DECIDE_F_CHOSEN ? DED_ERR_PROTO : 0;
      if (msg_decode_any(DED_MSG_DECIDE, payload, plen) != want)
        fail_msg("k=%u: DECIDE with flags 0x%02x: want %d", k, v, want);
    }
    payload[DECIDE_OFF_FLAGS] = fl;
    assert_int_equal(msg_decode_any(DED_MSG_DECIDE, payload, plen - 2), DED_ERR_PROTO);
    assert_int_equal(msg_decode_any(DED_MSG_DECIDE, payload, plen - 1), DED_ERR_PROTO);
    for (size_t extra = 1; extra <= 4; extra++) {
      uint8_t *longer = calloc(plen + extra, 1);
      assert_non_null(longer);
      memcpy(longer, payload, plen);
      if (msg_decode_any(DED_MSG_DECIDE, longer, plen + extra) != DED_ERR_PROTO)
        fail_msg("k=%u: DECIDE with %zu trailing bytes accepted", k, extra);
      free(longer);
    }
    /* The round outside and the plan's round inside must agree. */
    msg_put_le(payload, plan.round + 1, 8);
    assert_int_equal(msg_decode_any(DED_MSG_DECIDE, payload, plen), DED_ERR_PROTO);
    msg_put_le(payload, plan.round, 8);
    assert_int_equal(msg_decode_any(DED_MSG_DECIDE, payload, plen), 0);
    free(buf);
    /* A body that breaks the COMMIT invariants. */
    plan.members[k - 1].shard_off = plan.count + 1;
    assert_int_equal(msg_decide_try(1, fl, &plan, holders), DED_ERR_PROTO);
    plan.members[k - 1].shard_off = 10 * (uint64_t)(k - 1);
    plan.dtype = 0;
    assert_int_equal(msg_decide_try(1, fl, &plan, holders), DED_ERR_PROTO);
    plan.dtype = DED_DTYPE_F32;
    plan.nacc = 0; /* fewer than the acceptors listed */
    assert_int_equal(msg_decide_try(1, fl, &plan, holders), DED_ERR_PROTO);
    plan.nacc = DED_ROUND_MEMBERS_MAX;
    assert_int_equal(msg_decide_try(1, fl, &plan, holders), 0);
    plan.members[0].flags |= 0x40;
    assert_int_equal(msg_decide_try(1, fl, &plan, holders), DED_ERR_PROTO);
    plan.members[0].flags &= (uint8_t)~0x40;
    plan.k = 0;
    assert_int_equal(msg_decide_try(1, fl, &plan, holders), DED_ERR_PROTO);
    free(plan.members);
  }
}

/*
 * Version 15: COMMIT's u8 codec | u32 codec_ppm, how the contributions
 * travel: NONE to TOPK, top-k with its fraction (1 to a million
 * millionths), every other codec with 0; and anything but NONE only for
 * float32 elements.
 */
static void test_msg_commit_codec(void **state) {
  (void)state;
  for (unsigned kind = DED_CODEC_NONE; kind <= DED_CODEC_TOPK; kind++) {
    msg_commit_fixture f;
    msg_commit_valid(&f);
    f.c.codec = (uint8_t)kind;
    f.c.codec_ppm = kind == DED_CODEC_TOPK ? 10000 : 0;
    size_t len;
    uint8_t *buf = unit_commit_frame(&f.c, &len);
    ded_frame fr = msg_unframe(buf, len, DED_MSG_COMMIT);
    assert_int_equal(fr.len, DED_COMMIT_BODY_BYTES(3));
    assert_int_equal(fr.payload[COMMIT_OFF_CODEC], kind);
    assert_int_equal(msg_le(fr.payload + COMMIT_OFF_CODEC_PPM, 4), f.c.codec_ppm);
    ded_msg_commit out;
    assert_int_equal(ded_msg_commit_decode(fr.payload, fr.len, NULL, &out), 0);
    msg_plan_equal(&out, &f.c);
    ded_msg_commit_free(&out, NULL);
    msg_check_bounds(DED_MSG_COMMIT, fr.payload, fr.len, 0);
    free(buf);
    /* On float64 only NONE. */
    msg_commit_valid(&f);
    f.c.dtype = DED_DTYPE_F64;
    f.c.codec = (uint8_t)kind;
    f.c.codec_ppm = kind == DED_CODEC_TOPK ? 10000 : 0;
    if (msg_commit_try(&f.c) != (kind == DED_CODEC_NONE ? 0 : DED_ERR_PROTO))
      fail_msg("COMMIT of float64 with codec %u: want %s", kind,
               kind == DED_CODEC_NONE ? "accepted" : "refused");
  }

  /* Every codec byte, written into the frame, without a fraction and
   * with one, on float32 and on float64. */
  for (unsigned f64 = 0; f64 < 2; f64++)
    for (unsigned with_ppm = 0; with_ppm < 2; with_ppm++) {
      msg_commit_fixture f;
      msg_commit_valid(&f);
      if (f64) f.c.dtype = DED_DTYPE_F64;
      size_t len;
      uint8_t *buf = unit_commit_frame(&f.c, &len);
      uint8_t *payload = buf + DED_FRAME_HDR_BYTES;
      msg_put_le(payload + COMMIT_OFF_CODEC_PPM, with_ppm ? 10000 : 0, 4);
      unsigned accepted = 0;
      for (unsigned c = 0; c < 256; c++) {
        payload[COMMIT_OFF_CODEC] = (uint8_t)c;
        bool ok = with_ppm ? c == DED_CODEC_TOPK : c < DED_CODEC_TOPK;
        if (f64 && c != DED_CODEC_NONE) ok = false;
        int rv = msg_decode_any(DED_MSG_COMMIT, payload, len - DED_FRAME_HDR_BYTES);
        if (rv != (ok ? 0 : DED_ERR_PROTO))
          fail_msg("COMMIT (%s) with codec 0x%02x, ppm %u: %d", f64 ? "f64" : "f32", c,
                   with_ppm ? 10000 : 0, rv);
        accepted += ok;
      }
      assert_int_equal(accepted, f64 ? (with_ppm ? 0u : 1u) : (with_ppm ? 1u : 4u));
      free(buf);
    }

  /* The body in a failover report and in a DECIDE is judged the same. */
  ded_msg_commit plan;
  ded_msg_join j = msg_join_valid();
  msg_plan_make(&plan, 3, j.round);
  const uint8_t have[1] = {0x01};
  uint16_t holders[3] = {0, 1, 2};
  assert_int_equal(msg_join_status_try(&j, &plan, have), 0);
  assert_int_equal(msg_decide_try(1, 0, &plan, holders), 0);
  plan.codec_ppm = 0;
  assert_int_equal(msg_join_status_try(&j, &plan, have), DED_ERR_PROTO);
  assert_int_equal(msg_decide_try(1, 0, &plan, holders), DED_ERR_PROTO);
  plan.codec = DED_CODEC_SPARSE;
  assert_int_equal(msg_join_status_try(&j, &plan, have), DED_ERR_PROTO);
  assert_int_equal(msg_decide_try(1, 0, &plan, holders), DED_ERR_PROTO);
  plan.codec = DED_CODEC_BF16;
  assert_int_equal(msg_join_status_try(&j, &plan, have), 0);
  assert_int_equal(msg_decide_try(1, 0, &plan, holders), 0);
  plan.dtype = DED_DTYPE_F64;
  assert_int_equal(msg_join_status_try(&j, &plan, have), DED_ERR_PROTO);
  assert_int_equal(msg_decide_try(1, 0, &plan, holders), DED_ERR_PROTO);
  free(plan.members);
}

/* ------------------------------------------------ FETCH, HAVE, PROBE */

static void test_msg_fetch_round_trip(void **state) {
  (void)state;
  const ded_msg_fetch cases[] = {
      {0x0102030405060708ull, (uint64_t)7 << 32 | 0xcafef00du, DED_ROUND_MEMBERS_MAX - 1},
      {0, 0, 0},
      {UINT64_MAX, UINT64_MAX, 1}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint8_t buf[DED_FETCH_FRAME_BYTES];
    ded_wr w = ded_wr_init(buf, sizeof buf);
    ded_msg_fetch_encode(&w, &cases[i]);
    assert_false(w.err);
    assert_int_equal(w.pos, sizeof buf);
    ded_frame fr = msg_unframe(buf, w.pos, DED_MSG_FETCH);
    assert_int_equal(fr.len, 18);
    assert_int_equal(msg_le(fr.payload, 8), cases[i].round);
    assert_int_equal(msg_le(fr.payload + 8, 8), cases[i].attempt);
    assert_int_equal(msg_le(fr.payload + 16, 2), cases[i].shard);
    ded_msg_fetch out;
    assert_int_equal(ded_msg_fetch_decode(fr.payload, fr.len, &out), 0);
    assert_int_equal(out.round, cases[i].round);
    assert_int_equal(out.attempt, cases[i].attempt);
    assert_int_equal(out.shard, cases[i].shard);
    msg_check_bounds(DED_MSG_FETCH, fr.payload, fr.len, 0);
  }
}

static void test_msg_fetch_invalid(void **state) {
  (void)state;
  uint8_t buf[DED_FETCH_FRAME_BYTES + 4];
  ded_msg_fetch m = {3, 4, 0};
  ded_msg_fetch out;
  /* No round has that many shards. */
  const uint16_t bad[] = {DED_ROUND_MEMBERS_MAX, DED_ROUND_MEMBERS_MAX + 1, UINT16_MAX};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    m.shard = bad[i];
    ded_wr w = ded_wr_init(buf, DED_FETCH_FRAME_BYTES);
    ded_msg_fetch_encode(&w, &m);
    assert_false(w.err);
    assert_int_equal(ded_msg_fetch_decode(buf + DED_FRAME_HDR_BYTES, 18, &out), DED_ERR_PROTO);
  }
  /* Trailing bytes, however many. */
  m.shard = 2;
  ded_wr w = ded_wr_init(buf, DED_FETCH_FRAME_BYTES);
  ded_msg_fetch_encode(&w, &m);
  memset(buf + DED_FETCH_FRAME_BYTES, 0, 4);
  assert_int_equal(ded_msg_fetch_decode(buf + DED_FRAME_HDR_BYTES, 18, &out), 0);
  for (size_t extra = 1; extra <= 4; extra++)
    assert_int_equal(ded_msg_fetch_decode(buf + DED_FRAME_HDR_BYTES, 18 + extra, &out),
                     DED_ERR_PROTO);
}

/* A digest whose bytes all differ from each other and from |seed|'s. */
static void msg_digest_fill(uint8_t d[DED_RESULT_DIGEST_BYTES], unsigned seed) {
  for (unsigned i = 0; i < DED_RESULT_DIGEST_BYTES; i++) d[i] = (uint8_t)(seed * 37u + i * 7u + 1u);
}

static void test_msg_have_round_trip(void **state) {
  (void)state;
  ded_msg_have cases[] = {
      {0x0102030405060708ull, (uint64_t)7 << 32 | 0xcafef00du, 0x11223344u, 0, {0}},
      {0x0102030405060708ull, (uint64_t)7 << 32 | 0xcafef00du, 7, DED_HAVE_F_DONE, {0}},
      {0, 1, 0, 0, {0}},
      {UINT64_MAX, UINT64_MAX, UINT32_MAX, DED_HAVE_F_DONE, {0}},
      {5, 6, 7, 0, {0}}};
  size_t n = sizeof cases / sizeof cases[0];
  /* Digests: distinct patterns, all zeros (case 2) and all ones (the last). */
  msg_digest_fill(cases[0].digest, 0);
  msg_digest_fill(cases[1].digest, 1);
  msg_digest_fill(cases[3].digest, 3);
  memset(cases[n - 1].digest, 0xff, DED_RESULT_DIGEST_BYTES);
  for (size_t i = 0; i < n; i++) {
    uint8_t buf[DED_HAVE_FRAME_BYTES];
    ded_wr w = ded_wr_init(buf, sizeof buf);
    ded_msg_have_encode(&w, &cases[i]);
    assert_false(w.err);
    assert_int_equal(w.pos, sizeof buf);
    ded_frame fr = msg_unframe(buf, w.pos, DED_MSG_HAVE);
    /* round | attempt | view | flags | digest */
    assert_int_equal(fr.len, HAVE_BYTES);
    assert_int_equal(DED_HAVE_FRAME_BYTES, DED_FRAME_HDR_BYTES + HAVE_BYTES);
    assert_int_equal(msg_le(fr.payload, 8), cases[i].round);
    assert_int_equal(msg_le(fr.payload + 8, 8), cases[i].attempt);
    assert_int_equal(msg_le(fr.payload + 16, 4), cases[i].view);
    assert_int_equal(fr.payload[HAVE_OFF_FLAGS], cases[i].flags);
    assert_memory_equal(fr.payload + HAVE_OFF_DIGEST, cases[i].digest, DED_RESULT_DIGEST_BYTES);
    ded_msg_have out;
    memset(&out, 0xee, sizeof out);
    assert_int_equal(ded_msg_have_decode(fr.payload, fr.len, &out), 0);
    assert_int_equal(out.round, cases[i].round);
    assert_int_equal(out.attempt, cases[i].attempt);
    assert_int_equal(out.view, cases[i].view);
    assert_int_equal(out.flags, cases[i].flags);
    assert_memory_equal(out.digest, cases[i].digest, DED_RESULT_DIGEST_BYTES);
    /* Every shorter prefix and a byte too many are refused. */
    msg_check_bounds(DED_MSG_HAVE, fr.payload, fr.len, 0);
  }
}

/* The digest is opaque: each of its bytes, whatever its value, comes back
 * as it was sent, and no other field moves. */
static void test_msg_have_digest_bytes(void **state) {
  (void)state;
  ded_msg_have m = {0x1122334455667788ull, 0x99, 0xabcdu, DED_HAVE_F_DONE, {0}};
  uint8_t buf[DED_HAVE_FRAME_BYTES];
  ded_wr w = ded_wr_init(buf, sizeof buf);
  ded_msg_have_encode(&w, &m);
  assert_false(w.err);
  uint8_t *payload = buf + DED_FRAME_HDR_BYTES;
  for (unsigned b = 0; b < DED_RESULT_DIGEST_BYTES; b++)
    for (unsigned v = 0; v < 256; v += 51) { /* 0x00, 0x33, ..., 0xff */
      uint8_t want[DED_RESULT_DIGEST_BYTES] = {0};
      want[b] = (uint8_t)v;
      memset(payload + HAVE_OFF_DIGEST, 0, DED_RESULT_DIGEST_BYTES);
      payload[HAVE_OFF_DIGEST + b] = (uint8_t)v;
      ded_msg_have out;
      memset(&out, 0xee, sizeof out);
      assert_int_equal(ded_msg_have_decode(payload, HAVE_BYTES, &out), 0);
      assert_memory_equal(out.digest, want, DED_RESULT_DIGEST_BYTES);
      assert_int_equal(out.round, m.round);
      assert_int_equal(out.attempt, m.attempt);
      assert_int_equal(out.view, m.view);
      assert_int_equal(out.flags, m.flags);
    }
}

static void test_msg_have_invalid(void **state) {
  (void)state;
  uint8_t buf[DED_HAVE_FRAME_BYTES + 4];
  ded_msg_have m = {9, (uint64_t)2 << 32 | 0x01020304u, 2, 0, {0}};
  msg_digest_fill(m.digest, 9);
  ded_msg_have out;
  ded_wr w = ded_wr_init(buf, DED_HAVE_FRAME_BYTES);
  ded_msg_have_encode(&w, &m);
  assert_false(w.err);
  uint8_t *payload = buf + DED_FRAME_HDR_BYTES;
  assert_int_equal(ded_msg_have_decode(payload, HAVE_BYTES, &out), 0);
  /* Every flag byte: DONE or nothing, no other bit. */
  for (unsigned v = 0; v < 256; v++) {
    payload[HAVE_OFF_FLAGS] = (uint8_t)v;
    int want = v & ~(unsigned)DED_HAVE_F_DONE ? DED_ERR_PROTO : 0;
    if (ded_msg_have_decode(payload, HAVE_BYTES, &out) != want)
      fail_msg("HAVE with flags 0x%02x: want %d", v, want);
  }
  payload[HAVE_OFF_FLAGS] = 0;
  /* Truncated anywhere, the flags byte and every byte of the digest
   * included: a HAVE of version 8 (no digest) and one a byte short. */
  for (size_t n = 0; n < HAVE_BYTES; n++)
    assert_int_equal(ded_msg_have_decode(payload, n, &out), DED_ERR_PROTO);
  assert_int_equal(ded_msg_have_decode(payload, HAVE_OFF_DIGEST, &out), DED_ERR_PROTO);
  assert_int_equal(ded_msg_have_decode(payload, HAVE_BYTES - 1, &out), DED_ERR_PROTO);
  /* The whole frame a byte short or long, as the frame decoder cuts it:
   * refused too (the digest is no optional tail). */
  for (int delta = -1; delta <= 1; delta += 2) {
    uint8_t fb[DED_HAVE_FRAME_BYTES + 1];
    memcpy(fb, buf, DED_HAVE_FRAME_BYTES);
    fb[DED_HAVE_FRAME_BYTES] = 0;
    ded_frame_put_hdr(fb, DED_MSG_HAVE, (uint32_t)((int)HAVE_BYTES + delta));
    ded_frame fr = msg_unframe(fb, (size_t)((int)DED_HAVE_FRAME_BYTES + delta), DED_MSG_HAVE);
    assert_int_equal(fr.len, (size_t)((int)HAVE_BYTES + delta));
    assert_int_equal(ded_msg_have_decode(fr.payload, fr.len, &out), DED_ERR_PROTO);
  }
  /* Trailing bytes, however many. */
  memset(buf + DED_HAVE_FRAME_BYTES, 0, 4);
  for (size_t extra = 1; extra <= 4; extra++)
    assert_int_equal(ded_msg_have_decode(payload, HAVE_BYTES + extra, &out), DED_ERR_PROTO);
  /* Attempt 0 names no attempt, whatever else the HAVE says. */
  const ded_msg_have zero[] = {
      {9, 0, 2, 0, {0}}, {9, 0, 2, DED_HAVE_F_DONE, {0}}, {0, 0, 0, 0, {0}}};
  for (size_t i = 0; i < sizeof zero / sizeof zero[0]; i++) {
    w = ded_wr_init(buf, DED_HAVE_FRAME_BYTES);
    ded_msg_have_encode(&w, &zero[i]);
    assert_false(w.err);
    assert_int_equal(ded_msg_have_decode(payload, HAVE_BYTES, &out), DED_ERR_PROTO);
  }
  /* Any nonzero byte of the attempt makes it one. */
  for (unsigned b = 0; b < 8; b++) {
    memset(payload + 8, 0, 8);
    payload[8 + b] = 1;
    assert_int_equal(ded_msg_have_decode(payload, HAVE_BYTES, &out), 0);
    assert_int_equal(out.attempt, (uint64_t)1 << (8 * b));
  }
}

static void test_msg_probe_round_trip(void **state) {
  (void)state;
  const ded_msg_probe cases[] = {{0x1122334455667788ull, 0x99aabbccu}, {0, 0}, {UINT64_MAX, UINT32_MAX}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint8_t buf[DED_PROBE_FRAME_BYTES];
    ded_wr w = ded_wr_init(buf, sizeof buf);
    ded_msg_probe_encode(&w, &cases[i]);
    assert_false(w.err);
    assert_int_equal(w.pos, sizeof buf);
    ded_frame fr = msg_unframe(buf, w.pos, DED_MSG_PROBE);
    assert_int_equal(fr.len, 12);
    assert_int_equal(msg_le(fr.payload, 8), cases[i].round);
    assert_int_equal(msg_le(fr.payload + 8, 4), cases[i].view);
    ded_msg_probe out;
    assert_int_equal(ded_msg_probe_decode(fr.payload, fr.len, &out), 0);
    assert_int_equal(out.round, cases[i].round);
    assert_int_equal(out.view, cases[i].view);
    msg_check_bounds(DED_MSG_PROBE, fr.payload, fr.len, 0);
  }
}

/* ABSTAIN: a round of 1 or more, 8 bytes; round 0 (it has no acceptors
 * before it to step down from) refused. */
static void test_msg_abstain_round_trip(void **state) {
  (void)state;
  const ded_msg_abstain cases[] = {{1}, {0x1122334455667788ull}, {UINT64_MAX}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint8_t buf[DED_ABSTAIN_FRAME_BYTES];
    ded_wr w = ded_wr_init(buf, sizeof buf);
    ded_msg_abstain_encode(&w, &cases[i]);
    assert_false(w.err);
    assert_int_equal(w.pos, sizeof buf);
    ded_frame fr = msg_unframe(buf, w.pos, DED_MSG_ABSTAIN);
    assert_int_equal(fr.len, 8);
    assert_int_equal(msg_le(fr.payload, 8), cases[i].round);
    ded_msg_abstain out;
    assert_int_equal(ded_msg_abstain_decode(fr.payload, fr.len, &out), 0);
    assert_int_equal(out.round, cases[i].round);
    msg_check_bounds(DED_MSG_ABSTAIN, fr.payload, fr.len, 0);
  }
  uint8_t zero[8] = {0};
  ded_msg_abstain out;
  assert_int_equal(ded_msg_abstain_decode(zero, sizeof zero, &out), DED_ERR_PROTO);
  assert_string_equal(ded_msg_name(DED_MSG_ABSTAIN), "ABSTAIN");
}

/* ---------------------------------------------- REDIRECT, LEAVE, STALE */

static void test_msg_redirect_round_trip(void **state) {
  (void)state;
  ded_msg_redirect m = {.round = 0xfedcba9876543210ull, .view = 0x01020304u};
  for (int i = 0; i < DED_ID_BYTES; i++) m.id[i] = (uint8_t)(i * 3);
  uint8_t buf[DED_REDIRECT_FRAME_BYTES];
  ded_wr w = ded_wr_init(buf, sizeof buf);
  ded_msg_redirect_encode(&w, &m);
  assert_false(w.err);
  assert_int_equal(w.pos, sizeof buf);
  ded_frame fr = msg_unframe(buf, w.pos, DED_MSG_REDIRECT);
  /* round | view | id */
  assert_int_equal(fr.len, 8 + 4 + DED_ID_BYTES);
  assert_int_equal(msg_le(fr.payload, 8), m.round);
  assert_int_equal(msg_le(fr.payload + 8, 4), m.view);
  assert_memory_equal(fr.payload + 12, m.id, DED_ID_BYTES);
  ded_msg_redirect out;
  assert_int_equal(ded_msg_redirect_decode(fr.payload, fr.len, &out), 0);
  assert_int_equal(out.round, m.round);
  assert_int_equal(out.view, m.view);
  assert_memory_equal(out.id, m.id, DED_ID_BYTES);
  msg_check_bounds(DED_MSG_REDIRECT, fr.payload, fr.len, 0);
}

static void test_msg_leave_round_trip(void **state) {
  (void)state;
  const uint8_t reasons[] = {DED_LEAVE_FINALIZE, DED_LEAVE_SHUTDOWN, DED_LEAVE_MISMATCH_STEP,
                             DED_LEAVE_MISMATCH_STATE, DED_LEAVE_ERROR};
  for (size_t i = 0; i < sizeof reasons; i++) {
    uint8_t buf[DED_LEAVE_FRAME_BYTES];
    ded_wr w = ded_wr_init(buf, sizeof buf);
    ded_msg_leave_encode(&w, reasons[i]);
    assert_false(w.err);
    ded_frame fr = msg_unframe(buf, w.pos, DED_MSG_LEAVE);
    uint8_t out = 0;
    assert_int_equal(ded_msg_leave_decode(fr.payload, fr.len, &out), 0);
    assert_int_equal(out, reasons[i]);
    msg_check_bounds(DED_MSG_LEAVE, fr.payload, fr.len, 0);
  }
  /* Values past the known ones are malformed (the peer is dropped), not
   * a reason to guess at. */
  const uint8_t bad[] = {0, DED_LEAVE_REASON_MAX + 1, 255};
  for (size_t i = 0; i < sizeof bad; i++) {
    uint8_t out;
    assert_int_equal(ded_msg_leave_decode(&bad[i], 1, &out), DED_ERR_PROTO);
  }
  /* Two bytes: the reason is one. */
  const uint8_t two[] = {DED_LEAVE_ERROR, 0};
  uint8_t out;
  assert_int_equal(ded_msg_leave_decode(two, sizeof two, &out), DED_ERR_PROTO);
  /* The ordinary ends say nothing more; each failure a line of its own. */
  assert_null(ded_leave_why(DED_LEAVE_FINALIZE));
  assert_null(ded_leave_why(DED_LEAVE_SHUTDOWN));
  assert_null(ded_leave_why(DED_LEAVE_REASON_MAX + 1));
  assert_non_null(strstr(ded_leave_why(DED_LEAVE_MISMATCH_STEP), "training step differs"));
  assert_non_null(strstr(ded_leave_why(DED_LEAVE_MISMATCH_STATE), "state differs"));
  assert_non_null(ded_leave_why(DED_LEAVE_ERROR));
}

/* STALE and AHEAD share a body; each frame carries its own type. */
static void msg_rounds_round_trip(uint8_t type) {
  void (*enc)(ded_wr *, const ded_msg_stale *) =
      type == DED_MSG_STALE ? ded_msg_stale_encode : ded_msg_ahead_encode;
  int (*dec)(const uint8_t *, size_t, ded_msg_stale *) =
      type == DED_MSG_STALE ? ded_msg_stale_decode : ded_msg_ahead_decode;
  ded_msg_stale m = {41, 45};
  uint8_t buf[DED_STALE_FRAME_BYTES];
  ded_wr w = ded_wr_init(buf, sizeof buf);
  enc(&w, &m);
  assert_false(w.err);
  assert_int_equal(w.pos, DED_STALE_FRAME_BYTES);
  ded_frame fr = msg_unframe(buf, w.pos, type);
  ded_msg_stale out;
  assert_int_equal(dec(fr.payload, fr.len, &out), 0);
  assert_int_equal(out.round, 41);
  assert_int_equal(out.next_round, 45);
  msg_check_bounds(type, fr.payload, fr.len, 0);
  /* The swarm must be past the round it names. */
  const ded_msg_stale bad[] = {{41, 41}, {41, 40}, {UINT64_MAX, 0}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    w = ded_wr_init(buf, sizeof buf);
    enc(&w, &bad[i]);
    assert_int_equal(dec(buf + DED_FRAME_HDR_BYTES, w.pos - DED_FRAME_HDR_BYTES, &out),
                     DED_ERR_PROTO);
  }
}

static void test_msg_stale_round_trip(void **state) {
  (void)state;
  msg_rounds_round_trip(DED_MSG_STALE);
}

static void test_msg_ahead_round_trip(void **state) {
  (void)state;
  msg_rounds_round_trip(DED_MSG_AHEAD);
}

/* -------------------------------------------------------- DATA/RESULT */

#define DATA_PAYLOAD_HDR (DED_DATA_HDR_BYTES - DED_FRAME_HDR_BYTES)

static void test_msg_data_round_trip(void **state) {
  (void)state;
  assert_int_equal(DED_DATA_HDR_BYTES, 30);
  const uint8_t types[] = {DED_MSG_DATA, DED_MSG_RESULT};
  for (size_t t = 0; t < sizeof types; t++)
    /* Version 15: every codec a frame may name, SPARSE (a top-k round's
     * RESULT) the last. */
    for (unsigned codec = DED_CODEC_NONE; codec <= DED_CODEC_KIND_MAX; codec++) {
      float elems[5] = {1.5f, -2.0f, 3.25f, 0.0f, 1e-30f};
      uint8_t buf[DED_DATA_HDR_BYTES + sizeof elems];
      const uint64_t attempt = (uint64_t)5 << 32 | 0x01020304u;
      ded_msg_data_hdr_encode(buf, types[t], 9, attempt, 1000, (uint8_t)codec, sizeof elems);
      memcpy(buf + DED_DATA_HDR_BYTES, elems, sizeof elems);
      ded_frame fr = msg_unframe(buf, sizeof buf, types[t]);
      /* round | attempt | offset | codec | elements */
      assert_int_equal(fr.len, 25 + sizeof elems);
      assert_int_equal(msg_le(fr.payload, 8), 9);
      assert_int_equal(msg_le(fr.payload + 8, 8), attempt);
      assert_int_equal(msg_le(fr.payload + 16, 8), 1000);
      assert_int_equal(fr.payload[24], codec);
      ded_msg_data d;
      assert_int_equal(ded_msg_data_decode(fr.payload, fr.len, &d), 0);
      assert_int_equal(d.round, 9);
      assert_int_equal(d.attempt, attempt);
      assert_int_equal(d.offset, 1000);
      assert_int_equal(d.codec, codec);
      assert_int_equal(d.len, sizeof elems);
      /* The elements stay where they are. */
      assert_ptr_equal(d.elems, buf + DED_DATA_HDR_BYTES);
      assert_memory_equal(d.elems, elems, sizeof elems);
      msg_check_bounds(types[t], fr.payload, fr.len, DATA_PAYLOAD_HDR + 1);
    }
  /* Any attempt, the largest included. */
  uint8_t buf[DED_DATA_HDR_BYTES + 4] = {0};
  ded_msg_data_hdr_encode(buf, DED_MSG_RESULT, UINT64_MAX, UINT64_MAX, DED_COUNT_MAX,
                          DED_CODEC_KIND_MAX, 4);
  ded_msg_data d;
  assert_int_equal(ded_msg_data_decode(buf + DED_FRAME_HDR_BYTES, DATA_PAYLOAD_HDR + 4, &d), 0);
  assert_int_equal(d.round, UINT64_MAX);
  assert_int_equal(d.attempt, UINT64_MAX);
  assert_int_equal(d.offset, DED_COUNT_MAX);
  assert_int_equal(d.codec, DED_CODEC_KIND_MAX);
}

/* -------------------------------------------------------------- SPEED */

static void test_msg_speed(void **state) {
  (void)state;
  /* want | fill: the fill stays where it is, any length (none too). */
  uint8_t buf[DED_SPEED_HDR_BYTES + 6];
  const uint32_t wants[] = {0, 1, 123456, DED_SPEED_WANT_MAX};
  for (size_t i = 0; i < sizeof wants / sizeof wants[0]; i++) {
    size_t fill = i % 2 ? 6 : 0;
    memset(buf, 0xee, sizeof buf);
    ded_msg_speed_hdr_encode(buf, wants[i], fill);
    memset(buf + DED_SPEED_HDR_BYTES, 0, fill);
    ded_frame fr = msg_unframe(buf, DED_SPEED_HDR_BYTES + fill, DED_MSG_SPEED);
    assert_int_equal(fr.len, 4 + fill);
    assert_int_equal(msg_le(fr.payload, 4), wants[i]);
    ded_msg_speed m;
    assert_int_equal(ded_msg_speed_decode(fr.payload, fr.len, &m), 0);
    assert_int_equal(m.want, wants[i]);
    assert_int_equal(m.len, fill);
    assert_ptr_equal(m.fill, buf + DED_SPEED_HDR_BYTES);
    msg_check_bounds(DED_MSG_SPEED, fr.payload, fr.len, 4);
  }
  /* Asking for more than a peer answers is a violation; so is a cut want. */
  uint8_t p[4];
  ded_wr w = ded_wr_init(p, sizeof p);
  ded_wr_u32(&w, DED_SPEED_WANT_MAX + 1);
  ded_msg_speed m;
  assert_int_equal(ded_msg_speed_decode(p, sizeof p, &m), DED_ERR_PROTO);
  assert_int_equal(ded_msg_speed_decode(p, 3, &m), DED_ERR_PROTO);
}

static void test_msg_data_invalid(void **state) {
  (void)state;
  uint8_t buf[DED_DATA_HDR_BYTES + 8];
  memset(buf, 0, sizeof buf);
  ded_msg_data d;
  /* A header and no elements. */
  ded_msg_data_hdr_encode(buf, DED_MSG_DATA, 1, 2, 0, 0, 0);
  assert_int_equal(ded_msg_data_decode(buf + DED_FRAME_HDR_BYTES, DATA_PAYLOAD_HDR, &d),
                   DED_ERR_PROTO);
  /* The version 1 header (no attempt) is too short to be one. */
  for (size_t n = 0; n <= DATA_PAYLOAD_HDR; n++)
    assert_int_equal(ded_msg_data_decode(buf + DED_FRAME_HDR_BYTES, n, &d), DED_ERR_PROTO);
  /* An offset no MPI count can reach. */
  ded_msg_data_hdr_encode(buf, DED_MSG_DATA, 1, 2, DED_COUNT_MAX + 1, 0, 8);
  assert_int_equal(ded_msg_data_decode(buf + DED_FRAME_HDR_BYTES, DATA_PAYLOAD_HDR + 8, &d),
                   DED_ERR_PROTO);
  ded_msg_data_hdr_encode(buf, DED_MSG_DATA, 1, 2, DED_COUNT_MAX, 0, 8);
  assert_int_equal(ded_msg_data_decode(buf + DED_FRAME_HDR_BYTES, DATA_PAYLOAD_HDR + 8, &d), 0);
  /* A codec no version 15 peer knows, from the encoder or written into
   * the frame: every byte past DED_CODEC_KIND_MAX is refused. */
  ded_msg_data_hdr_encode(buf, DED_MSG_DATA, 1, 2, 0, DED_CODEC_KIND_MAX + 1, 8);
  assert_int_equal(ded_msg_data_decode(buf + DED_FRAME_HDR_BYTES, DATA_PAYLOAD_HDR + 8, &d),
                   DED_ERR_PROTO);
  ded_msg_data_hdr_encode(buf, DED_MSG_RESULT, 1, 2, 0, 6, 8);
  assert_int_equal(ded_msg_data_decode(buf + DED_FRAME_HDR_BYTES, DATA_PAYLOAD_HDR + 8, &d),
                   DED_ERR_PROTO);
  for (unsigned c = 0; c < 256; c++) {
    buf[DED_FRAME_HDR_BYTES + 24] = (uint8_t)c;
    int want = c > DED_CODEC_KIND_MAX ? DED_ERR_PROTO : 0;
    if (ded_msg_data_decode(buf + DED_FRAME_HDR_BYTES, DATA_PAYLOAD_HDR + 8, &d) != want)
      fail_msg("RESULT with codec 0x%02x: want %d", c, want);
  }
}

/* ---------------------------------------------------- state transfer */

/* Payload layout of STATE_OFFER (ded_msg.h, version 11): status | round |
 * pos | digest | step_rounds | len | lin_attempt | nlin | nlin x id |
 * DED_LIN_BITS(nlin) bytes of client bits (a lineage). No pieces: the
 * snapshot's bytes are opaque to the wire (the shim's state image lists
 * them). */
#define OFFER_OFF_ROUND 1
#define OFFER_OFF_POS 9
#define OFFER_OFF_DIGEST 17
#define OFFER_OFF_STEP 25
#define OFFER_OFF_LEN 29
#define OFFER_OFF_LIN_ATTEMPT 37
#define OFFER_OFF_NLIN 45
#define OFFER_OFF_LIN 47
#define OFFER_BASE_BYTES 47 /* without the lineage */
/* STATE_ASK: u64 min_round | origin[32] (zeros: a plain ask). */
#define STATE_ASK_BYTES (8 + DED_ID_BYTES)
#define STATE_GET_BYTES 28 /* round | digest | offset | u32 len */
#define STATE_DATA_PAYLOAD_HDR (DED_STATE_DATA_HDR_BYTES - DED_FRAME_HDR_BYTES)

/* A STATE_OFFER as raw fields, written by the test itself (not by the
 * encoder), so that it can break the limits: a len past the largest
 * state, any nlin. */
typedef struct msg_offer_spec {
  uint8_t status;
  uint64_t round;
  uint64_t pos;
  uint64_t digest;
  uint32_t step_rounds;
  uint64_t len;
  uint64_t lin_attempt;
  uint16_t nlin;
} msg_offer_spec;

/* Lineage member |i|: ids increasing with i, every byte used. */
static void msg_lin_id(uint8_t id[DED_ID_BYTES], unsigned i) {
  for (unsigned b = 0; b < DED_ID_BYTES; b++) id[b] = (uint8_t)(i * 7 + b * 13 + 1);
  id[0] = (uint8_t)(i >> 8);
  id[1] = (uint8_t)i;
}

/* Whether member |i| of msg_lin_make's lineages is a client. */
static bool msg_lin_is_client(unsigned i) { return i % 3 == 1; }

/* A lineage of |n| members (ded_msg.h): the ids back to back, then the
 * client bits, members 1, 4, 7, ... clients; the caller frees it. */
static uint8_t *msg_lin_make(unsigned n) {
  uint8_t *lin = calloc(DED_LIN_BYTES(n) ? DED_LIN_BYTES(n) : 1, 1);
  assert_non_null(lin);
  for (unsigned i = 0; i < n; i++) {
    msg_lin_id(lin + (size_t)i * DED_ID_BYTES, i);
    if (msg_lin_is_client(i)) lin[(size_t)n * DED_ID_BYTES + i / 8] |= (uint8_t)(1u << (i % 8));
  }
  return lin;
}

/* A valid OFFER: two lineage members, every field nonzero. */
static msg_offer_spec msg_offer_valid(void) {
  msg_offer_spec s;
  memset(&s, 0, sizeof s);
  s.status = DED_STATE_OFFER;
  s.round = 0x0102030405060708ull;
  s.pos = 0x1122334455667ull;
  s.digest = 0xf1e2d3c4b5a69788ull;
  s.step_rounds = 3;
  s.len = 0x0123456789ull + 1007;
  s.lin_attempt = (uint64_t)2 << 32 | 0xa1b2c3d4u;
  s.nlin = 2;
  return s;
}

/* |s| as a payload with lineage |lin| (s->nlin ids back to back, then
 * their client bits; NULL: msg_lin_make's), into a buffer of exactly its
 * size (so that an over-read shows under ASan); the caller frees it. */
static uint8_t *msg_offer_payload_lin(const msg_offer_spec *s, const uint8_t *lin, size_t *len) {
  size_t n = OFFER_BASE_BYTES + DED_LIN_BYTES(s->nlin);
  uint8_t *p = malloc(n);
  assert_non_null(p);
  ded_wr w = ded_wr_init(p, n);
  ded_wr_u8(&w, s->status);
  ded_wr_u64(&w, s->round);
  ded_wr_u64(&w, s->pos);
  ded_wr_u64(&w, s->digest);
  ded_wr_u32(&w, s->step_rounds);
  ded_wr_u64(&w, s->len);
  ded_wr_u64(&w, s->lin_attempt);
  ded_wr_u16(&w, s->nlin);
  uint8_t *made = lin ? NULL : msg_lin_make(s->nlin);
  ded_wr_bytes(&w, lin ? lin : made, DED_LIN_BYTES(s->nlin));
  free(made);
  assert_false(w.err);
  assert_int_equal(w.pos, n);
  *len = n;
  return p;
}

static uint8_t *msg_offer_payload(const msg_offer_spec *s, size_t *len) {
  return msg_offer_payload_lin(s, NULL, len);
}

static int msg_offer_try_lin(const msg_offer_spec *s, const uint8_t *lin) {
  size_t len;
  uint8_t *p = msg_offer_payload_lin(s, lin, &len);
  int rv = msg_decode_any(DED_MSG_STATE_OFFER, p, len);
  free(p);
  return rv;
}

static int msg_offer_try(const msg_offer_spec *s) { return msg_offer_try_lin(s, NULL); }

/* A valid answer of |status| (neither OFFER nor FOUNDING), as a peer sends it: the fields
 * the status uses set (PENDING and GONE a round, GONE also a digest), all
 * the others zero. */
static msg_offer_spec msg_offer_answer(uint8_t status) {
  msg_offer_spec s;
  memset(&s, 0, sizeof s);
  s.status = status;
  if (status == DED_STATE_PENDING || status == DED_STATE_GONE) s.round = 0x0102030405060708ull;
  if (status == DED_STATE_GONE) s.digest = 0xf1e2d3c4b5a69788ull;
  return s;
}

/* The statuses other than OFFER and FOUNDING: those that carry no state. */
static const uint8_t msg_offer_answers[] = {DED_STATE_FRESH, DED_STATE_PENDING, DED_STATE_NONE,
                                            DED_STATE_GONE};

/* The round a FOUNDING names (ded_msg.h): the state before the run's
 * first round, round 0. */
#define MSG_FOUNDING_ROUND 0

/* A valid FOUNDING (ded_msg.h): round MSG_FOUNDING_ROUND, the one origin as the lineage
 * (nlin 1, not a client), pos, step_rounds and lin_attempt 0; len and
 * digest anything within the bounds. */
static msg_offer_spec msg_offer_founding(void) {
  msg_offer_spec s;
  memset(&s, 0, sizeof s);
  s.status = DED_STATE_FOUNDING;
  s.round = MSG_FOUNDING_ROUND;
  s.digest = 0xf1e2d3c4b5a69788ull;
  s.len = 0x0123456789ull;
  s.nlin = 1;
  return s;
}

/* The lineage of a FOUNDING: origin id msg_lin_id(0), then its client bit
 * byte (0: msg_lin_make(1)'s, member 0 is not a client). */
static void msg_founding_lin(uint8_t lin[DED_LIN_BYTES(1)]) {
  memset(lin, 0, DED_LIN_BYTES(1));
  msg_lin_id(lin, 0);
}

/* |s| followed by 1 to 4 zero bytes: refused, however many. */
static void msg_offer_trailing(const msg_offer_spec *s) {
  size_t len;
  uint8_t *p = msg_offer_payload(s, &len);
  for (size_t extra = 1; extra <= 4; extra++) {
    uint8_t *longer = calloc(len + extra, 1);
    assert_non_null(longer);
    memcpy(longer, p, len);
    if (msg_decode_any(DED_MSG_STATE_OFFER, longer, len + extra) != DED_ERR_PROTO)
      fail_msg("STATE_OFFER status %u with %zu trailing bytes accepted", s->status, extra);
    free(longer);
  }
  free(p);
}

/* The decoder's view of |s| with lineage |lin| (ids and client bits). */
static ded_msg_state_offer msg_offer_of(const msg_offer_spec *s, const uint8_t *lin) {
  ded_msg_state_offer m;
  memset(&m, 0, sizeof m);
  m.status = s->status;
  m.round = s->round;
  m.pos = s->pos;
  m.digest = s->digest;
  m.step_rounds = s->step_rounds;
  m.len = s->len;
  m.lin_attempt = s->lin_attempt;
  m.nlin = s->nlin;
  m.lin = lin;
  return m;
}

static void msg_offer_equal(const ded_msg_state_offer *got, const ded_msg_state_offer *want) {
  assert_int_equal(got->status, want->status);
  assert_int_equal(got->round, want->round);
  assert_int_equal(got->pos, want->pos);
  assert_int_equal(got->digest, want->digest);
  assert_int_equal(got->step_rounds, want->step_rounds);
  assert_int_equal(got->len, want->len);
  assert_int_equal(got->lin_attempt, want->lin_attempt);
  assert_int_equal(got->nlin, want->nlin);
  if (want->nlin) assert_memory_equal(got->lin, want->lin, DED_LIN_BYTES(want->nlin));
}

/* An origin that differs from zeros in every byte (|salt| moves it). */
static void msg_origin(uint8_t origin[DED_ID_BYTES], unsigned salt) {
  for (unsigned b = 0; b < DED_ID_BYTES; b++) origin[b] = (uint8_t)(b * 11 + salt * 5 + 1);
}

static void test_msg_state_ask_round_trip(void **state) {
  (void)state;
  assert_int_equal(STATE_ASK_BYTES, 40);
  assert_int_equal(DED_STATE_ASK_FRAME_BYTES, DED_FRAME_HDR_BYTES + STATE_ASK_BYTES);
  /* A plain ask (origin zeros): any round, 0 (a joiner that knows nothing
   * of the run) included. */
  const uint64_t rounds[] = {0, 1, 0x0102030405060708ull, UINT64_MAX};
  for (size_t i = 0; i < sizeof rounds / sizeof rounds[0]; i++) {
    ded_msg_state_ask m;
    memset(&m, 0, sizeof m);
    m.min_round = rounds[i];
    uint8_t buf[DED_STATE_ASK_FRAME_BYTES];
    ded_wr w = ded_wr_init(buf, sizeof buf);
    ded_msg_state_ask_encode(&w, &m);
    assert_false(w.err);
    assert_int_equal(w.pos, DED_STATE_ASK_FRAME_BYTES);
    ded_frame fr = msg_unframe(buf, w.pos, DED_MSG_STATE_ASK);
    assert_int_equal(fr.len, STATE_ASK_BYTES);
    assert_int_equal(msg_le(fr.payload, 8), rounds[i]);
    for (unsigned b = 0; b < DED_ID_BYTES; b++) assert_int_equal(fr.payload[8 + b], 0);
    ded_msg_state_ask out;
    memset(&out, 0xee, sizeof out);
    assert_int_equal(ded_msg_state_ask_decode(fr.payload, fr.len, &out), 0);
    assert_int_equal(out.min_round, rounds[i]);
    for (unsigned b = 0; b < DED_ID_BYTES; b++) assert_int_equal(out.origin[b], 0);
    msg_check_bounds(DED_MSG_STATE_ASK, fr.payload, fr.len, 0);
  }
}

/*
 * Version 11: a founding ask names an origin (not all zeros) and asks for
 * no round (min_round 0). It round trips in the same frame size as a
 * plain ask, the origin after the round, byte for byte; an origin with
 * any min_round but 0 is refused, whichever byte of it is set.
 */
static void test_msg_state_ask_origin(void **state) {
  (void)state;
  ded_msg_state_ask m;
  memset(&m, 0, sizeof m);
  msg_origin(m.origin, 0);
  uint8_t buf[DED_STATE_ASK_FRAME_BYTES];
  ded_wr w = ded_wr_init(buf, sizeof buf);
  ded_msg_state_ask_encode(&w, &m);
  assert_false(w.err);
  assert_int_equal(w.pos, DED_STATE_ASK_FRAME_BYTES);
  assert_int_equal(msg_le(buf, 4), DED_STATE_ASK_FRAME_BYTES - 4);
  ded_frame fr = msg_unframe(buf, w.pos, DED_MSG_STATE_ASK);
  assert_int_equal(fr.len, STATE_ASK_BYTES);
  assert_int_equal(msg_le(fr.payload, 8), 0);
  assert_memory_equal(fr.payload + 8, m.origin, DED_ID_BYTES);
  ded_msg_state_ask out;
  memset(&out, 0xee, sizeof out);
  assert_int_equal(ded_msg_state_ask_decode(fr.payload, fr.len, &out), 0);
  assert_int_equal(out.min_round, 0);
  assert_memory_equal(out.origin, m.origin, DED_ID_BYTES);
  msg_check_bounds(DED_MSG_STATE_ASK, fr.payload, fr.len, 0);

  /* A single nonzero byte anywhere makes an origin: accepted with
   * min_round 0, refused with any other. */
  uint8_t p[STATE_ASK_BYTES];
  for (unsigned b = 0; b < DED_ID_BYTES; b++) {
    memset(p, 0, sizeof p);
    p[8 + b] = (uint8_t)(b == DED_ID_BYTES - 1 ? 0x80 : 1);
    if (msg_decode_any(DED_MSG_STATE_ASK, p, sizeof p) != 0)
      fail_msg("founding ask with origin byte %u set refused", b);
    ded_msg_state_ask o;
    assert_int_equal(ded_msg_state_ask_decode(p, sizeof p, &o), 0);
    assert_int_equal(o.origin[b], p[8 + b]);
    const uint64_t bad[] = {1, 2, 0x0100000000000000ull, UINT64_MAX};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
      msg_put_le(p, bad[i], 8);
      if (msg_decode_any(DED_MSG_STATE_ASK, p, sizeof p) != DED_ERR_PROTO)
        fail_msg("origin byte %u set with min_round %llu accepted", b,
                 (unsigned long long)bad[i]);
    }
  }
  /* A whole origin with a round, as the encoder writes it: refused. */
  m.min_round = 7;
  w = ded_wr_init(buf, sizeof buf);
  ded_msg_state_ask_encode(&w, &m);
  assert_false(w.err);
  fr = msg_unframe(buf, w.pos, DED_MSG_STATE_ASK);
  assert_int_equal(ded_msg_state_ask_decode(fr.payload, fr.len, &out), DED_ERR_PROTO);
  /* The version 10 ask (the round alone) is too short for version 11. */
  memset(p, 0, sizeof p);
  for (size_t n = 0; n < sizeof p; n++)
    assert_int_equal(msg_decode_any(DED_MSG_STATE_ASK, p, n), DED_ERR_PROTO);
  assert_int_equal(msg_decode_any(DED_MSG_STATE_ASK, p, sizeof p), 0);
}

static void test_msg_state_offer_round_trip(void **state) {
  (void)state;
  assert_int_equal(DED_STATE_OFFER_FRAME_BYTES(0), DED_FRAME_HDR_BYTES + OFFER_BASE_BYTES);
  msg_offer_spec s = msg_offer_valid();
  uint8_t *lin = msg_lin_make(s.nlin);
  ded_msg_state_offer m = msg_offer_of(&s, lin);
  uint8_t buf[DED_STATE_OFFER_FRAME_BYTES(2)];
  ded_wr w = ded_wr_init(buf, sizeof buf);
  ded_msg_state_offer_encode(&w, &m);
  assert_false(w.err);
  assert_int_equal(w.pos, DED_STATE_OFFER_FRAME_BYTES(2));
  ded_frame fr = msg_unframe(buf, w.pos, DED_MSG_STATE_OFFER);
  /* The layout of ded_msg.h, byte for byte as the test writes it. */
  size_t want_len;
  uint8_t *want = msg_offer_payload(&s, &want_len);
  assert_int_equal(fr.len, want_len);
  assert_memory_equal(fr.payload, want, want_len);
  free(want);
  assert_int_equal(fr.payload[0], DED_STATE_OFFER);
  assert_int_equal(msg_le(fr.payload + OFFER_OFF_ROUND, 8), s.round);
  assert_int_equal(msg_le(fr.payload + OFFER_OFF_POS, 8), s.pos);
  assert_int_equal(msg_le(fr.payload + OFFER_OFF_DIGEST, 8), s.digest);
  assert_int_equal(msg_le(fr.payload + OFFER_OFF_STEP, 4), s.step_rounds);
  assert_int_equal(msg_le(fr.payload + OFFER_OFF_LEN, 8), s.len);
  /* No pieces since version 11: the lineage's attempt follows len. */
  const uint8_t *tail = fr.payload + OFFER_OFF_LIN_ATTEMPT;
  assert_int_equal(msg_le(tail, 8), s.lin_attempt);
  assert_int_equal(msg_le(fr.payload + OFFER_OFF_NLIN, 2), 2);
  assert_ptr_equal(tail + 10, fr.payload + OFFER_OFF_LIN);
  assert_int_equal(msg_le(tail + 8, 2), 2);
  assert_memory_equal(tail + 10, lin, 2 * DED_ID_BYTES);
  /* Then one byte of client bits: member 1 is a client. */
  assert_int_equal(tail[10 + 2 * DED_ID_BYTES], 0x02);
  assert_ptr_equal(tail + 10 + DED_LIN_BYTES(2), fr.payload + fr.len);
  ded_msg_state_offer out;
  memset(&out, 0xee, sizeof out);
  assert_int_equal(ded_msg_state_offer_decode(fr.payload, fr.len, &out), 0);
  msg_offer_equal(&out, &m);
  assert_false(ded_lin_client(out.lin, out.nlin, 0));
  assert_true(ded_lin_client(out.lin, out.nlin, 1));
  /* The lineage stays in the payload. */
  assert_ptr_equal(out.lin, tail + 10);
  msg_check_bounds(DED_MSG_STATE_OFFER, fr.payload, fr.len, 0);
  free(lin);

  /* The largest: the largest state, the largest lineage. */
  s.len = DED_STATE_BYTES_MAX;
  s.nlin = DED_ROUND_MEMBERS_MAX;
  s.step_rounds = DED_STATE_STEP_ROUNDS_MAX;
  s.round = UINT64_MAX;
  lin = msg_lin_make(s.nlin);
  m = msg_offer_of(&s, lin);
  size_t cap = DED_STATE_OFFER_FRAME_BYTES(DED_ROUND_MEMBERS_MAX);
  assert_true(cap - 4 <= DED_FRAME_MAX);
  uint8_t *big = malloc(cap);
  assert_non_null(big);
  w = ded_wr_init(big, cap);
  ded_msg_state_offer_encode(&w, &m);
  assert_false(w.err);
  assert_int_equal(w.pos, cap);
  fr = msg_unframe(big, w.pos, DED_MSG_STATE_OFFER);
  assert_int_equal(ded_msg_state_offer_decode(fr.payload, fr.len, &out), 0);
  msg_offer_equal(&out, &m);
  for (unsigned i = 0; i < s.nlin; i++)
    assert_int_equal(ded_lin_client(out.lin, out.nlin, i), msg_lin_is_client(i));
  /* A byte short or a byte over. */
  assert_int_equal(msg_decode_any(DED_MSG_STATE_OFFER, fr.payload, fr.len - 1), DED_ERR_PROTO);
  free(big);
  free(lin);
}

/* FRESH, PENDING, NONE and GONE: one layout for every status, the
 * fields a status does not use zero. */
static void test_msg_state_offer_statuses(void **state) {
  (void)state;
  const struct {
    uint8_t status;
    uint64_t round, digest;
  } cases[] = {{DED_STATE_FRESH, 0, 0},
               {DED_STATE_PENDING, 12, 0},
               {DED_STATE_NONE, 0, 0},
               {DED_STATE_GONE, 12, 0x8877665544332211ull}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ded_msg_state_offer m;
    memset(&m, 0, sizeof m);
    m.status = cases[i].status;
    m.round = cases[i].round;
    m.digest = cases[i].digest;
    uint8_t buf[DED_STATE_OFFER_FRAME_BYTES(0)];
    ded_wr w = ded_wr_init(buf, sizeof buf);
    ded_msg_state_offer_encode(&w, &m);
    assert_false(w.err);
    assert_int_equal(w.pos, DED_STATE_OFFER_FRAME_BYTES(0));
    ded_frame fr = msg_unframe(buf, w.pos, DED_MSG_STATE_OFFER);
    assert_int_equal(fr.len, OFFER_BASE_BYTES);
    assert_int_equal(fr.payload[0], cases[i].status);
    ded_msg_state_offer out;
    memset(&out, 0xee, sizeof out);
    assert_int_equal(ded_msg_state_offer_decode(fr.payload, fr.len, &out), 0);
    msg_offer_equal(&out, &m);
    msg_check_bounds(DED_MSG_STATE_OFFER, fr.payload, fr.len, 0);
  }
}

static void test_msg_state_offer_invalid(void **state) {
  (void)state;
  msg_offer_spec s = msg_offer_valid();
  assert_int_equal(msg_offer_try(&s), 0);

  /* Every status byte: OFFER .. FOUNDING, nothing above. Each status is
   * tried with the fields it may carry (a snapshot for OFFER, a founding
   * state for FOUNDING, the answer as it is sent for the others); a
   * status above FOUNDING is refused with any of them. */
  uint8_t flin[DED_LIN_BYTES(1)];
  msg_founding_lin(flin);
  for (unsigned v = 0; v < 256; v++) {
    int want = v > DED_STATE_FOUNDING ? DED_ERR_PROTO : 0;
    s = v == DED_STATE_OFFER || v > DED_STATE_FOUNDING ? msg_offer_valid()
        : v == DED_STATE_FOUNDING                      ? msg_offer_founding()
                                                       : msg_offer_answer((uint8_t)v);
    s.status = (uint8_t)v;
    if (msg_offer_try(&s) != want) fail_msg("STATE_OFFER with status %u: want %d", v, want);
    for (size_t i = 0; v > DED_STATE_FOUNDING && i < sizeof msg_offer_answers; i++) {
      s = msg_offer_answer(msg_offer_answers[i]);
      s.status = (uint8_t)v;
      if (msg_offer_try(&s) != DED_ERR_PROTO)
        fail_msg("STATE_OFFER with status %u and the fields of %u accepted", v,
                 msg_offer_answers[i]);
    }
    if (v > DED_STATE_FOUNDING) {
      s = msg_offer_founding();
      s.status = (uint8_t)v;
      if (msg_offer_try_lin(&s, flin) != DED_ERR_PROTO)
        fail_msg("STATE_OFFER with status %u and a founding state's fields accepted", v);
    }
  }

  /* The state's length: anything up to the largest state, no more
   * (version 11 has no pieces to add up to it). */
  const uint64_t lens_ok[] = {0, 1, 1000, DED_STATE_BYTES_MAX - 1, DED_STATE_BYTES_MAX};
  for (size_t i = 0; i < sizeof lens_ok / sizeof lens_ok[0]; i++) {
    s = msg_offer_valid();
    s.len = lens_ok[i];
    if (msg_offer_try(&s) != 0)
      fail_msg("OFFER of %llu bytes refused", (unsigned long long)lens_ok[i]);
  }
  const uint64_t lens_bad[] = {DED_STATE_BYTES_MAX + 1, DED_STATE_BYTES_MAX << 1,
                               (uint64_t)1 << 63, UINT64_MAX};
  for (size_t i = 0; i < sizeof lens_bad / sizeof lens_bad[0]; i++) {
    s = msg_offer_valid();
    s.len = lens_bad[i];
    if (msg_offer_try(&s) != DED_ERR_PROTO)
      fail_msg("OFFER of %llu bytes accepted", (unsigned long long)lens_bad[i]);
    s = msg_offer_founding();
    s.len = lens_bad[i];
    if (msg_offer_try_lin(&s, flin) != DED_ERR_PROTO)
      fail_msg("FOUNDING of %llu bytes accepted", (unsigned long long)lens_bad[i]);
  }
  s = msg_offer_answer(DED_STATE_GONE); /* a length without a state, whatever the status */
  s.len = 1;
  assert_int_equal(msg_offer_try(&s), DED_ERR_PROTO);

  /* A version 10 OFFER (a piece table after len: npieces 1, its size) is
   * not a version 11 one. */
  {
    s = msg_offer_valid();
    s.len = 1000;
    size_t n10 = OFFER_BASE_BYTES + 2 + 8 + DED_LIN_BYTES(s.nlin);
    uint8_t *p10 = malloc(n10);
    assert_non_null(p10);
    ded_wr w10 = ded_wr_init(p10, n10);
    ded_wr_u8(&w10, s.status);
    ded_wr_u64(&w10, s.round);
    ded_wr_u64(&w10, s.pos);
    ded_wr_u64(&w10, s.digest);
    ded_wr_u32(&w10, s.step_rounds);
    ded_wr_u64(&w10, s.len);
    ded_wr_u16(&w10, 1);
    ded_wr_u64(&w10, s.len);
    ded_wr_u64(&w10, s.lin_attempt);
    ded_wr_u16(&w10, s.nlin);
    uint8_t *l10 = msg_lin_make(s.nlin);
    ded_wr_bytes(&w10, l10, DED_LIN_BYTES(s.nlin));
    free(l10);
    assert_false(w10.err);
    assert_int_equal(msg_decode_any(DED_MSG_STATE_OFFER, p10, n10), DED_ERR_PROTO);
    free(p10);
  }

  /* The lineage: up to the largest round, not one member more. */
  s = msg_offer_valid();
  s.nlin = DED_ROUND_MEMBERS_MAX;
  assert_int_equal(msg_offer_try(&s), 0);
  s.nlin = DED_ROUND_MEMBERS_MAX + 1;
  assert_int_equal(msg_offer_try(&s), DED_ERR_PROTO);
  s.status = DED_STATE_PENDING;
  assert_int_equal(msg_offer_try(&s), DED_ERR_PROTO);

  /* Trailing bytes, however many, for an OFFER and for the others. */
  s = msg_offer_valid();
  msg_offer_trailing(&s);
  for (size_t i = 0; i < sizeof msg_offer_answers; i++) {
    s = msg_offer_answer(msg_offer_answers[i]);
    assert_int_equal(msg_offer_try(&s), 0);
    msg_offer_trailing(&s);
  }
  /* nlin says one more or one fewer than there are. */
  s = msg_offer_valid();
  size_t len;
  uint8_t *p = msg_offer_payload(&s, &len);
  uint8_t *nlin = p + OFFER_OFF_NLIN;
  assert_int_equal(msg_le(nlin, 2), s.nlin);
  msg_put_le(nlin, s.nlin + 1, 2);
  assert_int_equal(msg_decode_any(DED_MSG_STATE_OFFER, p, len), DED_ERR_PROTO);
  msg_put_le(nlin, s.nlin - 1, 2);
  assert_int_equal(msg_decode_any(DED_MSG_STATE_OFFER, p, len), DED_ERR_PROTO);
  msg_put_le(nlin, s.nlin, 2);
  assert_int_equal(msg_decode_any(DED_MSG_STATE_OFFER, p, len), 0);
  free(p);
}

/* What only a snapshot (status OFFER) must have: a round past the
 * first, a step of 1 .. DED_STATE_STEP_ROUNDS_MAX rounds, a lineage and
 * the attempt that ended round-1 (never 0), or neither (a backbone's
 * checkpoint: no lineage, attempt 0). The other statuses carry
 * none of these (test_msg_state_offer_unused_fields). */
static void test_msg_state_offer_snapshot_fields(void **state) {
  (void)state;
#define OFFER_BAD(mutation)                                                                       \
  do {                                                                                            \
    msg_offer_spec s_ = msg_offer_valid();                                                        \
    msg_offer_spec *sp = &s_;                                                                     \
    mutation;                                                                                     \
    if (msg_offer_try(sp) != DED_ERR_PROTO) fail_msg("OFFER accepted with %s", #mutation);        \
  } while (0)
#define OFFER_OK(mutation)                                                                        \
  do {                                                                                            \
    msg_offer_spec s_ = msg_offer_valid();                                                        \
    msg_offer_spec *sp = &s_;                                                                     \
    mutation;                                                                                     \
    if (msg_offer_try(sp) != 0) fail_msg("OFFER refused with %s", #mutation);                     \
  } while (0)
  OFFER_BAD(sp->round = 0);
  OFFER_BAD(sp->step_rounds = 0);
  OFFER_BAD(sp->step_rounds = DED_STATE_STEP_ROUNDS_MAX + 1);
  OFFER_BAD(sp->step_rounds = UINT32_MAX);
  OFFER_BAD(sp->nlin = 0);
  OFFER_BAD(sp->lin_attempt = 0);
  OFFER_BAD(sp->lin_attempt = 0; sp->nlin = 1);
  OFFER_BAD(sp->lin_attempt = 0; sp->nlin = DED_ROUND_MEMBERS_MAX);
  OFFER_BAD(sp->round = 0; sp->step_rounds = 0; sp->nlin = 0; sp->lin_attempt = 0);
  OFFER_BAD(sp->round = 0; sp->nlin = 0; sp->lin_attempt = 0);
  OFFER_BAD(sp->step_rounds = 0; sp->nlin = 0; sp->lin_attempt = 0);
  OFFER_OK(sp->nlin = 0; sp->lin_attempt = 0); /* a checkpoint */
  OFFER_OK(sp->round = 1);
  OFFER_OK(sp->pos = 0);
  OFFER_OK(sp->pos = DED_POS_MAX);
  OFFER_BAD(sp->pos = DED_POS_MAX + 1);
  OFFER_OK(sp->step_rounds = 1);
  OFFER_OK(sp->step_rounds = DED_STATE_STEP_ROUNDS_MAX);
  OFFER_OK(sp->nlin = 1);
  OFFER_OK(sp->lin_attempt = 1);
  OFFER_OK(sp->lin_attempt = UINT64_MAX);
#undef OFFER_BAD
#undef OFFER_OK
  /* The status answers as they are sent: the snapshot's fields zero. */
  for (size_t i = 0; i < sizeof msg_offer_answers; i++) {
    msg_offer_spec s = msg_offer_answer(msg_offer_answers[i]);
    assert_int_equal(msg_offer_try(&s), 0);
  }
}

/* A status other than OFFER uses at most a round (PENDING, GONE) and a
 * digest (GONE); every other field must be zero, so that an answer has a
 * single spelling. The fields a status uses may hold any value. */
static void test_msg_state_offer_unused_fields(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof msg_offer_answers; i++) {
    const uint8_t st = msg_offer_answers[i];
    const int uses_round = st == DED_STATE_PENDING || st == DED_STATE_GONE;
    const int uses_digest = st == DED_STATE_GONE;
#define ANSWER(want, mutation)                                                                    \
  do {                                                                                            \
    msg_offer_spec s_ = msg_offer_answer(st);                                                     \
    msg_offer_spec *sp = &s_;                                                                     \
    mutation;                                                                                     \
    if (msg_offer_try(sp) != (want))                                                              \
      fail_msg("status %u with %s: want %d", st, #mutation, (int)(want));                         \
  } while (0)
    ANSWER(0, (void)sp);
    /* Never used by an answer: refused, whatever nonzero value. Each
     * mutation breaks that one field alone. */
    ANSWER(DED_ERR_PROTO, sp->step_rounds = 1);
    ANSWER(DED_ERR_PROTO, sp->step_rounds = DED_STATE_STEP_ROUNDS_MAX);
    ANSWER(DED_ERR_PROTO, sp->step_rounds = UINT32_MAX);
    ANSWER(DED_ERR_PROTO, sp->len = 1);
    ANSWER(DED_ERR_PROTO, sp->len = 100);
    ANSWER(DED_ERR_PROTO, sp->len = DED_STATE_BYTES_MAX);
    ANSWER(DED_ERR_PROTO, sp->lin_attempt = 1);
    ANSWER(DED_ERR_PROTO, sp->lin_attempt = UINT64_MAX);
    ANSWER(DED_ERR_PROTO, sp->nlin = 1);
    ANSWER(DED_ERR_PROTO, sp->nlin = 2);
    ANSWER(DED_ERR_PROTO, sp->nlin = DED_ROUND_MEMBERS_MAX);
    /* The round: PENDING's and GONE's, any value (0 included). */
    ANSWER(uses_round ? 0 : DED_ERR_PROTO, sp->round = 1);
    ANSWER(uses_round ? 0 : DED_ERR_PROTO, sp->round = UINT64_MAX);
    ANSWER(0, sp->round = 0);
    /* The digest: GONE's alone, any value. */
    ANSWER(uses_digest ? 0 : DED_ERR_PROTO, sp->digest = 1);
    ANSWER(uses_digest ? 0 : DED_ERR_PROTO, sp->digest = UINT64_MAX);
    ANSWER(0, sp->digest = 0);
    ANSWER(uses_digest ? 0 : DED_ERR_PROTO, sp->round = 0; sp->digest = 5);
    /* A snapshot's fields whole under another status. */
    msg_offer_spec s = msg_offer_valid();
    s.status = st;
    if (msg_offer_try(&s) != DED_ERR_PROTO) fail_msg("status %u with a snapshot accepted", st);
#undef ANSWER
  }
  /* PENDING with a round, GONE with a round and a digest, as they are
   * sent. */
  msg_offer_spec s = msg_offer_answer(DED_STATE_PENDING);
  s.round = 12;
  assert_int_equal(msg_offer_try(&s), 0);
  s = msg_offer_answer(DED_STATE_GONE);
  s.round = 12;
  s.digest = 0x8877665544332211ull;
  assert_int_equal(msg_offer_try(&s), 0);
}

/* An OFFER's lineage is a round's membership: ids strictly increasing in
 * memcmp order, as COMMIT's members; two equal ids or ids that go down
 * anywhere in it are refused. */
static void test_msg_state_offer_lineage_order(void **state) {
  (void)state;
  enum { N = 4 };
  msg_offer_spec s = msg_offer_valid();
  s.nlin = N;
  uint8_t *lin = msg_lin_make(N); /* its client bits (member 1) stay as they are */
  uint8_t *id[N];
  for (unsigned i = 0; i < N; i++) id[i] = lin + (size_t)i * DED_ID_BYTES;
  assert_int_equal(msg_offer_try_lin(&s, lin), 0);
  /* Two equal ids, at the start, in the middle, at the end. */
  for (unsigned i = 0; i + 1 < N; i++) {
    uint8_t *l = malloc(DED_LIN_BYTES(N));
    assert_non_null(l);
    memcpy(l, lin, DED_LIN_BYTES(N));
    memcpy(l + (size_t)(i + 1) * DED_ID_BYTES, l + (size_t)i * DED_ID_BYTES, DED_ID_BYTES);
    if (msg_offer_try_lin(&s, l) != DED_ERR_PROTO)
      fail_msg("ids %u and %u equal: accepted", i, i + 1);
    /* Two neighbours swapped: down by one. */
    memcpy(l, lin, DED_LIN_BYTES(N));
    memcpy(l + (size_t)i * DED_ID_BYTES, id[i + 1], DED_ID_BYTES);
    memcpy(l + (size_t)(i + 1) * DED_ID_BYTES, id[i], DED_ID_BYTES);
    if (msg_offer_try_lin(&s, l) != DED_ERR_PROTO)
      fail_msg("ids %u and %u swapped: accepted", i, i + 1);
    free(l);
  }
  /* All equal; all decreasing. */
  uint8_t *l = malloc(DED_LIN_BYTES(N));
  assert_non_null(l);
  memcpy(l, lin, DED_LIN_BYTES(N));
  for (unsigned i = 0; i < N; i++) memcpy(l + (size_t)i * DED_ID_BYTES, id[0], DED_ID_BYTES);
  assert_int_equal(msg_offer_try_lin(&s, l), DED_ERR_PROTO);
  for (unsigned i = 0; i < N; i++)
    memcpy(l + (size_t)i * DED_ID_BYTES, id[N - 1 - i], DED_ID_BYTES);
  assert_int_equal(msg_offer_try_lin(&s, l), DED_ERR_PROTO);
  free(l);

  /* Two ids: the order is memcmp's over every byte (the client bits
   * after them zero). */
  uint8_t two[DED_LIN_BYTES(2)];
  uint8_t *a = two, *b = two + DED_ID_BYTES;
  s = msg_offer_valid();
  assert_int_equal(s.nlin, 2);
  /* Equal. */
  memset(two, 0, sizeof two);
  memset(two, 0x5a, 2 * DED_ID_BYTES);
  assert_int_equal(msg_offer_try_lin(&s, two), DED_ERR_PROTO);
  /* Apart in the last byte only: up, then down. */
  b[DED_ID_BYTES - 1] = 0x5b;
  assert_int_equal(msg_offer_try_lin(&s, two), 0);
  b[DED_ID_BYTES - 1] = 0x59;
  assert_int_equal(msg_offer_try_lin(&s, two), DED_ERR_PROTO);
  /* The first byte decides, whatever the others (bytes, not a
   * little-endian number). */
  memset(a, 0xff, DED_ID_BYTES);
  memset(b, 0x00, DED_ID_BYTES);
  a[0] = 0x01;
  b[0] = 0x02;
  assert_int_equal(msg_offer_try_lin(&s, two), 0);
  a[0] = 0x02;
  b[0] = 0x01;
  assert_int_equal(msg_offer_try_lin(&s, two), DED_ERR_PROTO);
  /* Bytes compare unsigned: 0x80 after 0x7f. */
  memset(two, 0, sizeof two);
  a[0] = 0x7f;
  b[0] = 0x80;
  assert_int_equal(msg_offer_try_lin(&s, two), 0);
  a[0] = 0x80;
  b[0] = 0x7f;
  assert_int_equal(msg_offer_try_lin(&s, two), DED_ERR_PROTO);
  free(lin);

  /* The largest lineage, increasing: accepted; its last two swapped or
   * equal: refused. */
  s.nlin = DED_ROUND_MEMBERS_MAX;
  lin = msg_lin_make(s.nlin);
  assert_int_equal(msg_offer_try_lin(&s, lin), 0);
  uint8_t *last = lin + (size_t)(s.nlin - 1) * DED_ID_BYTES, *prev = last - DED_ID_BYTES;
  uint8_t tmp[DED_ID_BYTES];
  memcpy(tmp, last, DED_ID_BYTES);
  memcpy(last, prev, DED_ID_BYTES);
  assert_int_equal(msg_offer_try_lin(&s, lin), DED_ERR_PROTO);
  memcpy(prev, tmp, DED_ID_BYTES);
  assert_int_equal(msg_offer_try_lin(&s, lin), DED_ERR_PROTO);
  free(lin);
}

/* |n| lineage ids (msg_lin_id's) and client bits: member i a client when
 * |clients(i)|; the caller frees it. */
static uint8_t *msg_lin_with(unsigned n, bool (*clients)(unsigned)) {
  uint8_t *lin = calloc(DED_LIN_BYTES(n) ? DED_LIN_BYTES(n) : 1, 1);
  assert_non_null(lin);
  for (unsigned i = 0; i < n; i++) {
    msg_lin_id(lin + (size_t)i * DED_ID_BYTES, i);
    if (clients(i)) lin[(size_t)n * DED_ID_BYTES + i / 8] |= (uint8_t)(1u << (i % 8));
  }
  return lin;
}

static bool msg_lin_none(unsigned i) {
  (void)i;
  return false;
}

static bool msg_lin_all(unsigned i) {
  (void)i;
  return true;
}

static bool msg_lin_odd(unsigned i) { return i % 2 == 1; }

/*
 * Version 6: an OFFER's lineage carries, after its ids, one bit per
 * member (ceil(nlin/8) bytes, bit i of byte i/8) set when the member is
 * a client. Whatever the bits, they round trip; the unused high bits of
 * the last byte must be zero.
 */
static void test_msg_state_offer_client_bits(void **state) {
  (void)state;
  assert_int_equal(DED_LIN_BITS(0), 0);
  assert_int_equal(DED_LIN_BITS(1), 1);
  assert_int_equal(DED_LIN_BITS(8), 1);
  assert_int_equal(DED_LIN_BITS(9), 2);
  assert_int_equal(DED_LIN_BYTES(0), 0);
  assert_int_equal(DED_LIN_BYTES(2), 2 * DED_ID_BYTES + 1);
  assert_int_equal(DED_LIN_BYTES(17), 17 * DED_ID_BYTES + 3);
  assert_int_equal(DED_STATE_OFFER_FRAME_BYTES(9),
                   DED_FRAME_HDR_BYTES + OFFER_BASE_BYTES + 9 * DED_ID_BYTES + 2);
  const unsigned ns[] = {1, 2, 7, 8, 9, 15, 16, 17, DED_ROUND_MEMBERS_MAX};
  bool (*const patterns[])(unsigned) = {msg_lin_none, msg_lin_all, msg_lin_odd, msg_lin_is_client};
  for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
    const unsigned n = ns[t];
    for (size_t pi = 0; pi < sizeof patterns / sizeof patterns[0]; pi++) {
      uint8_t *lin = msg_lin_with(n, patterns[pi]);
      msg_offer_spec s = msg_offer_valid();
      s.nlin = (uint16_t)n;
      ded_msg_state_offer m = msg_offer_of(&s, lin);
      size_t cap = DED_STATE_OFFER_FRAME_BYTES(n);
      uint8_t *buf = malloc(cap);
      assert_non_null(buf);
      ded_wr w = ded_wr_init(buf, cap);
      ded_msg_state_offer_encode(&w, &m);
      assert_false(w.err);
      assert_int_equal(w.pos, cap);
      ded_frame fr = msg_unframe(buf, w.pos, DED_MSG_STATE_OFFER);
      /* The bits end the payload, as the test writes them. */
      const uint8_t *bits = fr.payload + fr.len - DED_LIN_BITS(n);
      assert_memory_equal(bits, lin + (size_t)n * DED_ID_BYTES, DED_LIN_BITS(n));
      size_t want_len;
      uint8_t *want = msg_offer_payload_lin(&s, lin, &want_len);
      assert_int_equal(fr.len, want_len);
      assert_memory_equal(fr.payload, want, want_len);
      free(want);
      ded_msg_state_offer out;
      memset(&out, 0xee, sizeof out);
      assert_int_equal(ded_msg_state_offer_decode(fr.payload, fr.len, &out), 0);
      msg_offer_equal(&out, &m);
      for (unsigned i = 0; i < n; i++)
        if (ded_lin_client(out.lin, n, i) != patterns[pi](i))
          fail_msg("nlin %u, pattern %zu: member %u's client bit lost", n, pi, i);
      if (n <= 17) msg_check_bounds(DED_MSG_STATE_OFFER, fr.payload, fr.len, 0);
      free(buf);
      free(lin);
    }

    /* Each unused bit of the last byte, alone or with every used bit set:
     * refused. A full last byte (n a multiple of 8) has none. */
    msg_offer_spec s = msg_offer_valid();
    s.nlin = (uint16_t)n;
    uint8_t *lin = msg_lin_with(n, msg_lin_none);
    uint8_t *last = lin + DED_LIN_BYTES(n) - 1;
    for (unsigned b = n % 8 ? n % 8 : 8; b < 8; b++) {
      *last = (uint8_t)(1u << b);
      if (msg_offer_try_lin(&s, lin) != DED_ERR_PROTO)
        fail_msg("nlin %u: unused client bit %u accepted", n, b);
      *last = (uint8_t)(0xffu << b | ((1u << (n % 8)) - 1));
      if (msg_offer_try_lin(&s, lin) != DED_ERR_PROTO)
        fail_msg("nlin %u: all bits set (unused %u on) accepted", n, b);
    }
    /* Every used bit of the last byte set, nothing else: accepted. */
    *last = (uint8_t)(n % 8 ? (1u << (n % 8)) - 1 : 0xff);
    if (msg_offer_try_lin(&s, lin) != 0) fail_msg("nlin %u: used bits set refused", n);
    /* The bits of an earlier byte are all used: any value goes. */
    if (n > 8) {
      lin[(size_t)n * DED_ID_BYTES] = 0xff;
      assert_int_equal(msg_offer_try_lin(&s, lin), 0);
    }
    free(lin);
  }
}

/*
 * Version 11, FOUNDING: the founding state asked for, as one layout with
 * the others: round 0 (MSG_FOUNDING_ROUND), the origin as a lineage of one (not a client), len
 * and digest the state's; pos, step_rounds and lin_attempt 0. It round
 * trips byte for byte; each field out of that is refused alone.
 */
static void test_msg_state_offer_founding(void **state) {
  (void)state;
  msg_offer_spec s = msg_offer_founding();
  uint8_t lin[DED_LIN_BYTES(1)];
  msg_founding_lin(lin);
  ded_msg_state_offer m = msg_offer_of(&s, lin);
  uint8_t buf[DED_STATE_OFFER_FRAME_BYTES(1)];
  ded_wr w = ded_wr_init(buf, sizeof buf);
  ded_msg_state_offer_encode(&w, &m);
  assert_false(w.err);
  assert_int_equal(w.pos, DED_STATE_OFFER_FRAME_BYTES(1));
  assert_int_equal(w.pos, DED_FRAME_HDR_BYTES + OFFER_BASE_BYTES + DED_ID_BYTES + 1);
  ded_frame fr = msg_unframe(buf, w.pos, DED_MSG_STATE_OFFER);
  size_t want_len;
  uint8_t *want = msg_offer_payload_lin(&s, lin, &want_len);
  assert_int_equal(fr.len, want_len);
  assert_memory_equal(fr.payload, want, want_len);
  free(want);
  assert_int_equal(fr.payload[0], DED_STATE_FOUNDING);
  assert_int_equal(msg_le(fr.payload + OFFER_OFF_ROUND, 8), MSG_FOUNDING_ROUND);
  assert_int_equal(msg_le(fr.payload + OFFER_OFF_POS, 8), 0);
  assert_int_equal(msg_le(fr.payload + OFFER_OFF_DIGEST, 8), s.digest);
  assert_int_equal(msg_le(fr.payload + OFFER_OFF_STEP, 4), 0);
  assert_int_equal(msg_le(fr.payload + OFFER_OFF_LEN, 8), s.len);
  assert_int_equal(msg_le(fr.payload + OFFER_OFF_LIN_ATTEMPT, 8), 0);
  assert_int_equal(msg_le(fr.payload + OFFER_OFF_NLIN, 2), 1);
  assert_memory_equal(fr.payload + OFFER_OFF_LIN, lin, DED_ID_BYTES);
  assert_int_equal(fr.payload[OFFER_OFF_LIN + DED_ID_BYTES], 0);
  ded_msg_state_offer out;
  memset(&out, 0xee, sizeof out);
  assert_int_equal(ded_msg_state_offer_decode(fr.payload, fr.len, &out), 0);
  msg_offer_equal(&out, &m);
  assert_ptr_equal(out.lin, fr.payload + OFFER_OFF_LIN);
  assert_false(ded_lin_client(out.lin, 1, 0));
  msg_check_bounds(DED_MSG_STATE_OFFER, fr.payload, fr.len, 0);
  msg_offer_trailing(&s); /* (with msg_lin_make(1)'s lineage: the same) */

#define FOUNDING_TRY(want, mutation)                                                              \
  do {                                                                                            \
    msg_offer_spec s_ = msg_offer_founding();                                                     \
    msg_offer_spec *sp = &s_;                                                                     \
    uint8_t l_[DED_LIN_BYTES(1)];                                                                 \
    msg_founding_lin(l_);                                                                         \
    uint8_t *lp = l_;                                                                             \
    (void)lp;                                                                                     \
    mutation;                                                                                     \
    if (msg_offer_try_lin(sp, l_) != (want))                                                      \
      fail_msg("FOUNDING with %s: want %d", #mutation, (int)(want));                              \
  } while (0)
  FOUNDING_TRY(0, (void)sp);
  /* len and digest are the state's: anything within the bounds. */
  FOUNDING_TRY(0, sp->len = 0);
  FOUNDING_TRY(0, sp->len = 1);
  FOUNDING_TRY(0, sp->len = DED_STATE_BYTES_MAX);
  FOUNDING_TRY(DED_ERR_PROTO, sp->len = DED_STATE_BYTES_MAX + 1);
  FOUNDING_TRY(DED_ERR_PROTO, sp->len = UINT64_MAX);
  FOUNDING_TRY(0, sp->digest = 0);
  FOUNDING_TRY(0, sp->digest = UINT64_MAX);
  /* Any origin id (all zeros on the wire too: the decoder does not judge
   * who it is). */
  FOUNDING_TRY(0, memset(lp, 0xff, DED_ID_BYTES));
  FOUNDING_TRY(0, memset(lp, 0x00, DED_ID_BYTES));
  /* The round: MSG_FOUNDING_ROUND, nothing else. */
  const uint64_t bad_rounds[] = {0, 1, 2, 0x0100000000000000ull, 0x0100000000000001ull,
                                 UINT64_MAX};
  for (size_t i = 0; i < sizeof bad_rounds / sizeof bad_rounds[0]; i++) {
    if (bad_rounds[i] == MSG_FOUNDING_ROUND) continue;
    s = msg_offer_founding();
    s.round = bad_rounds[i];
    if (msg_offer_try_lin(&s, lin) != DED_ERR_PROTO)
      fail_msg("FOUNDING of round %llu accepted", (unsigned long long)bad_rounds[i]);
  }
  /* The origin is not a client; the unused bits of its byte are zero too. */
  FOUNDING_TRY(DED_ERR_PROTO, lp[DED_ID_BYTES] = 0x01);
  FOUNDING_TRY(DED_ERR_PROTO, lp[DED_ID_BYTES] = 0x02);
  FOUNDING_TRY(DED_ERR_PROTO, lp[DED_ID_BYTES] = 0x80);
  FOUNDING_TRY(DED_ERR_PROTO, lp[DED_ID_BYTES] = 0xff);
  /* A snapshot's fields: zero. */
  FOUNDING_TRY(DED_ERR_PROTO, sp->pos = 1);
  FOUNDING_TRY(DED_ERR_PROTO, sp->pos = DED_POS_MAX);
  FOUNDING_TRY(DED_ERR_PROTO, sp->step_rounds = 1);
  FOUNDING_TRY(DED_ERR_PROTO, sp->step_rounds = DED_STATE_STEP_ROUNDS_MAX);
  FOUNDING_TRY(DED_ERR_PROTO, sp->lin_attempt = 1);
  FOUNDING_TRY(DED_ERR_PROTO, sp->lin_attempt = UINT64_MAX);
#undef FOUNDING_TRY

  /* The lineage: one id, not none and not two (each written whole, so
   * that only nlin is wrong). */
  s = msg_offer_founding();
  s.nlin = 0;
  assert_int_equal(msg_offer_try(&s), DED_ERR_PROTO);
  const unsigned nlins[] = {2, 3, 9, DED_ROUND_MEMBERS_MAX};
  for (size_t i = 0; i < sizeof nlins / sizeof nlins[0]; i++) {
    s = msg_offer_founding();
    s.nlin = (uint16_t)nlins[i];
    uint8_t *l = msg_lin_with(nlins[i], msg_lin_none); /* ids increasing, no client */
    if (msg_offer_try_lin(&s, l) != DED_ERR_PROTO)
      fail_msg("FOUNDING with %u lineage ids accepted", nlins[i]);
    free(l);
  }
  /* nlin says one more than there are. */
  s = msg_offer_founding();
  size_t len;
  uint8_t *p = msg_offer_payload_lin(&s, lin, &len);
  msg_put_le(p + OFFER_OFF_NLIN, 2, 2);
  assert_int_equal(msg_decode_any(DED_MSG_STATE_OFFER, p, len), DED_ERR_PROTO);
  msg_put_le(p + OFFER_OFF_NLIN, 1, 2);
  assert_int_equal(msg_decode_any(DED_MSG_STATE_OFFER, p, len), 0);
  free(p);
  /* Every field of a snapshot whole under FOUNDING: refused; a FOUNDING's
   * fields under OFFER: refused too (no lineage attempt, no step). */
  s = msg_offer_valid();
  s.status = DED_STATE_FOUNDING;
  assert_int_equal(msg_offer_try(&s), DED_ERR_PROTO);
  s = msg_offer_founding();
  s.status = DED_STATE_OFFER;
  assert_int_equal(msg_offer_try_lin(&s, lin), DED_ERR_PROTO);
  /* ... and under an answer that carries no state. */
  for (size_t i = 0; i < sizeof msg_offer_answers; i++) {
    s = msg_offer_founding();
    s.status = msg_offer_answers[i];
    if (msg_offer_try_lin(&s, lin) != DED_ERR_PROTO)
      fail_msg("status %u with a founding state accepted", msg_offer_answers[i]);
  }
  /* PENDING with round 0: the answer of a peer that fetches that origin's
   * state itself. */
  s = msg_offer_answer(DED_STATE_PENDING);
  s.round = 0;
  assert_int_equal(msg_offer_try(&s), 0);
}

/* ded_lin_coord: the coordinator of view v of round r is eligible member
 * (r + v) mod e of the e members that are not clients, in lineage order;
 * every member, if all are clients. */
static void test_msg_lin_coord(void **state) {
  (void)state;
  /* Five members, 1 and 3 clients: 0, 2 and 4 coordinate in turn. */
  uint8_t *lin = msg_lin_with(5, msg_lin_odd);
  const uint8_t *m[5];
  for (unsigned i = 0; i < 5; i++) m[i] = lin + (size_t)i * DED_ID_BYTES;
  assert_true(ded_lin_client(lin, 5, 1) && ded_lin_client(lin, 5, 3));
  assert_false(ded_lin_client(lin, 5, 0) || ded_lin_client(lin, 5, 2) || ded_lin_client(lin, 5, 4));
  assert_ptr_equal(ded_lin_coord(lin, 5, 0, 0), m[0]);
  assert_ptr_equal(ded_lin_coord(lin, 5, 1, 0), m[2]);
  assert_ptr_equal(ded_lin_coord(lin, 5, 2, 0), m[4]);
  assert_ptr_equal(ded_lin_coord(lin, 5, 3, 0), m[0]); /* wraps at e = 3, not n = 5 */
  assert_ptr_equal(ded_lin_coord(lin, 5, 4, 0), m[2]);
  assert_ptr_equal(ded_lin_coord(lin, 5, 0, 1), m[2]); /* the next view, the next one */
  assert_ptr_equal(ded_lin_coord(lin, 5, 0, 2), m[4]);
  assert_ptr_equal(ded_lin_coord(lin, 5, 0, 3), m[0]);
  assert_ptr_equal(ded_lin_coord(lin, 5, 5, 7), m[0]); /* 12 mod 3 */
  assert_ptr_equal(ded_lin_coord(lin, 5, 7, 0), m[2]); /* 7 mod 3; 7 mod 5 would be a client */
  const uint8_t *const eligible[3] = {m[0], m[2], m[4]};
  for (uint64_t r = 0; r < 12; r++)
    for (uint32_t v = 0; v < 7; v++)
      assert_ptr_equal(ded_lin_coord(lin, 5, r, v), eligible[(r + v) % 3]);
  /* The largest rounds and views: no overflow of the sum's own type. */
  const uint64_t big_r = UINT64_MAX - 1;
  assert_ptr_equal(ded_lin_coord(lin, 5, big_r, 0), eligible[big_r % 3]);
  assert_ptr_equal(ded_lin_coord(lin, 5, 1000, UINT32_MAX),
                   eligible[(1000 + (uint64_t)UINT32_MAX) % 3]);
  free(lin);

  /* Clients at either end: only the middle coordinates. */
  static const bool ends[4] = {true, false, false, true};
  lin = calloc(DED_LIN_BYTES(4), 1);
  assert_non_null(lin);
  for (unsigned i = 0; i < 4; i++) {
    msg_lin_id(lin + (size_t)i * DED_ID_BYTES, i);
    if (ends[i]) lin[4 * DED_ID_BYTES] |= (uint8_t)(1u << i);
  }
  for (uint64_t r = 0; r < 8; r++)
    assert_ptr_equal(ded_lin_coord(lin, 4, r, 0), lin + (size_t)(1 + r % 2) * DED_ID_BYTES);
  free(lin);

  /* Every member a client: every member coordinates in turn (mod n), as
   * with no client at all (the version 5 rule). */
  const unsigned ns[] = {1, 4, 9, 17};
  for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
    const unsigned n = ns[t];
    uint8_t *all = msg_lin_with(n, msg_lin_all);
    uint8_t *none = msg_lin_with(n, msg_lin_none);
    for (uint64_t r = 0; r < 2 * (uint64_t)n + 3; r++)
      for (uint32_t v = 0; v < 3; v++) {
        size_t want = (size_t)((r + v) % n) * DED_ID_BYTES;
        assert_ptr_equal(ded_lin_coord(all, n, r, v), all + want);
        assert_ptr_equal(ded_lin_coord(none, n, r, v), none + want);
      }
    free(all);
    free(none);
  }

  /* One node among clients, the bits past the first byte included:
   * always it, whatever the round and view. */
  uint8_t *lin17 = msg_lin_with(17, msg_lin_all);
  lin17[17 * DED_ID_BYTES + 2] = 0; /* member 16, in the third byte, a node */
  for (uint64_t r = 0; r < 20; r++)
    assert_ptr_equal(ded_lin_coord(lin17, 17, r, (uint32_t)r), lin17 + 16 * DED_ID_BYTES);
  lin17[17 * DED_ID_BYTES + 2] = 1;
  lin17[17 * DED_ID_BYTES + 1] = 0x7f; /* now member 15 */
  for (uint64_t r = 0; r < 20; r++)
    assert_ptr_equal(ded_lin_coord(lin17, 17, r, 3), lin17 + 15 * DED_ID_BYTES);
  free(lin17);
}

static int msg_state_get_try(const ded_msg_state_get *m) {
  uint8_t buf[DED_STATE_GET_FRAME_BYTES];
  ded_wr w = ded_wr_init(buf, sizeof buf);
  ded_msg_state_get_encode(&w, m);
  assert_false(w.err);
  assert_int_equal(w.pos, DED_STATE_GET_FRAME_BYTES);
  return msg_decode_any(DED_MSG_STATE_GET, buf + DED_FRAME_HDR_BYTES, STATE_GET_BYTES);
}

static void test_msg_state_get_round_trip(void **state) {
  (void)state;
  assert_int_equal(DED_STATE_GET_FRAME_BYTES, DED_FRAME_HDR_BYTES + STATE_GET_BYTES);
  const ded_msg_state_get cases[] = {
      {0x0102030405060708ull, 0xf1e2d3c4b5a69788ull, 0x0123456789ull, 256 * 1024},
      {0, 0, 0, 1},
      {UINT64_MAX, UINT64_MAX, DED_STATE_BYTES_MAX - DED_STATE_GET_BYTES_MAX,
       DED_STATE_GET_BYTES_MAX},
      {1, 2, DED_STATE_BYTES_MAX - 1, 1}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint8_t buf[DED_STATE_GET_FRAME_BYTES];
    ded_wr w = ded_wr_init(buf, sizeof buf);
    ded_msg_state_get_encode(&w, &cases[i]);
    assert_false(w.err);
    assert_int_equal(w.pos, DED_STATE_GET_FRAME_BYTES);
    ded_frame fr = msg_unframe(buf, w.pos, DED_MSG_STATE_GET);
    /* round | digest | offset | len */
    assert_int_equal(fr.len, STATE_GET_BYTES);
    assert_int_equal(msg_le(fr.payload, 8), cases[i].round);
    assert_int_equal(msg_le(fr.payload + 8, 8), cases[i].digest);
    assert_int_equal(msg_le(fr.payload + 16, 8), cases[i].offset);
    assert_int_equal(msg_le(fr.payload + 24, 4), cases[i].len);
    ded_msg_state_get out;
    memset(&out, 0xee, sizeof out);
    assert_int_equal(ded_msg_state_get_decode(fr.payload, fr.len, &out), 0);
    assert_int_equal(out.round, cases[i].round);
    assert_int_equal(out.digest, cases[i].digest);
    assert_int_equal(out.offset, cases[i].offset);
    assert_int_equal(out.len, cases[i].len);
    msg_check_bounds(DED_MSG_STATE_GET, fr.payload, fr.len, 0);
  }
}

static void test_msg_state_get_invalid(void **state) {
  (void)state;
  ded_msg_state_get m = {5, 6, 1024, 4096};
  assert_int_equal(msg_state_get_try(&m), 0);
  /* A range of nothing, or larger than one STATE_GET may ask for. */
  const uint32_t lens[] = {0, DED_STATE_GET_BYTES_MAX + 1, UINT32_MAX};
  for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
    m.len = lens[i];
    if (msg_state_get_try(&m) != DED_ERR_PROTO) fail_msg("STATE_GET of %u bytes accepted", lens[i]);
  }
  m.len = DED_STATE_GET_BYTES_MAX;
  assert_int_equal(msg_state_get_try(&m), 0);
  /* A range that starts past the largest state. */
  m.len = 1;
  const uint64_t offs[] = {DED_STATE_BYTES_MAX, DED_STATE_BYTES_MAX + 1, UINT64_MAX};
  for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++) {
    m.offset = offs[i];
    if (msg_state_get_try(&m) != DED_ERR_PROTO)
      fail_msg("STATE_GET at offset %llu accepted", (unsigned long long)offs[i]);
  }
  m.offset = DED_STATE_BYTES_MAX - 1;
  assert_int_equal(msg_state_get_try(&m), 0);
  /* Trailing bytes, however many. */
  uint8_t buf[DED_STATE_GET_FRAME_BYTES + 4];
  memset(buf, 0, sizeof buf);
  ded_wr w = ded_wr_init(buf, DED_STATE_GET_FRAME_BYTES);
  ded_msg_state_get_encode(&w, &m);
  assert_false(w.err);
  ded_msg_state_get out;
  for (size_t extra = 1; extra <= 4; extra++)
    assert_int_equal(
        ded_msg_state_get_decode(buf + DED_FRAME_HDR_BYTES, STATE_GET_BYTES + extra, &out),
        DED_ERR_PROTO);
}

/* A STATE_DATA frame of |n| bytes (byte i = i * 7 + 3), into a fresh
 * buffer of exactly its size; the caller frees it. */
static uint8_t *msg_state_data_build(uint64_t round, uint64_t digest, uint64_t offset, size_t n,
                                     size_t *len) {
  *len = DED_STATE_DATA_HDR_BYTES + n;
  uint8_t *buf = malloc(*len);
  assert_non_null(buf);
  ded_msg_state_data_hdr_encode(buf, round, digest, offset, n);
  for (size_t i = 0; i < n; i++) buf[DED_STATE_DATA_HDR_BYTES + i] = (uint8_t)(i * 7 + 3);
  return buf;
}

static int msg_state_data_try(uint64_t offset, size_t n) {
  size_t len;
  uint8_t *buf = msg_state_data_build(1, 2, offset, n, &len);
  int rv = msg_decode_any(DED_MSG_STATE_DATA, buf + DED_FRAME_HDR_BYTES,
                          len - DED_FRAME_HDR_BYTES);
  free(buf);
  return rv;
}

static void test_msg_state_data_round_trip(void **state) {
  (void)state;
  assert_int_equal(DED_STATE_DATA_HDR_BYTES, DED_FRAME_HDR_BYTES + 24);
  const size_t ns[] = {1, 37, 4096};
  for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
    const uint64_t round = 0x0102030405060708ull, digest = 0xf1e2d3c4b5a69788ull,
                   offset = 0x0123456789ull;
    size_t len;
    uint8_t *buf = msg_state_data_build(round, digest, offset, ns[t], &len);
    /* The header's length covers exactly the bytes that follow it. */
    ded_frame fr = msg_unframe(buf, len, DED_MSG_STATE_DATA);
    /* round | digest | offset | bytes */
    assert_int_equal(fr.len, STATE_DATA_PAYLOAD_HDR + ns[t]);
    assert_int_equal(msg_le(fr.payload, 8), round);
    assert_int_equal(msg_le(fr.payload + 8, 8), digest);
    assert_int_equal(msg_le(fr.payload + 16, 8), offset);
    ded_msg_state_data d;
    memset(&d, 0xee, sizeof d);
    assert_int_equal(ded_msg_state_data_decode(fr.payload, fr.len, &d), 0);
    assert_int_equal(d.round, round);
    assert_int_equal(d.digest, digest);
    assert_int_equal(d.offset, offset);
    assert_int_equal(d.len, ns[t]);
    /* The bytes stay where they are. */
    assert_ptr_equal(d.bytes, buf + DED_STATE_DATA_HDR_BYTES);
    msg_check_bounds(DED_MSG_STATE_DATA, fr.payload, fr.len, STATE_DATA_PAYLOAD_HDR + 1);
    free(buf);
  }
}

static void test_msg_state_data_invalid(void **state) {
  (void)state;
  /* A header and no bytes; anything shorter than a header. */
  assert_int_equal(msg_state_data_try(0, 0), DED_ERR_PROTO);
  uint8_t hdr[DED_STATE_DATA_HDR_BYTES];
  ded_msg_state_data_hdr_encode(hdr, 1, 2, 3, 0);
  for (size_t n = 0; n <= STATE_DATA_PAYLOAD_HDR; n++)
    assert_int_equal(msg_decode_any(DED_MSG_STATE_DATA, hdr + DED_FRAME_HDR_BYTES, n),
                     DED_ERR_PROTO);
  /* No more than one STATE_GET may ask for. */
  assert_int_equal(msg_state_data_try(0, DED_STATE_GET_BYTES_MAX), 0);
  assert_int_equal(msg_state_data_try(0, DED_STATE_GET_BYTES_MAX + 1), DED_ERR_PROTO);
  /* ... even the most a frame can carry. */
  assert_int_equal(msg_state_data_try(0, DED_FRAME_MAX - 1 - STATE_DATA_PAYLOAD_HDR),
                   DED_ERR_PROTO);
  /* Bytes that start past the largest state. */
  assert_int_equal(msg_state_data_try(DED_STATE_BYTES_MAX - 1, 1), 0);
  assert_int_equal(msg_state_data_try(DED_STATE_BYTES_MAX, 1), DED_ERR_PROTO);
  assert_int_equal(msg_state_data_try(DED_STATE_BYTES_MAX + 1, 1), DED_ERR_PROTO);
  assert_int_equal(msg_state_data_try(UINT64_MAX, 1), DED_ERR_PROTO);
}

/* ------------------------------------------------------------ writers */

enum {
  ENC_HELLO,
  ENC_JOIN,
  ENC_JOIN_STATUS,
  ENC_COMMIT,
  ENC_DECIDE,
  ENC_FETCH,
  ENC_HAVE,
  ENC_PROBE,
  ENC_REDIRECT,
  ENC_LEAVE,
  ENC_STALE,
  ENC_AHEAD,
  ENC_STATE_ASK,
  ENC_STATE_OFFER,
  ENC_STATE_GET,
  ENC_COUNT
};

/* Runs encoder |kind| into |w|. */
static void msg_encode_kind(int kind, ded_wr *w, const ded_msg_commit *plan) {
  ded_msg_join j = msg_join_valid();
  const uint8_t have[1] = {0x05};
  const uint16_t holders[3] = {2, 0, 1};
  switch (kind) {
  case ENC_HELLO: {
    uint8_t run_id[DED_RUN_ID_BYTES] = {1}, rec[40] = {2};
    ded_msg_hello_encode(w, run_id, rec, sizeof rec);
    break;
  }
  case ENC_JOIN: ded_msg_join_encode(w, &j); break;
  case ENC_JOIN_STATUS: ded_msg_join_status_encode(w, &j, plan, have); break;
  case ENC_COMMIT: ded_msg_commit_encode(w, plan); break;
  case ENC_DECIDE: ded_msg_decide_encode(w, 4, DED_DECIDE_F_CHOSEN, plan, holders); break;
  case ENC_FETCH: {
    ded_msg_fetch m = {1, 2, 3};
    ded_msg_fetch_encode(w, &m);
    break;
  }
  case ENC_HAVE: {
    ded_msg_have m = {1, 2, 3, DED_HAVE_F_DONE, {4}};
    ded_msg_have_encode(w, &m);
    break;
  }
  case ENC_PROBE: {
    ded_msg_probe m = {1, 2};
    ded_msg_probe_encode(w, &m);
    break;
  }
  case ENC_REDIRECT: {
    ded_msg_redirect m = {.round = 1, .view = 2};
    ded_msg_redirect_encode(w, &m);
    break;
  }
  case ENC_LEAVE: ded_msg_leave_encode(w, DED_LEAVE_FINALIZE); break;
  case ENC_STALE: {
    ded_msg_stale m = {1, 2};
    ded_msg_stale_encode(w, &m);
    break;
  }
  case ENC_AHEAD: {
    ded_msg_stale m = {1, 2};
    ded_msg_ahead_encode(w, &m);
    break;
  }
  case ENC_STATE_ASK: {
    ded_msg_state_ask m = {.min_round = 0, .origin = {1, 2, 3}}; /* a founding ask */
    ded_msg_state_ask_encode(w, &m);
    break;
  }
  case ENC_STATE_OFFER: {
    /* Three ids, increasing, as a decoder wants them; the second a
     * client. */
    static const uint8_t lin[DED_LIN_BYTES(3)] = {[0] = 1, [DED_ID_BYTES] = 2,
                                                  [2 * DED_ID_BYTES] = 3,
                                                  [3 * DED_ID_BYTES] = 0x02};
    ded_msg_state_offer m = {.status = DED_STATE_OFFER, .round = 1, .digest = 2,
                             .step_rounds = 1, .len = 30,
                             .lin_attempt = 3, .nlin = 3, .lin = lin};
    ded_msg_state_offer_encode(w, &m);
    break;
  }
  case ENC_STATE_GET: {
    ded_msg_state_get m = {1, 2, 3, 4};
    ded_msg_state_get_encode(w, &m);
    break;
  }
  default: fail_msg("no encoder %d", kind);
  }
}

/* An encoder that does not fit sets the error and writes nothing past the
 * buffer's capacity; with room enough it writes the documented size. */
static void test_msg_encoder_overflow(void **state) {
  (void)state;
  ded_msg_join jv = msg_join_valid();
  ded_msg_commit plan;
  msg_plan_make(&plan, 3, jv.round);
  const size_t sizes[ENC_COUNT] = {
      [ENC_HELLO] = DED_HELLO_FRAME_BYTES(40),
      [ENC_JOIN] = DED_JOIN_FRAME_BYTES,
      [ENC_JOIN_STATUS] = DED_JOIN_STATUS_FRAME_BYTES(3),
      [ENC_COMMIT] = DED_COMMIT_FRAME_BYTES(3),
      [ENC_DECIDE] = DED_DECIDE_FRAME_BYTES(3),
      [ENC_FETCH] = DED_FETCH_FRAME_BYTES,
      [ENC_HAVE] = DED_HAVE_FRAME_BYTES,
      [ENC_PROBE] = DED_PROBE_FRAME_BYTES,
      [ENC_REDIRECT] = DED_REDIRECT_FRAME_BYTES,
      [ENC_LEAVE] = DED_LEAVE_FRAME_BYTES,
      [ENC_STALE] = DED_STALE_FRAME_BYTES,
      [ENC_AHEAD] = DED_STALE_FRAME_BYTES,
      [ENC_STATE_ASK] = DED_STATE_ASK_FRAME_BYTES,
      [ENC_STATE_OFFER] = DED_STATE_OFFER_FRAME_BYTES(3),
      [ENC_STATE_GET] = DED_STATE_GET_FRAME_BYTES,
  };
  uint8_t buf[MSG_BUF_BYTES];
  for (int kind = 0; kind < ENC_COUNT; kind++) {
    size_t full = sizes[kind];
    assert_true(full < sizeof buf);
    ded_wr w = ded_wr_init(buf, sizeof buf);
    msg_encode_kind(kind, &w, &plan);
    assert_false(w.err);
    if (w.pos != full) fail_msg("encoder %d wrote %zu bytes, ded_msg.h says %zu", kind, w.pos, full);
    assert_int_equal(msg_le(buf, 4), full - 4); /* the length counts the type byte */
    for (size_t cap = 0; cap < full; cap++) {
      memset(buf, 0xee, sizeof buf);
      w = ded_wr_init(buf, cap);
      msg_encode_kind(kind, &w, &plan);
      if (!w.err) fail_msg("encoder %d fit in %zu of %zu bytes", kind, cap, full);
      assert_true(w.pos <= cap);
      for (size_t i = cap; i < full; i++) assert_int_equal(buf[i], 0xee);
    }
  }
  free(plan.members);
}

static void test_msg_names(void **state) {
  (void)state;
  const struct {
    uint8_t type;
    const char *name;
  } names[] = {{DED_MSG_HELLO, "HELLO"},   {DED_MSG_RECORDS, "RECORDS"}, {DED_MSG_JOIN, "JOIN"},
               {DED_MSG_COMMIT, "COMMIT"}, {DED_MSG_DECIDE, "DECIDE"},   {DED_MSG_REDIRECT, "REDIRECT"},
               {DED_MSG_DATA, "DATA"},     {DED_MSG_RESULT, "RESULT"},   {DED_MSG_LEAVE, "LEAVE"},
               {DED_MSG_STALE, "STALE"},   {DED_MSG_FETCH, "FETCH"},     {DED_MSG_PROBE, "PROBE"},
               {DED_MSG_HAVE, "HAVE"},     {DED_MSG_STATE_ASK, "STATE_ASK"},
               {DED_MSG_STATE_OFFER, "STATE_OFFER"}, {DED_MSG_STATE_GET, "STATE_GET"},
               {DED_MSG_STATE_DATA, "STATE_DATA"},   {DED_MSG_AHEAD, "AHEAD"},
               {DED_MSG_SPEED, "SPEED"},   {DED_MSG_ABSTAIN, "ABSTAIN"}, {0, "unknown"},
               {21, "unknown"},
               {255, "unknown"}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    assert_string_equal(ded_msg_name(names[i].type), names[i].name);
  /* The numbers are the wire's: they must not move. */
  assert_int_equal(DED_MSG_DECIDE, 5);
  assert_int_equal(DED_MSG_FETCH, 11);
  assert_int_equal(DED_MSG_ABSTAIN, 20);
  assert_int_equal(DED_MSG_PROBE, 12);
  assert_int_equal(DED_MSG_HAVE, 13);
  assert_int_equal(DED_MSG_STATE_ASK, 14);
  assert_int_equal(DED_MSG_STATE_OFFER, 15);
  assert_int_equal(DED_MSG_STATE_GET, 16);
  assert_int_equal(DED_MSG_STATE_DATA, 17);
  assert_int_equal(DED_MSG_AHEAD, 18);
  assert_int_equal(DED_STATE_OFFER, 0);
  assert_int_equal(DED_STATE_FRESH, 1);
  assert_int_equal(DED_STATE_PENDING, 2);
  assert_int_equal(DED_STATE_NONE, 3);
  assert_int_equal(DED_STATE_GONE, 4);
  assert_int_equal(DED_STATE_FOUNDING, 5);
  /* Version 4 added the state transfer (types 14-17): a version 3 peer
   * drops a connection on a type it does not know. */
  /* Version 5 added AHEAD (type 18), for the same reason. */
  /* Version 6 added client and aux peers: JOIN flags 16 and 32, member
   * flags 4 and 8, and client bits after STATE_OFFER's lineage, which a
   * version 5 peer would refuse or misread. */
  /* Version 7 added SPEED (type 19), the link probe at join. */
  /* Version 8 puts every frame in a session (crypto/ded_chan.h): its
   * first bytes are the handshake's, which a version 7 peer cannot parse. */
  /* Version 9 added the result's digest to HAVE (32 bytes after the
   * flags): a version 8 HAVE is too short for a version 9 peer, and a
   * version 9 one too long for a version 8 peer. */
  /* Version 10 added the stream position and the step's length to JOIN
   * and COMMIT (16 bytes after the count), and the position to
   * STATE_OFFER: rounds align by the gradient stream, not by call. */
  /* Version 11 took the piece table out of STATE_OFFER (the snapshot's
   * bytes are opaque to the wire), put an origin in STATE_ASK (a founding
   * ask) and added the status FOUNDING: a version 10 peer misreads both.
   * It also added LEAVE's failure reasons (3 to 5: a job that could not
   * take part says why), which a version 10 peer's decoder rejects. */
  /* Version 12 made a STATE_OFFER without a lineage valid (a backbone's
   * checkpoint), which a version 11 peer's decoder rejects. */
  /* Version 13 added JOIN's DED_JOIN_F_VOID (two more fields) and the
   * member flag DED_MEMBER_F_FOUNDER, which a version 12 peer's decoder
   * rejects. */
  /* Version 14 added ABSTAIN (a member that steps down from a round its
   * trainer did not come to), which a version 13 peer drops as an
   * unknown frame. */
  /* Version 15 added compression: JOIN's compress, compress_ppm and
   * compute_us (9 bytes before the flags), COMMIT's codec and codec_ppm
   * (5 bytes before k), and a codec byte after DATA's and RESULT's
   * offset; a version 14 peer misreads all three. */
  assert_int_equal(DED_PROTO_VERSION, 15);
  assert_int_equal(DED_LEAVE_MISMATCH_STEP, 3);
  assert_int_equal(DED_LEAVE_MISMATCH_STATE, 4);
  assert_int_equal(DED_LEAVE_ERROR, 5);
  assert_int_equal(DED_RESULT_DIGEST_BYTES, 32);
  assert_int_equal(HAVE_BYTES, 21 + 32);
  assert_int_equal(DED_MSG_SPEED, 19);
  assert_int_equal(DED_SPEED_HDR_BYTES, DED_FRAME_HDR_BYTES + 4);
  assert_int_equal(DED_JOIN_F_CLIENT, 16);
  assert_int_equal(DED_JOIN_F_AUX, 32);
  assert_int_equal(DED_MEMBER_F_CLIENT, 4);
  assert_int_equal(DED_MEMBER_F_AUX, 8);
  /* Sizes of version 15's messages (a change here is a change of the wire). */
  assert_int_equal(DED_JOIN_FRAME_BYTES, DED_FRAME_HDR_BYTES + JOIN_BASE_BYTES);
  assert_int_equal(JOIN_BASE_BYTES, 59);
  assert_int_equal(DED_COMMIT_MEMBER_BYTES, 53);
  assert_int_equal(DED_COMMIT_BODY_BYTES(0), 62);
  assert_int_equal(DED_COMMIT_BODY_BYTES(0), COMMIT_OFF_MEMBERS);
  assert_int_equal(DED_HAVE_FRAME_BYTES, DED_FRAME_HDR_BYTES + HAVE_BYTES);
  assert_int_equal(DED_DECIDE_FRAME_BYTES(0), DED_FRAME_HDR_BYTES + 13 + 62);
  assert_int_equal(DED_JOIN_STATUS_FRAME_BYTES(0), DED_JOIN_FRAME_BYTES + 4 + 62);
  assert_int_equal(DED_DATA_HDR_BYTES, DED_FRAME_HDR_BYTES + 25);
  assert_int_equal(DED_STATE_ASK_FRAME_BYTES, DED_FRAME_HDR_BYTES + 8 + 32);
  assert_int_equal(DED_STATE_OFFER_FRAME_BYTES(0), DED_FRAME_HDR_BYTES + 47);
  assert_int_equal(DED_STATE_OFFER_FRAME_BYTES(1), DED_FRAME_HDR_BYTES + 47 + 32 + 1);
  assert_int_equal(DED_STATE_OFFER_FRAME_BYTES(3), DED_FRAME_HDR_BYTES + 47 + 96 + 1);
  assert_int_equal(DED_STATE_OFFER_FRAME_BYTES(9), DED_FRAME_HDR_BYTES + 47 + 288 + 2);
  assert_int_equal(DED_STATE_GET_FRAME_BYTES, DED_FRAME_HDR_BYTES + 28);
  assert_int_equal(DED_STATE_DATA_HDR_BYTES, DED_FRAME_HDR_BYTES + 24);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_msg_hello_round_trip),
      cmocka_unit_test(test_msg_hello_bad_magic_and_version),
      cmocka_unit_test(test_msg_hello_record_too_long),
      cmocka_unit_test(test_msg_records_round_trip),
      cmocka_unit_test(test_msg_records_empty),
      cmocka_unit_test(test_msg_records_writer_limits),
      cmocka_unit_test(test_msg_records_bad),
      cmocka_unit_test(test_msg_join_round_trip),
      cmocka_unit_test(test_msg_join_plain_encoder_drops_status),
      cmocka_unit_test(test_msg_join_invalid),
      cmocka_unit_test(test_msg_join_compress),
      cmocka_unit_test(test_msg_join_status_round_trip),
      cmocka_unit_test(test_msg_join_status_invalid),
      cmocka_unit_test(test_msg_join_modes),
      cmocka_unit_test(test_msg_join_void),
      cmocka_unit_test(test_msg_join_held),
      cmocka_unit_test(test_msg_commit_round_trip),
      cmocka_unit_test(test_msg_commit_acceptors),
      cmocka_unit_test(test_msg_commit_modes),
      cmocka_unit_test(test_msg_commit_edges_accepted),
      cmocka_unit_test(test_msg_commit_invalid),
      cmocka_unit_test(test_msg_commit_k_mismatch),
      cmocka_unit_test(test_msg_commit_copy),
      cmocka_unit_test(test_msg_decide_round_trip),
      cmocka_unit_test(test_msg_decide_invalid),
      cmocka_unit_test(test_msg_commit_codec),
      cmocka_unit_test(test_msg_fetch_round_trip),
      cmocka_unit_test(test_msg_fetch_invalid),
      cmocka_unit_test(test_msg_have_round_trip),
      cmocka_unit_test(test_msg_have_digest_bytes),
      cmocka_unit_test(test_msg_have_invalid),
      cmocka_unit_test(test_msg_probe_round_trip),
      cmocka_unit_test(test_msg_abstain_round_trip),
      cmocka_unit_test(test_msg_redirect_round_trip),
      cmocka_unit_test(test_msg_leave_round_trip),
      cmocka_unit_test(test_msg_stale_round_trip),
      cmocka_unit_test(test_msg_ahead_round_trip),
      cmocka_unit_test(test_msg_data_round_trip),
      cmocka_unit_test(test_msg_data_invalid),
      cmocka_unit_test(test_msg_state_ask_round_trip),
      cmocka_unit_test(test_msg_state_ask_origin),
      cmocka_unit_test(test_msg_state_offer_round_trip),
      cmocka_unit_test(test_msg_state_offer_statuses),
      cmocka_unit_test(test_msg_state_offer_invalid),
      cmocka_unit_test(test_msg_state_offer_snapshot_fields),
      cmocka_unit_test(test_msg_state_offer_unused_fields),
      cmocka_unit_test(test_msg_state_offer_lineage_order),
      cmocka_unit_test(test_msg_state_offer_client_bits),
      cmocka_unit_test(test_msg_state_offer_founding),
      cmocka_unit_test(test_msg_lin_coord),
      cmocka_unit_test(test_msg_state_get_round_trip),
      cmocka_unit_test(test_msg_state_get_invalid),
      cmocka_unit_test(test_msg_state_data_round_trip),
      cmocka_unit_test(test_msg_state_data_invalid),
      cmocka_unit_test(test_msg_encoder_overflow),
      cmocka_unit_test(test_msg_names),
      cmocka_unit_test(test_msg_speed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
