/*
 * lp_bench.c: how long the coordinator's plan takes (lp/ded_lp).
 *
 *   lp_bench [--reps R]
 *
 * For 16, 64 and 256 peers of mixed kinds (60 % nodes, 20 % clients,
 * 20 % aux, links over three orders of magnitude, from a fixed seed), the
 * median time of ded_lp_plan over R solves (default 21), one line each:
 *   lp peers=<n> solve_ms=<median> target_ms=50 optimal=<0|1>
 * The coordinator solves once per round, on its own thread of the driver.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/ded_types.h"
#include "lp/ded_lp.h"

static uint64_t seed = 0x853c49e6748fea9bull;
static double unit_rand(void) {
  seed = seed * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(seed >> 11) / 9007199254740992.0;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  int reps = 21;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc && atoi(argv[i + 1]) > 0) {
      reps = atoi(argv[++i]);
    } else {
      fprintf(stderr, "usage: lp_bench [--reps R]\n");
      return 2;
    }
  }
  const unsigned sizes[] = {16, 64, 256};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    unsigned n = sizes[s];
    ded_lp_peer *p = calloc(n, sizeof *p);
    double *w = calloc(n, sizeof *w), *ms = calloc((size_t)reps, sizeof *ms);
    if (!p || !w || !ms) return 1;
    for (unsigned i = 0; i < n; i++) {
      double r = unit_rand();
      p[i].mode = i == 0 || r < 0.6 ? DED_MODE_NODE : r < 0.8 ? DED_MODE_CLIENT : DED_MODE_AUX;
      p[i].up_Bps = 125e3 * (1 + 999 * unit_rand());
      p[i].down_Bps = p[i].up_Bps * (1 + 4 * unit_rand());
    }
    int optimal = 1;
    for (int r = 0; r < reps; r++) {
      ded_lp_result res;
      double t = now_ms();
      ded_lp_plan(p, n, w, &res);
      ms[r] = now_ms() - t;
      optimal &= res.fallback == DED_LP_E_NONE;
    }
    qsort(ms, (size_t)reps, sizeof *ms, cmp_double);
    printf("lp peers=%u solve_ms=%.3f target_ms=50 optimal=%d\n", n, ms[reps / 2], optimal);
    free(p);
    free(w);
    free(ms);
  }
  return 0;
}
