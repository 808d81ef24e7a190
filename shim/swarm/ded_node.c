/*
 * ded_node.c: the swarm peer state machine.
 *
 * Layout of this file:
 *   1. types            connections, peers, rounds, coordinator state
 *   2. logging and small helpers
 *   3. send queues      zero-copy output, per connection
 *   4. connections      lifetime, deferred reaping
 *   5. peers and records  discovery, flooding, who connects to whom
 *   6. member side of a round   join, commit, reduce-scatter, all-gather
 *   7. coordinator side of a round   gather joins, close, commit
 *   8. frame dispatch
 *   9. timers, bootstrap, leave, public entry points
 *
 * Nothing is freed while a caller up the stack may still hold it: a
 * connection or round that dies is marked and reaped at the end of the
 * public entry point that killed it (node_reap).
 */
#include "ded_node.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "avg/ded_partition.h"
#include "avg/ded_reduce.h"
#include "core/ded_assert.h"
#include "core/ded_frame.h"
#include "core/ded_msg.h"
#include "core/ded_wire.h"
#include "crypto/ded_ident.h"
#include "dht/ded_record.h"
#include "dht/ded_table.h"
#include "match/ded_match.h"

/* ------------------------------------------------------------------ */
/* 1. types                                                            */
/* ------------------------------------------------------------------ */

#define NODE_TICK_NS (20ull * 1000 * 1000)
/* With nothing pending (no round, no attempt to connect, no handshake), the
 * node wakes only this often: an idle trainer's peer costs no CPU. */
#define NODE_IDLE_TICK_NS (1000ull * 1000 * 1000)
#define NODE_CHUNK_BYTES_DEFAULT (64u * 1024)
#define NODE_RECORD_TTL_MS_DEFAULT (5u * 60 * 1000)
#define NODE_BACKOFF_MS_MIN 50u
#define NODE_BACKOFF_MS_MAX 5000u
/* A larger-id peer waits this long for the smaller one to call before it
 * calls itself (the usual direction fails when only one side can accept). */
#define NODE_CONNECT_PATIENCE_NS (2ull * 1000 * 1000 * 1000)
/* Members wait this many round timeouts for a commit or for data: the
 * coordinator's own deadline comes first, so members never give up on a
 * round the coordinator is about to commit. */
#define NODE_MEMBER_TIMEOUT_FACTOR 2
/* Round buffers (accumulators, staging) kept for reuse: a trainer repeats
 * the same bucket sizes every step, and fresh multi-megabyte allocations
 * cost a page fault and a zeroed page per 4 KiB. */
#define NODE_BUF_CACHE 16

typedef struct ded_round ded_round;
typedef struct ded_peer ded_peer;

/* One frame waiting to be written. The head is either |owned| (a control
 * frame built in full) or the inline |hdr| of a data frame whose payload
 * |ref| points into a round's buffer, never copied. */
typedef struct sendq_item {
  struct sendq_item *next;
  ded_round *round; /* set when |ref| points into |round|'s memory */
  bool ref_user;    /* |ref| is in the caller's buffer (else the round's accumulator) */
  uint8_t *owned;
  size_t owned_len;
  uint8_t hdr[DED_DATA_HDR_BYTES];
  const uint8_t *ref;
  size_t ref_len;
  size_t pos; /* bytes of head+payload already handed to the driver */
  bool partial; /* the rest of a frame begun on this connection: never moved */
} sendq_item;

typedef struct sendq {
  sendq_item *head;
  sendq_item *tail;
} sendq;

typedef enum conn_state {
  CONN_CONNECTING,  /* outbound, waiting for the driver to connect */
  CONN_AWAIT_HELLO, /* established; the peer's HELLO has not arrived */
  CONN_READY,       /* the peer is known; any frame may flow */
  CONN_DEAD,        /* closed; reaped at the end of the entry point */
} conn_state;

/* Priority classes of output: control frames overtake results, results
 * overtake contributions (all-gather latency is what members wait on). */
enum { Q_CTRL, Q_RESULT, Q_DATA, Q_COUNT };

typedef struct ded_conn {
  uint32_t id;
  conn_state state;
  bool outbound;
  int boot_idx; /* index into the bootstrap list, or -1 */
  uint64_t opened_ns;
  ded_addr remote;
  ded_peer *peer;
  ded_frame_dec dec;
  sendq_item *cur; /* partially written frame; it finishes first */
  sendq q[Q_COUNT];
} ded_conn;

struct ded_peer {
  uint8_t id[DED_ID_BYTES];
  char sid[9];
  ded_conn *conn; /* the ready connection we send on */
  bool connecting;
  bool left;
  uint64_t known_since_ns;
  uint64_t next_connect_ns;
  uint32_t backoff_ms;
  unsigned addr_idx;
};

typedef enum round_state {
  ROUND_WAIT_PREV, /* needs the previous round's commit, or the rendezvous */
  ROUND_JOINING,   /* coordinator chosen; its connection is not ready yet */
  ROUND_JOINED,    /* JOIN sent; waiting for COMMIT */
  ROUND_RUNNING,   /* reduce-scatter and all-gather */
  ROUND_DRAINING,  /* reported; results to others still queued */
  ROUND_DEAD,      /* reaped at the end of the entry point */
} round_state;

/* A data frame that overtook its round's COMMIT. */
typedef struct early_frame {
  struct early_frame *next;
  uint8_t type;
  uint8_t from[DED_ID_BYTES];
  size_t len;
  uint8_t payload[];
} early_frame;

struct ded_round {
  uint64_t no;
  round_state state;
  bool genesis;
  ded_round_args a;
  size_t es; /* element size */
  uint8_t coord[DED_ID_BYTES];
  uint64_t deadline_ns;
  /* From the commit. */
  ded_msg_commit commit;
  unsigned me;
  double total_w;
  uint64_t chunk; /* elements per chunk */
  /* Reducer of our own shard. */
  uint64_t my_off, my_len, my_nchunks;
  uint8_t *acc;
  uint16_t *next_m;   /* per chunk: next member to add, in commit order */
  uint8_t *recv_bits; /* (member, chunk) contributions received */
  uint8_t **staging;  /* per member: out-of-order contributions */
  uint64_t reduced;
  /* All-gather. */
  uint64_t *res_base; /* per member: index of its first chunk in res_bits */
  uint8_t *res_bits;
  uint64_t res_expected, res_got;
  /* Data that arrived before the commit. */
  early_frame *early_head, *early_tail;
  size_t early_bytes;
  /* Queued frames pointing into our memory. */
  unsigned refs_user, refs_acc;
  bool reported;
};

/* A round we coordinate. */
typedef struct coord_round {
  ded_gather g;
  uint64_t deadline_ns;
  bool committed;
  uint8_t *commit_frame; /* kept to answer late joiners */
  size_t commit_len;
} coord_round;

typedef struct boot_slot {
  ded_addr addr;
  uint64_t next_try_ns;
  uint32_t backoff_ms;
  bool self;       /* it was our own address */
  bool reached;    /* a peer answered there once: from now on it is a peer like any */
  bool connecting; /* an attempt is in flight */
} boot_slot;

enum boot_state { BOOT_IDLE, BOOT_RUNNING, BOOT_DONE, BOOT_FAILED };

struct ded_node {
  ded_node_settings s;
  char run[DED_RUN_NAME_MAX + 1];
  ded_node_callbacks cb;
  void *user;
  const ded_mem *mem;
  ded_ident ident;
  char sid[9];
  uint8_t run_id[DED_RUN_ID_BYTES];
  ded_table table;
  ded_record rec;
  uint8_t rec_bytes[DED_RECORD_BYTES_MAX];
  size_t rec_len;
  uint64_t rec_refresh_ns;
  /* Connections, by slot: id = gen << 16 | slot. */
  ded_conn **conns;
  uint16_t *conn_gen;
  uint32_t nslots;
  uint32_t nconns;
  /* Peers, sorted by id. */
  ded_peer **peers;
  size_t npeers, peers_cap;
  /* Our rounds, in submission order. */
  ded_round *rounds[DED_ROUNDS_ACTIVE_MAX];
  unsigned nrounds;
  uint64_t next_round;
  /* The last membership we know (lineage): round |members_round|'s, and
   * the one before it (|prev|, round members_round - 1's, or none). */
  bool have_members;
  uint64_t members_round;
  uint8_t (*members)[DED_ID_BYTES];
  unsigned nmembers;
  uint8_t (*prev)[DED_ID_BYTES];
  unsigned nprev;
  /* Rounds we coordinate (open or recently committed). */
  coord_round **coords;
  size_t ncoords, coords_cap;
  /* Bootstrap. */
  enum boot_state boot;
  uint64_t boot_deadline_ns;
  boot_slot boot_slots[DED_BOOTSTRAP_MAX];
  /* Freed round buffers, for reuse (exact sizes). */
  struct {
    void *p;
    size_t len;
  } buf_cache[NODE_BUF_CACHE];
  unsigned nbuf_cache;
  uint64_t tick_ns;
  uint64_t now_ns; /* time of the entry point being run */
  bool wake_soon;  /* something needs the fast tick: set where work appears */
  bool leaving;
  bool reap_needed;
};

/* ------------------------------------------------------------------ */
/* 2. logging and small helpers                                        */
/* ------------------------------------------------------------------ */

DED_PRINTF(3, 4)
static void node_log(ded_node *node, int level, const char *fmt, ...) {
  if (!node->cb.log || level > node->s.log_level) return;
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  node->cb.log(node->user, level, line);
}

static uint64_t node_wall_ms(const ded_node *node, uint64_t now_ns) {
  int64_t wall = (int64_t)now_ns + node->s.wall_offset_ns;
  return wall < 0 ? 0 : (uint64_t)wall / 1000000u;
}

static bool id_is_me(const ded_node *node, const uint8_t id[DED_ID_BYTES]) {
  return memcmp(node->ident.id, id, DED_ID_BYTES) == 0;
}

static void node_emit(ded_node *node, int type, int status, const uint8_t *peer) {
  if (!node->cb.event) return;
  ded_event ev;
  memset(&ev, 0, sizeof ev);
  ev.type = type;
  ev.status = status;
  if (peer) memcpy(ev.peer, peer, DED_ID_BYTES);
  node->cb.event(node->user, &ev);
}

/* A round buffer of |len| bytes, from the cache when one fits exactly. */
static void *node_buf_get(ded_node *node, size_t len) {
  for (unsigned i = 0; i < node->nbuf_cache; i++)
    if (node->buf_cache[i].len == len) {
      void *p = node->buf_cache[i].p;
      node->buf_cache[i] = node->buf_cache[--node->nbuf_cache];
      return p;
    }
  return ded_mem_malloc(node->mem, len);
}

static void node_buf_put(ded_node *node, void *p, size_t len) {
  if (!p) return;
  if (node->nbuf_cache == NODE_BUF_CACHE) { /* evict the oldest */
    ded_mem_free(node->mem, node->buf_cache[0].p);
    memmove(&node->buf_cache[0], &node->buf_cache[1], (NODE_BUF_CACHE - 1) * sizeof node->buf_cache[0]);
    node->nbuf_cache--;
  }
  node->buf_cache[node->nbuf_cache].p = p;
  node->buf_cache[node->nbuf_cache].len = len;
  node->nbuf_cache++;
}

static void bit_set(uint8_t *bits, uint64_t i) { bits[i >> 3] |= (uint8_t)(1u << (i & 7)); }
static bool bit_get(const uint8_t *bits, uint64_t i) { return bits[i >> 3] >> (i & 7) & 1; }

/* ------------------------------------------------------------------ */
/* 3. send queues                                                      */
/* ------------------------------------------------------------------ */

static size_t item_head_len(const sendq_item *it) {
  return it->owned ? it->owned_len : DED_DATA_HDR_BYTES;
}

