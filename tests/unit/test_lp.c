/*
 * test_lp.c: lp/ded_lp, the DeDLOC program that cuts a round among reducers.
 *
 * Checked against what is known in closed form (papers.md §1.2, §5): the
 * symmetric case T* = 2(n-1)/sum b with equal shares; water-filling for
 * unequal nodes, slow ones dropping to zero; the special cases the paper
 * names (all-reduce, parameter server, BytePS-style aux servers); clients
 * that reduce nothing; adding speed as a limit; and the safe plan when
 * there is nothing to solve.
 */
#include <math.h>
#include <stdio.h>

#include "unit_util.h"

#include "core/ded_types.h"
#include "lp/ded_lp.h"

#define N_MAX 64

static uint64_t lcg_state = 0x2545f4914f6cdd1dull;
static double lcg_unit(void) {
  lcg_state = lcg_state * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(lcg_state >> 11) / 9007199254740992.0;
}

static void peer_set(ded_lp_peer *p, double up, double down, uint8_t mode) {
  memset(p, 0, sizeof *p);
  p->up_Bps = up;
  p->down_Bps = down;
  p->mode = mode;
}

static void assert_near(double a, double b, double rel) {
  if (!(fabs(a - b) <= rel * fmax(fabs(a), fabs(b)) + 1e-15)) {
    fprintf(stderr, "expected %.12g, got %.12g\n", b, a);
    fail();
  }
}

/* Shares are a distribution; clients hold none. */
static void check_shares(const ded_lp_peer *p, unsigned n, const double *w) {
  double sum = 0.0;
  for (unsigned i = 0; i < n; i++) {
    assert_true(w[i] >= 0.0 && w[i] <= 1.0);
    if (p[i].mode == DED_MODE_CLIENT) assert_true(w[i] == 0.0);
    sum += w[i];
  }
  assert_near(sum, 1.0, 1e-9);
}

static void plan(const ded_lp_peer *p, unsigned n, double *w, ded_lp_result *res) {
  ded_lp_plan(p, n, w, res);
  check_shares(p, n, w);
  assert_near(res->t_per_byte, ded_lp_time(p, n, w), 1e-12);
}

static void test_lp_symmetric_closed_form(void **state) {
  (void)state;
  const unsigned sizes[] = {2, 3, 4, 5, 8, 16, 33, 64};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    unsigned n = sizes[s];
    ded_lp_peer p[N_MAX];
    double w[N_MAX], b = 12.5e6;
    for (unsigned i = 0; i < n; i++) peer_set(&p[i], b, b, DED_MODE_NODE);
    ded_lp_result res;
    plan(p, n, w, &res);
    assert_int_equal(res.fallback, DED_LP_E_NONE);
    /* T* = 2 (n - 1) N / sum b, reached by the butterfly all-reduce. */
    assert_near(res.t_per_byte, 2.0 * (n - 1) / (n * b), 1e-7);
    for (unsigned i = 0; i < n; i++) assert_near(w[i], 1.0 / n, 1e-6);
  }
}

/* hivemind's program in closed form: over the set A of peers that reduce,
 * xi = (n - 2 + |A|) / sum_A b and w_i = (xi b_i - 1) / (n - 2); a peer
 * with xi b_i < 1 cannot pay for any share and leaves A. */
static void waterfill(const double *b, unsigned n, double *w, double *t) {
  int in[N_MAX];
  for (unsigned i = 0; i < n; i++) in[i] = 1;
  double xi = 0.0;
  for (int changed = 1; changed;) {
    double sum = 0.0;
    unsigned a = 0;
    for (unsigned i = 0; i < n; i++)
      if (in[i]) sum += b[i], a++;
    xi = (n - 2.0 + a) / sum;
    changed = 0;
    for (unsigned i = 0; i < n; i++)
      if (in[i] && xi * b[i] < 1.0) in[i] = 0, changed = 1;
  }
  *t = xi;
  for (unsigned i = 0; i < n; i++) {
    w[i] = in[i] ? (xi * b[i] - 1.0) / (n - 2.0) : 0.0;
    if (!in[i]) *t = fmax(*t, 1.0 / b[i]);
  }
}

