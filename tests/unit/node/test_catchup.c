/*
 * test_catchup.c: catching up, against scripted peers (harness.h). A late
 * member announces the next round (JOIN with INTENT); AHEAD tells it
 * where the swarm is, and it announces again while it fetches. An
 * announced member holds a round for as long as its published rate says,
 * extends a member's wait for its coordinator, and holds each round once.
 */
#include "harness.h"

/* ----------------------------------------------- catching up: AHEAD */

/* The JOINs with DED_JOIN_F_INTENT on connection |i|, consumed: how many,
 * the first one's round in |*round|. */
static int output_intents(tnode *t, unsigned i, uint64_t *round) {
  size_t len;
  uint8_t *out = tnode_output_on(t, i, &len, t->now);
  int n = 0;
  ded_frame fr;
  for (int k = 0; frame_find(out, len, DED_MSG_JOIN, k, &fr); k++) {
    ded_msg_join j;
    assert_int_equal(ded_msg_join_decode(fr.payload, fr.len, NULL, &j), 0);
    if (j.flags & DED_JOIN_F_INTENT) {
      if (n == 0) *round = j.round;
      n++;
    }
    ded_msg_join_free(&j, NULL);
  }
  free(out);
  return n;
}

/* The AHEADs on connection |i|, consumed: how many, the first in |*m|. */
static int output_aheads(tnode *t, unsigned i, ded_msg_stale *m) {
  size_t len;
  uint8_t *out = tnode_output_on(t, i, &len, t->now);
  int n = frame_count(out, len, DED_MSG_AHEAD);
  ded_frame fr;
  if (n && frame_find(out, len, DED_MSG_AHEAD, 0, &fr))
    assert_int_equal(ded_msg_ahead_decode(fr.payload, fr.len, m), 0);
  assert_int_equal(frame_count(out, len, DED_MSG_STALE), 0);
  free(out);
  return n;
}

/*
 * Coordinator side: the node finished round 0 and has round 1 in flight
 * (its next round is 2). lo's announcement (JOIN with INTENT) for round 0
 * gets AHEAD (round 0, next_round 2); one for round 1 (in flight here),
 * or for round 3 (ahead), or a plain JOIN for round 0, gets none.
 */
static void test_node_intent_past_round_gets_ahead(void **state) {
  (void)state;
  float b0[COUNT], b1[COUNT], *bufs[1] = {b0};
  for (int i = 0; i < COUNT; i++) b0[i] = b1[i] = (float)(i + 1);
  tnode t;
  tnode_start(&t, bufs, 1, 1.0, 2);
  peer_round pr;
  peer_coord_round(&t, b0, 2, &pr);
  assert_int_equal(t.rounds_done, 1);
  ded_round_args a = {b1, COUNT, DED_DTYPE_F32, 1.0, 1, NULL, 0};
  assert_int_equal(ded_node_round_submit(t.node, &a, t.now), 1);
  size_t len;
  free(tnode_output(&t, &len, t.now));
  ded_msg_stale m;
  ded_msg_join j = join_of(0, 0, DED_JOIN_F_INTENT, 0);
  send_join(&t, 0, &j);
  assert_false(t.closed[0]);
  if (output_aheads(&t, 0, &m) != 1)
    fail_msg("an announcement for round 0, finished here, got no AHEAD");
  assert_int_equal(m.round, 0);
  assert_int_equal(m.next_round, 2);
  static const uint64_t rounds[2] = {1, 3};
  for (int k = 0; k < 2; k++) {
    j = join_of(rounds[k], 0, DED_JOIN_F_INTENT, 0);
    send_join(&t, 0, &j);
    assert_false(t.closed[0]);
    if (output_aheads(&t, 0, &m) != 0)
      fail_msg("an announcement for round %llu (%s here) got AHEAD", (unsigned long long)rounds[k],
               k == 0 ? "in flight" : "not started");
  }
  /* Not an announcement: the round's result, not AHEAD. */
  j = join_of(0, 0, 0, 0);
  send_join(&t, 0, &j);
  assert_false(t.closed[0]);
  uint8_t *out = tnode_output(&t, &len, t.now);
  assert_int_equal(frame_count(out, len, DED_MSG_AHEAD), 0);
  assert_int_equal(frame_count(out, len, DED_MSG_DECIDE), 1);
  free(out);
  ded_node_free(t.node);
}

/* A node with round 0 submitted (|b0|) that comes late for it: lo
 * (connection 0) and hi (connection 1) ran it without the node, shards
 * |m| in attempt |*a0|, and the DECIDE saying so came from lo. */
static void tnode_late_round0(tnode *t, float *b0, ded_ident *lo, ded_ident *hi,
                              ded_msg_member m[2], uint64_t *a0) {
  float *bufs[1] = {b0};
  tnode_start(t, bufs, 1, 1.0, 1);
  peers_around(t, lo, hi);
  send_hello(t, 0, lo, RUN);
  assert_int_equal(tnode_accept(t), 1);
  send_hello(t, 1, hi, RUN);
  size_t len;
  for (unsigned i = 0; i < 2; i++) free(tnode_output_on(t, i, &len, t->now));
  member_set(&m[0], lo->id, 1.0, 1, 0);
  member_set(&m[1], hi->id, 1.0, 1, COUNT / 2);
  *a0 = attempt_of(0, lo->id);
  ded_msg_commit c0 = commit_of(0, *a0, 0, m, 2);
  const uint16_t holders[2] = {0, 1};
  send_decide(t, 0, 0, DED_DECIDE_F_CHOSEN, &c0, holders);
  assert_false(t->closed[0]);
}

