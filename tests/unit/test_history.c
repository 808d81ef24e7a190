/*
 * test_history.c: round/ded_history, results of finished rounds and the
 * buffer cache.
 *
 * The history holds each round once, oldest first, within its byte cap and
 * DED_ROUNDS_AHEAD_MAX entries, dropping the oldest into the cache; a
 * result it does not keep is not taken. The cache gives a buffer back only
 * for its exact length and holds at most DED_BUF_CACHE of them.
 *
 * Every test allocates through a counting allocator and checks that all
 * blocks come back.
 */
#include "unit_util.h"

#include "core/ded_limits.h"
#include "round/ded_history.h"

/* A test's world: the allocator, the cache and the history over them. */
typedef struct hist_world {
  unit_failmem fm;
  ded_bufcache cache;
  ded_history h;
} hist_world;

static void hist_world_init(hist_world *w, uint64_t cap) {
  unit_failmem_init(&w->fm, -1);
  memset(&w->cache, 0, sizeof w->cache);
  w->cache.mem = &w->fm.mem;
  ded_history_init(&w->h, &w->fm.mem, &w->cache, cap);
}

/* Frees everything and checks nothing is left. */
static void hist_world_free(hist_world *w) {
  ded_history_free(&w->h);
  assert_int_equal(w->h.n, 0);
  ded_bufcache_free(&w->cache);
  assert_int_equal(w->cache.n, 0);
  assert_int_equal(w->fm.live, 0);
}

/* A finished round's result as the round hands it over: a plan of two
 * members and |bytes| bytes of the round number. */
typedef struct hist_result {
  ded_msg_commit plan;
  uint8_t *res;
  ded_msg_member *members; /* what plan.members was */
  uint8_t *bytes;          /* what res was */
  uint8_t digest[DED_RESULT_DIGEST_BYTES]; /* of the round's bytes: one per round */
} hist_result;

/* The digest a test says round |round|'s bytes have: one per round. */
static void hist_digest_of(uint64_t round, uint8_t d[DED_RESULT_DIGEST_BYTES]) {
  for (unsigned i = 0; i < DED_RESULT_DIGEST_BYTES; i++)
    d[i] = (uint8_t)(round * 31u + i * 5u + 3u);
}

static hist_result hist_result_new(hist_world *w, uint64_t round, size_t bytes) {
  hist_result r;
  r.members = ded_mem_malloc(&w->fm.mem, 2 * sizeof *r.members);
  assert_non_null(r.members);
  r.members[0] = unit_member(1, DED_MEMBER_F_ACCEPTOR, 0);
  r.members[1] = unit_member(2, DED_MEMBER_F_ACCEPTOR, 1);
  r.plan = unit_plan(round << 32 | 1, r.members, 2, 2, bytes / 8, 1);
  r.plan.round = round;
  r.res = ded_mem_malloc(&w->fm.mem, bytes);
  assert_non_null(r.res);
  memset(r.res, (int)(round & 0xff), bytes);
  r.bytes = r.res;
  hist_digest_of(round, r.digest);
  return r;
}

/* Adds round |round|'s result of |bytes| and says whether it was taken
 * (if not, frees it as its caller would). */
static bool hist_add(hist_world *w, uint64_t round, size_t bytes) {
  hist_result r = hist_result_new(w, round, bytes);
  ded_history_add(&w->h, round, &r.plan, &r.res, bytes, r.digest);
  if (r.plan.members == NULL) {
    assert_null(r.res); /* both taken, or neither */
    ded_hist_entry *e = ded_history_find(&w->h, round);
    assert_non_null(e);
    assert_ptr_equal(e->plan.members, r.members);
    assert_ptr_equal(e->res, r.bytes);
    assert_int_equal(e->bytes, bytes);
    assert_memory_equal(e->digest, r.digest, DED_RESULT_DIGEST_BYTES);
    return true;
  }
  assert_ptr_equal(r.plan.members, r.members);
  assert_ptr_equal(r.res, r.bytes);
  ded_msg_commit_free(&r.plan, &w->fm.mem);
  ded_mem_free(&w->fm.mem, r.res);
  return false;
}

/* The history's invariants: each round once, oldest first, within both
 * caps, |bytes| the sum of its entries. */
static void hist_assert_ok(const ded_history *h) {
  size_t sum = 0;
  for (size_t i = 0; i < h->n; i++) {
    uint8_t d[DED_RESULT_DIGEST_BYTES];
    hist_digest_of(h->v[i].round, d); /* each entry keeps its own round's digest */
    assert_memory_equal(h->v[i].digest, d, DED_RESULT_DIGEST_BYTES);
    sum += h->v[i].bytes;
    if (i > 0) assert_true(h->v[i - 1].round < h->v[i].round);
  }
  assert_int_equal(h->bytes, sum);
  assert_true(h->bytes <= h->cap);
  assert_true(h->n <= DED_ROUNDS_AHEAD_MAX);
}

/* Past the byte cap the oldest results go, into the cache, as many as it
 * takes; a result of exactly the cap is kept alone. */
