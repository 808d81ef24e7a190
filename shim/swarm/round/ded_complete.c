/*
 * ded_complete.c: the end of a member's round (ded_round.h): accepting a
 * whole result (HAVE to the attempt's members, with its digest), knowing
 * it is the round's result and which bytes that is (a quorum of HAVEs in
 * one view with one digest, or someone's word that it completed),
 * fetching the round's bytes again when ours are not those, DONE_WAIT,
 * and the report, in round order (-> DRAINING).
 */
#include <stdio.h>
#include <string.h>

#include "../avg/ded_reduce.h"
#include "../core/ded_assert.h"
#include "../core/ded_bits.h"
#include "../core/ded_err.h"
#include "../ded_node_int.h"
#include "ded_round_int.h"

static bool round_check_complete(ded_node *node, ded_round *r, uint64_t now_ns);
static bool round_take_founder(ded_node *node, const ded_round *r, bool *founder);
static void rounds_report_ready(ded_node *node, uint64_t now_ns);

/* ------------------------------------------------------------------ */
/* the report                                                           */
/* ------------------------------------------------------------------ */

/* Hands the round back to the caller, exactly once: -> DRAINING. After
 * this, the caller's buffer is never touched again. */
void ded_round_report(ded_node *node, ded_round *r, int status, bool alone, bool late) {
  DED_ASSERT(!ded_round_over(r));
  ded_round_fix(node, r, r->a.count); /* no attempt: the round was all of its offer */
  bool via_attempt = status == 0 && !alone && ded_round_holds(r);
  /* The round's result, which we completed with (not an attempt still
   * short of a quorum when the bound hit, nor bytes that are not the
   * quorum's): kept, to serve others. */
  bool with_result = status == 0 && r->state == ROUND_DONE_WAIT && ded_round_holds(r) &&
                     ded_attempt_whole(&r->att) && r->chosen == r->att.plan.attempt;
  ded_lin_entry *e = ded_lineage_get(&node->lin, r->no);
  if (e) {
    e->final = true;
    e->final_attempt = with_result ? r->att.plan.attempt : 0;
  }
  /* Over first: detaching can close a connection, whose peer-down
   * handling must see this round as finished. */
  r->state = ROUND_DRAINING;
  ded_conns_detach(node, r, with_result);
  DED_ASSERT(r->refs_user == 0);
  /* The residual first: it may compensate the caller's buffer again,
   * which holds our contribution only until the result goes in. */
  if (with_result) ded_round_feedback(node, r);
  /* The caller's buffer gets n_j * g (alone: it stays S_j, bit for bit). */
  if (via_attempt)
    ded_reduce_scale(r->a.dtype, r->a.buf, r->res, r->a.count, (double)r->a.n_local);
  if (via_attempt && node->s.log_level >= DED_LOG_DEBUG) {
    /* Where the round's time went, in ms from its submission. */
    uint64_t t0 = r->submit_ns;
#define MS_SINCE(t) ((t) >= t0 ? (double)((t) - t0) / 1e6 : -1.0)
    node_log(node, DED_LOG_DEBUG,
             "round %llu: timeline ms: joined %.1f, plan %.1f, shard reduced %.1f, result %.1f, "
             "chosen %.1f (%u members, %llu bytes)",
             (unsigned long long)r->no, MS_SINCE(r->joined_ns), MS_SINCE(r->started_ns),
             MS_SINCE(r->att.reduced_ns), MS_SINCE(r->got_ns), MS_SINCE(node->now_ns),
             r->att.plan.k, (unsigned long long)ded_round_bytes(r));
#undef MS_SINCE
  }
  r->with_result = with_result;
  /* Progress is a round completed with the run (alone too: one job's
   * attempt, or a group of one left by a partition, is still the run's). */
  if (with_result || (status == 0 && !alone)) {
    uint64_t ms = node->now_ns > r->submit_ns ? (node->now_ns - r->submit_ns) / 1000000u : 0;
    bool known = via_attempt || with_result;
    ded_disc_progress(node, r->no, (uint32_t)DED_MIN(ms, UINT32_MAX),
                      known ? r->att.ncontrib : 0, with_result ? r->att.plan.attempt : 0,
                      known ? r->att.plan.codec : 0, known ? r->att.plan.codec_ppm : 0);
  }
  if (with_result && late) node->rounds.late_done = DED_MAX(node->rounds.late_done, r->no + 1);
  ded_round_result res;
  memset(&res, 0, sizeof res);
  res.status = status;
  res.round = r->no;
  res.pos = r->pos;
  res.off = r->off;
  res.count = r->a.count;
  res.last = ded_stream_reported(&node->rounds.stream, r->call, r->a.count);
  res.alone = alone;
  res.late = late;
  res.recoveries = r->recoveries;
  res.behind = r->behind;
  if (with_result) res.diverged = round_take_founder(node, r, &res.founder);
  /* Our own values, the swarm gone on without them (a STALE, our position
   * not the swarm's, a round stepped down from: |behind|). Not at the
   * bound: the swarm may be stuck with us, and a reload then (our trainer
   * held at its step's start while peers in step wait for our JOIN, and
   * we for their next step's snapshot) turned churn into a livelock,
   * every survivor at its bound in turn (churn soak 2279039472). */
  if (status == 0 && alone && late && r->behind && !node->rounds.astray) {
    node->rounds.astray = true;
    node->rounds.astray_fails = 0;
    node->rounds.astray_ns = node->now_ns;
  }
  if (res.founder) node->rounds.astray = false;
  /* Until it reloads, every report says so: a reload that failed is
   * tried again at the next step. */
  if ((node->rounds.diverged || node->rounds.astray) && !res.founder) res.diverged = true;
  if (late && !alone && node->rounds.catch_up > r->no) res.swarm_round = node->rounds.catch_up;
  uint8_t *ids = NULL;
  if (via_attempt) {
    res.codec = r->att.plan.codec;
    res.codec_ppm = r->att.plan.codec_ppm;
    res.contributors = r->att.ncontrib;
    res.total_weight = r->att.total_w;
    ids = ded_mem_malloc(node->mem, (size_t)r->att.ncontrib * DED_ID_BYTES + 1);
    for (unsigned i = 0, n = 0; ids && i < r->att.plan.k; i++)
      if (!(r->att.plan.members[i].flags & DED_MEMBER_F_AUX))
        memcpy(ids + (size_t)n++ * DED_ID_BYTES, r->att.plan.members[i].id, DED_ID_BYTES);
    res.members = ids;
  } else {
    res.contributors = 1;
    res.total_weight = r->a.weight;
  }
  res.peers = ded_node_round_peer_count(node);
  ded_round_maybe_dead(node, r);
  node->rounds.last_report_ns = node->now_ns;
  node->cb.round_done(node->user, r->a.ctx, &res);
  ded_mem_free(node->mem, ids);
}