/*
 * Member side. The node, late for round 0 (not in the DECIDE's attempt:
 * lo and hi), announces round 1 to both members: either may coordinate
 * it. What they answer says where the swarm is, which round 0's late
 * result then tells the trainer:
 *   0  AHEAD (1, 6) from hi: the swarm is at 6;
 *   1  the same AHEAD from lo: the same;
 *   2  AHEAD (2, 6) from hi (a round not announced): ignored;
 *   3  AHEAD (1, 1) from hi (malformed: next_round <= round): hi dropped;
 *   4  AHEAD (1, 6) then (1, 3) from hi: the second, older, ignored: 6;
 *   5  AHEAD (1, 300) from hi: 300 (far behind: the trainer's reload).
 * Late again in round 1, it announces round 2 to both, whatever was
 * answered: each holds the first round after that it has not decided.
 */
static void test_node_ahead_moves_intent(void **state) {
  (void)state;
  for (int c = 0; c <= 5; c++) {
    float b0[COUNT], b1[COUNT];
    for (int i = 0; i < COUNT; i++) b0[i] = b1[i] = (float)(i + 1);
    tnode t;
    ded_ident lo, hi;
    ded_msg_member m[2];
    uint64_t A0;
    tnode_late_round0(&t, b0, &lo, &hi, m, &A0);
    const uint16_t holders[2] = {0, 1};
    size_t len;
    uint64_t round = 0;
    for (unsigned i = 0; i < 2; i++) {
      round = 0;
      assert_int_equal(output_intents(&t, i, &round), 1);
      assert_int_equal(round, 1);
    }
    switch (c) {
    case 0: send_ahead(&t, 1, 1, 6); break;
    case 1: send_ahead(&t, 0, 1, 6); break;
    case 2: send_ahead(&t, 1, 2, 6); break;
    case 3: {
      uint8_t f[DED_STALE_FRAME_BYTES];
      ded_wr w = ded_wr_init(f, sizeof f);
      ded_msg_stale bad = {1, 1};
      ded_msg_ahead_encode(&w, &bad);
      send_raw(&t, 1, f, w.pos);
      break;
    }
    case 4:
      send_ahead(&t, 1, 1, 6);
      send_ahead(&t, 1, 1, 3);
      break;
    default: send_ahead(&t, 1, 1, 300); break;
    }
    if (c == 3) {
      if (!t.closed[1]) fail_msg("a malformed AHEAD (round 1, next round 1) was taken");
      assert_false(t.closed[0]);
      ded_node_free(t.node);
      continue;
    }
    assert_false(t.closed[0]);
    assert_false(t.closed[1]);
    float g[COUNT];
    for (int i = 0; i < COUNT; i++) g[i] = 0.5f * (float)i;
    send_chunks(&t, 0, DED_MSG_RESULT, 0, A0, 0, g, COUNT / 2);
    send_chunks(&t, 1, DED_MSG_RESULT, 0, A0, COUNT / 2, g + COUNT / 2, COUNT / 2);
    /* The DECIDE said which attempt, not which bytes: lo's answer to the
     * node's HAVE (DONE, with g's digest) does. */
    assert_int_equal(t.rounds_done, 0);
    uint8_t d[DED_RESULT_DIGEST_BYTES];
    result_digest(g, d);
    answer_have_done(&t, 0, 0, A0, d);
    assert_int_equal(t.rounds_done, 1);
    assert_true(t.last.late);
    assert_false(t.last.alone);
    assert_int_equal(t.last.behind, 0);
    const uint64_t swarm_at[6] = {6, 6, 0, 0, 6, 300};
    if (t.last.swarm_round != swarm_at[c])
      fail_msg("case %d: round 0's result says the swarm is at %llu, not %llu", c,
               (unsigned long long)t.last.swarm_round, (unsigned long long)swarm_at[c]);
    /* Round 1: the node joins hi (member 1 % 2 of round 0), which goes
     * on without it again. */
    ded_round_args a = {b1, COUNT, DED_DTYPE_F32, 1.0, 1, NULL, 0};
    assert_int_equal(ded_node_round_submit(t.node, &a, t.now), 1);
    uint8_t *out = tnode_output_on(&t, 1, &len, t.now);
    ded_msg_join j;
    assert_true(output_has_join(out, len, 1, &j));
    assert_int_equal(j.flags, 0);
    free(out);
    free(tnode_output_on(&t, 0, &len, t.now));
    const uint64_t A1 = attempt_of(0, hi.id);
    ded_msg_commit c1 = commit_of(1, A1, A0, m, 2);
    send_decide(&t, 1, 0, DED_DECIDE_F_CHOSEN, &c1, holders);
    assert_false(t.closed[1]);
    for (unsigned i = 0; i < 2; i++) {
      uint64_t got = 0;
      int n = output_intents(&t, i, &got);
      if (n != 1 || got != 2)
        fail_msg("case %d: %d announcements after round 1 to %s (the first for round %llu), "
                 "not one for round 2", c, n, i ? "hi" : "lo", (unsigned long long)got);
    }
    assert_false(t.closed[0]);
    assert_false(t.closed[1]);
    ded_node_free(t.node);
  }
}

