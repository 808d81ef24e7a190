/*
 * ded_step.h: a job's training steps as the shim sees them, and what it
 * does at their edges for a joiner that wants its state and when the job
 * falls out of step (docs/architecture.md, "Falling out of step" and
 * "Joining a run in progress").
 *
 * Owns, for one job:
 *   - the pieces of its state: the buffers of rank 0's start-up
 *     broadcasts of tensors and of dedmpi_register_state, in call order
 *     (every rank keeps their addresses), as many as the bytes allow;
 *     rank 0 lays them out as a state image (state/ded_image.h);
 *   - rank 0's view of its gradient stream (the elements of its routed
 *     all-reduces in order, as the swarm aligns rounds by them): where
 *     the next call begins, and where a training step begins: every
 *     |len| elements from |pos0|, |len| learnt from the calls since
 *     |pos0| (ded_step_learn below) or from DEDMPI_STEP_ROUNDS, and
 *     unknown again when a call crosses a step's edge;
 *   - rank 0's count of the swarm's rounds as they report (the round the
 *     next step begins at, and how many rounds a step took);
 *   - rank 0's snapshots for joiners: asked for on the driver thread,
 *     taken at the next step's first all-reduce with nothing else in
 *     flight, when the pieces hold the state after every round before it;
 *   - rank 0's reload of the run's state: wanted when a round reports the
 *     job |behind| (out of step) or |diverged| (reloaded at the round
 *     the job is at), or late while the swarm is at least
 *     DED_STEP_RELOAD_GAP_STEPS steps ahead and more than twice as far
 *     ahead as it was first seen after the last reload (a reload that
 *     leaves the job as far behind as it was is not tried again); run
 *     (ded_driver_state_reload) at a step's first all-reduce with nothing
 *     else of the job in flight; applied to the pieces of every rank as
 *     the all-reduce that ends that step completes (enum ded_step_reload).
 *
 * Learning the step: the shortest period of the calls' (buffer, count,
 * type) seen three times over (the prefix function of the sequence, so
 * hundreds of tensors a step cost little); failing that, once the calls
 * cannot be periodic (no proper border: they do not repeat from the
 * start so far), the shortest length L such that DED_STEP_ENDS_SEEN L
 * elements went by and every multiple of L was the end of a call (a
 * framework that fuses tensors into buffers by readiness cuts each step
 * differently, but never across its end). Only a length from the period
 * or DEDMPI_STEP_ROUNDS goes into the swarm's rounds (|len_sure|), where
 * a job whose length differs fails: a length from the ends alone could
 * be wrong for a while, and serves only snapshots and reloads.
 *
 * Invariants: a step begins at element p exactly when |len| is known and
 * (p - pos0) % len == 0; a reloaded state is held (LOADED, DUE) only
 * until it applies; no snapshot is taken while one is held (the pieces
 * are stale then); a reload the swarm asked for is forgotten once it
 * runs, and runs again only if the swarm asks again.
 *
 * Threads: ded_step_round_done and ded_step_want_snapshot run on the
 * driver thread; everything else on the application's threads, as the
 * shim's MPI calls run (ded_step_apply from its progress, under its
 * lock). What the driver thread writes is under |mu|.
 */
#ifndef DED_STEP_H
#define DED_STEP_H

#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/ded_assert.h"
#include "ded_driver.h"

/* Calls kept to learn the step: three steps of up to 1024 all-reduces. */
#define DED_STEP_SIG_MAX (3 * 1024)

/* Steps whose ends must all be ends of calls before a length learnt from
 * the ends alone is taken: more than the calls' period needs, since
 * steps of equal tensors could mimic a shorter length for a while. */
#define DED_STEP_ENDS_SEEN 8

/* Steps behind the swarm past which a job that is still in step (it
 * fetches the results of the rounds it came late to) reloads the run's
 * state rather than catch up: a snapshot comes within a step or two of
 * the swarm, while catching up closes the gap by one deadline per try. */
#define DED_STEP_RELOAD_GAP_STEPS 8

/* Rank 0's reload of the run's state. NONE -> LOADED at a step's first
 * all-reduce; LOADED -> DUE at the all-reduce that ends the step (at once
 * if it is the same); DUE -> NONE as that all-reduce completes. A reload
 * may start again from DUE only if that all-reduce failed and the state
 * never applied. */
typedef enum ded_step_reload {
  DED_STEP_RELOAD_NONE,   /* no reloaded state held */
  DED_STEP_RELOAD_LOADED, /* loaded; the all-reduce that ends its step is still to start */
  DED_STEP_RELOAD_DUE,    /* the step's last all-reduce is in flight */
} ded_step_reload;

/* The log: a line at a DED_LOG_* level, formatted as printf does. */
typedef void (*ded_step_log_fn)(int level, const char *fmt, ...) DED_PRINTF(2, 3);

