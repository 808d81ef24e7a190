/*
 * sim_avg.c: randomized averaging runs over the simulator (issue-2 tier).
 *
 * Each seed draws a swarm of 1..16 nodes, their start times and bootstrap
 * addresses, the network's latency, jitter and segmentation, per-node
 * uplink rates and chunk sizes, every job's rank count and weight, the
 * element type and vector length, how many buckets a step keeps in flight
 * and how long each step computes. Node i opens 1 + i % 3 connections to
 * each peer it calls, and every fourth node probes its links at join.
 * Every node runs the same sequence of rounds; afterwards every round is
 * checked on every node:
 *
 *   agreement  every node that averaged reports the same contributors, in
 *              the same order: one group per round;
 *   validity   each contributor's buffer equals n_j * g bit for bit, where
 *              g is recomputed here, independently, as the weighted mean
 *              of the contributors' inputs summed in commit order; a node
 *              that was alone or late kept its input untouched;
 *   liveness   every round completes without error within the time bound,
 *              with everyone unless a node stalled.
 *
 * In a quarter of the seeds one node stalls once before a step, for 2 to 8
 * seconds (a laptop lid): the rounds go on without it after a learned
 * deadline, and it fetches the result of what it missed (or finds the
 * others gone: they leave as soon as they are done).
 *
 * Usage: sim_avg [--seeds N] [--first S] [--seed S] [--digest] [--trace] [-v]
 * A failure prints its seed; --seed S -v replays it with the nodes' logs.
 * --digest prints each seed's trace digest (sim.h), --trace every step of
 * it: two builds that behave alike print the same (tests/sim/digests/).
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

#define MAX_NODES 16
#define MAX_ROUNDS 12 /* buckets of the stream */
#define MAX_CALLS (4 * MAX_ROUNDS)
#define MAX_RECS 1024 /* rounds a job reports */

/* A round as a job reported it. */
typedef struct round_out {
  int status;
  ded_round_result res;
  uint8_t members[MAX_NODES][DED_ID_BYTES];
  int call;
  int seq; /* its place in the order of the reports */
  uint64_t done_ns;
} round_out;

/* An all-reduce: elements [start, start + len) of the stream. */
typedef struct ar_call {
  uint64_t start, len;
  int step;
  bool done;
} ar_call;

typedef struct job {
  int node;
  int steps_started;
  uint32_t n_local;
  double weight;
  ar_call calls[MAX_CALLS];
  int ncalls;
  int submitted;
  int completed;
  int inflight;
  void *in;  /* the whole stream's inputs, kept for the check */
  void *buf; /* the same, handed to the engine call by call */
  round_out *out; /* MAX_RECS */
  int nout;
} job;

typedef struct scenario {
  uint64_t seed;
  bool verbose;
  sim *s;
  int n;
  int rounds;
  int buckets;
  bool cuts; /* each job cuts each step at random points of its own */
  uint8_t dtype;
  uint64_t count;
  uint64_t compute_max_ns;
  int staller;       /* node that stalls once, or -1 */
  int stall_step;    /* at the start of this step */
  uint64_t stall_ns; /* for this long */
  uint64_t round_timeout_ns;
  job jobs[MAX_NODES];
  int failures;
  char why[512];
} scenario;

#define TAG_LEAVE 1

static bool opt_digest, opt_trace;

static size_t es_of(uint8_t dtype) { return dtype == DED_DTYPE_F32 ? 4 : 8; }

static void fail(scenario *sc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(scenario *sc, const char *fmt, ...) {
  if (sc->failures++ == 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sc->why, sizeof sc->why, fmt, ap);
    va_end(ap);
  }
}

