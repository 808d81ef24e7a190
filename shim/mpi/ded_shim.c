/*
 * ded_shim.c: the MPI face of dedmpi, by PMPI interposition.
 *
 * Preloaded into an Open MPI job, this file's MPI_Allreduce and
 * MPI_Iallreduce take the calls DESIGN §3 routes to the swarm (MPI_SUM of
 * MPI_FLOAT or MPI_DOUBLE, at least DEDMPI_MIN_BYTES, on a communicator
 * congruent to MPI_COMM_WORLD) and pass every other call to PMPI as is.
 *
 * A routed call goes through a two-stage pipeline run by two threads per
 * process, so that blocking and nonblocking calls share one order:
 *
 *   stage A ("reduce"): the job's local sum, PMPI_Allreduce on a private
 *     duplicate of MPI_COMM_WORLD (every rank then holds S_j, bit for bit
 *     what plain MPI gives); rank 0 hands the buffer to the swarm driver.
 *   stage C ("finish"): rank 0 waits for the swarm; the outcome (a small
 *     header) and, unless the job was alone, the averaged buffer go to the
 *     other ranks by PMPI_Ibcast on a second private duplicate; then the
 *     call completes (the waiting caller wakes, or the generalized request
 *     the application holds is completed).
 *
 * Each stage owns one communicator and handles ops in call order on every
 * rank, so the collectives match up without any further agreement.
 * MPI_Init asks for MPI_THREAD_MULTIPLE for these threads and reports to
 * the application only the level it asked for.
 *
 * The constructor does nothing (mpirun itself loads preloaded libraries);
 * everything starts in MPI_Init.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <mpi.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/ded_assert.h"
#include "ded_config.h"
#include "ded_driver.h"
#include "dedmpi.h"

#define DED_EXPORT __attribute__((visibility("default")))

extern char **environ;

/* One routed all-reduce. */
typedef struct shim_op {
  struct shim_op *next;
  const void *sendbuf;
  void *recvbuf;
  int count;
  MPI_Datatype dt;
  uint8_t dtype;
  size_t bytes;
  MPI_Request greq; /* nonblocking: the request the application holds */
  bool nonblocking;
  bool stop;        /* sentinel: the stage threads exit */
  int local_err;    /* stage A's PMPI result */
  bool swarm_done;  /* rank 0: the driver reported */
  ded_round_result res;
  int mpi_err;      /* the call's outcome */
  bool done;
  dedmpi_round_info info;
} shim_op;

typedef struct op_queue {
  shim_op *head, *tail;
} op_queue;

/* The outcome rank 0 broadcasts to the other ranks of the job. */
typedef struct shim_header {
  int32_t mpi_err;
  int32_t alone;
  int32_t late;
  int32_t contributors;
  double total_weight;
  uint64_t round;
} shim_header;

static struct {
  bool inited;  /* our MPI_Init ran: routing decided */
  bool active;  /* routing to the swarm is on */
  ded_config cfg;
  int app_provided;
  int rank, size;
  MPI_Comm comm_reduce, comm_bcast;
  ded_driver *driver;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  op_queue qa, qc;
  pthread_t ta, tc;
  double weight;
  bool weight_set;
  dedmpi_round_info last;
  bool have_last;
  char prefix[48];
} S = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

DED_PRINTF(2, 3)
static void shim_log(int level, const char *fmt, ...) {
  if (S.inited && level > S.cfg.log_level) return;
  static const char *names[] = {"error", "warning", "info", "debug"};
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  fprintf(stderr, "%s %s: %s\n", S.prefix[0] ? S.prefix : "dedmpi", names[level], line);
}

/* ---------------------------------------------------------------- queues */

static void q_push(op_queue *q, shim_op *op) {
  op->next = NULL;
  if (q->tail)
    q->tail->next = op;
  else
    q->head = op;
  q->tail = op;
}

static shim_op *q_pop_wait(op_queue *q) {
  pthread_mutex_lock(&S.mu);
  while (!q->head) pthread_cond_wait(&S.cv, &S.mu);
  shim_op *op = q->head;
  q->head = op->next;
  if (!q->head) q->tail = NULL;
  pthread_mutex_unlock(&S.mu);
  return op;
}

static void q_push_signal(op_queue *q, shim_op *op) {
  pthread_mutex_lock(&S.mu);
  q_push(q, op);
  pthread_cond_broadcast(&S.cv);
  pthread_mutex_unlock(&S.mu);
}

/* ---------------------------------------------------------------- stages */

