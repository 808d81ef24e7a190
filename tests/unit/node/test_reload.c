/*
 * test_reload.c: out of step, against scripted peers (harness.h). STALE
 * from the coordinator the node asked ends its round alone and late;
 * round_done says how far behind the swarm is; ded_node_state_reload
 * then fetches the state the swarm is at, or is refused, or times out.
 */
#include "harness.h"

/* ---------------------------------------------------------------- STALE */

/*
 * STALE from the coordinator the node asked: the swarm has moved past the
 * round, so it reports alone and late and keeps its own values. From that
 * coordinator once the attempt runs, STALE is moot: the round goes on.
 */
static void test_node_stale(void **state) {
  (void)state;
  float buf[COUNT], orig[COUNT], *bufs[1] = {buf};
  for (int i = 0; i < COUNT; i++) buf[i] = (float)(i + 1);
  memcpy(orig, buf, sizeof orig);
  tnode t;
  tnode_start(&t, bufs, 1, 1.0, 1);
  ded_ident lo, hi;
  peers_around(&t, &lo, &hi);
  send_hello(&t, 0, &lo, RUN);
  send_stale(&t, 0, 0, 5);
  assert_false(t.closed[0]);
  assert_int_equal(t.rounds_done, 1);
  assert_int_equal(t.last.status, 0);
  assert_true(t.last.alone);
  assert_true(t.last.late);
  assert_int_equal(t.last.contributors, 1);
  assert_memory_equal(buf, orig, sizeof orig);
  ded_node_free(t.node);

  tnode_start(&t, bufs, 1, 1.0, 1);
  send_hello(&t, 0, &lo, RUN);
  ded_msg_member m[2];
  member_set(&m[0], lo.id, 1.0, 1, 0);
  member_set(&m[1], t.ident.id, 1.0, 1, COUNT / 2);
  const uint64_t A = attempt_of(0, lo.id);
  ded_msg_commit c = commit_of(0, A, 0, m, 2);
  send_commit(&t, 0, &c);
  send_stale(&t, 0, 0, 5);
  assert_int_equal(t.rounds_done, 0);
  float x[COUNT], g[COUNT];
  for (int i = 0; i < COUNT; i++) {
    x[i] = (float)(i % 5);
    g[i] = i < COUNT / 2 ? 1.0f : (x[i] + buf[i]) / 2.0f;
  }
  send_chunks(&t, 0, DED_MSG_DATA, 0, A, COUNT / 2, x + COUNT / 2, COUNT / 2);
  uint8_t d[DED_RESULT_DIGEST_BYTES];
  result_digest(g, d);
  send_have(&t, 0, 0, A, 0, 0, d); /* the peer (the primary) holds it all */
  send_chunks(&t, 0, DED_MSG_RESULT, 0, A, 0, g, COUNT / 2);
  assert_int_equal(t.rounds_done, 1);
  assert_false(t.last.alone);
  assert_memory_equal(buf, g, sizeof g);
  ded_node_free(t.node);
}

/* ------------------------------------------------- out of step: reload */

/* The STATE_ASKs on connection |i|, consumed: how many, the first one's
 * min_round in |*min_round|. */
static int output_asks(tnode *t, unsigned i, uint64_t *min_round) {
  size_t len;
  uint8_t *out = tnode_output_on(t, i, &len, t->now);
  int n = frame_count(out, len, DED_MSG_STATE_ASK);
  ded_frame fr;
  if (n && frame_find(out, len, DED_MSG_STATE_ASK, 0, &fr)) {
    ded_msg_state_ask m;
    assert_int_equal(ded_msg_state_ask_decode(fr.payload, fr.len, &m), 0);
    *min_round = m.min_round;
  }
  free(out);
  return n;
}

/*
 * A node that fell out of step: |rounds| rounds submitted (round 0 first),
 * peers lo (connection 0, the genesis coordinator: the smallest id) and
 * hi (connection 1), and lo's STALE for round 0 saying the swarm is at
 * round 5. Round 0 is reported alone and late, |behind| 5; the output so
 * far is consumed.
 */
/* The node, |rounds| submitted, connected to lo and hi: it asked lo into
 * round 0; the output so far is consumed. */
static void tnode_joined_lohi(tnode *t, float *bufs[], unsigned rounds, ded_ident *lo,
                              ded_ident *hi) {
  tnode_start(t, bufs, rounds, 1.0, 1);
  peers_around(t, lo, hi);
  send_hello(t, 0, lo, RUN);
  assert_int_equal(tnode_accept(t), 1);
  send_hello(t, 1, hi, RUN);
  size_t len;
  uint8_t *out = tnode_output_on(t, 0, &len, t->now);
  assert_true(output_has_join(out, len, 0, NULL)); /* it asked lo in */
  free(out);
  free(tnode_output_on(t, 1, &len, t->now));
}

static void tnode_out_of_step(tnode *t, float *bufs[], unsigned rounds, ded_ident *lo,
                              ded_ident *hi) {
  tnode_joined_lohi(t, bufs, rounds, lo, hi);
  size_t len;
  send_stale(t, 0, 0, 5);
  assert_false(t->closed[0]);
  /* Every round below 5 is out of step too: the next one, cut from the
   * stream once round 0 ended, reports at once. */
  assert_int_equal(t->rounds_done, rounds);
  assert_int_equal(t->last.round, rounds - 1);
  assert_int_equal(t->last.status, 0);
  assert_true(t->last.alone);
  assert_true(t->last.late);
  assert_int_equal(t->last.behind, 5);
  for (unsigned i = 0; i < 2; i++) free(tnode_output_on(t, i, &len, t->now));
}

/* Round |round| completes late at the node: lo (connection 0), its only
 * member, tells it by a DECIDE that it holds the result, sends it, and
 * answers the node's HAVE (until then the node reports nothing: which
 * bytes are the round's is lo's word to its HAVE). */
