/*
 * test_runwait.c: a job that joins a run in progress waits for the run's
 * state rather than start a model of its own in it (harness.h: real nodes
 * on an in-process network): while its peers say PENDING, while the run
 * moves on, while the records show a run whose jobs are stopped; and not
 * for a run whose trainers all left.
 */
#include "harness.h"

/* Donors 0..2 of |net| offer their snapshot of |round| at last: joiner
 * |j| loads it, whole. */
static void offer_and_load(tnet *net, int j, uint64_t round) {
  for (int i = 0; i < 3; i++) {
    ded_snapshot s = tnet_snap_make(&net->fm.mem, round);
    assert_int_equal(ded_node_snapshot_set(net->n[i].node, &s, net->now), 0);
  }
  TNET_UNTIL(net, 10 * SEC_NS, net->n[j].state_calls > 0);
  tnet_expect_snapshot(&net->n[j], round);
}

/* A run whose peers said PENDING is in progress even when none of them can
 * offer its state this time (each snapshot refused, so each then says
 * NONE): the joiner asks again and loads the next snapshot, instead of
 * starting its own model in the run (issue 22: mp.join_mid_run's rare "no
 * run in progress (3 peers asked)" at round 164, two joiners at once). */
static void test_node_runwait_pending_then_none(void **state) {
  (void)state;
  tnet *net = tnet_new();
  int j = tnet_run_then_fetch(net);
  TNET_UNTIL(net, SEC_NS,
             net->n[0].want_snapshots && net->n[1].want_snapshots && net->n[2].want_snapshots);
  for (int i = 0; i < 3; i++) {
    ded_snapshot bad = tnet_snap_make(&net->fm.mem, 0); /* round 0: malformed, refused */
    assert_int_equal(ded_node_snapshot_set(net->n[i].node, &bad, net->now), DED_ERR_INVALID_ARG);
  }
  /* Every donor said NONE; the joiner asks again rather than decide. */
  TNET_UNTIL(net, 5 * SEC_NS,
             net->n[0].want_snapshots == 2 && net->n[1].want_snapshots == 2 &&
             net->n[2].want_snapshots == 2);
  assert_int_equal(net->n[j].state_calls, 0);
  for (int i = 0; i < 3; i++) assert_int_equal(net->n[i].want_snapshots, 2);
  offer_and_load(net, j, 3);
  tnet_free(net);
}

/* A run that goes on completing rounds without offering its state (its
 * trainers take no snapshot: after a round that ended nowhere none of them
 * could vouch for one) is alive: the joiner's wait runs again from each
 * newer round a peer's record shows, instead of ending at the first bound
 * (sim_chaos seed 1440: a joiner left at 30 s, the run offered at 33 s);
 * it loads once they offer. */
static void test_node_runwait_moves_on(void **state) {
  (void)state;
  tnet *net = tnet_new();
  net->bound_ns = 10 * SEC_NS;
  int j = tnet_run_then_fetch(net);
  uint64_t r = 3;
  for (uint64_t t0 = net->now; net->now < t0 + net->bound_ns + 2 * SEC_NS; r++) {
    tnet_round(net, 0x7, -1, r);
    TNET_UNTIL(net, SEC_NS, false);
    if (net->n[j].state_calls)
      fail_msg("the joiner gave up (status %d) at round %llu while the run moved on",
               net->n[j].state_status, (unsigned long long)r);
  }
  offer_and_load(net, j, r);
  tnet_free(net);
}

/* The only peers that hold the run are stopped (their output held) when a
 * joiner comes in through a backbone: no one can answer, but their records,
 * published as they completed their first round, say the run is past it.
 * The joiner waits for them rather than start its own model in the run,
 * and loads their state once they are back; without a sign of them by the
 * bound it fails, saying why. */