static int err_to_mpi(int ded_err) {
  switch (ded_err) {
  case 0: return MPI_SUCCESS;
  case DED_ERR_SIZE_MISMATCH: return MPI_ERR_COUNT;
  case DED_ERR_NOMEM: return MPI_ERR_NO_MEM;
  default: return MPI_ERR_OTHER;
  }
}

/* Called on the driver thread. */
static void shim_swarm_done(void *user, void *ctx, const ded_round_result *res) {
  (void)user;
  shim_op *op = ctx;
  pthread_mutex_lock(&S.mu);
  op->res = *res;
  op->res.members = NULL; /* valid only during the callback */
  op->swarm_done = true;
  pthread_cond_broadcast(&S.cv);
  pthread_mutex_unlock(&S.mu);
}

static void *stage_reduce(void *arg) {
  (void)arg;
  for (;;) {
    shim_op *op = q_pop_wait(&S.qa);
    /* Read now: once handed on, |op| may complete and be freed at once. */
    bool stop = op->stop;
    if (!stop) {
      op->local_err = MPI_SUCCESS;
      if (S.size > 1)
        op->local_err = PMPI_Allreduce(op->sendbuf, op->recvbuf, op->count, op->dt, MPI_SUM,
                                       S.comm_reduce);
      else if (op->sendbuf != MPI_IN_PLACE)
        memcpy(op->recvbuf, op->sendbuf, op->bytes);
      if (S.rank == 0) {
        int rv = DED_ERR_INTERNAL;
        if (op->local_err == MPI_SUCCESS) {
          pthread_mutex_lock(&S.mu);
          double w = S.weight_set ? S.weight : (double)S.size;
          pthread_mutex_unlock(&S.mu);
          ded_round_args a = {op->recvbuf, (uint64_t)op->count, op->dtype, w, (uint32_t)S.size, op};
          rv = ded_driver_submit(S.driver, &a);
        }
        if (rv != 0) {
          ded_round_result res;
          memset(&res, 0, sizeof res);
          res.status = rv;
          shim_swarm_done(NULL, op, &res);
        }
      }
    }
    q_push_signal(&S.qc, op);
    if (stop) return NULL;
  }
}

/* A broadcast from rank 0 that waits without spinning a core: the other
 * ranks of a job sit here for as long as the swarm round takes. */
static int bcast_patiently(void *buf, int count, MPI_Datatype dt) {
  MPI_Request r;
  int rc = PMPI_Ibcast(buf, count, dt, 0, S.comm_bcast, &r);
  if (rc != MPI_SUCCESS) return rc;
  int flag = 0;
  for (unsigned spins = 0; !flag; spins++) {
    rc = PMPI_Test(&r, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return rc;
    if (!flag && spins > 64) {
      struct timespec ts = {0, spins > 4096 ? 1000000 : 50000};
      nanosleep(&ts, NULL);
    }
  }
  return MPI_SUCCESS;
}

static void stage_finish_one(shim_op *op) {
  shim_header h;
  memset(&h, 0, sizeof h);
  if (S.rank == 0) {
    pthread_mutex_lock(&S.mu);
    while (!op->swarm_done) pthread_cond_wait(&S.cv, &S.mu);
    pthread_mutex_unlock(&S.mu);
    h.mpi_err = op->local_err != MPI_SUCCESS ? op->local_err : err_to_mpi(op->res.status);
    h.alone = op->res.alone;
    h.late = op->res.late;
    h.contributors = (int32_t)op->res.contributors;
    h.total_weight = op->res.total_weight;
    h.round = op->res.round;
  }
  int rc = MPI_SUCCESS;
  if (S.size > 1) {
    rc = bcast_patiently(&h, (int)sizeof h, MPI_BYTE);
    if (rc == MPI_SUCCESS && h.mpi_err == MPI_SUCCESS && !h.alone)
      rc = bcast_patiently(op->recvbuf, op->count, op->dt);
  }
  if (rc == MPI_SUCCESS) rc = h.mpi_err;
  if (rc == MPI_SUCCESS && op->local_err != MPI_SUCCESS) rc = op->local_err;
  dedmpi_round_info info = {h.round, h.contributors, h.total_weight, h.alone, h.late, rc};
  pthread_mutex_lock(&S.mu);
  op->mpi_err = rc;
  op->info = info;
  S.last = info;
  S.have_last = true;
  bool nonblocking = op->nonblocking;
  MPI_Request greq = op->greq;
  if (!nonblocking) {
    op->done = true;
    pthread_cond_broadcast(&S.cv);
  }
  pthread_mutex_unlock(&S.mu);
  /* The last touch: once complete, the application may free |op|. */
  if (nonblocking) PMPI_Grequest_complete(greq);
}

static void *stage_finish(void *arg) {
  (void)arg;
  for (;;) {
    shim_op *op = q_pop_wait(&S.qc);
    if (op->stop) {
      free(op);
      return NULL;
    }
    stage_finish_one(op);
  }
}

/* ---------------------------------------------------------------- routing */

/* DESIGN §3: what goes to the swarm. Anything unusual (null buffers,
 * aliasing, intercommunicators) stays with PMPI, which reports the error
 * exactly as without the shim. */
static bool shim_routes(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op,
                        MPI_Comm comm, uint8_t *dtype, size_t *es) {
  if (!S.active || op != MPI_SUM || count <= 0) return false;
  if (dt == MPI_FLOAT) {
    *dtype = DED_DTYPE_F32;
    *es = 4;
  } else if (dt == MPI_DOUBLE) {
    *dtype = DED_DTYPE_F64;
    *es = 8;
  } else {
    return false;
  }
  if ((uint64_t)count * *es < S.cfg.min_bytes) return false;
  if (!recvbuf || !sendbuf || sendbuf == recvbuf) return false;
  if (comm == MPI_COMM_WORLD) return true;
  if (comm == MPI_COMM_NULL) return false;
  int inter = 0, cmp = MPI_UNEQUAL;
  if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter) return false;
  if (PMPI_Comm_compare(comm, MPI_COMM_WORLD, &cmp) != MPI_SUCCESS) return false;
  return cmp == MPI_IDENT || cmp == MPI_CONGRUENT;
}

