#include "ded_round.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../avg/ded_partition.h"
#include "../avg/ded_reduce.h"
#include "../core/ded_assert.h"
#include "../core/ded_err.h"
#include "../ded_node_int.h"
#include "ded_round_int.h"


/* ------------------------------------------------------------------ */
/* the round's memory                                                   */
/* ------------------------------------------------------------------ */

/* The attempt's data plane sends through the round: to a peer that is
 * gone or not connected, nothing (a member that is gone cannot use it;
 * our round goes on). */
typedef struct round_io {
  ded_node *node;
  ded_round *r;
} round_io;

static int round_send(void *ctx, const uint8_t id[DED_ID_BYTES], uint8_t type, uint64_t off,
                      uint8_t codec, const uint8_t *elems, size_t len, bool user) {
  ded_node *node = ((round_io *)ctx)->node;
  ded_round *r = ((round_io *)ctx)->r;
  ded_peer *p = ded_peer_find(node, id);
  if (!p || !p->conn) return 0;
  return ded_conn_send_data(node, ded_peer_data_conn(p), r, type, r->no, r->att.plan.attempt, off,
                            codec, elems, len, user);
}

static uint8_t *round_wire(void *ctx, size_t len) {
  return ded_round_wire(((round_io *)ctx)->node, ((round_io *)ctx)->r, len);
}

static void round_prepare(void *ctx, uint64_t first, uint64_t n) {
  ded_round_compensate_range(((round_io *)ctx)->node, ((round_io *)ctx)->r, first, n);
}

/* The attempt's env; |io| must outlive its use. */
static ded_attempt_env round_env(round_io *io) {
  ded_node *node = io->node;
  ded_round *r = io->r;
  bool user = !r->cin || r->att.codec.kind == DED_CODEC_NONE;
  ded_attempt_env env = {node->mem,
                         &node->cache,
                         r->a.dtype,
                         r->es,
                         user ? (const uint8_t *)r->a.buf : (const uint8_t *)r->cin,
                         user,
                         r->res,
                         node->now_ns,
                         round_send,
                         round_wire,
                         round_prepare,
                         io};
  return env;
}

/* Whether |plan| lists |id| (ded_intents_pred). */
static bool plan_lists(void *ctx, const uint8_t id[DED_ID_BYTES]) {
  const ded_msg_commit *plan = ctx;
  for (unsigned m = 0; m < plan->k; m++)
    if (memcmp(plan->members[m].id, id, DED_ID_BYTES) == 0) return true;
  return false;
}

ded_peer *ded_round_member_peer(ded_node *node, const ded_round *r, unsigned m) {
  return ded_peer_find(node, r->att.plan.members[m].id);
}

/* ------------------------------------------------------------------ */
/* an attempt: -> RUNNING or FETCHING                                   */
/* ------------------------------------------------------------------ */

/* Takes |plan| as the round's current attempt. Frames of other attempts
 * still queued are dropped; the caller's buffer is untouched. */
static int round_adopt(ded_node *node, ded_round *r, const ded_msg_commit *plan, uint32_t view,
                       uint64_t now_ns) {
  ded_conns_detach(node, r, false);
  ded_round_drop_attempt(node, r);
  ded_round_fix(node, r, plan->count); /* checked: round_wrong_signature */
  int rv = ded_attempt_layout(&r->att, node->mem, plan, node->ident.id);
  if (rv) return rv;
  r->att_state = ROUND_ATT_LIVE;
  r->acc_view = view;
  r->started_ns = now_ns;
  r->est_ns = ded_plan_estimate_ns(node, plan);
  r->wait_ns = now_ns + ded_timing_progress_wait(&node->timing, r->view, r->est_ns);
  for (unsigned i = 0; i < plan->k; i++) /* it is in */
    ded_intents_done(&node->intents, plan->members[i].id, plan->round);
  ded_intents_spent(&node->intents, plan->round, plan_lists, (void *)plan); /* the others missed it */
  if (!r->res) r->res = ded_bufcache_get(&node->cache, ded_round_bytes(r));
  if (!r->res) return DED_ERR_NOMEM;
  int rv2 = ded_lineage_set(&node->lin, r->no, plan);
  if (rv2) return rv2;
  /* A next round that joined on another attempt's membership joins again. */
  ded_round *nx = ded_round_find(node, r->no + 1);
  if (nx && (nx->state == ROUND_JOINED || nx->state == ROUND_JOINING) && !nx->genesis &&
      nx->lin_attempt != plan->attempt && !ded_round_holds(nx)) {
    nx->state = ROUND_WAIT_PREV;
    ded_round_try_join(node, nx, now_ns);
  }
  return 0;
}

static void round_take_frame(ded_node *node, ded_round *r, ded_peer *from, ded_conn *via,
                             uint8_t type, const uint8_t *payload, size_t len, uint64_t now_ns);

/* Keeps a frame of an attempt whose commit has not reached us yet (it
 * overtook it), within the round's early budget; false if over it. */
