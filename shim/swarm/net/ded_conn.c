#include "ded_conn.h"

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
                       uint64_t attempt, uint64_t off, const uint8_t *elems, size_t len,
                       bool user) {
  /* Nothing after our LEAVE, nothing to a peer that left (checked before
   * any reference is taken). */
  if (c->leave_queued || (c->peer && c->peer->left)) return 0;
  ded_peers_drop_filler(node);
  ded_sendq_item *it = ded_sendq_item_new(&node->qenv);
  if (!it) return DED_ERR_NOMEM;
  ded_msg_data_hdr_encode(it->hdr, type, no, attempt, off, len);
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

void ded_conns_tick(ded_node *node, uint64_t now_ns) {
  for (uint32_t s = 0; s < node->conns.nslots; s++) {
    ded_conn *c = ded_conns_at(&node->conns, s);
    if (c && c->state == DED_CONN_AWAIT_HELLO &&
        now_ns >= c->opened_ns + (uint64_t)DED_HELLO_TIMEOUT_MS * 1000000u)
      ded_conn_protocol_error(node, c, DED_ERR_TIMEOUT, "no HELLO");
  }
}
