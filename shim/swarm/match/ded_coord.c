#include "ded_coord.h"

#include <limits.h>
#include <string.h>

#include "../core/ded_assert.h"
#include "../core/ded_err.h"
#include "../core/ded_limits.h"
#include "../ded_node_int.h"
#include "ded_coord_int.h"

/* Whether gather |ctx| holds |id|'s join (ded_intents_pred). */
static bool gather_has(void *ctx, const uint8_t id[DED_ID_BYTES]) {
  return ded_gather_find(ctx, id) != NULL;
}

/* ------------------------------------------------------------------ */
/* 7. coordinator side of a round                                      */
/* ------------------------------------------------------------------ */

ded_coord *ded_coord_find(ded_node *node, uint64_t no) {
  for (size_t i = 0; i < node->coords.n; i++)
    if (node->coords.v[i]->round == no) return node->coords.v[i];
  return NULL;
}

/* Forgets everything of the view |cr| coordinated. */
static void coord_clear(ded_node *node, ded_coord *cr) {
  ded_gather_free(&cr->g, node->mem);
  for (unsigned i = 0; i < cr->natt; i++) {
    ded_msg_commit_free(&cr->att[i].plan, node->mem);
    ded_mem_free(node->mem, cr->att[i].have);
    ded_mem_free(node->mem, cr->att[i].holder);
  }
  cr->natt = 0;
  ded_mem_free(node->mem, cr->commit_frame);
  ded_mem_free(node->mem, cr->late_frame);
  cr->commit_frame = cr->late_frame = NULL;
  cr->commit_len = cr->late_len = 0;
  cr->state = COORD_GATHERING;
  cr->clock = cr->held = cr->asked = cr->rolled = false;
  cr->first_ns = cr->last_ns = cr->deadline_ns = 0;
}

static void coord_free(ded_node *node, ded_coord *cr) {
  coord_clear(node, cr);
  ded_mem_free(node->mem, cr->expect);
  ded_mem_free(node->mem, cr);
}

/* The round whose result's members are |cr|'s acceptors: the round
 * before, or the one carried over rounds with no result (ded_coord_try_carry).
 * NULL when not held here. */
ded_lin_entry *ded_coord_prev(ded_node *node, const ded_coord *cr) {
  if (cr->rolled) return NULL;
  if (cr->carried) {
    ded_lin_entry *e = ded_lineage_get(&node->lin, cr->carry_round);
    return e && e->attempt == cr->carry_attempt ? e : NULL;
  }
  return cr->round > 0 ? ded_lineage_get(&node->lin, cr->round - 1) : NULL;
}

static ded_coord *coord_new(ded_node *node, uint64_t no, uint32_t view, bool genesis) {
  if (node->coords.n == node->coords.cap) {
    size_t cap = node->coords.cap ? node->coords.cap * 2 : 8;
    ded_coord **v = ded_mem_realloc(node->mem, node->coords.v, cap * sizeof *v);
    if (!v) return NULL;
    node->coords.v = v;
    node->coords.cap = cap;
  }
  ded_coord *cr = ded_mem_calloc(node->mem, 1, sizeof *cr);
  if (!cr) return NULL;
  cr->round = no;
  cr->view = view;
  cr->genesis = genesis;
  ded_gather_init(&cr->g, no, genesis);
  ded_coord_expect_waited(node, cr, node->now_ns);
  node->coords.v[node->coords.n++] = cr;
  return cr;
}

/* The round this peer is at: its next round, or past the newest
 * membership it knows (a lineage a snapshot brought). */
static uint64_t coord_now_round(const ded_node *node) {
  return DED_MAX(node->rounds.next, node->lin.have_members ? node->lin.members_round + 1 : 0);
}

/* True if |round| is too old to matter for late members: no view of it
 * is kept (ded_coords_prune). */
static bool coord_forgotten(const ded_node *node, uint64_t round) {
  return round + DED_ROUNDS_AHEAD_MAX < coord_now_round(node);
}

/* Forgets rounds too old to matter for late members. */
void ded_coords_prune(ded_node *node) {
  size_t out = 0;
  for (size_t i = 0; i < node->coords.n; i++) {
    ded_coord *cr = node->coords.v[i];
    if (coord_forgotten(node, cr->round)) {
      coord_free(node, cr);
      continue;
    }
    node->coords.v[out++] = cr;
  }
  node->coords.n = out;
}

/* STALE (or, |ahead|, AHEAD) for |round|: where we are. */
void ded_coord_send_stale_or_ahead(ded_node *node, ded_peer *to, uint64_t round, bool ahead) {
  if (!to->conn) return;
  uint8_t frame[DED_STALE_FRAME_BYTES];
  ded_wr w = ded_wr_init(frame, sizeof frame);
  uint64_t next = coord_now_round(node);
  ded_msg_stale m = {round, next > round ? next : round + 1};
  if (ahead)
    ded_msg_ahead_encode(&w, &m);
  else
    ded_msg_stale_encode(&w, &m);
  ded_conn_send_ctrl(node, to->conn, frame, w.pos);
}

void ded_coord_send_stale(ded_node *node, ded_peer *to, uint64_t round) {
  ded_coord_send_stale_or_ahead(node, to, round, false);
}

static void coord_send_probe(ded_node *node, ded_peer *to, uint64_t round, uint32_t view) {
  if (!to->conn) return;
  uint8_t frame[DED_PROBE_FRAME_BYTES];
  ded_wr w = ded_wr_init(frame, sizeof frame);
  ded_msg_probe m = {round, view};
  ded_msg_probe_encode(&w, &m);
  ded_conn_send_ctrl(node, to->conn, frame, w.pos);
}