/* A round completed with an attempt that has a founder (DED_MEMBER_F_FOUNDER):
 * the founder's state is the run's from here on, so it keeps a snapshot
 * ready for the others, which are out of step until they reload it. True
 * if this job is one of those; |founder| if it is the founder. */
static bool round_take_founder(ded_node *node, const ded_round *r, bool *founder) {
  const ded_msg_commit *plan = &r->att.plan;
  unsigned f = 0;
  while (f < plan->k && !(plan->members[f].flags & DED_MEMBER_F_FOUNDER)) f++;
  if (f == plan->k) return false;
  ded_peer *p = ded_peer_find(node, plan->members[f].id);
  if (id_is_me(node, plan->members[f].id)) {
    *founder = true;
    node->rounds.diverged = false; /* whatever it was before, its state is the run's now */
    node_log(node, DED_LOG_INFO, "round %llu: the rounds before had no result that a live peer "
             "holds; this job's state goes on as the run's, and the other %u members reload it",
             (unsigned long long)r->no, plan->k - 1);
    if (node->cb.want_snapshot && !node->xfer.snap_wanted) {
      node->xfer.snap_wanted = true;
      node->cb.want_snapshot(node->user);
    }
    return false;
  }
  node_log(node, DED_LOG_WARN, "round %llu: the rounds before had no result that a live peer "
           "holds, and this job kept its own values in them; the run goes on with the state of %s: reloading it "
           "at the next step", (unsigned long long)r->no, p ? p->sid : "its founder");
  node->rounds.diverged = true;
  memcpy(node->rounds.founder, plan->members[f].id, DED_ID_BYTES);
  return true;
}

