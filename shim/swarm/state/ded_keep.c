/*
 * ded_keep.c: a backbone pulling the run's state and serving its
 * checkpoint (see ded_keep.h).
 */
#include "ded_keep.h"

#include <string.h>

#include "../core/ded_err.h"
#include "../core/ded_limits.h"
#include "../ded_node_int.h"
#include "ded_xfer.h"

int ded_keep_pull(ded_node *node, uint64_t min_round, uint64_t now_ns) {
  if (node->leaving) return DED_ERR_CLOSING;
  ded_xfer *st = &node->xfer;
  if (!node->cb.state_done || !node->s.no_rounds || ded_xfer_busy(node)) return DED_ERR_INVALID_ARG;
  st->pull = true;
  st->founding = false;
  st->reload = false;
  st->min_round = min_round;
  st->tries = 0;
  ded_xfer_begin(node, now_ns);
  ded_xfer_tick(node, now_ns);
  return 0;
}

int ded_keep_set(ded_node *node, ded_snapshot *snap, uint64_t now_ns) {
  ded_xfer *st = &node->xfer;
  bool ok = node->s.no_rounds && snap->round > 0 && snap->step_rounds > 0 &&
            snap->step_rounds <= DED_STATE_STEP_ROUNDS_MAX && snap->len <= DED_STATE_BYTES_MAX &&
            snap->pos <= DED_POS_MAX && (snap->bytes || snap->len == 0) &&
            ded_digest64(snap->bytes, snap->len) == snap->digest;
  if (!ok) {
    ded_mem_free(node->mem, snap->bytes);
    snap->bytes = NULL;
    return DED_ERR_INVALID_ARG;
  }
  /* Joiners fetching the one held now are cut off: they ask again. */
  ded_mem_free(node->mem, st->snap.bytes);
  ded_mem_free(node->mem, st->snap_lin);
  st->snap = *snap;
  snap->bytes = NULL;
  st->snap_lin = NULL;
  st->snap_nlin = 0;
  st->snap_lin_attempt = 0;
  st->have_snap = st->snap_kept = true;
  st->snap_used_ns = now_ns;
  st->snap_served_ns = 0;
  node_log(node, DED_LOG_INFO, "checkpoint of round %llu (%llu bytes) kept, for joiners once no "
           "trainer is left", (unsigned long long)st->snap.round,
           (unsigned long long)st->snap.len);
  return 0;
}

/* A connected trainer whose record shows a round at or past |round|. */
static bool keep_run_goes_on(ded_node *node, uint64_t round) {
  for (size_t i = 0; i < node->peers.n; i++) {
    ded_peer *p = node->peers.v[i];
    if (!ded_peer_participates(node, p)) continue;
    ded_progress prog;
    if (ded_record_progress(ded_peer_record(node, p), &prog) && prog.round >= round) return true;
  }
  return false;
}

void ded_keep_on_ask(ded_node *node, ded_peer *p, const ded_msg_state_ask *m) {
  ded_xfer *st = &node->xfer;
  if (node->leaving || !st->have_snap || !st->snap_kept || st->snap.round < m->min_round ||
      keep_run_goes_on(node, st->snap.round)) {
    ded_xfer_offer_to(node, p, DED_STATE_NONE);
    return;
  }
  node_log(node, DED_LOG_INFO, "peer %s asks for the run's state: offering the checkpoint of "
           "round %llu", p->sid, (unsigned long long)st->snap.round);
  ded_xfer_offer_to(node, p, DED_STATE_OFFER);
}

void ded_keep_ask_backbones(ded_node *node) {
  const ded_xfer *st = &node->xfer;
  for (size_t i = 0; i < node->peers.n && st->ndonors < DED_XFER_ASK_MAX; i++) {
    ded_peer *p = node->peers.v[i];
    if (!p->conn || p->left) continue;
    const ded_record *rec = ded_peer_record(node, p);
    if (rec && (rec->flags & DED_RECORD_F_NO_ROUNDS)) ded_xfer_ask_peer(node, p);
  }
}

void ded_keep_pull_finish(ded_node *node, uint64_t now_ns) {
  ded_xfer *st = &node->xfer;
  const ded_msg_state_offer *w = &st->want;
  unsigned n = 0;
  for (unsigned i = 0; i < st->ndonors; i++) n += st->donors[i].in_group;
  node_log(node, DED_LOG_INFO, "pulled the run's state of round %llu: %llu bytes in %llu ms "
           "(from %u peer%s)", (unsigned long long)w->round, (unsigned long long)w->len,
           (unsigned long long)((now_ns - st->asked_ns) / 1000000u), n, n == 1 ? "" : "s");
  ded_snapshot snap;
  memset(&snap, 0, sizeof snap);
  snap.round = w->round;
  snap.pos = w->pos;
  snap.step_rounds = w->step_rounds;
  snap.len = w->len;
  snap.digest = w->digest;
  snap.bytes = st->buf;
  st->buf = NULL;
  ded_xfer_done(node, 0, &snap);
  ded_mem_free(node->mem, snap.bytes); /* unless the callee took it */
}

void ded_keep_pull_none(ded_node *node, unsigned pending, uint64_t now_ns) {
  ded_xfer *st = &node->xfer;
  if (pending == 0) {
    node_log(node, DED_LOG_DEBUG, "nothing to pull: no trainer offered the run's state of round "
             "%llu or later (%u asked)", (unsigned long long)st->min_round, st->ndonors);
    ded_xfer_done(node, 0, NULL);
  } else if (now_ns >= st->deadline_ns) {
    node_log(node, DED_LOG_WARN, "no trainer offered the run's state of round %llu or later "
             "within %llu ms", (unsigned long long)st->min_round,
             (unsigned long long)(node->s.round_timeout_ns / 1000000u));
    ded_xfer_done(node, DED_ERR_TIMEOUT, NULL);
  }
}
