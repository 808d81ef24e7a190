/*
 * ded_donor.c: the donor side of state transfer (see ded_xfer.h): the
 * snapshot this job offers and the founding state it serves, the answers
 * to STATE_ASK and STATE_GET, and dropping what lies unused. The joiner
 * side, founding's search and the fetch are in ded_xfer.c.
 */
#include "ded_xfer.h"

#include <string.h>

#include "../core/ded_assert.h"
#include "../core/ded_err.h"
#include "../core/ded_limits.h"
#include "../ded_node_int.h"
#include "ded_keep.h"

#define STATE_SNAP_IDLE_NS (60ull * 1000 * 1000 * 1000)
#define STATE_SNAP_BUSY_NS (1000ull * 1000 * 1000) /* served this recently: in use */

void ded_xfer_snap_drop(ded_node *node) {
  ded_xfer *st = &node->xfer;
  ded_mem_free(node->mem, st->snap.bytes);
  ded_mem_free(node->mem, st->snap_lin);
  memset(&st->snap, 0, sizeof st->snap);
  st->snap_lin = NULL;
  st->snap_nlin = 0;
  st->have_snap = false;
  st->snap_kept = false;
}

void ded_xfer_found_drop(ded_node *node) {
  ded_xfer *st = &node->xfer;
  ded_mem_free(node->mem, st->found.bytes);
  memset(&st->found, 0, sizeof st->found);
  st->have_found = false;
}

static void state_send_offer(ded_node *node, ded_peer *to, uint8_t status, uint64_t round,
                             uint64_t digest) {
  ded_xfer *st = &node->xfer;
  ded_msg_state_offer m;
  memset(&m, 0, sizeof m);
  m.status = status;
  m.round = round;
  m.digest = digest;
  uint8_t origin[DED_LIN_BYTES(1)];
  if (status == DED_STATE_OFFER) {
    m.round = st->snap.round;
    m.pos = st->snap.pos;
    m.digest = st->snap.digest;
    m.step_rounds = st->snap.step_rounds;
    m.len = st->snap.len;
    m.lin_attempt = st->snap_lin_attempt;
    m.nlin = (uint16_t)st->snap_nlin;
    m.lin = st->snap_lin ? (const uint8_t *)st->snap_lin : origin; /* none: a checkpoint */
    st->snap_used_ns = node->now_ns;
  } else if (status == DED_STATE_FOUNDING) {
    m.round = 0;
    m.digest = st->found.digest;
    m.len = st->found.len;
    memcpy(origin, st->found_origin, DED_ID_BYTES);
    origin[DED_ID_BYTES] = 0; /* not a client */
    m.nlin = 1;
    m.lin = origin;
    st->found_used_ns = node->now_ns;
  }
  size_t cap = DED_STATE_OFFER_FRAME_BYTES(m.nlin);
  uint8_t *frame = ded_mem_malloc(node->mem, cap);
  if (!frame || !to->conn) {
    ded_mem_free(node->mem, frame);
    return;
  }
  ded_wr w = ded_wr_init(frame, cap);
  ded_msg_state_offer_encode(&w, &m);
  DED_ASSERT(!w.err && w.pos == cap);
  ded_conn_send_owned(node, to->conn, DED_Q_CTRL, frame, cap);
}

/* A snapshot recent enough to offer: taken in the step the trainer is in. */
static bool state_snap_fresh(const ded_node *node, uint64_t min_round) {
  const ded_xfer *st = &node->xfer;
  return st->have_snap && st->snap.round >= min_round &&
         st->snap.round + st->snap.step_rounds >= node->rounds.next;
}

static bool id_is_zero(const uint8_t id[DED_ID_BYTES]) {
  for (unsigned i = 0; i < DED_ID_BYTES; i++)
    if (id[i]) return false;
  return true;
}