void ded_round_fail(ded_node *node, ded_round *r, int status) {
  if (ded_round_over(r)) return;
  node_log(node, DED_LOG_ERROR, "round %llu failed: %s", (unsigned long long)r->no,
           ded_strerror(status));
  ded_round_report(node, r, status, false, false);
}

/* ------------------------------------------------------------------ */
/* completion: -> DONE_WAIT -> DRAINING                                 */
/* ------------------------------------------------------------------ */

/* True if |r|'s attempt was planned on another result of the previous
 * round than the one that round ended with here. */
static bool round_void_base(ded_node *node, const ded_round *r) {
  ded_lin_entry *prev = r->no > 0 ? ded_lineage_get(&node->lin, r->no - 1) : NULL;
  return r->att.plan.base != 0 && prev && prev->final && prev->final_attempt != 0 &&
         prev->final_attempt != r->att.plan.base;
}

/* Drops such an attempt (it never completes here) and fails over along
 * the previous round's real membership. */
static void round_drop_void(ded_node *node, ded_round *r, uint64_t now_ns) {
  ded_lin_entry *prev = ded_lineage_get(&node->lin, r->no - 1);
  char why[128];
  snprintf(why, sizeof why,
           "attempt %llx was planned on attempt %llx of the previous round, which ended with "
           "%llx here",
           (unsigned long long)r->att.plan.attempt, (unsigned long long)r->att.plan.base,
           (unsigned long long)prev->final_attempt);
  ded_conns_detach(node, r, false);
  ded_round_drop_attempt(node, r);
  r->state = ROUND_RUNNING;
  if (ded_round_set_lin(node, r, (const uint8_t(*)[DED_ID_BYTES])prev->ids, prev->n, prev->attempt) == 0)
    ded_round_failover(node, r, why, now_ns);
  else
    ded_round_fail(node, r, DED_ERR_NOMEM);
}

void ded_round_send_have(ded_node *node, ded_peer *to, uint64_t round, uint64_t attempt,
                         uint32_t view, uint8_t flags, const uint8_t digest[DED_RESULT_DIGEST_BYTES]) {
  if (!to || !to->conn) return;
  uint8_t frame[DED_HAVE_FRAME_BYTES];
  ded_wr w = ded_wr_init(frame, sizeof frame);
  ded_msg_have h = {round, attempt, view, flags, {0}};
  memcpy(h.digest, digest, DED_RESULT_DIGEST_BYTES);
  ded_msg_have_encode(&w, &h);
  ded_conn_send_ctrl(node, to->conn, frame, w.pos);
}

void ded_rounds_on_peer_up(ded_node *node, ded_peer *p) {
  for (unsigned i = 0; i < node->rounds.n; i++) {
    ded_round *r = node->rounds.v[i];
    if (ded_round_over(r) || !r->accepted || r->att_state != ROUND_ATT_LIVE ||
        (r->state != ROUND_RUNNING && r->state != ROUND_FETCHING))
      continue;
    unsigned m = ded_plan_index(&r->att.plan, p->id);
    if (m < r->att.plan.k && m != r->att.me)
      ded_round_send_have(node, p, r->no, r->att.plan.attempt, r->acc_view, 0, r->digest);
  }
}

