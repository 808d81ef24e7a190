/*
 * ded_round_int.h: what the round module's files share (ded_round.c: the
 * state machine; ded_join.c: joining and failing over; ded_submit.c: the
 * all-reduces submitted; ded_complete.c: completion and the report;
 * ded_late.c: late members, both ways). Not for the rest of the engine:
 * ded_round.h is.
 */
#ifndef DED_ROUND_INT_H
#define DED_ROUND_INT_H

#include "ded_round.h"

static inline bool ded_round_holds(const ded_round *r) { return r->att_state != ROUND_ATT_NONE; }

static inline size_t ded_round_bytes(const ded_round *r) { return (size_t)r->a.count * r->es; }

/* ---- ded_round.c ---- */

/* DRAINING -> DEAD once nothing queued refers to the round's memory. */
void ded_round_maybe_dead(ded_node *node, ded_round *r);

/* Drops the attempt |r| holds (ATT_NONE). */
void ded_round_drop_attempt(ded_node *node, ded_round *r);

/* Whether |r| holds an attempt whose every member but us is gone for
 * good (evicted, or left): its result, if it has one, can never come. */
bool ded_round_attempt_gone(ded_node *node, const ded_round *r);

/* The peer of member |m| of |r|'s attempt, or NULL. */
struct ded_peer *ded_round_member_peer(ded_node *node, const ded_round *r, unsigned m);

/* Asks the holders for every shard we lack: -> FETCHING. */
int ded_round_fetch_missing(ded_node *node, ded_round *r, uint64_t now_ns);

/* A FETCH of |f->attempt|, later than any attempt |r| holds (its commit
 * has not reached us yet): kept with the round's early frames, and served
 * once the attempt is ours (false: moot, or over the early budget). */
bool ded_round_keep_early_fetch(ded_node *node, ded_round *r, const uint8_t from[DED_ID_BYTES],
                                const ded_msg_fetch *f);

/* Serves shard |s| of the attempt |r| holds to |to| (ded_attempt_serve). */
void ded_round_serve_attempt(ded_node *node, ded_round *r, unsigned s, const uint8_t to[DED_ID_BYTES]);

/* ---- ded_join.c ---- */

/* |r| is out of step (node->rounds.stale says how far the swarm is): over
 * at once, on its own values, |behind| that far. */
void ded_round_out_of_step(ded_node *node, ded_round *r);

/* |r|'s lineage becomes a copy of |ids| (|n|, with client bits), from
 * |attempt| of the round before. 0 or DED_ERR_NOMEM. */
int ded_round_set_lin(ded_node *node, ded_round *r, const uint8_t (*ids)[DED_ID_BYTES], unsigned n,
                      uint64_t attempt);

/* Gives up on the current coordinator or attempt: report to the next view. */
void ded_round_failover(ded_node *node, ded_round *r, const char *why, uint64_t now_ns);

/* Chooses the coordinator of |r| once it can (WAIT_PREV) and asks it in
 * once its connection is ready (JOINING); may report |r| at once. */
void ded_round_try_join(ded_node *node, ded_round *r, uint64_t now_ns);

/* Sends our JOIN (with what we hold of an attempt, if we ran one) to the
 * coordinator of the round's view: -> JOINED, or JOINING while its
 * connection is not ready. */
void ded_round_send_join(ded_node *node, ded_round *r, uint64_t now_ns);

/* Stops the attempt |r| runs: nothing more is sent for it, nothing more
 * is added, and it completes only if a coordinator says it stands. */
void ded_round_freeze(ded_node *node, ded_round *r);

/* ---- ded_complete.c ---- */

/* |attempt| is the round's result, with the bytes of |digest| (NULL: not
 * said), as |by| said. */
void ded_round_set_chosen(ded_round *r, uint64_t attempt, const uint8_t digest[DED_RESULT_DIGEST_BYTES],
                          const uint8_t by[DED_ID_BYTES]);

/* The whole result may be here: accept it, and once it is the round's
 * result, DONE_WAIT, and report what is due. */
void ded_round_check_complete(ded_node *node, ded_round *r, uint64_t now_ns);

/* Hands the round back to the caller, exactly once: -> DRAINING. */
void ded_round_report(ded_node *node, ded_round *r, int status, bool alone, bool late);

/* The round's length is fixed at |count| (its first attempt, or its
 * report; once): the stream goes on after it, in a round cut at the end
 * of the entry point (ded_stream.h). */
void ded_round_fix(ded_node *node, ded_round *r, uint64_t count);

/* ---- ded_compress.c ---- */

/* |len| bytes of round memory for encoded frames (NULL: none left). */
uint8_t *ded_round_wire(ded_node *node, ded_round *r, size_t len);

/* Frees the round's wire memory: no queued frame may point into it (the
 * attempt is dropped, its frames detached first). */
void ded_round_wire_drop(ded_node *node, ded_round *r);

/* ... and its compensated contribution too (the round is freed). */
void ded_round_wire_free(ded_node *node, ded_round *r);

/* Our contribution for an attempt with a codec: the caller's buffer plus
 * the job's residual (r->cin), its memory and the residual readied (and
 * what became of it logged); the elements are added a range at a time as
 * they are encoded (ded_round_compensate_range). 0 or DED_ERR_NOMEM. */
int ded_round_compensate(ded_node *node, ded_round *r);

/* r->cin's elements [first, first + n): the caller's plus the residual. */
void ded_round_compensate_range(ded_node *node, ded_round *r, uint64_t first, uint64_t n);

/* Fills |j|'s compression fields: this job's DEDMPI_COMPRESS, and how
 * long its trainer computed over its last training step. */
void ded_round_join_prefs(ded_node *node, ded_msg_join *j);

/* An all-reduce |args| submitted at |now_ns|, |idle| if nothing of ours
 * was in flight (the time since the last report was the trainer's): adds
 * to the compute of the step it belongs to, which is known once a step's
 * worth of elements went by. */
void ded_rounds_note_compute(ded_node *node, const ded_round_args *args, bool idle,
                             uint64_t now_ns);

/* Whether |r| runs an attempt whose contribution is still being encoded. */
bool ded_round_encoding(const ded_round *r);

/* The next slice of that encoding (ded_attempt_encode, about |budget|
 * elements), the contribution compensated first (ded_round_compensate);
 * the round fails if memory runs out. */
void ded_round_encode_step(ded_node *node, ded_round *r, uint64_t budget, uint64_t now_ns);

/* The round completed with the attempt it holds: what the codec dropped
 * of our contribution to it becomes the residual. */
void ded_round_feedback(ded_node *node, ded_round *r);

/* ---- ded_late.c ---- */

/* We fetch a round the swarm finished without us: announce the next. */
void ded_round_announce(ded_node *node, ded_round *r, uint64_t now_ns);

/* A PROBE of a round we finished (|r|, over, or NULL): say so there. */
void ded_round_probed_finished(ded_node *node, ded_round *r, struct ded_peer *from,
                               const ded_msg_probe *m);

#endif /* DED_ROUND_INT_H */
