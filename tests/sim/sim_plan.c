/*
 * sim_plan.c: adaptive averaging end to end in the simulator.
 *
 * The WAN lab's heterogeneous topology: four nodes, two on 100/100 Mbit/s
 * links and two home links (10 Mbit/s up, 50 down), 30 ms apart, four
 * streams per pair, average a 32 MiB vector round after round. Nothing is
 * declared: each node measures its links from its own traffic and
 * publishes the rates in its record, and every coordinator plans the round
 * with the DeDLOC program. The first round is planned before any rate is
 * known, so on equal shares: a home node then uploads for about 40 s, the
 * last seconds of it with nothing left to receive. Checked, for each seed:
 *
 *   - every round completes with all four nodes (none left out by a
 *     failover, none late);
 *   - each node's published upload rate is within 25 % of its uplink;
 *   - once the rates are known, the plans give the slow nodes (almost)
 *     nothing to reduce, and the fast ones about half each;
 *   - every node ends every round with the same bytes, the exact mean;
 *   - the rounds take at most 0.8x as long as the same swarm with equal
 *     shares (DED_PLAN_EQUAL), which the closed form puts at 1/1.5.
 *
 * Usage: sim_plan [--seeds S] [--first F] [-v]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

#define MS 1000000ull
#define SEC 1000000000ull
#define N 4
#define COUNT (8u * 1024u * 1024u) /* 32 MiB of float */
#define ROUNDS 5
#define WARM 2 /* rounds before the timed ones: rates measured and published */

static const double uplink_mbit[N] = {100, 100, 10, 10}, downlink_mbit[N] = {100, 100, 50, 50};

typedef struct run {
  sim *s;
  float *buf[N];
  int submitted, done;
  uint64_t submit_ns, timed_ns;
  bool bad;
  /* The latest plan line any coordinator logged (one per change). */
  char plan[512];
  bool verbose;
} run;

static void submit_all(run *r) {
  int round = r->submitted++;
  r->submit_ns = sim_now(r->s);
  r->done = 0;
  for (int i = 0; i < N; i++) {
    for (uint32_t e = 0; e < COUNT; e++) r->buf[i][e] = (float)((i + 1) * (e % 7 + 1) + round);
    ded_round_args a = {r->buf[i], COUNT, DED_DTYPE_F32, 1.0, 1, (void *)(intptr_t)round, 0};
    ded_node_round_submit(sim_node(r->s, i), &a, sim_now(r->s));
  }
}

static void on_done(void *user, int node, void *ctx, const ded_round_result *res) {
  run *r = user;
  int round = (int)(intptr_t)ctx;
  if (res->status != 0 || res->alone || res->contributors != N) {
    fprintf(stderr, "node %d round %d: status %d alone %d contributors %u\n", node, round,
            res->status, res->alone, res->contributors);
    r->bad = true;
  }
  /* The mean of (i + 1) * (e % 7 + 1) + round over i = 0..3, times n_j = 1. */
  for (uint32_t e = 0; e < COUNT && !r->bad; e += 4099) {
    float want = (float)(((1 + 2 + 3 + 4) * (double)(e % 7 + 1) + 4.0 * round) / 4.0);
    if (r->buf[node][e] != want) {
      fprintf(stderr, "node %d round %d: element %u is %g, want %g\n", node, round, e,
              r->buf[node][e], want);
      r->bad = true;
    }
  }
  if (++r->done < N) return;
  for (int i = 1; i < N && !r->bad; i++)
    if (memcmp(r->buf[i], r->buf[0], COUNT * sizeof(float)) != 0) {
      fprintf(stderr, "round %d: node %d's result differs from node 0's\n", round, i);
      r->bad = true;
    }
  if (round >= WARM) r->timed_ns += sim_now(r->s) - r->submit_ns;
  if (r->submitted == ROUNDS || r->bad) {
    sim_stop(r->s);
    return;
  }
  sim_at(r->s, -1, sim_now(r->s) + 10 * MS, 1);
}

