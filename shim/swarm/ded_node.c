/*
 * ded_node.c: the orchestrator of a swarm peer.
 *
 * Owns the node's public face (ded_node.h): its entry points hand bytes,
 * connection events, submissions and time to the modules (ded_node_int.h
 * lists them) and return. In this file: the helpers every module uses,
 * the events the modules post for later (node_post_*: what one part of
 * the node tells another is handed over here, never from inside the
 * sender), the dispatch of received frames to the module each concerns,
 * the tick that runs every module's timers, and reaping.
 *
 * Every entry point runs node_enter first and node_reap last: nothing is
 * freed while a caller up the stack may still hold it (a connection or
 * round that dies is marked and reaped there), and the events posted
 * meanwhile are drained just before, in order, as they are after each
 * frame received.
 */
#include "ded_node_int.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/ded_assert.h"
#include "core/ded_frame.h"
#include "core/ded_msg.h"
#include "crypto/ded_ident.h"
#include "state/ded_keep.h"

/* ------------------------------------------------------------------ */
/* helpers every module uses                                           */
/* ------------------------------------------------------------------ */


void node_log(ded_node *node, int level, const char *fmt, ...) {
  if (!node->cb.log || level > node->s.log_level) return;
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  node->cb.log(node->user, level, line);
}

uint64_t node_wall_ms(const ded_node *node, uint64_t now_ns) {
  int64_t wall = (int64_t)now_ns + node->s.wall_offset_ns;
  return wall < 0 ? 0 : (uint64_t)wall / 1000000u;
}

bool id_is_me(const ded_node *node, const uint8_t id[DED_ID_BYTES]) {
  return memcmp(node->ident.id, id, DED_ID_BYTES) == 0;
}

void node_emit(ded_node *node, int type, int status, const uint8_t *peer) {
  if (!node->cb.event) return;
  ded_event ev;
  memset(&ev, 0, sizeof ev);
  ev.type = type;
  ev.status = status;
  if (peer) memcpy(ev.peer, peer, DED_ID_BYTES);
  node->cb.event(node->user, &ev);
}

/* ------------------------------------------------------------------ */
/* the events of the end of an entry point                            */
/* ------------------------------------------------------------------ */


enum { NODE_EV_SELF, NODE_EV_PEER_DOWN, NODE_EV_CONN_REPLACED };

typedef struct node_ev {
  struct node_ev *next;
  int type;
  uint8_t peer[DED_ID_BYTES]; /* NODE_EV_PEER_DOWN, NODE_EV_CONN_REPLACED */
  char sid[9];
  bool left;
  size_t len; /* NODE_EV_SELF: a whole frame */
  uint8_t frame[];
} node_ev;

static void node_post(ded_node *node, node_ev *e) {
  e->next = NULL;
  if (node->ev_tail)
    node->ev_tail->next = e;
  else
    node->ev_head = e;
  node->ev_tail = e;
}

void node_post_self(ded_node *node, const uint8_t *frame, size_t len) {
  node_ev *e = ded_mem_calloc(node->mem, 1, sizeof *e + len);
  if (!e) {
    node_log(node, DED_LOG_WARN, "out of memory: a frame to ourselves is lost");
    return;
  }
  e->type = NODE_EV_SELF;
  e->len = len;
  memcpy(e->frame, frame, len);
  node_post(node, e);
}

void node_post_peer_down(ded_node *node, const ded_peer *p) {
  node_ev *e = ded_mem_calloc(node->mem, 1, sizeof *e);
  if (!e) {
    node_log(node, DED_LOG_WARN, "out of memory: peer %s is down, rounds notice at their deadline",
             p->sid);
    return;
  }
  e->type = NODE_EV_PEER_DOWN;
  memcpy(e->peer, p->id, DED_ID_BYTES);
  memcpy(e->sid, p->sid, sizeof e->sid);
  e->left = p->left;
  node_post(node, e);
}

void node_post_conn_replaced(ded_node *node, const ded_peer *p) {
  node_ev *e = ded_mem_calloc(node->mem, 1, sizeof *e);
  if (!e) {
    node_log(node, DED_LOG_WARN, "out of memory: a JOIN to %s lost with its connection is not "
             "sent again; its round notices at its deadline", p->sid);
    return;
  }
  e->type = NODE_EV_CONN_REPLACED;
  memcpy(e->peer, p->id, DED_ID_BYTES);
  memcpy(e->sid, p->sid, sizeof e->sid);
  node_post(node, e);
}

/* A frame from ourselves: our member side's JOIN to our coordinator side,
 * or our coordinator side's COMMIT, DECIDE, PROBE or STALE to our member
 * side. */
