/*
 * ded_xfer.c: the joiner side of state transfer (see ded_xfer.h): asking,
 * choosing a snapshot, fetching its ranges from every donor that offers
 * it, founding's search for the first contributor's state, fetch and
 * reload. The donor side is in ded_donor.c.
 */
#include "ded_xfer.h"

#include <limits.h>
#include <string.h>

#include "../core/ded_assert.h"
#include "../core/ded_err.h"
#include "../core/ded_limits.h"
#include "../ded_node_int.h"
#include "ded_keep.h"

#define DED_XFER_TRIES 3 /* asks before a fetch gives up */
/* Bounds a joiner waits, at most, for a run in progress that offers no
 * state but moves on meanwhile (state_wait_for_run). */
#define DED_XFER_RUN_BOUNDS 4
#define STATE_CHUNK_BYTES (DED_STATE_GET_BYTES_MAX / 2)
#define STATE_WINDOW 16 /* ranges asked of one donor at once: 4 MiB in flight */

static void state_fill(ded_node *node);
static void state_finish(ded_node *node, uint64_t now_ns);

static uint64_t state_stall_ns(const ded_node *node) {
  return DED_MAX(8 * node->s.deadline_floor_ns, 2000000000ull);
}


/* ---- joiner side ---- */

static void state_forget_donors(ded_node *node) {
  ded_xfer *st = &node->xfer;
  for (unsigned i = 0; i < st->ndonors; i++) ded_mem_free(node->mem, st->donors[i].lin);
  st->ndonors = 0;
}

static void state_done(ded_node *node, int status, ded_snapshot *snap) {
  ded_xfer *st = &node->xfer;
  st->phase = DED_XFER_FINISHED;
  if (st->reload) node->rounds.yielding = false; /* loaded, or the groups are compared again */
  /* Astray, a reload that heard no peer in step (no OFFER, no PENDING)
   * counts; DED_NODE_ASTRAY_TRIES of them in a row (or as many as it
   * takes to ask every peer), a bound or more after it went astray, and
   * no peer is taken to hold the run's state to give:
   * every job of the run may be astray (a round with no result anywhere,
   * and no founder), or the one it would load from too (a founder that
   * went astray before the others loaded its state); none would offer
   * until another did, and joiners could never join. The bound keeps it
   * from giving up on peers in step that are only busy for a while
   * (fetching themselves, stopped); successive reloads ask other peers
   * (state_ask_more). */
  bool gave_up = false;
  if (st->reload && status != 0 && node->rounds.astray) {
    node->rounds.astray_fails = st->run_seen ? 0 : node->rounds.astray_fails + 1;
    /* Enough of them to have asked every peer (DED_XFER_ASK_MAX a time). */
    size_t tries = DED_MAX((size_t)DED_NODE_ASTRAY_TRIES,
                           (node->peers.n + DED_XFER_ASK_MAX - 1) / DED_XFER_ASK_MAX);
    if (node->rounds.astray_fails >= tries &&
        node->now_ns >= node->rounds.astray_ns + node->s.round_timeout_ns) {
      node->rounds.astray = false;
      gave_up = true;
      st->own_snap_due = true;
      if (node->cb.want_snapshot && !st->snap_wanted) {
        st->snap_wanted = true;
        node->cb.want_snapshot(node->user);
      }
    }
  }
  st->founding = false;
  st->pull = false;
  ded_mem_free(node->mem, st->chunk);
  ded_mem_free(node->mem, st->lin);
  st->chunk = NULL;
  st->lin = NULL;
  state_forget_donors(node);
  if (!snap) {
    ded_mem_free(node->mem, st->buf);
    st->buf = NULL;
  }
  /* The residual was this job's own past, which the loaded state replaces. */
  if (status == 0 && snap) ded_rounds_feedback_reset(node, "the run's state was loaded");
  node->cb.state_done(node->user, status, snap);
  if (gave_up)
    node_log(node, DED_LOG_WARN, "no peer in step answered %u reloads in a row: this job's "
             "state, its own since it kept its own values in a round, goes on as the run's "
             "(the others' may differ)", node->rounds.astray_fails);
}

static int state_send_ask(ded_node *node, ded_peer *p, uint64_t min_round) {
  const ded_xfer *st = &node->xfer;
  uint8_t frame[DED_STATE_ASK_FRAME_BYTES];
  ded_wr w = ded_wr_init(frame, sizeof frame);
  ded_msg_state_ask m;
  memset(&m, 0, sizeof m);
  m.min_round = min_round;
  if (st->founding) {
    m.min_round = 0;
    memcpy(m.origin, st->cands[st->cand], DED_ID_BYTES);
  }
  ded_msg_state_ask_encode(&w, &m);
  return p->conn ? ded_conn_send_ctrl(node, p->conn, frame, w.pos) : DED_ERR_PEER_LOST;
}

/* Asks |p| unless it was asked already; false if it cannot be. */
static bool state_ask_peer(ded_node *node, ded_peer *p) {
  ded_xfer *st = &node->xfer;
  for (unsigned i = 0; i < st->ndonors; i++)
    if (memcmp(st->donors[i].id, p->id, DED_ID_BYTES) == 0) return true;
  if (st->ndonors >= DED_XFER_ASK_MAX || state_send_ask(node, p, st->min_round) != 0) return false;
  ded_xfer_donor *d = &st->donors[st->ndonors++];
  memset(d, 0, sizeof *d);
  memcpy(d->id, p->id, DED_ID_BYTES);
  d->last_ns = node->now_ns;
  return true;
}

/* Founding: the candidate first, then the other contributors of the
 * first round (they may hold its state, taken from it), then any other
 * participating peer. */
