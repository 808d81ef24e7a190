#include "ded_lp.h"

#include <lp_lib.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../core/ded_types.h"

/* Stage 2 may not cost stage 1's optimum more than this (relative), about
 * the solver's own tolerance. */
#define LP_SLACK 1e-9
/* Shares below this are the solver's rounding, not a plan: a reducer with
 * a handful of elements pays a round trip for nothing. */
#define LP_SHARE_MIN 1e-6

const char *ded_lp_fallback_str(int fallback) {
  switch (fallback) {
  case DED_LP_E_NONE: return "optimal";
  case DED_LP_E_NO_REDUCER: return "no peer can reduce";
  case DED_LP_E_SOLVER: return "the solver failed";
  case DED_LP_E_SIZE: return "too many peers";
  default: return "?";
  }
}

static bool lp_contributes(const ded_lp_peer *p) { return p->mode != DED_MODE_AUX; }
static bool lp_reduces(const ded_lp_peer *p) { return p->mode != DED_MODE_CLIENT; }

/* The rates the model uses: unknown ones (0, or not finite) replaced by the
 * mean of the known ones of their kind; links by min(up, down), since a
 * butterfly member sends and receives the same amount. add = 0 after this
 * means no peer's adding rate is known: adding is left out of the model. */
typedef struct lp_rates {
  double *link;
  double *add;
} lp_rates;

static bool lp_known(double v) { return isfinite(v) && v > 0.0; }

static double lp_mean(const ded_lp_peer *peers, unsigned n, size_t field) {
  double sum = 0.0;
  unsigned known = 0;
  for (unsigned i = 0; i < n; i++) {
    double v;
    memcpy(&v, (const char *)&peers[i] + field, sizeof v);
    if (lp_known(v)) {
      sum += v;
      known++;
    }
  }
  return known ? sum / known : 0.0;
}

static double lp_pick(const ded_lp_peer *p, size_t field, double fill) {
  double v;
  memcpy(&v, (const char *)p + field, sizeof v);
  return lp_known(v) ? v : fill;
}

static int lp_rates_fill(const ded_lp_peer *peers, unsigned n, lp_rates *r) {
  r->link = calloc(n, sizeof *r->link);
  r->add = calloc(n, sizeof *r->add);
  if (!r->link || !r->add) return -1;
  double up = lp_mean(peers, n, offsetof(ded_lp_peer, up_Bps));
  double down = lp_mean(peers, n, offsetof(ded_lp_peer, down_Bps));
  double add = lp_mean(peers, n, offsetof(ded_lp_peer, add_Bps));
  /* Nothing known about a direction: every peer alike. */
  if (up == 0.0) up = 1.0;
  if (down == 0.0) down = 1.0;
  for (unsigned i = 0; i < n; i++) {
    double u = lp_pick(&peers[i], offsetof(ded_lp_peer, up_Bps), up);
    double d = lp_pick(&peers[i], offsetof(ded_lp_peer, down_Bps), down);
    r->link[i] = u < d ? u : d;
    r->add[i] = add == 0.0 ? 0.0 : lp_pick(&peers[i], offsetof(ded_lp_peer, add_Bps), add);
  }
  return 0;
}

static void lp_rates_free(lp_rates *r) {
  free(r->link);
  free(r->add);
}

static unsigned lp_contributors(const ded_lp_peer *peers, unsigned n) {
  unsigned c = 0;
  for (unsigned i = 0; i < n; i++) c += lp_contributes(&peers[i]);
  return c;
}

static double lp_time_rates(const ded_lp_peer *peers, unsigned n, const lp_rates *r,
                            const double *frac) {
  double c = lp_contributors(peers, n), t = 0.0;
  for (unsigned i = 0; i < n; i++) {
    double x = lp_contributes(&peers[i]) ? 1.0 : 0.0;
    double link = x * (1.0 - frac[i]) + frac[i] * (c - x);
    double ti = link / r->link[i];
    if (r->add[i] > 0.0) ti = fmax(ti, frac[i] * (c - x) / r->add[i]);
    t = fmax(t, ti);
  }
  return t;
}

