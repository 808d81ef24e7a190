/*
 * test_reduce.c: avg/ded_reduce, the arithmetic of a round.
 *
 * Every peer must get the same bits, so the kernels are compared bit for
 * bit against the plainest possible loops (the build disables FMA for
 * both), at every length around the vector widths, on buffers at odd
 * addresses (chunks are added straight out of socket buffers), and in the
 * fixed summation order (x0 + x1) + x2.
 */
#include <math.h>

#include "unit_util.h"

#include "avg/ded_reduce.h"
#include "core/ded_types.h"

#define N_MAX 1029

static const size_t lengths[] = {0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65,
                                 127, 257, 1000, N_MAX};
#define N_LENGTHS (sizeof lengths / sizeof lengths[0])

/* Coefficients: exactly one (the copy / plain-add path), and others,
 * including ones a float cannot hold exactly. */
static const double coefs[] = {1.0, 0.5, 3.0, -2.25, 1.0 / 3.0, 1e-3, 1.0000000001};
#define N_COEFS (sizeof coefs / sizeof coefs[0])

static uint64_t lcg_state = 0x2545f4914f6cdd1dull;
static uint64_t lcg_next(void) {
  lcg_state = lcg_state * 6364136223846793005ull + 1442695040888963407ull;
  return lcg_state >> 11;
}

/* Values over many magnitudes and both signs, with a few infinities,
 * signed zeros and subnormals. No NaN: its payload is not what we test. */
static double value_next(void) {
  uint64_t r = lcg_next();
  switch (r % 64) {
  case 0: return 0.0;
  case 1: return -0.0;
  case 2: return 1e-310;
  case 3: return -1e-40;
  default: {
    double m = (double)(r % 1000003) / 1000003.0 - 0.5;
    int e = (int)((r >> 20) % 40) - 20;
    return ldexp(m, e);
  }
  }
}

static void fill_f32(float *v, size_t n) {
  for (size_t i = 0; i < n; i++) v[i] = (float)value_next();
}

static void fill_f64(double *v, size_t n) {
  for (size_t i = 0; i < n; i++) v[i] = value_next();
}

/* A buffer whose payload starts |mis| bytes past an aligned address. */
typedef struct odd_buf {
  uint8_t *base;
  uint8_t *p;
} odd_buf;

static odd_buf odd_alloc(size_t bytes, size_t mis) {
  odd_buf b;
  b.base = malloc(bytes + 16);
  assert_non_null(b.base);
  b.p = b.base + mis;
  return b;
}

/* The kernels against plain loops, for one dtype, every length and
 * coefficient, aligned and not. Elements are moved with memcpy so the
 * reference never performs a misaligned access itself. */
