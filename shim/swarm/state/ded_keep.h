/*
 * ded_keep.h: a backbone's side of state transfer: pulling the run's state
 * for a checkpoint, and serving its checkpoint to joiners once no trainer
 * is left (docs/architecture.md, "Checkpoints").
 *
 * Owns no struct of its own: it drives the joiner's machine of ded_xfer
 * with |pull| set (ASKING -> FETCHING -> FINISHED, as a fetch, but what
 * comes in is reported, never loaded: the node's rounds and lineage stay
 * as they are), and keeps its checkpoint as ded_xfer's donor snapshot
 * with |snap_kept| (no lineage: nlin 0, lin_attempt 0).
 *
 * Invariants: only a node without rounds (no_rounds) pulls or keeps; a
 * checkpoint is offered only while no connected trainer's record shows a
 * round at or past the checkpoint's (the run is not going on without
 * it), and only to an ask whose minimum round it meets; a pull asks the
 * trainers only, never a backbone.
 */
#ifndef DED_KEEP_H
#define DED_KEEP_H

#include <stdbool.h>
#include <stdint.h>

#include "../core/ded_msg.h"
#include "../ded_node.h"

struct ded_peer;

/* ded_node_state_pull, without entering the node: 0 or an error. */
int ded_keep_pull(ded_node *node, uint64_t min_round, uint64_t now_ns);

/* ded_node_keep_set, likewise (the node takes snap->bytes on every path). */
int ded_keep_set(ded_node *node, ded_snapshot *snap, uint64_t now_ns);

/* A STATE_ASK (not a founding one) reached a backbone: OFFER of the
 * checkpoint, or NONE. */
void ded_keep_on_ask(ded_node *node, struct ded_peer *p, const ded_msg_state_ask *m);

/* A joiner asking: asks the connected backbones too (after the trainers,
 * while there is room), which answer with a checkpoint or NONE. */
void ded_keep_ask_backbones(ded_node *node);

/* A pull, the snapshot whole and matching its digest: reports it. */
void ded_keep_pull_finish(ded_node *node, uint64_t now_ns);

/* A pull without an offer so far, |pending| donors yet to offer: reports
 * "nothing to pull" once none is left to, or a timeout at the bound. */
void ded_keep_pull_none(ded_node *node, unsigned pending, uint64_t now_ns);

#endif /* DED_KEEP_H */