static const uint8_t *item_head(const sendq_item *it) { return it->owned ? it->owned : it->hdr; }

static size_t item_total(const sendq_item *it) { return item_head_len(it) + it->ref_len; }

static void round_unref(ded_node *node, ded_round *r, bool user);
static void conn_close(ded_node *node, ded_conn *c, int why, bool notify);

static void item_free(ded_node *node, sendq_item *it) {
  if (it->round) round_unref(node, it->round, it->ref_user);
  ded_mem_free(node->mem, it->owned);
  ded_mem_free(node->mem, it);
}

static void sendq_push(sendq *q, sendq_item *it) {
  it->next = NULL;
  if (q->tail)
    q->tail->next = it;
  else
    q->head = it;
  q->tail = it;
}

static bool conn_has_output(const ded_conn *c) {
  if (c->cur) return true;
  for (int i = 0; i < Q_COUNT; i++)
    if (c->q[i].head) return true;
  return false;
}

static void conn_enqueue(ded_node *node, ded_conn *c, int cls, sendq_item *it) {
  bool was_idle = !conn_has_output(c);
  sendq_push(&c->q[cls], it);
  if (was_idle && node->cb.want_write) node->cb.want_write(node->user, c->id);
}

/* Queues a control frame built by |encode| into a buffer of |cap| bytes. */
static int conn_send_ctrl(ded_node *node, ded_conn *c, const uint8_t *frame, size_t len) {
  if (c->state == CONN_DEAD) return 0;
  sendq_item *it = ded_mem_calloc(node->mem, 1, sizeof *it);
  uint8_t *copy = ded_mem_malloc(node->mem, len);
  if (!it || !copy) {
    ded_mem_free(node->mem, it);
    ded_mem_free(node->mem, copy);
    return DED_ERR_NOMEM;
  }
  memcpy(copy, frame, len);
  it->owned = copy;
  it->owned_len = len;
  conn_enqueue(node, c, Q_CTRL, it);
  return 0;
}

/* Queues a DATA or RESULT frame whose elements stay in |r|'s memory. */
static int conn_send_data(ded_node *node, ded_conn *c, ded_round *r, uint8_t type, uint64_t off,
                          const uint8_t *elems, size_t len, bool user) {
  sendq_item *it = ded_mem_calloc(node->mem, 1, sizeof *it);
  if (!it) return DED_ERR_NOMEM;
  ded_msg_data_hdr_encode(it->hdr, type, r->no, off, len);
  it->ref = elems;
  it->ref_len = len;
  it->round = r;
  it->ref_user = user;
  if (user)
    r->refs_user++;
  else
    r->refs_acc++;
  conn_enqueue(node, c, type == DED_MSG_RESULT ? Q_RESULT : Q_DATA, it);
  return 0;
}

/*
 * Detaches |r| from every queue: unsent frames of |r| (only those into the
 * caller's buffer when |user_only|) are dropped, and a frame already half
 * written gets its remaining payload copied, since the stream must stay
 * whole but the memory is about to go back to the caller.
 */
static void round_detach_output(ded_node *node, ded_round *r, bool user_only) {
  for (uint32_t s = 0; s < node->nslots; s++) {
    ded_conn *c = node->conns[s];
    if (!c) continue;
    for (int cls = 0; cls < Q_COUNT; cls++) {
      sendq *q = &c->q[cls];
      sendq_item **pp = &q->head, *prev = NULL;
      while (*pp) {
        sendq_item *it = *pp;
        if (it->round == r && (!user_only || it->ref_user)) {
          *pp = it->next;
          if (q->tail == it) q->tail = prev;
          item_free(node, it);
        } else {
          prev = it;
          pp = &it->next;
        }
      }
    }
    sendq_item *it = c->cur;
    if (it && it->round == r && (!user_only || it->ref_user)) {
      size_t head = item_head_len(it), total = item_total(it);
      uint8_t *copy = ded_mem_malloc(node->mem, total - it->pos);
      if (!copy) { /* cannot keep the stream whole: the connection goes */
        round_unref(node, r, it->ref_user);
        it->round = NULL;
        it->ref = NULL;
        it->ref_len = 0;
        conn_close(node, c, DED_ERR_NOMEM, true);
        continue;
      }
      size_t o = 0;
      if (it->pos < head) {
        memcpy(copy, item_head(it) + it->pos, head - it->pos);
        o = head - it->pos;
      }
      size_t ref_from = it->pos > head ? it->pos - head : 0;
      memcpy(copy + o, it->ref + ref_from, it->ref_len - ref_from);
      round_unref(node, r, it->ref_user);
      ded_mem_free(node->mem, it->owned);
      it->owned = copy;
      it->owned_len = total - it->pos;
      it->ref = NULL;
      it->ref_len = 0;
      it->round = NULL;
      it->pos = 0;
      it->partial = true;
    }
  }
}

/* Moves every frame queued on |from| to the end of |to|'s queues. */
static void conn_move_output(ded_node *node, ded_conn *from, ded_conn *to) {
  bool was_idle = !conn_has_output(to);
  sendq_item *cur = from->cur;
  from->cur = NULL;
  if (cur && cur->partial) {
    item_free(node, cur); /* the tail of a frame the other stream never began */
  } else if (cur) {
    cur->pos = 0;
    int cls = cur->owned ? Q_CTRL : cur->hdr[4] == DED_MSG_RESULT ? Q_RESULT : Q_DATA;
    sendq_push(&to->q[cls], cur);
  }
  for (int cls = 0; cls < Q_COUNT; cls++) {
    sendq_item *it = from->q[cls].head;
    while (it) {
      sendq_item *next = it->next;
      if (it->partial)
        item_free(node, it);
      else
        sendq_push(&to->q[cls], it);
      it = next;
    }
    from->q[cls].head = from->q[cls].tail = NULL;
  }
  if (was_idle && conn_has_output(to) && node->cb.want_write) node->cb.want_write(node->user, to->id);
}

/* ------------------------------------------------------------------ */
/* 4. connections                                                      */
/* ------------------------------------------------------------------ */

static ded_conn *conn_get(const ded_node *node, uint32_t id) {
  uint32_t slot = id & 0xffff;
  if (slot >= node->nslots) return NULL;
  ded_conn *c = node->conns[slot];
  return c && c->id == id && c->state != CONN_DEAD ? c : NULL;
}

static ded_conn *conn_new(ded_node *node, bool outbound, const ded_addr *remote) {
  if (node->nconns >= DED_CONNS_MAX) return NULL;
  uint32_t slot = 0;
  while (slot < node->nslots && node->conns[slot]) slot++;
  if (slot == node->nslots) {
    uint32_t n = node->nslots ? node->nslots * 2 : 16;
    ded_conn **v = ded_mem_realloc(node->mem, node->conns, n * sizeof *v);
    if (!v) return NULL;
    node->conns = v;
    uint16_t *g = ded_mem_realloc(node->mem, node->conn_gen, n * sizeof *g);
    if (!g) return NULL;
    node->conn_gen = g;
    for (uint32_t i = node->nslots; i < n; i++) {
      v[i] = NULL;
      g[i] = 0;
    }
    node->nslots = n;
  }
  ded_conn *c = ded_mem_calloc(node->mem, 1, sizeof *c);
  if (!c) return NULL;
  node->conn_gen[slot] = (uint16_t)(node->conn_gen[slot] + 1 ? node->conn_gen[slot] + 1 : 1);
  c->id = (uint32_t)node->conn_gen[slot] << 16 | slot;
  c->outbound = outbound;
  c->boot_idx = -1;
  if (remote) c->remote = *remote;
  c->state = outbound ? CONN_CONNECTING : CONN_AWAIT_HELLO;
  c->opened_ns = node->now_ns;
  node->wake_soon = true; /* its HELLO has a deadline */
  ded_frame_dec_init(&c->dec, node->mem);
  node->conns[slot] = c;
  node->nconns++;
  return c;
}

static void peer_conn_lost(ded_node *node, ded_peer *p, ded_conn *c, int why);

/* Marks |c| dead and, if |notify|, tells the driver; the memory goes in
 * node_reap. */
static void conn_close(ded_node *node, ded_conn *c, int why, bool notify) {
  if (c->state == CONN_DEAD) return;
  conn_state was = c->state;
  c->state = CONN_DEAD;
  node->reap_needed = true;
  node->wake_soon = true; /* a retry, or a round to reconsider */
  if (notify && node->cb.close) node->cb.close(node->user, c->id);
  if (c->boot_idx >= 0) node->boot_slots[c->boot_idx].connecting = false;
  if (c->peer) {
    if (c->outbound && was != CONN_READY) c->peer->connecting = false;
    peer_conn_lost(node, c->peer, c, why);
  }
}

static void conn_free(ded_node *node, ded_conn *c) {
  if (c->cur) item_free(node, c->cur);
  for (int cls = 0; cls < Q_COUNT; cls++) {
    sendq_item *it = c->q[cls].head;
    while (it) {
      sendq_item *next = it->next;
      item_free(node, it);
      it = next;
    }
  }
  ded_frame_dec_free(&c->dec);
  node->conns[c->id & 0xffff] = NULL;
  node->nconns--;
  ded_mem_free(node->mem, c);
}

/* ------------------------------------------------------------------ */
/* 5. peers and records                                                */
/* ------------------------------------------------------------------ */

