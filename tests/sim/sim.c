/*
 * sim.c: the simulated network and the driver side of every node.
 *
 * Events live in a binary heap ordered by (time, sequence), so ties break
 * in insertion order and a seed replays exactly. A connection is a pair of
 * half-links; each half carries segments that depart through the sender's
 * uplink (one at a time, at its rate) and arrive after the link latency
 * plus jitter (through the receiver's downlink, one at a time at its rate,
 * where it has one), never before the previous segment of the same half
 * (TCP order). A node whose uplink is idle and that has output is "pumped":
 * it gives one random-size segment from one of its connections, taken
 * round-robin.
 *
 * Faults. A crash frees the engine (at the end of the current event: a
 * hook may crash the node whose callback it runs in), bumps the slot's
 * generation so that its pump and tick events still queued are ignored,
 * and marks its links dead (no new data, pending connects refused). A
 * frozen node's events are not handled: they are appended, in pop order,
 * to its deferred list (its pumps and ticks are dropped instead), and its
 * thaw event replays the list, then runs its timers and pumps it. Since
 * events pop in (time, sequence) order, the list keeps every half-link's
 * FIFO order, closes included. A reset link drops what its halves hold;
 * the delivery events still queued for them find nothing and do nothing.
 * Random draws for faults are made only when a fault is asked for, so a
 * run without faults draws exactly what it drew before they existed. The
 * fault calls themselves are in sim_faults.c; sim_int.h holds what the
 * two files share.
 */
#include "sim_int.h"

#include "core/ded_assert.h"
#include "core/ded_msg.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIM_IOV_MAX 64

/* ---------------------------------------------------------------- rng */

static uint64_t rng_splitmix(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void sim_rng_seed(sim_rng *r, uint64_t seed) {
  for (int i = 0; i < 4; i++) r->s[i] = rng_splitmix(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t sim_rng_next(sim_rng *r) {
  uint64_t *s = r->s;
  uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return out;
}

uint64_t sim_rng_range(sim_rng *r, uint64_t lo, uint64_t hi) {
  if (hi <= lo) return lo;
  return lo + sim_rng_next(r) % (hi - lo + 1);
}

double sim_rng_unit(sim_rng *r) { return (double)(sim_rng_next(r) >> 11) * 0x1.0p-53; }

bool sim_rng_chance(sim_rng *r, double p) { return sim_rng_unit(r) < p; }

/* ---------------------------------------------------------------- digest */

#define DIGEST_BASIS 0xcbf29ce484222325ull
#define DIGEST_PRIME 0x100000001b3ull

static void dg_bytes(sim *s, const void *p, size_t n) {
  const uint8_t *b = p;
  uint64_t h = s->digest;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * DIGEST_PRIME;
  s->digest = h;
}

/* A number, byte by byte from the least significant: the same on every host. */
static void dg_u64(sim *s, uint64_t x) {
  uint8_t b[8];
  for (int i = 0; i < 8; i++) b[i] = (uint8_t)(x >> (8 * i));
  dg_bytes(s, b, sizeof b);
}

/* One step of the digest: a tag naming what it records, then |n| numbers. */
static void dg_rec(sim *s, const char *what, int n, const uint64_t *v) {
  dg_bytes(s, what, strlen(what));
  for (int i = 0; i < n; i++) dg_u64(s, v[i]);
  if (s->trace) {
    fprintf(s->trace, "%014" PRIu64 " %-8s", s->now, what);
    for (int i = 0; i < n; i++) fprintf(s->trace, " %" PRIu64, v[i]);
  }
}

static void dg_end(sim *s) {
  if (s->trace) fprintf(s->trace, " -> %016" PRIx64 "\n", s->digest);
}

uint64_t sim_digest(const sim *s) { return s->digest; }

void sim_digest_add(sim *s, const void *p, size_t len) {
  uint64_t v = len;
  dg_rec(s, "scenario", 1, &v);
  dg_bytes(s, p, len);
  dg_end(s);
}

void sim_trace(sim *s, FILE *f) { s->trace = f; }

/* ---------------------------------------------------------------- heap */

static bool ev_less(const event *a, const event *b) {
  return a->at < b->at || (a->at == b->at && a->seq < b->seq);
}

/* Puts |e| in the heap as it is, its seq already given. */
static void heap_insert(sim *s, event e) {
  if (s->nheap == s->heap_cap) {
    s->heap_cap = s->heap_cap ? s->heap_cap * 2 : 1024;
    s->heap = realloc(s->heap, s->heap_cap * sizeof *s->heap);
    if (!s->heap) abort();
  }
  size_t i = s->nheap++;
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!ev_less(&e, &s->heap[parent])) break;
    s->heap[i] = s->heap[parent];
    i = parent;
  }
  s->heap[i] = e;
}

void sim_heap_push(sim *s, event e) {
  e.seq = s->seq++;
  e.chained = 0;
  heap_insert(s, e);
}

static event heap_pop(sim *s) {
  event top = s->heap[0], last = s->heap[--s->nheap];
  size_t i = 0;
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    const event *best = &last;
    if (l < s->nheap && ev_less(&s->heap[l], best)) {
      m = l;
      best = &s->heap[l];
    }
    if (r < s->nheap && ev_less(&s->heap[r], best)) m = r;
    if (m == i) break;
    s->heap[i] = s->heap[m];
    i = m;
  }
  if (s->nheap) s->heap[i] = last;
  return top;
}

