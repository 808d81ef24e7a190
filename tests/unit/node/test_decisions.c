/*
 * test_decisions.c: decisions and their source, against scripted peers
 * (harness.h). A COMMIT counts only for the view the node joined and only
 * from the coordinator it joined; DATA and RESULT count only for the
 * attempt of that COMMIT.
 */
#include "harness.h"

/* ------------------------------------------- decisions and their source */

/*
 * A COMMIT is taken only for the view the member joined: its attempt's
 * high 32 bits. One of another view is moot (ignored, the peer stays);
 * one for a round the node never started is a lie (the peer goes).
 */
static void test_node_commit_of_other_view_ignored(void **state) {
  (void)state;
  float buf[COUNT], *bufs[1] = {buf};
  for (int i = 0; i < COUNT; i++) buf[i] = (float)(i + 1);
  tnode t;
  tnode_start(&t, bufs, 1, 1.0, 1);
  ded_ident lo, hi;
  peers_around(&t, &lo, &hi);
  send_hello(&t, 0, &lo, RUN);
  size_t len;
  free(tnode_output(&t, &len, NOW_NS));
  ded_msg_member m[2];
  member_set(&m[0], lo.id, 1.0, 1, 0);
  member_set(&m[1], t.ident.id, 1.0, 1, COUNT / 2);
  const uint32_t views[] = {1, 2, UINT32_MAX};
  for (size_t v = 0; v < sizeof views / sizeof views[0]; v++) {
    ded_msg_commit c = commit_of(0, attempt_of(views[v], lo.id), 0, m, 2);
    send_commit(&t, 0, &c);
    assert_false(t.closed[0]);
    uint8_t *out = tnode_output(&t, &len, NOW_NS);
    if (frame_count(out, len, DED_MSG_DATA) != 0)
      fail_msg("the node ran a COMMIT of view %u after joining view 0", views[v]);
    free(out);
  }
  /* View 0: taken. */
  const uint64_t attempt = attempt_of(0, lo.id);
  ded_msg_commit c = commit_of(0, attempt, 0, m, 2);
  send_commit(&t, 0, &c);
  uint8_t *out = tnode_output(&t, &len, NOW_NS);
  assert_int_equal(frame_count(out, len, DED_MSG_DATA), 2);
  expect_data(out, len, DED_MSG_DATA, 0, 0, attempt, 0, buf, CHUNK);
  free(out);
  /* Once running, the same COMMIT again is moot too. */
  send_commit(&t, 0, &c);
  assert_false(t.closed[0]);
  out = tnode_output(&t, &len, NOW_NS);
  assert_int_equal(frame_count(out, len, DED_MSG_DATA), 0);
  free(out);
  /* A COMMIT for a round nobody asked about. */
  c.round = 5;
  send_commit(&t, 0, &c);
  assert_true(t.closed[0]);
  ded_node_free(t.node);
}

/*
 * Two peers below the node: it joins the genesis round at the first one
 * it sees (lo2), and a COMMIT from anyone else (lo1) is not its decision,
 * not even with the node listed. lo2 then redirects it to lo1, the
 * smaller id (REDIRECT carries the view); after that lo1's COMMIT is the
 * one, and lo2's is ignored. A redirect "upwards" (to an id not smaller
 * than the sender's) from the coordinator is a protocol error.
 */
