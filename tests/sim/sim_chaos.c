/*
 * sim_chaos.c: the VOPR-style tier of the simulator.
 *
 * Each seed draws a swarm of 2..64 nodes (mostly up to 16), a network
 * (latency, jitter, segmentation, delay spikes, and in some seeds links
 * that break at random), jobs (ranks, weights, element type, length,
 * buckets, compute times) and a fault schedule for the first part of the
 * run (the safety phase): crashes (SIGKILL) at any moment of a round,
 * freezes (SIGSTOP) of one or more nodes, partitions between two nodes and
 * isolation of one, and in some seeds a reducer that equivocates (it sends
 * one member other result bytes than the rest, sim_equivocate: that
 * member must fetch the bytes the round's quorum holds, or fail over,
 * never complete with its own). Then everything heals and the run goes on (the
 * liveness phase). Every live node runs the same sequence of rounds.
 *
 * Jobs are trainers: each holds a state P (a vector like the rounds'
 * buffers, the same at the start on every job) and runs steps of
 * |buckets| rounds; once a step's rounds are all in it applies them in
 * round order, P += out / n_local (exact: n_local is a power of two, so
 * jobs with the same results hold the same bits). A round reported alone
 * adds the job's own values: its P leaves the swarm's until it reloads.
 * A job asked for its state (want_snapshot) hands P to the engine at its
 * next step's start. In some seeds 1..3 joiners start once the swarm
 * exists (in the safety phase or after it) and half of the crashes are
 * followed by a restart: a new process (a new node, a new identity) with
 * the crashed job's parameters, which joins as any joiner does ("a
 * restarted process is an ordinary joiner", docs/architecture.md): once
 * bootstrapped it fetches
 * the run's state (ded_node_state_fetch), loads P from the snapshot and
 * submits from the snapshot's round on. A job told it is |behind| reloads
 * the state (ded_node_state_reload) at its next step's start. These seeds
 * get a few more rounds, so that the joiners have rounds left to run.
 * Checked on every round of every node:
 *
 *   agreement    every node that completed a round with a result reports
 *                the same contributors in the same order;
 *   validity     its buffer is n_j * g bit for bit, g recomputed here from
 *                the contributors' inputs; a node that kept its own values
 *                (alone) has its input untouched; in a round a reducer
 *                equivocated in, every node that completed it holds the
 *                same g (the altered shard may be the round's: the
 *                members lied to can be a quorum);
 *   termination  every round of a live node reports within the bound
 *                (plus the time the node itself was frozen), without error;
 *   liveness     every live node runs to the last round (a joiner from the
 *                round it loaded; a reload skips rounds); with the strict
 *                check, once the last fault healed (the eviction time of
 *                the crashed passed, every joiner loaded), every live node
 *                is back in the swarm's rounds within a round timeout and
 *                then averages every round (sim_chaos_check.c), unless a
 *                lying reducer left a round without a result anywhere;
 *   state        at every step's start (and at the end), every job in step
 *                (no round alone since it started or last loaded) holds
 *                the same P, bit for bit;
 *   told         a job that kept its own values in a round out of step
 *                (alone and late, with |behind|) is told to reload by every report until
 *                it loaded (|behind| past its next round, or diverged), so
 *                that it does not run on with the swarm on its own P, or
 *                until the engine gives up (no peer in step heard in
 *                DED_NODE_ASTRAY_TRIES reloads), which it must not do
 *                while a job in step can be reached;
 *   joining      a joiner's P once loaded is, bit for bit, the P a job that
 *                offered that snapshot (its round and digest) held at that
 *                round's step start; it is in step if that job was.
 *
 * A joiner whose bootstrap or fetch fails leaves the run; that is a failure
 * unless faults explain it (it began before the last fault healed, or the
 * seed breaks links at random) or the run's end does (join_failed). One
 * told "no run in progress" though the swarm runs leaves too, counted, not
 * failed: a known answer of the engine (join_no_run). Both fail a seed of
 * a named scenario whose joiners must load the run's state (must_join).
 *
 * Usage: sim_chaos [--seeds N] [--first S] [--seed S] [--weak-liveness]
 *                  [--no-spikes] [--crash-only] [--summary] [--digest] [--trace] [-v]
 *                  [--lasting-network-faults]
 *                  [--scenario long-freeze|total-break|stopped-donor|churn]
 * --no-spikes turns the delay spikes off and --crash-only skips every
 * fault but crashes (the seeds draw the same otherwise): they narrow a
 * failing seed down. The network's delay spikes and random resets end
 * with the fault schedule; --lasting-network-faults keeps them for the
 * whole run, where only --weak-liveness can hold. --weak-liveness leaves
 * out the strict liveness check (every live node back in every round
 * after healing); the suite runs the strict one. A failure prints its seed; --seed S -v replays it with
 * the nodes' logs and the scenario's events (faults, joins, offers, loads,
 * reloads, round results); --summary prints every seed's line (its swarm,
 * faults, joiners and restarts with the round each loaded at), and the
 * last line counts them over the seeds run. --digest prints each seed's
 * trace digest (sim.h), --trace every step of it: two builds that behave
 * alike print the same (tests/sim/digests/). Joiners and restarts draw from
 * a stream of their own: the swarm and its faults are those the seed drew
 * before they existed.
 *
 * --scenario NAME runs a named scenario (issue 22: each real-world failure
 * a scenario of the simulator): every seed keeps its network and jobs,
 * but its faults, joiners and equivocation give way to a fixed schedule,
 * from 1 s after the swarm exists (bound: the round timeout, 20 s):
 *
 *   long-freeze    the laptop that slept: the primary (the smallest id of
 *                  the swarm) is frozen for 2.25 bounds; 2 nodes in even
 *                  seeds, 3..6 in odd ones;
 *   total-break    every node isolated at once for 1.25 bounds; 2..6 nodes;
 *   stopped-donor  split and reset: all but node 0 crash; 2 s later node 0
 *                  freezes for 1.5 bounds, and 0.5 s into that two joiners
 *                  start: they must load the run's state (from node 0 once
 *                  it resumes), so a joiner that cannot, or is told "no run
 *                  in progress", fails the seed; 2..4 nodes;
 *   churn          for 3 bounds, every 2 s a random running node crashes
 *                  (a restart follows 1 s later) and another freezes for
 *                  2..6 s, while half the swarm stays running; 4..6 nodes.
 *
 * The swarm's size is forced as listed, and the run made longer: every
 * step takes 2 s more than the compute time drawn, and there are enough
 * rounds to go on for 20 s past healing at that pace (the last fault over,
 * the crashed evicted), where the strict liveness check starts. The checks
 * are the same. A scenario draws from a stream of its own: plain seeds run
 * as they did.
 *
 * The program is three files around sim_chaos.h (which says what each
 * owns): this one, the trainer model, the simulator's hooks and a seed's
 * run; sim_chaos_check.c, the checks above; sim_chaos_sched.c, the fault
 * schedule.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_chaos.h"

bool opt_weak_liveness, opt_no_spikes, opt_crash_only, opt_summary, opt_digest, opt_trace,
    opt_lasting_net;
int opt_named = SCEN_NONE;
/* Over every seed run, for the last lines. */
chaos_totals totals;

