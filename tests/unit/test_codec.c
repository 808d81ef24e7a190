/*
 * test_codec.c: the gradient codecs (avg/ded_codec.h): fp16 and bf16 to
 * the nearest even against a reference over every half and many floats,
 * fp16's saturation, int8's blocks decoding alike however a range is cut,
 * top-k's choice and ties, and every malformed payload refused.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "avg/ded_codec.h"
#include "core/ded_err.h"
#include "unit_util.h"

static uint32_t bits(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  return x;
}

static float from_bits(uint32_t x) {
  float f;
  memcpy(&f, &x, sizeof f);
  return f;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* Every half decodes to a float that encodes back to it (NaNs to a NaN). */
static void test_codec_f16_every_half(void **state) {
  (void)state;
  for (uint32_t h = 0; h < 65536; h++) {
    float f = ded_codec_f16_to_f32((uint16_t)h);
    uint16_t back = ded_codec_f32_to_f16(f);
    if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu)) {
      assert_true(isnan(f));
      assert_true((back & 0x7c00u) == 0x7c00u && (back & 0x3ffu));
    } else if ((h & 0x7fffu) == 0x7c00u) {
      assert_true(isinf(f));
      assert_int_equal(back, (h & 0x8000u) | 0x7bffu); /* saturated */
    } else {
      assert_int_equal(back, h);
    }
  }
}

/* The nearest half, ties to the even one, by distances in double. */
static void expect_nearest(uint16_t got, float f, float (*dec)(uint16_t)) {
  double d = fabs((double)dec(got) - (double)f);
  for (int step = -1; step <= 1; step += 2) {
    uint16_t o = (uint16_t)(got + step);
    if (((o ^ got) & 0x8000u) || isnan(dec(o)) || isinf(dec(o))) continue;
    double e = fabs((double)dec(o) - (double)f);
    if (e < d || (e == d && (o & 1u) == 0 && (got & 1u)))
      fail_msg("%a encoded as 0x%04x (%a), but 0x%04x (%a) is nearer or an even tie", (double)f,
               got, (double)dec(got), o, (double)dec(o));
  }
}

static void test_codec_half_round_to_nearest_even(void **state) {
  (void)state;
  for (int i = 0; i < 200000; i++) {
    /* exponents around fp16's range, and bf16's whole */
    uint32_t x = (uint32_t)rnd();
    float f = from_bits(x);
    if (isnan(f) || isinf(f)) continue;
    if (fabsf(f) < 0x1.ffp127f) /* past it, to nearest even is infinity */
      expect_nearest(ded_codec_f32_to_bf16(f), f, ded_codec_bf16_to_f32);
    uint32_t e = (uint32_t)(rnd() % 40) + 97; /* 2^-30 .. 2^9 */
    float g = from_bits((x & 0x807fffffu) | e << 23);
    expect_nearest(ded_codec_f32_to_f16(g), g, ded_codec_f16_to_f32);
  }
  /* ties, exactly: 1 + 2^-11 lies between 1 and 1 + 2^-10 */
  assert_int_equal(ded_codec_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);
  assert_int_equal(ded_codec_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);
  assert_int_equal(ded_codec_f32_to_f16(0x1p-25f), 0x0000);     /* a tie to zero */
  assert_int_equal(ded_codec_f32_to_f16(3 * 0x1p-26f), 0x0001);
  assert_int_equal(ded_codec_f32_to_f16(3 * 0x1p-25f), 0x0002); /* 1.5 ulp: to even 2 */
  assert_int_equal(ded_codec_f32_to_f16(-0x1p-24f), 0x8001);
  assert_int_equal(ded_codec_f32_to_bf16(from_bits(0x3f808000u)), 0x3f80);
  assert_int_equal(ded_codec_f32_to_bf16(from_bits(0x3f818000u)), 0x3f82);
}

