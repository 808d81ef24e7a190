/*
 * ded_stream.h: this job's gradient stream, cut into rounds.
 *
 * Owns: the all-reduces the job submitted and the swarm has not yet
 * averaged in full (struct ded_call, in submission order), and the
 * position in the run's gradient stream where the next round begins.
 *
 * The routed all-reduces of a job form one stream of elements, the same
 * stream in every job of a run however each job cuts it into calls (a
 * framework that fuses tensors into buffers by readiness cuts it
 * differently every step). Rounds align by position in that stream, not
 * by call (docs/architecture.md, "Alignment by the gradient stream"): a
 * round offers the rest of the oldest call not yet given to rounds, from
 * the stream position where the round before it ended; the swarm agrees
 * on the round's length (the shortest offer among its members); the rest
 * of the call goes to the next round. A round is "open" from when it is
 * cut until its length is fixed (its first attempt, or its report), and
 * the next round is cut only then: its position depends on that length.
 *
 * Pure: the round module cuts, fixes and reports rounds through it.
 *
 * Invariants: at most one round is open, and it is the newest; |pos| is
 * the end of the newest round whose length is fixed; the calls' elements
 * are given to rounds in order; the oldest call leaves the queue once
 * every element of it was reported.
 */
#ifndef DED_STREAM_H
#define DED_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/ded_limits.h"
#include "../ded_node.h"

typedef struct ded_call {
  ded_round_args a; /* as submitted */
  uint64_t seq;      /* its number in submission order */
  uint64_t bound_ns; /* every round of it reports by then */
  uint64_t cut;      /* elements given to rounds whose length is fixed */
  uint64_t reported; /* elements of it that rounds reported */
} ded_call;

typedef struct ded_stream {
  ded_call v[DED_ROUNDS_ACTIVE_MAX]; /* a ring: |head| is the oldest */
  unsigned head, n;
  uint64_t head_seq; /* the oldest call's number */
  uint64_t pos;      /* where the next round begins */
  bool open;    /* the newest round's length is not fixed yet */
} ded_stream;

/* A round cut from the stream. */
typedef struct ded_cut {
  ded_round_args a; /* the call's buffer from |off| on, and the rest of it */
  uint64_t pos;     /* the round's position in the run's gradient stream */
  uint64_t off;     /* where it begins in its call's buffer */
  uint64_t seq;     /* its call's number */
  uint64_t bound_ns; /* its call's bound */
} ded_cut;

/* The stream resumes at |pos| (a run's first round: 0). Nothing queued. */
void ded_stream_resume(ded_stream *st, uint64_t pos);

/* Queues an all-reduce, whose rounds report by |bound_ns|. DED_ERR_LIMIT
 * when DED_ROUNDS_ACTIVE_MAX are. */
int ded_stream_push(ded_stream *st, const ded_round_args *a, uint64_t bound_ns);

/* Calls queued that no round was cut from yet. */
unsigned ded_stream_waiting(const ded_stream *st);

/* The next round to cut, if one can be cut now (no round is open and a
 * call has elements not given to a round): true and |*out|; the round is
 * open from here on. */
bool ded_stream_cut(ded_stream *st, ded_cut *out);

/* The open round's length is |count| (at most what it offered): it is
 * fixed, and the stream goes on after it. */
void ded_stream_fix(ded_stream *st, uint64_t count);

/* A round of call |seq|, of |count| elements whose length is fixed,
 * reported (rounds may report out of order when they fail). Returns true
 * if every element of that call is reported now. Calls leave the queue,
 * oldest first, once every element of theirs is. */
bool ded_stream_reported(ded_stream *st, uint64_t seq, uint64_t count);

/* True when ded_stream_cut would cut a round. */
bool ded_stream_ready(const ded_stream *st);

/* True when no call is queued. */
bool ded_stream_idle(const ded_stream *st);

/* The process did not run for |gap_ns| (stopped): every queued call's
 * bound moves that much later. */
void ded_stream_postpone(ded_stream *st, uint64_t gap_ns);

#endif /* DED_STREAM_H */
