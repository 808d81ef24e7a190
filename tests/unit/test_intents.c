/*
 * test_intents.c: round/ded_intents, late members that announced they
 * are coming.
 *
 * A hold is twice the fetch time plus the floor, and none past the cap;
 * one entry per peer, at most DED_INTENTS, the one expiring first giving
 * way; a round decided without an announcer spends its announcements of
 * that round and earlier, so a peer holds each round at most once; until
 * and each see only the rounds asked, the holds still running, and (until)
 * the peers still waited for.
 */
#include "unit_util.h"

#include <math.h>

#include "round/ded_intents.h"

#define MS 1000000ull
#define S 1000000000ull

/* The peers (unit_id 0..63) a predicate says yes to, as a bit mask. */
static bool intents_in(void *ctx, const uint8_t id[DED_ID_BYTES]) {
  unsigned n = (unsigned)id[0] << 8 | id[1];
  return n < 64 && (*(const uint64_t *)ctx >> n & 1);
}

static void intents_add(ded_intents *in, unsigned who, uint64_t round, uint64_t until_ns) {
  uint8_t id[DED_ID_BYTES];
  unit_id(id, who);
  ded_intents_add(in, id, round, until_ns, true);
}

static void intents_done(ded_intents *in, unsigned who, uint64_t round) {
  uint8_t id[DED_ID_BYTES];
  unit_id(id, who);
  ded_intents_done(in, id, round);
}

/* Four announcements: peers 1 and 2 of round 5 (until 1000 and 3000),
 * peer 3 of round 6 (until 9000), peer 4 of round 4 (until 500). */
static void intents_four(ded_intents *in) {
  memset(in, 0, sizeof *in);
  intents_add(in, 1, 5, 1000);
  intents_add(in, 2, 5, 3000);
  intents_add(in, 3, 6, 9000);
  intents_add(in, 4, 4, 500);
}

/* Peer |who|'s entry, or NULL; and there is at most one. */
static const ded_intent *intents_find(const ded_intents *in, unsigned who) {
  uint8_t id[DED_ID_BYTES];
  unit_id(id, who);
  const ded_intent *found = NULL;
  for (unsigned i = 0; i < DED_INTENTS; i++)
    if (in->v[i].used && memcmp(in->v[i].id, id, DED_ID_BYTES) == 0) {
      assert_null(found);
      found = &in->v[i];
    }
  return found;
}

/* ded_intents_until with every peer still waited for. */
static uint64_t intents_until_all(const ded_intents *in, uint64_t round, uint64_t now_ns) {
  uint64_t all = UINT64_MAX;
  return ded_intents_until(in, round, now_ns, true, intents_in, &all);
}

/* Collects the peers ded_intents_each names, as a mask. */
static void intents_collect(void *ctx, const uint8_t id[DED_ID_BYTES]) {
  unsigned n = (unsigned)id[0] << 8 | id[1];
  assert_true(n < 64);
  *(uint64_t *)ctx |= 1ull << n;
}

/* A hold is the floor plus twice the fetch time at the announcer's rate
 * (an unknown rate: DED_RATE_UNKNOWN_BPS); at or past the cap there is
 * none (UINT64_MAX), just below it the cap. */
static void test_intents_hold(void **state) {
  (void)state;
  ded_timing t = {500 * MS, 60 * S, 0, 0}; /* cap 15 s */
  assert_int_equal(ded_intents_hold_ns(&t, 0.0, 1000, 4), 508 * MS);
  assert_int_equal(ded_intents_hold_ns(&t, -5.0, 1000, 4), 508 * MS);
  assert_int_equal(ded_intents_hold_ns(&t, NAN, 1000, 4), 508 * MS);
  assert_int_equal(ded_intents_hold_ns(&t, DED_RATE_UNKNOWN_BPS, 1000, 4), 508 * MS);
  assert_int_equal(ded_intents_hold_ns(&t, 1e8, 1000, 8), 500 * MS + 160000);
  assert_int_equal(ded_intents_hold_ns(&t, 1e6, 0, 4), 500 * MS);
  assert_int_equal(ded_intents_hold_ns(&t, INFINITY, 1u << 30, 8), 500 * MS);
  /* 7.5 MB at 1 MB/s: 15 s of fetching, twice over, is the cap itself. */
  assert_int_equal(ded_intents_hold_ns(&t, 1e6, 1875000, 4), UINT64_MAX);
  assert_int_equal(ded_intents_hold_ns(&t, 1e6, 1874999, 4), 15 * S);
  assert_int_equal(ded_intents_hold_ns(&t, 1e6, (uint64_t)1 << 40, 8), UINT64_MAX);
  assert_int_equal(ded_intents_hold_ns(&t, 1e6, 1000000, 4), 8500 * MS);
}