static void test_codec_f16_saturates(void **state) {
  (void)state;
  assert_int_equal(ded_codec_f32_to_f16(65504.0f), 0x7bff);
  assert_int_equal(ded_codec_f32_to_f16(65519.99f), 0x7bff);
  assert_int_equal(ded_codec_f32_to_f16(65520.0f), 0x7bff);
  assert_int_equal(ded_codec_f32_to_f16(1e10f), 0x7bff);
  assert_int_equal(ded_codec_f32_to_f16(INFINITY), 0x7bff);
  assert_int_equal(ded_codec_f32_to_f16(-INFINITY), 0xfbff);
  assert_true(isnan(ded_codec_f16_to_f32(ded_codec_f32_to_f16(NAN))));
  assert_true(isnan(ded_codec_bf16_to_f32(ded_codec_f32_to_bf16(NAN))));
  assert_int_equal(bits(ded_codec_f16_to_f32(ded_codec_f32_to_f16(-0.0f))), 0x80000000u);
}

static void test_codec_parse(void **state) {
  (void)state;
  ded_codec c;
  const char *good[] = {"none", "fp16", "bf16", "int8", "topk"};
  for (int i = 0; i < 5; i++) {
    assert_int_equal(ded_codec_parse(good[i], &c), 0);
    assert_string_equal(ded_codec_name(c.kind), good[i]);
  }
  assert_true(c.fraction == DED_CODEC_TOPK_DEFAULT);
  assert_int_equal(ded_codec_parse("topk:0.05", &c), 0);
  assert_int_equal(c.kind, DED_CODEC_TOPK);
  assert_true(c.fraction == 0.05);
  assert_int_equal(ded_codec_parse("topk:1", &c), 0);
  const char *bad[] = {"", "int4", "FP16", "topk:", "topk:0", "topk:1.5", "topk:-0.1",
                       "topk:0.1x", "topk:nan", "fp16 "};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    assert_int_equal(ded_codec_parse(bad[i], &c), DED_ERR_INVALID_ARG);
}

#define TOTAL 2000

static void fill(float *v, size_t n, float span) {
  for (size_t i = 0; i < n; i++) v[i] = span * ((float)(rnd() % 20001) / 10000.0f - 1.0f);
}

/* Encodes [first, first + n) of v and decodes it into |out|. */
static void roundtrip(const ded_codec *c, const float *v, size_t total, size_t first, size_t n,
                      float *out, size_t *len) {
  size_t cap = ded_codec_bound(c, n);
  uint8_t *buf = malloc(cap ? cap : 1);
  assert_non_null(buf);
  assert_int_equal(ded_codec_encode(c, v, total, first, n, buf, cap, len, ded_mem_default()), 0);
  assert_true(*len <= cap);
  assert_int_equal(ded_codec_decode(c, buf, *len, total, first, n, out), 0);
  free(buf);
}

/* int8: every element within half its block's scale; any cut of the
 * vector decodes to the very bits the whole vector does. */
static void test_codec_int8_blocks_any_cut(void **state) {
  (void)state;
  ded_codec c = {DED_CODEC_INT8, 0};
  float v[TOTAL], whole[TOTAL], part[TOTAL];
  fill(v, TOTAL, 3.0f);
  for (size_t i = 600; i < 1024; i++) v[i] = 0.0f; /* a block of zeros (512..1023 mostly) */
  for (size_t i = 512; i < 600; i++) v[i] = 0.0f;
  v[1500] = 1000.0f; /* one block with a large element */
  size_t len;
  roundtrip(&c, v, TOTAL, 0, TOTAL, whole, &len);
  assert_int_equal(len, TOTAL + 4 * ((TOTAL + DED_CODEC_INT8_BLOCK - 1) / DED_CODEC_INT8_BLOCK));
  for (size_t i = 0; i < TOTAL; i++) {
    size_t b = i / DED_CODEC_INT8_BLOCK;
    float m = 0;
    for (size_t j = b * DED_CODEC_INT8_BLOCK; j < (b + 1) * DED_CODEC_INT8_BLOCK && j < TOTAL; j++)
      m = fmaxf(m, fabsf(v[j]));
    if (fabsf(whole[i] - v[i]) > m / 127.0f * 0.5f * 1.0001f)
      fail_msg("element %zu: %g decoded as %g (block max %g)", i, (double)v[i], (double)whole[i],
               (double)m);
  }
  for (size_t i = 512; i < 1024; i++) assert_true(whole[i] == 0.0f);
  for (int t = 0; t < 300; t++) {
    size_t a = rnd() % TOTAL, b = rnd() % TOTAL;
    size_t first = a < b ? a : b, n = (a < b ? b - a : a - b) + (t % 2);
    if (first + n > TOTAL) n = TOTAL - first;
    roundtrip(&c, v, TOTAL, first, n, part, &len);
    assert_memory_equal(part, whole + first, n * sizeof(float));
  }
}

