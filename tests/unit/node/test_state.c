/*
 * test_state.c: state transfer. A job that joins mid-run takes its state
 * from the donors of a network of real nodes (harness.h, tnet): striped
 * over several at once, outvoting a wrong digest, past a corrupt, dead or
 * stalled donor. Against scripted peers (tnode): the lineage a snapshot
 * offer needs, ranges beyond the snapshot, data not asked for, fetches
 * refused and duplicate ranges.
 */
#include "harness.h"

/* ------------------------------------------------------- state transfer */


/* Three donors that ran rounds 0..2 together and a fourth node, meshed
 * with them, that has called ded_node_state_fetch; every donor's trainer
 * was asked for a snapshot. Returns the joiner's index (3). */
static int tnet_mid_run(tnet *net) {
  for (int i = 0; i < 3; i++) tnet_add(net, 3);
  tnet_mesh(net);
  for (uint64_t r = 0; r < 3; r++) tnet_round(net, 0x7, -1, r);
  int j = tnet_add(net, 3);
  tnet_mesh(net);
  for (int i = 0; i < 3; i++) assert_int_equal(net->n[i].want_snapshots, 0);
  assert_int_equal(ded_node_state_fetch(net->n[j].node, net->now), 0);
  TNET_UNTIL(net, SEC_NS,
             net->n[0].want_snapshots && net->n[1].want_snapshots && net->n[2].want_snapshots);
  /* Each donor asked its trainer once; each answered that it will offer
   * (PENDING). Nothing is decided without a snapshot. */
  for (int i = 0; i < 3; i++) {
    assert_int_equal(net->n[i].want_snapshots, 1);
    assert_int_equal(net->sent[i][DED_MSG_STATE_OFFER], 1);
  }
  assert_int_equal(net->sent[j][DED_MSG_STATE_ASK], 3);
  assert_int_equal(net->n[j].state_calls, 0);
  return j;
}

static unsigned state_data_total(const tnet *net) {
  unsigned n = 0;
  for (unsigned i = 0; i < net->nn; i++) n += net->sent[i][DED_MSG_STATE_DATA];
  return n;
}

/* A swarm that has not run a round is not a run in progress: the joiner
 * hears FRESH from everyone and starts from its own state at once. */
static void test_node_state_fresh_swarm(void **state) {
  (void)state;
  tnet *net = tnet_new();
  tnet_add(net, 3);
  tnet_add(net, 3);
  int j = tnet_add(net, 3);
  tnet_mesh(net);
  uint64_t t0 = net->now;
  assert_int_equal(ded_node_state_fetch(net->n[j].node, net->now), 0);
  TNET_UNTIL(net, 10 * SEC_NS, net->n[j].state_calls > 0);
  assert_int_equal(net->n[j].state_calls, 1);
  assert_int_equal(net->n[j].state_status, 0);
  assert_false(net->n[j].state_has_snap);
  /* Once every peer has answered: not after a timeout. */
  assert_true(net->n[j].state_done_ns - t0 < 500 * MS_NS);
  assert_int_equal(net->sent[j][DED_MSG_STATE_ASK], 2);
  assert_int_equal(net->sent[0][DED_MSG_STATE_OFFER], 1);
  assert_int_equal(net->sent[1][DED_MSG_STATE_OFFER], 1);
  assert_int_equal(net->n[0].want_snapshots + net->n[1].want_snapshots, 0);
  /* The joiner starts the run with the others, at round 0. */
  tnet_round(net, 0x7, j, 0);
  tnet_free(net);
}


/* A peer that dies before it answers will not answer: the joiner decides
 * on the others' answers at once, not at the bound. */
static void test_node_state_asked_peer_dies(void **state) {
  (void)state;
  tnet *net = tnet_new();
  tnet_add(net, 3);
  tnet_add(net, 3);
  int j = tnet_add(net, 3);
  tnet_mesh(net);
  uint64_t t0 = net->now;
  assert_int_equal(ded_node_state_fetch(net->n[j].node, net->now), 0);
  tnet_kill(net, 1); /* its ASK never reaches it */
  TNET_UNTIL(net, 20 * SEC_NS, net->n[j].state_calls > 0);
  assert_int_equal(net->n[j].state_calls, 1);
  assert_int_equal(net->n[j].state_status, 0);
  assert_false(net->n[j].state_has_snap);
  if (net->n[j].state_done_ns - t0 >= SEC_NS)
    fail_msg("the joiner waited %llu ms for a peer that was gone",
             (unsigned long long)((net->n[j].state_done_ns - t0) / MS_NS));
  assert_int_equal(net->sent[1][DED_MSG_STATE_OFFER], 0);
  assert_int_equal(net->sent[0][DED_MSG_STATE_OFFER], 1);
  tnet_free(net);
}

/* A job joins mid-run: its state comes from the three donors at once, and
 * it takes part in the round the snapshot names, with everyone. */
