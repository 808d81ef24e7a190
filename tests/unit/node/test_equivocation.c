/*
 * test_equivocation.c: a reducer that sends the node other bytes than it
 * sends the other members (protocol version 9: HAVE carries the digest of
 * the result's bytes). Against a swarm of scripted acceptors (harness.h,
 * tswarm), the node with two ranks, so that its buffer ends as 2 g:
 *   - it never completes with bytes other than the ones a quorum of the
 *     attempt's acceptors voted for in one view (or a completer said it
 *     completed with): whole but different, it fetches the result again
 *     from a member that holds those bytes, the one that said DONE with
 *     them first, then each plan member that voted them, in vote order,
 *     and fails over once none is left;
 *   - votes of one view for different bytes never add up;
 *   - a HAVE DONE says with which bytes, and is its sender's vote in its
 *     view, in place of an earlier one; a second DONE with other bytes is
 *     a contradiction, logged; a late member takes a DONE's bytes;
 *   - while it fetches again, only the holder's RESULTs count;
 *   - a round that ends at its bound is not served afterwards.
 */
#include "harness.h"

/* The node's ranks: its buffer ends as EQ_NL times the mean. */
#define EQ_NL 2

/*
 * A round of the genesis attempt among the node and |npeers| scripted
 * peers (tswarm): two peers lo1 < lo2 < node, or three, lo1 < lo2 < node
 * < hi; the node is member 2 either way, lo1 the coordinator and the
 * primary. The node has EQ_NL ranks (weight 1), so its coefficient is 1 /
 * EQ_NL: sw.g and sw.digest are the mean and its digest with that (Y).
 * |other| is the mean with member |changed|'s shard changed, other bytes
 * (what an equivocating reducer sends), |other_digest| its digest.
 */
typedef struct eq_round {
  tnode t;
  tswarm sw;
  float buf[COUNT], orig[COUNT];
  float other[COUNT];
  uint8_t other_digest[DED_RESULT_DIGEST_BYTES];
  uint64_t A; /* the attempt */
  unsigned lo1, lo2; /* their connections */
} eq_round;

/* Starts |e| (the COMMIT sent, nothing fed yet). */
static void eq_start(eq_round *e, unsigned npeers, unsigned changed) {
  tnode *t = &e->t;
  tswarm *sw = &e->sw;
  for (int i = 0; i < COUNT; i++) e->buf[i] = (float)(5 * i) - 17.5f;
  memcpy(e->orig, e->buf, sizeof e->orig);
  float *bufs[1] = {e->buf};
  tnode_start(t, bufs, 1, 1.0, EQ_NL);
  ded_ident peers[3], lo;
  peers_below(t, &peers[0], &peers[1]);
  if (npeers == 3) peers_around(t, &lo, &peers[2]);
  swarm_start(t, sw, e->buf, peers, npeers);
  assert_int_equal(sw->me, 2);
  sw->m[sw->me].n_local = EQ_NL;
  const float a_me = (float)(1.0 / EQ_NL);
  for (uint64_t i = sw->m[sw->me].shard_off; i < swarm_shard_end(sw, sw->me); i++) {
    float acc = sw->x[0][i];
    for (unsigned n = 1; n < sw->k; n++) acc += n == sw->me ? a_me * sw->x[n][i] : sw->x[n][i];
    sw->g[i] = acc / (float)sw->k;
  }
  result_digest(sw->g, sw->digest);
  swarm_commit(t, sw);
  memcpy(e->other, sw->g, sizeof e->other);
  for (uint64_t i = sw->m[changed].shard_off; i < swarm_shard_end(sw, changed); i++)
    e->other[i] += 1000.0f;
  result_digest(e->other, e->other_digest);
  e->A = sw->attempt;
  e->lo1 = sw->conn[0];
  e->lo2 = sw->conn[1];
}

/* Member |m|'s shard of |g|, as RESULT chunks from the member on |conn|
 * (an answer to a FETCH). */
static void eq_send_shard(eq_round *e, unsigned conn, unsigned m, const float *g) {
  uint64_t a = e->sw.m[m].shard_off, b = swarm_shard_end(&e->sw, m);
  send_chunks(&e->t, conn, DED_MSG_RESULT, 0, e->A, a, g + a, b - a);
}

/* The shards of |attempt| (of |k| members) that |t| asked for on
 * connection |conn| (round 0), as a bit mask; its output there is
 * consumed. */
static unsigned tn_fetches(tnode *t, unsigned conn, uint64_t attempt, unsigned k) {
  size_t len;
  uint8_t *out = tnode_output_on(t, conn, &len, t->now);
  unsigned mask = 0;
  ded_frame fr;
  for (int n = 0; frame_find(out, len, DED_MSG_FETCH, n, &fr); n++) {
    ded_msg_fetch f;
    assert_int_equal(ded_msg_fetch_decode(fr.payload, fr.len, &f), 0);
    assert_int_equal(f.round, 0);
    assert_int_equal(f.attempt, attempt);
    assert_true(f.shard < k);
    mask |= 1u << f.shard;
  }
  free(out);
  return mask;
}

