/*
 * ded_step.c: where a job's training steps begin, its snapshots for
 * joiners and its reloads when it falls out of step (see ded_step.h).
 */
#define _GNU_SOURCE
#include "ded_step.h"

#include <stdlib.h>
#include <string.h>

void ded_step_init(ded_step *st, int size, MPI_Comm comm, unsigned step_rounds,
                   ded_step_log_fn log) {
  memset(st, 0, sizeof *st);
  st->size = size;
  st->comm = comm;
  st->step_rounds_set = step_rounds;
  st->log = log;
  atomic_init(&st->snap_wanted, false);
  pthread_mutex_init(&st->mu, NULL);
}

void ded_step_free(ded_step *st) {
  free(st->loaded.bytes);
  st->loaded.bytes = NULL;
  st->reload = DED_STEP_RELOAD_NONE;
  pthread_mutex_destroy(&st->mu);
}

void ded_step_piece_add(ded_step *st, void *p, size_t bytes) {
  if (st->npieces == DED_STATE_PIECES_MAX) {
    if (!st->pieces_full_logged)
      st->log(DED_LOG_WARN, "more than %d pieces of state: the rest is not served to joiners",
              DED_STATE_PIECES_MAX);
    st->pieces_full_logged = true;
    return;
  }
  st->pieces[st->npieces].p = p;
  st->pieces[st->npieces].bytes = bytes;
  st->npieces++;
}

void ded_step_resume(ded_step *st, uint64_t round) { st->round0 = round; }

/* ---------------------------------------------------------------- steps */

/* Learns how many routed all-reduces make a training step from the call
 * just counted, as the shortest period of the calls' (buffer, count,
 * type), once seen three times over; a call that breaks it makes the
 * period unknown again. DEDMPI_STEP_ROUNDS says it instead. */
static void step_learn(ded_step *st, const void *buf, int count, MPI_Datatype dt) {
  if (st->step_rounds_set) {
    st->rounds = st->step_rounds_set;
    return;
  }
  struct ded_step_sig sg = {buf, count, dt};
  if (st->nsig < DED_STEP_SIG_MAX) st->sig[st->nsig++] = sg;
  if (st->rounds) {
    const struct ded_step_sig *ref = &st->sig[(st->nops - 1) % st->rounds];
    if (ref->buf == sg.buf && ref->count == sg.count && ref->dt == sg.dt) return;
    st->log(DED_LOG_WARN, "the training step no longer repeats every %u all-reduce%s; state "
            "is not served to joiners until it is learnt again", st->rounds,
            st->rounds == 1 ? "" : "s");
    st->rounds = 0;
    st->nsig = 0; /* start over from here: round0 no longer begins a period */
    st->round0 = st->round0 + st->nops - 1;
    st->nops = 1;
    st->sig[st->nsig++] = sg;
    return;
  }
  for (unsigned p = 1; 3 * p <= st->nsig; p++) {
    bool ok = true;
    for (unsigned i = p; i < st->nsig && ok; i++)
      ok = st->sig[i].buf == st->sig[i - p].buf && st->sig[i].count == st->sig[i - p].count &&
           st->sig[i].dt == st->sig[i - p].dt;
    if (ok) {
      st->rounds = p;
      return;
    }
  }
}

void ded_step_offer(ded_step *st, ded_driver *driver, uint64_t round) {
  /* Not while a reloaded state waits to apply: the pieces are stale. */
  if (!atomic_load_explicit(&st->snap_wanted, memory_order_relaxed) || !st->rounds ||
      (round - st->round0) % st->rounds != 0 || st->reload != DED_STEP_RELOAD_NONE)
    return;
  atomic_store(&st->snap_wanted, false);
  ded_snapshot snap;
  memset(&snap, 0, sizeof snap);
  snap.round = round;
  snap.step_rounds = st->rounds;
  snap.npieces = st->npieces;
  for (unsigned i = 0; i < st->npieces; i++) {
    snap.sizes[i] = st->pieces[i].bytes;
    snap.len += st->pieces[i].bytes;
  }
  snap.bytes = malloc(snap.len ? snap.len : 1);
  if (!snap.bytes) {
    st->log(DED_LOG_WARN, "no memory for a snapshot of %llu bytes", (unsigned long long)snap.len);
    return;
  }
  uint64_t off = 0;
  for (unsigned i = 0; i < st->npieces; i++) {
    memcpy(snap.bytes + off, st->pieces[i].p, st->pieces[i].bytes);
    off += st->pieces[i].bytes;
  }
  snap.digest = ded_digest64(snap.bytes, snap.len);
  ded_driver_snapshot_set(driver, &snap);
}