static size_t peer_lower_bound(const ded_node *node, const uint8_t id[DED_ID_BYTES]) {
  size_t lo = 0, hi = node->npeers;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (memcmp(node->peers[mid]->id, id, DED_ID_BYTES) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static ded_peer *peer_find(const ded_node *node, const uint8_t id[DED_ID_BYTES]) {
  size_t i = peer_lower_bound(node, id);
  if (i < node->npeers && memcmp(node->peers[i]->id, id, DED_ID_BYTES) == 0) return node->peers[i];
  return NULL;
}

static ded_peer *peer_get_or_add(ded_node *node, const uint8_t id[DED_ID_BYTES], uint64_t now_ns) {
  size_t i = peer_lower_bound(node, id);
  if (i < node->npeers && memcmp(node->peers[i]->id, id, DED_ID_BYTES) == 0) return node->peers[i];
  if (node->npeers >= DED_PEERS_MAX) return NULL;
  if (node->npeers == node->peers_cap) {
    size_t cap = node->peers_cap ? node->peers_cap * 2 : 16;
    ded_peer **v = ded_mem_realloc(node->mem, node->peers, cap * sizeof *v);
    if (!v) return NULL;
    node->peers = v;
    node->peers_cap = cap;
  }
  ded_peer *p = ded_mem_calloc(node->mem, 1, sizeof *p);
  if (!p) return NULL;
  memcpy(p->id, id, DED_ID_BYTES);
  ded_id_short(id, p->sid);
  p->known_since_ns = now_ns;
  p->backoff_ms = NODE_BACKOFF_MS_MIN;
  memmove(&node->peers[i + 1], &node->peers[i], (node->npeers - i) * sizeof *node->peers);
  node->peers[i] = p;
  node->npeers++;
  node->wake_soon = true; /* to call it, or to see whether it calls us */
  return p;
}

/* The record we hold for |p|, or NULL. */
static const ded_record *peer_record(ded_node *node, const ded_peer *p) {
  ded_table_entry *e = ded_table_find(&node->table, p->id);
  return e ? &e->rec : NULL;
}

/* A peer that takes part in rounds and that we can talk to right now. */
static bool peer_participates(ded_node *node, const ded_peer *p) {
  if (!p->conn || p->left) return false;
  const ded_record *rec = peer_record(node, p);
  return rec && !(rec->flags & DED_RECORD_F_NO_ROUNDS);
}

static int node_build_record(ded_node *node, uint64_t now_ns) {
  ded_record *rec = &node->rec;
  rec->mode = node->s.mode;
  rec->flags = node->s.no_rounds ? DED_RECORD_F_NO_ROUNDS : 0;
  memcpy(rec->run_id, node->run_id, DED_RUN_ID_BYTES);
  uint64_t wall = node_wall_ms(node, now_ns);
  rec->seq = DED_MAX(rec->seq + 1, wall);
  rec->issued_ms = wall;
  rec->ttl_ms = node->s.record_ttl_ms;
  rec->naddr = (uint8_t)node->s.n_announce;
  for (unsigned i = 0; i < node->s.n_announce; i++) rec->addr[i] = node->s.announce[i];
  ded_record_sign(rec, &node->ident);
  int n = ded_record_encode(rec, node->rec_bytes, sizeof node->rec_bytes);
  if (n < 0) return n;
  node->rec_len = (size_t)n;
  int rv = ded_table_upsert(&node->table, rec);
  node->rec_refresh_ns = now_ns + (uint64_t)node->s.record_ttl_ms * 1000000u / 3;
  return rv < 0 ? rv : 0;
}

/* Sends one record to every ready connection but |except|. */
static void node_flood_record(ded_node *node, const uint8_t *rec, size_t len, ded_conn *except) {
  uint8_t frame[DED_FRAME_HDR_BYTES + 4 + DED_RECORD_BYTES_MAX];
  ded_wr w = ded_wr_init(frame, sizeof frame);
  ded_msg_records_wr rw;
  ded_msg_records_begin(&rw, &w);
  if (ded_msg_records_add(&rw, rec, len) != 0) return;
  ded_msg_records_end(&rw);
  for (uint32_t s = 0; s < node->nslots; s++) {
    ded_conn *c = node->conns[s];
    if (c && c != except && c->state == CONN_READY) conn_send_ctrl(node, c, frame, w.pos);
  }
}

/* Sends our whole table to a connection that just became ready. */
static void node_send_table(ded_node *node, ded_conn *c) {
  size_t cap = DED_MIN((size_t)DED_FRAME_MAX,
                       DED_FRAME_HDR_BYTES + 2 + node->table.n * (2 + DED_RECORD_BYTES_MAX));
  uint8_t *frame = ded_mem_malloc(node->mem, cap);
  if (!frame) return;
  size_t i = 0;
  while (i < node->table.n) {
    ded_wr w = ded_wr_init(frame, cap);
    ded_msg_records_wr rw;
    ded_msg_records_begin(&rw, &w);
    for (; i < node->table.n; i++) {
      const ded_table_entry *e = &node->table.v[i];
      if (c->peer && memcmp(e->id, c->peer->id, DED_ID_BYTES) == 0) continue;
      uint8_t buf[DED_RECORD_BYTES_MAX];
      int n = ded_record_encode(&e->rec, buf, sizeof buf);
      if (n < 0) continue;
      if (ded_msg_records_add(&rw, buf, (size_t)n) != 0) break;
    }
    ded_msg_records_end(&rw);
    if (rw.n > 0) conn_send_ctrl(node, c, frame, w.pos);
  }
  ded_mem_free(node->mem, frame);
}

static void round_try_join(ded_node *node, ded_round *r, uint64_t now_ns);
static void coord_evaluate_all(ded_node *node, uint64_t now_ns);
static void rounds_on_peer_down(ded_node *node, ded_peer *p, uint64_t now_ns);

/* Starts an outbound connection to |p| if policy says we should. */
static void peer_maybe_connect(ded_node *node, ded_peer *p, uint64_t now_ns) {
  if (node->leaving || p->left || p->conn || p->connecting || now_ns < p->next_connect_ns) return;
  const ded_record *rec = peer_record(node, p);
  if (!rec || rec->naddr == 0) return;
  /* The smaller id calls, so a pair normally ends up with one connection;
   * the other side calls too if nothing happened for a while, and a peer
   * that accepts nothing (client) always calls. */
  bool mine = memcmp(node->ident.id, p->id, DED_ID_BYTES) < 0;
  if (!mine && node->s.mode != DED_MODE_CLIENT && now_ns < p->known_since_ns + NODE_CONNECT_PATIENCE_NS)
    return;
  const ded_addr *addr = &rec->addr[p->addr_idx % rec->naddr];
  ded_conn *c = conn_new(node, true, addr);
  if (!c) return;
  c->peer = p;
  p->connecting = true;
  char a[64];
  ded_addr_format(addr, a, sizeof a);
  node_log(node, DED_LOG_DEBUG, "connecting to peer %s at %s", p->sid, a);
  if (node->cb.connect(node->user, c->id, addr) != 0) conn_close(node, c, DED_ERR_PEER_LOST, true);
}

/* Called when a connection of |p| dies. */
static void peer_conn_lost(ded_node *node, ded_peer *p, ded_conn *c, int why) {
  if (p->conn != c) {
    if (!p->conn && c->outbound) { /* a failed attempt: back off, try the next address */
      p->next_connect_ns = node->now_ns + (uint64_t)p->backoff_ms * 1000000u;
      p->addr_idx++;
      p->backoff_ms = DED_MIN(p->backoff_ms * 2, NODE_BACKOFF_MS_MAX);
    }
    return;
  }
  /* Another ready connection to the same peer takes over, with what was
   * still queued on the dead one: the peer never received those frames
   * whole (a frame half written is sent again from its start). */
  for (uint32_t s = 0; s < node->nslots; s++) {
    ded_conn *o = node->conns[s];
    if (o && o != c && o->peer == p && o->state == CONN_READY) {
      p->conn = o;
      conn_move_output(node, c, o);
      return;
    }
  }
  p->conn = NULL;
  p->backoff_ms = NODE_BACKOFF_MS_MIN;
  /* While we leave, peers closing on us is the expected answer to LEAVE. */
  if (p->left || node->leaving)
    node_log(node, DED_LOG_INFO, "peer %s %s", p->sid, p->left ? "left" : "closed");
  else
    node_log(node, DED_LOG_WARN, "peer %s lost (%s)", p->sid, ded_strerror(why));
  node_emit(node, DED_EVENT_PEER_DOWN, why, p->id);
  rounds_on_peer_down(node, p, node->now_ns);
}

/* Verifies and stores a record that arrived on |from| (NULL: in a HELLO,
 * whose sender we are talking to already). */
static int node_take_record(ded_node *node, const uint8_t *bytes, size_t len, ded_conn *from,
                            uint64_t now_ns, ded_peer **out) {
  ded_record rec;
  int rv = ded_record_decode(bytes, len, &rec);
  if (rv) return rv;
  uint8_t id[DED_ID_BYTES];
  ded_peer_id(rec.pk, id);
  if (out) *out = NULL;
  if (id_is_me(node, id)) return 0; /* our own, echoed back */
  /* Flooding brings each record from every neighbour: only one that would
   * replace what we hold is worth a signature check. */
  ded_table_entry *have = ded_table_find(&node->table, id);
  if (have && have->rec.seq >= rec.seq && from) return 0;
  rv = ded_record_verify(&rec, node->run_id, node_wall_ms(node, now_ns));
  if (rv) return rv;
  ded_peer *p = peer_get_or_add(node, id, now_ns);
  if (!p) return DED_ERR_LIMIT;
  if (out) *out = p;
  if (p->left) return 0;
  rv = ded_table_upsert(&node->table, &rec);
  if (rv < 0) return rv;
  if (rv == 1) {
    node_flood_record(node, bytes, len, from);
    if (from) peer_maybe_connect(node, p, now_ns);
  }
  return 0;
}

/* ------------------------------------------------------------------ */
/* 6. member side of a round                                           */
/* ------------------------------------------------------------------ */

static ded_round *round_find(ded_node *node, uint64_t no) {
  for (unsigned i = 0; i < node->nrounds; i++)
    if (node->rounds[i]->no == no && node->rounds[i]->state != ROUND_DEAD) return node->rounds[i];
  return NULL;
}

static void round_free(ded_node *node, ded_round *r) {
  ded_msg_commit_free(&r->commit, node->mem);
  node_buf_put(node, r->acc, r->my_len * r->es);
  ded_mem_free(node->mem, r->next_m);
  ded_mem_free(node->mem, r->recv_bits);
  if (r->staging)
    for (unsigned i = 0; i < r->commit.k; i++) node_buf_put(node, r->staging[i], r->my_len * r->es);
  ded_mem_free(node->mem, r->staging);
  ded_mem_free(node->mem, r->res_base);
  ded_mem_free(node->mem, r->res_bits);
  early_frame *e = r->early_head;
  while (e) {
    early_frame *next = e->next;
    ded_mem_free(node->mem, e);
    e = next;
  }
  ded_mem_free(node->mem, r);
}

static void round_maybe_dead(ded_node *node, ded_round *r) {
  if (r->reported && r->refs_user == 0 && r->refs_acc == 0) {
    r->state = ROUND_DEAD;
    node->reap_needed = true;
  }
}

static void round_unref(ded_node *node, ded_round *r, bool user) {
  if (user) {
    DED_ASSERT(r->refs_user > 0);
    r->refs_user--;
  } else {
    DED_ASSERT(r->refs_acc > 0);
    r->refs_acc--;
  }
  round_maybe_dead(node, r);
}

static void node_lose_lineage(ded_node *node) { node->have_members = false; }

/* Hands the round back to the caller, exactly once. After this, the
 * caller's buffer is never touched again. */
static void round_report(ded_node *node, ded_round *r, int status, bool alone, bool late) {
  DED_ASSERT(!r->reported);
  /* A round that dies before its commit leaves us without the membership
   * the next coordinator is chosen from. */
  if (r->state < ROUND_RUNNING && status != 0 &&
      !(node->have_members && node->members_round >= r->no))
    node_lose_lineage(node);
  /* Reported first: detaching can close a connection, whose peer-down
   * handling must see this round as finished. */
  r->reported = true;
  r->state = ROUND_DRAINING;
  round_detach_output(node, r, status == 0);
  DED_ASSERT(r->refs_user == 0);
  ded_round_result res;
  memset(&res, 0, sizeof res);
  res.status = status;
  res.round = r->no;
  res.alone = alone;
  res.late = late;
  uint8_t *ids = NULL;
  if (status == 0 && !alone) {
    res.contributors = r->commit.k;
    res.total_weight = r->total_w;
    ids = ded_mem_malloc(node->mem, (size_t)r->commit.k * DED_ID_BYTES);
    for (unsigned i = 0; ids && i < r->commit.k; i++)
      memcpy(ids + (size_t)i * DED_ID_BYTES, r->commit.members[i].id, DED_ID_BYTES);
    res.members = ids;
  } else {
    res.contributors = 1;
    res.total_weight = r->a.weight;
  }
  round_maybe_dead(node, r);
  node->cb.round_done(node->user, r->a.ctx, &res);
  ded_mem_free(node->mem, ids);
}

static void round_fail(ded_node *node, ded_round *r, int status) {
  if (r->reported) return;
  node_log(node, DED_LOG_ERROR, "round %llu failed: %s", (unsigned long long)r->no,
           ded_strerror(status));
  round_report(node, r, status, false, false);
}

/* The lineage: round |no|'s membership, sorted ids. */
static int node_set_members(ded_node *node, uint64_t no, const ded_msg_commit *cm) {
  uint8_t(*m)[DED_ID_BYTES] = ded_mem_malloc(node->mem, (size_t)cm->k * DED_ID_BYTES);
  if (!m) return DED_ERR_NOMEM;
  for (unsigned i = 0; i < cm->k; i++) memcpy(m[i], cm->members[i].id, DED_ID_BYTES);
  ded_mem_free(node->mem, node->prev);
  node->prev = NULL;
  node->nprev = 0;
  if (node->have_members && node->members_round + 1 == no) {
    node->prev = node->members;
    node->nprev = node->nmembers;
  } else {
    ded_mem_free(node->mem, node->members);
  }
  node->members = m;
  node->nmembers = cm->k;
  node->members_round = no;
  node->have_members = true;
  return 0;
}

/* Peers we could see as members of a genesis round, us included. */
static unsigned node_genesis_view(ded_node *node, const uint8_t **min_id) {
  unsigned n = node->s.no_rounds ? 0 : 1;
  const uint8_t *best = node->s.no_rounds ? NULL : node->ident.id;
  for (size_t i = 0; i < node->npeers; i++) {
    ded_peer *p = node->peers[i];
    if (!peer_participates(node, p)) continue;
    n++;
    if (!best || memcmp(p->id, best, DED_ID_BYTES) < 0) best = p->id;
  }
  if (min_id) *min_id = best;
  return n;
}

static void coord_on_join(ded_node *node, ded_peer *from, ded_conn *via, const ded_msg_join *j,
                          uint64_t now_ns);

static void round_send_join(ded_node *node, ded_round *r, uint64_t now_ns) {
  ded_msg_join j = {r->no, r->a.dtype, r->a.count, r->a.weight, r->a.n_local,
                    r->genesis ? DED_JOIN_F_GENESIS : 0};
  if (id_is_me(node, r->coord)) {
    r->state = ROUND_JOINED;
    r->deadline_ns = now_ns + NODE_MEMBER_TIMEOUT_FACTOR * node->s.round_timeout_ns;
    coord_on_join(node, NULL, NULL, &j, now_ns);
    return;
  }
  ded_peer *p = peer_find(node, r->coord);
  if (!p || !p->conn) {
    r->state = ROUND_JOINING;
    if (p) peer_maybe_connect(node, p, now_ns);
    return;
  }
  uint8_t frame[DED_JOIN_FRAME_BYTES];
  ded_wr w = ded_wr_init(frame, sizeof frame);
  ded_msg_join_encode(&w, &j);
  DED_ASSERT(!w.err);
  r->state = ROUND_JOINED;
  r->deadline_ns = now_ns + NODE_MEMBER_TIMEOUT_FACTOR * node->s.round_timeout_ns;
  node_log(node, DED_LOG_DEBUG, "round %llu: join -> %s", (unsigned long long)r->no, p->sid);
  if (conn_send_ctrl(node, p->conn, frame, w.pos) != 0) round_fail(node, r, DED_ERR_NOMEM);
}

/* Chooses the coordinator of |r| once we can, and asks it in. */
static void round_try_join(ded_node *node, ded_round *r, uint64_t now_ns) {
  if (r->state != ROUND_WAIT_PREV && r->state != ROUND_JOINING) return;
  if (node->have_members && node->members_round + 1 == r->no) {
    r->genesis = false;
    memcpy(r->coord, node->members[ded_match_coordinator(r->no, node->nmembers)], DED_ID_BYTES);
  } else if (node->have_members) {
    return; /* the previous round's commit is still on its way */
  } else if (r->state == ROUND_JOINING && r->genesis) {
    /* Redirected to a coordinator we are still connecting to. */
  } else {
    /* No lineage: this is the swarm's first round as far as we know. The
     * rounds before it must be decided first, so only the oldest waits. */
    for (unsigned i = 0; i < node->nrounds; i++) {
      ded_round *o = node->rounds[i];
      if (o->no < r->no && !o->reported && o->state != ROUND_DEAD) return;
    }
    const uint8_t *min_id;
    if (node_genesis_view(node, &min_id) < node->s.min_peers) return; /* rendezvous */
    r->genesis = true;
    memcpy(r->coord, min_id, DED_ID_BYTES);
  }
  round_send_join(node, r, now_ns);
}

/* Tries every round that waits on lineage or a connection. */
static void rounds_advance(ded_node *node, uint64_t now_ns) {
  for (unsigned i = 0; i < node->nrounds; i++) {
    ded_round *r = node->rounds[i];
    if (r->state == ROUND_WAIT_PREV || r->state == ROUND_JOINING) round_try_join(node, r, now_ns);
  }
}

static void round_complete_if_done(ded_node *node, ded_round *r) {
  if (r->state != ROUND_RUNNING || r->reduced < r->my_nchunks || r->res_got < r->res_expected)
    return;
  node_log(node, DED_LOG_DEBUG, "round %llu: done, %u contributors", (unsigned long long)r->no,
           r->commit.k);
  round_report(node, r, 0, false, false);
}

static ded_peer *round_member_peer(ded_node *node, ded_round *r, unsigned m) {
  return peer_find(node, r->commit.members[m].id);
}

/* All contributions to chunk |c| are in: finish it and send it out. */
static int round_finish_chunk(ded_node *node, ded_round *r, uint64_t c) {
  uint64_t first = c * r->chunk;
  uint64_t n = DED_MIN(r->chunk, r->my_len - first);
  uint8_t *acc = r->acc + first * r->es;
  ded_reduce_div(r->a.dtype, acc, n, r->total_w);
  uint8_t *out = (uint8_t *)r->a.buf + (r->my_off + first) * r->es;
  ded_reduce_scale(r->a.dtype, out, acc, n, (double)r->a.n_local);
  for (unsigned m = 0; m < r->commit.k; m++) {
    if (m == r->me) continue;
    /* A member that is gone cannot use the result; our round goes on. */
    ded_peer *p = round_member_peer(node, r, m);
    if (!p || !p->conn) continue;
    int rv = conn_send_data(node, p->conn, r, DED_MSG_RESULT, r->my_off + first, acc, n * r->es,
                            false);
    if (rv) return rv;
  }
  r->reduced++;
  return 0;
}

/* Adds, in commit order, every contribution to chunk |c| that is ready.
 * |direct| is member |direct_m|'s data for |c| straight off the wire. */
static int round_advance_chunk(ded_node *node, ded_round *r, uint64_t c, const uint8_t *direct,
                               unsigned direct_m) {
  uint64_t first = c * r->chunk;
  uint64_t n = DED_MIN(r->chunk, r->my_len - first);
  uint8_t *acc = r->acc + first * r->es;
  unsigned k = r->commit.k;
  while (r->next_m[c] < k) {
    unsigned m = r->next_m[c];
    const uint8_t *src;
    if (m == r->me)
      src = (const uint8_t *)r->a.buf + (r->my_off + first) * r->es;
    else if (direct && m == direct_m)
      src = direct;
    else if (bit_get(r->recv_bits, (uint64_t)m * r->my_nchunks + c))
      src = r->staging[m] + first * r->es;
    else
      break;
    double a = r->commit.members[m].weight / (double)r->commit.members[m].n_local;
    ded_reduce_axpy(r->a.dtype, acc, src, n, a, m == 0);
    r->next_m[c]++;
  }
  return r->next_m[c] == k ? round_finish_chunk(node, r, c) : 0;
}

static void round_take_frame(ded_node *node, ded_round *r, ded_peer *from, ded_conn *via,
                             uint8_t type, const uint8_t *payload, size_t len);

/* Sets up the reduce-scatter and all-gather of a committed round. */
static int round_start(ded_node *node, ded_round *r, uint64_t now_ns) {
  const ded_msg_commit *cm = &r->commit;
  unsigned k = cm->k;
  r->chunk = cm->chunk_elems;
  r->my_off = cm->members[r->me].shard_off;
  uint64_t *off = ded_mem_malloc(node->mem, k * sizeof *off);
  if (!off) return DED_ERR_NOMEM;
  for (unsigned m = 0; m < k; m++) off[m] = cm->members[m].shard_off;
  r->my_len = ded_shard_len(off, k, cm->count, r->me);
  r->my_nchunks = ded_chunks(r->my_len, r->chunk);
  r->acc = node_buf_get(node, r->my_len * r->es);
  r->next_m = ded_mem_calloc(node->mem, r->my_nchunks, sizeof *r->next_m);
  r->recv_bits = ded_mem_calloc(node->mem, ((uint64_t)k * r->my_nchunks + 7) / 8, 1);
  r->staging = ded_mem_calloc(node->mem, k, sizeof *r->staging);
  r->res_base = ded_mem_calloc(node->mem, k + 1, sizeof *r->res_base);
  int rv = (!r->acc || !r->next_m || !r->recv_bits || !r->staging || !r->res_base) ? DED_ERR_NOMEM : 0;
  for (unsigned m = 0; m < k && rv == 0; m++)
    r->res_base[m + 1] = r->res_base[m] + ded_chunks(ded_shard_len(off, k, cm->count, m), r->chunk);
  if (rv == 0) {
    r->res_bits = ded_mem_calloc(node->mem, (r->res_base[k] + 7) / 8, 1);
    if (!r->res_bits) rv = DED_ERR_NOMEM;
  }
  r->res_expected = rv == 0 ? r->res_base[k] - (r->res_base[r->me + 1] - r->res_base[r->me]) : 0;
  /* Reduce-scatter: our vector, cut by shard and chunk, to each reducer. */
  for (unsigned m = 0; m < k && rv == 0; m++) {
    if (m == r->me) continue;
    ded_peer *p = round_member_peer(node, r, m);
    if (!p || !p->conn) {
      rv = DED_ERR_PEER_LOST;
      break;
    }
    uint64_t len = ded_shard_len(off, k, cm->count, m);
    for (uint64_t e = 0; e < len && rv == 0; e += r->chunk) {
      uint64_t n = DED_MIN(r->chunk, len - e);
      const uint8_t *src = (const uint8_t *)r->a.buf + (off[m] + e) * r->es;
      rv = conn_send_data(node, p->conn, r, DED_MSG_DATA, off[m] + e, src, n * r->es, true);
    }
  }
  ded_mem_free(node->mem, off);
  if (rv) return rv;
  r->state = ROUND_RUNNING;
  r->deadline_ns = now_ns + NODE_MEMBER_TIMEOUT_FACTOR * node->s.round_timeout_ns;
  /* Our own contribution is always ready. */
  for (uint64_t c = 0; c < r->my_nchunks && rv == 0; c++) rv = round_advance_chunk(node, r, c, NULL, 0);
  if (rv) return rv;
  /* Replay what overtook the commit. */
  early_frame *e = r->early_head;
  r->early_head = r->early_tail = NULL;
  r->early_bytes = 0;
  while (e) {
    early_frame *next = e->next;
    ded_peer *from = peer_find(node, e->from);
    if (from && r->state == ROUND_RUNNING)
      round_take_frame(node, r, from, NULL, e->type, e->payload, e->len);
    ded_mem_free(node->mem, e);
    e = next;
  }
  if (r->state == ROUND_RUNNING) round_complete_if_done(node, r);
  return 0;
}

/* A COMMIT for our round |r|, from its coordinator (or from ourselves). */
static int round_on_commit(ded_node *node, ded_round *r, ded_msg_commit *cm, uint64_t now_ns) {
  int rv = node_set_members(node, cm->round, cm);
  if (rv) return rv;
  unsigned me = cm->k;
  for (unsigned i = 0; i < cm->k; i++)
    if (id_is_me(node, cm->members[i].id)) me = i;
  if (me == cm->k) {
    if (cm->dtype != r->a.dtype || cm->count != r->a.count) {
      node_log(node, DED_LOG_ERROR,
               "round %llu: this job reduces %llu elements of type %u but the swarm's round has "
               "%llu of type %u; check that every job runs the same model",
               (unsigned long long)r->no, (unsigned long long)r->a.count, r->a.dtype,
               (unsigned long long)cm->count, cm->dtype);
      round_report(node, r, DED_ERR_SIZE_MISMATCH, false, false);
    } else {
      node_log(node, DED_LOG_WARN, "round %llu closed before this peer joined; keeping local values",
               (unsigned long long)r->no);
      round_report(node, r, 0, true, true);
    }
    ded_msg_commit_free(cm, node->mem);
    return 0;
  }
  const ded_msg_member *mine = &cm->members[me];
  if (cm->dtype != r->a.dtype || cm->count != r->a.count || mine->n_local != r->a.n_local) {
    ded_msg_commit_free(cm, node->mem);
    return DED_ERR_PROTO;
  }
  r->commit = *cm;
  cm->members = NULL;
  r->me = me;
  r->total_w = 0.0;
  for (unsigned i = 0; i < r->commit.k; i++) r->total_w += r->commit.members[i].weight;
  node_log(node, DED_LOG_DEBUG, "round %llu: committed, %u members, I am %u",
           (unsigned long long)r->no, r->commit.k, me);
  if (r->commit.k == 1) {
    round_report(node, r, 0, true, false);
    return 0;
  }
  rv = round_start(node, r, now_ns);
  if (rv) round_fail(node, r, rv);
  return 0;
}

/* A DATA or RESULT frame for running round |r|. A violation is the
 * sender's fault: the caller drops it. */
static int round_on_data(ded_node *node, ded_round *r, ded_peer *from, uint8_t type,
                         const ded_msg_data *d) {
  unsigned k = r->commit.k, m = k;
  for (unsigned i = 0; i < k; i++)
    if (memcmp(r->commit.members[i].id, from->id, DED_ID_BYTES) == 0) m = i;
  if (m == k || m == r->me || d->len % r->es != 0) return DED_ERR_PROTO;
  uint64_t n = d->len / r->es;
  if (type == DED_MSG_DATA) {
    if (d->offset < r->my_off || d->offset - r->my_off >= r->my_len) return DED_ERR_PROTO;
    uint64_t first = d->offset - r->my_off;
    uint64_t c = first / r->chunk;
    if (first % r->chunk != 0 || n != DED_MIN(r->chunk, r->my_len - first)) return DED_ERR_PROTO;
    uint64_t bit = (uint64_t)m * r->my_nchunks + c;
    if (bit_get(r->recv_bits, bit)) return DED_ERR_PROTO; /* duplicate */
    bit_set(r->recv_bits, bit);
    if (r->next_m[c] == m) return round_advance_chunk(node, r, c, d->elems, m);
    if (!r->staging[m]) {
      r->staging[m] = node_buf_get(node, r->my_len * r->es);
      if (!r->staging[m]) return DED_ERR_NOMEM;
    }
    memcpy(r->staging[m] + first * r->es, d->elems, d->len);
    return 0;
  }
  /* RESULT: reducer m's finished chunk of its own shard. */
  uint64_t lo = r->commit.members[m].shard_off;
  uint64_t len = (m + 1 < k ? r->commit.members[m + 1].shard_off : r->commit.count) - lo;
  if (d->offset < lo || d->offset - lo >= len) return DED_ERR_PROTO;
  uint64_t first = d->offset - lo;
  if (first % r->chunk != 0 || n != DED_MIN(r->chunk, len - first)) return DED_ERR_PROTO;
  uint64_t bit = r->res_base[m] + first / r->chunk;
  if (bit_get(r->res_bits, bit)) return DED_ERR_PROTO;
  bit_set(r->res_bits, bit);
  uint8_t *out = (uint8_t *)r->a.buf + d->offset * r->es;
  ded_reduce_scale(r->a.dtype, out, d->elems, n, (double)r->a.n_local);
  r->res_got++;
  return 0;
}

static void conn_protocol_error(ded_node *node, ded_conn *c, int rv, const char *what);

/* Routes a data frame to |r| now, or keeps it until the commit arrives. A
 * violation drops the connection it came on (|via|; NULL for a frame kept
 * from earlier: then the peer's own). */
static void round_take_frame(ded_node *node, ded_round *r, ded_peer *from, ded_conn *via,
                             uint8_t type, const uint8_t *payload, size_t len) {
  if (!via) via = from->conn;
  if (r->state == ROUND_JOINED) {
    size_t limit = DED_EARLY_BYTES_MAX((size_t)r->a.count * r->es);
    early_frame *e = NULL;
    if (r->early_bytes + len <= limit) e = ded_mem_malloc(node->mem, sizeof *e + len);
    if (!e) {
      if (via) conn_protocol_error(node, via, DED_ERR_LIMIT, "early data");
      return;
    }
    e->next = NULL;
    e->type = type;
    memcpy(e->from, from->id, DED_ID_BYTES);
    e->len = len;
    memcpy(e->payload, payload, len);
    if (r->early_tail)
      r->early_tail->next = e;
    else
      r->early_head = e;
    r->early_tail = e;
    r->early_bytes += len;
    return;
  }
  if (r->state != ROUND_RUNNING) return;
  ded_msg_data d;
  int rv = ded_msg_data_decode(payload, len, &d);
  if (rv == 0) rv = round_on_data(node, r, from, type, &d);
  if (rv == DED_ERR_NOMEM || rv == DED_ERR_PEER_LOST) {
    round_fail(node, r, rv);
    return;
  }
  if (rv) {
    if (via) conn_protocol_error(node, via, rv, ded_msg_name(type));
    return;
  }
  round_complete_if_done(node, r);
}

/* True if round |r| still waits for anything from member |m|: a
 * contribution to our shard, or a chunk of its own shard's result. */
static bool round_needs_member(const ded_round *r, unsigned m) {
  for (uint64_t c = 0; c < r->my_nchunks; c++)
    if (!bit_get(r->recv_bits, (uint64_t)m * r->my_nchunks + c)) return true;
  for (uint64_t b = r->res_base[m]; b < r->res_base[m + 1]; b++)
    if (!bit_get(r->res_bits, b)) return true;
  return false;
}

/* A peer went away: rounds that still needed something from it cannot
 * finish (issue-3 recovery replaces this with re-reduction), genesis joins
 * find a new coordinator, and coordinators stop waiting for it. A member
 * that already gave us everything may go: it finished the round first. */
static void rounds_on_peer_down(ded_node *node, ded_peer *p, uint64_t now_ns) {
  for (unsigned i = 0; i < node->nrounds; i++) {
    ded_round *r = node->rounds[i];
    if (r->reported || r->state == ROUND_DEAD) continue;
    if ((r->state == ROUND_JOINED || r->state == ROUND_JOINING) &&
        memcmp(r->coord, p->id, DED_ID_BYTES) == 0) {
      if (r->genesis) {
        r->state = ROUND_WAIT_PREV; /* choose again among those still here */
        round_try_join(node, r, now_ns);
      } else {
        round_fail(node, r, DED_ERR_PEER_LOST);
      }
    } else if (r->state == ROUND_RUNNING) {
      for (unsigned m = 0; m < r->commit.k; m++)
        if (m != r->me && memcmp(r->commit.members[m].id, p->id, DED_ID_BYTES) == 0) {
          if (round_needs_member(r, m)) round_fail(node, r, DED_ERR_PEER_LOST);
          break;
        }
    }
  }
  coord_evaluate_all(node, now_ns);
}

/* ------------------------------------------------------------------ */
/* 7. coordinator side of a round                                      */
/* ------------------------------------------------------------------ */

static coord_round *coord_find(ded_node *node, uint64_t no) {
  for (size_t i = 0; i < node->ncoords; i++)
    if (node->coords[i]->g.round == no) return node->coords[i];
  return NULL;
}

static coord_round *coord_get(ded_node *node, uint64_t no, bool genesis, uint64_t now_ns) {
  coord_round *cr = coord_find(node, no);
  if (cr) return cr;
  if (node->ncoords == node->coords_cap) {
    size_t cap = node->coords_cap ? node->coords_cap * 2 : 8;
    coord_round **v = ded_mem_realloc(node->mem, node->coords, cap * sizeof *v);
    if (!v) return NULL;
    node->coords = v;
    node->coords_cap = cap;
  }
  cr = ded_mem_calloc(node->mem, 1, sizeof *cr);
  if (!cr) return NULL;
  ded_gather_init(&cr->g, no, genesis);
  cr->deadline_ns = now_ns + node->s.round_timeout_ns;
  node->coords[node->ncoords++] = cr;
  return cr;
}

static void coord_free(ded_node *node, coord_round *cr) {
  ded_gather_free(&cr->g, node->mem);
  ded_mem_free(node->mem, cr->commit_frame);
  ded_mem_free(node->mem, cr);
}

/* Forgets committed rounds too old to matter for late joiners. */
static void coord_prune(ded_node *node) {
  size_t out = 0;
  for (size_t i = 0; i < node->ncoords; i++) {
    coord_round *cr = node->coords[i];
    if (cr->g.round + DED_ROUNDS_AHEAD_MAX < node->next_round) {
      coord_free(node, cr);
      continue;
    }
    node->coords[out++] = cr;
  }
  node->ncoords = out;
}

/* True if |id| may still join a round we coordinate, so we wait for it. */
static bool coord_expects(ded_node *node, const uint8_t id[DED_ID_BYTES]) {
  if (id_is_me(node, id)) return !node->leaving && !node->s.no_rounds;
  ded_peer *p = peer_find(node, id);
  return p && peer_participates(node, p);
}

static void coord_send_stale(ded_node *node, ded_peer *to, uint64_t round) {
  if (!to->conn) return;
  uint8_t frame[DED_STALE_FRAME_BYTES];
  ded_wr w = ded_wr_init(frame, sizeof frame);
  ded_msg_stale m = {round, node->next_round > round ? node->next_round : round + 1};
  ded_msg_stale_encode(&w, &m);
  conn_send_ctrl(node, to->conn, frame, w.pos);
}

/* Delivers the commit to everyone who asked, ourselves included. */
static void coord_deliver(ded_node *node, coord_round *cr, uint64_t now_ns) {
  for (size_t i = 0; i < cr->g.n; i++) {
    const uint8_t *id = cr->g.v[i].id;
    if (id_is_me(node, id)) continue;
    ded_peer *p = peer_find(node, id);
    if (p && p->conn) conn_send_ctrl(node, p->conn, cr->commit_frame, cr->commit_len);
  }
  if (!ded_gather_find(&cr->g, node->ident.id)) return;
  ded_round *r = round_find(node, cr->g.round);
  if (!r || r->state != ROUND_JOINED) return;
  ded_msg_commit cm;
  int rv = ded_msg_commit_decode(cr->commit_frame + DED_FRAME_HDR_BYTES,
                                 cr->commit_len - DED_FRAME_HDR_BYTES, node->mem, &cm);
  if (rv) {
    round_fail(node, r, rv);
    return;
  }
  rv = round_on_commit(node, r, &cm, now_ns);
  ded_msg_commit_free(&cm, node->mem);
  if (rv) round_fail(node, r, rv);
  /* The commit extends our lineage: the next round can join right away
   * instead of at the next tick. */
  rounds_advance(node, now_ns);
}

/* Fixes the round: signature, members, shares. */
static void coord_commit(ded_node *node, coord_round *cr, uint64_t now_ns) {
  /* Joiners that went away before the commit are not members. */
  size_t out = 0;
  for (size_t i = 0; i < cr->g.n; i++)
    if (coord_expects(node, cr->g.v[i].id)) cr->g.v[out++] = cr->g.v[i];
  cr->g.n = out;
  cr->committed = true;
  if (cr->g.n == 0) return;
  ded_msg_commit cm;
  if (ded_gather_commit(&cr->g, node->mem, node->s.chunk_bytes, &cm) != 0) return;
  size_t cap = DED_COMMIT_FRAME_BYTES(cm.k);
  cr->commit_frame = ded_mem_malloc(node->mem, cap);
  if (cr->commit_frame) {
    ded_wr w = ded_wr_init(cr->commit_frame, cap);
    ded_msg_commit_encode(&w, &cm);
    DED_ASSERT(!w.err && w.pos == cap);
    cr->commit_len = w.pos;
  }
  node_log(node, DED_LOG_DEBUG, "round %llu: committing %u of %zu joiners",
           (unsigned long long)cr->g.round, cm.k, cr->g.n);
  ded_msg_commit_free(&cm, node->mem);
  if (cr->commit_frame) coord_deliver(node, cr, now_ns);
}

/* Commits |cr| if everyone it waits for has joined, or its time is up. */
static void coord_evaluate(ded_node *node, coord_round *cr, uint64_t now_ns) {
  if (cr->committed) return;
  bool genesis = cr->g.genesis;
  if (!genesis) {
    /* Only the lineage says whether we coordinate, and whom we wait for. */
    if (!node->have_members || node->members_round + 1 != cr->g.round) return;
    unsigned c = ded_match_coordinator(cr->g.round, node->nmembers);
    if (!id_is_me(node, node->members[c])) {
      node_log(node, DED_LOG_WARN, "round %llu: joins sent here but the coordinator is another peer",
               (unsigned long long)cr->g.round);
      cr->committed = true; /* joiners time out */
      return;
    }
  }
  if (now_ns >= cr->deadline_ns && cr->g.n > 0) goto commit;
  if (genesis) {
    if (cr->g.n < node->s.min_peers) return;
    if (!node->s.no_rounds && !ded_gather_find(&cr->g, node->ident.id)) return;
    for (size_t i = 0; i < node->npeers; i++) {
      ded_peer *p = node->peers[i];
      if (peer_participates(node, p) && !ded_gather_find(&cr->g, p->id)) return;
    }
  } else {
    /* The previous round's members, and the one before's: a member that
     * missed one round (it came late and kept its own values) is waited
     * for again in the next, instead of being late forever after. */
    for (unsigned i = 0; i < node->nmembers; i++)
      if (coord_expects(node, node->members[i]) && !ded_gather_find(&cr->g, node->members[i]))
        return;
    for (unsigned i = 0; i < node->nprev; i++)
      if (coord_expects(node, node->prev[i]) && !ded_gather_find(&cr->g, node->prev[i])) return;
  }
commit:
  coord_commit(node, cr, now_ns);
}

static void coord_evaluate_all(ded_node *node, uint64_t now_ns) {
  for (size_t i = 0; i < node->ncoords; i++) coord_evaluate(node, node->coords[i], now_ns);
}

static void coord_send_redirect(ded_node *node, ded_peer *to, uint64_t round,
                                const uint8_t id[DED_ID_BYTES]) {
  uint8_t frame[DED_REDIRECT_FRAME_BYTES];
  ded_wr w = ded_wr_init(frame, sizeof frame);
  ded_msg_redirect m;
  m.round = round;
  memcpy(m.id, id, DED_ID_BYTES);
  ded_msg_redirect_encode(&w, &m);
  conn_send_ctrl(node, to->conn, frame, w.pos);
}

/* A JOIN from |from| on |via| (both NULL: ourselves). */
static void coord_on_join(ded_node *node, ded_peer *from, ded_conn *via, const ded_msg_join *j,
                          uint64_t now_ns) {
  const uint8_t *id = from ? from->id : node->ident.id;
  bool genesis = j->flags & DED_JOIN_F_GENESIS;
  if (from && j->round > node->next_round + DED_ROUNDS_AHEAD_MAX) {
    conn_protocol_error(node, via, DED_ERR_PROTO, "JOIN far ahead");
    return;
  }
  coord_round *cr = coord_find(node, j->round);
  if (cr && cr->committed) { /* late: tell it how the round went */
    if (!from) {
      ded_round *r = round_find(node, j->round);
      ded_msg_commit cm;
      if (r && cr->commit_frame &&
          ded_msg_commit_decode(cr->commit_frame + DED_FRAME_HDR_BYTES,
                                cr->commit_len - DED_FRAME_HDR_BYTES, node->mem, &cm) == 0) {
        int rv = round_on_commit(node, r, &cm, now_ns);
        ded_msg_commit_free(&cm, node->mem);
        if (rv) round_fail(node, r, rv);
      } else if (r) {
        round_report(node, r, 0, true, true);
      }
    } else if (cr->commit_frame) {
      conn_send_ctrl(node, from->conn, cr->commit_frame, cr->commit_len);
    } else {
      coord_send_stale(node, from, j->round);
    }
    return;
  }
  if (genesis) {
    if (node->have_members) { /* we are past the first round */
      if (from) coord_send_stale(node, from, j->round);
      return;
    }
    const uint8_t *min_id;
    node_genesis_view(node, &min_id);
    if (from && (!min_id || memcmp(from->id, min_id, DED_ID_BYTES) < 0)) min_id = from->id;
    if (from && !id_is_me(node, min_id)) {
      coord_send_redirect(node, from, j->round, min_id);
      return;
    }
  }
  /* A round older than the lineage we hold was committed elsewhere (or
   * so long ago we forgot it): nothing to wait for. */
  if (!cr && !genesis && node->have_members && j->round <= node->members_round) {
    if (from)
      coord_send_stale(node, from, j->round);
    else if (round_find(node, j->round))
      round_report(node, round_find(node, j->round), 0, true, true);
    return;
  }
  if (!cr) cr = coord_get(node, j->round, genesis, now_ns);
  if (!cr) return;
  if (cr->g.genesis != genesis) {
    if (via) conn_protocol_error(node, via, DED_ERR_PROTO, "JOIN genesis flag");
    return;
  }
  int rv = ded_gather_add(&cr->g, node->mem, id, j);
  if (rv) {
    if (via) conn_protocol_error(node, via, rv, "JOIN");
    return;
  }
  coord_evaluate(node, cr, now_ns);
}

/* ------------------------------------------------------------------ */
/* 8. frame dispatch                                                   */
/* ------------------------------------------------------------------ */

static void conn_protocol_error(ded_node *node, ded_conn *c, int rv, const char *what) {
  char a[64];
  ded_addr_format(&c->remote, a, sizeof a);
  node_log(node, DED_LOG_WARN, "dropping %s%s (%s): %s", c->peer ? "peer " : "connection from ",
           c->peer ? c->peer->sid : a, what, ded_strerror(rv));
  conn_close(node, c, rv, true);
}

static void conn_on_hello(ded_node *node, ded_conn *c, const ded_frame *f, uint64_t now_ns) {
  ded_msg_hello h;
  int rv = ded_msg_hello_decode(f->payload, f->len, &h);
  if (rv == 0 && memcmp(h.run_id, node->run_id, DED_RUN_ID_BYTES) != 0) rv = DED_ERR_WRONG_RUN;
  ded_record rec;
  if (rv == 0) rv = ded_record_decode(h.rec, h.rec_len, &rec);
  uint8_t id[DED_ID_BYTES];
  if (rv == 0) {
    ded_peer_id(rec.pk, id);
    if (id_is_me(node, id)) { /* we called ourselves (our own DEDMPI_JOIN address) */
      if (c->boot_idx >= 0) node->boot_slots[c->boot_idx].self = true;
      conn_close(node, c, 0, true);
      return;
    }
  }
  ded_peer *p = NULL;
  if (rv == 0) rv = node_take_record(node, h.rec, h.rec_len, NULL, now_ns, &p);
  if (rv == 0 && !p) rv = DED_ERR_PROTO;
  if (rv == 0 && c->peer && c->peer != p) rv = DED_ERR_PROTO; /* not who its record promised */
  if (rv == 0 && p->left) rv = DED_ERR_PEER_LOST;
  if (rv) {
    conn_protocol_error(node, c, rv, "HELLO");
    return;
  }
  if (c->outbound && c->peer) c->peer->connecting = false;
  c->peer = p;
  c->state = CONN_READY;
  /* With two connections to one peer (both called at once), both sides
   * send on the one opened by the smaller id; the other stays idle. */
  bool keep_old = false;
  if (p->conn) {
    bool old_mine = p->conn->outbound, new_mine = c->outbound;
    bool me_smaller = memcmp(node->ident.id, p->id, DED_ID_BYTES) < 0;
    keep_old = old_mine == new_mine || old_mine == me_smaller;
  }
  bool was_down = p->conn == NULL;
  if (!keep_old) p->conn = c;
  p->backoff_ms = NODE_BACKOFF_MS_MIN;
  node_send_table(node, c);
  if (c->boot_idx >= 0) node->boot_slots[c->boot_idx].reached = true;
  if (c->boot_idx >= 0 && node->boot == BOOT_RUNNING) {
    node->boot = BOOT_DONE;
    node_log(node, DED_LOG_INFO, "bootstrapped through peer %s", p->sid);
    node_emit(node, DED_EVENT_BOOTSTRAP, 0, p->id);
  }
  if (was_down) {
    node_log(node, DED_LOG_INFO, "peer %s up", p->sid);
    node_emit(node, DED_EVENT_PEER_UP, 0, p->id);
  }
  rounds_advance(node, now_ns);
  coord_evaluate_all(node, now_ns);
}

static void conn_on_records(ded_node *node, ded_conn *c, const ded_frame *f, uint64_t now_ns) {
  ded_msg_records_rd it;
  int rv = ded_msg_records_begin_rd(&it, f->payload, f->len);
  const uint8_t *rec;
  size_t len;
  while (rv == 0 && (rv = ded_msg_records_next(&it, &rec, &len)) == 1) {
    rv = node_take_record(node, rec, len, c, now_ns, NULL);
    /* A stale record is not an attack (it may have crossed a refresh), and
     * a full table is ours to bear, not the relaying neighbour's fault. */
    if (rv == DED_ERR_EXPIRED || rv == DED_ERR_LIMIT) rv = 0;
  }
  if (rv < 0) conn_protocol_error(node, c, rv, "RECORDS");
}

static void conn_on_commit(ded_node *node, ded_conn *c, const ded_frame *f, uint64_t now_ns) {
  ded_msg_commit cm;
  int rv = ded_msg_commit_decode(f->payload, f->len, node->mem, &cm);
  if (rv) {
    conn_protocol_error(node, c, rv, "COMMIT");
    return;
  }
  ded_round *r = round_find(node, cm.round);
  if (!r || r->state != ROUND_JOINED || memcmp(r->coord, c->peer->id, DED_ID_BYTES) != 0) {
    /* A commit after we gave up on the round is moot; one we never asked
     * for is a lie. */
    bool moot = r ? r->reported : cm.round < node->next_round;
    ded_msg_commit_free(&cm, node->mem);
    if (!moot) conn_protocol_error(node, c, DED_ERR_PROTO, "unasked COMMIT");
    return;
  }
  rv = round_on_commit(node, r, &cm, now_ns);
  ded_msg_commit_free(&cm, node->mem);
  if (rv == DED_ERR_NOMEM)
    round_fail(node, r, rv);
  else if (rv) {
    round_fail(node, r, rv);
    conn_protocol_error(node, c, rv, "COMMIT");
    return;
  }
  rounds_advance(node, now_ns);
  coord_evaluate_all(node, now_ns);
}

static void conn_on_redirect(ded_node *node, ded_conn *c, const ded_frame *f, uint64_t now_ns) {
  ded_msg_redirect m;
  int rv = ded_msg_redirect_decode(f->payload, f->len, &m);
  ded_round *r = rv ? NULL : round_find(node, m.round);
  if (rv || !r || r->state != ROUND_JOINED || !r->genesis ||
      memcmp(r->coord, c->peer->id, DED_ID_BYTES) != 0 ||
      memcmp(m.id, c->peer->id, DED_ID_BYTES) >= 0) {
    conn_protocol_error(node, c, rv ? rv : DED_ERR_PROTO, "REDIRECT");
    return;
  }
  /* The new coordinator may be someone we are not connected to yet: the
   * join then waits in JOINING for its connection. */
  memcpy(r->coord, m.id, DED_ID_BYTES);
  round_send_join(node, r, now_ns);
}

static void conn_on_stale(ded_node *node, ded_conn *c, const ded_frame *f) {
  ded_msg_stale m;
  int rv = ded_msg_stale_decode(f->payload, f->len, &m);
  ded_round *r = rv ? NULL : round_find(node, m.round);
  if (rv || !r || r->state != ROUND_JOINED || memcmp(r->coord, c->peer->id, DED_ID_BYTES) != 0) {
    conn_protocol_error(node, c, rv ? rv : DED_ERR_PROTO, "STALE");
    return;
  }
  node_log(node, DED_LOG_WARN,
           "round %llu: the swarm is already at round %llu; this job is out of step and keeps its "
           "own values",
           (unsigned long long)m.round, (unsigned long long)m.next_round);
  node_lose_lineage(node);
  round_report(node, r, 0, true, true);
}

static void conn_on_data(ded_node *node, ded_conn *c, const ded_frame *f) {
  if (f->len < 16) {
    conn_protocol_error(node, c, DED_ERR_PROTO, ded_msg_name(f->type));
    return;
  }
  ded_rd rd = ded_rd_init(f->payload, 8);
  uint64_t no = ded_rd_u64(&rd);
  ded_round *r = round_find(node, no);
  if (!r) {
    /* A round that already finished here (or failed): late data is moot. A
     * round we never started is a lie. */
    if (no >= node->next_round) conn_protocol_error(node, c, DED_ERR_PROTO, "data for unknown round");
    return;
  }
  if (r->state == ROUND_WAIT_PREV || r->state == ROUND_JOINING) {
    conn_protocol_error(node, c, DED_ERR_PROTO, "data before join");
    return;
  }
  round_take_frame(node, r, c->peer, c, f->type, f->payload, f->len);
}

static void conn_on_frame(ded_node *node, ded_conn *c, const ded_frame *f, uint64_t now_ns) {
  if (c->state == CONN_AWAIT_HELLO) {
    if (f->type != DED_MSG_HELLO)
      conn_protocol_error(node, c, DED_ERR_PROTO, "expected HELLO");
    else
      conn_on_hello(node, c, f, now_ns);
    return;
  }
  switch (f->type) {
  case DED_MSG_RECORDS: conn_on_records(node, c, f, now_ns); break;
  case DED_MSG_JOIN: {
    ded_msg_join j;
    int rv = ded_msg_join_decode(f->payload, f->len, &j);
    if (rv)
      conn_protocol_error(node, c, rv, "JOIN");
    else if (node->s.no_rounds && !(j.flags & DED_JOIN_F_GENESIS))
      conn_protocol_error(node, c, DED_ERR_PROTO, "JOIN to a peer outside rounds");
    else
      coord_on_join(node, c->peer, c, &j, now_ns);
    break;
  }
  case DED_MSG_COMMIT: conn_on_commit(node, c, f, now_ns); break;
  case DED_MSG_REDIRECT: conn_on_redirect(node, c, f, now_ns); break;
  case DED_MSG_STALE: conn_on_stale(node, c, f); break;
  case DED_MSG_DATA:
  case DED_MSG_RESULT: conn_on_data(node, c, f); break;
  case DED_MSG_LEAVE: {
    uint8_t reason;
    if (ded_msg_leave_decode(f->payload, f->len, &reason) != 0) {
      conn_protocol_error(node, c, DED_ERR_PROTO, "LEAVE");
      break;
    }
    ded_peer *p = c->peer;
    p->left = true;
    /* Every connection of a peer that left is done. */
    for (uint32_t s = 0; s < node->nslots; s++) {
      ded_conn *o = node->conns[s];
      if (o && o->peer == p && o->state != CONN_DEAD) conn_close(node, o, DED_ERR_CLOSING, true);
    }
    break;
  }
  default: conn_protocol_error(node, c, DED_ERR_PROTO, "unknown frame type");
  }
}

/* ------------------------------------------------------------------ */
/* 9. timers, bootstrap, leave, public entry points                    */
/* ------------------------------------------------------------------ */

/* The fast tick while anything is pending; see node_tick for the rest. */
static void node_wake(ded_node *node) {
  bool busy = node->wake_soon || node->nrounds > 0 || node->boot == BOOT_RUNNING || node->leaving;
  for (size_t i = 0; i < node->ncoords && !busy; i++) busy = !node->coords[i]->committed;
  node->wake_soon = false;
  if (busy && node->tick_ns > node->now_ns + NODE_TICK_NS) node->tick_ns = node->now_ns + NODE_TICK_NS;
}

static void node_reap(ded_node *node) {
  node_wake(node);
  if (!node->reap_needed) return;
  node->reap_needed = false;
  for (uint32_t s = 0; s < node->nslots; s++) {
    ded_conn *c = node->conns[s];
    if (c && c->state == CONN_DEAD) conn_free(node, c);
  }
  unsigned out = 0;
  for (unsigned i = 0; i < node->nrounds; i++) {
    ded_round *r = node->rounds[i];
    if (r->state == ROUND_DEAD)
      round_free(node, r);
    else
      node->rounds[out++] = r;
  }
  node->nrounds = out;
}

static void boot_try(ded_node *node, unsigned i, uint64_t now_ns) {
  boot_slot *b = &node->boot_slots[i];
  if (b->self || b->reached || b->connecting || now_ns < b->next_try_ns) return;
  ded_conn *c = conn_new(node, true, &b->addr);
  if (!c) return;
  c->boot_idx = (int)i;
  b->connecting = true;
  b->next_try_ns = now_ns + (uint64_t)b->backoff_ms * 1000000u;
  b->backoff_ms = DED_MIN(b->backoff_ms * 2, NODE_BACKOFF_MS_MAX);
  if (node->cb.connect(node->user, c->id, &b->addr) != 0) conn_close(node, c, DED_ERR_BOOTSTRAP, true);
}

/*
 * Every bootstrap address is tried until a peer answers there, even after
 * the first one did: two groups that came up through different addresses
 * would otherwise never meet. Past the bound with no answer at all, the
 * node reports failure and stops.
 */
static void boot_tick(ded_node *node, uint64_t now_ns) {
  if (node->boot == BOOT_DONE && !node->leaving) {
    for (unsigned i = 0; i < node->s.n_bootstrap; i++) boot_try(node, i, now_ns);
    return;
  }
  if (node->boot != BOOT_RUNNING) return;
  bool all_self = true;
  for (unsigned i = 0; i < node->s.n_bootstrap; i++) all_self &= node->boot_slots[i].self;
  if (all_self) { /* every address was our own: we are the first peer */
    node->boot = BOOT_DONE;
    node_log(node, DED_LOG_INFO, "first peer of the run (every DEDMPI_JOIN address is this one)");
    node_emit(node, DED_EVENT_BOOTSTRAP, 0, NULL);
    return;
  }
  if (now_ns >= node->boot_deadline_ns) {
    node->boot = BOOT_FAILED;
    char a[64];
    ded_addr_format(&node->boot_slots[0].addr, a, sizeof a);
    node_log(node, DED_LOG_ERROR, "no peer answered at %s%s within %llu ms", a,
             node->s.n_bootstrap > 1 ? " (or the other DEDMPI_JOIN addresses)" : "",
             (unsigned long long)(node->s.bootstrap_timeout_ns / 1000000u));
    node_emit(node, DED_EVENT_BOOTSTRAP, DED_ERR_BOOTSTRAP, NULL);
    return;
  }
  for (unsigned i = 0; i < node->s.n_bootstrap; i++) boot_try(node, i, now_ns);
}

/* True while some peer, connection or bootstrap address will want a timer
 * soon: an attempt to make, a handshake to time out. */
static bool node_needs_fast_tick(const ded_node *node) {
  for (size_t i = 0; i < node->npeers; i++) {
    const ded_peer *p = node->peers[i];
    if (!p->conn && !p->left) return true;
  }
  for (uint32_t s = 0; s < node->nslots; s++) {
    const ded_conn *c = node->conns[s];
    if (c && c->state != CONN_READY) return true;
  }
  for (unsigned i = 0; i < node->s.n_bootstrap; i++)
    if (node->boot == BOOT_DONE && !node->boot_slots[i].self && !node->boot_slots[i].reached)
      return true;
  return false;
}

static void node_tick(ded_node *node, uint64_t now_ns) {
  node->tick_ns = now_ns + NODE_IDLE_TICK_NS;
  boot_tick(node, now_ns);
  if (!node->leaving && now_ns >= node->rec_refresh_ns && node_build_record(node, now_ns) == 0)
    node_flood_record(node, node->rec_bytes, node->rec_len, NULL);
  ded_table_expire(&node->table, node_wall_ms(node, now_ns), node->ident.id);
  for (uint32_t s = 0; s < node->nslots; s++) {
    ded_conn *c = node->conns[s];
    if (c && c->state == CONN_AWAIT_HELLO &&
        now_ns >= c->opened_ns + (uint64_t)DED_HELLO_TIMEOUT_MS * 1000000u)
      conn_protocol_error(node, c, DED_ERR_TIMEOUT, "no HELLO");
  }
  size_t out = 0;
  for (size_t i = 0; i < node->npeers; i++) {
    ded_peer *p = node->peers[i];
    /* Forget a peer once nothing refers to it: no connection, no attempt
     * in flight (inbound connections point at a peer only once ready), and
     * its record expired. */
    if (!p->conn && !p->connecting && !ded_table_find(&node->table, p->id)) {
      ded_mem_free(node->mem, p);
      continue;
    }
    node->peers[out++] = p;
    peer_maybe_connect(node, p, now_ns);
  }
  node->npeers = out;
  for (unsigned i = 0; i < node->nrounds; i++) {
    ded_round *r = node->rounds[i];
    if (r->reported || r->state == ROUND_DEAD) continue;
    if (r->state == ROUND_WAIT_PREV || r->state == ROUND_JOINING) round_try_join(node, r, now_ns);
    if (r->reported || r->deadline_ns == 0 || now_ns < r->deadline_ns) continue;
    bool rendezvous = r->state == ROUND_WAIT_PREV && !node->have_members;
    if (rendezvous)
      node_log(node, DED_LOG_ERROR, "only %u of DEDMPI_MIN_PEERS=%u peers arrived",
               node_genesis_view(node, NULL), node->s.min_peers);
    round_fail(node, r, rendezvous ? DED_ERR_RENDEZVOUS : DED_ERR_TIMEOUT);
  }
  coord_evaluate_all(node, now_ns);
  coord_prune(node);
  rounds_advance(node, now_ns);
  if (node_needs_fast_tick(node)) node->wake_soon = true;
  if (node->rec_refresh_ns < node->tick_ns) node->tick_ns = DED_MAX(node->rec_refresh_ns, now_ns + 1);
}

int ded_node_new(const ded_node_settings *settings, const ded_node_callbacks *cb, void *user,
                 uint64_t now_ns, ded_node **out) {
  *out = NULL;
  if (!settings->run || !settings->identity_seed || !cb->connect || !cb->round_done ||
      strlen(settings->run) > DED_RUN_NAME_MAX || settings->n_bootstrap > DED_BOOTSTRAP_MAX ||
      settings->n_announce > DED_RECORD_ADDRS_MAX || settings->mode > DED_MODE_AUX)
    return DED_ERR_INVALID_ARG;
  if (ded_crypto_init() != 0) return DED_ERR_INTERNAL;
  ded_node *node = ded_mem_calloc(settings->mem, 1, sizeof *node);
  if (!node) return DED_ERR_NOMEM;
  node->s = *settings;
  node->mem = settings->mem;
  node->cb = *cb;
  node->user = user;
  snprintf(node->run, sizeof node->run, "%s", settings->run);
  node->s.run = node->run;
  node->s.identity_seed = NULL;
  if (node->s.chunk_bytes == 0) node->s.chunk_bytes = NODE_CHUNK_BYTES_DEFAULT;
  node->s.chunk_bytes = DED_MAX(DED_MIN(node->s.chunk_bytes, DED_CHUNK_BYTES_MAX), DED_CHUNK_BYTES_MIN);
  if (node->s.record_ttl_ms == 0) node->s.record_ttl_ms = NODE_RECORD_TTL_MS_DEFAULT;
  node->s.record_ttl_ms = DED_MIN(node->s.record_ttl_ms, DED_RECORD_TTL_MS_MAX);
  if (node->s.min_peers == 0) node->s.min_peers = 1;
  ded_ident_from_seed(&node->ident, settings->identity_seed);
  ded_id_short(node->ident.id, node->sid);
  ded_hash32(node->run, strlen(node->run), node->run_id);
  ded_table_init(&node->table, node->mem, DED_PEERS_MAX);
  for (unsigned i = 0; i < settings->n_bootstrap; i++) {
    node->boot_slots[i].addr = settings->bootstrap[i];
    node->boot_slots[i].backoff_ms = NODE_BACKOFF_MS_MIN;
  }
  int rv = node_build_record(node, now_ns);
  if (rv) {
    ded_node_free(node);
    return rv;
  }
  node->tick_ns = now_ns;
  node->now_ns = now_ns;
  *out = node;
  return 0;
}

void ded_node_free(ded_node *node) {
  if (!node) return;
  for (uint32_t s = 0; s < node->nslots; s++)
    if (node->conns[s]) conn_free(node, node->conns[s]);
  for (unsigned i = 0; i < node->nrounds; i++) {
    node->rounds[i]->refs_user = node->rounds[i]->refs_acc = 0;
    round_free(node, node->rounds[i]);
  }
  for (size_t i = 0; i < node->ncoords; i++) coord_free(node, node->coords[i]);
  for (size_t i = 0; i < node->npeers; i++) ded_mem_free(node->mem, node->peers[i]);
  for (unsigned i = 0; i < node->nbuf_cache; i++) ded_mem_free(node->mem, node->buf_cache[i].p);
  ded_mem_free(node->mem, node->coords);
  ded_mem_free(node->mem, node->peers);
  ded_mem_free(node->mem, node->conns);
  ded_mem_free(node->mem, node->conn_gen);
  ded_mem_free(node->mem, node->members);
  ded_mem_free(node->mem, node->prev);
  ded_table_free(&node->table);
  ded_ident_wipe(&node->ident);
  ded_mem_free(node->mem, node);
}

int ded_node_start(ded_node *node, uint64_t now_ns) {
  node->now_ns = now_ns;
  if (node->boot != BOOT_IDLE) return DED_ERR_INVALID_ARG;
  node_log(node, DED_LOG_INFO, "peer %s starting in run '%s'", node->sid, node->run);
  if (node->s.n_bootstrap == 0) {
    node->boot = BOOT_DONE;
    node_emit(node, DED_EVENT_BOOTSTRAP, 0, NULL);
  } else {
    node->boot = BOOT_RUNNING;
    node->boot_deadline_ns = now_ns + node->s.bootstrap_timeout_ns;
    boot_tick(node, now_ns);
  }
  node_reap(node);
  return 0;
}

const uint8_t *ded_node_id(const ded_node *node) { return node->ident.id; }

int ded_node_conn_accepted(ded_node *node, const ded_addr *remote, uint32_t *conn_id,
                           uint64_t now_ns) {
  node->now_ns = now_ns;
  if (node->leaving) return DED_ERR_CLOSING;
  ded_conn *c = conn_new(node, false, remote);
  if (!c) return DED_ERR_LIMIT;
  *conn_id = c->id;
  uint8_t frame[DED_HELLO_FRAME_BYTES(DED_RECORD_BYTES_MAX)];
  ded_wr w = ded_wr_init(frame, sizeof frame);
  ded_msg_hello_encode(&w, node->run_id, node->rec_bytes, node->rec_len);
  conn_send_ctrl(node, c, frame, w.pos);
  return 0;
}

void ded_node_conn_connected(ded_node *node, uint32_t conn_id, uint64_t now_ns) {
  node->now_ns = now_ns;
  ded_conn *c = conn_get(node, conn_id);
  if (!c || c->state != CONN_CONNECTING) return;
  c->state = CONN_AWAIT_HELLO;
  c->opened_ns = now_ns;
  uint8_t frame[DED_HELLO_FRAME_BYTES(DED_RECORD_BYTES_MAX)];
  ded_wr w = ded_wr_init(frame, sizeof frame);
  ded_msg_hello_encode(&w, node->run_id, node->rec_bytes, node->rec_len);
  conn_send_ctrl(node, c, frame, w.pos);
}

void ded_node_conn_recv(ded_node *node, uint32_t conn_id, const uint8_t *data, size_t len,
                        uint64_t now_ns) {
  node->now_ns = now_ns;
  ded_conn *c = conn_get(node, conn_id);
  if (!c || c->state == CONN_CONNECTING) {
    node_reap(node);
    return;
  }
  ded_frame f;
  int rv;
  while (c->state != CONN_DEAD && (rv = ded_frame_dec_next(&c->dec, &data, &len, &f)) != 0) {
    if (rv < 0) {
      conn_protocol_error(node, c, rv, "framing");
      break;
    }
    conn_on_frame(node, c, &f, now_ns);
  }
  node_reap(node);
}

void ded_node_conn_closed(ded_node *node, uint32_t conn_id, int status, uint64_t now_ns) {
  node->now_ns = now_ns;
  ded_conn *c = conn_get(node, conn_id);
  /* The driver closed it already: no close callback back to it. */
  if (c) conn_close(node, c, status ? status : DED_ERR_PEER_LOST, false);
  node_reap(node);
}

int ded_node_conn_pending(ded_node *node, uint32_t conn_id, ded_iov *iov, int max) {
  ded_conn *c = conn_get(node, conn_id);
  if (!c || c->state == CONN_CONNECTING) return 0;
  int n = 0;
  sendq_item *it = c->cur;
  int cls = 0;
  if (!it) {
    while (cls < Q_COUNT && !c->q[cls].head) cls++;
    it = cls < Q_COUNT ? c->q[cls].head : NULL;
  }
  while (it && n < max) {
    size_t head = item_head_len(it);
    if (it->pos < head) iov[n++] = (ded_iov){item_head(it) + it->pos, head - it->pos};
    size_t from = it->pos > head ? it->pos - head : 0;
    if (it->ref_len > from) {
      if (n == max) break; /* the payload goes out next time */
      iov[n++] = (ded_iov){it->ref + from, it->ref_len - from};
    }
    /* Next in the same order consume() walks. */
    if (it == c->cur) {
      cls = 0;
      while (cls < Q_COUNT && !c->q[cls].head) cls++;
      it = cls < Q_COUNT ? c->q[cls].head : NULL;
    } else if (it->next) {
      it = it->next;
    } else {
      cls++;
      while (cls < Q_COUNT && !c->q[cls].head) cls++;
      it = cls < Q_COUNT ? c->q[cls].head : NULL;
    }
  }
  return n;
}

void ded_node_conn_consume(ded_node *node, uint32_t conn_id, size_t n, uint64_t now_ns) {
  node->now_ns = now_ns;
  ded_conn *c = conn_get(node, conn_id);
  while (c && n > 0) {
    sendq_item *it = c->cur;
    if (!it) {
      int cls = 0;
      while (cls < Q_COUNT && !c->q[cls].head) cls++;
      if (cls == Q_COUNT) break;
      sendq *q = &c->q[cls];
      it = q->head;
      q->head = it->next;
      if (!q->head) q->tail = NULL;
      c->cur = it;
    }
    size_t take = DED_MIN(n, item_total(it) - it->pos);
    it->pos += take;
    n -= take;
    if (it->pos == item_total(it)) {
      c->cur = NULL;
      item_free(node, it);
    }
  }
  node_reap(node);
}

uint64_t ded_node_expiry(const ded_node *node) { return node->tick_ns; }

void ded_node_handle_expiry(ded_node *node, uint64_t now_ns) {
  node->now_ns = now_ns;
  if (now_ns >= node->tick_ns) node_tick(node, now_ns);
  node_reap(node);
}

int64_t ded_node_round_submit(ded_node *node, const ded_round_args *args, uint64_t now_ns) {
  node->now_ns = now_ns;
  if (node->leaving) return DED_ERR_CLOSING;
  if (node->s.no_rounds || !args->buf || args->count == 0 || args->count > DED_COUNT_MAX ||
      ded_dtype_size(args->dtype) == 0 || !isfinite(args->weight) || args->weight < 0.0 ||
      args->weight > DED_WEIGHT_MAX ||
      args->n_local == 0)
    return DED_ERR_INVALID_ARG;
  if (node->nrounds >= DED_ROUNDS_ACTIVE_MAX) return DED_ERR_LIMIT;
  ded_round *r = ded_mem_calloc(node->mem, 1, sizeof *r);
  if (!r) return DED_ERR_NOMEM;
  r->no = node->next_round++;
  r->a = *args;
  r->es = ded_dtype_size(args->dtype);
  r->state = ROUND_WAIT_PREV;
  r->deadline_ns = now_ns + (node->have_members ? NODE_MEMBER_TIMEOUT_FACTOR * node->s.round_timeout_ns
                                                : node->s.rendezvous_timeout_ns);
  node->rounds[node->nrounds++] = r;
  int64_t no = (int64_t)r->no;
  round_try_join(node, r, now_ns); /* may finish (and free) |r| at once */
  node_reap(node);
  return no;
}

void ded_node_leave(ded_node *node, uint64_t now_ns) {
  (void)now_ns;
  if (node->leaving) return;
  node->now_ns = now_ns;
  node->leaving = true;
  node_log(node, DED_LOG_INFO, "leaving the swarm");
  for (unsigned i = 0; i < node->nrounds; i++) round_fail(node, node->rounds[i], DED_ERR_CLOSING);
  /* Rounds we coordinate go ahead without us rather than stall. */
  for (size_t i = 0; i < node->ncoords; i++)
    if (!node->coords[i]->committed && node->coords[i]->g.n > 0)
      coord_commit(node, node->coords[i], now_ns);
  /* LEAVE goes last on the connection each peer's data travels on, behind
   * results still queued for peers that finish a round we already
   * finished: on any other connection it could overtake them. */
  uint8_t frame[DED_LEAVE_FRAME_BYTES];
  ded_wr w = ded_wr_init(frame, sizeof frame);
  ded_msg_leave_encode(&w, DED_LEAVE_FINALIZE);
  for (size_t i = 0; i < node->npeers; i++) {
    ded_conn *c = node->peers[i]->conn;
    if (!c || c->state != CONN_READY) continue;
    sendq_item *it = ded_mem_calloc(node->mem, 1, sizeof *it);
    uint8_t *copy = ded_mem_malloc(node->mem, w.pos);
    if (!it || !copy) {
      ded_mem_free(node->mem, it);
      ded_mem_free(node->mem, copy);
      continue;
    }
    memcpy(copy, frame, w.pos);
    it->owned = copy;
    it->owned_len = w.pos;
    conn_enqueue(node, c, Q_DATA, it);
  }
  node_reap(node);
}

bool ded_node_flushed(const ded_node *node) {
  for (uint32_t s = 0; s < node->nslots; s++) {
    const ded_conn *c = node->conns[s];
    if (c && c->state == CONN_READY && conn_has_output(c)) return false;
  }
  return true;
}

unsigned ded_node_peer_count(const ded_node *node) {
  unsigned n = 0;
  for (size_t i = 0; i < node->npeers; i++) n += node->peers[i]->conn != NULL;
  return n;
}
