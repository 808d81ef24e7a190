/*
 * test_attempt.c: avg/ded_attempt, one attempt's data plane.
 *
 * A COMMIT fixes the layout (shards, chunks, which member we are); our
 * shard's contributions are added strictly in commit order whatever order
 * they arrive in, so the result has the bits of a sum done in that order;
 * an aux member brings nothing; a contribution twice, or a result from a
 * member that does not hold it, is a protocol violation; a finished chunk
 * goes to every other member and to whoever fetched our shard meanwhile.
 *
 * The env's |send| only records what the attempt asks to send.
 */
#include "unit_util.h"

#include "avg/ded_attempt.h"
#include "avg/ded_partition.h"
#include "core/ded_assert.h"

#define COUNT 10 /* elements (f64) of the round */
#define CHUNK 2  /* elements per chunk */
#define KMAX 4
#define ES sizeof(double)
#define STRANGER 99 /* unit_id of a peer in no plan */

/* One send the attempt asked for. */
typedef struct att_sent {
  uint8_t to[DED_ID_BYTES];
  uint8_t type;
  uint64_t off;
  const uint8_t *elems;
  size_t len;
  bool user;
} att_sent;

/* A test's world: a plan of k members (member m is unit_id(m + 1), with
 * the weights and local ranks below), the attempt as member |me|, every
 * member's vector, the round's buffer, and the sends. */
typedef struct att_world {
  unit_failmem fm;
  ded_msg_member m[KMAX];
  ded_msg_commit plan;
  ded_attempt a;
  ded_bufcache cache;
  ded_attempt_env env;
  double x[KMAX][COUNT];
  double res[COUNT];
  att_sent sent[64];
  int nsent;
  int send_rv; /* what |send| answers */
} att_world;

/* Weights over local ranks: the coefficients are 1, 2, 1.5 and 1. */
static const double att_weight[KMAX] = {1.0, 2.0, 3.0, 4.0};
static const uint32_t att_nlocal[KMAX] = {1, 1, 2, 4};

static int att_send(void *ctx, const uint8_t id[DED_ID_BYTES], uint8_t type, uint64_t off,
                    uint8_t codec, const uint8_t *elems, size_t len, bool user) {
  att_world *w = ctx;
  assert_true(w->nsent < 64);
  att_sent *s = &w->sent[w->nsent++];
  memcpy(s->to, id, DED_ID_BYTES);
  s->type = type;
  s->off = off;
  assert_int_equal(codec, 0); /* float64: never compressed */
  s->elems = elems;
  s->len = len;
  s->user = user;
  return w->send_rv;
}

/* Member m's vector. At even elements the terms (coefficient times value)
 * are a small one and two huge ones that cancel: summed in commit order
 * the small one is absorbed when it comes first and kept when it comes
 * last, so the order shows in the bits (members 0..2 with member 0 first,
 * or members 1..3 with member 3 last). At odd elements every term counts. */
static double att_value(unsigned m, unsigned i) {
  if (i % 2) return (m + 1) * 1.25 + i * 0.5;
  if (m == 1) return 9.0 * 0x1p50 * (i + 1);   /* term 2 * 9 * 2^50 */
  if (m == 2) return -12.0 * 0x1p50 * (i + 1); /* term -1.5 * 12 * 2^50: the same, negated */
  return 0.5 + i / 16.0;                       /* below half an ulp of the others */
}

/* Sets up a plan of |k| members, |aux| (or -1) an aux member, laid out as
 * member |me| (k: a peer that only fetches); allocations fail from
 * allocation |fail_at| (-1: never). Returns what layout returned. */
