/*
 * test_churn.c: kills and stops (SIGSTOP, tnet_freeze) that fall on a
 * round's acceptors and coordinators together (tnet: real nodes on an
 * in-process network). Once a quorum of the acceptors can be reached
 * again, the round completes at once, with every live contributor; a
 * stopped node that resumes after the others went on fetches their
 * result. Faults at random, and their timing, are the simulator's
 * (tests/sim) and the churn soak's (tests/mp/soak.py).
 */
#include "harness.h"

/* Node |i| ended round |r| with the swarm (|late|: it fetched the
 * result), with |contributors|, holding node |ref|'s bytes. */
static void expect_done(const tnet *net, int i, uint64_t r, bool late, unsigned contributors,
                        int ref) {
  const tnet_node *tn = &net->n[i];
  assert_int_equal(tn->last.status, 0);
  assert_int_equal(tn->last.round, r);
  assert_int_equal(tn->last.contributors, contributors);
  assert_false(tn->last.alone);
  assert_true(tn->last.late == late);
  assert_memory_equal(tn->buf, net->n[ref].buf, sizeof tn->buf);
}

static void submit(tnet *net, int i, uint64_t r) {
  tnet_node *tn = &net->n[i];
  ded_round_args a = {tn->buf, COUNT, DED_DTYPE_F32, 1.0, 1, NULL, 0};
  assert_int_equal(ded_node_round_submit(tn->node, &a, net->now), (int64_t)r);
}

/*
 * Five nodes past rounds 0 to 2: round 3's acceptors are all five, and
 * its view v is coordinated by member (3 + v) mod 5 of round 2's, in id
 * order: views 0 and 1 by the two largest ids, view 2 by the smallest,
 * the primary. The primary submits round 3 and is stopped (SIGSTOP);
 * the coordinators of views 0 and 1 die; the two left submit. Two of five
 * acceptors are no quorum, and the dead count until their eviction, half
 * the 10 s bound after they died. The primary resumes |stop_ms| later,
 * before that: with it the three are a quorum, and round 3 completes on
 * all three, with all three contributions, within half a second of its
 * resumption (the churn soak's round at the bound, seed 674987194, had
 * this shape: round 398's views 0 and 1 coordinated by jobs killed in
 * it, view 2 by the primary, stopped twice).
 */
static void churn_primary_back(uint64_t stop_ms) {
  tnet *net = tnet_new();
  for (int i = 0; i < 5; i++) tnet_add(net, 5);
  tnet_mesh(net);
  for (uint64_t r = 0; r < 3; r++) tnet_round(net, 0x1f, -1, r);
  int p = tnet_id_rank(net, 0), a = tnet_id_rank(net, 3), b = tnet_id_rank(net, 4);
  int c = tnet_id_rank(net, 1), d = tnet_id_rank(net, 2);
  int before[5];
  for (int i = 0; i < 5; i++) before[i] = net->n[i].rounds_done;
  submit(net, p, 3);
  tnet_freeze(net, p, true);
  tnet_kill(net, a);
  tnet_kill(net, b);
  submit(net, c, 3);
  submit(net, d, 3);
  unsigned live = 1u << p | 1u << c | 1u << d;
  TNET_UNTIL(net, stop_ms * MS_NS, tnet_rounds_past(net, live, before));
  if (net->n[c].rounds_done != before[c] || net->n[d].rounds_done != before[d])
    fail_msg("stop %llu ms: round 3 completed without a quorum (two of five acceptors)",
             (unsigned long long)stop_ms);
  tnet_freeze(net, p, false);
  uint64_t t1 = net->now;
  TNET_UNTIL(net, 10 * SEC_NS, tnet_rounds_past(net, live, before));
  assert_true(tnet_rounds_past(net, live, before));
  if (net->now - t1 > 500 * MS_NS)
    fail_msg("stop %llu ms: round 3 completed %llu ms after the primary resumed, with a quorum "
             "back at once",
             (unsigned long long)stop_ms, (unsigned long long)((net->now - t1) / MS_NS));
  for (int i = 0; i < 5; i++)
    if (live >> i & 1) expect_done(net, i, 3, false, 3, c);
  tnet_free(net);
}

/* Stops shorter and longer than the silence time (a quarter of the
 * bound): the others close the stopped one's connections at 2.5 s. */
static void test_node_churn_primary_back(void **state) {
  (void)state;
  static const uint64_t stops[] = {1000, 2400, 2600, 4000, 4900};
  for (unsigned k = 0; k < sizeof stops / sizeof stops[0]; k++) churn_primary_back(stops[k]);
}