static void reduce_check_f32(size_t mis_acc, size_t mis_x) {
  static float x[N_MAX], acc0[N_MAX], ref[N_MAX], got[N_MAX];
  for (size_t li = 0; li < N_LENGTHS; li++) {
    size_t n = lengths[li];
    for (size_t ci = 0; ci < N_COEFS; ci++) {
      double a = coefs[ci];
      float af = (float)a;
      fill_f32(x, n);
      fill_f32(acc0, n);
      odd_buf bx = odd_alloc(n * 4, mis_x), bacc = odd_alloc(n * 4, mis_acc);
      memcpy(bx.p, x, n * 4);
      for (int first = 0; first <= 1; first++) {
        memcpy(bacc.p, acc0, n * 4);
        ded_reduce_axpy(DED_DTYPE_F32, bacc.p, bx.p, n, a, first);
        for (size_t i = 0; i < n; i++) {
          if (first)
            ref[i] = a == 1.0 ? x[i] : af * x[i];
          else
            ref[i] = a == 1.0 ? acc0[i] + x[i] : acc0[i] + af * x[i];
        }
        memcpy(got, bacc.p, n * 4);
        if (n && memcmp(got, ref, n * 4) != 0)
          fail_msg("f32 axpy n=%zu a=%g first=%d misalign=%zu/%zu", n, a, first, mis_acc, mis_x);
      }
      /* div: acc /= w */
      memcpy(bacc.p, acc0, n * 4);
      ded_reduce_div(DED_DTYPE_F32, bacc.p, n, a);
      for (size_t i = 0; i < n; i++) ref[i] = acc0[i] / af;
      memcpy(got, bacc.p, n * 4);
      if (n && memcmp(got, ref, n * 4) != 0) fail_msg("f32 div n=%zu w=%g", n, a);
      /* scale: out = s * in, out of place and in place */
      ded_reduce_scale(DED_DTYPE_F32, bacc.p, bx.p, n, a);
      for (size_t i = 0; i < n; i++) ref[i] = a == 1.0 ? x[i] : af * x[i];
      memcpy(got, bacc.p, n * 4);
      if (n && memcmp(got, ref, n * 4) != 0) fail_msg("f32 scale n=%zu s=%g", n, a);
      ded_reduce_scale(DED_DTYPE_F32, bx.p, bx.p, n, a);
      memcpy(got, bx.p, n * 4);
      if (n && memcmp(got, ref, n * 4) != 0) fail_msg("f32 scale in place n=%zu s=%g", n, a);
      free(bx.base);
      free(bacc.base);
    }
  }
}

static void reduce_check_f64(size_t mis_acc, size_t mis_x) {
  static double x[N_MAX], acc0[N_MAX], ref[N_MAX], got[N_MAX];
  for (size_t li = 0; li < N_LENGTHS; li++) {
    size_t n = lengths[li];
    for (size_t ci = 0; ci < N_COEFS; ci++) {
      double a = coefs[ci];
      fill_f64(x, n);
      fill_f64(acc0, n);
      odd_buf bx = odd_alloc(n * 8, mis_x), bacc = odd_alloc(n * 8, mis_acc);
      memcpy(bx.p, x, n * 8);
      for (int first = 0; first <= 1; first++) {
        memcpy(bacc.p, acc0, n * 8);
        ded_reduce_axpy(DED_DTYPE_F64, bacc.p, bx.p, n, a, first);
        for (size_t i = 0; i < n; i++) {
          if (first)
            ref[i] = a == 1.0 ? x[i] : a * x[i];
          else
            ref[i] = a == 1.0 ? acc0[i] + x[i] : acc0[i] + a * x[i];
        }
        memcpy(got, bacc.p, n * 8);
        if (n && memcmp(got, ref, n * 8) != 0)
          fail_msg("f64 axpy n=%zu a=%g first=%d misalign=%zu/%zu", n, a, first, mis_acc, mis_x);
      }
      memcpy(bacc.p, acc0, n * 8);
      ded_reduce_div(DED_DTYPE_F64, bacc.p, n, a);
      for (size_t i = 0; i < n; i++) ref[i] = acc0[i] / a;
      memcpy(got, bacc.p, n * 8);
      if (n && memcmp(got, ref, n * 8) != 0) fail_msg("f64 div n=%zu w=%g", n, a);
      ded_reduce_scale(DED_DTYPE_F64, bacc.p, bx.p, n, a);
      for (size_t i = 0; i < n; i++) ref[i] = a == 1.0 ? x[i] : a * x[i];
      memcpy(got, bacc.p, n * 8);
      if (n && memcmp(got, ref, n * 8) != 0) fail_msg("f64 scale n=%zu s=%g", n, a);
      ded_reduce_scale(DED_DTYPE_F64, bx.p, bx.p, n, a);
      memcpy(got, bx.p, n * 8);
      if (n && memcmp(got, ref, n * 8) != 0) fail_msg("f64 scale in place n=%zu s=%g", n, a);
      free(bx.base);
      free(bacc.base);
    }
  }
}

static void test_reduce_f32_aligned(void **state) {
  (void)state;
  reduce_check_f32(0, 0);
}

