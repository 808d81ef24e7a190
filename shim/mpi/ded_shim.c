/*
 * ded_shim.c: the MPI face of dedmpi, by PMPI interposition.
 *
 * Preloaded into an Open MPI job, this file's MPI_Allreduce and
 * MPI_Iallreduce take the calls that go to the swarm (ded_route.h:
 * MPI_SUM of MPI_FLOAT or MPI_DOUBLE, at least DEDMPI_MIN_ELEMENTS, on a
 * communicator congruent to MPI_COMM_WORLD) and pass every other call to
 * PMPI as is.
 *
 * A routed call ("op") goes through three steps:
 *
 *   1. at the call, the job's local sum: PMPI_Allreduce on a private
 *      duplicate of MPI_COMM_WORLD, so every rank holds S_j, bit for bit
 *      what plain MPI gives; rank 0 then hands the buffer to the swarm
 *      driver, whose thread runs the round in the background;
 *   2. the outcome (a small header) and the buffer go from rank 0 to the
 *      other ranks by two PMPI_Ibcast on a second private duplicate: the
 *      other ranks post theirs at the call, rank 0 once the swarm is done;
 *   3. when both broadcasts completed, the call completes: a blocking call
 *      returns, a nonblocking one completes the generalized request the
 *      application holds.
 *
 * Only the application's own threads call MPI. The driver thread never
 * does (like Open MPI's own event threads, present in every process), so
 * the shim asks MPI for exactly the thread level the application asks for:
 * Open MPI 4.1 makes small all-reduces ~45% slower at MPI_THREAD_FUNNELED
 * or above than at MPI_THREAD_SINGLE (measured with bench/loopback.py), a
 * price a shim that promises pass-through must not charge.
 * Steps 2 and 3 make progress whenever the application is inside MPI
 * through the shim: in a routed call, and in every MPI_Wait* and MPI_Test*
 * (wrapped below; one atomic load when nothing is pending). Broadcasts are
 * posted in call order on every rank, so they always match.
 *
 * The constructor does nothing (mpirun itself loads preloaded libraries);
 * everything starts in MPI_Init.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "core/ded_assert.h"
#include "core/ded_msg.h"
#include "ded_config.h"
#include "ded_driver.h"
#include "ded_route.h"
#include "ded_shim_int.h"
#include "ded_step.h"
#include "dedmpi.h"
#include "state/ded_image.h"


extern char **environ;

/* Rank 0's founding: NONE (not a founder) -> WAIT (its state handed to
 * the swarm with its first all-reduce) -> DUE (the first round reported,
 * naming its contributors if there were others) -> BUSY (finding whose
 * state it is) -> DONE. */
enum shim_found { FOUND_NONE, FOUND_WAIT, FOUND_DUE, FOUND_BUSY, FOUND_DONE };

/* The outcome rank 0 broadcasts to the other ranks of the job. */
typedef struct shim_header {
  int32_t mpi_err;
  int32_t alone;
  int32_t late;
  int32_t contributors;
  int32_t recoveries;
  int32_t reload; /* the state pieces take the run's snapshot now */
  double total_weight;
  uint64_t round;
} shim_header;

/* One routed all-reduce. */
typedef struct shim_op {
  struct shim_op *next;
  void *recvbuf;
  int count;
  MPI_Datatype dt;
  size_t bytes;
  int local_err;   /* step 1's PMPI result */
  bool swarm_done; /* rank 0: the driver reported its last round (under S.mu) */
  unsigned rounds;  /* rank 0: rounds reported so far */
  ded_round_result res; /* rank 0: their outcome together */
  shim_header hdr;
  MPI_Request bcast[2]; /* header, buffer */
  bool posted; /* the header is final and (with other ranks) the broadcasts are out */
  bool complete;
  int mpi_err;
  bool nonblocking;
  bool reload; /* rank 0: ends the step at which a reloaded state applies */
  uint64_t start_ns; /* rank 0: when the driver got it */
  MPI_Request greq;
  /* Freed when the shim is done with it and, for a nonblocking op, MPI
   * called greq_free: whichever comes last. */
  int refs;
} shim_op;

static struct {
  bool active; /* routing to the swarm is on */
  ded_config cfg;
  int rank, size;
  MPI_Comm comm_reduce, comm_bcast, comm_state;
  ded_driver *driver;
  /* Ops in call order, oldest first; |post| is the first op rank 0 has not
   * posted its broadcasts for. Under |mu|, as is everything below. |mu| is
   * recursive: completing a generalized request the application already
   * freed calls greq_free from inside PMPI_Grequest_complete. */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  shim_op *head, *tail, *post;
  atomic_int pending; /* ops not complete: the fast path of Wait/Test */
  /* What is routed (ded_route.h). Below min_count elements a sum goes to
   * PMPI after three compares, as does another op below watch_count,
   * unless rank 0 is still counting its census. */
  ded_route route;
  int64_t min_count, watch_count;
  double weight;
  bool weight_set;
  dedmpi_round_info last;
  bool have_last;
  char prefix[48];
  /* The job's state (docs/architecture.md, "Joining a run in progress"):
   * its pieces are the buffers of the large start-up broadcasts from rank
   * 0 and those registered through dedmpi.h, in call order; |step| keeps
   * them, serves them to joiners and reloads them when the job falls out
   * of step. A job that joins a run in progress fills them from the
   * run's state first. */
  ded_step step;
  bool started;     /* a routed all-reduce began: the state's pieces are known */
  bool state_known; /* rank 0: the swarm said whether a run is in progress */
  int state_err;    /* rank 0: why it could not say (MPI error code) */
  ded_snapshot loaded; /* rank 0: the run's state (bytes until handed out) */
  ded_image_view loaded_view; /* rank 0: its pieces */
  uint64_t loaded_next, loaded_off;
  /* Rank 0, a job that found no run in progress: the founding of its
   * initial state (docs/architecture.md, "One initial model"). Its first
   * all-reduce is not posted until the first round's contributors say
   * whose state the run starts from and, if another's, it is loaded. */
  _Atomic int found; /* enum shim_found */
  shim_op *found_op;
  uint8_t *found_cands; /* the first round's contributors (malloc), while DUE */
  unsigned found_ncands;
  int progress_fd; /* rank 0: DEDMPI_PROGRESS, connected; -1 = none */
  /* Rank 0: why this job could not take part (DED_LEAVE_*; 0 = it could),
   * for the LEAVE at MPI_Finalize: the other jobs log it. */
  uint8_t leave_reason;
} S = {.mu = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP, .cv = PTHREAD_COND_INITIALIZER, .progress_fd = -1};

