/*
 * ded_coord_int.h: what the two files of the coordinator side share
 * (ded_coord.c: views, decisions, JOIN intake; ded_coord_wait.c: whom a
 * view waits for, and how long). Not for other modules: ded_coord.h is
 * the interface.
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

/* |id| is waited for in |cr| (once; the list is bounded). */
void ded_coord_expect_add(ded_node *node, ded_coord *cr, const uint8_t id[DED_ID_BYTES]);

/* The lineage (round-1's and round-2's members, and a carried result's
 * acceptors) is waited for in |cr|. */
void ded_coord_expect_lineage(ded_node *node, ded_coord *cr);

/* The lineage and every intent of |cr|'s round or an earlier one still
 * running at |now_ns| (announced late members, joiners our node offered
 * the run's state to) are waited for in |cr|. */
void ded_coord_expect_waited(ded_node *node, ded_coord *cr, uint64_t now_ns);

/* True if |id| may still report to |cr|, so it is waited for. */
bool ded_coord_alive(ded_node *node, const ded_coord *cr, const uint8_t id[DED_ID_BYTES]);

/* |from| announced it will join round |j->round| (DED_JOIN_F_INTENT). */
void ded_coord_on_intent(ded_node *node, struct ded_peer *from, const ded_msg_join *j,
                         uint64_t now_ns);

/* Whether |cr|, past its deadline without everyone it waits for, holds
 * on: for an announced member on its way, a joiner our node offered the
 * run's state to, or a member still finishing the round before. */
bool ded_coord_holds(ded_node *node, const ded_coord *cr, uint64_t now_ns);

#endif /* DED_COORD_INT_H */
