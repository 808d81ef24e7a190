/*
 * ded_coord.h: the coordinator side of a round.
 *
 * Owns: the rounds this peer coordinates, one view each (struct
 * ded_coord): the JOINs gathered (ded_match.h), whom it waits for (the
 * lineage, announced late members, the members of every attempt
 * reported), the attempts reported with what their members hold, its
 * deadlines, and its decision (a COMMIT of a new attempt, or a DECIDE
 * naming the attempt that stands and a holder per shard), kept to answer
 * whoever reports after it; and the announcements of late members it
 * heard (ded_intents.h), which hold the rounds it coordinates.
 *
 * Rules (docs/architecture.md, "Attempts, views and failover" and
 * "Completing is a quorum decision"): only the view's candidate in our
 * lineage coordinates it; a view decides once everyone it waits for
 * reported, or at its learned deadline, holding for announced members and
 * members still finishing the round before; with reports from a quorum of
 * the round's acceptors, and only once it completed the round before
 * itself; it keeps an attempt someone completed, else the one accepted in
 * the highest view, else any attempt whose shards all still exist, else
 * starts a new one among the reporters; a view that cannot decide within
 * the round bound gives up, and later reports get STALE.
 *
 * The events, each a switch on the view's state (coord_state): join (a
 * JOIN or a failover report), check (time, or someone came or went),
 * peer up, intent (an announced late member), leave.
 *
 * Files: ded_coord.c holds the views, their decisions and the JOIN
 * intake; ded_coord_wait.c whom a view waits for and how long (the
 * expected peers, announced late members, the holds); ded_coord_void.c
 * rounds with no result anywhere (carried over a result's vouchers, or
 * rolled back to the newest result a live peer holds); ded_coord_int.h
 * what they share.
 *
 * Invariants: one struct ded_coord per round, in its newest view (a JOIN
 * of a higher view resets it); a view that left GATHERING never decides
 * again; its late_frame, once set, is what every later reporter of that
 * view gets.
 */
#ifndef DED_COORD_H
#define DED_COORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/ded_msg.h"
#include "../ded_node.h"
#include "ded_match.h"

struct ded_peer;
struct ded_conn;

/* A view's state. GATHERING -> DECIDED (a COMMIT or DECIDE went out; later
 * reporters get its DECIDE) or GAVE_UP (no decision within the bound, or
 * nothing left to decide on: later reporters get STALE); a JOIN of a higher
 * view starts the round over, GATHERING in that view. */
typedef enum coord_state {
  COORD_GATHERING,
  COORD_DECIDED,
  COORD_GAVE_UP,
} coord_state;

/* A round we coordinate, in one view. */
typedef struct ded_coord {
  uint64_t round;
  uint32_t view;
  bool genesis;
  ded_gather g; /* this view's joins */
  /* Peers waited for: the lineage, announced intents, and the members of
   * every attempt reported. */
  uint8_t (*expect)[DED_ID_BYTES];
  unsigned nexpect, expect_cap;
  /* Attempts reported in this view, with what their members hold. */
  struct ded_coord_attempt {
    ded_msg_commit plan;
    uint8_t *have; /* union of the reporters' shard bits */
    uint16_t *holder;
    uint32_t acc_view; /* the highest view a reporter accepted it in, or DED_VIEW_NONE */
    bool done;         /* a reporter completed the round with it */
  } att[4];
  unsigned natt;
  uint64_t first_ns, last_ns, deadline_ns;
  bool clock; /* the learned deadline runs */
  uint64_t quorum_ns; /* genesis: when DEDMPI_MIN_PEERS were in (0: not yet) */
  bool held;  /* waited for an announced member, or one still finishing the last round */
  bool asked; /* back from a stall, probed those waited for (coord_on_check) */
  /* The rounds since round |carry_round| (attempt |carry_attempt|) had no
   * result anywhere, as a quorum of its members vouched (DED_JOIN_F_VOID):
   * its members are this round's acceptors, in place of the round
   * before's. Once set, stays set. */
  bool carried;
  uint64_t carry_round, carry_attempt;
  /* This view rolls the run back (ded_coord_try_rollback): no acceptors,
   * the members start afresh, and the founder holds round |roll_round|-1's
   * result (attempt |roll_attempt|, 0: not known; |roll_round| 0: no
   * result at all). Forgotten with the view. */
  bool rolled;
  uint64_t roll_round, roll_attempt;
  coord_state state;
  uint8_t *commit_frame; /* a new attempt, for the joiners */
  size_t commit_len;
  uint8_t *late_frame; /* DECIDE for whoever reports after the decision */
  size_t late_len;
} ded_coord;