static int att_world_init(att_world *w, unsigned k, int aux, unsigned me, long fail_at) {
  memset(w, 0, sizeof *w);
  unit_failmem_init(&w->fm, fail_at);
  uint64_t off[KMAX];
  ded_partition_equal(COUNT, k, off);
  for (unsigned m = 0; m < k; m++) {
    w->m[m] = unit_member(m + 1, DED_MEMBER_F_ACCEPTOR, off[m]);
    w->m[m].weight = att_weight[m];
    w->m[m].n_local = att_nlocal[m];
    if ((int)m == aux) {
      w->m[m].flags |= DED_MEMBER_F_AUX;
      w->m[m].weight = 0.0;
    }
    for (unsigned i = 0; i < COUNT; i++) w->x[m][i] = att_value(m, i);
  }
  w->plan = unit_plan((uint64_t)1 << 32 | 5, w->m, k, k, COUNT, CHUNK);
  memset(w->res, 0xff, sizeof w->res); /* NaN: what is not written shows */
  w->cache.mem = &w->fm.mem;
  w->env = (ded_attempt_env){.mem = &w->fm.mem,
                             .cache = &w->cache,
                             .dtype = DED_DTYPE_F64,
                             .es = ES,
                             .input = (const uint8_t *)(me < k ? w->x[me] : w->x[0]),
                             .input_user = true,
                             .res = (uint8_t *)w->res,
                             .now_ns = 1000,
                             .send = att_send,
                             .wire = NULL, /* only with a codec */
                             .ctx = w};
  uint8_t self[DED_ID_BYTES];
  unit_id(self, me < k ? me + 1 : STRANGER);
  return ded_attempt_layout(&w->a, &w->fm.mem, &w->plan, self);
}

/* Frees the attempt and the cache; nothing may be left. */
static void att_world_free(att_world *w) {
  ded_attempt_clear(&w->a, &w->fm.mem, &w->cache, ES);
  ded_bufcache_free(&w->cache);
  assert_int_equal(w->fm.live, 0);
}

/* Starts our shard's reduction and adds our own contribution. */
static void att_start(att_world *w) {
  assert_int_equal(ded_attempt_start(&w->a, &w->env), 0);
  assert_int_equal(ded_attempt_reduce_own(&w->a, &w->env), 0);
}

/* The attempt running as member |me| of |k| (|aux| or -1 an aux member). */
static void att_running(att_world *w, unsigned k, int aux, unsigned me) {
  assert_int_equal(att_world_init(w, k, aux, me, -1), 0);
  att_start(w);
}

/* The attempt fetched by a peer outside the plan of 3, each shard s served
 * by |holder[s]| (a DECIDE's holders). */
static void att_fetching(att_world *w, const uint16_t holder[3]) {
  assert_int_equal(att_world_init(w, 3, -1, 3, -1), 0);
  w->a.holders = ded_mem_malloc(&w->fm.mem, 3 * sizeof *w->a.holders);
  assert_non_null(w->a.holders);
  memcpy(w->a.holders, holder, 3 * sizeof *w->a.holders);
}

/* Member |from|'s frame of |type| for chunk |c| of shard |s|, carrying
 * |src| (its element offset's place); what take returned. */
static int att_take(att_world *w, unsigned from, uint8_t type, unsigned s, uint64_t c,
                    const double *src, bool running, bool fetching) {
  uint64_t lo = ded_attempt_shard_lo(&w->a, s), len = ded_attempt_shard_len(&w->a, s);
  uint64_t first = c * CHUNK, n = DED_MIN(CHUNK, len - first);
  ded_msg_data d = {w->plan.round, w->plan.attempt, lo + first,
                    (const uint8_t *)(src + lo + first), n * ES, 0};
  uint8_t id[DED_ID_BYTES];
  unit_id(id, from < KMAX ? from + 1 : STRANGER);
  return ded_attempt_take(&w->a, &w->env, id, type, &d, running, fetching);
}

/* Member |from|'s contribution to chunk |c| of our shard. */
static int att_data(att_world *w, unsigned from, uint64_t c) {
  return att_take(w, from, DED_MSG_DATA, w->a.me, c, w->x[from < KMAX ? from : 0], true, false);
}

/* Our shard as a sum done here in commit order (|reverse|: the other way
 * round), each member's coefficient its weight over its local ranks. */
static void att_reference(const att_world *w, bool reverse, double *out) {
  const ded_attempt *a = &w->a;
  for (uint64_t i = a->my_off; i < a->my_off + a->my_len; i++) {
    double acc = 0.0;
    bool first = true;
    for (unsigned j = 0; j < a->plan.k; j++) {
      unsigned m = reverse ? a->plan.k - 1 - j : j;
      if (a->plan.members[m].flags & DED_MEMBER_F_AUX) continue;
      double coef = a->plan.members[m].weight / (double)a->plan.members[m].n_local;
      double term = coef * w->x[m][i];
      acc = first ? term : acc + term;
      first = false;
    }
    out[i] = acc / a->total_w;
  }
}

/* Our shard holds the reference sum, to the bit, and it differs from the
 * sum the other way round (the test can tell orders apart). */