static void test_node_state_mid_run_striped(void **state) {
  (void)state;
  tnet *net = tnet_new();
  int j = tnet_mid_run(net);
  for (int i = 0; i < 3; i++) {
    ded_snapshot s = tnet_snap_make(&net->fm.mem, 3);
    assert_int_equal(ded_node_snapshot_set(net->n[i].node, &s, net->now), 0);
    assert_null(s.bytes); /* the node took it */
  }
  TNET_UNTIL(net, 5 * SEC_NS, net->n[j].state_calls > 0);
  tnet_expect_snapshot(&net->n[j], 3);
  /* Striped: every range asked once, and more than one donor served. */
  assert_int_equal(net->sent[j][DED_MSG_STATE_GET], SNAP_RANGES);
  assert_int_equal(state_data_total(net), SNAP_RANGES);
  unsigned servers = 0;
  for (int i = 0; i < 3; i++) servers += net->sent[i][DED_MSG_STATE_DATA] > 0;
  assert_true(servers >= 2);
  /* Nobody's trainer was asked twice, no connection was dropped. */
  for (int i = 0; i < 3; i++) assert_int_equal(net->n[i].want_snapshots, 1);
  assert_true(tnet_meshed(net));
  /* The joiner resumes at round 3, in it with the other three. */
  tnet_round(net, 0xf, j, 3);
  tnet_round(net, 0xf, -1, 4);
  tnet_free(net);
}

/* Every member of the rounds a joiner loaded crashes right after serving
 * it: no view of its next round can ever decide (their coordinators are
 * all gone). Once they are evicted (half the bound) it goes on as a group
 * of one: the round completes with its own values, in step, well before
 * the bound, and so does the next; before, every round waited for a
 * coordinator among the dead and ended at the bound, for good. */
static void test_node_state_members_all_gone(void **state) {
  (void)state;
  tnet *net = tnet_new();
  net->bound_ns = 10 * SEC_NS;
  int j = tnet_mid_run(net);
  for (int i = 0; i < 3; i++) {
    ded_snapshot s = tnet_snap_make(&net->fm.mem, 3);
    assert_int_equal(ded_node_snapshot_set(net->n[i].node, &s, net->now), 0);
  }
  TNET_UNTIL(net, 5 * SEC_NS, net->n[j].state_calls > 0);
  tnet_expect_snapshot(&net->n[j], 3);
  for (int i = 0; i < 3; i++) tnet_kill(net, i);
  tnet_node *jn = &net->n[j];
  for (uint64_t r = 3; r <= 4; r++) {
    uint64_t t0 = net->now;
    int before = jn->rounds_done;
    ded_round_args a = {jn->buf, COUNT, DED_DTYPE_F32, 1.0, 1, NULL, 0};
    assert_int_equal(ded_node_round_submit(jn->node, &a, net->now), (int64_t)r);
    TNET_UNTIL(net, 2 * net->bound_ns, jn->rounds_done > before);
    assert_int_equal(jn->rounds_done, before + 1);
    assert_int_equal(jn->last.round, r);
    assert_int_equal(jn->last.status, 0);
    assert_int_equal(jn->last.contributors, 1);
    if (jn->last.late || net->now - t0 >= net->bound_ns)
      fail_msg("round %llu took %llu ms (bound %llu ms), late %d: the job waited for a "
               "membership that is gone", (unsigned long long)r,
               (unsigned long long)((net->now - t0) / 1000000u),
               (unsigned long long)(net->bound_ns / 1000000u), jn->last.late);
  }
  tnet_free(net);
}

/* One donor offers the snapshot under a digest that its bytes do not
 * have: it offers another snapshot than the others, and the joiner takes
 * the one most peers offer. */
static void test_node_state_wrong_digest_outvoted(void **state) {
  (void)state;
  for (int bad = 0; bad < 3; bad++) { /* whichever the joiner asked first */
    tnet *net = tnet_new();
    int j = tnet_mid_run(net);
    for (int i = 0; i < 3; i++) {
      ded_snapshot s = tnet_snap_make(&net->fm.mem, 3);
      if (i == bad) s.digest ^= 0x100;
      assert_int_equal(ded_node_snapshot_set(net->n[i].node, &s, net->now), 0);
    }
    TNET_UNTIL(net, 5 * SEC_NS, net->n[j].state_calls > 0);
    tnet_expect_snapshot(&net->n[j], 3);
    assert_int_equal(net->sent[bad][DED_MSG_STATE_DATA], 0);
    assert_int_equal(state_data_total(net), SNAP_RANGES);
    tnet_round(net, 0xf, j, 3);
    tnet_free(net);
  }
}

/* A donor whose bytes are not what the digest it (and everyone) offers
 * says: the joiner never reports them as the state. It may get the state
 * from the honest donors, or fail; here every try mixes the bad donor's
 * ranges in, so it tries again and then fails. */
static void test_node_state_corrupt_donor(void **state) {
  (void)state;
  tnet *net = tnet_new();
  int j = tnet_mid_run(net);
  for (int i = 0; i < 3; i++) {
    ded_snapshot s = tnet_snap_make(&net->fm.mem, 3);
    if (i == 2)
      for (uint64_t b = 0; b < SNAP_LEN; b += 4096) s.bytes[b] ^= 0x5a;
    assert_int_equal(ded_node_snapshot_set(net->n[i].node, &s, net->now), 0);
  }
  TNET_UNTIL(net, 60 * SEC_NS, net->n[j].state_calls > 0);
  assert_int_equal(net->n[j].state_calls, 1);
  if (net->n[j].state_status == 0) {
    tnet_expect_snapshot(&net->n[j], 3);
  } else {
    assert_true(net->n[j].state_status < 0);
    assert_false(net->n[j].state_has_snap);
  }
  assert_true(net->sent[2][DED_MSG_STATE_DATA] > 0); /* it did serve ranges */
  /* The joiner asked again after the digest did not match. */
  assert_true(net->sent[j][DED_MSG_STATE_ASK] > 3);
  TNET_UNTIL(net, SEC_NS, false);
  assert_int_equal(net->n[j].state_calls, 1); /* reported once */
  tnet_free(net);
}