double ded_lp_time(const ded_lp_peer *peers, unsigned n, const double *frac) {
  lp_rates r;
  double t = INFINITY;
  if (lp_rates_fill(peers, n, &r) == 0) t = lp_time_rates(peers, n, &r, frac);
  lp_rates_free(&r);
  return t;
}

void ded_lp_equal(const ded_lp_peer *peers, unsigned n, double *frac) {
  unsigned k = 0;
  for (unsigned i = 0; i < n; i++) k += lp_reduces(&peers[i]);
  for (unsigned i = 0; i < n; i++) frac[i] = k == 0 ? 1.0 / n : lp_reduces(&peers[i]) ? 1.0 / k : 0.0;
}

/*
 * Columns 1..n are w_i, n+1 is T (the round time), n+2 is U (the largest
 * share per unit of link among reducers, stage 2's objective). Rates are
 * scaled so the fastest link is 1: lpsolve works best near unit scale.
 * Returns 0 and the shares in |w|, or -1.
 */
static int lp_solve(const ded_lp_peer *peers, unsigned n, const lp_rates *r, double *w) {
  double top = 0.0;
  for (unsigned i = 0; i < n; i++) top = fmax(top, fmax(r->link[i], r->add[i]));
  double c = lp_contributors(peers, n);
  int ncol = (int)n + 2, colT = (int)n + 1, colU = (int)n + 2;
  lprec *lp = make_lp(0, ncol);
  if (!lp) return -1;
  set_verbose(lp, NEUTRAL);
  int rv = -1;
  REAL row[3];
  int col[3];
  REAL *ones = malloc(n * sizeof *ones);
  int *all = malloc(n * sizeof *all);
  REAL *sol = malloc((size_t)ncol * sizeof *sol);
  if (!ones || !all || !sol) goto out;
  set_add_rowmode(lp, TRUE);
  for (unsigned i = 0; i < n; i++) {
    double x = lp_contributes(&peers[i]) ? 1.0 : 0.0;
    /* x (1 - w) + w (c - x) <= T link  <=>  (c - 2x) w - link T <= -x */
    col[0] = (int)i + 1, row[0] = c - 2.0 * x;
    col[1] = colT, row[1] = -r->link[i] / top;
    if (!add_constraintex(lp, 2, row, col, LE, -x)) goto out;
    if (lp_reduces(&peers[i]) && r->add[i] > 0.0) {
      /* w (c - x) <= T add */
      row[0] = c - x, row[1] = -r->add[i] / top;
      if (!add_constraintex(lp, 2, row, col, LE, 0.0)) goto out;
    }
    if (lp_reduces(&peers[i])) {
      /* w <= U link: among equally good plans, shares follow the links. */
      col[1] = colU, row[0] = 1.0, row[1] = -r->link[i] / top;
      if (!add_constraintex(lp, 2, row, col, LE, 0.0)) goto out;
    }
    ones[i] = 1.0;
    all[i] = (int)i + 1;
  }
  if (!add_constraintex(lp, (int)n, ones, all, EQ, 1.0)) goto out;
  set_add_rowmode(lp, FALSE);
  for (unsigned i = 0; i < n; i++)
    if (!set_upbo(lp, (int)i + 1, lp_reduces(&peers[i]) ? 1.0 : 0.0)) goto out;

  /* Stage 1: the shortest round. */
  set_minim(lp);
  row[0] = 1.0, col[0] = colT;
  if (!set_obj_fnex(lp, 1, row, col) || solve(lp) != OPTIMAL) goto out;
  double t1 = get_var_primalresult(lp, get_Nrows(lp) + colT);
  if (!isfinite(t1) || t1 < 0.0) goto out;
  if (!get_variables(lp, sol)) goto out;
  /* Stage 2: among plans that short, the most even one. Should the
   * solver find none within its tolerance, stage 1's plan stands. */
  if (!set_upbo(lp, colT, t1 * (1.0 + LP_SLACK))) goto out;
  row[0] = 1.0, col[0] = colU;
  if (set_obj_fnex(lp, 1, row, col) && solve(lp) == OPTIMAL) get_variables(lp, sol);
  memcpy(w, sol, n * sizeof *w);
  rv = 0;
out:
  free(ones);
  free(all);
  free(sol);
  delete_lp(lp);
  return rv;
}