/* The shards the node asked for on connection |conn| (round 0, the
 * attempt), as a bit mask; its output there is consumed. */
static unsigned eq_fetches(eq_round *e, unsigned conn) {
  return tn_fetches(&e->t, conn, e->A, e->sw.k);
}

/* Checks that the node asked the member on |conn| (and no one else) for
 * the shards of |want|. */
static void expect_fetches_only(eq_round *e, unsigned conn, unsigned want) {
  for (unsigned m = 0; m < e->sw.k; m++) {
    if (m == e->sw.me) continue;
    unsigned got = eq_fetches(e, e->sw.conn[m]);
    unsigned expect = e->sw.conn[m] == conn ? want : 0;
    if (got != expect) fail_msg("FETCHes to member %u: shards 0x%x, not 0x%x", m, got, expect);
  }
}

/* Whether the node reported the attempt on |conn| to a later view (JOIN
 * with status); its view in |*view|. The output there is consumed. */
static bool eq_reported(eq_round *e, unsigned conn, uint32_t *view) {
  size_t len;
  uint8_t *out = tnode_output_on(&e->t, conn, &len, e->t.now);
  bool found = false;
  ded_frame fr;
  for (int n = 0; !found && frame_find(out, len, DED_MSG_JOIN, n, &fr); n++) {
    ded_msg_join j;
    assert_int_equal(ded_msg_join_decode(fr.payload, fr.len, NULL, &j), 0);
    if (j.round == 0 && j.view > 0 && (j.flags & DED_JOIN_F_STATUS)) {
      found = true;
      *view = j.view;
      assert_int_equal(j.plan.attempt, e->A);
      assert_false(j.flags & DED_JOIN_F_DONE);
    }
    ded_msg_join_free(&j, NULL);
  }
  free(out);
  return found;
}

/* The round is done here, with the bytes of |g|: the caller's buffer is
 * EQ_NL g, bit for bit. */
static void expect_done_with(const eq_round *e, const float *g) {
  const tnode *t = &e->t;
  if (t->rounds_done != 1) fail_msg("the round did not complete (%d reports)", t->rounds_done);
  assert_int_equal(t->last.status, 0);
  assert_int_equal(t->last.round, 0);
  assert_int_equal(t->last.contributors, e->sw.k);
  float want[COUNT];
  for (int i = 0; i < COUNT; i++) want[i] = (float)EQ_NL * g[i];
  assert_memory_equal(e->buf, want, sizeof want);
}

/* Not done, and the caller's buffer as it was. */
static void expect_not_done(const eq_round *e) {
  if (e->t.rounds_done != 0) fail_msg("the round was reported (status %d)", e->t.last.status);
  assert_memory_equal(e->buf, e->orig, sizeof e->buf);
}

/* The node's connections are all open (it dropped no one). */
static void expect_none_dropped(const eq_round *e) {
  for (unsigned m = 0; m < e->sw.k; m++)
    if (m != e->sw.me && e->t.closed[e->sw.conn[m]]) fail_msg("member %u was dropped", m);
}

/*
 * hi (member 3) equivocates: it sends the node its shard's result X,
 * while the others hold Y (the true mean) and say so: lo2, hi and lo1
 * vote HAVE with Y's digest, a quorum without the node (three of four).
 * The node holds the whole result, X, and says so (its HAVE carries X's
 * digest), but reports nothing and leaves the buffer alone: its bytes are
 * not the quorum's. It fetches every shard but its own again from lo2,
 * the first member that voted Y's digest, from no one else; once lo2's
 * chunks (Y) are in it completes, its buffer 2 Y bit for bit, and answers
 * a HAVE with DONE and Y's digest. hi's RESULTs are no longer taken
 * meanwhile: only lo2 serves the fetch.
 */