static void att_assert_commit_order(const att_world *w) {
  double want[COUNT], other[COUNT];
  att_reference(w, false, want);
  att_reference(w, true, other);
  uint64_t lo = w->a.my_off, n = w->a.my_len;
  assert_memory_equal(&w->res[lo], &want[lo], n * ES);
  assert_memory_not_equal(&w->res[lo], &other[lo], n * ES);
}

/* The sends from |from| on are chunk |c| of our shard, as RESULT, to
 * every other member in commit order, then to |nextra| fetchers; returns
 * the index after them. */
static int att_assert_chunk_sent(const att_world *w, int from, uint64_t c, int nextra) {
  const ded_attempt *a = &w->a;
  uint64_t off = a->my_off + c * CHUNK, n = DED_MIN(CHUNK, a->my_len - c * CHUNK);
  int i = from;
  for (unsigned m = 0; m < a->plan.k + (unsigned)nextra; m++) {
    if (m == a->me) continue;
    assert_true(i < w->nsent);
    const att_sent *s = &w->sent[i++];
    if (m < a->plan.k) assert_memory_equal(s->to, a->plan.members[m].id, DED_ID_BYTES);
    assert_int_equal(s->type, DED_MSG_RESULT);
    assert_int_equal(s->off, off);
    assert_ptr_equal(s->elems, (const uint8_t *)&w->res[off]);
    assert_int_equal(s->len, n * ES);
    assert_false(s->user);
  }
  return i;
}

/* ---------------------------------------------------------------- tests */

/* The layout a COMMIT fixes: which member we are, the contributors, the
 * weights, every shard's range and chunks; nothing held yet. */
static void test_attempt_layout(void **state) {
  (void)state;
  att_world w;
  assert_int_equal(att_world_init(&w, 3, -1, 1, -1), 0);
  ded_attempt *a = &w.a;
  assert_int_equal(a->me, 1);
  assert_int_equal(a->ncontrib, 3);
  assert_int_equal(a->first_contrib, 0);
  assert_int_equal(a->chunk, CHUNK);
  assert_true(a->total_w == 6.0);
  static const uint64_t lo[] = {0, 4, 7}, len[] = {4, 3, 3}, base[] = {0, 2, 4, 6};
  for (unsigned s = 0; s < 3; s++) {
    assert_int_equal(ded_attempt_shard_lo(a, s), lo[s]);
    assert_int_equal(ded_attempt_shard_len(a, s), len[s]);
    assert_false(ded_attempt_shard_done(a, s));
  }
  for (unsigned s = 0; s <= 3; s++) assert_int_equal(a->res_base[s], base[s]);
  assert_false(ded_attempt_whole(a));
  uint8_t *have = ded_attempt_have_bits(a, &w.fm.mem);
  assert_int_equal(have[0], 0);
  ded_mem_free(&w.fm.mem, have);
  /* The plan is a copy. */
  assert_ptr_not_equal(a->plan.members, w.m);
  assert_memory_equal(a->plan.members, w.m, 3 * sizeof *w.m);
  att_start(&w);
  assert_int_equal(a->my_off, 4);
  assert_int_equal(a->my_len, 3);
  assert_int_equal(a->my_nchunks, 2);
  assert_int_equal(w.nsent, 0);
  att_world_free(&w);
  /* Not in the plan: we only fetch. Aux first: the second contributes first. */
  assert_int_equal(att_world_init(&w, 4, 0, 4, -1), 0);
  assert_int_equal(w.a.me, 4);
  assert_int_equal(w.a.ncontrib, 3);
  assert_int_equal(w.a.first_contrib, 1);
  assert_true(w.a.total_w == 2.0 + 3.0 + 4.0);
  att_world_free(&w);
}

/* Our contribution to member m's shard goes chunk by chunk, as DATA, out
 * of the caller's buffer (never copied). */