static void state_ask_founders(ded_node *node) {
  ded_xfer *st = &node->xfer;
  for (unsigned k = 0; k < st->ncands && st->ndonors < DED_XFER_ASK_MAX; k++) {
    ded_peer *p = ded_peer_find(node, st->cands[(st->cand + k) % st->ncands]);
    if (p && p->conn && !p->left) state_ask_peer(node, p);
  }
}

/* Asks the participating peers we can talk to and have not asked yet. */
static void state_ask_more(ded_node *node) {
  ded_xfer *st = &node->xfer;
  if (st->founding) state_ask_founders(node);
  if (st->reload && node->rounds.diverged) { /* the founder's state is the run's: it first */
    ded_peer *f = ded_peer_find(node, node->rounds.founder);
    if (f && f->conn && !f->left) state_ask_peer(node, f);
  }
  if (!st->founding && !st->pull) ded_keep_ask_backbones(node);
  if (st->ndonors >= DED_XFER_ASK_MAX || node->peers.n == 0) return;
  /* Start at a place that depends on our id, so that joiners spread; an
   * astray job's reloads that heard no peer in step ask the next ones. */
  size_t start = node->ident.id[0] % node->peers.n;
  if (st->reload && node->rounds.astray)
    start = (start + (size_t)node->rounds.astray_fails * DED_XFER_ASK_MAX) % node->peers.n;
  for (size_t k = 0; k < node->peers.n && st->ndonors < DED_XFER_ASK_MAX; k++) {
    ded_peer *p = node->peers.v[(start + k) % node->peers.n];
    if (!ded_peer_participates(node, p)) continue;
    bool asked = false;
    for (unsigned i = 0; i < st->ndonors && !asked; i++)
      asked = memcmp(st->donors[i].id, p->id, DED_ID_BYTES) == 0;
    if (asked) continue;
    if (state_send_ask(node, p, st->min_round) != 0) return;
    ded_xfer_donor *d = &st->donors[st->ndonors++];
    memset(d, 0, sizeof *d);
    memcpy(d->id, p->id, DED_ID_BYTES);
    d->last_ns = node->now_ns;
  }
}

static void state_begin_asking(ded_node *node, uint64_t now_ns) {
  ded_xfer *st = &node->xfer;
  state_forget_donors(node);
  st->phase = DED_XFER_ASKING;
  st->tries++;
  st->asked_ns = now_ns;
  st->first_answer_ns = st->first_offer_ns = 0;
  st->realigned = false;
  st->deadline_ns = now_ns + node->s.round_timeout_ns;
  state_ask_more(node);
}

/* A known peer that takes part in rounds but that we cannot ask yet. */
static bool state_peer_unasked(ded_node *node) {
  ded_xfer *st = &node->xfer;
  for (size_t i = 0; i < node->peers.n; i++) {
    ded_peer *p = node->peers.v[i];
    const ded_record *rec = ded_peer_record(node, p);
    if (p->left || !rec || (rec->flags & DED_RECORD_F_NO_ROUNDS)) continue;
    bool asked = false;
    for (unsigned k = 0; k < st->ndonors && !asked; k++)
      asked = memcmp(st->donors[k].id, p->id, DED_ID_BYTES) == 0;
    if (!asked) return true;
  }
  return false;
}

static void state_send_get(ded_node *node, unsigned di, uint64_t chunk) {
  ded_xfer *st = &node->xfer;
  ded_xfer_donor *d = &st->donors[di];
  ded_peer *p = ded_peer_find(node, d->id);
  uint64_t off = chunk * STATE_CHUNK_BYTES;
  ded_msg_state_get m = {st->want.round, st->want.digest, off,
                         (uint32_t)DED_MIN(STATE_CHUNK_BYTES, st->want.len - off)};
  uint8_t frame[DED_STATE_GET_FRAME_BYTES];
  ded_wr w = ded_wr_init(frame, sizeof frame);
  ded_msg_state_get_encode(&w, &m);
  if (!p || !p->conn || ded_conn_send_ctrl(node, p->conn, frame, w.pos) != 0) return;
  st->chunk[chunk] = (uint8_t)(1 + di);
  if (d->inflight == 0) d->last_ns = node->now_ns;
  d->inflight++;
}

/* |di| no longer serves the fetch: its ranges go to the others. */
static void state_drop_donor(ded_node *node, unsigned di, const char *why) {
  ded_xfer *st = &node->xfer;
  ded_xfer_donor *d = &st->donors[di];
  if (!d->in_group) return;
  char sid[9];
  ded_id_short(d->id, sid);
  node_log(node, DED_LOG_INFO, "state fetch: peer %s dropped (%s)", sid, why);
  d->in_group = false;
  d->inflight = 0;
  for (uint64_t i = 0; i < st->nchunks; i++)
    if (st->chunk[i] == 1 + di) {
      st->chunk[i] = 0;
      if (i < st->next_todo) st->next_todo = i;
    }
}

/* Two offers of the very same snapshot. */
static bool state_offers_equal(const ded_msg_state_offer *a, const ded_msg_state_offer *b) {
  return (a->status == DED_STATE_OFFER || a->status == DED_STATE_FOUNDING) &&
         a->status == b->status && a->round == b->round && a->digest == b->digest &&
         a->len == b->len && a->step_rounds == b->step_rounds &&
         a->lin_attempt == b->lin_attempt && a->nlin == b->nlin &&
         (a->nlin == 0 || memcmp(a->lin, b->lin, DED_LIN_BYTES(a->nlin)) == 0); /* 0: a checkpoint */
}

