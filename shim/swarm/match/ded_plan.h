/*
 * ded_plan.h: how a coordinator cuts a round among its members.
 *
 * Owns: the inputs of the DeDLOC program (each joiner's mode and the
 * rates it publishes in its record; ours as we publish them), the plan
 * (ded_gather_commit_planned: the program's shares, or equal ones), the
 * estimate of how long an attempt should take at the members' rates, and
 * the log line a change of plan gets (one per change: the last one logged
 * is remembered).
 *
 * Rules: a download is taken to be at least the upload (a download is
 * measured only as fast as the senders send, so a fast peer among slow
 * ones reads slow); an early rate (DED_PERF_F_*: few samples yet) is a
 * lower bound, which the plan (not the estimate: that sets patience)
 * takes as the fastest rate of its kind among the round's members when
 * it lies within DED_PLAN_EARLY_LIFT of it (early rates are a warm-up's,
 * or a fast link's short bursts: planned on as measured, equal links got
 * shares skewed by 9 to 43 %; one far below the fastest is more likely a
 * slow link, and stays as read); a rate not measured yet counts as a
 * slow home link's (DED_RATE_UNKNOWN_BPS) in estimates; should the
 * solver fail, equal shares stand and the coordinator logs why.
 */
#ifndef DED_PLAN_H
#define DED_PLAN_H

#include <stdint.h>

#include "../core/ded_msg.h"
#include "../ded_node.h"
#include "../lp/ded_lp.h"
#include "ded_match.h"

/* An early rate this close to the fastest of its kind is taken as it: the
 * lab's equal 100 Mbit/s links read 45 to 95 in their warm-up; a home
 * link among them reads a tenth. */
#define DED_PLAN_EARLY_LIFT 3.0

typedef struct ded_planner {
  uint64_t logged_sig; /* the last plan logged, as a signature of its shares */
} ded_planner;

/* What the planner knows of peer |id| (us included): its mode and
 * published rates. */
ded_lp_peer ded_plan_lp_peer(const ded_node *node, const uint8_t id[DED_ID_BYTES]);

/* Takes each early rate of |lp| (|early[i]|: DED_PERF_F_* of peer i)
 * within DED_PLAN_EARLY_LIFT of the fastest of its kind among the |n| as
 * that fastest, and a download as at least the upload again. Pure. */
void ded_plan_lift_early(ded_lp_peer *lp, const uint8_t *early, size_t n);

/* What an attempt of |plan| should take at the members' published rates,
 * in ns; 0 if that cannot be told. */
uint64_t ded_plan_estimate_ns(ded_node *node, const ded_msg_commit *plan);

/* Fixes round |round|'s members (|g|'s joins) and shares into |cm|, and
 * logs the plan when it changed. 0 or DED_ERR_NOMEM. */
int ded_plan_make(ded_node *node, const ded_gather *g, uint64_t round, ded_msg_commit *cm);

#endif /* DED_PLAN_H */