/* tnode_late_round0 with b0 = 1, 2, ...: the node announced round 1 to
 * lo and hi, once each; |g| is the result round 0 will have. */
static void tnode_late_announced(tnode *t, float *b0, ded_ident *lo, ded_ident *hi,
                                 ded_msg_member m[2], uint64_t *A0, float *g) {
  for (int i = 0; i < COUNT; i++) b0[i] = (float)(i + 1);
  tnode_late_round0(t, b0, lo, hi, m, A0);
  uint64_t round = 0;
  for (unsigned i = 0; i < 2; i++) assert_int_equal(output_intents(t, i, &round), 1);
  for (int i = 0; i < COUNT; i++) g[i] = 0.5f * (float)i;
}

/*
 * A late member announces itself again every deadline floor (500 ms) while
 * it fetches: the round it fetches may still be running, and take far
 * longer than the hold its first announcement bought. The node, late for
 * round 0 (lo and hi hold its result), gets lo's half of the result after
 * 600 ms and hi's after 1.2 s: none within the first 400 ms, then one more
 * announcement of round 1 to each every 500 ms or so. Once the result is
 * in, its trainer computes round 1 (a whole step, maybe), and the hold a
 * fetch buys would be over long before: it goes on announcing until the
 * trainer submits round 1 (0.4 s later), and then announces no more
 * (round 1's JOIN is its own).
 */
static void test_node_intent_renewed_while_fetching(void **state) {
  (void)state;
  float b0[COUNT], g[COUNT];
  tnode t;
  ded_ident lo, hi;
  ded_msg_member m[2];
  uint64_t A0, round = 0;
  tnode_late_announced(&t, b0, &lo, &hi, m, &A0, g);
  static const uint64_t step_ms[3] = {400, 200, 600};
  static const int want[3] = {0, 1, 1};
  for (int k = 0; k < 3; k++) {
    tnode_advance(&t, step_ms[k] * MS_NS);
    for (unsigned i = 0; i < 2; i++) {
      round = 0;
      int n = output_intents(&t, i, &round);
      if (n != want[k] || (n && round != 1))
        fail_msg("step %d of the fetch: %d announcements to %s (the first for round %llu), not %d",
                 k, n, i ? "hi" : "lo", (unsigned long long)round, want[k]);
    }
    if (k == 1) send_chunks(&t, 0, DED_MSG_RESULT, 0, A0, 0, g, COUNT / 2);
  }
  assert_int_equal(t.rounds_done, 0);
  send_chunks(&t, 1, DED_MSG_RESULT, 0, A0, COUNT / 2, g + COUNT / 2, COUNT / 2);
  assert_int_equal(t.rounds_done, 0); /* the bytes are not known to be the round's yet */
  uint8_t d[DED_RESULT_DIGEST_BYTES];
  result_digest(g, d);
  answer_have_done(&t, 0, 0, A0, d);
  assert_int_equal(t.rounds_done, 1);
  assert_true(t.last.late);
  tnode_advance(&t, 400 * MS_NS);
  for (unsigned i = 0; i < 2; i++) {
    round = 0;
    if (output_intents(&t, i, &round) != 1 || round != 1)
      fail_msg("no announcement of round 1 to %s while the trainer computes it", i ? "hi" : "lo");
  }
  float b1[COUNT];
  for (int i = 0; i < COUNT; i++) b1[i] = 1.0f;
  ded_round_args a = {b1, COUNT, DED_DTYPE_F32, 1.0, 1, NULL, 0};
  assert_int_equal(ded_node_round_submit(t.node, &a, t.now), 1);
  tnode_advance(&t, 1200 * MS_NS);
  for (unsigned i = 0; i < 2; i++)
    if (output_intents(&t, i, &round) != 0)
      fail_msg("announced again after the trainer submitted the round it announced");
  assert_false(t.closed[0]);
  assert_false(t.closed[1]);
  ded_node_free(t.node);
}

/* tnode_late_announced, then round 0's result comes from lo and hi and
 * the round completes: the node announces round 1 while its trainer
 * computes it. */
static void tnode_late_fetched(tnode *t, float *b0, ded_ident *lo, ded_ident *hi,
                               ded_msg_member m[2], uint64_t *A0, float *g) {
  tnode_late_announced(t, b0, lo, hi, m, A0, g);
  send_chunks(t, 0, DED_MSG_RESULT, 0, *A0, 0, g, COUNT / 2);
  send_chunks(t, 1, DED_MSG_RESULT, 0, *A0, COUNT / 2, g + COUNT / 2, COUNT / 2);
  uint8_t d[DED_RESULT_DIGEST_BYTES];
  result_digest(g, d);
  answer_have_done(t, 0, 0, *A0, d);
  assert_int_equal(t->rounds_done, 1);
}

/*
 * A trainer that does not submit the round it announced (it stopped, or
 * its step is that long) is announced for a quarter of the bound (2.5 s)
 * from the first announcement, the most any coordinator holds a round for
 * it: the node, late for round 0, gets its result at once and then
 * announces round 1 about every 500 ms until 2.5 s after the first,
 * never after.
 */