static void test_node_equivocation_refetch(void **state) {
  (void)state;
  eq_round e;
  eq_start(&e, 3, 3);
  const unsigned hi = e.sw.conn[3];
  swarm_feed_with(&e.t, &e.sw, e.other, false);
  size_t len;
  for (unsigned m = 0; m < 4; m++) {
    if (m == e.sw.me) continue;
    uint8_t *out = tnode_output_on(&e.t, e.sw.conn[m], &len, e.t.now);
    expect_have(out, len, 0, e.A, 0, 0, e.other_digest); /* it holds X, and says so */
    free(out);
  }
  expect_not_done(&e);
  /* lo2 and hi: two of four without the primary, not a quorum yet. */
  send_have(&e.t, e.lo2, 0, e.A, 0, 0, e.sw.digest);
  send_have(&e.t, hi, 0, e.A, 0, 0, e.sw.digest);
  expect_not_done(&e);
  expect_fetches_only(&e, e.lo2, 0);
  /* (a) A quorum for Y: whole, but not with X. */
  send_have(&e.t, e.lo1, 0, e.A, 0, 0, e.sw.digest);
  expect_not_done(&e);
  /* (b) Every shard but its own, from lo2 (the first voter of Y). */
  expect_fetches_only(&e, e.lo2, 0x1u | 0x2u | 0x8u);
  /* hi's bytes are not taken now, whatever it sends. */
  eq_send_shard(&e, hi, 3, e.other);
  expect_not_done(&e);
  /* (c) lo2 serves Y: shards 0 and 1, then the one that differed. */
  eq_send_shard(&e, e.lo2, 0, e.sw.g);
  eq_send_shard(&e, e.lo2, 1, e.sw.g);
  expect_not_done(&e);
  eq_send_shard(&e, e.lo2, 3, e.sw.g);
  expect_done_with(&e, e.sw.g);
  assert_false(e.t.closed[e.lo1] || e.t.closed[e.lo2]);
  /* Asked, it says it completed, with Y's bytes. */
  for (unsigned c = 0; c < e.t.nconn; c++) free(tnode_output_on(&e.t, c, &len, e.t.now));
  send_have(&e.t, e.lo2, 0, e.A, 0, 0, e.sw.digest);
  uint8_t *out = tnode_output_on(&e.t, e.lo2, &len, e.t.now);
  expect_have(out, len, 0, e.A, 0, DED_HAVE_F_DONE, e.sw.digest);
  free(out);
  ded_node_free(e.t.node);
}

/*
 * The holders of the quorum's bytes are asked in turn, and the node fails
 * over once none is left, never completing with other bytes. lo1 < lo2 <
 * node; lo2 (member 1) sends the node X for its shard and votes Y, lo1
 * votes Y after it: a quorum (two of three) for Y. The node asks lo2 first
 * (shards 0 and 1), which sends X again; it cannot tell which shard
 * differs (its own may: round_disagree), so it asks lo1 next for every
 * shard, its own too:
 *   0  lo1 sends Y: the node completes with Y;
 *   1  lo1 sends X too: none is left, and the node fails over (JOIN with
 *      status to lo2, view 1's coordinator);
 *   2  lo1 is gone: the same.
 * The caller's buffer is untouched until then, X never reported.
 */
static void test_node_equivocation_holders_in_turn(void **state) {
  (void)state;
  for (int tc = 0; tc <= 2; tc++) {
    eq_round e;
    eq_start(&e, 2, 1);
    swarm_feed_with(&e.t, &e.sw, e.other, false);
    uint8_t d[DED_RESULT_DIGEST_BYTES];
    tnode_have_digest(&e.t, e.lo1, 0, e.A, d);
    assert_memory_equal(d, e.other_digest, sizeof d);
    send_have(&e.t, e.lo2, 0, e.A, 0, 0, e.sw.digest);
    expect_not_done(&e);
    send_have(&e.t, e.lo1, 0, e.A, 0, 0, e.sw.digest);
    expect_not_done(&e);
    expect_fetches_only(&e, e.lo2, 0x3u);
    eq_send_shard(&e, e.lo2, 0, e.sw.g);
    eq_send_shard(&e, e.lo2, 1, e.other);
    expect_not_done(&e);
    expect_fetches_only(&e, e.lo1, 0x7u);
    if (tc == 2) {
      ded_node_conn_closed(e.t.node, e.t.conn[e.lo1], DED_ERR_PEER_LOST, e.t.now);
    } else {
      const float *from_lo1 = tc == 0 ? e.sw.g : e.other;
      for (unsigned m = 0; m < 3; m++) eq_send_shard(&e, e.lo1, m, from_lo1);
    }
    if (tc == 0) {
      expect_done_with(&e, e.sw.g);
      expect_none_dropped(&e);
      ded_node_free(e.t.node);
      continue;
    }
    expect_not_done(&e);
    uint32_t view = 0;
    if (!eq_reported(&e, e.lo2, &view))
      fail_msg("case %d: no failover once no holder of the quorum's bytes was left", tc);
    assert_int_equal(view, 1);
    /* Time passes: it still never reports the round with X. */
    tnode_advance(&e.t, 1000ull * 1000 * 1000);
    expect_not_done(&e);
    assert_false(e.t.closed[e.lo2]);
    ded_node_free(e.t.node);
  }
}

/*
 * The shard that differs is the node's own (it reduced it while a fault
 * altered what it sent, or it lied): the quorum (lo2, hi, lo1, in that
 * order) holds X, the mean with the node's shard (member 2) changed. The
 * node asks lo2 for every shard but its own first; with lo2's (X, the
 * same bytes as Y there) its result still differs, so it asks hi, the
 * next voter, for every shard, its own too, and completes with X once
 * hi's are in. Keeping its own shard, it would ask every voter in turn
 * and fail over, and stay at the round until its bound.
 */