static shim_op *op_new(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt,
                       uint8_t dtype, size_t es) {
  shim_op *op = calloc(1, sizeof *op);
  if (!op) return NULL;
  op->sendbuf = sendbuf;
  op->recvbuf = recvbuf;
  op->count = count;
  op->dt = dt;
  op->dtype = dtype;
  op->bytes = (size_t)count * es;
  return op;
}

DED_EXPORT int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                             MPI_Op op, MPI_Comm comm) {
  uint8_t dtype;
  size_t es;
  if (!shim_routes(sendbuf, recvbuf, count, datatype, op, comm, &dtype, &es))
    return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  shim_op *o = op_new(sendbuf, recvbuf, count, datatype, dtype, es);
  if (!o) return PMPI_Comm_call_errhandler(comm, MPI_ERR_NO_MEM), MPI_ERR_NO_MEM;
  pthread_mutex_lock(&S.mu);
  q_push(&S.qa, o);
  pthread_cond_broadcast(&S.cv);
  while (!o->done) pthread_cond_wait(&S.cv, &S.mu);
  pthread_mutex_unlock(&S.mu);
  int rc = o->mpi_err;
  free(o);
  if (rc != MPI_SUCCESS) PMPI_Comm_call_errhandler(comm, rc);
  return rc;
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
  free(extra);
  return MPI_SUCCESS;
}

static int greq_cancel(void *extra, int complete) {
  /* A swarm round cannot be called back; MPI_Cancel has no effect. */
  (void)extra;
  (void)complete;
  return MPI_SUCCESS;
}

DED_EXPORT int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                              MPI_Op op, MPI_Comm comm, MPI_Request *request) {
  uint8_t dtype;
  size_t es;
  if (!request || !shim_routes(sendbuf, recvbuf, count, datatype, op, comm, &dtype, &es))
    return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
  shim_op *o = op_new(sendbuf, recvbuf, count, datatype, dtype, es);
  if (!o) return PMPI_Comm_call_errhandler(comm, MPI_ERR_NO_MEM), MPI_ERR_NO_MEM;
  o->nonblocking = true;
  int rc = PMPI_Grequest_start(greq_query, greq_free, greq_cancel, o, &o->greq);
  if (rc != MPI_SUCCESS) {
    free(o);
    PMPI_Comm_call_errhandler(comm, rc);
    return rc;
  }
  *request = o->greq;
  q_push_signal(&S.qa, o);
  return MPI_SUCCESS;
}

/* ---------------------------------------------------------------- init/finalize */

static const char *env_get(const char *name) { return getenv(name); }

/* Starts the swarm side on rank 0. Returns 0 or a DED_ERR_* with |err| set. */
static int shim_start_driver(char *err, size_t errlen) {
  ded_driver_config dc;
  memset(&dc, 0, sizeof dc);
  dc.node.run = S.cfg.run;
  dc.node.mode = S.cfg.mode;
  dc.node.min_peers = S.cfg.min_peers;
  dc.node.bootstrap_timeout_ns = S.cfg.join_timeout_ns;
  dc.node.rendezvous_timeout_ns = S.cfg.rendezvous_timeout_ns;
  dc.node.round_timeout_ns = S.cfg.round_timeout_ns;
  dc.node.chunk_bytes = S.cfg.chunk_bytes;
  dc.node.log_level = S.cfg.log_level;
  dc.listen = S.cfg.mode == DED_MODE_CLIENT ? NULL : S.cfg.listen;
  dc.join = S.cfg.join;
  dc.announce = S.cfg.announce;
  dc.done = shim_swarm_done;
  dc.log_prefix = S.prefix;
  return ded_driver_start(&dc, &S.driver, err, errlen);
}