void ded_step_want_snapshot(ded_step *st) { atomic_store(&st->snap_wanted, true); }

/* ---------------------------------------------------------------- falling out of step */

void ded_step_round_done(ded_step *st, const ded_round_result *res) {
  pthread_mutex_lock(&st->mu);
  if (res->behind > st->behind) st->behind = res->behind;
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
 * the snapshot must be of or after; else 0. Once it says so, it says so
 * again only if the swarm does. */
static uint64_t reload_wanted(ded_step *st, bool idle) {
  pthread_mutex_lock(&st->mu);
  uint64_t behind = st->behind;
  if (!behind && st->late_swarm && st->rounds) {
    uint64_t gap = st->late_swarm - st->late_round;
    if (gap >= (uint64_t)DED_STEP_RELOAD_GAP_STEPS * st->rounds && gap > 2 * st->reload_gap)
      behind = st->late_swarm;
  }
  bool go = behind && st->rounds && st->nops % st->rounds == 0 && st->npieces > 0 && idle;
  if (go) {
    st->behind = st->late_swarm = 0; /* asked again if the swarm says so again */
    st->reload_gap_pending = true;
  }
  pthread_mutex_unlock(&st->mu);
  return go ? behind : 0;
}

/* Loads a snapshot of round |min_round| or later that fits this job's
 * pieces and step; the rounds resume at its round. */
static void reload_run(ded_step *st, ded_driver *driver, uint64_t min_round) {
  ded_snapshot snap;
  int rv = ded_driver_state_reload(driver, min_round, &snap);
  if (rv != 0) {
    st->log(DED_LOG_WARN, "cannot reload the run's state (%s): this job stays out of step "
            "and keeps its own values", ded_strerror(rv));
    return;
  }
  uint64_t total = 0;
  bool same = snap.step_rounds == st->rounds && snap.npieces == st->npieces;
  for (unsigned i = 0; same && i < st->npieces; i++) {
    same = snap.sizes[i] == st->pieces[i].bytes;
    total += snap.sizes[i];
  }
  if (!same || total != snap.len) {
    st->log(DED_LOG_ERROR, "the run's state (%u piece%s, steps of %u all-reduces) does not "
            "fit this job's (%u, %u): it stays out of step", snap.npieces,
            snap.npieces == 1 ? "" : "s", snap.step_rounds, st->npieces, st->rounds);
    free(snap.bytes);
    return;
  }
  st->log(DED_LOG_INFO, "reloaded the run's state at round %llu (%llu bytes); it applies at "
          "the end of this step", (unsigned long long)snap.round, (unsigned long long)snap.len);
  free(st->loaded.bytes);
  st->loaded = snap;
  st->round0 = snap.round;
  st->nops = 0;
  st->reload_left = st->rounds;
  st->reload = DED_STEP_RELOAD_LOADED;
}

/* The rounds resume at the snapshot's, this one first; the pieces take
 * the snapshot's bytes when this step's last all-reduce completes, before
 * the trainer applies the step's results (applying them at the start
 * would race with a backward pass still reading the parameters). */
uint64_t ded_step_round_begin(ded_step *st, ded_driver *driver, const void *buf, int count,
                              MPI_Datatype dt, bool idle, bool *ends_reload) {
  *ends_reload = false;
  if (st->reload != DED_STEP_RELOAD_LOADED) {
    uint64_t min_round = reload_wanted(st, idle);
    if (min_round) reload_run(st, driver, min_round);
  }
  if (st->reload == DED_STEP_RELOAD_LOADED && --st->reload_left == 0) {
    st->reload = DED_STEP_RELOAD_DUE;
    *ends_reload = true;
  }
  uint64_t round = st->round0 + st->nops++;
  step_learn(st, buf, count, dt);
  return round;
}

void ded_step_apply(ded_step *st) {
  if (st->loaded.bytes) { /* rank 0 */
    uint64_t off = 0;
    for (unsigned i = 0; i < st->npieces; i++) {
      memcpy(st->pieces[i].p, st->loaded.bytes + off, st->pieces[i].bytes);
      off += st->pieces[i].bytes;
    }
  }
  free(st->loaded.bytes);
  st->loaded.bytes = NULL;
  st->reload = DED_STEP_RELOAD_NONE;
  for (unsigned i = 0; st->size > 1 && i < st->npieces; i++)
    for (size_t off = 0; off < st->pieces[i].bytes;) {
      size_t n = DED_MIN(st->pieces[i].bytes - off, (size_t)1 << 30);
      PMPI_Bcast((char *)st->pieces[i].p + off, (int)n, MPI_BYTE, 0, st->comm);
      off += n;
    }
}
