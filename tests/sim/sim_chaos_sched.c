/*
 * sim_chaos_sched.c: the fault schedule of the fault-schedule tier
 * (sim_chaos.h): what a seed draws (faults, joiners and restarts, an
 * equivocating reducer), arming it once the swarm exists, and applying
 * each fault; and the named scenarios (--scenario), fixed schedules that
 * replace what a seed draws of these. Every draw here is from a stream of
 * the seed in a fixed order: moving or adding one changes what the seeds
 * run. The named scenarios draw from a stream of their own (named_rng),
 * so a seed without one runs as it did.
 */
#include <stdio.h>
#include <string.h>

#include "sim_chaos.h"

/* Named scenarios: the first fault, after the swarm exists; the least a
 * step takes; how long the rounds go on past healing at that pace. */
#define SCEN_AT_NS (1 * SEC) /* the first fault, after the swarm exists */
#define PACE_NS (2 * SEC)
#define TAIL_NS (20 * SEC)

const char *const fault_name[] = {"crash", "freeze", "partition", "isolate"};
const char *const scen_name[SCEN_COUNT] = {"none", "long-freeze", "total-break", "stopped-donor",
                                           "churn"};

/* ---------------------------------------------------------------- faults */

/* The primary of the first swarm: the smallest id among its live nodes
 * (the engine's primary of a round of theirs, ded_coord.c), or -1. */
static int primary_of(const scenario *sc) {
  int p = -1;
  for (int i = 0; i < sc->n; i++)
    if (!sc->jobs[i].crashed && sim_up(sc->s, i) &&
        (p < 0 || memcmp(sc->jobs[i].id, sc->jobs[p].id, DED_ID_BYTES) < 0))
      p = i;
  return p;
}

void apply_fault(scenario *sc, int fi) {
  struct fault *f = &sc->faults[fi];
  if (opt_crash_only && f->kind != F_CRASH) return;
  if (f->a == A_PRIMARY && (f->a = primary_of(sc)) < 0) return;
  if (sc->verbose)
    printf("%12.6f FAULT %s n%d%s%.0d for %.3f s\n", (double)sim_now(sc->s) / 1e9,
           fault_name[f->kind], f->a, f->kind == F_PARTITION ? " | n" : "",
           f->kind == F_PARTITION ? f->b : 0, (double)f->len_ns / 1e9);
  uint64_t until = sim_now(sc->s) + f->len_ns;
  switch (f->kind) {
  case F_CRASH:
    if (!sim_up(sc->s, f->a)) return;
    sc->jobs[f->a].crashed = true;
    sim_crash(sc->s, f->a);
    if (f->restart) {
      sc->restarts_pending++;
      sim_at(sc->s, -1, sim_now(sc->s) + f->restart_ns, TAG_RESTART + (uint64_t)fi);
    }
    break;
  case F_FREEZE:
    if (sim_up(sc->s, f->a) && !sim_frozen(sc->s, f->a)) sc->jobs[f->a].frozen_ns += f->len_ns;
    sim_freeze(sc->s, f->a, until);
    break;
  case F_PARTITION: sim_partition(sc->s, f->a, f->b, until); break;
  case F_ISOLATE: sim_isolate(sc->s, f->a, until); break;
  }
}

/* ---------------------------------------------------------------- schedule */

void draw_faults(scenario *sc, sim_rng *pick, uint64_t safety_end_ns) {
  int crashes = 0;
  sc->nfaults = (int)sim_rng_range(pick, 1, MAX_FAULTS);
  sc->heal_ns = 0;
  for (int f = 0; f < sc->nfaults; f++) {
    struct fault *ft = &sc->faults[f];
    ft->kind = (int)sim_rng_range(pick, F_CRASH, F_ISOLATE);
    /* Keep a majority of the swarm alive. */
    if (ft->kind == F_CRASH && 2 * (crashes + 1) >= sc->n) ft->kind = F_FREEZE;
    ft->a = (int)sim_rng_range(pick, 0, (uint64_t)sc->n - 1);
    do ft->b = (int)sim_rng_range(pick, 0, (uint64_t)sc->n - 1);
    while (ft->b == ft->a);
    ft->at_ns = sim_rng_range(pick, 0, safety_end_ns);
    ft->len_ns = sim_rng_range(pick, 50, 4000) * MS;
    uint64_t end = ft->at_ns + ft->len_ns;
    if (ft->kind == F_CRASH) {
      crashes++;
      end = ft->at_ns + sc->round_timeout_ns / 2 + 2 * SEC; /* until evicted */
    }
    if (end > sc->heal_ns) sc->heal_ns = end;
  }
}

/* Joiners and restarts, from their own stream (the swarm and its faults
 * stay what the seed drew without them): 30% of the seeds get 1..3
 * joiners, in the safety phase or after it; half of the crashes a restart
 * up to 3 s later. Such seeds run up to 8 more rounds. */