void sim_push(sim *s, uint64_t at, int type, int node, int lk, int side, uint64_t tag) {
  uint32_t gen = node >= 0 && node < s->n ? s->nodes[node].gen : 0;
  event e = {at, 0, type, node, lk, side, tag, gen, 0};
  sim_heap_push(s, e);
}

/*
 * A delivery on half |side| of link |lk|. A half's deliveries mostly come
 * in time order (each arrives after the one before it), and millions may
 * be in flight towards a slow receiver: only the first of such a run is
 * in the heap, the rest wait in the half's queue and the pop of one puts
 * the next in (heap_pop_next). Each keeps the seq it was given here, so
 * the order events are handled in is exactly that of one heap of them
 * all; one out of order (a reset's EOF) goes in the heap itself.
 */
static void sim_push_deliver(sim *s, uint64_t at, int node, int lk, int side, uint64_t tag) {
  half *h = &s->links[lk].dir[side];
  uint32_t gen = node >= 0 && node < s->n ? s->nodes[node].gen : 0;
  event e = {at, s->seq++, EV_DELIVER, node, lk, side, tag, gen, 1};
  if (!h->ev_in_heap) {
    h->ev_in_heap = true;
  } else if (at >= h->ev_last_at) { /* (its seq is the latest) */
    if (h->evq_head + h->evq_n == h->evq_cap) {
      if (h->evq_head > 0 && h->evq_head >= h->evq_n) { /* slide down: it costs no more than was popped */
        memmove(h->evq, h->evq + h->evq_head, h->evq_n * sizeof *h->evq);
        h->evq_head = 0;
      } else {
        h->evq_cap = h->evq_cap ? 2 * h->evq_cap : 16;
        h->evq = realloc(h->evq, h->evq_cap * sizeof *h->evq);
        if (!h->evq) abort();
      }
    }
    h->evq[h->evq_head + h->evq_n++] = e;
    h->ev_last_at = at;
    return;
  } else {
    e.chained = 0; /* before the queue's last: on its own */
    heap_insert(s, e);
    return;
  }
  h->ev_last_at = at;
  heap_insert(s, e);
}

/* The heap's first event, the next of its half's queue taking its place. */
static event heap_pop_next(sim *s) {
  event e = heap_pop(s);
  if (e.chained) {
    half *h = &s->links[e.link].dir[e.side];
    if (h->evq_n) {
      heap_insert(s, h->evq[h->evq_head++]);
      if (--h->evq_n == 0) h->evq_head = 0;
    } else {
      h->ev_in_heap = false;
    }
    e.chained = 0;
  }
  return e;
}

/* ---------------------------------------------------------------- links */

static link *link_of(sim *s, int node, uint32_t conn, int *side) {
  const snode *sn = &s->nodes[node];
  for (int j = 0; j < sn->nlks; j++) { /* in link order, as a scan of all */
    link *l = &s->links[sn->lks[j]];
    for (int k = 0; k < 2; k++)
      if (l->node[k] == node && l->conn[k] == conn && l->open[k]) {
        *side = k;
        return l;
      }
  }
  return NULL;
}

static int link_new(sim *s) {
  if (s->nlinks == s->links_cap) {
    s->links_cap = s->links_cap ? s->links_cap * 2 : 64;
    s->links = realloc(s->links, (size_t)s->links_cap * sizeof *s->links);
    if (!s->links) abort();
  }
  link *l = &s->links[s->nlinks];
  memset(l, 0, sizeof *l);
  return s->nlinks++;
}

ded_addr sim_node_addr(int i) {
  ded_addr a;
  memset(&a, 0, sizeof a);
  a.family = 4;
  a.ip[0] = 10;
  a.ip[1] = 0;
  a.ip[2] = (uint8_t)(i >> 8);
  a.ip[3] = (uint8_t)(i + 1);
  a.port = 7000;
  return a;
}