static void test_node_equivocation_own_shard(void **state) {
  (void)state;
  eq_round e;
  eq_start(&e, 3, 2);
  const unsigned hi = e.sw.conn[3];
  swarm_feed_with(&e.t, &e.sw, e.sw.g, false);
  size_t len;
  for (unsigned c = 0; c < e.t.nconn; c++) free(tnode_output_on(&e.t, c, &len, e.t.now));
  expect_not_done(&e);
  send_have(&e.t, e.lo2, 0, e.A, 0, 0, e.other_digest);
  send_have(&e.t, hi, 0, e.A, 0, 0, e.other_digest);
  send_have(&e.t, e.lo1, 0, e.A, 0, 0, e.other_digest);
  expect_not_done(&e);
  expect_fetches_only(&e, e.lo2, 0x1u | 0x2u | 0x8u);
  for (unsigned m = 0; m < 4; m++)
    if (m != e.sw.me) eq_send_shard(&e, e.lo2, m, e.other);
  expect_not_done(&e);
  expect_fetches_only(&e, hi, 0xfu);
  for (unsigned m = 0; m < 4; m++) eq_send_shard(&e, hi, m, e.other);
  expect_done_with(&e, e.other);
  expect_none_dropped(&e);
  ded_node_free(e.t.node);
}

/*
 * Votes of one view for different bytes never add up. Four members, the
 * node honest (it holds Y, the mean, and votes it): lo2 votes Y, hi votes
 * Z. Three votes, as many as a quorum of four, split between two digests
 * (two of four without the primary for Y): no one completes, and the node
 * fetches nothing. lo1 (the primary) then votes
 *   0  W, a third digest: still nothing;
 *   1  Y: a quorum for Y with the node's own, and it completes with Y.
 */
static void test_node_equivocation_split_votes(void **state) {
  (void)state;
  for (int tc = 0; tc <= 1; tc++) {
    eq_round e;
    eq_start(&e, 3, 0); /* Z: other bytes in lo1's shard */
    uint8_t dw[DED_RESULT_DIGEST_BYTES];
    memset(dw, 0x5a, sizeof dw);
    swarm_feed(&e.t, &e.sw, false);
    uint8_t d[DED_RESULT_DIGEST_BYTES];
    tnode_have_digest(&e.t, e.lo2, 0, e.A, d);
    assert_memory_equal(d, e.sw.digest, sizeof d);
    send_have(&e.t, e.lo2, 0, e.A, 0, 0, e.sw.digest);
    send_have(&e.t, e.sw.conn[3], 0, e.A, 0, 0, e.other_digest);
    expect_not_done(&e);
    expect_fetches_only(&e, e.lo1, 0);
    send_have(&e.t, e.lo1, 0, e.A, 0, 0, tc == 0 ? dw : e.sw.digest);
    if (tc == 1) {
      expect_done_with(&e, e.sw.g);
    } else {
      expect_not_done(&e);
      expect_fetches_only(&e, e.lo1, 0);
    }
    expect_none_dropped(&e);
    ded_node_free(e.t.node);
  }
}

/*
 * A HAVE DONE says with which bytes its sender completed; to an acceptor
 * it is that sender's vote, no more. lo1 < lo2 < node, all acceptors; the
 * node holds Y (the mean) and only its own vote; lo2 says DONE
 *   0  with Y's digest: with the node's own vote a quorum for Y, and the
 *      node completes with Y, fetching nothing;
 *   1  with the digest of Y', other bytes: no quorum, so the node neither
 *      completes nor fetches; when lo1 votes Y' too, that is a quorum for
 *      Y': the node fetches both other shards again from lo2, the one
 *      that said it completed with them, and completes with Y';
 *   2  with Y' again, but lo1 votes Y: a quorum for Y, the node's bytes;
 *      it completes with them, one peer's word outvoted.
 */
static void test_node_equivocation_done_digest(void **state) {
  (void)state;
  for (int tc = 0; tc <= 2; tc++) {
    eq_round e;
    eq_start(&e, 2, 0); /* Y' */
    swarm_feed(&e.t, &e.sw, false);
    expect_not_done(&e);
    expect_fetches_only(&e, e.lo2, 0);
    send_have(&e.t, e.lo2, 0, e.A, 0, DED_HAVE_F_DONE, tc == 0 ? e.sw.digest : e.other_digest);
    if (tc == 0) {
      expect_done_with(&e, e.sw.g);
      expect_fetches_only(&e, e.lo2, 0);
    } else {
      expect_not_done(&e);
      expect_fetches_only(&e, e.lo2, 0);
      expect_fetches_only(&e, e.lo1, 0);
      send_have(&e.t, e.lo1, 0, e.A, 0, 0, tc == 1 ? e.other_digest : e.sw.digest);
      if (tc == 1) {
        expect_not_done(&e);
        expect_fetches_only(&e, e.lo2, 0x3u);
        eq_send_shard(&e, e.lo2, 0, e.other);
        expect_not_done(&e);
        eq_send_shard(&e, e.lo2, 1, e.other);
        expect_done_with(&e, e.other);
      } else {
        expect_done_with(&e, e.sw.g);
        expect_fetches_only(&e, e.lo2, 0);
      }
    }
    expect_none_dropped(&e);
    ded_node_free(e.t.node);
  }
}