/* PROBE to each peer |cr| waits for that has not reported to it. */
static void coord_probe_absent(ded_node *node, const ded_coord *cr) {
  for (unsigned i = 0; i < cr->nexpect; i++) {
    if (id_is_me(node, cr->expect[i]) || ded_gather_find(&cr->g, cr->expect[i])) continue;
    ded_peer *p = ded_peer_find(node, cr->expect[i]);
    if (p) coord_send_probe(node, p, cr->round, cr->view);
  }
}

/* What a reporter holds of an attempt: its plan, and the shards it has. */
static void coord_take_status(ded_node *node, ded_coord *cr, const uint8_t id[DED_ID_BYTES],
                              const ded_msg_join *j) {
  const ded_msg_commit *plan = &j->plan;
  const uint8_t *have = j->have;
  struct ded_coord_attempt *a = NULL;
  for (unsigned i = 0; i < cr->natt && !a; i++)
    if (cr->att[i].plan.attempt == plan->attempt) a = &cr->att[i];
  if (!a) {
    if (cr->natt == sizeof cr->att / sizeof cr->att[0]) return;
    a = &cr->att[cr->natt];
    memset(a, 0, sizeof *a);
    a->have = ded_mem_calloc(node->mem, ((size_t)plan->k + 7) / 8, 1);
    a->holder = ded_mem_malloc(node->mem, (size_t)plan->k * sizeof *a->holder);
    if (!a->have || !a->holder || ded_msg_commit_copy(&a->plan, plan, node->mem)) {
      ded_mem_free(node->mem, a->have);
      ded_mem_free(node->mem, a->holder);
      return;
    }
    for (unsigned s = 0; s < plan->k; s++) a->holder[s] = UINT16_MAX;
    a->acc_view = DED_VIEW_NONE;
    cr->natt++;
  } else if (a->plan.k != plan->k || a->plan.count != plan->count) {
    return; /* the same attempt told differently: believe the first */
  }
  for (unsigned i = 0; i < plan->k; i++) ded_coord_expect_add(node, cr, plan->members[i].id);
  if (j->flags & DED_JOIN_F_DONE) a->done = true;
  if (j->acc_view != DED_VIEW_NONE && (a->acc_view == DED_VIEW_NONE || j->acc_view > a->acc_view))
    a->acc_view = j->acc_view;
  unsigned idx = plan->k;
  for (unsigned i = 0; i < plan->k; i++)
    if (memcmp(plan->members[i].id, id, DED_ID_BYTES) == 0) idx = i;
  if (idx == plan->k) return; /* a late member: it holds nothing it can serve */
  for (unsigned s = 0; s < plan->k; s++) {
    if (!ded_bit_get(have, s)) continue;
    ded_bit_set(a->have, s);
    /* The shard's reducer, else anyone but a client (whom other clients
     * cannot reach). */
    if (a->holder[s] == UINT16_MAX || idx == s ||
        (plan->members[a->holder[s]].flags & DED_MEMBER_F_CLIENT &&
         !(plan->members[idx].flags & DED_MEMBER_F_CLIENT)))
      a->holder[s] = (uint16_t)idx;
  }
}

/* Our own member side gets the decision (a COMMIT or DECIDE frame), as
 * any joiner does, once we return. */
static void coord_deliver_self(ded_node *node, const uint8_t *frame, size_t len) {
  node_post_self(node, frame, len);
}

/* Our own member side gets a PROBE of |round| into view |view|. */
static void coord_probe_self(ded_node *node, uint64_t round, uint32_t view) {
  uint8_t frame[DED_PROBE_FRAME_BYTES];
  ded_wr w = ded_wr_init(frame, sizeof frame);
  ded_msg_probe m = {round, view};
  ded_msg_probe_encode(&w, &m);
  node_post_self(node, frame, w.pos);
}

/* |frame| to every joiner of |cr| but us; with |members|, to those among
 * them only, and the view's DECIDE to the others (ded_coord_active: a
 * quiet joiner left out of a new attempt; nothing else would tell it, as
 * its connection is still up, and its wait for a decision would end in a
 * failover that probes the attempt's members into a later view). */
static void coord_send_to_joiners(ded_node *node, ded_coord *cr, const uint8_t *frame, size_t len,
                                  const ded_gather *members) {
  for (size_t i = 0; i < cr->g.n; i++) {
    const uint8_t *id = cr->g.v[i].id;
    if (id_is_me(node, id)) continue;
    ded_peer *p = ded_peer_find(node, id);
    if (!p || !p->conn) continue;
    if (!members || ded_gather_find(members, id))
      ded_conn_send_ctrl(node, p->conn, frame, len);
    else if (cr->late_frame)
      ded_conn_send_ctrl(node, p->conn, cr->late_frame, cr->late_len);
  }
}

/* The joiners of |cr| that may be members of a new attempt
 * (ded_coord_active), into |live| (its own array, in id order). */
static int coord_live_joiners(ded_node *node, const ded_coord *cr, ded_gather *live) {
  ded_gather_init(live, cr->g.round, cr->g.genesis);
  live->v = ded_mem_malloc(node->mem, (cr->g.n ? cr->g.n : 1) * sizeof *live->v);
  if (!live->v) return DED_ERR_NOMEM;
  live->cap = cr->g.n;
  for (size_t i = 0; i < cr->g.n; i++)
    if (ded_coord_active(node, cr, cr->g.v[i].id)) live->v[live->n++] = cr->g.v[i];
  return 0;
}

static uint8_t *encode_decide(ded_node *node, uint32_t view, uint8_t flags,
                              const ded_msg_commit *plan, const uint16_t *holders, size_t *len) {
  size_t cap = DED_DECIDE_FRAME_BYTES(plan->k);
  uint8_t *f = ded_mem_malloc(node->mem, cap);
  if (!f) return NULL;
  ded_wr w = ded_wr_init(f, cap);
  ded_msg_decide_encode(&w, view, flags, plan, holders);
  DED_ASSERT(!w.err && w.pos == cap);
  *len = cap;
  return f;
}