void fail(scenario *sc, const char *fmt, ...) {
  if (sc->failures++ == 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sc->why, sizeof sc->why, fmt, ap);
    va_end(ap);
  }
}

void say(scenario *sc, const char *fmt, ...) {
  if (!sc->verbose) return;
  va_list ap;
  va_start(ap, fmt);
  printf("%12.6f ", (double)sim_now(sc->s) / 1e9);
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
}

void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) abort();
  return p;
}

void *dup_bytes(const void *p, size_t n) { return memcpy(xmalloc(n), p, n); }

static void fill_input(scenario *sc, job *j, int r) {
  size_t es = es_of(sc->dtype);
  j->in[r] = xmalloc(sc->count * es);
  j->buf[r] = xmalloc(sc->count * es);
  sim_rng *rng = sim_rand(sc->s);
  double scale = (double)(1 << sim_rng_range(rng, 0, 6));
  for (uint64_t e = 0; e < sc->count; e++) {
    double v = (sim_rng_unit(rng) * 2.0 - 1.0) * scale;
    if (sc->dtype == DED_DTYPE_F32)
      ((float *)j->in[r])[e] = (float)v;
    else
      ((double *)j->in[r])[e] = v;
  }
  memcpy(j->buf[r], j->in[r], sc->count * es);
}

/* ---------------------------------------------------------------- state */

/* P += out / n_local, in the job's element type: exact, so jobs that got
 * the same results hold the same bits. */
static void apply_round(scenario *sc, job *j, int r) {
  for (uint64_t e = 0; e < sc->count; e++) {
    if (sc->dtype == DED_DTYPE_F32)
      ((float *)j->P)[e] += ((const float *)j->buf[r])[e] / (float)j->n_local;
    else
      ((double *)j->P)[e] += ((const double *)j->buf[r])[e] / (double)j->n_local;
  }
}

/* Hands P to the engine for the joiners that asked: the state after every
 * round below |next|, which starts a step. */
static void offer_state(scenario *sc, job *j) {
  j->want = false; /* before the call: it may ask again from inside */
  ded_snapshot snap;
  memset(&snap, 0, sizeof snap);
  snap.round = (uint64_t)j->next;
  snap.step_rounds = (uint32_t)sc->buckets;
  snap.len = state_bytes(sc);
  snap.bytes = dup_bytes(j->P, snap.len); /* the sim's nodes use libc's allocator */
  snap.digest = ded_digest64(snap.bytes, snap.len);
  j->offering = true;
  int rv = ded_node_snapshot_set(sim_node(sc->s, j->node), &snap, sim_now(sc->s));
  j->offering = false;
  if (rv != 0) { /* round-1 did not end here with the swarm: nothing to vouch for */
    sc->snap_refused++;
    return;
  }
  sc->offers = realloc(sc->offers, (size_t)(sc->noffers + 1) * sizeof *sc->offers);
  if (!sc->offers) abort();
  sc->offers[sc->noffers++] =
      (offer){j->node, j->next, snap.digest, j->diverged, j->branch,
              dup_bytes(j->P, state_bytes(sc))};
  say(sc, "STATE n%d offers round %d%s", j->node, j->next, j->diverged ? " (diverged)" : "");
}

/* ---------------------------------------------------------------- steps */

static void submit_next(scenario *sc, job *j) {
  int r = j->next;
  fill_input(sc, j, r);
  ded_round_args a = {j->buf[r], sc->count, sc->dtype, j->weight, j->n_local,
                      (void *)(intptr_t)r, 0};
  /* Counted first: the round may finish inside the call (alone). */
  j->next++;
  j->inflight++;
  j->out[r].submit_ns = sim_now(sc->s);
  int64_t no = ded_node_round_submit(sim_node(sc->s, j->node), &a, sim_now(sc->s));
  if (no != r) fail(sc, "node %d: submit of round %d returned %" PRId64, j->node, r, no);
}

/* Compute time before a step (a named scenario's pace on top). */
static uint64_t step_delay(scenario *sc) {
  return sim_rng_range(sim_rand(sc->s), 0, sc->compute_max_ns) + sc->pace_ns;
}

/* True when job |j| has nothing more to run, or is gone. */
static bool job_done(const scenario *sc, const job *j) {
  if (!j->scheduled || j->crashed || j->gave_up) return true;
  return !j->loading && !j->reloading && j->next >= sc->rounds && j->inflight == 0;
}