/* A founding ask: the state |origin| brought to the run's first round. */
static void state_on_found_ask(ded_node *node, ded_peer *p, const uint8_t origin[DED_ID_BYTES]) {
  ded_xfer *st = &node->xfer;
  if (st->have_found && memcmp(st->found_origin, origin, DED_ID_BYTES) == 0)
    state_send_offer(node, p, DED_STATE_FOUNDING, 0, 0);
  else if (st->founding && (st->phase == DED_XFER_ASKING || st->phase == DED_XFER_FETCHING) &&
           memcmp(st->cands[st->cand], origin, DED_ID_BYTES) == 0)
    /* Seeking it ourselves: round 1 when a peer is sending it to us. */
    state_send_offer(node, p, DED_STATE_PENDING, st->phase == DED_XFER_FETCHING, 0);
  else if (st->have_found && !st->found_asked)
    state_send_offer(node, p, DED_STATE_PENDING, 0, 0); /* our round 0 is still to report */
  else
    state_send_offer(node, p, DED_STATE_NONE, 0, 0);
}

/* Offers our snapshot to |p|, who will then join its round: whoever of
 * us coordinates that round, or a later one, holds it for |p| (an intent
 * that only we know of: ded_intents.h) as long as loading and one step of
 * its trainer may take, at most a quarter of the round bound, if no other
 * member is in the round; else as long as those members wait for a
 * decision anyway (ded_coord.c: they do not know of |p|, and a longer
 * hold would only make them fail over). Else the run goes on from the
 * snapshot's round without it, a step ahead of a trainer that must
 * compute that step first; it comes late, and its announcement holds the
 * next rounds for it (ded_round_announce). */
static void state_offer_snap(ded_node *node, ded_peer *p) {
  state_send_offer(node, p, DED_STATE_OFFER, 0, 0);
  ded_intents_add(&node->intents, p->id, node->xfer.snap.round,
                  node->now_ns + ded_timing_cap(&node->timing), false);
}

void ded_xfer_on_ask(ded_node *node, ded_conn *c, const ded_msg_state_ask *m) {
  ded_xfer *st = &node->xfer;
  ded_peer *p = c->peer;
  if (!id_is_zero(m->origin)) {
    state_on_found_ask(node, p, m->origin);
    return;
  }
  if (node->s.no_rounds) { /* a backbone: its checkpoint, if it may offer it */
    ded_keep_on_ask(node, p, m);
    return;
  }
  if (node->leaving || st->phase == DED_XFER_ASKING ||
      st->phase == DED_XFER_FETCHING || !node->cb.want_snapshot) {
    state_send_offer(node, p, DED_STATE_NONE, 0, 0);
    return;
  }
  if (!node->lin.ever_members) { /* not past the first round's rendezvous */
    state_send_offer(node, p, DED_STATE_FRESH, 0, 0);
    return;
  }
  /* A snapshot being fetched right now is offered too, even if the trainer
   * moved on: replacing it would cut off the joiners fetching it. None
   * while this job is out of step (a STALE, a group it yields to, a
   * founder's state it must load): what it holds is no longer the run's,
   * and a joiner that took it would start steps behind (churn soak
   * 2447971660: two joiners loaded a snapshot 49 steps old from a job
   * that had just learnt it was out of step). It offers again once it
   * reloaded and took a snapshot; the asker waits meanwhile. Except when
   * its state is its own or another's (astray, diverged, yielding): it
   * may never get the run's (every job of the run astray after a round
   * with no result anywhere, sim_chaos seed 1015), and an asker that
   * waited for it, while it waits for its own reload, would wait the
   * whole bound at every step: none, at once. */
  if (node->rounds.diverged || node->rounds.astray || node->rounds.yielding || st->own_snap_due) {
    state_send_offer(node, p, DED_STATE_NONE, 0, 0);
    return;
  }
  bool behind = node->rounds.stale > node->rounds.next;
  if (!behind && (state_snap_fresh(node, m->min_round) ||
                  (st->have_snap && st->snap.round >= m->min_round &&
                   node->now_ns < st->snap_served_ns + STATE_SNAP_BUSY_NS))) {
    state_offer_snap(node, p);
    return;
  }
  /* Answered once the driver hands us a snapshot. */
  ded_xfer_asker *a = NULL;
  for (size_t i = 0; i < st->naskers && !a; i++)
    if (memcmp(st->askers[i].id, p->id, DED_ID_BYTES) == 0) a = &st->askers[i];
  if (!a && st->naskers < DED_PEERS_MAX) {
    if (st->naskers == st->askers_cap) {
      size_t cap = st->askers_cap ? st->askers_cap * 2 : 8;
      ded_xfer_asker *v = ded_mem_realloc(node->mem, st->askers, cap * sizeof *v);
      if (!v) return;
      st->askers = v;
      st->askers_cap = cap;
    }
    a = &st->askers[st->naskers++];
    memcpy(a->id, p->id, DED_ID_BYTES);
    a->min_round = 0;
  }
  if (a) a->min_round = DED_MAX(a->min_round, m->min_round);
  state_send_offer(node, p, DED_STATE_PENDING, node->rounds.next, 0);
  if (!st->snap_wanted) {
    st->snap_wanted = true;
    node_log(node, DED_LOG_INFO, "peer %s asks for the run's state: taking a snapshot at the "
             "trainer's next step", p->sid);
    node->cb.want_snapshot(node->user);
  }
}

