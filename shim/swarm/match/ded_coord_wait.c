#include "ded_coord.h"

#include <string.h>

#include "../core/ded_assert.h"
#include "../core/ded_limits.h"
#include "../ded_node_int.h"
#include "ded_coord_int.h"

/* Whom a view waits for, and for how long (ded_coord.h, "Files"). */

void ded_coord_expect_add(ded_node *node, ded_coord *cr, const uint8_t id[DED_ID_BYTES]) {
  for (unsigned i = 0; i < cr->nexpect; i++)
    if (memcmp(cr->expect[i], id, DED_ID_BYTES) == 0) return;
  if (cr->nexpect == cr->expect_cap) {
    unsigned cap = cr->expect_cap ? cr->expect_cap * 2 : 16;
    if (cap > 4 * DED_ROUND_MEMBERS_MAX) return;
    uint8_t(*v)[DED_ID_BYTES] = ded_mem_realloc(node->mem, cr->expect, (size_t)cap * DED_ID_BYTES);
    if (!v) return;
    cr->expect = v;
    cr->expect_cap = cap;
  }
  memcpy(cr->expect[cr->nexpect++], id, DED_ID_BYTES);
}

/* The lineage is waited for: round-1's members, and round-2's (a member
 * that missed one round is waited for again in the next), and the
 * acceptors of a result carried over rounds with none. */
void ded_coord_expect_lineage(ded_node *node, ded_coord *cr) {
  ded_lin_entry *c = cr->carried ? ded_coord_prev(node, cr) : NULL;
  for (unsigned i = 0; c && i < c->n; i++) ded_coord_expect_add(node, cr, c->ids[i]);
  for (uint64_t back = 1; back <= 2 && back <= cr->round; back++) {
    ded_lin_entry *e = ded_lineage_get(&node->lin, cr->round - back);
    for (unsigned i = 0; e && i < e->n; i++) ded_coord_expect_add(node, cr, e->ids[i]);
  }
}

typedef struct expect_ctx {
  ded_node *node;
  ded_coord *cr;
} expect_ctx;

static void expect_one(void *ctx, const uint8_t id[DED_ID_BYTES]) {
  expect_ctx *e = ctx;
  ded_coord_expect_add(e->node, e->cr, id);
}

void ded_coord_expect_waited(ded_node *node, ded_coord *cr, uint64_t now_ns) {
  ded_coord_expect_lineage(node, cr);
  expect_ctx ec = {node, cr};
  ded_intents_each(&node->intents, cr->round, now_ns, expect_one, &ec);
}

bool ded_coord_peer_waits(ded_node *node, uint64_t round) {
  const ded_coord *cr = ded_coord_find(node, round);
  if (!cr || cr->state != COORD_GATHERING) return false;
  for (size_t i = 0; i < cr->g.n; i++)
    if (!id_is_me(node, cr->g.v[i].id)) return true;
  return false;
}

/* True if |id| may still report to a round we coordinate. */
bool ded_coord_alive(ded_node *node, const ded_coord *cr, const uint8_t id[DED_ID_BYTES]) {
  if (id_is_me(node, id)) {
    if (node->leaving || node->s.no_rounds || ded_abstain_from(node, cr->round)) return false;
    /* In a failover, our own trainer is waited for only if it is in the round. */
    return cr->view == 0 || ded_round_find(node, cr->round) || ded_history_find(&node->hist, cr->round);
  }
  ded_peer *p = ded_peer_find(node, id);
  return p && ded_peer_participates(node, p) && ded_abstain_peer_may_come(p, cr->round);
}

/* Alive and not gone quiet (ded_peer_quiet: stopped, most likely, though
 * not yet taken for lost): put in an attempt, a quiet peer would hold it
 * until its silence is up, and the round would need another view. */
bool ded_coord_active(ded_node *node, const ded_coord *cr, const uint8_t id[DED_ID_BYTES]) {
  if (!ded_coord_alive(node, cr, id)) return false;
  ded_peer *p = id_is_me(node, id) ? NULL : ded_peer_find(node, id);
  return !p || !ded_peer_quiet(node, p, node->now_ns);
}

/* ---- announced late members ---- */

/* Who an announced member's hold still waits for: one that is here and
 * has not joined |cr| (if given) yet (ded_intents_pred). */
typedef struct intent_wait {
  ded_node *node;
  const ded_coord *cr;
} intent_wait;

static bool intent_waited(void *ctx, const uint8_t id[DED_ID_BYTES]) {
  const intent_wait *w = ctx;
  ded_peer *p = ded_peer_find(w->node, id);
  return p && ded_peer_participates(w->node, p) && !ded_peer_quiet(w->node, p, w->node->now_ns) &&
         !(w->cr && ded_gather_find(&w->cr->g, id));
}

uint64_t ded_coord_intent_until(ded_node *node, uint64_t round, const ded_coord *cr,
                                  uint64_t now_ns, bool heard_only) {
  intent_wait w = {node, cr};
  return ded_intents_until(&node->intents, round, now_ns, heard_only, intent_waited, &w);
}