static bool all_done(scenario *sc) {
  if (sc->joins_pending || sc->restarts_pending) return false;
  for (int i = 0; i < sc->used; i++)
    if (!job_done(sc, &sc->jobs[i])) return false;
  return true;
}

/* The run ends for everyone at about the same time: every live job
 * finalizes once all are done (a job that leaves while another still
 * needs a round it finished takes that round's result with it). */
static void maybe_end(scenario *sc) {
  if (all_done(sc)) sim_at(sc->s, -1, sim_now(sc->s), TAG_LEAVE); /* not from inside a callback */
}

/* A step begins: the snapshot asked for, a reload if the job fell out of
 * step, then the step's first bucket; the rest follow after small gaps,
 * up to |buckets| in flight. */
static void step_start(scenario *sc, job *j) {
  if (j->crashed || j->gave_up || j->loading || j->reloading || j->inflight ||
      j->next >= sc->rounds)
    return;
  if (j->want && j->next > 0) offer_state(sc, j);
  /* Far behind while in step: reload rather than fetch every round at the
   * trainer's pace, as the shim does (ded_step.c, reload_wanted). */
  if (!j->behind && j->late_swarm) {
    uint64_t gap = j->late_swarm - j->late_round;
    if (gap >= (uint64_t)SIM_RELOAD_GAP_STEPS * (uint64_t)sc->buckets && gap > 2 * j->reload_gap &&
        j->late_swarm > (uint64_t)j->next) {
      j->behind = j->late_swarm;
      j->reload_gap_pending = true;
    }
    j->late_swarm = 0;
  }
  if (j->own && !j->retry && !j->refound && j->behind <= (uint64_t)j->next)
    fail(sc, "node %d kept its own values in a round out of step, but no report since says to "
         "reload (at round %d, behind %" PRIu64 "): it would run on with the swarm on parameters "
         "of its own", j->node, j->next, j->behind);
  j->retry = false;
  if (j->behind > (uint64_t)j->next || j->refound) {
    uint64_t min_round = j->behind > (uint64_t)j->next ? j->behind : (uint64_t)j->next;
    j->behind = 0;
    j->refound = false;
    int rv = ded_node_state_reload(sim_node(sc->s, j->node), min_round, sim_now(sc->s));
    if (rv == 0) {
      say(sc, "RELOAD n%d at round %d: the swarm is at %" PRIu64, j->node, j->next, min_round);
      j->reloading = true;
      j->reload_min = min_round;
      j->reloads++;
      return; /* the step starts at state_done */
    }
    fail(sc, "node %d: ded_node_state_reload(%" PRIu64 ") at round %d: %s", j->node, min_round,
         j->next, ded_strerror(rv));
  }
  j->behind = 0;
  j->in_step = true;
  j->step_first = j->next;
  j->step_end = j->next + sc->buckets < sc->rounds ? j->next + sc->buckets : sc->rounds;
  submit_next(sc, j);
  if (j->next < j->step_end)
    sim_at(sc->s, j->node, sim_now(sc->s) + sim_rng_range(sim_rand(sc->s), 0, 2000000), TAG_SUBMIT);
}

static void step_bucket(scenario *sc, job *j) {
  if (j->crashed || j->next >= j->step_end) return;
  submit_next(sc, j);
  if (j->next < j->step_end)
    sim_at(sc->s, j->node, sim_now(sc->s) + sim_rng_range(sim_rand(sc->s), 0, 2000000), TAG_SUBMIT);
}

/* The step's rounds are all in: apply them in round order, check the state
 * at the next step's start, and go on after the compute time. */
static void step_finish(scenario *sc, job *j) {
  j->in_step = false;
  for (int r = j->step_first; r < j->step_end; r++) {
    const round_out *o = &j->out[r];
    if (o->done && o->res.founder) j->diverged = false; /* its state is the run's from here */
    if ((o->res.alone && !o->res.founder) || !o->done || o->status != 0)
      j->diverged = true; /* a failure: reported */
    if (!o->done || o->status != 0) continue;
    apply_round(sc, j, r);
  }
  check_state(sc, j, j->next);
  if (j->next >= sc->rounds && !sc->over_ns) sc->over_ns = sim_now(sc->s);
  if (j->next < sc->rounds)
    sim_at(sc->s, j->node, sim_now(sc->s) + step_delay(sc), TAG_SUBMIT);
  else if (j->want)
    sim_at(sc->s, j->node, sim_now(sc->s), TAG_OFFER); /* the end is a step's start too */
}

/* ---------------------------------------------------------------- joiners */

/* 1 or 2 nodes of the run (up, and past their fetch if joiners), drawn
 * from the extra stream, as |p|'s bootstrap: a joiner's DEDMPI_JOIN names
 * peers of the run. (Through a joiner still bootstrapping, it would find
 * only that one, which has not been in a round: no run in progress.) */
static void pick_bootstrap(scenario *sc, int self, ded_node_settings *p) {
  int up[MAX_JOBS], nup = 0;
  for (int i = 0; i < sc->used; i++)
    if (i != self && sim_up(sc->s, i) && sc->jobs[i].first_round >= 0 && !sc->jobs[i].gave_up)
      up[nup++] = i;
  p->n_bootstrap = 0;
  if (nup == 0) return; /* cannot happen: a majority of the swarm lives */
  int a = up[sim_rng_range(&sc->extra, 0, (uint64_t)nup - 1)];
  p->bootstrap[p->n_bootstrap++] = sim_node_addr(a);
  int b = up[sim_rng_range(&sc->extra, 0, (uint64_t)nup - 1)];
  if (b != a && sim_rng_chance(&sc->extra, 0.5)) p->bootstrap[p->n_bootstrap++] = sim_node_addr(b);
}

