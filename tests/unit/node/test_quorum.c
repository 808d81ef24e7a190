/*
 * test_quorum.c: completion by HAVE quorums against a swarm of scripted
 * acceptors (harness.h, tswarm). A member completes an attempt only once
 * more than half of its acceptors (or half, the primary among them) hold
 * it in one view; HAVE with DONE, HAVEs answered, the views HAVEs are
 * counted in after a PROBE, and malformed HAVEs.
 */
#include "harness.h"

/* ------------------------------------------- completion: HAVE quorums */

/*
 * Holding the whole result is not completing: three members lo1 < lo2 <
 * node, every one an acceptor, lo1 the primary. Once the node holds the
 * whole result it sends HAVE (round 0, the attempt, view 0) to both
 * others, but its own HAVE is one of three: it reports nothing and leaves
 * the caller's buffer alone. A HAVE from a peer that is no member (hi)
 * counts for nothing; lo2's makes two of three, and the round completes
 * with the mean. Whether lo2's HAVE comes before the node holds the whole
 * result or after, completion waits for both. hi asked (its HAVE) and is
 * no acceptor: once complete, the node tells it so (HAVE DONE).
 */
/*
 * A member whose connection was down when the node accepted the result
 * (its HAVE found no way there) hears that HAVE once it is back: a member
 * that completed the round meanwhile answers only what it is asked, so
 * without it the node would wait for a quorum until its patience ran out
 * (the simulator's seed 239: an isolated node back after 1.2 s waited 5 s
 * in each of two rounds "for nothing but HAVEs").
 */
static void test_node_have_again_on_peer_up(void **state) {
  (void)state;
  float buf[COUNT], *bufs[1] = {buf};
  for (int i = 0; i < COUNT; i++) buf[i] = (float)(3 * i + 1);
  tnode t;
  tnode_start(&t, bufs, 1, 1.0, 1);
  ded_ident peers[2];
  peers_below(&t, &peers[0], &peers[1]);
  tswarm sw;
  swarm_start(&t, &sw, buf, peers, 2);
  assert_int_equal(sw.me, 2);
  const ded_ident *m0 = memcmp(peers[0].id, peers[1].id, DED_ID_BYTES) < 0 ? &peers[0] : &peers[1];
  swarm_commit(&t, &sw);
  swarm_feed(&t, &sw, true); /* member 0's part is all in; member 1's last chunk held */
  ded_node_conn_closed(t.node, t.conn[sw.conn[0]], 0, t.now);
  t.closed[sw.conn[0]] = true;
  swarm_feed_last(&t, &sw);
  size_t len;
  uint8_t *out = tnode_output_on(&t, sw.conn[1], &len, t.now);
  expect_have(out, len, 0, sw.attempt, 0, 0, sw.digest);
  free(out);
  assert_int_equal(t.rounds_done, 0); /* its HAVE alone is no quorum */
  unsigned back = tnode_accept(&t);
  send_hello(&t, back, m0, RUN);
  out = tnode_output_on(&t, back, &len, t.now);
  if (frame_count(out, len, DED_MSG_HAVE) != 1)
    fail_msg("member 0 came back and heard no HAVE of the round the node holds");
  expect_have(out, len, 0, sw.attempt, 0, 0, sw.digest);
  free(out);
  send_have(&t, back, 0, sw.attempt, 0, DED_HAVE_F_DONE, sw.digest);
  assert_int_equal(t.rounds_done, 1);
  ded_node_free(t.node);
}

