/*
 * test_match.c: match/ded_match, the coordinator gathering joins and
 * fixing a round.
 *
 * The commit is what every member agrees on, so it must be a pure function
 * of the joins: the majority signature (ties to the smallest id), the
 * matching joiners in id order, equal shards, and a commit that every
 * member's decoder accepts. What a member is (a client, an aux member)
 * comes from its own JOIN's flags.
 */
#include "unit_util.h"

#include "avg/ded_codec.h"
#include "avg/ded_partition.h"
#include "core/ded_limits.h"
#include "core/ded_msg.h"
#include "match/ded_match.h"
#include "match/ded_plan.h"

/* An id whose order is that of |n|. */
static void match_id(uint8_t id[DED_ID_BYTES], unsigned n) {
  memset(id, 0x5a, DED_ID_BYTES);
  id[0] = (uint8_t)(n >> 8);
  id[1] = (uint8_t)n;
}

static ded_msg_join match_join(uint64_t round, uint8_t dtype, uint64_t count, double weight,
                               uint32_t n_local) {
  ded_msg_join j;
  memset(&j, 0, sizeof j);
  j.round = round;
  j.dtype = dtype;
  j.count = count;
  j.weight = weight;
  j.n_local = n_local;
  return j;
}

static void match_add(ded_gather *g, unsigned who, ded_msg_join j) {
  uint8_t id[DED_ID_BYTES];
  match_id(id, who);
  assert_int_equal(ded_gather_add(g, NULL, id, &j), 0);
}

/* Encodes |c| and decodes it again, as a member receiving it would. */
static int match_commit_redecode(const ded_msg_commit *c) {
  size_t len;
  uint8_t *buf = unit_commit_frame(c, &len);
  ded_msg_commit out;
  int rv = ded_msg_commit_decode(buf + DED_FRAME_HDR_BYTES, len - DED_FRAME_HDR_BYTES, NULL, &out);
  if (rv == 0) {
    assert_int_equal(out.k, c->k);
    for (unsigned i = 0; i < c->k; i++) {
      assert_memory_equal(out.members[i].id, c->members[i].id, DED_ID_BYTES);
      assert_memory_equal(&out.members[i].weight, &c->members[i].weight, sizeof(double));
      assert_int_equal(out.members[i].n_local, c->members[i].n_local);
      assert_int_equal(out.members[i].shard_off, c->members[i].shard_off);
      assert_int_equal(out.members[i].flags, c->members[i].flags);
    }
    ded_msg_commit_free(&out, NULL);
  }
  free(buf);
  return rv;
}

static void test_match_add_find_sorted(void **state) {
  (void)state;
  ded_gather g;
  ded_gather_init(&g, 12, true);
  assert_int_equal(g.round, 12);
  assert_true(g.genesis);
  /* Out of order, enough to grow the array twice. */
  for (unsigned i = 0; i < 20; i++) match_add(&g, (i * 7) % 20, match_join(12, 1, 10, 1.0, 1));
  assert_int_equal(g.n, 20);
  for (size_t i = 1; i < g.n; i++) assert_true(memcmp(g.v[i - 1].id, g.v[i].id, DED_ID_BYTES) < 0);
  uint8_t id[DED_ID_BYTES];
  match_id(id, 13);
  const ded_gather_join *j = ded_gather_find(&g, id);
  assert_non_null(j);
  assert_memory_equal(j->id, id, DED_ID_BYTES);
  match_id(id, 20);
  assert_null(ded_gather_find(&g, id));
  ded_gather_free(&g, NULL);
  assert_null(g.v);
  assert_int_equal(g.n, 0);
}

static void test_match_duplicate_join(void **state) {
  (void)state;
  ded_gather g;
  ded_gather_init(&g, 0, false);
  match_add(&g, 3, match_join(0, DED_DTYPE_F32, 10, 1.0, 1));
  uint8_t id[DED_ID_BYTES];
  match_id(id, 3);
  ded_msg_join other = match_join(0, DED_DTYPE_F64, 99, 5.0, 2);
  assert_int_equal(ded_gather_add(&g, NULL, id, &other), DED_ERR_PROTO);
  /* The first join stands. */
  assert_int_equal(g.n, 1);
  assert_int_equal(ded_gather_find(&g, id)->join.count, 10);
  ded_gather_free(&g, NULL);
}

static void test_match_join_limit(void **state) {
  (void)state;
  ded_gather g;
  ded_gather_init(&g, 0, false);
  for (unsigned i = 0; i < DED_JOINS_MAX; i++) match_add(&g, i, match_join(0, 1, 10, 1.0, 1));
  uint8_t id[DED_ID_BYTES];
  match_id(id, DED_JOINS_MAX);
  ded_msg_join j = match_join(0, 1, 10, 1.0, 1);
  assert_int_equal(ded_gather_add(&g, NULL, id, &j), DED_ERR_LIMIT);
  assert_int_equal(g.n, DED_JOINS_MAX);
  ded_gather_free(&g, NULL);
}