/* Starts the job in a new slot now: a joiner, or the restart of |of|. */
static void start_joiner(scenario *sc, int kind, int of) {
  if (sc->used >= sc->slots) abort();
  job *j = &sc->jobs[sc->used++];
  if (kind == K_RESTART) {
    j->n_local = sc->jobs[of].n_local;
    j->weight = sc->jobs[of].weight;
    j->params = sc->jobs[of].params;
  } else {
    j->n_local = 1u << sim_rng_range(&sc->extra, 0, 2);
    j->weight = sim_rng_chance(&sc->extra, 0.5) ? (double)j->n_local
                                                : (double)sim_rng_range(&sc->extra, 1, 1000) / 8.0;
    j->params = sc->jobs[0].params;
    j->params.settings.chunk_bytes = (uint32_t)sim_rng_range(&sc->extra, 64, 4096);
    j->params.uplink_bytes_per_s = (double)sim_rng_range(&sc->extra, 1, 100) * 1e6;
  }
  j->kind = kind;
  j->of = of;
  j->scheduled = true;
  j->loading = true;
  j->start_ns = sim_now(sc->s);
  pick_bootstrap(sc, j->node, &j->params.settings);
  j->params.start_ns = sim_now(sc->s);
  const ded_node_settings *st = &j->params.settings;
  char what[32] = "JOIN";
  if (kind == K_RESTART) snprintf(what, sizeof what, "RESTART of n%d:", of);
  say(sc, "%s n%d (bootstrap n%d%s%d)", what, j->node, st->bootstrap[0].ip[3] - 1,
      st->n_bootstrap > 1 ? ", n" : " = n", st->bootstrap[st->n_bootstrap - 1].ip[3] - 1);
  sim_node_setup(sc->s, j->node, &j->params);
}

/* A joiner could not join: a failure unless faults explain it (it began
 * before the last one healed, or links break at random), or the run's end
 * does: a fetch that began as the first jobs finished may be asked, once,
 * for a snapshot one step past the newest offered (ded_node.c,
 * state_tick), a round that never comes. Always a failure where a named
 * scenario says the joiners must load the run's state (must_join). */
static void join_failed(scenario *sc, job *j, const char *what, int status) {
  bool faults = (sc->reset_prob > 0 && opt_lasting_net) || j->start_ns < sc->heal_ns;
  bool end = sc->over_ns && j->fetching && sc->over_ns < j->fetch_ns + 5 * SEC;
  say(sc, "GIVE UP n%d: %s: %s%s", j->node, what, ded_strerror(status),
      faults ? " (faults explain it)" : end ? " (the run was ending)" : "");
  if ((!faults && !end) || sc->must_join)
    fail(sc, "node %d (a %s) could not join: %s: %s", j->node,
         j->kind == K_RESTART ? "restart" : "joiner", what, ded_strerror(status));
  totals.gave_up_faults += faults;
  totals.gave_up_end += !faults && end;
  j->gave_up = true;
  j->loading = false;
  sim_at(sc->s, j->node, sim_now(sc->s), TAG_GIVE_UP); /* not from inside the callback */
  maybe_end(sc);
}

/*
 * The fetch said "no run in progress" though the swarm has run rounds (a
 * joiner starts only then). Known engine behaviour, not checked here: the
 * peers asked all answered that they cannot offer (each said PENDING, then
 * NONE once its previous round ended alone) or went away before answering
 * (ded_node.c, state_tick, reads both as no run). A job that started at
 * round 0 then, with the swarm's DEDMPI_MIN_PEERS, would fail its first
 * round's rendezvous, or run alone round after round: it leaves instead.
 */
static void join_no_run(scenario *sc, job *j) {
  say(sc, "GIVE UP n%d: the fetch found no run in progress (engine: wrong, see above)", j->node);
  if (sc->must_join) /* a named scenario where it must load the run's state */
    fail(sc, "node %d (a %s) found no run in progress: it would start a model of its own",
         j->node, j->kind == K_RESTART ? "restart" : "joiner");
  j->no_run = true;
  j->gave_up = true;
  j->loading = false;
  sim_at(sc->s, j->node, sim_now(sc->s), TAG_GIVE_UP); /* not from inside the callback */
  maybe_end(sc);
}

static void hook_event(void *user, int node, const ded_event *ev) {
  scenario *sc = user;
  job *j = &sc->jobs[node];
  if (ev->type != DED_EVENT_BOOTSTRAP || j->kind == K_FIRST || !j->loading || j->fetching) return;
  if (ev->status != 0) {
    join_failed(sc, j, "bootstrap", ev->status);
    return;
  }
  /* Not before bootstrap (knowing no peer, it would find no run), and not
   * from inside the node's callback: right after it. */
  j->fetching = true;
  sim_at(sc->s, node, sim_now(sc->s), TAG_FETCH);
}

static void hook_want_snapshot(void *user, int node) {
  scenario *sc = user;
  job *j = &sc->jobs[node];
  j->want = true;
  /* A job that ran its last round is at a step's start from then on (but
   * joiners that want a later round than its last wait in vain: asked
   * again from inside the snapshot it just gave, it gives no other). */
  if (j->next >= sc->rounds && j->inflight == 0 && !j->in_step && !j->offering)
    sim_at(sc->s, node, sim_now(sc->s), TAG_OFFER);
}

/* The state is in (a join, or a reload): P takes it, and the rounds go on
 * from its round. */