/* One entry per peer: its latest announcement, for a later round or an
 * earlier one. */
static void test_intents_one_per_peer(void **state) {
  (void)state;
  ded_intents in;
  memset(&in, 0, sizeof in);
  intents_add(&in, 1, 5, 1000);
  intents_add(&in, 2, 5, 1500);
  intents_add(&in, 1, 7, 2000);
  const ded_intent *a = intents_find(&in, 1);
  assert_non_null(a);
  assert_int_equal(a->round, 7);
  assert_int_equal(a->until_ns, 2000);
  intents_add(&in, 1, 6, 3000);
  a = intents_find(&in, 1);
  assert_int_equal(a->round, 6);
  assert_int_equal(a->until_ns, 3000);
  assert_int_equal(intents_find(&in, 2)->until_ns, 1500);
  unsigned used = 0;
  for (unsigned i = 0; i < DED_INTENTS; i++) used += in.v[i].used;
  assert_int_equal(used, 2);
}

/* Full: a new peer takes the place of the entry that expires first (one
 * that holds nothing any more first of all); the others stay. */
static void test_intents_full_evicts_first_expiring(void **state) {
  (void)state;
  ded_intents in;
  memset(&in, 0, sizeof in);
  for (unsigned i = 0; i < DED_INTENTS; i++) intents_add(&in, i, 1, 1000 + ((i * 7) % 32) * 10);
  intents_add(&in, 40, 1, 5000);
  assert_null(intents_find(&in, 0)); /* until 1000: the first to expire */
  for (unsigned i = 1; i < DED_INTENTS; i++) assert_non_null(intents_find(&in, i));
  assert_non_null(intents_find(&in, 40));
  intents_add(&in, 41, 1, 5000);
  assert_null(intents_find(&in, 23)); /* until 1010: 23 * 7 % 32 == 1 */
  /* An existing peer's new announcement evicts no one. */
  intents_add(&in, 5, 2, 100);
  for (unsigned i = 1; i < DED_INTENTS; i++)
    if (i != 23) assert_non_null(intents_find(&in, i));
  /* A fulfilled entry (until 0) goes before any running hold. */
  intents_done(&in, 20, 1);
  intents_add(&in, 42, 1, 5000);
  assert_null(intents_find(&in, 20));
  assert_non_null(intents_find(&in, 5)); /* until 100, but still running */
}

/* A round decided without an announcer spends its announcements of that
 * round and earlier: they hold nothing, and the peer cannot hold them
 * again; a later round it may. Members the predicate owns keep theirs,
 * and later rounds are untouched. */
static void test_intents_spent(void **state) {
  (void)state;
  ded_intents in;
  intents_four(&in);
  uint64_t members = 1ull << 2; /* peer 2 took part */
  ded_intents_spent(&in, 5, intents_in, &members);
  assert_int_equal(intents_find(&in, 1)->until_ns, 0);
  assert_int_equal(intents_find(&in, 4)->until_ns, 0);
  assert_int_equal(intents_find(&in, 2)->until_ns, 3000);
  assert_int_equal(intents_find(&in, 3)->until_ns, 9000);
  assert_int_equal(intents_until_all(&in, 5, 0), 3000);
  /* Peer 1 again, for round 5 or earlier: held once already. */
  intents_add(&in, 1, 5, 9000);
  intents_add(&in, 1, 2, 9000);
  intents_add(&in, 4, 5, 9000);
  assert_int_equal(intents_find(&in, 1)->until_ns, 0);
  assert_int_equal(intents_find(&in, 4)->until_ns, 0);
  assert_int_equal(intents_until_all(&in, 5, 0), 3000);
  /* For round 6 it holds. */
  intents_add(&in, 1, 6, 9800);
  assert_int_equal(intents_until_all(&in, 6, 0), 9800);
  /* Round 6 decided with no one: peer 1's round 6 is spent as well. */
  uint64_t none = 0;
  ded_intents_spent(&in, 6, intents_in, &none);
  assert_int_equal(intents_until_all(&in, 6, 0), 0);
  intents_add(&in, 1, 6, 9500);
  intents_add(&in, 3, 6, 9500);
  assert_int_equal(intents_until_all(&in, 6, 0), 0);
  intents_add(&in, 3, 7, 9500);
  assert_int_equal(intents_until_all(&in, 7, 0), 9500);
}

/* A peer that joined a round fulfilled its announcement of that round or
 * an earlier one; of a later round, not; others' stay. */