/* A join at stream position |pos|. */
static ded_msg_join match_join_at(uint64_t pos, uint8_t dtype, uint64_t count) {
  ded_msg_join j = match_join(0, dtype, count, 1, 1);
  j.pos = pos;
  return j;
}

static void test_match_signature_majority(void **state) {
  (void)state;
  ded_gather g;
  uint8_t dtype;
  uint64_t pos, count, step;
  /* One position: the shortest offer is the round's length. */
  ded_gather_init(&g, 0, false);
  match_add(&g, 1, match_join_at(0, DED_DTYPE_F32, 200));
  match_add(&g, 2, match_join_at(0, DED_DTYPE_F32, 100));
  match_add(&g, 3, match_join_at(0, DED_DTYPE_F32, 300));
  ded_gather_signature(&g, &dtype, &pos, &count, &step);
  assert_int_equal(dtype, DED_DTYPE_F32);
  assert_int_equal(pos, 0);
  assert_int_equal(count, 100);
  ded_gather_free(&g, NULL);
  /* Same position, different type: the type is part of the signature,
   * and only its joiners' offers count. */
  ded_gather_init(&g, 0, false);
  match_add(&g, 1, match_join_at(0, DED_DTYPE_F32, 10));
  match_add(&g, 2, match_join_at(0, DED_DTYPE_F64, 100));
  match_add(&g, 3, match_join_at(0, DED_DTYPE_F64, 150));
  ded_gather_signature(&g, &dtype, &pos, &count, &step);
  assert_int_equal(dtype, DED_DTYPE_F64);
  assert_int_equal(count, 100);
  ded_gather_free(&g, NULL);
  /* The position most joiners are at, though the smallest id is not. */
  ded_gather_init(&g, 0, false);
  match_add(&g, 1, match_join_at(40, DED_DTYPE_F32, 5));
  match_add(&g, 2, match_join_at(64, DED_DTYPE_F32, 100));
  match_add(&g, 3, match_join_at(64, DED_DTYPE_F32, 80));
  ded_gather_signature(&g, &dtype, &pos, &count, &step);
  assert_int_equal(pos, 64);
  assert_int_equal(count, 80);
  ded_gather_free(&g, NULL);
}

/* An attempt a reporter ran fixed the round's length: a later view keeps
 * it, though every offer is longer. */
static void test_match_signature_fixed(void **state) {
  (void)state;
  ded_gather g;
  uint8_t dtype;
  uint64_t pos, count, step;
  ded_gather_init(&g, 0, false);
  match_add(&g, 1, match_join_at(8, DED_DTYPE_F32, 200));
  ded_msg_join st = match_join_at(8, DED_DTYPE_F32, 300);
  st.flags = DED_JOIN_F_STATUS;
  st.plan.round = 0;
  st.plan.dtype = DED_DTYPE_F32;
  st.plan.pos = 8;
  st.plan.count = 70;
  match_add(&g, 2, st);
  ded_gather_signature(&g, &dtype, &pos, &count, &step);
  assert_int_equal(pos, 8);
  assert_int_equal(count, 70);
  ded_gather_free(&g, NULL);
}

/* The step's length the joiners that know it share: a joiner that knows
 * another runs another model and is not a member, and its offer does not
 * shorten the round; one that does not know it yet is. */
static void test_match_signature_step(void **state) {
  (void)state;
  ded_gather g;
  uint8_t dtype;
  uint64_t pos, count, step;
  ded_gather_init(&g, 3, false);
  ded_msg_join j = match_join_at(16, DED_DTYPE_F32, 90);
  j.round = 3;
  j.step = 4096;
  match_add(&g, 1, j);
  j.count = 80;
  match_add(&g, 2, j);
  j.count = 10; /* another model: 100 elements a step */
  j.step = 100;
  match_add(&g, 3, j);
  j.count = 70; /* not known yet */
  j.step = 0;
  match_add(&g, 4, j);
  ded_gather_signature(&g, &dtype, &pos, &count, &step);
  assert_int_equal(pos, 16);
  assert_int_equal(step, 4096);
  assert_int_equal(count, 70);
  ded_msg_commit c;
  assert_int_equal(ded_gather_commit(&g, NULL, 64, &c), 0);
  assert_int_equal(c.step, 4096);
  assert_int_equal(c.count, 70);
  assert_int_equal(c.k, 3);
  uint8_t id[DED_ID_BYTES];
  const unsigned want[3] = {1, 2, 4};
  for (unsigned m = 0; m < 3; m++) {
    match_id(id, want[m]);
    assert_memory_equal(c.members[m].id, id, DED_ID_BYTES);
  }
  assert_int_equal(match_commit_redecode(&c), 0);
  ded_msg_commit_free(&c, NULL);
  ded_gather_free(&g, NULL);
  /* Nobody knows it: 0, and every offer counts. */
  ded_gather_init(&g, 0, false);
  match_add(&g, 1, match_join_at(0, DED_DTYPE_F64, 50));
  match_add(&g, 2, match_join_at(0, DED_DTYPE_F64, 20));
  ded_gather_signature(&g, &dtype, &pos, &count, &step);
  assert_int_equal(step, 0);
  assert_int_equal(count, 20);
  ded_gather_free(&g, NULL);
}

