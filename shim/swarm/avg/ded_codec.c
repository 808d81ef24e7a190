/*
 * ded_codec.c: the gradient codecs (ded_codec.h).
 */
#include "ded_codec.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/ded_err.h"

/* ---- one element ---- */

static uint32_t f32_bits(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  return x;
}

static float bits_f32(uint32_t x) {
  float f;
  memcpy(&f, &x, sizeof f);
  return f;
}

uint16_t ded_codec_f32_to_f16(float f) {
  uint32_t x = f32_bits(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u); /* NaN, quiet */
  if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7bffu); /* rounds past 65504: saturate */
  if (ax < 0x38800000u) { /* below 2^-14: a subnormal half, or zero */
    if (ax <= 0x33000000u) return sign; /* at most 2^-25: a tie at most, to even zero */
    uint32_t e = ax >> 23, mant = (ax & 0x7fffffu) | 0x800000u;
    unsigned shift = 126u - e; /* 14..24 */
    uint32_t r = mant >> shift, rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (r & 1u))) r++;
    return (uint16_t)(sign | r);
  }
  uint32_t m = ax - 0x38000000u; /* exponent rebiased from 127 to 15 */
  uint32_t r = (m + 0x0fffu + ((m >> 13) & 1u)) >> 13;
  return (uint16_t)(sign | r);
}

float ded_codec_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {
    float v = (float)m * 5.9604644775390625e-8f; /* m * 2^-24, exact */
    return bits_f32(f32_bits(v) | sign);
  }
  if (e == 31) return bits_f32(sign | 0x7f800000u | (m << 13));
  return bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

uint16_t ded_codec_f32_to_bf16(float f) {
  uint32_t x = f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* NaN, quiet */
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}

float ded_codec_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

/* ---- names and sizes ---- */

const char *ded_codec_name(ded_codec_kind kind) {
  switch (kind) {
  case DED_CODEC_NONE: return "none";
  case DED_CODEC_FP16: return "fp16";
  case DED_CODEC_BF16: return "bf16";
  case DED_CODEC_INT8: return "int8";
  case DED_CODEC_TOPK: return "topk";
  case DED_CODEC_SPARSE: return "sparse";
  }
  return "?";
}

