/*
 * test_coordinator.c: the node as the coordinator of a later view, against
 * scripted peers (harness.h). Which attempt it decides from the JOINs it
 * gathered (a DONE one, an accepted one), and that a new attempt needs a
 * quorum of live acceptors to stand.
 */
#include "harness.h"

/* ---------------------------------------- coordinator: views and quorums */

/*
 * A node that runs no round of its own coordinates a later view for three
 * peers lo1 < lo2 < hi (connections 0, 1, 2; a view of round 0 is anyone's
 * to coordinate, and for a round > 0 the node knows no lineage that says
 * otherwise). |att| gets their attempt of |round|: members lo1, lo2, hi,
 * every one an acceptor, lo1 the primary, shards 0, 16 and 32.
 */
typedef struct tcoord {
  ded_ident id[3];
  ded_msg_member m[3];
} tcoord;

static void tcoord_start(tnode *t, tcoord *tc) {
  tnode_start(t, NULL, 0, 1.0, 1);
  ded_ident lo;
  peers_below(t, &tc->id[0], &tc->id[1]);
  peers_around(t, &lo, &tc->id[2]);
  send_hello(t, 0, &tc->id[0], RUN);
  for (unsigned i = 1; i < 3; i++) {
    assert_int_equal(tnode_accept(t), i);
    send_hello(t, i, &tc->id[i], RUN);
  }
  size_t len;
  for (unsigned i = 0; i < 3; i++) {
    assert_false(t->closed[i]);
    free(tnode_output_on(t, i, &len, t->now));
  }
}

static ded_msg_commit tcoord_attempt(tcoord *tc, uint64_t round, uint64_t attempt, uint64_t base) {
  for (unsigned i = 0; i < 3; i++) member_set(&tc->m[i], tc->id[i].id, 1.0, 1, CHUNK * i);
  return commit_of(round, attempt, base, tc->m, 3);
}

/* The decisions on connection |i|: how many DECIDEs and COMMITs; the first
 * DECIDE in |d| (the caller frees it), the first COMMIT in |c|. */
static void tcoord_decisions(tnode *t, unsigned i, int *ndecide, ded_msg_decide *d, int *ncommit,
                             ded_msg_commit *c) {
  size_t len;
  uint8_t *out = tnode_output_on(t, i, &len, t->now);
  *ndecide = frame_count(out, len, DED_MSG_DECIDE);
  *ncommit = frame_count(out, len, DED_MSG_COMMIT);
  ded_frame fr;
  if (d && *ndecide) {
    assert_true(frame_find(out, len, DED_MSG_DECIDE, 0, &fr));
    assert_int_equal(ded_msg_decide_decode(fr.payload, fr.len, NULL, d), 0);
  }
  if (c && *ncommit) {
    assert_true(frame_find(out, len, DED_MSG_COMMIT, 0, &fr));
    assert_int_equal(ded_msg_commit_decode(fr.payload, fr.len, NULL, c), 0);
  }
  free(out);
}

/*
 * A report that says DONE settles the round: the attempt stands, as a
 * DECIDE with CHOSEN, without a quorum and without the coordinator having
 * completed the previous round itself. Without DONE, the same reports
 * (every acceptor in, the attempt full and accepted in view 0) decide
 * nothing for round 1 here: the coordinator never completed round 0, so
 * it cannot know the round's acceptors.
 */
static void test_node_coord_done_is_chosen(void **state) {
  (void)state;
  const uint8_t all[1] = {0x07};
  for (int done = 0; done <= 1; done++) {
    tnode t;
    tcoord tc;
    tcoord_start(&t, &tc);
    const uint64_t A = attempt_of(0, tc.id[0].id);
    ded_msg_commit c = tcoord_attempt(&tc, 1, A, attempt_of(0, tc.id[1].id));
    if (done) {
      /* lo1 and hi are gone: lo2's report alone. */
      ded_node_conn_closed(t.node, t.conn[0], DED_ERR_PEER_LOST, t.now);
      ded_node_conn_closed(t.node, t.conn[2], DED_ERR_PEER_LOST, t.now);
      ded_msg_join j = join_of(1, 1, DED_JOIN_F_DONE, 0);
      send_join_status(&t, 1, &j, &c, all);
    } else {
      for (unsigned i = 0; i < 3; i++) {
        ded_msg_join j = join_of(1, 1, 0, i < 2 ? 0 : DED_VIEW_NONE);
        const uint8_t mine[1] = {(uint8_t)(1u << i)};
        send_join_status(&t, i, &j, &c, i < 2 ? all : mine);
      }
    }
    tnode_advance(&t, 1000ull * 1000 * 1000);
    for (unsigned i = 0; i < 3; i++) {
      if (done && i != 1) continue;
      assert_false(t.closed[i]);
      int nd, nc;
      ded_msg_decide d;
      tcoord_decisions(&t, i, &nd, &d, &nc, NULL);
      assert_int_equal(nc, 0);
      if (!done) {
        if (nd != 0) fail_msg("round 1 decided by a coordinator that did not complete round 0");
        continue;
      }
      assert_int_equal(nd, 1);
      assert_int_equal(d.round, 1);
      assert_int_equal(d.view, 1);
      assert_int_equal(d.flags, DED_DECIDE_F_CHOSEN);
      assert_int_equal(d.plan.attempt, A);
      for (unsigned s = 0; s < 3; s++) assert_int_equal(d.holders[s], 1); /* lo2 holds it all */
      ded_msg_decide_free(&d, NULL);
    }
    ded_node_free(t.node);
  }
}