static void test_match_signature_tie_smallest_id(void **state) {
  (void)state;
  ded_gather g;
  uint8_t dtype;
  uint64_t pos, count, step;
  /* 2 against 2; the smallest id (1) has signature B though A arrived
   * first and holds the largest id. */
  ded_gather_init(&g, 0, false);
  match_add(&g, 9, match_join_at(0, DED_DTYPE_F32, 111)); /* A */
  match_add(&g, 4, match_join_at(0, DED_DTYPE_F32, 111)); /* A */
  match_add(&g, 7, match_join_at(0, DED_DTYPE_F64, 222)); /* B */
  match_add(&g, 1, match_join_at(0, DED_DTYPE_F64, 222)); /* B */
  ded_gather_signature(&g, &dtype, &pos, &count, &step);
  assert_int_equal(dtype, DED_DTYPE_F64);
  assert_int_equal(count, 222);
  /* Three singletons: the smallest id's. */
  ded_gather_free(&g, NULL);
  ded_gather_init(&g, 0, false);
  match_add(&g, 5, match_join_at(5, DED_DTYPE_F32, 5));
  match_add(&g, 2, match_join_at(2, DED_DTYPE_F32, 2));
  match_add(&g, 8, match_join_at(8, DED_DTYPE_F32, 8));
  ded_gather_signature(&g, &dtype, &pos, &count, &step);
  assert_int_equal(pos, 2);
  assert_int_equal(count, 2);
  ded_gather_free(&g, NULL);
}

static void test_match_commit_members(void **state) {
  (void)state;
  ded_gather g;
  ded_gather_init(&g, 41, false);
  /* Five match (f64 at 0, offering 1003 or more), two do not (another
   * position, another type). */
  const unsigned match_ids[5] = {30, 10, 50, 20, 40};
  for (int i = 0; i < 5; i++)
    match_add(&g, match_ids[i],
              match_join(41, DED_DTYPE_F64, 1003 + (uint64_t)i * 7, 0.5 + i, (uint32_t)(i + 1)));
  ded_msg_join other = match_join(41, DED_DTYPE_F64, 1002, 1, 1);
  other.pos = 1;
  match_add(&g, 5, other);
  match_add(&g, 60, match_join(41, DED_DTYPE_F32, 1003, 1, 1));
  ded_msg_commit c;
  assert_int_equal(ded_gather_commit(&g, NULL, 1000, &c), 0);
  assert_int_equal(c.round, 41);
  assert_int_equal(c.dtype, DED_DTYPE_F64);
  assert_int_equal(c.count, 1003);
  assert_int_equal(c.chunk_elems, 125); /* 1000 bytes / 8 */
  assert_int_equal(c.k, 5);
  uint64_t off[5];
  ded_partition_equal(1003, 5, off);
  for (unsigned m = 0; m < 5; m++) {
    uint8_t id[DED_ID_BYTES];
    match_id(id, 10 * (m + 1)); /* sorted: 10, 20, 30, 40, 50 */
    assert_memory_equal(c.members[m].id, id, DED_ID_BYTES);
    assert_int_equal(c.members[m].shard_off, off[m]);
    const ded_gather_join *j = ded_gather_find(&g, id);
    assert_true(c.members[m].weight == j->join.weight);
    assert_int_equal(c.members[m].n_local, j->join.n_local);
  }
  assert_int_equal(match_commit_redecode(&c), 0);
  ded_msg_commit_free(&c, NULL);
  assert_null(c.members);
  ded_gather_free(&g, NULL);
}

/* chunk_bytes is rounded down to whole elements, and never below
 * DED_CHUNK_BYTES_MIN (members would reject the COMMIT). */