static void node_self_frame(ded_node *node, const uint8_t *frame, size_t len, uint64_t now_ns) {
  uint8_t type = frame[DED_FRAME_HDR_BYTES - 1];
  const uint8_t *payload = frame + DED_FRAME_HDR_BYTES;
  size_t plen = len - DED_FRAME_HDR_BYTES;
  int rv = 0;
  switch (type) {
  case DED_MSG_JOIN: {
    ded_msg_join j;
    rv = ded_msg_join_decode(payload, plen, node->mem, &j);
    if (rv) break;
    ded_coord_on_join(node, NULL, NULL, &j, now_ns);
    ded_msg_join_free(&j, node->mem);
    break;
  }
  case DED_MSG_COMMIT: {
    ded_msg_commit cm;
    rv = ded_msg_commit_decode(payload, plen, node->mem, &cm);
    if (rv) break;
    ded_round *r = ded_round_find(node, cm.round);
    if (r && ded_round_on_commit(node, r, node->ident.id, &cm, now_ns)) ded_rounds_advance(node, now_ns);
    ded_msg_commit_free(&cm, node->mem);
    break;
  }
  case DED_MSG_DECIDE: {
    ded_msg_decide d;
    rv = ded_msg_decide_decode(payload, plen, node->mem, &d);
    if (rv) break;
    ded_round *r = ded_round_find(node, d.round);
    if (r && ded_round_on_decide(node, r, node->ident.id, &d, now_ns)) ded_rounds_advance(node, now_ns);
    ded_msg_decide_free(&d, node->mem);
    break;
  }
  case DED_MSG_PROBE: {
    ded_msg_probe m;
    rv = ded_msg_probe_decode(payload, plen, &m);
    if (rv == 0) ded_round_probe(node, NULL, &m, now_ns);
    break;
  }
  case DED_MSG_STALE: {
    ded_msg_stale m;
    rv = ded_msg_stale_decode(payload, plen, &m);
    ded_round *r = rv ? NULL : ded_round_find(node, m.round);
    if (r) ded_round_on_stale(node, r, node->ident.id, &m);
    break;
  }
  default:
    rv = DED_ERR_INTERNAL;
  }
  if (rv) node_log(node, DED_LOG_ERROR, "a frame to ourselves (%s) did not decode: %s",
                   ded_msg_name(type), ded_strerror(rv));
}

/* Hands over what the entry point posted, in order, and what that posts. */
static void node_drain(ded_node *node) {
  node_ev *e;
  while ((e = node->ev_head)) {
    node->ev_head = e->next;
    if (!node->ev_head) node->ev_tail = NULL;
    switch (e->type) {
    case NODE_EV_SELF:
      node_self_frame(node, e->frame, e->len, node->now_ns);
      break;
    case NODE_EV_PEER_DOWN:
      ded_rounds_on_peer_down(node, e->peer, e->sid, e->left, node->now_ns);
      ded_coords_evaluate(node, node->now_ns);
      break;
    case NODE_EV_CONN_REPLACED: {
      /* What went with the connection is asked again: our JOINs to it as
       * coordinator, our probes of it as one, our HAVE votes to it. */
      ded_rounds_on_conn_replaced(node, e->peer, e->sid, node->now_ns);
      ded_peer *p = ded_peer_find(node, e->peer);
      if (p && p->conn && !p->left) {
        ded_coords_on_peer_up(node, p);
        ded_rounds_on_peer_up(node, p);
      }
      break;
    }
    }
    ded_mem_free(node->mem, e);
  }
}

/* ------------------------------------------------------------------ */
/* frame dispatch                                                     */
/* ------------------------------------------------------------------ */


/* Tries every round that waits on lineage or a connection. */



/* ---- the round's frames: decoded here, handed to the round's events ---- */

/* A decision about a round we never started is a lie. */
static bool node_lie_round(ded_node *node, uint64_t round) {
  return !ded_round_find(node, round) && round >= node->rounds.next;
}

static void node_on_commit(ded_node *node, ded_conn *c, const ded_frame *f, uint64_t now_ns) {
  ded_msg_commit cm;
  int rv = ded_msg_commit_decode(f->payload, f->len, node->mem, &cm);
  if (rv) {
    ded_conn_protocol_error(node, c, rv, "COMMIT");
    return;
  }
  bool lie = node_lie_round(node, cm.round);
  ded_round *r = ded_round_find(node, cm.round);
  if (r) rv = ded_round_on_commit(node, r, c->peer->id, &cm, now_ns);
  ded_msg_commit_free(&cm, node->mem);
  if (lie || rv == DED_ERR_PROTO) {
    ded_conn_protocol_error(node, c, DED_ERR_PROTO, "COMMIT");
    return;
  }
  ded_rounds_advance(node, now_ns);
  ded_coords_evaluate(node, now_ns);
}

static void node_on_decide(ded_node *node, ded_conn *c, const ded_frame *f, uint64_t now_ns) {
  ded_msg_decide d;
  int rv = ded_msg_decide_decode(f->payload, f->len, node->mem, &d);
  if (rv) {
    ded_conn_protocol_error(node, c, rv, "DECIDE");
    return;
  }
  bool lie = node_lie_round(node, d.round);
  ded_round *r = ded_round_find(node, d.round);
  if (r) ded_round_on_decide(node, r, c->peer->id, &d, now_ns);
  ded_msg_decide_free(&d, node->mem);
  if (lie) {
    ded_conn_protocol_error(node, c, DED_ERR_PROTO, "DECIDE");
    return;
  }
  ded_rounds_advance(node, now_ns);
  ded_coords_evaluate(node, now_ns);
}

static void node_on_redirect(ded_node *node, ded_conn *c, const ded_frame *f, uint64_t now_ns) {
  ded_msg_redirect m;
  int rv = ded_msg_redirect_decode(f->payload, f->len, &m);
  ded_round *r = rv ? NULL : ded_round_find(node, m.round);
  if (r) rv = ded_round_on_redirect(node, r, c->peer->id, &m, now_ns);
  if (rv) ded_conn_protocol_error(node, c, rv, "REDIRECT");
}

static void node_on_stale(ded_node *node, ded_conn *c, const ded_frame *f) {
  ded_msg_stale m;
  int rv = ded_msg_stale_decode(f->payload, f->len, &m);
  if (rv) {
    ded_conn_protocol_error(node, c, rv, "STALE");
    return;
  }
  ded_round *r = ded_round_find(node, m.round);
  /* To a view we coordinate (it probed the sender): our own member of the
   * round hears it as from its coordinator. */
  bool ours = ded_coords_on_stale(node, c->peer->id, &m);
  /* A member our view waited for is past the round for good: so is the
   * swarm, even if our own member of the round already ended (at its
   * bound, during a stop): our next rounds are out of step at once. */
  if (ours) node->rounds.stale = DED_MAX(node->rounds.stale, m.next_round);
  if (r) ded_round_on_stale(node, r, c->peer->id, &m);
  if (r && ours && !ded_round_over(r)) ded_round_on_stale(node, r, node->ident.id, &m);
}

