/*
 * ded_requests.c: the application's request calls.
 *
 * Completion. The application's MPI_Wait* and MPI_Test* drive the shim's
 * routed ops. With nothing pending they go straight to PMPI; otherwise a
 * Wait becomes a loop of progress and the matching Test, which completes
 * exactly the same requests with the same statuses.
 *
 * Persistent all-reduces. MPI_Allreduce_init (MPI-4) and Open MPI 4.1's
 * MPIX_Allreduce_init return a handle of the shim's own: each MPI_Start
 * of it is an MPI_Iallreduce with the same arguments, routed to the swarm
 * as any all-reduce is (ded_route.h), and completes as that request does.
 * The handle stays the application's until MPI_Request_free: after a
 * completion it is inactive, not MPI_REQUEST_NULL, as MPI says of
 * persistent requests. It is never given to PMPI: every call that takes a
 * request puts the current start's request (or MPI_REQUEST_NULL while
 * inactive, which PMPI completes at once with an empty status) in its
 * place, and takes what PMPI left there back.
 *
 * Owns: the persistent all-reduces, a list under |mu| (few: a trainer
 * makes one per bucket, once). Invariant: a handle is the address of its
 * struct, whose |self| check tells it from any request of MPI's.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ded_shim_int.h"

/* ---------------------------------------------------------------- completion core */

static int req_wait(MPI_Request *request, MPI_Status *status) {
  int flag = 0;
  for (unsigned spins = 0;; spins++) {
    if (ded_shim_idle()) return PMPI_Wait(request, status);
    ded_shim_progress();
    int rc = PMPI_Test(request, &flag, status);
    if (rc != MPI_SUCCESS || flag) return rc;
    ded_shim_backoff(spins);
  }
}

static int req_waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
  int flag = 0;
  for (unsigned spins = 0;; spins++) {
    if (ded_shim_idle()) return PMPI_Waitall(count, requests, statuses);
    ded_shim_progress();
    int rc = PMPI_Testall(count, requests, &flag, statuses);
    if (rc != MPI_SUCCESS || flag) return rc;
    ded_shim_backoff(spins);
  }
}

static int req_waitany(int count, MPI_Request requests[], int *index, MPI_Status *status) {
  int flag = 0;
  for (unsigned spins = 0;; spins++) {
    if (ded_shim_idle()) return PMPI_Waitany(count, requests, index, status);
    ded_shim_progress();
    int rc = PMPI_Testany(count, requests, index, &flag, status);
    if (rc != MPI_SUCCESS || flag) return rc;
    ded_shim_backoff(spins);
  }
}

static int req_waitsome(int incount, MPI_Request requests[], int *outcount, int indices[],
                        MPI_Status statuses[]) {
  for (unsigned spins = 0;; spins++) {
    if (ded_shim_idle()) return PMPI_Waitsome(incount, requests, outcount, indices, statuses);
    ded_shim_progress();
    int rc = PMPI_Testsome(incount, requests, outcount, indices, statuses);
    if (rc != MPI_SUCCESS || *outcount != 0) return rc;
    ded_shim_backoff(spins);
  }
}

/* ---------------------------------------------------------------- persistent all-reduces */

typedef struct persist {
  struct persist *self; /* == the struct: a handle of ours */
  struct persist *next;
  const void *sendbuf;
  void *recvbuf;
  int count;
  MPI_Datatype dt;
  MPI_Op op;
  MPI_Comm comm;
  MPI_Request inner; /* the current start's; MPI_REQUEST_NULL while inactive */
} persist;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static persist *live;    /* under |mu| */
static atomic_int nlive; /* the calls' fast path: none, nothing to look up */

/* The persistent all-reduce |r| is, or NULL for a request of MPI's. */
static persist *persist_of(MPI_Request r) {
  if (atomic_load_explicit(&nlive, memory_order_acquire) == 0 || r == MPI_REQUEST_NULL) return NULL;
  pthread_mutex_lock(&mu);
  persist *p = live;
  while (p && (MPI_Request)(void *)p != r) p = p->next;
  pthread_mutex_unlock(&mu);
  return p;
}

