#include "ded_plan.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../core/ded_err.h"
#include "../ded_node_int.h"
#include "ded_pick.h"

/* What the planner knows of joiner |id|: its mode and published rates,
 * and which of them are early (DED_PERF_F_*, into |*early|). */
static ded_lp_peer plan_peer(const ded_node *node, const uint8_t id[DED_ID_BYTES], uint8_t *early) {
  ded_lp_peer lp = {0.0, 0.0, 0.0, DED_MODE_NODE};
  ded_perf perf = {0, 0, 0, 0};
  if (memcmp(id, node->ident.id, DED_ID_BYTES) == 0) {
    lp.mode = node->s.mode;
    perf = node->disc.perf;
  } else {
    const ded_peer *p = ded_peer_find(node, id);
    const ded_record *rec = p ? ded_peer_record((ded_node *)node, p) : NULL;
    if (rec) {
      lp.mode = rec->mode;
      ded_record_perf(rec, &perf);
    }
  }
  lp.up_Bps = perf.up_kBps * 1000.0;
  lp.down_Bps = perf.down_kBps * 1000.0;
  lp.add_Bps = perf.add_kBps * 1000.0;
  /* A download is measured only as fast as the senders send: a fast peer
   * among slow ones reads as slow, and the plan would then starve it. An
   * upload shows its link far more often (a sender's own link is what
   * fills first). So a download is taken to be at least the upload, as
   * on nearly every access link (DSL, cable, fibre, mobile). */
  if (lp.down_Bps < lp.up_Bps) lp.down_Bps = lp.up_Bps;
  *early = perf.flags;
  return lp;
}

ded_lp_peer ded_plan_lp_peer(const ded_node *node, const uint8_t id[DED_ID_BYTES]) {
  uint8_t early;
  return plan_peer(node, id, &early);
}

void ded_plan_lift_early(ded_lp_peer *lp, const uint8_t *early, size_t n) {
  double up = 0.0, down = 0.0;
  for (size_t i = 0; i < n; i++) {
    if (lp[i].up_Bps > up) up = lp[i].up_Bps;
    if (lp[i].down_Bps > down) down = lp[i].down_Bps;
  }
  for (size_t i = 0; i < n; i++) {
    if ((early[i] & DED_PERF_F_UP_EARLY) && lp[i].up_Bps * DED_PLAN_EARLY_LIFT >= up)
      lp[i].up_Bps = up;
    if ((early[i] & DED_PERF_F_DOWN_EARLY) && lp[i].down_Bps * DED_PLAN_EARLY_LIFT >= down)
      lp[i].down_Bps = down;
    if (lp[i].down_Bps > 0.0 && lp[i].down_Bps < lp[i].up_Bps) lp[i].down_Bps = lp[i].up_Bps;
  }
}

/* A plan member's mode, from its flags. */
static uint8_t member_mode(uint8_t flags) {
  return flags & DED_MEMBER_F_CLIENT ? DED_MODE_CLIENT
         : flags & DED_MEMBER_F_AUX  ? DED_MODE_AUX
                                     : DED_MODE_NODE;
}

/* What a round of |plan| should take, by the model of ded_lp.h, at the
 * members' published rates, a rate not measured yet taken as a slow home
 * link's (DED_RATE_UNKNOWN_BPS); 0 if that cannot be told. */
uint64_t ded_plan_estimate_ns(ded_node *node, const ded_msg_commit *plan) {
  unsigned k = plan->k;
  ded_lp_peer *lp = ded_mem_calloc(node->mem, k, sizeof *lp);
  double *frac = ded_mem_calloc(node->mem, k, sizeof *frac);
  uint64_t est = 0;
  if (lp && frac && plan->count > 0) {
    for (unsigned i = 0; i < k; i++) {
      const ded_msg_member *m = &plan->members[i];
      lp[i] = ded_plan_lp_peer(node, m->id); /* as read: an early rate's bound, for patience */
      lp[i].mode = member_mode(m->flags);
      if (!(lp[i].up_Bps > 0.0)) lp[i].up_Bps = DED_RATE_UNKNOWN_BPS;
      if (!(lp[i].down_Bps > 0.0)) lp[i].down_Bps = DED_RATE_UNKNOWN_BPS;
      uint64_t end = i + 1 < k ? plan->members[i + 1].shard_off : plan->count;
      frac[i] = (double)(end - m->shard_off) / (double)plan->count;
    }
    ded_codec c;
    unsigned ncontrib = 0;
    for (unsigned i = 0; i < k; i++) ncontrib += !(plan->members[i].flags & DED_MEMBER_F_AUX);
    double ratio = 1.0;
    if (ded_codec_from_wire(plan->codec, plan->codec_ppm, &c) == 0) ratio = ded_pick_ratio(&c, ncontrib);
    double s = ded_lp_time(lp, k, frac) * (double)plan->count * (double)ded_dtype_size(plan->dtype) *
               ratio;
    if (isfinite(s) && s > 0.0) est = s < 1e9 ? (uint64_t)(s * 1e9) : UINT64_MAX / 4;
  }
  ded_mem_free(node->mem, lp);
  ded_mem_free(node->mem, frac);
  return est;
}

