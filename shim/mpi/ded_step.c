/*
 * ded_step.c: where a job's training steps begin, its snapshots for
 * joiners and its reloads when it falls out of step (see ded_step.h).
 */
#define _GNU_SOURCE
#include "ded_step.h"

#include <stdlib.h>
#include <string.h>

#include "core/ded_limits.h"
#include "state/ded_image.h"

void ded_step_init(ded_step *st, int size, MPI_Comm comm, unsigned step_calls,
                   ded_step_log_fn log) {
  memset(st, 0, sizeof *st);
  st->size = size;
  st->comm = comm;
  st->step_calls_set = step_calls;
  st->log = log;
  atomic_init(&st->snap_wanted, false);
  pthread_mutex_init(&st->mu, NULL);
}

void ded_step_free(ded_step *st) {
  free(st->loaded.bytes);
  st->loaded.bytes = NULL;
  st->reload = DED_STEP_RELOAD_NONE;
  free(st->pieces);
  st->pieces = NULL;
  st->npieces = st->pieces_cap = 0;
  pthread_mutex_destroy(&st->mu);
}

bool ded_step_finish(ded_step *st) {
  pthread_mutex_lock(&st->mu);
  uint64_t from = st->own_from;
  pthread_mutex_unlock(&st->mu);
  if (from)
    st->log(DED_LOG_WARN, "this job ends out of step with the run: its parameters are its own "
            "since round %llu, not the run's (a round went on without it, a stop or a cut, and "
            "it had no step left at which to reload the run's state, or no peer offered it); "
            "the peers still in the run hold the run's state", (unsigned long long)(from - 1));
  return from != 0;
}

void ded_step_piece_add(ded_step *st, void *p, size_t bytes) {
  if (st->pieces_full_logged) return; /* the pieces after one not kept are not kept either */
  uint64_t image = ded_image_table_bytes(st->npieces + 1) + st->total + bytes;
  bool fits = bytes <= DED_STATE_BYTES_MAX && image <= DED_STATE_BYTES_MAX;
  if (fits && st->npieces == st->pieces_cap) {
    size_t cap = st->pieces_cap ? 2 * st->pieces_cap : 64;
    struct ded_step_piece *v = realloc(st->pieces, cap * sizeof *v);
    fits = v != NULL;
    if (v) {
      st->pieces = v;
      st->pieces_cap = cap;
    }
  }
  if (!fits) {
    if (!st->pieces_full_logged)
      st->log(DED_LOG_WARN, "state piece %zu (%zu bytes) %s: it and the pieces after it are not "
              "served to joiners", st->npieces + 1, bytes,
              image > DED_STATE_BYTES_MAX ? "takes the state past its bound" : "finds no memory");
    st->pieces_full_logged = true;
    return;
  }
  st->pieces[st->npieces].p = p;
  st->pieces[st->npieces].bytes = bytes;
  st->npieces++;
  st->total += bytes;
}

bool ded_step_image(const ded_step *st, ded_snapshot *snap) {
  uint64_t table = ded_image_table_bytes(st->npieces);
  snap->len = table + st->total;
  snap->bytes = malloc(snap->len);
  uint64_t *sizes = malloc((st->npieces ? st->npieces : 1) * sizeof *sizes);
  if (!snap->bytes || !sizes) {
    st->log(DED_LOG_WARN, "no memory for a snapshot of %llu bytes", (unsigned long long)snap->len);
    free(snap->bytes);
    free(sizes);
    snap->bytes = NULL;
    return false;
  }
  uint64_t off = table;
  for (size_t i = 0; i < st->npieces; i++) {
    sizes[i] = st->pieces[i].bytes;
    memcpy(snap->bytes + off, st->pieces[i].p, st->pieces[i].bytes);
    off += st->pieces[i].bytes;
  }
  ded_image_write_table(snap->bytes, sizes, st->npieces);
  free(sizes);
  snap->digest = ded_digest64(snap->bytes, snap->len);
  return true;
}

bool ded_step_image_fits(const ded_step *st, const uint8_t *img, uint64_t len, const char **why) {
  ded_image_view v;
  if (ded_image_parse(img, len, &v) != 0) {
    *why = "malformed";
    return false;
  }
  if (v.n != st->npieces) {
    *why = "another number of pieces";
    return false;
  }
  for (size_t i = 0; i < st->npieces; i++)
    if (ded_image_size(&v, i) != st->pieces[i].bytes) {
      *why = "pieces of other sizes";
      return false;
    }
  return true;
}

