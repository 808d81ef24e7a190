/*
 * test_serve.c: results fetched and served, against scripted peers
 * (harness.h): a member left out of the COMMIT fetches the attempt's
 * result from the reducers; the node serves rounds it finished, and
 * fetches of its shard while it is still being reduced, or before the
 * COMMIT reached it.
 */
#include "harness.h"

/* A member that joined but is not listed, its buffer matching the round's:
 * it contributes nothing and fetches the attempt's result from the
 * reducers (FETCH per shard), then reports late with n_j * g. It is no
 * acceptor: it completes once the acceptor (the peer, alone in the
 * attempt) answers its HAVE with HAVE DONE and the digest of its bytes,
 * even if the DECIDE that told it says the attempt was chosen (what a
 * coordinator that finished the round answers a late JOIN with): that
 * says which attempt, not which bytes. */
static void test_node_not_listed_fetches_result(void **state) {
  (void)state;
  for (int by_decide = 0; by_decide <= 2; by_decide++) {
    float buf[COUNT], *bufs[1] = {buf};
    for (int i = 0; i < COUNT; i++) buf[i] = (float)(i + 1);
    tnode t;
    tnode_start(&t, bufs, 1, 1.0, 2);
    ded_ident lo, hi;
    peers_around(&t, &lo, &hi);
    send_hello(&t, 0, &lo, RUN);
    size_t len;
    free(tnode_output(&t, &len, NOW_NS));
    ded_msg_member m[1];
    member_set(&m[0], lo.id, 3.0, 1, 0);
    const uint64_t attempt = attempt_of(0, lo.id);
    ded_msg_commit c = commit_of(0, attempt, 0, m, 1);
    if (by_decide) {
      /* The same told by a DECIDE: the attempt stands, lo holds shard 0. */
      const uint16_t holders[1] = {0};
      send_decide(&t, 0, 0, by_decide == 2 ? DED_DECIDE_F_CHOSEN : 0, &c, holders);
    } else {
      send_commit(&t, 0, &c);
    }
    assert_false(t.closed[0]);
    uint8_t *out = tnode_output(&t, &len, NOW_NS);
    assert_int_equal(frame_count(out, len, DED_MSG_DATA), 0);
    assert_int_equal(frame_count(out, len, DED_MSG_FETCH), 1);
    ded_frame fr;
    assert_true(frame_find(out, len, DED_MSG_FETCH, 0, &fr));
    ded_msg_fetch f;
    assert_int_equal(ded_msg_fetch_decode(fr.payload, fr.len, &f), 0);
    assert_int_equal(f.round, 0);
    assert_int_equal(f.attempt, attempt);
    assert_int_equal(f.shard, 0);
    free(out);
    float g[COUNT], want[COUNT];
    for (int i = 0; i < COUNT; i++) {
      g[i] = 0.75f * (float)i - 3.0f;
      want[i] = 2.0f * g[i];
    }
    send_chunks(&t, 0, DED_MSG_RESULT, 0, attempt, 0, g, COUNT - CHUNK);
    assert_int_equal(t.rounds_done, 0);
    send_chunks(&t, 0, DED_MSG_RESULT, 0, attempt, COUNT - CHUNK, g + COUNT - CHUNK, CHUNK);
    /* Its HAVE goes to the attempt's member; its own does not count, and
     * a DECIDE that says the attempt was chosen does not say with which
     * bytes: the acceptor's answer (HAVE DONE, its digest) does. */
    uint8_t d[DED_RESULT_DIGEST_BYTES];
    result_digest(g, d); /* of g, not of the caller's n_j * g */
    out = tnode_output(&t, &len, NOW_NS);
    expect_have(out, len, 0, attempt, 0, 0, d);
    free(out);
    assert_int_equal(t.rounds_done, 0);
    send_have(&t, 0, 0, attempt, 0, DED_HAVE_F_DONE, d);
    assert_int_equal(t.rounds_done, 1);
    assert_int_equal(t.last.status, 0);
    assert_true(t.last.late);
    assert_false(t.last.alone);
    assert_int_equal(t.last.contributors, 1);
    assert_true(t.last.total_weight == 3.0);
    assert_memory_equal(t.last_members[0], lo.id, DED_ID_BYTES);
    assert_memory_equal(buf, want, sizeof want);
    assert_false(t.closed[0]);
    ded_node_free(t.node);
  }
}

/*
 * After a round, the node serves its result from its history: a FETCH of
 * either shard of the attempt gets that shard's RESULT frames (g, under
 * the attempt); a FETCH of an attempt it does not hold gets STALE; a PROBE
 * for the round gets a report (JOIN with status: the attempt and every
 * shard held, and DONE: it completed the round with it) to the prober's
 * view.
 */
