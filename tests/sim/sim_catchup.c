/*
 * sim_catchup.c: a slow peer that falls behind once gets back in.
 *
 * Three nodes average a 4 MiB vector, each trainer submitting its next
 * round as soon as its last one returned: two on 100/100 Mbit/s links and
 * a home link (10 Mbit/s up, 50 down). In round HICCUP the home trainer
 * comes 1.5 s late (a slow step): the fast pair goes on without it, and it
 * fetches that round's result. Without it, the pair's rounds take about
 * 0.35 s, and fetching one takes the home link 0.7 s: a late member that
 * came back only when the swarm happened to wait for it would stay late
 * for good, fetching every result and contributing nothing. It announces
 * the round it will join, and the swarm waits for it. Checked, per seed:
 *
 *   - the home node contributes again within CATCHUP rounds of the
 *     hiccup, and in every round after that;
 *   - every node ends every round with the same bytes: the exact mean of
 *     that round's contributors' vectors (the fast pair's when the home
 *     node was left out).
 *
 * Usage: sim_catchup [--seeds S] [--first F] [-v]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

#define MS 1000000ull
#define SEC 1000000000ull
#define N 3
#define HOME 2
#define COUNT (1024u * 1024u) /* 4 MiB of float */
#define ROUNDS 12
#define HICCUP 4
#define CATCHUP 3 /* rounds after the hiccup by which the home node is back */

static const double up_mbit[N] = {100, 100, 10}, down_mbit[N] = {100, 100, 50};

typedef struct run {
  sim *s;
  float *buf[N];
  int next[N];     /* the next round each trainer submits */
  int contrib[N][ROUNDS];
  uint64_t hash[N][ROUNDS];
  bool bad, verbose;
} run;

static float value(int node, uint32_t e, int round) {
  return (float)((node + 1) * (e % 7 + 1) + round);
}

static uint64_t fnv(const void *p, size_t n) {
  const uint8_t *b = p;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

static void submit(run *r, int node) {
  int round = r->next[node]++;
  for (uint32_t e = 0; e < COUNT; e++) r->buf[node][e] = value(node, e, round);
  ded_round_args a = {r->buf[node], COUNT, DED_DTYPE_F32, 1.0, 1, (void *)(intptr_t)round, 0};
  ded_node_round_submit(sim_node(r->s, node), &a, sim_now(r->s));
}

static void on_done(void *user, int node, void *ctx, const ded_round_result *res) {
  run *r = user;
  int round = (int)(intptr_t)ctx;
  r->contrib[node][round] = (int)res->contributors;
  if (res->status != 0 || res->alone || res->contributors < 2) {
    fprintf(stderr, "node %d round %d: status %d alone %d contributors %u\n", node, round,
            res->status, res->alone, res->contributors);
    r->bad = true;
  }
  /* The mean over the contributors: all three, or the fast pair. */
  int k = res->contributors == N ? N : 2;
  for (uint32_t e = 0; e < COUNT && !r->bad; e += 4099) {
    double sum = 0.0;
    for (int i = 0; i < k; i++) sum += value(i, e, round);
    float want = (float)(sum / k);
    if (r->buf[node][e] != want) {
      fprintf(stderr, "node %d round %d (%u contributors): element %u is %g, want %g\n", node,
              round, res->contributors, e, r->buf[node][e], want);
      r->bad = true;
    }
  }
  r->hash[node][round] = fnv(r->buf[node], COUNT * sizeof(float));
  if (r->verbose)
    fprintf(stderr, "%.3f s: node %d round %d done, %u contributors%s\n", sim_now(r->s) / 1e9,
            node, round, res->contributors, res->late ? " (late)" : "");
  bool all = true;
  for (int i = 0; i < N; i++) all = all && r->next[i] == ROUNDS && r->contrib[i][ROUNDS - 1];
  if (r->bad || all) {
    sim_stop(r->s);
    return;
  }
  if (r->next[node] == ROUNDS) return;
  /* A 10 ms step, and the home trainer's slow one. */
  uint64_t step = node == HOME && r->next[node] == HICCUP ? 1500 * MS : 10 * MS;
  sim_at(r->s, node, sim_now(r->s) + step, 1);
}

static void on_timer(void *user, int node, uint64_t tag) {
  (void)tag;
  submit(user, node);
}

static void on_started(void *user, int node) {
  run *r = user;
  sim_at(r->s, node, 2 * SEC, 1); /* once everyone is up */
}

static void on_log(void *user, int node, int level, const char *line) {
  (void)level;
  run *r = user;
  if (r->verbose) fprintf(stderr, "%.3f [%d] %s\n", sim_now(r->s) / 1e9, node, line);
}

/* 0: the home node came back and every result agrees. */
static int run_swarm(uint64_t seed, bool verbose) {
  run r;
  memset(&r, 0, sizeof r);
  r.verbose = verbose;
  sim_link_params lp = sim_scenario_link(10 * MS);
  sim_hooks hooks = {&r, on_done, on_started, on_timer, on_log, NULL, NULL, NULL};
  r.s = sim_new(seed, N, &lp, &hooks);
  for (int i = 0; i < N; i++) {
    r.buf[i] = calloc(COUNT, sizeof(float));
    sim_node_params p;
    sim_scenario_node(&p, i, N, up_mbit[i], down_mbit[i]);
    if (verbose) p.settings.log_level = DED_LOG_DEBUG;
    sim_node_setup(r.s, i, &p);
  }
  sim_run(r.s, 600 * SEC);
  int back = -1; /* the first round from which the home node always contributed */
  for (int k = ROUNDS - 1; k >= 0 && r.contrib[HOME][k] == N; k--) back = k;
  bool ok = !r.bad && back >= 0 && back <= HICCUP + CATCHUP;
  for (int k = 0; k < ROUNDS && ok; k++)
    for (int i = 0; i < N; i++)
      if (r.contrib[i][k] == 0 || r.hash[i][k] != r.hash[0][k]) {
        fprintf(stderr, "round %d: node %d %s\n", k, i,
                r.contrib[i][k] ? "ended with other bytes than node 0" : "never finished it");
        ok = false;
        break;
      }
  printf("sim_catchup seed %llu: contributors per round (home node):", (unsigned long long)seed);
  for (int k = 0; k < ROUNDS; k++) printf(" %d", r.contrib[HOME][k]);
  printf("; back in from round %d (hiccup in %d): %s\n", back, HICCUP, ok ? "ok" : "FAILED");
  sim_free(r.s);
  for (int i = 0; i < N; i++) free(r.buf[i]);
  return ok ? 0 : 1;
}

int main(int argc, char **argv) {
  int seeds = 3, first = 1;
  bool verbose = false;
  if (sim_seed_args(argc, argv, "sim_catchup", &seeds, &first, &verbose)) return 2;
  int failed = 0;
  for (int seed = first; seed < first + seeds; seed++) failed += run_swarm((uint64_t)seed, verbose);
  return failed ? 1 : 0;
}