static bool round_keep_early(ded_node *node, ded_round *r, const uint8_t from[DED_ID_BYTES],
                             uint8_t type, const uint8_t *payload, size_t len) {
  size_t limit = DED_EARLY_BYTES_MAX(ded_round_bytes(r));
  early_frame *e = NULL;
  if (r->early_bytes + len <= limit) e = ded_mem_malloc(node->mem, sizeof *e + len);
  if (!e) return false;
  e->next = NULL;
  e->type = type;
  memcpy(e->from, from, DED_ID_BYTES);
  e->len = len;
  memcpy(e->payload, payload, len);
  if (r->early_tail)
    r->early_tail->next = e;
  else
    r->early_head = e;
  r->early_tail = e;
  r->early_bytes += len;
  return true;
}

bool ded_round_keep_early_fetch(ded_node *node, ded_round *r, const uint8_t from[DED_ID_BYTES],
                                const ded_msg_fetch *f) {
  if (ded_round_over(r) || (ded_round_holds(r) && f->attempt <= r->att.plan.attempt)) return false;
  uint8_t payload[DED_FETCH_FRAME_BYTES - DED_FRAME_HDR_BYTES];
  ded_wr w = ded_wr_init(payload, sizeof payload);
  ded_wr_u64(&w, f->round);
  ded_wr_u64(&w, f->attempt);
  ded_wr_u16(&w, f->shard);
  DED_ASSERT(!w.err && w.pos == sizeof payload);
  return round_keep_early(node, r, from, DED_MSG_FETCH, payload, sizeof payload);
}

/* Replays the frames of |r|'s current attempt that overtook its commit
 * (data, results, and fetches of shards we reduce or hold) and drops those
 * of attempts that are now moot. */
static void round_replay_early(ded_node *node, ded_round *r, uint64_t now_ns) {
  early_frame *e = r->early_head;
  r->early_head = r->early_tail = NULL;
  r->early_bytes = 0;
  while (e) {
    early_frame *next = e->next;
    ded_peer *from = ded_peer_find(node, e->from);
    ded_rd rd = ded_rd_init(e->payload + 8, 8);
    uint64_t attempt = ded_rd_u64(&rd);
    if (attempt > r->att.plan.attempt) {
      e->next = NULL; /* a later attempt still: keep it */
      if (r->early_tail)
        r->early_tail->next = e;
      else
        r->early_head = e;
      r->early_tail = e;
      r->early_bytes += e->len;
    } else {
      ded_msg_fetch f;
      if (!from || ded_round_over(r) || attempt != r->att.plan.attempt) {
        /* moot */
      } else if (e->type != DED_MSG_FETCH) {
        round_take_frame(node, r, from, NULL, e->type, e->payload, e->len, now_ns);
      } else if (ded_msg_fetch_decode(e->payload, e->len, &f) == 0 && f.shard < r->att.plan.k &&
                 from->conn) {
        ded_round_serve_attempt(node, r, f.shard, from->id);
      }
      ded_mem_free(node->mem, e);
    }
    e = next;
  }
}

/* Sets up the reduce-scatter and all-gather of an attempt we are part
 * of: -> RUNNING. */
static int round_start_reduce(ded_node *node, ded_round *r, uint64_t now_ns) {
  const ded_msg_commit *cm = &r->att.plan;
  bool aux = cm->members[r->att.me].flags & DED_MEMBER_F_AUX;
  round_io io = {node, r};
  ded_attempt_env env = round_env(&io);
  int rv = ded_attempt_start(&r->att, &env);
  if (rv) return rv;
  r->state = ROUND_RUNNING;
  /* Reduce-scatter: our vector, cut by shard and chunk, to each reducer
   * (an aux member brings none). A member with an empty shard (a client)
   * is not ours to reach: it gets its result from the reducers. With a
   * codec, the chunks go as they are encoded (ded_round_encode_step), the
   * first on the next pass of the driver's loop, after what is queued now
   * (a coordinator's COMMIT) went out. */
  for (unsigned m = 0; m < cm->k; m++) {
    if (m == r->att.me || ded_attempt_shard_len(&r->att, m) == 0) continue;
    ded_peer *p = ded_round_member_peer(node, r, m);
    if (!p || !p->conn) {
      ded_round_failover(node, r, "a member of the attempt is not connected", now_ns);
      return 0;
    }
    if (aux) continue;
    rv = ded_attempt_send_contrib(&r->att, &env, m);
    if (rv) return rv;
  }
  rv = ded_attempt_reduce_own(&r->att, &env);
  if (rv) return rv;
  round_replay_early(node, r, now_ns);
  ded_round_check_complete(node, r, now_ns);
  return 0;
}

bool ded_round_encoding(const ded_round *r) {
  return r->state == ROUND_RUNNING && r->att_state == ROUND_ATT_LIVE &&
         ded_attempt_encoding(&r->att);
}

void ded_round_encode_step(ded_node *node, ded_round *r, uint64_t budget, uint64_t now_ns) {
  if (!r->cin) { /* the first slice: our contribution with its error feedback */
    int rv = ded_round_compensate(node, r);
    if (rv) {
      ded_round_fail(node, r, rv);
      return;
    }
  }
  round_io io = {node, r};
  ded_attempt_env env = round_env(&io);
  int rv = ded_attempt_encode(&r->att, &env, budget);
  if (rv) {
    ded_round_fail(node, r, rv);
    return;
  }
  ded_round_check_complete(node, r, now_ns);
}

/* Asks the holders for every shard we lack (those we are still connecting
 * to once the connection is up: advance calls again): -> FETCHING. */
