/*
 * ded_late.c: late members, both ways (ded_round.h). Serving them from the
 * rounds this peer finished (a FETCH, a probe of a round we completed); and
 * being one: announcing the next round we will join while we fetch the
 * result of one the swarm finished without us, and hearing where the swarm
 * is (AHEAD).
 */
#include <stdio.h>
#include <string.h>

#include "../avg/ded_reduce.h"
#include "../core/ded_assert.h"
#include "../core/ded_err.h"
#include "../ded_node_int.h"
#include "ded_round_int.h"

/* A round we finished, probed: say so, or the new view might decide
 * without us. */
void ded_round_probed_finished(ded_node *node, ded_round *r, ded_peer *from,
                                  const ded_msg_probe *m) {
  const ded_msg_commit *plan = ded_round_result_plan(node, m->round, NULL);
  if (!plan) {
    if (!r && m->round >= node->rounds.next) ded_lineage_set_view_hint(&node->lin, m->round, m->view);
    /* A round long past (its result and the membership before it are no
     * longer here): the prober, a coordinator that went on without us
     * (it was stopped, or cut off, and evicted meanwhile), must not decide
     * it on its own, as it could with a quorum that no longer counts us. */
    else if (!r && from && m->round > 0 && !ded_lineage_get(&node->lin, m->round - 1))
      ded_coord_send_stale(node, from, m->round);
    return;
  }
  ded_msg_join j;
  memset(&j, 0, sizeof j);
  j.round = m->round;
  j.view = m->view;
  j.dtype = plan->dtype;
  j.count = plan->count;
  j.weight = 0.0;
  j.n_local = 1;
  for (unsigned i = 0; i < plan->k; i++)
    if (id_is_me(node, plan->members[i].id)) {
      j.weight = plan->members[i].weight;
      j.n_local = plan->members[i].n_local;
    }
  ded_round_join_prefs(node, &j);
  uint8_t *have = ded_mem_malloc(node->mem, ((size_t)plan->k + 7) / 8);
  if (!have) return;
  memset(have, 0xff, ((size_t)plan->k + 7) / 8);
  if (plan->k % 8) have[plan->k / 8] = (uint8_t)((1u << (plan->k % 8)) - 1);
  j.flags = DED_JOIN_F_STATUS | DED_JOIN_F_DONE; /* kept only once it was the result */
  j.acc_view = m->view;
  j.plan = *plan;
  j.have = have;
  if (!from || from->conn) {
    size_t cap = DED_JOIN_STATUS_FRAME_BYTES(plan->k);
    uint8_t *f = ded_mem_malloc(node->mem, cap);
    if (f) {
      ded_wr w = ded_wr_init(f, cap);
      ded_msg_join_status_encode(&w, &j, plan, have);
      DED_ASSERT(!w.err);
      if (from)
        ded_conn_send_ctrl(node, from->conn, f, w.pos);
      else
        node_post_self(node, f, w.pos); /* our own coordinator side */
    }
    ded_mem_free(node->mem, f);
  }
  ded_mem_free(node->mem, have);
}

/* ------------------------------------------------------------------ */
/* serving others from rounds we finished; catching up                  */
/* ------------------------------------------------------------------ */

const ded_msg_commit *ded_round_result_plan(ded_node *node, uint64_t no, const uint8_t **digest) {
  ded_round *r = ded_round_find(node, no);
  if (r && ded_round_holds(r) && r->chosen == r->att.plan.attempt &&
      (r->state == ROUND_DONE_WAIT || (ded_round_over(r) && r->with_result))) {
    if (digest) *digest = r->digest;
    return &r->att.plan;
  }
  ded_hist_entry *h = ded_history_find(&node->hist, no);
  if (h && digest) *digest = h->digest;
  return h ? &h->plan : NULL;
}

/* Serves shard |s| of round |no|, attempt |attempt|, to |to|: now if we
 * hold it, as it is reduced if it is our own shard in progress. */
