/*
 * sim_chaos_sched.c: the fault schedule of the fault-schedule tier
 * (sim_chaos.h): what a seed draws (faults, joiners and restarts, an
 * equivocating reducer), arming it once the swarm exists, and applying
 * each fault. Every draw here is from a stream of the seed in a fixed
 * order: moving or adding one changes what the seeds run.
 */
#include <stdio.h>

#include "sim_chaos.h"

const char *const fault_name[] = {"crash", "freeze", "partition", "isolate"};

/* ---------------------------------------------------------------- faults */

void apply_fault(scenario *sc, int fi) {
  const struct fault *f = &sc->faults[fi];
  if (opt_crash_only && f->kind != F_CRASH) return;
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
  if (sc->slots > sc->n) sc->rounds += (int)sim_rng_range(x, 2, MAX_ROUNDS - 16);
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
  for (int f = 0; f < sc->nfaults; f++) {
    sc->faults[f].at_ns += now;
    sim_at(sc->s, -1, sc->faults[f].at_ns, TAG_FAULT + (uint64_t)f); /* -1: never frozen */
  }
  if (sc->liar >= 0) sim_at(sc->s, -1, sc->equiv_ns + now, TAG_EQUIVOCATE);
  sc->joins_pending = sc->nj;
  for (int k = 0; k < sc->nj; k++) {
    sc->join_ns[k] += now;
    sim_at(sc->s, -1, sc->join_ns[k], TAG_JOIN + (uint64_t)k);
  }
}