/*
 * A member may report twice to one view (it completed while it waited and
 * answers a probe, or a report crossed a probe): the second report is
 * taken as an update, not as a protocol violation. Here the view stays
 * open (the coordinator never completed round 0), so the second JOIN
 * meets the first one still in the gather.
 */
static void test_node_coord_join_twice_kept(void **state) {
  (void)state;
  const uint8_t all[1] = {0x07}, mine[1] = {0x01};
  tnode t;
  tcoord tc;
  tcoord_start(&t, &tc);
  const uint64_t A = attempt_of(0, tc.id[0].id);
  ded_msg_commit c = tcoord_attempt(&tc, 1, A, attempt_of(0, tc.id[1].id));
  ded_msg_join j = join_of(1, 1, 0, DED_VIEW_NONE);
  send_join_status(&t, 0, &j, &c, mine);
  assert_false(t.closed[0]);
  j = join_of(1, 1, DED_JOIN_F_DONE, 0);
  send_join_status(&t, 0, &j, &c, all);
  if (t.closed[0]) fail_msg("a second report to the same view dropped the member");
  ded_node_free(t.node);
}

/*
 * With a quorum of reports, the attempt accepted in the highest view
 * stands, even against an attempt with a higher id (a later view's) that
 * is merely full: A (view 1) was accepted in view 1 by lo1, B (view 2) is
 * held in full by lo2 but nobody accepted it. Without lo1's acceptance,
 * B, the newest full attempt, stands instead. Neither is chosen.
 */
static void test_node_coord_accepted_attempt_stands(void **state) {
  (void)state;
  const uint8_t all[1] = {0x07}, some[1] = {0x04};
  for (int accepted = 0; accepted <= 1; accepted++) {
    tnode t;
    tcoord tc;
    tcoord_start(&t, &tc);
    const uint64_t A = attempt_of(1, tc.id[0].id), B = attempt_of(2, tc.id[1].id);
    assert_true(B > A);
    ded_msg_member mb[3];
    ded_msg_commit ca = tcoord_attempt(&tc, 0, A, 0);
    memcpy(mb, tc.m, sizeof mb);
    ded_msg_commit cb = commit_of(0, B, 0, mb, 3);
    ded_msg_join j = join_of(0, 3, 0, accepted ? 1 : DED_VIEW_NONE);
    send_join_status(&t, 0, &j, &ca, all);
    j.acc_view = DED_VIEW_NONE;
    send_join_status(&t, 1, &j, &cb, all);
    send_join_status(&t, 2, &j, &cb, some);
    const uint64_t want = accepted ? A : B;
    for (unsigned i = 0; i < 3; i++) {
      assert_false(t.closed[i]);
      int nd, nc;
      ded_msg_decide d;
      tcoord_decisions(&t, i, &nd, &d, &nc, NULL);
      assert_int_equal(nc, 0);
      assert_int_equal(nd, 1);
      if (d.plan.attempt != want)
        fail_msg("view 3 decided attempt %llx, not %llx (%s)", (unsigned long long)d.plan.attempt,
                 (unsigned long long)want,
                 accepted ? "the one accepted in view 1" : "the newest full one");
      assert_int_equal(d.round, 0);
      assert_int_equal(d.view, 3);
      assert_int_equal(d.flags, 0);
      ded_msg_decide_free(&d, NULL);
    }
    ded_node_free(t.node);
  }
}

/*
 * A new attempt needs reports from a quorum of the round's acceptors (in
 * a first round, those of the attempt reported): a minority cut off waits
 * rather than average on its own.
 *   - Three acceptors, hi gone: lo1's report alone (one of three), past
 *     the coordinator's deadline, gives no COMMIT; lo2's makes two of
 *     three: a new attempt, its members flagged as the round's acceptors
 *     (lo1 the primary, nacc 3).
 *   - Two acceptors: lo2's report alone is exactly half without the
 *     primary: no COMMIT; lo1's alone (the primary) is: a COMMIT.
 */