static void test_node_have_quorum_completes(void **state) {
  (void)state;
  for (int early = 0; early <= 1; early++) {
    float buf[COUNT], orig[COUNT], *bufs[1] = {buf};
    for (int i = 0; i < COUNT; i++) buf[i] = (float)(3 * i + 1);
    memcpy(orig, buf, sizeof orig);
    tnode t;
    tnode_start(&t, bufs, 1, 1.0, 1);
    ded_ident peers[2], lo, hi;
    peers_below(&t, &peers[0], &peers[1]);
    peers_around(&t, &lo, &hi);
    tswarm sw;
    swarm_start(&t, &sw, buf, peers, 2);
    assert_int_equal(sw.me, 2);
    unsigned ch = tnode_accept(&t);
    send_hello(&t, ch, &hi, RUN);
    swarm_commit(&t, &sw);
    const uint64_t A = sw.attempt;
    size_t len;
    uint8_t *out;
    if (early) {
      send_have(&t, ch, 0, A, 0, 0, sw.digest);
      send_have(&t, sw.conn[1], 0, A, 0, 0, sw.digest);
      swarm_feed(&t, &sw, true);
      assert_int_equal(t.rounds_done, 0);
      for (unsigned m = 0; m < 2; m++) {
        out = tnode_output_on(&t, sw.conn[m], &len, t.now);
        assert_int_equal(frame_count(out, len, DED_MSG_HAVE), 0); /* it does not hold it all */
        free(out);
      }
      swarm_feed_last(&t, &sw);
    } else {
      swarm_feed(&t, &sw, false);
      assert_int_equal(t.rounds_done, 0);
      assert_memory_equal(buf, orig, sizeof orig);
      /* Its HAVE, to each other member; none to the stranger. */
      for (unsigned m = 0; m < 2; m++) {
        out = tnode_output_on(&t, sw.conn[m], &len, t.now);
        expect_have(out, len, 0, A, 0, 0, sw.digest);
        free(out);
      }
      out = tnode_output_on(&t, ch, &len, t.now);
      assert_int_equal(frame_count(out, len, DED_MSG_HAVE), 0);
      free(out);
      /* Only time passes: still one of three. */
      tnode_advance(&t, 200ull * 1000 * 1000);
      send_have(&t, ch, 0, A, 0, 0, sw.digest);
      assert_int_equal(t.rounds_done, 0);
      assert_memory_equal(buf, orig, sizeof orig);
      send_have(&t, sw.conn[1], 0, A, 0, 0, sw.digest);
    }
    assert_int_equal(t.rounds_done, 1);
    assert_int_equal(t.last.status, 0);
    assert_int_equal(t.last.contributors, 3);
    assert_false(t.last.alone);
    assert_false(t.last.late);
    assert_memory_equal(buf, sw.g, sizeof sw.g);
    if (early) {
      for (unsigned m = 0; m < 2; m++) {
        out = tnode_output_on(&t, sw.conn[m], &len, t.now);
        expect_have(out, len, 0, A, 0, 0, sw.digest);
        free(out);
      }
    }
    out = tnode_output_on(&t, ch, &len, t.now);
    expect_have(out, len, 0, A, 0, DED_HAVE_F_DONE, sw.digest);
    free(out);
    assert_false(t.closed[0] || t.closed[1] || t.closed[ch]);
    ded_node_free(t.node);
  }
}

/*
 * Exactly half of the acceptors is a quorum only with the primary among
 * them. Four members lo1 < lo2 < node < hi, lo1 the primary:
 *   0: the node and lo1 (the primary), two of four: complete;
 *   1: the node and lo2, two of four without the primary (lo2's HAVE
 *      twice counts once): not complete; hi's makes three: complete;
 *   2: hi is no acceptor and nacc is 6 (two acceptors not listed): the
 *      node, lo1 and hi are two acceptors of six, with the primary: not
 *      complete; lo2's makes three of six with the primary: complete.
 */
