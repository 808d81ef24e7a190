/*
 * test_idle.c: a member whose trainer submits no next round (done
 * training and lingering before MPI_Finalize, or paused) while a peer
 * waits for it in that round (tnet.h: real nodes on an in-process
 * network). Its vote is needed where it is the primary acceptor of two:
 * it steps down from that round (ABSTAIN), so the other goes on without
 * it well before the bound, and its own trainer's call of that round, if
 * it ever comes, finds it out of step.
 */
#include "harness.h"

/* Index of the node of |net|'s pair with the smaller id: the primary. */
static int pair_primary(const tnet *net) {
  return memcmp(ded_node_id(net->n[0].node), ded_node_id(net->n[1].node), DED_ID_BYTES) < 0 ? 0 : 1;
}

/* Round |r| submitted on node |i|. */
static void submit(tnet *net, int i, uint64_t r) {
  tnet_node *tn = &net->n[i];
  ded_round_args a = {tn->buf, COUNT, DED_DTYPE_F32, 1.0, 1, NULL, 0};
  assert_int_equal(ded_node_round_submit(tn->node, &a, net->now), (int64_t)r);
}

/*
 * Two nodes past round 0; the primary's trainer submits nothing more, its
 * node up and answering. The other's round 1 completes with its own
 * values alone, well before the bound (10 s): once it has waited for
 * the primary half the bound (from its first failover, 1.5 s in, to the
 * primary's view; a silent peer is evicted after as long). So does its
 * round 2, at once. The
 * idle node's round 1, submitted afterwards, is out of step.
 */
static void test_node_idle_primary_steps_down(void **state) {
  (void)state;
  tnet *net = tnet_pair_past_round0();
  int p = pair_primary(net), o = 1 - p;
  tnet_node *on = &net->n[o], *pn = &net->n[p];
  uint64_t t0 = net->now;
  submit(net, o, 1);
  TNET_UNTIL(net, 30 * SEC_NS, on->rounds_done == 2);
  assert_int_equal(on->rounds_done, 2);
  assert_int_equal(on->last.status, 0);
  assert_int_equal(on->last.round, 1);
  assert_int_equal(on->last.contributors, 1);
  uint64_t took = net->now - t0;
  if (took < 5 * SEC_NS || took >= 8 * SEC_NS)
    fail_msg("round 1 took %llu ms while the primary, up but idle, held its quorum: expected it "
             "to step down once waited for half the 10 s bound", (unsigned long long)(took / MS_NS));
  assert_true(tnet_meshed(net)); /* nobody evicted nor dropped */

  t0 = net->now;
  submit(net, o, 2);
  TNET_UNTIL(net, 30 * SEC_NS, on->rounds_done == 3);
  assert_int_equal(on->rounds_done, 3);
  assert_int_equal(on->last.status, 0);
  assert_int_equal(on->last.round, 2);
  if (net->now - t0 >= SEC_NS)
    fail_msg("round 2 took %llu ms: the node that stepped down is none of its acceptors",
             (unsigned long long)((net->now - t0) / MS_NS));

  submit(net, p, 1);
  TNET_UNTIL(net, 30 * SEC_NS, pn->rounds_done == 2);
  assert_int_equal(pn->rounds_done, 2);
  assert_int_equal(pn->last.round, 1);
  assert_true(pn->last.late); /* out of step: its own values */
  assert_true(pn->last.behind > 1);

  /* Its next round (a trainer's step of several rounds, before any
   * reload): it never vouches that round 1 had no result (it completed
   * without it), so it cannot carry round 0's membership over round 1
   * and decide round 2 alone, a second result of round 2: it fetches the
   * other's, or is out of step. */
  unsigned commits = net->sent[p][DED_MSG_COMMIT];
  submit(net, p, 2);
  TNET_UNTIL(net, 30 * SEC_NS, pn->rounds_done == 3);
  assert_int_equal(pn->rounds_done, 3);
  assert_int_equal(pn->last.round, 2);
  assert_true(pn->last.late);
  if (pn->last.behind == 0 && memcmp(pn->buf, on->buf, sizeof pn->buf) != 0)
    fail_msg("round 2 of the job that stepped down from round 1 completed in step with other "
             "bytes than the other job's (%u contributors): a second result of round 2",
             (unsigned)pn->last.contributors);
  assert_int_equal(net->sent[p][DED_MSG_COMMIT], commits); /* it decided nothing */
  tnet_free(net);
}