int ded_codec_parse(const char *text, ded_codec *out) {
  if (!text || !out) return DED_ERR_INVALID_ARG;
  ded_codec c = {DED_CODEC_NONE, DED_CODEC_TOPK_DEFAULT};
  static const ded_codec_kind kinds[] = {DED_CODEC_NONE, DED_CODEC_FP16, DED_CODEC_BF16,
                                         DED_CODEC_INT8, DED_CODEC_TOPK};
  size_t i;
  for (i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (strcmp(text, ded_codec_name(kinds[i])) == 0) break;
  if (i < sizeof kinds / sizeof kinds[0]) {
    c.kind = kinds[i];
  } else if (strncmp(text, "topk:", 5) == 0 && text[5]) {
    char *end;
    double f = strtod(text + 5, &end);
    if (*end || !(f >= 1.0 / DED_CODEC_PPM && f <= 1.0)) return DED_ERR_INVALID_ARG;
    c.kind = DED_CODEC_TOPK;
    c.fraction = floor(f * DED_CODEC_PPM + 0.5) / DED_CODEC_PPM; /* as the wire says it */
  } else {
    return DED_ERR_INVALID_ARG;
  }
  *out = c;
  return 0;
}

void ded_codec_to_wire(const ded_codec *c, uint8_t *kind, uint32_t *ppm) {
  *kind = (uint8_t)c->kind;
  *ppm = 0;
  if (c->kind == DED_CODEC_TOPK) {
    double f = floor(c->fraction * DED_CODEC_PPM + 0.5);
    *ppm = f < 1.0 ? 1u : f > DED_CODEC_PPM ? DED_CODEC_PPM : (uint32_t)f;
  }
}

int ded_codec_from_wire(uint8_t kind, uint32_t ppm, ded_codec *out) {
  if (kind > DED_CODEC_TOPK) return DED_ERR_PROTO;
  if (kind == DED_CODEC_TOPK ? ppm == 0 || ppm > DED_CODEC_PPM : ppm != 0) return DED_ERR_PROTO;
  out->kind = (ded_codec_kind)kind;
  out->fraction = kind == DED_CODEC_TOPK ? (double)ppm / DED_CODEC_PPM : DED_CODEC_TOPK_DEFAULT;
  return 0;
}

ded_codec ded_codec_result(const ded_codec *c) {
  ded_codec r = *c;
  if (c->kind == DED_CODEC_TOPK) r.kind = DED_CODEC_SPARSE;
  return r;
}

size_t ded_codec_topk_k(double fraction, size_t n) {
  if (n == 0) return 0;
  double k = ceil(fraction * (double)n);
  if (!(k >= 1.0)) return 1;
  return k >= (double)n ? n : (size_t)k;
}

#define LEB_MAX 10 /* bytes of a u64 as LEB128: what a decoder reads at most */
#define LEB_ENC_MAX 5 /* ... what an encoder writes: gaps are below n <= 2^32 */

/* Blocks of INT8 the range [first, first + n) touches. */
static size_t int8_blocks(size_t first, size_t n) {
  if (n == 0) return 0;
  return (first + n - 1) / DED_CODEC_INT8_BLOCK - first / DED_CODEC_INT8_BLOCK + 1;
}

size_t ded_codec_bound(const ded_codec *c, size_t n) {
  switch (c->kind) {
  case DED_CODEC_NONE: return 4 * n;
  case DED_CODEC_FP16:
  case DED_CODEC_BF16: return 2 * n;
  case DED_CODEC_INT8: return n + 4 * (n / DED_CODEC_INT8_BLOCK + 2);
  case DED_CODEC_TOPK: return 4 + (LEB_ENC_MAX + 4) * ded_codec_topk_k(c->fraction, n);
  case DED_CODEC_SPARSE: return 4 + (LEB_ENC_MAX + 4) * n;
  }
  return 0;
}

/* ---- little-endian floats ---- */

static void put_f32(uint8_t *p, float f) {
  uint32_t x = f32_bits(f);
  p[0] = (uint8_t)x;
  p[1] = (uint8_t)(x >> 8);
  p[2] = (uint8_t)(x >> 16);
  p[3] = (uint8_t)(x >> 24);
}

static float get_f32(const uint8_t *p) {
  return bits_f32((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                  (uint32_t)p[3] << 24);
}

static void put_u16(uint8_t *p, uint16_t x) {
  p[0] = (uint8_t)x;
  p[1] = (uint8_t)(x >> 8);
}

static uint16_t get_u16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* ---- INT8 ---- */

/* x rounded to the nearest integer, ties to even, for |x| < 2^22: the
 * sum lies in [2^23, 2^24), where a float's step is 1. */
static float round_even(float x) {
  const float magic = 12582912.0f; /* 1.5 * 2^23 */
  return (x + magic) - magic;
}

static float int8_scale(const float *v, size_t total, size_t block) {
  size_t lo = block * DED_CODEC_INT8_BLOCK;
  size_t hi = lo + DED_CODEC_INT8_BLOCK < total ? lo + DED_CODEC_INT8_BLOCK : total;
  float m = 0.0f;
  for (size_t i = lo; i < hi; i++) {
    float a = fabsf(v[i]);
    if (a != a) return a; /* NaN: no scale */
    m = a > m ? a : m;
  }
  return m / 127.0f;
}

static int int8_encode(const float *v, size_t total, size_t first, size_t n, uint8_t *out,
                       size_t *len) {
  size_t pos = 0, i = first, end = first + n;
  while (i < end) {
    size_t block = i / DED_CODEC_INT8_BLOCK;
    size_t stop = (block + 1) * DED_CODEC_INT8_BLOCK < end ? (block + 1) * DED_CODEC_INT8_BLOCK : end;
    float s = int8_scale(v, total, block);
    /* A block below 127 times the smallest normal float is zeros: its
     * scale is 0 (1 / s would overflow, and a subnormal scale decodes
     * differently where subnormals are flushed). */
    if (!(s >= FLT_MIN)) s = 0.0f;
    put_f32(out + pos, s);
    pos += 4;
    /* q = x / s as x times 1 / s: one division a block */
    float inv = s > 0.0f ? 1.0f / s : 0.0f;
    for (; i < stop; i++) {
      float q = round_even(v[i] * inv);
      q = q > 127.0f ? 127.0f : q < -127.0f ? -127.0f : q;
      out[pos++] = (uint8_t)(int8_t)q;
    }
  }
  *len = pos;
  return 0;
}

static int int8_decode(const uint8_t *in, size_t len, size_t first, size_t n, float *out) {
  size_t pos = 0, i = first, end = first + n;
  if (len != n + 4 * int8_blocks(first, n)) return DED_ERR_PROTO;
  while (i < end) {
    size_t block = i / DED_CODEC_INT8_BLOCK;
    size_t stop = (block + 1) * DED_CODEC_INT8_BLOCK < end ? (block + 1) * DED_CODEC_INT8_BLOCK : end;
    float s = get_f32(in + pos);
    pos += 4;
    /* NaN, negative, or so large that 127 of it overflows (an encoder's
     * is max|x| / 127) */
    if (!(s >= 0.0f && s <= FLT_MAX / 127.0f)) return DED_ERR_PROTO;
    for (; i < stop; i++) {
      int8_t q = (int8_t)in[pos++];
      if (q == -128) return DED_ERR_PROTO; /* never encoded */
      out[i - first] = (float)q * s;
    }
  }
  return 0;
}

/* ---- TOPK ---- */

static void swap_u(uint32_t *a, uint32_t *b) {
  uint32_t t = *a;
  *a = *b;
  *b = t;
}

/* The |k|-th largest (1-based) of the |n| values at |m|, reordering them.
 * Magnitudes are compared as their bits (for finite floats, the same
 * order), so that a process that flushes subnormals to zero chooses as
 * every other does. */
static uint32_t kth_largest(uint32_t *m, size_t n, size_t k) {
  size_t lo = 0, hi = n - 1, want = k - 1;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    /* median of three as the pivot, to lo */
    if (m[mid] > m[lo]) swap_u(&m[mid], &m[lo]);
    if (m[hi] > m[lo]) swap_u(&m[hi], &m[lo]);
    if (m[mid] > m[hi]) swap_u(&m[mid], &m[hi]);
    swap_u(&m[lo], &m[hi]);
    uint32_t p = m[lo];
    size_t i = lo, j = hi + 1;
    for (;;) { /* descending: larger to the left */
      do i++; while (i <= hi && m[i] > p);
      do j--; while (m[j] < p);
      if (i >= j) break;
      swap_u(&m[i], &m[j]);
    }
    swap_u(&m[lo], &m[j]);
    if (j == want) return m[j];
    if (j < want)
      lo = j + 1;
    else
      hi = j - 1;
  }
  return m[lo];
}

static size_t leb_put(uint8_t *p, uint64_t x) {
  size_t n = 0;
  do {
    uint8_t b = (uint8_t)(x & 0x7f);
    x >>= 7;
    p[n++] = (uint8_t)(b | (x ? 0x80 : 0));
  } while (x);
  return n;
}

/* A LEB128 u64 at |p| (|len| bytes left), its size in |*used|; false if
 * truncated, longer than 10 bytes, or past 64 bits. */
static bool leb_get(const uint8_t *p, size_t len, uint64_t *x, size_t *used) {
  uint64_t v = 0;
  for (size_t i = 0; i < len && i < LEB_MAX; i++) {
    uint64_t b = p[i] & 0x7fu;
    if (i == LEB_MAX - 1 && b > 1) return false;
    v |= b << (7 * i);
    if (!(p[i] & 0x80)) {
      *x = v;
      *used = i + 1;
      return true;
    }
  }
  return false;
}

/* Writes TOPK's and SPARSE's u32 k; returns its size. */
static size_t sparse_put_k(uint8_t *out, size_t k) {
  out[0] = (uint8_t)k;
  out[1] = (uint8_t)(k >> 8);
  out[2] = (uint8_t)(k >> 16);
  out[3] = (uint8_t)(k >> 24);
  return 4;
}

/* Top-k's selection: a histogram of the magnitudes' bits (for finite
 * floats, their order is the values' order) finds the bucket the k-th
 * largest falls in; only that bucket's magnitudes are then selected among.
 * 2048 buckets: the exponent and the mantissa's top three bits. */
#define TOPK_BUCKET_SHIFT 20
#define TOPK_BUCKETS (1u << (31 - TOPK_BUCKET_SHIFT))

static int topk_encode(const ded_codec *c, const float *x, size_t n, uint8_t *out, size_t *len,
                       const ded_mem *mem) {
  size_t k = ded_codec_topk_k(c->fraction, n);
  size_t pos = sparse_put_k(out, k);
  if (k == 0) {
    *len = pos;
    return 0;
  }
  uint32_t hist[TOPK_BUCKETS];
  memset(hist, 0, sizeof hist);
  for (size_t i = 0; i < n; i++) hist[(f32_bits(x[i]) & 0x7fffffffu) >> TOPK_BUCKET_SHIFT]++;
  size_t above = 0;
  uint32_t b = TOPK_BUCKETS - 1;
  while (above + hist[b] < k) above += hist[b--]; /* the buckets hold all n >= k */
  size_t nc = hist[b], j = 0;
  uint32_t *cand = ded_mem_malloc(mem, nc * sizeof *cand);
  if (!cand) return DED_ERR_NOMEM;
  for (size_t i = 0; i < n; i++) {
    uint32_t a = f32_bits(x[i]) & 0x7fffffffu;
    if (a >> TOPK_BUCKET_SHIFT == b) cand[j++] = a;
  }
  uint32_t tb = kth_largest(cand, nc, k - above); /* magnitudes compare as their bits */
  for (size_t i = 0; i < nc; i++) above += cand[i] > tb;
  ded_mem_free(mem, cand);
  size_t ties = k - above, taken = 0;
  uint64_t prev = UINT64_MAX; /* -1 */
  /* The values go to the end of the bound (past where the indices can
   * reach: at most LEB_ENC_MAX bytes each), and move behind them at the end. */
  uint8_t *vals = out + 4 + LEB_ENC_MAX * k;
  size_t nidx = 0;
  for (size_t i = 0; i < n && nidx < k; i++) {
    uint32_t a = f32_bits(x[i]) & 0x7fffffffu;
    if (a < tb) continue;
    if (a == tb && taken++ >= ties) continue;
    pos += leb_put(out + pos, (uint64_t)i - prev - 1);
    prev = (uint64_t)i;
    put_f32(vals + 4 * nidx++, x[i]);
  }
  memmove(out + pos, vals, 4 * k);
  *len = pos + 4 * k;
  return 0;
}

/* SPARSE: every element that is not zero (NaN included), indices first,
 * then their values, read again from |x|. */
static void sparse_encode(const float *x, size_t n, uint8_t *out, size_t *len) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) k += x[i] != 0.0f;
  size_t pos = sparse_put_k(out, k);
  uint64_t prev = UINT64_MAX;
  for (size_t i = 0; i < n; i++)
    if (x[i] != 0.0f) {
      pos += leb_put(out + pos, (uint64_t)i - prev - 1);
      prev = (uint64_t)i;
    }
  for (size_t i = 0; i < n; i++)
    if (x[i] != 0.0f) {
      put_f32(out + pos, x[i]);
      pos += 4;
    }
  *len = pos;
}