/*
 * Two HAVE DONE for the same attempt with different digests, before the
 * node holds the whole result: the second contradicts the first. It is
 * logged (the node cannot tell which peer lies, so it drops neither); each
 * is its sender's vote, and the node's own vote decides between them once
 * its result is whole: it completes with its bytes, Y, fetching nothing,
 *   0  when lo1 said DONE with Y, then lo2 with Z;
 *   1  when lo1 said DONE with Z, then lo2 with Y.
 */
static void test_node_equivocation_done_contradiction(void **state) {
  (void)state;
  for (int tc = 0; tc <= 1; tc++) {
    eq_round e;
    eq_start(&e, 2, 1); /* Z */
    e.t.log_want = "with other bytes";
    swarm_feed(&e.t, &e.sw, true);
    send_have(&e.t, e.lo1, 0, e.A, 0, DED_HAVE_F_DONE, tc == 0 ? e.sw.digest : e.other_digest);
    assert_int_equal(e.t.log_hits, 0);
    send_have(&e.t, e.lo2, 0, e.A, 0, DED_HAVE_F_DONE, tc == 0 ? e.other_digest : e.sw.digest);
    if (e.t.log_hits != 1) fail_msg("case %d: %u contradictions logged, not 1", tc, e.t.log_hits);
    expect_none_dropped(&e);
    expect_not_done(&e);
    swarm_feed_last(&e.t, &e.sw);
    expect_done_with(&e, e.sw.g);
    expect_fetches_only(&e, e.lo1, 0);
    expect_fetches_only(&e, e.lo2, 0);
    assert_int_equal(e.t.log_hits, 1);
    expect_none_dropped(&e);
    ded_node_free(e.t.node);
  }
}

/*
 * A frozen attempt does not fetch again: it waits for the newer view's
 * decision. lo1 < lo2 < node; lo2 sends the node X for its shard, and the
 * node, holding X, accepts it in view 0; lo1 probes it into view 3 (its
 * report: acc_view 0). Then lo2 and lo1 vote Y in view 0, a quorum: the
 * node's bytes are not the round's, but the attempt is frozen, so it
 * fetches nothing and reports nothing. When lo1 decides in view 3 that
 * the attempt stands, the node accepts it again (HAVE of view 3, still
 * with X's digest), sees that view 0's quorum holds Y, fetches from lo2
 * (the first voter of Y) and completes with Y.
 */
static void test_node_equivocation_frozen_waits(void **state) {
  (void)state;
  eq_round e;
  eq_start(&e, 2, 1);
  swarm_feed_with(&e.t, &e.sw, e.other, false);
  size_t len;
  free(tnode_output_on(&e.t, e.lo2, &len, e.t.now));
  free(tnode_output_on(&e.t, e.lo1, &len, e.t.now));
  send_probe(&e.t, e.lo1, 0, 3);
  uint32_t view = 0;
  assert_true(eq_reported(&e, e.lo1, &view));
  assert_int_equal(view, 3);
  send_have(&e.t, e.lo2, 0, e.A, 0, 0, e.sw.digest);
  send_have(&e.t, e.lo1, 0, e.A, 0, 0, e.sw.digest);
  expect_not_done(&e);
  expect_fetches_only(&e, e.lo2, 0);
  const uint16_t holders[3] = {0, 1, 2};
  send_decide(&e.t, e.lo1, 3, 0, &e.sw.c, holders);
  expect_not_done(&e);
  uint8_t *out = tnode_output_on(&e.t, e.lo2, &len, e.t.now);
  expect_have(out, len, 0, e.A, 3, 0, e.other_digest);
  if (frame_count(out, len, DED_MSG_FETCH) != 2)
    fail_msg("%d FETCHes to lo2 after view 3's decision, not 2 (its bytes are not view 0's "
             "quorum's)", frame_count(out, len, DED_MSG_FETCH));
  free(out);
  expect_fetches_only(&e, e.lo2, 0);
  eq_send_shard(&e, e.lo2, 0, e.sw.g);
  eq_send_shard(&e, e.lo2, 1, e.sw.g);
  expect_done_with(&e, e.sw.g);
  assert_true(e.t.last.recoveries >= 1);
  expect_none_dropped(&e);
  ded_node_free(e.t.node);
}

/*
 * A quorum's bytes win over one peer's word. lo1 < lo2 < node, all honest
 * but lo2: the node holds Y, the mean, and votes it; lo2 says DONE with
 * the digest of Z, other bytes, before the node holds its whole result;
 * lo1 votes Y. With the node's own vote that is a quorum (two of three)
 * for Y, which lo1 completes with, and no honest member can have
 * completed with Z (quorums intersect): the node completes with Y, and
 * the Z lo2 sends afterwards changes nothing.
 */