static void late_result(tnode *t, uint64_t round, const ded_ident *lo) {
  ded_msg_member m[1];
  member_set(&m[0], lo->id, 1.0, 1, 0);
  const uint64_t A = attempt_of(0, lo->id);
  ded_msg_commit c = commit_of(round, A, 0, m, 1);
  const uint16_t holders[1] = {0};
  send_decide(t, 0, 0, DED_DECIDE_F_CHOSEN, &c, holders);
  float g[COUNT];
  for (int i = 0; i < COUNT; i++) g[i] = (float)i;
  int before = t->rounds_done;
  send_chunks(t, 0, DED_MSG_RESULT, round, A, 0, g, COUNT);
  assert_int_equal(t->rounds_done, before);
  uint8_t dg[DED_RESULT_DIGEST_BYTES];
  result_digest(g, dg);
  answer_have_done(t, 0, round, A, dg);
}

/*
 * round_done's |behind| is where a STALE for a round the node asked about
 * says the swarm is; 0 for a round that ended with the swarm, for one
 * whose result the node fetched late, and a STALE from a peer the node
 * did not ask reports nothing.
 */
static void test_node_stale_sets_behind(void **state) {
  (void)state;
  float buf[COUNT], *bufs[1] = {buf};
  for (int i = 0; i < COUNT; i++) buf[i] = (float)(i + 1);
  tnode t;
  /* A round with the swarm. */
  tnode_start(&t, bufs, 1, 1.0, 2);
  peer_round pr;
  peer_coord_round(&t, buf, 2, &pr);
  assert_int_equal(t.rounds_done, 1);
  assert_int_equal(t.last.status, 0);
  assert_int_equal(t.last.behind, 0);
  ded_node_free(t.node);

  /* Late: the result fetched (the node not listed, told by a DECIDE). */
  tnode_start(&t, bufs, 1, 1.0, 1);
  ded_ident lo, hi;
  peers_around(&t, &lo, &hi);
  send_hello(&t, 0, &lo, RUN);
  late_result(&t, 0, &lo);
  assert_int_equal(t.rounds_done, 1);
  assert_int_equal(t.last.status, 0);
  assert_true(t.last.late);
  assert_false(t.last.alone);
  assert_int_equal(t.last.behind, 0);
  ded_node_free(t.node);

  /* STALE from hi, whom the node did not ask (it joined lo): nothing. */
  tnode_start(&t, bufs, 1, 1.0, 1);
  send_hello(&t, 0, &lo, RUN);
  assert_int_equal(tnode_accept(&t), 1);
  send_hello(&t, 1, &hi, RUN);
  send_stale(&t, 1, 0, 9);
  assert_int_equal(t.rounds_done, 0);
  /* From lo: reported, |behind| the swarm's round. */
  send_stale(&t, 0, 0, 7);
  assert_int_equal(t.rounds_done, 1);
  assert_true(t.last.alone);
  assert_true(t.last.late);
  if (t.last.behind != 7)
    fail_msg("a STALE saying the swarm is at round 7 reported behind = %llu",
             (unsigned long long)t.last.behind);
  assert_false(t.closed[0]);
  assert_false(t.closed[1]);
  /* The next rounds below 7 are over at once, without a JOIN: nobody
   * would answer them but with STALE (or not at all). */
  size_t len;
  for (unsigned i = 0; i < 2; i++) free(tnode_output_on(&t, i, &len, t.now));
  ded_round_args a = {buf, COUNT, DED_DTYPE_F32, 1.0, 1, NULL, 0};
  assert_int_equal(ded_node_round_submit(t.node, &a, t.now), 1);
  assert_int_equal(t.rounds_done, 2);
  assert_true(t.last.alone);
  assert_int_equal(t.last.behind, 7);
  for (unsigned i = 0; i < 2; i++) {
    uint8_t *out = tnode_output_on(&t, i, &len, t.now);
    assert_int_equal(frame_count(out, len, DED_MSG_JOIN), 0);
    free(out);
  }
  ded_node_free(t.node);
}

/*
 * A node out of step stays so until it reloads, even once its rounds are
 * back where the swarm is: lo says the swarm is at round 1 (STALE for
 * round 0, which keeps the job's own values), and round 1 then completes
 * late with lo's result. Round 1's report says diverged, a reload of
 * round 2 (the next one itself) is taken, and the node offers no
 * snapshot meanwhile; until its reloads have failed
 * DED_NODE_ASTRAY_TRIES times in a row. (Churn soak 3052993591: a joiner's shim learnt its
 * step only after such a round; its reload, of the round the STALE named,
 * was refused as not past the next one, and the job trained on its own
 * parameters to its end, in every round with the swarm.)
 */