DED_PRINTF(2, 3)
static void shim_log(int level, const char *fmt, ...) {
  if (level > S.cfg.log_level) return;
  static const char *names[] = {"error", "warning", "info", "debug"};
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  fprintf(stderr, "%s %s: %s\n", S.prefix[0] ? S.prefix : "dedmpi", names[level], line);
}

static int err_to_mpi(int ded_err) {
  switch (ded_err) {
  case 0: return MPI_SUCCESS;
  case DED_ERR_SIZE_MISMATCH: return MPI_ERR_COUNT;
  case DED_ERR_NOMEM: return MPI_ERR_NO_MEM;
  default: return MPI_ERR_OTHER;
  }
}

/* Rank 0: this job failed in a way the other jobs should hear of when it
 * leaves; the first reason stays (what follows is likely its consequence).
 * Any thread. */
static void leave_reason_set(uint8_t reason) {
  pthread_mutex_lock(&S.mu);
  if (!S.leave_reason) S.leave_reason = reason;
  pthread_mutex_unlock(&S.mu);
}

static void op_unref(shim_op *op) {
  if (--op->refs == 0) free(op);
}

/* ---------------------------------------------------------------- progress */

/* Rank 0: one line about a finished round to DEDMPI_PROGRESS (dedrun's
 * progress line), never blocking: a report the reader has no room for is
 * dropped. */
static void progress_report(const shim_op *op, const ded_round_result *res) {
  if (S.progress_fd < 0) return;
  uint64_t now = ded_driver_now_ns();
  char line[256];
  int n = snprintf(line, sizeof line,
                   "dedmpi-progress 1 round=%llu ms=%.1f bytes=%llu contributors=%u peers=%u "
                   "late=%d alone=%d recoveries=%u error=%d\n",
                   (unsigned long long)res->round,
                   op->start_ns && now > op->start_ns ? (double)(now - op->start_ns) / 1e6 : 0.0,
                   (unsigned long long)op->bytes, res->contributors,
                   S.driver ? ded_driver_peer_count(S.driver) : 0u, res->late, res->alone,
                   res->recoveries, res->status);
  if (n > 0 && (size_t)n < sizeof line)
    (void)send(S.progress_fd, line, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* Rank 0: connects to DEDMPI_PROGRESS; a failure costs the progress line
 * only. */
static void progress_open(void) {
  if (!S.cfg.progress[0]) return;
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  size_t len = strlen(S.cfg.progress);
  DED_ASSERT(len < sizeof sa.sun_path);
  memcpy(sa.sun_path, S.cfg.progress, len);
  if (sa.sun_path[0] == '@') sa.sun_path[0] = '\0'; /* abstract */
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd >= 0 &&
      connect(fd, (struct sockaddr *)&sa, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len)) == 0) {
    S.progress_fd = fd;
    return;
  }
  shim_log(DED_LOG_WARN, "DEDMPI_PROGRESS=%s: %s (no progress reports)", S.cfg.progress,
           strerror(errno));
  if (fd >= 0) close(fd);
}

/* Driver thread, under S.mu: the first round of a founding job reported
 * (no contributors to name when it was alone, failed, or not the run's
 * first: the node then only learns that the round is over). */
static void found_first_round(const ded_round_result *res) {
  S.found_ncands = 0;
  if (res->status == 0 && res->round == 0 && !res->alone && res->members && res->contributors) {
    S.found_cands = malloc((size_t)res->contributors * DED_ID_BYTES);
    if (S.found_cands) {
      memcpy(S.found_cands, res->members, (size_t)res->contributors * DED_ID_BYTES);
      S.found_ncands = res->contributors;
    } else {
      shim_log(DED_LOG_ERROR, "no memory to agree on the run's initial state: this job keeps "
               "its own");
    }
  } else if (res->status == 0 && res->round != 0 && !res->alone) {
    shim_log(DED_LOG_WARN, "this job found no run in progress, but its first round is the "
             "run's round %llu: it reloads the run's state at its next step",
             (unsigned long long)res->round);
    ded_step_want_reload(&S.step);
  }
  atomic_store(&S.found, FOUND_DUE);
}