static void test_attempt_send_contrib(void **state) {
  (void)state;
  att_world w;
  att_running(&w, 3, -1, 1);
  assert_int_equal(ded_attempt_send_contrib(&w.a, &w.env, 0), 0);
  assert_int_equal(ded_attempt_send_contrib(&w.a, &w.env, 2), 0);
  static const uint64_t off[] = {0, 2, 7, 9}, n[] = {2, 2, 2, 1};
  static const unsigned to[] = {1, 1, 3, 3};
  assert_int_equal(w.nsent, 4);
  for (int i = 0; i < 4; i++) {
    uint8_t id[DED_ID_BYTES];
    unit_id(id, to[i]);
    assert_memory_equal(w.sent[i].to, id, DED_ID_BYTES);
    assert_int_equal(w.sent[i].type, DED_MSG_DATA);
    assert_int_equal(w.sent[i].off, off[i]);
    assert_ptr_equal(w.sent[i].elems, (const uint8_t *)&w.x[1][off[i]]);
    assert_int_equal(w.sent[i].len, n[i] * ES);
    assert_true(w.sent[i].user);
  }
  att_world_free(&w);
}

/* Whatever order the contributions arrive in, our shard is the sum in
 * commit order, bit for bit; a chunk finishes when its last contribution
 * comes, and goes to every other member at once. */
static void test_attempt_commit_order(void **state) {
  (void)state;
  /* Arrivals as (member, chunk): every order of the four. */
  static const unsigned arrivals[4][2] = {{0, 0}, {0, 1}, {2, 0}, {2, 1}};
  static const int perm[][4] = {{0, 1, 2, 3}, {3, 2, 1, 0}, {2, 0, 3, 1}, {1, 3, 0, 2},
                                {2, 3, 0, 1}, {3, 0, 2, 1}, {0, 2, 1, 3}, {1, 2, 3, 0}};
  for (size_t p = 0; p < DED_ARRAY_LEN(perm); p++) {
    att_world w;
    att_running(&w, 3, -1, 1);
    bool finished[2] = {false, false};
    for (int i = 0; i < 4; i++) {
      const unsigned *arr = arrivals[perm[p][i]];
      int before = w.nsent;
      assert_int_equal(att_data(&w, arr[0], arr[1]), 0);
      /* The chunk's last contribution finishes it. */
      bool last = true;
      for (int j = i + 1; j < 4; j++) last &= arrivals[perm[p][j]][1] != arr[1];
      if (last) {
        assert_int_equal(att_assert_chunk_sent(&w, before, arr[1], 0), w.nsent);
        finished[arr[1]] = true;
      } else {
        assert_int_equal(w.nsent, before);
      }
      assert_int_equal(w.a.reduced, (uint64_t)finished[0] + finished[1]);
    }
    assert_true(ded_attempt_shard_done(&w.a, 1));
    assert_int_equal(w.a.res_got, 2);
    assert_int_equal(w.a.reduced_ns, 1000);
    att_assert_commit_order(&w);
    att_world_free(&w);
  }
}

/* As the first member in commit order our own contribution starts every
 * chunk; as the last it ends them. */
static void test_attempt_commit_order_ends(void **state) {
  (void)state;
  for (unsigned me = 0; me < 3; me += 2) {
    att_world w;
    att_running(&w, 3, -1, me);
    for (uint64_t c = 0; c < w.a.my_nchunks; c++)
      for (unsigned m = 3; m-- > 0;)
        if (m != me) assert_int_equal(att_data(&w, m, c), 0);
    assert_true(ded_attempt_shard_done(&w.a, me));
    att_assert_commit_order(&w);
    att_world_free(&w);
  }
}

/* An aux member brings no vector: its chunks are not waited for, and the
 * first contributor after it starts the sum. */
static void test_attempt_aux_skipped(void **state) {
  (void)state;
  att_world w;
  att_running(&w, 4, 0, 2);
  assert_int_equal(w.a.my_off, 6);
  assert_int_equal(w.a.my_len, 2);
  assert_int_equal(w.a.my_nchunks, 1);
  assert_int_equal(att_data(&w, 3, 0), 0);
  assert_int_equal(w.nsent, 0);
  assert_int_equal(att_data(&w, 1, 0), 0);
  assert_true(ded_attempt_shard_done(&w.a, 2));
  assert_int_equal(att_assert_chunk_sent(&w, 0, 0, 0), w.nsent); /* the aux member gets it too */
  att_assert_commit_order(&w);
  att_world_free(&w);
}

/* A contribution taken twice is a protocol violation, whether it was
 * added at once or staged; so is one from outside the plan, from
 * ourselves, off the chunk grid, of the wrong length, outside our shard,
 * or when the attempt is not running. None of them changes the sum. */