static void test_node_serves_finished_round(void **state) {
  (void)state;
  float buf[COUNT], *bufs[1] = {buf};
  for (int i = 0; i < COUNT; i++) buf[i] = (float)(i + 1);
  tnode t;
  tnode_start(&t, bufs, 1, 1.0, 2);
  peer_round pr;
  peer_coord_round(&t, buf, 2, &pr);
  assert_int_equal(t.rounds_done, 1);
  size_t len;
  for (uint16_t s = 0; s < 2; s++) {
    send_fetch(&t, 0, 0, pr.attempt, s);
    uint8_t *out = tnode_output(&t, &len, NOW_NS);
    assert_int_equal(frame_count(out, len, DED_MSG_RESULT), 2);
    for (int k = 0; k < 2; k++)
      expect_data(out, len, DED_MSG_RESULT, k, 0, pr.attempt, s * (COUNT / 2) + CHUNK * k,
                  pr.g + s * (COUNT / 2) + CHUNK * k, CHUNK);
    free(out);
  }
  /* An attempt of the round that is not the one that stood here. */
  send_fetch(&t, 0, 0, pr.attempt + 1, 0);
  uint8_t *out = tnode_output(&t, &len, NOW_NS);
  assert_int_equal(frame_count(out, len, DED_MSG_RESULT), 0);
  ded_frame fr;
  assert_true(frame_find(out, len, DED_MSG_STALE, 0, &fr));
  ded_msg_stale st;
  assert_int_equal(ded_msg_stale_decode(fr.payload, fr.len, &st), 0);
  assert_int_equal(st.round, 0);
  assert_true(st.next_round >= 1);
  free(out);
  assert_false(t.closed[0]);

  send_probe(&t, 0, 0, 1);
  out = tnode_output(&t, &len, NOW_NS);
  assert_true(frame_find(out, len, DED_MSG_JOIN, 0, &fr));
  unit_failmem fm;
  unit_failmem_init(&fm, -1);
  ded_msg_join j;
  assert_int_equal(ded_msg_join_decode(fr.payload, fr.len, &fm.mem, &j), 0);
  assert_int_equal(j.round, 0);
  assert_int_equal(j.view, 1);
  assert_true(j.flags & DED_JOIN_F_STATUS);
  assert_int_equal(j.n_local, 2);
  assert_true(j.weight == 1.0);
  assert_int_equal(j.plan.attempt, pr.attempt);
  assert_int_equal(j.plan.k, 2);
  assert_memory_equal(j.plan.members[1].id, t.ident.id, DED_ID_BYTES);
  assert_int_equal(j.have[0], 0x03);
  /* It completed the round with that attempt: the report says so. */
  assert_int_equal(j.flags, DED_JOIN_F_STATUS | DED_JOIN_F_DONE);
  assert_int_not_equal(j.acc_view, DED_VIEW_NONE);
  ded_msg_join_free(&j, &fm.mem);
  assert_int_equal(fm.live, 0);
  free(out);
  assert_false(t.closed[0]);
  ded_node_free(t.node);
}

/* The set-up of the two fetch tests: the node (buffer 1, 2, ..., one
 * rank) between lo (connection 0, the coordinator) and hi (the connection
 * returned, a late member that fetches), attempt |*A| of the two members
 * lo and the node (|m|, the node reducing the second half), the output so
 * far drained; with |commit|, lo's COMMIT of it is in too. Then hi asks
 * for the node's shard (FETCH), and nothing is answered yet: no RESULT
 * (nothing of the shard is finished), no STALE. */
static unsigned fetch_setup(tnode *t, float *buf, ded_msg_member m[2], uint64_t *A, bool commit) {
  static float *bufs[1];
  for (int i = 0; i < COUNT; i++) buf[i] = (float)(i + 1);
  bufs[0] = buf;
  tnode_start(t, bufs, 1, 1.0, 1);
  ded_ident lo, hi;
  peers_around(t, &lo, &hi);
  send_hello(t, 0, &lo, RUN);
  unsigned ch = tnode_accept(t);
  send_hello(t, ch, &hi, RUN);
  member_set(&m[0], lo.id, 1.0, 1, 0);
  member_set(&m[1], t->ident.id, 1.0, 1, COUNT / 2);
  *A = attempt_of(0, lo.id);
  if (commit) {
    ded_msg_commit c = commit_of(0, *A, 0, m, 2);
    send_commit(t, 0, &c);
  }
  size_t len;
  free(tnode_output_on(t, 0, &len, NOW_NS));
  free(tnode_output_on(t, ch, &len, NOW_NS));
  send_fetch(t, ch, 0, *A, 1);
  uint8_t *out = tnode_output_on(t, ch, &len, NOW_NS);
  assert_int_equal(frame_count(out, len, DED_MSG_RESULT), 0);
  assert_int_equal(frame_count(out, len, DED_MSG_STALE), 0);
  free(out);
  return ch;
}

