/*
 * ded_abstain.h: stepping down from a round our trainer does not come to.
 *
 * A member whose trainer submits no next round (done training and
 * lingering before MPI_Finalize, or paused) is still an acceptor of that
 * round: up and answering, it is never evicted, and where its vote is
 * needed for a quorum (the primary of two) the others' round can decide
 * nothing until it leaves, and ends at the bound. Once a peer has waited
 * for it in that round (a JOIN to our coordinator side, a PROBE) for half
 * the bound (the patience a silent peer gets before its eviction) while
 * our trainer still has not come to it, this
 * peer steps down from the round: it tells every peer (ABSTAIN), never
 * takes part in any view of it, and never votes in it. A quorum of the
 * acceptors that still count is then one without it, safely: an acceptor
 * that never votes is in no HAVE quorum, so dropping it from the count is
 * what a LEAVE does, for one round (docs/architecture.md, "Stepping
 * down"). Our trainer's call of that round, if it ever comes, is out of
 * step (the result it needs was made without it): the job reloads.
 *
 * Owns: our own step-down (ded_abstain, in the node) and what peers told
 * us of theirs (ded_peer.abstain_round, .idle).
 *
 * Invariants: we step down only from the round after one whose result
 * we hold as a member (we are its acceptor), only while no round of ours
 * has reached it, and never after our member took part in it; a round we
 * stepped down from is never joined (ded_join.c ends it out of step), and
 * we never vouch that it had no result (ded_rounds_void_base: it may have
 * completed on a quorum of acceptors that does not count us, which a
 * quorum of vouchers that does need not meet). A
 * peer's step-down counts for its round alone; it is not waited for in
 * that round or later ones until it joins a later round.
 */
#ifndef DED_ABSTAIN_H
#define DED_ABSTAIN_H

#include <stdbool.h>
#include <stdint.h>

#include "../core/ded_msg.h"
#include "../core/ded_types.h"

struct ded_node;
struct ded_peer;

typedef enum ded_abstain_state {
  ABSTAIN_IN,     /* nobody waits for us, or our trainer came */
  ABSTAIN_WAITED, /* a peer waits for us in |waited_round| since |waited_ns| */
} ded_abstain_state;

typedef struct ded_abstain {
  ded_abstain_state state;
  uint64_t waited_round;
  uint64_t waited_ns;
  bool probed;   /* a PROBE was among the signs of the wait */
  uint64_t down; /* the round we stepped down from; 0: none */
} ded_abstain;

/* Event: a peer waits for our member in |round|: its JOIN to a view we
 * coordinate (|probe| false), or a PROBE of it (true). */
void ded_abstain_on_waited(struct ded_node *node, uint64_t round, bool probe, uint64_t now_ns);

/* Event: time passed. Steps down once a peer has waited half the bound
 * and our trainer still has not come, if the wait is still on: a view of
 * the round we coordinate still gathering with a peer's report, or,
 * after a PROBE, no peer's record yet saying it completed the round. */
void ded_abstain_on_tick(struct ded_node *node, uint64_t now_ns);

/* Event: |from| says it steps down from |m->round|. */
void ded_abstain_on_msg(struct ded_node *node, struct ded_peer *from, const ded_msg_abstain *m);

/* Event: |from| joined |round| (a report, not an announcement): it is
 * waited for again from there on. */
void ded_abstain_on_join(struct ded_peer *from, uint64_t round);

/* True if we stepped down from |round|. */
bool ded_abstain_from(const struct ded_node *node, uint64_t round);

/* True if |id|, a member of the result before |round|, still counts
 * among |round|'s acceptors: this job, unless it leaves, takes part in no
 * rounds or stepped down from |round|; a peer, unless it is unknown,
 * left, evicted, or stepped down from |round|. */
bool ded_abstain_counts(struct ded_node *node, uint64_t round, const uint8_t *id);

/* True if we stepped down from a round after |after| and before |before|. */
bool ded_abstain_between(const struct ded_node *node, uint64_t after, uint64_t before);

/* Whether |p| may still come to |round|: false if it stepped down from
 * it or an earlier round and has joined none since. */
bool ded_abstain_peer_may_come(const struct ded_peer *p, uint64_t round);

#endif