static void test_node_astray_until_reloaded(void **state) {
  (void)state;
  float b0[COUNT], b1[COUNT], *bufs[1] = {b0};
  for (int i = 0; i < COUNT; i++) b0[i] = b1[i] = (float)(i + 1);
  tnode t;
  ded_ident lo, hi;
  tnode_joined_lohi(&t, bufs, 1, &lo, &hi);
  send_stale(&t, 0, 0, 1);
  assert_int_equal(t.rounds_done, 1);
  assert_true(t.last.alone && t.last.late);
  assert_int_equal(t.last.behind, 1);
  size_t len;
  for (unsigned i = 0; i < 2; i++) free(tnode_output_on(&t, i, &len, t.now));
  /* Round 1: the swarm's; its result fetched from lo, its only member. */
  ded_round_args a = {b1, COUNT, DED_DTYPE_F32, 1.0, 1, NULL, 0};
  assert_int_equal(ded_node_round_submit(t.node, &a, t.now), 1);
  late_result(&t, 1, &lo);
  assert_int_equal(t.rounds_done, 2);
  assert_int_equal(t.last.round, 1);
  assert_int_equal(t.last.status, 0);
  assert_true(t.last.late);
  assert_false(t.last.alone);
  assert_int_equal(t.last.behind, 0);
  if (!t.last.diverged)
    fail_msg("a job that kept its own values in round 0 reported round 1, the swarm's, as "
             "if its state were the run's");
  /* No snapshot to offer, now or at its next step: its state is its own
   * (NONE at once: the asker may be what its own reload waits for). */
  free(tnode_output(&t, &len, t.now));
  send_state_ask(&t, 1, 2);
  expect_offer(&t, 1, DED_STATE_NONE, 0);
  /* The reload, at its next round itself. Neither peer has the run's
   * state (NONE): it fails at once, and is taken again at the next step;
   * after DED_NODE_ASTRAY_TRIES such failures, once a bound has passed
   * since it went astray, no peer is taken to hold the run's state but in
   * its own way, and the node's goes on as the run's: no reload of the
   * round it is at, and its snapshots are offered again. */
  for (int k = 1; k <= DED_NODE_ASTRAY_TRIES + 1; k++) {
    /* The last tries within a bound of round 0's report do not count. */
    if (k == DED_NODE_ASTRAY_TRIES + 1) tnode_advance(&t, 10 * SEC_NS);
    assert_int_equal(ded_node_state_reload(t.node, 2, t.now), 0);
    uint64_t min_round = 0;
    assert_int_equal(output_asks(&t, 0, &min_round), 1);
    assert_int_equal(min_round, 2);
    assert_int_equal(output_asks(&t, 1, &min_round), 1);
    ded_msg_state_offer none;
    memset(&none, 0, sizeof none);
    none.status = DED_STATE_NONE;
    send_state_offer(&t, 0, &none);
    send_state_offer(&t, 1, &none);
    tnode_advance(&t, MS_NS);
    assert_int_equal(t.state_calls, k);
    assert_int_equal(t.state_status, DED_ERR_TIMEOUT);
  }
  assert_int_equal(ded_node_state_reload(t.node, 2, t.now), DED_ERR_INVALID_ARG);
  /* It asked its trainer for a snapshot; until it has one, an asker hears
   * NONE (one that waited for its next step, while that step's round
   * waits for the asker, would hold the run up); then it is offered. */
  assert_int_equal(t.want_snapshots, 1);
  free(tnode_output(&t, &len, t.now));
  send_state_ask(&t, 1, 2);
  expect_offer(&t, 1, DED_STATE_NONE, 0);
  ded_snapshot snap;
  memset(&snap, 0, sizeof snap);
  snap.round = 2;
  snap.step_rounds = 1;
  snap.len = 64;
  snap.bytes = malloc(snap.len);
  assert_non_null(snap.bytes);
  memset(snap.bytes, 7, snap.len);
  snap.digest = ded_digest64(snap.bytes, snap.len);
  assert_int_equal(ded_node_snapshot_set(t.node, &snap, t.now), 0);
  send_state_ask(&t, 1, 2);
  expect_offer(&t, 1, DED_STATE_OFFER, 2);
  ded_node_free(t.node);
}

/*
 * ded_node_state_reload is refused with a round in flight, for a round
 * that is not past the node's next one, while a fetch is in progress,
 * without a state_done callback, and after leave; state_done is not
 * called for a refusal.
 */
static void test_node_state_reload_refused(void **state) {
  (void)state;
  float b0[COUNT], b1[COUNT], *bufs[2] = {b0, b1};
  for (int i = 0; i < COUNT; i++) b0[i] = b1[i] = (float)i;
  tnode t;
  ded_ident lo, hi;
  /* Round 0 is still in flight (joined, undecided). */
  tnode_start(&t, bufs, 1, 1.0, 1);
  peers_around(&t, &lo, &hi);
  send_hello(&t, 0, &lo, RUN);
  assert_int_equal(tnode_accept(&t), 1);
  size_t len;
  free(tnode_output_on(&t, 0, &len, t.now));
  assert_int_equal(t.rounds_done, 0);
  assert_int_equal(ded_node_state_reload(t.node, 5, t.now), DED_ERR_INVALID_ARG);
  assert_int_equal(output_asks(&t, 0, &(uint64_t){0}), 0);
  assert_int_equal(t.state_calls, 0);
  ded_node_free(t.node);
  /* Two rounds out of step: neither is in flight any more. */
  tnode_out_of_step(&t, bufs, 2, &lo, &hi);
  assert_int_equal(t.last.behind, 5);
  ded_node_free(t.node);

  /* Every round reported, the next one is 1: min_round 0 is no reload;
   * 1 is (round 0 kept the job's own values: a snapshot of the round it
   * is at will do); a second one while it runs is refused. */
  tnode_out_of_step(&t, bufs, 1, &lo, &hi);
  assert_int_equal(ded_node_state_reload(t.node, 0, t.now), DED_ERR_INVALID_ARG);
  assert_int_equal(output_asks(&t, 0, &(uint64_t){0}), 0);
  assert_int_equal(ded_node_state_reload(t.node, 1, t.now), 0);
  uint64_t min_round = 0;
  assert_int_equal(output_asks(&t, 0, &min_round), 1);
  assert_int_equal(min_round, 1);
  assert_int_equal(ded_node_state_reload(t.node, 5, t.now), DED_ERR_INVALID_ARG);
  assert_int_equal(ded_node_state_fetch(t.node, t.now), DED_ERR_INVALID_ARG);
  assert_int_equal(output_asks(&t, 0, &min_round), 0);
  assert_int_equal(t.state_calls, 0);
  ded_node_free(t.node);

  /* After leave. */
  tnode_out_of_step(&t, bufs, 1, &lo, &hi);
  ded_node_leave(t.node, t.now);
  assert_int_equal(ded_node_state_reload(t.node, 5, t.now), DED_ERR_CLOSING);
  assert_int_equal(t.state_calls, 0);
  ded_node_free(t.node);

  /* Without a state_done callback (everything else would do: no round
   * submitted, min_round 1 past the next round, 0). */
  ded_node *node = node_without_state_done(&t);
  assert_int_equal(ded_node_state_reload(node, 1, NOW_NS), DED_ERR_INVALID_ARG);
  ded_node_free(node);
}

/*
 * A reload asks every peer for a snapshot of round 5 or later (STATE_ASK
 * min_round 5). lo offers one of round 4: a protocol error, lo is
 * dropped. hi offers round 5: it is fetched, state_done gets its bytes,
 * the next round submitted is round 5 and goes, on the offer's lineage
 * (lo, hi: round 5's coordinator is hi), to hi, as no first round.
 */