static void test_node_equivocation_quorum_beats_done(void **state) {
  (void)state;
  eq_round e;
  eq_start(&e, 2, 1); /* Z */
  swarm_feed(&e.t, &e.sw, true);
  send_have(&e.t, e.lo2, 0, e.A, 0, DED_HAVE_F_DONE, e.other_digest);
  send_have(&e.t, e.lo1, 0, e.A, 0, 0, e.sw.digest);
  swarm_feed_last(&e.t, &e.sw); /* whole: Y, and a quorum for Y */
  /* Whatever it asks for, lo2 sends Z. */
  eq_send_shard(&e, e.lo2, 0, e.other);
  eq_send_shard(&e, e.lo2, 1, e.other);
  expect_done_with(&e, e.sw.g);
  ded_node_free(e.t.node);
}

/*
 * A member that cannot count a quorum itself takes a completer's word for
 * the round's bytes. The node comes late: lo < node < hi, lo coordinates
 * an attempt of lo (weight 3) and hi (weight 1) that leaves the node out,
 * and says by DECIDE that it stands; the node fetches shard 0 from lo and
 * shard 1 from hi, and, whole, says so to both (HAVE with its digest).
 * Y is the mean both hold; hi then says DONE with Y's digest, and
 *   0  lo had sent the node other bytes for its shard, X: the node does
 *      not complete with X; it fetches both shards again from hi, the one
 *      that said DONE with Y (from lo nothing), and completes with Y;
 *   1  lo had sent Y: the node completes at once, fetching nothing.
 * Either way it completes late, its buffer EQ_NL Y bit for bit.
 */
static void test_node_equivocation_late_member_done(void **state) {
  (void)state;
  for (int tc = 0; tc <= 1; tc++) {
    float buf[COUNT], *bufs[1] = {buf};
    for (int i = 0; i < COUNT; i++) buf[i] = (float)(i + 1);
    tnode t;
    tnode_start(&t, bufs, 1, 1.0, EQ_NL);
    ded_ident lo, hi;
    peers_around(&t, &lo, &hi);
    send_hello(&t, 0, &lo, RUN);
    const unsigned c_hi = tnode_accept(&t);
    send_hello(&t, c_hi, &hi, RUN);
    assert_false(t.closed[0] || t.closed[c_hi]);
    size_t len;
    free(tnode_output_on(&t, 0, &len, t.now));
    free(tnode_output_on(&t, c_hi, &len, t.now));
    ded_msg_member m[2];
    member_set(&m[0], lo.id, 3.0, 1, 0);
    member_set(&m[1], hi.id, 1.0, 1, COUNT / 2);
    const uint64_t attempt = attempt_of(0, lo.id);
    ded_msg_commit c = commit_of(0, attempt, 0, m, 2);
    const uint16_t holders[2] = {0, 1};
    send_decide(&t, 0, 0, DED_DECIDE_F_CHOSEN, &c, holders);
    assert_false(t.closed[0]);
    assert_int_equal(tn_fetches(&t, 0, attempt, 2), 0x1u);
    assert_int_equal(tn_fetches(&t, c_hi, attempt, 2), 0x2u);
    float g[COUNT], x[COUNT];
    for (int i = 0; i < COUNT; i++) {
      g[i] = 0.75f * (float)i - 3.0f;
      x[i] = i < COUNT / 2 ? g[i] + 1000.0f : g[i];
    }
    uint8_t dg[DED_RESULT_DIGEST_BYTES], dx[DED_RESULT_DIGEST_BYTES];
    result_digest(g, dg);
    result_digest(x, dx);
    const float *from_lo = tc == 0 ? x : g;
    send_chunks(&t, 0, DED_MSG_RESULT, 0, attempt, 0, from_lo, COUNT / 2);
    send_chunks(&t, c_hi, DED_MSG_RESULT, 0, attempt, COUNT / 2, g + COUNT / 2, COUNT / 2);
    assert_int_equal(t.rounds_done, 0);
    /* Whole: it says so to both members, with the digest of what it holds. */
    uint8_t *out = tnode_output_on(&t, 0, &len, t.now);
    expect_have(out, len, 0, attempt, 0, 0, tc == 0 ? dx : dg);
    free(out);
    out = tnode_output_on(&t, c_hi, &len, t.now);
    expect_have(out, len, 0, attempt, 0, 0, tc == 0 ? dx : dg);
    free(out);
    send_have(&t, c_hi, 0, attempt, 0, DED_HAVE_F_DONE, dg);
    if (tc == 0) {
      if (t.rounds_done != 0) fail_msg("a late member completed with bytes a completer disowned");
      assert_int_equal(tn_fetches(&t, 0, attempt, 2), 0);
      unsigned got = tn_fetches(&t, c_hi, attempt, 2);
      if (got != 0x3u) fail_msg("FETCHes to hi (the DONE sender): shards 0x%x, not 0x3", got);
      send_chunks(&t, c_hi, DED_MSG_RESULT, 0, attempt, 0, g, COUNT / 2);
      assert_int_equal(t.rounds_done, 0);
      send_chunks(&t, c_hi, DED_MSG_RESULT, 0, attempt, COUNT / 2, g + COUNT / 2, COUNT / 2);
    }
    if (t.rounds_done != 1) fail_msg("case %d: the late member did not complete", tc);
    assert_int_equal(t.last.status, 0);
    assert_true(t.last.late);
    assert_false(t.last.alone);
    assert_int_equal(t.last.contributors, 2);
    float want[COUNT];
    for (int i = 0; i < COUNT; i++) want[i] = (float)EQ_NL * g[i];
    assert_memory_equal(buf, want, sizeof want);
    assert_int_equal(tn_fetches(&t, 0, attempt, 2), 0);
    assert_int_equal(tn_fetches(&t, c_hi, attempt, 2), 0);
    assert_false(t.closed[0] || t.closed[c_hi]);
    ded_node_free(t.node);
  }
}

