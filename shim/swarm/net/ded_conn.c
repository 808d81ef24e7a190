#include "ded_conn.h"

#include <stdlib.h>
#include <string.h>

#include "../core/ded_err.h"
#include "../core/ded_limits.h"
#include "../ded_node_int.h"

ded_conn *ded_conns_get(const ded_conns *t, uint32_t id) {
  uint32_t slot = id & 0xffff;
  if (slot >= t->nslots) return NULL;
  ded_conn *c = t->v[slot];
  return c && c->id == id && c->state != DED_CONN_DEAD ? c : NULL;
}

ded_conn *ded_conns_new(ded_conns *t, bool outbound, const ded_addr *remote, uint64_t now_ns) {
  if (t->n >= DED_CONNS_MAX) return NULL;
  uint32_t slot = 0;
  while (slot < t->nslots && t->v[slot]) slot++;
  if (slot == t->nslots) {
    uint32_t n = t->nslots ? t->nslots * 2 : 16;
    ded_conn **v = ded_mem_realloc(t->mem, t->v, n * sizeof *v);
    if (!v) return NULL;
    t->v = v;
    uint16_t *g = ded_mem_realloc(t->mem, t->gen, n * sizeof *g);
    if (!g) return NULL;
    t->gen = g;
    for (uint32_t i = t->nslots; i < n; i++) {
      v[i] = NULL;
      g[i] = 0;
    }
    t->nslots = n;
  }
  ded_conn *c = ded_mem_calloc(t->mem, 1, sizeof *c);
  if (!c) return NULL;
  t->gen[slot] = (uint16_t)(t->gen[slot] + 1 ? t->gen[slot] + 1 : 1);
  c->id = (uint32_t)t->gen[slot] << 16 | slot;
  c->outbound = outbound;
  c->boot_idx = -1;
  if (remote) c->remote = *remote;
  c->state = outbound ? DED_CONN_CONNECTING : DED_CONN_AWAIT_HELLO;
  c->opened_ns = now_ns;
  c->seq = t->opened++;
  ded_frame_dec_init(&c->dec, t->mem);
  t->v[slot] = c;
  t->n++;
  return c;
}

void ded_conns_release(ded_conns *t, ded_conn *c, const ded_sendq_env *env) {
  ded_sendq_free(env, &c->out);
  ded_frame_dec_free(&c->dec);
  t->v[c->id & 0xffff] = NULL;
  t->n--;
  ded_mem_free(t->mem, c);
}

void ded_conns_free(ded_conns *t, const ded_sendq_env *env) {
  for (uint32_t s = 0; s < t->nslots; s++)
    if (t->v[s]) ded_conns_release(t, t->v[s], env);
  ded_mem_free(t->mem, t->v);
  ded_mem_free(t->mem, t->gen);
  t->v = NULL;
  t->gen = NULL;
  t->nslots = 0;
}

/* ---- what takes the node ---- */

ded_conn *ded_conn_open(ded_node *node, bool outbound, const ded_addr *remote) {
  ded_conn *c = ded_conns_new(&node->conns, outbound, remote, node->now_ns);
  if (c) node->wake_soon = true; /* its HELLO has a deadline */
  return c;
}

void ded_conn_close(ded_node *node, ded_conn *c, int why, bool notify) {
  if (c->state == DED_CONN_DEAD) return;
  ded_conn_state was = c->state;
  c->state = DED_CONN_DEAD;
  node->reap_needed = true;
  node->wake_soon = true; /* a retry, or a round to reconsider */
  if (notify && node->cb.close) node->cb.close(node->user, c->id);
  if (notify)
    node_log(node, DED_LOG_DEBUG, "closing connection %x%s%s: %s", c->id, c->peer ? " to " : "",
             c->peer ? c->peer->sid : "", ded_strerror(why));
  if (c->boot_idx >= 0) ded_boot_conn_gone(node, c->boot_idx, why);
  if (c->peer) {
    if (c->outbound && was != DED_CONN_READY) c->peer->connecting = false;
    ded_peer_conn_lost(node, c->peer, c, why);
  }
}

void ded_conn_protocol_error(ded_node *node, ded_conn *c, int rv, const char *what) {
  char a[64];
  ded_addr_format(&c->remote, a, sizeof a);
  node_log(node, DED_LOG_WARN, "dropping %s%s (%s): %s", c->peer ? "peer " : "connection from ",
           c->peer ? c->peer->sid : a, what, ded_strerror(rv));
  ded_conn_close(node, c, rv, true);
}

bool ded_conn_has_output(const ded_conn *c) { return ded_sendq_has_output(&c->out); }

bool ded_conns_have_output(const ded_node *node) {
  for (uint32_t s = 0; s < node->conns.nslots; s++) {
    const ded_conn *c = ded_conns_at(&node->conns, s);
    if (c && ded_conn_has_output(c)) return true;
  }
  return false;
}