static void test_node_state_reload_fetches(void **state) {
  (void)state;
  float buf[COUNT], *bufs[1] = {buf};
  for (int i = 0; i < COUNT; i++) buf[i] = (float)(i + 1);
  tnode t;
  ded_ident lo, hi;
  tnode_out_of_step(&t, bufs, 1, &lo, &hi);
  assert_int_equal(ded_node_state_reload(t.node, 5, t.now), 0);
  assert_int_equal(t.state_calls, 0);
  for (unsigned i = 0; i < 2; i++) {
    uint64_t min_round = 0;
    assert_int_equal(output_asks(&t, i, &min_round), 1);
    if (min_round != 5)
      fail_msg("a reload for round 5 asked peer %u for round %llu or later", i,
               (unsigned long long)min_round);
  }
  uint64_t len = SNAP_RANGE + 100;
  uint8_t *bytes = malloc(len);
  assert_non_null(bytes);
  for (uint64_t i = 0; i < len; i++) bytes[i] = snap_byte(i);
  uint8_t lin[DED_LIN_BYTES(2)] = {0}; /* two nodes: no client bit */
  memcpy(lin, lo.id, DED_ID_BYTES);
  memcpy(lin + DED_ID_BYTES, hi.id, DED_ID_BYTES);
  ded_msg_state_offer offer = scripted_offer(bytes, len, lin); /* round 5 */
  /* lo's is older than asked for (an answer to an earlier ask, say):
   * ignored, and lo is no worse for it. */
  ded_msg_state_offer old = offer;
  old.round = 4;
  send_state_offer(&t, 0, &old);
  assert_false(t.closed[0]);
  send_state_offer(&t, 1, &offer);
  /* Until the reload is over, no round may be submitted. */
  ded_round_args early = {buf, COUNT, DED_DTYPE_F32, 1.0, 1, NULL, 0};
  assert_int_equal(ded_node_round_submit(t.node, &early, t.now), DED_ERR_INVALID_ARG);
  /* lo, whose answer did not count, may still offer: the node chooses
   * once the grace after the first offer is over (the deadline floor,
   * 500 ms), well within the bound, and fetches from hi alone. */
  size_t n;
  uint8_t *out = NULL;
  for (int k = 0; k < 20; k++) {
    tnode_advance(&t, 100 * MS_NS);
    free(out);
    out = tnode_output_on(&t, 1, &n, t.now);
    if (frame_count(out, n, DED_MSG_STATE_GET) > 0) break;
  }
  assert_false(t.closed[0]);
  assert_false(t.closed[1]);
  assert_int_equal(frame_count(out, n, DED_MSG_STATE_GET), 2);
  for (int k = 0; k < 2; k++) {
    ded_frame fr;
    assert_true(frame_find(out, n, DED_MSG_STATE_GET, k, &fr));
    ded_msg_state_get g;
    assert_int_equal(ded_msg_state_get_decode(fr.payload, fr.len, &g), 0);
    assert_int_equal(g.round, 5);
    assert_int_equal(g.digest, offer.digest);
  }
  free(out);
  send_state_data(&t, 1, 5, offer.digest, 0, bytes, SNAP_RANGE);
  assert_int_equal(t.state_calls, 0);
  t.log_want = "back in step at round 5, 4 rounds on"; /* from round 1 */
  send_state_data(&t, 1, 5, offer.digest, SNAP_RANGE, bytes + SNAP_RANGE, 100);
  assert_false(t.closed[1]);
  assert_int_equal(t.state_calls, 1);
  assert_int_equal(t.log_hits, 1);
  assert_int_equal(t.state_status, 0);
  assert_true(t.state_has_snap);
  assert_int_equal(t.state_snap.round, 5);
  assert_int_equal(t.state_snap.step_rounds, 2);
  assert_int_equal(t.state_snap.len, len);
  assert_int_equal(t.state_snap.digest, offer.digest);
  assert_memory_equal(t.state_snap.bytes, bytes, len);
  free(t.state_snap.bytes);
  free(bytes);
  /* Back in step: the next round is the snapshot's. */
  free(tnode_output_on(&t, 1, &n, t.now));
  ded_round_args a = {buf, COUNT, DED_DTYPE_F32, 1.0, 1, NULL, 0};
  int64_t no = ded_node_round_submit(t.node, &a, t.now);
  if (no != 5) fail_msg("after a reload at round 5 the next round is %lld", (long long)no);
  out = tnode_output_on(&t, 1, &n, t.now);
  ded_msg_join j;
  assert_true(output_has_join(out, n, 5, &j));
  assert_int_equal(j.view, 0);
  assert_int_equal(j.flags, 0); /* on the lineage: no first round */
  free(out);
  assert_int_equal(t.rounds_done, 1);
  assert_int_equal(t.state_calls, 1);
  ded_node_free(t.node);
}

/*
 * In a reload, FRESH and NONE never mean "no run in progress" (the node
 * knows one is): without an offer, state_done reports DED_ERR_TIMEOUT,
 * not 0 without a snapshot; the node then goes on where it was (round 1
 * next). At the bound while a peer has not answered (lo says FRESH, hi
 * nothing); at once when every peer has answered and none offers or will
 * (FRESH and NONE: the shim tries again at its next step, and a reload
 * that waited the bound on peers that had all said no made every step a
 * bound long where every job was astray, sim_chaos seed 1015).
 */