static int addr_node(const sim *s, const ded_addr *a) {
  for (int i = 0; i < s->n; i++) {
    ded_addr b = sim_node_addr(i);
    if (ded_addr_equal(a, &b)) return i;
  }
  return -1;
}

void sim_half_drop(half *h) {
  segment *seg = h->head;
  while (seg) {
    segment *next = seg->next;
    free(seg);
    seg = next;
  }
  h->head = h->tail = NULL;
}

/* Side |side| is gone: the other side sees EOF once what is already in
 * flight from |side| arrived. */
void sim_link_fin(sim *s, int lk, int side) {
  link *l = &s->links[lk];
  half *h = &l->dir[side];
  uint64_t at = DED_MAX(h->last_arrive_ns, s->now + s->lp.latency_ns);
  h->last_arrive_ns = at;
  sim_push_deliver(s, at, l->node[1 - side], lk, side, 1);
}

/* The connection breaks: what is in flight is lost, and each side that
 * has it open sees it closed one latency from now. */
void sim_link_reset(sim *s, int lk) {
  link *l = &s->links[lk];
  l->dead = true;
  for (int k = 0; k < 2; k++) sim_half_drop(&l->dir[k]);
  for (int k = 0; k < 2; k++)
    if (l->open[k]) sim_push_deliver(s, s->now + s->lp.latency_ns, l->node[k], lk, 1 - k, 1);
}

/* True while a partition keeps nodes |a| and |b| apart. */
static bool cut_between(const sim *s, int a, int b) {
  if (a == b || a < 0 || b < 0) return false;
  for (size_t k = 0; k < s->ncuts; k++) {
    const cut *c = &s->cuts[k];
    if (c->until <= s->now) continue;
    if ((c->a == a && (c->b == b || c->b < 0)) || (c->a == b && (c->b == a || c->b < 0)))
      return true;
  }
  return false;
}

bool sim_cut(const sim *s, int a, int b) { return cut_between(s, a, b); }

bool sim_node_frozen(const sim *s, int i) {
  return i >= 0 && i < s->n && s->nodes[i].frozen_until != 0;
}

/* ---------------------------------------------------------------- callbacks */

static void node_pump_soon(sim *s, int i);

/* Links are numbered in creation order, so appending keeps |lks| sorted. */
static void node_add_link(sim *s, int i, int lk) {
  snode *sn = &s->nodes[i];
  if (sn->nlks == sn->lks_cap) {
    sn->lks_cap = sn->lks_cap ? 2 * sn->lks_cap : 16;
    sn->lks = realloc(sn->lks, (size_t)sn->lks_cap * sizeof *sn->lks);
    if (!sn->lks) abort();
  }
  sn->lks[sn->nlks++] = lk;
}

/* A crashed node's engine may still be on the stack (the crash came from a
 * hook it called) or being freed: nothing it does reaches anyone. */
static bool cb_dead(const cb_ctx *c) { return c->s->nodes[c->node].crashed; }

static int cb_connect(void *user, uint32_t conn_id, const ded_addr *addr) {
  cb_ctx *c = user;
  sim *s = c->s;
  if (cb_dead(c)) return -1;
  uint64_t v[4] = {(uint64_t)c->node, conn_id, addr->family, addr->port};
  dg_rec(s, "connect", 4, v);
  dg_bytes(s, addr->ip, sizeof addr->ip);
  dg_end(s);
  int lk = link_new(s);
  link *l = &s->links[lk];
  l->node[0] = c->node;
  l->conn[0] = conn_id;
  l->open[0] = true;
  l->node[1] = addr_node(s, addr);
  node_add_link(s, l->node[0], lk);
  if (l->node[1] >= 0 && l->node[1] != l->node[0]) node_add_link(s, l->node[1], lk);
  if (cut_between(s, c->node, l->node[1])) { /* no answer: it fails after one latency */
    l->dead = true;
    sim_push(s, s->now + s->lp.latency_ns, EV_CONNECT, c->node, lk, 0, CONN_SYN);
    return 0;
  }
  uint64_t rtt = 2 * s->lp.latency_ns + sim_rng_range(&s->rng, 0, s->lp.jitter_ns);
  sim_push(s, s->now + rtt, EV_CONNECT, c->node, lk, 0, CONN_SYN);
  return 0;
}