void ded_round_serve_fetch(ded_node *node, ded_peer *to, const ded_msg_fetch *f) {
  ded_round *r = ded_round_find(node, f->round);
  if (r && ded_round_holds(r) && r->att.plan.attempt == f->attempt && f->shard < r->att.plan.k &&
      (r->att_state == ROUND_ATT_LIVE || ded_attempt_shard_done(&r->att, f->shard))) {
    ded_round_serve_attempt(node, r, f->shard, to->id);
    return;
  }
  ded_hist_entry *h = ded_history_find(&node->hist, f->round);
  if (h && h->plan.attempt == f->attempt && f->shard < h->plan.k) {
    size_t es = ded_dtype_size(h->plan.dtype);
    unsigned s = f->shard;
    uint64_t lo = h->plan.members[s].shard_off;
    uint64_t len = (s + 1 < h->plan.k ? h->plan.members[s + 1].shard_off : h->plan.count) - lo;
    for (uint64_t e = 0; e < len; e += h->plan.chunk_elems) {
      uint64_t n = DED_MIN(h->plan.chunk_elems, len - e);
      size_t bytes = DED_DATA_HDR_BYTES + n * es;
      uint8_t *frame = ded_mem_malloc(node->mem, bytes);
      if (!frame) return;
      ded_msg_data_hdr_encode(frame, DED_MSG_RESULT, h->round, h->plan.attempt, lo + e,
                              DED_CODEC_NONE, n * es);
      memcpy(frame + DED_DATA_HDR_BYTES, h->res + (lo + e) * es, n * es);
      if (ded_conn_send_owned(node, to->conn, DED_Q_CTRL, frame, bytes)) return;
    }
    return;
  }
  /* An attempt whose commit is still on its way here (the fetcher, not a
   * member, heard it first): served once it is in. */
  if (r && ded_round_keep_early_fetch(node, r, to->id, f)) {
    node_log(node, DED_LOG_DEBUG, "round %llu: %s fetched shard %u of attempt %llx, which has not "
             "reached this peer yet: kept for it", (unsigned long long)f->round, to->sid,
             (unsigned)f->shard, (unsigned long long)f->attempt);
    return;
  }
  node_log(node, DED_LOG_DEBUG, "round %llu: %s fetched a shard this peer does not hold",
           (unsigned long long)f->round, to->sid);
  if (f->round < node->rounds.next && !r) ded_coord_send_stale(node, to, f->round);
}

/* We came late for |r|: tell the swarm that we will join the rounds
 * after it, so that it waits for us instead of leaving us late round after
 * round. The announcement goes to every peer of the run we are connected
 * to: any of them may coordinate a round, and the others wait for that
 * coordinator's decision. The coordinator of each round from |r| + 1 on
 * holds it in view 0 for as long as fetching one result should take us
 * (ded_intents_hold_ns), each round at most once (ded_intents_spent). We
 * announce again every deadline floor while we fetch (the round we fetch
 * may itself still be running, and take far longer than a fetch), and
 * each late round on the way announces the next, so the swarm waits as
 * long as we keep coming, however many rounds behind we are. A member
 * that finished |r| + 1 already answers AHEAD, saying where the swarm is
 * (for the trainer: far behind, it reloads). A trainer late by a few
 * steps goes at the swarm's pace and would never catch up on its own,
 * nor would one whose link fetches a result more slowly than the swarm
 * completes a round. */
static void announce_send(ded_node *node) {
  for (size_t i = 0; i < node->peers.n; i++) {
    ded_peer *p = node->peers.v[i];
    if (p->conn && ded_peer_participates(node, p))
      ded_conn_send_ctrl(node, p->conn, node->rounds.intent_frame, DED_JOIN_FRAME_BYTES);
  }
}

void ded_round_announce(ded_node *node, ded_round *r, uint64_t now_ns) {
  ded_rounds *rs = &node->rounds;
  uint64_t target = r->no + 1;
  if (target == rs->intent_round && now_ns < rs->intent_ns + node->s.deadline_floor_ns)
    return; /* announced just now */
  ded_round *nx = ded_round_find(node, target);
  if (nx && nx->state != ROUND_WAIT_PREV) return; /* already joined */
  if (target != rs->intent_round || !rs->intent_sent) rs->intent_first_ns = now_ns;
  rs->intent_round = target;
  rs->intent_ns = now_ns;
  ded_msg_join j;
  memset(&j, 0, sizeof j);
  j.round = target;
  j.dtype = r->a.dtype;
  j.count = r->a.count;
  j.pos = r->pos + r->a.count;
  j.weight = r->a.weight;
  j.n_local = r->a.n_local;
  ded_round_join_prefs(node, &j);
  j.flags = DED_JOIN_F_INTENT;
  ded_wr w = ded_wr_init(rs->intent_frame, sizeof rs->intent_frame);
  ded_msg_join_encode(&w, &j);
  DED_ASSERT(!w.err && w.pos == DED_JOIN_FRAME_BYTES);
  rs->intent_sent = true;
  announce_send(node);
}