static void test_history_byte_cap(void **state) {
  (void)state;
  hist_world w;
  hist_world_init(&w, 100);
  assert_true(hist_add(&w, 1, 40));
  uint8_t *r1 = w.h.v[0].res;
  assert_true(hist_add(&w, 2, 40));
  assert_true(hist_add(&w, 3, 40));
  hist_assert_ok(&w.h);
  assert_int_equal(w.h.n, 2);
  assert_int_equal(w.h.bytes, 80);
  assert_null(ded_history_find(&w.h, 1));
  assert_int_equal(w.h.v[0].round, 2);
  assert_int_equal(w.h.v[1].round, 3);
  assert_int_equal(w.cache.n, 1);
  assert_ptr_equal(ded_bufcache_get(&w.cache, 40), r1);
  ded_mem_free(&w.fm.mem, r1);
  assert_true(hist_add(&w, 4, 100));
  hist_assert_ok(&w.h);
  assert_int_equal(w.h.n, 1);
  assert_int_equal(w.h.v[0].round, 4);
  assert_int_equal(w.cache.n, 2);
  assert_true(hist_add(&w, 5, 1));
  assert_int_equal(w.h.n, 1);
  assert_int_equal(ded_history_find(&w.h, 5)->res[0], 5);
  hist_world_free(&w);
}

/* A result larger than the cap is not kept, not taken, and drops nothing. */
static void test_history_too_large(void **state) {
  (void)state;
  hist_world w;
  hist_world_init(&w, 100);
  assert_true(hist_add(&w, 1, 60));
  assert_false(hist_add(&w, 2, 101));
  assert_null(ded_history_find(&w.h, 2));
  assert_non_null(ded_history_find(&w.h, 1));
  assert_int_equal(w.h.bytes, 60);
  assert_int_equal(w.cache.n, 0);
  hist_world_free(&w);
  /* A history that keeps nothing. */
  hist_world_init(&w, 0);
  assert_false(hist_add(&w, 1, 1));
  assert_int_equal(w.h.n, 0);
  hist_world_free(&w);
}

/* One entry per round: a second result of a round kept is not taken, and
 * the first stays. */
static void test_history_one_per_round(void **state) {
  (void)state;
  hist_world w;
  hist_world_init(&w, 1000);
  assert_true(hist_add(&w, 5, 10));
  assert_true(hist_add(&w, 6, 10));
  assert_false(hist_add(&w, 5, 20));
  assert_false(hist_add(&w, 5, 10));
  /* ... nor with other bytes: the digest kept is the first one's. */
  hist_result r = hist_result_new(&w, 5, 10);
  memset(r.digest, 0xa5, sizeof r.digest);
  ded_history_add(&w.h, 5, &r.plan, &r.res, 10, r.digest);
  assert_ptr_equal(r.plan.members, r.members);
  assert_ptr_equal(r.res, r.bytes);
  ded_msg_commit_free(&r.plan, &w.fm.mem);
  ded_mem_free(&w.fm.mem, r.res);
  assert_int_equal(w.h.n, 2);
  assert_int_equal(ded_history_find(&w.h, 5)->bytes, 10);
  assert_null(ded_history_find(&w.h, 7));
  hist_assert_ok(&w.h);
  hist_world_free(&w);
}

/* At most DED_ROUNDS_AHEAD_MAX rounds, whatever the bytes allow: the
 * oldest goes, into the cache. */
static void test_history_rounds_cap(void **state) {
  (void)state;
  hist_world w;
  hist_world_init(&w, UINT64_MAX);
  for (uint64_t r = 0; r <= DED_ROUNDS_AHEAD_MAX; r++) assert_true(hist_add(&w, r, 3));
  hist_assert_ok(&w.h);
  assert_int_equal(w.h.n, DED_ROUNDS_AHEAD_MAX);
  assert_null(ded_history_find(&w.h, 0));
  for (uint64_t r = 1; r <= DED_ROUNDS_AHEAD_MAX; r++) assert_non_null(ded_history_find(&w.h, r));
  assert_int_equal(w.h.v[0].round, 1);
  assert_int_equal(w.cache.n, 1);
  assert_int_equal(w.cache.v[0].len, 3);
  hist_world_free(&w);
}

/* Short of memory for the list, a result is not taken and nothing else
 * changes; the next one is kept. */
static void test_history_nomem(void **state) {
  (void)state;
  hist_world w;
  hist_world_init(&w, 1000);
  hist_result r = hist_result_new(&w, 1, 10);
  w.fm.fail_at = w.fm.allocs;
  ded_history_add(&w.h, 1, &r.plan, &r.res, 10, r.digest);
  assert_true(w.fm.failed);
  assert_ptr_equal(r.plan.members, r.members);
  assert_ptr_equal(r.res, r.bytes);
  assert_int_equal(w.h.n, 0);
  assert_int_equal(w.h.bytes, 0);
  ded_msg_commit_free(&r.plan, &w.fm.mem);
  ded_mem_free(&w.fm.mem, r.res);
  assert_true(hist_add(&w, 1, 10));
  hist_world_free(&w);
}

