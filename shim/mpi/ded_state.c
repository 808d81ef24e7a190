/*
 * ded_state.c: a channel's state (ded_shim_int.h): the pieces a joiner
 * loads from the run, the start-up broadcasts that are those pieces, and
 * the founding of a run's initial state by the jobs that start it
 * together (docs/architecture.md, "Joining a run in progress" and "One
 * initial model").
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ded_msg.h"
#include "ded_shim_int.h"

/* A line of the shim's log about channel |c|: a group's name its group. */
DED_PRINTF(3, 4)
static void state_log(const shim_chan *c, int level, const char *fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (c->id < 0)
    ded_shim_log(level, "%s", line);
  else
    ded_shim_log(level, "group %d.%d: %s", c->id >> 8, c->id & 0xff, line);
}

void ded_state_leave_reason(shim_chan *c, uint8_t reason) {
  pthread_mutex_lock(&shim.mu);
  if (!c->leave_reason) c->leave_reason = reason;
  pthread_mutex_unlock(&shim.mu);
}

/* ---------------------------------------------------------------- founding */

/* The first round of a founding channel reported
 * (no contributors to name when it was alone, failed, or not the run's
 * first: the node then only learns that the round is over). */
void ded_state_found_first_round(shim_chan *c, const ded_round_result *res) {
  c->found_ncands = 0;
  if (res->status == 0 && res->round == 0 && !res->alone && res->members && res->contributors) {
    c->found_cands = malloc((size_t)res->contributors * DED_ID_BYTES);
    if (c->found_cands) {
      memcpy(c->found_cands, res->members, (size_t)res->contributors * DED_ID_BYTES);
      c->found_ncands = res->contributors;
    } else {
      state_log(c, DED_LOG_ERROR, "no memory to agree on the run's initial state: this job keeps "
               "its own");
    }
  } else if (res->status == 0 && res->round != 0 && !res->alone) {
    state_log(c, DED_LOG_WARN, "this job found no run in progress, but its first round is the "
             "run's round %llu: it reloads the run's state at its next step",
             (unsigned long long)res->round);
    ded_step_want_reload(&c->step);
  }
  atomic_store(&c->found, FOUND_DUE);
}

/* Rank 0, an application thread, without shim.mu: once the first round named
 * its contributors, finds whose state the run starts from; another's is
 * loaded into the pieces as the first all-reduce completes. */
void ded_state_found_run(shim_chan *c) {
  int due = FOUND_DUE;
  if (atomic_load_explicit(&c->found, memory_order_relaxed) != FOUND_DUE ||
      !atomic_compare_exchange_strong(&c->found, &due, FOUND_BUSY))
    return;
  ded_snapshot snap;
  int rv = ded_driver_state_found(c->driver, c->found_cands, c->found_ncands, &snap);
  free(c->found_cands);
  c->found_cands = NULL;
  const char *why = NULL;
  if (rv == 0 && snap.bytes && !ded_step_image_fits(&c->step, snap.bytes, snap.len, &why)) {
    state_log(c, DED_LOG_ERROR, "the run's initial state does not fit this job's (%s): is it the "
             "same program, model and configuration?", why);
    free(snap.bytes);
    rv = DED_ERR_SIZE_MISMATCH;
    ded_state_leave_reason(c, DED_LEAVE_MISMATCH_STATE);
  } else if (rv == DED_ERR_TIMEOUT || rv == DED_ERR_INVALID_ARG) {
    /* No peer gave it (the candidates went, or dropped it long ago), or
     * the node kept none of ours: the run's state comes by a reload. */
    state_log(c, DED_LOG_WARN, "could not take the run's initial state (%s): this job reloads the "
             "run's state at its next step", ded_strerror(rv));
    ded_step_want_reload(&c->step);
    rv = 0;
  } else if (rv != 0) {
    state_log(c, DED_LOG_ERROR, "cannot load the run's initial state (%s): this job cannot take "
             "part", ded_strerror(rv));
    ded_state_leave_reason(c, DED_LEAVE_ERROR);
  }
  pthread_mutex_lock(&shim.mu);
  if (rv != 0) {
    c->found_op->res.status = rv; /* the first all-reduce fails */
  } else if (snap.bytes) {
    state_log(c, DED_LOG_INFO, "starting from the run's initial state (another job's, %llu bytes), "
             "as the first all-reduce completes", (unsigned long long)snap.len);
    ded_step_found_load(&c->step, &snap);
    c->found_op->reload = true;
  }
  atomic_store(&c->found, FOUND_DONE);
  pthread_mutex_unlock(&shim.mu);
}