/*
 * A FETCH of the node's own shard while it is still being reduced (a late
 * member told by a DECIDE that the node is its holder) is answered chunk
 * by chunk as the shard is finished, on the fetcher's connection.
 */
static void test_node_serves_fetch_in_progress(void **state) {
  (void)state;
  float buf[COUNT];
  tnode t;
  ded_msg_member m[2];
  uint64_t A;
  unsigned ch = fetch_setup(&t, buf, m, &A, true);
  size_t len;
  uint8_t *out;
  float x[COUNT], g[COUNT];
  for (int i = 0; i < COUNT; i++) {
    x[i] = 9.0f - (float)i;
    g[i] = (x[i] + buf[i]) / 2.0f;
  }
  send_data(&t, 0, DED_MSG_DATA, 0, A, COUNT / 2, x + COUNT / 2, CHUNK);
  out = tnode_output_on(&t, ch, &len, NOW_NS);
  assert_int_equal(frame_count(out, len, DED_MSG_RESULT), 1);
  expect_data(out, len, DED_MSG_RESULT, 0, 0, A, COUNT / 2, g + COUNT / 2, CHUNK);
  free(out);
  send_data(&t, 0, DED_MSG_DATA, 0, A, COUNT / 2 + CHUNK, x + COUNT / 2 + CHUNK, CHUNK);
  out = tnode_output_on(&t, ch, &len, NOW_NS);
  assert_int_equal(frame_count(out, len, DED_MSG_RESULT), 1);
  expect_data(out, len, DED_MSG_RESULT, 0, 0, A, COUNT / 2 + CHUNK, g + COUNT / 2 + CHUNK, CHUNK);
  free(out);
  /* The reducer of the shard gets it too, as always. */
  out = tnode_output_on(&t, 0, &len, NOW_NS);
  assert_int_equal(frame_count(out, len, DED_MSG_RESULT), 2);
  free(out);
  assert_false(t.closed[0] || t.closed[ch]);
  ded_node_free(t.node);
}

/*
 * A FETCH that overtakes the attempt's COMMIT (a late member heard the
 * decision first, and the reducer's COMMIT is still on its way) is kept,
 * not dropped: nothing is sent for it then (no RESULT, no STALE), and once
 * the COMMIT is in, the shard goes to the fetcher chunk by chunk as it is
 * finished, as for a FETCH in progress. Dropped, the fetcher would wait a
 * whole progress wait for nothing and fail over.
 */
static void test_node_serves_fetch_before_commit(void **state) {
  (void)state;
  float buf[COUNT];
  tnode t;
  ded_msg_member m[2];
  uint64_t A;
  unsigned ch = fetch_setup(&t, buf, m, &A, false);
  size_t len;
  uint8_t *out;
  ded_msg_commit c = commit_of(0, A, 0, m, 2);
  send_commit(&t, 0, &c);
  free(tnode_output_on(&t, 0, &len, NOW_NS));
  float x[COUNT], g[COUNT];
  for (int i = 0; i < COUNT; i++) {
    x[i] = 9.0f - (float)i;
    g[i] = (x[i] + buf[i]) / 2.0f;
  }
  for (int k = 0; k < 2; k++)
    send_data(&t, 0, DED_MSG_DATA, 0, A, COUNT / 2 + CHUNK * k, x + COUNT / 2 + CHUNK * k, CHUNK);
  out = tnode_output_on(&t, ch, &len, NOW_NS);
  if (frame_count(out, len, DED_MSG_RESULT) != 2)
    fail_msg("%d RESULT frames for the FETCH that came before the COMMIT, not 2",
             frame_count(out, len, DED_MSG_RESULT));
  for (int k = 0; k < 2; k++)
    expect_data(out, len, DED_MSG_RESULT, k, 0, A, COUNT / 2 + CHUNK * k, g + COUNT / 2 + CHUNK * k,
                CHUNK);
  free(out);
  assert_false(t.closed[0] || t.closed[ch]);
  ded_node_free(t.node);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_node_not_listed_fetches_result),
      cmocka_unit_test(test_node_serves_finished_round),
      cmocka_unit_test(test_node_serves_fetch_in_progress),
      cmocka_unit_test(test_node_serves_fetch_before_commit),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