static void test_node_have_quorum_half_needs_primary(void **state) {
  (void)state;
  for (int variant = 0; variant <= 2; variant++) {
    float buf[COUNT], orig[COUNT], *bufs[1] = {buf};
    for (int i = 0; i < COUNT; i++) buf[i] = 2.0f - (float)i;
    memcpy(orig, buf, sizeof orig);
    tnode t;
    tnode_start(&t, bufs, 1, 1.0, 1);
    ded_ident peers[3], lo;
    peers_below(&t, &peers[0], &peers[1]);
    peers_around(&t, &lo, &peers[2]);
    tswarm sw;
    swarm_start(&t, &sw, buf, peers, 3);
    assert_int_equal(sw.me, 2);
    if (variant == 2) {
      sw.m[3].flags = 0;
      sw.c.nacc = 6;
    }
    swarm_commit(&t, &sw);
    const uint64_t A = sw.attempt;
    swarm_feed(&t, &sw, false);
    size_t len;
    for (unsigned m = 0; m < 4; m++) {
      if (m == sw.me) continue;
      uint8_t *out = tnode_output_on(&t, sw.conn[m], &len, t.now);
      expect_have(out, len, 0, A, 0, 0, sw.digest);
      free(out);
    }
    assert_int_equal(t.rounds_done, 0);
    if (variant == 0) {
      send_have(&t, sw.conn[0], 0, A, 0, 0, sw.digest);
    } else if (variant == 1) {
      send_have(&t, sw.conn[1], 0, A, 0, 0, sw.digest);
      send_have(&t, sw.conn[1], 0, A, 0, 0, sw.digest);
      assert_int_equal(t.rounds_done, 0);
      assert_memory_equal(buf, orig, sizeof orig);
      send_have(&t, sw.conn[3], 0, A, 0, 0, sw.digest);
    } else {
      send_have(&t, sw.conn[0], 0, A, 0, 0, sw.digest);
      send_have(&t, sw.conn[3], 0, A, 0, 0, sw.digest);
      assert_int_equal(t.rounds_done, 0);
      assert_memory_equal(buf, orig, sizeof orig);
      send_have(&t, sw.conn[1], 0, A, 0, 0, sw.digest);
    }
    if (t.rounds_done != 1)
      fail_msg("variant %d: the attempt did not complete on a quorum of HAVEs", variant);
    assert_int_equal(t.last.status, 0);
    assert_int_equal(t.last.contributors, 4);
    assert_memory_equal(buf, sw.g, sizeof sw.g);
    for (unsigned m = 0; m < 4; m++)
      if (m != sw.me) assert_false(t.closed[sw.conn[m]]);
    ded_node_free(t.node);
  }
}

/*
 * A HAVE with DONE (its sender completed the round with this attempt)
 * completes the attempt without a quorum. HAVEs that are not for this
 * attempt in the node's view make none: both other acceptors accepting
 * another attempt, or lo2 accepting this one in another view (its HAVE and
 * the node's, in view 0, are not in one view).
 */
static void test_node_have_done_completes(void **state) {
  (void)state;
  for (int early = 0; early <= 1; early++) {
    float buf[COUNT], orig[COUNT], *bufs[1] = {buf};
    for (int i = 0; i < COUNT; i++) buf[i] = (float)(i % 7) + 0.5f;
    memcpy(orig, buf, sizeof orig);
    tnode t;
    tnode_start(&t, bufs, 1, 1.0, 1);
    ded_ident peers[2];
    peers_below(&t, &peers[0], &peers[1]);
    tswarm sw;
    swarm_start(&t, &sw, buf, peers, 2);
    swarm_commit(&t, &sw);
    const uint64_t A = sw.attempt;
    if (!early) swarm_feed(&t, &sw, false);
    send_have(&t, sw.conn[0], 0, A + 1, 0, 0, sw.digest);
    send_have(&t, sw.conn[1], 0, A + 1, 0, 0, sw.digest);
    send_have(&t, sw.conn[1], 0, A, 1, 0, sw.digest);
    if (early) swarm_feed(&t, &sw, false);
    if (t.rounds_done != 0)
      fail_msg("completed on HAVEs for another attempt or another view (early %d)", early);
    assert_memory_equal(buf, orig, sizeof orig);
    /* The node's own HAVE went out (view 0). */
    size_t len;
    uint8_t *out = tnode_output_on(&t, sw.conn[0], &len, t.now);
    expect_have(out, len, 0, A, 0, 0, sw.digest);
    free(out);
    send_have(&t, sw.conn[1], 0, A, 0, DED_HAVE_F_DONE, sw.digest);
    assert_int_equal(t.rounds_done, 1);
    assert_int_equal(t.last.status, 0);
    assert_int_equal(t.last.contributors, 3);
    assert_memory_equal(buf, sw.g, sizeof sw.g);
    assert_false(t.closed[sw.conn[0]] || t.closed[sw.conn[1]]);
    ded_node_free(t.node);
  }
  /* DONE before the node holds the whole result: it completes as soon as
   * it does, with no other HAVE. */
  float buf[COUNT], *bufs[1] = {buf};
  for (int i = 0; i < COUNT; i++) buf[i] = (float)i;
  tnode t;
  tnode_start(&t, bufs, 1, 1.0, 1);
  ded_ident peers[2];
  peers_below(&t, &peers[0], &peers[1]);
  tswarm sw;
  swarm_start(&t, &sw, buf, peers, 2);
  swarm_commit(&t, &sw);
  send_have(&t, sw.conn[0], 0, sw.attempt, 0, DED_HAVE_F_DONE, sw.digest);
  swarm_feed(&t, &sw, true);
  assert_int_equal(t.rounds_done, 0);
  swarm_feed_last(&t, &sw);
  assert_int_equal(t.rounds_done, 1);
  assert_memory_equal(buf, sw.g, sizeof sw.g);
  ded_node_free(t.node);
}

