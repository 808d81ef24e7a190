/*
 * ded_join.c: joining a round and failing over (ded_round.h): which
 * membership a round goes by, which view and coordinator it asks, the
 * JOIN it sends (WAIT_PREV -> JOINING -> JOINED), and a failover to the
 * next view. Part of the round module (ded_round_int.h).
 */
#include <stdio.h>
#include <string.h>

#include "../core/ded_assert.h"
#include "../core/ded_err.h"
#include "../ded_node_int.h"
#include "ded_round_int.h"

/* ------------------------------------------------------------------ */
/* joining: WAIT_PREV -> JOINING -> JOINED                              */
/* ------------------------------------------------------------------ */

static const uint8_t *round_cand(const ded_round *r, uint32_t v) {
  return ded_lin_coord((const uint8_t *)r->lin, r->nlin, r->no, v);
}

/* ded_rounds_run_ahead, and in |*who| the peer that says so. */
static uint64_t round_run_ahead(ded_node *node, const ded_peer **who) {
  uint64_t best = 0;
  for (size_t i = 0; i < node->peers.n; i++) {
    const ded_peer *p = node->peers.v[i];
    const ded_record *rec = ded_peer_record(node, p);
    ded_progress prog;
    if (ded_peer_participates(node, p) && rec && ded_record_progress(rec, &prog) &&
        prog.round >= best) {
      best = prog.round;
      *who = p;
    }
  }
  return best;
}

/* Moves |r| to the first view from |v| on whose coordinator is not known
 * to be gone. When every member of the membership it goes by is gone for
 * good (evicted, left or unknown: a joiner that loaded a state whose
 * members all crashed before it got to them), no view can ever decide:
 * this job goes on as a group of one, its state its own, until it meets
 * another group of the run (ded_rounds_check_groups), as every job cut
 * off alone does.
 * Returns false if |r| is out of step: every member of the membership it
 * goes by is gone for good while a peer we can talk to completed this
 * round or a later one (the run went on elsewhere: this job reloads its
 * state, node->rounds.stale). */
static bool round_pick_view(ded_node *node, ded_round *r, uint32_t v) {
  /* A round that holds an attempt whose members are all gone can be out
   * of step too (its result, if any, died with them); without a peer
   * ahead it waits for the bound: our own coordinator would decide that
   * attempt again, whose shards no one alive holds. */
  bool holds = ded_round_holds(r);
  bool dead = !holds &&
              ded_peers_all_evicted(node, (const uint8_t(*)[DED_ID_BYTES])r->lin, r->nlin);
  const ded_peer *who = NULL;
  uint64_t ahead = dead || ded_round_attempt_gone(node, r) ? round_run_ahead(node, &who) : 0;
  if (who && ahead >= r->no) { /* (who: the members are gone) */
    node_log(node, DED_LOG_WARN, "round %llu: every member of %s is gone, and peer %s completed "
             "round %llu: this job is out of step and reloads the run's state",
             (unsigned long long)r->no, holds ? "its attempt" : "the round before", who->sid,
             (unsigned long long)ahead);
    node->rounds.stale = DED_MAX(node->rounds.stale, ahead + 1);
    return false;
  }
  if (dead) {
    node_log(node, DED_LOG_WARN, "round %llu: every member of the round before is gone (evicted, "
             "or left): this job goes on alone until it meets other peers of the run",
             (unsigned long long)r->no);
    uint8_t(*me)[DED_ID_BYTES] = ded_mem_calloc(node->mem, 1, DED_LIN_BYTES(1));
    if (me) {
      memcpy(me[0], node->ident.id, DED_ID_BYTES);
      ded_mem_free(node->mem, r->lin);
      r->lin = me;
      r->nlin = 1;
      r->lin_attempt = 0;
      v = 0;
    }
  }
  for (unsigned i = 0; i + 1 < r->nlin && ded_peer_gone(node, round_cand(r, v)); i++) v++;
  r->view = v;
  memcpy(r->coord, round_cand(r, v), DED_ID_BYTES);
  return true;
}

void ded_round_out_of_step(ded_node *node, ded_round *r) {
  r->behind = DED_MAX(node->rounds.stale, r->no + 1);
  ded_round_report(node, r, 0, true, true);
}