/* Every donor offers a digest that does not match the bytes: the fetch
 * fails after its tries, with an error and no state. */
static void test_node_state_all_digests_wrong(void **state) {
  (void)state;
  tnet *net = tnet_new();
  int j = tnet_mid_run(net);
  for (int i = 0; i < 3; i++) {
    ded_snapshot s = tnet_snap_make(&net->fm.mem, 3);
    s.digest += 1;
    assert_int_equal(ded_node_snapshot_set(net->n[i].node, &s, net->now), 0);
  }
  TNET_UNTIL(net, 60 * SEC_NS, net->n[j].state_calls > 0);
  assert_int_equal(net->n[j].state_calls, 1);
  assert_int_equal(net->n[j].state_status, DED_ERR_PROTO);
  assert_false(net->n[j].state_has_snap);
  assert_null(net->n[j].snap.bytes);
  TNET_UNTIL(net, SEC_NS, false);
  assert_int_equal(net->n[j].state_calls, 1);
  tnet_free(net);
}

/* Donors set up for a fetch, donor |stall|'s output held from the moment
 * the joiner chooses; the joiner has asked it for ranges it cannot get. */
static int tnet_fetch_with_stall(tnet *net, int stall) {
  int j = tnet_mid_run(net);
  for (int i = 0; i < 3; i++) {
    ded_snapshot s = tnet_snap_make(&net->fm.mem, 3);
    assert_int_equal(ded_node_snapshot_set(net->n[i].node, &s, net->now), 0);
  }
  tnet_pump(net); /* the offers are in; the joiner chooses at its next tick */
  net->n[stall].hold = true;
  TNET_UNTIL(net, 500 * MS_NS, false);
  assert_int_equal(net->n[j].state_calls, 0);
  assert_true(net->sent[j][DED_MSG_STATE_GET] > 0);
  assert_int_equal(net->sent[stall][DED_MSG_STATE_DATA], 0);
  return j;
}

/* A donor dies in the middle of the fetch: its ranges go to the others,
 * as soon as its connection is gone. */
static void test_node_state_donor_dies(void **state) {
  (void)state;
  tnet *net = tnet_new();
  int j = tnet_fetch_with_stall(net, 1);
  uint64_t t_kill = net->now;
  tnet_kill(net, 1);
  TNET_UNTIL(net, 30 * SEC_NS, net->n[j].state_calls > 0);
  tnet_expect_snapshot(&net->n[j], 3);
  assert_true(net->n[j].state_done_ns - t_kill < SEC_NS); /* not after a stall timeout */
  assert_int_equal(net->sent[1][DED_MSG_STATE_DATA], 0);
  assert_true(net->sent[0][DED_MSG_STATE_DATA] > 0 && net->sent[2][DED_MSG_STATE_DATA] > 0);
  /* The survivors and the joiner go on together at round 3. */
  tnet_round(net, 0xd, j, 3);
  tnet_free(net);
}

/* A donor stops sending, its connection alive: the joiner drops it after
 * a while and gets its ranges elsewhere. What it sends late is moot. (The
 * bound is long enough that the donor's silence, a quarter of it, does
 * not close its connections first: test_node_silent_peer_evicted.) */
static void test_node_state_donor_stalls(void **state) {
  (void)state;
  tnet *net = tnet_new();
  net->bound_ns = 30 * SEC_NS;
  int j = tnet_fetch_with_stall(net, 0);
  TNET_UNTIL(net, 30 * SEC_NS, net->n[j].state_calls > 0);
  tnet_expect_snapshot(&net->n[j], 3);
  assert_int_equal(net->sent[0][DED_MSG_STATE_DATA], 0);
  unsigned total = state_data_total(net);
  net->n[0].hold = false;
  TNET_UNTIL(net, SEC_NS, false);
  assert_true(state_data_total(net) > total); /* its ranges came after all */
  assert_int_equal(net->n[j].state_calls, 1);
  assert_true(tnet_meshed(net)); /* not taken for a protocol error */
  tnet_round(net, 0xf, j, 3);
  tnet_free(net);
}

/* A job that could not reach the swarm in the round before and kept its
 * own values for it cannot vouch for the state: its snapshot is refused
 * (and its bytes freed), while a job that was in that round has its own
 * taken. */