static void test_node_coord_new_attempt_needs_quorum(void **state) {
  (void)state;
  const uint8_t none[1] = {0};
  tnode t;
  tcoord tc;
  tcoord_start(&t, &tc);
  const uint64_t A = attempt_of(0, tc.id[0].id);
  ded_msg_commit c = tcoord_attempt(&tc, 0, A, 0);
  ded_node_conn_closed(t.node, t.conn[2], DED_ERR_PEER_LOST, t.now);
  ded_msg_join j = join_of(0, 1, 0, DED_VIEW_NONE);
  send_join_status(&t, 0, &j, &c, none);
  tnode_advance(&t, 2000ull * 1000 * 1000);
  for (unsigned i = 0; i < 2; i++) {
    int nd, nc;
    tcoord_decisions(&t, i, &nd, NULL, &nc, NULL);
    if (nd + nc != 0) fail_msg("a view decided with one report of three acceptors");
  }
  send_join_status(&t, 1, &j, &c, none);
  const uint64_t N = attempt_of(1, t.ident.id);
  for (unsigned i = 0; i < 2; i++) {
    assert_false(t.closed[i]);
    int nd, nc;
    ded_msg_commit nw;
    tcoord_decisions(&t, i, &nd, NULL, &nc, &nw);
    assert_int_equal(nd, 0);
    assert_int_equal(nc, 1);
    assert_int_equal(nw.round, 0);
    assert_int_equal(nw.attempt, N);
    assert_int_equal(nw.k, 2);
    assert_memory_equal(nw.members[0].id, tc.id[0].id, DED_ID_BYTES);
    assert_memory_equal(nw.members[1].id, tc.id[1].id, DED_ID_BYTES);
    assert_int_equal(nw.nacc, 3);
    assert_int_equal(nw.members[0].flags, DED_MEMBER_F_ACCEPTOR | DED_MEMBER_F_PRIMARY);
    assert_int_equal(nw.members[1].flags, DED_MEMBER_F_ACCEPTOR);
    ded_msg_commit_free(&nw, NULL);
  }
  ded_node_free(t.node);

  for (int primary = 0; primary <= 1; primary++) {
    tcoord_start(&t, &tc);
    for (unsigned i = 0; i < 2; i++) member_set(&tc.m[i], tc.id[i].id, 1.0, 1, (COUNT / 2) * i);
    ded_msg_commit c2 = commit_of(0, A, 0, tc.m, 2);
    unsigned gone = primary ? 1 : 0, here = primary ? 0 : 1;
    ded_node_conn_closed(t.node, t.conn[gone], DED_ERR_PEER_LOST, t.now);
    send_join_status(&t, here, &j, &c2, none);
    tnode_advance(&t, 2000ull * 1000 * 1000);
    int nd, nc;
    ded_msg_commit nw;
    tcoord_decisions(&t, here, &nd, NULL, &nc, &nw);
    assert_int_equal(nd, 0);
    assert_false(t.closed[here]);
    if (!primary) {
      if (nc != 0) fail_msg("a new attempt on half of the acceptors without the primary");
      ded_node_free(t.node);
      continue;
    }
    assert_int_equal(nc, 1);
    assert_int_equal(nw.attempt, N);
    assert_int_equal(nw.k, 1);
    assert_memory_equal(nw.members[0].id, tc.id[0].id, DED_ID_BYTES);
    assert_int_equal(nw.nacc, 2);
    assert_int_equal(nw.members[0].flags, DED_MEMBER_F_ACCEPTOR | DED_MEMBER_F_PRIMARY);
    ded_msg_commit_free(&nw, NULL);
    ded_node_free(t.node);
  }
}

/*
 * Round 0 among lo1 < lo2 < node < hi (tswarm: lo1 commits, every member
 * an acceptor, lo1 the primary) completes here, so the node knows round
 * 1's acceptors for sure: all four, lo1 the primary, nacc 4. Round 1's
 * view 0 is lo2's ((1 + 0) % 4; the node joined it when round 0
 * committed); lo2 is lost before it commits, and the node fails over to
 * view 1, its own to coordinate ((1 + 1) % 4), its own report the first
 * in. lo2 still counts among the acceptors: it is lost, not evicted
 * (that takes half the round bound). Connections: lo1 sw->conn[0], lo2
 * sw->conn[1] (closed), hi sw->conn[3]. bufs[1] is round 1's buffer.
 */
static void tlin_view1(tnode *t, tswarm *sw, float *bufs[2], ded_ident peers[3]) {
  tnode_start(t, bufs, 2, 1.0, 1);
  ded_ident lo;
  peers_below(t, &peers[0], &peers[1]);
  peers_around(t, &lo, &peers[2]);
  swarm_start(t, sw, bufs[0], peers, 3);
  assert_int_equal(sw->me, 2);
  swarm_commit(t, sw);
  swarm_feed(t, sw, false);
  /* The node and the primary: two of four. */
  send_have(t, sw->conn[0], 0, sw->attempt, 0, 0, sw->digest);
  assert_int_equal(t->rounds_done, 1);
  assert_int_equal(t->last.round, 0);
  assert_memory_equal(bufs[0], sw->g, sizeof sw->g);
  ded_node_conn_closed(t->node, t->conn[sw->conn[1]], DED_ERR_PEER_LOST, t->now);
  /* The node coordinates view 1 of round 1: it probes lo1 and hi into it. */
  for (unsigned m = 0; m < 4; m++) {
    if (m == sw->me || m == 1) continue;
    assert_false(t->closed[sw->conn[m]]);
    size_t len;
    uint8_t *out = tnode_output_on(t, sw->conn[m], &len, t->now);
    ded_frame fr;
    if (!frame_find(out, len, DED_MSG_PROBE, 0, &fr)) fail_msg("no PROBE into view 1 of round 1");
    ded_msg_probe p;
    assert_int_equal(ded_msg_probe_decode(fr.payload, fr.len, &p), 0);
    assert_int_equal(p.round, 1);
    assert_int_equal(p.view, 1);
    free(out);
  }
}