/* TOPK and SPARSE: |want| is top-k's k, or SIZE_MAX for any k up to n. */
static int topk_decode(size_t want, const uint8_t *in, size_t len, size_t n, float *out) {
  memset(out, 0, n * sizeof *out);
  if (len < 4) return DED_ERR_PROTO;
  uint64_t k = (uint64_t)in[0] | (uint64_t)in[1] << 8 | (uint64_t)in[2] << 16 |
               (uint64_t)in[3] << 24;
  if (want == SIZE_MAX ? k > (uint64_t)n : k != want) return DED_ERR_PROTO;
  size_t pos = 4;
  uint64_t prev = UINT64_MAX;
  /* The values follow the indices: first find where the indices end. */
  size_t at = pos;
  for (uint64_t i = 0; i < k; i++) {
    uint64_t gap;
    size_t used;
    if (!leb_get(in + at, len - at, &gap, &used)) return DED_ERR_PROTO;
    at += used;
    /* (prev + 1 wraps from -1 to 0; with gap < n no sum wraps) */
    uint64_t idx = prev + 1 + gap;
    if (gap >= (uint64_t)n || idx >= (uint64_t)n) return DED_ERR_PROTO; /* increasing: by gaps */
    prev = idx;
  }
  if (len - at != 4 * k) return DED_ERR_PROTO;
  prev = UINT64_MAX;
  for (uint64_t i = 0; i < k; i++) {
    uint64_t gap = 0;
    size_t used = 1;
    (void)leb_get(in + pos, len - pos, &gap, &used); /* read whole above */
    pos += used;
    prev = prev + 1 + gap;
    out[prev] = get_f32(in + at + 4 * i);
  }
  return 0;
}