static void test_attempt_data_rejected(void **state) {
  (void)state;
  att_world w;
  att_running(&w, 3, -1, 1);
  assert_int_equal(att_data(&w, 0, 0), 0); /* added at once */
  assert_int_equal(att_data(&w, 0, 0), DED_ERR_PROTO);
  assert_int_equal(att_data(&w, 2, 1), 0); /* staged: member 0's chunk 1 is missing */
  assert_int_equal(att_data(&w, 2, 1), DED_ERR_PROTO);
  assert_int_equal(att_data(&w, STRANGER, 0), DED_ERR_PROTO);
  assert_int_equal(att_data(&w, 1, 0), DED_ERR_PROTO);
  assert_int_equal(att_take(&w, 2, DED_MSG_DATA, 1, 0, w.x[2], false, false), DED_ERR_PROTO);
  assert_int_equal(att_take(&w, 2, DED_MSG_DATA, 0, 0, w.x[2], true, false), DED_ERR_PROTO);
  uint8_t id[DED_ID_BYTES];
  unit_id(id, 3);
  ded_msg_data bad[] = {
      {0, 0, 5, (const uint8_t *)&w.x[2][5], 1 * ES, 0},      /* inside a chunk */
      {0, 0, 4, (const uint8_t *)&w.x[2][4], 1 * ES, 0},      /* too short */
      {0, 0, 6, (const uint8_t *)&w.x[2][6], 2 * ES, 0},      /* past the shard */
      {0, 0, 4, (const uint8_t *)&w.x[2][4], 2 * ES - 1, 0},  /* not whole elements */
      {0, 0, 7, (const uint8_t *)&w.x[2][7], 1 * ES, 0},      /* the next shard */
      {0, 0, UINT64_MAX, (const uint8_t *)&w.x[2][0], ES, 0}, /* far out */
  };
  for (size_t i = 0; i < DED_ARRAY_LEN(bad); i++)
    assert_int_equal(ded_attempt_take(&w.a, &w.env, id, DED_MSG_DATA, &bad[i], true, false),
                     DED_ERR_PROTO);
  assert_int_equal(w.nsent, 0);
  assert_int_equal(att_data(&w, 2, 0), 0);
  assert_int_equal(att_data(&w, 0, 1), 0);
  assert_true(ded_attempt_shard_done(&w.a, 1));
  att_assert_commit_order(&w);
  /* A peer that only fetches takes no contribution at all. */
  att_world_free(&w);
  assert_int_equal(att_world_init(&w, 3, -1, 3, -1), 0);
  assert_int_equal(att_take(&w, 0, DED_MSG_DATA, 1, 0, w.x[0], true, false), DED_ERR_PROTO);
  att_world_free(&w);
}

/* A RESULT chunk comes from the shard's reducer (or, fetching, from the
 * holder named for it): from anyone else, a stranger or ourselves it is a
 * protocol violation; taken, it is copied into the round's buffer; the
 * same chunk again is a violation while running, harmless while
 * fetching. */
static void test_attempt_result(void **state) {
  (void)state;
  att_world w;
  att_running(&w, 3, -1, 1);
  double remote[COUNT];
  for (unsigned i = 0; i < COUNT; i++) remote[i] = 100.0 + i;
  assert_int_equal(att_take(&w, 0, DED_MSG_RESULT, 2, 0, remote, true, false), DED_ERR_PROTO);
  assert_int_equal(att_take(&w, STRANGER, DED_MSG_RESULT, 2, 0, remote, true, false),
                   DED_ERR_PROTO);
  assert_int_equal(att_take(&w, 1, DED_MSG_RESULT, 2, 0, remote, true, false), DED_ERR_PROTO);
  assert_int_equal(att_take(&w, 0, DED_MSG_RESULT, 1, 0, remote, true, false), DED_ERR_PROTO);
  assert_int_equal(w.a.res_got, 0);
  assert_int_equal(att_take(&w, 2, DED_MSG_RESULT, 2, 1, remote, true, false), 0);
  assert_int_equal(w.a.res_got, 1);
  assert_memory_equal(&w.res[9], &remote[9], ES);
  assert_false(ded_attempt_shard_done(&w.a, 2));
  assert_int_equal(att_take(&w, 2, DED_MSG_RESULT, 2, 1, remote, true, false), DED_ERR_PROTO);
  assert_int_equal(att_take(&w, 2, DED_MSG_RESULT, 2, 0, remote, true, false), 0);
  assert_true(ded_attempt_shard_done(&w.a, 2));
  assert_memory_equal(&w.res[7], &remote[7], 3 * ES);
  uint8_t *have = ded_attempt_have_bits(&w.a, &w.fm.mem);
  assert_int_equal(have[0], 0x04);
  ded_mem_free(&w.fm.mem, have);
  att_world_free(&w);
  /* Fetching: the holder named for a shard serves it, its reducer too. */
  static const uint16_t all_by_2[3] = {2, 2, 2};
  att_fetching(&w, all_by_2);
  assert_int_equal(att_take(&w, 1, DED_MSG_RESULT, 0, 0, remote, false, true), DED_ERR_PROTO);
  assert_int_equal(att_take(&w, 2, DED_MSG_RESULT, 0, 0, remote, false, true), 0);
  assert_int_equal(att_take(&w, 2, DED_MSG_RESULT, 0, 0, remote, false, true), 0); /* again */
  assert_int_equal(att_take(&w, 0, DED_MSG_RESULT, 0, 1, remote, false, true), 0);
  assert_int_equal(w.a.res_got, 2);
  assert_true(ded_attempt_shard_done(&w.a, 0));
  for (unsigned s = 1; s < 3; s++)
    for (uint64_t c = 0; c < 2; c++)
      assert_int_equal(att_take(&w, 2, DED_MSG_RESULT, s, c, remote, false, true), 0);
  assert_true(ded_attempt_whole(&w.a));
  assert_memory_equal(w.res, remote, sizeof remote);
  att_world_free(&w);
}