static void test_lp_heterogeneous_nodes_waterfill(void **state) {
  (void)state;
  for (int trial = 0; trial < 200; trial++) {
    unsigned n = 3 + (unsigned)(lcg_unit() * 30);
    ded_lp_peer p[N_MAX];
    double b[N_MAX], want[N_MAX], w[N_MAX], t;
    /* Bandwidths over two orders of magnitude; uploads and downloads
     * differ, and only the smaller of the two counts. */
    for (unsigned i = 0; i < n; i++) {
      b[i] = 1e6 * pow(100.0, lcg_unit());
      if (trial % 2) peer_set(&p[i], b[i], b[i] * (1.0 + lcg_unit()), DED_MODE_NODE);
      else peer_set(&p[i], b[i] * (1.0 + lcg_unit()), b[i], DED_MODE_NODE);
    }
    waterfill(b, n, want, &t);
    ded_lp_result res;
    plan(p, n, w, &res);
    assert_int_equal(res.fallback, DED_LP_E_NONE);
    assert_near(res.t_per_byte, t, 1e-6);
    /* The optimum is unique when the reducers set the time; when a slow
     * peer's own vector sets it, any plan within it will do. */
    double sumb = 0.0, minb = INFINITY;
    for (unsigned i = 0; i < n; i++) sumb += b[i], minb = fmin(minb, b[i]);
    if (t < 1.0 / minb * (1 - 1e-9))
      for (unsigned i = 0; i < n; i++) assert_true(fabs(w[i] - want[i]) < 1e-6);
    /* Never worse than equal shares, never better than the bound. */
    double eq[N_MAX];
    ded_lp_equal(p, n, eq);
    assert_true(res.t_per_byte <= ded_lp_time(p, n, eq) * (1 + 1e-9));
    assert_true(res.t_per_byte >= fmax(1.0 / minb, 2.0 * (n - 1) / sumb) * (1 - 1e-7));
  }
}

/* The heterogeneous topology: two peers at 100/100 Mbit/s, two
 * home links at 10 up / 50 down. The home links' own vectors set the
 * time (N / 10 Mbit/s, the lower bound); the fast pair reduce it all,
 * half each. Equal shares would take 1.5x as long. */
static void test_lp_home_links_reach_the_bound(void **state) {
  (void)state;
  ded_lp_peer p[4];
  double w[4], mbit = 1e6 / 8;
  peer_set(&p[0], 100 * mbit, 100 * mbit, DED_MODE_NODE);
  peer_set(&p[1], 100 * mbit, 100 * mbit, DED_MODE_NODE);
  peer_set(&p[2], 10 * mbit, 50 * mbit, DED_MODE_NODE);
  peer_set(&p[3], 10 * mbit, 50 * mbit, DED_MODE_NODE);
  ded_lp_result res;
  plan(p, 4, w, &res);
  assert_int_equal(res.fallback, DED_LP_E_NONE);
  assert_near(res.t_per_byte, 1.0 / (10 * mbit), 1e-7);
  assert_near(w[0], 0.5, 1e-6);
  assert_near(w[1], 0.5, 1e-6);
  assert_true(w[2] == 0.0 && w[3] == 0.0);
  double eq[4];
  ded_lp_equal(p, 4, eq);
  assert_near(ded_lp_time(p, 4, eq), 1.5 / (10 * mbit), 1e-12);
}