/* top-k: the k largest magnitudes at their places, ties from the lowest
 * index, the rest 0; fraction 1 keeps everything. */
static void test_codec_topk_choice(void **state) {
  (void)state;
  ded_codec c = {DED_CODEC_TOPK, 0.01};
  float v[TOTAL], out[TOTAL];
  fill(v, TOTAL, 1.0f);
  size_t big[] = {3, 77, 500, 999, 1000, 1500, 1800, 1801, 1998, 1999, 0, 1234, 640, 641, 700,
                  800, 900, 1100, 1300, 1700};
  for (size_t i = 0; i < 20; i++) v[big[i]] = (i % 2 ? -1.0f : 1.0f) * (10.0f + (float)i);
  size_t len;
  roundtrip(&c, v, TOTAL, 0, TOTAL, out, &len);
  assert_int_equal(ded_codec_topk_k(0.01, TOTAL), 20);
  for (size_t i = 0; i < TOTAL; i++) {
    bool chosen = false;
    for (size_t j = 0; j < 20; j++) chosen |= big[j] == i;
    assert_true(out[i] == (chosen ? v[i] : 0.0f));
  }
  /* ties: ten equal magnitudes, three kept, the first three */
  float t[100], o[100];
  memset(t, 0, sizeof t);
  for (int i = 0; i < 10; i++) t[10 * i + 5] = (i % 2) ? -2.0f : 2.0f;
  c.fraction = 0.03;
  roundtrip(&c, t, 100, 0, 100, o, &len);
  for (int i = 0; i < 100; i++) assert_true(o[i] == (i == 5 || i == 15 || i == 25 ? t[i] : 0.0f));
  c.fraction = 1.0;
  roundtrip(&c, t, 100, 0, 100, o, &len);
  assert_memory_equal(o, t, sizeof t);
  /* a range: indices relative to it (four of the large ones in it) */
  c.fraction = 0.0079;
  assert_int_equal(ded_codec_topk_k(c.fraction, 500), 4);
  roundtrip(&c, v, TOTAL, 1000, 500, out, &len);
  for (size_t i = 0; i < 500; i++)
    assert_true(out[i] == (i == 0 || i == 100 || i == 234 || i == 300 ? v[1000 + i] : 0.0f));
}

/* fp16, bf16 and none: element by element; encodings within the bound. */
/* A block whose scale would be subnormal is zeros with scale 0 (1 / s
 * would overflow); top-k chooses by the magnitudes' bits, so a process
 * that flushes subnormals to zero encodes the same bytes. */
static void test_codec_tiny_values(void **state) {
  (void)state;
  enum { N = 1024 };
  static float v[N];
  for (int i = 0; i < N; i++) v[i] = from_bits((uint32_t)(i * 7919 % 8000 + 1)); /* subnormal */
  v[700] = 1.0f; /* block 1 is ordinary */
  ded_codec i8 = {DED_CODEC_INT8, 0.01};
  static uint8_t buf[8 * N], again[8 * N];
  static float out[N];
  size_t len = 0, len2 = 0;
  assert_int_equal(ded_codec_encode(&i8, v, N, 0, N, buf, sizeof buf, &len, ded_mem_default()), 0);
  assert_true(buf[0] == 0 && buf[1] == 0 && buf[2] == 0 && buf[3] == 0); /* block 0: scale 0 */
  assert_int_equal(ded_codec_decode(&i8, buf, len, N, 0, N, out), 0);
  for (int i = 0; i < 512; i++) assert_true(out[i] == 0.0f);
  assert_true(out[700] == 1.0f);
  ded_codec tk = {DED_CODEC_TOPK, 0.01};
  assert_int_equal(ded_codec_encode(&tk, v, N, 0, N, buf, sizeof buf, &len, ded_mem_default()), 0);
#if defined(__x86_64__) || defined(__i386__)
  unsigned csr = __builtin_ia32_stmxcsr();
  __builtin_ia32_ldmxcsr(csr | 0x8040); /* flush to zero, subnormals are zero */
  int rv = ded_codec_encode(&tk, v, N, 0, N, again, sizeof again, &len2, ded_mem_default());
  __builtin_ia32_ldmxcsr(csr);
  assert_int_equal(rv, 0);
  assert_int_equal(len2, len);
  assert_memory_equal(buf, again, len);
#endif
  assert_int_equal(ded_codec_decode(&tk, buf, len, N, 0, N, out), 0);
  assert_true(out[700] == 1.0f);
}