/* Reports a failure of MPI_Init the MPI way: through the error handler of
 * MPI_COMM_WORLD (fatal by default), then as the return value. */
static int shim_init_failed(int code) {
  if (S.size > 1) {
    PMPI_Comm_free(&S.comm_reduce);
    PMPI_Comm_free(&S.comm_bcast);
  }
  PMPI_Comm_call_errhandler(MPI_COMM_WORLD, code);
  return code;
}

static int shim_init(int *argc, char ***argv, int required, int *provided) {
  char errors[2048], warnings[1024];
  int nerr = ded_config_load(&S.cfg, env_get, environ, errors, sizeof errors, warnings,
                             sizeof warnings);
  snprintf(S.prefix, sizeof S.prefix, "dedmpi[%d]", (int)getpid());
  if (S.cfg.disable && nerr == 0) {
    S.inited = true;
    return PMPI_Init_thread(argc, argv, required, provided);
  }
  int real = MPI_THREAD_SINGLE;
  int rc = PMPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &real);
  if (rc != MPI_SUCCESS) return rc;
  S.inited = true;
  /* The application gets the level it asked for, not our upgrade. */
  S.app_provided = real < required ? real : required;
  if (provided) *provided = S.app_provided;
  PMPI_Comm_rank(MPI_COMM_WORLD, &S.rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &S.size);
  snprintf(S.prefix, sizeof S.prefix, "dedmpi[%d] rank %d", (int)getpid(), S.rank);
  if (S.rank == 0 && warnings[0]) {
    for (char *l = strtok(warnings, "\n"); l; l = strtok(NULL, "\n")) shim_log(DED_LOG_WARN, "%s", l);
  }
  if (nerr) {
    if (S.rank == 0)
      for (char *l = strtok(errors, "\n"); l; l = strtok(NULL, "\n")) shim_log(DED_LOG_ERROR, "%s", l);
    return shim_init_failed(MPI_ERR_ARG);
  }
  if (S.size > 1 && real < MPI_THREAD_MULTIPLE) {
    if (S.rank == 0)
      shim_log(DED_LOG_WARN, "this MPI grants only thread level %d; dedmpi needs MPI_THREAD_MULTIPLE "
               "for jobs of several ranks and passes everything through", real);
    return MPI_SUCCESS;
  }
  if (S.size > 1) {
    PMPI_Comm_dup(MPI_COMM_WORLD, &S.comm_reduce);
    PMPI_Comm_dup(MPI_COMM_WORLD, &S.comm_bcast);
  }
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
  if (S.rank == 0)
    shim_log(DED_LOG_INFO, "job of %d rank%s joined run '%s' as peer %s%s", S.size,
             S.size == 1 ? "" : "s", S.cfg.run, ded_driver_peer_sid(S.driver), "");
  pthread_create(&S.ta, NULL, stage_reduce, NULL);
  pthread_create(&S.tc, NULL, stage_finish, NULL);
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

DED_EXPORT int MPI_Query_thread(int *provided) {
  if (!S.active) return PMPI_Query_thread(provided);
  if (!provided) return PMPI_Query_thread(provided); /* PMPI reports the error */
  *provided = S.app_provided;
  return MPI_SUCCESS;
}

DED_EXPORT int MPI_Finalize(void) {
  if (S.active) {
    shim_op *stop = calloc(1, sizeof *stop);
    DED_ASSERT(stop);
    stop->stop = true;
    q_push_signal(&S.qa, stop);
    pthread_join(S.ta, NULL);
    pthread_join(S.tc, NULL);
    S.active = false;
    /* Goodbyes get two seconds to reach the other peers. */
    ded_driver_stop(S.driver, 2000000000ull);
    S.driver = NULL;
    if (S.size > 1) {
      PMPI_Comm_free(&S.comm_reduce);
      PMPI_Comm_free(&S.comm_bcast);
    }
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
  if (!isfinite(weight) || weight < 0) return MPI_ERR_ARG;
  pthread_mutex_lock(&S.mu);
  S.weight = weight;
  S.weight_set = true;
  pthread_mutex_unlock(&S.mu);
  return MPI_SUCCESS;
}

DED_EXPORT int dedmpi_active(void) { return S.active ? 1 : 0; }