static void state_choose(ded_node *node, uint64_t now_ns) {
  ded_xfer *st = &node->xfer;
  /* The snapshot most peers offer (the highest round among equals): the
   * more that offer it, the more the fetch is spread. */
  int best = -1;
  unsigned best_n = 0;
  for (unsigned i = 0; i < st->ndonors; i++) {
    ded_xfer_donor *a = &st->donors[i];
    if (!a->answered || a->offer.status != (st->founding ? DED_STATE_FOUNDING : DED_STATE_OFFER))
      continue;
    if (st->founding && memcmp(a->id, st->cands[st->cand], DED_ID_BYTES) == 0) {
      best = (int)i; /* the candidate's own offer */
      best_n = UINT_MAX;
      break;
    }
    unsigned n = 0;
    for (unsigned k = 0; k < st->ndonors; k++)
      n += st->donors[k].answered && state_offers_equal(&a->offer, &st->donors[k].offer);
    if (best < 0 || n > best_n || (n == best_n && a->offer.round > st->donors[best].offer.round)) {
      best = (int)i;
      best_n = n;
    }
  }
  ded_xfer_donor *a = &st->donors[best];
  best_n = 0; /* the peers it is fetched from (the candidate's own offer counted none) */
  for (unsigned k = 0; k < st->ndonors; k++) {
    ded_xfer_donor *b = &st->donors[k];
    b->in_group = b->answered && state_offers_equal(&a->offer, &b->offer);
    best_n += b->in_group;
    b->inflight = 0;
    b->last_ns = now_ns;
  }
  ded_mem_free(node->mem, st->lin);
  st->want = a->offer;
  st->lin = a->lin; /* ours now; a->offer.lin still points at it, read-only */
  a->lin = NULL;
  st->nchunks = (st->want.len + STATE_CHUNK_BYTES - 1) / STATE_CHUNK_BYTES;
  st->ndone = st->next_todo = 0;
  ded_mem_free(node->mem, st->chunk);
  ded_mem_free(node->mem, st->buf);
  st->chunk = ded_mem_calloc(node->mem, st->nchunks ? st->nchunks : 1, 1);
  st->buf = ded_mem_malloc(node->mem, st->want.len ? st->want.len : 1);
  if (!st->chunk || !st->buf) {
    state_done(node, DED_ERR_NOMEM, NULL);
    return;
  }
  st->phase = DED_XFER_FETCHING;
  if (st->founding) {
    char sid[9];
    ded_id_short(st->cands[st->cand], sid);
    node_log(node, DED_LOG_INFO, "the run's initial state is peer %s's: loading it (%llu bytes) "
             "from %u peer%s", sid, (unsigned long long)st->want.len, best_n,
             best_n == 1 ? "" : "s");
  } else {
    node_log(node, DED_LOG_INFO, "the run is at round %llu: loading its state (%llu bytes) from "
             "%u peer%s", (unsigned long long)st->want.round, (unsigned long long)st->want.len,
             best_n, best_n == 1 ? "" : "s");
  }
  state_fill(node);
  if (st->phase == DED_XFER_FETCHING && st->ndone == st->nchunks) state_finish(node, now_ns);
}

static int state_donor_of(const ded_xfer *st, const uint8_t id[DED_ID_BYTES]) {
  for (unsigned i = 0; i < st->ndonors; i++)
    if (memcmp(st->donors[i].id, id, DED_ID_BYTES) == 0) return (int)i;
  return -1;
}

void ded_xfer_on_offer(ded_node *node, ded_conn *c, const ded_msg_state_offer *m,
                                uint64_t now_ns) {
  ded_xfer *st = &node->xfer;
  int di = state_donor_of(st, c->peer->id);
  if (di < 0) return; /* not asked (or asked by an earlier try): moot */
  ded_xfer_donor *d = &st->donors[di];
  if (st->phase == DED_XFER_FETCHING) {
    if (d->in_group && (m->status == DED_STATE_GONE || m->status == DED_STATE_NONE) &&
        m->round == st->want.round)
      state_drop_donor(node, (unsigned)di, "it no longer holds the snapshot");
    state_fill(node);
    return;
  }
  if (st->phase != DED_XFER_ASKING || m->status == DED_STATE_GONE) return;
  /* A founding ask is answered by FOUNDING of the origin asked, PENDING
   * or NONE; a plain one never by FOUNDING. Anything else answers an ask
   * of another kind that crossed ours: moot. */
  if (st->founding ? m->status == DED_STATE_OFFER ||
                         (m->status == DED_STATE_FOUNDING &&
                          memcmp(m->lin, st->cands[st->cand], DED_ID_BYTES) != 0)
                   : m->status == DED_STATE_FOUNDING)
    return;
  if (m->status == DED_STATE_OFFER && m->round < st->min_round) {
    /* Asked for a newer one: this offer cannot bring us into step. (It
     * may answer an ask of an earlier try that crossed ours: no fault.) */
    node_log(node, DED_LOG_DEBUG, "state offer of round %llu from %s: older than round %llu",
             (unsigned long long)m->round, c->peer->sid, (unsigned long long)st->min_round);
    return;
  }
  uint8_t(*lin)[DED_ID_BYTES] = NULL;
  if (m->nlin) {
    lin = ded_mem_malloc(node->mem, DED_LIN_BYTES(m->nlin));
    if (!lin) return;
    memcpy(lin, m->lin, DED_LIN_BYTES(m->nlin));
  }
  ded_mem_free(node->mem, d->lin);
  d->lin = lin;
  d->offer = *m;
  if (m->status == DED_STATE_OFFER || m->status == DED_STATE_PENDING) st->run_seen = true;
  d->offer.lin = (const uint8_t *)lin;
  d->answered = true;
  d->last_ns = now_ns;
  if ((m->status == DED_STATE_OFFER || m->status == DED_STATE_FOUNDING) && !st->first_offer_ns)
    st->first_offer_ns = now_ns;
  if (!st->first_answer_ns) st->first_answer_ns = now_ns;
}

