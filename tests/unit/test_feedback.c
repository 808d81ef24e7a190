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
#include <string.h>

#include <cmocka.h>

#include "avg/ded_feedback.h"
#include "core/ded_assert.h"

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

/* A contribution is compensated a range at a time (ded_feedback_apply),
 * in any order, some ranges twice: the same as all at once, wrapping at
 * the step's end included; a residual of another length is not added. */
static void test_feedback_apply_ranges(void **state) {
  (void)state;
  const ded_mem *mem = ded_mem_default();
  ded_feedback fb = {0};
  enum { STEP = 37, N = 100 };
  float x[N], whole[N], parts[N], q[N];
  for (int i = 0; i < N; i++) {
    x[i] = (float)i * 0.5f;
    q[i] = (float)i * 0.5f - (float)(i % 7) * 0.25f;
  }
  assert_int_equal(ded_feedback_prepare(&fb, mem, STEP), DED_FEEDBACK_KEPT);
  ded_feedback_store(&fb, STEP, 0, x, q, STEP); /* residuals (i % 7) / 4 */
  ded_feedback_apply(&fb, STEP, 30, x, N, whole);
  for (int i = 0; i < N; i++) assert_true(whole[i] == x[i] + (float)((30 + i) % STEP % 7) * 0.25f);
  memset(parts, 0, sizeof parts);
  static const int cut[][2] = {{60, 40}, {0, 25}, {20, 45}, {25, 40}, {90, 10}};
  for (size_t k = 0; k < DED_ARRAY_LEN(cut); k++)
    ded_feedback_apply(&fb, STEP, 30 + (uint64_t)cut[k][0], x + cut[k][0], (size_t)cut[k][1],
                       parts + cut[k][0]);
  assert_memory_equal(parts, whole, sizeof whole);
  ded_feedback_apply(&fb, STEP + 1, 30, x, N, parts); /* another length: none */
  assert_memory_equal(parts, x, sizeof x);
  /* ded_feedback_add is prepare then apply */
  assert_int_equal(ded_feedback_add(&fb, mem, STEP, 30, x, N, parts), DED_FEEDBACK_KEPT);
  assert_memory_equal(parts, whole, sizeof whole);
  ded_feedback_free(&fb, mem);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_feedback_cycle),
      cmocka_unit_test(test_feedback_apply_ranges),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