/* An AHEAD: the swarm is past the round we announced. */
static void node_on_ahead(ded_node *node, ded_conn *c, const ded_frame *f) {
  ded_msg_stale m;
  int rv = ded_msg_ahead_decode(f->payload, f->len, &m);
  if (rv) {
    ded_conn_protocol_error(node, c, rv, "AHEAD");
    return;
  }
  ded_round_on_ahead(node, &m);
}

/* A HAVE: a member holds an attempt's result and accepts it. */
static void node_on_have(ded_node *node, ded_conn *c, const ded_frame *f, uint64_t now_ns) {
  ded_msg_have h;
  int rv = ded_msg_have_decode(f->payload, f->len, &h);
  if (rv) {
    ded_conn_protocol_error(node, c, rv, "HAVE");
    return;
  }
  ded_lineage_take_have(&node->lin, h.round, h.attempt, c->peer->id, node->now_ns);
  const uint8_t *digest;
  const ded_msg_commit *done = ded_round_result_plan(node, h.round, &digest);
  if (done) { /* finished here: if with that attempt, say so, and with which bytes */
    if (done->attempt == h.attempt && !(h.flags & DED_HAVE_F_DONE))
      ded_round_send_have(node, c->peer, h.round, h.attempt, h.view, DED_HAVE_F_DONE, digest);
    return;
  }
  ded_round *r = ded_round_find(node, h.round);
  if (!r) /* not ours (yet), or far ahead: a run that went on without us; nothing to keep */
    return;
  ded_round_on_have(node, r, c->peer->id, c->peer->sid, &h, now_ns);
}

static void node_on_data(ded_node *node, ded_conn *c, const ded_frame *f, uint64_t now_ns) {
  if (f->len < 24) {
    ded_conn_protocol_error(node, c, DED_ERR_PROTO, ded_msg_name(f->type));
    return;
  }
  ded_rd rd = ded_rd_init(f->payload, 8);
  uint64_t no = ded_rd_u64(&rd);
  ded_round *r = ded_round_find(node, no);
  if (!r) {
    /* A round that already finished here (or failed): late data is moot. A
     * round we never started is a lie. */
    if (no >= node->rounds.next)
      ded_conn_protocol_error(node, c, DED_ERR_PROTO, "data for unknown round");
    return;
  }
  ded_round_on_data(node, r, c->peer, c, f->type, f->payload, f->len, now_ns);
}

static void conn_on_frame(ded_node *node, ded_conn *c, const ded_frame *f, uint64_t now_ns) {
  if (c->state == DED_CONN_AWAIT_HELLO) {
    if (f->type != DED_MSG_HELLO)
      ded_conn_protocol_error(node, c, DED_ERR_PROTO, "expected HELLO");
    else
      ded_peer_on_hello(node, c, f, now_ns);
    return;
  }
  switch (f->type) {
  case DED_MSG_RECORDS: ded_disc_on_records(node, c, f, now_ns); break;
  case DED_MSG_JOIN: {
    ded_msg_join j;
    int rv = ded_msg_join_decode(f->payload, f->len, node->mem, &j);
    if (rv)
      ded_conn_protocol_error(node, c, rv, "JOIN");
    else if (node->s.no_rounds && !(j.flags & DED_JOIN_F_GENESIS))
      ded_conn_protocol_error(node, c, DED_ERR_PROTO, "JOIN to a peer outside rounds");
    else
      ded_coord_on_join(node, c->peer, c, &j, now_ns);
    ded_msg_join_free(&j, node->mem);
    break;
  }
  case DED_MSG_COMMIT: node_on_commit(node, c, f, now_ns); break;
  case DED_MSG_DECIDE: node_on_decide(node, c, f, now_ns); break;
  case DED_MSG_HAVE: node_on_have(node, c, f, now_ns); break;
  case DED_MSG_REDIRECT: node_on_redirect(node, c, f, now_ns); break;
  case DED_MSG_STALE: node_on_stale(node, c, f); break;
  case DED_MSG_AHEAD: node_on_ahead(node, c, f); break;
  case DED_MSG_STATE_ASK: {
    ded_msg_state_ask m;
    int rv = ded_msg_state_ask_decode(f->payload, f->len, &m);
    if (rv)
      ded_conn_protocol_error(node, c, rv, "STATE_ASK");
    else
      ded_xfer_on_ask(node, c, &m);
    break;
  }
  case DED_MSG_STATE_OFFER: {
    ded_msg_state_offer m;
    int rv = ded_msg_state_offer_decode(f->payload, f->len, &m);
    if (rv)
      ded_conn_protocol_error(node, c, rv, "STATE_OFFER");
    else
      ded_xfer_on_offer(node, c, &m, now_ns);
    break;
  }
  case DED_MSG_STATE_GET: {
    ded_msg_state_get m;
    int rv = ded_msg_state_get_decode(f->payload, f->len, &m);
    if (rv)
      ded_conn_protocol_error(node, c, rv, "STATE_GET");
    else
      ded_xfer_on_get(node, c, &m);
    break;
  }
  case DED_MSG_STATE_DATA: {
    ded_msg_state_data m;
    int rv = ded_msg_state_data_decode(f->payload, f->len, &m);
    if (rv)
      ded_conn_protocol_error(node, c, rv, "STATE_DATA");
    else
      ded_xfer_on_data(node, c, &m, now_ns);
    break;
  }
  case DED_MSG_PROBE: {
    ded_msg_probe m;
    int rv = ded_msg_probe_decode(f->payload, f->len, &m);
    if (rv)
      ded_conn_protocol_error(node, c, rv, "PROBE");
    else
      ded_round_probe(node, c->peer, &m, now_ns);
    break;
  }
  case DED_MSG_SPEED: {
    ded_msg_speed m;
    int rv = ded_msg_speed_decode(f->payload, f->len, &m);
    if (rv)
      ded_conn_protocol_error(node, c, rv, "SPEED");
    else
      ded_peer_on_speed(node, c, &m);
    break;
  }
  case DED_MSG_ABSTAIN: {
    ded_msg_abstain m;
    int rv = ded_msg_abstain_decode(f->payload, f->len, &m);
    if (rv)
      ded_conn_protocol_error(node, c, rv, "ABSTAIN");
    else
      ded_abstain_on_msg(node, c->peer, &m);
    break;
  }
  case DED_MSG_FETCH: {
    ded_msg_fetch m;
    int rv = ded_msg_fetch_decode(f->payload, f->len, &m);
    if (rv)
      ded_conn_protocol_error(node, c, rv, "FETCH");
    else
      ded_round_serve_fetch(node, c->peer, &m);
    break;
  }
  case DED_MSG_DATA:
  case DED_MSG_RESULT: node_on_data(node, c, f, now_ns); break;
  case DED_MSG_LEAVE: {
    uint8_t reason;
    if (ded_msg_leave_decode(f->payload, f->len, &reason) != 0) {
      ded_conn_protocol_error(node, c, DED_ERR_PROTO, "LEAVE");
      break;
    }
    /* LEAVE is the last frame on each of its connections: this one is
     * done, the others (lanes may still carry the last chunks it was
     * writing) end with their own LEAVE, and the peer is down with the
     * last of them. */
    ded_peer_on_leave(node, c->peer, c, reason);
    ded_conn_close(node, c, DED_ERR_CLOSING, true);
    break;
  }
  default: ded_conn_protocol_error(node, c, DED_ERR_PROTO, "unknown frame type");
  }
}