/* Asks the group for every range not asked yet, a few at a time each. */
static void state_fill(ded_node *node) {
  ded_xfer *st = &node->xfer;
  if (st->phase != DED_XFER_FETCHING) return;
  bool progress = true;
  while (progress && st->next_todo < st->nchunks) {
    progress = false;
    for (unsigned di = 0; di < st->ndonors && st->next_todo < st->nchunks; di++) {
      ded_xfer_donor *d = &st->donors[di];
      if (!d->in_group || d->inflight >= STATE_WINDOW) continue;
      while (st->next_todo < st->nchunks && st->chunk[st->next_todo] != 0) st->next_todo++;
      if (st->next_todo == st->nchunks) break;
      unsigned before = d->inflight;
      state_send_get(node, di, st->next_todo);
      progress |= d->inflight > before;
    }
  }
}

void ded_xfer_on_data(ded_node *node, ded_conn *c, const ded_msg_state_data *m,
                               uint64_t now_ns) {
  ded_xfer *st = &node->xfer;
  if (st->phase != DED_XFER_FETCHING || m->round != st->want.round || m->digest != st->want.digest)
    return; /* a range of an earlier try: moot */
  int di = state_donor_of(st, c->peer->id);
  uint64_t i = m->offset / STATE_CHUNK_BYTES;
  if (di < 0 || m->offset % STATE_CHUNK_BYTES != 0 || i >= st->nchunks ||
      m->len != DED_MIN(STATE_CHUNK_BYTES, st->want.len - m->offset)) {
    ded_conn_protocol_error(node, c, DED_ERR_PROTO, "STATE_DATA not asked for");
    return;
  }
  ded_xfer_donor *d = &st->donors[di];
  if (st->chunk[i] == 1 + di) { /* a duplicate, or a range moved away: ignored */
    memcpy(st->buf + m->offset, m->bytes, m->len);
    st->chunk[i] = 0xff;
    st->ndone++;
    if (d->inflight > 0) d->inflight--;
  }
  d->last_ns = now_ns;
  state_fill(node);
  if (st->ndone == st->nchunks) state_finish(node, now_ns);
}

/* Founding: the candidate's state is here and checked. It becomes ours to
 * serve, as the candidate's, and the caller's to load. */
static void state_found_finish(ded_node *node, uint64_t now_ns) {
  ded_xfer *st = &node->xfer;
  uint8_t *copy = ded_mem_malloc(node->mem, st->want.len ? st->want.len : 1);
  if (!copy) {
    state_done(node, DED_ERR_NOMEM, NULL);
    return;
  }
  memcpy(copy, st->buf, st->want.len);
  ded_xfer_found_drop(node);
  st->found.round = 0;
  st->found.len = st->want.len;
  st->found.digest = st->want.digest;
  st->found.bytes = copy;
  memcpy(st->found_origin, st->cands[st->cand], DED_ID_BYTES);
  st->have_found = true;
  st->found_used_ns = now_ns;
  unsigned n = 0;
  for (unsigned i = 0; i < st->ndonors; i++) n += st->donors[i].in_group;
  char sid[9];
  ded_id_short(st->found_origin, sid);
  node_log(node, DED_LOG_INFO, "took the run's initial state from peer %s: %llu bytes in %llu ms "
           "(from %u peer%s)", sid, (unsigned long long)st->want.len,
           (unsigned long long)((now_ns - st->asked_ns) / 1000000u), n, n == 1 ? "" : "s");
  ded_snapshot snap;
  memset(&snap, 0, sizeof snap);
  snap.round = 0;
  snap.len = st->want.len;
  snap.digest = st->want.digest;
  snap.bytes = st->buf;
  st->buf = NULL;
  st->founding = false;
  state_done(node, 0, &snap);
  ded_mem_free(node->mem, snap.bytes); /* unless the callee took it */
}

/* The whole state is here: check it, take the lineage, resume. */
static void state_finish(ded_node *node, uint64_t now_ns) {
  ded_xfer *st = &node->xfer;
  const ded_msg_state_offer *w = &st->want;
  if (ded_digest64(st->buf, w->len) != w->digest) {
    node_log(node, DED_LOG_WARN, "state of round %llu: the bytes do not match their digest; asking "
             "again", (unsigned long long)w->round);
    if (st->tries >= DED_XFER_TRIES) {
      state_done(node, DED_ERR_PROTO, NULL);
      return;
    }
    state_begin_asking(node, now_ns);
    return;
  }
  if (st->founding) {
    state_found_finish(node, now_ns);
    return;
  }
  if (st->pull) {
    ded_keep_pull_finish(node, now_ns);
    return;
  }
  uint64_t skipped = w->round - node->rounds.next;
  if (st->reload) ded_lineage_lose(&node->lin); /* ours ended out of step */
  node->rounds.diverged = node->rounds.astray = false;
  st->own_snap_due = false;
  if (w->nlin) { /* else a checkpoint: the rounds start anew at its round (a first round) */
    ded_lineage_install(&node->lin, w->round - 1, w->lin_attempt,
                        (uint8_t(*)[DED_ID_BYTES])st->lin, w->nlin, w->pos);
    /* Our record says how far the run got as soon as we hold it: a peer
     * whose round's members are all gone asks records whether the run
     * went on (round_run_ahead), and must not take us for behind it. */
    if (w->round > 1) ded_disc_progress_loaded(node, w->round - 1, w->nlin, w->lin_attempt);
  } else {
    ded_mem_free(node->mem, st->lin);
  }
  st->lin = NULL;
  node->rounds.next = w->round;
  /* The lineage loaded is the run's, however far the swarm went on while
   * the state came: a peer far past it that joined after its round is
   * the run we catch up with, not another group (ded_rounds_check_groups),
   * as for a round completed late. */
  node->rounds.late_done = w->round;
  /* Where the swarm was said to be while the state came (a STALE, or a
   * group yielded to) is behind us now: our rounds from here are fetched
   * or joined, not ended out of step on our own values; if the swarm is
   * past them for good, the next STALE says so. */
  node->rounds.stale = DED_MIN(node->rounds.stale, w->round);
  /* Back from a stall, our views waited to hear whether the run went on
   * without us (node_enter); it did, and we are where it is now. */
  node->quiet_until_ns = 0;
  ded_stream_resume(&node->rounds.stream, w->pos);
  ded_snapshot snap;
  memset(&snap, 0, sizeof snap);
  snap.round = w->round;
  snap.pos = w->pos;
  snap.step_rounds = w->step_rounds;
  snap.len = w->len;
  snap.digest = w->digest;
  snap.bytes = st->buf;
  st->buf = NULL;
  unsigned n = 0;
  for (unsigned i = 0; i < st->ndonors; i++) n += st->donors[i].in_group;
  if (st->reload)
    node_log(node, DED_LOG_INFO, "back in step at round %llu, %llu rounds on: state of %llu bytes "
             "reloaded in %llu ms (from %u peer%s)", (unsigned long long)w->round,
             (unsigned long long)skipped, (unsigned long long)w->len,
             (unsigned long long)((now_ns - st->asked_ns) / 1000000u), n, n == 1 ? "" : "s");
  else
    node_log(node, DED_LOG_INFO, "joined the run at round %llu: state of %llu bytes loaded in %llu "
             "ms (from %u peer%s)", (unsigned long long)w->round, (unsigned long long)w->len,
             (unsigned long long)((now_ns - st->asked_ns) / 1000000u), n, n == 1 ? "" : "s");
  state_done(node, 0, &snap);
  ded_mem_free(node->mem, snap.bytes); /* unless the callee took it */
}