static void test_node_state_reload_times_out(void **state) {
  (void)state;
  float buf[COUNT], *bufs[1] = {buf};
  for (int i = 0; i < COUNT; i++) buf[i] = (float)(i + 1);
  for (int answered = 0; answered < 2; answered++) {
    tnode t;
    ded_ident lo, hi;
    tnode_out_of_step(&t, bufs, 1, &lo, &hi);
    uint64_t t0 = t.now;
    assert_int_equal(ded_node_state_reload(t.node, 5, t.now), 0);
    uint64_t min_round = 0;
    assert_int_equal(output_asks(&t, 0, &min_round), 1);
    assert_int_equal(output_asks(&t, 1, &min_round), 1);
    ded_msg_state_offer m;
    memset(&m, 0, sizeof m);
    m.status = DED_STATE_FRESH;
    send_state_offer(&t, 0, &m);
    if (answered) {
      m.status = DED_STATE_NONE;
      send_state_offer(&t, 1, &m);
      tnode_advance(&t, MS_NS);
      if (t.state_calls != 1)
        fail_msg("a reload that heard FRESH and NONE from every peer had not ended 1 ms on");
    } else {
      tnode_advance(&t, SEC_NS);
      if (t.state_calls != 0)
        fail_msg("a reload that heard only FRESH, one peer still to answer, ended after 1 s "
                 "(status %d, %s)", t.state_status, t.state_has_snap ? "a snapshot" : "no snapshot");
      tnode_advance(&t, t0 + 10 * SEC_NS - 200 * MS_NS - t.now);
      assert_int_equal(t.state_calls, 0);
      tnode_advance(&t, 400 * MS_NS);
      assert_int_equal(t.state_calls, 1);
    }
    assert_int_equal(t.state_status, DED_ERR_TIMEOUT);
    assert_false(t.state_has_snap);
    assert_false(t.closed[0]);
    assert_false(t.closed[1]);
    /* Reported once; the node goes on where it was. */
    tnode_advance(&t, SEC_NS);
    assert_int_equal(t.state_calls, 1);
    ded_round_args a = {buf, COUNT, DED_DTYPE_F32, 1.0, 1, NULL, 0};
    assert_int_equal(ded_node_round_submit(t.node, &a, t.now), 1);
    ded_node_free(t.node);
  }
}

/* The node, reloading, is offered the run's state at |round| on lineage
 * |lin| (two ids) by the peer on connection |c|, and fetches it from
 * there: the reload ends with that snapshot. */
static void reload_served(tnode *t, unsigned c, uint64_t round,
                          const uint8_t lin[DED_LIN_BYTES(2)]) {
  uint64_t len = SNAP_RANGE / 2;
  uint8_t *bytes = malloc(len);
  assert_non_null(bytes);
  for (uint64_t i = 0; i < len; i++) bytes[i] = snap_byte(i);
  ded_msg_state_offer offer = scripted_offer(bytes, len, lin);
  offer.round = round;
  send_state_offer(t, c, &offer);
  size_t n;
  for (int k = 0; k < 20 && t->state_calls == 0; k++) {
    tnode_advance(t, 100 * MS_NS);
    uint8_t *out = tnode_output_on(t, c, &n, t->now);
    if (frame_count(out, n, DED_MSG_STATE_GET) > 0)
      send_state_data(t, c, round, offer.digest, 0, bytes, len);
    free(out);
  }
  assert_int_equal(t->state_calls, 1);
  assert_int_equal(t->state_status, 0);
  assert_true(t->state_has_snap);
  assert_int_equal(t->state_snap.round, round);
  free(t->state_snap.bytes);
  free(bytes);
}

/*
 * A node out of step (tnode_out_of_step) that did not run for |gap_ns|
 * (SIGSTOP, a closed lid), then reloads: hi offers the run's state at
 * |round| on lineage |lin| (two ids), and the node fetches it. Back in
 * step, its next round is |round|; the output so far is consumed.
 */
static void tnode_reloaded(tnode *t, float *bufs[], ded_ident *lo, ded_ident *hi, uint64_t gap_ns,
                           uint64_t round, const uint8_t lin[DED_LIN_BYTES(2)]) {
  tnode_out_of_step(t, bufs, 1, lo, hi);
  t->now += gap_ns;
  assert_int_equal(ded_node_state_reload(t->node, 5, t->now), 0);
  reload_served(t, 1, round, lin);
  size_t n;
  for (unsigned i = 0; i < 2; i++) free(tnode_output_on(t, i, &n, t->now));
}

/* tnode_reloaded at |round| on the lineage of lo and hi (the peers it
 * gives, found by a first start: tnode_reloaded starts the node anew). */
static void tnode_reloaded_lohi(tnode *t, float *bufs[], ded_ident *lo, ded_ident *hi,
                                uint64_t round) {
  uint8_t lin[DED_LIN_BYTES(2)] = {0};
  tnode_start(t, bufs, 1, 1.0, 1);
  peers_around(t, lo, hi);
  ded_node_free(t->node);
  memcpy(lin, lo->id, DED_ID_BYTES);
  memcpy(lin + DED_ID_BYTES, hi->id, DED_ID_BYTES);
  tnode_reloaded(t, bufs, lo, hi, 0, round, lin);
}

/*
 * A failover report (a JOIN with its status) for a round so long past
 * that no view of it is kept, from a peer that slept while the run went
 * on, is answered with STALE and where the run is: it reloads at once,
 * rather than report to a view the node would forget at its next tick
 * and wait for its bound (mp.long_stop, a call of 3.8 s).
 */
static void test_node_stale_for_forgotten_round(void **state) {
  (void)state;
  float buf[COUNT], *bufs[1] = {buf};
  for (int i = 0; i < COUNT; i++) buf[i] = (float)(i + 1);
  tnode t;
  ded_ident lo, hi;
  const uint64_t at = 5 + DED_ROUNDS_AHEAD_MAX + 100;
  tnode_reloaded_lohi(&t, bufs, &lo, &hi, at);
  ded_msg_member m[2];
  member_set(&m[0], lo.id, 1.0, 1, 0);
  member_set(&m[1], t.ident.id, 1.0, 1, COUNT / 2);
  ded_msg_commit c = commit_of(3, attempt_of(2, lo.id), 0, m, 2);
  uint8_t have = 1;
  ded_msg_join j = join_of(3, 3, 0, DED_VIEW_NONE);
  send_join_status(&t, 0, &j, &c, &have);
  assert_false(t.closed[0]);
  size_t n;
  uint8_t *out = tnode_output_on(&t, 0, &n, t.now);
  ded_frame fr;
  if (!frame_find(out, n, DED_MSG_STALE, 0, &fr))
    fail_msg("a failover report for round 3, %llu rounds past, got no STALE",
             (unsigned long long)(at - 3));
  ded_msg_stale st;
  assert_int_equal(ded_msg_stale_decode(fr.payload, fr.len, &st), 0);
  assert_int_equal(st.round, 3);
  assert_int_equal(st.next_round, at);
  free(out);
  ded_node_free(t.node);
}

/*
 * tnode_reloaded onto a lineage of lo and the node itself, at a round the
 * node coordinates in view 0 (returned), after a stall of |gap_ns|.
 */