static void test_node_state_snapshot_out_of_step(void **state) {
  (void)state;
  tnet *net = tnet_new();
  for (int i = 0; i < 3; i++) tnet_add(net, 3);
  tnet_mesh(net);
  tnet_round(net, 0x7, -1, 0);
  net->n[2].hold = true; /* it hears the others, they do not hear it */
  int before[TNET_NODES] = {0};
  for (int i = 0; i < 3; i++) {
    tnet_node *tn = &net->n[i];
    before[i] = tn->rounds_done;
    ded_round_args a = {tn->buf, COUNT, DED_DTYPE_F32, 1.0, 1, NULL, 0};
    assert_int_equal(ded_node_round_submit(tn->node, &a, net->now), 1);
  }
  TNET_UNTIL(net, 60 * SEC_NS, tnet_rounds_past(net, 0x7, before));
  assert_true(tnet_rounds_past(net, 0x7, before));
  for (int i = 0; i < 2; i++) {
    assert_int_equal(net->n[i].last.status, 0);
    assert_int_equal(net->n[i].last.contributors, 2);
  }
  assert_true(net->n[2].last.alone);
  long live = net->fm.live;
  ded_snapshot s = tnet_snap_make(&net->fm.mem, 2);
  assert_int_equal(ded_node_snapshot_set(net->n[2].node, &s, net->now), DED_ERR_INVALID_ARG);
  assert_null(s.bytes);
  assert_int_equal(net->fm.live, live);
  s = tnet_snap_make(&net->fm.mem, 2);
  assert_int_equal(ded_node_snapshot_set(net->n[0].node, &s, net->now), 0);
  assert_null(s.bytes);
  net->n[2].hold = false;
  tnet_free(net);
}

/* ---- against scripted peers (tnode) ---- */

/* A snapshot of |len| bytes at |round|, allocated with |mem| (the bytes
 * are opaque to the node: no pieces since version 11). */
static ded_snapshot small_snap(const ded_mem *mem, uint64_t round, uint64_t len) {
  ded_snapshot s;
  memset(&s, 0, sizeof s);
  s.round = round;
  s.step_rounds = 3;
  s.len = len;
  s.bytes = ded_mem_malloc(mem, len ? len : 1);
  assert_non_null(s.bytes);
  for (uint64_t i = 0; i < len; i++) s.bytes[i] = snap_byte(i);
  s.digest = ded_digest64(s.bytes, len);
  return s;
}

/*
 * ded_node_snapshot_set takes the bytes on every path, and refuses a
 * snapshot this job cannot vouch for: before any round, at a round whose
 * previous one did not end here, a round it finished alone, a malformed
 * one. A joiner waiting on a refused snapshot hears NONE; on one that is
 * taken, the OFFER with round-1's lineage.
 */
