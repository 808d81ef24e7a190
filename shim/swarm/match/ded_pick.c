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

/* The most that both |a| and |b| allow: the same codec, top-k's larger
 * fraction; none if either is none; none for fp16 and bf16 (fp16 keeps
 * bits that bf16 drops, bf16 a range that fp16 saturates: neither loses
 * less than the other everywhere); else the less lossy (fp16 and bf16
 * before int8, int8 before top-k). */
static ded_codec pick_meet(ded_codec a, ded_codec b) {
  static const unsigned rank[] = {[DED_CODEC_NONE] = 0, [DED_CODEC_FP16] = 1,
                                  [DED_CODEC_BF16] = 1, [DED_CODEC_INT8] = 2,
                                  [DED_CODEC_TOPK] = 3, [DED_CODEC_SPARSE] = 0};
  if (a.kind == b.kind) {
    if (a.kind == DED_CODEC_TOPK && b.fraction > a.fraction) a.fraction = b.fraction;
    return a;
  }
  if (rank[a.kind] == rank[b.kind]) return (ded_codec){DED_CODEC_NONE, DED_CODEC_TOPK_DEFAULT};
  return rank[a.kind] < rank[b.kind] ? a : b;
}

/* Whether |c| is within what |cap| allows. */
static bool pick_allowed(ded_codec c, ded_codec cap) {
  ded_codec m = pick_meet(c, cap);
  return m.kind == c.kind && (c.kind != DED_CODEC_TOPK || m.fraction == c.fraction);
}

void ded_pick_codec(const ded_pick_member *m, unsigned n, uint8_t dtype, uint64_t elems,
                    double t_per_byte, ded_codec *out) {
  *out = (ded_codec){DED_CODEC_NONE, DED_CODEC_TOPK_DEFAULT};
  if (n < 2 || dtype != DED_DTYPE_F32) return;
  ded_codec cap = {DED_CODEC_TOPK, 1.0 / DED_CODEC_PPM};
  bool any_auto = false;
  uint32_t compute_us = 0;
  for (unsigned i = 0; i < n; i++) {
    ded_codec c;
    if (ded_codec_from_wire(m[i].compress & (uint8_t)~DED_JOIN_COMPRESS_AUTO, m[i].compress_ppm,
                            &c) != 0)
      return; /* checked when decoded */
    cap = pick_meet(cap, c);
    any_auto |= (m[i].compress & DED_JOIN_COMPRESS_AUTO) != 0;
    if (m[i].compute_us && (!compute_us || m[i].compute_us < compute_us))
      compute_us = m[i].compute_us;
  }
  if (!any_auto) {
    *out = cap;
    return;
  }
  if (!(t_per_byte > 0.0) || !isfinite(t_per_byte)) return;
  double t_none = t_per_byte * (double)elems * 4.0;
  if (t_none <= DED_PICK_FAST_S) return;
  static const ded_codec_kind order[] = {DED_CODEC_NONE, DED_CODEC_FP16, DED_CODEC_INT8,
                                         DED_CODEC_TOPK};
  double budget = (double)compute_us * 1e-6;
  for (unsigned i = 0; i < sizeof order / sizeof order[0]; i++) {
    ded_codec c = {order[i], order[i] == DED_CODEC_TOPK ? cap.fraction : DED_CODEC_TOPK_DEFAULT};
    if (!pick_allowed(c, cap)) continue;
    *out = c;
    if (t_none * ded_pick_ratio(&c, n) <= budget) return;
  }
  *out = cap;
}