static void test_codec_plain_formats(void **state) {
  (void)state;
  float v[TOTAL], out[TOTAL];
  fill(v, TOTAL, 100.0f);
  ded_codec_kind kinds[] = {DED_CODEC_NONE, DED_CODEC_FP16, DED_CODEC_BF16};
  for (int k = 0; k < 3; k++) {
    ded_codec c = {kinds[k], 0};
    size_t len;
    roundtrip(&c, v, TOTAL, 7, 1500, out, &len);
    assert_int_equal(len, (k == 0 ? 4 : 2) * 1500);
    for (size_t i = 0; i < 1500; i++) {
      float want = k == 0   ? v[7 + i]
                   : k == 1 ? ded_codec_f16_to_f32(ded_codec_f32_to_f16(v[7 + i]))
                            : ded_codec_bf16_to_f32(ded_codec_f32_to_bf16(v[7 + i]));
      assert_true(bits(out[i]) == bits(want));
    }
  }
}

/* Non-finite input is not int8's nor top-k's to encode. */
static void test_codec_refuses_nonfinite(void **state) {
  (void)state;
  float v[600];
  fill(v, 600, 1.0f);
  v[550] = NAN;
  uint8_t buf[4096];
  size_t len;
  ded_codec i8 = {DED_CODEC_INT8, 0}, tk = {DED_CODEC_TOPK, 0.01};
  assert_int_equal(ded_codec_encode(&i8, v, 600, 0, 100, buf, sizeof buf, &len, ded_mem_default()),
                   0); /* its block is 0..511 */
  assert_int_equal(ded_codec_encode(&i8, v, 600, 0, 513, buf, sizeof buf, &len, ded_mem_default()),
                   DED_ERR_INVALID_ARG); /* block 512..599 holds the NaN */
  assert_int_equal(ded_codec_encode(&tk, v, 600, 0, 600, buf, sizeof buf, &len, ded_mem_default()),
                   DED_ERR_INVALID_ARG);
  v[550] = INFINITY;
  assert_int_equal(ded_codec_encode(&tk, v, 600, 500, 100, buf, sizeof buf, &len, ded_mem_default()),
                   DED_ERR_INVALID_ARG);
  assert_int_equal(ded_codec_encode(&i8, v, 600, 0, 600, buf, 10, &len, ded_mem_default()),
                   DED_ERR_INVALID_ARG); /* too small */
}