static void test_node_state_snapshot_needs_lineage(void **state) {
  (void)state;
  unit_failmem fm;
  unit_failmem_init(&fm, -1);
  float buf[COUNT], *bufs[1] = {buf};
  for (int i = 0; i < COUNT; i++) buf[i] = (float)(i + 1);
  tnode t;

  /* No round run at all. */
  tnode_start_mem(&t, bufs, 0, 1.0, 1, &fm.mem);
  long live = fm.live;
  ded_snapshot s = small_snap(&fm.mem, 1, 1000);
  assert_int_equal(fm.live, live + 1);
  assert_int_equal(ded_node_snapshot_set(t.node, &s, NOW_NS), DED_ERR_INVALID_ARG);
  assert_null(s.bytes);
  assert_int_equal(fm.live, live);
  ded_node_free(t.node);
  assert_int_equal(fm.live, 0);

  /* Round 0 failed (nobody came within the rendezvous timeout). */
  tnode_start_mem(&t, bufs, 1, 1.0, 1, &fm.mem);
  tnode_advance(&t, 11 * SEC_NS);
  assert_int_equal(t.rounds_done, 1);
  assert_int_equal(t.last.status, DED_ERR_RENDEZVOUS);
  live = fm.live;
  s = small_snap(&fm.mem, 1, 1000);
  assert_int_equal(ded_node_snapshot_set(t.node, &s, t.now), DED_ERR_INVALID_ARG);
  assert_null(s.bytes);
  assert_int_equal(fm.live, live);
  ded_node_free(t.node);
  assert_int_equal(fm.live, 0);

  /* Round 0 was committed with the node in it, but its result never came:
   * it ended at the bound, the node alone with its own values. */
  tnode_start_mem(&t, bufs, 1, 1.0, 1, &fm.mem);
  ded_ident lo, hi;
  peers_around(&t, &lo, &hi);
  send_hello(&t, 0, &lo, RUN);
  ded_msg_member mm[2];
  member_set(&mm[0], lo.id, 1.0, 1, 0);
  member_set(&mm[1], t.ident.id, 1.0, 1, COUNT / 2);
  ded_msg_commit c0 = commit_of(0, attempt_of(0, lo.id), 0, mm, 2);
  send_commit(&t, 0, &c0);
  tnode_advance(&t, 11 * SEC_NS);
  assert_int_equal(t.rounds_done, 1);
  assert_true(t.last.alone);
  assert_true(t.last.late);
  free(tnode_output(&t, &(size_t){0}, t.now));
  live = fm.live;
  s = small_snap(&fm.mem, 1, 1000);
  assert_int_equal(ded_node_snapshot_set(t.node, &s, t.now), DED_ERR_INVALID_ARG);
  assert_null(s.bytes);
  free(tnode_output(&t, &(size_t){0}, t.now));
  assert_int_equal(fm.live, live);
  ded_node_free(t.node);
  assert_int_equal(fm.live, 0);

  /* Round 0 ended with the swarm. */
  tnode_start_mem(&t, bufs, 1, 1.0, 2, &fm.mem);
  peer_round pr;
  peer_coord_round(&t, buf, 2, &pr);
  assert_int_equal(t.rounds_done, 1);
  assert_int_equal(t.last.status, 0);
  /* A joiner asks: the trainer is asked for a snapshot, the joiner told
   * to wait (the node's next round is 1). */
  send_state_ask(&t, 0, 0);
  assert_int_equal(t.want_snapshots, 1);
  expect_offer(&t, 0, DED_STATE_PENDING, 1);
  /* Refused: at round 2 (round 1 did not end here), round 0, more bytes
   * than the largest state, no step, a length without bytes, a step
   * longer than the largest. */
  for (int c = 0; c < 6; c++) {
    live = fm.live;
    s = small_snap(&fm.mem, c == 0 ? 2 : 1, 1000);
    if (c == 1) s.round = 0;
    if (c == 2) s.len = DED_STATE_BYTES_MAX + 1;
    if (c == 3) s.step_rounds = 0;
    if (c == 4) {
      ded_mem_free(&fm.mem, s.bytes);
      s.bytes = NULL;
    }
    if (c == 5) s.step_rounds = DED_STATE_STEP_ROUNDS_MAX + 1;
    assert_int_equal(ded_node_snapshot_set(t.node, &s, NOW_NS), DED_ERR_INVALID_ARG);
    assert_null(s.bytes);
    size_t len;
    uint8_t *out = tnode_output(&t, &len, NOW_NS); /* (what is sent is allocated till then) */
    assert_int_equal(fm.live, live);
    /* The first refusal (the round before did not end here with the
     * swarm) keeps the joiner waiting and asks the trainer for its next
     * step's snapshot; the first malformed one tells it there is none. */
    if (c == 0) assert_int_equal(t.want_snapshots, 2);
    assert_int_equal(frame_count(out, len, DED_MSG_STATE_OFFER), c == 1 ? 1 : 0);
    if (c == 1) {
      ded_msg_state_offer m;
      assert_true(output_offer(out, len, 0, &m));
      assert_int_equal(m.status, DED_STATE_NONE);
    }
    free(out);
  }
  assert_int_equal(t.want_snapshots, 2);
  assert_false(t.closed[0]);
  /* It asks again: the trainer is asked again. Taken: the joiner gets the
   * OFFER, with the lineage of round 0 (its members, its attempt). */
  send_state_ask(&t, 0, 0);
  assert_int_equal(t.want_snapshots, 3);
  expect_offer(&t, 0, DED_STATE_PENDING, 1);
  /* Once more before the snapshot comes: told to wait, the trainer not
   * asked twice, the joiner answered once. */
  send_state_ask(&t, 0, 0);
  assert_int_equal(t.want_snapshots, 3);
  expect_offer(&t, 0, DED_STATE_PENDING, 1);
  s = small_snap(&fm.mem, 1, 1000);
  uint64_t digest = s.digest;
  assert_int_equal(ded_node_snapshot_set(t.node, &s, NOW_NS), 0);
  assert_null(s.bytes);
  size_t len;
  uint8_t *out = tnode_output(&t, &len, NOW_NS);
  ded_msg_state_offer m;
  assert_int_equal(frame_count(out, len, DED_MSG_STATE_OFFER), 1);
  assert_true(output_offer(out, len, 0, &m));
  assert_int_equal(m.status, DED_STATE_OFFER);
  assert_int_equal(m.round, 1);
  assert_int_equal(m.digest, digest);
  assert_int_equal(m.step_rounds, 3);
  assert_int_equal(m.len, 1000);
  assert_int_equal(m.pos, 0 + COUNT); /* where round 0 ended in the stream */
  assert_int_equal(m.lin_attempt, pr.attempt);
  assert_int_equal(m.nlin, 2);
  assert_memory_equal(m.lin, pr.lo.id, DED_ID_BYTES);
  assert_memory_equal(m.lin + DED_ID_BYTES, t.ident.id, DED_ID_BYTES);
  /* Then the client bits (ded_msg.h): both members are nodes. */
  assert_int_equal(m.lin[2 * DED_ID_BYTES], 0);
  assert_false(ded_lin_client(m.lin, 2, 0));
  assert_false(ded_lin_client(m.lin, 2, 1));
  free(out);
  /* Asked again, it offers at once what it holds, without the trainer. */
  send_state_ask(&t, 0, 1);
  assert_int_equal(t.want_snapshots, 3);
  expect_offer(&t, 0, DED_STATE_OFFER, 1);
  /* Not for a joiner that wants a later round than the snapshot's. */
  send_state_ask(&t, 0, 2);
  assert_int_equal(t.want_snapshots, 4);
  expect_offer(&t, 0, DED_STATE_PENDING, 1);
  /* The next snapshot (steps of 3 rounds) reaches round 2: it waits. */
  s = small_snap(&fm.mem, 1, 1000);
  assert_int_equal(ded_node_snapshot_set(t.node, &s, NOW_NS), 0);
  out = tnode_output(&t, &len, NOW_NS);
  assert_int_equal(frame_count(out, len, DED_MSG_STATE_OFFER), 0);
  free(out);
  /* Round 5 is more than a step past this job's snapshots, but within
   * NODE_GROUP_GAP_ROUNDS (16) more (a group that yields to ours while
   * ahead of it): it waits too. Round 21, past a step and 16 more rounds
   * (this job is itself behind): NONE, rather than a copy of the state
   * every step. */
  send_state_ask(&t, 0, 5);
  expect_offer(&t, 0, DED_STATE_PENDING, 1);
  s = small_snap(&fm.mem, 1, 1000);
  assert_int_equal(ded_node_snapshot_set(t.node, &s, NOW_NS), 0);
  out = tnode_output(&t, &len, NOW_NS);
  assert_int_equal(frame_count(out, len, DED_MSG_STATE_OFFER), 0);
  free(out);
  send_state_ask(&t, 0, 1 + 3 + 16 + 1);
  expect_offer(&t, 0, DED_STATE_PENDING, 1);
  s = small_snap(&fm.mem, 1, 1000);
  assert_int_equal(ded_node_snapshot_set(t.node, &s, NOW_NS), 0);
  expect_offer(&t, 0, DED_STATE_NONE, 0);
  ded_node_free(t.node);
  assert_int_equal(fm.live, 0);
}