typedef struct ded_coords {
  ded_coord **v;
  size_t n, cap;
} ded_coords;

/* The round |no| we coordinate, or NULL. */
ded_coord *ded_coord_find(ded_node *node, uint64_t no);

/* True if a view of |round| we coordinate is still gathering and holds a
 * report from a peer: someone waits for a decision we could make. */
bool ded_coord_peer_waits(ded_node *node, uint64_t round);

/* A JOIN (or failover report) from |from| on |via| (both NULL: ourselves). */
void ded_coord_on_join(ded_node *node, struct ded_peer *from, struct ded_conn *via,
                       const ded_msg_join *j, uint64_t now_ns);

/* check: decides every view that can decide now (time passed, someone
 * came, went or reported). */
void ded_coords_evaluate(ded_node *node, uint64_t now_ns);

/* leave: the views still gathering decide now, without us. */
void ded_coords_on_leave(ded_node *node);

/* Whether our view |view| of round |round| had its time (past its
 * deadline, holding for no one) and still cannot decide, for want of
 * others or of what it needs to know: it gathered only our own JOIN (the
 * others went to another coordinator, members that know different peers
 * gone picking different candidates, whose view may have completed the
 * round), or we never completed the round before and no quorum vouched
 * that it had no result (we cannot know the acceptors, ever). Our own
 * member side then fails over as from any silent coordinator rather than
 * wait for the bound. A view that others reported to, and that knows the
 * acceptors, waits (for a quorum, or for the evictions that make the
 * acceptors still counted one). */
bool ded_coord_undecided(ded_node *node, uint64_t round, uint32_t view, uint64_t now_ns);

/* True while a view with joins is still gathering (the node ticks fast). */
bool ded_coords_pending(const ded_node *node);

/* A peer came up: views that still wait for it probe it again. */
void ded_coords_on_peer_up(ded_node *node, struct ded_peer *p);

/* A STALE from |from| for |m->round|: a member a view of ours waits for
 * finished that round long ago, and went on. The view gives up (true):
 * deciding it with the others would make a second result of the round. */
bool ded_coords_on_stale(ded_node *node, const uint8_t from[DED_ID_BYTES], const ded_msg_stale *m);

/* Forgets rounds too old to matter for late members. */
void ded_coords_prune(ded_node *node);

void ded_coords_free(ded_node *node);

/* STALE for |round|: the swarm is past it, at the round we say. */
void ded_coord_send_stale(ded_node *node, struct ded_peer *to, uint64_t round);

/* STALE (or, |ahead|, AHEAD) for |round|: where we are. */
void ded_coord_send_stale_or_ahead(ded_node *node, struct ded_peer *to, uint64_t round, bool ahead);

/* Until when an announced member is still waited for in |round| (0: none
 * is): one that is here and has not joined |cr| (if given) yet; only one
 * that announced itself to the swarm if |heard_only| (ded_intents.h). */
uint64_t ded_coord_intent_until(ded_node *node, uint64_t round, const ded_coord *cr,
                                uint64_t now_ns, bool heard_only);

/*
 * True while a member of round |no| - 1, still here and not in |cr|'s
 * joins (if given), is still finishing that round: it has not said it
 * holds the result (its last chunks are on their way), or said so only
 * a learned join spread ago (its trainer's step comes between), and its
 * JOIN of |no| will follow. A member whose link is slower than the others'
 * finishes every round last: taken for late, it would be left out of every
 * other round. Only a member of that round (as we were, to coordinate this
 * one) hears every HAVE; anyone else tells nothing from their absence.
 */
bool ded_coord_lin_finishing(ded_node *node, uint64_t no, const ded_coord *cr, uint64_t now_ns);

#endif /* DED_COORD_H */