/*
 * Five nodes past round 0; the primary is stopped before it submits
 * round 1 and the coordinator of view 0 dies: the other three, a quorum
 * of five, complete round 1 at once without either, and the primary,
 * resumed, fetches that result: late, not out of step.
 */
static void test_node_churn_quorum_without_primary(void **state) {
  (void)state;
  tnet *net = tnet_new();
  for (int i = 0; i < 5; i++) tnet_add(net, 5);
  tnet_mesh(net);
  tnet_round(net, 0x1f, -1, 0);
  int p = tnet_id_rank(net, 0), a = tnet_id_rank(net, 1);
  int before[5];
  for (int i = 0; i < 5; i++) before[i] = net->n[i].rounds_done;
  tnet_freeze(net, p, true);
  tnet_kill(net, a);
  unsigned rest = 0;
  for (int i = 0; i < 5; i++)
    if (i != p && i != a) {
      submit(net, i, 1);
      rest |= 1u << i;
    }
  TNET_UNTIL(net, SEC_NS, tnet_rounds_past(net, rest, before));
  assert_true(tnet_rounds_past(net, rest, before));
  int some = -1;
  for (int i = 0; i < 5; i++)
    if (rest >> i & 1) {
      if (some < 0) some = i;
      expect_done(net, i, 1, false, 3, some);
    }
  TNET_UNTIL(net, 3 * SEC_NS, false);
  tnet_freeze(net, p, false);
  submit(net, p, 1);
  TNET_UNTIL(net, 5 * SEC_NS, net->n[p].rounds_done > before[p]);
  assert_int_equal(net->n[p].rounds_done, before[p] + 1);
  expect_done(net, p, 1, true, 3, some);
  tnet_free(net);
}

/*
 * The coordinator of its own view stopped past that view's bound (churn
 * soak 486647884). Three nodes past rounds 0 to 2; round 3's view 0 is
 * x's (the smallest id, the primary). z submits round 3, then x, and x
 * is stopped with z's JOIN in its view; y's trainer never comes to round
 * 3, and y and z die a second later. x resumes 9 s after its stop: its
 * call's bound is moved by the stop (to 19 s), its view's is not (10 s),
 * so at its first check after the quiet time (the silence time, 2.5 s)
 * the view gives up. Its member must not wait for that view until its
 * own bound: it fails over, as from any coordinator that will not
 * decide, and once y and z are evicted (5 s after x heard of their
 * deaths) x alone is the acceptors still counted, and round 3 completes
 * with x's own contribution, before the bound. Before, the member waited
 * for its own view, which had given up, and ended at its bound without
 * a result.
 */
static void test_node_churn_own_view_gave_up(void **state) {
  (void)state;
  tnet *net = tnet_new();
  for (int i = 0; i < 3; i++) tnet_add(net, 3);
  tnet_mesh(net);
  for (uint64_t r = 0; r < 3; r++) tnet_round(net, 0x7, -1, r);
  int x = tnet_id_rank(net, 0), y = tnet_id_rank(net, 1), z = tnet_id_rank(net, 2);
  int before = net->n[x].rounds_done;
  uint64_t t0 = net->now;
  submit(net, z, 3);
  tnet_pump(net);
  submit(net, x, 3);
  tnet_pump(net);
  tnet_freeze(net, x, true);
  TNET_UNTIL(net, SEC_NS, false);
  tnet_kill(net, y);
  tnet_kill(net, z);
  const uint64_t rest = t0 + 9 * SEC_NS - net->now;
  TNET_UNTIL(net, rest, false);
  tnet_freeze(net, x, false);
  TNET_UNTIL(net, 12 * SEC_NS, net->n[x].rounds_done != before);
  assert_int_equal(net->n[x].rounds_done, before + 1);
  const tnet_node *tn = &net->n[x];
  uint64_t after_ms = (net->now - t0 - 9 * SEC_NS) / MS_NS;
  if (tn->last.status != 0)
    fail_msg("round 3 ended with status %d, %llu ms after x resumed", tn->last.status,
             (unsigned long long)after_ms);
  assert_int_equal(tn->last.round, 3);
  assert_int_equal(tn->last.contributors, 1);
  if (after_ms > 6000)
    fail_msg("round 3 completed %llu ms after x resumed", (unsigned long long)after_ms);
  tnet_free(net);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_node_churn_primary_back),
      cmocka_unit_test(test_node_churn_quorum_without_primary),
      cmocka_unit_test(test_node_churn_own_view_gave_up),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