/* Founding, every answer so far without the candidate's state. The
 * search moves past the candidate only when it is gone and no peer asked
 * holds or is fetching its state (ded_xfer.h); it asks again, a deadline
 * floor apart, while the candidate is there; it gives up at the bound. */
static void state_found_none(ded_node *node, uint64_t now_ns) {
  ded_xfer *st = &node->xfer;
  ded_peer *p = ded_peer_find(node, st->cands[st->cand]);
  bool gone = !p || !p->conn || p->left;
  if (!gone) st->found_gone_ns = 0;
  else if (!st->found_gone_ns) st->found_gone_ns = now_ns;
  /* Peers that are themselves still looking (PENDING, round 0) may find
   * a way to the candidate we lack: they are waited for a while, those
   * that are being sent its state (round 1) to the end. */
  unsigned unanswered = 0, fetching = 0, looking = 0;
  for (unsigned i = 0; i < st->ndonors; i++) {
    const ded_xfer_donor *d = &st->donors[i];
    if (!d->answered)
      unanswered++;
    else if (d->offer.status == DED_STATE_PENDING)
      d->offer.round ? fetching++ : looking++;
  }
  bool patience = looking == 0 || now_ns >= st->found_gone_ns + 4 * node->s.deadline_floor_ns;
  if (gone && unanswered == 0 && fetching == 0 && patience && st->cand < st->self_at) {
    char was[9], next[9];
    ded_id_short(st->cands[st->cand], was);
    st->cand++;
    st->found_gone_ns = 0;
    if (st->cand == st->self_at) {
      node_log(node, DED_LOG_WARN, "peer %s, whose state the run was to start from, went away "
               "before any peer took it: this job's own state is the run's initial state", was);
      state_done(node, 0, NULL);
      return;
    }
    ded_id_short(st->cands[st->cand], next);
    node_log(node, DED_LOG_WARN, "peer %s, whose state the run was to start from, went away "
             "before any peer took it: trying peer %s's", was, next);
  } else if (now_ns >= st->found_deadline_ns) {
    char sid[9];
    ded_id_short(st->cands[st->cand], sid);
    node_log(node, DED_LOG_WARN, "no peer gave peer %s's initial state within %llu ms", sid,
             (unsigned long long)(node->s.round_timeout_ns / 1000000u));
    state_done(node, DED_ERR_TIMEOUT, NULL);
    return;
  } else if (unanswered || now_ns < st->asked_ns + node->s.deadline_floor_ns) {
    /* Asked again a deadline floor apart once all have answered: a peer
     * that said PENDING or NONE sends nothing more by itself. */
    return;
  }
  state_forget_donors(node);
  st->asked_ns = now_ns;
  st->first_answer_ns = st->first_offer_ns = 0;
  state_ask_more(node);
}

/* A peer of the run that completed a round, as its record says (not a
 * backbone, not one that left; reachable or not), and that round; NULL
 * if none is known. */
static const uint8_t *state_run_known(ded_node *node, uint64_t *round) {
  const uint8_t *who = NULL;
  for (size_t i = 0; i < ded_table_count(&node->disc.table); i++) {
    const ded_table_entry *e = ded_table_at(&node->disc.table, i);
    ded_progress prog;
    if (id_is_me(node, e->id) || (e->rec.flags & DED_RECORD_F_NO_ROUNDS) ||
        !ded_record_progress(&e->rec, &prog))
      continue;
    ded_peer *p = ded_peer_find(node, e->id);
    if (p && p->left) continue;
    if (!who || prog.round > *round) {
      who = e->id;
      *round = prog.round;
    }
  }
  return who;
}

/* A fetch while a run is in progress that no peer offered a snapshot of
 * yet: the peers that said PENDING may have failed to take one (a step
 * that came late, a second joiner), the only ones that hold the run may
 * be stopped or cut off. Asked again a deadline floor after the answers
 * are in; at the bound, an error that says why, never our own state. */