static uint64_t tnode_reloaded_coord(tnode *t, float *bufs[], ded_ident *lo, ded_ident *hi,
                                     uint64_t gap_ns) {
  uint8_t lin[DED_LIN_BYTES(2)] = {0};
  tnode_start(t, bufs, 1, 1.0, 1); /* (for the ids: tnode_reloaded starts it anew) */
  peers_around(t, lo, hi);
  memcpy(lin, lo->id, DED_ID_BYTES);
  memcpy(lin + DED_ID_BYTES, t->ident.id, DED_ID_BYTES);
  ded_node_free(t->node);
  uint64_t at = 40;
  while (memcmp(ded_lin_coord(lin, 2, at, 0), t->ident.id, DED_ID_BYTES) != 0) at++;
  tnode_reloaded(t, bufs, lo, hi, gap_ns, at, lin);
  return at;
}

/*
 * Back from a stall, a node's views wait the silence time before they
 * decide (the run may have gone on without it). Once it has reloaded the
 * run's state, it is where the run is: a view it coordinates decides as
 * soon as everyone is in, not a silence time after the stall
 * (mp.long_stop: two rounds of 0.7 s each after the resumption).
 */
static void test_node_reload_ends_stall_wait(void **state) {
  (void)state;
  float buf[COUNT], *bufs[1] = {buf};
  for (int i = 0; i < COUNT; i++) buf[i] = (float)(i + 1);
  tnode t;
  ded_ident lo, hi;
  uint64_t at = tnode_reloaded_coord(&t, bufs, &lo, &hi, 3 * SEC_NS); /* past half the silence */
  ded_round_args a = {buf, COUNT, DED_DTYPE_F32, 1.0, 1, NULL, 0};
  assert_int_equal(ded_node_round_submit(t.node, &a, t.now), (int64_t)at);
  ded_msg_join j = join_of(at, 0, 0, DED_VIEW_NONE);
  send_join(&t, 0, &j);
  size_t n;
  uint8_t *out = tnode_output_on(&t, 0, &n, t.now);
  if (frame_count(out, n, DED_MSG_COMMIT) != 1)
    fail_msg("round %llu, both of its lineage in, was not decided at once after a reload",
             (unsigned long long)at);
  free(out);
  ded_node_free(t.node);
}

/*
 * Back from a stall, a view the node coordinates, view 0 too, asks the
 * members it waits for where they are (PROBE): no one else would ask
 * them. lo went on without the node and answers STALE: the node's round
 * ends at once, out of step, with where lo says the run is, rather than
 * a silence time later on a quorum that no longer counts lo
 * (mp.long_stop: a call of 1.5 s after the resumption).
 */
static void test_node_stall_probes_view0(void **state) {
  (void)state;
  float buf[COUNT], *bufs[1] = {buf};
  for (int i = 0; i < COUNT; i++) buf[i] = (float)(i + 1);
  tnode t;
  ded_ident lo, hi;
  uint64_t at = tnode_reloaded_coord(&t, bufs, &lo, &hi, 0);
  unsigned done = t.rounds_done;
  t.now += 3 * SEC_NS; /* the stall */
  ded_round_args a = {buf, COUNT, DED_DTYPE_F32, 1.0, 1, NULL, 0};
  assert_int_equal(ded_node_round_submit(t.node, &a, t.now), (int64_t)at);
  size_t n;
  uint8_t *out = tnode_output_on(&t, 0, &n, t.now);
  ded_frame fr;
  if (!frame_find(out, n, DED_MSG_PROBE, 0, &fr))
    fail_msg("back from a stall, view 0 of round %llu did not probe lo", (unsigned long long)at);
  ded_msg_probe p;
  assert_int_equal(ded_msg_probe_decode(fr.payload, fr.len, &p), 0);
  assert_int_equal(p.round, at);
  assert_int_equal(p.view, 0);
  free(out);
  assert_int_equal(t.rounds_done, done);
  send_stale(&t, 0, at, at + 500);
  assert_false(t.closed[0]);
  assert_int_equal(t.rounds_done, done + 1);
  assert_int_equal(t.last.round, at);
  assert_true(t.last.late);
  assert_int_equal(t.last.behind, at + 500);
  ded_node_free(t.node);
}

/* The progress our own record carries in the RECORDS of |out|; false if
 * none of them is ours or ours tells of none. */
static bool own_progress(const tnode *t, const uint8_t *out, size_t n, ded_progress *prog) {
  bool found = false;
  ded_frame fr;
  for (int k = 0; frame_find(out, n, DED_MSG_RECORDS, k, &fr); k++) {
    ded_msg_records_rd it;
    assert_int_equal(ded_msg_records_begin_rd(&it, fr.payload, fr.len), 0);
    const uint8_t *rb;
    size_t rl;
    while (ded_msg_records_next(&it, &rb, &rl) > 0) {
      ded_record rec;
      assert_int_equal(ded_record_decode(rb, rl, &rec), 0);
      if (memcmp(rec.pk, t->ident.pk, DED_PK_BYTES) == 0 && ded_record_progress(&rec, prog))
        found = true;
    }
  }
  return found;
}

/*
 * A state loaded is the newest round this job holds, and its record says
 * so at once, as if it had completed that round: a peer whose round's
 * members are all gone asks records whether the run went on, and a
 * record that still said round 1 (or nothing, a joiner's) let such a peer
 * take itself for the run's newest and go on alone on an older state
 * (sim_chaos --scenario churn, seeds 31 and 67).
 */
static void test_node_loaded_state_in_record(void **state) {
  (void)state;
  float buf[COUNT], *bufs[1] = {buf};
  for (int i = 0; i < COUNT; i++) buf[i] = (float)(i + 1);
  tnode t;
  ded_ident lo, hi;
  tnode_reloaded_lohi(&t, bufs, &lo, &hi, 40);
  size_t n;
  ded_progress prog = {0};
  bool told = false;
  for (int k = 0; k < 10 && !told; k++) {
    tnode_advance(&t, 100 * MS_NS);
    uint8_t *out = tnode_output_on(&t, 1, &n, t.now);
    told = own_progress(&t, out, n, &prog);
    free(out);
  }
  if (!told) fail_msg("after loading the state of round 39, the node's record told of no round");
  if (prog.round != 39)
    fail_msg("after loading the state of round 39, the node's record says round %llu",
             (unsigned long long)prog.round);
  assert_int_equal(prog.attempt, 77);
  assert_int_equal(prog.contributors, 2);
  ded_node_free(t.node);
}