static void fill_input(scenario *sc, job *j) {
  size_t es = es_of(sc->dtype);
  uint64_t total = (uint64_t)sc->rounds * sc->count;
  j->in = malloc(total * es);
  j->buf = malloc(total * es);
  sim_rng *rng = sim_rand(sc->s);
  for (int r = 0; r < sc->rounds; r++) {
    double scale = (double)(1 << sim_rng_range(rng, 0, 6));
    for (uint64_t e = (uint64_t)r * sc->count; e < (uint64_t)(r + 1) * sc->count; e++) {
      double v = (sim_rng_unit(rng) * 2.0 - 1.0) * scale;
      if (sc->dtype == DED_DTYPE_F32)
        ((float *)j->in)[e] = (float)v;
      else
        ((double *)j->in)[e] = v;
    }
  }
  memcpy(j->buf, j->in, total * es);
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* The job's all-reduces: a bucket each, or each step cut at up to
 * 2 x buckets random points of its own. */
static void plan_calls(scenario *sc, job *j, sim_rng *pick) {
  int steps = (sc->rounds + sc->buckets - 1) / sc->buckets;
  j->ncalls = 0;
  for (int st = 0; st < steps; st++) {
    uint64_t a = (uint64_t)st * sc->buckets * sc->count;
    uint64_t b = (uint64_t)DED_MIN(sc->rounds, (st + 1) * sc->buckets) * sc->count;
    uint64_t cut[2 * MAX_ROUNDS + 2];
    int n = 0;
    cut[n++] = a;
    if (!sc->cuts) {
      for (uint64_t c = a + sc->count; c < b; c += sc->count) cut[n++] = c;
    } else if (b - a > 1) {
      int k = (int)sim_rng_range(pick, 0, (uint64_t)(2 * sc->buckets));
      for (int i = 0; i < k; i++) cut[n++] = sim_rng_range(pick, a + 1, b - 1);
      qsort(cut, (size_t)n, sizeof cut[0], cmp_u64);
      int u = 1; /* distinct */
      for (int i = 1; i < n; i++)
        if (cut[i] != cut[u - 1]) cut[u++] = cut[i];
      n = u;
    }
    cut[n] = b;
    for (int i = 0; i < n; i++)
      j->calls[j->ncalls++] = (ar_call){cut[i], cut[i + 1] - cut[i], st, false};
  }
}

static void submit_next(scenario *sc, job *j) {
  int c = j->submitted;
  size_t es = es_of(sc->dtype);
  ded_round_args a = {(uint8_t *)j->buf + j->calls[c].start * es, j->calls[c].len, sc->dtype,
                      j->weight, j->n_local, (void *)(intptr_t)c,
                      (uint64_t)sc->buckets * sc->count};
  /* Counted first: the round may finish inside the call (alone). */
  j->submitted++;
  j->inflight++;
  int64_t no = ded_node_round_submit(sim_node(sc->s, j->node), &a, sim_now(sc->s));
  if (no < 0) fail(sc, "node %d: submit of all-reduce %d: %s", j->node, c, ded_strerror((int)no));
}

/* A step: submit an all-reduce; the rest of the step's follow after small
 * gaps, all of them in flight at once if the gaps are short enough. */
static void hook_timer(void *user, int node, uint64_t tag) {
  scenario *sc = user;
  job *j = &sc->jobs[node];
  if (tag == TAG_LEAVE) {
    ded_node_leave(sim_node(sc->s, node), sim_now(sc->s));
    return;
  }
  if (j->submitted >= j->ncalls) return;
  int step = j->calls[j->submitted].step;
  if (j->inflight > 0 && j->calls[j->submitted - 1].step != step) return; /* the step before is on */
  submit_next(sc, j);
  if (j->submitted < j->ncalls && j->calls[j->submitted].step == step)
    sim_at(sc->s, node, sim_now(sc->s) + sim_rng_range(sim_rand(sc->s), 0, 2000000), 0);
}

/* Compute time before a step: random, or a long stall once. */
static uint64_t step_delay(scenario *sc, job *j) {
  uint64_t d = sim_rng_range(sim_rand(sc->s), 0, sc->compute_max_ns);
  if (j->node == sc->staller && j->steps_started == sc->stall_step) d += sc->stall_ns;
  j->steps_started++;
  return d;
}

static void hook_started(void *user, int node) {
  scenario *sc = user;
  sim_at(sc->s, node, sim_now(sc->s) + step_delay(sc, &sc->jobs[node]), 0);
}

static void hook_round_done(void *user, int node, void *ctx, const ded_round_result *res) {
  scenario *sc = user;
  job *j = &sc->jobs[node];
  int c = (int)(intptr_t)ctx;
  if (c < 0 || c >= j->submitted || j->calls[c].done) {
    fail(sc, "node %d: a round of all-reduce %d reported after it ended", node, c);
    return;
  }
  if (j->nout == MAX_RECS) {
    fail(sc, "node %d: more than %d rounds", node, MAX_RECS);
    return;
  }
  round_out *o = &j->out[j->nout];
  o->seq = j->nout++;
  o->call = c;
  o->status = res->status;
  o->res = *res;
  o->res.members = NULL;
  o->done_ns = sim_now(sc->s);
  if (res->members && res->contributors <= MAX_NODES)
    memcpy(o->members, res->members, (size_t)res->contributors * DED_ID_BYTES);
  if (!res->last) return;
  ar_call *cl = &j->calls[c];
  cl->done = true;
  sim_digest_add(sc->s, (uint8_t *)j->buf + cl->start * es_of(sc->dtype),
                 cl->len * es_of(sc->dtype));
  j->inflight--;
  j->completed++;
  /* A job that is done finalizes at once, as a real trainer does, while
   * others may still be finishing the same round. */
  if (j->completed == j->ncalls) sim_at(sc->s, node, sim_now(sc->s), TAG_LEAVE); /* not from a callback */
  /* Next step once the whole step is in. */
  if (j->inflight == 0 && j->submitted < j->ncalls)
    sim_at(sc->s, node, sim_now(sc->s) + step_delay(sc, j), 0);
  bool all = true;
  for (int i = 0; i < sc->n; i++) all &= sc->jobs[i].completed == sc->jobs[i].ncalls;
  if (all) sim_stop(sc->s);
}

static void hook_log(void *user, int node, int level, const char *line) {
  scenario *sc = user;
  if (sc->verbose) printf("%12.6f n%-2d %d %s\n", (double)sim_now(sc->s) / 1e9, node, level, line);
}

/* Node index of peer id |id|, or -1. */
static int node_of(scenario *sc, const uint8_t *id) {
  for (int i = 0; i < sc->n; i++)
    if (memcmp(ded_node_id(sim_node(sc->s, i)), id, DED_ID_BYTES) == 0) return i;
  return -1;
}

/* The reference for job |j| at stream element |e| in a round of
 * contributors |order|: in commit order, acc = a_0 x_0 + a_1 x_1 + ...,
 * g = acc / W, out = n_j * g. */
static bool check_elem(scenario *sc, uint64_t round, const int *order, unsigned k, const job *j,
                       uint64_t e) {
  double W = 0;
  for (unsigned m = 0; m < k; m++) W += sc->jobs[order[m]].weight;
  if (sc->dtype == DED_DTYPE_F32) {
    float acc = 0;
    for (unsigned m = 0; m < k; m++) {
      const job *c = &sc->jobs[order[m]];
      float a = (float)(c->weight / (double)c->n_local);
      float x = ((const float *)c->in)[e];
      acc = m == 0 ? a * x : acc + a * x;
    }
    float want = (float)j->n_local * (acc / (float)W), got = ((const float *)j->buf)[e];
    if (memcmp(&got, &want, sizeof got) == 0) return true;
    fail(sc, "round %" PRIu64 " node %d elem %" PRIu64 ": got %.9g want %.9g", round, j->node, e,
         got, want);
  } else {
    double acc = 0;
    for (unsigned m = 0; m < k; m++) {
      const job *c = &sc->jobs[order[m]];
      double a = c->weight / (double)c->n_local;
      double x = ((const double *)c->in)[e];
      acc = m == 0 ? a * x : acc + a * x;
    }
    double want = (double)j->n_local * (acc / W), got = ((const double *)j->buf)[e];
    if (memcmp(&got, &want, sizeof got) == 0) return true;
    fail(sc, "round %" PRIu64 " node %d elem %" PRIu64 ": got %.17g want %.17g", round, j->node,
         e, got, want);
  }
  return false;
}

static int cmp_round(const void *a, const void *b) {
  uint64_t x = ((const round_out *)a)->res.round, y = ((const round_out *)b)->res.round;
  return x < y ? -1 : x > y;
}

/* Coverage: job |j|'s rounds, in round order (a round that finds itself
 * out of step reports at once, before an earlier one still fetching),
 * tile its stream, each inside the all-reduce it names, and every
 * all-reduce ended with its last round. */
static void check_coverage(scenario *sc, job *j) {
  qsort(j->out, (size_t)j->nout, sizeof *j->out, cmp_round);
  uint64_t pos = 0;
  int call = 0;
  for (int i = 0; i < j->nout && !sc->failures; i++) {
    const round_out *o = &j->out[i];
    const ar_call *c = &j->calls[o->call];
    /* The last round of an all-reduce to report says so. */
    int latest = -1, lasts = 0;
    for (int q = 0; q < j->nout; q++)
      if (j->out[q].call == o->call) {
        latest = DED_MAX(latest, j->out[q].seq);
        lasts += j->out[q].res.last;
      }
    if (o->res.pos != pos || o->res.count == 0 || o->call != call ||
        o->res.pos != c->start + o->res.off || o->res.off + o->res.count > c->len ||
        lasts != 1 || o->res.last != (o->seq == latest) ||
        (i > 0 && o->res.round != j->out[i - 1].res.round + 1))
      fail(sc, "node %d: round %" PRIu64 " covers %" PRIu64 "+%" PRIu64 " of all-reduce %d "
           "(%" PRIu64 "+%" PRIu64 "), the stream is at %" PRIu64, j->node, o->res.round,
           o->res.pos, o->res.count, o->call, c->start, c->len, pos);
    pos += o->res.count;
    if (o->res.off + o->res.count == c->len) call++;
  }
  if (!sc->failures && call != j->ncalls)
    fail(sc, "node %d: %d of %d all-reduces ended", j->node, call, j->ncalls);
}

/* Agreement and validity of every round on every node. */
static void check_rounds(scenario *sc) {
  static const round_out *group[MAX_RECS];
  memset(group, 0, sizeof group);
  for (int i = 0; i < sc->n && !sc->failures; i++) {
    const job *j = &sc->jobs[i];
    for (int q = 0; q < j->nout && !sc->failures; q++) {
      const round_out *o = &j->out[q];
      uint64_t r = o->res.round;
      size_t bytes = o->res.count * es_of(sc->dtype);
      size_t at = o->res.pos * es_of(sc->dtype);
      if (o->res.alone) { /* alone or late: its own values, untouched */
        if (memcmp((const uint8_t *)j->in + at, (const uint8_t *)j->buf + at, bytes) != 0)
          fail(sc, "round %" PRIu64 " node %d: alone but buffer changed", r, i);
        continue;
      }
      if (r >= MAX_RECS) {
        fail(sc, "round %" PRIu64 ": beyond the check's table", r);
        return;
      }
      if (!group[r]) group[r] = o;
      const round_out *g = group[r];
      unsigned k = o->res.contributors;
      if (o->res.pos != g->res.pos || o->res.count != g->res.count ||
          k != g->res.contributors || memcmp(o->members, g->members, k * DED_ID_BYTES) != 0 ||
          o->res.total_weight != g->res.total_weight) {
        fail(sc, "round %" PRIu64 ": node %d disagrees on the elements (%" PRIu64 "+%" PRIu64
             " vs %" PRIu64 "+%" PRIu64 ") or the contributors (%u vs %u)",
             r, i, o->res.pos, o->res.count, g->res.pos, g->res.count, k, g->res.contributors);
        return;
      }
      int order[MAX_NODES];
      bool in_group = false;
      for (unsigned m = 0; m < k; m++) {
        order[m] = node_of(sc, o->members[m]);
        if (order[m] < 0) {
          fail(sc, "round %" PRIu64 ": unknown member", r);
          return;
        }
        in_group |= order[m] == i;
      }
      if (in_group == o->res.late) {
        fail(sc, "round %" PRIu64 ": node %d %s", r, i,
             in_group ? "is a contributor but says it came late"
                      : "fetched a result without coming late");
        return;
      }
      for (uint64_t e = o->res.pos; e < o->res.pos + o->res.count && !sc->failures; e++)
        check_elem(sc, r, order, k, j, e);
    }
  }
}

static int run_seed(uint64_t seed, bool verbose) {
  scenario *sc = calloc(1, sizeof *sc);
  sc->seed = seed;
  sc->verbose = verbose;
  sim_rng pick;
  sim_rng_seed(&pick, seed ^ 0x5eed5eed5eedull);
  sc->n = (int)sim_rng_range(&pick, 1, MAX_NODES);
  if (sim_rng_chance(&pick, 0.3)) sc->n = (int)sim_rng_range(&pick, 2, 4);
  sc->rounds = (int)sim_rng_range(&pick, 1, MAX_ROUNDS);
  sc->buckets = (int)sim_rng_range(&pick, 1, 4);
  sc->dtype = sim_rng_chance(&pick, 0.5) ? DED_DTYPE_F32 : DED_DTYPE_F64;
  sc->count = sim_rng_range(&pick, 1, sim_rng_chance(&pick, 0.2) ? 40 : 3000);
  sc->compute_max_ns = sim_rng_range(&pick, 0, 50) * 1000000ull;
  sc->round_timeout_ns = 30ull * 1000000000ull;
  sc->staller = -1;
  int steps = (sc->rounds + sc->buckets - 1) / sc->buckets;
  if (sc->n >= 2 && steps >= 3 && sim_rng_chance(&pick, 0.25)) {
    sc->staller = (int)sim_rng_range(&pick, 0, (uint64_t)sc->n - 1);
    sc->stall_step = (int)sim_rng_range(&pick, 1, (uint64_t)steps - 2);
    sc->stall_ns = sim_rng_range(&pick, 2000, 8000) * 1000000ull;
  }
  sim_link_params lp;
  memset(&lp, 0, sizeof lp);
  lp.latency_ns = sim_rng_range(&pick, 10, 30000) * 1000ull; /* 10 us .. 30 ms */
  lp.jitter_ns = sim_rng_range(&pick, 0, 20000) * 1000ull;   /* 0 .. 20 ms */
  lp.segment_max = (uint32_t)sim_rng_range(&pick, 1, sim_rng_chance(&pick, 0.3) ? 64 : 20000);
  sim_hooks hooks = {sc, hook_round_done, hook_started, hook_timer, hook_log, NULL, NULL, NULL};
  sc->s = sim_new(seed, sc->n, &lp, &hooks);
  if (opt_trace) sim_trace(sc->s, stdout);
  for (int i = 0; i < sc->n; i++) {
    job *j = &sc->jobs[i];
    j->node = i;
    j->n_local = 1u << sim_rng_range(&pick, 0, 2);
    j->weight = sim_rng_chance(&pick, 0.5) ? (double)j->n_local
                                           : (double)sim_rng_range(&pick, 1, 1000) / 8.0;
    sim_node_params p;
    memset(&p, 0, sizeof p);
    p.settings.run = "sim";
    p.settings.min_peers = (uint32_t)sc->n;
    p.settings.bootstrap_timeout_ns = 60ull * 1000000000ull;
    p.settings.rendezvous_timeout_ns = 60ull * 1000000000ull;
    p.settings.round_timeout_ns = sc->round_timeout_ns;
    p.settings.chunk_bytes = (uint32_t)sim_rng_range(&pick, 64, 4096);
    p.settings.streams = (uint8_t)(1 + i % 3);
    p.settings.probe_bytes = i % 4 == 1 ? 64u * 1024u : 0; /* a link probe at join */
    p.settings.log_level = verbose ? DED_LOG_DEBUG : DED_LOG_ERROR;
    /* Bootstrap through an earlier node (or ourselves: the first peer may
     * list its own address, as a shared DEDMPI_JOIN does). */
    if (i > 0 || sim_rng_chance(&pick, 0.5)) {
      p.settings.bootstrap[0] = sim_node_addr(i == 0 ? 0 : (int)sim_rng_range(&pick, 0, (uint64_t)i - 1));
      p.settings.n_bootstrap = 1;
      if (i > 1 && sim_rng_chance(&pick, 0.3)) {
        p.settings.bootstrap[1] = sim_node_addr((int)sim_rng_range(&pick, 0, (uint64_t)sc->n - 1));
        p.settings.n_bootstrap = 2;
      }
    }
    p.start_ns = sim_rng_range(&pick, 0, 300) * 1000000ull;
    p.uplink_bytes_per_s = (double)sim_rng_range(&pick, 1, 100) * 1e6;
    sim_node_setup(sc->s, i, &p);
  }
  /* Drawn last: the draws above are those of every seed before cuts. */
  sc->cuts = sc->n >= 2 && sim_rng_chance(&pick, 0.5);
  for (int i = 0; i < sc->n; i++) {
    job *j = &sc->jobs[i];
    plan_calls(sc, j, &pick);
    fill_input(sc, j);
    j->out = calloc(MAX_RECS, sizeof *j->out);
  }
  const uint64_t bound_ns = 600ull * 1000000000ull;
  sim_run(sc->s, bound_ns);
  for (int i = 0; i < sc->n && !sc->failures; i++) {
    job *j = &sc->jobs[i];
    if (j->completed != j->ncalls)
      fail(sc, "liveness: node %d: %d of %d all-reduces done by %.0f s", i, j->completed,
           j->ncalls, (double)bound_ns / 1e9);
    for (int q = 0; q < j->nout && !sc->failures; q++) {
      const round_out *o = &j->out[q];
      if (o->status != 0)
        fail(sc, "node %d round %" PRIu64 " failed: %s", i, o->res.round, ded_strerror(o->status));
      else if (sc->staller < 0 && (int)o->res.contributors != sc->n)
        fail(sc, "node %d round %" PRIu64 ": %u contributors of %d", i, o->res.round,
             o->res.contributors, sc->n);
    }
    if (!sc->failures) check_coverage(sc, j);
  }
  /* The stall (seconds, against deadlines learned in milliseconds) must
   * have cost the staller a round: the swarm went on without it, and it
   * fetched that round's result, or found everyone gone. */
  if (sc->staller >= 0 && sc->n >= 3 && !sc->failures) { /* two: no majority without it */
    const job *j = &sc->jobs[sc->staller];
    bool late = false;
    for (int q = 0; q < j->nout; q++) late |= j->out[q].res.late || j->out[q].res.alone;
    if (!late) fail(sc, "node %d stalled but the swarm waited for it", sc->staller);
  }
  if (!sc->failures) check_rounds(sc);
  /* The goodbyes must flow without incident. */
  sim_run(sc->s, sim_now(sc->s) + 10ull * 1000000000ull);
  int rv = sc->failures ? 1 : 0;
  if (opt_digest) printf("seed %" PRIu64 " digest %016" PRIx64 "\n", seed, sim_digest(sc->s));
  if (rv)
    printf("FAIL seed=%" PRIu64 " nodes=%d rounds=%d buckets=%d cuts=%d dtype=%u count=%" PRIu64
           " staller=%d: %s\n"
           "  replay: sim_avg --seed %" PRIu64 " -v\n",
           seed, sc->n, sc->rounds, sc->buckets, sc->cuts, sc->dtype, sc->count, sc->staller,
           sc->why, seed);
  else if (verbose)
    printf("ok seed=%" PRIu64 " nodes=%d rounds=%d events=%" PRIu64 " t=%.3fs\n", seed, sc->n,
           sc->rounds, sim_events(sc->s), (double)sim_now(sc->s) / 1e9);
  for (int i = 0; i < sc->n; i++) {
    free(sc->jobs[i].in);
    free(sc->jobs[i].buf);
    free(sc->jobs[i].out);
  }
  sim_free(sc->s);
  free(sc);
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
    else if (!strcmp(argv[i], "--digest"))
      opt_digest = true;
    else if (!strcmp(argv[i], "--trace"))
      opt_trace = true;
    else {
      fprintf(stderr, "usage: %s [--seeds N] [--first S] [--seed S] [--digest] [--trace] [-v]\n",
              argv[0]);
      return 2;
    }
  }
  if (one) seeds = 1;
  int failed = 0;
  for (uint64_t s = first; s < first + seeds; s++) failed += run_seed(s, verbose);
  printf("sim_avg: %" PRIu64 " seeds, %d failed\n", seeds, failed);
  return failed ? 1 : 0;
}