/* How many HAVEs with the done flag |out| holds. */
static int haves_done(const uint8_t *out, size_t len) {
  int n = 0;
  ded_frame fr;
  for (int i = 0; frame_find(out, len, DED_MSG_HAVE, i, &fr); i++) {
    ded_msg_have h;
    assert_int_equal(ded_msg_have_decode(fr.payload, fr.len, &h), 0);
    n += (h.flags & DED_HAVE_F_DONE) != 0;
  }
  return n;
}

/*
 * A round that ends at its bound is not the round's result here, and is
 * never served as one. lo1 < lo2 < node; lo2 sends the node X for its
 * shard, lo2 and lo1 vote Y: the node asks lo2, which sends X again, then
 * lo1 (for every shard, its own too), which
 *   0  is gone;
 *   1  sends X too.
 * No holder is left: the node fails over once, then waits. Just before
 * the round's bound (10 s from its submission) it has reported nothing;
 * at the bound it reports alone and late, its buffer as it was. Then lo2's
 * HAVE for the attempt gets no HAVE DONE, and lo2's FETCH of any shard of
 * it no RESULT: X is not kept, nor said to be the round's.
 */
static void test_node_equivocation_bound_not_served(void **state) {
  (void)state;
  for (int tc = 0; tc <= 1; tc++) {
    eq_round e;
    eq_start(&e, 2, 1);
    swarm_feed_with(&e.t, &e.sw, e.other, false);
    uint8_t d[DED_RESULT_DIGEST_BYTES];
    tnode_have_digest(&e.t, e.lo1, 0, e.A, d);
    assert_memory_equal(d, e.other_digest, sizeof d);
    send_have(&e.t, e.lo2, 0, e.A, 0, 0, e.sw.digest);
    send_have(&e.t, e.lo1, 0, e.A, 0, 0, e.sw.digest);
    expect_not_done(&e);
    expect_fetches_only(&e, e.lo2, 0x3u);
    eq_send_shard(&e, e.lo2, 0, e.other);
    eq_send_shard(&e, e.lo2, 1, e.other);
    expect_not_done(&e);
    expect_fetches_only(&e, e.lo1, 0x7u); /* its own shard too, now */
    if (tc == 0) {
      ded_node_conn_closed(e.t.node, e.t.conn[e.lo1], DED_ERR_PEER_LOST, e.t.now);
    } else {
      for (unsigned m = 0; m < 3; m++) eq_send_shard(&e, e.lo1, m, e.other);
    }
    expect_not_done(&e);
    uint32_t view = 0;
    if (!eq_reported(&e, e.lo2, &view)) fail_msg("case %d: no failover without a holder", tc);
    assert_int_equal(view, 1);
    tnode_advance(&e.t, NOW_NS + 10 * SEC_NS - 200 * MS_NS - e.t.now);
    expect_not_done(&e);
    tnode_advance(&e.t, 400 * MS_NS);
    if (e.t.rounds_done != 1)
      fail_msg("case %d: %d reports at the bound, not 1", tc, e.t.rounds_done);
    assert_int_equal(e.t.last.status, 0);
    assert_true(e.t.last.alone);
    assert_true(e.t.last.late);
    assert_memory_equal(e.buf, e.orig, sizeof e.buf);
    size_t len;
    for (unsigned c = 0; c < e.t.nconn; c++) free(tnode_output_on(&e.t, c, &len, e.t.now));
    /* Asked, it does not say it completed, with any bytes. */
    send_have(&e.t, e.lo2, 0, e.A, 0, 0, e.sw.digest);
    send_have(&e.t, e.lo2, 0, e.A, 1, 0, e.other_digest);
    uint8_t *out = tnode_output_on(&e.t, e.lo2, &len, e.t.now);
    if (haves_done(out, len) != 0)
      fail_msg("case %d: a round reported at its bound answered HAVE with DONE", tc);
    free(out);
    /* Nor does it serve any shard of the attempt, its own included. */
    for (uint16_t s = 0; s < e.sw.k; s++) {
      send_fetch(&e.t, e.lo2, 0, e.A, s);
      out = tnode_output_on(&e.t, e.lo2, &len, e.t.now);
      if (frame_count(out, len, DED_MSG_RESULT) != 0)
        fail_msg("case %d: shard %u of a round reported at its bound served (%d RESULTs)", tc,
                 (unsigned)s, frame_count(out, len, DED_MSG_RESULT));
      free(out);
    }
    assert_false(e.t.closed[e.lo2]);
    assert_int_equal(e.t.rounds_done, 1);
    ded_node_free(e.t.node);
  }
}