static void test_node_intent_renewed_until_cap(void **state) {
  (void)state;
  float b0[COUNT], g[COUNT];
  tnode t;
  ded_ident lo, hi;
  ded_msg_member m[2];
  uint64_t A0, round = 0;
  tnode_late_fetched(&t, b0, &lo, &hi, m, &A0, g);
  int before = 0, after = 0;
  for (int k = 0; k < 40; k++) { /* 4 s, 100 ms at a time */
    tnode_advance(&t, 100 * MS_NS);
    int n = output_intents(&t, 0, &round);
    free(tnode_output_on(&t, 1, &(size_t){0}, t.now));
    if (k < 24) before += n;
    else after += n;
  }
  if (before < 4 || before > 5 || after != 0)
    fail_msg("announcements of round 1: %d within 2.5 s of the first (4 or 5 wanted), %d after "
             "(none wanted)", before, after);
  ded_node_free(t.node);
}

/*
 * A job that gives up catching up and reloads the run's state (it is
 * far behind: ded_node_state_reload) will not come to the round it
 * announced: it stops announcing it at once. Announced on, that round
 * was held for it up to a quarter of the bound, and with it every donor's
 * next step, where the snapshot it waited for is taken: mp.kill_stop_join
 * under the sanitizers, the swarm stalled and the reload took 7.8 s of a
 * 30 s bound. The node, late for round 0, has its result and announces
 * round 1; then reloads: no announcement in the 2 s after.
 */
static void test_node_intent_ends_with_reload(void **state) {
  (void)state;
  float b0[COUNT], g[COUNT];
  tnode t;
  ded_ident lo, hi;
  ded_msg_member m[2];
  uint64_t A0, round = 0;
  tnode_late_fetched(&t, b0, &lo, &hi, m, &A0, g);
  tnode_advance(&t, 600 * MS_NS);
  int before = output_intents(&t, 0, &round);
  free(tnode_output_on(&t, 1, &(size_t){0}, t.now));
  assert_true(before >= 1); /* announcing, as the trainer computes round 1 */
  assert_int_equal(ded_node_state_reload(t.node, 40, t.now), 0);
  int after = 0;
  for (int k = 0; k < 20; k++) { /* 2 s, 100 ms at a time */
    tnode_advance(&t, 100 * MS_NS);
    after += output_intents(&t, 0, &round);
    free(tnode_output_on(&t, 1, &(size_t){0}, t.now));
  }
  if (after != 0)
    fail_msg("%d announcements of round 1 in the 2 s after the node began to reload (none "
             "wanted)", after);
  ded_node_free(t.node);
}

/* ------------------------------------- catching up: announced members */

/* An announcer whose record publishes 1 kB/s down (and nothing up: the
 * planner takes a download to be at least the upload) is waited for the
 * deadline floor, 500 ms, plus twice the time it takes to fetch a result
 * of COUNT floats at that rate, 2 * 256 B / (1 kB/s) = 512 ms. Without a
 * published rate (1 MB/s assumed), 500.5 ms. */
#define SLOW_KBPS 1
#define SLOW_HOLD_NS ((500 + 2 * COUNT * sizeof(float) / SLOW_KBPS) * MS_NS)

/* A HELLO from |peer| whose record publishes |down_kBps| down, nothing
 * up. */
static void send_hello_down(tnode *t, unsigned i, const ded_ident *peer, uint32_t down_kBps) {
  uint8_t f[DED_HELLO_FRAME_BYTES(DED_RECORD_BYTES_MAX)];
  const ded_perf perf = {0, down_kBps, 0, 0};
  size_t n = unit_hello_frame_with(f, sizeof f, peer, RUN, NOW_MS, &perf, NULL, 0);
  send_raw(t, i, f, n);
}

/* Whether |c|'s members include |id|. */
static bool commit_lists(const ded_msg_commit *c, const uint8_t id[DED_ID_BYTES]) {
  for (unsigned m = 0; m < c->k; m++)
    if (memcmp(c->members[m].id, id, DED_ID_BYTES) == 0) return true;
  return false;
}

/*
 * Coordinator side. Round 0 among lo < node (peer_coord_round, lo
 * coordinates) completes here; round 1 is the node's to coordinate
 * (member 1 % 2 of round 0), on a lineage of lo and itself. hi, on
 * connection 1, came late for round 0 and announces round 1 (JOIN with
 * INTENT); its record says it downloads at 1 kB/s: the node waits for it
 * SLOW_HOLD_NS (1012 ms) from the announcement, twice its learned
 * deadline (a deadline floor, 500 ms, once lo and the node, two of the
 * three expected, are in), but no longer:
 *   0  hi announces before round 1 starts here (the node's own JOIN
 *      creates the round), lo and the node join at once: no COMMIT at
 *      900 ms; hi joins: a COMMIT of all three at once, to lo and hi;
 *   1  hi announces once the round started (before lo's JOIN, which
 *      would otherwise have found everyone expected in) and never
 *      joins: no COMMIT at 900 ms, one of lo and the node (not sent to
 *      hi) at 1200 ms, just after the hold ended, not at the quarter of
 *      the round bound (2.5 s) the first JOIN set;
 *   2  as 0, but hi's record publishes no rate (1 MB/s assumed, a hold
 *      of 500.5 ms): by 900 ms the round went on without it;
 *   3  as 1, but hi announces round 1 again every 900 ms and never joins
 *      (a peer that lies, or loops): the round goes on without it at a
 *      quarter of the round bound (2.5 s) after the first JOIN, never
 *      later, however often the hold is renewed.
 * No connection is dropped on the way.
 */