static void conn_enqueue(ded_node *node, ded_conn *c, int cls, ded_sendq_item *it) {
  if (c->leave_queued) { /* the peer stops reading at LEAVE (owned frames only here) */
    ded_sendq_item_free(&node->qenv, it);
    return;
  }
  bool was_idle = !ded_conn_has_output(c);
  /* Work for an idle link: an upload busy period begins. One left open by
   * output dropped unsent (a connection closed) ends first. */
  if (was_idle && !ded_conns_have_output(node)) {
    ded_meter_end(&node->up);
    ded_meter_begin(&node->up);
  }
  ded_sendq_push(&c->out, cls, it);
  if (was_idle && node->cb.want_write) node->cb.want_write(node->user, c->id);
}

int ded_conn_send_owned(ded_node *node, ded_conn *c, int cls, uint8_t *frame, size_t len) {
  ded_sendq_item *it = c->state == DED_CONN_DEAD ? NULL : ded_sendq_item_new(&node->qenv);
  if (!it) {
    ded_mem_free(node->mem, frame);
    return c->state == DED_CONN_DEAD ? 0 : DED_ERR_NOMEM;
  }
  it->owned = frame;
  it->owned_len = len;
  conn_enqueue(node, c, cls, it);
  return 0;
}

int ded_conn_send_ctrl(ded_node *node, ded_conn *c, const uint8_t *frame, size_t len) {
  /* A peer that left reads its connections to their end and acts on
   * nothing more. */
  if (c->state == DED_CONN_DEAD || (c->peer && c->peer->left)) return 0;
  uint8_t *copy = ded_mem_malloc(node->mem, len);
  if (!copy) return DED_ERR_NOMEM;
  memcpy(copy, frame, len);
  return ded_conn_send_owned(node, c, DED_Q_CTRL, copy, len);
}

int ded_conn_send_data(ded_node *node, ded_conn *c, void *owner, uint8_t type, uint64_t no,
                       uint64_t attempt, uint64_t off, uint8_t codec, const uint8_t *elems,
                       size_t len, bool user) {
  /* Nothing after our LEAVE, nothing to a peer that left (checked before
   * any reference is taken). */
  if (c->leave_queued || (c->peer && c->peer->left)) return 0;
  ded_peers_drop_filler(node);
  ded_sendq_item *it = ded_sendq_item_new(&node->qenv);
  if (!it) return DED_ERR_NOMEM;
  ded_msg_data_hdr_encode(it->hdr, type, no, attempt, off, codec, len);
  ded_sendq_item_lend(&node->qenv, it, owner, user, elems, len);
  conn_enqueue(node, c, type == DED_MSG_RESULT ? DED_Q_RESULT : DED_Q_DATA, it);
  return 0;
}

/* Unsent frames of |owner| (only those into the caller's buffer when
 * |user_only|) are dropped, and a frame already half written gets its
 * remaining payload copied, since the stream must stay whole but the
 * memory is about to go back to the caller. */
void ded_conns_detach(ded_node *node, const void *owner, bool user_only) {
  for (uint32_t s = 0; s < node->conns.nslots; s++) {
    ded_conn *c = ded_conns_at(&node->conns, s);
    if (c && ded_sendq_detach(&node->qenv, &c->out, owner, user_only))
      ded_conn_close(node, c, DED_ERR_NOMEM, true); /* cannot keep the stream whole */
  }
}

/* Every frame queued on the dead |from| goes to the end of |to|'s queues,
 * the one half written too: the peer never got it whole, so it is sent
 * again from its start. */
void ded_conn_move_output(ded_node *node, ded_conn *from, ded_conn *to) {
  bool was_idle = !ded_conn_has_output(to);
  ded_sendq_move(&node->qenv, &from->out, &to->out);
  if (was_idle && ded_conn_has_output(to) && node->cb.want_write)
    node->cb.want_write(node->user, to->id);
}

/* ---- admission ---- */

/* True if |a| and |b| are one IP address (any ports). */
static bool conn_same_host(const ded_addr *a, const ded_addr *b) {
  return a->family == b->family && memcmp(a->ip, b->ip, sizeof a->ip) == 0;
}

/* An inbound connection whose handshake has not proved a key: what may be
 * evicted, and what pressure counts. */
static bool conn_unproven(const ded_conn *c) {
  return c->state == DED_CONN_AWAIT_HELLO && !c->outbound && !c->secured;
}