static void cb_close(void *user, uint32_t conn_id) {
  cb_ctx *c = user;
  int side;
  if (cb_dead(c)) return;
  uint64_t v[2] = {(uint64_t)c->node, conn_id};
  dg_rec(c->s, "close", 2, v);
  dg_end(c->s);
  link *l = link_of(c->s, c->node, conn_id, &side);
  if (!l) return;
  l->open[side] = false;
  l->fin[side] = true;
  sim_link_fin(c->s, (int)(l - c->s->links), side);
}

static void node_want(snode *sn, uint32_t conn_id) {
  uint32_t slot = conn_id & 0xffff;
  if (slot >= sn->nwants) {
    uint32_t n = DED_MAX(16u, 2 * slot);
    sn->wants = realloc(sn->wants, n * sizeof *sn->wants);
    if (!sn->wants) abort();
    memset(sn->wants + sn->nwants, 0, (n - sn->nwants) * sizeof *sn->wants);
    sn->nwants = n;
  }
  sn->wants[slot] = (uint64_t)conn_id + 1;
}

static bool node_wants(const snode *sn, uint32_t conn_id) {
  uint32_t slot = conn_id & 0xffff;
  return slot < sn->nwants && sn->wants[slot] == (uint64_t)conn_id + 1;
}

static void cb_want_write(void *user, uint32_t conn_id) {
  cb_ctx *c = user;
  if (cb_dead(c)) return;
  node_want(&c->s->nodes[c->node], conn_id);
  node_pump_soon(c->s, c->node);
}

static void cb_round_done(void *user, void *ctx, const ded_round_result *res) {
  cb_ctx *c = user;
  if (cb_dead(c)) return;
  uint64_t w;
  memcpy(&w, &res->total_weight, sizeof w);
  uint64_t v[11] = {(uint64_t)c->node, (uint64_t)(int64_t)res->status, res->round,
                    res->contributors, w, res->alone, res->late, res->recoveries,
                    res->behind, res->swarm_round, res->members != NULL};
  dg_rec(c->s, "round", 11, v);
  if (res->members) dg_bytes(c->s, res->members, (size_t)res->contributors * DED_ID_BYTES);
  dg_end(c->s);
  if (c->s->hooks.round_done) c->s->hooks.round_done(c->s->hooks.user, c->node, ctx, res);
}

static void cb_event(void *user, const ded_event *ev) {
  cb_ctx *c = user;
  if (cb_dead(c)) return;
  uint64_t v[3] = {(uint64_t)c->node, (uint64_t)ev->type, (uint64_t)(int64_t)ev->status};
  dg_rec(c->s, "nodeevt", 3, v);
  dg_bytes(c->s, ev->peer, sizeof ev->peer);
  dg_end(c->s);
  if (c->s->hooks.event) c->s->hooks.event(c->s->hooks.user, c->node, ev);
}

static void cb_log(void *user, int level, const char *line) {
  cb_ctx *c = user;
  if (cb_dead(c)) return;
  if (c->s->hooks.log) c->s->hooks.log(c->s->hooks.user, c->node, level, line);
}

static void cb_want_snapshot(void *user) {
  cb_ctx *c = user;
  if (cb_dead(c)) return;
  uint64_t v = (uint64_t)c->node;
  dg_rec(c->s, "wantsnap", 1, &v);
  dg_end(c->s);
  c->s->hooks.want_snapshot(c->s->hooks.user, c->node);
}

static void cb_state_done(void *user, int status, ded_snapshot *snap) {
  cb_ctx *c = user;
  if (cb_dead(c)) return; /* the engine frees snap->bytes */
  uint64_t v[5] = {(uint64_t)c->node, (uint64_t)(int64_t)status, snap ? snap->round : 0,
                   snap ? snap->len : 0, snap ? snap->digest : 0};
  dg_rec(c->s, "state", 5, v);
  dg_end(c->s);
  c->s->hooks.state_done(c->s->hooks.user, c->node, status, snap);
}

/* The nodes' callbacks: the optional ones only where the scenario has the
 * hook, since the engine reads a missing one as a choice (want_snapshot:
 * this peer offers no state; state_done: no fetch allowed). */
static ded_node_callbacks sim_callbacks(const sim_hooks *h) {
  ded_node_callbacks cb = {cb_connect, cb_close, cb_want_write, cb_round_done, cb_event, cb_log,
                           h->want_snapshot ? cb_want_snapshot : NULL,
                           h->state_done ? cb_state_done : NULL};
  return cb;
}

/* ---------------------------------------------------------------- driving */