void ded_round_set_chosen(ded_round *r, uint64_t attempt, const uint8_t digest[DED_RESULT_DIGEST_BYTES],
                          const uint8_t by[DED_ID_BYTES]) {
  if (r->chosen != attempt) r->chosen_digested = false;
  r->chosen = attempt;
  if (!digest || r->chosen_digested) return;
  r->chosen_digested = true;
  memcpy(r->chosen_digest, digest, DED_RESULT_DIGEST_BYTES);
  memcpy(r->chosen_by, by, DED_ID_BYTES);
}

/* Whether a completer's word alone decides the bytes here: for a member
 * that cannot count a quorum itself (one that only fetches the result,
 * one that is not an acceptor, a client, which hears no HAVE from other
 * clients). An acceptor that is not a client waits for a quorum of votes,
 * completers' words among them: one peer's word is not enough against a
 * peer that lies. So does an acceptor the attempt does not list (it only
 * fetches the result) that knows it is one (|acc|, |n|: the whole set,
 * round_acceptors): its vote counts for the others (ded_votes_quorum_among),
 * so it must be its own. */
static bool round_takes_done(ded_node *node, const ded_round *r, const uint8_t (*acc)[DED_ID_BYTES],
                             unsigned n) {
  const ded_attempt *a = &r->att;
  if (a->me >= a->plan.k) {
    for (unsigned k = 0; acc && k < n; k++)
      if (id_is_me(node, acc[k])) return false;
    return true;
  }
  uint8_t f = a->plan.members[a->me].flags;
  return (f & (DED_MEMBER_F_ACCEPTOR | DED_MEMBER_F_CLIENT)) != DED_MEMBER_F_ACCEPTOR;
}

/* The round's acceptors, where we know them all: the members of the
 * previous round's result, if we ended that round with the attempt's base
 * and they are the COMMIT's acceptors (ded_quorum_acceptors_match: not
 * where it started its members afresh, a group of one, ded_join.c), |*n|
 * of them; else NULL. */
static const uint8_t (*round_known_acceptors(ded_node *node, const ded_round *r,
                                             unsigned *n))[DED_ID_BYTES] {
  ded_lin_entry *prev = r->no > 0 ? ded_lineage_get(&node->lin, r->no - 1) : NULL;
  const uint8_t(*ids)[DED_ID_BYTES] = prev ? (const uint8_t(*)[DED_ID_BYTES])prev->ids : NULL;
  bool known = ids && prev->final && prev->final_attempt != 0 &&
               prev->final_attempt == r->att.plan.base &&
               ded_quorum_acceptors_match(&r->att.plan, ids, prev->n);
  *n = known ? prev->n : 0;
  return known ? ids : NULL;
}

/* Our vote (HAVE, not done) for the attempt we hold whole, to its
 * members; and, if we are an acceptor the attempt does not list (we only
 * fetch its result), to the other unlisted acceptors too: each counts the
 * others' votes (ded_votes_quorum_among), and no member passes them on,
 * so without this two of them, with one completer's done word, can be a
 * quorum that never learns it is one (a member that completed crashed,
 * the others fetch: every later view re-decides the attempt). */
static void round_vote(ded_node *node, ded_round *r) {
  const ded_attempt *a = &r->att;
  for (unsigned m = 0; m < a->plan.k; m++)
    if (m != a->me)
      ded_round_send_have(node, ded_round_member_peer(node, r, m), r->no, a->plan.attempt,
                          r->acc_view, 0, r->digest);
  unsigned n;
  const uint8_t(*acc)[DED_ID_BYTES] = a->me < a->plan.k ? NULL : round_known_acceptors(node, r, &n);
  bool listed = false;
  for (unsigned i = 0; acc && i < n; i++) listed |= id_is_me(node, acc[i]);
  for (unsigned i = 0; listed && i < n; i++)
    if (!id_is_me(node, acc[i]) && ded_plan_index(&a->plan, acc[i]) == a->plan.k)
      ded_round_send_have(node, ded_peer_find(node, acc[i]), r->no, a->plan.attempt, r->acc_view,
                          0, r->digest);
}