/* One fast peer among slow ones reduces everything: a parameter server. */
static void test_lp_parameter_server(void **state) {
  (void)state;
  ded_lp_peer p[5];
  double w[5];
  peer_set(&p[0], 10e6, 10e6, DED_MODE_NODE);
  peer_set(&p[1], 10e6, 10e6, DED_MODE_NODE);
  peer_set(&p[2], 1000e6, 1000e6, DED_MODE_NODE);
  peer_set(&p[3], 10e6, 10e6, DED_MODE_NODE);
  peer_set(&p[4], 10e6, 10e6, DED_MODE_NODE);
  ded_lp_result res;
  plan(p, 5, w, &res);
  assert_near(w[2], 1.0, 1e-9);
  assert_near(res.t_per_byte, 1.0 / 10e6, 1e-7);
}

/* CPU-only aux peers with good links are the summation servers (BytePS):
 * the trainers send their vector once and reduce nothing. */
static void test_lp_aux_servers(void **state) {
  (void)state;
  ded_lp_peer p[5];
  double w[5];
  for (int i = 0; i < 3; i++) peer_set(&p[i], 10e6, 10e6, DED_MODE_NODE);
  peer_set(&p[3], 1000e6, 1000e6, DED_MODE_AUX);
  peer_set(&p[4], 500e6, 500e6, DED_MODE_AUX);
  ded_lp_result res;
  plan(p, 5, w, &res);
  assert_int_equal(res.fallback, DED_LP_E_NONE);
  for (int i = 0; i < 3; i++) assert_true(w[i] == 0.0);
  /* Both servers have slack; the shares follow their links, 2:1. */
  assert_near(w[3], 2.0 / 3.0, 1e-6);
  assert_near(w[4], 1.0 / 3.0, 1e-6);
  assert_near(res.t_per_byte, 1.0 / 10e6, 1e-7);
  /* An aux peer's traffic is c w (no vector of its own to send). */
  double only_aux[5] = {0, 0, 0, 1, 0};
  assert_near(ded_lp_time(p, 5, only_aux), fmax(1.0 / 10e6, 3.0 / 1000e6), 1e-12);
}

/* A client reduces nothing and still sends its whole vector. */
static void test_lp_client(void **state) {
  (void)state;
  ded_lp_peer p[5];
  double w[5], b = 100e6;
  for (int i = 0; i < 4; i++) peer_set(&p[i], b, b, DED_MODE_NODE);
  peer_set(&p[4], b, b, DED_MODE_CLIENT);
  ded_lp_result res;
  plan(p, 5, w, &res);
  assert_true(w[4] == 0.0);
  for (int i = 0; i < 4; i++) assert_near(w[i], 0.25, 1e-6);
  /* c = 5 contributors: a node moves 1 + 3/4 of the vector each way. */
  assert_near(res.t_per_byte, 1.75 / b, 1e-7);
}

/* Fast peers with slack: every cut takes as long (the clients' links
 * decide), so no plan beats equal shares and they stand. */
static void test_lp_even_among_equally_good_plans(void **state) {
  (void)state;
  ded_lp_peer p[8];
  double w[8];
  for (int i = 0; i < 4; i++) peer_set(&p[i], 1e6, 1e6, DED_MODE_CLIENT);
  peer_set(&p[4], 100e6, 100e6, DED_MODE_NODE);
  peer_set(&p[5], 200e6, 200e6, DED_MODE_NODE);
  peer_set(&p[6], 100e6, 300e6, DED_MODE_NODE);
  peer_set(&p[7], 300e6, 100e6, DED_MODE_NODE);
  ded_lp_result res;
  plan(p, 8, w, &res);
  assert_int_equal(res.fallback, DED_LP_E_NONE);
  assert_true(res.equal_kept);
  assert_near(res.t_per_byte, 1.0 / 1e6, 1e-7);
  for (int i = 4; i < 8; i++) assert_near(w[i], 0.25, 1e-6);
}

/* Rates that differ by their measurement noise (equal links in the WAN
 * lab, read as 82 to 95 Mbit/s, and 84 to 102, where the program gains
 * 14 % on paper) keep equal shares (DED_LP_ALIKE); links that truly
 * differ (two fast peers, two home links) get the program's plan, which
 * beats equal shares by more than DED_LP_GAIN_MIN. */