static int persist_init(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                        MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request) {
  (void)info;
  if (!request) return MPI_ERR_REQUEST;
  if (count < 0) {
    PMPI_Comm_call_errhandler(comm, MPI_ERR_COUNT);
    return MPI_ERR_COUNT;
  }
  persist *p = calloc(1, sizeof *p);
  if (!p) {
    PMPI_Comm_call_errhandler(comm, MPI_ERR_NO_MEM);
    return MPI_ERR_NO_MEM;
  }
  *p = (persist){p, NULL, sendbuf, recvbuf, count, datatype, op, comm, MPI_REQUEST_NULL};
  pthread_mutex_lock(&mu);
  p->next = live;
  live = p;
  atomic_fetch_add(&nlive, 1);
  pthread_mutex_unlock(&mu);
  *request = (MPI_Request)(void *)p;
  return MPI_SUCCESS;
}

/* MPI-4's name, for a trainer built against a newer mpi.h of the same
 * ABI; Open MPI 4.1's mpi.h has no prototype for it. */
DED_EXPORT int MPI_Allreduce_init(const void *sendbuf, void *recvbuf, int count,
                                  MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Info info,
                                  MPI_Request *request);
DED_EXPORT int MPI_Allreduce_init(const void *sendbuf, void *recvbuf, int count,
                                  MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Info info,
                                  MPI_Request *request) {
  return persist_init(sendbuf, recvbuf, count, datatype, op, comm, info, request);
}

/* Open MPI 4.1's extension (mpi-ext.h). */
DED_EXPORT int MPIX_Allreduce_init(const void *sendbuf, void *recvbuf, int count,
                                   MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                                   MPI_Info info, MPI_Request *request);
DED_EXPORT int MPIX_Allreduce_init(const void *sendbuf, void *recvbuf, int count,
                                   MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                                   MPI_Info info, MPI_Request *request) {
  return persist_init(sendbuf, recvbuf, count, datatype, op, comm, info, request);
}

static int persist_start(persist *p) {
  if (p->inner != MPI_REQUEST_NULL) return MPI_ERR_REQUEST; /* already active */
  /* The shim's own MPI_Iallreduce: routed or not, as any call. */
  return MPI_Iallreduce(p->sendbuf, p->recvbuf, p->count, p->dt, p->op, p->comm, &p->inner);
}

DED_EXPORT int MPI_Start(MPI_Request *request) {
  persist *p = request ? persist_of(*request) : NULL;
  return p ? persist_start(p) : PMPI_Start(request);
}

DED_EXPORT int MPI_Startall(int count, MPI_Request requests[]) {
  if (atomic_load_explicit(&nlive, memory_order_acquire) == 0)
    return PMPI_Startall(count, requests);
  for (int i = 0; i < count; i++) {
    int rc = MPI_Start(&requests[i]);
    if (rc != MPI_SUCCESS) return rc;
  }
  return MPI_SUCCESS;
}

DED_EXPORT int MPI_Request_free(MPI_Request *request) {
  persist *p = request ? persist_of(*request) : NULL;
  if (!p) return PMPI_Request_free(request);
  /* An active start completes first: its buffers are the application's
   * again when this returns. */
  int rc = p->inner != MPI_REQUEST_NULL ? req_wait(&p->inner, MPI_STATUS_IGNORE) : MPI_SUCCESS;
  pthread_mutex_lock(&mu);
  persist **pp = &live;
  while (*pp != p) pp = &(*pp)->next;
  *pp = p->next;
  atomic_fetch_sub(&nlive, 1);
  pthread_mutex_unlock(&mu);
  free(p);
  *request = MPI_REQUEST_NULL;
  return rc;
}

DED_EXPORT int MPI_Cancel(MPI_Request *request) {
  /* A swarm round cannot be called back: cancelling a start has no effect. */
  if (request && persist_of(*request)) return MPI_SUCCESS;
  return PMPI_Cancel(request);
}

/*
 * Arrays that may hold our handles: |swap_in| puts each handle's current
 * request in a copy (|tmp|, |who| says whose), the call runs on the copy,
 * |swap_out| keeps what it left for ours and gives the rest back. Up to
 * SWAP_STACK requests on the stack, more on the heap.
 */
#define SWAP_STACK 64

typedef struct swap {
  MPI_Request stack_req[SWAP_STACK];
  persist *stack_who[SWAP_STACK];
  MPI_Request *req;
  persist **who;
} swap;