/* True if |id| still counts among the acceptors: it reported to |cr|, or
 * it is not known to be gone for good (left, or evicted) nor to have
 * stepped down from the round (ded_abstain.h). */
bool ded_coord_counts(ded_node *node, const ded_coord *cr, const uint8_t id[DED_ID_BYTES]) {
  return ded_gather_find(&cr->g, id) || ded_abstain_counts(node, cr->round, id);
}

/* Whether we know the acceptors of |cr|'s round: it is the first, or we
 * completed the round before (|prev|, ded_coord_prev) with its result. */
bool ded_coord_knows_acceptors(const ded_coord *cr, const ded_lin_entry *prev) {
  return cr->round == 0 || (prev && prev->final && prev->final_attempt == prev->attempt);
}

typedef struct coord_cb {
  ded_node *node;
  const ded_coord *cr;
} coord_cb;

static bool coord_alive_cb(void *ctx, const uint8_t *id) {
  const coord_cb *c = ctx;
  return ded_coord_counts(c->node, c->cr, id);
}

/*
 * The previous round's members that still count; without that round here
 * (the first round), the acceptors of the newest attempt reported; failing
 * that, those waited for; for a rollback, every peer of the run not gone
 * for good that takes part in rounds (ded_coord_roll_acceptors). The
 * primary is the smallest id listed (the attempt's own, for an attempt).
 */
int ded_coord_acceptors(ded_node *node, const ded_coord *cr, acc_set *a) {
  memset(a, 0, sizeof *a);
  if (cr->rolled) return ded_coord_roll_acceptors(node, a);
  ded_lin_entry *prev = ded_coord_prev(node, cr);
  const struct ded_coord_attempt *att = NULL;
  for (unsigned i = 0; !prev && i < cr->natt; i++)
    if (!att || cr->att[i].plan.attempt > att->plan.attempt) att = &cr->att[i];
  unsigned cap = prev ? prev->n : att ? att->plan.k : cr->nexpect;
  a->ids = ded_mem_malloc(node->mem, (size_t)(cap ? cap : 1) * DED_ID_BYTES);
  if (!a->ids) return DED_ERR_NOMEM;
  a->primary = UINT_MAX;
  for (unsigned i = 0; i < cap; i++) {
    const uint8_t *id = prev ? prev->ids[i] : att ? att->plan.members[i].id : cr->expect[i];
    if (att ? !(att->plan.members[i].flags & DED_MEMBER_F_ACCEPTOR) : !ded_coord_counts(node, cr, id))
      continue;
    if (att && att->plan.members[i].flags & DED_MEMBER_F_PRIMARY) a->primary = a->n;
    memcpy(a->ids[a->n++], id, DED_ID_BYTES);
  }
  a->total = att ? att->plan.nacc : a->n;
  if (!att) {
    a->primary = 0;
    for (unsigned i = 1; i < a->n; i++)
      if (memcmp(a->ids[i], a->ids[a->primary], DED_ID_BYTES) < 0) a->primary = i;
  } else if (a->primary == UINT_MAX) {
    a->primary = a->n; /* the attempt names none */
  }
  return 0;
}

/* True if the reports to |cr| are a quorum of the round's acceptors: then
 * no attempt of the round can have completed without one of them knowing
 * (HAVE quorums intersect it), and none of them takes part in an earlier
 * view any more. */
static bool coord_quorum(ded_node *node, const ded_coord *cr) {
  acc_set a;
  if (ded_coord_acceptors(node, cr, &a)) return false;
  unsigned in = 0;
  bool primary_in = false;
  for (unsigned i = 0; i < a.n; i++)
    if (ded_gather_find(&cr->g, a.ids[i])) {
      in++;
      primary_in |= i == a.primary;
    }
  bool ok = a.total == 0 || ded_quorum_of(in, a.total, primary_in);
  ded_mem_free(node->mem, a.ids);
  return ok;
}

/* Marks the acceptors among a new attempt's members. False unless they
 * are a quorum of the acceptors: an attempt without one could never
 * complete (a joiner that went away since the coordinator counted its
 * report can leave it short), and its round would be lost. */
static bool coord_flag_acceptors(ded_node *node, const ded_coord *cr, ded_msg_commit *cm) {
  acc_set a;
  if (ded_coord_acceptors(node, cr, &a)) return false;
  bool ok = true;
  if (a.total > 0) { /* else: nobody left to count; the members start afresh */
    for (unsigned m = 0; m < cm->k; m++) {
      cm->members[m].flags &= DED_MEMBER_F_CLIENT | DED_MEMBER_F_AUX; /* what it is stays */
      for (unsigned i = 0; i < a.n; i++)
        if (memcmp(cm->members[m].id, a.ids[i], DED_ID_BYTES) == 0)
          cm->members[m].flags |= DED_MEMBER_F_ACCEPTOR | (i == a.primary ? DED_MEMBER_F_PRIMARY : 0);
    }
    cm->nacc = (uint16_t)a.total;
    ok = ded_quorum_can_complete(cm);
  }
  ded_mem_free(node->mem, a.ids);
  return ok;
}

/* Whether a member of the previous round's result, one of |cr|'s
 * acceptors, no longer counts (evicted, or left): a completion among
 * such members is the one the reports may not show. */
static bool coord_acceptor_gone(ded_node *node, const ded_coord *cr) {
  const ded_lin_entry *prev = ded_coord_prev(node, cr);
  for (unsigned i = 0; prev && prev->ids && i < prev->n; i++)
    if (!ded_coord_counts(node, cr, prev->ids[i])) return true;
  return false;
}

/* |cr|'s round went on elsewhere, to |next_round|: every joiner, and our
 * own member, ends it out of step (STALE) and reloads; so do our later
 * rounds. */