static void test_lp_gain_margin(void **state) {
  (void)state;
  ded_lp_peer p[4];
  double w[4], eq[4];
  const double noisy[2][4] = {{82e6 / 8, 84e6 / 8, 89e6 / 8, 95e6 / 8},
                              {84e6 / 8, 97e6 / 8, 97e6 / 8, 102e6 / 8}};
  ded_lp_result res;
  for (int k = 0; k < 2; k++) {
    for (int i = 0; i < 4; i++) peer_set(&p[i], noisy[k][i], noisy[k][i], DED_MODE_NODE);
    plan(p, 4, w, &res);
    assert_int_equal(res.fallback, DED_LP_E_NONE);
    assert_true(res.equal_kept);
    for (int i = 0; i < 4; i++) assert_near(w[i], 0.25, 1e-9);
  }
  peer_set(&p[0], 100e6 / 8, 100e6 / 8, DED_MODE_NODE);
  peer_set(&p[1], 100e6 / 8, 100e6 / 8, DED_MODE_NODE);
  peer_set(&p[2], 10e6 / 8, 50e6 / 8, DED_MODE_NODE);
  peer_set(&p[3], 10e6 / 8, 50e6 / 8, DED_MODE_NODE);
  plan(p, 4, w, &res);
  assert_int_equal(res.fallback, DED_LP_E_NONE);
  assert_false(res.equal_kept);
  ded_lp_equal(p, 4, eq);
  assert_true(res.t_per_byte < (1.0 - DED_LP_GAIN_MIN) * ded_lp_time(p, 4, eq));
  assert_true(w[0] > 0.25 && w[1] > 0.25 && w[2] < 0.25 && w[3] < 0.25);
}

/* Two nodes move the same bytes whatever the cut; how fast they add
 * decides it. */
static void test_lp_adding_speed(void **state) {
  (void)state;
  ded_lp_peer p[2];
  double w[2];
  peer_set(&p[0], 1e9, 1e9, DED_MODE_NODE);
  peer_set(&p[1], 1e9, 1e9, DED_MODE_NODE);
  p[0].add_Bps = 1e6;
  p[1].add_Bps = 3e6;
  ded_lp_result res;
  plan(p, 2, w, &res);
  assert_near(w[0], 0.25, 1e-6);
  assert_near(w[1], 0.75, 1e-6);
  assert_near(res.t_per_byte, 0.25 / 1e6, 1e-6);
}

/* Unknown rates take the mean of the known ones. */
static void test_lp_unknown_rates(void **state) {
  (void)state;
  ded_lp_peer p[3];
  double w[3];
  peer_set(&p[0], 50e6, 50e6, DED_MODE_NODE);
  peer_set(&p[1], 0, 0, DED_MODE_NODE);
  peer_set(&p[2], 50e6, NAN, DED_MODE_NODE);
  ded_lp_result res;
  plan(p, 3, w, &res);
  for (int i = 0; i < 3; i++) assert_near(w[i], 1.0 / 3, 1e-6);
  assert_near(res.t_per_byte, 4.0 / 3 / 50e6, 1e-7);
  /* Nothing known at all: everyone alike. */
  for (int i = 0; i < 3; i++) peer_set(&p[i], 0, 0, DED_MODE_NODE);
  plan(p, 3, w, &res);
  assert_int_equal(res.fallback, DED_LP_E_NONE);
  for (int i = 0; i < 3; i++) assert_near(w[i], 1.0 / 3, 1e-6);
}

