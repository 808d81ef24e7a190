/*
 * ded_abstain.c: stepping down from a round our trainer does not come to
 * (ded_abstain.h).
 */
#include "ded_abstain.h"

#include <string.h>

#include "../ded_node_int.h"

/* Whether our trainer came to |round|: a round of ours at it or past it,
 * or one not over yet (our member is still busy with the swarm). */
static bool abstain_trainer_came(const ded_node *node, uint64_t round) {
  for (unsigned i = 0; i < node->rounds.n; i++) {
    const ded_round *r = node->rounds.v[i];
    if (r->no >= round || !ded_round_over(r)) return true;
  }
  return false;
}

/* Whether we are an acceptor of |round|: a member of the result round-1
 * ended with here. */
static bool abstain_acceptor_of(ded_node *node, uint64_t round) {
  const ded_lin_entry *e = round > 0 ? ded_lineage_get(&node->lin, round - 1) : NULL;
  if (!e || !e->final || e->final_attempt == 0 || e->final_attempt != e->attempt) return false;
  for (unsigned i = 0; i < e->n; i++)
    if (id_is_me(node, e->ids[i])) return true;
  return false;
}

void ded_abstain_on_waited(ded_node *node, uint64_t round, bool probe, uint64_t now_ns) {
  ded_abstain *a = &node->abstain;
  if (round != node->rounds.next || abstain_trainer_came(node, round)) return;
  switch (a->state) {
  case ABSTAIN_WAITED:
    if (a->waited_round == round) { /* the first wait counts */
      a->probed |= probe;
      return;
    }
    break;
  case ABSTAIN_IN:
    break;
  }
  a->state = ABSTAIN_WAITED;
  a->waited_round = round;
  a->waited_ns = now_ns;
  a->probed = probe;
}

/* Whether a peer still waits for us in |round|: a view we coordinate,
 * still gathering, holds a peer's report; or a peer probed us, and no
 * record says the round completed without us since. */
static bool abstain_still_waited(ded_node *node, uint64_t round) {
  return ded_coord_peer_waits(node, round) ||
         (node->abstain.probed && ded_rounds_run_ahead(node) < round);
}

static void abstain_step_down(ded_node *node, uint64_t round, uint64_t now_ns) {
  ded_abstain *a = &node->abstain;
  a->down = round;
  node_log(node, DED_LOG_INFO, "round %llu: peers have waited %llu ms for this job, whose trainer "
           "has not come to the round: it steps down from it (its vote is not waited for); its "
           "own call of the round, if it comes, finds it out of step",
           (unsigned long long)round, (unsigned long long)((now_ns - a->waited_ns) / 1000000u));
  uint8_t frame[DED_ABSTAIN_FRAME_BYTES];
  ded_wr w = ded_wr_init(frame, sizeof frame);
  ded_msg_abstain m = {round};
  ded_msg_abstain_encode(&w, &m);
  for (size_t i = 0; i < node->peers.n; i++) {
    ded_peer *p = node->peers.v[i];
    if (p->conn && !p->left) (void)ded_conn_send_ctrl(node, p->conn, frame, w.pos);
  }
}

void ded_abstain_on_tick(ded_node *node, uint64_t now_ns) {
  ded_abstain *a = &node->abstain;
  switch (a->state) {
  case ABSTAIN_IN:
    return;
  case ABSTAIN_WAITED:
    break;
  }
  uint64_t round = a->waited_round;
  if (round != node->rounds.next || abstain_trainer_came(node, round) || a->down == round ||
      node->leaving || node->s.no_rounds || !abstain_still_waited(node, round)) {
    a->state = ABSTAIN_IN;
    return;
  }
  if (now_ns < a->waited_ns + node->s.round_timeout_ns / 2) return;
  a->state = ABSTAIN_IN;
  /* Reloading, we are out of step anyway; not an acceptor, our vote is
   * not needed. */
  if (ded_xfer_busy(node) || !abstain_acceptor_of(node, round)) return;
  abstain_step_down(node, round, now_ns);
}

void ded_abstain_on_msg(ded_node *node, ded_peer *from, const ded_msg_abstain *m) {
  if (m->round <= from->abstain_round) return;
  from->abstain_round = m->round;
  from->idle = true;
  node_log(node, DED_LOG_INFO, "round %llu: peer %s steps down from it (its trainer has not "
           "come to it): not counted among its acceptors, nor waited for",
           (unsigned long long)m->round, from->sid);
}

void ded_abstain_on_join(ded_peer *from, uint64_t round) {
  if (round > from->abstain_round) from->idle = false;
}

bool ded_abstain_from(const ded_node *node, uint64_t round) {
  return round > 0 && node->abstain.down == round;
}

bool ded_abstain_between(const ded_node *node, uint64_t after, uint64_t before) {
  return node->abstain.down > after && node->abstain.down < before;
}

bool ded_abstain_peer_may_come(const ded_peer *p, uint64_t round) {
  return !p->idle || round < p->abstain_round;
}

bool ded_abstain_counts(ded_node *node, uint64_t round, const uint8_t *id) {
  if (id_is_me(node, id))
    return !node->leaving && !node->s.no_rounds && !ded_abstain_from(node, round);
  ded_peer *p = ded_peer_find(node, id);
  return p && !p->left && !p->evicted && p->abstain_round != round;
}
