#include "ded_coord.h"

#include <string.h>

#include "../core/ded_err.h"
#include "../ded_node_int.h"
#include "ded_coord_int.h"

/* Rounds with no result anywhere here (ded_coord.h, "Files"): carried
 * over on the vouchers of a result's members, or rolled back to the newest
 * result a live peer holds. */

/*
 * Rounds with no result anywhere (docs/architecture.md, "A round with no
 * result anywhere"): the round before ours did not end here with a result,
 * but a quorum of the members of a result we hold, round R's (those that
 * still count, as ded_coord_acceptors counts them), vouch in their JOINs that
 * every round after R before ours ended with none where they took part,
 * and that they voted for none of those rounds' attempts (nor will: they
 * ended them). A completion needs the HAVEs of a quorum of R+1's
 * acceptors, R's members, and two quorums share a member: so R+1 completed
 * nowhere, and no round after it could (each needs the result before).
 * Then R's members are our round's acceptors, as if the rounds between had
 * not been: cr->carried.
 */
void ded_coord_try_carry(ded_node *node, ded_coord *cr) {
  if (cr->carried || cr->rolled || cr->genesis || cr->round < 2) return;
  ded_lin_entry *prev = ded_lineage_get(&node->lin, cr->round - 1);
  if (prev && prev->final && prev->attempt != 0 && prev->final_attempt == prev->attempt) return;
  /* Nor where we hold a result or a vote of a round since (the vouchers
   * are wrong, or we are): our own lineage must say the same. */
  const ded_lin_entry *mine = ded_rounds_void_base(node, cr->round);
  if (!mine) return;
  for (size_t i = 0; i < cr->g.n; i++) {
    const ded_msg_join *j = &cr->g.v[i].join;
    if (!(j->flags & DED_JOIN_F_VOID) || j->round != cr->round || j->void_round != mine->round ||
        j->void_attempt != mine->attempt)
      continue;
    /* R's members that still count, as acceptors; the VOID joiners among them. */
    cr->carried = true;
    cr->carry_round = j->void_round;
    cr->carry_attempt = j->void_attempt;
    acc_set a;
    bool ok = false;
    if (ded_coord_acceptors(node, cr, &a) == 0) {
      unsigned in = 0;
      bool primary_in = false;
      for (unsigned k = 0; k < a.n; k++) {
        const ded_gather_join *gj = ded_gather_find(&cr->g, a.ids[k]);
        if (!gj || !(gj->join.flags & DED_JOIN_F_VOID) || gj->join.void_round != j->void_round ||
            gj->join.void_attempt != j->void_attempt)
          continue;
        in++;
        primary_in |= k == a.primary;
      }
      /* With every one of them gone for good (crashed, evicted), none
       * can vouch, and none is needed: a completion of R+1 took a quorum
       * of their votes, and where it happened is gone too, unless a peer
       * we can talk to says it completed R+1 or later (then the run went
       * on there: we are the ones behind). So our vouchers carry on. */
      ok = a.total > 0 ? ded_quorum_of(in, a.total, primary_in)
                       : ded_rounds_run_ahead(node) <= j->void_round;
      ded_mem_free(node->mem, a.ids);
    }
    if (ok) {
      node_log(node, DED_LOG_INFO, "round %llu: view %u: rounds %llu to %llu had no result "
               "anywhere (a quorum of round %llu's members says so): its members decide this one",
               (unsigned long long)cr->round, cr->view, (unsigned long long)j->void_round + 1,
               (unsigned long long)cr->round - 1, (unsigned long long)j->void_round);
      ded_coord_expect_lineage(node, cr);
    } else {
      cr->carried = false;
    }
    return; /* every voucher that counts names this same result */
  }
}

/* Whether |j| says what its peer holds (VOID or HELD) and, if so, that
 * result as its round + 1 (0: none) in |*round1|, its attempt (0: not
 * known) in |*attempt|. */