bool ded_coord_lin_finishing(ded_node *node, uint64_t no, const ded_coord *cr, uint64_t now_ns) {
  ded_lin_entry *prev = no > 0 ? ded_lineage_get(&node->lin, no - 1) : NULL;
  bool member = false;
  for (unsigned i = 0; prev && i < prev->n && !member; i++) member = id_is_me(node, prev->ids[i]);
  if (!member) return false;
  bool recent = now_ns < prev->have_ns + ded_timing_coord_wait(&node->timing, 0);
  for (unsigned i = 0; i < prev->n; i++) {
    const uint8_t *id = prev->ids[i];
    if (id_is_me(node, id) || (cr && ded_gather_find(&cr->g, id))) continue;
    if (prev->have && ded_bit_get(prev->have, i) && !recent) continue;
    ded_peer *p = ded_peer_find(node, id);
    if (p && ded_peer_participates(node, p) && !ded_peer_quiet(node, p, now_ns)) return true;
  }
  return false;
}

/* intent: a view still gathering of round |j->round| or a later one waits
 * for |from| too. */
static void coord_on_intent(ded_node *node, ded_coord *cr, const ded_peer *from,
                            const ded_msg_join *j) {
  switch (cr->state) {
  case COORD_GATHERING:
    if (cr->round >= j->round) ded_coord_expect_add(node, cr, from->id);
    break;
  case COORD_DECIDED:
  case COORD_GAVE_UP:
    break;
  }
}

/* |from| will join round |j->round| (DED_JOIN_F_INTENT), or a later one:
 * it came late for an earlier round and is fetching its result. Whoever
 * coordinates one of those rounds in view 0 waits for it (coord_evaluate),
 * and so does our own JOIN of such a round: the coordinator is not lost
 * for waiting. If we finished the round, AHEAD also says where we are. */
void ded_coord_on_intent(ded_node *node, ded_peer *from, const ded_msg_join *j,
                         uint64_t now_ns) {
  ded_round *r = ded_round_find(node, j->round);
  if (j->round < node->rounds.next && (!r || ded_round_over(r)))
    ded_coord_send_stale_or_ahead(node, from, j->round, true);
  uint64_t hold = ded_intents_hold_ns(&node->timing, ded_plan_lp_peer(node, from->id).down_Bps,
                                      j->count, ded_dtype_size(j->dtype));
  if (hold == UINT64_MAX) {
    node_log(node, DED_LOG_DEBUG, "%s will join from round %llu on, but fetches too slowly to "
             "be waited for", from->sid, (unsigned long long)j->round);
    return;
  }
  uint64_t until = now_ns + hold;
  ded_intents_add(&node->intents, from->id, j->round, until, true);
  node_log(node, DED_LOG_DEBUG, "%s will join from round %llu on; waited for up to %llu ms",
           from->sid, (unsigned long long)j->round, (unsigned long long)(hold / 1000000u));
  for (unsigned i = 0; i < node->rounds.n; i++) {
    r = node->rounds.v[i];
    if (r->no >= j->round && r->view == 0 && !r->genesis &&
        (r->state == ROUND_JOINED || r->state == ROUND_JOINING) &&
        ded_coord_intent_until(node, r->no, NULL, now_ns, false) == until)
      r->wait_ns = DED_MAX(r->wait_ns, ded_round_held_wait(node, r, until));
  }
  for (size_t i = 0; i < node->coords.n; i++) coord_on_intent(node, node->coords.v[i], from, j);
}

/* A member that announced itself is on its way (it is fetching the round
 * before): waited for as long as that should take it, but, however often
 * it announces itself again, never past a quarter of the bound. A member
 * of the round before that is still finishing it is waited for a member's
 * wait for a decision (ded_timing_join_wait) from the first JOIN: long enough
 * for its last chunks, short enough that one stopped in the middle
 * (SIGSTOP, a closed lid) costs the swarm little. A joiner our node
 * offered the run's state to (an intent only we know of: ded_donor.c)
 * is waited for as long as the round's other members wait for a
 * decision anyway, less a deadline floor for the decision to reach them:
 * they do not know of it, and past that they would fail over without it
 * (a lost view, the joiner late all the same); with no other member in,
 * as long as an announced one. */
bool ded_coord_holds(ded_node *node, const ded_coord *cr, uint64_t now_ns) {
  uint64_t cap_ns = cr->first_ns + ded_timing_cap(&node->timing);
  bool alone = cr->g.n == 1 && ded_gather_find(&cr->g, node->ident.id);
  uint64_t patient_ns = alone ? cap_ns
                              : cr->first_ns + ded_timing_join_wait(&node->timing, 0) -
                                    node->timing.floor_ns;
  return !cr->genesis && cr->view == 0 &&
            ((now_ns < cap_ns && ded_coord_intent_until(node, cr->round, cr, now_ns, true) > now_ns) ||
          (now_ns < patient_ns && ded_coord_intent_until(node, cr->round, cr, now_ns, false) > now_ns) ||
          (now_ns < cr->first_ns + ded_timing_join_wait(&node->timing, 0) &&
           ded_coord_lin_finishing(node, cr->round, cr, now_ns)));
}
