/*
 * sim.c: the simulated network and the driver side of every node.
 *
 * Events live in a binary heap ordered by (time, sequence), so ties break
 * in insertion order and a seed replays exactly. A connection is a pair of
 * half-links; each half carries segments that depart through the sender's
 * uplink (one at a time, at its rate) and arrive after the link latency
 * plus jitter, never before the previous segment of the same half (TCP
 * order). A node whose uplink is idle and that has output is "pumped":
 * it gives one random-size segment from one of its connections, taken
 * round-robin.
 */
#include "sim.h"

#include "core/ded_assert.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIM_NODES_MAX 256
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

/* ---------------------------------------------------------------- types */

typedef struct segment {
  struct segment *next;
  uint64_t arrive_ns;
  size_t len;
  uint8_t data[];
} segment;

/* One direction of a connection. */
typedef struct half {
  segment *head, *tail;
  uint64_t last_arrive_ns;
} half;

typedef struct link {
  int node[2];        /* [0] = caller, [1] = listener */
  uint32_t conn[2];   /* each side's conn id */
  bool open[2];       /* side i still has the connection */
  bool fin[2];        /* side i closed: the other side sees EOF after its data */
  half dir[2];        /* dir[i]: bytes from side i to side 1-i */
} link;

typedef struct snode {
  sim_node_params p;
  ded_node *node;
  bool up;
  uint64_t uplink_free_ns;
  bool pump_scheduled;
  uint64_t tick_at; /* the tick event we have scheduled, 0 = none */
  unsigned rr;      /* round-robin cursor over links */
  uint8_t seed[DED_SEED_BYTES];
} snode;

enum ev_type { EV_START, EV_TICK, EV_PUMP, EV_CONNECT, EV_DELIVER, EV_TIMER };

typedef struct event {
  uint64_t at;
  uint64_t seq;
  int type;
  int node;
  int link;
  int side;
  uint64_t tag;
} event;

struct sim {
  sim_rng rng;
  sim_link_params lp;
  sim_hooks hooks;
  int n;
  snode nodes[SIM_NODES_MAX];
  link *links;
  int nlinks, links_cap;
  event *heap;
  size_t nheap, heap_cap;
  uint64_t seq;
  uint64_t now;
  uint64_t events;
  bool stop;
};

/* ---------------------------------------------------------------- heap */

static bool ev_less(const event *a, const event *b) {
  return a->at < b->at || (a->at == b->at && a->seq < b->seq);
}

static void heap_push(sim *s, event e) {
  if (s->nheap == s->heap_cap) {
    s->heap_cap = s->heap_cap ? s->heap_cap * 2 : 1024;
    s->heap = realloc(s->heap, s->heap_cap * sizeof *s->heap);
    if (!s->heap) abort();
  }
  e.seq = s->seq++;
  size_t i = s->nheap++;
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!ev_less(&e, &s->heap[parent])) break;
    s->heap[i] = s->heap[parent];
    i = parent;
  }
  s->heap[i] = e;
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

static void sim_push(sim *s, uint64_t at, int type, int node, int lk, int side, uint64_t tag) {
  event e = {at, 0, type, node, lk, side, tag};
  heap_push(s, e);
}

/* ---------------------------------------------------------------- links */