/* ------------------------------------------------------------------ */
/* timers and reaping                                                 */
/* ------------------------------------------------------------------ */


/* The fast tick while anything is pending; see node_tick for the rest. */
static void node_wake(ded_node *node) {
  bool busy = node->wake_soon || node->rounds.n > 0 || node->boot.state == DED_BOOT_RUNNING || node->leaving ||
              ded_xfer_busy(node) || ded_rounds_announcing(node, node->now_ns);
  if (!busy) busy = ded_coords_pending(node); /* no joins: nothing to decide on yet */
  node->wake_soon = false;
  if (busy && node->tick_ns > node->now_ns + NODE_TICK_NS) node->tick_ns = node->now_ns + NODE_TICK_NS;
}

static void node_reap_dead(ded_node *node) {
  if (!node->reap_needed) return;
  node->reap_needed = false;
  for (uint32_t s = 0; s < node->conns.nslots; s++) {
    ded_conn *c = ded_conns_at(&node->conns, s);
    if (c && c->state == DED_CONN_DEAD) ded_conns_release(&node->conns, c, &node->qenv);
  }
  unsigned out = 0;
  for (unsigned i = 0; i < node->rounds.n; i++) {
    ded_round *r = node->rounds.v[i];
    if (r->state == ROUND_DEAD)
      ded_round_free(node, r);
    else
      node->rounds.v[out++] = r;
  }
  node->rounds.n = out;
}

/* The end of every entry point: what it posted, then the dead, then the
 * rounds the stream can cut now (a round's length was fixed, or a round
 * left room), and what those post. */
static void node_reap(ded_node *node) {
  for (;;) {
    node_drain(node);
    node_reap_dead(node);
    if (node->leaving || !ded_rounds_can_cut(node)) break;
    ded_rounds_pump(node, node->now_ns);
  }
  node_wake(node);
}

/* True while some peer, connection or bootstrap address will want a timer
 * soon: an attempt to make, a handshake to time out. */
static bool node_needs_fast_tick(const ded_node *node) {
  if (ded_peers_need_tick(node)) return true;
  for (uint32_t s = 0; s < node->conns.nslots; s++) {
    const ded_conn *c = ded_conns_at(&node->conns, s);
    if (c && c->state != DED_CONN_READY) return true;
  }
  return ded_boot_need_tick(node);
}

static void node_tick(ded_node *node, uint64_t now_ns) {
  node->tick_ns = now_ns + DED_MIN(NODE_IDLE_TICK_NS, ded_timing_keepalive(&node->timing));
  ded_boot_tick(node, now_ns);
  ded_disc_tick(node, now_ns);
  ded_conns_tick(node, now_ns);
  ded_peers_tick(node, now_ns);
  ded_rounds_tick(node, now_ns);
  ded_rounds_check_groups(node);
  ded_abstain_on_tick(node, now_ns);
  ded_coords_evaluate(node, now_ns);
  ded_coords_prune(node);
  ded_rounds_advance(node, now_ns);
  ded_xfer_tick(node, now_ns);
  if (node_needs_fast_tick(node)) node->wake_soon = true;
  if (!node->leaving && node->disc.rec_refresh_ns < node->tick_ns) /* a leaver refreshes nothing */
    node->tick_ns = DED_MAX(node->disc.rec_refresh_ns, now_ns + 1);
}