/* The digest of the bytes the round completes with, once the current
 * attempt is known to be its result: a quorum of its acceptors voted for
 * it in one view with one digest, or, where round_takes_done, someone
 * completed it and said with which bytes (HAVE with the done flag). NULL
 * until then, and while another attempt is known to be the round's. */
static const uint8_t *round_result_digest(ded_node *node, const ded_round *r) {
  if (!ded_round_holds(r)) return NULL;
  if (r->chosen && r->chosen != r->att.plan.attempt) return NULL; /* another attempt completed */
  /* A quorum's bytes before one completer's: an honest completer holds
   * them (quorums intersect), so one that says otherwise lies. The
   * acceptors are the members of the previous round's result: where we
   * ended that round with the attempt's base, we know them all. */
  const uint8_t *d;
  unsigned nacc;
  const uint8_t(*acc)[DED_ID_BYTES] = round_known_acceptors(node, r, &nacc);
  if (ded_votes_quorum_among(&r->votes, &r->att.plan, acc, nacc, &d)) return d;
  return r->chosen && r->chosen_digested && round_takes_done(node, r, acc, nacc) ? r->chosen_digest
                                                                                : NULL;
}

/* The next member to fetch the round's bytes (those |want| names) from:
 * the one that said it completed with them, then each voter for them in
 * the order they voted, each once in this attempt; plan.k when none is
 * left. */
static unsigned round_next_holder(const ded_round *r, const uint8_t want[DED_RESULT_DIGEST_BYTES]) {
  const ded_attempt *a = &r->att;
  unsigned k = a->plan.k;
  if (r->chosen_digested && memcmp(r->chosen_digest, want, DED_RESULT_DIGEST_BYTES) == 0) {
    unsigned by = ded_plan_index(&a->plan, r->chosen_by);
    if (by < k && by != a->me && !ded_bit_get(r->asked, by)) return by;
  }
  for (unsigned j = 0;; j++) {
    unsigned v = ded_votes_member(&r->votes, &a->plan, want, j);
    if (v == k) return k;
    if (v != a->me && !ded_bit_get(r->asked, v)) return v;
  }
}

/* Whether a shard other than our own has bytes: if none has, ours is the
 * one that differs. */
static bool round_others_hold_bytes(const ded_attempt *a) {
  for (unsigned s = 0; s < a->plan.k; s++)
    if (s != a->me && ded_attempt_shard_len(a, s) > 0) return true;
  return false;
}

/*
 * Our bytes are not the round's (a reducer sent us others than it sent
 * the members that make the quorum): fetch the round's bytes again from a
 * member that holds them (round_next_holder), and fail over once none is
 * left to ask; after that failover the round waits for a new holder (a
 * HAVE asks again), or for its deadline, and ends at its bound. The first
 * time, every shard but our own; if the bytes still differ (or no other
 * shard has any), ours is the one that differs: the reducer it was sent
 * altered (a fault, or this peer lied), and the holder serves it too.
 * Keeping it would leave this peer at the round until its bound, and late
 * for the rounds after. A round never completes here with bytes other
 * than the ones its quorum holds.
 */