static void load_state(scenario *sc, job *j, const ded_snapshot *snap) {
  if (snap->len != state_bytes(sc) ||
      snap->step_rounds != (uint32_t)sc->buckets || snap->round == 0 ||
      snap->round > (uint64_t)sc->rounds || (!j->loading && snap->round < j->reload_min)) {
    fail(sc, "node %d: a snapshot of round %" PRIu64 " (%" PRIu64 " bytes, steps of %u)"
         " at round %d", j->node, snap->round, snap->len, snap->step_rounds,
         j->next);
    return;
  }
  int round = (int)snap->round;
  memcpy(j->P, snap->bytes, snap->len);
  say(sc, "LOADED n%d: round %d%s", j->node, round, j->loading ? "" : " (reload)");
  j->next = round;
  j->own = false;
  j->loaded_ns = sim_now(sc->s);
  check_loaded(sc, j, round, snap->digest);
  check_state(sc, j, round);
}

/* The engine gave up waiting for the run's state (DED_NODE_ASTRAY_TRIES
 * reloads that heard no peer in step): its state goes on as the run's, and
 * its reports stop telling it to reload. Wrong while a job in step (none
 * of its own values since it last loaded, not loading, not frozen) could
 * be reached: that one holds the run's state and would have offered it. */
static void astray_gave_up(scenario *sc, job *j) {
  j->own = false;
  sc->astray_gave_up++;
  say(sc, "GAVE UP n%d: its own state goes on as the run's", j->node);
  for (int i = 0; i < sc->used; i++) {
    const job *k = &sc->jobs[i];
    if (k == j || !k->scheduled || sim_now(sc->s) < k->params.start_ns || k->crashed ||
        k->gave_up || k->loading || k->reloading || k->own || k->diverged || k->next == 0 ||
        sim_frozen(sc->s, k->node) || sim_cut(sc->s, j->node, k->node))
      continue;
    fail(sc, "node %d gave up waiting for the run's state while node %d held it, in step and "
         "reachable (at its round %d)", j->node, k->node, k->next);
    return;
  }
}

static void hook_state_done(void *user, int node, int status, ded_snapshot *snap) {
  scenario *sc = user;
  job *j = &sc->jobs[node];
  if (j->reloading) {
    j->reloading = false;
    if (status == 0 && snap) {
      load_state(sc, j, snap);
    } else if (status == 0) {
      fail(sc, "node %d: a reload found no run in progress", node);
    } else { /* the engine goes on where it was: so does the job, out of step */
      say(sc, "RELOAD FAILED n%d: %s", node, ded_strerror(status));
      sc->reload_failed++;
      j->retry = true;
      if (j->own && !ded_node_astray(sim_node(sc->s, node))) astray_gave_up(sc, j);
    }
    sim_at(sc->s, node, sim_now(sc->s), TAG_SUBMIT); /* the step waiting for it */
    maybe_end(sc); /* a reload to the run's end leaves nothing to run */
    return;
  }
  if (!j->loading) {
    fail(sc, "node %d: state_done without a fetch", node);
    return;
  }
  if (status != 0) {
    join_failed(sc, j, "state fetch", status);
    return;
  }
  if (!snap && sc->armed) {
    join_no_run(sc, j);
    return;
  }
  if (snap) {
    load_state(sc, j, snap);
  } else { /* no run in progress: from the start, as the first jobs */
    say(sc, "LOADED n%d: no run in progress, from round 0", node);
    j->no_run = true;
    j->next = 0;
    check_state(sc, j, 0);
  }
  j->loading = false;
  j->first_round = j->loaded_round = j->next;
  if (j->next < sc->rounds)
    sim_at(sc->s, node, sim_now(sc->s) + step_delay(sc), TAG_SUBMIT);
  maybe_end(sc);
}

/* ---------------------------------------------------------------- hooks */

static void hook_timer(void *user, int node, uint64_t tag) {
  scenario *sc = user;
  if (tag == TAG_LEAVE) {
    if (sc->leaving) return;
    sc->leaving = true;
    for (int i = 0; i < sc->used; i++)
      if (!sc->jobs[i].crashed && !sc->jobs[i].gave_up && sim_up(sc->s, i))
        ded_node_leave(sim_node(sc->s, i), sim_now(sc->s));
    sim_stop(sc->s);
    return;
  }
  if (tag == TAG_CHURN) {
    churn_tick(sc);
    return;
  }
  if (tag >= TAG_EQUIVOCATE) {
    if (sc->verbose)
      printf("%12.6f FAULT equivocate n%d -> n%d for %.3f s\n", (double)sim_now(sc->s) / 1e9,
             sc->liar, sc->victim, (double)sc->equiv_len_ns / 1e9);
    sim_equivocate(sc->s, sc->liar, sc->victim, sim_now(sc->s) + sc->equiv_len_ns);
    return;
  }
  if (tag >= TAG_RESTART) {
    sc->restarts_pending--;
    start_joiner(sc, K_RESTART, sc->faults[tag - TAG_RESTART].a);
    return;
  }
  if (tag >= TAG_JOIN) {
    sc->joins_pending--;
    start_joiner(sc, K_JOINER, -1);
    return;
  }
  if (tag >= TAG_FAULT) {
    apply_fault(sc, (int)(tag - TAG_FAULT));
    return;
  }
  job *j = &sc->jobs[node];
  if (j->crashed || !sim_up(sc->s, node)) return;
  switch (tag) {
  case TAG_SUBMIT:
    if (j->in_step)
      step_bucket(sc, j);
    else
      step_start(sc, j);
    break;
  case TAG_FETCH: {
    j->fetch_ns = sim_now(sc->s);
    int rv = ded_node_state_fetch(sim_node(sc->s, node), sim_now(sc->s));
    if (rv != 0) fail(sc, "node %d: ded_node_state_fetch: %s", node, ded_strerror(rv));
    break;
  }
  case TAG_OFFER:
    if (j->want && j->next >= sc->rounds && j->inflight == 0 && !j->in_step) offer_state(sc, j);
    break;
  case TAG_GIVE_UP: ded_node_leave(sim_node(sc->s, node), sim_now(sc->s)); break;
  }
}