/*
 * A node that completed a round answers a HAVE for the attempt it
 * completed with (a member still short of a quorum) with HAVE DONE, in
 * the asker's view; a HAVE for another attempt, or one that says DONE
 * itself, gets no answer; a HAVE for a round it never ran, nothing.
 */
static void test_node_have_answered_done(void **state) {
  (void)state;
  float buf[COUNT], *bufs[1] = {buf};
  for (int i = 0; i < COUNT; i++) buf[i] = (float)(i + 1);
  tnode t;
  tnode_start(&t, bufs, 1, 1.0, 1);
  peer_round pr;
  peer_coord_round(&t, buf, 1, &pr);
  assert_int_equal(t.rounds_done, 1);
  size_t len;
  uint8_t *out = tnode_output(&t, &len, NOW_NS);
  assert_int_equal(frame_count(out, len, DED_MSG_HAVE), 0);
  free(out);
  const uint32_t views[] = {0, 3};
  for (size_t v = 0; v < sizeof views / sizeof views[0]; v++) {
    send_have(&t, 0, 0, pr.attempt, views[v], 0, pr.digest);
    out = tnode_output(&t, &len, NOW_NS);
    expect_have(out, len, 0, pr.attempt, views[v], DED_HAVE_F_DONE, pr.digest);
    free(out);
  }
  send_have(&t, 0, 0, pr.attempt + 1, 0, 0, pr.digest);
  send_have(&t, 0, 0, pr.attempt, 0, DED_HAVE_F_DONE, pr.digest);
  send_have(&t, 0, 7, pr.attempt, 0, 0, pr.digest);
  out = tnode_output(&t, &len, NOW_NS);
  assert_int_equal(frame_count(out, len, DED_MSG_HAVE), 0);
  free(out);
  assert_int_equal(t.rounds_done, 1);
  assert_false(t.closed[0]);
  ded_node_free(t.node);
}

/*
 * A member that was probed into a later view before it held the whole
 * result takes no part in the earlier view any more: three members lo1 <
 * lo2 < node, lo1 probes the node into view 3 (lo1's by the lineage) while
 * the node still lacks a chunk of lo2's shard. The chunk that comes then
 * is not taken, so the node sends no HAVE for view 0, and its report says
 * it accepted nothing (acc_view none). When lo1 decides in view 3 that
 * the attempt stands, the node fetches the shard from lo2 and accepts the
 * attempt in view 3 (HAVE to both): lo2's HAVE of view 0 does not combine
 * with it, lo2's HAVE of view 3 does (two of three).
 * A member that held the whole result when probed had accepted it in view
 * 0 and says so (acc_view 0); after the DECIDE it accepts it again, in
 * view 3, and its HAVE of view 0 still counts in view 0: with lo2's, two
 * of three.
 */
