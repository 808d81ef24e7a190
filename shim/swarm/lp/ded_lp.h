/*
 * ded_lp.h: the DeDLOC linear program: who reduces how much of a round.
 *
 * A round is a butterfly all-reduce over k members. Member i reduces the
 * fraction w_i of the vector: it receives that part from every other
 * contributor, adds, and sends the sum back to every other contributor.
 * Contributors are node and client peers (they bring a vector); reducers
 * are node and aux peers (they accept connections). Per byte of vector,
 * with c contributors and x_i = 1 when i contributes:
 *
 *     sent_i = received_i = x_i (1 - w_i) + w_i (c - x_i)
 *     added_i = w_i (c - x_i)
 *
 * (a node: 1 + (c - 2) w_i, hivemind's load_balancing.py; an aux peer:
 * c w_i; a client, w_i = 0: 1). Sending, receiving and adding overlap (the
 * shard travels in chunks), so the round takes max_i of
 * sent_i / up_i, received_i / down_i and added_i / add_i, and the plan
 * minimises that:
 *
 *     minimise T  subject to  sent_i <= T up_i, received_i <= T down_i,
 *                             added_i <= T add_i, sum w_i = 1, w_i >= 0,
 *                             w_i = 0 for clients.
 *
 * With every peer a node at bandwidth b_i, T* = 2 (n - 1) / sum b_i, and
 * peers too slow to pay for their share drop to w_i = 0 (water-filling).
 * Many plans reach T* when a slow link is the floor (a client must send
 * its whole vector however the rest is cut): a second program then
 * minimises the slowest reducer's time among them, so the fast peers
 * share the work evenly rather than one of them taking all of it.
 *
 * Solved with lpsolve; its allocations do not go through ded_mem. The
 * coordinator runs it and sends the shares in the COMMIT, so the members
 * never need to agree on floating point.
 */
#ifndef DED_LP_H
#define DED_LP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Past this many peers the program is not built (DED_ROUND_MEMBERS_MAX). */
#define DED_LP_PEERS_MAX 4096

/* One peer as the planner sees it. Rates in bytes per second; 0 means
 * unknown (the mean of the known rates of that kind stands in, as in
 * hivemind). |add_Bps| is how fast the peer adds incoming vectors. */
typedef struct ded_lp_peer {
  double up_Bps;
  double down_Bps;
  double add_Bps;
  uint8_t mode; /* enum ded_mode */
} ded_lp_peer;

/* What ded_lp_plan decided. */
typedef struct ded_lp_result {
  /* Round time per byte of vector, in seconds, of the plan returned. */
  double t_per_byte;
  /* 0: the LP's optimum. Otherwise why the safe plan (equal shares among
   * the reducers) stands: DED_LP_E_*. */
  int fallback;
  /* Equal shares stand, though nothing failed (fallback stays 0): the
   * reducers' links are alike (DED_LP_ALIKE), or the program's plan beat
   * equal shares by less than DED_LP_GAIN_MIN. */
  bool equal_kept;
} ded_lp_result;

/* Reducers whose measured rates, up and down, all lie within this factor
 * of each other have alike links: equal shares stand. Measured rates are
 * that noisy (equal 100 Mbit/s links read 82 to 95 Mbit/s in the WAN lab
 * with one stream per pair, 84 to 102 with four), and a peer given a
 * smaller share is busy for less time and reads slower still: planned on
 * such rates the program only skews the shares by the noise (it gave
 * 16/26/31/27 % on the lab's equal links, 5.05 s against 4.71 s for
 * equal shares), and a round takes as long as the largest share needs. */
#define DED_LP_ALIKE 1.25

/* Otherwise the least a plan must gain over equal shares, as a fraction
 * of their round time, to be used: what it gains less is within the
 * noise. Links that truly differ gain far more (two home links among four:
 * 30 %; aux summation servers beside slow trainers: 17 %). */
#define DED_LP_GAIN_MIN 0.10

enum {
  DED_LP_E_NONE = 0,
  DED_LP_E_NO_REDUCER = 1, /* every peer is a client: they all reduce equally */
  DED_LP_E_SOLVER = 2,     /* lpsolve failed or gave an unusable answer */
  DED_LP_E_SIZE = 3,       /* more than DED_LP_PEERS_MAX peers */
};

/* A short name for a DED_LP_E_* reason, for logs. */
const char *ded_lp_fallback_str(int fallback);

/*
 * Fills |frac[0..n)| (non-negative, summing to 1) with each peer's share
 * and |res|. Never fails: when the program cannot be solved, the safe plan
 * (equal shares among the reducers, or among everyone if there is none)
 * is returned and |res->fallback| says why. |n| >= 1.
 */
void ded_lp_plan(const ded_lp_peer *peers, unsigned n, double *frac, ded_lp_result *res);

/* The safe plan: equal shares among the reducers (all peers if none). */
void ded_lp_equal(const ded_lp_peer *peers, unsigned n, double *frac);

/* Round time per byte of vector of the plan |frac| (the model above, with
 * unknown rates filled in as ded_lp_plan does). */
double ded_lp_time(const ded_lp_peer *peers, unsigned n, const double *frac);

#endif /* DED_LP_H */