void draw_joiners(scenario *sc, uint64_t safety_end_ns) {
  sim_rng *x = &sc->extra;
  sc->nj = sim_rng_chance(x, 0.3) ? (int)sim_rng_range(x, 1, MAX_JOINERS) : 0;
  for (int k = 0; k < sc->nj; k++)
    sc->join_ns[k] = sim_rng_chance(x, 0.6) ? sim_rng_range(x, 0, safety_end_ns)
                                            : sc->heal_ns + sim_rng_range(x, 0, 2000) * MS;
  int restarts = 0;
  for (int f = 0; f < sc->nfaults; f++) {
    struct fault *ft = &sc->faults[f];
    ft->restart = sim_rng_chance(x, 0.5) && ft->kind == F_CRASH;
    ft->restart_ns = sim_rng_range(x, 0, 3000) * MS;
    restarts += ft->restart;
  }
  sc->slots = sc->n + sc->nj + restarts;
  if (sc->slots > sc->n) sc->rounds += (int)sim_rng_range(x, 2, DRAWN_MAX_ROUNDS - 16);
}

/* In a quarter of the seeds with three nodes or more, one of the first
 * swarm's nodes equivocates towards another for up to 4 s of the safety
 * phase. Drawn from a stream of their own: the swarm, its other faults
 * and its joiners are those the seed drew before. */
void draw_equivocation(scenario *sc, uint64_t safety_end_ns) {
  sim_rng x;
  sim_rng_seed(&x, sc->seed ^ 0x11a7e5ull);
  sc->liar = sc->victim = -1;
  if (sc->n < 3 || !sim_rng_chance(&x, 0.25)) return;
  sc->liar = (int)sim_rng_range(&x, 0, (uint64_t)sc->n - 1);
  do sc->victim = (int)sim_rng_range(&x, 0, (uint64_t)sc->n - 1);
  while (sc->victim == sc->liar);
  sc->equiv_ns = sim_rng_range(&x, 0, safety_end_ns);
  sc->equiv_len_ns = sim_rng_range(&x, 500, 4000) * MS;
  if (sc->equiv_ns + sc->equiv_len_ns > sc->heal_ns) sc->heal_ns = sc->equiv_ns + sc->equiv_len_ns;
}

/* Faults start once the swarm exists: when the first round is done
 * somewhere (a swarm that never formed tests the rendezvous, not this).
 * So do the joiners. */
void arm_faults(scenario *sc) {
  if (sc->armed) return;
  sc->armed = true;
  uint64_t now = sim_now(sc->s);
  sc->swarm_ns = now;
  sc->heal_ns += now;
  /* The network heals with the rest: its random resets and delay spikes
   * are faults of the safety phase (unless they last, --lasting-network-
   * faults: then the strict liveness check cannot hold, docs/testing.md). */
  if (!opt_lasting_net) sim_network_heals_at(sc->s, sc->heal_ns);
  for (int f = 0; f < sc->nfaults; f++) {
    sc->faults[f].at_ns += now;
    sim_at(sc->s, -1, sc->faults[f].at_ns, TAG_FAULT + (uint64_t)f); /* -1: never frozen */
  }
  if (sc->liar >= 0) sim_at(sc->s, -1, sc->equiv_ns + now, TAG_EQUIVOCATE);
  if (sc->churn_ticks > 0) sim_at(sc->s, -1, now + SCEN_AT_NS, TAG_CHURN);
  sc->joins_pending = sc->nj;
  for (int k = 0; k < sc->nj; k++) {
    sc->join_ns[k] += now;
    sim_at(sc->s, -1, sc->join_ns[k], TAG_JOIN + (uint64_t)k);
  }
}

/* ---------------------------------------------------------------- named scenarios
 *
 * Each replaces the faults, joiners and equivocation a seed draws with a
 * fixed schedule, from 1 s after the swarm exists (arm_faults); the
 * network and the jobs are the seed's. bound is the round timeout. A
 * scenario's run is longer than a seed's: every step takes pace_ns more
 * than the compute time the seed draws, and the jobs run enough rounds to
 * go on at that pace for TAIL_NS past healing (a swarm left fast would
 * otherwise run out of rounds before a frozen node came back).
 */

int scen_of(const char *name) {
  for (int k = SCEN_NONE + 1; k < SCEN_COUNT; k++)
    if (!strcmp(name, scen_name[k])) return k;
  return -1;
}

void named_swarm(scenario *sc, int named) {
  sc->named = named;
  sim_rng_seed(&sc->named_rng, sc->seed ^ 0x5ce4a210ull);
  sim_rng *x = &sc->named_rng;
  switch (named) {
  case SCEN_LONG_FREEZE: /* the primary of two, or of a larger swarm */
    sc->n = sc->seed % 2 == 0 ? 2 : (int)sim_rng_range(x, 3, 6);
    break;
  case SCEN_TOTAL_BREAK: sc->n = (int)sim_rng_range(x, 2, 6); break;
  case SCEN_STOPPED_DONOR: sc->n = (int)sim_rng_range(x, 2, 4); break;
  case SCEN_CHURN: sc->n = (int)sim_rng_range(x, 4, 6); break;
  default: abort();
  }
}