typedef struct ded_step {
  int size;      /* ranks in the job */
  MPI_Comm comm; /* a private duplicate of the world for the pieces (size > 1) */
  unsigned step_calls_set; /* DEDMPI_STEP_ROUNDS: all-reduces per step; 0: learnt */
  ded_step_log_fn log;
  /* The pieces, in call order; |total| their bytes. */
  struct ded_step_piece {
    void *p;
    size_t bytes;
  } *pieces;
  size_t npieces, pieces_cap;
  uint64_t total;
  bool pieces_full_logged;
  /* Rank 0: the stream. The next call begins at |pos|; steps are counted
   * from |pos0|, every |len| elements (0: not known). */
  uint64_t pos0, pos, len;
  bool len_sure; /* |len| is the calls' period or DEDMPI_STEP_ROUNDS: the swarm may check it */
  /* Rank 0, while |len| is learnt: the calls since |pos0|, with the
   * prefix function of their signatures (pi[i]: the longest proper
   * border of sig[0..i]) and where each ends (from |pos0|). */
  struct ded_step_sig {
    const void *buf;
    int count;
    MPI_Datatype dt;
  } sig[DED_STEP_SIG_MAX];
  unsigned pi[DED_STEP_SIG_MAX];
  uint64_t end[DED_STEP_SIG_MAX];
  unsigned nsig;
  bool step_logged;        /* the step's length was logged */
  atomic_bool snap_wanted; /* a joiner asked for a snapshot */
  /* Rank 0, under |mu|: the round after the last one reported; the swarm's
   * round when it said this job is out of step; the swarm's round and ours
   * in the latest late round while in step (late_swarm 0: not late); and
   * the gap, in rounds, seen first after the last reload
   * (|reload_gap_pending| until it is seen). */
  pthread_mutex_t mu;
  uint64_t next_round;
  uint64_t behind;
  bool diverged; /* a round said this job's state is not the run's: reload where it is */
  uint64_t late_swarm, late_round, reload_gap;
  bool reload_gap_pending;
  /* Reloads that failed in a row (the first is a warning, those tried at
   * the steps after at debug level); 0 again once loaded or back in step
   * (a report neither behind nor diverged). */
  unsigned reload_fails;
  /* The first round of the latest run of reports that said the job is
   * out of step (behind or diverged), plus one; 0 once founder or back
   * in step (a report that says neither, as a reloaded job's next does).
   * What ded_step_finish warns of: a job stopped or cut off in its last
   * step has no step left to reload at, and its parameters are its own. */
  uint64_t own_from;
  /* Rank 0: the round the current step began at (|step_round_known|:
   * a step was seen to begin, not only the stream), and how many the
   * last whole step took (0: none seen yet). Read as a step's first
   * call begins, before its round can report. */
  uint64_t step_round;
  bool step_round_known;
  unsigned step_rounds;
  /* Rank 0: the reload and the run's state it loaded (bytes until it
   * applies). */
  ded_step_reload reload;
  ded_snapshot loaded;
} ded_step;

/* Sets up |st| for a job of |size| ranks; |comm| carries the pieces to
 * the other ranks when a reload applies. Call it before the driver
 * starts: its callbacks reach |st|. */
void ded_step_init(ded_step *st, int size, MPI_Comm comm, unsigned step_calls,
                   ded_step_log_fn log);

/* Frees the state a reload left unapplied; after the driver stopped. */
void ded_step_free(ded_step *st);

/* Rank 0, at the end of the job's run (the driver stopped): warns if the
 * job ends out of step (|own_from|), its parameters its own and not the
 * run's, and returns whether it does. */
bool ded_step_finish(ded_step *st);

/* |p| (|bytes|) becomes the next piece of the state; one that would take
 * the image past DED_STATE_BYTES_MAX, or finds no memory, is not kept
 * (logged once). */
void ded_step_piece_add(ded_step *st, void *p, size_t bytes);

/* Rank 0: |snap| (round and step_rounds left to the caller) holds a state
 * image of the pieces as they are now, bytes from malloc. False, logged,
 * without memory. */
bool ded_step_image(const ded_step *st, ded_snapshot *snap);

/* Whether |img| (|len| bytes, from a peer) is an image of pieces of this
 * job's sizes, all of them: |*why| says what differs when not. */
bool ded_step_image_fits(const ded_step *st, const uint8_t *img, uint64_t len, const char **why);

/* Rank 0, a founding state loaded (a state image that fits): it applies
 * when the all-reduce in flight, the job's first, completes. */
void ded_step_found_load(ded_step *st, ded_snapshot *snap);

/* Rank 0 of a job that joins a run in progress: its stream resumes at
 * |pos|, the beginning of round |round| and of a step. Before the first
 * routed all-reduce. */
void ded_step_resume(ded_step *st, uint64_t round, uint64_t pos);

/*
 * Rank 0, as a routed all-reduce of (|buf|, |count|, |dt|) starts: if the
 * swarm wants this job reloaded and a step begins here with no other
 * all-reduce in flight (|idle|), loads the run's state (blocking within the
 * driver's bounds) and resumes the stream at its round. Then counts the
 * call into the step; |*ends_reload| says the loaded state applies when
 * this all-reduce completes (ded_step_apply, on every rank). Returns true
 * if a step begins at this call.
 */
bool ded_step_call_begin(ded_step *st, ded_driver *driver, const void *buf, int count,
                         MPI_Datatype dt, bool idle, bool *ends_reload);

/* Rank 0, once an all-reduce that begins a step (|step_begins|) is
 * submitted with nothing else in flight (|idle|): hands the driver a
 * snapshot of the pieces if a joiner asked for one. */
void ded_step_offer(ded_step *st, ded_driver *driver, bool step_begins, bool idle);

/* Driver thread: what a finished round says about this job's pace. */
void ded_step_round_done(ded_step *st, const ded_round_result *res);

/* Driver thread: a joiner asked for this job's state. */
void ded_step_want_snapshot(ded_step *st);

/* Any thread: this job's state is not the run's (it could not take the
 * run's initial state): reload the run's at the next step's start, as a
 * job out of step does. */
void ded_step_want_reload(ded_step *st);

/* Every rank, as the all-reduce that ends a reload's step (or, for a
 * founding state, the first all-reduce) completes: the pieces take the
 * run's state, rank 0's bytes going to the others. */
void ded_step_apply(ded_step *st);

#endif /* DED_STEP_H */