static void test_node_runwait_seen_in_records(void **state) {
  (void)state;
  for (int back = 0; back < 2; back++) {
    tnet *net = tnet_new();
    tnet_add_as(net, 1, true); /* 0: a backbone, no checkpoint */
    tnet_add(net, 2);
    tnet_add(net, 2);
    tnet_mesh(net);
    for (uint64_t r = 0; r < 3; r++) tnet_round(net, 0x6, -1, r);
    TNET_UNTIL(net, SEC_NS, false); /* their records, with their first round, reach the backbone */
    net->n[1].hold = net->n[2].hold = true;
    int j = tnet_add(net, 3);
    TNET_UNTIL(net, 2 * SEC_NS, false);
    assert_int_equal(ded_node_state_fetch(net->n[j].node, net->now), 0);
    TNET_UNTIL(net, 6 * SEC_NS, net->n[j].state_calls > 0);
    if (net->n[j].state_calls)
      fail_msg("the joiner decided (status %d) while the run's only peers were stopped",
               net->n[j].state_status);
    if (back) {
      net->n[1].hold = net->n[2].hold = false;
      TNET_UNTIL(net, 3 * SEC_NS, net->n[1].want_snapshots && net->n[2].want_snapshots);
      for (int i = 1; i <= 2; i++) {
        ded_snapshot s = tnet_snap_make(&net->fm.mem, 3);
        assert_int_equal(ded_node_snapshot_set(net->n[i].node, &s, net->now), 0);
      }
      TNET_UNTIL(net, 10 * SEC_NS, net->n[j].state_calls > 0);
      tnet_expect_snapshot(&net->n[j], 3);
    } else {
      TNET_UNTIL(net, 20 * SEC_NS, net->n[j].state_calls > 0);
      assert_int_equal(net->n[j].state_calls, 1);
      assert_int_equal(net->n[j].state_status, DED_ERR_TIMEOUT);
      assert_false(net->n[j].state_has_snap);
    }
    tnet_free(net);
  }
}

/* A run whose trainers all left (LEAVE) is over: the backbone they were
 * connected to does not hand their records to a newcomer, so a job that
 * starts a new run under the same name through it finds no run in
 * progress at once, instead of waiting the bound for a run its records
 * show and failing (the review of issue 22's joiner rule). */
static void test_node_runwait_left_run_not_shown(void **state) {
  (void)state;
  tnet *net = tnet_new();
  tnet_add_as(net, 1, true); /* 0: a backbone */
  tnet_add(net, 2);
  tnet_add(net, 2);
  tnet_mesh(net);
  for (uint64_t r = 0; r < 2; r++) tnet_round(net, 0x6, -1, r);
  TNET_UNTIL(net, SEC_NS, false);
  for (int i = 1; i <= 2; i++) ded_node_leave(net->n[i].node, net->now);
  TNET_UNTIL(net, 2 * SEC_NS, false);
  int j = tnet_add(net, 1);
  TNET_UNTIL(net, SEC_NS, net->n[j].booted);
  assert_int_equal(ded_node_state_fetch(net->n[j].node, net->now), 0);
  TNET_UNTIL(net, 5 * SEC_NS, net->n[j].state_calls > 0);
  assert_int_equal(net->n[j].state_calls, 1);
  assert_int_equal(net->n[j].state_status, 0); /* no run: its own state */
  assert_false(net->n[j].state_has_snap);
  tnet_free(net);
}

/* Every donor said PENDING (it takes a snapshot at its trainer's next
 * step) and its trainer does not step for longer than the bound (the run
 * stalled: every job in step stopped at once): the joiner, whose donors
 * are still there, waits on rather than fail at the bound, and loads
 * their snapshot when it comes (the churn soak, seed 1937242664: two
 * joins failed at the bound, the offers came just after). */
static void test_node_runwait_donors_pending_past_bound(void **state) {
  (void)state;
  tnet *net = tnet_new();
  net->bound_ns = 10 * SEC_NS;
  int j = tnet_run_then_fetch(net);
  TNET_UNTIL(net, SEC_NS,
             net->n[0].want_snapshots && net->n[1].want_snapshots && net->n[2].want_snapshots);
  TNET_UNTIL(net, net->bound_ns + 3 * SEC_NS, net->n[j].state_calls > 0);
  if (net->n[j].state_calls)
    fail_msg("the joiner gave up (status %d) while every donor that said PENDING was still there",
             net->n[j].state_status);
  offer_and_load(net, j, 3);
  tnet_free(net);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_node_runwait_pending_then_none),
      cmocka_unit_test(test_node_runwait_moves_on),
      cmocka_unit_test(test_node_runwait_seen_in_records),
      cmocka_unit_test(test_node_runwait_left_run_not_shown),
      cmocka_unit_test(test_node_runwait_donors_pending_past_bound),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
