/*
 * test_failover.c: failover against scripted peers (harness.h). A member
 * that loses its coordinator reports to the next view's, which decides
 * what stands; a PROBE in the middle of an attempt moves the round to a
 * later view.
 */
#include "harness.h"

/* ------------------------------------------------------------ failover */

/*
 * Three members lo1 < lo2 < node; lo1 coordinates and commits attempt A.
 * The node reduces its shard (the last) and has lo2's, when lo1 is lost
 * before its own shard's result arrived. The node stops the attempt and
 * reports to view 1's coordinator, member (0 + 1) % 3 of the lineage: lo2,
 * with a JOIN carrying A and the shards it holds (1 and 2). lo2 decides
 * that A stands (it holds shard 0): the node fetches shard 0 from lo2 and
 * completes A, with one recovery, never having touched the caller's
 * buffer before. DECIDEs of other views are not the node's decision.
 */
static void test_node_failover_decide(void **state) {
  (void)state;
  float buf[COUNT], orig[COUNT], *bufs[1] = {buf};
  for (int i = 0; i < COUNT; i++) buf[i] = (float)(2 * i + 1);
  memcpy(orig, buf, sizeof orig);
  tnode t;
  tnode_start(&t, bufs, 1, 1.0, 1);
  ded_ident lo1, lo2;
  peers_below(&t, &lo1, &lo2);
  send_hello(&t, 0, &lo1, RUN);
  unsigned c2 = tnode_accept(&t);
  send_hello(&t, c2, &lo2, RUN);
  size_t len;
  free(tnode_output_on(&t, 0, &len, NOW_NS));
  free(tnode_output_on(&t, c2, &len, NOW_NS));

  /* Shards: lo1 [0, 16), lo2 [16, 32), node [32, 64). */
  ded_msg_member m[3];
  member_set(&m[0], lo1.id, 1.0, 1, 0);
  member_set(&m[1], lo2.id, 1.0, 1, CHUNK);
  member_set(&m[2], t.ident.id, 1.0, 1, 2 * CHUNK);
  const uint64_t A = attempt_of(0, lo1.id);
  ded_msg_commit c = commit_of(0, A, 0, m, 3);
  send_commit(&t, 0, &c);
  uint8_t *out = tnode_output_on(&t, 0, &len, NOW_NS);
  expect_data(out, len, DED_MSG_DATA, 0, 0, A, 0, buf, CHUNK);
  free(out);
  out = tnode_output_on(&t, c2, &len, NOW_NS);
  expect_data(out, len, DED_MSG_DATA, 0, 0, A, CHUNK, buf + CHUNK, CHUNK);
  free(out);

  float x1[COUNT], x2[COUNT], g[COUNT];
  for (int i = 0; i < COUNT; i++) {
    x1[i] = 100.0f + (float)i;
    x2[i] = -3.0f * (float)i;
    g[i] = 0.125f * (float)i;
  }
  for (int i = 2 * CHUNK; i < COUNT; i++) {
    float acc = x1[i];
    acc += x2[i];
    acc += buf[i];
    g[i] = acc / 3.0f;
  }
  send_chunks(&t, 0, DED_MSG_DATA, 0, A, 2 * CHUNK, x1 + 2 * CHUNK, 2 * CHUNK);
  send_chunks(&t, c2, DED_MSG_DATA, 0, A, 2 * CHUNK, x2 + 2 * CHUNK, 2 * CHUNK);
  out = tnode_output_on(&t, c2, &len, NOW_NS);
  for (int k = 0; k < 2; k++)
    expect_data(out, len, DED_MSG_RESULT, k, 0, A, 2 * CHUNK + CHUNK * k, g + 2 * CHUNK + CHUNK * k,
                CHUNK);
  free(out);
  free(tnode_output_on(&t, 0, &len, NOW_NS));
  send_data(&t, c2, DED_MSG_RESULT, 0, A, CHUNK, g + CHUNK, CHUNK);
  assert_int_equal(t.rounds_done, 0);

  /* lo1 is lost before its shard's result came. */
  ded_node_conn_closed(t.node, t.conn[0], DED_ERR_PEER_LOST, NOW_NS);
  assert_int_equal(t.rounds_done, 0);
  out = tnode_output_on(&t, c2, &len, NOW_NS);
  ded_frame fr;
  if (!frame_find(out, len, DED_MSG_JOIN, 0, &fr)) fail_msg("no report to view 1's coordinator");
  unit_failmem fm;
  unit_failmem_init(&fm, -1);
  ded_msg_join j;
  assert_int_equal(ded_msg_join_decode(fr.payload, fr.len, &fm.mem, &j), 0);
  assert_int_equal(j.round, 0);
  assert_int_equal(j.view, 1);
  assert_true(j.flags & DED_JOIN_F_STATUS);
  assert_false(j.flags & DED_JOIN_F_GENESIS);
  assert_int_equal(j.plan.attempt, A);
  assert_int_equal(j.plan.k, 3);
  assert_int_equal(j.have[0], 0x06);
  assert_int_equal(j.acc_view, DED_VIEW_NONE); /* it never held the whole result */
  ded_msg_join_free(&j, &fm.mem);
  free(out);
  assert_memory_equal(buf, orig, sizeof orig);

  /* Decisions of views the node did not report to. */
  const uint16_t holders[3] = {1, 1, 2};
  send_decide(&t, c2, 0, 0, &c, holders);
  send_decide(&t, c2, 2, 0, &c, holders);
  assert_false(t.closed[c2]);
  out = tnode_output_on(&t, c2, &len, NOW_NS);
  assert_int_equal(frame_count(out, len, DED_MSG_FETCH), 0);
  free(out);
  /* View 1's: A stands; the node fetches what it lacks, shard 0. lo2
   * holds all of A and accepts it in view 1 (HAVE). */
  uint8_t d[DED_RESULT_DIGEST_BYTES];
  result_digest(g, d);
  send_decide(&t, c2, 1, 0, &c, holders);
  send_have(&t, c2, 0, A, 1, 0, d);
  out = tnode_output_on(&t, c2, &len, NOW_NS);
  assert_int_equal(frame_count(out, len, DED_MSG_FETCH), 1);
  assert_true(frame_find(out, len, DED_MSG_FETCH, 0, &fr));
  ded_msg_fetch f;
  assert_int_equal(ded_msg_fetch_decode(fr.payload, fr.len, &f), 0);
  assert_int_equal(f.round, 0);
  assert_int_equal(f.attempt, A);
  assert_int_equal(f.shard, 0);
  free(out);
  assert_int_equal(t.rounds_done, 0);
  assert_memory_equal(buf, orig, sizeof orig);
  /* With it, the node's own HAVE in view 1 makes two of three. */
  send_data(&t, c2, DED_MSG_RESULT, 0, A, 0, g, CHUNK);
  assert_int_equal(t.rounds_done, 1);
  out = tnode_output_on(&t, c2, &len, NOW_NS);
  expect_have(out, len, 0, A, 1, 0, d);
  free(out);
  assert_int_equal(t.last.status, 0);
  assert_int_equal(t.last.contributors, 3);
  assert_int_equal(t.last.recoveries, 1);
  assert_false(t.last.late);
  assert_memory_equal(t.last_members[0], lo1.id, DED_ID_BYTES);
  assert_memory_equal(t.last_members[1], lo2.id, DED_ID_BYTES);
  assert_memory_equal(t.last_members[2], t.ident.id, DED_ID_BYTES);
  assert_memory_equal(buf, g, sizeof g);
  assert_false(t.closed[c2]);
  ded_node_free(t.node);
}

