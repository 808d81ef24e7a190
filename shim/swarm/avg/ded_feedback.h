/*
 * ded_feedback.h: a job's error feedback for compressed rounds (EF-SGD).
 *
 * Owns: the residual of every element of one training step's gradient
 * stream: what the codec dropped from the job's last contribution of
 * that element, added to its next one. The residual is the job's own and
 * never travels.
 *
 * Elements are those of the run's gradient stream (ded_stream.h); a step
 * is |len| of them, and stream position p is element p mod len of the
 * step, whatever position the steps are counted from: the same element of
 * the next step has the same index. Until the step's length is known
 * (ded_round_args.step), nothing is kept: contributions compress without
 * feedback.
 *
 * Pure: the round module feeds and stores it, the node resets it (a
 * reload or a join of the run's state: the residual belonged to the
 * job's own past) and logs what it says.
 *
 * Invariants: |e| holds |len| finite floats when |len| is not 0, NULL
 * otherwise; a stored residual is finite (a non-finite one is stored as
 * 0: an overflowing element must not poison every later contribution).
 */
#ifndef DED_FEEDBACK_H
#define DED_FEEDBACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/ded_mem.h"

typedef struct ded_feedback {
  float *e;     /* len residuals, or NULL */
  uint64_t len; /* the step's length in elements (0: none kept) */
  uint64_t resets; /* times it was cleared with something in it */
} ded_feedback;

/* What ded_feedback_add found. */
typedef enum ded_feedback_note {
  DED_FEEDBACK_KEPT = 0,     /* the residual was added */
  DED_FEEDBACK_NO_STEP,      /* the step's length is not known: none */
  DED_FEEDBACK_NEW_LENGTH,   /* the step's length changed: cleared, none added */
  DED_FEEDBACK_NOMEM,        /* no memory for the residual: none */
} ded_feedback_note;

/* Frees the residual. */
void ded_feedback_free(ded_feedback *fb, const ded_mem *mem);

/* Forgets the residual (true if it held one). */
bool ded_feedback_reset(ded_feedback *fb, const ded_mem *mem);

/*
 * out[i] = x[i] + residual of stream position pos + i, for |n| elements,
 * with the step |step| elements long (0: not known). A new length clears
 * what was kept and starts anew at zero. |out| may be |x|. The same as
 * ded_feedback_prepare, then ded_feedback_apply.
 */
ded_feedback_note ded_feedback_add(ded_feedback *fb, const ded_mem *mem, uint64_t step,
                                   uint64_t pos, const float *x, size_t n, float *out);

/* Readies the residual for a step of |step| elements (0: not known): a
 * new length clears what was kept and starts anew at zero. */
ded_feedback_note ded_feedback_prepare(ded_feedback *fb, const ded_mem *mem, uint64_t step);

/* out[i] = x[i] + residual of stream position pos + i, for |n| elements,
 * if a residual of step length |step| is kept; else out[i] = x[i]. A
 * contribution is compensated a range at a time, as it is encoded; a
 * range done twice comes out the same (nothing is stored meanwhile). */
void ded_feedback_apply(const ded_feedback *fb, uint64_t step, uint64_t pos, const float *x,
                        size_t n, float *out);

/* Stores c[i] - q[i] as the residual of stream position pos + i (|c|:
 * what the job meant to send, with the residual added; |q|: what the
 * swarm decoded of it), if a residual of that step length is kept. */
void ded_feedback_store(ded_feedback *fb, uint64_t step, uint64_t pos, const float *c,
                        const float *q, size_t n);

/* The sum of the residuals' squares (for logs and tests). */
double ded_feedback_norm2(const ded_feedback *fb);

#endif /* DED_FEEDBACK_H */