static void hook_started(void *user, int node) {
  scenario *sc = user;
  job *j = &sc->jobs[node];
  memcpy(j->id, ded_node_id(sim_node(sc->s, node)), DED_ID_BYTES);
  if (j->kind == K_FIRST) /* joiners fetch the state once bootstrapped (hook_event) */
    sim_at(sc->s, node, sim_now(sc->s) + step_delay(sc), TAG_SUBMIT);
}

static void hook_round_done(void *user, int node, void *ctx, const ded_round_result *res) {
  scenario *sc = user;
  job *j = &sc->jobs[node];
  int r = (int)(intptr_t)ctx;
  round_out *o = &j->out[r];
  if (o->done) {
    fail(sc, "node %d round %d reported twice", node, r);
    return;
  }
  o->done = true;
  /* Every job cuts the stream alike here: one round per all-reduce. */
  if (!res->last || res->off != 0 || res->count != sc->count)
    fail(sc, "node %d all-reduce %d: a round of %" PRIu64 "+%" PRIu64 " elements%s", node, r,
         res->off, res->count, res->last ? "" : ", not its last");
  sim_digest_add(sc->s, j->buf[r], sc->count * es_of(sc->dtype));
  o->status = res->status;
  o->res = *res;
  o->res.members = NULL;
  o->done_ns = sim_now(sc->s);
  o->diverged = j->diverged;
  if (res->members && res->contributors <= MAX_JOBS)
    memcpy(o->members, res->members, (size_t)res->contributors * DED_ID_BYTES);
  say(sc, "DONE n%d round %d: status %d, %u contributors%s%s, behind %" PRIu64, node, r,
      res->status, res->contributors, res->alone ? ", alone" : "", res->late ? ", late" : "",
      res->behind);
  if (res->behind > j->behind) j->behind = res->behind;
  if (res->diverged) j->refound = true;
  /* Its own values: told to reload from here on (told, above). */
  if (res->founder) j->own = false;
  if (res->status == 0 && res->alone && res->late && res->behind) j->own = true;
  if (res->founder) {
    j->refound = false;
    found_branch(sc, j, r);
  }
  if (res->late && !res->alone && res->swarm_round > res->round) {
    j->late_swarm = res->swarm_round;
    j->late_round = res->round;
    if (j->reload_gap_pending) j->reload_gap = res->swarm_round - res->round;
    j->reload_gap_pending = false;
  } else if (!res->late) {
    j->late_swarm = 0;
  }
  j->inflight--;
  arm_faults(sc);
  /* A job that is done finalizes at once, as a real trainer does, while
   * others may still be finishing the same round. */
  if (j->inflight == 0 && j->in_step && j->next == j->step_end) step_finish(sc, j);
  maybe_end(sc);
}

static void hook_log(void *user, int node, int level, const char *line) {
  scenario *sc = user;
  if (sc->verbose) printf("%12.6f n%-2d %d %s\n", (double)sim_now(sc->s) / 1e9, node, level, line);
}

/* ---------------------------------------------------------------- a seed */

static void print_summary(scenario *sc, int rv) {
  printf("%s seed=%" PRIu64, rv ? "FAIL" : "ok", sc->seed);
  if (sc->named) printf(" scenario=%s", scen_name[sc->named]);
  printf(" nodes=%d rounds=%d buckets=%d dtype=%u count=%" PRIu64 " faults=", sc->n, sc->rounds,
         sc->buckets, sc->dtype, sc->count);
  for (int f = 0; f < sc->nfaults; f++) {
    printf("%s%s@%.2fs", f ? "," : "", fault_name[sc->faults[f].kind],
           (double)sc->faults[f].at_ns / 1e9);
    if (sc->faults[f].a == A_PRIMARY) /* a named scenario's, that never struck */
      printf("(primary)");
    else
      printf("(n%d)", sc->faults[f].a);
  }
  int reloads = 0;
  for (int i = sc->n; i < sc->used; i++) {
    const job *j = &sc->jobs[i];
    printf("%s%s=n%d", i == sc->n ? " " : ",", j->kind == K_RESTART ? "restart" : "join", i);
    if (j->kind == K_RESTART) printf("(n%d)", j->of);
    printf("@%.2fs", (double)j->start_ns / 1e9);
    if (j->loaded_round >= 0)
      printf("r%d%s", j->loaded_round, j->no_run ? "(no run)" : "");
    else
      printf("%s", j->no_run ? "(found no run)" : j->gave_up ? "(gave up)" : "(not loaded)");
  }
  for (int i = 0; i < sc->used; i++) reloads += sc->jobs[i].reloads;
  if (reloads) printf(" reloads=%d", reloads);
  printf(" reset=%g spike=%g t=%.2fs%s%s\n", sc->reset_prob, sc->spike_prob,
         (double)sim_now(sc->s) / 1e9, rv ? ": " : "", rv ? sc->why : "");
  if (rv)
    printf("  replay: sim_chaos%s%s --seed %" PRIu64 " -v\n", sc->named ? " --scenario " : "",
           sc->named ? scen_name[sc->named] : "", sc->seed);
}

static void count_totals(const scenario *sc) {
  int reloads = 0;
  bool restarts = false;
  for (int i = 0; i < sc->used; i++) {
    const job *j = &sc->jobs[i];
    reloads += j->reloads;
    restarts |= j->kind == K_RESTART;
    totals.joined += j->kind != K_FIRST && j->loaded_round >= 0 && !j->no_run;
    totals.joined_end += j->kind != K_FIRST && j->loaded_round == sc->rounds;
    totals.no_run += j->no_run;
    totals.gave_up += j->gave_up && !j->no_run;
  }
  totals.joiner_seeds += sc->nj > 0;
  totals.liar_seeds += sc->liar >= 0;
  totals.equivocated += sim_equivocated(sc->s);
  totals.restart_seeds += restarts;
  totals.reload_seeds += reloads > 0;
  totals.reloads += reloads;
  totals.reload_failed += sc->reload_failed;
  totals.astray_gave_up += sc->astray_gave_up;
  totals.snap_refused += sc->snap_refused;
  totals.rollback_seeds += sc->rolled_back;
}

