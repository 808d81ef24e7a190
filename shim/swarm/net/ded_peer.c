#include "ded_peer.h"

#include <string.h>

#include "../core/ded_assert.h"
#include "../core/ded_err.h"
#include "../core/ded_limits.h"
#include "../ded_node_int.h"

/* Link-probe filler not yet handed to the driver is dropped once a round
 * has data to send: from then on round traffic measures the links. Kept
 * (lowest class) behind a round's traffic instead, a slow uplink's probe
 * went out only when the round's data had drained, seconds of it, and
 * the next round's COMMIT then waited behind it in the socket (a 5 Mbit/s
 * uplink shared by 12 sockets drains one at 52 KB/s): the members gave
 * up on their coordinator. */
void ded_peers_drop_filler(ded_node *node) {
  if (!node->peers.filler_queued) return;
  node->peers.filler_queued = false;
  unsigned n = 0;
  for (uint32_t s = 0; s < node->conns.nslots; s++)
    if (ded_conns_at(&node->conns, s) && ded_sendq_has_class(&ded_conns_at(&node->conns, s)->out, DED_Q_BULK)) {
      ded_sendq_drop_class(&node->qenv, &ded_conns_at(&node->conns, s)->out, DED_Q_BULK);
      n++;
    }
  if (n)
    node_log(node, DED_LOG_DEBUG, "link probe cut short on %u connections: a round has data", n);
}

/* Takes |c| off |p|'s lanes; true if it was one. */
bool ded_peer_lane_remove(ded_peer *p, const ded_conn *c) {
  for (unsigned i = 0; i < p->nlanes; i++)
    if (p->lanes[i] == c) {
      p->lanes[i] = p->lanes[--p->nlanes];
      return true;
    }
  return false;
}

/* The connection |p|'s next round data frame goes on: its lanes and its
 * first connection in turn (frames are equal-sized chunks, so turns keep
 * the streams' queues even). */
ded_conn *ded_peer_data_conn(ded_peer *p) {
  if (!p->conn || p->nlanes == 0) return p->conn;
  unsigned i = p->lane_rr++ % (p->nlanes + 1);
  return i == p->nlanes ? p->conn : p->lanes[i];
}

/* ------------------------------------------------------------------ */
/* 5. peers and records                                                */
/* ------------------------------------------------------------------ */