static void test_node_have_views_after_probe(void **state) {
  (void)state;
  for (int held = 0; held <= 1; held++) {
    float buf[COUNT], orig[COUNT], *bufs[1] = {buf};
    for (int i = 0; i < COUNT; i++) buf[i] = (float)(2 * i) - 5.0f;
    memcpy(orig, buf, sizeof orig);
    tnode t;
    tnode_start(&t, bufs, 1, 1.0, 1);
    ded_ident peers[2];
    peers_below(&t, &peers[0], &peers[1]);
    tswarm sw;
    swarm_start(&t, &sw, buf, peers, 2);
    assert_int_equal(sw.me, 2);
    const unsigned c1 = sw.conn[0], c2 = sw.conn[1];
    swarm_commit(&t, &sw);
    const uint64_t A = sw.attempt;
    swarm_feed(&t, &sw, !held); /* without: the last chunk of lo2's shard */
    size_t len;
    uint8_t *out = tnode_output_on(&t, c2, &len, t.now);
    assert_int_equal(frame_count(out, len, DED_MSG_HAVE), held ? 1 : 0);
    free(out);
    free(tnode_output_on(&t, c1, &len, t.now));
    assert_int_equal(t.rounds_done, 0);

    send_probe(&t, c1, 0, 3);
    out = tnode_output_on(&t, c1, &len, t.now);
    ded_frame fr;
    bool found = false;
    for (int i = 0; frame_find(out, len, DED_MSG_JOIN, i, &fr); i++) {
      ded_msg_join j;
      assert_int_equal(ded_msg_join_decode(fr.payload, fr.len, NULL, &j), 0);
      if (j.view == 3) {
        found = true;
        assert_int_equal(j.plan.attempt, A);
        assert_int_equal(j.have[0], held ? 0x07 : 0x05);
        assert_int_equal(j.acc_view, held ? 0 : DED_VIEW_NONE);
        assert_false(j.flags & DED_JOIN_F_DONE);
      }
      ded_msg_join_free(&j, NULL);
    }
    free(out);
    if (!found) fail_msg("no report to view 3 after the PROBE");
    if (!held) {
      /* The rest of view 0's attempt: frozen, not taken, no HAVE. */
      swarm_feed_last(&t, &sw);
      for (unsigned c = 0; c < 2; c++) {
        out = tnode_output_on(&t, sw.conn[c], &len, t.now);
        assert_int_equal(frame_count(out, len, DED_MSG_HAVE), 0);
        free(out);
      }
      assert_int_equal(t.rounds_done, 0);
    }
    /* View 3 decides that A stands: every member holds its own shard. */
    const uint16_t holders[3] = {0, 1, 2};
    send_decide(&t, c1, 3, 0, &sw.c, holders);
    out = tnode_output_on(&t, c2, &len, t.now);
    assert_int_equal(frame_count(out, len, DED_MSG_FETCH), held ? 0 : 1);
    if (!held) {
      assert_int_equal(frame_count(out, len, DED_MSG_HAVE), 0);
      free(out);
      send_data(&t, c2, DED_MSG_RESULT, 0, A, CHUNK, sw.g + CHUNK, CHUNK);
      out = tnode_output_on(&t, c2, &len, t.now);
    }
    expect_have(out, len, 0, A, 3, 0, sw.digest);
    free(out);
    out = tnode_output_on(&t, c1, &len, t.now);
    expect_have(out, len, 0, A, 3, 0, sw.digest);
    free(out);
    assert_int_equal(t.rounds_done, 0);
    assert_memory_equal(buf, orig, sizeof orig);
    send_have(&t, c2, 0, A, 0, 0, sw.digest);
    if (!held) {
      /* Its HAVE of view 3 and lo2's of view 0 are not one view. */
      assert_int_equal(t.rounds_done, 0);
      assert_memory_equal(buf, orig, sizeof orig);
      send_have(&t, c2, 0, A, 3, 0, sw.digest);
    }
    assert_int_equal(t.rounds_done, 1);
    assert_int_equal(t.last.status, 0);
    assert_true(t.last.recoveries >= 1);
    assert_memory_equal(buf, sw.g, sizeof sw.g);
    assert_false(t.closed[c1] || t.closed[c2]);
    ded_node_free(t.node);
  }
}

