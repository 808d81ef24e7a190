/*
 * test_pick.c: match/ded_pick, the codec a round's coordinator chooses:
 * none for a job alone or float64; the least lossy of the members' fixed
 * choices; auto within the members' floor, by the plan's estimate against
 * the members' compute, none while rates are unknown or the round is fast.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/ded_types.h"
#include "match/ded_pick.h"

#define AUTO DED_JOIN_COMPRESS_AUTO
#define COUNT 25000000ull /* 100 MB of float32 */

static ded_pick_member fixed(ded_codec_kind k, uint32_t ppm) {
  return (ded_pick_member){(uint8_t)k, ppm, 0};
}

static ded_codec pick(const ded_pick_member *m, unsigned n, double t_per_byte) {
  ded_codec c;
  ded_pick_codec(m, n, DED_DTYPE_F32, COUNT, t_per_byte, &c);
  return c;
}

static void test_pick_alone_and_f64_never(void **state) {
  (void)state;
  ded_pick_member m[2] = {fixed(DED_CODEC_INT8, 0), fixed(DED_CODEC_INT8, 0)};
  ded_codec c;
  ded_pick_codec(m, 1, DED_DTYPE_F32, COUNT, 1e-6, &c); /* one contributor */
  assert_int_equal(c.kind, DED_CODEC_NONE);
  ded_pick_codec(m, 2, DED_DTYPE_F64, COUNT, 1e-6, &c);
  assert_int_equal(c.kind, DED_CODEC_NONE);
  ded_pick_codec(m, 2, DED_DTYPE_F32, COUNT, 0.0, &c); /* fixed: no estimate needed */
  assert_int_equal(c.kind, DED_CODEC_INT8);
}

static void test_pick_fixed_least_lossy(void **state) {
  (void)state;
  ded_pick_member a[3] = {fixed(DED_CODEC_INT8, 0), fixed(DED_CODEC_FP16, 0),
                          fixed(DED_CODEC_TOPK, 10000)};
  assert_int_equal(pick(a, 3, 0.0).kind, DED_CODEC_FP16);
  ded_pick_member b[2] = {fixed(DED_CODEC_TOPK, 10000), fixed(DED_CODEC_TOPK, 50000)};
  ded_codec c = pick(b, 2, 0.0);
  assert_int_equal(c.kind, DED_CODEC_TOPK);
  assert_true(c.fraction == 0.05);
  ded_pick_member d[2] = {fixed(DED_CODEC_BF16, 0), fixed(DED_CODEC_NONE, 0)};
  assert_int_equal(pick(d, 2, 0.0).kind, DED_CODEC_NONE);
  /* fp16 keeps bits bf16 drops, bf16 a range fp16 saturates: neither */
  ded_pick_member e[2] = {fixed(DED_CODEC_BF16, 0), fixed(DED_CODEC_FP16, 0)};
  assert_int_equal(pick(e, 2, 0.0).kind, DED_CODEC_NONE);
  ded_pick_member f[2] = {fixed(DED_CODEC_BF16, 0), fixed(DED_CODEC_INT8, 0)};
  assert_int_equal(pick(f, 2, 0.0).kind, DED_CODEC_BF16);
}

/* 20 Mbit/s links: 100 MB uncompressed in 40 s (per byte 4e-7 s). */
#define SLOW (40.0 / (COUNT * 4.0))

static void test_pick_auto(void **state) {
  (void)state;
  ded_pick_member m[3] = {{AUTO | DED_CODEC_INT8, 0, 0}, {AUTO | DED_CODEC_INT8, 0, 0},
                          {AUTO | DED_CODEC_INT8, 0, 0}};
  assert_int_equal(pick(m, 3, 0.0).kind, DED_CODEC_NONE); /* rates unknown */
  /* fast: 100 MB on 10 Gbit/s is 80 ms; 1 MB would be under 50 ms */
  ded_codec c;
  ded_pick_codec(m, 3, DED_DTYPE_F32, 250000, SLOW / 100.0, &c);
  assert_int_equal(c.kind, DED_CODEC_NONE);
  /* slow links, no compute known: the floor */
  assert_int_equal(pick(m, 3, SLOW).kind, DED_CODEC_INT8);
  /* 60 s of compute hides the whole uncompressed round */
  for (int i = 0; i < 3; i++) m[i].compute_us = 60000000;
  assert_int_equal(pick(m, 3, SLOW).kind, DED_CODEC_NONE);
  /* 25 s: fp16's 20 s fits, none's 40 does not */
  m[1].compute_us = 25000000; /* the shortest counts */
  assert_int_equal(pick(m, 3, SLOW).kind, DED_CODEC_FP16);
  /* 12 s: int8's ~10.2 s fits */
  m[2].compute_us = 12000000;
  assert_int_equal(pick(m, 3, SLOW).kind, DED_CODEC_INT8);
  /* 1 s: nothing fits; the floor, never top-k */
  m[0].compute_us = 1000000;
  assert_int_equal(pick(m, 3, SLOW).kind, DED_CODEC_INT8);
  /* a floor of top-k 1 %: it goes there */
  for (int i = 0; i < 3; i++) m[i] = (ded_pick_member){AUTO | DED_CODEC_TOPK, 10000, 1000000};
  c = pick(m, 3, SLOW);
  assert_int_equal(c.kind, DED_CODEC_TOPK);
  assert_true(c.fraction == 0.01);
  /* one member with a fixed fp16 caps what auto may choose */
  m[1] = fixed(DED_CODEC_FP16, 0);
  assert_int_equal(pick(m, 3, SLOW).kind, DED_CODEC_FP16);
  /* one with bf16: auto never takes fp16 for it, even with time to spare */
  m[1] = fixed(DED_CODEC_BF16, 0);
  assert_int_equal(pick(m, 3, SLOW).kind, DED_CODEC_BF16);
  for (int i = 0; i < 3; i++) m[i].compute_us = 30000000;
  assert_int_equal(pick(m, 3, SLOW).kind, DED_CODEC_BF16); /* fp16 would fit: not allowed */
  m[1].compute_us = m[0].compute_us = m[2].compute_us = 60000000;
  assert_int_equal(pick(m, 3, SLOW).kind, DED_CODEC_NONE);
}

static void test_pick_ratio(void **state) {
  (void)state;
  ded_codec none = {DED_CODEC_NONE, 0.01}, fp16 = {DED_CODEC_FP16, 0.01},
            int8 = {DED_CODEC_INT8, 0.01}, topk = {DED_CODEC_TOPK, 0.01};
  assert_true(ded_pick_ratio(&none, 3) == 1.0);
  assert_true(ded_pick_ratio(&fp16, 3) == 0.5);
  assert_true(ded_pick_ratio(&int8, 3) > 0.25 && ded_pick_ratio(&int8, 3) < 0.26);
  assert_true(ded_pick_ratio(&topk, 3) < 0.05 && ded_pick_ratio(&topk, 3) > 0.01);
  assert_true(ded_pick_ratio(&topk, 50) > ded_pick_ratio(&topk, 3)); /* denser results */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pick_alone_and_f64_never),
      cmocka_unit_test(test_pick_fixed_least_lossy),
      cmocka_unit_test(test_pick_auto),
      cmocka_unit_test(test_pick_ratio),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