/*
 * Three nodes past round 0; the one that coordinates round 1's view 0
 * (the middle id: member (1 + 0) mod 3 of round 0's) is idle. The other
 * two join it, and it decides round 1 without its own member (two of
 * three acceptors are a quorum). Nobody waits any more: it never steps
 * down, however long its trainer stays away, and its round 1, when it
 * comes, is late (the result fetched), not out of step.
 */
static void test_node_idle_coordinator_decided_no_step_down(void **state) {
  (void)state;
  tnet *net = tnet_new();
  for (int i = 0; i < 3; i++) tnet_add(net, 3);
  tnet_mesh(net);
  tnet_round(net, 0x7, -1, 0);
  int c = tnet_id_rank(net, 1);
  assert_true(c >= 0);
  int before[3] = {net->n[0].rounds_done, net->n[1].rounds_done, net->n[2].rounds_done};
  unsigned others = 0x7 & ~(1u << c);
  for (int i = 0; i < 3; i++)
    if (i != c) submit(net, i, 1);
  TNET_UNTIL(net, 10 * SEC_NS, tnet_rounds_past(net, others, before));
  assert_true(tnet_rounds_past(net, others, before));
  for (int i = 0; i < 3; i++)
    if (i != c) assert_int_equal(net->n[i].last.contributors, 2);
  TNET_UNTIL(net, 15 * SEC_NS, false); /* past half the bound */
  assert_int_equal(net->sent[c][DED_MSG_ABSTAIN], 0);
  submit(net, c, 1);
  TNET_UNTIL(net, 10 * SEC_NS, net->n[c].rounds_done > before[c]);
  assert_int_equal(net->n[c].rounds_done, before[c] + 1);
  assert_int_equal(net->n[c].last.status, 0);
  assert_int_equal(net->n[c].last.round, 1);
  assert_int_equal(net->n[c].last.contributors, 2);
  assert_true(net->n[c].last.late);
  assert_true(net->n[c].last.behind == 0);
  tnet_free(net);
}

/*
 * Both trainers pause (an evaluation at the same step, say) for longer
 * than the bound: nobody waits for anybody, so nobody steps down, and
 * their next round completes with both, as any round.
 */
static void test_node_idle_together_no_step_down(void **state) {
  (void)state;
  tnet *net = tnet_pair_past_round0();
  TNET_UNTIL(net, 15 * SEC_NS, false);
  int before[2] = {net->n[0].rounds_done, net->n[1].rounds_done};
  submit(net, 0, 1);
  submit(net, 1, 1);
  TNET_UNTIL(net, 5 * SEC_NS, tnet_rounds_past(net, 0x3, before));
  assert_true(tnet_rounds_past(net, 0x3, before));
  for (int i = 0; i < 2; i++) {
    assert_int_equal(net->n[i].last.status, 0);
    assert_int_equal(net->n[i].last.round, 1);
    assert_int_equal(net->n[i].last.contributors, 2);
    assert_false(net->n[i].last.late);
  }
  tnet_free(net);
}

/*
 * The idle primary's trainer is only slow: it submits round 1 a little
 * after the other, well within half the bound. It does not step
 * down; the round completes with both.
 */
static void test_node_slow_primary_no_step_down(void **state) {
  (void)state;
  tnet *net = tnet_pair_past_round0();
  int p = pair_primary(net), o = 1 - p;
  int before[2] = {net->n[0].rounds_done, net->n[1].rounds_done};
  submit(net, o, 1);
  TNET_UNTIL(net, SEC_NS, false);
  submit(net, p, 1);
  TNET_UNTIL(net, 5 * SEC_NS, tnet_rounds_past(net, 0x3, before));
  assert_true(tnet_rounds_past(net, 0x3, before));
  for (int i = 0; i < 2; i++) {
    assert_int_equal(net->n[i].last.status, 0);
    assert_int_equal(net->n[i].last.contributors, 2);
    assert_false(net->n[i].last.late);
  }
  tnet_free(net);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_node_idle_primary_steps_down),
      cmocka_unit_test(test_node_idle_together_no_step_down),
      cmocka_unit_test(test_node_slow_primary_no_step_down),
      cmocka_unit_test(test_node_idle_coordinator_decided_no_step_down),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
