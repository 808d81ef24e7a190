/*
 * ded_coord_int.h: what the files of the coordinator side share
 * (ded_coord.c: views, decisions, JOIN intake; ded_coord_wait.c: whom a
 * view waits for, and how long; ded_coord_void.c: rounds with no result
 * anywhere, carried over or rolled back). Not for other modules:
 * ded_coord.h is the interface.
 */
#ifndef DED_COORD_INT_H
#define DED_COORD_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "ded_coord.h"

/* The round whose result's members are |cr|'s acceptors: the round
 * before, or the one carried over rounds with no result. NULL when not
 * held here. */
ded_lin_entry *ded_coord_prev(ded_node *node, const ded_coord *cr);

/* The round's acceptors as the coordinator of |cr| sees them. */
typedef struct acc_set {
  uint8_t (*ids)[DED_ID_BYTES]; /* owned */
  unsigned n;                   /* listed */
  unsigned total;               /* counted: an attempt's acceptors need not all be listed */
  unsigned primary;             /* index into ids, or n: none */
} acc_set;

/* The round's acceptors as |cr|'s coordinator sees them: the members of
 * ded_coord_prev's result that still count; without it, an attempt's
 * (the first round) or those waited for; none where |cr| rolled back.
 * |a->ids| is the caller's to free. */
int ded_coord_acceptors(ded_node *node, const ded_coord *cr, acc_set *a);

/* True if |id| still counts among |cr|'s acceptors. */
bool ded_coord_counts(ded_node *node, const ded_coord *cr, const uint8_t id[DED_ID_BYTES]);

/* Whether we know |cr|'s acceptors: the first round, or |prev| (the
 * round before) ended here with its result. */
bool ded_coord_knows_acceptors(const ded_coord *cr, const ded_lin_entry *prev);

/* Sets |cr->carried| where a quorum of a result's members vouch that the
 * rounds since had none anywhere (DED_JOIN_F_VOID). */
void ded_coord_try_carry(ded_node *node, ded_coord *cr);

/* Sets |cr->rolled| where our own member, still in this view, and every
 * peer we can talk to that takes part reported to it that they are out
 * of step here (VOID or HELD), every other peer not gone for good holding
 * nothing: true if |cr| rolls back (ded_coord_void.c). */
bool ded_coord_try_rollback(ded_node *node, ded_coord *cr);

/* Flags the founder of a carried or rolled-back attempt |cm|; false if a
 * rollback's attempt has no member that can be one. */
bool ded_coord_flag_founder(const ded_coord *cr, ded_msg_commit *cm);

/* A rollback's acceptors (ded_coord_try_rollback): ourselves, if we take
 * part, and every peer not gone for good (not evicted, not left) whose
 * record says it takes part in rounds, the smallest id the primary. A
 * rollback view needs a quorum of them, and so does its attempt's
 * completion: two rollbacks of one round share a voter. */
int ded_coord_roll_acceptors(ded_node *node, acc_set *a);

/* Says in the log that |cr| rolls the run back (its attempt is decided). */
void ded_coord_log_rollback(ded_node *node, const ded_coord *cr);

/* |id| is waited for in |cr| (once; the list is bounded). */
void ded_coord_expect_add(ded_node *node, ded_coord *cr, const uint8_t id[DED_ID_BYTES]);

/* The lineage (round-1's and round-2's members, and a carried result's
 * acceptors) is waited for in |cr|. */
void ded_coord_expect_lineage(ded_node *node, ded_coord *cr);

/* The lineage and every intent of |cr|'s round or an earlier one still
 * running at |now_ns| (announced late members, joiners our node offered
 * the run's state to) are waited for in |cr|. */
void ded_coord_expect_waited(ded_node *node, ded_coord *cr, uint64_t now_ns);

/* True if |id| may still report to |cr|: our own member in the round, or
 * a peer we can talk to that takes part in rounds and did not step down
 * from it. A joiner that is not is dropped from the view's reports. */
bool ded_coord_alive(ded_node *node, const ded_coord *cr, const uint8_t id[DED_ID_BYTES]);

/* True if |id| is alive and not gone quiet (ded_peer_quiet): waited for,
 * and a member of an attempt |cr| starts. A quiet peer's report stays in
 * the view, and it still counts among the acceptors. */
bool ded_coord_active(ded_node *node, const ded_coord *cr, const uint8_t id[DED_ID_BYTES]);

/* |from| announced it will join round |j->round| (DED_JOIN_F_INTENT). */
void ded_coord_on_intent(ded_node *node, struct ded_peer *from, const ded_msg_join *j,
                         uint64_t now_ns);

/* Whether |cr|, past its deadline without everyone it waits for, holds
 * on: for an announced member on its way, a joiner our node offered the
 * run's state to, or a member still finishing the round before. */
bool ded_coord_holds(ded_node *node, const ded_coord *cr, uint64_t now_ns);

#endif /* DED_COORD_INT_H */
