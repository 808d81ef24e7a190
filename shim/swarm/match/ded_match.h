/*
 * ded_match.h: gathering a round's joins, and the COMMIT made of them.
 *
 * Owns: one view's JOINs (ded_gather), sorted by joiner id, and the
 * making of an attempt from them: the round's signature (the dtype and
 * stream position most joiners share, and the shortest offer among them), the members that have it in id order (the
 * order of summation), their weights and kinds, and each member's shard
 * (equal, or from the DeDLOC program over their rates, ded_lp.h).
 *
 * Who coordinates is not decided here: the coordinator of view v of round
 * r is the eligible member (r + v) mod e of round r-1's membership
 * (ded_lin_coord in ded_msg.h), and the first round's is the smallest id
 * in sight (match/ded_coord.h). The COMMIT made here is what every member
 * agrees on.
 */
#ifndef DED_MATCH_H
#define DED_MATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/ded_mem.h"
#include "../core/ded_msg.h"
#include "../lp/ded_lp.h"

typedef struct ded_gather_join {
  uint8_t id[DED_ID_BYTES];
  ded_msg_join join;
} ded_gather_join;

typedef struct ded_gather {
  uint64_t round;
  bool genesis;
  ded_gather_join *v; /* sorted by id */
  size_t n;
  size_t cap;
} ded_gather;

void ded_gather_init(ded_gather *g, uint64_t round, bool genesis);
void ded_gather_free(ded_gather *g, const ded_mem *mem);

/* Adds |id|'s join. DED_ERR_PROTO if |id| already joined, DED_ERR_LIMIT
 * past DED_JOINS_MAX, DED_ERR_NOMEM. */
int ded_gather_add(ded_gather *g, const ded_mem *mem, const uint8_t id[DED_ID_BYTES],
                   const ded_msg_join *join);

/* |id|'s join, or NULL. */
const ded_gather_join *ded_gather_find(const ded_gather *g, const uint8_t id[DED_ID_BYTES]);

/*
 * The round's signature: the (dtype, pos) most joiners share (on a tie,
 * the one whose smallest joiner id is smallest), the training step's
 * length they know (ded_gather_step), and the round's length: the length
 * of an attempt of this round a joiner reports running, else the shortest
 * offer among the joiners that can be members (docs/architecture.md,
 * "Alignment by the gradient stream"). |g| must not be empty.
 */
void ded_gather_signature(const ded_gather *g, uint8_t *dtype, uint64_t *pos, uint64_t *count,
                          uint64_t *step);

/* The training step's length most joiners at (|dtype|, |pos|) that know
 * theirs share (on a tie, the smallest id's); 0 if none knows it. */
uint64_t ded_gather_step(const ded_gather *g, uint8_t dtype, uint64_t pos);

/* Whether join |j| can be a member of a round of signature |sig| (its
 * dtype, pos, count and step): the same type and position, an offer at
 * least as long, and no other known step length. */
bool ded_gather_fits(const ded_msg_join *j, const ded_msg_commit *sig);

/*
 * Builds the COMMIT: joiners with the round's signature, in id order, with
 * equal shares and chunks of |chunk_bytes| (rounded down to elements, at
 * least DED_CHUNK_BYTES_MIN). Every member is an acceptor and the first is
 * the primary, as in a first round; a later round's coordinator sets the
 * acceptors from the previous round's members.
 * |out->members| is allocated from |mem|; free with ded_msg_commit_free.
 */
int ded_gather_commit(const ded_gather *g, const ded_mem *mem, uint32_t chunk_bytes,
                      ded_msg_commit *out);

/*
 * The same with shares from the DeDLOC program (ded_lp_plan) over the
 * members' |perf|, one entry per join of |g| in its order (NULL: equal
 * shares); with |equal|, the reducers among them (not the clients) share
 * equally instead. Shares become whole elements by largest remainder; a member
 * whose share is zero (a client) reduces an empty shard. |res| (may be
 * NULL) reports the plan's estimated time and any fallback.
 */
int ded_gather_commit_planned(const ded_gather *g, const ded_mem *mem, uint32_t chunk_bytes,
                              const ded_lp_peer *perf, bool equal, ded_lp_result *res,
                              ded_msg_commit *out);

#endif /* DED_MATCH_H */