/* Rank 0, an application thread, without S.mu: once the first round named
 * its contributors, finds whose state the run starts from; another's is
 * loaded into the pieces as the first all-reduce completes. */
static void found_run(void) {
  int due = FOUND_DUE;
  if (atomic_load_explicit(&S.found, memory_order_relaxed) != FOUND_DUE ||
      !atomic_compare_exchange_strong(&S.found, &due, FOUND_BUSY))
    return;
  ded_snapshot snap;
  int rv = ded_driver_state_found(S.driver, S.found_cands, S.found_ncands, &snap);
  free(S.found_cands);
  S.found_cands = NULL;
  const char *why = NULL;
  if (rv == 0 && snap.bytes && !ded_step_image_fits(&S.step, snap.bytes, snap.len, &why)) {
    shim_log(DED_LOG_ERROR, "the run's initial state does not fit this job's (%s): is it the "
             "same program, model and configuration?", why);
    free(snap.bytes);
    rv = DED_ERR_SIZE_MISMATCH;
    leave_reason_set(DED_LEAVE_MISMATCH_STATE);
  } else if (rv == DED_ERR_TIMEOUT || rv == DED_ERR_INVALID_ARG) {
    /* No peer gave it (the candidates went, or dropped it long ago), or
     * the node kept none of ours: the run's state comes by a reload. */
    shim_log(DED_LOG_WARN, "could not take the run's initial state (%s): this job reloads the "
             "run's state at its next step", ded_strerror(rv));
    ded_step_want_reload(&S.step);
    rv = 0;
  } else if (rv != 0) {
    shim_log(DED_LOG_ERROR, "cannot load the run's initial state (%s): this job cannot take "
             "part", ded_strerror(rv));
    leave_reason_set(DED_LEAVE_ERROR);
  }
  pthread_mutex_lock(&S.mu);
  if (rv != 0) {
    S.found_op->res.status = rv; /* the first all-reduce fails */
  } else if (snap.bytes) {
    shim_log(DED_LOG_INFO, "starting from the run's initial state (another job's, %llu bytes), "
             "as the first all-reduce completes", (unsigned long long)snap.len);
    ded_step_found_load(&S.step, &snap);
    S.found_op->reload = true;
  }
  atomic_store(&S.found, FOUND_DONE);
  pthread_mutex_unlock(&S.mu);
}

/* Whether |op| waits for the founding before it may be posted. */
static bool found_holds(const shim_op *op) {
  if (op != S.found_op) return false;
  int f = atomic_load(&S.found);
  return f == FOUND_WAIT || f == FOUND_DUE || f == FOUND_BUSY;
}

/* Called on the driver thread: the swarm finished a round of rank 0's
 * part of |ctx| (an op may take several rounds: docs/architecture.md,
 * "Alignment by the gradient stream"); the op's outcome sums them up. */
static void shim_swarm_done(void *user, void *ctx, const ded_round_result *res) {
  (void)user;
  shim_op *op = ctx;
  /* Another model's step: the job's call fails with MPI_ERR_COUNT, and
   * so will every step after it. */
  if (res->status == DED_ERR_SIZE_MISMATCH) leave_reason_set(DED_LEAVE_MISMATCH_STEP);
  pthread_mutex_lock(&S.mu);
  ded_step_round_done(&S.step, res); /* before the op shows done: the next op sees it */
  if (op->rounds++ == 0) {
    op->res = *res;
  } else {
    int status = op->res.status ? op->res.status : res->status;
    bool alone = op->res.alone && res->alone, late = op->res.late || res->late;
    uint32_t contributors = DED_MIN(op->res.contributors, res->contributors);
    uint32_t recoveries = op->res.recoveries + res->recoveries;
    op->res = *res;
    op->res.status = status;
    op->res.alone = alone;
    op->res.late = late;
    op->res.contributors = contributors;
    op->res.recoveries = recoveries;
  }
  if (op == S.found_op && atomic_load(&S.found) == FOUND_WAIT) found_first_round(res);
  op->res.members = NULL; /* valid only during the callback */
  if (res->last) {
    progress_report(op, &op->res);
    op->swarm_done = true;
    pthread_cond_broadcast(&S.cv);
  }
  pthread_mutex_unlock(&S.mu);
}

static void op_post(shim_op *op) {
  op->bcast[0] = op->bcast[1] = MPI_REQUEST_NULL;
  if (S.size > 1) {
    PMPI_Ibcast(&op->hdr, (int)sizeof op->hdr, MPI_BYTE, 0, S.comm_bcast, &op->bcast[0]);
    PMPI_Ibcast(op->recvbuf, op->count, op->dt, 0, S.comm_bcast, &op->bcast[1]);
  }
  op->posted = true;
}

/* Rank 0: the header of a finished op, from the driver's report. */
static void op_fill_header(shim_op *op) {
  op->hdr.mpi_err = op->local_err != MPI_SUCCESS ? op->local_err : err_to_mpi(op->res.status);
  op->hdr.alone = op->res.alone;
  op->hdr.late = op->res.late;
  op->hdr.recoveries = (int32_t)op->res.recoveries;
  op->hdr.reload = op->reload;
  op->hdr.contributors = (int32_t)op->res.contributors;
  op->hdr.total_weight = op->res.total_weight;
  op->hdr.round = op->res.round;
}