/* ---- the codec ---- */

static bool all_finite(const float *x, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!isfinite(x[i])) return false;
  return true;
}

int ded_codec_encode(const ded_codec *c, const float *v, size_t total, size_t first, size_t n,
                     uint8_t *out, size_t cap, size_t *len, const ded_mem *mem) {
  if (!c || !v || !out || !len || first > total || n > total - first ||
      cap < ded_codec_bound(c, n))
    return DED_ERR_INVALID_ARG;
  const float *x = v + first;
  switch (c->kind) {
  case DED_CODEC_NONE:
    for (size_t i = 0; i < n; i++) put_f32(out + 4 * i, x[i]);
    *len = 4 * n;
    return 0;
  case DED_CODEC_FP16:
    for (size_t i = 0; i < n; i++) put_u16(out + 2 * i, ded_codec_f32_to_f16(x[i]));
    *len = 2 * n;
    return 0;
  case DED_CODEC_BF16:
    for (size_t i = 0; i < n; i++) put_u16(out + 2 * i, ded_codec_f32_to_bf16(x[i]));
    *len = 2 * n;
    return 0;
  case DED_CODEC_INT8:
    if (!all_finite(x, n)) return DED_ERR_INVALID_ARG;
    /* the scales read whole blocks, beyond the range too */
    for (size_t b = first / DED_CODEC_INT8_BLOCK; n && b <= (first + n - 1) / DED_CODEC_INT8_BLOCK; b++)
      if (!isfinite(int8_scale(v, total, b))) return DED_ERR_INVALID_ARG;
    return int8_encode(v, total, first, n, out, len);
  case DED_CODEC_TOPK:
    if (!(c->fraction > 0.0 && c->fraction <= 1.0) || n > UINT32_MAX || !all_finite(x, n))
      return DED_ERR_INVALID_ARG;
    return topk_encode(c, x, n, out, len, mem);
  case DED_CODEC_SPARSE:
    if (n > UINT32_MAX) return DED_ERR_INVALID_ARG;
    sparse_encode(x, n, out, len);
    return 0;
  }
  return DED_ERR_INVALID_ARG;
}