/* Keeps exactly one tick event per node, at the node's expiry. */
static void node_sync_timer(sim *s, int i) {
  snode *sn = &s->nodes[i];
  if (!sn->up || sn->frozen_until) return;
  uint64_t at = ded_node_expiry(sn->node);
  if (at == UINT64_MAX) return;
  if (at < s->now) at = s->now;
  if (sn->tick_at != 0 && sn->tick_at <= at) return;
  sn->tick_at = at;
  sim_push(s, at, EV_TICK, i, -1, 0, at);
}

static void node_pump_soon(sim *s, int i) {
  snode *sn = &s->nodes[i];
  if (sn->pump_scheduled) return;
  sn->pump_scheduled = true;
  sim_push(s, DED_MAX(s->now, sn->uplink_free_ns), EV_PUMP, i, -1, 0, 0);
}

/* Sends one segment from node |e->node| if it has output. */
static void node_pump(sim *s, const event *e) {
  int i = e->node;
  snode *sn = &s->nodes[i];
  if (e->gen != sn->gen) return; /* a pump of a crashed life */
  sn->pump_scheduled = false;
  if (!sn->up || sn->frozen_until) return; /* the thaw pumps again */
  /* Round robin over the node's own links, from the first at or after the
   * cursor: the order a scan of every link would visit them in. */
  int nl = sn->nlks, start = 0;
  while (start < nl && (unsigned)sn->lks[start] < sn->rr) start++;
  for (int tries = 0; tries < nl; tries++) {
    int lk = sn->lks[(start + tries) % nl];
    link *l = &s->links[lk];
    int side = l->node[0] == i && l->open[0] ? 0 : l->node[1] == i && l->open[1] ? 1 : -1;
    if (side < 0 || l->dead || !l->open[1 - side] || (side == 0 && !l->open[1])) continue;
    if (!node_wants(sn, l->conn[side])) continue;
    ded_iov iov[SIM_IOV_MAX];
    int n = ded_node_conn_pending(sn->node, l->conn[side], iov, SIM_IOV_MAX);
    if (n == 0) {
      sn->wants[l->conn[side] & 0xffff] = 0;
      continue;
    }
    size_t want = sim_rng_range(&s->rng, 1, s->lp.segment_max), len = 0;
    for (int k = 0; k < n && len < want; k++) len += DED_MIN(iov[k].len, want - len);
    segment *seg = malloc(sizeof *seg + len);
    if (!seg) abort();
    size_t o = 0;
    for (int k = 0; k < n && o < len; k++) {
      size_t take = DED_MIN(iov[k].len, len - o);
      memcpy(seg->data + o, iov[k].base, take);
      o += take;
    }
    seg->len = len;
    seg->next = NULL;
    sim_half_walk(s, &l->dir[side], i, l->node[1 - side], seg->data, len);
    uint64_t v[4] = {(uint64_t)i, (uint64_t)lk, (uint64_t)side, len};
    dg_rec(s, "segment", 4, v);
    dg_bytes(s, seg->data, len);
    dg_end(s);
    ded_node_conn_consume(sn->node, l->conn[side], len, s->now);
    l = &s->links[lk]; /* consume may have opened links (realloc) */
    if (!sn->up) { /* a hook crashed it meanwhile: the write died with it */
      free(seg);
      return;
    }
    uint64_t tx = (uint64_t)((double)len / sn->p.uplink_bytes_per_s * 1e9);
    sn->uplink_free_ns = s->now + tx;
    sn->rr = (unsigned)lk + 1;
    /* Cut meanwhile (a hook), or broken by this very segment: lost. */
    bool faulty = s->net_heal_ns == 0 || s->now < s->net_heal_ns;
    bool reset = s->lp.reset_prob > 0 && sim_rng_chance(&s->rng, s->lp.reset_prob) && faulty;
    if (l->dead || reset) {
      free(seg);
      if (!l->dead) sim_link_reset(s, lk);
      node_pump_soon(s, i);
      return;
    }
    half *h = &l->dir[side];
    uint64_t at = sn->uplink_free_ns + s->lp.latency_ns + sim_rng_range(&s->rng, 0, s->lp.jitter_ns);
    if (s->lp.spike_prob > 0 && sim_rng_chance(&s->rng, s->lp.spike_prob) && faulty)
      at += s->lp.spike_ns;
    snode *dst = &s->nodes[l->node[1 - side]];
    if (dst->p.downlink_bytes_per_s > 0) { /* through the receiver's link, one at a time */
      at = DED_MAX(at, dst->downlink_free_ns) +
           (uint64_t)((double)len / dst->p.downlink_bytes_per_s * 1e9);
      dst->downlink_free_ns = at;
    }
    if (at < h->last_arrive_ns) at = h->last_arrive_ns;
    h->last_arrive_ns = at;
    seg->arrive_ns = at;
    if (h->tail)
      h->tail->next = seg;
    else
      h->head = seg;
    h->tail = seg;
    sim_push_deliver(s, at, l->node[1 - side], lk, side, 0);
    node_pump_soon(s, i); /* more may be waiting, on this or other links */
    return;
  }
}