static void free_scenario(scenario *sc) {
  for (int i = 0; i < sc->slots; i++) { /* every slot has a P, started or not */
    for (int r = 0; r < MAX_ROUNDS; r++) {
      free(sc->jobs[i].in[r]);
      free(sc->jobs[i].buf[r]);
    }
    free(sc->jobs[i].P);
  }
  for (int k = 0; k < sc->noffers; k++) free(sc->offers[k].bytes);
  for (int r = 0; r <= MAX_ROUNDS; r++) free(sc->ref[r]);
  free(sc->offers);
  free(sc->P0);
  sim_free(sc->s);
  free(sc);
}

/* The initial state, the same on every job that starts the run: drawn
 * from the seed alone. */
static void draw_p0(scenario *sc) {
  sc->P0 = xmalloc(state_bytes(sc));
  sim_rng r;
  sim_rng_seed(&r, sc->seed ^ 0x5ea7e0ull);
  for (uint64_t e = 0; e < sc->count; e++) {
    double v = sim_rng_unit(&r) * 2.0 - 1.0;
    if (sc->dtype == DED_DTYPE_F32)
      ((float *)sc->P0)[e] = (float)v;
    else
      ((double *)sc->P0)[e] = v;
  }
}

static int run_seed(uint64_t seed, bool verbose) {
  scenario *sc = calloc(1, sizeof *sc);
  if (!sc) abort();
  sc->seed = seed;
  sc->verbose = verbose;
  sc->weak_liveness = opt_weak_liveness;
  sim_rng pick;
  sim_rng_seed(&pick, seed ^ 0xc4a05c4a05ull);
  sim_rng_seed(&sc->extra, seed ^ 0x701e5e5ull);
  sc->n = (int)sim_rng_range(&pick, 2, 16);
  if (sim_rng_chance(&pick, 0.08)) sc->n = (int)sim_rng_range(&pick, 17, MAX_NODES);
  if (opt_named) named_swarm(sc, opt_named); /* before anything drawn per node */
  sc->rounds = (int)sim_rng_range(&pick, 6, 16);
  sc->buckets = (int)sim_rng_range(&pick, 1, 3);
  sc->dtype = sim_rng_chance(&pick, 0.5) ? DED_DTYPE_F32 : DED_DTYPE_F64;
  sc->count = sim_rng_range(&pick, 1, sim_rng_chance(&pick, 0.2) ? 40 : 2000);
  sc->compute_max_ns = sim_rng_range(&pick, 0, 300) * MS;
  sc->round_timeout_ns = 20 * SEC;
  sc->floor_ns = sim_rng_range(&pick, 100, 500) * MS; /* one configuration for the swarm */
  sim_link_params lp;
  memset(&lp, 0, sizeof lp);
  lp.latency_ns = sim_rng_range(&pick, 10, 30000) * 1000ull; /* 10 us .. 30 ms */
  lp.jitter_ns = sim_rng_range(&pick, 0, 20000) * 1000ull;   /* 0 .. 20 ms */
  lp.segment_max = (uint32_t)sim_rng_range(&pick, 1, sim_rng_chance(&pick, 0.3) ? 64 : 20000);
  if (sim_rng_chance(&pick, 0.3)) {
    lp.spike_prob = (double)sim_rng_range(&pick, 1, 50) / 1000.0;
    lp.spike_ns = sim_rng_range(&pick, 10, 800) * MS;
    if (opt_no_spikes) lp.spike_prob = 0; /* drawn all the same: seeds stay comparable */
  }
  /* Broken connections now and then (per segment: only where segments
   * are large, else a link would break every few milliseconds). */
  if (lp.segment_max > 4096 && sim_rng_chance(&pick, 0.2))
    lp.reset_prob = (double)sim_rng_range(&pick, 1, 20) / 100000.0;
  sc->reset_prob = lp.reset_prob;
  sc->spike_prob = lp.spike_prob;
  for (int i = 0; i < sc->n; i++) {
    job *j = &sc->jobs[i];
    j->n_local = 1u << sim_rng_range(&pick, 0, 2);
    j->weight = sim_rng_chance(&pick, 0.5) ? (double)j->n_local
                                           : (double)sim_rng_range(&pick, 1, 1000) / 8.0;
    sim_node_params *p = &j->params;
    p->settings.run = "sim";
    p->settings.min_peers = (uint32_t)sc->n;
    p->settings.bootstrap_timeout_ns = 60 * SEC;
    p->settings.rendezvous_timeout_ns = 60 * SEC;
    p->settings.round_timeout_ns = sc->round_timeout_ns;
    p->settings.deadline_floor_ns = sc->floor_ns;
    p->settings.chunk_bytes = (uint32_t)sim_rng_range(&pick, 64, 4096);
    p->settings.streams = (uint8_t)(1 + i % 3); /* lanes: some pairs have several connections */
    p->settings.log_level = verbose ? DED_LOG_DEBUG : DED_LOG_ERROR;
    if (i > 0 || sim_rng_chance(&pick, 0.5)) {
      p->settings.bootstrap[0] = sim_node_addr(i == 0 ? 0 : (int)sim_rng_range(&pick, 0, (uint64_t)i - 1));
      p->settings.n_bootstrap = 1;
      if (i > 1 && sim_rng_chance(&pick, 0.3)) {
        p->settings.bootstrap[1] = sim_node_addr((int)sim_rng_range(&pick, 0, (uint64_t)sc->n - 1));
        p->settings.n_bootstrap = 2;
      }
    }
    p->start_ns = sim_rng_range(&pick, 0, 300) * MS;
    p->uplink_bytes_per_s = (double)sim_rng_range(&pick, 1, 100) * 1e6;
  }
  /* Faults hit the first part of the run (about the first half of the
   * rounds at the longest compute time); the rest is the liveness phase. */
  uint64_t safety_end = 100 * MS + (uint64_t)sc->rounds / 2 * (sc->compute_max_ns + 200 * MS) / (uint64_t)sc->buckets;
  if (sc->named) {
    named_schedule(sc);
  } else {
    draw_faults(sc, &pick, safety_end);
    draw_joiners(sc, safety_end);
    draw_equivocation(sc, safety_end);
  }
  draw_p0(sc);
  sim_hooks hooks = {sc,         hook_round_done,    hook_started,   hook_timer,
                     hook_log,   hook_event,         hook_want_snapshot, hook_state_done};
  sc->s = sim_new(seed, sc->slots, &lp, &hooks);
  if (opt_trace) sim_trace(sc->s, stdout);
  sc->used = sc->n;
  for (int i = 0; i < sc->slots; i++) {
    job *j = &sc->jobs[i];
    j->node = i;
    j->P = dup_bytes(sc->P0, state_bytes(sc));
    j->first_round = j->loaded_round = -1;
  }
  for (int i = 0; i < sc->n; i++) {
    sc->jobs[i].scheduled = true;
    sc->jobs[i].first_round = 0;
    sim_node_setup(sc->s, i, &sc->jobs[i].params);
  }
  const uint64_t limit_ns = sc->named ? 3600 * SEC : 900 * SEC; /* named: longer runs */
  sim_run(sc->s, limit_ns);
  check_jobs(sc, limit_ns);
  for (int r = 0; r < sc->rounds && !sc->failures; r++) check_round(sc, r);
  sim_run(sc->s, sim_now(sc->s) + 10 * SEC);
  int rv = sc->failures ? 1 : 0;
  if (opt_digest) printf("seed %" PRIu64 " digest %016" PRIx64 "\n", seed, sim_digest(sc->s));
  if (rv || verbose || opt_summary) print_summary(sc, rv);
  count_totals(sc);
  free_scenario(sc);
  return rv;
}

