#include "ded_reduce.h"

#include <string.h>

#include "../core/ded_assert.h"
#include "../core/ded_types.h"

/* Element types that tolerate any alignment, so that chunks can be added
 * straight out of a socket buffer. */
typedef float ded_uf32 __attribute__((aligned(1), may_alias));
typedef double ded_uf64 __attribute__((aligned(1), may_alias));

#define REDUCE_AXPY(T, acc, x, n, a, first)                                                   \
  do {                                                                                       \
    T *restrict dst = (T *)(acc);                                                            \
    const T *restrict src = (const T *)(x);                                                  \
    if ((first) && (a) == 1) {                                                               \
      if ((void *)dst != (const void *)src) memmove(dst, src, (n) * sizeof(T));              \
    } else if (first) {                                                                      \
      for (size_t i = 0; i < (n); i++) dst[i] = (a)*src[i];                                  \
    } else if ((a) == 1) {                                                                   \
      for (size_t i = 0; i < (n); i++) dst[i] += src[i];                                     \
    } else {                                                                                 \
      for (size_t i = 0; i < (n); i++) dst[i] += (a)*src[i];                                 \
    }                                                                                        \
  } while (0)

void ded_reduce_axpy(uint8_t dtype, void *acc, const void *x, size_t n, double a, bool first) {
  switch (dtype) {
  case DED_DTYPE_F32: {
    float af = (float)a;
    REDUCE_AXPY(ded_uf32, acc, x, n, af, first);
    break;
  }
  case DED_DTYPE_F64: REDUCE_AXPY(ded_uf64, acc, x, n, a, first); break;
  default: DED_ASSERT(!"unknown dtype");
  }
}

void ded_reduce_div(uint8_t dtype, void *acc, size_t n, double w) {
  if (w == 1.0) return;
  switch (dtype) {
  case DED_DTYPE_F32: {
    ded_uf32 *p = acc;
    float wf = (float)w;
    for (size_t i = 0; i < n; i++) p[i] /= wf;
    break;
  }
  case DED_DTYPE_F64: {
    ded_uf64 *p = acc;
    for (size_t i = 0; i < n; i++) p[i] /= w;
    break;
  }
  default: DED_ASSERT(!"unknown dtype");
  }
}

void ded_reduce_scale(uint8_t dtype, void *out, const void *in, size_t n, double s) {
  size_t es = ded_dtype_size(dtype);
  DED_ASSERT(es != 0);
  if (s == 1.0) {
    if (out != in) memmove(out, in, n * es);
    return;
  }
  if (dtype == DED_DTYPE_F32) {
    ded_uf32 *o = out;
    const ded_uf32 *x = in;
    float sf = (float)s;
    for (size_t i = 0; i < n; i++) o[i] = sf * x[i];
  } else {
    ded_uf64 *o = out;
    const ded_uf64 *x = in;
    for (size_t i = 0; i < n; i++) o[i] = s * x[i];
  }
}