int ded_codec_decode(const ded_codec *c, const uint8_t *in, size_t len, size_t total, size_t first,
                     size_t n, float *out) {
  if (first > total || n > total - first) return DED_ERR_PROTO;
  switch (c->kind) {
  case DED_CODEC_NONE:
    if (len != 4 * n) return DED_ERR_PROTO;
    for (size_t i = 0; i < n; i++) out[i] = get_f32(in + 4 * i);
    return 0;
  case DED_CODEC_FP16:
    if (len != 2 * n) return DED_ERR_PROTO;
    for (size_t i = 0; i < n; i++) out[i] = ded_codec_f16_to_f32(get_u16(in + 2 * i));
    return 0;
  case DED_CODEC_BF16:
    if (len != 2 * n) return DED_ERR_PROTO;
    for (size_t i = 0; i < n; i++) out[i] = ded_codec_bf16_to_f32(get_u16(in + 2 * i));
    return 0;
  case DED_CODEC_INT8:
    memset(out, 0, n * sizeof *out);
    return int8_decode(in, len, first, n, out);
  case DED_CODEC_TOPK:
    if (!(c->fraction > 0.0 && c->fraction <= 1.0)) return DED_ERR_PROTO;
    return topk_decode(ded_codec_topk_k(c->fraction, n), in, len, n, out);
  case DED_CODEC_SPARSE: return topk_decode(SIZE_MAX, in, len, n, out);
  }
  return DED_ERR_PROTO;
}
