/*
 * sim_recovery.c: what a failure costs a round, measured in the simulator.
 *
 * A swarm of |n| nodes with equal uplinks averages a vector over and over.
 * Three kinds of round are timed from the last submission to the last
 * survivor's completion:
 *
 *   clean     nothing happens;
 *   reducer   a member (hence a reducer: every member reduces a shard) is
 *             SIGKILLed halfway through the clean round's time;
 *   stall     a member is frozen halfway through, for the rest of the run.
 *
 * and printed as ratios to the clean round (the target for the
 * killed reducer: <= 2.0), each the median over several seeds. The
 * simulator is deterministic, so the figures are too: they measure the
 * protocol (detection, failover, a new attempt), not the machine.
 *
 * Usage: sim_recovery [--nodes N] [--mib M] [--mbps B] [--seeds S]
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

#define MS 1000000ull
#define SEC 1000000000ull

typedef struct bench {
  sim *s;
  int n;
  uint64_t count;
  float **buf;
  int submitted, done, target_round;
  uint64_t submit_ns, last_done_ns;
  int victim;
  int kind; /* 0 clean, 1 kill, 2 freeze */
  uint64_t fault_after_ns;
  bool fault_done;
} bench;

enum { ROUNDS_WARM = 3 };

static void submit_all(bench *b, int round) {
  b->submit_ns = sim_now(b->s);
  b->done = 0;
  for (int i = 0; i < b->n; i++) {
    if (!sim_up(b->s, i)) continue;
    ded_round_args a = {b->buf[i], b->count, DED_DTYPE_F32, 1.0, 1, (void *)(intptr_t)round, 0};
    ded_node_round_submit(sim_node(b->s, i), &a, sim_now(b->s));
  }
}

static int live(bench *b) {
  int k = 0;
  for (int i = 0; i < b->n; i++) k += sim_up(b->s, i) && !(b->kind == 2 && i == b->victim && b->fault_done);
  return k;
}

static void on_done(void *user, int node, void *ctx, const ded_round_result *res) {
  bench *b = user;
  (void)node;
  (void)res;
  int round = (int)(intptr_t)ctx;
  if (round != b->submitted - 1) return;
  if (++b->done < live(b)) return;
  b->last_done_ns = sim_now(b->s);
  if (b->submitted == b->target_round + 1) {
    sim_stop(b->s);
    return;
  }
  sim_at(b->s, -1, sim_now(b->s) + 10 * MS, 1);
}

static void on_timer(void *user, int node, uint64_t tag) {
  bench *b = user;
  (void)node;
  if (tag == 2) { /* the fault */
    b->fault_done = true;
    if (b->kind == 1) sim_crash(b->s, b->victim);
    if (b->kind == 2) sim_freeze(b->s, b->victim, UINT64_MAX / 2);
    return;
  }
  int round = b->submitted++;
  submit_all(b, round);
  if (round == b->target_round && b->kind != 0)
    sim_at(b->s, -1, sim_now(b->s) + b->fault_after_ns, 2);
}

static void on_started(void *user, int node) {
  bench *b = user;
  if (node == b->n - 1) sim_at(b->s, -1, sim_now(b->s) + 2 * SEC, 1);
}

/* Seconds of round ROUNDS_WARM, with fault |kind| at |after_ns|. */
static double run(int n, uint64_t count, double bps, int kind, uint64_t after_ns, uint64_t seed) {
  bench b;
  memset(&b, 0, sizeof b);
  b.n = n;
  b.count = count;
  b.kind = kind;
  b.victim = 1;
  b.fault_after_ns = after_ns;
  b.target_round = ROUNDS_WARM;
  sim_link_params lp;
  memset(&lp, 0, sizeof lp);
  lp.latency_ns = 10 * MS; /* a WAN: 20 ms round trips */
  lp.jitter_ns = 1 * MS;
  lp.segment_max = 64 * 1024;
  sim_hooks hooks = {&b, on_done, on_started, on_timer, NULL, NULL, NULL, NULL};
  b.s = sim_new(seed, n, &lp, &hooks);
  b.buf = calloc((size_t)n, sizeof *b.buf);
  for (int i = 0; i < n; i++) {
    b.buf[i] = calloc(count, sizeof(float));
    for (uint64_t e = 0; e < count; e++) b.buf[i][e] = (float)(i + 1);
    sim_node_params p;
    memset(&p, 0, sizeof p);
    sim_bench_settings(&p.settings, n);
    p.settings.chunk_bytes = 256 * 1024;
    p.settings.log_level = DED_LOG_ERROR;
    if (i > 0) {
      p.settings.bootstrap[0] = sim_node_addr(0);
      p.settings.n_bootstrap = 1;
    }
    p.start_ns = (uint64_t)i * MS;
    p.uplink_bytes_per_s = bps;
    sim_node_setup(b.s, i, &p);
  }
  sim_run(b.s, 3600 * SEC);
  double t = b.submitted == b.target_round + 1 && b.last_done_ns > b.submit_ns
                 ? (double)(b.last_done_ns - b.submit_ns) / 1e9
                 : -1.0;
  sim_free(b.s);
  for (int i = 0; i < n; i++) free(b.buf[i]);
  free(b.buf);
  return t;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  int n = 8, seeds = 5;
  double mib = 64, mbps = 100;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--nodes")) n = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--mib")) mib = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--mbps")) mbps = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--seeds")) seeds = atoi(argv[i + 1]);
    else {
      fprintf(stderr, "usage: %s [--nodes N] [--mib M] [--mbps B] [--seeds S]\n", argv[0]);
      return 2;
    }
  }
  if (n < 3 || n > 64 || seeds < 1 || seeds > 99 || mib <= 0 || mbps <= 0) {
    fprintf(stderr, "sim_recovery: need 3..64 nodes, 1..99 seeds, positive sizes\n");
    return 2;
  }
  uint64_t count = (uint64_t)(mib * 1024 * 1024 / 4);
  double bps = mbps * 1e6 / 8;
  double clean[99], kill[99], stall[99];
  for (int s = 0; s < seeds; s++) {
    clean[s] = run(n, count, bps, 0, 0, 100 + (uint64_t)s);
    uint64_t half = (uint64_t)(clean[s] / 2 * 1e9);
    kill[s] = run(n, count, bps, 1, half, 100 + (uint64_t)s) / clean[s];
    stall[s] = run(n, count, bps, 2, half, 100 + (uint64_t)s) / clean[s];
  }
  qsort(clean, (size_t)seeds, sizeof *clean, cmp_double);
  qsort(kill, (size_t)seeds, sizeof *kill, cmp_double);
  qsort(stall, (size_t)seeds, sizeof *stall, cmp_double);
  printf("sim_recovery: %d nodes, %.0f MiB float32, %.0f Mbit/s uplinks, 20 ms RTT, %d seeds\n", n,
         mib, mbps, seeds);
  printf("  clean round                    %.3f s (median)\n", clean[seeds / 2]);
  printf("  reducer killed mid-round       ratio %.2f  (target <= 2.0)\n", kill[seeds / 2]);
  printf("  member stalled mid-round       ratio %.2f\n", stall[seeds / 2]);
  return 0;
}