static void coord_out_of_step(ded_node *node, ded_coord *cr, uint64_t next_round) {
  cr->state = COORD_GAVE_UP;
  node->rounds.stale = DED_MAX(node->rounds.stale, next_round);
  uint8_t frame[DED_STALE_FRAME_BYTES];
  ded_wr w = ded_wr_init(frame, sizeof frame);
  ded_msg_stale m = {cr->round, next_round};
  ded_msg_stale_encode(&w, &m);
  coord_send_to_joiners(node, cr, frame, w.pos, NULL);
  coord_deliver_self(node, frame, w.pos);
}

static bool attempt_full(const struct ded_coord_attempt *a) {
  for (unsigned s = 0; s < a->plan.k; s++)
    if (!ded_bit_get(a->have, s) || a->holder[s] == UINT16_MAX) return false;
  return true;
}

/*
 * Decides the view. In order: an attempt someone completed is the round's
 * result; with a quorum of reports, the attempt accepted in the highest
 * view (it may have completed somewhere), else any attempt whose shards
 * all exist, else a new attempt among those here.
 */
static void coord_decide(ded_node *node, ded_coord *cr, bool all_in) {
  cr->state = COORD_DECIDED; /* (the paths that cannot decide yet go back) */
  ded_intents_spent(&node->intents, cr->round, gather_has, &cr->g);
  /* (A held round says nothing of the spread, nor does one of a single
   * joiner: a partition's rounds alone would teach a patience of nothing.) */
  if (all_in && cr->view == 0 && !cr->genesis && !cr->held && cr->g.n > 1 &&
      cr->last_ns >= cr->first_ns)
    ded_timing_learn_spread(&node->timing, cr->last_ns - cr->first_ns);
  struct ded_coord_attempt *best = NULL;
  bool chosen = false;
  ded_coord_try_carry(node, cr);
  ded_lin_entry *prev_lin = ded_coord_prev(node, cr);
  for (unsigned i = 0; i < cr->natt && !best; i++)
    if (cr->att[i].done) best = &cr->att[i];
  if (best && best->plan.base != 0 && prev_lin && prev_lin->final &&
      prev_lin->final_attempt != 0 && prev_lin->final_attempt != best->plan.base) {
    /* Completed on another result of the previous round than ours: one of
     * us is out of step, and nothing we decide can mend that. */
    node_log(node, DED_LOG_WARN, "round %llu: attempt %llx completed on a previous round this peer "
             "does not share; not deciding", (unsigned long long)cr->round,
             (unsigned long long)best->plan.attempt);
    cr->state = COORD_GATHERING;
    return;
  }
  if (best) {
    chosen = true;
    if (!attempt_full(best)) { /* reported by a late member only: wait for a holder */
      cr->state = COORD_GATHERING;
      return;
    }
  } else {
    /* Anything else needs the round's acceptors, the members of the
     * previous round's result: only a coordinator that completed that
     * round knows them for sure. */
    if (!cr->genesis && !ded_coord_knows_acceptors(cr, prev_lin) &&
        !ded_coord_try_rollback(node, cr)) {
      cr->state = COORD_GATHERING;
      return;
    }
    if (cr->rolled) prev_lin = NULL;
    /* And a quorum of them: a minority cut off by a partition waits
     * rather than average on its own. */
    if (!cr->genesis && !coord_quorum(node, cr)) {
      cr->state = COORD_GATHERING;
      return;
    }
    for (int pass = 0; pass < 2 && !best; pass++)
      for (unsigned i = 0; i < cr->natt; i++) {
        struct ded_coord_attempt *a = &cr->att[i];
        /* An attempt planned on a membership the previous round did not
         * end with is void, however complete. */
        if (a->plan.base != 0 && prev_lin && prev_lin->final && prev_lin->final_attempt != 0 &&
            prev_lin->final_attempt != a->plan.base)
          continue;
        /* So is one whose members are too few acceptors to complete it:
         * it cannot have completed anywhere, and never will. And one whose
         * acceptors still counted are too few for a quorum of its votes
         * (one of two died, the primary not among those left): it never
         * completes either; if it did before they died, only peers gone
         * for good saw it, as a view that decides on the reports of the
         * acceptors still counted accepts (coord_acceptors). Every later
         * view would keep it, and the run would stop at this round. */
        if (!attempt_full(a) || !ded_quorum_can_complete(&a->plan) ||
            !ded_quorum_can_complete_alive(
                &a->plan, prev_lin ? (const uint8_t(*)[DED_ID_BYTES])prev_lin->ids : NULL,
                prev_lin ? prev_lin->n : 0, coord_alive_cb, &(coord_cb){node, cr}))
          continue;
        if (pass == 0 ? a->acc_view != DED_VIEW_NONE &&
                            (!best || best->acc_view == DED_VIEW_NONE || a->acc_view > best->acc_view)
                      : !best || a->plan.attempt > best->plan.attempt)
          best = a;
      }
  }
  if (best) {
    cr->late_frame = encode_decide(node, cr->view, chosen ? DED_DECIDE_F_CHOSEN : 0, &best->plan,
                                   best->holder, &cr->late_len);
    if (!cr->late_frame) {
      cr->state = COORD_GAVE_UP; /* out of memory: later reports get STALE */
      return;
    }
    node_log(node, DED_LOG_INFO, "round %llu: view %u: attempt %llx stands%s, %u members; %zu fetch",
             (unsigned long long)cr->round, cr->view, (unsigned long long)best->plan.attempt,
             chosen ? " (completed)" : "", best->plan.k, cr->g.n);
    coord_send_to_joiners(node, cr, cr->late_frame, cr->late_len, NULL);
    coord_deliver_self(node, cr->late_frame, cr->late_len);
    return;
  }
  /* The eviction rule's hole: the acceptors still counted saw no
   * completion, but one among acceptors evicted since may have happened,
   * and a peer we can talk to says it holds this round's result. A new
   * attempt would be a second result: we are the ones behind. (With
   * every acceptor still counted, the reports would show a completion;
   * such a record is of another history, a group of the run that went
   * on apart, and ded_rounds_check_groups settles which group yields.) */
  ded_progress prog;
  ded_peer *holder = cr->genesis || !coord_acceptor_gone(node, cr)
                         ? NULL
                         : ded_rounds_holder_of(node, cr->round, &prog);
  if (holder) {
    node_log(node, DED_LOG_WARN, "round %llu: view %u: peer %s completed round %llu, which no "
             "report here shows (its acceptors were evicted): no new attempt; this job is out of "
             "step and reloads the run's state", (unsigned long long)cr->round, cr->view,
             holder->sid, (unsigned long long)prog.round);
    coord_out_of_step(node, cr, prog.round + 1);
    return;
  }
  /* Joiners that went away before the decision are not members, nor do
   * their reports count any more. Nor are joiners gone quiet members;
   * their reports stay (a later decision of this view counts them). */
  size_t out = 0;
  for (size_t i = 0; i < cr->g.n; i++)
    if (ded_coord_alive(node, cr, cr->g.v[i].id)) cr->g.v[out++] = cr->g.v[i];
  cr->g.n = out;
  ded_gather live;
  ded_msg_commit cm;
  int rc = coord_live_joiners(node, cr, &live);
  if (rc != 0 || live.n == 0 || ded_plan_make(node, &live, cr->round, &cm) != 0) {
    ded_gather_free(&live, node->mem);
    cr->state = COORD_GAVE_UP; /* no one left, or out of memory */
    return;
  }
  if (!cr->genesis && !coord_flag_acceptors(node, cr, &cm)) {
    node_log(node, DED_LOG_DEBUG, "round %llu: view %u: too few acceptors among the joiners",
             (unsigned long long)cr->round, cr->view);
    ded_msg_commit_free(&cm, node->mem);
    ded_gather_free(&live, node->mem);
    cr->state = COORD_GATHERING;
    return;
  }
  if ((cr->carried || cr->rolled) && !ded_coord_flag_founder(cr, &cm)) {
    ded_msg_commit_free(&cm, node->mem);
    ded_gather_free(&live, node->mem);
    cr->rolled = false; /* asked again at the next check */
    cr->state = COORD_GATHERING;
    return;
  }
  if (cr->rolled) ded_coord_log_rollback(node, cr);
  const uint8_t *id = node->ident.id;
  cm.attempt = (uint64_t)cr->view << 32 | (uint64_t)id[0] << 24 | (uint64_t)id[1] << 16 |
               (uint64_t)id[2] << 8 | id[3];
  ded_lin_entry *prev = ded_coord_prev(node, cr);
  cm.base = prev ? prev->attempt : 0;
  size_t cap = DED_COMMIT_FRAME_BYTES(cm.k);
  uint16_t *ident = ded_mem_malloc(node->mem, (size_t)cm.k * sizeof *ident);
  cr->commit_frame = ded_mem_malloc(node->mem, cap);
  if (ident && cr->commit_frame) {
    for (unsigned s = 0; s < cm.k; s++) ident[s] = (uint16_t)s;
    ded_wr w = ded_wr_init(cr->commit_frame, cap);
    ded_msg_commit_encode(&w, &cm);
    DED_ASSERT(!w.err && w.pos == cap);
    cr->commit_len = w.pos;
    cr->late_frame = encode_decide(node, cr->view, 0, &cm, ident, &cr->late_len);
    node_log(node, cr->view ? DED_LOG_INFO : DED_LOG_DEBUG,
             "round %llu: view %u: attempt %llx with %u of %zu joiners", (unsigned long long)cr->round,
             cr->view, (unsigned long long)cm.attempt, cm.k, cr->g.n);
    coord_send_to_joiners(node, cr, cr->commit_frame, cr->commit_len, &live);
    coord_deliver_self(node, cr->commit_frame, cr->commit_len);
  } else {
    ded_mem_free(node->mem, cr->commit_frame);
    cr->commit_frame = NULL;
    cr->state = COORD_GAVE_UP; /* out of memory */
  }
  ded_mem_free(node->mem, ident);
  ded_msg_commit_free(&cm, node->mem);
  ded_gather_free(&live, node->mem);
}