/* tlin_view1, round 0's buffer bufs[0][i] = i % 7, round 1's 2i + 1. */
static void tlin_view1_lost(tnode *t, tswarm *sw, float *bufs[2], ded_ident peers[3]) {
  for (int i = 0; i < COUNT; i++) {
    bufs[0][i] = (float)(i % 7);
    bufs[1][i] = (float)(2 * i + 1);
  }
  tlin_view1(t, sw, bufs, peers);
}

/*
 * Regression (sim_chaos seeds 27, 61, 292, 702): a coordinator must not
 * commit an attempt whose members are too few acceptors to complete it,
 * though it had a quorum of reports when it decided. Round 1 of
 * tlin_view1, view 1 coordinated here: lo1 reports, then is lost; hi's
 * report makes everyone still here (node, hi) in, and with lo1's the
 * reports are three of the four acceptors. But lo1 is gone: the live
 * joiners, node and hi, are two of four without the primary, and their
 * HAVEs could never complete the attempt (the old engine committed it,
 * nacc 4, and the round was lost). Nothing is committed while lo1 and lo2
 * still count; once both are evicted (half the round bound after they
 * were lost) the acceptors are node and hi, the node the primary: the
 * COMMIT of {node, hi}, nacc 2, is one they can complete, and the round
 * completes on it, the node's buffer holding exactly the mean its RESULTs
 * told hi. No COMMIT on the way may lack a quorum of its acceptors.
 */
static void test_node_coord_commit_needs_live_acceptor_quorum(void **state) {
  (void)state;
  float b0[COUNT], b1[COUNT], *bufs[2] = {b0, b1};
  tnode t;
  tswarm sw;
  ded_ident peers[3];
  tlin_view1_lost(&t, &sw, bufs, peers);
  const unsigned lo1 = sw.conn[0], hi = sw.conn[3];
  ded_msg_join j = join_of(1, 1, 0, DED_VIEW_NONE);
  send_join(&t, lo1, &j);
  assert_false(t.closed[lo1]);
  assert_int_equal(tlin_commits(&t, lo1, 1, NULL), 0); /* hi, alive, is waited for */
  ded_node_conn_closed(t.node, t.conn[lo1], DED_ERR_PEER_LOST, t.now);
  send_join(&t, hi, &j);
  assert_false(t.closed[hi]);
  ded_msg_commit c;
  int n = tlin_commits(&t, hi, 1, &c);
  if (n != 0) {
    unsigned k = c.k, nacc = c.nacc;
    ded_msg_commit_free(&c, NULL);
    fail_msg("view 1 committed %u members (nacc %u) once lo1, a joiner it counted, was gone", k,
             nacc);
  }
  /* Time passes in ticks: nothing until lo1 and lo2 are evicted. */
  const uint64_t lost = t.now, evict = 5ull * 1000 * 1000 * 1000;
  while (n == 0 && t.now < lost + evict + 1000ull * 1000 * 1000) {
    tnode_advance(&t, 100ull * 1000 * 1000);
    n = tlin_commits(&t, hi, 1, &c);
  }
  if (n == 0) fail_msg("no COMMIT of round 1 once lo1 and lo2 were evicted");
  assert_int_equal(n, 1);
  assert_true(t.now >= lost + evict);
  assert_int_equal(c.attempt, attempt_of(1, t.ident.id));
  assert_int_equal(c.base, sw.attempt);
  assert_int_equal(c.k, 2);
  assert_int_equal(c.nacc, 2);
  assert_memory_equal(c.members[0].id, t.ident.id, DED_ID_BYTES);
  assert_memory_equal(c.members[1].id, peers[2].id, DED_ID_BYTES);
  assert_int_equal(c.members[0].flags, DED_MEMBER_F_ACCEPTOR | DED_MEMBER_F_PRIMARY);
  assert_int_equal(c.members[1].flags, DED_MEMBER_F_ACCEPTOR);
  const uint64_t N = c.attempt, mid = c.members[1].shard_off;
  ded_msg_commit_free(&c, NULL);
  assert_true(mid > 0 && mid < COUNT && mid % CHUNK == 0);

  /* The round runs on it: hi's vector to the node's shard, hi's result
   * of its own; the node (the primary, one of two) completes on its own
   * HAVE. */
  float xh[COUNT], g[COUNT];
  for (int i = 0; i < COUNT; i++) {
    xh[i] = (float)(5 - 3 * i);
    g[i] = (uint64_t)i < mid ? (b1[i] + xh[i]) / 2.0f : 0.5f * (float)i;
  }
  send_chunks(&t, hi, DED_MSG_DATA, 1, N, 0, xh, mid);
  size_t len;
  uint8_t *out = tnode_output_on(&t, hi, &len, t.now);
  for (uint64_t k = 0; k < mid / CHUNK; k++)
    expect_data(out, len, DED_MSG_RESULT, (int)k, 1, N, CHUNK * k, g + CHUNK * k, CHUNK);
  free(out);
  assert_int_equal(t.rounds_done, 1);
  send_chunks(&t, hi, DED_MSG_RESULT, 1, N, mid, g + mid, COUNT - mid);
  if (t.rounds_done != 2) fail_msg("round 1 did not complete on the attempt of node and hi");
  assert_int_equal(t.last.round, 1);
  assert_int_equal(t.last.status, 0);
  assert_int_equal(t.last.contributors, 2);
  assert_false(t.last.alone);
  assert_memory_equal(b1, g, sizeof g);
  uint8_t d[DED_RESULT_DIGEST_BYTES];
  result_digest(g, d);
  out = tnode_output_on(&t, hi, &len, t.now);
  expect_have(out, len, 1, N, 1, 0, d);
  free(out);
  assert_false(t.closed[hi]);
  ded_node_free(t.node);
}