static link *link_of(sim *s, int node, uint32_t conn, int *side) {
  for (int i = 0; i < s->nlinks; i++) {
    link *l = &s->links[i];
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

/* ---------------------------------------------------------------- callbacks */

typedef struct cb_ctx {
  sim *s;
  int node;
} cb_ctx;

static cb_ctx cb_ctxs[SIM_NODES_MAX];

static void node_pump_soon(sim *s, int i);

static int cb_connect(void *user, uint32_t conn_id, const ded_addr *addr) {
  cb_ctx *c = user;
  sim *s = c->s;
  int lk = link_new(s);
  link *l = &s->links[lk];
  l->node[0] = c->node;
  l->conn[0] = conn_id;
  l->open[0] = true;
  l->node[1] = addr_node(s, addr);
  uint64_t rtt = 2 * s->lp.latency_ns + sim_rng_range(&s->rng, 0, s->lp.jitter_ns);
  sim_push(s, s->now + rtt, EV_CONNECT, c->node, lk, 0, 0);
  return 0;
}

static void cb_close(void *user, uint32_t conn_id) {
  cb_ctx *c = user;
  int side;
  link *l = link_of(c->s, c->node, conn_id, &side);
  if (!l) return;
  l->open[side] = false;
  l->fin[side] = true;
  /* The other side sees EOF once what is already in flight arrived. */
  half *h = &l->dir[side];
  uint64_t at = DED_MAX(h->last_arrive_ns, c->s->now + c->s->lp.latency_ns);
  h->last_arrive_ns = at;
  sim_push(c->s, at, EV_DELIVER, l->node[1 - side], (int)(l - c->s->links), side, 1);
}

static void cb_want_write(void *user, uint32_t conn_id) {
  cb_ctx *c = user;
  (void)conn_id;
  node_pump_soon(c->s, c->node);
}

static void cb_round_done(void *user, void *ctx, const ded_round_result *res) {
  cb_ctx *c = user;
  if (c->s->hooks.round_done) c->s->hooks.round_done(c->s->hooks.user, c->node, ctx, res);
}

static void cb_event(void *user, const ded_event *ev) {
  cb_ctx *c = user;
  if (c->s->hooks.event) c->s->hooks.event(c->s->hooks.user, c->node, ev);
}

static void cb_log(void *user, int level, const char *line) {
  cb_ctx *c = user;
  if (c->s->hooks.log) c->s->hooks.log(c->s->hooks.user, c->node, level, line);
}

static const ded_node_callbacks sim_callbacks = {cb_connect, cb_close, cb_want_write,
                                                 cb_round_done, cb_event, cb_log};

/* ---------------------------------------------------------------- driving */

/* Keeps exactly one tick event per node, at the node's expiry. */
static void node_sync_timer(sim *s, int i) {
  snode *sn = &s->nodes[i];
  if (!sn->up) return;
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

/* Sends one segment from node |i| if it has output. */
static void node_pump(sim *s, int i) {
  snode *sn = &s->nodes[i];
  sn->pump_scheduled = false;
  if (!sn->up) return;
  for (int tries = 0; tries < s->nlinks; tries++) {
    int lk = (int)((sn->rr + (unsigned)tries) % (unsigned)s->nlinks);
    link *l = &s->links[lk];
    int side = l->node[0] == i && l->open[0] ? 0 : l->node[1] == i && l->open[1] ? 1 : -1;
    if (side < 0 || !l->open[1 - side] || (side == 0 && !l->open[1])) continue;
    ded_iov iov[SIM_IOV_MAX];
    int n = ded_node_conn_pending(sn->node, l->conn[side], iov, SIM_IOV_MAX);
    if (n == 0) continue;
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
    ded_node_conn_consume(sn->node, l->conn[side], len, s->now);
    l = &s->links[lk]; /* consume may have opened links (realloc) */
    uint64_t tx = (uint64_t)((double)len / sn->p.uplink_bytes_per_s * 1e9);
    sn->uplink_free_ns = s->now + tx;
    half *h = &l->dir[side];
    uint64_t at = sn->uplink_free_ns + s->lp.latency_ns + sim_rng_range(&s->rng, 0, s->lp.jitter_ns);
    if (at < h->last_arrive_ns) at = h->last_arrive_ns;
    h->last_arrive_ns = at;
    seg->arrive_ns = at;
    if (h->tail)
      h->tail->next = seg;
    else
      h->head = seg;
    h->tail = seg;
    sim_push(s, at, EV_DELIVER, l->node[1 - side], lk, side, 0);
    sn->rr = (unsigned)lk + 1;
    node_pump_soon(s, i); /* more may be waiting, on this or other links */
    return;
  }
}

static void node_start(sim *s, int i) {
  snode *sn = &s->nodes[i];
  cb_ctxs[i].s = s;
  cb_ctxs[i].node = i;
  ded_node_settings st = sn->p.settings;
  st.identity_seed = sn->seed;
  st.announce[0] = sim_node_addr(i);
  st.n_announce = st.mode == DED_MODE_CLIENT ? 0 : 1;
  st.wall_offset_ns = 1700000000ll * 1000000000ll;
  int rv = ded_node_new(&st, &sim_callbacks, &cb_ctxs[i], s->now, &sn->node);
  if (rv) {
    fprintf(stderr, "sim: node %d: %s\n", i, ded_strerror(rv));
    abort();
  }
  sn->up = true;
  ded_node_start(sn->node, s->now);
  if (s->hooks.started) s->hooks.started(s->hooks.user, i);
}

static void ev_connect(sim *s, const event *e) {
  link *l = &s->links[e->link];
  int caller = l->node[0], target = l->node[1];
  if (!l->open[0]) return; /* the caller gave up meanwhile */
  if (target < 0 || !s->nodes[target].up || s->nodes[target].p.settings.mode == DED_MODE_CLIENT) {
    l->open[0] = false;
    ded_node_conn_closed(s->nodes[caller].node, l->conn[0], DED_ERR_PEER_LOST, s->now);
    return;
  }
  ded_addr from = sim_node_addr(caller);
  from.port = 40000;
  uint32_t id;
  if (ded_node_conn_accepted(s->nodes[target].node, &from, &id, s->now) != 0) {
    l->open[0] = false;
    ded_node_conn_closed(s->nodes[caller].node, l->conn[0], DED_ERR_PEER_LOST, s->now);
    return;
  }
  l = &s->links[e->link];
  l->conn[1] = id;
  l->open[1] = true;
  ded_node_conn_connected(s->nodes[caller].node, l->conn[0], s->now);
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
  if (!seg) return;
  h->head = seg->next;
  if (!h->head) h->tail = NULL;
  if (l->open[to] && s->nodes[l->node[to]].up)
    ded_node_conn_recv(s->nodes[l->node[to]].node, l->conn[to], seg->data, seg->len, s->now);
  free(seg);
}

static void sim_handle(sim *s, const event *e) {
  switch (e->type) {
  case EV_START: node_start(s, e->node); break;
  case EV_TICK:
    if (s->nodes[e->node].tick_at != e->tag) return; /* superseded */
    s->nodes[e->node].tick_at = 0;
    ded_node_handle_expiry(s->nodes[e->node].node, s->now);
    break;
  case EV_PUMP: node_pump(s, e->node); break;
  case EV_CONNECT: ev_connect(s, e); break;
  case EV_DELIVER: ev_deliver(s, e); break;
  case EV_TIMER:
    if (s->hooks.timer) s->hooks.timer(s->hooks.user, e->node, e->tag);
    break;
  }
  /* Any event may have changed any node's timers or output. */
  for (int i = 0; i < s->n; i++) node_sync_timer(s, i);
}

/* ---------------------------------------------------------------- API */

sim *sim_new(uint64_t seed, int n, const sim_link_params *lp, const sim_hooks *hooks) {
  if (n < 1 || n > SIM_NODES_MAX) return NULL;
  sim *s = calloc(1, sizeof *s);
  if (!s) abort();
  sim_rng_seed(&s->rng, seed);
  s->lp = *lp;
  if (s->lp.segment_max == 0) s->lp.segment_max = 64 * 1024;
  s->hooks = *hooks;
  s->n = n;
  for (int i = 0; i < n; i++)
    for (int b = 0; b < DED_SEED_BYTES; b++) s->nodes[i].seed[b] = (uint8_t)sim_rng_next(&s->rng);
  return s;
}

void sim_free(sim *s) {
  for (int i = 0; i < s->n; i++) ded_node_free(s->nodes[i].node);
  for (int i = 0; i < s->nlinks; i++)
    for (int d = 0; d < 2; d++) {
      segment *seg = s->links[i].dir[d].head;
      while (seg) {
        segment *next = seg->next;
        free(seg);
        seg = next;
      }
    }
  free(s->links);
  free(s->heap);
  free(s);
}

void sim_node_setup(sim *s, int i, const sim_node_params *p) {
  s->nodes[i].p = *p;
  if (s->nodes[i].p.uplink_bytes_per_s <= 0) s->nodes[i].p.uplink_bytes_per_s = 1e9;
  sim_push(s, p->start_ns, EV_START, i, -1, 0, 0);
}

ded_node *sim_node(sim *s, int i) { return s->nodes[i].up ? s->nodes[i].node : NULL; }

uint64_t sim_now(const sim *s) { return s->now; }

sim_rng *sim_rand(sim *s) { return &s->rng; }

void sim_at(sim *s, int node, uint64_t at_ns, uint64_t tag) {
  sim_push(s, DED_MAX(at_ns, s->now), EV_TIMER, node, -1, 0, tag);
}

void sim_run(sim *s, uint64_t until_ns) {
  s->stop = false;
  while (s->nheap && !s->stop) {
    if (s->heap[0].at > until_ns) break;
    event e = heap_pop(s);
    s->now = e.at;
    s->events++;
    sim_handle(s, &e);
  }
}

void sim_stop(sim *s) { s->stop = true; }

uint64_t sim_events(const sim *s) { return s->events; }