/* check: time passed, or someone came, went or reported. Decides |cr|
 * once everyone it waits for has reported, or its time is up; gives up at
 * the bound. */
static void coord_on_check(ded_node *node, ded_coord *cr, uint64_t now_ns) {
  switch (cr->state) {
  case COORD_GATHERING:
    break;
  case COORD_DECIDED:
  case COORD_GAVE_UP:
    return;
  }
  if (cr->g.n == 0) return;
  if (now_ns < node->quiet_until_ns) {
    /* Back from a stall (node_enter): no decision yet, but those we wait
     * for hear where we are, even in view 0, where no one else asks them.
     * One that went on without us answers STALE (ded_round_probed_finished:
     * we give up and reload), one that completed the round reports its
     * result; the rest ignore the probe. */
    if (!cr->genesis && !cr->asked) {
      ded_coord_expect_waited(node, cr, now_ns);
      coord_probe_absent(node, cr);
      cr->asked = true;
    }
    return;
  }
  if (now_ns >= cr->first_ns + node->s.round_timeout_ns) {
    /* No decision possible within the bound (no quorum, or no lineage of
     * ours): every member's call has returned by now. Later reports get
     * STALE. A view that gathered only our own JOIN says so in a debug
     * line: our member side went elsewhere (a first round that joined a
     * smaller id's rendezvous, round_genesis_retarget) or logs its own
     * bound. */
    bool others = cr->g.n > 1 || !ded_gather_find(&cr->g, node->ident.id);
    node_log(node, others ? DED_LOG_INFO : DED_LOG_DEBUG,
             "round %llu: view %u: no decision within the bound; giving up",
             (unsigned long long)cr->round, cr->view);
    cr->state = COORD_GAVE_UP;
    return;
  }
  bool all = true;
  if (cr->genesis) {
    /* The rendezvous waits for DEDMPI_MIN_PEERS, and then for the other
     * peers that take part for a quarter of the bound at most: a peer
     * that never submits (Horovod with one process skips its
     * all-reduces) must not hold the run's first round past its bound. */
    if (cr->g.n >= node->s.min_peers && !cr->quorum_ns) {
      cr->quorum_ns = now_ns;
      cr->deadline_ns = DED_MIN(cr->deadline_ns, now_ns + ded_timing_cap(&node->timing));
    }
    if (cr->g.n < node->s.min_peers) all = false;
    if (!node->s.no_rounds && !node->leaving && !ded_gather_find(&cr->g, node->ident.id)) all = false;
    for (size_t i = 0; i < node->peers.n && all; i++) {
      ded_peer *p = node->peers.v[i];
      if (ded_peer_participates(node, p) && !ded_gather_find(&cr->g, p->id)) all = false;
    }
  } else {
    /* Without the previous round's membership we cannot tell whom to
     * wait for (our own commit of it is on its way). */
    ded_coord_try_carry(node, cr);
    if (cr->view == 0 && cr->round > 0 && !ded_coord_prev(node, cr) && now_ns < cr->deadline_ns)
      return;
    /* Again: a job offered the run's state since this view began (a
     * donor's intent for it, ded_donor.c) joins as soon as it has loaded. */
    ded_coord_expect_waited(node, cr, now_ns);
    unsigned alive = 0, in = 0;
    for (unsigned i = 0; i < cr->nexpect; i++) {
      if (!ded_coord_active(node, cr, cr->expect[i])) continue;
      alive++;
      in += ded_gather_find(&cr->g, cr->expect[i]) != NULL;
    }
    all = in == alive;
    /* The learned deadline runs once half of those waited for are in (one
     * early bird, a member out of step, must not start the clock on
     * everyone else); in a failover, from the first report. */
    if (!cr->clock && (cr->view > 0 || 2 * in >= alive)) {
      cr->clock = true;
      cr->deadline_ns = DED_MIN(cr->deadline_ns, now_ns + ded_timing_coord_wait(&node->timing, cr->view));
    }
  }
  if (!all && now_ns < cr->deadline_ns) return;
  if (!all && ded_coord_holds(node, cr, now_ns)) {
    cr->held = true;
    return;
  }
  if (cr->genesis && cr->g.n < node->s.min_peers) return; /* members fail the rendezvous */
  coord_decide(node, cr, all);
}

