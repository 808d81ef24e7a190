/*
 * sim_modes.c: client and aux peers end to end in the simulator.
 *
 * Six peers average a 1 MiB vector round after round: two nodes, three
 * clients (no inbound connections: no one, other clients included, can
 * call them) and one aux peer (reduces, brings no vector: its buffer holds
 * garbage that must not reach the mean). Ids, and so who would coordinate
 * by the plain rule, change with every seed. Checked, for each seed:
 *
 *   - every round completes everywhere with the four contributors (the
 *     nodes and the clients), none alone and none late;
 *   - every peer, the aux one included, ends every round with the same
 *     bytes, the exact mean of the contributors' vectors;
 *   - the plans give every client an empty shard and the aux peer a share;
 *   - no client ever coordinates a round.
 *
 * Usage: sim_modes [--seeds S] [--first F] [-v]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

#define MS 1000000ull
#define SEC 1000000000ull
#define N 6
#define COUNT (256u * 1024u) /* 1 MiB of float */
#define ROUNDS 8

static const uint8_t mode[N] = {DED_MODE_NODE,   DED_MODE_CLIENT, DED_MODE_CLIENT,
                                DED_MODE_NODE,   DED_MODE_AUX,    DED_MODE_CLIENT};
static const double uplink_mbit[N] = {100, 20, 20, 50, 200, 10};
#define CONTRIBUTORS 5 /* every peer but the aux one */

typedef struct run {
  sim *s;
  float *buf[N];
  char sid[N][9];
  int submitted, done;
  bool bad;
  unsigned plans;   /* plan lines seen */
  bool aux_reduced; /* some plan gave the aux peer a share */
  bool verbose;
} run;

static void submit_all(run *r) {
  int round = r->submitted++;
  r->done = 0;
  for (int i = 0; i < N; i++) {
    for (uint32_t e = 0; e < COUNT; e++)
      r->buf[i][e] = mode[i] == DED_MODE_AUX ? 1e30f : (float)((i + 1) * (e % 7 + 1) + round);
    ded_round_args a = {r->buf[i], COUNT, DED_DTYPE_F32, 1.0, 1, (void *)(intptr_t)round, 0};
    ded_node_round_submit(sim_node(r->s, i), &a, sim_now(r->s));
  }
}

static void on_done(void *user, int node, void *ctx, const ded_round_result *res) {
  run *r = user;
  int round = (int)(intptr_t)ctx;
  if (res->status != 0 || res->alone || res->late || res->contributors != CONTRIBUTORS) {
    fprintf(stderr, "peer %d round %d: status %d alone %d late %d contributors %u\n", node, round,
            res->status, res->alone, res->late, res->contributors);
    r->bad = true;
  }
  double sum_i = 0.0;
  for (int i = 0; i < N; i++) sum_i += mode[i] == DED_MODE_AUX ? 0 : i + 1;
  for (uint32_t e = 0; e < COUNT && !r->bad; e += 997) {
    float want = (float)((sum_i * (double)(e % 7 + 1) + CONTRIBUTORS * (double)round) / CONTRIBUTORS);
    if (r->buf[node][e] != want) {
      fprintf(stderr, "peer %d round %d: element %u is %g, want %g\n", node, round, e,
              r->buf[node][e], want);
      r->bad = true;
    }
  }
  if (++r->done < N) return;
  for (int i = 1; i < N && !r->bad; i++)
    if (memcmp(r->buf[i], r->buf[0], COUNT * sizeof(float)) != 0) {
      fprintf(stderr, "round %d: peer %d's result differs from peer 0's\n", round, i);
      r->bad = true;
    }
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
  ded_id_short(ded_node_id(sim_node(r->s, node)), r->sid[node]);
  if (node == N - 1) sim_at(r->s, -1, sim_now(r->s) + 2 * SEC, 1);
}

static void on_log(void *user, int node, int level, const char *line) {
  run *r = user;
  (void)level;
  if (r->verbose) fprintf(stderr, "[%d] %s\n", node, line);
  unsigned long long round;
  if (sscanf(line, "round %llu: plan", &round) != 1 || !strstr(line, ": plan ")) return;
  r->plans++;
  if (mode[node] == DED_MODE_CLIENT) {
    fprintf(stderr, "client peer %d coordinated: %s\n", node, line);
    r->bad = true;
  }
  for (int i = 0; i < N; i++) {
    double share = sim_plan_share(line, r->sid[i]);
    if (share < 0 || (mode[i] == DED_MODE_CLIENT && share != 0.0)) {
      fprintf(stderr, "peer %d (%s): share %.1f%% in: %s\n", i, ded_mode_str(mode[i]), share, line);
      r->bad = true;
    }
    if (mode[i] == DED_MODE_AUX && share > 5.0) r->aux_reduced = true;
  }
}

static bool run_swarm(uint64_t seed, bool verbose) {
  run r;
  memset(&r, 0, sizeof r);
  r.verbose = verbose;
  sim_link_params lp = sim_scenario_link(5 * MS);
  sim_hooks hooks = {&r, on_done, on_started, on_timer, on_log, NULL, NULL, NULL};
  r.s = sim_new(seed, N, &lp, &hooks);
  for (int i = 0; i < N; i++) {
    r.buf[i] = calloc(COUNT, sizeof(float));
    sim_node_params p;
    sim_scenario_node(&p, i, N, uplink_mbit[i], 0);
    p.settings.mode = mode[i]; /* node 0 is a node: clients accept no one */
    sim_node_setup(r.s, i, &p);
  }
  sim_run(r.s, 300 * SEC);
  bool ok = !r.bad && r.submitted == ROUNDS && r.done == N && r.plans > 0 && r.aux_reduced;
  printf("sim_modes seed %llu: %d rounds, %u plans, aux reduced: %s; %s\n",
         (unsigned long long)seed, r.submitted, r.plans, r.aux_reduced ? "yes" : "no",
         ok ? "ok" : "FAILED");
  sim_free(r.s);
  for (int i = 0; i < N; i++) free(r.buf[i]);
  return ok;
}

int main(int argc, char **argv) {
  int seeds = 5, first = 1;
  bool verbose = false;
  if (sim_seed_args(argc, argv, "sim_modes", &seeds, &first, &verbose)) return 2;
  int failed = 0;
  for (int seed = first; seed < first + seeds; seed++) failed += !run_swarm((uint64_t)seed, verbose);
  return failed ? 1 : 0;
}