/*
 * A joiner gone quiet is no member of the attempt a view starts (the
 * churn soak in CI, seed 3218675811: round 160's view 3 committed an
 * attempt with a member stopped 1.4 s before, which held the attempt
 * until its silence time, and the round ran into its bound). Round 1 of
 * tlin_view1, view 1 coordinated here: hi reports, then sends nothing
 * (stopped) for half the silence time, 1.25 s of the 10 s bound, less
 * than the 2.5 s that make it lost. Node and hi are two of four
 * acceptors without the primary: no decision. lo1's report makes three
 * of four, a quorum: the COMMIT is of {lo1, node}, two of four with the
 * primary, and it goes to lo1; hi still counts among the acceptors (nacc
 * 4), and gets at once the DECIDE a later reporter would (its connection
 * is up: nothing else would tell it), to fetch the result from.
 */
static void test_node_coord_quiet_joiner_left_out(void **state) {
  (void)state;
  float b0[COUNT], b1[COUNT], *bufs[2] = {b0, b1};
  tnode t;
  tswarm sw;
  ded_ident peers[3];
  tlin_view1_lost(&t, &sw, bufs, peers);
  const unsigned lo1 = sw.conn[0], hi = sw.conn[3];
  ded_msg_join j = join_of(1, 1, 0, DED_VIEW_NONE);
  send_join(&t, hi, &j);
  t.mute[hi] = true;
  tnode_advance(&t, 1300ull * 1000 * 1000);
  assert_false(t.closed[hi]);
  assert_int_equal(tlin_commits(&t, hi, 1, NULL), 0);
  assert_int_equal(tlin_commits(&t, lo1, 1, NULL), 0);
  send_join(&t, lo1, &j);
  int nd, nc;
  ded_msg_decide d;
  tcoord_decisions(&t, hi, &nd, &d, &nc, NULL);
  if (nc != 0) fail_msg("hi, silent for 1.3 s, got the COMMIT of a new attempt");
  if (nd != 1) fail_msg("hi, left out of the attempt, got %d DECIDEs (1 wanted)", nd);
  ded_msg_commit c;
  int n = tlin_commits(&t, lo1, 1, &c);
  if (n == 0) fail_msg("no COMMIT of round 1 with three of four acceptors in");
  assert_int_equal(n, 1);
  if (c.k != 2) {
    unsigned k = c.k;
    ded_msg_commit_free(&c, NULL);
    fail_msg("view 1 committed %u members: hi, silent for 1.3 s, among them", k);
  }
  assert_int_equal(c.attempt, attempt_of(1, t.ident.id));
  assert_int_equal(c.nacc, 4);
  assert_memory_equal(c.members[0].id, peers[0].id, DED_ID_BYTES);
  assert_memory_equal(c.members[1].id, t.ident.id, DED_ID_BYTES);
  assert_int_equal(c.members[0].flags, DED_MEMBER_F_ACCEPTOR | DED_MEMBER_F_PRIMARY);
  assert_int_equal(c.members[1].flags, DED_MEMBER_F_ACCEPTOR);
  assert_int_equal(d.round, 1);
  assert_int_equal(d.view, 1);
  assert_int_equal(d.flags, 0);
  assert_int_equal(d.plan.attempt, c.attempt);
  assert_int_equal(d.plan.k, 2);
  ded_msg_decide_free(&d, NULL);
  ded_msg_commit_free(&c, NULL);
  assert_false(t.closed[hi]);
  ded_node_free(t.node);
}