/*
 * A PROBE in the middle of an attempt: the prober coordinates a later view
 * of the round (view 2 of two members [lo, node] is lo's again). The node
 * stops the attempt, reports it to lo with the shards it holds, and runs
 * the new attempt lo commits in view 2 instead, to the end.
 */
static void test_node_probe_mid_round(void **state) {
  (void)state;
  float buf[COUNT], orig[COUNT], *bufs[1] = {buf};
  for (int i = 0; i < COUNT; i++) buf[i] = (float)(i + 1);
  memcpy(orig, buf, sizeof orig);
  tnode t;
  tnode_start(&t, bufs, 1, 1.0, 1);
  ded_ident lo, hi;
  peers_around(&t, &lo, &hi);
  send_hello(&t, 0, &lo, RUN);
  ded_msg_member m[2];
  member_set(&m[0], lo.id, 1.0, 1, 0);
  member_set(&m[1], t.ident.id, 1.0, 1, COUNT / 2);
  const uint64_t A = attempt_of(0, lo.id);
  ded_msg_commit c = commit_of(0, A, 0, m, 2);
  send_commit(&t, 0, &c);
  float x[COUNT];
  for (int i = 0; i < COUNT; i++) x[i] = 4.0f + (float)i;
  send_chunks(&t, 0, DED_MSG_DATA, 0, A, COUNT / 2, x + COUNT / 2, COUNT / 2);
  size_t len;
  free(tnode_output(&t, &len, NOW_NS));

  send_probe(&t, 0, 0, 2);
  assert_false(t.closed[0]);
  uint8_t *out = tnode_output(&t, &len, NOW_NS);
  ded_frame fr;
  bool found = false;
  for (int i = 0; frame_find(out, len, DED_MSG_JOIN, i, &fr); i++) {
    ded_msg_join j;
    assert_int_equal(ded_msg_join_decode(fr.payload, fr.len, NULL, &j), 0);
    if (j.view == 2) {
      found = true;
      assert_int_equal(j.round, 0);
      assert_true(j.flags & DED_JOIN_F_STATUS);
      assert_int_equal(j.plan.attempt, A);
      assert_int_equal(j.have[0], 0x02); /* its own shard, reduced */
      assert_int_equal(j.acc_view, DED_VIEW_NONE);
      assert_false(j.flags & DED_JOIN_F_DONE);
    }
    ded_msg_join_free(&j, NULL);
  }
  free(out);
  if (!found) fail_msg("no report to view 2 after the PROBE");
  assert_int_equal(t.rounds_done, 0);

  /* View 2: a new attempt, the node alone on the first shard this time;
   * its acceptors are A's (the round's first attempt's members). */
  member_set(&m[0], lo.id, 1.0, 1, 0);
  member_set(&m[1], t.ident.id, 1.0, 1, CHUNK);
  const uint64_t B = attempt_of(2, lo.id);
  ded_msg_commit c2 = commit_of(0, B, 0, m, 2);
  send_commit(&t, 0, &c2);
  out = tnode_output(&t, &len, NOW_NS);
  assert_int_equal(frame_count(out, len, DED_MSG_DATA), 1);
  expect_data(out, len, DED_MSG_DATA, 0, 0, B, 0, buf, CHUNK);
  free(out);
  float g[COUNT];
  for (int i = 0; i < CHUNK; i++) g[i] = -(float)i;
  for (int i = CHUNK; i < COUNT; i++) g[i] = (x[i] + buf[i]) / 2.0f;
  send_chunks(&t, 0, DED_MSG_DATA, 0, B, CHUNK, x + CHUNK, COUNT - CHUNK);
  out = tnode_output(&t, &len, NOW_NS);
  assert_int_equal(frame_count(out, len, DED_MSG_RESULT), 3);
  for (int k = 0; k < 3; k++)
    expect_data(out, len, DED_MSG_RESULT, k, 0, B, CHUNK + CHUNK * k, g + CHUNK + CHUNK * k, CHUNK);
  free(out);
  assert_memory_equal(buf, orig, sizeof orig);
  /* lo (the primary) holds all of B once our RESULTs came: HAVE, view 2. */
  uint8_t d[DED_RESULT_DIGEST_BYTES];
  result_digest(g, d);
  send_have(&t, 0, 0, B, 2, 0, d);
  assert_int_equal(t.rounds_done, 0);
  send_data(&t, 0, DED_MSG_RESULT, 0, B, 0, g, CHUNK);
  assert_int_equal(t.rounds_done, 1);
  out = tnode_output(&t, &len, NOW_NS);
  expect_have(out, len, 0, B, 2, 0, d);
  free(out);
  assert_int_equal(t.last.status, 0);
  assert_true(t.last.recoveries >= 1);
  assert_memory_equal(buf, g, sizeof g);
  assert_false(t.closed[0]);
  ded_node_free(t.node);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_node_failover_decide),
      cmocka_unit_test(test_node_probe_mid_round),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