int ded_round_fetch_missing(ded_node *node, ded_round *r, uint64_t now_ns) {
  ded_attempt *a = &r->att;
  r->state = ROUND_FETCHING;
  if (!a->fetch_sent) a->fetch_sent = ded_mem_calloc(node->mem, ((size_t)a->plan.k + 7) / 8, 1);
  if (!a->fetch_sent) return DED_ERR_NOMEM;
  for (unsigned s = 0; s < a->plan.k; s++) {
    if (ded_attempt_shard_done(a, s) || ded_bit_get(a->fetch_sent, s)) continue;
    const uint8_t *hid = a->plan.members[a->holders[s]].id;
    if (id_is_me(node, hid)) {
      ded_round_failover(node, r, "named holder of a shard this peer lacks", now_ns);
      return 0;
    }
    ded_peer *p = ded_peer_find(node, hid);
    if (!p || p->left || p->evicted) {
      ded_round_failover(node, r, "the holder of a shard is gone", now_ns);
      return 0;
    }
    if (!p->conn) {
      ded_peer_maybe_connect(node, p, now_ns);
      continue;
    }
    ded_bit_set(a->fetch_sent, s);
    uint8_t frame[DED_FETCH_FRAME_BYTES];
    ded_wr w = ded_wr_init(frame, sizeof frame);
    ded_msg_fetch f = {r->no, a->plan.attempt, (uint16_t)s};
    ded_msg_fetch_encode(&w, &f);
    int rv = ded_conn_send_ctrl(node, p->conn, frame, w.pos);
    if (rv) return rv;
  }
  round_replay_early(node, r, now_ns);
  ded_round_check_complete(node, r, now_ns);
  return 0;
}

/* A decision |r| cannot take: a buffer of another type (this job runs
 * another model: the round fails), or another stretch of the gradient
 * stream, or more of it than this job holds (it came late to a round cut
 * at another job's call boundary, or its stream differs: it is out of
 * step, and reloads the run's state at its next step). Reports the round
 * (true). */
static bool round_wrong_signature(ded_node *node, ded_round *r, const ded_msg_commit *cm) {
  bool len_ok = r->fixed ? cm->count == r->a.count : cm->count <= r->a.count;
  bool step_ok = !r->a.step || !cm->step || r->a.step == cm->step;
  if (cm->dtype == r->a.dtype && cm->pos == r->pos && len_ok && step_ok) return false;
  ded_lineage_set(&node->lin, r->no, cm);
  if (cm->dtype != r->a.dtype || !step_ok) {
    if (cm->dtype != r->a.dtype)
      node_log(node, DED_LOG_ERROR,
               "round %llu: this job reduces elements of type %u but the swarm's round has type "
               "%u; check that every job runs the same model",
               (unsigned long long)r->no, r->a.dtype, cm->dtype);
    else
      node_log(node, DED_LOG_ERROR,
               "round %llu: this job's training step all-reduces %llu elements but the swarm's "
               "steps have %llu; check that every job runs the same model",
               (unsigned long long)r->no, (unsigned long long)r->a.step,
               (unsigned long long)cm->step);
    ded_round_report(node, r, DED_ERR_SIZE_MISMATCH, false, false);
    return true;
  }
  if (cm->pos != r->pos)
    node_log(node, DED_LOG_WARN,
             "round %llu: the swarm averages elements %llu.. of the gradient stream, this job is at "
             "%llu: out of step (a different model, or a different set of routed all-reduces, if "
             "it happens again after a reload)",
             (unsigned long long)r->no, (unsigned long long)cm->pos, (unsigned long long)r->pos);
  else
    node_log(node, DED_LOG_WARN,
             "round %llu: the swarm averages %llu elements from %llu of the gradient stream, this "
             "job holds %llu there (it came late to a round cut at another job's all-reduce "
             "boundary): out of step",
             (unsigned long long)r->no, (unsigned long long)cm->count, (unsigned long long)cm->pos,
             (unsigned long long)r->a.count);
  r->behind = DED_MAX(r->no + 1, node->rounds.stale);
  ded_round_report(node, r, 0, true, true);
  return true;
}

/* A COMMIT (new attempt) for |r|. DED_ERR_PROTO if it lies about us. */
/* A member learns the spread of a round's JOINs too (the coordinator
 * learns it from the rounds it decides with everyone in, ded_coord.c;
 * each peer coordinates one round in n, so in a swarm of dozens it would
 * hardly ever learn, and its wait for a member still computing stays at
 * the floor): from our JOIN to the COMMIT of view 0, when the attempt has
 * the previous round's members, no more and no fewer (everyone in, none
 * held for). Early joiners see most of the spread, late ones little;
 * what a coordinator waits for is a multiple of the mean. */
static void round_learn_spread(ded_node *node, const ded_round *r, const ded_msg_commit *cm,
                               uint64_t now_ns) {
  if (r->genesis || r->view != 0 || r->no == 0 || !r->joined_ns || now_ns < r->joined_ns) return;
  ded_lin_entry *prev = ded_lineage_get(&node->lin, r->no - 1);
  if (!prev || !prev->ids || prev->n != cm->k) return;
  for (unsigned i = 0; i < prev->n; i++)
    if (ded_plan_index(cm, prev->ids[i]) == cm->k) return;
  ded_timing_learn_spread(&node->timing, now_ns - r->joined_ns);
}