/* Orders by address, then by age (oldest first). */
static int conn_cmp_host_age(const void *x, const void *y) {
  const ded_conn *a = *(ded_conn *const *)x, *b = *(ded_conn *const *)y;
  if (a->remote.family != b->remote.family) return a->remote.family < b->remote.family ? -1 : 1;
  int d = memcmp(a->remote.ip, b->remote.ip, sizeof a->remote.ip);
  if (d) return d;
  return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* The unproven connection to close so that one from |remote| fits, or
 * NULL: if |own|, the oldest of |remote|'s address; else the oldest of the
 * address holding the most (|remote|'s own on a tie, then the one whose
 * oldest is older). */
static ded_conn *conns_victim(ded_node *node, const ded_addr *remote, bool own) {
  ded_conn *v[DED_HANDSHAKES_MAX];
  unsigned n = 0;
  for (uint32_t s = 0; s < node->conns.nslots && n < DED_HANDSHAKES_MAX; s++) {
    ded_conn *c = ded_conns_at(&node->conns, s);
    if (c && conn_unproven(c) && (!own || conn_same_host(&c->remote, remote))) v[n++] = c;
  }
  if (n == 0) return NULL;
  qsort(v, n, sizeof *v, conn_cmp_host_age);
  ded_conn *best = NULL;
  unsigned best_n = 0;
  bool best_mine = false;
  for (unsigned i = 0, j; i < n; i = j) {
    for (j = i + 1; j < n && conn_same_host(&v[j]->remote, &v[i]->remote); j++) {}
    bool mine = conn_same_host(&v[i]->remote, remote);
    if (j - i > best_n ||
        (j - i == best_n && (mine > best_mine || (mine == best_mine && v[i]->seq < best->seq)))) {
      best = v[i];
      best_n = j - i;
      best_mine = mine;
    }
  }
  return best;
}

int ded_conns_admit(ded_node *node, const ded_addr *remote) {
  /* Handshakes in flight (DED_HANDSHAKES_*), and connections in any state
   * from |remote|'s address (DED_CONNS_PER_ADDR_MAX). */
  unsigned all = 0, same = 0, from = 0;
  for (uint32_t s = 0; s < node->conns.nslots; s++) {
    const ded_conn *o = ded_conns_at(&node->conns, s);
    if (!o || o->outbound || o->state == DED_CONN_DEAD) continue;
    bool here = conn_same_host(&o->remote, remote);
    from += here;
    if (o->state != DED_CONN_AWAIT_HELLO) continue;
    all++;
    same += here;
  }
  bool own = same >= DED_HANDSHAKES_PER_ADDR_MAX || from >= DED_CONNS_PER_ADDR_MAX;
  if (!own && all < DED_HANDSHAKES_MAX) return 0;
  ded_conn *v = conns_victim(node, remote, own);
  char a[64], b[64];
  ded_addr_format(remote, a, sizeof a);
  if (!v) {
    node_log(node, DED_LOG_DEBUG,
             "refusing a connection from %s: %u handshakes in flight, %u from it, %u connections "
             "from it, none to evict",
             a, all, same, from);
    return DED_ERR_LIMIT;
  }
  ded_addr_format(&v->remote, b, sizeof b);
  node_log(node, DED_LOG_DEBUG,
           "evicting the handshake from %s for one from %s: %u handshakes in flight, %u from %s",
           b, a, all, same, a);
  node->conns.evicted++;
  ded_conn_close(node, v, DED_ERR_LIMIT, true);
  return 0;
}

void ded_conns_tick(ded_node *node, uint64_t now_ns) {
  ded_conns *t = &node->conns;
  unsigned unproven = 0;
  for (uint32_t s = 0; s < t->nslots; s++) {
    const ded_conn *c = ded_conns_at(t, s);
    unproven += c && conn_unproven(c);
  }
  bool pressed = unproven > DED_HANDSHAKES_MAX / 2;
  /* A flood must not flood the log: one line when pressure starts, once a
   * minute at most; each connection it costs is logged at debug. */
  if (pressed && !t->pressed &&
      (!t->pressed_logged_ns || now_ns >= t->pressed_logged_ns + 60ull * 1000000000u)) {
    node_log(node, DED_LOG_WARN,
             "%u inbound connections have not finished their handshake (more than half of %u): "
             "each gets %u ms now, not %u; since the last such line %llu were evicted for newer "
             "ones and %llu timed out",
             unproven, (unsigned)DED_HANDSHAKES_MAX, (unsigned)DED_HELLO_TIMEOUT_PRESSED_MS,
             (unsigned)DED_HELLO_TIMEOUT_MS, (unsigned long long)t->evicted,
             (unsigned long long)t->timed_out);
    t->pressed_logged_ns = now_ns;
    t->evicted = t->timed_out = 0;
  }
  t->pressed = pressed;
  for (uint32_t s = 0; s < t->nslots; s++) {
    ded_conn *c = ded_conns_at(t, s);
    if (!c || c->state != DED_CONN_AWAIT_HELLO) continue;
    bool unp = conn_unproven(c);
    uint64_t ms = pressed && unp ? DED_HELLO_TIMEOUT_PRESSED_MS : DED_HELLO_TIMEOUT_MS;
    if (now_ns < c->opened_ns + ms * 1000000u) continue;
    if (!unp) { /* it proved the key (or is our own call): worth a line */
      ded_conn_protocol_error(node, c, DED_ERR_TIMEOUT, "no HELLO");
      continue;
    }
    char a[64];
    ded_addr_format(&c->remote, a, sizeof a);
    node_log(node, DED_LOG_DEBUG, "dropping connection from %s (no HELLO within %llu ms)", a,
             (unsigned long long)ms);
    t->timed_out++;
    ded_conn_close(node, c, DED_ERR_TIMEOUT, true);
  }
}