int ded_round_set_lin(ded_node *node, ded_round *r, const uint8_t (*ids)[DED_ID_BYTES],
                         unsigned n, uint64_t attempt) {
  uint8_t(*copy)[DED_ID_BYTES] = ded_mem_malloc(node->mem, DED_LIN_BYTES(n));
  if (!copy) return DED_ERR_NOMEM;
  memcpy(copy, ids, DED_LIN_BYTES(n));
  ded_mem_free(node->mem, r->lin);
  r->lin = copy;
  r->nlin = n;
  r->lin_attempt = attempt;
  return 0;
}

/* How long a member that joined |r| waits for a decision while its
 * coordinator holds the round for an announced member, until |until|: as
 * long as the hold, then the usual wait; the hold is bounded as the
 * coordinator bounds it. */
uint64_t ded_round_held_wait(const ded_node *node, const ded_round *r, uint64_t until) {
  until = DED_MIN(until, r->joined_ns + ded_timing_cap(&node->timing));
  return until + ded_timing_join_wait(&node->timing, r->view);
}

/* True if every round before |r| has ended here. */
static bool round_before_over(const ded_node *node, const ded_round *r) {
  for (unsigned i = 0; i < node->rounds.n; i++) {
    const ded_round *o = node->rounds.v[i];
    if (o->no < r->no && !ded_round_over(o)) return false;
  }
  return true;
}

/* The newest round that ended here with the swarm's result, if every
 * round after it before |r| ended here without one, voting for nothing
 * (ded_lineage_void_base), and no round before |r| is still running here:
 * then this peer vouches for those rounds in its JOIN. NULL otherwise. */
const ded_lin_entry *ded_round_void_base(ded_node *node, const ded_round *r) {
  if (r->genesis || r->no < 2 || !round_before_over(node, r)) return NULL;
  return ded_rounds_void_base(node, r->no);
}

bool ded_round_held(ded_node *node, const ded_round *r, uint64_t *round1, uint64_t *attempt) {
  if (r->genesis || r->no < 1 || !round_before_over(node, r)) return false;
  const ded_lin_entry *prev = ded_lineage_get(&node->lin, r->no - 1);
  if (prev && prev->final && prev->attempt != 0 && prev->final_attempt == prev->attempt)
    return false; /* in step */
  const ded_disc *d = &node->disc;
  /* Diverged (its state is not the run's until it reloads a founder's, or
   * another group's: ded_rounds.diverged): it holds none of the run's.
   * Otherwise its newest result, with its own values of the rounds since
   * added, as a voucher's (the founder mechanism mends that). */
  bool none = !d->progress_set || node->rounds.diverged;
  *round1 = none ? 0 : d->progress.round + 1;
  *attempt = none ? 0 : d->progress.attempt;
  return *round1 < r->no; /* else it holds the round before's state, loaded */
}

/* True if every id of |e| but ours is gone for good (ded_peer_evicted). */
static bool others_gone(ded_node *node, const ded_lin_entry *e) {
  for (unsigned i = 0; i < e->n; i++)
    if (!id_is_me(node, e->ids[i]) && !ded_peer_evicted(node, e->ids[i])) return false;
  return true;
}

static bool round_vote_moot(void *ctx, const ded_lin_entry *base, const ded_lin_entry *voted) {
  ded_node *node = ctx;
  return others_gone(node, base) && others_gone(node, voted) &&
         ded_rounds_run_ahead(node) < voted->round;
}

uint64_t ded_rounds_run_ahead(ded_node *node) {
  const ded_peer *who = NULL;
  return round_run_ahead(node, &who);
}

const ded_lin_entry *ded_rounds_void_base(ded_node *node, uint64_t round) {
  const ded_lin_entry *vb = ded_lineage_void_base(&node->lin, round, round_vote_moot, node);
  /* A round we stepped down from may have completed on a quorum that does
   * not count us: we cannot vouch that it had no result (ded_abstain.h). */
  return vb && ded_abstain_between(node, vb->round, round) ? NULL : vb;
}

/* Sends our JOIN (with what we hold of an attempt, if we ran one) to the
 * coordinator of the round's view: -> JOINED, or JOINING while its
 * connection is not ready. */