static int round_take_commit(ded_node *node, ded_round *r, const ded_msg_commit *cm,
                             uint64_t now_ns) {
  if (round_wrong_signature(node, r, cm)) return 0;
  round_learn_spread(node, r, cm, now_ns);
  int rv = round_adopt(node, r, cm, (uint32_t)(cm->attempt >> 32), now_ns);
  if (rv) return rv;
  if (r->att.me < cm->k && cm->members[r->att.me].n_local != r->a.n_local) return DED_ERR_PROTO;
  node_log(node, DED_LOG_DEBUG, "round %llu: attempt %llx, %u members, I am %u",
           (unsigned long long)r->no, (unsigned long long)cm->attempt, cm->k, r->att.me);
  if (r->att.me == cm->k) {
    /* Not listed though our buffer matches: fetch from the reducers. */
    r->att.holders = ded_mem_malloc(node->mem, (size_t)cm->k * sizeof *r->att.holders);
    if (!r->att.holders) return DED_ERR_NOMEM;
    for (unsigned s = 0; s < cm->k; s++) r->att.holders[s] = (uint16_t)s;
    return ded_round_fetch_missing(node, r, now_ns);
  }
  /* Alone (k = 1), the result is computed all the same, for members that
   * come late, but our own buffer stays as it is. */
  return round_start_reduce(node, r, now_ns);
}


/* A DECIDE for |r|: the attempt in |d| stands; fetch what we lack. */
static int round_take_decide(ded_node *node, ded_round *r, const ded_msg_decide *d,
                             uint64_t now_ns) {
  if (round_wrong_signature(node, r, &d->plan)) return 0;
  if (!ded_round_holds(r) || r->att.plan.attempt != d->plan.attempt) {
    int rv = round_adopt(node, r, &d->plan, d->view, now_ns);
    if (rv) return rv;
  } else {
    ded_conns_detach(node, r, false);
    r->started_ns = now_ns;
    r->wait_ns = now_ns + ded_timing_progress_wait(&node->timing, r->view, r->est_ns);
    r->acc_view = d->view; /* accepted again, in this view */
    r->accepted = false;
  }
  if (d->flags & DED_DECIDE_F_CHOSEN) ded_round_set_chosen(r, d->plan.attempt, NULL, NULL);
  r->att_state = ROUND_ATT_LIVE;
  ded_mem_free(node->mem, r->att.holders);
  ded_mem_free(node->mem, r->att.fetch_sent);
  r->att.fetch_sent = NULL;
  r->att.holders = ded_mem_malloc(node->mem, (size_t)d->plan.k * sizeof *r->att.holders);
  if (!r->att.holders) return DED_ERR_NOMEM;
  memcpy(r->att.holders, d->holders, (size_t)d->plan.k * sizeof *r->att.holders);
  if (r->att.me == d->plan.k) ded_round_announce(node, r, now_ns);
  return ded_round_fetch_missing(node, r, now_ns);
}

/* ------------------------------------------------------------------ */
/* events                                                               */
/* ------------------------------------------------------------------ */

/* advance: a lineage, a connection or a peer may be there now. */
static void round_on_advance(ded_node *node, ded_round *r, uint64_t now_ns) {
  switch (r->state) {
  case ROUND_WAIT_PREV:
  case ROUND_JOINING:
    ded_round_try_join(node, r, now_ns);
    if (r->state != ROUND_FETCHING) break;
    /* Our own coordinator side decided at once: fetch as below. */
    /* fall through */
  case ROUND_FETCHING:
    if (r->att_state == ROUND_ATT_LIVE) {
      int rv = ded_round_fetch_missing(node, r, now_ns);
      if (rv) ded_round_fail(node, r, rv);
    }
    break;
  case ROUND_JOINED:
  case ROUND_RUNNING:
  case ROUND_DONE_WAIT:
  case ROUND_DRAINING:
  case ROUND_DEAD:
    break;
  }
}

void ded_rounds_advance(ded_node *node, uint64_t now_ns) {
  for (unsigned i = 0; i < node->rounds.n; i++) round_on_advance(node, node->rounds.v[i], now_ns);
}

/* commit, decide: only from the coordinator we reported to, for the view
 * we reported to; anything else about a round we are in is moot (an
 * older view, a coordinator we left behind). */
static bool round_awaits(const ded_round *r, const uint8_t from[DED_ID_BYTES], uint32_t view) {
  return r->view == view && memcmp(r->coord, from, DED_ID_BYTES) == 0;
}

int ded_round_on_commit(ded_node *node, ded_round *r, const uint8_t from[DED_ID_BYTES],
                        const ded_msg_commit *cm, uint64_t now_ns) {
  switch (r->state) {
  case ROUND_JOINED: {
    if (!round_awaits(r, from, (uint32_t)(cm->attempt >> 32))) return 0;
    int rv = round_take_commit(node, r, cm, now_ns);
    if (rv) ded_round_fail(node, r, rv);
    return rv == DED_ERR_PROTO ? rv : 1;
  }
  case ROUND_WAIT_PREV:
  case ROUND_JOINING:
  case ROUND_RUNNING:
  case ROUND_FETCHING:
  case ROUND_DONE_WAIT:
  case ROUND_DRAINING:
  case ROUND_DEAD:
    break;
  }
  return 0;
}