static void node_start(sim *s, int i) {
  snode *sn = &s->nodes[i];
  sn->crashed = false;
  sn->restarting = false;
  sn->ctx.s = s;
  sn->ctx.node = i;
  if (sn->nwants) memset(sn->wants, 0, sn->nwants * sizeof *sn->wants); /* a new life's ids */
  ded_node_settings st = sn->p.settings;
  st.identity_seed = sn->seed;
  st.announce[0] = sim_node_addr(i);
  st.n_announce = st.mode == DED_MODE_CLIENT ? 0 : 1;
  st.wall_offset_ns = 1700000000ll * 1000000000ll;
  int rv = ded_node_new(&st, &s->cb, &sn->ctx, s->now, &sn->node);
  if (rv) {
    fprintf(stderr, "sim: node %d: %s\n", i, ded_strerror(rv));
    abort();
  }
  sn->up = true;
  ded_node_start(sn->node, s->now);
  if (sn->up && s->hooks.started) s->hooks.started(s->hooks.user, i); /* unless a hook crashed it */
}

/* Whether a connect on |l| can be accepted by its listener now. */
static bool connect_ok(const sim *s, const link *l) {
  int target = l->node[1];
  return !l->dead && target >= 0 && s->nodes[target].up &&
         s->nodes[target].p.settings.mode != DED_MODE_CLIENT && !cut_between(s, l->node[0], target);
}

/* The caller of link |lk| learns its connect failed (once it runs). */
static void connect_refuse(sim *s, int lk) {
  link *l = &s->links[lk];
  int caller = l->node[0];
  if (!l->open[0]) return;
  if (sim_node_frozen(s, caller)) {
    sim_push(s, s->now, EV_CONNECT, caller, lk, 0, CONN_REFUSED);
    return;
  }
  l->open[0] = false;
  ded_node_conn_closed(s->nodes[caller].node, l->conn[0], DED_ERR_PEER_LOST, s->now);
}

/* What the engine queued while connecting may go now. */
static void node_connected(sim *s, int i, uint32_t conn_id) {
  ded_node_conn_connected(s->nodes[i].node, conn_id, s->now);
  if (s->nodes[i].up) node_want(&s->nodes[i], conn_id);
}

static void ev_connect(sim *s, const event *e) {
  link *l = &s->links[e->link];
  int caller = l->node[0], target = l->node[1];
  if (!l->open[0]) return; /* the caller gave up meanwhile, or crashed */
  if (e->tag == CONN_REFUSED) {
    l->open[0] = false;
    ded_node_conn_closed(s->nodes[caller].node, l->conn[0], DED_ERR_PEER_LOST, s->now);
    return;
  }
  if (e->tag == CONN_DONE) {
    if (l->dead || !l->open[1]) return; /* broken meanwhile: its close is on the way */
    node_connected(s, caller, l->conn[0]);
    node_pump_soon(s, caller);
    node_pump_soon(s, target);
    return;
  }
  if (!connect_ok(s, l)) {
    connect_refuse(s, e->link);
    return;
  }
  ded_addr from = sim_node_addr(caller);
  from.port = 40000;
  uint32_t id;
  int rv = ded_node_conn_accepted(s->nodes[target].node, &from, &id, s->now);
  /* The listener's hooks may have crashed, frozen or cut anyone meanwhile. */
  l = &s->links[e->link];
  if (rv != 0 || !s->nodes[target].up) { /* refused (or the listener died accepting) */
    connect_refuse(s, e->link);
    return;
  }
  l->conn[1] = id;
  l->open[1] = true;
  if (!l->open[0]) return; /* the caller crashed meanwhile: its close is on the way */
  if (l->dead) { /* cut meanwhile: the caller's close is on the way, and now the listener's */
    sim_push(s, s->now + s->lp.latency_ns, EV_DELIVER, target, e->link, 0, 1);
    return;
  }
  if (sim_node_frozen(s, caller)) { /* it learns once it runs again */
    sim_push(s, s->now, EV_CONNECT, caller, e->link, 0, CONN_DONE);
    node_pump_soon(s, target);
    return;
  }
  node_connected(s, caller, l->conn[0]);
  node_pump_soon(s, caller);
  node_pump_soon(s, target);
}