int main(int argc, char **argv) {
  uint64_t first = 1, seeds = 200;
  bool verbose = false, one = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--seeds") && i + 1 < argc)
      seeds = strtoull(argv[++i], NULL, 0);
    else if (!strcmp(argv[i], "--first") && i + 1 < argc)
      first = strtoull(argv[++i], NULL, 0);
    else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
      first = strtoull(argv[++i], NULL, 0);
      one = true;
    } else if (!strcmp(argv[i], "-v"))
      verbose = true;
    else if (!strcmp(argv[i], "--weak-liveness"))
      opt_weak_liveness = true;
    else if (!strcmp(argv[i], "--no-spikes"))
      opt_no_spikes = true;
    else if (!strcmp(argv[i], "--lasting-network-faults"))
      opt_lasting_net = true;
    else if (!strcmp(argv[i], "--crash-only"))
      opt_crash_only = true;
    else if (!strcmp(argv[i], "--summary"))
      opt_summary = true;
    else if (!strcmp(argv[i], "--digest"))
      opt_digest = true;
    else if (!strcmp(argv[i], "--trace"))
      opt_trace = true;
    else if (!strcmp(argv[i], "--scenario") && i + 1 < argc && scen_of(argv[i + 1]) > 0)
      opt_named = scen_of(argv[++i]);
    else {
      fprintf(stderr,
              "usage: %s [--seeds N] [--first S] [--seed S] [--weak-liveness] [--no-spikes] "
              "[--crash-only] [--summary] [--digest] [--trace] [-v]\n"
              "       [--lasting-network-faults] [--scenario long-freeze|total-break|stopped-donor|churn]\n",
              argv[0]);
      return 2;
    }
  }
  if (one) seeds = 1;
  int failed = 0;
  for (uint64_t s = first; s < first + seeds; s++) failed += run_seed(s, verbose);
  if (opt_named)
    printf("sim_chaos: scenario %s: %" PRIu64 " seeds, %d failed\n", scen_name[opt_named], seeds,
           failed);
  else
    printf("sim_chaos: %" PRIu64 " seeds, %d failed\n", seeds, failed);
  printf("sim_chaos: seeds with joiners %d, with restarts %d, with reloads %d; joiners and "
         "restarts: loaded %d (%d at the run's end), found no run in progress %d (and left), "
         "gave up %d (explained: by faults %d, by the run's end %d); reloads %d (%d failed; "
         "astray jobs that took their own state as the run's %d); "
         "loaded a diverged state %d; snapshots refused %d; rolled back (a branch died with "
         "every holder, the run went on from an older state) %d\n",
         totals.joiner_seeds, totals.restart_seeds, totals.reload_seeds, totals.joined,
         totals.joined_end, totals.no_run, totals.gave_up, totals.gave_up_faults,
         totals.gave_up_end, totals.reloads, totals.reload_failed, totals.astray_gave_up,
         totals.diverged_loads,
         totals.snap_refused, totals.rollback_seeds);
  printf("sim_chaos: seeds with an equivocating reducer %d (RESULT frames altered %" PRIu64 "; "
         "a round it lied in left without a result anywhere, strict liveness not asked after "
         "it: %d)\n", totals.liar_seeds, totals.equivocated, totals.liar_stalls);
  return failed ? 1 : 0;
}
