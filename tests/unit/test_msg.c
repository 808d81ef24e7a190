/*
 * test_msg.c: core/ded_msg, every message of the wire protocol.
 *
 * Each message is encoded, cut out of its frame by the frame decoder, and
 * decoded again. Every decoder must then refuse each shorter prefix of a
 * valid payload and the payload with a byte too many, and the semantic
 * bounds (ded_limits.h and the COMMIT invariants) must hold: a peer that
 * breaks them is a protocol error, never an assertion.
 */
#include <math.h>

#include "unit_util.h"

#include "core/ded_limits.h"
#include "core/ded_msg.h"

/* Room for any test frame but the large COMMITs, which allocate. */
#define MSG_BUF_BYTES 4096

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

/* Runs the decoder of |type| on |len| bytes; 0 or its error. */
static int msg_decode_any(uint8_t type, const uint8_t *p, size_t len) {
  switch (type) {
  case DED_MSG_HELLO: {
    ded_msg_hello m;
    return ded_msg_hello_decode(p, len, &m);
  }
  case DED_MSG_RECORDS: return msg_records_walk(p, len, NULL);
  case DED_MSG_JOIN: {
    ded_msg_join m;
    return ded_msg_join_decode(p, len, &m);
  }
  case DED_MSG_COMMIT: {
    ded_msg_commit m;
    int rv = ded_msg_commit_decode(p, len, NULL, &m);
    if (rv == 0) ded_msg_commit_free(&m, NULL);
    else assert_null(m.members); /* nothing is left to free on error */
    return rv;
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
  default: fail_msg("no decoder for type %u", type);
  }
  return DED_ERR_INTERNAL;
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
  /* Versions other than ours, either side of it. */
  const uint16_t versions[] = {0, 2, 0x100, 0xffff};
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

/* -------------------------------------------------------------- JOIN */

static ded_msg_join msg_join_valid(void) {
  ded_msg_join j = {0x0102030405060708ull, DED_DTYPE_F64, 123456, 2.5, 4, DED_JOIN_F_GENESIS};
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
  ded_msg_join out;
  return ded_msg_join_decode(buf + DED_FRAME_HDR_BYTES, DED_JOIN_FRAME_BYTES - DED_FRAME_HDR_BYTES,
                             &out);
}

static void test_msg_join_round_trip(void **state) {
  (void)state;
  ded_msg_join j = msg_join_valid();
  uint8_t buf[DED_JOIN_FRAME_BYTES];
  msg_join_build(buf, &j);
  ded_frame fr = msg_unframe(buf, sizeof buf, DED_MSG_JOIN);
  ded_msg_join out;
  assert_int_equal(ded_msg_join_decode(fr.payload, fr.len, &out), 0);
  assert_int_equal(out.round, j.round);
  assert_int_equal(out.dtype, j.dtype);
  assert_int_equal(out.count, j.count);
  assert_memory_equal(&out.weight, &j.weight, sizeof j.weight);
  assert_int_equal(out.n_local, j.n_local);
  assert_int_equal(out.flags, j.flags);
  msg_check_bounds(DED_MSG_JOIN, fr.payload, fr.len, 0);
  /* The other dtype, no flags, zero weight, the largest count. */
  j.dtype = DED_DTYPE_F32;
  j.flags = 0;
  j.weight = 0.0;
  j.count = DED_COUNT_MAX;
  assert_int_equal(msg_join_try(&j), 0);
}

static void test_msg_join_invalid(void **state) {
  (void)state;
  ded_msg_join j = msg_join_valid();
  for (unsigned f = 2; f < 256; f++) {
    j.flags = (uint8_t)f;
    assert_int_equal(msg_join_try(&j), DED_ERR_PROTO);
  }
  j = msg_join_valid();
  const uint8_t dtypes[] = {0, 3, 255};
  for (size_t i = 0; i < sizeof dtypes; i++) {
    j.dtype = dtypes[i];
    assert_int_equal(msg_join_try(&j), DED_ERR_PROTO);
  }
  j = msg_join_valid();
  j.count = 0;
  assert_int_equal(msg_join_try(&j), DED_ERR_PROTO);
  j.count = DED_COUNT_MAX + 1;
  assert_int_equal(msg_join_try(&j), DED_ERR_PROTO);
  j = msg_join_valid();
  const double weights[] = {-1.0, -1e-300, NAN, INFINITY, -INFINITY};
  for (size_t i = 0; i < sizeof weights / sizeof weights[0]; i++) {
    j.weight = weights[i];
    assert_int_equal(msg_join_try(&j), DED_ERR_PROTO);
  }
  j = msg_join_valid();
  j.n_local = 0;
  assert_int_equal(msg_join_try(&j), DED_ERR_PROTO);
}

/* ------------------------------------------------------------ COMMIT */

typedef struct msg_commit_fixture {
  ded_msg_commit c;
  ded_msg_member members[3];
} msg_commit_fixture;

/* Three members with ids 0x10.., 0x20.., 0x30.., shards 0, 40, 70 of 100. */
static void msg_commit_valid(msg_commit_fixture *f) {
  memset(f, 0, sizeof *f);
  f->c.round = 77;
  f->c.dtype = DED_DTYPE_F32;
  f->c.count = 100;
  f->c.chunk_elems = 16;
  f->c.k = 3;
  f->c.members = f->members;
  const uint64_t offs[3] = {0, 40, 70};
  for (int i = 0; i < 3; i++) {
    memset(f->members[i].id, 0x10 * (i + 1), DED_ID_BYTES);
    f->members[i].weight = 1.0 + i;
    f->members[i].n_local = (uint32_t)(i + 1);
    f->members[i].shard_off = offs[i];
  }
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
  size_t len;
  uint8_t *buf = unit_commit_frame(&f.c, &len);
  ded_frame fr = msg_unframe(buf, len, DED_MSG_COMMIT);
  ded_msg_commit out;
  assert_int_equal(ded_msg_commit_decode(fr.payload, fr.len, NULL, &out), 0);
  assert_int_equal(out.round, f.c.round);
  assert_int_equal(out.dtype, f.c.dtype);
  assert_int_equal(out.count, f.c.count);
  assert_int_equal(out.chunk_elems, f.c.chunk_elems);
  assert_int_equal(out.k, 3);
  for (int i = 0; i < 3; i++) {
    assert_memory_equal(out.members[i].id, f.members[i].id, DED_ID_BYTES);
    assert_true(out.members[i].weight == f.members[i].weight);
    assert_int_equal(out.members[i].n_local, f.members[i].n_local);
    assert_int_equal(out.members[i].shard_off, f.members[i].shard_off);
  }
  ded_msg_commit_free(&out, NULL);
  assert_null(out.members);
  msg_check_bounds(DED_MSG_COMMIT, fr.payload, fr.len, 0);
  free(buf);
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
  msg_commit_valid(&f);
  f.members[1].shard_off = 0;
  f.members[2].shard_off = 100;
  f.members[0].weight = 0.0;
  assert_int_equal(msg_commit_try(&f.c), 0);
  f.c.count = DED_COUNT_MAX;
  assert_int_equal(msg_commit_try(&f.c), 0);

  ded_msg_commit big = f.c;
  big.k = DED_ROUND_MEMBERS_MAX;
  big.count = DED_ROUND_MEMBERS_MAX;
  big.members = calloc(big.k, sizeof *big.members);
  assert_non_null(big.members);
  for (unsigned i = 0; i < big.k; i++) {
    big.members[i].id[0] = (uint8_t)(i >> 8);
    big.members[i].id[1] = (uint8_t)i;
    big.members[i].weight = 1.0;
    big.members[i].n_local = 1;
    big.members[i].shard_off = i;
  }
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
#undef COMMIT_REJECTS

  /* One member more than a round may have. */
  ded_msg_commit big;
  msg_commit_valid(&f);
  big = f.c;
  big.k = DED_ROUND_MEMBERS_MAX + 1;
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
  uint8_t *k_field = buf + DED_FRAME_HDR_BYTES + 8 + 1 + 8 + 4;
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

/* ---------------------------------------------- REDIRECT, LEAVE, STALE */

static void test_msg_redirect_round_trip(void **state) {
  (void)state;
  ded_msg_redirect m = {.round = 0xfedcba9876543210ull};
  for (int i = 0; i < DED_ID_BYTES; i++) m.id[i] = (uint8_t)(i * 3);
  uint8_t buf[DED_REDIRECT_FRAME_BYTES];
  ded_wr w = ded_wr_init(buf, sizeof buf);
  ded_msg_redirect_encode(&w, &m);
  assert_false(w.err);
  assert_int_equal(w.pos, sizeof buf);
  ded_frame fr = msg_unframe(buf, w.pos, DED_MSG_REDIRECT);
  ded_msg_redirect out;
  assert_int_equal(ded_msg_redirect_decode(fr.payload, fr.len, &out), 0);
  assert_int_equal(out.round, m.round);
  assert_memory_equal(out.id, m.id, DED_ID_BYTES);
  msg_check_bounds(DED_MSG_REDIRECT, fr.payload, fr.len, 0);
}

static void test_msg_leave_round_trip(void **state) {
  (void)state;
  const uint8_t reasons[] = {DED_LEAVE_FINALIZE, DED_LEAVE_SHUTDOWN};
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
  const uint8_t bad[] = {0, 3, 255};
  for (size_t i = 0; i < sizeof bad; i++) {
    uint8_t out;
    assert_int_equal(ded_msg_leave_decode(&bad[i], 1, &out), DED_ERR_PROTO);
  }
}

static void test_msg_stale_round_trip(void **state) {
  (void)state;
  ded_msg_stale m = {41, 45};
  uint8_t buf[DED_STALE_FRAME_BYTES];
  ded_wr w = ded_wr_init(buf, sizeof buf);
  ded_msg_stale_encode(&w, &m);
  assert_false(w.err);
  ded_frame fr = msg_unframe(buf, w.pos, DED_MSG_STALE);
  ded_msg_stale out;
  assert_int_equal(ded_msg_stale_decode(fr.payload, fr.len, &out), 0);
  assert_int_equal(out.round, 41);
  assert_int_equal(out.next_round, 45);
  msg_check_bounds(DED_MSG_STALE, fr.payload, fr.len, 0);
  /* The swarm must be past the round it calls stale. */
  const ded_msg_stale bad[] = {{41, 41}, {41, 40}, {UINT64_MAX, 0}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    w = ded_wr_init(buf, sizeof buf);
    ded_msg_stale_encode(&w, &bad[i]);
    assert_int_equal(ded_msg_stale_decode(buf + DED_FRAME_HDR_BYTES, w.pos - DED_FRAME_HDR_BYTES,
                                          &out),
                     DED_ERR_PROTO);
  }
}

/* -------------------------------------------------------- DATA/RESULT */

static void test_msg_data_round_trip(void **state) {
  (void)state;
  const uint8_t types[] = {DED_MSG_DATA, DED_MSG_RESULT};
  for (size_t t = 0; t < sizeof types; t++) {
    float elems[5] = {1.5f, -2.0f, 3.25f, 0.0f, 1e-30f};
    uint8_t buf[DED_DATA_HDR_BYTES + sizeof elems];
    ded_msg_data_hdr_encode(buf, types[t], 9, 1000, sizeof elems);
    memcpy(buf + DED_DATA_HDR_BYTES, elems, sizeof elems);
    ded_frame fr = msg_unframe(buf, sizeof buf, types[t]);
    ded_msg_data d;
    assert_int_equal(ded_msg_data_decode(fr.payload, fr.len, &d), 0);
    assert_int_equal(d.round, 9);
    assert_int_equal(d.offset, 1000);
    assert_int_equal(d.len, sizeof elems);
    /* The elements stay where they are. */
    assert_ptr_equal(d.elems, buf + DED_DATA_HDR_BYTES);
    assert_memory_equal(d.elems, elems, sizeof elems);
    msg_check_bounds(types[t], fr.payload, fr.len, 17);
  }
}

static void test_msg_data_invalid(void **state) {
  (void)state;
  uint8_t buf[DED_DATA_HDR_BYTES + 8];
  ded_msg_data d;
  /* A header and no elements. */
  ded_msg_data_hdr_encode(buf, DED_MSG_DATA, 1, 0, 0);
  assert_int_equal(ded_msg_data_decode(buf + DED_FRAME_HDR_BYTES, 16, &d), DED_ERR_PROTO);
  /* An offset no MPI count can reach. */
  ded_msg_data_hdr_encode(buf, DED_MSG_DATA, 1, DED_COUNT_MAX + 1, 8);
  assert_int_equal(ded_msg_data_decode(buf + DED_FRAME_HDR_BYTES, 24, &d), DED_ERR_PROTO);
  ded_msg_data_hdr_encode(buf, DED_MSG_DATA, 1, DED_COUNT_MAX, 8);
  assert_int_equal(ded_msg_data_decode(buf + DED_FRAME_HDR_BYTES, 24, &d), 0);
}

/* ------------------------------------------------------------ writers */

/* An encoder that does not fit sets the error and writes nothing past the
 * buffer's capacity. */
static void test_msg_encoder_overflow(void **state) {
  (void)state;
  ded_msg_join j = msg_join_valid();
  for (size_t cap = 0; cap < DED_JOIN_FRAME_BYTES; cap++) {
    uint8_t buf[DED_JOIN_FRAME_BYTES];
    memset(buf, 0xee, sizeof buf);
    ded_wr w = ded_wr_init(buf, cap);
    ded_msg_join_encode(&w, &j);
    assert_true(w.err);
    assert_true(w.pos <= cap);
    for (size_t i = cap; i < sizeof buf; i++) assert_int_equal(buf[i], 0xee);
  }
}

static void test_msg_names(void **state) {
  (void)state;
  const struct {
    uint8_t type;
    const char *name;
  } names[] = {{DED_MSG_HELLO, "HELLO"},   {DED_MSG_RECORDS, "RECORDS"}, {DED_MSG_JOIN, "JOIN"},
               {DED_MSG_COMMIT, "COMMIT"}, {DED_MSG_REDIRECT, "REDIRECT"}, {DED_MSG_DATA, "DATA"},
               {DED_MSG_RESULT, "RESULT"}, {DED_MSG_LEAVE, "LEAVE"},     {DED_MSG_STALE, "STALE"},
               {0, "unknown"},             {5, "unknown"},               {255, "unknown"}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    assert_string_equal(ded_msg_name(names[i].type), names[i].name);
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
      cmocka_unit_test(test_msg_join_invalid),
      cmocka_unit_test(test_msg_commit_round_trip),
      cmocka_unit_test(test_msg_commit_edges_accepted),
      cmocka_unit_test(test_msg_commit_invalid),
      cmocka_unit_test(test_msg_commit_k_mismatch),
      cmocka_unit_test(test_msg_redirect_round_trip),
      cmocka_unit_test(test_msg_leave_round_trip),
      cmocka_unit_test(test_msg_stale_round_trip),
      cmocka_unit_test(test_msg_data_round_trip),
      cmocka_unit_test(test_msg_data_invalid),
      cmocka_unit_test(test_msg_encoder_overflow),
      cmocka_unit_test(test_msg_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