/*
 * A HAVE DONE replaces its sender's earlier vote in that view. lo1 < lo2
 * < node, three acceptors; the node holds Y (the mean) and votes Y, lo2
 * votes Y' (other bytes) with a plain HAVE,
 *   0  before the node holds its result;
 *   1  after;
 * lo1 says nothing: one vote each, no quorum, and the node neither
 * completes nor fetches. lo2 then says DONE with Y in view 0: its vote is
 * Y now, with the node's own a quorum (two of three) for Y, and the node
 * completes with Y, fetching nothing.
 */
static void test_node_equivocation_done_replaces_vote(void **state) {
  (void)state;
  for (int tc = 0; tc <= 1; tc++) {
    eq_round e;
    eq_start(&e, 2, 1); /* Y' */
    if (tc == 0) send_have(&e.t, e.lo2, 0, e.A, 0, 0, e.other_digest);
    swarm_feed(&e.t, &e.sw, false);
    if (tc == 1) send_have(&e.t, e.lo2, 0, e.A, 0, 0, e.other_digest);
    uint8_t d[DED_RESULT_DIGEST_BYTES];
    tnode_have_digest(&e.t, e.lo2, 0, e.A, d);
    assert_memory_equal(d, e.sw.digest, sizeof d);
    expect_not_done(&e);
    expect_fetches_only(&e, e.lo1, 0);
    send_have(&e.t, e.lo2, 0, e.A, 0, DED_HAVE_F_DONE, e.sw.digest);
    expect_done_with(&e, e.sw.g);
    expect_fetches_only(&e, e.lo1, 0);
    expect_none_dropped(&e);
    ded_node_free(e.t.node);
  }
}

/*
 * While the node fetches the round's bytes again from a holder, RESULTs
 * of other plan members are ignored: neither taken nor a protocol error.
 * lo1 < lo2 < node; lo2 sends the node X for its shard and votes Y; lo1
 * says DONE with Y: a quorum for Y, and lo1, the completer, is the
 * holder; the node asks it for shards 0 and 1. lo2 sends both, Z (other
 * bytes yet): the node takes neither (it is not done, asks no one else,
 * and drops no one); once lo1's shards are in it completes with Y.
 */
static void test_node_equivocation_refetch_ignores_others(void **state) {
  (void)state;
  eq_round e;
  eq_start(&e, 2, 1);
  swarm_feed_with(&e.t, &e.sw, e.other, false);
  uint8_t d[DED_RESULT_DIGEST_BYTES];
  tnode_have_digest(&e.t, e.lo1, 0, e.A, d);
  assert_memory_equal(d, e.other_digest, sizeof d);
  send_have(&e.t, e.lo2, 0, e.A, 0, 0, e.sw.digest);
  expect_not_done(&e);
  expect_fetches_only(&e, e.lo1, 0);
  send_have(&e.t, e.lo1, 0, e.A, 0, DED_HAVE_F_DONE, e.sw.digest);
  expect_not_done(&e);
  expect_fetches_only(&e, e.lo1, 0x3u);
  float z[COUNT];
  memcpy(z, e.sw.g, sizeof z);
  for (uint64_t i = 0; i < e.sw.m[e.sw.me].shard_off; i++) z[i] -= 500.0f;
  eq_send_shard(&e, e.lo2, 0, z);
  eq_send_shard(&e, e.lo2, 1, z);
  expect_none_dropped(&e);
  expect_not_done(&e);
  expect_fetches_only(&e, e.lo1, 0);
  eq_send_shard(&e, e.lo1, 0, e.sw.g);
  expect_not_done(&e);
  eq_send_shard(&e, e.lo1, 1, e.sw.g);
  expect_done_with(&e, e.sw.g);
  expect_fetches_only(&e, e.lo1, 0);
  expect_none_dropped(&e);
  ded_node_free(e.t.node);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_node_equivocation_refetch),
      cmocka_unit_test(test_node_equivocation_holders_in_turn),
      cmocka_unit_test(test_node_equivocation_own_shard),
      cmocka_unit_test(test_node_equivocation_split_votes),
      cmocka_unit_test(test_node_equivocation_done_digest),
      cmocka_unit_test(test_node_equivocation_done_contradiction),
      cmocka_unit_test(test_node_equivocation_frozen_waits),
      cmocka_unit_test(test_node_equivocation_quorum_beats_done),
      cmocka_unit_test(test_node_equivocation_late_member_done),
      cmocka_unit_test(test_node_equivocation_bound_not_served),
      cmocka_unit_test(test_node_equivocation_done_replaces_vote),
      cmocka_unit_test(test_node_equivocation_refetch_ignores_others),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