/* Nothing to solve, or nothing that can be solved: the safe plan. */
static void test_lp_fallbacks(void **state) {
  (void)state;
  ded_lp_peer p[3];
  double w[3];
  ded_lp_result res;
  for (int i = 0; i < 3; i++) peer_set(&p[i], 10e6, 10e6, DED_MODE_CLIENT);
  ded_lp_plan(p, 3, w, &res);
  assert_int_equal(res.fallback, DED_LP_E_NO_REDUCER);
  for (int i = 0; i < 3; i++) assert_near(w[i], 1.0 / 3, 1e-12);
  /* One reducer: it takes everything, no solver needed. */
  p[1].mode = DED_MODE_NODE;
  plan(p, 3, w, &res);
  assert_int_equal(res.fallback, DED_LP_E_NONE);
  assert_true(w[1] == 1.0);
  /* Alone. */
  plan(p + 1, 1, w, &res);
  assert_true(w[0] == 1.0);
  assert_true(strcmp(ded_lp_fallback_str(DED_LP_E_SOLVER), "the solver failed") == 0);
  /* More peers than the program is built for: equal shares. */
  unsigned big = DED_LP_PEERS_MAX + 1;
  ded_lp_peer *many = calloc(big, sizeof *many);
  double *wb = calloc(big, sizeof *wb);
  assert_non_null(many);
  assert_non_null(wb);
  for (unsigned i = 0; i < big; i++) peer_set(&many[i], 1e6 * (1 + i % 7), 1e6, DED_MODE_NODE);
  ded_lp_plan(many, big, wb, &res);
  assert_int_equal(res.fallback, DED_LP_E_SIZE);
  for (unsigned i = 0; i < big; i++) assert_near(wb[i], 1.0 / big, 1e-12);
  free(many);
  free(wb);
}

/* Random swarms of every kind: a valid plan, never slower than equal
 * shares, and no faster than any contributor can send its own vector. */
static void test_lp_random_swarms(void **state) {
  (void)state;
  for (int trial = 0; trial < 300; trial++) {
    unsigned n = 1 + (unsigned)(lcg_unit() * N_MAX);
    ded_lp_peer p[N_MAX];
    double w[N_MAX], eq[N_MAX];
    unsigned reducers = 0;
    for (unsigned i = 0; i < n; i++) {
      double r = lcg_unit();
      uint8_t mode = r < 0.6 ? DED_MODE_NODE : r < 0.8 ? DED_MODE_CLIENT : DED_MODE_AUX;
      if (i == 0) mode = DED_MODE_NODE; /* someone brings a vector */
      peer_set(&p[i], lcg_unit() < 0.1 ? 0 : 1e6 * pow(1000.0, lcg_unit()),
               1e6 * pow(1000.0, lcg_unit()), mode);
      if (lcg_unit() < 0.3) p[i].add_Bps = 1e8 * pow(10.0, lcg_unit());
      reducers += mode != DED_MODE_CLIENT;
    }
    ded_lp_result res;
    plan(p, n, w, &res);
    assert_int_equal(res.fallback, DED_LP_E_NONE);
    assert_true(reducers > 0);
    ded_lp_equal(p, n, eq);
    assert_true(res.t_per_byte <= ded_lp_time(p, n, eq) * (1 + 1e-6));
    for (unsigned i = 0; i < n; i++) {
      if (p[i].mode == DED_MODE_AUX || n == 1) continue;
      double up = p[i].up_Bps > 0 ? p[i].up_Bps : INFINITY;
      double link = fmin(up, p[i].down_Bps);
      if (isfinite(link)) assert_true(res.t_per_byte >= (1.0 - w[i]) / link * (1 - 1e-7));
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lp_symmetric_closed_form),
      cmocka_unit_test(test_lp_heterogeneous_nodes_waterfill),
      cmocka_unit_test(test_lp_home_links_reach_the_bound),
      cmocka_unit_test(test_lp_parameter_server),
      cmocka_unit_test(test_lp_aux_servers),
      cmocka_unit_test(test_lp_client),
      cmocka_unit_test(test_lp_even_among_equally_good_plans),
      cmocka_unit_test(test_lp_gain_margin),
      cmocka_unit_test(test_lp_adding_speed),
      cmocka_unit_test(test_lp_unknown_rates),
      cmocka_unit_test(test_lp_fallbacks),
      cmocka_unit_test(test_lp_random_swarms),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