static void test_node_intent_holds_round(void **state) {
  (void)state;
  for (int c = 0; c <= 3; c++) {
    float b0[COUNT], b1[COUNT], *bufs[1] = {b0};
    for (int i = 0; i < COUNT; i++) b0[i] = b1[i] = (float)(i + 1);
    tnode t;
    tnode_start(&t, bufs, 1, 1.0, 1);
    peer_round pr;
    peer_coord_round(&t, b0, 1, &pr);
    const uint64_t t0 = t.now;
    assert_int_equal(t.rounds_done, 1);
    assert_int_equal(tnode_accept(&t), 1);
    send_hello_down(&t, 1, &pr.hi, c == 2 ? 0 : SLOW_KBPS);
    assert_false(t.closed[1]);
    size_t len;
    for (unsigned i = 0; i < 2; i++) free(tnode_output_on(&t, i, &len, t.now));
    const ded_msg_join intent = join_of(1, 0, DED_JOIN_F_INTENT, 0);
    const bool after = c == 1 || c == 3;
    if (!after) send_join(&t, 1, &intent);
    ded_round_args a = {b1, COUNT, DED_DTYPE_F32, 1.0, 1, NULL, 0};
    assert_int_equal(ded_node_round_submit(t.node, &a, t.now), 1);
    if (after) send_join(&t, 1, &intent);
    const ded_msg_join j = join_of(1, 0, 0, 0);
    send_join(&t, 0, &j);
    assert_false(t.closed[0]);
    assert_false(t.closed[1]);
    if (tlin_commits(&t, 0, 1, NULL) != 0)
      fail_msg("case %d: round 1 decided as soon as lo joined: hi, announced, not expected", c);
    tnode_advance(&t, 900 * MS_NS);
    assert_true(900 * MS_NS < SLOW_HOLD_NS);
    ded_msg_commit cm;
    int n = tlin_commits(&t, 0, 1, &cm);
    if (c == 2) {
      /* Without a published rate, hi's hold was over before now. */
      if (n != 1) fail_msg("round 1 not decided 900 ms after its members joined, though the "
                           "announced member's hold (no rate published) ended at 500.5 ms");
      assert_int_equal(cm.k, 2);
      assert_false(commit_lists(&cm, pr.hi.id));
      ded_msg_commit_free(&cm, NULL);
      assert_int_equal(tlin_commits(&t, 1, 1, NULL), 0);
      assert_false(t.closed[0]);
      assert_false(t.closed[1]);
      ded_node_free(t.node);
      continue;
    }
    if (n != 0) {
      unsigned k = cm.k;
      ded_msg_commit_free(&cm, NULL);
      fail_msg("case %d: round 1 decided (%u members) 900 ms after lo and the node joined, "
               "within the hold of hi, which announced it (%llu ms)",
               c, k, (unsigned long long)(SLOW_HOLD_NS / MS_NS));
    }
    assert_int_equal(tlin_commits(&t, 1, 1, NULL), 0);
    assert_false(t.closed[0]);
    assert_false(t.closed[1]);
    if (c == 0) {
      /* hi is in: everyone expected is, and the round is decided at once. */
      send_join(&t, 1, &j);
      assert_false(t.closed[1]);
      for (unsigned i = 0; i < 2; i++) {
        n = tlin_commits(&t, i, 1, &cm);
        if (n != 1)
          fail_msg("no COMMIT of round 1 to %s when hi, the member it waited for, joined",
                   i ? "hi" : "lo");
        assert_int_equal(cm.k, 3);
        assert_int_equal(cm.base, pr.attempt);
        assert_true(commit_lists(&cm, pr.lo.id));
        assert_true(commit_lists(&cm, t.ident.id));
        assert_true(commit_lists(&cm, pr.hi.id));
        ded_msg_commit_free(&cm, NULL);
      }
    } else if (c == 3) {
      /* hi renews its hold every 900 ms: the round still goes on without
       * it a quarter of the bound after the first JOIN (2.5 s). */
      n = 0;
      while (n == 0 && t.now < t0 + 4 * SEC_NS) {
        send_join(&t, 1, &intent);
        assert_false(t.closed[1]);
        tnode_advance(&t, 900 * MS_NS);
        n = tlin_commits(&t, 0, 1, &cm);
      }
      if (n != 1 || t.now > t0 + 2500 * MS_NS + 900 * MS_NS)
        fail_msg("round 1 still undecided %llu ms after its members joined, held by a member "
                 "that announced itself again and again (the hold must end at 2500 ms)",
                 (unsigned long long)((t.now - t0) / MS_NS));
      assert_int_equal(cm.k, 2);
      assert_false(commit_lists(&cm, pr.hi.id));
      ded_msg_commit_free(&cm, NULL);
    } else {
      /* hi does not come: once its hold is over, the round goes on
       * without it. */
      tnode_advance(&t, 300 * MS_NS);
      assert_true(1200 * MS_NS > SLOW_HOLD_NS + TICK_NS);
      n = tlin_commits(&t, 0, 1, &cm);
      if (n != 1)
        fail_msg("round 1 not decided 1200 ms after its members joined, though the hold of "
                 "the announced member that never came ended at %llu ms",
                 (unsigned long long)(SLOW_HOLD_NS / MS_NS));
      assert_int_equal(cm.k, 2);
      assert_int_equal(cm.base, pr.attempt);
      assert_true(commit_lists(&cm, pr.lo.id));
      assert_true(commit_lists(&cm, t.ident.id));
      assert_false(commit_lists(&cm, pr.hi.id));
      ded_msg_commit_free(&cm, NULL);
      assert_int_equal(tlin_commits(&t, 1, 1, NULL), 0); /* not a joiner */
    }
    assert_false(t.closed[0]);
    assert_false(t.closed[1]);
    ded_node_free(t.node);
  }
}