/*
 * A call's bound counts the time its job ran. A node joins round 0 with
 * lo and hi (the bound is 10 s), waits 4 s for a decision that does not
 * come, and is stopped for 5 s: back, its round is not over at once but
 * at 15 s, the 10 s it ran; no earlier (soak: a job stopped twice for 7 s
 * of its call's 10 s gave the round up on resuming, before it could hear
 * the result it was fetching).
 */
static void test_node_stall_postpones_bound(void **state) {
  (void)state;
  float buf[COUNT], *bufs[1] = {buf};
  for (int i = 0; i < COUNT; i++) buf[i] = (float)(i + 1);
  tnode t;
  ded_ident lo, hi;
  tnode_joined_lohi(&t, bufs, 1, &lo, &hi);
  size_t n;
  const uint64_t t0 = NOW_NS;
  tnode_advance(&t, 4 * SEC_NS);
  t.now += 5 * SEC_NS; /* the stop: nothing runs */
  for (unsigned i = 0; i < 2; i++) free(tnode_output_on(&t, i, &n, t.now));
  while (t.rounds_done == 0 && t.now < t0 + 20 * SEC_NS) {
    tnode_advance(&t, 100 * MS_NS);
    for (unsigned i = 0; i < 2; i++) free(tnode_output_on(&t, i, &n, t.now));
  }
  assert_int_equal(t.rounds_done, 1);
  uint64_t at = t.now - t0;
  if (at < 15 * SEC_NS || at > 15 * SEC_NS + 300 * MS_NS)
    fail_msg("round 0, stopped for 5 s of its 10 s bound, reported %llu ms after its call: "
             "15 s wanted (the 10 s it ran)", (unsigned long long)(at / MS_NS));
  assert_true(t.last.alone);
  ded_node_free(t.node);
}

/*
 * A late job fetching a round's result that only the attempt's members
 * hold: once every one of them is gone for good (evicted) while a peer it
 * can talk to says it completed that round or a later one, the result can
 * never come and the run went on without it: the round ends out of step
 * then, not at the bound (churn soak 2447971660: a joiner waited its whole
 * 10 s bound for the result of two members that had crashed). The node is
 * told by a DECIDE that round 0 is lo's attempt, held by lo alone; lo is
 * lost; hi says it completed round 3.
 */
static void test_node_fetch_from_gone_ends_early(void **state) {
  (void)state;
  float buf[COUNT], *bufs[1] = {buf};
  for (int i = 0; i < COUNT; i++) buf[i] = (float)(i + 1);
  tnode t;
  tnode_start(&t, bufs, 1, 1.0, 1);
  ded_ident lo, hi;
  peers_around(&t, &lo, &hi);
  send_hello(&t, 0, &lo, RUN);
  const unsigned h = tnode_accept(&t);
  send_hello_progress(&t, h, &hi, 3, 0x99, 2);
  ded_msg_member m[1];
  member_set(&m[0], lo.id, 1.0, 1, 0);
  const uint64_t A = attempt_of(0, lo.id);
  ded_msg_commit c = commit_of(0, A, 0, m, 1);
  const uint16_t holders[1] = {0};
  send_decide(&t, 0, 0, DED_DECIDE_F_CHOSEN, &c, holders);
  size_t n;
  free(tnode_output_on(&t, 0, &n, t.now));
  const uint64_t t0 = t.now;
  ded_node_conn_closed(t.node, t.conn[0], DED_ERR_PEER_LOST, t.now);
  while (t.rounds_done == 0 && t.now < t0 + 12 * SEC_NS) {
    tnode_advance(&t, 100 * MS_NS);
    free(tnode_output_on(&t, h, &n, t.now));
  }
  assert_int_equal(t.rounds_done, 1);
  uint64_t at = t.now - t0;
  if (at >= 9 * SEC_NS)
    fail_msg("round 0, whose only holder was lost, reported %llu ms later: at the bound, not once "
             "the holder was evicted (5 s)", (unsigned long long)(at / MS_NS));
  assert_true(at >= 5 * SEC_NS); /* not before the eviction */
  assert_int_equal(t.last.behind, 4);
  ded_node_free(t.node);
}

/*
 * A job catching up is not another group: back from a stop, a peer whose
 * record is 16 rounds (NODE_GROUP_GAP_ROUNDS) or more past this job's
 * newest round is the run that went on without it, not a group it must
 * yield to, for the silence time (a quarter of the 10 s bound) after it
 * resumed (churn soak 1364265857: a resumed job yielded at once, its next
 * round ended out of step, and it finished off the run's parameters).
 * Round 0 completes with lo; the node is stopped 5 s; hi, round 40 in its
 * record, connects as it resumes: no yield within 2 s; once the silence
 * time is over (hi still far ahead) the rule applies again.
 */
static void test_node_catching_up_not_other_group(void **state) {
  (void)state;
  float buf[COUNT], *bufs[1] = {buf};
  for (int i = 0; i < COUNT; i++) buf[i] = (float)(i + 1);
  tnode t;
  tnode_start(&t, bufs, 1, 1.0, 2);
  peer_round pr;
  peer_coord_round(&t, buf, 2, &pr);
  assert_int_equal(t.rounds_done, 1);
  t.log_want = "of another group";
  size_t n;
  t.now += 5 * SEC_NS; /* the stop: nothing runs */
  free(tnode_output_on(&t, 0, &n, t.now));
  const uint64_t t0 = t.now;
  const unsigned h = tnode_accept(&t);
  send_hello_progress(&t, h, &pr.hi, 40, 0x99, 2);
  assert_false(t.closed[h]);
  while (t.now < t0 + 2 * SEC_NS) {
    tnode_advance(&t, 100 * MS_NS);
    for (unsigned i = 0; i <= h; i++) free(tnode_output_on(&t, i, &n, t.now));
  }
  if (t.log_hits != 0)
    fail_msg("back from a 5 s stop, the node took a peer far ahead for another group within 2 s");
  while (t.log_hits == 0 && t.now < t0 + 6 * SEC_NS) {
    tnode_advance(&t, 100 * MS_NS);
    for (unsigned i = 0; i <= h; i++) free(tnode_output_on(&t, i, &n, t.now));
  }
  assert_int_equal(t.log_hits, 1); /* the rule itself still holds after the silence time */
  ded_node_free(t.node);
}

