/*
 * keeper.c: a backbone's checkpoints (keeper.h).
 *
 * Every second the thread looks at the run (ded_driver_status: the newest
 * round a connected trainer's record shows) and pulls when one is due:
 * DEDMPI_CHECKPOINT_EVERY seconds after the last pull, or that many
 * training steps (each of the last checkpoint's step_rounds rounds) past
 * the last checkpoint's round; only while a trainer is connected and its
 * rounds went past the last checkpoint. A pull that brings nothing or
 * fails is tried again at the next interval, 5 s later at the earliest.
 */
#define _GNU_SOURCE
#include "keeper.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "core/ded_err.h"
#include "ded_ckpt.h"

#define KEEPER_LOOK_NS 1000000000ull
#define KEEPER_RETRY_NS 5000000000ull

struct keeper {
  ded_driver *d;
  char dir[1024];
  uint8_t run_hash[32];
  uint64_t every; /* steps, or ns if |every_ns| */
  bool every_ns;
  unsigned keep;
  uint64_t round;       /* the last checkpoint's (0: none) */
  uint32_t step_rounds; /* its step (0: none) */
  uint64_t last_ns, next_try_ns;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool stop;
};

static void keeper_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void keeper_say(const char *fmt, ...) {
  char line[1200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  fprintf(stderr, "dedrun: backbone: %s\n", line);
}

static void keeper_log(void *user, const char *line) {
  (void)user;
  keeper_say("%s", line);
}

static uint64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The newest round a connected trainer's record shows; false if none shows one. */
static bool keeper_swarm_round(keeper *k, uint64_t *round) {
  ded_swarm_status st;
  if (ded_driver_status(k->d, &st) != 0) return false;
  bool any = false;
  for (size_t i = 0; i < st.npeers; i++) {
    const ded_status_peer *p = &st.peers[i];
    if (p->self || !p->connected || p->no_rounds) continue;
    if (p->progress.round == 0 && p->progress.contributors == 0) continue;
    if (!any || p->progress.round > *round) *round = p->progress.round;
    any = true;
  }
  free(st.peers);
  return any;
}

static bool keeper_due(keeper *k, uint64_t now, uint64_t *min_round) {
  uint64_t swarm;
  if (now < k->next_try_ns || !keeper_swarm_round(k, &swarm)) return false;
  /* A run that went back past our checkpoint (it restarted from an older
   * one): any round of it will do. */
  *min_round = swarm + 1 < k->round ? 1 : k->round + 1;
  if (k->round && swarm < k->round) return swarm + 1 < k->round && now >= k->last_ns + KEEPER_RETRY_NS;
  if (k->every_ns) return k->round == 0 || now >= k->last_ns + k->every;
  uint64_t step = k->step_rounds ? k->step_rounds : 1;
  return k->round == 0 || swarm >= k->round + k->every * step;
}

static void keeper_pull(keeper *k, uint64_t min_round) {
  uint64_t t0 = ded_driver_now_ns();
  ded_snapshot snap;
  int rv = ded_driver_state_pull(k->d, min_round, &snap);
  uint64_t now = ded_driver_now_ns();
  k->next_try_ns = now + KEEPER_RETRY_NS;
  if (rv != 0) {
    keeper_say("no checkpoint pulled: %s", ded_strerror(rv));
    return;
  }
  if (!snap.bytes) return; /* no trainer offered one: nothing new */
  char err[600];
  if (ded_ckpt_write(k->dir, k->run_hash, &snap, wall_ms(), k->keep, err, sizeof err) != 0) {
    keeper_say("checkpoint of round %llu not written: %s", (unsigned long long)snap.round, err);
    free(snap.bytes);
    return;
  }
  keeper_say("checkpoint of round %llu written: %llu bytes in %llu ms, %s/ckpt-%020llu.ded",
             (unsigned long long)snap.round, (unsigned long long)snap.len,
             (unsigned long long)((now - t0) / 1000000u), k->dir, (unsigned long long)snap.round);
  k->round = snap.round;
  k->step_rounds = snap.step_rounds;
  k->last_ns = now;
  ded_driver_keep_set(k->d, &snap); /* takes the bytes */
}

static void *keeper_main(void *arg) {
  keeper *k = arg;
  pthread_mutex_lock(&k->mu);
  while (!k->stop) {
    ded_cond_wait_ns(&k->cv, &k->mu, KEEPER_LOOK_NS);
    if (k->stop) break;
    pthread_mutex_unlock(&k->mu);
    uint64_t min_round;
    if (keeper_due(k, ded_driver_now_ns(), &min_round)) keeper_pull(k, min_round);
    pthread_mutex_lock(&k->mu);
  }
  pthread_mutex_unlock(&k->mu);
  return NULL;
}

int keeper_start(ded_driver *d, const ded_config *cfg, keeper **out, char *err, size_t errlen) {
  *out = NULL;
  keeper *k = calloc(1, sizeof *k);
  if (!k) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  k->d = d;
  snprintf(k->dir, sizeof k->dir, "%s", cfg->checkpoint_dir);
  ded_ckpt_run_hash(cfg->run, k->run_hash);
  k->every = cfg->checkpoint_every;
  k->every_ns = cfg->checkpoint_every_ns;
  k->keep = cfg->checkpoint_keep;
  if (mkdir(k->dir, 0700) != 0 && errno != EEXIST) {
    snprintf(err, errlen, "cannot create the checkpoint directory %s: %s", k->dir, strerror(errno));
    free(k);
    return -1;
  }
  ded_snapshot snap;
  char name[1200];
  int found = ded_ckpt_load(k->dir, k->run_hash, &snap, name, sizeof name, keeper_log, NULL, err,
                            errlen);
  if (found < 0) {
    free(k);
    return -1;
  }
  if (found) {
    keeper_say("loaded %s: the run's state at round %llu (%llu bytes), served to joiners once "
               "no trainer is left", name, (unsigned long long)snap.round,
               (unsigned long long)snap.len);
    k->round = snap.round;
    k->step_rounds = snap.step_rounds;
    k->last_ns = ded_driver_now_ns();
    ded_driver_keep_set(d, &snap);
  } else {
    keeper_say("no checkpoint in %s yet", k->dir);
  }
  pthread_mutex_init(&k->mu, NULL);
  pthread_cond_init(&k->cv, NULL); /* ded_cond_wait_ns's clock */
  if (pthread_create(&k->thread, NULL, keeper_main, k) != 0) {
    snprintf(err, errlen, "cannot start the checkpoint thread");
    pthread_cond_destroy(&k->cv);
    pthread_mutex_destroy(&k->mu);
    free(k);
    return -1;
  }
  *out = k;
  return 0;
}

void keeper_stop(keeper *k) {
  if (!k) return;
  pthread_mutex_lock(&k->mu);
  k->stop = true;
  pthread_cond_broadcast(&k->cv);
  pthread_mutex_unlock(&k->mu);
  pthread_join(k->thread, NULL);
  pthread_cond_destroy(&k->cv);
  pthread_mutex_destroy(&k->mu);
  free(k);
}