static void test_intents_done(void **state) {
  (void)state;
  ded_intents in;
  memset(&in, 0, sizeof in);
  intents_add(&in, 1, 5, 1000);
  intents_add(&in, 2, 5, 2000);
  intents_done(&in, 1, 4);
  assert_int_equal(intents_find(&in, 1)->until_ns, 1000);
  intents_done(&in, 1, 6);
  assert_int_equal(intents_find(&in, 1)->until_ns, 0);
  assert_int_equal(intents_find(&in, 2)->until_ns, 2000);
  assert_int_equal(intents_until_all(&in, 5, 0), 2000);
  intents_done(&in, 2, 5);
  assert_int_equal(intents_until_all(&in, 5, 0), 0);
}

/* until: the latest hold of an announcer of that round or an earlier one,
 * still running, among those the predicate still waits for; later rounds
 * do not count. */
static void test_intents_until(void **state) {
  (void)state;
  ded_intents in;
  memset(&in, 0, sizeof in);
  assert_int_equal(intents_until_all(&in, 5, 0), 0);
  intents_four(&in);
  assert_int_equal(intents_until_all(&in, 5, 0), 3000);
  assert_int_equal(intents_until_all(&in, 6, 0), 9000);
  assert_int_equal(intents_until_all(&in, 4, 0), 500);
  assert_int_equal(intents_until_all(&in, 3, 0), 0);
  uint64_t waited = 1ull << 1 | 1ull << 4; /* peer 2 came already */
  assert_int_equal(ded_intents_until(&in, 5, 0, true, intents_in, &waited), 1000);
  assert_int_equal(ded_intents_until(&in, 5, 999, true, intents_in, &waited), 1000);
  assert_int_equal(ded_intents_until(&in, 5, 1000, true, intents_in, &waited), 0); /* ran out */
  assert_int_equal(intents_until_all(&in, 5, 1000), 3000);
  assert_int_equal(intents_until_all(&in, 5, 3000), 0);
}

/* each: every announcer of that round or an earlier one whose hold runs
 * past now, whether still waited for or not. */
static void test_intents_each(void **state) {
  (void)state;
  ded_intents in;
  intents_four(&in);
  uint64_t seen = 0;
  ded_intents_each(&in, 5, 0, intents_collect, &seen);
  assert_int_equal(seen, 1u << 1 | 1u << 2 | 1u << 4);
  seen = 0;
  ded_intents_each(&in, 5, 500, intents_collect, &seen);
  assert_int_equal(seen, 1u << 1 | 1u << 2);
  seen = 0;
  ded_intents_each(&in, 6, 2000, intents_collect, &seen);
  assert_int_equal(seen, 1u << 2 | 1u << 3);
  uint64_t none = 0;
  ded_intents_spent(&in, 6, intents_in, &none);
  seen = 0;
  ded_intents_each(&in, 6, 0, intents_collect, &seen);
  assert_int_equal(seen, 0);
}

/* A donor's own intent, which the swarm did not hear, counts only where
 * the caller asks for every intent. A later announcement of the same peer
 * makes it heard. */
static void test_intents_unheard(void **state) {
  (void)state;
  ded_intents in;
  memset(&in, 0, sizeof in);
  uint8_t id[DED_ID_BYTES];
  unit_id(id, 7);
  ded_intents_add(&in, id, 5, 4000, false);
  uint64_t seen = 0;
  ded_intents_each(&in, 5, 0, intents_collect, &seen);
  assert_int_equal(seen, 1u << 7);
  assert_int_equal(intents_until_all(&in, 5, 0), 0);
  uint64_t all = UINT64_MAX;
  assert_int_equal(ded_intents_until(&in, 5, 0, false, intents_in, &all), 4000);
  intents_add(&in, 1, 5, 1000);
  assert_int_equal(ded_intents_until(&in, 5, 0, false, intents_in, &all), 4000);
  assert_int_equal(intents_until_all(&in, 5, 0), 1000); /* the heard one alone */
  ded_intents_add(&in, id, 6, 5000, true);
  assert_int_equal(intents_until_all(&in, 6, 0), 5000);
  assert_non_null(intents_find(&in, 7));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_intents_unheard),
      cmocka_unit_test(test_intents_hold),
      cmocka_unit_test(test_intents_one_per_peer),
      cmocka_unit_test(test_intents_full_evicts_first_expiring),
      cmocka_unit_test(test_intents_spent),
      cmocka_unit_test(test_intents_done),
      cmocka_unit_test(test_intents_until),
      cmocka_unit_test(test_intents_each),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