static void state_wait_for_run(ded_node *node, const uint8_t *who, uint64_t round,
                               unsigned pending, unsigned inrun, uint64_t now_ns) {
  ded_xfer *st = &node->xfer;
  char sid[9] = "";
  if (who) ded_id_short(who, sid);
  /* The run moved on since we began to wait (a peer's record shows a
   * newer round completed): it is alive, and its members will offer once
   * a round ends with the swarm's result again (after a round that ended
   * nowhere, each kept its own values and can vouch for no state). The
   * bound runs again from here, DED_XFER_RUN_BOUNDS bounds in all at most:
   * a run that is stuck gets one. */
  if (who && round > st->run_round) {
    if (st->run_wait_logged && st->run_bounds + 1 < DED_XFER_RUN_BOUNDS &&
        st->deadline_ns < now_ns + node->s.round_timeout_ns) {
      st->run_bounds++;
      st->deadline_ns = now_ns + node->s.round_timeout_ns;
      node_log(node, DED_LOG_INFO, "the run moved on to round %llu (peer %s) without offering "
               "its state yet: waiting for it %llu ms more", (unsigned long long)round, sid,
               (unsigned long long)(node->s.round_timeout_ns / 1000000u));
    }
    st->run_round = round;
  }
  unsigned reachable = 0;
  for (size_t i = 0; i < node->peers.n; i++) reachable += ded_peer_participates(node, node->peers.v[i]);
  if (!st->run_wait_logged) {
    st->run_wait_logged = true;
    if (who)
      node_log(node, DED_LOG_INFO, "a run is in progress (peer %s completed round %llu) but no "
               "peer offered its state yet: asking again until the bound", sid,
               (unsigned long long)round);
    else
      node_log(node, DED_LOG_INFO, "a run is in progress but no peer offered its state yet: "
               "asking again until the bound");
  }
  /* Peers of the run that said PENDING, still here, will offer at their
   * trainers' next step: a run stalled a while (every job in step stopped
   * at once) steps again, and its joiners should still be there (two
   * joins failed at the bound, the donors' offers came 0.5 s later, in
   * the churn soak). The same DED_XFER_RUN_BOUNDS in all. */
  if (now_ns >= st->deadline_ns && inrun && st->run_bounds + 1 < DED_XFER_RUN_BOUNDS) {
    st->run_bounds++;
    st->deadline_ns = now_ns + node->s.round_timeout_ns;
    node_log(node, DED_LOG_INFO, "%u peer%s of the run will offer its state at their trainers' "
             "next step, not come yet: waiting for them %llu ms more", inrun, inrun == 1 ? "" : "s",
             (unsigned long long)(node->s.round_timeout_ns / 1000000u));
  }
  if (now_ns >= st->deadline_ns) {
    node_log(node, DED_LOG_ERROR,
             "a run is in progress%s%s%s but %s within %llu ms: not starting a model of this "
             "job's own in it", who ? " (peer " : "", sid, who ? " completed a round)" : "",
             reachable ? "no peer offered its state" : "none of its peers is reachable",
             (unsigned long long)((1 + st->run_bounds) * node->s.round_timeout_ns / 1000000u));
    state_done(node, DED_ERR_TIMEOUT, NULL);
    return;
  }
  if (pending || now_ns < st->asked_ns + node->s.deadline_floor_ns) return;
  state_forget_donors(node);
  st->asked_ns = now_ns;
  st->first_answer_ns = st->first_offer_ns = 0;
  st->realigned = false;
  state_ask_more(node);
}