static bool join_held(const ded_msg_join *j, uint64_t *round1, uint64_t *attempt) {
  if (j->flags & DED_JOIN_F_VOID) {
    *round1 = j->void_round + 1;
    *attempt = j->void_attempt;
    return true;
  }
  *round1 = j->held_round;
  *attempt = j->held_attempt;
  return (j->flags & DED_JOIN_F_HELD) != 0;
}
/* Whether |j|'s peer holds the result |cr| goes on from. */
static bool founder_holds(const ded_coord *cr, const ded_msg_join *j) {
  if (cr->carried)
    return j->flags & DED_JOIN_F_VOID && j->void_round == cr->carry_round &&
           j->void_attempt == cr->carry_attempt;
  uint64_t r1, att;
  return join_held(j, &r1, &att) && r1 == cr->roll_round &&
         (att == 0 || cr->roll_attempt == 0 || att == cr->roll_attempt);
}

/* Flags the member of a carried or rolled-back attempt whose state goes
 * on: the first (in summation order) that vouched for the rounds carried
 * over (its state holds the result they were carried from), or holds the
 * result rolled back to, and is no client (the other clients could not
 * reach it to reload); for a carry, else the first that is no client,
 * else the first contributor; for a rollback to no result at all, the
 * same. False where a rollback to a result has no member that holds it
 * and is no client (it went away before the decision): nothing to found
 * the run on. */
bool ded_coord_flag_founder(const ded_coord *cr, ded_msg_commit *cm) {
  unsigned pick = cm->k;
  int passes = cr->rolled && cr->roll_round ? 1 : 3; /* a rollback to M: only a holder of M */
  for (int pass = 0; pass < passes && pick == cm->k; pass++)
    for (unsigned m = 0; m < cm->k && pick == cm->k; m++) {
      uint8_t f = cm->members[m].flags;
      if (f & DED_MEMBER_F_AUX || (pass < 2 && f & DED_MEMBER_F_CLIENT)) continue;
      const ded_gather_join *gj = pass == 0 ? ded_gather_find(&cr->g, cm->members[m].id) : NULL;
      if (pass == 0 && (!gj || !founder_holds(cr, &gj->join))) continue;
      pick = m;
    }
  if (pick < cm->k) cm->members[pick].flags |= DED_MEMBER_F_FOUNDER;
  return pick < cm->k || !cr->rolled;
}


/*
 * Rollback (docs/architecture.md, "Rollback"): we do not know the round's
 * acceptors (we did not complete the round before), nor can anyone carry
 * them over, but our own member, still in this view, and every other
 * joiner reported that they are out of step here (VOID or HELD: every
 * round before ours has ended where they are, the round before without
 * the swarm's result), no other peer not gone for good holds a result by
 * its record (a backbone: none newer than theirs), and, coord_decide asks
 * it as for any new attempt, the joiners are a quorum of the rollback's
 * acceptors (ded_coord_roll_acceptors). Then any result newer than the
 * newest they hold, round M's, lives only with peers gone for good
 * (crashed, evicted, left): the run goes on from M, as it would from a
 * result whose every holder crashed. The attempt starts its members
 * afresh with the rollback's acceptors, and its founder is a member that
 * holds M (ded_coord_flag_founder), whose state the others reload. Not
 * where a joiner reports an attempt of this round with a base (someone
 * knew its acceptors), nor where two name different attempts of M (two
 * histories: the groups' records settle which yields,
 * ded_rounds_check_groups). Judged afresh at every decision; coord_clear
 * forgets it with the view.
 */
int ded_coord_roll_acceptors(ded_node *node, acc_set *a) {
  memset(a, 0, sizeof *a);
  a->ids = ded_mem_malloc(node->mem, (node->peers.n + 1) * DED_ID_BYTES);
  if (!a->ids) return DED_ERR_NOMEM;
  if (!node->leaving && !node->s.no_rounds) memcpy(a->ids[a->n++], node->ident.id, DED_ID_BYTES);
  for (size_t i = 0; i < node->peers.n; i++) {
    const ded_peer *p = node->peers.v[i];
    const ded_record *rec = ded_peer_record(node, p);
    if (p->left || p->evicted || !rec || rec->flags & DED_RECORD_F_NO_ROUNDS) continue;
    memcpy(a->ids[a->n++], p->id, DED_ID_BYTES);
  }
  a->total = a->n;
  for (unsigned i = 1; i < a->n; i++)
    if (memcmp(a->ids[i], a->ids[a->primary], DED_ID_BYTES) < 0) a->primary = i;
  return 0;
}