void ded_xfer_askers_none(ded_node *node) {
  ded_xfer *st = &node->xfer;
  for (size_t i = 0; i < st->naskers; i++) {
    ded_peer *p = ded_peer_find(node, st->askers[i].id);
    if (p && p->conn) state_send_offer(node, p, DED_STATE_NONE, 0, 0);
  }
  st->naskers = 0;
}

int ded_xfer_snapshot_set(ded_node *node, ded_snapshot *snap, uint64_t now_ns) {
  ded_xfer *st = &node->xfer;
  st->snap_wanted = false;
  bool ok = snap->round > 0 && snap->step_rounds > 0 &&
            snap->step_rounds <= DED_STATE_STEP_ROUNDS_MAX && snap->len <= DED_STATE_BYTES_MAX &&
            (snap->bytes || snap->len == 0);
  /* The lineage the joiner's first round needs: round-1 must have ended
   * here with the swarm's result, or this job cannot vouch for the state. */
  ded_lin_entry *e = ok ? ded_lineage_get(&node->lin, snap->round - 1) : NULL;
  bool own = node->rounds.diverged || node->rounds.astray;
  if (!e || !e->final || e->final_attempt != e->attempt || e->attempt == 0 || own) {
    /* A round before that ended without the swarm's result here (at its
     * bound, or with no result anywhere) leaves this job in step as far
     * as it knows: its next step's snapshot will do, and the askers wait
     * for it, told PENDING already (soak seed 1228100947: a round with no
     * result anywhere, every donor answered NONE, and two joiners ran out
     * of time while the run went on stepping). */
    bool again = ok && !own && st->naskers > 0 && node->cb.want_snapshot && !node->leaving;
    node_log(node, DED_LOG_WARN, "no snapshot at round %llu to offer: %s%s",
             (unsigned long long)snap->round,
             !ok   ? "malformed"
             : own ? "this job's state is not the run's until it reloads"
                   : "this job did not finish the round before with the swarm",
             again ? "; taking one at the trainer's next step" : "");
    ded_mem_free(node->mem, snap->bytes);
    snap->bytes = NULL;
    if (again) {
      st->snap_wanted = true;
      node->cb.want_snapshot(node->user);
      return DED_ERR_INVALID_ARG;
    }
    ded_xfer_askers_none(node);
    if (st->own_snap_due && !own && node->cb.want_snapshot) { /* ours is due: the next step */
      st->snap_wanted = true;
      node->cb.want_snapshot(node->user);
    }
    return DED_ERR_INVALID_ARG;
  }
  uint8_t(*lin)[DED_ID_BYTES] = ded_mem_malloc(node->mem, DED_LIN_BYTES(e->n));
  if (!lin) {
    ded_mem_free(node->mem, snap->bytes);
    snap->bytes = NULL;
    return DED_ERR_NOMEM;
  }
  snap->pos = e->end; /* where round-1 ended: the snapshot's round begins */
  ded_xfer_snap_drop(node);
  memcpy(lin, e->ids, DED_LIN_BYTES(e->n));
  st->snap = *snap;
  snap->bytes = NULL;
  st->snap_lin = lin;
  st->snap_nlin = e->n;
  st->snap_lin_attempt = e->attempt;
  st->have_snap = true;
  st->own_snap_due = false;
  st->snap_used_ns = now_ns;
  st->snap_served_ns = 0;
  /* Askers who want a later round wait for a later snapshot: one step
   * later for a joiner that asked on the other side of a step's start,
   * up to NODE_GROUP_GAP_ROUNDS more for a group that yields to ours
   * while ahead of it (ded_rounds_check_groups); a job further behind the
   * round asked for says so rather than copy its state every step until
   * it gets there. */
  size_t keep = 0, offered = 0;
  for (size_t i = 0; i < st->naskers; i++) {
    ded_peer *p = ded_peer_find(node, st->askers[i].id);
    if (st->askers[i].min_round > st->snap.round + st->snap.step_rounds + NODE_GROUP_GAP_ROUNDS) {
      if (p && p->conn) state_send_offer(node, p, DED_STATE_NONE, 0, 0);
    } else if (st->askers[i].min_round > st->snap.round) {
      st->askers[keep++] = st->askers[i];
    } else if (p && p->conn) {
      state_offer_snap(node, p);
      offered++;
    }
  }
  st->naskers = keep;
  node_log(node, DED_LOG_INFO, "snapshot of round %llu (%llu bytes) offered to %zu peer%s%s",
           (unsigned long long)st->snap.round, (unsigned long long)st->snap.len, offered,
           offered == 1 ? "" : "s",
           keep ? " (others want a later round)" : "");
  if (keep && node->cb.want_snapshot) {
    st->snap_wanted = true;
    node->cb.want_snapshot(node->user);
  }
  return 0;
}