/*
 * A donor out of step offers none of what it holds. Round 0 ends with the
 * swarm, a snapshot of round 1 is taken and offered; round 1 is joined,
 * and lo says the swarm is at round 5 (STALE): the node is out of step,
 * its snapshot no longer the run's, and a joiner is told it has none
 * (NONE: round 1 kept its own values, so it has none until it reloads;
 * the joiner asks again), not offered it (churn soak 2447971660: joiners
 * loaded a state 49 steps old from a job that had just learnt it was
 * behind).
 */
static void test_node_state_no_offer_out_of_step(void **state) {
  (void)state;
  float b0[COUNT], b1[COUNT], *bufs[1] = {b0};
  for (int i = 0; i < COUNT; i++) b0[i] = b1[i] = (float)(i + 1);
  tnode t;
  tnode_start(&t, bufs, 1, 1.0, 2);
  peer_round pr;
  peer_coord_round(&t, b0, 2, &pr);
  assert_int_equal(t.rounds_done, 1);
  ded_snapshot s = small_snap(NULL, 1, 1000);
  assert_int_equal(ded_node_snapshot_set(t.node, &s, t.now), 0);
  send_state_ask(&t, 0, 1);
  expect_offer(&t, 0, DED_STATE_OFFER, 1);
  ded_round_args a = {b1, COUNT, DED_DTYPE_F32, 1.0, 1, NULL, 0};
  assert_int_equal(ded_node_round_submit(t.node, &a, t.now), 1);
  size_t len;
  free(tnode_output(&t, &len, t.now));
  send_stale(&t, 0, 1, 5);
  assert_false(t.closed[0]);
  assert_int_equal(t.rounds_done, 2);
  assert_int_equal(t.last.behind, 5);
  free(tnode_output(&t, &len, t.now));
  send_state_ask(&t, 0, 1);
  expect_offer(&t, 0, DED_STATE_NONE, 0);
  ded_node_free(t.node);
}

/*
 * A donor serves exactly the ranges of the snapshot it holds: GONE for a
 * snapshot it does not hold, and a STATE_GET beyond the end is a protocol
 * error that closes the connection.
 */
static void test_node_state_get_beyond_snapshot(void **state) {
  (void)state;
  float buf[COUNT], *bufs[1] = {buf};
  for (int i = 0; i < COUNT; i++) buf[i] = (float)(i + 1);
  for (int c = 0; c < 3; c++) {
    tnode t;
    tnode_start(&t, bufs, 1, 1.0, 2);
    peer_round pr;
    peer_coord_round(&t, buf, 2, &pr);
    ded_snapshot s = small_snap(NULL, 1, 1000);
    uint64_t digest = s.digest;
    /* Before it holds one, every range is GONE. */
    send_state_get(&t, 0, 1, digest, 0, 10);
    ded_msg_state_offer m = expect_offer(&t, 0, DED_STATE_GONE, 1);
    assert_int_equal(m.digest, digest);
    assert_int_equal(ded_node_snapshot_set(t.node, &s, NOW_NS), 0);
    /* A range inside, the last byte included. */
    send_state_get(&t, 0, 1, digest, 100, 900);
    size_t len;
    uint8_t *out = tnode_output(&t, &len, NOW_NS);
    ded_frame fr;
    assert_int_equal(frame_count(out, len, DED_MSG_STATE_DATA), 1);
    assert_true(frame_find(out, len, DED_MSG_STATE_DATA, 0, &fr));
    ded_msg_state_data d;
    assert_int_equal(ded_msg_state_data_decode(fr.payload, fr.len, &d), 0);
    assert_int_equal(d.round, 1);
    assert_int_equal(d.digest, digest);
    assert_int_equal(d.offset, 100);
    assert_int_equal(d.len, 900);
    for (size_t i = 0; i < 900; i++) assert_int_equal(d.bytes[i], snap_byte(100 + i));
    free(out);
    /* Another snapshot (digest, round): GONE, and the connection stays. */
    send_state_get(&t, 0, 1, digest ^ 1, 0, 10);
    m = expect_offer(&t, 0, DED_STATE_GONE, 1);
    assert_int_equal(m.digest, digest ^ 1);
    send_state_get(&t, 0, 2, digest, 0, 10);
    expect_offer(&t, 0, DED_STATE_GONE, 2);
    assert_false(t.closed[0]);
    /* Beyond the end: overlapping it, starting at it, starting past it. */
    static const uint64_t offs[3] = {900, 1000, 1001};
    static const uint32_t lens[3] = {101, 1, 1};
    send_state_get(&t, 0, 1, digest, offs[c], lens[c]);
    assert_true(t.closed[0]);
    out = tnode_output(&t, &len, NOW_NS);
    assert_int_equal(frame_count(out, len, DED_MSG_STATE_DATA), 0);
    free(out);
    ded_node_free(t.node);
  }
}