/* Fixes the members (|g|'s joins) and their shares into |cm|
 * (docs/architecture.md, "Adaptive averaging"): the DeDLOC program over the
 * joiners' published rates, or equal shares if that is our setting. The
 * plan is logged when it changes. */
int ded_plan_make(ded_node *node, const ded_gather *g, uint64_t round, ded_msg_commit *cm) {
  ded_lp_peer *lp = ded_mem_calloc(node->mem, g->n, sizeof *lp);
  uint8_t *early = ded_mem_calloc(node->mem, g->n, 1);
  if (!lp || !early) {
    ded_mem_free(node->mem, lp);
    ded_mem_free(node->mem, early);
    return DED_ERR_NOMEM;
  }
  for (size_t i = 0; i < g->n; i++) lp[i] = plan_peer(node, g->v[i].id, &early[i]);
  ded_plan_lift_early(lp, early, g->n);
  ded_lp_result res;
  int rv = ded_gather_commit_planned(g, node->mem, node->s.chunk_bytes, lp,
                                     node->s.plan == DED_PLAN_EQUAL, &res, cm);
  ded_mem_free(node->mem, lp);
  ded_mem_free(node->mem, early);
  if (rv != 0) return rv;
  if (res.fallback != DED_LP_E_NONE)
    node_log(node, DED_LOG_WARN, "round %llu: equal shares: %s", (unsigned long long)round,
             ded_lp_fallback_str(res.fallback));
  /* One line per change of plan: who reduces what share, at what rates. */
  uint64_t sig = cm->k * 31u + cm->codec * 7u + cm->codec_ppm;
  for (unsigned i = 0; i < cm->k; i++) sig = sig * 1000003u ^ (cm->members[i].shard_off * 1000 / (cm->count ? cm->count : 1));
  if (sig != node->planner.logged_sig && node->s.log_level >= DED_LOG_INFO) {
    node->planner.logged_sig = sig;
    char line[1024];
    size_t pos = 0;
    for (unsigned i = 0; i < cm->k && i < 16 && pos < sizeof line; i++) {
      uint64_t end = i + 1 < cm->k ? cm->members[i + 1].shard_off : cm->count;
      uint8_t fl;
      ded_lp_peer p = plan_peer(node, cm->members[i].id, &fl);
      char sid[9];
      ded_id_short(cm->members[i].id, sid);
      /* As measured; "+": early, a lower bound (the plan takes the fastest). */
      int n = snprintf(line + pos, sizeof line - pos, " %s=%.1f%%(%s,%.0f%s/%.0f%sMbit)", sid,
                       100.0 * (double)(end - cm->members[i].shard_off) / (double)cm->count,
                       ded_mode_str(member_mode(cm->members[i].flags)), p.up_Bps * 8e-6,
                       fl & DED_PERF_F_UP_EARLY ? "+" : "", p.down_Bps * 8e-6,
                       fl & DED_PERF_F_DOWN_EARLY ? "+" : "");
      if (n < 0) break;
      pos += (size_t)n;
    }
    double est = res.t_per_byte * (double)cm->count * (double)ded_dtype_size(cm->dtype);
    char est_s[32] = "?"; /* rates not known yet */
    if (isfinite(est) && est < 1e6) snprintf(est_s, sizeof est_s, "%.3f", est);
    char codec_s[32];
    if (cm->codec == DED_CODEC_TOPK)
      snprintf(codec_s, sizeof codec_s, "topk:%g", (double)cm->codec_ppm / DED_CODEC_PPM);
    else
      snprintf(codec_s, sizeof codec_s, "%s", ded_codec_name((ded_codec_kind)cm->codec));
    node_log(node, DED_LOG_INFO, "round %llu: plan %s, codec %s, est %s s (uncompressed):%s%s",
             (unsigned long long)round,
             node->s.plan == DED_PLAN_EQUAL ? "equal"
             : res.equal_kept               ? "lp (equal shares: links alike, or the program gains < 10 %)"
                                            : "lp",
             codec_s, est_s,
             pos < sizeof line ? line : "", cm->k > 16 ? " ..." : "");
  }
  return 0;
}