void ded_round_send_join(ded_node *node, ded_round *r, uint64_t now_ns) {
  ded_msg_join j;
  memset(&j, 0, sizeof j);
  j.round = r->no;
  j.view = r->view;
  j.dtype = r->a.dtype;
  j.count = r->a.count;
  j.pos = r->pos;
  j.step = r->a.step;
  j.weight = r->a.weight;
  j.n_local = r->a.n_local;
  ded_round_join_prefs(node, &j);
  j.flags = (uint8_t)((r->genesis ? DED_JOIN_F_GENESIS : 0) |
                      (node->s.mode == DED_MODE_CLIENT ? DED_JOIN_F_CLIENT : 0) |
                      (node->s.mode == DED_MODE_AUX ? DED_JOIN_F_AUX : 0));
  const ded_lin_entry *vb = ded_round_void_base(node, r);
  if (vb) {
    j.flags |= DED_JOIN_F_VOID;
    j.void_round = vb->round;
    j.void_attempt = vb->attempt;
  } else if (ded_round_held(node, r, &j.held_round, &j.held_attempt)) {
    j.flags |= DED_JOIN_F_HELD;
  }
  r->state = ROUND_JOINED;
  r->joined_ns = now_ns;
  r->wait_ns = now_ns + (r->genesis ? node->s.rendezvous_timeout_ns
                                    : ded_timing_join_wait(&node->timing, r->view));
  /* The coordinator waits for members that announced themselves: so do we. */
  uint64_t held = r->genesis || r->view ? 0 : ded_coord_intent_until(node, r->no, NULL, now_ns, false);
  if (held) r->wait_ns = DED_MAX(r->wait_ns, ded_round_held_wait(node, r, held));
  uint8_t *have = NULL;
  if (ded_round_holds(r)) {
    have = ded_attempt_have_bits(&r->att, node->mem);
    if (!have) {
      ded_round_fail(node, r, DED_ERR_NOMEM);
      return;
    }
    j.flags |= DED_JOIN_F_STATUS;
    j.acc_view = r->accepted ? r->acc_view : DED_VIEW_NONE;
    j.plan = r->att.plan;
    j.have = have;
  }
  bool self = id_is_me(node, r->coord);
  ded_peer *p = self ? NULL : ded_peer_find(node, r->coord);
  if (!self && (!p || !p->conn || p->left)) {
    r->state = ROUND_JOINING;
    if (p) ded_peer_maybe_connect(node, p, now_ns);
    ded_mem_free(node->mem, have);
    return;
  }
  size_t cap = (have ? DED_JOIN_STATUS_FRAME_BYTES(r->att.plan.k) : DED_JOIN_FRAME_BYTES) +
               (j.flags & (DED_JOIN_F_VOID | DED_JOIN_F_HELD) ? DED_JOIN_VOID_BYTES : 0);
  uint8_t *frame = ded_mem_malloc(node->mem, cap);
  int rv = DED_ERR_NOMEM;
  if (frame) {
    ded_wr w = ded_wr_init(frame, cap);
    if (have)
      ded_msg_join_status_encode(&w, &j, &r->att.plan, have);
    else
      ded_msg_join_encode(&w, &j);
    DED_ASSERT(!w.err && w.pos == cap);
    node_log(node, DED_LOG_DEBUG, "round %llu: join view %u -> %s", (unsigned long long)r->no,
             r->view, self ? "this peer" : p->sid);
    rv = 0;
    if (self)
      node_post_self(node, frame, w.pos); /* our own coordinator side, once we return */
    else
      rv = ded_conn_send_ctrl(node, p->conn, frame, w.pos);
  }
  ded_mem_free(node->mem, frame);
  ded_mem_free(node->mem, have);
  if (rv) ded_round_fail(node, r, rv);
}