/* The digest a member votes with is that of the bytes its buffer holds,
 * hashed as chunks come in (our shard's as it is reduced, the others' as
 * they arrive); fetched again from one holder, but for our own shard, it
 * is that of the new bytes, and RESULTs from anyone else are ignored. */
static void test_attempt_digest(void **state) {
  (void)state;
  att_world w;
  att_running(&w, 3, -1, 1);
  uint64_t mine = ded_chunks(ded_attempt_shard_len(&w.a, 1), CHUNK);
  for (uint64_t c = 0; c < mine; c++) {
    assert_int_equal(att_data(&w, 2, c), 0);
    assert_int_equal(att_data(&w, 0, c), 0);
  }
  double remote[COUNT], other[COUNT], want_res[COUNT];
  for (unsigned i = 0; i < COUNT; i++) {
    remote[i] = 100.0 + i;
    other[i] = -7.0 - i;
  }
  for (unsigned s = 0; s < 3; s += 2)
    for (uint64_t c = 0; c < ded_chunks(ded_attempt_shard_len(&w.a, s), CHUNK); c++)
      assert_int_equal(att_take(&w, s, DED_MSG_RESULT, s, c, remote, true, false), 0);
  assert_true(ded_attempt_whole(&w.a));
  uint8_t got[DED_DIGEST_BYTES], want[DED_DIGEST_BYTES];
  ded_attempt_digest(&w.a, got);
  ded_digest_of(w.res, sizeof w.res, want);
  assert_memory_equal(got, want, sizeof want);
  memcpy(want_res, other, sizeof other);
  uint64_t lo = ded_attempt_shard_lo(&w.a, 1), len = ded_attempt_shard_len(&w.a, 1);
  memcpy(&want_res[lo], &w.res[lo], len * ES); /* our shard stays */
  ded_attempt_refetch(&w.a, &w.fm.mem, false);
  w.a.holders = ded_mem_malloc(&w.fm.mem, 3 * sizeof *w.a.holders);
  assert_non_null(w.a.holders);
  for (unsigned s = 0; s < 3; s++) w.a.holders[s] = 2;
  assert_false(ded_attempt_whole(&w.a));
  for (unsigned s = 0; s < 3; s += 2)
    for (uint64_t c = 0; c < ded_chunks(ded_attempt_shard_len(&w.a, s), CHUNK); c++) {
      assert_int_equal(att_take(&w, 0, DED_MSG_RESULT, s, c, remote, false, true), 0); /* ignored */
      assert_int_equal(att_take(&w, 2, DED_MSG_RESULT, s, c, other, false, true), 0);
    }
  assert_true(ded_attempt_whole(&w.a));
  assert_memory_equal(w.res, want_res, sizeof want_res);
  ded_attempt_digest(&w.a, got);
  ded_digest_of(want_res, sizeof want_res, want);
  assert_memory_equal(got, want, sizeof want);
  att_world_free(&w);
}

