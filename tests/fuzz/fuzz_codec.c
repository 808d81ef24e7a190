/*
 * fuzz_codec.c: the gradient codecs' decoders (avg/ded_codec.h), on
 * payloads a peer chose.
 *
 * Input: u8 codec (kind mod 6; top-k's fraction from the high bits) |
 * u16 first | u16 n | u16 total beyond the range | payload. Only 0 or
 * DED_ERR_PROTO may come back. What decodes: top-k keeps at most its k
 * elements non-zero; int8 values are within 127 scales and finite;
 * sparse encodes again to what decodes the same; and
 * encoding what fp16, bf16 and none decoded gives the payload back (NaN
 * payloads aside, which fp16 makes quiet).
 */
#include <math.h>
#include <string.h>

#include "fuzz.h"

#include "avg/ded_codec.h"
#include "core/ded_err.h"

static const double fractions[] = {0.01, 0.001, 0.1, 0.5, 1.0, 0.3333};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 7) return 0;
  ded_codec c = {(ded_codec_kind)(data[0] % 6), fractions[(data[0] / 6) % 6]};
  size_t first = (size_t)data[1] | (size_t)data[2] << 8;
  size_t n = (size_t)data[3] | (size_t)data[4] << 8;
  size_t total = first + n + ((size_t)data[5] | (size_t)data[6] << 8);
  const uint8_t *p = data + 7;
  size_t len = size - 7;
  float *out = malloc((n ? n : 1) * sizeof *out);
  FUZZ_CHECK(out);
  int rv = ded_codec_decode(&c, p, len, total, first, n, out);
  FUZZ_CHECK(rv == 0 || rv == DED_ERR_PROTO);
  if (rv == 0) {
    switch (c.kind) {
    case DED_CODEC_TOPK: {
      size_t nz = 0;
      for (size_t i = 0; i < n; i++) nz += out[i] != 0.0f;
      FUZZ_CHECK(nz <= ded_codec_topk_k(c.fraction, n));
      break;
    }
    case DED_CODEC_INT8:
      for (size_t i = 0; i < n; i++) FUZZ_CHECK(isfinite(out[i]));
      break;
    case DED_CODEC_SPARSE: {
      size_t cap = ded_codec_bound(&c, n), alen;
      uint8_t *again = malloc(cap ? cap : 1);
      float *back = malloc((n ? n : 1) * sizeof *back);
      FUZZ_CHECK(again && back);
      FUZZ_CHECK(ded_codec_encode(&c, out, n, 0, n, again, cap, &alen, ded_mem_default()) == 0);
      FUZZ_CHECK(alen <= len);
      FUZZ_CHECK(ded_codec_decode(&c, again, alen, n, 0, n, back) == 0);
      for (size_t i = 0; i < n; i++)
        FUZZ_CHECK(out[i] == 0.0f ? back[i] == 0.0f : memcmp(&out[i], &back[i], 4) == 0);
      free(again);
      free(back);
      break;
    }
    case DED_CODEC_NONE:
    case DED_CODEC_FP16:
    case DED_CODEC_BF16: {
      size_t cap = ded_codec_bound(&c, n);
      uint8_t *again = malloc(cap ? cap : 1);
      FUZZ_CHECK(again);
      size_t alen;
      FUZZ_CHECK(ded_codec_encode(&c, out, n, 0, n, again, cap, &alen, ded_mem_default()) == 0);
      FUZZ_CHECK(alen == len);
      for (size_t i = 0; i < n; i++) {
        if (isnan(out[i]) || (c.kind == DED_CODEC_FP16 && isinf(out[i]))) continue;
        size_t w = c.kind == DED_CODEC_NONE ? 4 : 2;
        FUZZ_CHECK(memcmp(again + w * i, p + w * i, w) == 0);
      }
      free(again);
      break;
    }
    }
  }
  free(out);
  return 0;
}