static void round_disagree(ded_node *node, ded_round *r, const uint8_t want[DED_RESULT_DIGEST_BYTES],
                           uint64_t now_ns) {
  ded_attempt *a = &r->att;
  unsigned k = a->plan.k;
  if (!r->asked) r->asked = ded_mem_calloc(node->mem, ((size_t)k + 7) / 8, 1);
  if (!a->holders) a->holders = ded_mem_malloc(node->mem, (size_t)k * sizeof *a->holders);
  if (!r->asked || !a->holders) {
    ded_round_fail(node, r, DED_ERR_NOMEM);
    return;
  }
  bool own = a->refetch || !round_others_hold_bytes(a);
  unsigned m = round_next_holder(r, want);
  ded_peer *p = m < k ? ded_round_member_peer(node, r, m) : NULL;
  if (!p || !p->conn) {
    if (r->mend_failed) return;
    r->mend_failed = true;
    ded_round_failover(node, r, "this peer's result differs from the one the round's quorum holds, "
                       "and no member that holds it can send it", now_ns);
    return;
  }
  ded_bit_set(r->asked, m);
  node_log(node, DED_LOG_WARN, "round %llu: this peer's result differs from the one the round's "
           "quorum holds (%s); fetching the round's from %s", (unsigned long long)r->no,
           own ? "its own shard differs" : "a reducer sent it other bytes", p->sid);
  for (unsigned s = 0; s < k; s++) a->holders[s] = (uint16_t)m;
  ded_attempt_refetch(a, node->mem, own);
  r->digested = false;
  r->got_ns = 0;
  r->wait_ns = now_ns + ded_timing_progress_wait(&node->timing, r->view, r->est_ns);
  int rv = ded_round_fetch_missing(node, r, now_ns);
  if (rv) ded_round_fail(node, r, rv);
}

/* The whole result is here: accept it (HAVE to the attempt's members),
 * and once it is the round's result, -> DONE_WAIT, and report it when
 * every earlier round has. */
static bool round_check_complete(ded_node *node, ded_round *r, uint64_t now_ns) {
  switch (r->state) {
  case ROUND_JOINING:
  case ROUND_JOINED:
  case ROUND_RUNNING:
  case ROUND_FETCHING:
    break;
  default:
    return false;
  }
  if (!ded_round_holds(r) || !ded_attempt_whole(&r->att)) return false;
  if (!r->got_ns) r->got_ns = now_ns;
  if (!r->digested) {
    ded_attempt_digest(&r->att, r->digest);
    r->digested = true;
  }
  if (!r->accepted && r->att_state == ROUND_ATT_LIVE &&
      (r->state == ROUND_RUNNING || r->state == ROUND_FETCHING)) {
    /* Never for a view below one we joined (a failover froze the attempt),
     * nor for an attempt planned on another result of the previous round
     * than ours: we wait until that round has ended here. */
    ded_lin_entry *prev = r->no > 0 ? ded_lineage_get(&node->lin, r->no - 1) : NULL;
    if (r->att.plan.base != 0 && prev && !prev->final) return false;
    if (round_void_base(node, r)) {
      round_drop_void(node, r, now_ns);
      return false;
    }
    r->accepted = true;
    /* (The attempt was adopted: its round has an entry.) A peer that voted
     * never vouches that the round completed nowhere. */
    ded_lin_entry *own = ded_lineage_get(&node->lin, r->no);
    DED_ASSERT(own);
    own->voted = true;
    ded_votes_add(&r->votes, node->mem, node->ident.id, r->att.plan.attempt, r->acc_view,
                  r->digest);
    round_vote(node, r);
  }
  const uint8_t *want = round_result_digest(node, r);
  if (!want) return false;
  if (memcmp(want, r->digest, DED_RESULT_DIGEST_BYTES) != 0) {
    /* Ours to mend only while the attempt is ours to run; a frozen one
     * waits for the newer view's decision. */
    if (r->att_state == ROUND_ATT_LIVE) round_disagree(node, r, want, now_ns);
    return false;
  }
  /* Completed: our own bytes are what we say completed it from now on
   * (a done word heard earlier named them, or came from a peer that lied). */
  r->chosen = r->att.plan.attempt;
  r->chosen_digested = true;
  memcpy(r->chosen_digest, r->digest, DED_RESULT_DIGEST_BYTES);
  memcpy(r->chosen_by, node->ident.id, DED_ID_BYTES);
  /* (An attempt of one member crosses no link: it says nothing of the
   * swarm's round time, and a partition's rounds alone would otherwise
   * teach a patience the first round after the healing cannot meet.) */
  if ((r->state == ROUND_RUNNING || r->state == ROUND_FETCHING) && r->att.plan.k > 1)
    ded_timing_learn_run(&node->timing, now_ns - r->started_ns);
  /* Those who are not acceptors (late members) and asked: it is done. So
   * are clients, which hear no HAVE from one another and may lack a
   * quorum of their own. */
  for (unsigned i = 0; i < r->votes.n; i++) {
    const ded_vote *v = &r->votes.v[i];
    if (v->attempt != r->att.plan.attempt || id_is_me(node, v->id)) continue;
    unsigned m = ded_plan_index(&r->att.plan, v->id);
    if (m == r->att.plan.k ||
        (r->att.plan.members[m].flags & (DED_MEMBER_F_ACCEPTOR | DED_MEMBER_F_CLIENT)) !=
            DED_MEMBER_F_ACCEPTOR)
      ded_round_send_have(node, ded_peer_find(node, v->id), r->no, r->att.plan.attempt, v->view,
                          DED_HAVE_F_DONE, r->digest);
  }
  r->state = ROUND_DONE_WAIT;
  return true;
}