bool ded_coord_undecided(ded_node *node, uint64_t round, uint32_t view, uint64_t now_ns) {
  const ded_coord *cr = ded_coord_find(node, round);
  if (!cr || cr->view != view || cr->state != COORD_GATHERING || cr->genesis ||
      cr->deadline_ns == 0 || now_ns < cr->deadline_ns || ded_coord_holds(node, cr, now_ns))
    return false;
  bool alone = cr->g.n == 1 && ded_gather_find(&cr->g, node->ident.id);
  ded_lin_entry *prev = ded_coord_prev(node, cr);
  return alone || (!cr->carried && !cr->rolled && !ded_coord_knows_acceptors(cr, prev));
}

void ded_coords_evaluate(ded_node *node, uint64_t now_ns) {
  for (size_t i = 0; i < node->coords.n; i++) coord_on_check(node, node->coords.v[i], now_ns);
}

/* leave: a view still gathering decides now, without us, rather than stall. */
static void coord_on_leave(ded_node *node, ded_coord *cr) {
  switch (cr->state) {
  case COORD_GATHERING:
    if (cr->g.n > 0) coord_decide(node, cr, false);
    break;
  case COORD_DECIDED:
  case COORD_GAVE_UP:
    break;
  }
}

void ded_coords_on_leave(ded_node *node) {
  for (size_t i = 0; i < node->coords.n; i++) coord_on_leave(node, node->coords.v[i]);
}

bool ded_coords_pending(const ded_node *node) {
  for (size_t i = 0; i < node->coords.n; i++)
    if (node->coords.v[i]->state == COORD_GATHERING && node->coords.v[i]->g.n > 0) return true;
  return false;
}

static void coord_send_redirect(ded_node *node, ded_peer *to, uint64_t round, uint32_t view,
                                const uint8_t id[DED_ID_BYTES]) {
  uint8_t frame[DED_REDIRECT_FRAME_BYTES];
  ded_wr w = ded_wr_init(frame, sizeof frame);
  ded_msg_redirect m;
  m.round = round;
  m.view = view;
  memcpy(m.id, id, DED_ID_BYTES);
  ded_msg_redirect_encode(&w, &m);
  ded_conn_send_ctrl(node, to->conn, frame, w.pos);
}

/* peer up: a failover's view that waits for |p|, or went on without it,
 * probes it (again): its probe may have died with its old connection, or
 * it may be waiting on an older view that can no longer decide (its own,
 * as the coordinator cut off when the others failed over). So does any
 * view while we are back from a stall (coord_on_check): we were likely
 * cut off from |p| for it. */
static void coord_on_peer_up(ded_node *node, ded_coord *cr, ded_peer *p) {
  switch (cr->state) {
  case COORD_GATHERING:
  case COORD_DECIDED:
  case COORD_GAVE_UP:
    if ((cr->view == 0 && !(cr->asked && node->now_ns < node->quiet_until_ns)) ||
        ded_gather_find(&cr->g, p->id))
      return;
    for (unsigned e = 0; e < cr->nexpect; e++)
      if (memcmp(cr->expect[e], p->id, DED_ID_BYTES) == 0) coord_send_probe(node, p, cr->round, cr->view);
    break;
  }
}

