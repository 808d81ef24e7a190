/*
 * ded_lineage.h: the memberships of recent rounds, as this peer knows them.
 *
 * Owns: per recent round (a ring of DED_LIN_RING), the members of the
 * latest attempt this peer adopted for it (the lineage of the next round:
 * round r's coordinators are chosen from round r-1's members), whether
 * and with which attempt the round ended here, and which members said
 * they hold that attempt's result (HAVE); and the views learnt for rounds
 * not started yet (PROBE, REDIRECT: view hints).
 *
 * Invariants: an entry is empty (ids NULL) or holds round |round|, which
 * is its slot (round mod DED_LIN_RING); |final| says the round reported
 * here, |final_attempt| with which attempt (0: without one, e.g. alone);
 * have_members is false exactly when no entry is held (genesis: the
 * first round as far as we know); ever_members, once true, stays true
 * (the swarm exists); members_round is the newest round held.
 */
#ifndef DED_LINEAGE_H
#define DED_LINEAGE_H

#include <stdbool.h>
#include <stdint.h>

#include "../core/ded_mem.h"
#include "../core/ded_msg.h"

#define DED_LIN_RING 128
#define DED_VIEW_HINTS 16

/* A round's membership, as the lineage of the next one. */
typedef struct ded_lin_entry {
  uint64_t round;
  uint64_t attempt;
  uint8_t (*ids)[DED_ID_BYTES]; /* n ids, then client bits (DED_LIN_BYTES); NULL: empty slot */
  unsigned n;
  uint64_t end;           /* where the round ends in the gradient stream (pos + count) */
  bool final;             /* the round reported here */
  uint64_t final_attempt; /* ... with this attempt (0: without one) */
  bool voted;             /* this peer sent HAVE for an attempt of the round */
  uint8_t *have;          /* n bits: the member said it holds |attempt|'s result (HAVE) */
  uint64_t have_ns;       /* when the latest of those came */
} ded_lin_entry;

typedef struct ded_lineage {
  const ded_mem *mem;
  ded_lin_entry ring[DED_LIN_RING];
  bool have_members;      /* any lineage at all (else: genesis) */
  bool ever_members;      /* we had a lineage once: the swarm exists */
  uint64_t members_round; /* the newest round held */
  struct {
    uint64_t round;
    uint32_t view;
  } hints[DED_VIEW_HINTS];
} ded_lineage;

void ded_lineage_init(ded_lineage *l, const ded_mem *mem);

/* Forgets every membership (not the views learnt, nor ever_members). */
void ded_lineage_lose(ded_lineage *l);

/* Round |round|'s entry, or NULL. */
ded_lin_entry *ded_lineage_get(ded_lineage *l, uint64_t round);

/* The newest entry of a round below |round|, or NULL. */
ded_lin_entry *ded_lineage_newest_below(ded_lineage *l, uint64_t round);

/* Round |no|'s membership is now |plan|'s (whether it ended here stays as
 * it was). 0 or DED_ERR_NOMEM. */
int ded_lineage_set(ded_lineage *l, uint64_t no, const ded_msg_commit *plan);

/* Round |no| ended with |attempt| among |ids| (|n| of them, with client
 * bits, DED_LIN_BYTES; taken over): a loaded snapshot's lineage. */
void ded_lineage_install(ded_lineage *l, uint64_t no, uint64_t attempt, uint8_t (*ids)[DED_ID_BYTES],
                         unsigned n, uint64_t end);

/* |id| said at |now_ns| that it holds the result of |attempt| of |round|
 * (HAVE); short of memory it is taken for still finishing. */
void ded_lineage_take_have(ded_lineage *l, uint64_t round, uint64_t attempt,
                           const uint8_t id[DED_ID_BYTES], uint64_t now_ns);

/* Whether this peer's vote in round |voted|->round (the rounds since
 * |base| had no result here) is moot: no peer that still counts can have
 * completed that round with it. The caller knows who is gone for good. */
typedef bool (*ded_lin_vote_moot)(void *ctx, const ded_lin_entry *base, const ded_lin_entry *voted);

/* The entry of the newest round below |round| that ended here with the
 * swarm's result, when every round after it below |round| has an entry
 * that ended here without one and voted for none of its attempts, or only
 * moot votes (|moot|, if given, says so; a round with no entry had no
 * attempt here, so no vote), and there is at least one such round: this
 * peer can vouch that those rounds completed nowhere it took part that
 * still counts (docs/architecture.md, "A round with no result anywhere").
 * NULL otherwise, when that round is no longer in the ring, and when a
 * round after |round| took the slot of one between (its entry is lost). */
const ded_lin_entry *ded_lineage_void_base(const ded_lineage *l, uint64_t round,
                                           ded_lin_vote_moot moot, void *ctx);

/* |plan|'s members as a lineage (ids, then client bits), from |mem|. */
uint8_t (*ded_lineage_of_plan(const ded_mem *mem, const ded_msg_commit *plan))[DED_ID_BYTES];

/* The view learnt for |round| (0: none), and learning one (the larger
 * view of a round wins). */
uint32_t ded_lineage_view_hint(const ded_lineage *l, uint64_t round);
void ded_lineage_set_view_hint(ded_lineage *l, uint64_t round, uint32_t view);

#endif /* DED_LINEAGE_H */