static void ev_deliver(sim *s, const event *e) {
  link *l = &s->links[e->link];
  int to = 1 - e->side;
  if (e->tag == 1) { /* EOF from e->side */
    if (l->open[to]) {
      l->open[to] = false;
      ded_node_conn_closed(s->nodes[l->node[to]].node, l->conn[to], DED_ERR_PEER_LOST, s->now);
    }
    return;
  }
  half *h = &l->dir[e->side];
  segment *seg = h->head;
  if (!seg) return; /* dropped by a reset or a crash */
  h->head = seg->next;
  if (!h->head) h->tail = NULL;
  if (l->open[to] && s->nodes[l->node[to]].up)
    ded_node_conn_recv(s->nodes[l->node[to]].node, l->conn[to], seg->data, seg->len, s->now);
  free(seg);
}

static void ev_tick(sim *s, const event *e) {
  snode *sn = &s->nodes[e->node];
  sn->tick_at = 0;
  if (!sn->up || sn->frozen_until) return; /* the thaw runs what expired */
  ded_node_handle_expiry(sn->node, s->now);
}

/* The frozen node that |e| must wait for, or -1. */
static int ev_blocker(const sim *s, const event *e) {
  switch (e->type) {
  case EV_START:
  case EV_TIMER: return sim_node_frozen(s, e->node) ? e->node : -1;
  case EV_DELIVER: {
    int to = s->links[e->link].node[1 - e->side];
    return sim_node_frozen(s, to) ? to : -1;
  }
  case EV_CONNECT: {
    const link *l = &s->links[e->link];
    if (!l->open[0]) return -1;
    if (e->tag != CONN_SYN) return sim_node_frozen(s, l->node[0]) ? l->node[0] : -1;
    /* A frozen listener's kernel keeps the attempt in its backlog. */
    return sim_node_frozen(s, l->node[1]) && connect_ok(s, l) ? l->node[1] : -1;
  }
  default: return -1; /* EV_TICK and EV_PUMP see the freeze themselves */
  }
}

static void defer_push(sim *s, int i, const event *e) {
  snode *sn = &s->nodes[i];
  if (sn->ndeferred == sn->deferred_cap) {
    sn->deferred_cap = sn->deferred_cap ? sn->deferred_cap * 2 : 64;
    sn->deferred = realloc(sn->deferred, sn->deferred_cap * sizeof *sn->deferred);
    if (!sn->deferred) abort();
  }
  sn->deferred[sn->ndeferred++] = *e;
}

static void ev_thaw(sim *s, const event *e);

/* Node |i| may have been called into. */
static void touch(sim *s, int i) {
  if (i >= 0 && i < s->n && !s->nodes[i].dirty) {
    s->nodes[i].dirty = true;
    s->dirty[s->ndirty++] = i;
  }
}