static void test_match_commit_chunk_elems(void **state) {
  (void)state;
  const struct {
    uint8_t dtype;
    uint32_t bytes, elems;
  } cases[] = {{DED_DTYPE_F32, 1001, 250}, {DED_DTYPE_F32, 4, 16}, {DED_DTYPE_F64, 15, 8},
               {DED_DTYPE_F64, DED_CHUNK_BYTES_MAX, DED_CHUNK_BYTES_MAX / 8},
               {DED_DTYPE_F32, DED_CHUNK_BYTES_MAX, DED_CHUNK_BYTES_MAX / 4}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ded_gather g;
    ded_gather_init(&g, 0, true);
    match_add(&g, 1, match_join(0, cases[i].dtype, 10, 1, 1));
    match_add(&g, 2, match_join(0, cases[i].dtype, 10, 1, 1));
    ded_msg_commit c;
    assert_int_equal(ded_gather_commit(&g, NULL, cases[i].bytes, &c), 0);
    assert_int_equal(c.chunk_elems, cases[i].elems);
    assert_int_equal(match_commit_redecode(&c), 0);
    ded_msg_commit_free(&c, NULL);
    ded_gather_free(&g, NULL);
  }
}

static void test_match_commit_zero_weights(void **state) {
  (void)state;
  ded_gather g;
  ded_msg_commit c;
  /* Nobody brought weight: the rank counts stand in. */
  ded_gather_init(&g, 0, true);
  match_add(&g, 1, match_join(0, DED_DTYPE_F32, 10, 0.0, 3));
  match_add(&g, 2, match_join(0, DED_DTYPE_F32, 10, 0.0, 5));
  assert_int_equal(ded_gather_commit(&g, NULL, 64, &c), 0);
  assert_true(c.members[0].weight == 3.0);
  assert_true(c.members[1].weight == 5.0);
  assert_int_equal(match_commit_redecode(&c), 0);
  ded_msg_commit_free(&c, NULL);
  ded_gather_free(&g, NULL);
  /* Some weight somewhere: a zero weight stays zero. */
  ded_gather_init(&g, 0, true);
  match_add(&g, 1, match_join(0, DED_DTYPE_F32, 10, 0.0, 3));
  match_add(&g, 2, match_join(0, DED_DTYPE_F32, 10, 2.0, 5));
  assert_int_equal(ded_gather_commit(&g, NULL, 64, &c), 0);
  assert_true(c.members[0].weight == 0.0);
  assert_true(c.members[1].weight == 2.0);
  assert_int_equal(match_commit_redecode(&c), 0);
  ded_msg_commit_free(&c, NULL);
  ded_gather_free(&g, NULL);
  /* A zero-weight joiner outside the signature does not count either way. */
  ded_gather_init(&g, 0, true);
  ded_msg_join outside = match_join(0, DED_DTYPE_F32, 99, 7.0, 1);
  outside.pos = 99;
  match_add(&g, 1, outside);
  match_add(&g, 2, match_join(0, DED_DTYPE_F32, 10, 0.0, 4));
  match_add(&g, 3, match_join(0, DED_DTYPE_F32, 10, 0.0, 6));
  assert_int_equal(ded_gather_commit(&g, NULL, 64, &c), 0);
  assert_int_equal(c.k, 2);
  assert_true(c.members[0].weight == 4.0);
  assert_true(c.members[1].weight == 6.0);
  ded_msg_commit_free(&c, NULL);
  ded_gather_free(&g, NULL);
}

/* More members than elements: empty shards at the end, still decodable. */
static void test_match_commit_more_members_than_elements(void **state) {
  (void)state;
  ded_gather g;
  ded_gather_init(&g, 0, true);
  for (unsigned i = 0; i < 5; i++) match_add(&g, i, match_join(0, DED_DTYPE_F32, 2, 1, 1));
  ded_msg_commit c;
  assert_int_equal(ded_gather_commit(&g, NULL, 64, &c), 0);
  const uint64_t want[5] = {0, 1, 2, 2, 2};
  for (int i = 0; i < 5; i++) assert_int_equal(c.members[i].shard_off, want[i]);
  assert_int_equal(match_commit_redecode(&c), 0);
  ded_msg_commit_free(&c, NULL);
  ded_gather_free(&g, NULL);
}

/*
 * The largest weight a JOIN may carry is DED_WEIGHT_MAX (the decoder
 * refuses more), and even the most members all at that weight must give a
 * COMMIT whose total weight is finite: a coordinator must never publish a
 * commit its members reject as a protocol violation.
 */
static void test_match_commit_huge_weights_decodable(void **state) {
  (void)state;
  ded_gather g;
  ded_gather_init(&g, 0, true);
  for (uint32_t i = 1; i <= DED_ROUND_MEMBERS_MAX; i++)
    match_add(&g, i, match_join(0, DED_DTYPE_F32, 10, DED_WEIGHT_MAX, 1));
  ded_msg_commit c;
  int rv = ded_gather_commit(&g, NULL, 64, &c);
  assert_int_equal(rv, 0);
  int drv = match_commit_redecode(&c);
  ded_msg_commit_free(&c, NULL);
  ded_gather_free(&g, NULL);
  if (drv != 0)
    fail_msg("ded_gather_commit built a COMMIT that ded_msg_commit_decode rejects (%s)",
             ded_strerror(drv));
}