/*
 * The eviction rule's hole (sim_chaos --scenario churn --seed 156): the
 * acceptors still counted saw no completion of a round that a peer we
 * can talk to holds. As test_node_coord_commit_needs_live_acceptor_quorum,
 * but a fourth peer, late (no acceptor of round 1), says in its record
 * that it completed round 1: the attempt it holds completed among
 * acceptors evicted since, whose votes none of the reports carries. Once
 * lo1 and lo2 are evicted the node must not commit a second result of
 * round 1: it tells hi, its joiner, that the run is at round 2 (STALE),
 * and its own round 1 ends out of step (behind 2), for the shim to reload.
 * Without that peer's record the same node commits {node, hi} (the test
 * above).
 */
static void test_node_coord_no_attempt_past_holder(void **state) {
  (void)state;
  float b0[COUNT], b1[COUNT], *bufs[2] = {b0, b1};
  tnode t;
  tswarm sw;
  ded_ident peers[3];
  tlin_view1_lost(&t, &sw, bufs, peers);
  const unsigned lo1 = sw.conn[0], hi = sw.conn[3];
  ded_ident late;
  unit_ident(&late, 201);
  for (unsigned k = 0; k < 3; k++) assert_memory_not_equal(late.id, peers[k].id, DED_ID_BYTES);
  assert_memory_not_equal(late.id, t.ident.id, DED_ID_BYTES);
  const unsigned lc = tnode_accept(&t);
  send_hello_progress(&t, lc, &late, 1, 0x77, 3);
  assert_false(t.closed[lc]);
  ded_msg_join j = join_of(1, 1, 0, DED_VIEW_NONE);
  send_join(&t, lo1, &j);
  ded_node_conn_closed(t.node, t.conn[lo1], DED_ERR_PEER_LOST, t.now);
  send_join(&t, hi, &j);
  assert_false(t.closed[hi]);
  const uint64_t lost = t.now, evict = 5ull * 1000 * 1000 * 1000;
  bool stale = false;
  while (!stale && t.now < lost + evict + 1000ull * 1000 * 1000) {
    tnode_advance(&t, 100ull * 1000 * 1000);
    size_t len;
    uint8_t *out = tnode_output_on(&t, hi, &len, t.now);
    ded_frame fr;
    if (frame_find(out, len, DED_MSG_COMMIT, 0, &fr)) {
      free(out);
      fail_msg("view 1 committed a new attempt of round 1 while a peer it can talk to holds "
               "round 1's result");
    }
    for (int k = 0; !stale && frame_find(out, len, DED_MSG_STALE, k, &fr); k++) {
      ded_msg_stale m;
      assert_int_equal(ded_msg_stale_decode(fr.payload, fr.len, &m), 0);
      if (m.round == 1) {
        assert_int_equal(m.next_round, 2);
        stale = true;
      }
    }
    free(out);
  }
  if (!stale) fail_msg("hi, the coordinator's joiner, was never told that round 1 went on elsewhere");
  assert_true(t.now >= lost + evict); /* not before the evictions: a quorum counted still decides */
  assert_int_equal(t.rounds_done, 2);
  assert_int_equal(t.last.round, 1);
  assert_int_equal(t.last.behind, 2);
  ded_node_free(t.node);
}

/*
 * An attempt whose acceptor members are not a quorum of its nacc never
 * stands, however full and however accepted: it cannot have completed
 * anywhere, and never will. Round 1 of tlin_view1, view 1 coordinated
 * here: lo1 joins, and hi reports attempt B of view 0 (on round 0's
 * result), all of it held by hi and accepted by hi in view 0. With B =
 * {lo1, hi}, two of four acceptors with the primary, B stands (DECIDE);
 * with B = {lo2, hi}, two of four without the primary (what a coordinator
 * that lost lo1 and the node before it decided used to commit), the
 * coordinator, holding reports from three of the four acceptors, starts a
 * new attempt instead: a COMMIT of {lo1, node, hi}, nacc 4, no DECIDE.
 */