/* Decides what the answers so far mean; drops donors that stall. */
void ded_xfer_tick(ded_node *node, uint64_t now_ns) {
  ded_xfer *st = &node->xfer;
  ded_xfer_donor_tick(node, now_ns);
  if (st->phase == DED_XFER_ASKING) {
    state_ask_more(node);
    unsigned offers = 0, pending = 0, fresh = 0, inrun = 0;
    for (unsigned i = 0; i < st->ndonors; i++) {
      ded_xfer_donor *d = &st->donors[i];
      ded_peer *p = d->answered ? NULL : ded_peer_find(node, d->id);
      if (!d->answered && (!p || !p->conn || p->left)) {
        /* Gone before it answered: it will not. */
        d->answered = true;
        d->offer.status = DED_STATE_NONE;
      }
      if (!d->answered)
        pending++;
      else if (d->offer.status == DED_STATE_OFFER || d->offer.status == DED_STATE_FOUNDING)
        offers++;
      else if (d->offer.status == DED_STATE_PENDING) {
        ded_peer *q = ded_peer_find(node, d->id);
        pending++;
        inrun += q && q->conn && !q->left; /* still here to offer */
      }
      else if (d->offer.status == DED_STATE_FRESH)
        fresh++;
    }
    if (offers && st->founding) {
      /* The candidate's own offer is the one to take (a relay's bytes are
       * only its word): wait a deadline floor for its answer while it is
       * there to give one. */
      int o = -1;
      for (unsigned i = 0; i < st->ndonors && o < 0; i++)
        if (memcmp(st->donors[i].id, st->cands[st->cand], DED_ID_BYTES) == 0) o = (int)i;
      ded_peer *cp = ded_peer_find(node, st->cands[st->cand]);
      bool waiting = o >= 0 && !st->donors[o].answered && cp && cp->conn && !cp->left;
      if (!waiting || now_ns >= st->first_offer_ns + node->s.deadline_floor_ns)
        state_choose(node, now_ns);
      return;
    }
    if (offers) {
      /* Peers in step take their snapshots at the same round, unless an
       * ask reached them on either side of a step's start: then, once,
       * every peer that offered is asked for a snapshot a step past the
       * newest offered, which they all reach from where they are, so
       * that the fetch can be spread over all of them. */
      uint64_t newest = 0, step = 1, oldest = UINT64_MAX;
      for (unsigned i = 0; i < st->ndonors; i++) {
        const ded_xfer_donor *d = &st->donors[i];
        if (!d->answered || d->offer.status != DED_STATE_OFFER) continue;
        oldest = DED_MIN(oldest, d->offer.round);
        if (d->offer.round > newest) {
          newest = d->offer.round;
          step = d->offer.step_rounds;
        }
      }
      if (oldest < newest && !st->realigned) {
        st->realigned = true;
        for (unsigned i = 0; i < st->ndonors; i++) {
          ded_xfer_donor *d = &st->donors[i];
          ded_peer *p = ded_peer_find(node, d->id);
          if (!d->answered || d->offer.status != DED_STATE_OFFER || !p ||
              state_send_ask(node, p, DED_MAX(newest + step, st->min_round)) != 0)
            continue;
          d->answered = false;
          pending++;
          offers--;
        }
        return;
      }
      /* Wait a little for the others that will offer: as long again as
       * the first answer took (a round trip), at least the deadline
       * floor. Not as long as the first offer took: that is mostly the
       * donor's wait for its trainer's next step, which the other donors
       * in step reach at the same time; the run goes on meanwhile, and a
       * joiner that loads a snapshot steps old stays late. */
      uint64_t rtt = st->first_answer_ns > st->asked_ns ? st->first_answer_ns - st->asked_ns : 0;
      uint64_t grace = DED_MAX(node->s.deadline_floor_ns, rtt);
      if ((pending == 0 && !state_peer_unasked(node)) || now_ns >= st->first_offer_ns + grace ||
          now_ns >= st->deadline_ns)
        state_choose(node, now_ns);
      return;
    }
    if (st->founding) {
      state_found_none(node, now_ns);
      return;
    }
    if (st->pull) {
      ded_keep_pull_none(node, pending, now_ns);
      return;
    }
    bool settled = pending == 0 && !state_peer_unasked(node);
    if (st->reload) { /* a run is in progress: wait for an offer, within the bound */
      /* Every peer asked (as many as we ask), none offers or will (a peer
       * in step answers PENDING until its next step): tried again at the
       * next step. */
      bool timed_out = now_ns >= st->deadline_ns;
      if (timed_out || settled || (pending == 0 && st->ndonors >= DED_XFER_ASK_MAX)) {
        /* Said at once by every peer asked: the shim's line says it. */
        node_log(node, timed_out ? DED_LOG_WARN : DED_LOG_DEBUG,
                 "no peer offered the run's state of round %llu or later "
                 "within %llu ms: %s", (unsigned long long)st->min_round,
                 (unsigned long long)((now_ns - st->asked_ns) / 1000000u),
                 st->reload_in_step ? "this job catches up by fetching the rounds' results"
                                    : "this job stays out of step");
        state_done(node, DED_ERR_TIMEOUT, NULL);
      }
      return;
    }
    /* A run is in progress (a peer said so, or a record shows a round
     * completed) but no snapshot came of it: ask again, every deadline
     * floor, until the bound; never start a model of our own in it. */
    uint64_t round = 0;
    const uint8_t *who = NULL;
    who = state_run_known(node, &round);
    if (st->run_seen || who) {
      state_wait_for_run(node, who, round, pending, inrun, now_ns);
      return;
    }
    /* No run in progress: everyone we know has not started, or we know no
     * one who takes part in rounds. A peer that has not connected yet is
     * waited for a little (four deadline floors), not for the whole bound. */
    if (settled || (pending == 0 && now_ns >= st->asked_ns + 4 * node->s.deadline_floor_ns) ||
        (fresh && !inrun && now_ns >= st->deadline_ns)) {
      node_log(node, DED_LOG_INFO, "no run in progress (%u peer%s asked): starting from this job's "
               "own state", st->ndonors, st->ndonors == 1 ? "" : "s");
      state_done(node, 0, NULL);
      return;
    }
    if (now_ns >= st->deadline_ns) {
      node_log(node, DED_LOG_ERROR, "no peer offered the run's state within %llu ms",
               (unsigned long long)(node->s.round_timeout_ns / 1000000u));
      state_done(node, DED_ERR_TIMEOUT, NULL);
    }
    return;
  }
  if (st->phase != DED_XFER_FETCHING) return;
  unsigned left = 0;
  for (unsigned i = 0; i < st->ndonors; i++) {
    ded_xfer_donor *d = &st->donors[i];
    if (!d->in_group) continue;
    ded_peer *p = ded_peer_find(node, d->id);
    if (!p || !p->conn)
      state_drop_donor(node, i, "connection lost");
    else if (d->inflight > 0 && now_ns >= d->last_ns + state_stall_ns(node))
      state_drop_donor(node, i, "no data in time");
    left += d->in_group;
  }
  if (left == 0) {
    if (st->tries >= DED_XFER_TRIES) {
      node_log(node, DED_LOG_ERROR, "state fetch failed: every peer that offered it went away");
      state_done(node, DED_ERR_PEER_LOST, NULL);
      return;
    }
    state_begin_asking(node, now_ns);
    return;
  }
  state_fill(node);
}

int ded_xfer_fetch(ded_node *node, uint64_t now_ns) {
  if (node->leaving) return DED_ERR_CLOSING;
  if (!node->cb.state_done || node->rounds.next != 0 || !ded_stream_idle(&node->rounds.stream) ||
      node->xfer.phase != DED_XFER_IDLE ||
      node->s.no_rounds)
    return DED_ERR_INVALID_ARG;
  node->xfer.reload = false;
  node->xfer.min_round = 0;
  node->xfer.tries = 0;
  node->xfer.run_seen = node->xfer.run_wait_logged = false;
  node->xfer.run_round = 0;
  node->xfer.run_bounds = 0;
  state_begin_asking(node, now_ns);
  ded_xfer_tick(node, now_ns);
  return 0;
}