/* Serving our shard while we reduce it: the chunks done go at once, the
 * others as they finish (to the members, then to every fetcher); without
 * |pending|, or for another shard, or once done, no one is remembered. */
static void test_attempt_serve(void **state) {
  (void)state;
  att_world w;
  att_running(&w, 3, -1, 1);
  uint8_t x[DED_ID_BYTES], y[DED_ID_BYTES], z[DED_ID_BYTES];
  unit_id(x, 50);
  unit_id(y, 51);
  unit_id(z, 52);
  ded_attempt_serve(&w.a, &w.env, 1, x, true); /* nothing done yet */
  assert_int_equal(w.nsent, 0);
  assert_int_equal(att_data(&w, 0, 0), 0);
  assert_int_equal(att_data(&w, 2, 0), 0); /* chunk 0 done: members, then x */
  assert_int_equal(att_assert_chunk_sent(&w, 0, 0, 1), 3);
  assert_memory_equal(w.sent[2].to, x, DED_ID_BYTES);
  ded_attempt_serve(&w.a, &w.env, 1, y, true); /* chunk 0 at once */
  ded_attempt_serve(&w.a, &w.env, 1, z, false);
  assert_int_equal(w.nsent, 5);
  assert_memory_equal(w.sent[3].to, y, DED_ID_BYTES);
  assert_memory_equal(w.sent[4].to, z, DED_ID_BYTES);
  assert_int_equal(w.sent[3].off, 4);
  assert_int_equal(w.sent[4].len, 2 * ES);
  ded_attempt_serve(&w.a, &w.env, 0, z, true); /* another shard: nothing held, no one kept */
  assert_int_equal(w.nsent, 5);
  assert_int_equal(att_data(&w, 2, 1), 0);
  assert_int_equal(att_data(&w, 0, 1), 0); /* chunk 1: members, then x and y, not z */
  assert_int_equal(att_assert_chunk_sent(&w, 5, 1, 2), 9);
  bool got_x = false, got_y = false;
  for (int i = 7; i < 9; i++) {
    got_x |= memcmp(w.sent[i].to, x, DED_ID_BYTES) == 0;
    got_y |= memcmp(w.sent[i].to, y, DED_ID_BYTES) == 0;
  }
  assert_true(got_x && got_y);
  /* Done: served whole, no one kept. */
  ded_attempt_serve(&w.a, &w.env, 1, z, true);
  assert_int_equal(w.nsent, 11);
  assert_null(w.a.fetchers->next->next);
  /* Another shard we hold: served, no one kept. */
  double remote[COUNT] = {0};
  assert_int_equal(att_take(&w, 0, DED_MSG_RESULT, 0, 1, remote, true, false), 0);
  ded_attempt_serve(&w.a, &w.env, 0, z, true);
  assert_int_equal(w.nsent, 12);
  assert_int_equal(w.sent[11].off, 2);
  assert_null(w.a.fetchers->next->next);
  ded_attempt_drop_fetchers(&w.a, &w.fm.mem);
  assert_null(w.a.fetchers);
  att_world_free(&w);
}

/* An error of |send| while a finished chunk goes out is passed on. */
static void test_attempt_send_error(void **state) {
  (void)state;
  att_world w;
  att_running(&w, 3, -1, 1);
  w.send_rv = DED_ERR_CLOSING;
  assert_int_equal(att_data(&w, 0, 1), 0);
  assert_int_equal(att_data(&w, 2, 1), DED_ERR_CLOSING);
  assert_int_equal(w.nsent, 1);
  att_world_free(&w);
}

/* needs: a member is needed while a contribution of it to our shard or a
 * chunk of its shard is missing; fetching, while it holds a shard we lack. */
