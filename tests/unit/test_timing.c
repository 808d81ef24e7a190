/*
 * test_timing.c: round/ded_timing, how long the engine waits.
 *
 * Every wait lies between the deadline floor and a quarter of the round
 * bound; a member waits for a decision longer than a coordinator waits
 * for joins; patience doubles per view from view 2, up to 16x, within the
 * cap; with no round time learnt, the progress wait is at least the
 * attempt's estimate; the learnt times are EWMAs (1/8 per sample).
 */
#include "unit_util.h"

#include "core/ded_assert.h"
#include "round/ded_timing.h"

#define MS 1000000ull
#define S 1000000000ull

/* The engine's defaults: DEDMPI_DEADLINE_FLOOR 500ms, ROUND_TIMEOUT 60s. */
static ded_timing timing_default(void) { return (ded_timing){500 * MS, 60 * S, 0, 0}; }

/* Learnt times tried, from nothing to far past the cap. */
static const uint64_t timing_learnt[] = {0,       1,       37 * MS, 125 * MS, 500 * MS, 900 * MS,
                                         2 * S,   3 * S,   4 * S,   15 * S,   60 * S,   3600 * S};

/* A quarter of the bound caps; half of it evicts. */
static void test_timing_cap_evict(void **state) {
  (void)state;
  ded_timing t = timing_default();
  assert_int_equal(ded_timing_cap(&t), 15 * S);
  assert_int_equal(ded_timing_evict(&t), 30 * S);
  t.bound_ns = 1 * S;
  assert_int_equal(ded_timing_cap(&t), 250 * MS);
  assert_int_equal(ded_timing_evict(&t), 500 * MS);
}

/* Silence: a quarter of the bound, at least four floors, never past the
 * eviction time; a keepalive four times within it, at least once a second. */
static void test_timing_silence(void **state) {
  (void)state;
  ded_timing t = timing_default(); /* 500 ms floor, 60 s bound */
  assert_int_equal(ded_timing_silence(&t), 15 * S);
  assert_int_equal(ded_timing_keepalive(&t), 1 * S);
  t.bound_ns = 6 * S;
  t.floor_ns = 200 * MS;
  assert_int_equal(ded_timing_silence(&t), 1500 * MS);
  assert_int_equal(ded_timing_keepalive(&t), 375 * MS);
  t.bound_ns = 4 * S; /* four floors win over the quarter */
  t.floor_ns = 400 * MS;
  assert_int_equal(ded_timing_silence(&t), 1600 * MS);
  t.bound_ns = 2 * S; /* and the eviction time over both */
  assert_int_equal(ded_timing_silence(&t), 1 * S);
  assert_true(ded_timing_keepalive(&t) < ded_timing_silence(&t));
}

/* Every wait, in every view, whatever was learnt and estimated, lies in
 * [floor, cap] (for a floor of at most a third of the cap: the join
 * wait's own floor is three times the deadline floor). */
static void test_timing_waits_within_bounds(void **state) {
  (void)state;
  static const ded_timing configs[] = {
      {500 * MS, 60 * S, 0, 0}, {1 * MS, 1 * S, 0, 0}, {100 * MS, 1200 * MS, 0, 0},
      {5 * S, 60 * S, 0, 0}};
  static const uint64_t est[] = {0, 1 * MS, 800 * MS, 10 * S, 3600 * S};
  static const uint32_t views[] = {0, 1, 2, 3, 4, 5, 6, 7, 40, UINT32_MAX};
  for (size_t c = 0; c < DED_ARRAY_LEN(configs); c++)
    for (size_t a = 0; a < DED_ARRAY_LEN(timing_learnt); a++)
      for (size_t b = 0; b < DED_ARRAY_LEN(timing_learnt); b++) {
        ded_timing t = configs[c];
        t.spread_ewma = timing_learnt[a];
        t.run_ewma = timing_learnt[b];
        uint64_t lo = t.floor_ns, hi = ded_timing_cap(&t);
        for (size_t v = 0; v < DED_ARRAY_LEN(views); v++) {
          uint64_t w = ded_timing_coord_wait(&t, views[v]);
          assert_true(w >= lo && w <= hi);
          w = ded_timing_join_wait(&t, views[v]);
          assert_true(w >= lo && w <= hi);
          for (size_t e = 0; e < DED_ARRAY_LEN(est); e++) {
            w = ded_timing_progress_wait(&t, views[v], est[e]);
            assert_true(w >= lo && w <= hi);
          }
        }
      }
}

/* For the same learnt spread and view, a member waits for the decision
 * longer than the coordinator waits for joins, at the cap too: the
 * coordinator's stops at three quarters of it, so that its decision has a
 * quarter of the cap to reach the members (before, both were equal at
 * the cap, and a swarm of 44 changed views every 5 s until the bound). */