int ded_round_on_decide(ded_node *node, ded_round *r, const uint8_t from[DED_ID_BYTES],
                        const ded_msg_decide *d, uint64_t now_ns) {
  switch (r->state) {
  case ROUND_JOINED: {
    if (!round_awaits(r, from, d->view)) return 0;
    int rv = round_take_decide(node, r, d, now_ns);
    if (rv) ded_round_fail(node, r, rv);
    return rv == DED_ERR_PROTO ? rv : 1;
  }
  case ROUND_WAIT_PREV:
  case ROUND_JOINING:
  case ROUND_RUNNING:
  case ROUND_FETCHING:
  case ROUND_DONE_WAIT:
  case ROUND_DRAINING:
  case ROUND_DEAD:
    break;
  }
  return 0;
}

/* data: now (the attempt it belongs to runs), later (it overtook its
 * attempt's commit), or never (a moot attempt, a finished round). A
 * violation drops the connection it came on. */
static void round_take_frame(ded_node *node, ded_round *r, ded_peer *from, ded_conn *via,
                             uint8_t type, const uint8_t *payload, size_t len, uint64_t now_ns) {
  if (!via) via = from->conn;
  ded_msg_data d;
  int rv = ded_msg_data_decode(payload, len, &d);
  if (rv) {
    if (via) ded_conn_protocol_error(node, via, rv, ded_msg_name(type));
    return;
  }
  switch (r->state) {
  case ROUND_DONE_WAIT:
  case ROUND_DRAINING:
  case ROUND_DEAD:
    return; /* moot */
  case ROUND_RUNNING:
  case ROUND_FETCHING:
    if (ded_round_holds(r) && d.attempt == r->att.plan.attempt) {
      if (r->att_state == ROUND_ATT_FROZEN) return;
      round_io io = {node, r};
      ded_attempt_env env = round_env(&io);
      rv = ded_attempt_take(&r->att, &env, from->id, type, &d, r->state == ROUND_RUNNING,
                            r->state == ROUND_FETCHING);
      if (rv == DED_ERR_NOMEM) {
        ded_round_fail(node, r, rv);
        return;
      }
      if (rv) {
        if (via) ded_conn_protocol_error(node, via, rv, ded_msg_name(type));
        return;
      }
      r->wait_ns = now_ns + ded_timing_progress_wait(&node->timing, r->view, r->est_ns);
      ded_round_check_complete(node, r, now_ns);
      return;
    }
    /* Another attempt's: */
    /* fall through */
  case ROUND_WAIT_PREV:
  case ROUND_JOINING:
  case ROUND_JOINED:
    break;
  }
  if (ded_round_holds(r) && d.attempt <= r->att.plan.attempt) return; /* moot */
  /* A later attempt whose commit is still on its way: keep it. */
  if (!round_keep_early(node, r, from->id, type, payload, len) && via)
    ded_conn_protocol_error(node, via, DED_ERR_LIMIT, "early data");
}

void ded_round_on_data(ded_node *node, ded_round *r, ded_peer *from, ded_conn *via, uint8_t type,
                       const uint8_t *payload, size_t len, uint64_t now_ns) {
  round_take_frame(node, r, from, via, type, payload, len, now_ns);
}

void ded_round_on_have(ded_node *node, ded_round *r, const uint8_t from[DED_ID_BYTES],
                       const char *from_sid, const ded_msg_have *h, uint64_t now_ns) {
  switch (r->state) {
  case ROUND_DRAINING:
  case ROUND_DEAD:
    return;
  case ROUND_WAIT_PREV:
  case ROUND_JOINING:
  case ROUND_JOINED:
  case ROUND_RUNNING:
  case ROUND_FETCHING:
  case ROUND_DONE_WAIT:
    break;
  }
  if (h->flags & DED_HAVE_F_DONE) {
    /* Its vote too, in the view it answers (with the bytes it holds now,
     * should it have fetched them again since it voted in that view). */
    ded_votes_set(&r->votes, node->mem, from, h->attempt, h->view, h->digest);
    if (r->chosen && (r->chosen != h->attempt ||
                      (r->chosen_digested &&
                       memcmp(r->chosen_digest, h->digest, DED_RESULT_DIGEST_BYTES) != 0))) {
      /* Two peers contradict each other; we cannot tell which one lies
       * (a quorum of votes can). */
      node_log(node, DED_LOG_ERROR,
               "round %llu: %s says attempt %llx completed%s, another said %llx",
               (unsigned long long)r->no, from_sid, (unsigned long long)h->attempt,
               r->chosen == h->attempt ? " with other bytes" : "", (unsigned long long)r->chosen);
    } else {
      ded_round_set_chosen(r, h->attempt, h->digest, from);
    }
  } else {
    ded_votes_add(&r->votes, node->mem, from, h->attempt, h->view, h->digest);
  }
  if (ded_round_holds(r) && r->att.plan.attempt == h->attempt) ded_round_check_complete(node, r, now_ns);
}

/* peer down: a round that still needs something from |p| fails over. A
 * member that already gave us everything may go: it finished the round
 * first. */