void ded_round_check_complete(ded_node *node, ded_round *r, uint64_t now_ns) {
  if (round_check_complete(node, r, now_ns)) rounds_report_ready(node, now_ns);
}

/* Reports the DONE_WAIT rounds that no earlier round holds up. */
static void rounds_report_ready_once(ded_node *node, uint64_t now_ns) {
  bool again = true;
  while (again) {
    again = false;
    for (unsigned i = 0; i < node->rounds.n; i++) {
      ded_round *r = node->rounds.v[i];
      if (r->state != ROUND_DONE_WAIT) continue;
      bool earlier = false;
      for (unsigned k = 0; k < node->rounds.n && !earlier; k++) {
        ded_round *o = node->rounds.v[k];
        earlier = o->no < r->no && !ded_round_over(o);
      }
      if (earlier) continue;
      /* The attempt was planned on the previous round's membership; if that
       * round ended here with another attempt, the plan came from a
       * coordinator the swarm did not choose. */
      if (round_void_base(node, r)) {
        round_drop_void(node, r, now_ns);
        again = true;
        break;
      }
      /* Alone: the only contributor (aux members may have helped): our
       * buffer stays S_j, bit for bit. */
      bool alone = r->att.ncontrib == 1 && r->att.me == r->att.first_contrib;
      bool late = r->att.me == r->att.plan.k;
      if (late)
        node_log(node, DED_LOG_INFO,
                 "round %llu: fetched the result of %u members (this job came late)",
                 (unsigned long long)r->no, r->att.plan.k);
      if (r->recoveries)
        node_log(node, DED_LOG_INFO, "round %llu: recovered after %u failover%s, %u contributors",
                 (unsigned long long)r->no, r->recoveries, r->recoveries > 1 ? "s" : "",
                 r->att.ncontrib);
      ded_round_report(node, r, 0, alone, late);
      again = true;
      break;
    }
  }
}

static void rounds_report_ready(ded_node *node, uint64_t now_ns) {
  DED_ASSERT(!node->rounds.reporting); /* nothing a report does reports again */
  node->rounds.reporting = true;
  bool again;
  do {
    rounds_report_ready_once(node, now_ns);
    /* Rounds whose acceptance waited for an earlier round to end. */
    again = false;
    for (unsigned i = 0; i < node->rounds.n; i++) {
      ded_round *r = node->rounds.v[i];
      if (!ded_round_over(r) && ded_round_holds(r) && !r->accepted)
        again |= round_check_complete(node, r, now_ns);
    }
  } while (again);
  node->rounds.reporting = false;
}