static ded_msg_join match_join_flags(uint64_t round, uint64_t count, double weight,
                                     uint32_t n_local, uint8_t flags) {
  ded_msg_join j = match_join(round, DED_DTYPE_F32, count, weight, n_local);
  j.flags = flags;
  return j;
}

/* Elements of member |m|'s shard in |c|. */
static uint64_t match_shard_len(const ded_msg_commit *c, unsigned m) {
  return (m + 1 < c->k ? c->members[m + 1].shard_off : c->count) - c->members[m].shard_off;
}

/* Equal, known rates for |n| joins, each claiming to be |mode| (which
 * the JOINs' flags override). */
static void match_perf(ded_lp_peer *perf, size_t n, uint8_t mode) {
  for (size_t i = 0; i < n; i++) {
    perf[i].up_Bps = perf[i].down_Bps = 1e8;
    perf[i].add_Bps = 1e9;
    perf[i].mode = mode;
  }
}

/*
 * A JOIN with DED_JOIN_F_CLIENT makes a client member, one with
 * DED_JOIN_F_AUX an aux member of weight 0 (whatever weight it joined
 * with); both stay acceptors, the first member still the primary. With
 * rates, a client reduces nothing (an empty shard) and an aux member
 * does, whatever mode its rates claim: the JOIN decides.
 */
static void test_match_commit_modes(void **state) {
  (void)state;
  ded_gather g;
  ded_gather_init(&g, 3, false);
  match_add(&g, 1, match_join_flags(3, 1000, 1.0, 1, 0));
  match_add(&g, 2, match_join_flags(3, 1000, 2.0, 2, DED_JOIN_F_CLIENT));
  match_add(&g, 3, match_join_flags(3, 1000, 5.0, 3, DED_JOIN_F_AUX));
  match_add(&g, 4, match_join_flags(3, 1000, 4.0, 4, DED_JOIN_F_CLIENT | DED_JOIN_F_INTENT));
  match_add(&g, 5, match_join_flags(3, 1000, 0.5, 1, DED_JOIN_F_INTENT));
  /* Outside the signature: not a member, whatever its flags. */
  ded_msg_join outside = match_join_flags(3, 999, 1.0, 1, DED_JOIN_F_AUX);
  outside.pos = 1;
  match_add(&g, 6, outside);
  const uint8_t want_flags[5] = {DED_MEMBER_F_ACCEPTOR | DED_MEMBER_F_PRIMARY,
                                 DED_MEMBER_F_ACCEPTOR | DED_MEMBER_F_CLIENT,
                                 DED_MEMBER_F_ACCEPTOR | DED_MEMBER_F_AUX,
                                 DED_MEMBER_F_ACCEPTOR | DED_MEMBER_F_CLIENT,
                                 DED_MEMBER_F_ACCEPTOR};
  const double want_w[5] = {1.0, 2.0, 0.0, 4.0, 0.5};
  const uint32_t want_n[5] = {1, 2, 3, 4, 1};
  ded_msg_commit c;
  assert_int_equal(ded_gather_commit(&g, NULL, 64, &c), 0);
  assert_int_equal(c.k, 5);
  assert_int_equal(c.nacc, 5);
  for (unsigned m = 0; m < 5; m++) {
    if (c.members[m].flags != want_flags[m])
      fail_msg("member %u: flags 0x%02x, want 0x%02x", m, c.members[m].flags, want_flags[m]);
    assert_true(c.members[m].weight == want_w[m]);
    assert_int_equal(c.members[m].n_local, want_n[m]);
  }
  assert_int_equal(match_commit_redecode(&c), 0);
  ded_msg_commit_free(&c, NULL);

  /* With rates, planned (the LP) or equal among the reducers: the
   * clients' shards are empty, the aux member's and the nodes' are not.
   * The rates claim the opposite of the JOINs: every joiner a client
   * (then none would reduce), or a node (then the clients would). */
  ded_lp_peer perf[6];
  const uint8_t claims[2] = {DED_MODE_CLIENT, DED_MODE_NODE};
  for (int ci = 0; ci < 2; ci++)
    for (int equal = 0; equal <= 1; equal++) {
      match_perf(perf, g.n, claims[ci]);
      ded_lp_result res;
      assert_int_equal(
          ded_gather_commit_planned(&g, NULL, 64, perf, equal != 0, &res, &c), 0);
      assert_int_equal(c.k, 5);
      assert_int_equal(res.fallback, DED_LP_E_NONE);
      for (unsigned m = 0; m < 5; m++) {
        assert_int_equal(c.members[m].flags, want_flags[m]);
        assert_true(c.members[m].weight == want_w[m]);
        bool client = want_flags[m] & DED_MEMBER_F_CLIENT;
        uint64_t n = match_shard_len(&c, m);
        if (client ? n != 0 : n == 0)
          fail_msg("claimed %u, %s: member %u (%s) reduces %llu elements", claims[ci],
                   equal ? "equal" : "planned", m, client ? "client" : "reducer",
                   (unsigned long long)n);
      }
      if (equal) /* three reducers: 1000 = 334 + 333 + 333 */
        for (unsigned m = 0; m < 5; m++)
          if (!(want_flags[m] & DED_MEMBER_F_CLIENT))
            assert_true(match_shard_len(&c, m) == 333 || match_shard_len(&c, m) == 334);
      assert_int_equal(match_commit_redecode(&c), 0);
      ded_msg_commit_free(&c, NULL);
    }
  ded_gather_free(&g, NULL);

  /* The aux member is the only reducer: it reduces everything, the
   * client nothing; the client's the only weight. */
  ded_gather_init(&g, 0, true);
  match_add(&g, 1, match_join_flags(0, 100, 2.0, 1, DED_JOIN_F_CLIENT));
  match_add(&g, 2, match_join_flags(0, 100, 7.0, 1, DED_JOIN_F_AUX | DED_JOIN_F_GENESIS));
  for (int equal = 0; equal <= 1; equal++) {
    match_perf(perf, g.n, DED_MODE_NODE);
    assert_int_equal(ded_gather_commit_planned(&g, NULL, 64, perf, equal != 0, NULL, &c), 0);
    assert_int_equal(c.members[0].flags,
                     DED_MEMBER_F_ACCEPTOR | DED_MEMBER_F_PRIMARY | DED_MEMBER_F_CLIENT);
    assert_int_equal(c.members[1].flags, DED_MEMBER_F_ACCEPTOR | DED_MEMBER_F_AUX);
    assert_true(c.members[0].weight == 2.0);
    assert_true(c.members[1].weight == 0.0);
    assert_int_equal(match_shard_len(&c, 0), 0);
    assert_int_equal(match_shard_len(&c, 1), 100);
    assert_int_equal(match_commit_redecode(&c), 0);
    ded_msg_commit_free(&c, NULL);
  }
  ded_gather_free(&g, NULL);
}