static void round_on_peer_down(ded_node *node, ded_round *r, const uint8_t id[DED_ID_BYTES],
                               const char *sid, bool left, uint64_t now_ns) {
  switch (r->state) {
  case ROUND_JOINING:
  case ROUND_JOINED:
    if (memcmp(r->coord, id, DED_ID_BYTES) == 0)
      ded_round_failover(node, r, left ? "the coordinator left" : "the coordinator was lost", now_ns);
    break;
  case ROUND_RUNNING:
  case ROUND_FETCHING:
    if (r->att_state != ROUND_ATT_LIVE) break;
    for (unsigned m = 0; m < r->att.plan.k; m++)
      if (m != r->att.me && memcmp(r->att.plan.members[m].id, id, DED_ID_BYTES) == 0) {
        if (ded_attempt_needs(&r->att, m, r->state == ROUND_FETCHING)) {
          char why[64];
          snprintf(why, sizeof why, "member %s %s mid-round", sid, left ? "left" : "was lost");
          ded_round_failover(node, r, why, now_ns);
        }
        break;
      }
    break;
  case ROUND_WAIT_PREV:
  case ROUND_DONE_WAIT:
  case ROUND_DRAINING:
  case ROUND_DEAD:
    break;
  }
}

void ded_rounds_on_peer_down(ded_node *node, const uint8_t id[DED_ID_BYTES], const char *sid,
                             bool left, uint64_t now_ns) {
  for (unsigned i = 0; i < node->rounds.n; i++)
    round_on_peer_down(node, node->rounds.v[i], id, sid, left, now_ns);
}

/* probe: the round moved to a new view; report there. |from| NULL: our
 * own coordinator side. */
static void round_on_probe(ded_node *node, ded_round *r, ded_peer *from, const ded_msg_probe *m,
                           uint64_t now_ns) {
  switch (r->state) {
  case ROUND_WAIT_PREV:
    ded_lineage_set_view_hint(&node->lin, m->round, m->view);
    return;
  case ROUND_JOINING:
  case ROUND_JOINED:
  case ROUND_RUNNING:
  case ROUND_FETCHING:
  case ROUND_DONE_WAIT:
    break;
  case ROUND_DRAINING:
  case ROUND_DEAD:
    return;
  }
  if (m->view <= r->view && !(m->view == r->view && r->state == ROUND_JOINING)) return;
  if (r->genesis || r->nlin == 0) {
    if (!ded_round_holds(r)) return;
    ded_round_failover(node, r, "probed", now_ns); /* sets the lineage up */
    if (ded_round_over(r) || r->view >= m->view) return;
  }
  ded_round_freeze(node, r);
  r->view = m->view;
  memcpy(r->coord, from ? from->id : node->ident.id, DED_ID_BYTES);
  node_log(node, DED_LOG_DEBUG, "round %llu: probed into view %u", (unsigned long long)r->no,
           m->view);
  ded_round_send_join(node, r, now_ns);
}

void ded_round_probe(ded_node *node, ded_peer *from, const ded_msg_probe *m, uint64_t now_ns) {
  if (node->s.no_rounds) return;
  ded_round *r = ded_round_find(node, m->round);
  if (r && !ded_round_over(r))
    round_on_probe(node, r, from, m, now_ns);
  else
    ded_round_probed_finished(node, r, from, m);
  if (!r && from) ded_abstain_on_waited(node, m->round, true, now_ns);
}

/* stale: asked of the coordinator we joined, or of a holder we fetch from. */
void ded_round_on_stale(ded_node *node, ded_round *r, const uint8_t from[DED_ID_BYTES],
                        const ded_msg_stale *m) {
  switch (r->state) {
  case ROUND_JOINED:
    if (memcmp(r->coord, from, DED_ID_BYTES) != 0) return;
    break;
  case ROUND_FETCHING:
    break;
  case ROUND_WAIT_PREV:
  case ROUND_JOINING:
  case ROUND_RUNNING:
  case ROUND_DONE_WAIT:
  case ROUND_DRAINING:
  case ROUND_DEAD:
    return;
  }
  node_log(node, DED_LOG_WARN,
           "round %llu: the swarm is already at round %llu and no longer has this one; this job is "
           "out of step and keeps its own values",
           (unsigned long long)m->round, (unsigned long long)m->next_round);
  if (r->genesis) ded_lineage_lose(&node->lin);
  r->behind = m->next_round;
  node->rounds.stale = DED_MAX(node->rounds.stale, m->next_round);
  ded_round_report(node, r, 0, true, true);
}

/* redirect: in a genesis JOINED, from the coordinator we asked. The new
 * coordinator may be someone we are not connected to yet: the join then
 * waits in JOINING for its connection. */
int ded_round_on_redirect(ded_node *node, ded_round *r, const uint8_t from[DED_ID_BYTES],
                          const ded_msg_redirect *m, uint64_t now_ns) {
  switch (r->state) {
  case ROUND_JOINED:
    if (!r->genesis || memcmp(r->coord, from, DED_ID_BYTES) != 0) return 0; /* moot */
    if (memcmp(m->id, from, DED_ID_BYTES) >= 0) return DED_ERR_PROTO; /* names no smaller id */
    memcpy(r->coord, m->id, DED_ID_BYTES);
    ded_round_send_join(node, r, now_ns);
    return 0;
  case ROUND_WAIT_PREV:
  case ROUND_JOINING:
  case ROUND_RUNNING:
  case ROUND_FETCHING:
  case ROUND_DONE_WAIT:
  case ROUND_DRAINING:
  case ROUND_DEAD:
    break;
  }
  return 0; /* moot: we moved on */
}