void ded_rounds_on_conn_replaced(ded_node *node, const uint8_t id[DED_ID_BYTES], const char *sid,
                                 uint64_t now_ns) {
  for (unsigned i = 0; i < node->rounds.n; i++) {
    ded_round *r = node->rounds.v[i];
    if (r->state != ROUND_JOINED || memcmp(r->coord, id, DED_ID_BYTES) != 0) continue;
    node_log(node, DED_LOG_DEBUG, "round %llu: the connection to coordinator %s broke; "
             "joining view %u again on another", (unsigned long long)r->no, sid, r->view);
    uint64_t joined = r->joined_ns, wait = r->wait_ns;
    ded_round_send_join(node, r, now_ns);
    if (r->state == ROUND_JOINED) { /* the same wait as before */
      r->joined_ns = joined;
      r->wait_ns = wait;
    }
  }
}

/* Chooses the coordinator of |r| once we can (WAIT_PREV), and asks it in
 * once its connection is ready (JOINING). */
/* Whether another peer's record says it completed a round of the run. */
static bool round_run_seen(const ded_node *node) {
  for (size_t i = 0; i < ded_table_count(&node->disc.table); i++) {
    const ded_table_entry *e = ded_table_at(&node->disc.table, i);
    ded_progress prog;
    if (!id_is_me(node, e->id) && ded_record_progress(&e->rec, &prog)) return true;
  }
  return false;
}

/* |r| goes by the membership of |e|: its lineage, view and coordinator.
 * False if that ended it (short of memory, or out of step). */
static bool round_go_by(ded_node *node, ded_round *r, const ded_lin_entry *e) {
  if (ded_round_set_lin(node, r, (const uint8_t(*)[DED_ID_BYTES])e->ids, e->n, e->attempt)) {
    ded_round_fail(node, r, DED_ERR_NOMEM);
    return false;
  }
  r->genesis = false;
  if (!round_pick_view(node, r, ded_lineage_view_hint(&node->lin, r->no))) {
    ded_round_out_of_step(node, r);
    return false;
  }
  return true;
}

void ded_round_try_join(ded_node *node, ded_round *r, uint64_t now_ns) {
  switch (r->state) {
  case ROUND_JOINING: {
    ded_peer *p = ded_peer_find(node, r->coord);
    if (id_is_me(node, r->coord) || (p && p->conn))
      ded_round_send_join(node, r, now_ns);
    else if (p)
      ded_peer_maybe_connect(node, p, now_ns);
    return;
  }
  case ROUND_WAIT_PREV:
    break;
  default:
    return;
  }
  if (ded_abstain_from(node, r->no)) {
    /* We stepped down from it: the round went on without our vote, and
     * our member takes no part in it (ded_abstain.h). */
    node_log(node, DED_LOG_INFO, "round %llu: this job stepped down from it while its trainer "
             "was away: out of step, it reloads the run's state", (unsigned long long)r->no);
    r->behind = DED_MAX(node->rounds.stale, r->no + 1);
    ded_round_report(node, r, 0, true, true);
    return;
  }
  if (r->no < node->rounds.stale || node->rounds.yielding) {
    /* The swarm has moved past this round for good: no one would answer
     * but with STALE (or, a coordinator we guess, not at all). Or our
     * group yields to another: the shim reloads that one's state. */
    node_log(node, DED_LOG_DEBUG, "round %llu: out of step (the swarm is at %llu): own values",
             (unsigned long long)r->no, (unsigned long long)node->rounds.stale);
    r->behind = DED_MAX(node->rounds.stale, r->no + 1);
    ded_round_report(node, r, 0, true, true);
    return;
  }
  ded_lin_entry *prev = ded_lineage_get(&node->lin, r->no - 1);
  const ded_lin_entry *vb = prev ? NULL : ded_round_void_base(node, r);
  if (vb) {
    /* No attempt of the round before reached us, and the rounds since
     * our last result ended with none here: that result's membership is
     * our best guess (in a failover, every peer that vouches for those
     * rounds takes it: ded_round_failover). */
    if (!round_go_by(node, r, vb)) return;
  } else if (r->no > 0 && prev) {
    if (!round_go_by(node, r, prev)) return;
  } else if (node->lin.have_members) {
    /* The previous round's commit is still on its way, unless that round
     * ended here without one: then this job is out of step, and the
     * newest membership it knows is its best guess. */
    ded_round *o = ded_round_find(node, r->no - 1);
    if (o && !ded_round_over(o)) return;
    ded_lin_entry *best = ded_lineage_newest_below(&node->lin, r->no);
    if (!best) return;
    if (!round_go_by(node, r, best)) return;
  } else {
    /* No lineage: this is the swarm's first round as far as we know. The
     * rounds before it must be decided first, so only the oldest waits. */
    for (unsigned i = 0; i < node->rounds.n; i++) {
      ded_round *o = node->rounds.v[i];
      if (o->no < r->no && !ded_round_over(o)) return;
    }
    const uint8_t *min_id;
    /* Rendezvous; and a client waits until it sees a peer that is not one.
     * Once a peer's record says the run is past a round, the rendezvous is
     * over whoever is missing (one that crashed would hold us to the
     * rendezvous bound): the coordinator we ask sends us STALE, or the
     * result we came late for. */
    if ((ded_peers_genesis_view(node, &min_id) < node->s.min_peers && !round_run_seen(node)) ||
        !min_id)
      return;
    r->genesis = true;
    memcpy(r->coord, min_id, DED_ID_BYTES);
  }
  ded_round_send_join(node, r, now_ns);
}

