/*
 * ded_shim.c: the MPI face of dedmpi, by PMPI interposition.
 *
 * Preloaded into an Open MPI job, this file's MPI_Allreduce and
 * MPI_Iallreduce take the calls that go to the swarm (ded_route.h:
 * MPI_SUM of MPI_FLOAT or MPI_DOUBLE, at least DEDMPI_MIN_ELEMENTS, on a
 * communicator congruent to MPI_COMM_WORLD or on a data-parallel group of
 * a split of it) and pass every other call to PMPI as is. Owns the
 * channels (ded_shim_int.h) and their ops.
 *
 * A routed call ("op") goes, on its channel, through three steps:
 *
 *   1. at the call, the local sum: PMPI_Allreduce on a private duplicate
 *      of the channel's communicator, so every rank holds S_j, bit for
 *      bit what plain MPI gives; the channel's rank 0 then hands the
 *      buffer to its swarm driver, whose thread runs the round in the
 *      background;
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

#include "avg/ded_codec.h"
#include "core/ded_assert.h"
#include "core/ded_msg.h"
#include "ded_shim_int.h"

extern char **environ;

struct ded_shim shim = {.mu = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP,
                        .cv = PTHREAD_COND_INITIALIZER,
                        .progress_fd = -1,
                        .world = {.id = -1, .routes = true},
                        .comm_split = MPI_COMM_NULL,
                        .keyval = MPI_KEYVAL_INVALID};

void ded_shim_log(int level, const char *fmt, ...) {
  if (level > shim.cfg.log_level) return;
  static const char *names[] = {"error", "warning", "info", "debug"};
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  fprintf(stderr, "%s %s: %s\n", shim.prefix[0] ? shim.prefix : "dedmpi", names[level], line);
}

static int err_to_mpi(int ded_err) {
  switch (ded_err) {
  case 0: return MPI_SUCCESS;
  case DED_ERR_SIZE_MISMATCH: return MPI_ERR_COUNT;
  case DED_ERR_NOMEM: return MPI_ERR_NO_MEM;
  default: return MPI_ERR_OTHER;
  }
}

static void op_unref(shim_op *op) {
  if (--op->refs == 0) free(op);
}

/* ---------------------------------------------------------------- progress */

/* Rank 0: one line about a finished round to DEDMPI_PROGRESS (dedrun's
 * progress line), never blocking: a report the reader has no room for is
 * dropped. */
static void progress_report(const shim_op *op, const ded_round_result *res) {
  const shim_chan *c = op->chan;
  if (shim.progress_fd < 0 || c != &shim.world) return;
  uint64_t now = ded_driver_now_ns();
  char line[256];
  int n = snprintf(line, sizeof line,
                   "dedmpi-progress 1 round=%llu ms=%.1f bytes=%llu contributors=%u peers=%u "
                   "late=%d alone=%d recoveries=%u error=%d\n",
                   (unsigned long long)res->round,
                   op->start_ns && now > op->start_ns ? (double)(now - op->start_ns) / 1e6 : 0.0,
                   (unsigned long long)op->bytes, res->contributors,
                   c->driver ? ded_driver_peer_count(c->driver) : 0u, res->late, res->alone,
                   res->recoveries, res->status);
  if (n > 0 && (size_t)n < sizeof line)
    (void)send(shim.progress_fd, line, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* Rank 0: connects to DEDMPI_PROGRESS; a failure costs the progress line
 * only. */
static void progress_open(void) {
  if (!shim.cfg.progress[0]) return;
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  size_t len = strlen(shim.cfg.progress);
  DED_ASSERT(len < sizeof sa.sun_path);
  memcpy(sa.sun_path, shim.cfg.progress, len);
  if (sa.sun_path[0] == '@') sa.sun_path[0] = '\0'; /* abstract */
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd >= 0 &&
      connect(fd, (struct sockaddr *)&sa, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len)) == 0) {
    shim.progress_fd = fd;
    return;
  }
  ded_shim_log(DED_LOG_WARN, "DEDMPI_PROGRESS=%s: %s (no progress reports)", shim.cfg.progress,
           strerror(errno));
  if (fd >= 0) close(fd);
}

/* Called on the driver thread of channel |user|: the swarm finished a
 * round of rank 0's part of |ctx| (an op may take several rounds:
 * docs/architecture.md, "Alignment by the gradient stream"); the op's
 * outcome sums them up. */