/*
 * Every entry point starts here. A gap since the last one longer than the
 * deadline floor means this process did not run (SIGSTOP, a suspended
 * laptop, a starved thread): the swarm may have moved on without us, so
 * we read what queued up meanwhile (reports to views we coordinate, probes
 * of newer views) before deciding anything as a coordinator. (Completing an
 * attempt needs a HAVE quorum whenever it happens, so a stall cannot make
 * us complete one the swarm replaced.)
 */
static void node_enter(ded_node *node, uint64_t now_ns) {
  uint64_t silence = ded_timing_silence(&node->timing);
  if (node->now_ns != 0 && now_ns > node->now_ns + node->s.deadline_floor_ns) {
    /* What queued up while we were away (reports to views we coordinate,
     * probes of newer views) is read before we decide anything. Away
     * for half the silence time or more, the others may have evicted us
     * and gone on: our coordinator views wait the silence time, long
     * enough to be connected again and hear from a peer that went on
     * (a STALE to a probe), rather than decide a round alone with a
     * quorum that no longer counts the others. */
    bool long_gap = now_ns > node->now_ns + silence / 2;
    node->quiet_until_ns = now_ns + (long_gap ? silence : node->s.deadline_floor_ns);
    node->wake_soon = true;
    ded_peers_forgive_silence(node, now_ns - node->now_ns); /* not their silence: our gap */
    /* Our calls' bounds count the time we ran: past when we were due
     * (our tick, or our last call), the rest is the stop's. */
    uint64_t due = DED_MAX(node->tick_ns, node->now_ns);
    if (now_ns > due) ded_rounds_postpone(node, now_ns - due);
  }
  node->now_ns = now_ns;
}

/* ------------------------------------------------------------------ */
/* public entry points                                                */
/* ------------------------------------------------------------------ */


int ded_node_new(const ded_node_settings *settings, const ded_node_callbacks *cb, void *user,
                 uint64_t now_ns, ded_node **out) {
  *out = NULL;
  if (!settings->run || !settings->identity_seed || !cb->connect || !cb->round_done ||
      strlen(settings->run) > DED_RUN_NAME_MAX || settings->n_bootstrap > DED_BOOTSTRAP_MAX ||
      settings->n_announce > DED_RECORD_ADDRS_MAX || settings->mode > DED_MODE_AUX ||
      settings->plan > DED_PLAN_EQUAL || !(settings->up_Bps >= 0.0) ||
      !(settings->down_Bps >= 0.0) || !(settings->add_Bps >= 0.0))
    return DED_ERR_INVALID_ARG;
  if (ded_crypto_init() != 0) return DED_ERR_INTERNAL;
  ded_node *node = ded_mem_calloc(settings->mem, 1, sizeof *node);
  if (!node) return DED_ERR_NOMEM;
  node->s = *settings;
  node->mem = settings->mem;
  node->s.allow = NULL;
  node->s.nallow = 0;
  if (settings->nallow) { /* ours: the caller's may go */
    size_t bytes = (size_t)settings->nallow * DED_PK_BYTES;
    uint8_t(*allow)[DED_PK_BYTES] = ded_mem_malloc(node->mem, bytes);
    if (!allow) {
      ded_mem_free(node->mem, node);
      return DED_ERR_NOMEM;
    }
    memcpy(allow, settings->allow, bytes);
    node->s.allow = (const uint8_t(*)[DED_PK_BYTES])allow;
    node->s.nallow = settings->nallow;
  }
  node->cb = *cb;
  node->user = user;
  node->qenv = (ded_sendq_env){node->mem, ded_round_lend_ref, ded_round_lend_unref, node};
  node->conns.mem = node->mem;
  ded_lineage_init(&node->lin, node->mem);
  snprintf(node->run, sizeof node->run, "%s", settings->run);
  node->s.run = node->run;
  node->s.identity_seed = NULL;
  if (node->s.chunk_bytes == 0) node->s.chunk_bytes = NODE_CHUNK_BYTES_DEFAULT;
  node->s.streams = (uint8_t)DED_MAX(DED_MIN(node->s.streams, DED_STREAMS_MAX), 1);
  node->s.chunk_bytes = DED_MAX(DED_MIN(node->s.chunk_bytes, DED_CHUNK_BYTES_MAX), DED_CHUNK_BYTES_MIN);
  if (node->s.record_ttl_ms == 0) node->s.record_ttl_ms = NODE_RECORD_TTL_MS_DEFAULT;
  if (node->s.deadline_floor_ns == 0) node->s.deadline_floor_ns = NODE_DEADLINE_FLOOR_NS_DEFAULT;
  if (node->s.history_bytes == 0)
    node->s.history_bytes = NODE_HISTORY_BYTES_DEFAULT;
  else if (node->s.history_bytes == UINT64_MAX)
    node->s.history_bytes = 0;
  node->s.record_ttl_ms = DED_MIN(node->s.record_ttl_ms, DED_RECORD_TTL_MS_MAX);
  if (node->s.min_peers == 0) node->s.min_peers = 1;
  node->timing = (ded_timing){node->s.deadline_floor_ns, node->s.round_timeout_ns, 0, 0};
  node->cache.mem = node->mem;
  ded_history_init(&node->hist, node->mem, &node->cache, node->s.history_bytes);
  ded_ident_from_seed(&node->ident, settings->identity_seed);
  ded_id_short(node->ident.id, node->sid);
  ded_hash32(node->run, strlen(node->run), node->run_id);
  ded_table_init(&node->disc.table, node->mem, DED_PEERS_MAX);
  ded_boot_init(&node->boot, settings->bootstrap, settings->n_bootstrap);
  int rv = ded_disc_build_record(node, now_ns);
  if (rv) {
    ded_node_free(node);
    return rv;
  }
  node->tick_ns = now_ns;
  node_enter(node, now_ns);
  *out = node;
  return 0;
}