/* Clamps the solver's shares to [0, 1] and to zero for clients, and
 * renormalises. -1 if what is left is unusable. */
static int lp_clean(const ded_lp_peer *peers, unsigned n, double *w) {
  double sum = 0.0;
  for (unsigned i = 0; i < n; i++) {
    if (!isfinite(w[i])) return -1;
    if (w[i] < LP_SHARE_MIN || !lp_reduces(&peers[i])) w[i] = 0.0;
    if (w[i] > 1.0) w[i] = 1.0;
    sum += w[i];
  }
  if (!(fabs(sum - 1.0) < 1e-6)) return -1;
  for (unsigned i = 0; i < n; i++) w[i] /= sum;
  return 0;
}

/* True if every reducer's link rates are known and within DED_LP_ALIKE
 * of every other's, up and down, and so are their adding rates (all
 * known, or all unknown). */
static bool lp_alike(const ded_lp_peer *peers, unsigned n) {
  double lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {0.0, 0.0, 0.0};
  unsigned add_known = 0, reducers = 0;
  for (unsigned i = 0; i < n; i++) {
    const ded_lp_peer *p = &peers[i];
    if (!lp_reduces(p)) continue;
    const double v[3] = {p->up_Bps, p->down_Bps, p->add_Bps};
    if (!(v[0] > 0.0) || !(v[1] > 0.0)) return false;
    reducers++;
    add_known += v[2] > 0.0;
    for (int k = 0; k < 3; k++) {
      lo[k] = fmin(lo[k], v[k]);
      hi[k] = fmax(hi[k], v[k]);
    }
  }
  if (add_known != 0 && add_known != reducers) return false;
  for (int k = 0; k < (add_known ? 3 : 2); k++)
    if (!(hi[k] <= lo[k] * DED_LP_ALIKE)) return false;
  return true;
}

void ded_lp_plan(const ded_lp_peer *peers, unsigned n, double *frac, ded_lp_result *res) {
  res->fallback = DED_LP_E_NONE;
  res->equal_kept = false;
  res->t_per_byte = INFINITY;
  ded_lp_equal(peers, n, frac);
  unsigned reducers = 0;
  for (unsigned i = 0; i < n; i++) reducers += lp_reduces(&peers[i]);
  if (reducers == 0) res->fallback = DED_LP_E_NO_REDUCER;
  if (n > DED_LP_PEERS_MAX) res->fallback = DED_LP_E_SIZE;
  lp_rates r;
  if (lp_rates_fill(peers, n, &r) != 0) {
    lp_rates_free(&r);
    res->fallback = DED_LP_E_SOLVER;
    return;
  }
  double t_equal = lp_time_rates(peers, n, &r, frac);
  res->t_per_byte = t_equal;
  if (res->fallback == DED_LP_E_NONE && reducers > 1 && lp_alike(peers, n)) {
    res->equal_kept = true;
  } else if (res->fallback == DED_LP_E_NONE && reducers > 1) {
    double *w = malloc(n * sizeof *w);
    /* The LP's plan must be usable, no slower than the safe one, and
     * faster by more than the rates' noise. */
    if (w && lp_solve(peers, n, &r, w) == 0 && lp_clean(peers, n, w) == 0) {
      double t = lp_time_rates(peers, n, &r, w);
      if (t < t_equal * (1.0 - DED_LP_GAIN_MIN)) {
        memcpy(frac, w, n * sizeof *w);
        res->t_per_byte = t;
      } else if (t <= t_equal * (1.0 + 1e-6)) {
        res->equal_kept = true;
      } else {
        res->fallback = DED_LP_E_SOLVER;
      }
    } else {
      res->fallback = DED_LP_E_SOLVER;
    }
    free(w);
  }
  lp_rates_free(&r);
}
