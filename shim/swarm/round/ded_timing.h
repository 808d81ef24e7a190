/*
 * ded_timing.h: how long the engine waits, learned from the rounds.
 *
 * Owns: the two learned times (the spread of a round's JOINs at its
 * coordinator, and the time from a COMMIT to the whole result at a
 * member, each an EWMA of the rounds that showed it) and the rules that
 * turn them into patience. Pure: no clock, no node; the caller says what
 * it saw and asks how long to wait.
 *
 * Invariants: every wait is at least the deadline floor and at most a
 * quarter of the round bound (ded_timing_cap), so that a failover or two
 * still fit inside the bound, except that a member's wait for a decision
 * is never below three deadline floors (with a bound under twelve floors,
 * that floor wins over the cap); a member's wait for a decision is longer
 * than a coordinator's wait for joins in the same view, at the cap too
 * (the coordinator's stops at three quarters of it, or the floor: the
 * decision still has to reach the members before they move on);
 * patience doubles per view past the first failover (views 2, 3, ... wait
 * 2x, 4x, ... up to 16x, within the cap), which settles a swarm whose
 * messages are delayed past the learned times.
 */
#ifndef DED_TIMING_H
#define DED_TIMING_H

#include <stdint.h>

/* A rate no one has measured yet (a first round, a newcomer) is taken to
 * be a slow home link's, 8 Mbit/s, when deciding how long to wait for it:
 * patience sized for a fast link would leave the slow peer out. */
#define DED_RATE_UNKNOWN_BPS 1e6

typedef struct ded_timing {
  uint64_t floor_ns;    /* DEDMPI_DEADLINE_FLOOR */
  uint64_t bound_ns;    /* DEDMPI_ROUND_TIMEOUT: a round reports by then */
  uint64_t spread_ewma; /* learned: first to last JOIN of a round, ns */
  uint64_t run_ewma;    /* learned: a COMMIT to the whole result, ns */
} ded_timing;

/* The cap of every learned wait: a quarter of the bound. */
uint64_t ded_timing_cap(const ded_timing *t);

/* A peer unreachable this long is evicted: rounds go on without a
 * majority that includes it. Half the bound. */
uint64_t ded_timing_evict(const ded_timing *t);

/* A peer we heard nothing from this long (not a byte, though it sends a
 * keepalive every ded_timing_keepalive) is taken for stopped, asleep or
 * cut off: its connections are closed, and it is evicted once its silence
 * reaches ded_timing_evict. A quarter of the bound, and at least four
 * deadline floors (a busy machine may starve a thread that long), never
 * past the eviction time. */
uint64_t ded_timing_silence(const ded_timing *t);

/* How often we send each peer something, a keepalive if nothing else:
 * a quarter of the silence, at most a second. */
uint64_t ded_timing_keepalive(const ded_timing *t);

/* How long a coordinator whose own member joined after its deadline (its
 * trainer was the slowest) still waits for the JOINs sent as its own was:
 * twice the learned spread of the joins, within a quarter of the
 * deadline floor and the coordinator's wait. */
uint64_t ded_timing_late_own_grace(const ded_timing *t);


/* A coordinator's wait for missing members in |view|. */
uint64_t ded_timing_coord_wait(const ded_timing *t, uint32_t view);

/* A member's wait for a decision in |view|. */
uint64_t ded_timing_join_wait(const ded_timing *t, uint32_t view);

/* A member's patience for progress in an attempt of |view| that should
 * take |est_ns| (0: unknown): a multiple of the usual round time; with
 * none learned yet, at least as long as the attempt should take, since a
 * slow uplink among equal shares delivers each stream's next chunk
 * seconds apart. */
uint64_t ded_timing_progress_wait(const ded_timing *t, uint32_t view, uint64_t est_ns);

/* A round showed a spread of |ns| between its first and last JOIN. */
void ded_timing_learn_spread(ded_timing *t, uint64_t ns);

/* An attempt took |ns| from its COMMIT to the whole result. */
void ded_timing_learn_run(ded_timing *t, uint64_t ns);

#endif /* DED_TIMING_H */
