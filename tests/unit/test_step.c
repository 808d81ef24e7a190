/*
 * test_step.c: mpi/ded_step, a job's training steps as the shim sees
 * them (rank 0 of a one-rank job; the driver's two calls are stubs here).
 *
 * A snapshot for a joiner is of the round its step began at, even when
 * the step's first round is reported before the snapshot is taken (a
 * round the job completes alone reports at once); none is taken but at a
 * step's first all-reduce; a reload resumes the stream at the snapshot's
 * round and position, the pieces take its bytes as the step's last
 * all-reduce completes, and steps begin at the snapshot's position from
 * then on; a job whose reports say diverged reloads at every step's
 * start, warning of the first failure of a streak only; a job that ends
 * out of step says so.
 */
#include "unit_util.h"

#include <stdio.h>

#include "ded_step.h"
#include "state/ded_image.h"

#define BUCKET 4
#define BUCKETS 2

/* ------------------------------------------------------- driver stubs */

static struct {
  int offered;               /* snapshots handed to the driver */
  ded_snapshot offer;        /* the latest of them (bytes owned here) */
  ded_snapshot reload;       /* what the next reload returns (bytes: a copy) */
  uint64_t reload_min_round; /* the round the latest reload asked for */
  int reloads;               /* reloads asked for */
  bool diverged;             /* the rounds report diverged (the node astray) */
  int warnings;              /* log lines at DED_LOG_WARN or worse */
} drv;

void ded_driver_snapshot_set(ded_driver *d, ded_snapshot *snap) {
  (void)d;
  free(drv.offer.bytes);
  drv.offer = *snap;
  snap->bytes = NULL;
  drv.offered++;
}

int ded_driver_state_reload(ded_driver *d, uint64_t min_round, ded_snapshot *snap) {
  (void)d;
  drv.reload_min_round = min_round;
  drv.reloads++;
  if (!drv.reload.bytes) return DED_ERR_TIMEOUT;
  *snap = drv.reload;
  snap->bytes = malloc(drv.reload.len);
  assert_non_null(snap->bytes);
  memcpy(snap->bytes, drv.reload.bytes, drv.reload.len);
  return 0;
}