void ded_node_free(ded_node *node) {
  if (!node) return;
  ded_mem_free(node->mem, (void *)node->s.allow);
  ded_conns_free(&node->conns, &node->qenv);
  for (unsigned i = 0; i < node->rounds.n; i++) {
    node->rounds.v[i]->refs_user = node->rounds.v[i]->refs_res = 0;
    node->rounds.v[i]->with_result = false;
    ded_round_free(node, node->rounds.v[i]);
  }
  ded_coords_free(node);
  while (node->ev_head) {
    node_ev *e = node->ev_head;
    node->ev_head = e->next;
    ded_mem_free(node->mem, e);
  }
  ded_peers_free(node);
  ded_history_free(&node->hist);
  ded_feedback_free(&node->fb, node->mem);
  ded_xfer_free(node);
  ded_bufcache_free(&node->cache);
  ded_lineage_lose(&node->lin);
  ded_table_free(&node->disc.table);
  ded_ident_wipe(&node->ident);
  ded_mem_free(node->mem, node);
}

int ded_node_start(ded_node *node, uint64_t now_ns) {
  node_enter(node, now_ns);
  if (node->boot.state != DED_BOOT_IDLE) return DED_ERR_INVALID_ARG;
  node_log(node, DED_LOG_INFO, "peer %s starting in run '%s'", node->sid, node->run);
  ded_boot_start(node, now_ns);
  node_reap(node);
  return 0;
}

const uint8_t *ded_node_id(const ded_node *node) { return node->ident.id; }

const ded_ident *ded_node_ident(const ded_node *node) { return &node->ident; }

const uint8_t *ded_node_run_id(const ded_node *node) { return node->run_id; }

bool ded_node_conn_expects(const ded_node *node, uint32_t conn_id, uint8_t id[DED_ID_BYTES]) {
  const ded_conn *c = ded_conns_get(&node->conns, conn_id);
  if (!c || !c->outbound || !c->peer) return false;
  memcpy(id, c->peer->id, DED_ID_BYTES);
  return true;
}

void ded_node_conn_secured(ded_node *node, uint32_t conn_id, const uint8_t pk[DED_PK_BYTES],
                           uint64_t now_ns) {
  node_enter(node, now_ns);
  ded_conn *c = ded_conns_get(&node->conns, conn_id);
  if (c && c->state == DED_CONN_AWAIT_HELLO) {
    c->secured = true;
    memcpy(c->pk, pk, DED_PK_BYTES);
    /* We called ourselves (our own DEDMPI_JOIN address): known here,
     * before either side's HELLO, whichever end learns it first. */
    if (memcmp(pk, node->ident.pk, DED_PK_BYTES) == 0) {
      if (c->boot_idx >= 0) ded_boot_self(node, c->boot_idx);
      ded_conn_close(node, c, 0, true);
    }
  }
  node_reap(node);
}

int ded_node_conn_accepted(ded_node *node, const ded_addr *remote, uint32_t *conn_id,
                           uint64_t now_ns) {
  node_enter(node, now_ns);
  if (node->leaving) return DED_ERR_CLOSING;
  /* Handshakes in flight are bounded; room for this one may cost an
   * unproven connection of a flooding address (ded_conns_admit). */
  int rv = ded_conns_admit(node, remote);
  ded_conn *c = rv ? NULL : ded_conn_open(node, false, remote);
  if (!c) {
    if (node->reap_needed) node_reap(node); /* the connection it evicted */
    return DED_ERR_LIMIT;
  }
  *conn_id = c->id;
  uint8_t frame[DED_HELLO_FRAME_BYTES(DED_RECORD_BYTES_MAX)];
  ded_wr w = ded_wr_init(frame, sizeof frame);
  ded_msg_hello_encode(&w, node->run_id, node->disc.rec_bytes, node->disc.rec_len);
  ded_conn_send_ctrl(node, c, frame, w.pos);
  if (node->reap_needed) node_reap(node); /* the connection it evicted */
  return 0;
}

void ded_node_conn_connected(ded_node *node, uint32_t conn_id, uint64_t now_ns) {
  node_enter(node, now_ns);
  ded_conn *c = ded_conns_get(&node->conns, conn_id);
  if (!c || c->state != DED_CONN_CONNECTING) return;
  c->state = DED_CONN_AWAIT_HELLO;
  c->opened_ns = now_ns;
  uint8_t frame[DED_HELLO_FRAME_BYTES(DED_RECORD_BYTES_MAX)];
  ded_wr w = ded_wr_init(frame, sizeof frame);
  ded_msg_hello_encode(&w, node->run_id, node->disc.rec_bytes, node->disc.rec_len);
  ded_conn_send_ctrl(node, c, frame, w.pos);
}

void ded_node_conn_recv(ded_node *node, uint32_t conn_id, const uint8_t *data, size_t len,
                        uint64_t now_ns) {
  node_enter(node, now_ns);
  ded_conn *c = ded_conns_get(&node->conns, conn_id);
  if (!c || c->state == DED_CONN_CONNECTING) {
    node_reap(node);
    return;
  }
  ded_meter_arrive(&node->down, len, now_ns);
  ded_peer_heard(c, now_ns);
  ded_frame f;
  int rv;
  while (c->state != DED_CONN_DEAD && (rv = ded_frame_dec_next(&c->dec, &data, &len, &f)) != 0) {
    if (rv < 0) {
      ded_conn_protocol_error(node, c, rv, "framing");
      break;
    }
    conn_on_frame(node, c, &f, now_ns);
    node_drain(node); /* a frame's consequences, before the next frame */
  }
  node_reap(node);
}