/* Two identities sorting after the node's: node < *hi1 < *hi2. */
static void peers_above(const tnode *t, ded_ident *hi1, ded_ident *hi2) {
  unsigned found = 0;
  ded_ident v[2];
  for (unsigned s = 1; s < 256 && found < 2; s++) {
    unit_ident(&v[found], (uint8_t)s);
    if (memcmp(v[found].id, t->ident.id, DED_ID_BYTES) > 0) found++;
  }
  assert_int_equal(found, 2);
  bool swap = memcmp(v[0].id, v[1].id, DED_ID_BYTES) > 0;
  *hi1 = v[swap ? 1 : 0];
  *hi2 = v[swap ? 0 : 1];
}

/* Round |round|'s elements [|a|, |b|) of |v| as frames of |type| of |ce|
 * elements from |a| on (a shard's chunks; the last may be shorter). */
static void send_pieces(tnode *t, unsigned i, uint8_t type, uint64_t round, uint64_t attempt,
                        uint64_t a, uint64_t b, uint32_t ce, const float *v) {
  for (uint64_t off = a; off < b; off += ce)
    send_data(t, i, type, round, attempt, off, v + off, (size_t)DED_MIN(ce, b - off));
}

/* The member-side setup: the node coordinates the genesis round among
 * node < hi1 < hi2 (connections 0 and 1), which completes (hi1's HAVE and,
 * unless |hi2_silent|, hi2's too); then lo, whose record says it downloads
 * at 1 kB/s, connects (connection 2). Round 0's attempt in |*a0|, its
 * shard offsets in |s1|, |s2|. */
static void tnode_three_round0(tnode *t, float *b0, ded_ident *hi1, ded_ident *hi2, ded_ident *lo,
                               bool hi2_silent, uint64_t *a0, uint64_t *s1, uint64_t *s2) {
  float *bufs[1] = {b0};
  tnode_start(t, bufs, 1, 1.0, 1);
  ded_ident hi;
  peers_above(t, hi1, hi2);
  peers_around(t, lo, &hi);
  send_hello(t, 0, hi1, RUN);
  assert_int_equal(tnode_accept(t), 1);
  send_hello(t, 1, hi2, RUN);
  size_t len;
  for (unsigned i = 0; i < 2; i++) free(tnode_output_on(t, i, &len, t->now));
  ded_msg_join j = join_of(0, 0, DED_JOIN_F_GENESIS, 0);
  send_join(t, 0, &j);
  send_join(t, 1, &j);
  uint8_t *out = tnode_output_on(t, 0, &len, t->now);
  ded_frame fr;
  assert_true(frame_find(out, len, DED_MSG_COMMIT, 0, &fr));
  ded_msg_commit c0;
  assert_int_equal(ded_msg_commit_decode(fr.payload, fr.len, NULL, &c0), 0);
  free(out);
  free(tnode_output_on(t, 1, &len, t->now));
  assert_int_equal(c0.k, 3);
  assert_memory_equal(c0.members[0].id, t->ident.id, DED_ID_BYTES);
  assert_memory_equal(c0.members[1].id, hi1->id, DED_ID_BYTES);
  assert_memory_equal(c0.members[2].id, hi2->id, DED_ID_BYTES);
  *a0 = c0.attempt;
  *s1 = c0.members[1].shard_off;
  *s2 = c0.members[2].shard_off;
  const uint32_t ce = c0.chunk_elems;
  ded_msg_commit_free(&c0, NULL);
  float x[COUNT];
  for (int i = 0; i < COUNT; i++) x[i] = 0.5f * (float)i;
  send_pieces(t, 0, DED_MSG_DATA, 0, *a0, 0, *s1, ce, x);
  send_pieces(t, 1, DED_MSG_DATA, 0, *a0, 0, *s1, ce, x);
  send_pieces(t, 0, DED_MSG_RESULT, 0, *a0, *s1, *s2, ce, x);
  send_pieces(t, 1, DED_MSG_RESULT, 0, *a0, *s2, COUNT, ce, x);
  /* hi1 and hi2 hold what the node holds (its HAVE says the digest). */
  uint8_t d[DED_RESULT_DIGEST_BYTES];
  tnode_have_digest(t, 0, 0, *a0, d);
  send_have(t, 0, 0, *a0, 0, 0, d);
  assert_int_equal(t->rounds_done, 1);
  if (!hi2_silent) send_have(t, 1, 0, *a0, 0, 0, d);
  assert_false(t->closed[0]);
  assert_false(t->closed[1]);
  assert_int_equal(tnode_accept(t), 2);
  send_hello_down(t, 2, lo, SLOW_KBPS);
  assert_false(t->closed[2]);
  for (unsigned i = 0; i < 3; i++) free(tnode_output_on(t, i, &len, t->now));
}

/* The failovers of |round| on connection |i|, consumed: JOINs to a view
 * past 0 and PROBEs; the view of the first such JOIN in |*view|. */