/* Whether |op| waits for the founding before it may be posted. */
bool ded_state_found_holds(const shim_op *op) {
  const shim_chan *c = op->chan;
  if (op != c->found_op) return false;
  int f = atomic_load(&c->found);
  return f == FOUND_WAIT || f == FOUND_DUE || f == FOUND_BUSY;
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
void ded_state_want_snapshot(void *user) {
  shim_chan *c = user;
  ded_step_want_snapshot(&c->step);
}

/* Driver thread: the run's rounds go on while this job sends nothing. */
void ded_state_quiet(void *user, uint64_t swarm_round, uint64_t quiet_s) {
  const shim_chan *c = user;
  state_log(c, DED_LOG_WARN, "run '%s' is at round %llu and its rounds go on, but this job has "
           "all-reduced nothing to the swarm for %llu s: its gradients stay its own. Likely causes: "
           "a framework that skips its all-reduce with one process (Horovod does at size() == 1: "
           "run 2 ranks or more); a reduction of pickled objects (mpi4py's lowercase "
           "comm.allreduce: use comm.Allreduce on arrays); a type or op of its own (Horovod's "
           "--fp16-allreduce); a sum on a communicator that is not the whole job's",
           c->run, (unsigned long long)swarm_round, (unsigned long long)quiet_s);
}

/* Rank 0: asks the swarm, once, whether a run is in progress, and if so
 * fetches its state. Returns an MPI error code. */
static int state_sync(shim_chan *c) {
  if (c->state_known) return c->state_err;
  c->state_known = true;
  ded_snapshot snap;
  int rv = ded_driver_state_fetch(c->driver, &snap);
  if (rv != 0) {
    state_log(c, DED_LOG_ERROR, "cannot load the state of run '%s' from its peers (%s): this job "
             "cannot join it", c->run, ded_strerror(rv));
    ded_state_leave_reason(c, DED_LEAVE_ERROR);
    c->state_err = MPI_ERR_OTHER;
    return c->state_err;
  }
  if (snap.round > 0) {
    if (ded_image_parse(snap.bytes, snap.len, &c->loaded_view) != 0) {
      state_log(c, DED_LOG_ERROR, "the state of run '%s' its peers gave is malformed: this job cannot "
               "join it", c->run);
      free(snap.bytes);
      ded_state_leave_reason(c, DED_LEAVE_ERROR);
      c->state_err = MPI_ERR_OTHER;
      return c->state_err;
    }
    c->loaded = snap;
    ded_step_resume(&c->step, snap.round, snap.pos);
    state_log(c, DED_LOG_INFO, "joining run '%s' in progress at round %llu: %llu bytes of state in "
             "%llu piece%s", c->run, (unsigned long long)snap.round,
             (unsigned long long)c->loaded_view.data_len, (unsigned long long)c->loaded_view.n,
             c->loaded_view.n == 1 ? "" : "s");
  } else {
    free(snap.bytes);
    atomic_store(&c->found, FOUND_WAIT); /* a founder: its first round says whose state it is */
  }
  return MPI_SUCCESS;
}

/* |p| becomes the next piece of the state (every rank keeps the
 * addresses, to reload); in a joining job rank 0 gets the run's bytes
 * first. Returns an MPI error code. */
int ded_state_piece(shim_chan *c, void *p, size_t bytes) {
  int rc = c->rank == 0 ? state_sync(c) : MPI_SUCCESS;
  if (rc != MPI_SUCCESS) return rc;
  if (c->rank == 0 && c->loaded.round > 0) {
    const ded_image_view *v = &c->loaded_view;
    uint64_t k = c->loaded_next++;
    if (k >= v->n || ded_image_size(v, k) != bytes) {
      state_log(c, DED_LOG_ERROR, "the run's state has %llu piece%s; this job's piece %llu is %zu "
               "bytes where the run's is %llu: is it the same program, model and configuration?",
               (unsigned long long)v->n, v->n == 1 ? "" : "s", (unsigned long long)k + 1, bytes,
               k < v->n ? (unsigned long long)ded_image_size(v, k) : 0ull);
      ded_state_leave_reason(c, DED_LEAVE_MISMATCH_STATE);
      return MPI_ERR_COUNT;
    }
    memcpy(p, v->data + c->loaded_off, bytes);
    c->loaded_off += bytes;
  }
  ded_step_piece_add(&c->step, p, bytes);
  return MPI_SUCCESS;
}

/* Rank 0, the first routed all-reduce |op|, before it is submitted: the
 * state is complete. A founder hands the swarm the state it brings. */
void ded_state_start(shim_chan *c, shim_op *op) {
  state_sync(c);
  if (c->loaded.round > 0) {
    if (c->loaded_next < c->loaded_view.n)
      state_log(c, DED_LOG_ERROR, "the run's state has %llu pieces but this job broadcast or "
               "registered only %llu before training: its state differs from the run's",
               (unsigned long long)c->loaded_view.n, (unsigned long long)c->loaded_next);
    else if (c->loaded_view.n == 0)
      state_log(c, DED_LOG_WARN, "the run's peers have no state to give (no start-up broadcast, "
               "nothing registered): this job's parameters are its own");
  }
  free(c->loaded.bytes);
  c->loaded.bytes = NULL;
  memset(&c->loaded_view, 0, sizeof c->loaded_view);
  if (atomic_load(&c->found) != FOUND_WAIT) return;
  ded_snapshot snap;
  memset(&snap, 0, sizeof snap);
  if (!ded_step_image(&c->step, &snap)) {
    atomic_store(&c->found, FOUND_NONE);
    return;
  }
  state_log(c, DED_LOG_DEBUG, "offering this job's initial state (%zu piece%s, %llu bytes) as the "
           "run's, should its first round choose it", c->step.npieces,
           c->step.npieces == 1 ? "" : "s", (unsigned long long)c->step.total);
  ded_driver_found_set(c->driver, &snap);
  pthread_mutex_lock(&shim.mu);
  c->found_op = op;
  pthread_mutex_unlock(&shim.mu);
}

/* A broadcast from rank 0 of floats or doubles that the routing rule
 * would route as an all-reduce (a tensor of the model), to the whole job
 * or to a group of a split of it, before the channel's first routed sum:
 * a piece of that channel's state. An integer, a byte string or a single
 * value (a seed, a flag, a pickled object) is configuration, not state.
 * A group whose rank 0 broadcasts it state is a data-parallel group: its
 * sums route from now on (docs/architecture.md, "Data-parallel groups"). */
__attribute__((noinline)) static int shim_bcast(void *buf, int count, MPI_Datatype dt, int root,
                                                MPI_Comm comm) {
  uint8_t dtype;
  size_t es;
  shim_chan *c;
  if (!buf || ded_route_tensor(&shim.route, count, dt, DED_ROUTE_YES, &dtype, &es) != DED_ROUTE_YES ||
      !(c = ded_shim_chan_of(comm)) || c->started)
    return PMPI_Bcast(buf, count, dt, root, comm);
  if (c->id >= 0 && !c->routes) {
    c->routes = true;
    if (c->rank == 0)
      ded_shim_log(DED_LOG_INFO, "group %d.%d of this job is data-parallel (its rank 0 broadcast "
                   "it state): its sums go to run '%s'", c->id >> 8, c->id & 0xff, c->run);
  }
  int rc = ded_state_piece(c, buf, (size_t)count * es);
  /* The other ranks wait in the broadcast whatever happened here. */
  int brc = PMPI_Bcast(buf, count, dt, root, comm);
  if (brc != MPI_SUCCESS) return brc;
  if (rc != MPI_SUCCESS) PMPI_Comm_call_errhandler(comm, rc);
  return rc;
}

DED_EXPORT int MPI_Bcast(void *buf, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  if (DED_LIKELY(!shim.active || root != 0 || count <= 0 || !shim.cfg.state_bcast))
    return PMPI_Bcast(buf, count, datatype, root, comm);
  return shim_bcast(buf, count, datatype, root, comm);
}