/* The result of the round we came late for is in our trainer's hands, and
 * the swarm would hold the round we announced only for as long as our
 * fetch should take (ded_intents_hold_ns): a trainer that takes longer to
 * compute its next step than that would come late again, round after
 * round, never catching up. So while the trainer computes it, we go on
 * announcing it; the coordinator holds the round for a quarter of the
 * bound at most from its first JOIN (ded_coord_holds), and once (a round
 * decided without us spends our announcements of it). A trainer that
 * stops (SIGSTOP, a crash) stops announcing, and is waited for no more
 * than a fetch's time after its last announcement. */
bool ded_rounds_announcing(ded_node *node, uint64_t now_ns) {
  const ded_rounds *rs = &node->rounds;
  return rs->intent_sent && rs->intent_round == rs->next && !node->leaving && !node->s.no_rounds &&
         now_ns < rs->intent_first_ns + ded_timing_cap(&node->timing) &&
         !ded_round_find(node, rs->intent_round);
}

void ded_rounds_announce_stop(ded_node *node) { node->rounds.intent_sent = false; }

void ded_rounds_announce_again(ded_node *node, uint64_t now_ns) {
  ded_rounds *rs = &node->rounds;
  if (!ded_rounds_announcing(node, now_ns) || now_ns < rs->intent_ns + node->s.deadline_floor_ns)
    return;
  rs->intent_ns = now_ns;
  announce_send(node);
}

/* The smallest of the |n| ids at |ids|. */
static const uint8_t *ids_min(const uint8_t (*ids)[DED_ID_BYTES], unsigned n) {
  const uint8_t *m = ids[0];
  for (unsigned k = 1; k < n; k++)
    if (memcmp(ids[k], m, DED_ID_BYTES) < 0) m = ids[k];
  return m;
}

/* Whether our round |round| took another result than |attempt|: the
 * peer that took that one is of another group than ours. */
static bool group_differs(ded_node *node, uint64_t round, uint64_t attempt) {
  const ded_lin_entry *l = ded_lineage_get(&node->lin, round);
  return attempt != 0 && l && l->ids && l->final && l->final_attempt != 0 &&
         l->final_attempt != attempt;
}

static bool ids_has(const ded_lin_entry *e, const uint8_t id[DED_ID_BYTES]) {
  for (unsigned k = 0; k < e->n; k++)
    if (memcmp(e->ids[k], id, DED_ID_BYTES) == 0) return true;
  return false;
}

/* Whether peer |p|, whose record says |prog|, is of another group than
 * ours, whose newest round is |e|: it took another result of a round we
 * completed (a round of its record past our newest is kept until ours
 * get there), or it is far past our newest round without having been in
 * it. */
static bool group_other(ded_node *node, ded_peer *p, const ded_progress *prog,
                        const ded_lin_entry *e, bool far_counts) {
  if (ids_has(e, p->id)) {
    p->seen_round = 0; /* in our newest round */
    return false;
  }
  if (far_counts && prog->round >= e->round + NODE_GROUP_GAP_ROUNDS) return true;
  if (p->seen_round && p->seen_round <= e->round) {
    bool other = group_differs(node, p->seen_round, p->seen_attempt);
    p->seen_round = 0;
    if (other) return true;
  }
  if (prog->round <= e->round) return group_differs(node, prog->round, prog->attempt);
  if (!p->seen_round && prog->attempt) { /* ahead of us: compared once we get there */
    p->seen_round = prog->round;
    p->seen_attempt = prog->attempt;
  }
  return false;
}

/* Whether our group yields to |p|'s: the one further ahead wins when they
 * are NODE_GROUP_GAP_ROUNDS apart; closer, the one with more contributors
 * in its newest round, then the one with the smallest id. */