static int output_failovers(tnode *t, unsigned i, uint64_t round, uint32_t *view) {
  size_t len;
  uint8_t *out = tnode_output_on(t, i, &len, t->now);
  int n = 0;
  ded_frame fr;
  for (int k = 0; frame_find(out, len, DED_MSG_JOIN, k, &fr); k++) {
    ded_msg_join j;
    assert_int_equal(ded_msg_join_decode(fr.payload, fr.len, NULL, &j), 0);
    if (j.round == round && j.view > 0 && !(j.flags & DED_JOIN_F_INTENT)) {
      if (n == 0) *view = j.view;
      n++;
    }
    ded_msg_join_free(&j, NULL);
  }
  for (int k = 0; frame_find(out, len, DED_MSG_PROBE, k, &fr); k++) {
    ded_msg_probe p;
    assert_int_equal(ded_msg_probe_decode(fr.payload, fr.len, &p), 0);
    n += p.round == round;
  }
  free(out);
  return n;
}

/*
 * Member side. The node coordinates the genesis round among node < hi1 <
 * hi2 (connections 0 and 1), which completes; round 1's coordinator is
 * hi1 (member 1 % 3 of round 0), then, in view 1, hi2. The node joins
 * round 1 (JOIN to hi1), which decides nothing. lo, on connection 2,
 * announces a round; its record says it downloads at 1 kB/s, a hold of
 * SLOW_HOLD_NS (1012 ms). A coordinator of round 1 waits that long for
 * it, so the node waits as much longer for the decision: it fails over
 * (JOIN to view 1, to hi2) only at the hold plus its usual wait (3 deadline
 * floors, 1.5 s, nothing learned), 2512 ms, not at 1.5 s:
 *   0  lo announces round 1, once the node joined it;
 *   1  lo announces round 0, which the node finished (AHEAD (0, 2) to lo
 *      too): an announcement holds every round after it as well;
 *   2  lo announces round 1 before the node joins it;
 *   3  lo announces round 2, once the node joined round 1: nothing that
 *      round 1 waits for; the node fails over at 1.5 s;
 *   4  the same, before the node joins round 1;
 *   5  no announcement, but hi2 never said it holds round 0's result
 *      (HAVE): it is still finishing round 0, and round 1's coordinator
 *      waits one usual wait for its JOIN, so the node waits twice its
 *      usual wait (3 s) before it fails over.
 */
static void test_node_intent_extends_member_wait(void **state) {
  (void)state;
  static const uint64_t announced[6] = {1, 0, 1, 2, 2, 0};
  for (int c = 0; c <= 5; c++) {
    const bool finishing = c == 5, before = c == 2 || c == 4, held = c <= 2 || finishing;
    float b0[COUNT], b1[COUNT];
    for (int i = 0; i < COUNT; i++) b0[i] = b1[i] = (float)(i + 1);
    tnode t;
    ded_ident hi1, hi2, lo;
    uint64_t A0, s1, s2;
    tnode_three_round0(&t, b0, &hi1, &hi2, &lo, finishing, &A0, &s1, &s2);
    size_t len;
    ded_msg_join j;
    uint8_t *out;

    const ded_msg_join intent = join_of(announced[c], 0, DED_JOIN_F_INTENT, 0);
    if (before && !finishing) send_join(&t, 2, &intent);
    ded_round_args a = {b1, COUNT, DED_DTYPE_F32, 1.0, 1, NULL, 0};
    assert_int_equal(ded_node_round_submit(t.node, &a, t.now), 1);
    if (!before && !finishing) send_join(&t, 2, &intent);
    assert_false(t.closed[2]);
    out = tnode_output_on(&t, 0, &len, t.now);
    assert_true(output_has_join(out, len, 1, &j));
    assert_int_equal(j.view, 0);
    assert_int_equal(j.flags, 0);
    free(out);
    ded_msg_stale m;
    if (announced[c] == 0 && !finishing) {
      assert_int_equal(output_aheads(&t, 2, &m), 1);
      assert_int_equal(m.round, 0);
      assert_int_equal(m.next_round, 2);
    }
    for (unsigned i = 0; i < 3; i++) free(tnode_output_on(&t, i, &len, t.now));

    /* Past the usual wait (1.5 s); within the hold plus that (2512 ms). */
    tnode_advance(&t, (held ? 2400 : 1700) * MS_NS);
    assert_true(2400 * MS_NS < SLOW_HOLD_NS + 1500 * MS_NS);
    uint32_t view = 0;
    int n[3];
    for (unsigned i = 0; i < 3; i++) n[i] = output_failovers(&t, i, 1, &view);
    if (!held) {
      if (n[1] == 0 || view != 1)
        fail_msg("case %d: no failover of round 1 to view 1 (hi2) 1.7 s after the node joined "
                 "it, though the announcement (round %llu) was of a later round",
                 c, (unsigned long long)announced[c]);
      assert_int_equal(n[0] + n[2], 0);
    } else {
      if (n[0] + n[1] + n[2] != 0 && finishing)
        fail_msg("case 5: the node failed over in round 1 2.4 s after it joined, while hi2 was "
                 "still finishing round 0 (the coordinator waits for it 1.5 s, the node 3 s)");
      if (n[0] + n[1] + n[2] != 0)
        fail_msg("case %d: the node failed over in round 1 2.4 s after it joined, within lo's "
                 "hold (%llu ms) plus its usual wait: lo announced round %llu%s",
                 c, (unsigned long long)(SLOW_HOLD_NS / MS_NS), (unsigned long long)announced[c],
                 before ? " before the node joined" : "");
      tnode_advance(&t, (finishing ? 800 : 300) * MS_NS);
      for (unsigned i = 0; i < 3; i++) n[i] = output_failovers(&t, i, 1, &view);
      if (n[1] == 0)
        fail_msg("case %d: no failover of round 1 to view 1 (hi2) %s s after the node joined "
                 "it, past %s", c, finishing ? "3.2" : "2.7",
                 finishing ? "twice its usual wait" : "lo's hold plus its usual wait");
      assert_int_equal(view, 1);
      assert_int_equal(n[0] + n[2], 0);
    }
    for (unsigned i = 0; i < 3; i++) assert_false(t.closed[i]);
    ded_node_free(t.node);
  }
}