static void test_node_coord_short_attempt_never_stands(void **state) {
  (void)state;
  const uint8_t all[1] = {0x03};
  for (int sh = 0; sh <= 1; sh++) {
    float b0[COUNT], b1[COUNT], *bufs[2] = {b0, b1};
    for (int i = 0; i < COUNT; i++) {
      b0[i] = (float)(i % 5);
      b1[i] = (float)(i + 3);
    }
    tnode t;
    tswarm sw;
    ded_ident peers[3];
    tlin_view1(&t, &sw, bufs, peers);
    const unsigned lo1 = sw.conn[0], hi = sw.conn[3];
    ded_msg_member mb[2];
    member_set(&mb[0], peers[sh ? 1 : 0].id, 1.0, 1, 0);
    member_set(&mb[1], peers[2].id, 1.0, 1, COUNT / 2);
    const uint64_t B = attempt_of(0, peers[1].id);
    ded_msg_commit cb = commit_of(1, B, sw.attempt, mb, 2);
    cb.nacc = 4;
    if (sh) mb[0].flags = DED_MEMBER_F_ACCEPTOR; /* lo2 is no primary */
    ded_msg_join j = join_of(1, 1, 0, DED_VIEW_NONE);
    send_join(&t, lo1, &j);
    j.acc_view = 0;
    send_join_status(&t, hi, &j, &cb, all);
    for (unsigned i = 0; i < 2; i++) {
      unsigned ch = i ? hi : lo1;
      assert_false(t.closed[ch]);
      size_t len;
      uint8_t *out = tnode_output_on(&t, ch, &len, t.now);
      ded_frame fr;
      int nd = 0, nc = 0;
      ded_msg_decide d;
      ded_msg_commit c;
      for (int k = 0; frame_find(out, len, DED_MSG_DECIDE, k, &fr); k++) {
        ded_msg_decide x;
        assert_int_equal(ded_msg_decide_decode(fr.payload, fr.len, NULL, &x), 0);
        if (x.round == 1 && nd++ == 0)
          d = x; /* the first one of round 1 */
        else
          ded_msg_decide_free(&x, NULL);
      }
      for (int k = 0; frame_find(out, len, DED_MSG_COMMIT, k, &fr); k++) {
        ded_msg_commit x;
        assert_int_equal(ded_msg_commit_decode(fr.payload, fr.len, NULL, &x), 0);
        if (x.round == 1 && nc++ == 0)
          c = x;
        else
          ded_msg_commit_free(&x, NULL);
      }
      free(out);
      if (!sh) {
        assert_int_equal(nc, 0);
        assert_int_equal(nd, 1);
        assert_int_equal(d.view, 1);
        assert_int_equal(d.flags, 0);
        assert_int_equal(d.plan.attempt, B);
        ded_msg_decide_free(&d, NULL);
        continue;
      }
      if (nd != 0) {
        uint64_t att = d.plan.attempt;
        ded_msg_decide_free(&d, NULL);
        fail_msg("view 1 decided that attempt %llx stands, two of four acceptors without the "
                 "primary among its members",
                 (unsigned long long)att);
      }
      if (nc != 1)
        fail_msg("view 1 started no new attempt (%d COMMITs) with three of four acceptors in", nc);
      assert_int_equal(c.attempt, attempt_of(1, t.ident.id));
      assert_int_equal(c.base, sw.attempt);
      assert_int_equal(c.k, 3);
      assert_int_equal(c.nacc, 4);
      assert_memory_equal(c.members[0].id, peers[0].id, DED_ID_BYTES);
      assert_memory_equal(c.members[1].id, t.ident.id, DED_ID_BYTES);
      assert_memory_equal(c.members[2].id, peers[2].id, DED_ID_BYTES);
      assert_int_equal(c.members[0].flags, DED_MEMBER_F_ACCEPTOR | DED_MEMBER_F_PRIMARY);
      assert_int_equal(c.members[1].flags, DED_MEMBER_F_ACCEPTOR);
      assert_int_equal(c.members[2].flags, DED_MEMBER_F_ACCEPTOR);
      ded_msg_commit_free(&c, NULL);
    }
    ded_node_free(t.node);
  }
}

/*
 * Rollback (sim_chaos seed 1731: the run's first result died with its
 * only holder). A genesis attempt of lo1 < lo2 < node, lo1 coordinating,
 * completes nowhere here (the peers send nothing but keepalives), and the
 * node's round 0 ends at its bound on its own values. Its round 1 is then
 * out of step, and every JOIN of it says so (HELD, holding nothing). The
 * node coordinates a later view of round 1, knowing no acceptors: while
 * lo2 reports without saying it is out of step (it may hold round 0's
 * result), nothing is committed; once both report to a later view, HELD
 * and holding nothing, every peer that may hold a result is in, and the
 * node rolls back: a COMMIT of the three started afresh (base 0; its
 * acceptors every peer of the run that takes part, here the three) with
 * exactly one founder, sent to both.
 */