/*
 * A job that reloaded is in the run's lineage, not another group: the
 * state it loaded (of round 40, lineage lo and hi) may be rounds behind
 * the swarm by the time it is in, and a peer that joined after the
 * snapshot's round (so not among its members) is far past it. That peer
 * is the run the job catches up with, not a group to yield to (mp.
 * kill_stop_join, CI: the stopped job reloaded, took the joiner 16 rounds
 * ahead for another group, ended the step's rounds out of step on its own
 * values, logged that step off the run's and reloaded once more). (The
 * rule applies again once a round of the job's own completes in time:
 * late_done no longer names its newest round.)
 */
static void test_node_reloaded_not_other_group(void **state) {
  (void)state;
  float buf[COUNT], *bufs[1] = {buf};
  for (int i = 0; i < COUNT; i++) buf[i] = (float)(i + 1);
  tnode t;
  ded_ident lo, hi, joiner;
  tnode_reloaded_lohi(&t, bufs, &lo, &hi, 40);
  unit_ident(&joiner, 200);
  assert_memory_not_equal(joiner.id, lo.id, DED_ID_BYTES);
  assert_memory_not_equal(joiner.id, hi.id, DED_ID_BYTES);
  assert_memory_not_equal(joiner.id, t.ident.id, DED_ID_BYTES);
  t.log_want = "of another group";
  const unsigned h = tnode_accept(&t);
  send_hello_progress(&t, h, &joiner, 40 + 20, 0x99, 3);
  assert_false(t.closed[h]);
  size_t n;
  for (int k = 0; k < 20; k++) {
    tnode_advance(&t, 100 * MS_NS);
    for (unsigned i = 0; i <= h; i++) free(tnode_output_on(&t, i, &n, t.now));
  }
  if (t.log_hits != 0)
    fail_msg("a node that reloaded the state of round 40 took a joiner at round 60 for another "
             "group");
  ded_node_free(t.node);
}

/*
 * What a job learns of the swarm while it reloads is behind it once the
 * state is in: a peer that joined after the job's newest round and is far
 * past it, heard during the reload, makes the job yield (out of step up
 * to that peer's round + 1); the state it then loads is of an earlier
 * round. Its rounds from there are fetched or joined, not ended out of
 * step on its own values at once (mp.kill_stop_join under the sanitizers:
 * a yield to the joiner at round 211 during a reload that loaded round
 * 208; rounds 208 to 211 kept their own values, the step logged off the
 * run's, and the job reloaded again).
 */
static void test_node_reload_forgets_stale_below(void **state) {
  (void)state;
  float buf[COUNT], *bufs[1] = {buf};
  for (int i = 0; i < COUNT; i++) buf[i] = (float)(i + 1);
  tnode t;
  ded_ident joiner;
  uint8_t lin[DED_LIN_BYTES(2)] = {0};
  tnode_start(&t, bufs, 1, 1.0, 2);
  peer_round pr;
  peer_coord_round(&t, buf, 2, &pr); /* round 0, with lo: the node's newest */
  assert_int_equal(t.rounds_done, 1);
  memcpy(lin, pr.lo.id, DED_ID_BYTES);
  memcpy(lin + DED_ID_BYTES, pr.hi.id, DED_ID_BYTES);
  assert_int_equal(ded_node_state_reload(t.node, 5, t.now), 0); /* far behind */
  unit_ident(&joiner, 200);
  assert_memory_not_equal(joiner.id, pr.lo.id, DED_ID_BYTES);
  assert_memory_not_equal(joiner.id, pr.hi.id, DED_ID_BYTES);
  assert_memory_not_equal(joiner.id, t.ident.id, DED_ID_BYTES);
  t.log_want = "of another group";
  const unsigned h = tnode_accept(&t);
  send_hello_progress(&t, h, &joiner, 60, 0x99, 3);
  size_t n;
  tnode_advance(&t, 100 * MS_NS);
  for (unsigned i = 0; i <= h; i++) free(tnode_output_on(&t, i, &n, t.now));
  assert_int_equal(t.log_hits, 1); /* yielded: out of step up to round 61 */
  const uint64_t at = 40;
  reload_served(&t, 0, at, lin);
  const int done = t.rounds_done;
  ded_round_args a = {buf, COUNT, DED_DTYPE_F32, 1.0, 1, NULL, 0};
  assert_int_equal(ded_node_round_submit(t.node, &a, t.now), (int64_t)at);
  tnode_advance(&t, 10 * MS_NS);
  if (t.rounds_done != done)
    fail_msg("round %llu, the first of the state loaded, ended at once (behind %llu): out of "
             "step on what the node heard during the reload", (unsigned long long)at,
             (unsigned long long)t.last.behind);
  ded_node_free(t.node);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_node_stale),
      cmocka_unit_test(test_node_stale_sets_behind),
      cmocka_unit_test(test_node_astray_until_reloaded),
      cmocka_unit_test(test_node_state_reload_refused),
      cmocka_unit_test(test_node_state_reload_fetches),
      cmocka_unit_test(test_node_state_reload_times_out),
      cmocka_unit_test(test_node_stale_for_forgotten_round),
      cmocka_unit_test(test_node_reload_ends_stall_wait),
      cmocka_unit_test(test_node_stall_probes_view0),
      cmocka_unit_test(test_node_loaded_state_in_record),
      cmocka_unit_test(test_node_stall_postpones_bound),
      cmocka_unit_test(test_node_fetch_from_gone_ends_early),
      cmocka_unit_test(test_node_catching_up_not_other_group),
      cmocka_unit_test(test_node_reloaded_not_other_group),
      cmocka_unit_test(test_node_reload_forgets_stale_below),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
