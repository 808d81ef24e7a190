/*
 * ded_submit.c: the round module's intake (ded_round.h): the trainer's
 * all-reduces queued on the stream (round/ded_stream.h) and the rounds
 * cut from it, each as soon as the one before it has its length; what no
 * round covers when the node leaves. The state machine is ded_round.c.
 */
#include <string.h>

#include "../core/ded_assert.h"
#include "../core/ded_err.h"
#include "../ded_node_int.h"
#include "ded_round.h"
#include "ded_round_int.h"

/* A new round, the next number, for the stream's cut |c|, and its first
 * step. */
static int round_create(ded_node *node, const ded_cut *c, uint64_t now_ns) {
  ded_round *r = ded_mem_calloc(node->mem, 1, sizeof *r);
  if (!r) return DED_ERR_NOMEM;
  r->no = node->rounds.next++;
  r->a = c->a;
  r->pos = c->pos;
  r->off = c->off;
  r->call = c->seq;
  r->es = ded_dtype_size(c->a.dtype);
  r->state = ROUND_WAIT_PREV;
  r->submit_ns = now_ns;
  r->bound_ns = c->bound_ns; /* the call's: it returns by then, however it is cut */
  node->rounds.v[node->rounds.n++] = r;
  ded_round_try_join(node, r, now_ns); /* may finish (and free) |r| at once */
  return 0;
}

/* A round that never started (no memory for it, or the node leaves):
 * the rest of its call is reported at once with |status|. */
static void round_fail_cut(ded_node *node, const ded_cut *c, int status) {
  ded_round_result res;
  memset(&res, 0, sizeof res);
  res.status = status;
  res.round = node->rounds.next;
  res.pos = c->pos;
  res.off = c->off;
  res.count = c->a.count;
  res.contributors = 1;
  res.total_weight = c->a.weight;
  ded_stream_fix(&node->rounds.stream, c->a.count);
  res.last = ded_stream_reported(&node->rounds.stream, c->seq, c->a.count);
  res.peers = ded_node_round_peer_count(node);
  node->cb.round_done(node->user, c->a.ctx, &res);
}

bool ded_rounds_can_cut(const ded_node *node) {
  return node->rounds.n < DED_ROUNDS_ACTIVE_MAX && !node->rounds.reporting &&
         ded_stream_ready(&node->rounds.stream);
}

void ded_rounds_pump(ded_node *node, uint64_t now_ns) {
  ded_cut c;
  while (node->rounds.n < DED_ROUNDS_ACTIVE_MAX && !node->rounds.reporting &&
         ded_stream_cut(&node->rounds.stream, &c)) {
    if (round_create(node, &c, now_ns) != 0)
      round_fail_cut(node, &c, DED_ERR_NOMEM); /* the rest of its call, as one round */
  }
}

void ded_rounds_postpone(ded_node *node, uint64_t gap_ns) {
  for (size_t i = 0; i < node->rounds.n; i++) {
    ded_round *r = node->rounds.v[i];
    if (!ded_round_over(r)) r->bound_ns += gap_ns;
  }
  ded_stream_postpone(&node->rounds.stream, gap_ns);
}

void ded_rounds_fail_queued(ded_node *node, int status) {
  ded_cut c;
  while (ded_stream_cut(&node->rounds.stream, &c)) round_fail_cut(node, &c, status);
}

int64_t ded_round_submit(ded_node *node, const ded_round_args *args, uint64_t now_ns) {
  uint64_t no = node->rounds.next + ded_stream_waiting(&node->rounds.stream);
  bool idle = node->rounds.stream.n == 0; /* nothing of ours in flight: the trainer computed */
  int rv = ded_stream_push(&node->rounds.stream, args, now_ns + node->s.round_timeout_ns);
  if (rv) return rv;
  ded_rounds_note_compute(node, args, idle, now_ns);
  if (ded_rounds_can_cut(node)) ded_rounds_pump(node, now_ns);
  return (int64_t)no;
}

void ded_round_fix(ded_node *node, ded_round *r, uint64_t count) {
  if (r->fixed) return;
  DED_ASSERT(count > 0 && count <= r->a.count);
  r->a.count = count;
  r->fixed = true;
  ded_stream_fix(&node->rounds.stream, count);
}