void ded_node_conn_closed(ded_node *node, uint32_t conn_id, int status, uint64_t now_ns) {
  node_enter(node, now_ns);
  ded_conn *c = ded_conns_get(&node->conns, conn_id);
  /* The driver closed it already: no close callback back to it. */
  if (c) ded_conn_close(node, c, status ? status : DED_ERR_PEER_LOST, false);
  node_reap(node);
}

int ded_node_conn_pending(ded_node *node, uint32_t conn_id, ded_iov *iov, int max) {
  ded_conn *c = ded_conns_get(&node->conns, conn_id);
  if (!c || c->state == DED_CONN_CONNECTING) return 0;
  return ded_sendq_pending(&c->out, iov, max);
}

/* Our part of a round leaving is progress too: on a slow uplink the
 * others wait on us, and we have nothing coming in meanwhile. Not past
 * twice what the attempt should take, or four patiences: a peer that
 * takes our bytes but sends none must not hold the round to its bound. */
static void node_sent_round_bytes(void *ctx, void *owner) {
  ded_node *node = ctx;
  ded_round *r = owner;
  if (r && r->att_state == ROUND_ATT_LIVE && r->wait_ns &&
      (r->state == ROUND_RUNNING || r->state == ROUND_FETCHING)) {
    uint64_t pw = ded_timing_progress_wait(&node->timing, r->view, r->est_ns);
    uint64_t limit = r->started_ns + DED_MAX(2 * r->est_ns, 4 * pw);
    r->wait_ns = DED_MAX(r->wait_ns, DED_MIN(node->now_ns + pw, limit));
  }
}

void ded_node_conn_consume(ded_node *node, uint32_t conn_id, size_t n, uint64_t now_ns) {
  node_enter(node, now_ns);
  ded_conn *c = ded_conns_get(&node->conns, conn_id);
  if (c) ded_sendq_consume(&node->qenv, &c->out, n, node_sent_round_bytes, node);
  if (!node->s.sessions) { /* else the driver reports bytes as they leave */
    ded_meter_add(&node->up, n, now_ns);
    if (!ded_conns_have_output(node)) ded_meter_end(&node->up);
  }
  node_reap(node);
}

void ded_node_sent(ded_node *node, size_t n, bool backlog, uint64_t now_ns) {
  ded_meter_add(&node->up, n, now_ns);
  if (!backlog && !ded_conns_have_output(node)) ded_meter_end(&node->up);
}

/* A contribution still being encoded is called for again at once: the
 * driver writes between the slices (ded_rounds_encode). */
uint64_t ded_node_expiry(const ded_node *node) {
  return ded_rounds_encoding(node) ? DED_MIN(node->tick_ns, node->now_ns) : node->tick_ns;
}

void ded_node_handle_expiry(ded_node *node, uint64_t now_ns) {
  node_enter(node, now_ns);
  ded_rounds_encode(node, now_ns);
  if (now_ns >= node->tick_ns) node_tick(node, now_ns);
  node_reap(node);
}

int ded_node_state_fetch(ded_node *node, uint64_t now_ns) {
  node_enter(node, now_ns);
  int rv = ded_xfer_fetch(node, now_ns);
  if (rv == 0) node_reap(node);
  return rv;
}

int ded_node_state_reload(ded_node *node, uint64_t min_round, uint64_t now_ns) {
  node_enter(node, now_ns);
  int rv = ded_xfer_reload(node, min_round, now_ns);
  if (rv == 0) node_reap(node);
  return rv;
}

bool ded_node_astray(const ded_node *node) { return node->rounds.astray; }

int ded_node_snapshot_set(ded_node *node, ded_snapshot *snap, uint64_t now_ns) {
  node_enter(node, now_ns);
  int rv = ded_xfer_snapshot_set(node, snap, now_ns);
  if (rv != DED_ERR_NOMEM) node_reap(node); /* out of memory, nothing changed */
  return rv;
}

int ded_node_found_set(ded_node *node, ded_snapshot *snap, uint64_t now_ns) {
  node_enter(node, now_ns);
  int rv = ded_xfer_found_set(node, snap, now_ns);
  node_reap(node);
  return rv;
}

int ded_node_state_found(ded_node *node, const uint8_t *cands, unsigned n, uint64_t now_ns) {
  node_enter(node, now_ns);
  int rv = ded_xfer_found(node, cands, n, now_ns);
  if (rv == 0) node_reap(node);
  return rv;
}

int ded_node_state_pull(ded_node *node, uint64_t min_round, uint64_t now_ns) {
  node_enter(node, now_ns);
  int rv = ded_keep_pull(node, min_round, now_ns);
  if (rv == 0) node_reap(node);
  return rv;
}

int ded_node_keep_set(ded_node *node, ded_snapshot *snap, uint64_t now_ns) {
  node_enter(node, now_ns);
  int rv = ded_keep_set(node, snap, now_ns);
  node_reap(node);
  return rv;
}

int64_t ded_node_round_submit(ded_node *node, const ded_round_args *args, uint64_t now_ns) {
  node_enter(node, now_ns);
  if (node->leaving) return DED_ERR_CLOSING;
  if (node->s.no_rounds || !args->buf || args->count == 0 || args->count > DED_COUNT_MAX ||
      ded_dtype_size(args->dtype) == 0 || !isfinite(args->weight) || args->weight < 0.0 ||
      args->weight > DED_WEIGHT_MAX ||
      args->n_local == 0)
    return DED_ERR_INVALID_ARG;
  /* A reload decides which round comes next. */
  if (node->xfer.reload && ded_xfer_busy(node))
    return DED_ERR_INVALID_ARG;
  int64_t no = ded_round_submit(node, args, now_ns);
  if (no >= 0) node_reap(node);
  return no;
}