void ded_step_found_load(ded_step *st, ded_snapshot *snap) {
  free(st->loaded.bytes);
  st->loaded = *snap;
  snap->bytes = NULL;
  st->reload = DED_STEP_RELOAD_DUE;
}

void ded_step_resume(ded_step *st, uint64_t round, uint64_t pos) {
  st->pos0 = st->pos = pos;
  st->next_round = st->step_round = round;
  st->step_round_known = true;
}

/* ---------------------------------------------------------------- steps */

static bool sig_eq(const struct ded_step_sig *a, const struct ded_step_sig *b) {
  return a->buf == b->buf && a->count == b->count && a->dt == b->dt;
}

/* Whether |e| (from pos0) is where a kept call ends. */
static bool step_is_end(const ded_step *st, uint64_t e) {
  unsigned lo = 0, hi = st->nsig;
  while (lo < hi) {
    unsigned mid = lo + (hi - lo) / 2;
    if (st->end[mid] < e)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < st->nsig && st->end[lo] == e;
}

/* The step's length from the kept calls, or 0 (ded_step.h, "Learning
 * the step"); |*sure| says it came from the calls' period or
 * DEDMPI_STEP_ROUNDS, not from their ends alone. */
static uint64_t step_length(const ded_step *st, bool *sure) {
  unsigned n = st->nsig;
  *sure = true;
  if (n == 0) return 0;
  if (st->step_calls_set) return n >= st->step_calls_set ? st->end[st->step_calls_set - 1] : 0;
  unsigned p = n - st->pi[n - 1]; /* the calls' shortest period */
  if (3 * p <= n) return st->end[p - 1];
  *sure = false;
  /* The calls may still turn out to repeat (buckets of one size in
   * buffers of their own look like steps of one bucket by their ends
   * alone): lengths only once they cannot. */
  if (st->pi[n - 1] > 0) return 0;
  uint64_t total = st->end[n - 1];
  for (unsigned i = 0; i < n && DED_STEP_ENDS_SEEN * st->end[i] <= total; i++) {
    uint64_t len = st->end[i];
    bool ok = true;
    for (uint64_t k = 2 * len; k <= total && ok; k += len) ok = step_is_end(st, k);
    if (ok) return len;
  }
  return 0;
}

/* Forgets the calls: steps are counted from |pos| on. */
static void step_restart(ded_step *st, uint64_t pos) {
  st->pos0 = pos;
  st->nsig = 0;
  st->len = 0;
  st->len_sure = false;
}

/* Counts the call of |count| elements at st->pos into the step. */
static void step_learn(ded_step *st, const void *buf, int count, MPI_Datatype dt) {
  uint64_t start = st->pos - st->pos0, stop = start + (uint64_t)count;
  if (st->len) {
    /* A call that crosses a step's edge: the step is not what it seemed. */
    if (start / st->len == (stop - 1) / st->len) return;
    st->log(DED_LOG_WARN, "an all-reduce crosses the end of a training step of %llu elements; "
            "state is not served to joiners until the step is learnt again",
            (unsigned long long)st->len);
    step_restart(st, st->pos);
    start = 0;
    stop = (uint64_t)count;
  }
  if (st->nsig == DED_STEP_SIG_MAX) return; /* no period in three steps of the most calls */
  unsigned i = st->nsig++;
  st->sig[i] = (struct ded_step_sig){buf, count, dt};
  st->end[i] = stop;
  unsigned k = i ? st->pi[i - 1] : 0;
  while (i && k > 0 && !sig_eq(&st->sig[k], &st->sig[i])) k = st->pi[k - 1];
  if (i && sig_eq(&st->sig[k], &st->sig[i])) k++;
  st->pi[i] = i ? k : 0;
  st->len = step_length(st, &st->len_sure);
  if (st->len && !st->step_logged) {
    st->log(DED_LOG_INFO, "a training step is %llu elements of the gradient stream (%s)",
            (unsigned long long)st->len,
            st->step_calls_set ? "DEDMPI_STEP_ROUNDS"
            : st->len_sure     ? "learnt from the all-reduces"
                               : "learnt from where the all-reduces end");
    st->step_logged = true;
  }
}

/* Whether a step begins at element |pos| of the stream. */
static bool step_begins_at(const ded_step *st, uint64_t pos) {
  return st->len && (pos - st->pos0) % st->len == 0;
}

void ded_step_offer(ded_step *st, ded_driver *driver, bool step_begins, bool idle) {
  /* Not while a reloaded state waits to apply: the pieces are stale. */
  if (!atomic_load_explicit(&st->snap_wanted, memory_order_relaxed) || !step_begins || !idle ||
      st->reload != DED_STEP_RELOAD_NONE)
    return;
  /* The round this step began at, read as the call began: the call is
   * submitted by now, and a round the job completes alone may already be
   * reported, past |next_round|. The pieces hold the state before it. */
  pthread_mutex_lock(&st->mu);
  uint64_t round = st->step_round;
  unsigned step_rounds = st->step_rounds;
  pthread_mutex_unlock(&st->mu);
  if (round == 0 || step_rounds == 0) return; /* no whole step seen yet */
  atomic_store(&st->snap_wanted, false);
  ded_snapshot snap;
  memset(&snap, 0, sizeof snap);
  snap.round = round;
  snap.step_rounds = DED_MIN(step_rounds, (unsigned)DED_STATE_STEP_ROUNDS_MAX);
  if (ded_step_image(st, &snap)) ded_driver_snapshot_set(driver, &snap);
}

void ded_step_want_snapshot(ded_step *st) { atomic_store(&st->snap_wanted, true); }

void ded_step_want_reload(ded_step *st) {
  pthread_mutex_lock(&st->mu);
  st->behind = DED_MAX(st->behind, st->next_round + 1);
  pthread_mutex_unlock(&st->mu);
}

/* ---------------------------------------------------------------- falling out of step */

void ded_step_round_done(ded_step *st, const ded_round_result *res) {
  pthread_mutex_lock(&st->mu);
  if (res->round + 1 > st->next_round) st->next_round = res->round + 1;
  if (res->behind > st->behind) st->behind = res->behind;
  if (res->diverged) st->diverged = true;
  if (res->founder) st->diverged = false; /* its state is the run's */
  if (!res->diverged && !res->behind) st->reload_fails = 0; /* in step: a new count */
  if (res->founder || (!res->diverged && !res->behind))
    st->own_from = 0;
  else if (!st->own_from)
    st->own_from = res->round + 1;
  if (res->late && !res->alone && res->swarm_round > res->round) {
    st->late_swarm = res->swarm_round;
    st->late_round = res->round;
    if (st->reload_gap_pending) st->reload_gap = res->swarm_round - res->round;
    st->reload_gap_pending = false;
  } else if (!res->late) {
    st->late_swarm = 0; /* in step */
  }
  pthread_mutex_unlock(&st->mu);
}

/* If the job is to reload the run's state now (it is out of step, or far
 * behind, and a step begins here with nothing else in flight), the round
 * the snapshot must be of or after, |*late_only| if it is only far
 * behind; else 0. Once it says so, it says so again only if the swarm
 * does. */
static uint64_t reload_wanted(ded_step *st, bool step_begins, bool idle, bool *late_only) {
  pthread_mutex_lock(&st->mu);
  uint64_t behind = st->behind;
  if (st->diverged && behind < st->next_round) behind = st->next_round;
  *late_only = false;
  if (!behind && st->late_swarm && st->step_rounds) {
    uint64_t gap = st->late_swarm - st->late_round;
    if (gap >= (uint64_t)DED_STEP_RELOAD_GAP_STEPS * st->step_rounds && gap > 2 * st->reload_gap) {
      behind = st->late_swarm;
      *late_only = true;
    }
  }
  bool go = behind && step_begins && st->npieces > 0 && idle;
  if (go) {
    st->behind = st->late_swarm = 0; /* asked again if the swarm says so again */
    st->diverged = false;
    st->reload_gap_pending = true;
  }
  pthread_mutex_unlock(&st->mu);
  return go ? behind : 0;
}

/* Loads a snapshot of round |min_round| or later that fits this job's
 * pieces; the stream resumes at its round, at the start of a step.
 * |late_only|: the job is in step, only far behind (the engine waits
 * less for an offer then, and the job goes on catching up without one). */
static void reload_run(ded_step *st, ded_driver *driver, uint64_t min_round, bool late_only) {
  ded_snapshot snap;
  int rv = ded_driver_state_reload(driver, min_round, &snap);
  pthread_mutex_lock(&st->mu); /* the driver thread resets it (ded_step_round_done) */
  unsigned fails = st->reload_fails;
  st->reload_fails = rv != 0 && !late_only ? fails + 1 : rv != 0 ? fails : 0;
  pthread_mutex_unlock(&st->mu);
  if (rv != 0) {
    if (late_only)
      st->log(DED_LOG_INFO, "cannot reload the run's state (%s): this job, in step but late, "
              "goes on fetching the results of the rounds it came late to", ded_strerror(rv));
    else if (fails == 0)
      st->log(DED_LOG_WARN, "cannot reload the run's state (%s): this job stays out of step "
              "and keeps its own values (tried again at its next steps)", ded_strerror(rv));
    else
      st->log(DED_LOG_DEBUG, "cannot reload the run's state (%s), %u times in a row",
              ded_strerror(rv), fails + 1);
    return;
  }
  const char *why;
  if (!ded_step_image_fits(st, snap.bytes, snap.len, &why)) {
    st->log(DED_LOG_ERROR, "the run's state (%llu bytes) does not fit this job's (%zu pieces, "
            "%llu bytes): %s; it stays out of step", (unsigned long long)snap.len, st->npieces,
            (unsigned long long)st->total, why);
    free(snap.bytes);
    return;
  }
  st->log(DED_LOG_INFO, "reloaded the run's state at round %llu (%llu bytes): this step, from "
          "element %llu of the gradient stream on (was %llu), ends with it%s",
          (unsigned long long)snap.round, (unsigned long long)snap.len,
          (unsigned long long)snap.pos, (unsigned long long)st->pos,
          fails ? " (after reloads that failed at earlier steps)" : "");
  free(st->loaded.bytes);
  st->loaded = snap;
  st->pos0 = st->pos = snap.pos; /* a step begins there, as it does here */
  pthread_mutex_lock(&st->mu);
  st->next_round = st->step_round = snap.round;
  st->step_round_known = true;
  pthread_mutex_unlock(&st->mu);
  st->reload = DED_STEP_RELOAD_LOADED;
}

/* The stream resumes at the snapshot's round; the pieces take the
 * snapshot's bytes when the all-reduce that ends this step completes,
 * before the trainer applies the step's results (applying them at the
 * start would race with a backward pass still reading the parameters). */
bool ded_step_call_begin(ded_step *st, ded_driver *driver, const void *buf, int count,
                         MPI_Datatype dt, bool idle, bool *ends_reload) {
  *ends_reload = false;
  bool begins = step_begins_at(st, st->pos);
  if (st->reload != DED_STEP_RELOAD_LOADED) {
    bool late_only;
    uint64_t min_round = reload_wanted(st, begins, idle, &late_only);
    if (min_round) reload_run(st, driver, min_round, late_only);
  }
  if (begins && idle) {
    pthread_mutex_lock(&st->mu);
    if (st->step_round_known && st->next_round > st->step_round)
      st->step_rounds = (unsigned)DED_MIN(st->next_round - st->step_round, (uint64_t)UINT32_MAX);
    st->step_round = st->next_round;
    st->step_round_known = true;
    pthread_mutex_unlock(&st->mu);
  }
  step_learn(st, buf, count, dt);
  st->pos += (uint64_t)count;
  if (st->reload == DED_STEP_RELOAD_LOADED && step_begins_at(st, st->pos)) {
    st->reload = DED_STEP_RELOAD_DUE;
    *ends_reload = true;
  }
  return begins;
}

void ded_step_apply(ded_step *st) {
  if (st->loaded.bytes) { /* rank 0: an image that fits (checked as it loaded) */
    uint64_t off = ded_image_table_bytes(st->npieces);
    for (size_t i = 0; i < st->npieces; i++) {
      memcpy(st->pieces[i].p, st->loaded.bytes + off, st->pieces[i].bytes);
      off += st->pieces[i].bytes;
    }
  }
  free(st->loaded.bytes);
  st->loaded.bytes = NULL;
  st->reload = DED_STEP_RELOAD_NONE;
  for (size_t i = 0; st->size > 1 && i < st->npieces; i++)
    for (size_t off = 0; off < st->pieces[i].bytes;) {
      size_t n = DED_MIN(st->pieces[i].bytes - off, (size_t)1 << 30);
      PMPI_Bcast((char *)st->pieces[i].p + off, (int)n, MPI_BYTE, 0, st->comm);
      off += n;
    }
}
