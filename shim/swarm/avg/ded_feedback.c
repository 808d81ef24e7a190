/*
 * ded_feedback.c: a job's error feedback (ded_feedback.h).
 */
#include "ded_feedback.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "../core/ded_assert.h"

void ded_feedback_free(ded_feedback *fb, const ded_mem *mem) {
  ded_mem_free(mem, fb->e);
  fb->e = NULL;
  fb->len = 0;
}

bool ded_feedback_reset(ded_feedback *fb, const ded_mem *mem) {
  bool held = fb->e != NULL;
  ded_feedback_free(fb, mem);
  fb->resets += held;
  return held;
}

ded_feedback_note ded_feedback_prepare(ded_feedback *fb, const ded_mem *mem, uint64_t step) {
  ded_feedback_note note = DED_FEEDBACK_KEPT;
  if (step != fb->len) {
    note = fb->e ? DED_FEEDBACK_NEW_LENGTH : DED_FEEDBACK_KEPT;
    ded_feedback_reset(fb, mem);
    if (step && (size_t)step == step) fb->e = ded_mem_calloc(mem, (size_t)step, sizeof *fb->e);
    if (fb->e) fb->len = step;
    if (step && !fb->e) note = DED_FEEDBACK_NOMEM;
  }
  if (!step) note = DED_FEEDBACK_NO_STEP;
  return note;
}

void ded_feedback_apply(const ded_feedback *fb, uint64_t step, uint64_t pos, const float *x,
                        size_t n, float *out) {
  if (!fb->e || !step || step != fb->len) {
    if (out != x) memcpy(out, x, n * sizeof *out);
    return;
  }
  /* In runs up to the step's end, each a loop the compiler vectorises. */
  uint64_t at = pos % fb->len;
  for (size_t i = 0; i < n;) {
    size_t run = (size_t)DED_MIN((uint64_t)(n - i), fb->len - at);
    const float *e = fb->e + at;
    for (size_t j = 0; j < run; j++) out[i + j] = x[i + j] + e[j];
    i += run;
    at = 0;
  }
}

ded_feedback_note ded_feedback_add(ded_feedback *fb, const ded_mem *mem, uint64_t step,
                                   uint64_t pos, const float *x, size_t n, float *out) {
  ded_feedback_note note = ded_feedback_prepare(fb, mem, step);
  ded_feedback_apply(fb, step, pos, x, n, out);
  return note;
}

void ded_feedback_store(ded_feedback *fb, uint64_t step, uint64_t pos, const float *c,
                        const float *q, size_t n) {
  if (!fb->e || step != fb->len) return;
  /* In runs up to the step's end, as ded_feedback_apply; a residual that
   * is not finite (NaN fails the comparison) is dropped. */
  uint64_t at = pos % fb->len;
  for (size_t i = 0; i < n;) {
    size_t run = (size_t)DED_MIN((uint64_t)(n - i), fb->len - at);
    float *e = fb->e + at;
    for (size_t j = 0; j < run; j++) {
      float r = c[i + j] - q[i + j];
      e[j] = fabsf(r) <= FLT_MAX ? r : 0.0f;
    }
    i += run;
    at = 0;
  }
}

double ded_feedback_norm2(const ded_feedback *fb) {
  double s = 0.0;
  for (uint64_t i = 0; fb->e && i < fb->len; i++) s += (double)fb->e[i] * fb->e[i];
  return s;
}