/* What a round at its bound could still count on, for the log: its
 * acceptors (the members of the round before's result, where held here)
 * that still count (not evicted, left or stepped down), how many of those
 * this job can reach (itself, and peers with a connection ready), whether
 * that is a quorum, and the ones it cannot reach with how long each has
 * been unreachable (a quorum that died late in the bound waits for their
 * evictions, half the bound after each went). */
static void round_bound_why(ded_node *node, const ded_round *r, uint64_t now_ns, char *why,
                            size_t len) {
  ded_lin_entry *prev = r->no > 0 ? ded_lineage_get(&node->lin, r->no - 1) : NULL;
  if (!prev || !prev->ids || !prev->final) {
    snprintf(why, len, "its acceptors are not known here");
    return;
  }
  unsigned counted = 0, reach = 0, shown = 0;
  const uint8_t *primary = NULL;
  bool primary_reached = false;
  char lost[160] = "";
  for (unsigned i = 0; i < prev->n; i++) {
    const uint8_t *id = prev->ids[i];
    if (!ded_abstain_counts(node, r->no, id)) continue;
    bool reached = true;
    if (!id_is_me(node, id)) {
      ded_peer *p = ded_peer_find(node, id);
      reached = !p->lost;
      if (!reached) {
        size_t pos = strlen(lost);
        if (shown++ < 4)
          snprintf(lost + pos, sizeof lost - pos, "%s%s for %llu ms", pos ? ", " : "", p->sid,
                   (unsigned long long)((now_ns - DED_MIN(now_ns, p->lost_ns)) / 1000000u));
        else if (shown == 5)
          snprintf(lost + pos, sizeof lost - pos, ", ...");
      }
    }
    counted++;
    reach += reached;
    if (!primary || memcmp(id, primary, DED_ID_BYTES) < 0) {
      primary = id;
      primary_reached = reached;
    }
  }
  bool quorum = counted > 0 && ded_quorum_of(reach, counted, primary_reached);
  snprintf(why, len, "%s quorum of its acceptors can be reached (%u of the %u still counted)%s%s",
           quorum ? "a" : "no", reach, counted, shown ? "; unreachable: " : "", lost);
}

/* bound: the rendezvous of a first round, then the round's own bound: the
 * call returns, alone and late. True if the round reported. */
static bool round_on_bound(ded_node *node, ded_round *r, uint64_t now_ns) {
  switch (r->state) {
  case ROUND_WAIT_PREV:
    if (!node->lin.have_members && now_ns >= r->submit_ns + node->s.rendezvous_timeout_ns) {
      node_log(node, DED_LOG_ERROR, "only %u of DEDMPI_MIN_PEERS=%u peers arrived",
               ded_peers_genesis_view(node, NULL), node->s.min_peers);
      ded_round_fail(node, r, DED_ERR_RENDEZVOUS);
      return true;
    }
    /* Waiting for the first round's rendezvous has its own bound. */
    if (!node->lin.ever_members) r->bound_ns = now_ns + node->s.round_timeout_ns;
    break;
  case ROUND_JOINING:
  case ROUND_JOINED:
  case ROUND_RUNNING:
  case ROUND_FETCHING:
  case ROUND_DONE_WAIT:
    break;
  case ROUND_DRAINING:
  case ROUND_DEAD:
    return false;
  }
  if (now_ns < r->bound_ns) return false;
  char why[256];
  round_bound_why(node, r, now_ns, why, sizeof why);
  node_log(node, DED_LOG_WARN,
           "round %llu: no result within the bound (%llu ms), in view %u: %s; this job keeps its "
           "own values and is out of step",
           (unsigned long long)r->no, (unsigned long long)(node->s.round_timeout_ns / 1000000u),
           (unsigned)r->view, why);
  ded_round_report(node, r, 0, true, true);
  return true;
}

bool ded_round_attempt_gone(ded_node *node, const ded_round *r) {
  if (!ded_round_holds(r)) return false;
  for (unsigned m = 0; m < r->att.plan.k; m++)
    if (m != r->att.me && !ded_peer_evicted(node, r->att.plan.members[m].id)) return false;
  return true;
}

/* Fetching |r|'s result, which only the attempt's members hold: when
 * every one of them is gone for good it can never come, and when a peer
 * we can talk to completed this round or a later one the run went on
 * without us: out of step now, not at the bound (a late joiner waited
 * its whole bound for the result of two members that had crashed, in the
 * churn soak; round_pick_view does the same on a failover). True if |r|
 * reported. */
static bool round_result_gone(ded_node *node, ded_round *r) {
  if (!ded_round_attempt_gone(node, r)) return false;
  ded_progress prog;
  ded_peer *p = ded_rounds_holder_of(node, r->no, &prog);
  if (!p) return false;
  node_log(node, DED_LOG_WARN, "round %llu: every member that holds its result is gone, and peer "
           "%s completed round %llu: this job is out of step and reloads the run's state",
           (unsigned long long)r->no, p->sid, (unsigned long long)prog.round);
  node->rounds.stale = DED_MAX(node->rounds.stale, prog.round + 1);
  ded_round_out_of_step(node, r);
  return true;
}

/* deadline: the soft wait ran out. Waiting for a decision, fail over
 * (unless our own coordinator side may still decide, or a member of the
 * round before is still finishing it); waiting for progress, fail over,
 * saying whom we waited for. */