/* Returns 0, or MPI_ERR_NO_MEM. */
static int swap_in(swap *s, int n, const MPI_Request *requests) {
  s->req = s->stack_req;
  s->who = s->stack_who;
  if (n > SWAP_STACK) {
    s->req = malloc((size_t)n * sizeof *s->req);
    s->who = malloc((size_t)n * sizeof *s->who);
    if (!s->req || !s->who) {
      free(s->req);
      free(s->who);
      return MPI_ERR_NO_MEM;
    }
  }
  for (int i = 0; i < n; i++) {
    s->who[i] = persist_of(requests[i]);
    s->req[i] = s->who[i] ? s->who[i]->inner : requests[i];
  }
  return MPI_SUCCESS;
}

static void swap_out(swap *s, int n, MPI_Request *requests) {
  for (int i = 0; i < n; i++) {
    if (s->who[i])
      s->who[i]->inner = s->req[i]; /* MPI_REQUEST_NULL once complete: inactive */
    else
      requests[i] = s->req[i];
  }
  if (s->req != s->stack_req) {
    free(s->req);
    free(s->who);
  }
}

/* Whether |requests| may hold a handle of ours. */
static bool maybe_ours(int n, const MPI_Request *requests) {
  return n > 0 && requests && atomic_load_explicit(&nlive, memory_order_acquire) > 0;
}

/* ---------------------------------------------------------------- the calls */

DED_EXPORT int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status) {
  ded_shim_progress();
  persist *p = request ? persist_of(*request) : NULL;
  return PMPI_Test(p ? &p->inner : request, flag, status);
}

DED_EXPORT int MPI_Wait(MPI_Request *request, MPI_Status *status) {
  persist *p = request ? persist_of(*request) : NULL;
  return req_wait(p ? &p->inner : request, status);
}

DED_EXPORT int MPI_Request_get_status(MPI_Request request, int *flag, MPI_Status *status) {
  ded_shim_progress();
  persist *p = persist_of(request);
  return PMPI_Request_get_status(p ? p->inner : request, flag, status);
}

/* The array calls: |CALL| on the copy when a handle of ours may be in
 * |requests|, else on |requests| itself. */
#define ON_ARRAY(n, requests, CALL)                                                        \
  do {                                                                                     \
    if (!maybe_ours(n, requests)) {                                                        \
      MPI_Request *reqs_ = requests;                                                       \
      return CALL;                                                                         \
    }                                                                                      \
    swap s_;                                                                               \
    int rc_ = swap_in(&s_, n, requests);                                                   \
    if (rc_ != MPI_SUCCESS) return rc_;                                                    \
    MPI_Request *reqs_ = s_.req;                                                           \
    rc_ = CALL;                                                                            \
    swap_out(&s_, n, requests);                                                            \
    return rc_;                                                                            \
  } while (0)

DED_EXPORT int MPI_Testall(int count, MPI_Request requests[], int *flag, MPI_Status statuses[]) {
  ded_shim_progress();
  ON_ARRAY(count, requests, PMPI_Testall(count, reqs_, flag, statuses));
}

DED_EXPORT int MPI_Testany(int count, MPI_Request requests[], int *index, int *flag,
                           MPI_Status *status) {
  ded_shim_progress();
  ON_ARRAY(count, requests, PMPI_Testany(count, reqs_, index, flag, status));
}

DED_EXPORT int MPI_Testsome(int incount, MPI_Request requests[], int *outcount, int indices[],
                            MPI_Status statuses[]) {
  ded_shim_progress();
  ON_ARRAY(incount, requests, PMPI_Testsome(incount, reqs_, outcount, indices, statuses));
}

DED_EXPORT int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
  ON_ARRAY(count, requests, req_waitall(count, reqs_, statuses));
}

DED_EXPORT int MPI_Waitany(int count, MPI_Request requests[], int *index, MPI_Status *status) {
  ON_ARRAY(count, requests, req_waitany(count, reqs_, index, status));
}

DED_EXPORT int MPI_Waitsome(int incount, MPI_Request requests[], int *outcount, int indices[],
                            MPI_Status statuses[]) {
  ON_ARRAY(incount, requests, req_waitsome(incount, reqs_, outcount, indices, statuses));
}
