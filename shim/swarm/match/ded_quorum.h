/*
 * ded_quorum.h: the quorum rules of a round, as pure functions.
 *
 * Owns: the HAVE votes one member heard for one round (ded_votes), and
 * the rules that count them. Nothing here sends, logs or keeps time.
 *
 * The rules (docs/architecture.md, "Completing is a quorum decision"):
 *  - the acceptors of round r are the members of round r-1's result (a
 *    first round's members are its own); a COMMIT flags them
 *    (DED_MEMBER_F_ACCEPTOR) and says how many there are (nacc), since an
 *    attempt need not list them all;
 *  - a quorum is more than half of the acceptors, or exactly half with
 *    the primary (the smallest acceptor id, DED_MEMBER_F_PRIMARY) among
 *    them, so that any two quorums share a member;
 *  - an attempt is the round's result once a quorum of its acceptors said
 *    HAVE for it in one view, each with the same digest of the result's
 *    bytes (votes of different views, or for different bytes, never add
 *    up: a reducer that sent different members different bytes cannot
 *    make two of them complete the round with different bytes, as long
 *    as every acceptor votes for the bytes it holds);
 *  - a completer's word (HAVE with the done flag) is its vote in the view
 *    it answers; on its own it decides nothing for an acceptor (the round
 *    code lets it decide the bytes only for a member that cannot count a
 *    quorum itself);
 *  - an attempt whose members are not a quorum of its acceptors can never
 *    complete.
 *
 * They hold against a reducer that lies in its RESULT frames, not against
 * one that lies in its votes too (docs/threat-model.md).
 *
 * Invariant: a ded_votes holds each (attempt, view, voter) at most once
 * (the first digest it said for them, unless a later word of its that it
 * completed with other bytes replaced it: ded_votes_set), and at most
 * DED_ROUND_VOTES_MAX votes (a full list only delays completion: the
 * failover path still ends the round).
 */
#ifndef DED_QUORUM_H
#define DED_QUORUM_H

#include <stdbool.h>
#include <stdint.h>

#include "../core/ded_mem.h"
#include "../core/ded_msg.h"

/* True if |in| of |total| acceptors, the primary among them or not, are a
 * quorum. */
bool ded_quorum_of(unsigned in, unsigned total, bool primary_in);

/* Index of |id| in |plan| (members are sorted by id), or plan->k. */
unsigned ded_plan_index(const ded_msg_commit *plan, const uint8_t id[DED_ID_BYTES]);

/* True if |plan|'s members include a quorum of its acceptors: only then
 * can their HAVEs ever complete it. */
bool ded_quorum_can_complete(const ded_msg_commit *plan);

/* Whether the |n| ids at |acc| (the members of the previous round's
 * result) are |plan|'s acceptors, every one of them: as many as it
 * counts, and every member it flags an acceptor among them (a coordinator
 * that found every one of them gone for good starts the members afresh,
 * as a first round's own acceptors). */
bool ded_quorum_acceptors_match(const ded_msg_commit *plan, const uint8_t (*acc)[DED_ID_BYTES],
                                unsigned n);

/* Whether the acceptors of |plan| that |alive| says still count (not gone
 * for good) can still make a quorum of the votes it needs: those of |acc|
 * (the |n| members of the previous round's result, where they match,
 * ded_quorum_acceptors_match, as a member counts them:
 * round/ded_complete.c), else its listed acceptors. */
bool ded_quorum_can_complete_alive(const ded_msg_commit *plan, const uint8_t (*acc)[DED_ID_BYTES],
                                   unsigned n, bool (*alive)(void *ctx, const uint8_t *id),
                                   void *ctx);

/* A HAVE heard: |id| holds |attempt|'s result, whose bytes hash to
 * |digest|, and accepted it in |view|. */
typedef struct ded_vote {
  uint64_t attempt;
  uint32_t view;
  uint8_t id[DED_ID_BYTES];
  uint8_t digest[DED_RESULT_DIGEST_BYTES];
} ded_vote;

typedef struct ded_votes {
  ded_vote *v;
  unsigned n, cap;
} ded_votes;

/* Remembers a vote (once; within DED_ROUND_VOTES_MAX; short of memory it
 * is not kept). */
void ded_votes_add(ded_votes *vs, const ded_mem *mem, const uint8_t id[DED_ID_BYTES],
                   uint64_t attempt, uint32_t view, const uint8_t digest[DED_RESULT_DIGEST_BYTES]);

/* The same, but a vote |id| already cast in that view takes |digest|:
 * its sender completed the round with those bytes (HAVE with the done
 * flag), which it may hold only since it fetched them again. */
void ded_votes_set(ded_votes *vs, const ded_mem *mem, const uint8_t id[DED_ID_BYTES],
                   uint64_t attempt, uint32_t view, const uint8_t digest[DED_RESULT_DIGEST_BYTES]);

/* True if a quorum of |plan|'s acceptors voted for |plan|'s attempt in
 * one view with one digest; |*digest| (may be NULL) then points at it,
 * until the next ded_votes_add, ded_votes_set or ded_votes_free. */
bool ded_votes_quorum(const ded_votes *vs, const ded_msg_commit *plan, const uint8_t **digest);

/* ded_votes_quorum, where the voter knows the whole set of acceptors:
 * the |n| ids of |acc| (the members of the result of the round before,
 * as the voter ended that round with the attempt's base). When they are
 * as many as |plan| counts (plan->nacc: none was left out as evicted),
 * they are its acceptors, and the votes of those the attempt does not
 * list (a member of the round before that only fetches this one's
 * result) count too, the primary being the smallest id of |acc|;
 * otherwise only the listed ones count, as in ded_votes_quorum. Without
 * it, an attempt whose listed acceptors are no longer a quorum of live
 * peers (one of two listed died after the attempt began) could never
 * complete, though a quorum of acceptors holds its result. */
bool ded_votes_quorum_among(const ded_votes *vs, const ded_msg_commit *plan,
                            const uint8_t (*acc)[DED_ID_BYTES], unsigned n, const uint8_t **digest);

/* The |nth| voter (from 0, in the order they voted) of |plan|'s attempt
 * with |digest| that is a member of |plan|: its index in the plan, or
 * plan->k if there is no such voter. */
unsigned ded_votes_member(const ded_votes *vs, const ded_msg_commit *plan,
                          const uint8_t digest[DED_RESULT_DIGEST_BYTES], unsigned nth);

void ded_votes_free(ded_votes *vs, const ded_mem *mem);

#endif /* DED_QUORUM_H */