/* The op's outcome is in |op->hdr| on every rank: finish it. */
static void op_complete(shim_op *op, int bcast_err) {
  if (op->hdr.reload && bcast_err == MPI_SUCCESS) ded_step_apply(&S.step);
  op->mpi_err = bcast_err != MPI_SUCCESS ? bcast_err : op->hdr.mpi_err;
  if (op->mpi_err == MPI_SUCCESS && op->local_err != MPI_SUCCESS) op->mpi_err = op->local_err;
  op->complete = true;
  S.last = (dedmpi_round_info){op->hdr.round, op->hdr.contributors, op->hdr.total_weight,
                               op->hdr.alone, op->hdr.late, op->hdr.recoveries, op->mpi_err};
  S.have_last = true;
  atomic_fetch_sub(&S.pending, 1);
  if (op->nonblocking) PMPI_Grequest_complete(op->greq);
}

/* Moves every op as far as it can go. Called with S.mu held, on an
 * application thread. */
static void progress_locked(void) {
  /* Rank 0 posts broadcasts in call order, each once its swarm part is
   * done; the other ranks posted theirs at the call. An op completes only
   * once posted: a later round the swarm finished first waits for the
   * earlier ones, or it would complete with no outcome at all. */
  while (S.rank == 0 && S.post && S.post->swarm_done && !found_holds(S.post)) {
    op_fill_header(S.post);
    op_post(S.post);
    S.post = S.post->next;
  }
  for (shim_op *op = S.head; op; op = op->next) {
    if (op->complete || !op->posted) continue;
    int flag = 0;
    int rc = PMPI_Testall(2, op->bcast, &flag, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS || flag) op_complete(op, rc);
  }
  /* Drop completed ops from the front; the order of the rest stays. */
  while (S.head && S.head->complete) {
    shim_op *op = S.head;
    S.head = op->next;
    if (!S.head) S.tail = NULL;
    op_unref(op);
  }
}

static void progress(void) {
  if (atomic_load_explicit(&S.pending, memory_order_acquire) == 0) return;
  found_run();
  pthread_mutex_lock(&S.mu);
  progress_locked();
  pthread_mutex_unlock(&S.mu);
}

/* Waits a little between polls: spinning first (local broadcasts finish in
 * microseconds), then yielding, then sleeping, since rank 0's driver thread
 * may need the very core we would spin on. */
static void backoff(unsigned spins) {
  if (spins < 64) return;
  if (spins < 1024) {
    sched_yield();
    return;
  }
  struct timespec ts = {0, spins < 8192 ? 20000 : 200000};
  nanosleep(&ts, NULL);
}


/* ---------------------------------------------------------------- state */

/*
 * A job that starts while a run is in progress loads the run's state
 * before its first round (docs/architecture.md, "Joining a run in
 * progress"). The state
 * is what the trainer broadcasts from rank 0 at start-up (large
 * MPI_Bcasts before the first routed all-reduce: the model) and what it
 * registers with dedmpi_register_state (optimizer moments, the step
 * counter), in call order. Every job's rank 0 keeps the addresses; when a
 * joiner asks, it copies them the next time the trainer enters the first
 * all-reduce of a step, when they hold the state after every round before
 * it (the trainer updates its parameters only after the step's last
 * all-reduce). A joining job's rank 0 fills each piece from the run's
 * snapshot instead, and its rounds resume at the snapshot's round. A job
 * that found no run in progress hands the swarm its pieces as its first
 * all-reduce starts, and takes another's if the first round says the run
 * starts from that (the found_* functions below).
 *
 * The buffers must stay valid and keep holding the state for the whole
 * run: a trainer that broadcasts through a temporary buffer sets
 * DEDMPI_STATE_BCAST=0 and registers the real buffers instead.
 */

/* Driver thread: a joiner asked for this job's state. */
static void shim_want_snapshot(void *user) {
  (void)user;
  ded_step_want_snapshot(&S.step);
}

/* Driver thread: the run's rounds go on while this job sends nothing. */
static void shim_quiet(void *user, uint64_t swarm_round, uint64_t quiet_s) {
  (void)user;
  shim_log(DED_LOG_WARN, "run '%s' is at round %llu and its rounds go on, but this job has "
           "all-reduced nothing to the swarm for %llu s: its gradients stay its own. Likely causes: "
           "a framework that skips its all-reduce with one process (Horovod does at size() == 1: "
           "run 2 ranks or more); a reduction of pickled objects (mpi4py's lowercase "
           "comm.allreduce: use comm.Allreduce on arrays); a type or op of its own (Horovod's "
           "--fp16-allreduce); a sum on a communicator that is not the whole job's",
           S.cfg.run, (unsigned long long)swarm_round, (unsigned long long)quiet_s);
}

/* Rank 0: asks the swarm, once, whether a run is in progress, and if so
 * fetches its state. Returns an MPI error code. */