static void step_log(int level, const char *fmt, ...) {
  drv.warnings += level <= DED_LOG_WARN;
  if (!getenv("TEST_STEP_VERBOSE")) return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

/* ------------------------------------------------------------- a job */

/* A trainer of BUCKETS all-reduces a step, each of BUCKET floats from a
 * buffer of its own, whose state is |params|. */
typedef struct job {
  ded_step st;
  float params[BUCKETS * BUCKET];
  float grads[BUCKETS * BUCKET];
  uint64_t round; /* the round the next call gets */
} job;

static void job_init(job *j) {
  memset(j, 0, sizeof *j);
  for (int i = 0; i < BUCKETS * BUCKET; i++) j->params[i] = (float)i;
  ded_step_init(&j->st, 1, MPI_COMM_NULL, 0, step_log);
  ded_step_piece_add(&j->st, j->params, sizeof j->params);
}

static void job_free(job *j) { ded_step_free(&j->st); }

static void report(job *j, uint64_t round) {
  ded_round_result res;
  memset(&res, 0, sizeof res);
  res.round = round;
  res.count = BUCKET;
  res.last = true;
  res.diverged = drv.diverged;
  ded_step_round_done(&j->st, &res);
}

/* One all-reduce of bucket |b| as the shim makes it: the call begins, is
 * submitted, its round may report before the offer (|early|), the offer,
 * the round's report, and the reload's apply as it completes. Returns
 * whether a step began at it. */
static bool job_call(job *j, int b, bool early) {
  bool ends_reload = false;
  bool begins = ded_step_call_begin(&j->st, NULL, j->grads + b * BUCKET, BUCKET, MPI_FLOAT, true,
                                    &ends_reload);
  uint64_t r = j->round++;
  if (early) report(j, r);
  ded_step_offer(&j->st, NULL, begins, true);
  if (!early) report(j, r);
  if (ends_reload) ded_step_apply(&j->st);
  return begins;
}

static void job_steps(job *j, int steps) {
  for (int s = 0; s < steps; s++)
    for (int b = 0; b < BUCKETS; b++) assert_int_equal(job_call(j, b, false), b == 0 && j->st.len);
}

static void reset_driver(void) {
  free(drv.offer.bytes);
  free(drv.reload.bytes);
  memset(&drv, 0, sizeof drv);
}

/* ------------------------------------------------------------- tests */

static void test_step_learnt(void **state) {
  (void)state;
  job j;
  job_init(&j);
  job_steps(&j, 3);
  assert_int_equal(j.st.len, BUCKETS * BUCKET);
  assert_true(j.st.len_sure);
  /* The rounds of a whole step, counted from a step's edge, not from
   * the stream's start (three steps went by before the first edge). */
  assert_int_equal(j.st.step_rounds, 0);
  job_steps(&j, 1);
  assert_int_equal(j.st.step_rounds, 0);
  job_steps(&j, 1);
  assert_int_equal(j.st.step_rounds, BUCKETS);
  job_free(&j);
}

/* The step's first round reports before the offer (the job is alone in
 * it): the snapshot is still of that round, the one the pieces' state
 * comes before, not of the round after. */
static void test_snapshot_of_the_steps_first_round(void **state) {
  (void)state;
  reset_driver();
  job j;
  job_init(&j);
  job_steps(&j, 4);
  uint64_t first = j.round; /* the next step's first round */
  ded_step_want_snapshot(&j.st);
  assert_true(job_call(&j, 0, true));
  assert_int_equal(drv.offered, 1);
  assert_int_equal(drv.offer.round, first);
  assert_int_equal(drv.offer.step_rounds, BUCKETS);
  ded_image_view v;
  assert_int_equal(ded_image_parse(drv.offer.bytes, drv.offer.len, &v), 0);
  assert_int_equal(v.n, 1);
  assert_memory_equal(drv.offer.bytes + ded_image_table_bytes(1), j.params, sizeof j.params);
  job_free(&j);
  reset_driver();
}

/* Asked mid-step, the snapshot waits for the next step's first call. */
static void test_snapshot_at_a_step_edge(void **state) {
  (void)state;
  reset_driver();
  job j;
  job_init(&j);
  job_steps(&j, 4);
  assert_true(job_call(&j, 0, false));
  ded_step_want_snapshot(&j.st);
  assert_false(job_call(&j, 1, true));
  assert_int_equal(drv.offered, 0);
  uint64_t first = j.round;
  assert_true(job_call(&j, 0, false));
  assert_int_equal(drv.offered, 1);
  assert_int_equal(drv.offer.round, first);
  job_free(&j);
  reset_driver();
}

/* Out of step: the reload resumes at the snapshot's round and position,
 * the pieces take its bytes as the step's last all-reduce completes, and
 * steps begin at the snapshot's position from then on. */
static void test_reload_resumes_at_the_snapshot(void **state) {
  (void)state;
  reset_driver();
  job run, j;
  job_init(&run);
  job_init(&j);
  for (int i = 0; i < BUCKETS * BUCKET; i++) run.params[i] = 100.0f + (float)i;
  ded_snapshot snap;
  memset(&snap, 0, sizeof snap);
  assert_true(ded_step_image(&run.st, &snap));
  snap.round = 41; /* odd: the run's steps begin where the snapshot says */
  snap.pos = 41 * BUCKET;
  snap.step_rounds = BUCKETS;
  drv.reload = snap;

  job_steps(&j, 4);
  ded_round_result res;
  memset(&res, 0, sizeof res);
  res.round = j.round - 1;
  res.behind = 40;
  res.alone = res.late = true;
  ded_step_round_done(&j.st, &res);
  j.round = snap.round; /* the stream resumes there */
  assert_true(job_call(&j, 0, false));
  assert_int_equal(drv.reload_min_round, 40);
  assert_int_equal(j.st.pos, snap.pos + BUCKET);
  assert_true(j.params[0] == 0.0f); /* not before the step's last all-reduce */
  assert_false(job_call(&j, 1, false));
  assert_memory_equal(j.params, run.params, sizeof j.params);
  assert_int_equal(j.st.reload, DED_STEP_RELOAD_NONE);
  /* The next step begins at the snapshot's position plus a step, and a
   * snapshot taken there is of the round after the reloaded step. */
  ded_step_want_snapshot(&j.st);
  assert_true(job_call(&j, 0, true));
  assert_int_equal(drv.offered, 1);
  assert_int_equal(drv.offer.round, snap.round + BUCKETS);
  job_free(&run);
  job_free(&j);
  reset_driver();
}

/*
 * A job whose reports say diverged (its node astray) reloads at the start
 * of each step, the round it is at, for as long as they say so and no
 * reload loads; the first failure is a warning, the next ones are not,
 * until the job is back in step (a report that says neither diverged nor
 * behind): the next failure warns again.
 */
static void test_reload_retried_while_diverged(void **state) {
  (void)state;
  reset_driver();
  job j;
  job_init(&j);
  job_steps(&j, 4);
  assert_int_equal(drv.reloads, 0);
  drv.diverged = true;
  report(&j, j.round - 1);
  for (int s = 1; s <= 3; s++) {
    uint64_t at = j.round;
    job_steps(&j, 1);
    assert_int_equal(drv.reloads, s);
    assert_int_equal(drv.reload_min_round, at);
  }
  if (drv.warnings != 1)
    fail_msg("3 failed reloads in a row logged %d warnings, not 1", drv.warnings);
  /* Back in step: a step of plain reports, no reload; then astray again. */
  drv.diverged = false;
  job_steps(&j, 1);
  assert_int_equal(drv.reloads, 4); /* that step's start still had the last report's word */
  job_steps(&j, 1);
  assert_int_equal(drv.reloads, 4);
  drv.diverged = true;
  report(&j, j.round - 1);
  job_steps(&j, 1);
  assert_int_equal(drv.reloads, 5);
  assert_int_equal(drv.warnings, 2);
  job_free(&j);
  reset_driver();
}

/*
 * A job whose last step's round went on without it (a STALE: behind) ends
 * out of step, its parameters its own, and says so at its end; one that
 * reloaded since, or whose reports are back in step, does not.
 */
static void test_ends_out_of_step_warns(void **state) {
  (void)state;
  reset_driver();
  job j;
  job_init(&j);
  job_steps(&j, 4);
  assert_false(ded_step_finish(&j.st));
  ded_round_result res;
  memset(&res, 0, sizeof res);
  res.round = j.round - 1;
  res.behind = j.round + 40;
  res.alone = res.late = true;
  ded_step_round_done(&j.st, &res);
  drv.diverged = true; /* the node is astray from here on */
  report(&j, j.round);
  int warned = drv.warnings;
  assert_true(ded_step_finish(&j.st));
  assert_int_equal(drv.warnings, warned + 1);
  /* A step whose reload loads: in step at its end. */
  job run;
  job_init(&run);
  ded_snapshot snap;
  memset(&snap, 0, sizeof snap);
  assert_true(ded_step_image(&run.st, &snap));
  snap.round = j.round + 40;
  snap.pos = snap.round * BUCKET;
  snap.step_rounds = BUCKETS;
  drv.reload = snap;
  drv.diverged = false;
  j.round = snap.round;
  job_steps(&j, 1);
  assert_int_equal(drv.reloads, 1);
  assert_false(ded_step_finish(&j.st));
  /* Out of step again, then a report in step (the engine gave up waiting
   * for a peer in step: its state is the run's). */
  drv.diverged = true;
  report(&j, j.round - 1);
  assert_true(ded_step_finish(&j.st));
  drv.diverged = false;
  report(&j, j.round - 1);
  assert_false(ded_step_finish(&j.st));
  job_free(&run);
  job_free(&j);
  reset_driver();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_step_learnt),
      cmocka_unit_test(test_snapshot_of_the_steps_first_round),
      cmocka_unit_test(test_snapshot_at_a_step_edge),
      cmocka_unit_test(test_reload_resumes_at_the_snapshot),
      cmocka_unit_test(test_reload_retried_while_diverged),
      cmocka_unit_test(test_ends_out_of_step_warns),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