static bool group_yields(const ded_progress *prog, const uint8_t id[DED_ID_BYTES],
                         const ded_lin_entry *e) {
  if (prog->round >= e->round + NODE_GROUP_GAP_ROUNDS) return true;
  if (prog->round + NODE_GROUP_GAP_ROUNDS <= e->round) return false;
  if (prog->contributors != e->n) return prog->contributors > e->n;
  return memcmp(id, ids_min((const uint8_t(*)[DED_ID_BYTES])e->ids, e->n), DED_ID_BYTES) < 0;
}

void ded_rounds_check_groups(ded_node *node) {
  if (node->s.no_rounds || node->leaving || node->rounds.yielding) return;
  ded_lin_entry *e = ded_lineage_newest_below(&node->lin, node->rounds.next);
  if (!e || !e->final || !e->ids || e->n == 0) return;
  /* Far behind is no sign of another group while this job catches up: it
   * just resumed from a stop (the run went on without it, and it hears
   * so within the silence time: a STALE, or the results it fetches), or
   * its newest round completed late, on the result of the members who
   * made it (it is in their lineage), or came with a state it loaded (a
   * peer that joined after that state's round is not among its members,
   * and is far past it if the swarm went on while the state came: mp.
   * kill_stop_join). Evidence counts still: a result
   * of a round we both took that differs. (Taking such a job for
   * another group's ended its rounds out of step at once, and a job
   * with a step or two left finished off the run's parameters: churn
   * soak 1364265857.) */
  bool far_counts = node->now_ns >= node->quiet_until_ns && node->rounds.late_done != e->round + 1;
  for (size_t i = 0; i < node->peers.n; i++) {
    ded_peer *p = node->peers.v[i];
    const ded_record *rec = ded_peer_record(node, p);
    ded_progress prog;
    if (!ded_peer_participates(node, p) || !rec || !ded_record_progress(rec, &prog) ||
        prog.round < node->rounds.stale || !group_other(node, p, &prog, e, far_counts) ||
        !group_yields(&prog, p->id, e))
      continue;
    /* Ours ends now: our rounds end out of step, and the shim reloads,
     * at its next step, a state of a round the other group reaches after
     * both groups' (ded_xfer_reload), asking |p| first. */
    node_log(node, DED_LOG_WARN,
             "peer %s, of another group of the run (a partition healed), completed round %llu "
             "with %u contributors; this job's group is at round %llu with %u: %s; this job is "
             "out of step and reloads that group's state",
             p->sid, (unsigned long long)prog.round, prog.contributors,
             (unsigned long long)e->round, e->n,
             prog.round >= e->round + NODE_GROUP_GAP_ROUNDS ? "that group is far ahead"
             : prog.contributors != e->n ? "that group is larger"
                                         : "that group has the smaller id");
    node->rounds.stale = DED_MAX(node->rounds.stale, prog.round + 1);
    node->rounds.yielding = node->rounds.diverged = true;
    memcpy(node->rounds.founder, p->id, DED_ID_BYTES);
    return;
  }
}

ded_peer *ded_rounds_holder_of(ded_node *node, uint64_t round, ded_progress *prog) {
  ded_lin_entry *e = ded_lineage_newest_below(&node->lin, round);
  for (size_t i = 0; i < node->peers.n; i++) {
    ded_peer *p = node->peers.v[i];
    const ded_record *rec = ded_peer_record(node, p);
    if (!ded_peer_participates(node, p) || !rec || !ded_record_progress(rec, prog) ||
        prog->round < round)
      continue;
    /* Of another group only on evidence (group_other's, leaving what it
     * notes alone): a result of a round we both took that differs. One
     * far ahead we would yield to anyway (ded_rounds_check_groups). */
    if (e && e->final && e->ids && e->n > 0 && !ids_has(e, p->id) && p->seen_round &&
        p->seen_round <= e->round && group_differs(node, p->seen_round, p->seen_attempt))
      continue;
    return p;
  }
  return NULL;
}

void ded_round_on_ahead(ded_node *node, const ded_msg_stale *m) {
  if (m->round != node->rounds.intent_round || m->next_round <= node->rounds.catch_up)
    return; /* not the answer to our latest announcement */
  node_log(node, DED_LOG_DEBUG, "late for round %llu: the swarm is at %llu",
           (unsigned long long)m->round, (unsigned long long)m->next_round);
  node->rounds.catch_up = m->next_round;
}