static int state_sync(void) {
  if (S.state_known) return S.state_err;
  S.state_known = true;
  ded_snapshot snap;
  int rv = ded_driver_state_fetch(S.driver, &snap);
  if (rv != 0) {
    shim_log(DED_LOG_ERROR, "cannot load the state of run '%s' from its peers (%s): this job "
             "cannot join it", S.cfg.run, ded_strerror(rv));
    leave_reason_set(DED_LEAVE_ERROR);
    S.state_err = MPI_ERR_OTHER;
    return S.state_err;
  }
  if (snap.round > 0) {
    if (ded_image_parse(snap.bytes, snap.len, &S.loaded_view) != 0) {
      shim_log(DED_LOG_ERROR, "the state of run '%s' its peers gave is malformed: this job cannot "
               "join it", S.cfg.run);
      free(snap.bytes);
      leave_reason_set(DED_LEAVE_ERROR);
      S.state_err = MPI_ERR_OTHER;
      return S.state_err;
    }
    S.loaded = snap;
    ded_step_resume(&S.step, snap.round, snap.pos);
    shim_log(DED_LOG_INFO, "joining run '%s' in progress at round %llu: %llu bytes of state in "
             "%llu piece%s", S.cfg.run, (unsigned long long)snap.round,
             (unsigned long long)S.loaded_view.data_len, (unsigned long long)S.loaded_view.n,
             S.loaded_view.n == 1 ? "" : "s");
  } else {
    free(snap.bytes);
    atomic_store(&S.found, FOUND_WAIT); /* a founder: its first round says whose state it is */
  }
  return MPI_SUCCESS;
}

/* |p| becomes the next piece of the state (every rank keeps the
 * addresses, to reload); in a joining job rank 0 gets the run's bytes
 * first. Returns an MPI error code. */
static int state_piece(void *p, size_t bytes) {
  int rc = S.rank == 0 ? state_sync() : MPI_SUCCESS;
  if (rc != MPI_SUCCESS) return rc;
  if (S.rank == 0 && S.loaded.round > 0) {
    const ded_image_view *v = &S.loaded_view;
    uint64_t k = S.loaded_next++;
    if (k >= v->n || ded_image_size(v, k) != bytes) {
      shim_log(DED_LOG_ERROR, "the run's state has %llu piece%s; this job's piece %llu is %zu "
               "bytes where the run's is %llu: is it the same program, model and configuration?",
               (unsigned long long)v->n, v->n == 1 ? "" : "s", (unsigned long long)k + 1, bytes,
               k < v->n ? (unsigned long long)ded_image_size(v, k) : 0ull);
      leave_reason_set(DED_LEAVE_MISMATCH_STATE);
      return MPI_ERR_COUNT;
    }
    memcpy(p, v->data + S.loaded_off, bytes);
    S.loaded_off += bytes;
  }
  ded_step_piece_add(&S.step, p, bytes);
  return MPI_SUCCESS;
}

/* Rank 0, the first routed all-reduce |op|, before it is submitted: the
 * state is complete. A founder hands the swarm the state it brings. */
static void state_start(shim_op *op) {
  state_sync();
  if (S.loaded.round > 0) {
    if (S.loaded_next < S.loaded_view.n)
      shim_log(DED_LOG_ERROR, "the run's state has %llu pieces but this job broadcast or "
               "registered only %llu before training: its state differs from the run's",
               (unsigned long long)S.loaded_view.n, (unsigned long long)S.loaded_next);
    else if (S.loaded_view.n == 0)
      shim_log(DED_LOG_WARN, "the run's peers have no state to give (no start-up broadcast, "
               "nothing registered): this job's parameters are its own");
  }
  free(S.loaded.bytes);
  S.loaded.bytes = NULL;
  memset(&S.loaded_view, 0, sizeof S.loaded_view);
  if (atomic_load(&S.found) != FOUND_WAIT) return;
  ded_snapshot snap;
  memset(&snap, 0, sizeof snap);
  if (!ded_step_image(&S.step, &snap)) {
    atomic_store(&S.found, FOUND_NONE);
    return;
  }
  shim_log(DED_LOG_DEBUG, "offering this job's initial state (%zu piece%s, %llu bytes) as the "
           "run's, should its first round choose it", S.step.npieces,
           S.step.npieces == 1 ? "" : "s", (unsigned long long)S.step.total);
  ded_driver_found_set(S.driver, &snap);
  pthread_mutex_lock(&S.mu);
  S.found_op = op;
  pthread_mutex_unlock(&S.mu);
}

/* A broadcast from rank 0 to the whole job of floats or doubles that the
 * routing rule would route as an all-reduce (a tensor of the model); an
 * integer, a byte string or a single value (a seed, a flag, a pickled
 * object) is configuration, not state. */
static bool state_bcast_routes(void *buf, int count, MPI_Datatype dt, MPI_Comm comm, size_t *bytes) {
  uint8_t dtype;
  size_t es;
  if (!buf || ded_route_tensor(&S.route, count, dt, comm, &dtype, &es) != DED_ROUTE_YES) return false;
  *bytes = (size_t)count * es;
  return true;
}

__attribute__((noinline)) static int shim_bcast(void *buf, int count, MPI_Datatype dt, int root,
                                                MPI_Comm comm) {
  size_t bytes;
  if (!state_bcast_routes(buf, count, dt, comm, &bytes)) return PMPI_Bcast(buf, count, dt, root, comm);
  int rc = state_piece(buf, bytes);
  /* The other ranks wait in the broadcast whatever happened here. */
  int brc = PMPI_Bcast(buf, count, dt, root, comm);
  if (brc != MPI_SUCCESS) return brc;
  if (rc != MPI_SUCCESS) PMPI_Comm_call_errhandler(comm, rc);
  return rc;
}

DED_EXPORT int MPI_Bcast(void *buf, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  if (DED_LIKELY(!S.active || S.started || root != 0 || count <= 0 || !S.cfg.state_bcast))
    return PMPI_Bcast(buf, count, datatype, root, comm);
  return shim_bcast(buf, count, datatype, root, comm);
}