/* Freeing the history hands its results to the cache. */
static void test_history_free_into_cache(void **state) {
  (void)state;
  hist_world w;
  hist_world_init(&w, 1000);
  for (uint64_t r = 0; r < 4; r++) assert_true(hist_add(&w, r, 16 + r));
  ded_history_free(&w.h);
  assert_int_equal(w.h.n, 0);
  assert_int_equal(w.h.bytes, 0);
  assert_int_equal(w.cache.n, 4);
  for (unsigned i = 0; i < 4; i++) assert_int_equal(w.cache.v[i].len, 16 + i);
  assert_int_equal(w.fm.live, 4); /* the plans went, the buffers wait */
  hist_world_free(&w);
}

/* The cache gives a buffer back only for its exact length (any of
 * several of that length), else allocates; NULL is not kept. */
static void test_bufcache_exact_size(void **state) {
  (void)state;
  hist_world w;
  hist_world_init(&w, 0);
  void *p = ded_bufcache_get(&w.cache, 64);
  assert_non_null(p);
  assert_int_equal(w.fm.live, 1);
  ded_bufcache_put(&w.cache, p, 64);
  ded_bufcache_put(&w.cache, NULL, 64);
  assert_int_equal(w.cache.n, 1);
  void *q = ded_bufcache_get(&w.cache, 63);
  void *r = ded_bufcache_get(&w.cache, 65);
  assert_ptr_not_equal(q, p);
  assert_ptr_not_equal(r, p);
  assert_int_equal(w.cache.n, 1);
  assert_ptr_equal(ded_bufcache_get(&w.cache, 64), p);
  assert_int_equal(w.cache.n, 0);
  void *p2 = ded_bufcache_get(&w.cache, 64); /* another one of 64 */
  assert_ptr_not_equal(p2, p);
  ded_bufcache_put(&w.cache, p, 64);
  ded_bufcache_put(&w.cache, p2, 64);
  void *a = ded_bufcache_get(&w.cache, 64), *b = ded_bufcache_get(&w.cache, 64);
  assert_true((a == p && b == p2) || (a == p2 && b == p));
  assert_int_equal(w.cache.n, 0);
  ded_mem_free(&w.fm.mem, p2);
  ded_mem_free(&w.fm.mem, p);
  ded_mem_free(&w.fm.mem, q);
  ded_mem_free(&w.fm.mem, r);
  hist_world_free(&w);
}

/* At most DED_BUF_CACHE buffers: past that the oldest is freed. */
static void test_bufcache_bound(void **state) {
  (void)state;
  hist_world w;
  hist_world_init(&w, 0);
  for (size_t len = 1; len <= DED_BUF_CACHE + 1; len++)
    ded_bufcache_put(&w.cache, ded_mem_malloc(&w.fm.mem, len), len);
  assert_int_equal(w.cache.n, DED_BUF_CACHE);
  assert_int_equal(w.fm.live, DED_BUF_CACHE);
  void *fresh = ded_bufcache_get(&w.cache, 1); /* the oldest went */
  assert_int_equal(w.cache.n, DED_BUF_CACHE);
  ded_mem_free(&w.fm.mem, fresh);
  void *kept = ded_bufcache_get(&w.cache, 2);
  assert_int_equal(w.cache.n, DED_BUF_CACHE - 1);
  ded_mem_free(&w.fm.mem, kept);
  kept = ded_bufcache_get(&w.cache, DED_BUF_CACHE + 1);
  assert_int_equal(w.cache.n, DED_BUF_CACHE - 2);
  ded_mem_free(&w.fm.mem, kept);
  hist_world_free(&w);
}

/* The cache stays oldest first when a buffer is taken out of its middle,
 * so that a full cache frees its oldest buffer: here the 2-byte one (put
 * first) goes, not the 16-byte one (put last but one). */
static void test_bufcache_oldest_after_get(void **state) {
  (void)state;
  hist_world w;
  hist_world_init(&w, 0);
  for (size_t len = 1; len <= DED_BUF_CACHE; len++)
    ded_bufcache_put(&w.cache, ded_mem_malloc(&w.fm.mem, len), len);
  ded_mem_free(&w.fm.mem, ded_bufcache_get(&w.cache, 1));
  ded_bufcache_put(&w.cache, ded_mem_malloc(&w.fm.mem, 17), 17);
  ded_bufcache_put(&w.cache, ded_mem_malloc(&w.fm.mem, 18), 18); /* evicts the oldest: 2 */
  void *p = ded_bufcache_get(&w.cache, DED_BUF_CACHE);
  assert_int_equal(w.cache.n, DED_BUF_CACHE - 1); /* 16 was still cached */
  ded_mem_free(&w.fm.mem, p);
  hist_world_free(&w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_history_byte_cap),
      cmocka_unit_test(test_history_too_large),
      cmocka_unit_test(test_history_one_per_round),
      cmocka_unit_test(test_history_rounds_cap),
      cmocka_unit_test(test_history_nomem),
      cmocka_unit_test(test_history_free_into_cache),
      cmocka_unit_test(test_bufcache_exact_size),
      cmocka_unit_test(test_bufcache_bound),
      cmocka_unit_test(test_bufcache_oldest_after_get),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
