/*
 * ded_pick.c: a round's codec (ded_pick.h).
 */
#include "ded_pick.h"

#include <math.h>

#include "../core/ded_types.h"

double ded_pick_ratio(const ded_codec *c, unsigned ncontrib) {
  switch (c->kind) {
  case DED_CODEC_NONE: return 1.0;
  case DED_CODEC_FP16:
  case DED_CODEC_BF16: return 0.5;
  case DED_CODEC_INT8: return (1.0 + 4.0 / DED_CODEC_INT8_BLOCK) / 4.0;
  case DED_CODEC_TOPK:
  case DED_CODEC_SPARSE: {
    /* About 1.5 bytes of index gap and 4 of value per element kept: the
     * contributions keep the fraction, the result up to every
     * contributor's own. */
    double f = c->fraction, per = 5.5 / 4.0;
    double res = f * (double)(ncontrib ? ncontrib : 1);
    return 0.5 * per * f + 0.5 * per * (res < 1.0 ? res : 1.0);
  }
  }
  return 1.0;
}

void ded_pick_codec(const ded_pick_member *m, unsigned n, unsigned ncontrib, uint8_t dtype,
                    uint64_t count, double t_per_byte, ded_codec *out) {
  *out = (ded_codec){DED_CODEC_NONE, DED_CODEC_TOPK_DEFAULT};
  if (ncontrib < 2 || dtype != DED_DTYPE_F32 || n == 0) return;
  ded_codec cap = {DED_CODEC_TOPK, 1.0 / DED_CODEC_PPM};
  bool any_auto = false;
  uint32_t compute_us = 0;
  for (unsigned i = 0; i < n; i++) {
    ded_codec c;
    if (ded_codec_from_wire(m[i].compress & (uint8_t)~DED_JOIN_COMPRESS_AUTO, m[i].compress_ppm,
                            &c) != 0)
      return; /* checked when decoded */
    if (ded_codec_lossier(&cap, &c)) cap = c;
    any_auto |= (m[i].compress & DED_JOIN_COMPRESS_AUTO) != 0;
    if (m[i].compute_us && (!compute_us || m[i].compute_us < compute_us))
      compute_us = m[i].compute_us;
  }
  if (!any_auto) {
    *out = cap;
    return;
  }
  if (!(t_per_byte > 0.0) || !isfinite(t_per_byte)) return;
  double t_none = t_per_byte * (double)count * 4.0;
  if (t_none <= DED_PICK_FAST_S) return;
  static const ded_codec_kind order[] = {DED_CODEC_NONE, DED_CODEC_FP16, DED_CODEC_INT8,
                                         DED_CODEC_TOPK};
  double budget = (double)compute_us * 1e-6;
  for (unsigned i = 0; i < sizeof order / sizeof order[0]; i++) {
    ded_codec c = {order[i], order[i] == DED_CODEC_TOPK ? cap.fraction : DED_CODEC_TOPK_DEFAULT};
    if (order[i] == DED_CODEC_TOPK && cap.kind != DED_CODEC_TOPK) break;
    if (ded_codec_lossier(&c, &cap)) break;
    *out = c;
    if (t_none * ded_pick_ratio(&c, ncontrib) <= budget) return;
  }
  *out = cap;
}