/*
 * Weights when aux members join: an aux member's weight is 0 even when
 * nobody else brought weight (the rank counts stand in for the
 * contributors only).
 */
static void test_match_commit_aux_weights(void **state) {
  (void)state;
  ded_gather g;
  ded_msg_commit c;
  ded_gather_init(&g, 0, true);
  match_add(&g, 1, match_join_flags(0, 10, 0.0, 3, 0));
  match_add(&g, 2, match_join_flags(0, 10, 9.0, 5, DED_JOIN_F_AUX));
  match_add(&g, 3, match_join_flags(0, 10, 0.0, 2, DED_JOIN_F_CLIENT));
  assert_int_equal(ded_gather_commit(&g, NULL, 64, &c), 0);
  assert_true(c.members[0].weight == 3.0);
  assert_true(c.members[1].weight == 0.0);
  assert_true(c.members[2].weight == 2.0);
  assert_int_equal(c.members[1].flags & DED_MEMBER_F_AUX, DED_MEMBER_F_AUX);
  assert_int_equal(match_commit_redecode(&c), 0);
  ded_msg_commit_free(&c, NULL);
  ded_gather_free(&g, NULL);
}

/*
 * The COMMIT's codec comes from the contributors' JOINs (match/ded_pick.h):
 * the least lossy of their choices; an aux member has no say; a member
 * outside the signature none either; auto without rates is none.
 */
static void test_match_commit_codec(void **state) {
  (void)state;
  ded_gather g;
  ded_msg_commit c;
  ded_gather_init(&g, 0, true);
  ded_msg_join a = match_join_flags(0, 3000, 1.0, 1, 0), b = a, x = a, y = a;
  a.compress = DED_CODEC_TOPK;
  a.compress_ppm = 10000;
  b.compress = DED_CODEC_INT8;
  x = match_join_flags(0, 3000, 1.0, 1, DED_JOIN_F_AUX); /* none, but aux */
  y.dtype = DED_DTYPE_F64;                               /* none, but not a member */
  match_add(&g, 1, a);
  match_add(&g, 2, b);
  match_add(&g, 3, x);
  match_add(&g, 4, y);
  assert_int_equal(ded_gather_commit(&g, NULL, 1024, &c), 0);
  assert_int_equal(c.k, 3);
  assert_int_equal(c.codec, DED_CODEC_INT8);
  assert_int_equal(c.codec_ppm, 0);
  assert_int_equal(match_commit_redecode(&c), 0);
  ded_msg_commit_free(&c, NULL);
  ded_gather_free(&g, NULL);
  /* both top-k: the larger fraction; auto with no rates: none */
  ded_gather_init(&g, 0, true);
  b.compress = DED_CODEC_TOPK;
  b.compress_ppm = 20000;
  match_add(&g, 1, a);
  match_add(&g, 2, b);
  assert_int_equal(ded_gather_commit(&g, NULL, 1024, &c), 0);
  assert_int_equal(c.codec, DED_CODEC_TOPK);
  assert_int_equal(c.codec_ppm, 20000);
  ded_msg_commit_free(&c, NULL);
  ded_gather_free(&g, NULL);
  ded_gather_init(&g, 0, true);
  a.compress = DED_CODEC_INT8 | DED_JOIN_COMPRESS_AUTO;
  a.compress_ppm = 0;
  b.compress = DED_CODEC_INT8 | DED_JOIN_COMPRESS_AUTO;
  b.compress_ppm = 0;
  match_add(&g, 1, a);
  match_add(&g, 2, b);
  assert_int_equal(ded_gather_commit(&g, NULL, 1024, &c), 0);
  assert_int_equal(c.codec, DED_CODEC_NONE);
  ded_msg_commit_free(&c, NULL);
  ded_gather_free(&g, NULL);
}