/* ---------------------------------------------------------------- routing */

/* What goes to the swarm (ded_route.h). Anything unusual (null buffers,
 * aliasing, intercommunicators) stays with PMPI, which reports the error
 * exactly as without the shim. Rank 0 counts every call it sees into the
 * census, and warns about large ones that stay. */
static bool shim_routes(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op,
                        MPI_Comm comm, uint8_t *dtype, size_t *es) {
  if (!S.active) return false;
  ded_route_why why = ded_route_classify(&S.route, sendbuf, recvbuf, count, dt, op, comm, dtype, es);
  if (S.rank == 0 && (why != DED_ROUTE_YES || S.route.census)) {
    pthread_mutex_lock(&S.mu);
    ded_route_note(&S.route, why, count, dt, op, ded_driver_now_ns());
    pthread_mutex_unlock(&S.mu);
  }
  return why == DED_ROUTE_YES;
}

static shim_op *op_new(void *recvbuf, int count, MPI_Datatype dt, size_t es, bool nonblocking) {
  shim_op *op = calloc(1, sizeof *op);
  if (!op) return NULL;
  op->recvbuf = recvbuf;
  op->count = count;
  op->dt = dt;
  op->bytes = (size_t)count * es;
  op->nonblocking = nonblocking;
  op->refs = 2; /* the caller's, and the op list's */
  op->bcast[0] = op->bcast[1] = MPI_REQUEST_NULL;
  op->local_err = MPI_SUCCESS;
  return op;
}

/* Step 1, and the start of step 2. From here on progress() sees |op|. */
static void op_start(shim_op *op, const void *sendbuf, uint8_t dtype) {
  bool first = !S.started;
  S.started = true; /* no more pieces of state */
  void *recvbuf = op->recvbuf;
  int count = op->count;
  MPI_Datatype dt = op->dt;
  if (S.size > 1)
    op->local_err = PMPI_Allreduce(sendbuf, recvbuf, count, dt, MPI_SUM, S.comm_reduce);
  else if (sendbuf != MPI_IN_PLACE)
    memcpy(recvbuf, sendbuf, op->bytes);
  pthread_mutex_lock(&S.mu);
  double w = S.weight_set ? S.weight : (double)S.size;
  if (S.rank != 0) op_post(op);
  if (S.tail)
    S.tail->next = op;
  else
    S.head = op;
  S.tail = op;
  if (S.rank == 0 && !S.post) S.post = op;
  atomic_fetch_add(&S.pending, 1);
  pthread_mutex_unlock(&S.mu);
  if (S.rank == 0) {
    if (first) state_start(op);
    bool idle = atomic_load(&S.pending) == 1; /* this op only */
    bool step_begins = ded_step_call_begin(&S.step, S.driver, recvbuf, count, dt, idle, &op->reload);
    int rv = DED_ERR_INTERNAL;
    op->start_ns = ded_driver_now_ns();
    if (op->local_err == MPI_SUCCESS) {
      ded_round_args a = {recvbuf, (uint64_t)count, dtype, w, (uint32_t)S.size, op,
                          S.step.len_sure ? S.step.len : 0};
      rv = ded_driver_submit(S.driver, &a);
    }
    ded_step_offer(&S.step, S.driver, step_begins, idle);
    if (rv != 0) {
      ded_round_result res;
      memset(&res, 0, sizeof res);
      res.status = rv;
      res.count = (uint64_t)count;
      res.last = true;
      shim_swarm_done(NULL, op, &res);
    }
  }
}

/* The pass-through fast path: every small or non-SUM all-reduce of the
 * application pays only this (and compiles to a tail jump into PMPI). */
static inline bool maybe_routed(int count, MPI_Op op) {
  if (!S.active) return false;
  int64_t at_least = op == MPI_SUM ? S.min_count : S.watch_count;
  return (int64_t)count >= at_least || S.route.census;
}

__attribute__((noinline)) static int shim_allreduce(const void *sendbuf, void *recvbuf, int count,
                                                    MPI_Datatype datatype, MPI_Op op,
                                                    MPI_Comm comm) {
  uint8_t dtype;
  size_t es;
  if (!shim_routes(sendbuf, recvbuf, count, datatype, op, comm, &dtype, &es))
    return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  shim_op *o = op_new(recvbuf, count, datatype, es, false);
  if (!o) {
    PMPI_Comm_call_errhandler(comm, MPI_ERR_NO_MEM);
    return MPI_ERR_NO_MEM;
  }
  op_start(o, sendbuf, dtype);
  pthread_mutex_lock(&S.mu);
  for (unsigned spins = 0;; spins++) {
    progress_locked();
    if (o->complete) break;
    if (S.rank == 0 && !o->swarm_done) {
      /* Until the swarm reports there is little to poll: sleep, waking now
       * and then for the broadcasts of earlier ops, whose large messages
       * need the root to make progress too. */
      ded_cond_wait_ns(&S.cv, &S.mu, 2000000);
      spins = 0;
      continue;
    }
    pthread_mutex_unlock(&S.mu);
    found_run();
    backoff(spins);
    pthread_mutex_lock(&S.mu);
  }
  int rc = o->mpi_err;
  op_unref(o);
  pthread_mutex_unlock(&S.mu);
  if (rc != MPI_SUCCESS) PMPI_Comm_call_errhandler(comm, rc);
  return rc;
}