/* ------------------------------------------------------------------ */
/* failover: an attempt is frozen, the next view gets our report        */
/* ------------------------------------------------------------------ */

/* Stops the attempt |r| runs: nothing more is sent for it, nothing more
 * is added, and it completes only if a coordinator says it stands. */
void ded_round_freeze(ded_node *node, ded_round *r) {
  if (r->att_state != ROUND_ATT_LIVE) return;
  r->att_state = ROUND_ATT_FROZEN;
  ded_conns_detach(node, r, false);
  ded_attempt_drop_fetchers(&r->att, node->mem);
}

/* Gives up on the current coordinator or attempt: report to the next view. */
void ded_round_failover(ded_node *node, ded_round *r, const char *why, uint64_t now_ns) {
  if (ded_round_over(r)) return;
  if (r->genesis && !ded_round_holds(r)) {
    /* The first round's coordinator went before committing: choose again
     * among those still here. */
    node_log(node, DED_LOG_INFO, "round %llu: %s; choosing the first round's coordinator again",
             (unsigned long long)r->no, why);
    r->state = ROUND_WAIT_PREV;
    ded_round_try_join(node, r, now_ns);
    return;
  }
  if (r->genesis || r->nlin == 0) {
    /* A first round that has an attempt: its members are the lineage. */
    uint8_t(*ids)[DED_ID_BYTES] = ded_lineage_of_plan(node->mem, &r->att.plan);
    if (!ids) {
      ded_round_fail(node, r, DED_ERR_NOMEM);
      return;
    }
    ded_mem_free(node->mem, r->lin);
    r->lin = ids;
    r->nlin = r->att.plan.k;
    r->genesis = false;
  }
  /* The membership may have moved on since we joined (the previous
   * round went through another attempt): fail over along the current one. */
  /* A peer that vouches for rounds with no result fails over along the
   * membership of its last result, as every such peer does, so that they
   * converge on one coordinator; view 0 went along the round before's
   * (where a peer that only missed that round finds the swarm's). */
  const ded_lin_entry *vb = ded_round_void_base(node, r);
  const ded_lin_entry *prev = vb ? vb : r->no > 0 ? ded_lineage_get(&node->lin, r->no - 1) : NULL;
  if (prev && (vb || prev->attempt != r->lin_attempt) &&
      ded_round_set_lin(node, r, (const uint8_t(*)[DED_ID_BYTES])prev->ids, prev->n, prev->attempt)) {
    ded_round_fail(node, r, DED_ERR_NOMEM);
    return;
  }
  ded_round_freeze(node, r);
  r->recoveries++;
  if (!round_pick_view(node, r, r->view + 1)) {
    ded_round_out_of_step(node, r);
    return;
  }
  ded_peer *p = ded_peer_find(node, r->coord);
  node_log(node, DED_LOG_INFO, "round %llu: %s; recovering through %s (view %u)",
           (unsigned long long)r->no, why, id_is_me(node, r->coord) ? "this peer" : p ? p->sid : "?",
           r->view);
  ded_round_send_join(node, r, now_ns);
}