static void test_reduce_f32_unaligned(void **state) {
  (void)state;
  reduce_check_f32(1, 3);
  reduce_check_f32(2, 0);
  reduce_check_f32(0, 7);
}

static void test_reduce_f64_aligned(void **state) {
  (void)state;
  reduce_check_f64(0, 0);
}

static void test_reduce_f64_unaligned(void **state) {
  (void)state;
  reduce_check_f64(1, 3);
  reduce_check_f64(4, 0);
  reduce_check_f64(0, 5);
}

/*
 * Three members added in commit order must give (x0 + x1) + x2, never
 * x0 + (x1 + x2). The values make the two differ: at 2^24 (f32) and 1e16
 * (f64) adding 1 is lost to rounding (ties to even), adding 2 is not.
 */
static void test_reduce_fixed_order(void **state) {
  (void)state;
  enum { N = 37 }; /* odd, so both vector body and tail are covered */
  float x0f[N], x1f[N], x2f[N], accf[N];
  double x0d[N], x1d[N], x2d[N], accd[N];
  for (int i = 0; i < N; i++) {
    x0f[i] = 16777216.0f;
    x1f[i] = x2f[i] = 1.0f;
    x0d[i] = 1e16;
    x1d[i] = x2d[i] = 1.0;
  }
  ded_reduce_axpy(DED_DTYPE_F32, accf, x0f, N, 1.0, true);
  ded_reduce_axpy(DED_DTYPE_F32, accf, x1f, N, 1.0, false);
  ded_reduce_axpy(DED_DTYPE_F32, accf, x2f, N, 1.0, false);
  ded_reduce_axpy(DED_DTYPE_F64, accd, x0d, N, 1.0, true);
  ded_reduce_axpy(DED_DTYPE_F64, accd, x1d, N, 1.0, false);
  ded_reduce_axpy(DED_DTYPE_F64, accd, x2d, N, 1.0, false);
  for (int i = 0; i < N; i++) {
    assert_true(accf[i] == 16777216.0f); /* not 16777218 */
    assert_true(accd[i] == 1e16);        /* not 1e16 + 2 */
  }
  /* With coefficients, still term by term: ((a0 x0) + (a1 x1)) + (a2 x2). */
  const double a[3] = {0.5, 1.0 / 3.0, 3.0};
  double xs[3][N];
  fill_f64(xs[0], N);
  fill_f64(xs[1], N);
  fill_f64(xs[2], N);
  for (int m = 0; m < 3; m++) ded_reduce_axpy(DED_DTYPE_F64, accd, xs[m], N, a[m], m == 0);
  for (int i = 0; i < N; i++) {
    double t0 = a[0] * xs[0][i], t1 = a[1] * xs[1][i], t2 = a[2] * xs[2][i];
    double want = (t0 + t1) + t2;
    assert_memory_equal(&accd[i], &want, sizeof want);
  }
}

/* The first member's copy works when the accumulator is the input. */
static void test_reduce_first_in_place(void **state) {
  (void)state;
  float v[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  ded_reduce_axpy(DED_DTYPE_F32, v, v, 9, 1.0, true);
  for (int i = 0; i < 9; i++) assert_true(v[i] == (float)(i + 1));
  ded_reduce_div(DED_DTYPE_F32, v, 9, 1.0); /* dividing by one changes nothing */
  for (int i = 0; i < 9; i++) assert_true(v[i] == (float)(i + 1));
  ded_reduce_div(DED_DTYPE_F32, v, 9, 2.0);
  for (int i = 0; i < 9; i++) assert_true(v[i] == (float)(i + 1) / 2.0f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reduce_f32_aligned),
      cmocka_unit_test(test_reduce_f32_unaligned),
      cmocka_unit_test(test_reduce_f64_aligned),
      cmocka_unit_test(test_reduce_f64_unaligned),
      cmocka_unit_test(test_reduce_fixed_order),
      cmocka_unit_test(test_reduce_first_in_place),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