static int int_cmp(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

static void sim_dispatch(sim *s, const event *e) {
  /* Every call into the engine an event makes is on its node or on its
   * link's ends; hooks reach other nodes through sim_node. */
  touch(s, e->node);
  if (e->link >= 0) {
    touch(s, s->links[e->link].node[0]);
    touch(s, s->links[e->link].node[1]);
  }
  int b = ev_blocker(s, e);
  if (b >= 0) {
    defer_push(s, b, e);
    return;
  }
  switch (e->type) {
  case EV_START: node_start(s, e->node); break;
  case EV_TICK: ev_tick(s, e); break;
  case EV_PUMP: node_pump(s, e); break;
  case EV_CONNECT: ev_connect(s, e); break;
  case EV_DELIVER: ev_deliver(s, e); break;
  case EV_TIMER:
    if (s->hooks.timer) s->hooks.timer(s->hooks.user, e->node, e->tag);
    break;
  case EV_THAW: ev_thaw(s, e); break;
  }
}

/* Node |e->node| runs again: what waited, then its timers, then output. */
static void ev_thaw(sim *s, const event *e) {
  int i = e->node;
  snode *sn = &s->nodes[i];
  if (sn->frozen_until != e->tag) return; /* extended, or crashed meanwhile */
  sn->frozen_until = 0;
  event *q = sn->deferred;
  size_t nq = sn->ndeferred;
  sn->deferred = NULL;
  sn->ndeferred = sn->deferred_cap = 0;
  /* A hook may freeze it again: the rest then waits anew, in order. */
  for (size_t k = 0; k < nq; k++) sim_dispatch(s, &q[k]);
  free(q);
  if (!sn->up || sn->frozen_until) return;
  if (ded_node_expiry(sn->node) <= s->now) ded_node_handle_expiry(sn->node, s->now);
  if (sn->up && !sn->frozen_until) node_pump_soon(s, i);
}

static void sim_reap(sim *s) {
  s->reap = false;
  for (int i = 0; i < s->n; i++) {
    ded_node *z = s->nodes[i].zombie;
    s->nodes[i].zombie = NULL;
    ded_node_free(z);
  }
}

static void sim_handle(sim *s, const event *e) {
  if (e->type == EV_TICK &&
      (s->nodes[e->node].tick_at != e->tag || s->nodes[e->node].gen != e->gen))
    return; /* superseded, or of a crashed life */
  uint64_t v[6] = {e->at, (uint64_t)e->type, (uint64_t)(int64_t)e->node,
                   (uint64_t)(int64_t)e->link, (uint64_t)e->side, e->tag};
  dg_rec(s, "event", 6, v);
  dg_end(s);
  s->in_event = true;
  sim_dispatch(s, e);
  s->in_event = false;
  if (s->reap) sim_reap(s);
  /* An event may have changed the timers of the nodes it called into
   * (touch), in the order a sync of every node would visit them. */
  if (s->ndirty > 1) qsort(s->dirty, (size_t)s->ndirty, sizeof *s->dirty, int_cmp);
  for (int k = 0; k < s->ndirty; k++) {
    s->nodes[s->dirty[k]].dirty = false;
    node_sync_timer(s, s->dirty[k]);
  }
  s->ndirty = 0;
}

/* ---------------------------------------------------------------- API */

sim *sim_new(uint64_t seed, int n, const sim_link_params *lp, const sim_hooks *hooks) {
  if (n < 1 || n > SIM_NODES_MAX) return NULL;
  sim *s = calloc(1, sizeof *s);
  if (!s) abort();
  sim_rng_seed(&s->rng, seed);
  s->digest = DIGEST_BASIS;
  s->equiv_liar = s->equiv_victim = -1;
  s->lp = *lp;
  if (s->lp.segment_max == 0) s->lp.segment_max = 64 * 1024;
  s->hooks = *hooks;
  s->cb = sim_callbacks(hooks);
  s->n = n;
  for (int i = 0; i < n; i++)
    for (int b = 0; b < DED_SEED_BYTES; b++) s->nodes[i].seed[b] = (uint8_t)sim_rng_next(&s->rng);
  return s;
}

void sim_free(sim *s) {
  for (int i = 0; i < s->n; i++) {
    ded_node_free(s->nodes[i].node);
    ded_node_free(s->nodes[i].zombie);
  }
  for (int i = 0; i < s->n; i++) {
    free(s->nodes[i].deferred);
    free(s->nodes[i].lks);
    free(s->nodes[i].wants);
  }
  for (int i = 0; i < s->nlinks; i++)
    for (int d = 0; d < 2; d++) {
      sim_half_drop(&s->links[i].dir[d]);
      free(s->links[i].dir[d].evq);
    }
  free(s->links);
  free(s->cuts);
  free(s->heap);
  free(s);
}

void sim_node_setup(sim *s, int i, const sim_node_params *p) {
  s->nodes[i].p = *p;
  if (s->nodes[i].p.uplink_bytes_per_s <= 0) s->nodes[i].p.uplink_bytes_per_s = 1e9;
  sim_push(s, DED_MAX(p->start_ns, s->now), EV_START, i, -1, 0, 0); /* now is 0 before sim_run */
}

ded_node *sim_node(sim *s, int i) {
  touch(s, i); /* the caller may call into it */
  return s->nodes[i].up ? s->nodes[i].node : NULL;
}

int sim_nodes(const sim *s) { return s->n; }

bool sim_up(const sim *s, int i) { return i >= 0 && i < s->n && s->nodes[i].up; }

uint64_t sim_now(const sim *s) { return s->now; }

sim_rng *sim_rand(sim *s) { return &s->rng; }

void sim_at(sim *s, int node, uint64_t at_ns, uint64_t tag) {
  sim_push(s, DED_MAX(at_ns, s->now), EV_TIMER, node, -1, 0, tag);
}

void sim_run(sim *s, uint64_t until_ns) {
  s->stop = false;
  while (s->nheap && !s->stop) {
    if (s->heap[0].at > until_ns) break;
    event e = heap_pop_next(s);
    s->now = e.at;
    s->events++;
    sim_handle(s, &e);
  }
}

void sim_stop(sim *s) { s->stop = true; }

uint64_t sim_events(const sim *s) { return s->events; }