void ded_xfer_on_get(ded_node *node, ded_conn *c, const ded_msg_state_get *m) {
  ded_xfer *st = &node->xfer;
  /* Round 0 names the founding state (the state before the run's first
   * round): no snapshot is ever of round 0. */
  bool found = m->round == 0;
  const ded_snapshot *snap = found ? &st->found : &st->snap;
  if (!(found ? st->have_found : st->have_snap) || snap->round != m->round ||
      snap->digest != m->digest) {
    state_send_offer(node, c->peer, DED_STATE_GONE, m->round, m->digest);
    return;
  }
  if (m->offset > snap->len || m->len > snap->len - m->offset) {
    ded_conn_protocol_error(node, c, DED_ERR_PROTO, "STATE_GET beyond the snapshot");
    return;
  }
  if (found)
    st->found_used_ns = node->now_ns;
  else
    st->snap_used_ns = st->snap_served_ns = node->now_ns;
  size_t total = DED_STATE_DATA_HDR_BYTES + m->len;
  uint8_t *frame = ded_mem_malloc(node->mem, total);
  if (!frame) return; /* the joiner's stall timer asks someone else (so on NOMEM below) */
  ded_msg_state_data_hdr_encode(frame, m->round, m->digest, m->offset, m->len);
  memcpy(frame + DED_STATE_DATA_HDR_BYTES, snap->bytes + m->offset, m->len);
  ded_conn_send_owned(node, c, DED_Q_DATA, frame, total); /* bulk: behind the rounds' own traffic */
}

void ded_xfer_offer_to(ded_node *node, ded_peer *to, uint8_t status) {
  state_send_offer(node, to, status, 0, 0);
}

void ded_xfer_donor_tick(ded_node *node, uint64_t now_ns) {
  ded_xfer *st = &node->xfer;
  if (st->have_snap && !st->snap_kept && !st->naskers &&
      now_ns >= st->snap_used_ns + STATE_SNAP_IDLE_NS)
    ded_xfer_snap_drop(node);
  if (st->have_found && st->found_asked && !st->founding &&
      now_ns >= st->found_used_ns + STATE_SNAP_IDLE_NS)
    ded_xfer_found_drop(node);
}