/*
 * One peer's announcements hold each round at most once. The node joins
 * round 1 (coordinator hi1) and lo (1 kB/s down) announces round 1; hi1
 * commits round 1 without lo, and the node completes it. It then joins
 * round 2 (coordinator hi2, view 0) and lo announces again:
 *   0  round 1 again: spent (round 1 went on without lo); the node fails
 *      over at its usual wait (1.5 s), not at the hold plus that;
 *   1  round 2, a new announcement: the node waits past 1.5 s.
 */
static void test_node_intent_spent(void **state) {
  (void)state;
  for (int c = 0; c <= 1; c++) {
    float b0[COUNT], b1[COUNT], b2[COUNT];
    for (int i = 0; i < COUNT; i++) b0[i] = b1[i] = b2[i] = (float)(i + 1);
    tnode t;
    ded_ident hi1, hi2, lo;
    uint64_t A0, s1, s2;
    tnode_three_round0(&t, b0, &hi1, &hi2, &lo, false, &A0, &s1, &s2);
    ded_round_args a = {b1, COUNT, DED_DTYPE_F32, 1.0, 1, NULL, 0};
    assert_int_equal(ded_node_round_submit(t.node, &a, t.now), 1);
    ded_msg_join intent = join_of(1, 0, DED_JOIN_F_INTENT, 0);
    send_join(&t, 2, &intent);
    size_t len;
    for (unsigned i = 0; i < 3; i++) free(tnode_output_on(&t, i, &len, t.now));
    /* Round 1 goes on without lo. */
    ded_msg_member m[3];
    member_set(&m[0], t.ident.id, 1.0, 1, 0);
    member_set(&m[1], hi1.id, 1.0, 1, s1);
    member_set(&m[2], hi2.id, 1.0, 1, s2);
    const uint64_t A1 = attempt_of(0, hi1.id);
    ded_msg_commit c1 = commit_of(1, A1, A0, m, 3);
    send_commit(&t, 0, &c1);
    float x[COUNT];
    for (int i = 0; i < COUNT; i++) x[i] = 0.25f * (float)i;
    send_pieces(&t, 0, DED_MSG_DATA, 1, A1, 0, s1, CHUNK, x);
    send_pieces(&t, 1, DED_MSG_DATA, 1, A1, 0, s1, CHUNK, x);
    send_pieces(&t, 0, DED_MSG_RESULT, 1, A1, s1, s2, CHUNK, x);
    send_pieces(&t, 1, DED_MSG_RESULT, 1, A1, s2, COUNT, CHUNK, x);
    uint8_t d[DED_RESULT_DIGEST_BYTES];
    tnode_have_digest(&t, 0, 1, A1, d);
    send_have(&t, 0, 1, A1, 0, 0, d);
    send_have(&t, 1, 1, A1, 0, 0, d);
    assert_int_equal(t.rounds_done, 2);
    for (unsigned i = 0; i < 3; i++) assert_false(t.closed[i]);
    a.buf = b2;
    assert_int_equal(ded_node_round_submit(t.node, &a, t.now), 2);
    uint8_t *out = tnode_output_on(&t, 1, &len, t.now);
    ded_msg_join j;
    assert_true(output_has_join(out, len, 2, &j)); /* to hi2, member 2 % 3 of round 1 */
    assert_int_equal(j.view, 0);
    free(out);
    intent = join_of(c == 0 ? 1 : 2, 0, DED_JOIN_F_INTENT, 0);
    send_join(&t, 2, &intent);
    for (unsigned i = 0; i < 3; i++) free(tnode_output_on(&t, i, &len, t.now));
    tnode_advance(&t, 1700 * MS_NS);
    uint32_t view = 0;
    int n = 0;
    for (unsigned i = 0; i < 3; i++) n += output_failovers(&t, i, 2, &view);
    if (c == 0 && n == 0)
      fail_msg("round 2 held by lo's announcement of round 1, which had gone on without it");
    if (c == 1 && n != 0)
      fail_msg("the node failed over in round 2 1.7 s after it joined, within the hold of lo's "
               "new announcement (round 2)");
    for (unsigned i = 0; i < 3; i++) assert_false(t.closed[i]);
    ded_node_free(t.node);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_node_intent_past_round_gets_ahead),
      cmocka_unit_test(test_node_ahead_moves_intent),
      cmocka_unit_test(test_node_intent_renewed_while_fetching),
      cmocka_unit_test(test_node_intent_renewed_until_cap),
      cmocka_unit_test(test_node_intent_ends_with_reload),
      cmocka_unit_test(test_node_intent_spent),
      cmocka_unit_test(test_node_intent_holds_round),
      cmocka_unit_test(test_node_intent_extends_member_wait),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