void ded_node_leave(ded_node *node, uint64_t now_ns) {
  (void)now_ns;
  if (node->leaving) return;
  node_enter(node, now_ns);
  node->leaving = true;
  node_log(node, DED_LOG_INFO, "leaving the swarm");
  for (unsigned i = 0; i < node->rounds.n; i++) ded_round_fail(node, node->rounds.v[i], DED_ERR_CLOSING);
  ded_rounds_fail_queued(node, DED_ERR_CLOSING); /* what no round covers yet */
  /* Rounds we coordinate go ahead without us rather than stall. */
  ded_coords_on_leave(node);
  /* LEAVE goes last on every connection to a peer, behind the results
   * still queued for peers that finish a round we already finished: the
   * peer reads each connection to its LEAVE, and is done with us when the
   * last one has come. */
  uint8_t frame[DED_LEAVE_FRAME_BYTES];
  ded_wr w = ded_wr_init(frame, sizeof frame);
  ded_msg_leave_encode(&w, node->leave_reason ? node->leave_reason : DED_LEAVE_FINALIZE);
  for (uint32_t s = 0; s < node->conns.nslots; s++) {
    ded_conn *c = ded_conns_at(&node->conns, s);
    if (!c || !c->peer || c->state != DED_CONN_READY) continue;
    uint8_t *copy = ded_mem_malloc(node->mem, w.pos);
    if (!copy) continue;
    memcpy(copy, frame, w.pos);
    ded_sendq_drop_class(&node->qenv, &c->out, DED_Q_BULK); /* probe filler would follow LEAVE unread */
    if (ded_conn_send_owned(node, c, DED_Q_DATA, copy, w.pos) == 0) c->leave_queued = true;
  }
  node_reap(node);
}

void ded_node_leave_reason(ded_node *node, uint8_t reason) {
  if (!node->leave_reason && ded_leave_why(reason)) node->leave_reason = reason;
}

bool ded_node_flushed(const ded_node *node) {
  for (uint32_t s = 0; s < node->conns.nslots; s++) {
    const ded_conn *c = ded_conns_at(&node->conns, s);
    if (c && c->state == DED_CONN_READY && ded_conn_has_output(c)) return false;
  }
  return true;
}

size_t ded_node_status(const ded_node *node, ded_status_peer *out, size_t max) {
  size_t n = 0;
  for (size_t i = 0; i < ded_table_count(&node->disc.table) && n < max; i++) {
    const ded_table_entry *e = ded_table_at(&node->disc.table, i);
    ded_status_peer *o = &out[n++];
    memset(o, 0, sizeof *o);
    memcpy(o->id, e->id, DED_ID_BYTES);
    o->self = memcmp(e->id, node->ident.id, DED_ID_BYTES) == 0;
    const ded_peer *p = o->self ? NULL : ded_peer_find(node, e->id);
    o->connected = o->self || (p && p->conn);
    o->mode = e->rec.mode;
    o->no_rounds = (e->rec.flags & DED_RECORD_F_NO_ROUNDS) != 0;
    if (e->rec.naddr > 0) o->addr = e->rec.addr[0];
    ded_record_perf(&e->rec, &o->perf);
    ded_record_progress(&e->rec, &o->progress);
    o->issued_ms = e->rec.issued_ms;
  }
  return n;
}

unsigned ded_node_peer_count(const ded_node *node) {
  unsigned n = 0;
  for (size_t i = 0; i < node->peers.n; i++) n += node->peers.v[i]->conn != NULL;
  return n;
}

unsigned ded_node_round_peer_count(const ded_node *node) {
  unsigned n = 0;
  for (size_t i = 0; i < node->peers.n; i++) n += ded_peer_participates(node, node->peers.v[i]);
  return n;
}

uint64_t ded_node_swarm_round(const ded_node *node) {
  uint64_t best = 0;
  for (size_t i = 0; i < ded_table_count(&node->disc.table); i++) {
    const ded_table_entry *e = ded_table_at(&node->disc.table, i);
    ded_progress prog;
    if (memcmp(e->id, node->ident.id, DED_ID_BYTES) != 0 && ded_record_progress(&e->rec, &prog) &&
        prog.round > best)
      best = prog.round;
  }
  return best;
}

int ded_node_groups_set(ded_node *node, const ded_group_addr *groups, unsigned n, uint64_t now_ns) {
  node_enter(node, now_ns);
  int rv = ded_disc_groups_set(node, groups, n, now_ns);
  node_reap(node);
  return rv;
}

size_t ded_node_group_hints(const ded_node *node, uint16_t id, uint64_t now_ns, ded_addr *out,
                            size_t max, unsigned *waiting) {
  return ded_disc_group_hints(node, id, now_ns, out, max, waiting);
}

unsigned ded_node_join_more(ded_node *node, const ded_addr *addrs, unsigned n, uint64_t now_ns) {
  node_enter(node, now_ns);
  unsigned taken = ded_boot_add(node, addrs, n, now_ns);
  if (taken) node->wake_soon = true;
  node_reap(node);
  return taken;
}

void ded_node_rates(const ded_node *node, uint32_t *up_kBps, uint32_t *down_kBps) {
  *up_kBps = node->disc.perf.up_kBps;
  *down_kBps = node->disc.perf.down_kBps;
}