static struct fault *add_fault(scenario *sc, int kind, int a, uint64_t at_ns, uint64_t len_ns) {
  if (sc->nfaults >= FAULT_SLOTS) abort();
  struct fault *f = &sc->faults[sc->nfaults++];
  memset(f, 0, sizeof *f);
  f->kind = kind;
  f->a = f->b = a;
  f->at_ns = at_ns;
  f->len_ns = len_ns;
  return f;
}

/* A crash at |at_ns| is over once the crashed node is evicted (draw_faults). */
static uint64_t crash_over(const scenario *sc, uint64_t at_ns) {
  return at_ns + sc->round_timeout_ns / 2 + 2 * SEC;
}

void named_schedule(scenario *sc) {
  const uint64_t bound = sc->round_timeout_ns, at = SCEN_AT_NS;
  sc->nfaults = 0;
  sc->nj = 0;
  sc->liar = sc->victim = -1;
  sc->heal_ns = 0;
  int restarts = 0;
  switch (sc->named) {
  case SCEN_LONG_FREEZE:
    /* The laptop that slept (issue 22): the primary stops for 2.25 bounds,
     * its connections open; the others evict it at half the bound (two
     * cannot: they need the primary for a quorum) and it comes back far
     * behind. */
    add_fault(sc, F_FREEZE, A_PRIMARY, at, bound * 9 / 4);
    sc->heal_ns = at + bound * 9 / 4;
    break;
  case SCEN_TOTAL_BREAK:
    /* Every node cut off from every other at once, past the bound: each
     * member's round ends at the bound without the others; then all heal. */
    for (int a = 0; a < sc->n; a++) add_fault(sc, F_ISOLATE, a, at, bound * 5 / 4);
    sc->heal_ns = at + bound * 5 / 4;
    break;
  case SCEN_STOPPED_DONOR: {
    /* Issue 22's split and reset: all but node 0 die; node 0, the run's
     * last holder, stops for 1.5 bounds; two joiners arrive meanwhile and
     * must load the run's state from it once it resumes. */
    for (int a = 1; a < sc->n; a++) add_fault(sc, F_CRASH, a, at, 0);
    uint64_t stop = at + 2 * SEC;
    add_fault(sc, F_FREEZE, 0, stop, bound * 3 / 2);
    sc->nj = 2;
    for (int k = 0; k < sc->nj; k++) sc->join_ns[k] = stop + 500 * MS;
    sc->heal_ns = crash_over(sc, at);
    if (stop + bound * 3 / 2 > sc->heal_ns) sc->heal_ns = stop + bound * 3 / 2;
    sc->must_join = true;
    break;
  }
  case SCEN_CHURN:
    /* For 3 bounds, every 2 s: a live node crashes (a restart follows 1 s
     * later) and another freezes for 2..6 s (churn_tick). */
    sc->churn_every_ns = 2 * SEC;
    sc->churn_ticks = (int)((3 * bound + sc->churn_every_ns - 1) / sc->churn_every_ns);
    restarts = sc->churn_ticks;
    {
      uint64_t last = at + (uint64_t)(sc->churn_ticks - 1) * sc->churn_every_ns;
      sc->heal_ns = crash_over(sc, last);
      if (last + 6 * SEC > sc->heal_ns) sc->heal_ns = last + 6 * SEC;
    }
    break;
  default: abort();
  }
  sc->slots = sc->n + sc->nj + restarts;
  if (sc->slots > MAX_JOBS) abort();
  sc->pace_ns = PACE_NS;
  uint64_t steps = (sc->heal_ns + TAIL_NS + PACE_NS - 1) / PACE_NS;
  sc->rounds = (int)steps * sc->buckets;
  if (sc->rounds > MAX_ROUNDS) abort();
}

/* One tick of churn: a random live node (running, not frozen) crashes and
 * restarts 1 s later, and another freezes for 2..6 s, as long as half of
 * the first swarm's size stays running and unfrozen (a restart that has
 * not loaded the run's state yet does not count). */
void churn_tick(scenario *sc) {
  if (sc->leaving || sc->churn_ticks <= 0) return;
  sim_rng *x = &sc->named_rng;
  int up[MAX_JOBS], k = 0;
  for (int i = 0; i < sc->used; i++) {
    const job *j = &sc->jobs[i];
    if (j->scheduled && !j->crashed && !j->gave_up && !j->loading && sim_up(sc->s, i) &&
        !sim_frozen(sc->s, i))
      up[k++] = i;
  }
  uint64_t now = sim_now(sc->s);
  for (int what = 0; what < 2 && 2 * (k - 1) >= sc->n && sc->nfaults < FAULT_SLOTS; what++) {
    int pick = (int)sim_rng_range(x, 0, (uint64_t)k - 1);
    int a = up[pick];
    up[pick] = up[--k];
    if (what == 0) {
      struct fault *f = add_fault(sc, F_CRASH, a, now, 0);
      f->restart = true;
      f->restart_ns = 1 * SEC;
    } else {
      add_fault(sc, F_FREEZE, a, now, sim_rng_range(x, 2000, 6000) * MS);
    }
    apply_fault(sc, sc->nfaults - 1);
  }
  if (--sc->churn_ticks > 0) sim_at(sc->s, -1, now + sc->churn_every_ns, TAG_CHURN);
}