static void round_on_deadline(ded_node *node, ded_round *r, uint64_t now_ns) {
  switch (r->state) {
  case ROUND_JOINING:
  case ROUND_JOINED: {
    /* Our own coordinator side decides when it can; past its deadline
     * with no one but us in it, the others went to another coordinator,
     * whose view may have completed the round: on to the next view, as
     * from any silent coordinator, not waiting for the bound
     * (ded_coord_undecided). So too once it gave up (its bound counts
     * from the view's start, ours is moved by our stops: churn soak
     * 486647884 waited 5.4 s for nothing). */
    bool self = id_is_me(node, r->coord);
    ded_coord *own = self ? ded_coord_find(node, r->no) : NULL;
    bool gave_up = own && own->view == r->view && own->state == COORD_GAVE_UP;
    if (own && own->view == r->view && !gave_up &&
        !ded_coord_undecided(node, r->no, r->view, now_ns))
      return;
    /* The coordinator waits for a member still finishing the round
     * before: so do we, a wait longer. */
    uint64_t finish_ns = r->joined_ns + 2 * ded_timing_join_wait(&node->timing, 0);
    if (r->view == 0 && !r->genesis && now_ns < finish_ns &&
        ded_coord_lin_finishing(node, r->no, NULL, now_ns)) {
      /* Not at once when it is done either: its JOIN, then the COMMIT,
       * are on their way. */
      r->wait_ns = finish_ns;
      return;
    }
    ded_round_failover(node, r, gave_up ? "this peer's own view gave up"
                                : self  ? "no one but this peer joined its own view"
                                        : "no decision from the coordinator in time", now_ns);
    return;
  }
  case ROUND_RUNNING:
  case ROUND_FETCHING: {
    if (r->att_state != ROUND_ATT_LIVE) return;
    if (r->state == ROUND_FETCHING && round_result_gone(node, r)) return;
    /* Say whom we were waiting for: the log is where a stall is read
     * (nothing: only for the others' HAVEs). */
    char why[128] = "no progress in time (waiting for";
    unsigned shown = 0;
    for (unsigned m = 0; m < r->att.plan.k; m++) {
      if (m == r->att.me || !ded_attempt_needs(&r->att, m, r->state == ROUND_FETCHING)) continue;
      char sid[9];
      ded_id_short(r->att.plan.members[m].id, sid);
      size_t pos = strlen(why);
      snprintf(why + pos, sizeof why - pos, " %s", shown < 4 ? sid : "...");
      if (++shown > 4) break;
    }
    size_t pos = strlen(why);
    snprintf(why + pos, sizeof why - pos, "%s)", shown ? "" : " nothing but HAVEs");
    ded_round_failover(node, r, why, now_ns);
    return;
  }
  case ROUND_WAIT_PREV:
  case ROUND_DONE_WAIT:
  case ROUND_DRAINING:
  case ROUND_DEAD:
    return;
  }
}

/* A first round we coordinate ourselves, undecided, while a peer with a
 * smaller id now takes part (the rendezvous saw DEDMPI_MIN_PEERS before
 * it saw that peer): that peer is the coordinator every joiner that knows
 * us both picks, and ours would tell a joiner so (REDIRECT). Join it, or
 * two coordinators each wait for a rendezvous the other holds. */
static void round_genesis_retarget(ded_node *node, ded_round *r, uint64_t now_ns) {
  if (!id_is_me(node, r->coord)) return;
  ded_coord *own = ded_coord_find(node, r->no);
  if (own && own->state != COORD_GATHERING) return;
  const uint8_t *min_id;
  ded_peers_genesis_view(node, &min_id);
  if (!min_id || id_is_me(node, min_id)) return;
  char sid[9];
  ded_id_short(min_id, sid);
  node_log(node, DED_LOG_INFO, "round %llu: peer %s, whose id is smaller, takes part now: joining "
           "its rendezvous", (unsigned long long)r->no, sid);
  memcpy(r->coord, min_id, DED_ID_BYTES);
  ded_round_send_join(node, r, now_ns);
}

void ded_rounds_tick(ded_node *node, uint64_t now_ns) {
  for (unsigned i = 0; i < node->rounds.n; i++) {
    ded_round *r = node->rounds.v[i];
    if (ded_round_over(r)) continue;
    if (r->state == ROUND_JOINED && r->genesis && r->view == 0)
      round_genesis_retarget(node, r, now_ns);
    if (r->state == ROUND_WAIT_PREV || r->state == ROUND_JOINING) ded_round_try_join(node, r, now_ns);
    if (ded_round_over(r) || round_on_bound(node, r, now_ns)) continue;
    /* Late, still fetching: the swarm keeps holding the next round. */
    if (r->state == ROUND_FETCHING && ded_round_holds(r) && r->att.me == r->att.plan.k &&
        r->att_state == ROUND_ATT_LIVE)
      ded_round_announce(node, r, now_ns);
    if (r->wait_ns != 0 && now_ns >= r->wait_ns) round_on_deadline(node, r, now_ns);
  }
  ded_rounds_announce_again(node, now_ns);
}

void ded_round_serve_attempt(ded_node *node, ded_round *r, unsigned s, const uint8_t to[DED_ID_BYTES]) {
  round_io io = {node, r};
  ded_attempt_env env = round_env(&io);
  ded_attempt_serve(&r->att, &env, s, to, r->att_state == ROUND_ATT_LIVE && !ded_round_over(r));
}