int ded_xfer_reload(ded_node *node, uint64_t min_round, uint64_t now_ns) {
  if (node->leaving) return DED_ERR_CLOSING;
  ded_xfer *st = &node->xfer;
  bool busy = st->phase == DED_XFER_ASKING || st->phase == DED_XFER_FETCHING ||
              !ded_stream_idle(&node->rounds.stream);
  for (unsigned i = 0; i < node->rounds.n && !busy; i++)
    busy = !ded_round_over(node->rounds.v[i]);
  if (!node->cb.state_done || busy || node->s.no_rounds || min_round < node->rounds.next ||
      (min_round == node->rounds.next && !node->rounds.diverged && !node->rounds.astray))
    return DED_ERR_INVALID_ARG;
  if (min_round > node->rounds.next)
    node_log(node, DED_LOG_INFO, "%llu rounds behind the swarm (at round %llu): reloading its state",
             (unsigned long long)(min_round - node->rounds.next), (unsigned long long)min_round);
  else
    node_log(node, DED_LOG_INFO, "this job's state is its own (it kept its own values in a round): "
             "reloading the run's, of round %llu or later", (unsigned long long)min_round);
  st->reload = true;
  ded_rounds_announce_stop(node); /* we will not come to the round we announced */
  st->run_seen = false; /* a peer in step answered (OFFER, PENDING) */
  st->reload_in_step = !node->rounds.diverged && !node->rounds.astray && !node->rounds.yielding &&
                       node->rounds.stale <= node->rounds.next;
  /* Out of step, our own snapshot comes after the reload: whoever waits
   * for it would wait for us, while we may wait for them. */
  if (!st->reload_in_step) ded_xfer_askers_none(node);
  st->min_round = min_round;
  st->tries = 0;
  state_begin_asking(node, now_ns);
  ded_xfer_tick(node, now_ns);
  return 0;
}

int ded_xfer_found_set(ded_node *node, ded_snapshot *snap, uint64_t now_ns) {
  ded_xfer *st = &node->xfer;
  if (snap->len > DED_STATE_BYTES_MAX || (!snap->bytes && snap->len) || node->rounds.next != 0 ||
      st->have_found || node->s.no_rounds) {
    ded_mem_free(node->mem, snap->bytes);
    snap->bytes = NULL;
    return DED_ERR_INVALID_ARG;
  }
  st->found = *snap;
  st->found.round = 0;
  st->found.digest = ded_digest64(snap->bytes, snap->len);
  snap->bytes = NULL;
  memcpy(st->found_origin, node->ident.id, DED_ID_BYTES);
  st->have_found = true;
  st->found_used_ns = now_ns;
  return 0;
}

int ded_xfer_found(ded_node *node, const uint8_t *cands, unsigned n, uint64_t now_ns) {
  if (node->leaving) return DED_ERR_CLOSING;
  ded_xfer *st = &node->xfer;
  if (!node->cb.state_done || n > DED_ROUND_MEMBERS_MAX || !st->have_found ||
      memcmp(st->found_origin, node->ident.id, DED_ID_BYTES) != 0 ||
      st->phase == DED_XFER_ASKING || st->phase == DED_XFER_FETCHING)
    return DED_ERR_INVALID_ARG;
  /* Every contributor (all may hold the candidate's state), and this job
   * after them if it came late; the candidates are those before it. */
  unsigned k = 0;
  while (k < n && !id_is_me(node, cands + (size_t)k * DED_ID_BYTES)) k++;
  unsigned ncands = k < n ? n : n + 1;
  uint8_t(*v)[DED_ID_BYTES] = ded_mem_malloc(node->mem, (size_t)ncands * DED_ID_BYTES);
  if (!v) return DED_ERR_NOMEM;
  if (n) memcpy(v, cands, (size_t)n * DED_ID_BYTES);
  if (k == n) memcpy(v[n], node->ident.id, DED_ID_BYTES);
  ded_mem_free(node->mem, st->cands);
  st->cands = v;
  st->ncands = ncands;
  st->self_at = k;
  st->cand = 0;
  st->found_gone_ns = 0;
  st->found_asked = true; /* from now on the state is kept a minute past its last use */
  st->found_used_ns = now_ns;
  if (k == 0) { /* the first contributor: ours is the run's initial state */
    st->phase = DED_XFER_FINISHED;
    node->cb.state_done(node->user, 0, NULL);
    return 0;
  }
  st->founding = true;
  st->reload = false;
  st->min_round = 0;
  st->tries = 0;
  state_begin_asking(node, now_ns);
  st->found_deadline_ns = st->deadline_ns;
  ded_xfer_tick(node, now_ns);
  return 0;
}

void ded_xfer_free(ded_node *node) {
  ded_xfer *st = &node->xfer;
  ded_xfer_snap_drop(node);
  ded_xfer_found_drop(node);
  ded_mem_free(node->mem, st->cands);
  ded_mem_free(node->mem, st->askers);
  for (unsigned i = 0; i < st->ndonors; i++) ded_mem_free(node->mem, st->donors[i].lin);
  ded_mem_free(node->mem, st->lin);
  ded_mem_free(node->mem, st->buf);
  ded_mem_free(node->mem, st->chunk);
}

bool ded_xfer_busy(const ded_node *node) {
  return node->xfer.phase == DED_XFER_ASKING || node->xfer.phase == DED_XFER_FETCHING;
}

/* ---- for state/ded_keep.c ---- */

bool ded_xfer_ask_peer(ded_node *node, ded_peer *p) { return state_ask_peer(node, p); }

void ded_xfer_begin(ded_node *node, uint64_t now_ns) { state_begin_asking(node, now_ns); }

void ded_xfer_done(ded_node *node, int status, ded_snapshot *snap) {
  state_done(node, status, snap);
}