/*
 * A round whose members all joined as aux has no vector to average: the
 * flags are dropped and they contribute as nodes, with the weights they
 * joined with (their rank counts if none), and reduce as nodes whatever
 * their rates claim. A contributor outside the round's signature does
 * not count.
 */
static void test_match_commit_all_aux(void **state) {
  (void)state;
  ded_gather g;
  ded_msg_commit c;
  ded_gather_init(&g, 9, false);
  match_add(&g, 1, match_join_flags(9, 90, 2.0, 1, DED_JOIN_F_AUX));
  match_add(&g, 2, match_join_flags(9, 90, 3.0, 2, DED_JOIN_F_AUX | DED_JOIN_F_INTENT));
  match_add(&g, 3, match_join_flags(9, 90, 0.0, 3, DED_JOIN_F_AUX));
  ded_msg_join other = match_join_flags(9, 45, 1.0, 1, 0);
  other.pos = 90; /* another signature */
  match_add(&g, 4, other);
  assert_int_equal(ded_gather_commit(&g, NULL, 64, &c), 0);
  assert_int_equal(c.k, 3);
  assert_int_equal(c.count, 90);
  const double want_w[3] = {2.0, 3.0, 0.0};
  for (unsigned m = 0; m < 3; m++) {
    assert_int_equal(c.members[m].flags,
                     DED_MEMBER_F_ACCEPTOR | (m == 0 ? DED_MEMBER_F_PRIMARY : 0));
    assert_true(c.members[m].weight == want_w[m]);
  }
  assert_int_equal(match_commit_redecode(&c), 0);
  ded_msg_commit_free(&c, NULL);
  /* With rates that claim aux: every member reduces, planned or equal. */
  ded_lp_peer perf[4];
  for (int equal = 0; equal <= 1; equal++) {
    match_perf(perf, g.n, DED_MODE_AUX);
    ded_lp_result res;
    assert_int_equal(ded_gather_commit_planned(&g, NULL, 64, perf, equal != 0, &res, &c), 0);
    assert_int_equal(res.fallback, DED_LP_E_NONE);
    for (unsigned m = 0; m < 3; m++) {
      assert_int_equal(c.members[m].flags & (DED_MEMBER_F_AUX | DED_MEMBER_F_CLIENT), 0);
      assert_int_equal(match_shard_len(&c, m), 30);
    }
    assert_int_equal(match_commit_redecode(&c), 0);
    ded_msg_commit_free(&c, NULL);
  }
  ded_gather_free(&g, NULL);

  /* All aux and no weight: the rank counts, as for nodes. A lone aux
   * joiner likewise. */
  ded_gather_init(&g, 0, true);
  match_add(&g, 1, match_join_flags(0, 10, 0.0, 3, DED_JOIN_F_AUX));
  match_add(&g, 2, match_join_flags(0, 10, 0.0, 5, DED_JOIN_F_AUX));
  assert_int_equal(ded_gather_commit(&g, NULL, 64, &c), 0);
  assert_true(c.members[0].weight == 3.0);
  assert_true(c.members[1].weight == 5.0);
  assert_int_equal(c.members[0].flags & DED_MEMBER_F_AUX, 0);
  assert_int_equal(c.members[1].flags & DED_MEMBER_F_AUX, 0);
  assert_int_equal(match_commit_redecode(&c), 0);
  ded_msg_commit_free(&c, NULL);
  ded_gather_free(&g, NULL);
  ded_gather_init(&g, 0, true);
  match_add(&g, 7, match_join_flags(0, 10, 4.0, 1, DED_JOIN_F_AUX | DED_JOIN_F_GENESIS));
  assert_int_equal(ded_gather_commit(&g, NULL, 64, &c), 0);
  assert_int_equal(c.k, 1);
  assert_int_equal(c.members[0].flags, DED_MEMBER_F_ACCEPTOR | DED_MEMBER_F_PRIMARY);
  assert_true(c.members[0].weight == 4.0);
  assert_int_equal(match_commit_redecode(&c), 0);
  ded_msg_commit_free(&c, NULL);
  ded_gather_free(&g, NULL);
}