static void shim_swarm_done(void *user, void *ctx, const ded_round_result *res) {
  shim_chan *c = user;
  shim_op *op = ctx;
  /* Another model's step: the job's call fails with MPI_ERR_COUNT, and
   * so will every step after it. */
  if (res->status == DED_ERR_SIZE_MISMATCH) ded_state_leave_reason(c, DED_LEAVE_MISMATCH_STEP);
  pthread_mutex_lock(&shim.mu);
  ded_step_round_done(&c->step, res); /* before the op shows done: the next op sees it */
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
  if (op == c->found_op && atomic_load(&c->found) == FOUND_WAIT)
    ded_state_found_first_round(c, res);
  op->res.members = NULL; /* valid only during the callback */
  if (res->last) {
    progress_report(op, &op->res);
    op->swarm_done = true;
    pthread_cond_broadcast(&shim.cv);
  }
  pthread_mutex_unlock(&shim.mu);
}

static void op_post(shim_op *op) {
  const shim_chan *c = op->chan;
  op->bcast[0] = op->bcast[1] = MPI_REQUEST_NULL;
  if (c->size > 1) {
    PMPI_Ibcast(&op->hdr, (int)sizeof op->hdr, MPI_BYTE, 0, c->comm_bcast, &op->bcast[0]);
    PMPI_Ibcast(op->recvbuf, op->count, op->dt, 0, c->comm_bcast, &op->bcast[1]);
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
  op->hdr.codec = op->res.codec;
  op->hdr.codec_ppm = op->res.codec_ppm;
}

/* The op's outcome is in |op->hdr| on every rank: finish it. */
static void op_complete(shim_op *op, int bcast_err) {
  if (op->hdr.reload && bcast_err == MPI_SUCCESS) ded_step_apply(&op->chan->step);
  op->mpi_err = bcast_err != MPI_SUCCESS ? bcast_err : op->hdr.mpi_err;
  if (op->mpi_err == MPI_SUCCESS && op->local_err != MPI_SUCCESS) op->mpi_err = op->local_err;
  op->complete = true;
  shim.last = (dedmpi_round_info){op->hdr.round, op->hdr.contributors, op->hdr.total_weight,
                               op->hdr.alone, op->hdr.late, op->hdr.recoveries, op->mpi_err};
  uint8_t codec = op->hdr.alone ? DED_CODEC_NONE : op->hdr.codec;
  if (codec == DED_CODEC_TOPK)
    snprintf(shim.last_codec, sizeof shim.last_codec, "topk:%g",
             (double)op->hdr.codec_ppm / DED_CODEC_PPM);
  else
    snprintf(shim.last_codec, sizeof shim.last_codec, "%s",
             ded_codec_name((ded_codec_kind)codec));
  shim.have_last = true;
  op->chan->npending--;
  atomic_fetch_sub(&shim.pending, 1);
  if (op->nonblocking) PMPI_Grequest_complete(op->greq);
}

/* Moves every op of |c| as far as it can go. Called with shim.mu held,
 * on an application thread. */
static void chan_progress_locked(shim_chan *c) {
  /* Rank 0 posts broadcasts in call order, each once its swarm part is
   * done; the other ranks posted theirs at the call. An op completes only
   * once posted: a later round the swarm finished first waits for the
   * earlier ones, or it would complete with no outcome at all. */
  while (c->rank == 0 && c->post && c->post->swarm_done && !ded_state_found_holds(c->post)) {
    op_fill_header(c->post);
    op_post(c->post);
    c->post = c->post->next;
  }
  for (shim_op *op = c->head; op; op = op->next) {
    if (op->complete || !op->posted) continue;
    int flag = 0;
    int rc = PMPI_Testall(2, op->bcast, &flag, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS || flag) op_complete(op, rc);
  }
  /* Drop completed ops from the front; the order of the rest stays. */
  while (c->head && c->head->complete) {
    shim_op *op = c->head;
    c->head = op->next;
    if (!c->head) c->tail = NULL;
    op_unref(op);
  }
}

static void progress_locked(void) {
  chan_progress_locked(&shim.world);
  for (shim_chan *c = shim.groups; c; c = c->next) chan_progress_locked(c);
}

static void progress(void) {
  if (atomic_load_explicit(&shim.pending, memory_order_acquire) == 0) return;
  ded_state_found_run(&shim.world);
  /* Groups are added at the list's head and freed only at MPI_Finalize. */
  pthread_mutex_lock(&shim.mu);
  shim_chan *groups = shim.groups;
  pthread_mutex_unlock(&shim.mu);
  for (shim_chan *c = groups; c; c = c->next) ded_state_found_run(c);
  pthread_mutex_lock(&shim.mu);
  progress_locked();
  pthread_mutex_unlock(&shim.mu);
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

/* ---------------------------------------------------------------- routing */

shim_chan *ded_shim_chan_of(MPI_Comm comm) {
  if (comm == MPI_COMM_WORLD) return &shim.world;
  if (comm == MPI_COMM_NULL) return NULL;
  void *val = NULL;
  int flag = 0;
  if (shim.keyval != MPI_KEYVAL_INVALID && PMPI_Comm_get_attr(comm, shim.keyval, &val, &flag) == MPI_SUCCESS &&
      flag)
    return val;
  return ded_route_comm_is_world(comm) ? &shim.world : NULL;
}

/* What goes to the swarm (ded_route.h), and on which channel. Anything
 * unusual (null buffers, aliasing, intercommunicators) stays with PMPI,
 * which reports the error exactly as without the shim. The world's rank
 * 0 counts every call it sees into the census, and warns about large ones
 * that stay; a group's rank 0 warns once when its sums stay because it
 * is not data-parallel. */
static shim_chan *shim_routes(const void *sendbuf, const void *recvbuf, int count, MPI_Datatype dt,
                              MPI_Op op, MPI_Comm comm, uint8_t *dtype, size_t *es) {
  if (!shim.active) return NULL;
  shim_chan *c = ded_shim_chan_of(comm);
  ded_route_why cw = !c ? DED_ROUTE_NOT_WORLD : c->routes ? DED_ROUTE_YES : DED_ROUTE_NOT_DP;
  ded_route_why why = ded_route_classify(&shim.route, sendbuf, recvbuf, count, dt, op, cw, dtype, es);
  if (shim.rank == 0 && (why != DED_ROUTE_YES || shim.route.census)) {
    pthread_mutex_lock(&shim.mu);
    ded_route_note(&shim.route, why, count, dt, op, ded_driver_now_ns());
    pthread_mutex_unlock(&shim.mu);
  }
  if (why == DED_ROUTE_NOT_DP) {
    /* Its first sum came before any state: a broadcast later (an
     * evaluation, a checkpoint) must not make it data-parallel. */
    c->started = true;
  }
  if (why == DED_ROUTE_NOT_DP && c->rank == 0 && !c->warned_not_dp &&
      (uint64_t)count * *es >= DED_ROUTE_LARGE_BYTES) {
    c->warned_not_dp = true;
    ded_shim_log(DED_LOG_WARN, "an MPI_Allreduce of %d elements on group %d.%d of this job stays "
                 "in the job: its rank 0 broadcast it no state before its first sum, so it is "
                 "taken for a tensor-parallel group, whose sums must not be averaged across jobs "
                 "(a data-parallel group broadcasts its parameters from its rank 0 first)",
                 count, c->id >> 8, c->id & 0xff);
  }
  return why == DED_ROUTE_YES ? c : NULL;
}

static shim_op *op_new(shim_chan *c, void *recvbuf, int count, MPI_Datatype dt, size_t es,
                       bool nonblocking) {
  shim_op *op = calloc(1, sizeof *op);
  if (!op) return NULL;
  op->chan = c;
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
  shim_chan *c = op->chan;
  bool first = !c->started;
  c->started = true; /* no more pieces of state */
  void *recvbuf = op->recvbuf;
  int count = op->count;
  MPI_Datatype dt = op->dt;
  if (c->size > 1)
    op->local_err = PMPI_Allreduce(sendbuf, recvbuf, count, dt, MPI_SUM, c->comm_reduce);
  else if (sendbuf != MPI_IN_PLACE)
    memcpy(recvbuf, sendbuf, op->bytes);
  pthread_mutex_lock(&shim.mu);
  double w = shim.weight_set ? shim.weight : (double)c->size;
  if (c->rank != 0) op_post(op);
  if (c->tail)
    c->tail->next = op;
  else
    c->head = op;
  c->tail = op;
  if (c->rank == 0 && !c->post) c->post = op;
  c->npending++;
  atomic_fetch_add(&shim.pending, 1);
  pthread_mutex_unlock(&shim.mu);
  if (c->rank == 0) {
    if (first) ded_state_start(c, op);
    pthread_mutex_lock(&shim.mu);
    bool idle = c->npending == 1; /* this op only, on this channel */
    pthread_mutex_unlock(&shim.mu);
    bool step_begins = ded_step_call_begin(&c->step, c->driver, recvbuf, count, dt, idle, &op->reload);
    int rv = DED_ERR_INTERNAL;
    op->start_ns = ded_driver_now_ns();
    if (op->local_err == MPI_SUCCESS) {
      ded_round_args a = {recvbuf, (uint64_t)count, dtype, w, (uint32_t)c->size, op,
                          c->step.len_sure ? c->step.len : 0};
      rv = ded_driver_submit(c->driver, &a);
    }
    ded_step_offer(&c->step, c->driver, step_begins, idle);
    if (rv != 0) {
      ded_round_result res;
      memset(&res, 0, sizeof res);
      res.status = rv;
      res.count = (uint64_t)count;
      res.last = true;
      shim_swarm_done(c, op, &res);
    }
  }
}

/* The pass-through fast path: every small or non-SUM all-reduce of the
 * application pays only this (and compiles to a tail jump into PMPI). */
static inline bool maybe_routed(int count, MPI_Op op) {
  if (!shim.active) return false;
  int64_t at_least = op == MPI_SUM ? shim.min_count : shim.watch_count;
  return (int64_t)count >= at_least || shim.route.census;
}

__attribute__((noinline)) static int shim_allreduce(const void *sendbuf, void *recvbuf, int count,
                                                    MPI_Datatype datatype, MPI_Op op,
                                                    MPI_Comm comm) {
  uint8_t dtype;
  size_t es;
  shim_chan *c = shim_routes(sendbuf, recvbuf, count, datatype, op, comm, &dtype, &es);
  if (!c) return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  shim_op *o = op_new(c, recvbuf, count, datatype, es, false);
  if (!o) {
    PMPI_Comm_call_errhandler(comm, MPI_ERR_NO_MEM);
    return MPI_ERR_NO_MEM;
  }
  op_start(o, sendbuf, dtype);
  pthread_mutex_lock(&shim.mu);
  for (unsigned spins = 0;; spins++) {
    progress_locked();
    if (o->complete) break;
    if (c->rank == 0 && !o->swarm_done) {
      /* Until the swarm reports there is little to poll: sleep, waking now
       * and then for the broadcasts of earlier ops, whose large messages
       * need the root to make progress too. */
      ded_cond_wait_ns(&shim.cv, &shim.mu, 2000000);
      spins = 0;
      continue;
    }
    pthread_mutex_unlock(&shim.mu);
    ded_state_found_run(c);
    backoff(spins);
    pthread_mutex_lock(&shim.mu);
  }
  int rc = o->mpi_err;
  op_unref(o);
  pthread_mutex_unlock(&shim.mu);
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
  pthread_mutex_lock(&shim.mu);
  op_unref(extra);
  pthread_mutex_unlock(&shim.mu);
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
  shim_chan *c = request ? shim_routes(sendbuf, recvbuf, count, datatype, op, comm, &dtype, &es)
                         : NULL;
  if (!c) return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
  /* The request exists before the op starts: the op may complete at once. */
  shim_op *o = op_new(c, recvbuf, count, datatype, es, true);
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
  const shim_chan *c;
  return shim.active && count >= shim.min_count && (c = ded_shim_chan_of(comm)) && c->routes &&
         ded_route_classify(&shim.route, sendbuf, recvbuf, count, dt, op, DED_ROUTE_YES, &dtype,
                            es) == DED_ROUTE_YES;
}

int ded_shim_allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op,
                       MPI_Comm comm) {
  return shim_allreduce(sendbuf, recvbuf, count, dt, op, comm);
}


/* ---------------------------------------------------------------- completion */

/* ded_shim_int.h: what ded_requests.c's completion calls use. */

void ded_shim_progress(void) { progress(); }

bool ded_shim_idle(void) { return atomic_load_explicit(&shim.pending, memory_order_acquire) == 0; }

void ded_shim_backoff(unsigned spins) { backoff(spins); }

/* ---------------------------------------------------------------- init/finalize */

static const char *env_get(const char *name) { return getenv(name); }

int ded_shim_chan_open(shim_chan *c, MPI_Comm comm, int id, const char *run,
                       ded_driver_config *dc, char *err, size_t errlen) {
  c->id = id;
  snprintf(c->run, sizeof c->run, "%s", run);
  PMPI_Comm_rank(comm, &c->rank);
  PMPI_Comm_size(comm, &c->size);
  c->comm_reduce = c->comm_bcast = c->comm_state = MPI_COMM_NULL;
  if (c->size > 1) {
    PMPI_Comm_dup(comm, &c->comm_reduce);
    PMPI_Comm_dup(comm, &c->comm_bcast);
    PMPI_Comm_dup(comm, &c->comm_state);
  }
  ded_step_init(&c->step, c->size, c->comm_state, shim.cfg.step_rounds, ded_shim_log);
  int status = 0;
  if (c->rank == 0) {
    if (id >= 0)
      snprintf(c->prefix, sizeof c->prefix, "%s group %d.%d", shim.prefix, id >> 8, id & 0xff);
    else
      snprintf(c->prefix, sizeof c->prefix, "%s", shim.prefix);
    dc->done = shim_swarm_done;
    dc->want_snapshot = ded_state_want_snapshot;
    dc->quiet = ded_state_quiet;
    dc->user = c;
    dc->log_prefix = c->prefix;
    status = ded_driver_start(dc, &c->driver, err, errlen);
  }
  if (c->size > 1) PMPI_Bcast(&status, 1, MPI_INT, 0, c->comm_bcast);
  if (status != 0) {
    c->driver = NULL;
    ded_shim_chan_close(c);
  }
  return status;
}

void ded_shim_chan_close(shim_chan *c) {
  if (c->driver) {
    /* Goodbyes, and results a slower peer still needs from our last
     * round, get as long as a round may take. */
    if (c->leave_reason) ded_driver_leave_reason(c->driver, c->leave_reason);
    ded_driver_stop(c->driver, shim.cfg.round_timeout_ns);
    c->driver = NULL;
    ded_step_finish(&c->step);
  }
  if (c->comm_reduce != MPI_COMM_NULL) {
    PMPI_Comm_free(&c->comm_reduce);
    PMPI_Comm_free(&c->comm_bcast);
    PMPI_Comm_free(&c->comm_state);
  }
  ded_step_free(&c->step);
  free(c->loaded.bytes);
  c->loaded.bytes = NULL;
  free(c->found_cands);
  c->found_cands = NULL;
}

/* Reports a failure of MPI_Init the MPI way: through the error handler of
 * MPI_COMM_WORLD (fatal by default), then as the return value. */
static int shim_init_failed(int code) {
  ded_wipe(shim.cfg.swarm_key, sizeof shim.cfg.swarm_key);
  PMPI_Comm_call_errhandler(MPI_COMM_WORLD, code);
  return code;
}

static void log_lines(int level, char *text) {
  for (char *save = NULL, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
    ded_shim_log(level, "%s", l);
}

static int shim_init(int *argc, char ***argv, int required, int *provided) {
  char errors[2048], warnings[1024];
  int nerr = ded_config_load(&shim.cfg, env_get, environ, errors, sizeof errors, warnings,
                             sizeof warnings);
  snprintf(shim.prefix, sizeof shim.prefix, "dedmpi[%d]", (int)getpid());
  if (shim.cfg.disable && nerr == 0) return PMPI_Init_thread(argc, argv, required, provided);
  int rc = PMPI_Init_thread(argc, argv, required, provided);
  if (rc != MPI_SUCCESS) return rc;
  PMPI_Comm_rank(MPI_COMM_WORLD, &shim.rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &shim.size);
  snprintf(shim.prefix, sizeof shim.prefix, "dedmpi[%d] rank %d", (int)getpid(), shim.rank);
  if (shim.rank == 0 && warnings[0]) log_lines(DED_LOG_WARN, warnings);
  if (nerr) {
    if (shim.rank == 0) log_lines(DED_LOG_ERROR, errors);
    return shim_init_failed(MPI_ERR_ARG);
  }
  ded_driver_config dc;
  ded_config_driver(&shim.cfg, &dc);
  char err[512] = "";
  int status = ded_shim_chan_open(&shim.world, MPI_COMM_WORLD, -1, shim.cfg.run, &dc, err,
                                  sizeof err);
  if (status != 0) {
    if (shim.rank == 0) {
      ded_shim_log(DED_LOG_ERROR, "%s", err);
      if (status == DED_ERR_BOOTSTRAP)
        ded_shim_log(DED_LOG_ERROR, "is the first peer of run '%s' up, and DEDMPI_JOIN right? Raise "
                 "DEDMPI_JOIN_TIMEOUT to wait longer", shim.cfg.run);
    }
    return shim_init_failed(status == DED_ERR_INVALID_ARG ? MPI_ERR_ARG : MPI_ERR_OTHER);
  }
  if (ded_group_init() != MPI_SUCCESS) {
    ded_shim_chan_close(&shim.world);
    return shim_init_failed(MPI_ERR_OTHER);
  }
  ded_route_init(&shim.route, shim.cfg.min_elements, shim.cfg.min_bytes, shim.rank == 0,
                 ded_shim_log);
  shim.min_count = ded_route_min_count(&shim.route);
  shim.watch_count = DED_ROUTE_LARGE_BYTES / sizeof(double);
  if (shim.rank == 0) progress_open();
  if (shim.rank == 0)
    ded_shim_log(DED_LOG_INFO, "job of %d rank%s joined run '%s' as peer %s", shim.size,
             shim.size == 1 ? "" : "s", shim.cfg.run, ded_driver_peer_sid(shim.world.driver));
  shim.active = true;
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
  if (shim.active) {
    /* Ops the application never waited for still owe their broadcasts. */
    for (unsigned spins = 0; !ded_shim_idle(); spins++) {
      progress();
      backoff(spins);
    }
    shim.active = false;
    if (shim.rank == 0) ded_route_census_flush(&shim.route);
    ded_group_fini();
    ded_shim_chan_close(&shim.world);
    ded_wipe(shim.cfg.swarm_key, sizeof shim.cfg.swarm_key);
    if (shim.progress_fd >= 0) close(shim.progress_fd);
    shim.progress_fd = -1;
  }
  return PMPI_Finalize();
}

/* ---------------------------------------------------------------- dedmpi.h */

DED_EXPORT int dedmpi_last_round(dedmpi_round_info *info) {
  if (!info) return MPI_ERR_ARG;
  pthread_mutex_lock(&shim.mu);
  bool have = shim.have_last;
  if (have) *info = shim.last;
  pthread_mutex_unlock(&shim.mu);
  return have ? MPI_SUCCESS : MPI_ERR_OTHER;
}

DED_EXPORT int dedmpi_last_codec(char *name, int len) {
  if (!name || len <= 0) return MPI_ERR_ARG;
  pthread_mutex_lock(&shim.mu);
  bool have = shim.have_last;
  int rc = have ? MPI_SUCCESS : MPI_ERR_OTHER;
  if (have && strlen(shim.last_codec) >= (size_t)len)
    rc = MPI_ERR_ARG;
  else if (have)
    memcpy(name, shim.last_codec, strlen(shim.last_codec) + 1);
  pthread_mutex_unlock(&shim.mu);
  return rc;
}

DED_EXPORT int dedmpi_set_weight(double weight) {
  if (!isfinite(weight) || weight < 0 || weight > DED_WEIGHT_MAX) return MPI_ERR_ARG;
  pthread_mutex_lock(&shim.mu);
  shim.weight = weight;
  shim.weight_set = true;
  pthread_mutex_unlock(&shim.mu);
  return MPI_SUCCESS;
}

DED_EXPORT int dedmpi_register_state(void *buf, size_t bytes) {
  if (!buf || bytes == 0) return MPI_ERR_ARG;
  if (!shim.active) return MPI_SUCCESS;
  shim_chan *c = &shim.world;
  if (c->started) {
    ded_shim_log(DED_LOG_ERROR, "dedmpi_register_state after the first all-reduce: a joiner could not "
             "load it at the right step; register state before training");
    return MPI_ERR_OTHER;
  }
  int rc = ded_state_piece(c, buf, bytes);
  /* Rank 0's bytes (the run's, in a joining job) go to the other ranks. */
  for (size_t off = 0; c->size > 1 && off < bytes;) {
    size_t n = DED_MIN(bytes - off, (size_t)1 << 30);
    int brc = PMPI_Bcast((char *)buf + off, (int)n, MPI_BYTE, 0, c->comm_bcast);
    if (brc != MPI_SUCCESS) return brc;
    off += n;
  }
  return rc;
}

DED_EXPORT int dedmpi_active(void) { return shim.active ? 1 : 0; }