bool ded_coords_on_stale(ded_node *node, const uint8_t from[DED_ID_BYTES], const ded_msg_stale *m) {
  ded_coord *cr = ded_coord_find(node, m->round);
  if (!cr) return false;
  switch (cr->state) {
  case COORD_GATHERING:
    break;
  case COORD_DECIDED:
  case COORD_GAVE_UP:
    return false;
  }
  bool expected = false;
  for (unsigned e = 0; e < cr->nexpect && !expected; e++)
    expected = memcmp(cr->expect[e], from, DED_ID_BYTES) == 0;
  if (!expected) return false;
  char sid[9];
  ded_id_short(from, sid);
  node_log(node, DED_LOG_INFO,
           "round %llu: view %u: peer %s finished this round long ago and is at round %llu; "
           "giving up", (unsigned long long)cr->round, cr->view, sid,
           (unsigned long long)m->next_round);
  cr->state = COORD_GAVE_UP;
  return true;
}

void ded_coords_on_peer_up(ded_node *node, ded_peer *p) {
  for (size_t i = 0; i < node->coords.n; i++) coord_on_peer_up(node, node->coords.v[i], p);
}

/* Answers |to|'s JOIN for |round| with a DECIDE if we finished the round
 * (it is in our history, or reported and still draining). */
static bool coord_answer_finished(ded_node *node, ded_peer *to, uint64_t round, uint32_t view) {
  ded_round *r = ded_round_find(node, round);
  const ded_msg_commit *plan = NULL;
  if (r && ded_round_over(r) && r->with_result && r->att_state != ROUND_ATT_NONE) plan = &r->att.plan;
  ded_hist_entry *h = plan ? NULL : ded_history_find(&node->hist, round);
  if (h) plan = &h->plan;
  if (!plan || !to->conn) return false;
  uint16_t *holders = ded_mem_malloc(node->mem, (size_t)plan->k * sizeof *holders);
  if (!holders) return false;
  unsigned me = plan->k;
  for (unsigned i = 0; i < plan->k; i++)
    if (id_is_me(node, plan->members[i].id)) me = i;
  for (unsigned s = 0; s < plan->k; s++) holders[s] = (uint16_t)(me < plan->k ? me : s);
  size_t len;
  uint8_t *f = encode_decide(node, view, DED_DECIDE_F_CHOSEN, plan, holders, &len);
  if (f) ded_conn_send_ctrl(node, to->conn, f, len);
  ded_mem_free(node->mem, f);
  ded_mem_free(node->mem, holders);
  return f != NULL;
}