static void test_attempt_needs(void **state) {
  (void)state;
  att_world w;
  att_running(&w, 3, -1, 1);
  double remote[COUNT] = {0};
  assert_true(ded_attempt_needs(&w.a, 0, false));
  assert_int_equal(att_data(&w, 0, 0), 0);
  assert_int_equal(att_data(&w, 0, 1), 0);
  assert_true(ded_attempt_needs(&w.a, 0, false)); /* its shard's result */
  assert_int_equal(att_take(&w, 0, DED_MSG_RESULT, 0, 0, remote, true, false), 0);
  assert_true(ded_attempt_needs(&w.a, 0, false));
  assert_int_equal(att_take(&w, 0, DED_MSG_RESULT, 0, 1, remote, true, false), 0);
  assert_false(ded_attempt_needs(&w.a, 0, false));
  assert_int_equal(att_take(&w, 2, DED_MSG_RESULT, 2, 0, remote, true, false), 0);
  assert_int_equal(att_take(&w, 2, DED_MSG_RESULT, 2, 1, remote, true, false), 0);
  assert_true(ded_attempt_needs(&w.a, 2, false)); /* its contributions */
  assert_int_equal(att_data(&w, 2, 0), 0);
  assert_true(ded_attempt_needs(&w.a, 2, false));
  assert_int_equal(att_data(&w, 2, 1), 0);
  assert_false(ded_attempt_needs(&w.a, 2, false));
  assert_true(ded_attempt_whole(&w.a));
  att_world_free(&w);
  /* Fetching as an outsider: member 2 serves shards 0 and 2, member 0
   * shard 1. */
  static const uint16_t holders[3] = {2, 0, 2};
  att_fetching(&w, holders);
  assert_true(ded_attempt_needs(&w.a, 2, true));
  assert_true(ded_attempt_needs(&w.a, 0, true));
  assert_false(ded_attempt_needs(&w.a, 1, true));
  for (uint64_t c = 0; c < 2; c++)
    assert_int_equal(att_take(&w, 0, DED_MSG_RESULT, 1, c, remote, false, true), 0);
  assert_false(ded_attempt_needs(&w.a, 0, true));
  assert_true(ded_attempt_needs(&w.a, 2, true));
  for (unsigned s = 0; s < 3; s += 2)
    for (uint64_t c = 0; c < 2; c++)
      assert_int_equal(att_take(&w, 2, DED_MSG_RESULT, s, c, remote, false, true), 0);
  assert_false(ded_attempt_needs(&w.a, 2, true));
  att_world_free(&w);
}

/* Out of memory at any allocation of a whole round (layout, start, the
 * staging of an early contribution): DED_ERR_NOMEM, and clearing the
 * attempt gives every block back. */
static void test_attempt_nomem(void **state) {
  (void)state;
  for (long n = 0;; n++) {
    att_world w;
    int rv = att_world_init(&w, 3, -1, 1, n);
    if (rv == 0) rv = ded_attempt_start(&w.a, &w.env);
    if (rv == 0) rv = ded_attempt_reduce_own(&w.a, &w.env);
    if (rv == 0) rv = att_data(&w, 2, 0); /* staged */
    if (rv == 0) rv = att_data(&w, 0, 0);
    if (w.fm.failed) {
      assert_int_equal(rv, DED_ERR_NOMEM);
    } else {
      assert_int_equal(rv, 0);
      assert_true(n > 0);
    }
    bool failed = w.fm.failed;
    att_world_free(&w);
    if (!failed) break;
  }
}

/* An aux member sends no contribution (ded_round skips it): once its
 * shard is here, it is needed for nothing more, and may go without the
 * round failing over ("a member that already gave us everything may go"). */
static void test_attempt_aux_not_needed_after_its_shard(void **state) {
  (void)state;
  att_world w;
  att_running(&w, 4, 0, 2);
  double remote[COUNT] = {0};
  for (uint64_t c = 0; c < ded_chunks(ded_attempt_shard_len(&w.a, 0), CHUNK); c++)
    assert_int_equal(att_take(&w, 0, DED_MSG_RESULT, 0, c, remote, true, false), 0);
  assert_true(ded_attempt_shard_done(&w.a, 0));
  assert_false(ded_attempt_needs(&w.a, 0, false));
  att_world_free(&w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_attempt_layout),
      cmocka_unit_test(test_attempt_send_contrib),
      cmocka_unit_test(test_attempt_commit_order),
      cmocka_unit_test(test_attempt_commit_order_ends),
      cmocka_unit_test(test_attempt_aux_skipped),
      cmocka_unit_test(test_attempt_data_rejected),
      cmocka_unit_test(test_attempt_result),
      cmocka_unit_test(test_attempt_digest),
      cmocka_unit_test(test_attempt_serve),
      cmocka_unit_test(test_attempt_send_error),
      cmocka_unit_test(test_attempt_needs),
      cmocka_unit_test(test_attempt_nomem),
      cmocka_unit_test(test_attempt_aux_not_needed_after_its_shard),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
