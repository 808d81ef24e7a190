/*
 * test_feedback.c: avg/ded_feedback, a job's error-feedback residual: kept
 * per element of a step (stream position mod the step's length), added to
 * the next contribution of that element, nothing until the step is known,
 * cleared when the length changes or on reset, a non-finite residual
 * stored as 0.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "avg/ded_feedback.h"

static void test_feedback_cycle(void **state) {
  (void)state;
  const ded_mem *mem = ded_mem_default();
  ded_feedback fb = {0};
  float x[4] = {1.0f, 2.0f, 3.0f, 4.0f}, c[4], q[4] = {0.5f, 2.0f, 2.0f, 4.5f};
  /* step unknown: nothing kept, x passes through */
  assert_int_equal(ded_feedback_add(&fb, mem, 0, 0, x, 4, c), DED_FEEDBACK_NO_STEP);
  assert_true(c[0] == 1.0f && c[3] == 4.0f);
  assert_null(fb.e);
  /* a step of 10: positions 13..16 are elements 3..6 */
  assert_int_equal(ded_feedback_add(&fb, mem, 10, 13, x, 4, c), DED_FEEDBACK_KEPT);
  assert_int_equal(fb.len, 10);
  assert_true(c[0] == 1.0f); /* zero residual at first */
  ded_feedback_store(&fb, 10, 13, c, q, 4); /* residuals 0.5, 0, 1, -0.5 */
  assert_true(fabs(ded_feedback_norm2(&fb) - 1.5) < 1e-9);
  /* the next step's same elements (position 23) get them back */
  assert_int_equal(ded_feedback_add(&fb, mem, 10, 23, x, 4, c), DED_FEEDBACK_KEPT);
  assert_true(c[0] == 1.5f && c[1] == 2.0f && c[2] == 4.0f && c[3] == 3.5f);
  /* other elements of the step have none */
  assert_int_equal(ded_feedback_add(&fb, mem, 10, 27, x, 4, c), DED_FEEDBACK_KEPT);
  assert_true(c[0] == 1.0f && c[3] == 4.0f);
  /* wrapping past the step's end: positions 18, 19, 20, 21 = 8, 9, 0, 1 */
  float q2[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  ded_feedback_store(&fb, 10, 18, x, q2, 4);
  assert_true(fb.e[8] == 1.0f && fb.e[9] == 2.0f && fb.e[0] == 3.0f && fb.e[1] == 4.0f);
  /* a store for another length is ignored */
  ded_feedback_store(&fb, 12, 0, x, q2, 4);
  assert_true(fb.e[0] == 3.0f);
  /* non-finite differences are stored as 0 */
  float inf[1] = {INFINITY}, zero[1] = {0.0f};
  ded_feedback_store(&fb, 10, 5, inf, zero, 1);
  assert_true(fb.e[5] == 0.0f);
  /* the step's length changes: cleared, said so */
  assert_int_equal(ded_feedback_add(&fb, mem, 12, 0, x, 4, c), DED_FEEDBACK_NEW_LENGTH);
  assert_int_equal(fb.len, 12);
  assert_true(ded_feedback_norm2(&fb) == 0.0);
  assert_int_equal(fb.resets, 1);
  /* reset: true while it held one */
  assert_true(ded_feedback_reset(&fb, mem));
  assert_false(ded_feedback_reset(&fb, mem));
  assert_int_equal(fb.resets, 2);
  ded_feedback_free(&fb, mem);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_feedback_cycle),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
