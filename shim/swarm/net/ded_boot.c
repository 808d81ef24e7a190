#include "ded_boot.h"

#include <string.h>

#include "../core/ded_assert.h"
#include "../core/ded_err.h"
#include "../ded_node_int.h"

void ded_boot_init(ded_boot *b, const ded_addr *addrs, unsigned n) {
  memset(b, 0, sizeof *b);
  b->n = n;
  for (unsigned i = 0; i < n; i++) {
    b->slots[i].addr = addrs[i];
    b->slots[i].backoff_ms = NODE_BACKOFF_MS_MIN;
  }
}

/* A bootstrap attempt's connection went, for |why|. */
void ded_boot_conn_gone(ded_node *node, int idx, int why) {
  node->boot.slots[idx].connecting = false;
  node->boot.slots[idx].refused = why == DED_ERR_AUTH;
}

static void boot_try(ded_node *node, unsigned i, uint64_t now_ns) {
  ded_boot_slot *b = &node->boot.slots[i];
  if (b->self || b->reached || b->connecting || now_ns < b->next_try_ns) return;
  ded_conn *c = ded_conn_open(node, true, &b->addr);
  if (!c) return;
  c->boot_idx = (int)i;
  b->connecting = true;
  b->next_try_ns = now_ns + (uint64_t)b->backoff_ms * 1000000u;
  b->backoff_ms = DED_MIN(b->backoff_ms * 2, NODE_BACKOFF_MS_MAX);
  if (node->cb.connect(node->user, c->id, &b->addr) != 0) ded_conn_close(node, c, DED_ERR_BOOTSTRAP, true);
}

/*
 * Every bootstrap address is tried until a peer answers there, even after
 * the first one did: two groups that came up through different addresses
 * would otherwise never meet. Past the bound with no answer at all, the
 * node reports failure and stops.
 */
/* Whether slot |i| is tried in state |st|: every slot in DONE, only
 * those added later in FAILED. */
static bool boot_tried_in(const ded_boot *b, unsigned i) {
  return b->state == DED_BOOT_DONE || (b->state == DED_BOOT_FAILED && b->slots[i].later);
}

void ded_boot_tick(ded_node *node, uint64_t now_ns) {
  if (node->boot.state == DED_BOOT_DONE || node->boot.state == DED_BOOT_FAILED) {
    for (unsigned i = 0; i < node->boot.n && !node->leaving; i++)
      if (boot_tried_in(&node->boot, i)) boot_try(node, i, now_ns);
    return;
  }
  if (node->boot.state != DED_BOOT_RUNNING) return;
  bool all_self = true; /* the starting addresses decide */
  for (unsigned i = 0; i < node->boot.n; i++)
    all_self &= node->boot.slots[i].self || node->boot.slots[i].later;
  if (all_self) { /* every address was our own: we are the first peer */
    node->boot.state = DED_BOOT_DONE;
    node_log(node, DED_LOG_INFO, "first peer of the run (every DEDMPI_JOIN address is this one)");
    node_emit(node, DED_EVENT_BOOTSTRAP, 0, NULL);
    return;
  }
  if (now_ns >= node->boot.deadline_ns) {
    node->boot.state = DED_BOOT_FAILED;
    char a[64];
    ded_addr_format(&node->boot.slots[0].addr, a, sizeof a);
    bool refused = false; /* a peer answered, to refuse our key */
    for (unsigned i = 0; i < node->boot.n; i++) refused |= node->boot.slots[i].refused;
    node_log(node, DED_LOG_ERROR, "no peer %s at %s%s within %llu ms%s",
             refused ? "let us in" : "answered", a,
             node->boot.n > 1 ? " (or the other DEDMPI_JOIN addresses)" : "",
             (unsigned long long)(node->s.bootstrap_timeout_ns / 1000000u),
             refused ? ": the handshake failed (our key refused: another swarm key or run name?)" : "");
    node_emit(node, DED_EVENT_BOOTSTRAP, DED_ERR_BOOTSTRAP, NULL);
    return;
  }
  for (unsigned i = 0; i < node->boot.n; i++) boot_try(node, i, now_ns);
}

int ded_boot_start(ded_node *node, uint64_t now_ns) {
  if (node->boot.state != DED_BOOT_IDLE) return DED_ERR_INVALID_ARG;
  bool any = false; /* a starting address (not one added before the start) */
  for (unsigned i = 0; i < node->boot.n; i++) any |= !node->boot.slots[i].later;
  if (!any) {
    node->boot.state = DED_BOOT_DONE;
    node_emit(node, DED_EVENT_BOOTSTRAP, 0, NULL);
  } else {
    node->boot.state = DED_BOOT_RUNNING;
    node->boot.deadline_ns = now_ns + node->s.bootstrap_timeout_ns;
  }
  ded_boot_tick(node, now_ns); /* DONE: the addresses added before the start */
  return 0;
}

unsigned ded_boot_add(ded_node *node, const ded_addr *addrs, unsigned n, uint64_t now_ns) {
  ded_boot *b = &node->boot;
  unsigned taken = 0;
  for (unsigned k = 0; k < n; k++) {
    bool dup = false;
    for (unsigned i = 0; i < b->n && !dup; i++) dup = ded_addr_equal(&b->slots[i].addr, &addrs[k]);
    if (dup) continue;
    unsigned i = b->n;
    if (i == DED_BOOTSTRAP_MAX) { /* reuse a slot that is done with */
      for (i = 0; i < b->n && b->state != DED_BOOT_RUNNING; i++)
        if ((b->slots[i].self || b->slots[i].reached) && !b->slots[i].connecting) break;
      if (i == b->n || b->state == DED_BOOT_RUNNING) {
        char a[64];
        ded_addr_format(&addrs[k], a, sizeof a);
        node_log(node, DED_LOG_WARN,
                 "bootstrap address %s ignored: %u addresses are being tried already",
                 a, (unsigned)DED_BOOTSTRAP_MAX);
        continue;
      }
    } else {
      b->n++;
    }
    memset(&b->slots[i], 0, sizeof b->slots[i]);
    b->slots[i].addr = addrs[k];
    b->slots[i].backoff_ms = NODE_BACKOFF_MS_MIN;
    b->slots[i].later = true;
    taken++;
  }
  /* Tried now rather than at the next tick, unless bootstrap has not started. */
  if (taken && b->state != DED_BOOT_IDLE) ded_boot_tick(node, now_ns);
  return taken;
}

void ded_boot_self(ded_node *node, int idx) { node->boot.slots[idx].self = true; }

void ded_boot_reached(ded_node *node, int idx, const ded_peer *p) {
  node->boot.slots[idx].reached = true;
  node->boot.slots[idx].connecting = false; /* the connection is the peer's now */
  if (node->boot.state != DED_BOOT_RUNNING) return;
  node->boot.state = DED_BOOT_DONE;
  node_log(node, DED_LOG_INFO, "bootstrapped through peer %s", p->sid);
  node_emit(node, DED_EVENT_BOOTSTRAP, 0, p->id);
}

bool ded_boot_need_tick(const ded_node *node) {
  if (node->boot.state == DED_BOOT_RUNNING) return true;
  for (unsigned i = 0; i < node->boot.n; i++)
    if (boot_tried_in(&node->boot, i) && !node->boot.slots[i].self && !node->boot.slots[i].reached)
      return true;
  return false;
}