static void test_timing_join_exceeds_coord(void **state) {
  (void)state;
  static const ded_timing configs[] = {{500 * MS, 60 * S, 0, 0}, {1 * MS, 1 * S, 0, 0}};
  for (size_t c = 0; c < DED_ARRAY_LEN(configs); c++)
    for (size_t a = 0; a < DED_ARRAY_LEN(timing_learnt); a++)
      for (uint32_t view = 0; view < 8; view++) {
        ded_timing t = configs[c];
        t.spread_ewma = timing_learnt[a];
        uint64_t coord = ded_timing_coord_wait(&t, view);
        assert_true(ded_timing_join_wait(&t, view) > coord);
        assert_true(coord <= DED_MAX(ded_timing_cap(&t) / 4 * 3, t.floor_ns));
      }
  /* Nothing learnt: the coordinator waits the floor, members three. */
  ded_timing t = timing_default();
  assert_int_equal(ded_timing_coord_wait(&t, 0), 500 * MS);
  assert_int_equal(ded_timing_join_wait(&t, 0), 1500 * MS);
  /* A learnt spread: four of them for the coordinator, members eight more
   * than their floor. */
  t.spread_ewma = 200 * MS;
  assert_int_equal(ded_timing_coord_wait(&t, 0), 800 * MS);
  assert_int_equal(ded_timing_join_wait(&t, 0), 3100 * MS);
}

/* Views 0 and 1 wait 1x; from view 2 each view doubles, up to 16x at
 * view 5 and beyond, never past the cap. */
static void test_timing_view_backoff(void **state) {
  (void)state;
  ded_timing t = timing_default();
  static const uint64_t coord[] = {500, 500, 1000, 2000, 4000, 8000, 8000, 8000};
  static const uint64_t join[] = {1500, 1500, 3000, 6000, 12000, 15000, 15000, 15000};
  static const uint64_t progress[] = {1000, 1000, 2000, 4000, 8000, 15000, 15000, 15000};
  for (uint32_t v = 0; v < 8; v++) {
    assert_int_equal(ded_timing_coord_wait(&t, v), coord[v] * MS);
    assert_int_equal(ded_timing_join_wait(&t, v), join[v] * MS);
    assert_int_equal(ded_timing_progress_wait(&t, v, 0), progress[v] * MS);
  }
  assert_int_equal(ded_timing_coord_wait(&t, 1000), 8000 * MS);
  assert_int_equal(ded_timing_coord_wait(&t, UINT32_MAX), 8000 * MS);
  /* A larger floor: the doubling meets the cap earlier. */
  t.floor_ns = 2 * S;
  static const uint64_t coord2[] = {2000, 2000, 4000, 8000, 11250, 11250};
  for (uint32_t v = 0; v < 6; v++) assert_int_equal(ded_timing_coord_wait(&t, v), coord2[v] * MS);
}

/* With no round time learnt, the progress wait is at least the attempt's
 * estimate (at least twice the floor, at most the cap); once one is
 * learnt, the estimate no longer counts. */
static void test_timing_progress_estimate(void **state) {
  (void)state;
  ded_timing t = timing_default();
  assert_int_equal(ded_timing_progress_wait(&t, 0, 0), 1 * S);
  assert_int_equal(ded_timing_progress_wait(&t, 0, 700 * MS), 1 * S);
  assert_int_equal(ded_timing_progress_wait(&t, 0, 5 * S), 5 * S);
  assert_int_equal(ded_timing_progress_wait(&t, 0, 3600 * S), 15 * S);
  assert_int_equal(ded_timing_progress_wait(&t, 2, 5 * S), 10 * S);
  t.run_ewma = 1 * S; /* twice the floor plus four round times */
  assert_int_equal(ded_timing_progress_wait(&t, 0, 0), 5 * S);
  assert_int_equal(ded_timing_progress_wait(&t, 0, 3600 * S), 5 * S);
  t.run_ewma = 10 * MS;
  assert_int_equal(ded_timing_progress_wait(&t, 0, 12 * S), 1040 * MS);
}

/* The first sample is taken as it is; each later one moves the average
 * 1/8 of the way; spread and run learn apart; a steady time is reached. */
static void test_timing_learn_ewma(void **state) {
  (void)state;
  ded_timing t = timing_default();
  ded_timing_learn_spread(&t, 800);
  assert_int_equal(t.spread_ewma, 800);
  assert_int_equal(t.run_ewma, 0);
  ded_timing_learn_spread(&t, 1600);
  assert_int_equal(t.spread_ewma, 900);
  ded_timing_learn_spread(&t, 0);
  assert_int_equal(t.spread_ewma, 787); /* 6300 / 8, rounded down */
  ded_timing_learn_run(&t, 8 * S);
  assert_int_equal(t.run_ewma, 8 * S);
  ded_timing_learn_run(&t, 0);
  assert_int_equal(t.run_ewma, 7 * S);
  assert_int_equal(t.spread_ewma, 787);
  for (int i = 0; i < 300; i++) ded_timing_learn_run(&t, 2 * S);
  assert_true(t.run_ewma <= 2 * S && 2 * S - t.run_ewma < 8);
  for (int i = 0; i < 300; i++) ded_timing_learn_spread(&t, 1 * S);
  assert_true(t.spread_ewma <= 1 * S && 1 * S - t.spread_ewma < 8);
  /* What was learnt is what the waits use. */
  t.spread_ewma = 1 * S;
  assert_int_equal(ded_timing_coord_wait(&t, 0), 4 * S);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_timing_cap_evict),
      cmocka_unit_test(test_timing_silence),
      cmocka_unit_test(test_timing_waits_within_bounds),
      cmocka_unit_test(test_timing_join_exceeds_coord),
      cmocka_unit_test(test_timing_view_backoff),
      cmocka_unit_test(test_timing_progress_estimate),
      cmocka_unit_test(test_timing_learn_ewma),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
