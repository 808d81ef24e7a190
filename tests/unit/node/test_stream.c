/*
 * test_stream.c: rounds aligned by the gradient stream, against scripted
 * peers (harness.h). A decision shorter than the node's all-reduce
 * covers its first part; the rest is the next round, at the next stream
 * position; the all-reduce ends with the round that reports last. A
 * decision the node cannot take: longer than its offer, or at another
 * position (out of step: its own values), or of another step length or
 * type (another model: an error).
 */
#include "harness.h"

/* The node's JOIN of round |round| on connection |i|, consumed. */
static ded_msg_join stream_join(tnode *t, unsigned i, uint64_t round) {
  size_t len;
  uint8_t *out = tnode_output_on(t, i, &len, t->now);
  ded_msg_join j;
  assert_true(output_has_join(out, len, round, &j));
  free(out);
  return j;
}

/* A started node with one all-reduce of COUNT elements (step |step|) in
 * flight, joined at the genesis round of the peer |lo|, and the
 * coordinator's COMMIT of round 0 listing only the node, with |count|
 * elements at |pos|, step |cstep|. */
static void stream_commit0(tnode *t, float *buf, uint64_t step, uint64_t count, uint64_t pos,
                           uint64_t cstep, ded_ident *lo) {
  tnode_start(t, NULL, 0, 1.0, 1);
  ded_round_args a = {buf, COUNT, DED_DTYPE_F32, 1.0, 1, NULL, step};
  assert_int_equal(ded_node_round_submit(t->node, &a, t->now), 0);
  ded_ident hi;
  peers_around(t, lo, &hi);
  send_hello(t, 0, lo, RUN);
  ded_msg_join j = stream_join(t, 0, 0);
  assert_int_equal(j.pos, 0);
  assert_int_equal(j.count, COUNT);
  assert_int_equal(j.step, step);
  ded_msg_member m[1];
  member_set(&m[0], t->ident.id, 1.0, 1, 0);
  ded_msg_commit c = commit_of(0, attempt_of(0, lo->id), 0, m, 1);
  c.count = count;
  c.pos = pos;
  c.step = cstep;
  send_commit(t, 0, &c);
  assert_false(t->closed[0]);
}

/* The swarm's round is shorter than the all-reduce: the node's first
 * round covers [0, COUNT/2), its second (cut at once, which the node
 * coordinates itself: round 0's only member) the rest, at stream
 * position COUNT/2; only the second says the all-reduce is over. */
static void test_node_stream_round_cut_short(void **state) {
  (void)state;
  float buf[COUNT], orig[COUNT];
  for (int i = 0; i < COUNT; i++) buf[i] = orig[i] = (float)i - 3.5f;
  tnode t;
  ded_ident lo;
  stream_commit0(&t, buf, 0, COUNT / 2, 0, 0, &lo);
  assert_int_equal(t.rounds_done, 2);
  /* The report of round 1 is the last one seen; round 0's came first. */
  assert_int_equal(t.last.round, 1);
  assert_int_equal(t.last.status, 0);
  assert_int_equal(t.last.pos, COUNT / 2);
  assert_int_equal(t.last.off, COUNT / 2);
  assert_int_equal(t.last.count, COUNT - COUNT / 2);
  assert_true(t.last.last);
  assert_true(t.last.alone);
  assert_memory_equal(buf, orig, sizeof buf); /* alone: its own values, all of them */
  ded_node_free(t.node);
}

/* A step length the node does not know yet (0) fits the round's: the
 * all-reduce is cut after 3 elements, the rest is round 1. */
static void test_node_stream_unknown_step_fits(void **state) {
  (void)state;
  float buf[COUNT];
  for (int i = 0; i < COUNT; i++) buf[i] = (float)i;
  tnode t;
  ded_ident lo;
  stream_commit0(&t, buf, 0, 3, 0, 4096, &lo);
  assert_int_equal(t.rounds_done, 2);
  assert_int_equal(t.last.pos, 3);
  assert_int_equal(t.last.off, 3);
  assert_int_equal(t.last.count, COUNT - 3);
  ded_node_free(t.node);
}

/* Decisions the node cannot take. */
static void test_node_stream_wrong_decisions(void **state) {
  (void)state;
  float buf[COUNT], orig[COUNT];
  for (int i = 0; i < COUNT; i++) buf[i] = orig[i] = (float)(2 * i);
  const struct {
    uint64_t step, count, pos, cstep;
    int status;
    bool alone;
  } cases[] = {
      {0, COUNT + 1, 0, 0, 0, true},        /* longer than its offer: out of step */
      {0, COUNT, 5, 0, 0, true},            /* another position: out of step */
      {COUNT, COUNT, 0, 2 * COUNT, DED_ERR_SIZE_MISMATCH, false}, /* another model */
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    tnode t;
    ded_ident lo;
    stream_commit0(&t, buf, cases[k].step, cases[k].count, cases[k].pos, cases[k].cstep, &lo);
    assert_int_equal(t.rounds_done, 1);
    assert_int_equal(t.last.round, 0);
    assert_int_equal(t.last.status, cases[k].status);
    assert_int_equal(t.last.alone, cases[k].alone);
    if (cases[k].alone) {
      assert_true(t.last.late);
      assert_int_equal(t.last.behind, 1); /* reload from the next round on */
    }
    assert_true(t.last.last);
    assert_int_equal(t.last.count, COUNT); /* the whole all-reduce, untouched */
    assert_memory_equal(buf, orig, sizeof buf);
    ded_node_free(t.node);
  }
}

/* Leaving: the open round fails, and so does the call queued behind it,
 * which no round covered yet; each call ends once. */
static void test_node_stream_leave_reports_queued(void **state) {
  (void)state;
  float b0[COUNT], b1[COUNT];
  memset(b0, 0, sizeof b0);
  memset(b1, 0, sizeof b1);
  tnode t;
  tnode_start(&t, NULL, 0, 1.0, 1);
  ded_round_args a = {b0, COUNT, DED_DTYPE_F32, 1.0, 1, NULL, 0};
  ded_round_args b = {b1, COUNT, DED_DTYPE_F32, 1.0, 1, NULL, 0};
  assert_int_equal(ded_node_round_submit(t.node, &a, t.now), 0);
  assert_int_equal(ded_node_round_submit(t.node, &b, t.now), 1); /* projected */
  assert_int_equal(t.rounds_done, 0);
  ded_node_leave(t.node, t.now);
  assert_int_equal(t.rounds_done, 2);
  assert_int_equal(t.last.status, DED_ERR_CLOSING);
  assert_true(t.last.last);
  assert_int_equal(t.last.pos, COUNT);
  assert_int_equal(t.last.count, COUNT);
  ded_node_free(t.node);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_node_stream_round_cut_short),
      cmocka_unit_test(test_node_stream_unknown_step_fits),
      cmocka_unit_test(test_node_stream_wrong_decisions),
      cmocka_unit_test(test_node_stream_leave_reports_queued),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