static void test_node_coord_rollback(void **state) {
  (void)state;
  float b0[COUNT], b1[COUNT], *bufs[2] = {b0, b1};
  for (int i = 0; i < COUNT; i++) {
    b0[i] = (float)(i % 5);
    b1[i] = (float)(i + 1);
  }
  tnode t;
  tswarm sw;
  ded_ident peers[2];
  tnode_start(&t, bufs, 1, 1.0, 1);
  peers_below(&t, &peers[0], &peers[1]);
  swarm_start(&t, &sw, bufs[0], peers, 2);
  assert_int_equal(sw.me, 2);
  swarm_commit(&t, &sw);
  const unsigned lo1 = sw.conn[0], lo2 = sw.conn[1];
  /* Round 0 ends at its bound, on the node's own values. */
  const uint64_t start = t.now;
  while (t.rounds_done < 1) {
    if (t.now > start + 15ull * 1000 * 1000 * 1000) fail_msg("round 0 never ended");
    tnode_advance(&t, 100ull * 1000 * 1000);
  }
  assert_int_equal(t.rounds_done, 1);
  assert_int_equal(t.last.round, 0);
  assert_int_equal(t.last.contributors, 1);
  ded_round_args a1 = {b1, COUNT, DED_DTYPE_F32, 1.0, 1, NULL, 0};
  assert_int_equal(ded_node_round_submit(t.node, &a1, t.now), 1);
  tnode_advance(&t, 100ull * 1000 * 1000);
  free(tnode_output_on(&t, lo1, &(size_t){0}, t.now));
  /* lo1 probes round 1 into its view 10: the node's JOIN there says it is
   * out of step, holding nothing (while round 0 ran, it could not). */
  send_probe(&t, lo1, 1, 10);
  size_t len;
  uint8_t *out = tnode_output_on(&t, lo1, &len, t.now);
  ded_msg_join jh;
  if (!output_has_join(out, len, 1, &jh)) fail_msg("no JOIN of round 1 answers lo1's PROBE");
  free(out);
  assert_int_equal(jh.view, 10);
  if (!(jh.flags & DED_JOIN_F_HELD))
    fail_msg("the JOIN of round 1 after round 0 ended without a result does not say the node "
             "is out of step (flags %#x)", jh.flags);
  assert_int_equal(jh.flags & DED_JOIN_F_VOID, 0);
  assert_int_equal(jh.held_round, 0);
  assert_int_equal(jh.held_attempt, 0);
  /* A view of round 1 the node coordinates, above any it is in. */
  const uint8_t *lin[3] = {sw.m[0].id, sw.m[1].id, sw.m[2].id};
  uint8_t ids[DED_LIN_BYTES(3)] = {0}; /* (no client bits) */
  for (unsigned m = 0; m < 3; m++) memcpy(ids + m * DED_ID_BYTES, lin[m], DED_ID_BYTES);
  uint32_t v = 20;
  while (memcmp(ded_lin_coord(ids, 3, 1, v), t.ident.id, DED_ID_BYTES) != 0) v++;
  /* lo2 reports without saying it is out of step (it may hold round 0's
   * result): no rollback. */
  ded_msg_join j = join_of(1, v, DED_JOIN_F_HELD, DED_VIEW_NONE);
  send_join(&t, lo1, &j);
  ded_msg_join jp = join_of(1, v, 0, DED_VIEW_NONE);
  send_join(&t, lo2, &jp);
  assert_false(t.closed[lo1]);
  assert_false(t.closed[lo2]);
  for (int i = 0; i < 30; i++) {
    tnode_advance(&t, 100ull * 1000 * 1000);
    if (tlin_commits(&t, lo1, 1, NULL) != 0)
      fail_msg("view %u committed round 1 though lo2 did not say it is out of step", v);
  }
  /* Both report to the next view the node coordinates, out of step. */
  v++;
  while (memcmp(ded_lin_coord(ids, 3, 1, v), t.ident.id, DED_ID_BYTES) != 0) v++;
  j.view = v;
  send_join(&t, lo1, &j);
  send_join(&t, lo2, &j);
  assert_false(t.closed[lo1]);
  assert_false(t.closed[lo2]);
  ded_msg_commit c;
  int n = 0;
  for (int i = 0; i < 30 && n == 0; i++) {
    tnode_advance(&t, 100ull * 1000 * 1000);
    n = tlin_commits(&t, lo2, 1, &c);
  }
  if (n == 0) fail_msg("view %u never rolled back with every peer out of step and in", v);
  assert_int_equal(c.k, 3);
  assert_int_equal(c.base, 0);
  assert_int_equal(c.nacc, c.k); /* the run's peers that take part: the three */
  assert_int_equal((uint32_t)(c.attempt >> 32), v);
  unsigned founders = 0;
  for (unsigned m = 0; m < c.k; m++) {
    assert_true(c.members[m].flags & DED_MEMBER_F_ACCEPTOR);
    founders += (c.members[m].flags & DED_MEMBER_F_FOUNDER) != 0;
  }
  assert_int_equal(founders, 1);
  ded_msg_commit_free(&c, NULL);
  assert_int_equal(tlin_commits(&t, lo1, 1, NULL), 1);
  ded_node_free(t.node);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_node_coord_done_is_chosen),
      cmocka_unit_test(test_node_coord_join_twice_kept),
      cmocka_unit_test(test_node_coord_accepted_attempt_stands),
      cmocka_unit_test(test_node_coord_new_attempt_needs_quorum),
      cmocka_unit_test(test_node_coord_commit_needs_live_acceptor_quorum),
      cmocka_unit_test(test_node_coord_quiet_joiner_left_out),
      cmocka_unit_test(test_node_coord_no_attempt_past_holder),
      cmocka_unit_test(test_node_coord_short_attempt_never_stands),
      cmocka_unit_test(test_node_coord_rollback),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