/*
 * Early rates (few samples: a lower bound) are taken as the fastest of
 * their kind in the round. Four equal links in their warm-up read 45 to
 * 95 Mbit/s: planned as read, the shares follow the noise; lifted, the
 * links are alike and the shares equal. Two settled home links among
 * two early fast ones keep their rates; so does an early one far below
 * the fastest; a rate not known stays unknown.
 */
static void test_plan_lift_early(void **state) {
  (void)state;
  ded_gather g;
  ded_gather_init(&g, 3, false);
  for (unsigned i = 1; i <= 4; i++) match_add(&g, i, match_join_flags(3, 4000, 1.0, 1, 0));
  const double warm[4] = {60e6 / 8, 95e6 / 8, 80e6 / 8, 45e6 / 8};
  const uint8_t all_early[4] = {3, 3, 3, 3};
  for (int lift = 0; lift <= 1; lift++) {
    ded_lp_peer lp[4];
    match_perf(lp, 4, DED_MODE_NODE);
    for (unsigned i = 0; i < 4; i++) lp[i].up_Bps = lp[i].down_Bps = warm[i];
    if (lift) ded_plan_lift_early(lp, all_early, 4);
    ded_msg_commit c;
    ded_lp_result res;
    assert_int_equal(ded_gather_commit_planned(&g, NULL, 64, lp, false, &res, &c), 0);
    uint64_t lo = UINT64_MAX, hi = 0;
    for (unsigned m = 0; m < 4; m++) {
      uint64_t n = match_shard_len(&c, m);
      lo = n < lo ? n : lo;
      hi = n > hi ? n : hi;
    }
    if (lift ? hi - lo > 1 : hi - lo < 400)
      fail_msg("%s: shares from %llu to %llu elements of 4000", lift ? "lifted" : "as read",
               (unsigned long long)lo, (unsigned long long)hi);
    ded_msg_commit_free(&c, NULL);
  }
  ded_gather_free(&g, NULL);

  ded_lp_peer lp[6];
  match_perf(lp, 6, DED_MODE_NODE);
  const double up[6] = {10e6 / 8, 10e6 / 8, 30e6 / 8, 80e6 / 8, 0.0, 20e6 / 8};
  const uint8_t early[6] = {0, 0, DED_PERF_F_UP_EARLY | DED_PERF_F_DOWN_EARLY, DED_PERF_F_UP_EARLY,
                            DED_PERF_F_UP_EARLY, DED_PERF_F_UP_EARLY | DED_PERF_F_DOWN_EARLY};
  for (unsigned i = 0; i < 6; i++) lp[i].up_Bps = lp[i].down_Bps = up[i];
  lp[3].down_Bps = 200e6 / 8; /* settled, faster than any upload */
  lp[2].down_Bps = 100e6 / 8;
  ded_plan_lift_early(lp, early, 6);
  assert_true(lp[0].up_Bps == 10e6 / 8 && lp[1].down_Bps == 10e6 / 8);
  assert_true(lp[2].up_Bps == 80e6 / 8 && lp[2].down_Bps == 200e6 / 8);
  assert_true(lp[3].up_Bps == 80e6 / 8 && lp[3].down_Bps == 200e6 / 8);
  assert_true(lp[4].up_Bps == 0.0 && lp[4].down_Bps == 0.0);
  /* Early, but a quarter of the fastest: more likely a slow link. */
  assert_true(lp[5].up_Bps == 20e6 / 8 && lp[5].down_Bps == 20e6 / 8);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_match_add_find_sorted),
      cmocka_unit_test(test_match_duplicate_join),
      cmocka_unit_test(test_match_join_limit),
      cmocka_unit_test(test_match_signature_majority),
      cmocka_unit_test(test_match_signature_fixed),
      cmocka_unit_test(test_match_signature_step),
      cmocka_unit_test(test_match_signature_tie_smallest_id),
      cmocka_unit_test(test_match_commit_members),
      cmocka_unit_test(test_match_commit_chunk_elems),
      cmocka_unit_test(test_match_commit_zero_weights),
      cmocka_unit_test(test_match_commit_more_members_than_elements),
      cmocka_unit_test(test_match_commit_huge_weights_decodable),
      cmocka_unit_test(test_match_commit_modes),
      cmocka_unit_test(test_match_commit_aux_weights),
      cmocka_unit_test(test_match_commit_all_aux),
      cmocka_unit_test(test_match_commit_codec),
      cmocka_unit_test(test_plan_lift_early),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