DED_EXPORT int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                             MPI_Op op, MPI_Comm comm) {
  if (DED_LIKELY(!maybe_routed(count, op)))
    return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  return shim_allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}

static int greq_query(void *extra, MPI_Status *status) {
  shim_op *op = extra;
  if (status != MPI_STATUS_IGNORE) {
    PMPI_Status_set_elements(status, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(status, 0);
    status->MPI_SOURCE = MPI_ANY_SOURCE;
    status->MPI_TAG = MPI_ANY_TAG;
    status->MPI_ERROR = op->mpi_err;
  }
  return op->mpi_err;
}

static int greq_free(void *extra) {
  pthread_mutex_lock(&S.mu);
  op_unref(extra);
  pthread_mutex_unlock(&S.mu);
  return MPI_SUCCESS;
}

static int greq_cancel(void *extra, int complete) {
  /* A swarm round cannot be called back; MPI_Cancel has no effect. */
  (void)extra;
  (void)complete;
  return MPI_SUCCESS;
}

__attribute__((noinline)) static int shim_iallreduce(const void *sendbuf, void *recvbuf, int count,
                                                     MPI_Datatype datatype, MPI_Op op,
                                                     MPI_Comm comm, MPI_Request *request) {
  uint8_t dtype;
  size_t es;
  if (!request || !shim_routes(sendbuf, recvbuf, count, datatype, op, comm, &dtype, &es))
    return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
  /* The request exists before the op starts: the op may complete at once. */
  shim_op *o = op_new(recvbuf, count, datatype, es, true);
  int rc = o ? PMPI_Grequest_start(greq_query, greq_free, greq_cancel, o, &o->greq)
             : MPI_ERR_NO_MEM;
  if (rc != MPI_SUCCESS) {
    free(o);
    PMPI_Comm_call_errhandler(comm, rc);
    return rc;
  }
  *request = o->greq;
  op_start(o, sendbuf, dtype);
  progress();
  return MPI_SUCCESS;
}

DED_EXPORT int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                              MPI_Op op, MPI_Comm comm, MPI_Request *request) {
  if (DED_LIKELY(!maybe_routed(count, op)))
    return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
  return shim_iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
}

/* ---------------------------------------------------------------- reduce-scatter */

/* ded_shim_int.h: what ded_scatter.c's reduce-scatters use. */

bool ded_shim_sum_routes(const void *sendbuf, const void *recvbuf, int count, MPI_Datatype dt,
                         MPI_Op op, MPI_Comm comm, size_t *es) {
  uint8_t dtype;
  return S.active && count >= S.min_count &&
         ded_route_classify(&S.route, sendbuf, recvbuf, count, dt, op, comm, &dtype, es) ==
             DED_ROUTE_YES;
}

int ded_shim_allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op,
                       MPI_Comm comm) {
  return shim_allreduce(sendbuf, recvbuf, count, dt, op, comm);
}

void ded_shim_log(int level, const char *fmt, ...) {
  if (level > S.cfg.log_level) return;
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  shim_log(level, "%s", line);
}

/* ---------------------------------------------------------------- completion */

/* ded_shim_int.h: what ded_requests.c's completion calls use. */

void ded_shim_progress(void) { progress(); }

bool ded_shim_idle(void) { return atomic_load_explicit(&S.pending, memory_order_acquire) == 0; }

void ded_shim_backoff(unsigned spins) { backoff(spins); }

/* ---------------------------------------------------------------- init/finalize */

static const char *env_get(const char *name) { return getenv(name); }

/* Starts the swarm side on rank 0. Returns 0 or a DED_ERR_* with |err| set. */
static int shim_start_driver(char *err, size_t errlen) {
  ded_driver_config dc;
  ded_config_driver(&S.cfg, &dc);
  dc.done = shim_swarm_done;
  dc.want_snapshot = shim_want_snapshot;
  dc.quiet = shim_quiet;
  dc.log_prefix = S.prefix;
  int rv = ded_driver_start(&dc, &S.driver, err, errlen);
  ded_wipe(S.cfg.swarm_key, sizeof S.cfg.swarm_key); /* the driver derived its own */
  return rv;
}

/* Reports a failure of MPI_Init the MPI way: through the error handler of
 * MPI_COMM_WORLD (fatal by default), then as the return value. */
static int shim_init_failed(int code) {
  if (S.size > 1) {
    PMPI_Comm_free(&S.comm_reduce);
    PMPI_Comm_free(&S.comm_bcast);
    PMPI_Comm_free(&S.comm_state);
  }
  PMPI_Comm_call_errhandler(MPI_COMM_WORLD, code);
  return code;
}