static void on_timer(void *user, int node, uint64_t tag) {
  (void)node;
  (void)tag;
  submit_all(user);
}

static void on_started(void *user, int node) {
  run *r = user;
  if (node == N - 1) sim_at(r->s, -1, sim_now(r->s) + 2 * SEC, 1);
}

static void on_log(void *user, int node, int level, const char *line) {
  run *r = user;
  (void)level;
  if (r->verbose) fprintf(stderr, "%.3f [%d] %s\n", sim_now(r->s) / 1e9, node, line);
  unsigned long long round;
  if (sscanf(line, "round %llu: plan", &round) == 1 && strstr(line, ": plan "))
    snprintf(r->plan, sizeof r->plan, "%s", line);
}

/* Seconds per timed round; -1 on failure. */
static double run_swarm(uint64_t seed, uint8_t plan, bool verbose, uint32_t up_kBps[N],
                        double share[N]) {
  run r;
  memset(&r, 0, sizeof r);
  r.verbose = verbose;
  sim_link_params lp = sim_scenario_link(30 * MS);
  sim_hooks hooks = {&r, on_done, on_started, on_timer, on_log, NULL, NULL, NULL};
  r.s = sim_new(seed, N, &lp, &hooks);
  for (int i = 0; i < N; i++) {
    r.buf[i] = calloc(COUNT, sizeof(float));
    sim_node_params p;
    sim_scenario_node(&p, i, N, uplink_mbit[i], downlink_mbit[i]);
    p.settings.streams = 4;
    p.settings.plan = plan;
    if (verbose) p.settings.log_level = DED_LOG_DEBUG;
    sim_node_setup(r.s, i, &p);
  }
  sim_run(r.s, 600 * SEC);
  double t = !r.bad && r.submitted == ROUNDS && r.done == N
                 ? (double)r.timed_ns / 1e9 / (ROUNDS - WARM)
                 : -1.0;
  for (int i = 0; i < N; i++) {
    uint32_t down;
    ded_node_rates(sim_node(r.s, i), &up_kBps[i], &down);
    char sid[9];
    ded_id_short(ded_node_id(sim_node(r.s, i)), sid);
    share[i] = sim_plan_share(r.plan, sid);
  }
  if (verbose) fprintf(stderr, "last plan: %s\n", r.plan);
  sim_free(r.s);
  for (int i = 0; i < N; i++) free(r.buf[i]);
  return t;
}

int main(int argc, char **argv) {
  int seeds = 3, first = 1;
  bool verbose = false;
  if (sim_seed_args(argc, argv, "sim_plan", &seeds, &first, &verbose)) return 2;
  int failed = 0;
  for (int seed = first; seed < first + seeds; seed++) {
    uint32_t up[N], up_eq[N];
    double share[N], share_eq[N];
    double t_lp = run_swarm((uint64_t)seed, DED_PLAN_LP, verbose, up, share);
    double t_eq = run_swarm((uint64_t)seed, DED_PLAN_EQUAL, false, up_eq, share_eq);
    bool ok = t_lp > 0 && t_eq > 0 && t_lp <= 0.8 * t_eq;
    for (int i = 0; i < N; i++) {
      double want = uplink_mbit[i] * 1e3 / 8;
      ok = ok && fabs(up[i] - want) <= 0.25 * want;
      ok = ok && (uplink_mbit[i] < 50 ? share[i] >= 0 && share[i] <= 5.0
                                      : share[i] >= 40.0 && share[i] <= 60.0);
    }
    printf("sim_plan seed %d: lp %.3f s, equal %.3f s, ratio %.2f; up kB/s %u %u %u %u; "
           "shares %% %.1f %.1f %.1f %.1f: %s\n",
           seed, t_lp, t_eq, t_eq > 0 ? t_lp / t_eq : 0.0, up[0], up[1], up[2], up[3], share[0],
           share[1], share[2], share[3], ok ? "ok" : "FAILED");
    failed += !ok;
  }
  return failed ? 1 : 0;
}