/* A JOIN (or failover report) from |from| on |via| (both NULL: ourselves). */
void ded_coord_on_join(ded_node *node, ded_peer *from, ded_conn *via, const ded_msg_join *j,
                          uint64_t now_ns) {
  const uint8_t *id = from ? from->id : node->ident.id;
  bool genesis = j->flags & DED_JOIN_F_GENESIS;
  uint64_t horizon = DED_MAX(node->rounds.next, node->lin.have_members ? node->lin.members_round : 0);
  if (from && j->round > horizon + DED_ROUNDS_AHEAD_MAX) {
    /* The run went on without us (we slept, or our group fell behind):
     * an honest peer, not a violator. Nothing of it is kept. */
    node_log(node, DED_LOG_DEBUG, "round %llu: JOIN from %s, %llu rounds past this peer's; ignored",
             (unsigned long long)j->round, from->sid, (unsigned long long)(j->round - horizon));
    return;
  }
  if (j->flags & DED_JOIN_F_INTENT) {
    if (from) ded_coord_on_intent(node, from, j, now_ns);
    return;
  }
  if (from) {
    ded_abstain_on_join(from, j->round);
    ded_abstain_on_waited(node, j->round, false, now_ns);
  }
  /* A round finished here is settled, whatever view the joiner is in: it
   * fetches the result (from us: we hold all of it). */
  if (from && coord_answer_finished(node, from, j->round, j->view))
    return;
  if (from && !genesis && coord_forgotten(node, j->round)) {
    /* So long past that no view of it is kept (nor its result): a member
     * that slept while the run went on, its failover reports too, hears
     * where the run is (STALE) and reloads, rather than report to a view
     * that would be forgotten at once and wait for the bound. */
    ded_coord_send_stale(node, from, j->round);
    return;
  }
  ded_coord *cr = ded_coord_find(node, j->round);
  if (from && from->conn && cr && cr->state == COORD_DECIDED && cr->view == j->view &&
      cr->commit_frame && ded_gather_find(&cr->g, from->id)) {
    /* A joiner of the view we decided JOINs it again: our COMMIT may have
     * died with its connection (ded_rounds_on_conn_replaced). It gets the
     * COMMIT again, as it had it; a second one is ignored where the first
     * came. */
    ded_conn_send_ctrl(node, from->conn, cr->commit_frame, cr->commit_len);
    return;
  }
  if (genesis) {
    if (node->lin.have_members || (cr && !cr->genesis)) { /* we are past the first round */
      if (from) ded_coord_send_stale(node, from, j->round);
      return;
    }
    const uint8_t *min_id;
    ded_peers_genesis_view(node, &min_id);
    if (from && !(j->flags & DED_JOIN_F_CLIENT) &&
        (!min_id || memcmp(from->id, min_id, DED_ID_BYTES) < 0))
      min_id = from->id;
    /* No one here can coordinate (we are a client or a backbone and know
     * no node): the joiner asks elsewhere. */
    if (from && (!min_id || !id_is_me(node, min_id))) {
      if (min_id) coord_send_redirect(node, from, j->round, j->view, min_id);
      return;
    }
  } else if (j->round > 0) {
    /* Only the view's candidate in our lineage coordinates it; for a
     * joiner that vouches for rounds with no result, the candidate in the
     * membership of the result it names will do too, if we hold it. */
    ded_lin_entry *prev = ded_lineage_get(&node->lin, j->round - 1);
    bool ours = !prev ||
                id_is_me(node, ded_lin_coord((const uint8_t *)prev->ids, prev->n, j->round, j->view));
    bool prev_result = prev && prev->final && prev->attempt != 0 && prev->final_attempt == prev->attempt;
    if (!ours && j->flags & DED_JOIN_F_VOID && prev_result) {
      /* It vouches that the round before had no result, and we completed
       * it: it ended that round on its own values and is out of step. It
       * hears so (STALE), and reloads the run's state. */
      if (from) {
        node_log(node, DED_LOG_INFO, "round %llu: %s says round %llu had no result, which this "
                 "peer completed: it is out of step", (unsigned long long)j->round, from->sid,
                 (unsigned long long)j->round - 1);
        ded_coord_send_stale(node, from, j->round);
      }
      return;
    }
    if (!ours && j->flags & DED_JOIN_F_VOID) {
      ded_lin_entry *e = ded_lineage_get(&node->lin, j->void_round);
      ours = e && e->attempt == j->void_attempt && e->final && e->final_attempt == e->attempt &&
             id_is_me(node, ded_lin_coord((const uint8_t *)e->ids, e->n, j->round, j->view));
    }
    /* Our own member, when every member of the round before is gone for
     * good: it goes on alone (ded_round.c, round_pick_view). */
    if (!ours && !from && prev)
      ours = ded_peers_all_evicted(node, (const uint8_t(*)[DED_ID_BYTES])prev->ids, prev->n);
    if (!ours) {
      node_log(node, DED_LOG_DEBUG, "round %llu: view %u is not ours to coordinate",
               (unsigned long long)j->round, j->view);
      return;
    }
    bool past = j->round < node->rounds.next && !ded_round_find(node, j->round);
    if (!prev && !cr && past && !(j->flags & DED_JOIN_F_STATUS)) {
      /* A round long past whose result we no longer hold (we would have
       * answered with it, coord_answer_finished): STALE. */
      if (from) ded_coord_send_stale(node, from, j->round);
      return;
    }
  }
  if (cr && j->view < cr->view) { /* the round has moved on: come along */
    if (from) {
      coord_send_probe(node, from, j->round, cr->view);
    } else {
      coord_probe_self(node, j->round, cr->view);
    }
    return;
  }
  bool new_view = false;
  if (!cr) {
    cr = coord_new(node, j->round, j->view, genesis);
    if (!cr) return;
    new_view = true;
  } else if (j->view > cr->view || (cr->genesis && !genesis)) {
    coord_clear(node, cr);
    ded_gather_init(&cr->g, j->round, genesis);
    cr->view = j->view;
    cr->genesis = genesis;
    new_view = true;
  }
  switch (cr->state) {
  case COORD_GATHERING:
    break;
  case COORD_DECIDED: /* late: how the round went (without a frame: as given up) */
  case COORD_GAVE_UP:
    if (from && cr->late_frame) {
      ded_conn_send_ctrl(node, from->conn, cr->late_frame, cr->late_len);
    } else if (!from && cr->late_frame) {
      coord_deliver_self(node, cr->late_frame, cr->late_len);
    } else if (from) {
      ded_coord_send_stale(node, from, j->round);
    }
    return;
  }
  if (ded_gather_find(&cr->g, id)) {
    /* Again in the same view (a member that completed while it waited
     * answers a probe, a report crossed a probe): what it holds may have
     * grown; its join stands as it was. */
    if (j->flags & DED_JOIN_F_STATUS) coord_take_status(node, cr, id, j);
    coord_on_check(node, cr, now_ns);
    return;
  }
  ded_msg_join plain = *j;
  plain.flags &= (uint8_t)~(DED_JOIN_F_STATUS | DED_JOIN_F_DONE);
  memset(&plain.plan, 0, sizeof plain.plan);
  plain.have = NULL;
  int rv = ded_gather_add(&cr->g, node->mem, id, &plain);
  if (rv) {
    if (via) ded_conn_protocol_error(node, via, rv, "JOIN");
    return;
  }
  if (j->flags & DED_JOIN_F_STATUS) coord_take_status(node, cr, id, j);
  ded_intents_done(&node->intents, id, j->round);
  if (cr->first_ns == 0) {
    cr->first_ns = now_ns;
    /* At the latest a quarter of the bound after the first join; sooner
     * once half of those waited for are in (one early bird, a member out
     * of step, must not start the clock on everyone else). */
    cr->deadline_ns = now_ns + (genesis ? node->s.rendezvous_timeout_ns : ded_timing_cap(&node->timing));
  }
  cr->last_ns = now_ns;
  if (!from && !genesis && cr->view == 0 && cr->clock && now_ns >= cr->deadline_ns) {
    /* Our own member joins after the deadline (our trainer was the
     * slowest): the others' JOINs sent as ours was are on their way. */
    cr->deadline_ns = now_ns + ded_timing_late_own_grace(&node->timing);
  }
  if (new_view && cr->view > 0) {
    /* A failover: everyone waited for reports to this view. */
    node_log(node, DED_LOG_INFO, "round %llu: coordinating view %u (asked by %s)",
             (unsigned long long)cr->round, cr->view, from ? from->sid : "this peer");
    coord_probe_absent(node, cr);
    if (from) {
      coord_probe_self(node, cr->round, cr->view);
    }
  }
  coord_on_check(node, cr, now_ns);
}

void ded_coords_free(ded_node *node) {
  for (size_t i = 0; i < node->coords.n; i++) coord_free(node, node->coords.v[i]);
  ded_mem_free(node->mem, node->coords.v);
  node->coords.v = NULL;
  node->coords.n = node->coords.cap = 0;
}