static size_t peer_lower_bound(const ded_node *node, const uint8_t id[DED_ID_BYTES]) {
  size_t lo = 0, hi = node->peers.n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (memcmp(node->peers.v[mid]->id, id, DED_ID_BYTES) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

ded_peer *ded_peer_find(const ded_node *node, const uint8_t id[DED_ID_BYTES]) {
  size_t i = peer_lower_bound(node, id);
  if (i < node->peers.n && memcmp(node->peers.v[i]->id, id, DED_ID_BYTES) == 0) return node->peers.v[i];
  return NULL;
}

ded_peer *ded_peer_get_or_add(ded_node *node, const uint8_t id[DED_ID_BYTES], uint64_t now_ns) {
  size_t i = peer_lower_bound(node, id);
  if (i < node->peers.n && memcmp(node->peers.v[i]->id, id, DED_ID_BYTES) == 0) return node->peers.v[i];
  if (node->peers.n >= DED_PEERS_MAX) return NULL;
  if (node->peers.n == node->peers.cap) {
    size_t cap = node->peers.cap ? node->peers.cap * 2 : 16;
    ded_peer **v = ded_mem_realloc(node->mem, node->peers.v, cap * sizeof *v);
    if (!v) return NULL;
    node->peers.v = v;
    node->peers.cap = cap;
  }
  ded_peer *p = ded_mem_calloc(node->mem, 1, sizeof *p);
  if (!p) return NULL;
  memcpy(p->id, id, DED_ID_BYTES);
  ded_id_short(id, p->sid);
  p->known_since_ns = now_ns;
  p->backoff_ms = NODE_BACKOFF_MS_MIN;
  memmove(&node->peers.v[i + 1], &node->peers.v[i], (node->peers.n - i) * sizeof *node->peers.v);
  node->peers.v[i] = p;
  node->peers.n++;
  node->wake_soon = true; /* to call it, or to see whether it calls us */
  return p;
}

/* The record we hold for |p|, or NULL. */
const ded_record *ded_peer_record(const ded_node *node, const ded_peer *p) {
  const ded_table_entry *e = ded_table_find(&node->disc.table, p->id);
  return e ? &e->rec : NULL;
}

/* A peer that takes part in rounds and that we can talk to right now. */
bool ded_peer_participates(const ded_node *node, const ded_peer *p) {
  if (!p->conn || p->left) return false;
  const ded_record *rec = ded_peer_record(node, p);
  return rec && !(rec->flags & DED_RECORD_F_NO_ROUNDS);
}

/* Starts an outbound connection to |p| if policy says we should. */
void ded_peer_maybe_connect(ded_node *node, ded_peer *p, uint64_t now_ns) {
  if (node->leaving || p->left || p->conn || p->connecting || now_ns < p->next_connect_ns) return;
  const ded_record *rec = ded_peer_record(node, p);
  if (!rec || rec->naddr == 0) return;
  /* The smaller id calls, so a pair normally ends up with one connection;
   * the other side calls too if nothing happened for a while, and a peer
   * that accepts nothing (client) always calls. */
  bool mine = memcmp(node->ident.id, p->id, DED_ID_BYTES) < 0;
  if (!mine && node->s.mode != DED_MODE_CLIENT && now_ns < p->known_since_ns + NODE_CONNECT_PATIENCE_NS)
    return;
  const ded_addr *addr = &rec->addr[p->addr_idx % rec->naddr];
  ded_conn *c = ded_conn_open(node, true, addr);
  if (!c) return;
  c->peer = p;
  p->connecting = true;
  char a[64];
  ded_addr_format(addr, a, sizeof a);
  node_log(node, DED_LOG_DEBUG, "connecting to peer %s at %s", p->sid, a);
  if (node->cb.connect(node->user, c->id, addr) != 0) ded_conn_close(node, c, DED_ERR_PEER_LOST, true);
}

/* Called when a connection of |p| dies. */
void ded_peer_conn_lost(ded_node *node, ded_peer *p, ded_conn *c, int why) {
  if (ded_peer_lane_remove(p, c)) {
    /* A lane: the first connection sends what the peer never got whole. */
    if (p->conn) ded_conn_move_output(node, c, p->conn);
    return;
  }
  if (p->conn != c) {
    if (!p->conn && c->outbound) { /* a failed attempt: back off, try the next address */
      p->next_connect_ns = node->now_ns + (uint64_t)p->backoff_ms * 1000000u;
      p->addr_idx++;
      p->backoff_ms = DED_MIN(p->backoff_ms * 2, NODE_BACKOFF_MS_MAX);
      /* One we never reached (a member of the rounds a joiner loaded that
       * crashed before it came, its record not expired yet) is as lost as
       * one whose connection broke: it coordinates nothing, and is evicted
       * once unreachable for the eviction time. */
      if (!p->lost && !p->left) {
        p->lost = true;
        p->lost_ns = node->now_ns;
      }
    }
    return;
  }
  /* Another ready connection to the same peer takes over, with what was
   * still queued on the dead one: the peer never received those frames
   * whole (a frame half written is sent again from its start). */
  for (uint32_t s = 0; s < node->conns.nslots; s++) {
    ded_conn *o = ded_conns_at(&node->conns, s);
    if (o && o != c && o->peer == p && o->state == DED_CONN_READY) {
      p->conn = o;
      ded_peer_lane_remove(p, o);
      ded_conn_move_output(node, c, o);
      node_post_conn_replaced(node, p);
      return;
    }
  }
  p->conn = NULL;
  p->lost = !p->left;
  p->lost_ns = node->now_ns;
  p->evicted = false;
  p->backoff_ms = NODE_BACKOFF_MS_MIN;
  /* While we leave, peers closing on us is the expected answer to LEAVE. */
  if (p->left || node->leaving)
    node_log(node, DED_LOG_INFO, "peer %s %s", p->sid, p->left ? "left" : "closed");
  else
    node_log(node, DED_LOG_WARN, "peer %s lost (%s)", p->sid, ded_strerror(why));
  node_emit(node, DED_EVENT_PEER_DOWN, why, p->id);
  node_post_peer_down(node, p);
}

/* Peers we could see as members of a genesis round, us included. */
unsigned ded_peers_genesis_view(ded_node *node, const uint8_t **min_id) {
  unsigned n = node->s.no_rounds ? 0 : 1;
  const uint8_t *best = node->s.no_rounds || node->s.mode == DED_MODE_CLIENT ? NULL : node->ident.id;
  for (size_t i = 0; i < node->peers.n; i++) {
    ded_peer *p = node->peers.v[i];
    const ded_record *rec = ded_peer_record(node, p);
    /* Clients cannot reach one another: to a client, another one is
     * present when its record is. */
    bool other_client = node->s.mode == DED_MODE_CLIENT && rec && rec->mode == DED_MODE_CLIENT &&
                        !p->left && !(rec->flags & DED_RECORD_F_NO_ROUNDS);
    if (!ded_peer_participates(node, p) && !other_client) continue;
    n++;
    /* A client cannot be reached by the other clients: it never coordinates. */
    if (rec->mode == DED_MODE_CLIENT) continue;
    if (!best || memcmp(p->id, best, DED_ID_BYTES) < 0) best = p->id;
  }
  if (min_id) *min_id = best;
  return n;
}

bool ded_peer_evicted(ded_node *node, const uint8_t id[DED_ID_BYTES]) {
  if (id_is_me(node, id)) return false;
  ded_peer *p = ded_peer_find(node, id);
  return !p || p->left || p->evicted;
}

bool ded_peers_all_evicted(ded_node *node, const uint8_t (*ids)[DED_ID_BYTES], unsigned n) {
  for (unsigned i = 0; i < n; i++)
    if (!ded_peer_evicted(node, ids[i])) return false;
  return n > 0;
}

/* True if |id| cannot coordinate: it left, or its connection broke. */
bool ded_peer_gone(ded_node *node, const uint8_t id[DED_ID_BYTES]) {
  if (id_is_me(node, id)) return node->leaving;
  ded_peer *p = ded_peer_find(node, id);
  return !p || p->left || p->lost;
}

/* Queues |bytes| of SPEED filler on |c|, in frames of at most a chunk, the
 * first asking for |want| bytes back; behind the rounds' own traffic. */
static void peer_send_speed(ded_node *node, ded_conn *c, uint32_t want, uint32_t bytes) {
  const size_t piece = DED_CHUNK_BYTES_MAX;
  do {
    size_t fill = DED_MIN((size_t)bytes, piece);
    uint8_t *frame = ded_mem_calloc(node->mem, 1, DED_SPEED_HDR_BYTES + fill);
    /* A probe is a hint: short of memory, it is smaller. */
    if (!frame) return;
    ded_msg_speed_hdr_encode(frame, want, fill);
    if (ded_conn_send_owned(node, c, DED_Q_BULK, frame, DED_SPEED_HDR_BYTES + fill)) return;
    node->peers.filler_queued = true;
    bytes -= (uint32_t)fill;
    want = 0;
  } while (bytes > 0);
}

/* A SPEED from |c|'s peer: the filler is read and dropped (the meters
 * counted it); the first ask of each peer is answered. */
void ded_peer_on_speed(ded_node *node, ded_conn *c, const ded_msg_speed *m) {
  ded_peer *p = c->peer;
  if (m->want == 0 || node->leaving) return;
  if (p->speed_answered) {
    node_log(node, DED_LOG_DEBUG, "peer %s: another link probe ignored", p->sid);
    return;
  }
  p->speed_answered = true;
  node_log(node, DED_LOG_DEBUG, "peer %s probes its links: %u bytes back", p->sid, m->want);
  peer_send_speed(node, c, 0, m->want);
}

/* We called |p| and it answered on |c|: opens the further streams of
 * settings.streams to the same address (while connections are plentiful),
 * counting those to |p| still open or opening. */
static void peer_open_lanes(ded_node *node, ded_peer *p, const ded_conn *c) {
  unsigned have = 0;
  for (uint32_t s = 0; s < node->conns.nslots; s++) {
    const ded_conn *o = ded_conns_at(&node->conns, s);
    if (o && o->peer == p && o->state != DED_CONN_DEAD) have++;
  }
  for (unsigned i = have; i < node->s.streams && node->conns.n < DED_CONNS_MAX / 2; i++) {
    ded_conn *l = ded_conn_open(node, true, &c->remote);
    if (!l) return;
    l->peer = p;
    if (node->cb.connect(node->user, l->id, &l->remote) != 0) {
      ded_conn_close(node, l, DED_ERR_PEER_LOST, true);
      return;
    }
  }
}

void ded_peer_on_leave(ded_node *node, ded_peer *p, const ded_conn *c, uint8_t reason) {
  bool first = !p->left;
  p->left = true;
  const char *why = ded_leave_why(reason);
  /* Each of its connections ends with a LEAVE: one line per peer. The
   * address its record announces names the machine better than the
   * connection's, whose port may be an ephemeral one. */
  if (!first || !why) return;
  const ded_record *rec = ded_peer_record(node, p);
  char a[64];
  ded_addr_format(rec && rec->naddr > 0 ? &rec->addr[0] : &c->remote, a, sizeof a);
  node_log(node, DED_LOG_WARN, "peer %s (%s) left the run: %s", p->sid, a, why);
}

void ded_peer_on_hello(ded_node *node, ded_conn *c, const ded_frame *f, uint64_t now_ns) {
  ded_msg_hello h;
  int rv = ded_msg_hello_decode(f->payload, f->len, &h);
  if (rv == 0 && memcmp(h.run_id, node->run_id, DED_RUN_ID_BYTES) != 0) rv = DED_ERR_WRONG_RUN;
  ded_record rec;
  if (rv == 0) rv = ded_record_decode(h.rec, h.rec_len, &rec);
  /* The record must be the key the handshake proved, or a peer holding
   * the run's secret could speak as another (ourselves included: with
   * our own record it would make a DEDMPI_JOIN address look like us). */
  if (rv == 0 && node->s.sessions && (!c->secured || memcmp(rec.pk, c->pk, DED_PK_BYTES) != 0))
    rv = DED_ERR_AUTH;
  uint8_t id[DED_ID_BYTES];
  if (rv == 0) {
    ded_peer_id(rec.pk, id);
    if (id_is_me(node, id)) { /* we called ourselves (our own DEDMPI_JOIN address) */
      if (c->boot_idx >= 0) ded_boot_self(node, c->boot_idx);
      ded_conn_close(node, c, 0, true);
      return;
    }
  }
  ded_peer *p = NULL;
  if (rv == 0) rv = ded_disc_take_record(node, h.rec, h.rec_len, NULL, now_ns, &p);
  if (rv == 0 && !p) rv = DED_ERR_PROTO;
  if (rv == 0 && c->peer && c->peer != p) rv = DED_ERR_PROTO; /* not who its record promised */
  if (rv == 0 && p->left) rv = DED_ERR_PEER_LOST;
  if (rv) {
    ded_conn_protocol_error(node, c, rv, "HELLO");
    return;
  }
  if (c->outbound && c->peer) c->peer->connecting = false;
  c->peer = p;
  c->state = DED_CONN_READY;
  /* With two connections to one peer (both called at once), both sides
   * send on the one opened by the smaller id; the other stays idle. */
  bool keep_old = false;
  if (p->conn) {
    bool old_mine = p->conn->outbound, new_mine = c->outbound;
    bool me_smaller = memcmp(node->ident.id, p->id, DED_ID_BYTES) < 0;
    keep_old = old_mine == new_mine || old_mine == me_smaller;
  }
  bool was_down = p->conn == NULL;
  /* Every other ready connection is a lane round data may take. */
  ded_conn *lane = keep_old ? c : p->conn;
  if (lane && p->nlanes < DED_STREAMS_MAX - 1) {
    p->lanes[p->nlanes++] = lane;
    node_log(node, DED_LOG_DEBUG, "peer %s: %u streams", p->sid, p->nlanes + 1);
  }
  if (!keep_old) p->conn = c;
  p->lost = p->evicted = false;
  p->heard_ns = now_ns;
  p->backoff_ms = NODE_BACKOFF_MS_MIN;
  /* The table once per peer coming up, and its lanes with it. */
  if (was_down) ded_disc_send_table(node, c);
  if (was_down && c->outbound) peer_open_lanes(node, p, c);
  /* Our links are measured on the first peer that comes up. */
  if (was_down && !node->peers.probed && node->s.probe_bytes > 0 && !node->leaving) {
    node->peers.probed = true;
    uint32_t n = DED_MIN(node->s.probe_bytes, (uint32_t)DED_SPEED_WANT_MAX);
    node_log(node, DED_LOG_INFO, "probing links with peer %s: %u bytes each way", p->sid, n);
    peer_send_speed(node, c, n, n);
  }
  if (c->boot_idx >= 0) {
    ded_boot_reached(node, c->boot_idx, p);
    c->boot_idx = -1; /* the slot's attempt is over; it may be reused */
  }
  if (was_down) {
    node_log(node, DED_LOG_INFO, "peer %s up", p->sid);
    node_emit(node, DED_EVENT_PEER_UP, 0, p->id);
    /* A probe may have died with its old connection: views we coordinate
     * that still wait for it ask again, and those that went on without it
     * tell it so (it may be waiting on an older view that can no longer
     * decide: its own, as the coordinator cut off when the others failed
     * over). */
    ded_coords_on_peer_up(node, p);
    ded_rounds_on_peer_up(node, p);
  }
  ded_rounds_advance(node, now_ns);
  ded_coords_evaluate(node, now_ns);
}

void ded_peer_heard(ded_conn *c, uint64_t now_ns) {
  if (c->state == DED_CONN_READY && c->peer) c->peer->heard_ns = now_ns;
}

bool ded_peer_quiet(const ded_node *node, const ded_peer *p, uint64_t now_ns) {
  return now_ns > p->heard_ns && now_ns - p->heard_ns >= ded_timing_silence(&node->timing) / 2;
}

void ded_peers_forgive_silence(ded_node *node, uint64_t gap_ns) {
  for (size_t i = 0; i < node->peers.n; i++) node->peers.v[i]->heard_ns += gap_ns;
}

/* A keepalive to |p| when it is due and nothing else is on its way (an
 * empty RECORDS: every peer since version 1 takes it), or, if we heard
 * nothing from |p| for the silence time, its connections closed: it is
 * stopped, asleep or cut off, and lost since its silence began. */
static void peer_keep_alive(ded_node *node, ded_peer *p, uint64_t now_ns) {
  if (!p->conn || p->left || node->leaving) return;
  uint64_t silent = now_ns > p->heard_ns ? now_ns - p->heard_ns : 0;
  if (silent >= ded_timing_silence(&node->timing)) {
    node_log(node, DED_LOG_WARN,
             "peer %s silent for %llu ms (stopped, asleep or cut off): closing its connections",
             p->sid, (unsigned long long)(silent / 1000000u));
    uint64_t since = p->heard_ns;
    for (uint32_t s = 0; s < node->conns.nslots; s++) {
      ded_conn *o = ded_conns_at(&node->conns, s);
      if (o && o->peer == p && o->state == DED_CONN_READY) ded_conn_close(node, o, DED_ERR_TIMEOUT, true);
    }
    if (p->lost) p->lost_ns = since;
    return;
  }
  if (now_ns < p->keepalive_ns + ded_timing_keepalive(&node->timing) || ded_conn_has_output(p->conn))
    return;
  p->keepalive_ns = now_ns;
  uint8_t frame[DED_FRAME_HDR_BYTES + 2];
  ded_wr w = ded_wr_init(frame, sizeof frame);
  ded_msg_records_wr rw;
  ded_msg_records_begin(&rw, &w);
  ded_msg_records_end(&rw);
  ded_conn_send_ctrl(node, p->conn, frame, w.pos);
}

void ded_peers_tick(ded_node *node, uint64_t now_ns) {
  for (size_t i = 0; i < node->peers.n; i++) peer_keep_alive(node, node->peers.v[i], now_ns);
  for (size_t i = 0; i < node->peers.n; i++) {
    ded_peer *p = node->peers.v[i];
    if (p->lost && !p->evicted && now_ns >= p->lost_ns + ded_timing_evict(&node->timing)) {
      p->evicted = true;
      node_log(node, DED_LOG_WARN, "peer %s evicted: unreachable for %llu ms", p->sid,
               (unsigned long long)((now_ns - p->lost_ns) / 1000000u));
    }
  }
  size_t out = 0;
  for (size_t i = 0; i < node->peers.n; i++) {
    ded_peer *p = node->peers.v[i];
    /* Forget a peer once nothing refers to it: no connection, no attempt
     * in flight (inbound connections point at a peer only once ready), and
     * its record expired. */
    if (!p->conn && !p->connecting && !ded_table_find(&node->disc.table, p->id)) {
      ded_mem_free(node->mem, p);
      continue;
    }
    node->peers.v[out++] = p;
  }
  node->peers.n = out;
  /* Connecting after the compaction: a callback it leads to sees a whole
   * peer array (ded_node_round_peer_count walks it). */
  for (size_t i = 0; i < node->peers.n; i++) ded_peer_maybe_connect(node, node->peers.v[i], now_ns);
}

bool ded_peers_need_tick(const ded_node *node) {
  for (size_t i = 0; i < node->peers.n; i++) {
    const ded_peer *p = node->peers.v[i];
    if (!p->conn && !p->left) return true;
  }
  return false;
}

void ded_peers_free(ded_node *node) {
  for (size_t i = 0; i < node->peers.n; i++) ded_mem_free(node->mem, node->peers.v[i]);
  ded_mem_free(node->mem, node->peers.v);
  node->peers.v = NULL;
  node->peers.n = node->peers.cap = 0;
}
