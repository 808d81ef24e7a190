/*
 * test_stream.c: round/ded_stream, a job's gradient stream cut into
 * rounds.
 *
 * A round is cut from the oldest call with elements left, at the stream's
 * position, offering the rest of that call; no second round is cut while
 * one is open; fixing a round shorter than its offer leaves the rest of
 * the call to the next round; calls leave once every element is
 * reported, in any order of their rounds, and a call's last report says
 * so; the projected round of a new call counts the calls no round was
 * cut from.
 */
#include "unit_util.h"

#include "core/ded_err.h"
#include "round/ded_stream.h"

static float stream_buf[1000];

static ded_round_args stream_args(uint64_t off, uint64_t count, intptr_t ctx) {
  ded_round_args a = {stream_buf + off, count, DED_DTYPE_F32, 1.0, 1, (void *)ctx, 0};
  return a;
}

static void test_stream_cuts_and_fixes(void **state) {
  (void)state;
  static ded_stream st;
  memset(&st, 0, sizeof st);
  ded_stream_resume(&st, 500);
  assert_true(ded_stream_idle(&st));
  ded_cut c;
  assert_false(ded_stream_cut(&st, &c)); /* nothing queued */
  ded_round_args a = stream_args(0, 100, 1), b = stream_args(100, 30, 2);
  assert_int_equal(ded_stream_waiting(&st), 0);
  assert_int_equal(ded_stream_push(&st, &a, 7), 0);
  assert_int_equal(ded_stream_waiting(&st), 1);
  assert_int_equal(ded_stream_push(&st, &b, 9), 0);
  assert_int_equal(ded_stream_waiting(&st), 2);
  /* The first round offers all of call 1 at the stream's position. */
  assert_true(ded_stream_ready(&st));
  assert_true(ded_stream_cut(&st, &c));
  assert_ptr_equal(c.a.buf, stream_buf);
  assert_int_equal(c.a.count, 100);
  assert_int_equal(c.pos, 500);
  assert_int_equal(c.off, 0);
  assert_int_equal(c.bound_ns, 7);
  assert_ptr_equal(c.a.ctx, (void *)1);
  uint64_t seq1 = c.seq;
  /* Open: no second round, and call 2 still waits. */
  assert_false(ded_stream_ready(&st));
  assert_false(ded_stream_cut(&st, &c));
  assert_int_equal(ded_stream_waiting(&st), 1);
  /* The swarm agreed on 40: the rest of call 1 is the next round. */
  ded_stream_fix(&st, 40);
  assert_true(ded_stream_cut(&st, &c));
  assert_ptr_equal(c.a.buf, stream_buf + 40);
  assert_int_equal(c.a.count, 60);
  assert_int_equal(c.pos, 540);
  assert_int_equal(c.off, 40);
  assert_int_equal(c.seq, seq1);
  ded_stream_fix(&st, 60);
  /* Then call 2, whole. */
  assert_true(ded_stream_cut(&st, &c));
  assert_ptr_equal(c.a.buf, stream_buf + 100);
  assert_int_equal(c.a.count, 30);
  assert_int_equal(c.pos, 600);
  assert_int_equal(c.bound_ns, 9);
  uint64_t seq2 = c.seq;
  assert_int_not_equal(seq2, seq1);
  ded_stream_fix(&st, 30);
  assert_false(ded_stream_cut(&st, &c));
  assert_int_equal(st.pos, 630);
  /* Reports out of order: call 2 ends first, call 1 with its second
   * report, whichever round that is. */
  assert_true(ded_stream_reported(&st, seq2, 30));
  assert_false(ded_stream_idle(&st)); /* call 1 is still out */
  assert_false(ded_stream_reported(&st, seq1, 60));
  assert_true(ded_stream_reported(&st, seq1, 40));
  assert_true(ded_stream_idle(&st));
}

static void test_stream_limit(void **state) {
  (void)state;
  static ded_stream st;
  memset(&st, 0, sizeof st);
  ded_round_args a = stream_args(0, 1, 0);
  for (unsigned i = 0; i < DED_ROUNDS_ACTIVE_MAX; i++) assert_int_equal(ded_stream_push(&st, &a, 0), 0);
  assert_int_equal(ded_stream_push(&st, &a, 0), DED_ERR_LIMIT);
  /* One call done: room for one more, in a ring. */
  ded_cut c;
  assert_true(ded_stream_cut(&st, &c));
  ded_stream_fix(&st, 1);
  assert_true(ded_stream_reported(&st, c.seq, 1));
  assert_int_equal(ded_stream_push(&st, &a, 0), 0);
  assert_int_equal(ded_stream_push(&st, &a, 0), DED_ERR_LIMIT);
  for (unsigned i = 0; i < DED_ROUNDS_ACTIVE_MAX; i++) {
    assert_true(ded_stream_cut(&st, &c));
    assert_int_equal(c.pos, 1 + i);
    ded_stream_fix(&st, 1);
    assert_true(ded_stream_reported(&st, c.seq, 1));
  }
  assert_true(ded_stream_idle(&st));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stream_cuts_and_fixes),
      cmocka_unit_test(test_stream_limit),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