static void log_lines(int level, char *text) {
  for (char *save = NULL, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
    shim_log(level, "%s", l);
}

static int shim_init(int *argc, char ***argv, int required, int *provided) {
  char errors[2048], warnings[1024];
  int nerr = ded_config_load(&S.cfg, env_get, environ, errors, sizeof errors, warnings,
                             sizeof warnings);
  snprintf(S.prefix, sizeof S.prefix, "dedmpi[%d]", (int)getpid());
  if (S.cfg.disable && nerr == 0) return PMPI_Init_thread(argc, argv, required, provided);
  int rc = PMPI_Init_thread(argc, argv, required, provided);
  if (rc != MPI_SUCCESS) return rc;
  PMPI_Comm_rank(MPI_COMM_WORLD, &S.rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &S.size);
  snprintf(S.prefix, sizeof S.prefix, "dedmpi[%d] rank %d", (int)getpid(), S.rank);
  if (S.rank == 0 && warnings[0]) log_lines(DED_LOG_WARN, warnings);
  if (nerr) {
    if (S.rank == 0) log_lines(DED_LOG_ERROR, errors);
    return shim_init_failed(MPI_ERR_ARG);
  }
  if (S.size > 1) {
    PMPI_Comm_dup(MPI_COMM_WORLD, &S.comm_reduce);
    PMPI_Comm_dup(MPI_COMM_WORLD, &S.comm_bcast);
    PMPI_Comm_dup(MPI_COMM_WORLD, &S.comm_state);
  }
  ded_step_init(&S.step, S.size, S.comm_state, S.cfg.step_rounds, shim_log);
  int status = 0;
  char err[512] = "";
  if (S.rank == 0) status = shim_start_driver(err, sizeof err);
  if (S.size > 1) PMPI_Bcast(&status, 1, MPI_INT, 0, S.comm_bcast);
  if (status != 0) {
    if (S.rank == 0) {
      shim_log(DED_LOG_ERROR, "%s", err);
      if (status == DED_ERR_BOOTSTRAP)
        shim_log(DED_LOG_ERROR, "is the first peer of run '%s' up, and DEDMPI_JOIN right? Raise "
                 "DEDMPI_JOIN_TIMEOUT to wait longer", S.cfg.run);
    }
    return shim_init_failed(status == DED_ERR_INVALID_ARG ? MPI_ERR_ARG : MPI_ERR_OTHER);
  }
  ded_route_init(&S.route, S.cfg.min_elements, S.cfg.min_bytes, S.rank == 0, shim_log);
  S.min_count = ded_route_min_count(&S.route);
  S.watch_count = DED_ROUTE_LARGE_BYTES / sizeof(double);
  if (S.rank == 0) progress_open();
  if (S.rank == 0)
    shim_log(DED_LOG_INFO, "job of %d rank%s joined run '%s' as peer %s", S.size,
             S.size == 1 ? "" : "s", S.cfg.run, ded_driver_peer_sid(S.driver));
  S.active = true;
  return MPI_SUCCESS;
}

DED_EXPORT int MPI_Init(int *argc, char ***argv) {
  int provided;
  return shim_init(argc, argv, MPI_THREAD_SINGLE, &provided);
}

DED_EXPORT int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
  return shim_init(argc, argv, required, provided);
}

DED_EXPORT int MPI_Finalize(void) {
  if (S.active) {
    /* Ops the application never waited for still owe their broadcasts. */
    for (unsigned spins = 0; !ded_shim_idle(); spins++) {
      progress();
      backoff(spins);
    }
    S.active = false;
    if (S.rank == 0) ded_route_census_flush(&S.route);
    /* Goodbyes, and results a slower peer still needs from our last round,
     * get as long as a round may take. */
    if (S.leave_reason) ded_driver_leave_reason(S.driver, S.leave_reason);
    ded_driver_stop(S.driver, S.cfg.round_timeout_ns);
    S.driver = NULL;
    if (S.size > 1) {
      PMPI_Comm_free(&S.comm_reduce);
      PMPI_Comm_free(&S.comm_bcast);
      PMPI_Comm_free(&S.comm_state);
    }
    ded_step_free(&S.step);
    if (S.progress_fd >= 0) close(S.progress_fd);
    S.progress_fd = -1;
  }
  return PMPI_Finalize();
}

/* ---------------------------------------------------------------- dedmpi.h */

DED_EXPORT int dedmpi_last_round(dedmpi_round_info *info) {
  if (!info) return MPI_ERR_ARG;
  pthread_mutex_lock(&S.mu);
  bool have = S.have_last;
  if (have) *info = S.last;
  pthread_mutex_unlock(&S.mu);
  return have ? MPI_SUCCESS : MPI_ERR_OTHER;
}

DED_EXPORT int dedmpi_set_weight(double weight) {
  if (!isfinite(weight) || weight < 0 || weight > DED_WEIGHT_MAX) return MPI_ERR_ARG;
  pthread_mutex_lock(&S.mu);
  S.weight = weight;
  S.weight_set = true;
  pthread_mutex_unlock(&S.mu);
  return MPI_SUCCESS;
}

DED_EXPORT int dedmpi_register_state(void *buf, size_t bytes) {
  if (!buf || bytes == 0) return MPI_ERR_ARG;
  if (!S.active) return MPI_SUCCESS;
  if (S.started) {
    shim_log(DED_LOG_ERROR, "dedmpi_register_state after the first all-reduce: a joiner could not "
             "load it at the right step; register state before training");
    return MPI_ERR_OTHER;
  }
  int rc = state_piece(buf, bytes);
  /* Rank 0's bytes (the run's, in a joining job) go to the other ranks. */
  for (size_t off = 0; S.size > 1 && off < bytes;) {
    size_t n = DED_MIN(bytes - off, (size_t)1 << 30);
    int brc = PMPI_Bcast((char *)buf + off, (int)n, MPI_BYTE, 0, S.comm_bcast);
    if (brc != MPI_SUCCESS) return brc;
    off += n;
  }
  return rc;
}

DED_EXPORT int dedmpi_active(void) { return S.active ? 1 : 0; }