/*
 * A HAVE that does not decode to exactly one HAVE (cut short, a byte too
 * many, an unknown flag, attempt 0), or a HAVE before HELLO, drops the
 * connection it came on, and nothing else: the round the node runs with
 * another peer completes as usual. A DONE for another attempt than one
 * already said to be done is ignored (and logged): it keeps its
 * connection, and the round still completes with the first. So is a HAVE
 * for a round far ahead: a peer of a run that went on without this node
 * (it slept, or its group fell behind) is honest, not a violator.
 */
static void test_node_have_malformed_dropped(void **state) {
  (void)state;
  enum { CUT, TRAILING, FLAG, ATTEMPT0, FAR_AHEAD, DONE_OTHER, NO_HELLO, NCASES };
  for (int tc = 0; tc < NCASES; tc++) {
    float buf[COUNT], *bufs[1] = {buf};
    for (int i = 0; i < COUNT; i++) buf[i] = (float)(i + tc);
    tnode t;
    tnode_start(&t, bufs, 1, 1.0, 1);
    ded_ident lo, hi;
    peers_around(&t, &lo, &hi);
    tswarm sw;
    swarm_start(&t, &sw, buf, &lo, 1);
    unsigned ch = tnode_accept(&t);
    if (tc != NO_HELLO) send_hello(&t, ch, &hi, RUN);
    assert_false(t.closed[ch]);
    swarm_commit(&t, &sw);
    const uint64_t A = sw.attempt;
    uint8_t f[DED_HAVE_FRAME_BYTES + 1] = {0};
    ded_wr w = ded_wr_init(f, DED_HAVE_FRAME_BYTES);
    ded_msg_have h = {0, A, 0, 0, {0}};
    memcpy(h.digest, sw.digest, DED_RESULT_DIGEST_BYTES);
    if (tc == FLAG) h.flags = 2;
    if (tc == ATTEMPT0) h.attempt = 0;
    if (tc == FAR_AHEAD) h.round = 1000;
    if (tc == DONE_OTHER) {
      send_have(&t, 0, 0, A, 0, DED_HAVE_F_DONE, sw.digest); /* lo: A is done */
      h.attempt = A + 1;
      h.flags = DED_HAVE_F_DONE;
    }
    ded_msg_have_encode(&w, &h);
    assert_false(w.err);
    size_t n = w.pos;
    const size_t payload = DED_HAVE_FRAME_BYTES - DED_FRAME_HDR_BYTES;
    if (tc == CUT) {
      ded_frame_put_hdr(f, DED_MSG_HAVE, payload - 1);
      n = DED_HAVE_FRAME_BYTES - 1;
    } else if (tc == TRAILING) {
      ded_frame_put_hdr(f, DED_MSG_HAVE, payload + 1);
      n = DED_HAVE_FRAME_BYTES + 1;
    }
    send_raw(&t, ch, f, n);
    /* Two DONEs that contradict each other are logged, not punished: the
     * node cannot tell which of the two peers lies. */
    bool kept = tc == DONE_OTHER || tc == FAR_AHEAD;
    if (!kept && !t.closed[ch]) fail_msg("case %d: the connection that sent the HAVE was kept", tc);
    if (kept && t.closed[ch]) fail_msg("case %d: an honest HAVE dropped its sender", tc);
    assert_false(t.closed[0]);
    tnode_advance(&t, 100ull * 1000 * 1000);
    /* The round with lo goes on to its end. */
    swarm_feed(&t, &sw, false);
    if (tc != DONE_OTHER) {
      assert_int_equal(t.rounds_done, 0);
      send_have(&t, 0, 0, A, 0, 0, sw.digest);
    }
    if (t.rounds_done != 1) fail_msg("case %d: the round did not complete", tc);
    assert_int_equal(t.last.status, 0);
    assert_false(t.last.alone);
    assert_memory_equal(buf, sw.g, sizeof sw.g);
    assert_false(t.closed[0]);
    ded_node_free(t.node);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_node_have_quorum_completes),
      cmocka_unit_test(test_node_have_again_on_peer_up),
      cmocka_unit_test(test_node_have_quorum_half_needs_primary),
      cmocka_unit_test(test_node_have_done_completes),
      cmocka_unit_test(test_node_have_answered_done),
      cmocka_unit_test(test_node_have_views_after_probe),
      cmocka_unit_test(test_node_have_malformed_dropped),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