/* The node as a joiner, a scripted donor on connection 0 (|lo|, smaller
 * id than the node's) that has offered SNAP_RANGE + 100 bytes; the node
 * chose it and asked for both ranges. */
static void scripted_fetch(tnode *t, ded_ident *lo, ded_ident *hi, uint8_t **bytes,
                           uint64_t *len, ded_msg_state_offer *offer,
                           uint8_t lin[DED_LIN_BYTES(2)]) {
  tnode_start(t, NULL, 0, 1.0, 1);
  peers_around(t, lo, hi);
  send_hello(t, 0, lo, RUN);
  assert_int_equal(ded_node_state_fetch(t->node, t->now), 0);
  size_t n;
  uint8_t *out = tnode_output(t, &n, t->now);
  assert_int_equal(frame_count(out, n, DED_MSG_STATE_ASK), 1);
  free(out);
  assert_int_equal(t->state_calls, 0);
  *len = SNAP_RANGE + 100;
  *bytes = malloc(*len);
  assert_non_null(*bytes);
  for (uint64_t i = 0; i < *len; i++) (*bytes)[i] = snap_byte(i);
  memset(lin, 0, DED_LIN_BYTES(2)); /* two nodes: no client bit */
  memcpy(lin, lo->id, DED_ID_BYTES);
  memcpy(lin + DED_ID_BYTES, hi->id, DED_ID_BYTES);
  *offer = scripted_offer(*bytes, *len, lin);
  send_state_offer(t, 0, offer);
  tnode_advance(t, 100 * MS_NS);
  out = tnode_output(t, &n, t->now);
  assert_int_equal(frame_count(out, n, DED_MSG_STATE_GET), 2);
  for (int k = 0; k < 2; k++) {
    ded_frame fr;
    assert_true(frame_find(out, n, DED_MSG_STATE_GET, k, &fr));
    ded_msg_state_get g;
    assert_int_equal(ded_msg_state_get_decode(fr.payload, fr.len, &g), 0);
    assert_int_equal(g.round, 5);
    assert_int_equal(g.digest, offer->digest);
    assert_int_equal(g.offset, k * SNAP_RANGE);
    assert_int_equal(g.len, k == 0 ? SNAP_RANGE : 100);
  }
  free(out);
}

/*
 * STATE_DATA that was not asked for closes the sender's connection: from
 * a peer the joiner never asked, and from the donor, a range that is not
 * one of the snapshot's. The right ranges then make the state, and the
 * node resumes at its round.
 */
static void test_node_state_data_not_asked(void **state) {
  (void)state;
  for (int c = 0; c < 3; c++) {
    tnode t;
    ded_ident lo, hi;
    uint8_t *bytes, lin[DED_LIN_BYTES(2)];
    uint64_t len;
    ded_msg_state_offer offer;
    scripted_fetch(&t, &lo, &hi, &bytes, &len, &offer, lin);
    if (c == 0) {
      /* A peer that arrives during the fetch is not asked. */
      assert_int_equal(tnode_accept(&t), 1);
      send_hello(&t, 1, &hi, RUN);
      size_t n;
      uint8_t *out = tnode_output_on(&t, 1, &n, t.now);
      assert_int_equal(frame_count(out, n, DED_MSG_STATE_ASK), 0);
      free(out);
      send_state_data(&t, 1, 5, offer.digest, 0, bytes, SNAP_RANGE);
      assert_true(t.closed[1]);
    } else {
      /* The donor: a range at an offset that starts none, or of a wrong
       * length. */
      if (c == 1)
        send_state_data(&t, 0, 5, offer.digest, 1, bytes + 1, SNAP_RANGE);
      else
        send_state_data(&t, 0, 5, offer.digest, SNAP_RANGE, bytes + SNAP_RANGE, 99);
      assert_true(t.closed[0]);
      assert_int_equal(t.state_calls, 0);
      free(bytes);
      ded_node_free(t.node);
      continue;
    }
    assert_false(t.closed[0]);
    assert_int_equal(t.state_calls, 0);
    send_state_data(&t, 0, 5, offer.digest, SNAP_RANGE, bytes + SNAP_RANGE, 100);
    assert_int_equal(t.state_calls, 0);
    send_state_data(&t, 0, 5, offer.digest, 0, bytes, SNAP_RANGE);
    assert_false(t.closed[0]);
    assert_int_equal(t.state_calls, 1);
    assert_int_equal(t.state_status, 0);
    assert_true(t.state_has_snap);
    assert_int_equal(t.state_snap.round, 5);
    assert_int_equal(t.state_snap.step_rounds, 2);
    assert_int_equal(t.state_snap.len, len);
    assert_int_equal(t.state_snap.digest, offer.digest);
    assert_memory_equal(t.state_snap.bytes, bytes, len);
    free(t.state_snap.bytes);
    /* The node resumes at the snapshot's round. */
    float buf[COUNT];
    for (int i = 0; i < COUNT; i++) buf[i] = (float)i;
    ded_round_args a = {buf, COUNT, DED_DTYPE_F32, 1.0, 1, NULL, 0};
    assert_int_equal(ded_node_round_submit(t.node, &a, t.now), 5);
    free(bytes);
    ded_node_free(t.node);
  }
}

