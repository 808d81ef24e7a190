#include "ded_timing.h"

#include "../core/ded_assert.h"

static uint64_t clamp_ns(uint64_t x, uint64_t lo, uint64_t hi) {
  return x < lo ? lo : x > hi ? DED_MAX(hi, lo) : x;
}

static void ewma_add(uint64_t *e, uint64_t x) { *e = *e ? (*e * 7 + x) / 8 : x; }

uint64_t ded_timing_cap(const ded_timing *t) { return t->bound_ns / 4; }

uint64_t ded_timing_evict(const ded_timing *t) { return t->bound_ns / 2; }

uint64_t ded_timing_silence(const ded_timing *t) {
  return DED_MIN(DED_MAX(ded_timing_cap(t), 4 * t->floor_ns), ded_timing_evict(t));
}

uint64_t ded_timing_keepalive(const ded_timing *t) {
  return DED_MIN(ded_timing_silence(t) / 4, 1000ull * 1000 * 1000);
}

/* Patience grows with each view past the first failover of a round: a
 * swarm whose messages are delayed past the learned times (a delay spike,
 * a round with nothing learned yet) would otherwise change views for as
 * long as the delays last. Doubling per view settles it within a few. */
static uint64_t view_backoff(const ded_timing *t, uint32_t view, uint64_t wait_ns) {
  unsigned shift = view > 1 ? (unsigned)DED_MIN(view - 1, 4u) : 0;
  return DED_MIN(wait_ns << shift, DED_MAX(wait_ns, ded_timing_cap(t)));
}

/* Never past three quarters of the cap: at the cap a member's wait for
 * the decision would equal it, and the decision, which still has to
 * travel, would come after members moved on to the next view, in every
 * view (a swarm of dozens, a delay spike: issue 22's endless views). */
uint64_t ded_timing_coord_wait(const ded_timing *t, uint32_t view) {
  uint64_t cap = ded_timing_cap(t) / 4 * 3;
  return DED_MIN(view_backoff(t, view, clamp_ns(4 * t->spread_ewma, t->floor_ns, ded_timing_cap(t))),
                 DED_MAX(cap, t->floor_ns));
}

uint64_t ded_timing_late_own_grace(const ded_timing *t) {
  return clamp_ns(2 * t->spread_ewma, t->floor_ns / 4, ded_timing_coord_wait(t, 0));
}

/* Longer than any coordinator's wait with room to spare. */
uint64_t ded_timing_join_wait(const ded_timing *t, uint32_t view) {
  return view_backoff(t, view,
                      clamp_ns(3 * t->floor_ns + 8 * t->spread_ewma, 3 * t->floor_ns,
                               ded_timing_cap(t)));
}

uint64_t ded_timing_progress_wait(const ded_timing *t, uint32_t view, uint64_t est_ns) {
  uint64_t wait = 2 * t->floor_ns + 4 * t->run_ewma;
  if (t->run_ewma == 0) wait = DED_MAX(wait, est_ns);
  return view_backoff(t, view, clamp_ns(wait, 2 * t->floor_ns, ded_timing_cap(t)));
}

void ded_timing_learn_spread(ded_timing *t, uint64_t ns) { ewma_add(&t->spread_ewma, ns); }

void ded_timing_learn_run(ded_timing *t, uint64_t ns) { ewma_add(&t->run_ewma, ns); }