static void test_node_commit_only_from_joined_coordinator(void **state) {
  (void)state;
  float buf[COUNT], *bufs[1] = {buf};
  for (int i = 0; i < COUNT; i++) buf[i] = (float)(i + 1);
  tnode t;
  tnode_start(&t, bufs, 1, 1.0, 1);
  ded_ident lo1, lo2;
  peers_below(&t, &lo1, &lo2);
  send_hello(&t, 0, &lo2, RUN);
  size_t len;
  uint8_t *out = tnode_output_on(&t, 0, &len, NOW_NS);
  ded_msg_join j;
  assert_true(output_has_join(out, len, 0, &j));
  assert_int_equal(j.view, 0);
  free(out);
  unsigned c1 = tnode_accept(&t);
  send_hello(&t, c1, &lo1, RUN);
  out = tnode_output_on(&t, c1, &len, NOW_NS);
  assert_false(output_has_join(out, len, 0, NULL)); /* still joined at lo2 */
  free(out);

  ded_msg_member m1[2];
  member_set(&m1[0], lo1.id, 1.0, 1, 0);
  member_set(&m1[1], t.ident.id, 1.0, 1, COUNT / 2);
  ded_msg_commit c1c = commit_of(0, attempt_of(0, lo1.id), 0, m1, 2);
  send_commit(&t, c1, &c1c);
  assert_false(t.closed[c1]);
  out = tnode_output_on(&t, c1, &len, NOW_NS);
  assert_int_equal(frame_count(out, len, DED_MSG_DATA), 0);
  free(out);

  /* lo2 sends the node on to lo1. */
  uint8_t rf[DED_REDIRECT_FRAME_BYTES];
  ded_wr w = ded_wr_init(rf, sizeof rf);
  ded_msg_redirect rd = {.round = 0, .view = 0};
  memcpy(rd.id, lo1.id, DED_ID_BYTES);
  ded_msg_redirect_encode(&w, &rd);
  send_raw(&t, 0, rf, w.pos);
  assert_false(t.closed[0]);
  out = tnode_output_on(&t, c1, &len, NOW_NS);
  assert_true(output_has_join(out, len, 0, &j));
  assert_int_equal(j.view, 0);
  assert_int_equal(j.flags, DED_JOIN_F_GENESIS);
  free(out);

  /* lo2's COMMIT now is not the node's decision. */
  ded_msg_member m2[2];
  member_set(&m2[0], lo2.id, 1.0, 1, 0);
  member_set(&m2[1], t.ident.id, 1.0, 1, COUNT / 2);
  ded_msg_commit c2c = commit_of(0, attempt_of(0, lo2.id), 0, m2, 2);
  send_commit(&t, 0, &c2c);
  assert_false(t.closed[0]);
  out = tnode_output_on(&t, 0, &len, NOW_NS);
  assert_int_equal(frame_count(out, len, DED_MSG_DATA), 0);
  free(out);
  /* lo1's is. */
  send_commit(&t, c1, &c1c);
  out = tnode_output_on(&t, c1, &len, NOW_NS);
  assert_int_equal(frame_count(out, len, DED_MSG_DATA), 2);
  expect_data(out, len, DED_MSG_DATA, 0, 0, c1c.attempt, 0, buf, CHUNK);
  free(out);
  ded_node_free(t.node);

  /* A coordinator redirecting to an id above its own. */
  tnode_start(&t, bufs, 1, 1.0, 1);
  send_hello(&t, 0, &lo1, RUN);
  free(tnode_output_on(&t, 0, &len, NOW_NS));
  memcpy(rd.id, lo2.id, DED_ID_BYTES);
  w = ded_wr_init(rf, sizeof rf);
  ded_msg_redirect_encode(&w, &rd);
  send_raw(&t, 0, rf, w.pos);
  assert_true(t.closed[0]);
  ded_node_free(t.node);
}

/*
 * The rendezvous (two peers) is met by a peer above the node, so the node
 * coordinates the first round itself; then a peer below it takes part.
 * Undecided, the node joins that peer's rendezvous (as a REDIRECT from
 * itself would tell a joiner), or each would wait for the other's.
 */
static void test_node_genesis_retarget_to_smaller(void **state) {
  (void)state;
  float buf[COUNT], *bufs[1] = {buf};
  for (int i = 0; i < COUNT; i++) buf[i] = (float)(i + 1);
  tnode t;
  tnode_start(&t, bufs, 1, 1.0, 1);
  ded_ident hi, lo, spare;
  unsigned found = 0;
  for (unsigned s = 1; s < 256 && found < 1; s++) {
    unit_ident(&hi, (uint8_t)s);
    found += memcmp(hi.id, t.ident.id, DED_ID_BYTES) > 0;
  }
  assert_int_equal(found, 1);
  peers_below(&t, &lo, &spare);
  send_hello(&t, 0, &hi, RUN);
  size_t len;
  uint8_t *out = tnode_output_on(&t, 0, &len, NOW_NS);
  assert_false(output_has_join(out, len, 0, NULL)); /* it coordinates: no JOIN to hi */
  free(out);
  tnode_advance(&t, 100 * MS_NS);
  unsigned c1 = tnode_accept(&t);
  send_hello(&t, c1, &lo, RUN);
  tnode_advance(&t, 100 * MS_NS);
  out = tnode_output_on(&t, c1, &len, t.now);
  ded_msg_join j;
  assert_true(output_has_join(out, len, 0, &j));
  assert_int_equal(j.round, 0);
  assert_int_equal(j.view, 0);
  assert_int_equal(j.flags, DED_JOIN_F_GENESIS);
  free(out);
  ded_node_free(t.node);
}