/* Malformed payloads: every one refused. */
static void test_codec_malformed(void **state) {
  (void)state;
  float v[1100], out[1100];
  fill(v, 1100, 1.0f);
  uint8_t buf[8192];
  size_t len;
  /* int8: a NaN, infinite or negative scale, a -128, a length off by one */
  ded_codec i8 = {DED_CODEC_INT8, 0};
  assert_int_equal(ded_codec_encode(&i8, v, 1100, 100, 1000, buf, sizeof buf, &len,
                                    ded_mem_default()), 0);
  assert_int_equal(ded_codec_decode(&i8, buf, len, 1100, 100, 1000, out), 0);
  assert_int_equal(ded_codec_decode(&i8, buf, len - 1, 1100, 100, 1000, out), DED_ERR_PROTO);
  assert_int_equal(ded_codec_decode(&i8, buf, len, 1100, 100, 999, out), DED_ERR_PROTO);
  assert_int_equal(ded_codec_decode(&i8, buf, len, 1000, 100, 1000, out), DED_ERR_PROTO);
  const uint32_t scales[] = {0x7fc00000u, 0x7f800000u, 0xbf800000u};
  size_t second = 4 + (512 - 100); /* the second block's scale */
  for (int s = 0; s < 3; s++) {
    uint8_t bad[8192];
    memcpy(bad, buf, len);
    for (int b = 0; b < 4; b++) bad[second + (size_t)b] = (uint8_t)(scales[s] >> (8 * b));
    assert_int_equal(ded_codec_decode(&i8, bad, len, 1100, 100, 1000, out), DED_ERR_PROTO);
  }
  buf[4] = 0x80;
  assert_int_equal(ded_codec_decode(&i8, buf, len, 1100, 100, 1000, out), DED_ERR_PROTO);
  /* top-k: k not the codec's, an index out of range, a gap past 64 bits,
   * a truncated gap, values short or trailing */
  ded_codec tk = {DED_CODEC_TOPK, 0.01};
  assert_int_equal(ded_codec_encode(&tk, v, 1100, 0, 1000, buf, sizeof buf, &len,
                                    ded_mem_default()), 0);
  assert_int_equal(ded_codec_decode(&tk, buf, len, 1100, 0, 1000, out), 0);
  assert_int_equal(ded_codec_decode(&tk, buf, len - 1, 1100, 0, 1000, out), DED_ERR_PROTO);
  uint8_t more[8192];
  memcpy(more, buf, len);
  more[len] = 0;
  assert_int_equal(ded_codec_decode(&tk, more, len + 1, 1100, 0, 1000, out), DED_ERR_PROTO);
  assert_int_equal(ded_codec_decode(&tk, buf, len, 1100, 0, 900, out), DED_ERR_PROTO); /* k 9 */
  assert_int_equal(ded_codec_decode(&tk, buf, len, 1100, 0, 1100, out), DED_ERR_PROTO); /* k 11 */
  uint8_t gap[64] = {10, 0, 0, 0}; /* k 10 of 1000 */
  size_t g = 4;
  gap[g++] = 0xe8; /* 1000: out of range */
  gap[g++] = 0x07;
  for (int i = 0; i < 9; i++) gap[g++] = 0;
  memset(gap + g, 0, 40);
  assert_int_equal(ded_codec_decode(&tk, gap, g + 40, 1100, 0, 1000, out), DED_ERR_PROTO);
  g = 4;
  for (int i = 0; i < 10; i++) gap[g++] = 0xff; /* a gap past 64 bits */
  gap[g++] = 0x7f;
  assert_int_equal(ded_codec_decode(&tk, gap, g + 40, 1100, 0, 1000, out), DED_ERR_PROTO);
  g = 4;
  gap[g++] = 0x80; /* truncated */
  assert_int_equal(ded_codec_decode(&tk, gap, g, 1100, 0, 1000, out), DED_ERR_PROTO);
  /* fp16, bf16, none: lengths */
  ded_codec f = {DED_CODEC_FP16, 0};
  assert_int_equal(ded_codec_decode(&f, buf, 2 * 10 + 1, 1100, 0, 10, out), DED_ERR_PROTO);
  f.kind = DED_CODEC_NONE;
  assert_int_equal(ded_codec_decode(&f, buf, 4 * 10 - 1, 1100, 0, 10, out), DED_ERR_PROTO);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_codec_f16_every_half),
      cmocka_unit_test(test_codec_half_round_to_nearest_even),
      cmocka_unit_test(test_codec_f16_saturates),
      cmocka_unit_test(test_codec_parse),
      cmocka_unit_test(test_codec_int8_blocks_any_cut),
      cmocka_unit_test(test_codec_topk_choice),
      cmocka_unit_test(test_codec_tiny_values),
      cmocka_unit_test(test_codec_plain_formats),
      cmocka_unit_test(test_codec_refuses_nonfinite),
      cmocka_unit_test(test_codec_malformed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