/*
 * ded_node_state_fetch is for a node that has not started: refused once a
 * round was submitted, when a fetch was made (finished or not), without a
 * state_done callback, and after leave.
 */
static void test_node_state_fetch_refused(void **state) {
  (void)state;
  float buf[COUNT], *bufs[1] = {buf};
  for (int i = 0; i < COUNT; i++) buf[i] = (float)(i + 1);
  tnode t;
  /* After a round was submitted. */
  tnode_start(&t, bufs, 1, 1.0, 1);
  assert_int_equal(ded_node_state_fetch(t.node, NOW_NS), DED_ERR_INVALID_ARG);
  assert_int_equal(t.state_calls, 0);
  ded_node_free(t.node);

  /* Alone: no run to join, reported at once; then not again. */
  tnode_start(&t, NULL, 0, 1.0, 1);
  assert_int_equal(ded_node_state_fetch(t.node, NOW_NS), 0);
  assert_int_equal(t.state_calls, 1);
  assert_int_equal(t.state_status, 0);
  assert_false(t.state_has_snap);
  assert_int_equal(ded_node_state_fetch(t.node, NOW_NS), DED_ERR_INVALID_ARG);
  assert_int_equal(t.state_calls, 1);
  ded_node_free(t.node);

  /* While the first one waits for an answer; the answer (FRESH) ends it,
   * and the node starts at round 0. */
  tnode_start(&t, NULL, 0, 1.0, 1);
  ded_ident lo, hi;
  peers_around(&t, &lo, &hi);
  send_hello(&t, 0, &lo, RUN);
  assert_int_equal(ded_node_state_fetch(t.node, NOW_NS), 0);
  assert_int_equal(t.state_calls, 0);
  assert_int_equal(ded_node_state_fetch(t.node, NOW_NS), DED_ERR_INVALID_ARG);
  ded_msg_state_offer fresh;
  memset(&fresh, 0, sizeof fresh);
  fresh.status = DED_STATE_FRESH;
  send_state_offer(&t, 0, &fresh);
  tnode_advance(&t, 100 * MS_NS);
  assert_int_equal(t.state_calls, 1);
  assert_int_equal(t.state_status, 0);
  assert_false(t.state_has_snap);
  assert_int_equal(ded_node_state_fetch(t.node, t.now), DED_ERR_INVALID_ARG);
  ded_round_args a = {buf, COUNT, DED_DTYPE_F32, 1.0, 1, NULL, 0};
  assert_int_equal(ded_node_round_submit(t.node, &a, t.now), 0);
  assert_int_equal(ded_node_state_fetch(t.node, t.now), DED_ERR_INVALID_ARG);
  ded_node_free(t.node);

  /* After leave. */
  tnode_start(&t, NULL, 0, 1.0, 1);
  ded_node_leave(t.node, NOW_NS);
  assert_int_equal(ded_node_state_fetch(t.node, NOW_NS), DED_ERR_CLOSING);
  assert_int_equal(t.state_calls, 0);
  ded_node_free(t.node);

  /* Without a state_done callback. */
  ded_node *node = node_without_state_done(&t);
  assert_int_equal(ded_node_state_fetch(node, NOW_NS), DED_ERR_INVALID_ARG);
  ded_node_free(node);
}

/*
 * A donor that sends a range twice, and never the other range it was
 * asked for, must not stall the fetch: the copy is ignored, the range
 * still counts as in flight, and the donor is dropped for stalling.
 */
static void test_node_state_duplicate_range_stalls(void **state) {
  (void)state;
  tnode t;
  ded_ident lo, hi;
  uint8_t *bytes, lin[DED_LIN_BYTES(2)];
  uint64_t len;
  ded_msg_state_offer offer;
  scripted_fetch(&t, &lo, &hi, &bytes, &len, &offer, lin);
  send_state_data(&t, 0, 5, offer.digest, 0, bytes, SNAP_RANGE);
  send_state_data(&t, 0, 5, offer.digest, 0, bytes, SNAP_RANGE);
  tnode_advance(&t, 120 * SEC_NS);
  bool handled = t.closed[0] || t.state_calls == 1;
  free(bytes);
  free(t.state_snap.bytes);
  ded_node_free(t.node);
  if (!handled) fail_msg("the fetch never ends");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_node_state_fresh_swarm),
      cmocka_unit_test(test_node_state_asked_peer_dies),
      cmocka_unit_test(test_node_state_mid_run_striped),
      cmocka_unit_test(test_node_state_members_all_gone),
      cmocka_unit_test(test_node_state_wrong_digest_outvoted),
      cmocka_unit_test(test_node_state_corrupt_donor),
      cmocka_unit_test(test_node_state_all_digests_wrong),
      cmocka_unit_test(test_node_state_donor_dies),
      cmocka_unit_test(test_node_state_donor_stalls),
      cmocka_unit_test(test_node_state_snapshot_out_of_step),
      cmocka_unit_test(test_node_state_snapshot_needs_lineage),
      cmocka_unit_test(test_node_state_no_offer_out_of_step),
      cmocka_unit_test(test_node_state_get_beyond_snapshot),
      cmocka_unit_test(test_node_state_data_not_asked),
      cmocka_unit_test(test_node_state_fetch_refused),
      cmocka_unit_test(test_node_state_duplicate_range_stalls),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