/*
 * Every DATA and RESULT must carry the attempt of the COMMIT: frames of an
 * older attempt are moot, frames of a newer one wait for its commit; none
 * of them is added or counted. Only the frames of the attempt finish the
 * round.
 */
static void test_node_frames_of_other_attempts_not_counted(void **state) {
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
  const uint64_t attempt = attempt_of(0, lo.id) + 0x100; /* low bits are the coordinator's business */
  ded_msg_commit c = commit_of(0, attempt, 0, m, 2);
  send_commit(&t, 0, &c);
  size_t len;
  free(tnode_output(&t, &len, NOW_NS));
  float x[COUNT], junk[COUNT], g[COUNT];
  for (int i = 0; i < COUNT; i++) {
    x[i] = 0.5f * (float)i;
    junk[i] = -1000.0f;
  }
  for (int i = 0; i < COUNT / 2; i++) g[i] = (float)i;
  for (int i = COUNT / 2; i < COUNT; i++) g[i] = (x[i] + buf[i]) / 2.0f;
  const uint64_t others[] = {attempt - 1, 0, attempt + 1, attempt_of(1, lo.id)};
  for (size_t a = 0; a < sizeof others / sizeof others[0]; a++) {
    send_chunks(&t, 0, DED_MSG_DATA, 0, others[a], COUNT / 2, junk, COUNT / 2);
    send_chunks(&t, 0, DED_MSG_RESULT, 0, others[a], 0, junk, COUNT / 2);
    assert_false(t.closed[0]);
    uint8_t *out = tnode_output(&t, &len, NOW_NS);
    if (frame_count(out, len, DED_MSG_RESULT) != 0)
      fail_msg("DATA of attempt %llx reduced under attempt %llx", (unsigned long long)others[a],
               (unsigned long long)attempt);
    free(out);
    assert_int_equal(t.rounds_done, 0);
  }
  /* The right attempt: the node's shard is reduced from x, not from junk. */
  send_chunks(&t, 0, DED_MSG_DATA, 0, attempt, COUNT / 2, x + COUNT / 2, COUNT / 2);
  uint8_t *out = tnode_output(&t, &len, NOW_NS);
  for (int k = 0; k < 2; k++)
    expect_data(out, len, DED_MSG_RESULT, k, 0, attempt, COUNT / 2 + CHUNK * k,
                g + COUNT / 2 + CHUNK * k, CHUNK);
  free(out);
  assert_int_equal(t.rounds_done, 0);
  assert_memory_equal(buf, orig, sizeof orig);
  /* The peer (the primary) holds the whole result once ours came; its
   * HAVE for the other attempts counts for nothing, its HAVE for ours is
   * remembered until the node holds the result too. */
  uint8_t d[DED_RESULT_DIGEST_BYTES];
  result_digest(g, d);
  for (size_t a = 0; a < sizeof others / sizeof others[0]; a++)
    if (others[a] != 0) send_have(&t, 0, 0, others[a], 0, 0, d);
  send_have(&t, 0, 0, attempt, 0, 0, d);
  assert_int_equal(t.rounds_done, 0);
  send_chunks(&t, 0, DED_MSG_RESULT, 0, attempt, 0, g, COUNT / 2);
  assert_int_equal(t.rounds_done, 1);
  assert_int_equal(t.last.status, 0);
  assert_memory_equal(buf, g, sizeof g);
  assert_false(t.closed[0]);
  ded_node_free(t.node);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_node_commit_of_other_view_ignored),
      cmocka_unit_test(test_node_commit_only_from_joined_coordinator),
      cmocka_unit_test(test_node_genesis_retarget_to_smaller),
      cmocka_unit_test(test_node_frames_of_other_attempts_not_counted),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