bool ded_coord_try_rollback(ded_node *node, ded_coord *cr) {
  cr->rolled = false; /* judged afresh at every decision */
  if (cr->carried || cr->genesis || cr->round < 1 || cr->g.n == 0) return false;
  /* Our own member reported to this view and is still in it: what it
   * said still holds (it cannot complete a round before this one any
   * more). A view it left may hold JOINs long outdated: of a round we
   * completed since, in another view. */
  const ded_round *own = ded_round_find(node, cr->round);
  if (!own || ded_round_over(own) || own->view != cr->view || !id_is_me(node, own->coord) ||
      !ded_gather_find(&cr->g, node->ident.id))
    return false;
  for (unsigned i = 0; i < cr->natt; i++)
    if (cr->att[i].plan.base != 0) return false;
  /* M: the newest result a joiner that brings a vector and is not gone
   * for good holds (one whose connection broke since it reported counts:
   * it may be back); its founder one still here, and no client. */
  uint64_t m1 = 0, m_att = 0;
  bool founder = false;
  for (size_t i = 0; i < cr->g.n; i++) {
    const ded_gather_join *gj = &cr->g.v[i];
    uint64_t r1, att;
    if (!join_held(&gj->join, &r1, &att)) return false;
    if (gj->join.flags & DED_JOIN_F_AUX || ded_peer_evicted(node, gj->id)) continue;
    bool client = gj->join.flags & DED_JOIN_F_CLIENT || !ded_coord_active(node, cr, gj->id);
    if (r1 > m1) {
      m1 = r1;
      m_att = att;
      founder = !client;
    } else if (r1 == m1) {
      if (att != 0 && m_att != 0 && att != m_att) return false;
      if (att != 0) m_att = att;
      founder |= !client;
    }
  }
  if (!founder) return false;
  for (size_t i = 0; i < cr->g.n; i++) { /* one attempt of round M only */
    uint64_t r1, att;
    join_held(&cr->g.v[i].join, &r1, &att);
    if (r1 == m1 && att != 0 && m_att != 0 && att != m_att) return false;
  }
  /* Every other peer not gone for good holds no result by its record (a
   * joiner still loading the run's state, a peer that never completed a
   * round), or, one that takes no part in rounds (a backbone), none newer
   * than M: one that holds a result and did not report is waited for, or
   * for its eviction. (A record says a first result only at its owner's
   * next publication: a peer cut off just after its first completion is
   * the eviction rule's price.) The quorum of the rollback's acceptors
   * (ded_coord_roll_acceptors) is coord_decide's to ask, as for any new
   * attempt. */
  for (size_t i = 0; i < node->peers.n; i++) {
    const ded_peer *p = node->peers.v[i];
    if (p->left || p->evicted || ded_gather_find(&cr->g, p->id)) continue;
    const ded_record *rec = ded_peer_record(node, p);
    ded_progress prog;
    if (!rec) return false;
    if (ded_record_progress(rec, &prog) &&
        (!(rec->flags & DED_RECORD_F_NO_ROUNDS) || prog.round + 1 > m1))
      return false;
  }
  cr->rolled = true;
  cr->roll_round = m1;
  cr->roll_attempt = m_att;
  return true;
}

void ded_coord_log_rollback(ded_node *node, const ded_coord *cr) {
  if (cr->roll_round > 0)
    node_log(node, DED_LOG_WARN, "round %llu: view %u: no peer here completed the round before, "
             "and none holds a result newer than round %llu's: the run goes on from that one "
             "(a rollback; any newer result died with its holders)",
             (unsigned long long)cr->round, cr->view, (unsigned long long)cr->roll_round - 1);
  else
    node_log(node, DED_LOG_WARN, "round %llu: view %u: no peer here holds any result of the run "
             "(they died with their holders): the run goes on from one member's own state "
             "(a rollback)", (unsigned long long)cr->round, cr->view);
}
