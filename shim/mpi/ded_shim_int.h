/*
 * ded_shim_int.h: the shim's core (ded_shim.c) and what its other files
 * take from it: the channels' state (ded_state.c), the data-parallel
 * groups (ded_group.c), the reduce-scatters (ded_scatter.c) and the
 * completion calls (ded_requests.c). Application threads, except where
 * a function says the driver thread.
 *
 * A channel is one swarm peer of this process and the routed all-reduces
 * it carries: the job's world channel (its rank 0 is the world's rank 0,
 * whose driver is the job's peer in the run), and one per group of an
 * MPI_Comm_split of the whole job this rank is in (the group's rank 0
 * runs that group's peer, in a run of its own: docs/architecture.md,
 * "Data-parallel groups"). Every field of a channel and of its ops is
 * under shim.mu unless it says otherwise.
 */
#ifndef DED_SHIM_INT_H
#define DED_SHIM_INT_H

#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/ded_assert.h"
#include "ded_config.h"
#include "ded_driver.h"
#include "ded_route.h"
#include "ded_step.h"
#include "dedmpi.h"
#include "state/ded_image.h"

#define DED_EXPORT __attribute__((visibility("default")))

/* A founding channel's rank 0: NONE (not a founder) -> WAIT (its state
 * handed to the swarm with its first all-reduce) -> DUE (the first round
 * reported, naming its contributors if there were others) -> BUSY
 * (finding whose state it is) -> DONE. */
enum shim_found { FOUND_NONE, FOUND_WAIT, FOUND_DUE, FOUND_BUSY, FOUND_DONE };

/* The outcome a channel's rank 0 broadcasts to its other ranks. */
typedef struct shim_header {
  int32_t mpi_err;
  int32_t alone;
  int32_t late;
  int32_t contributors;
  int32_t recoveries;
  int32_t reload; /* the state pieces take the run's snapshot now */
  double total_weight;
  uint64_t round;
  uint32_t codec_ppm; /* the round's codec (avg/ded_codec.h): top-k's fraction */
  uint8_t codec;      /* ... its kind */
} shim_header;

struct shim_chan;

/* One routed all-reduce. */
typedef struct shim_op {
  struct shim_op *next;
  struct shim_chan *chan;
  void *recvbuf;
  int count;
  MPI_Datatype dt;
  size_t bytes;
  int local_err;   /* step 1's PMPI result */
  bool swarm_done; /* rank 0: the driver reported its last round */
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

typedef struct shim_chan {
  struct shim_chan *next; /* the groups of this rank, newest first */
  int id;                 /* -1: the world; a group's id (ded_group.c) */
  char run[DED_RUN_NAME_MAX + 1];
  int rank, size; /* in the channel's communicator */
  /* Private duplicates of the channel's communicator (size > 1): the
   * local sums, the outcome broadcasts, the state pieces. */
  MPI_Comm comm_reduce, comm_bcast, comm_state;
  ded_driver *driver; /* rank 0 */
  /* A group's sums route once its rank 0 broadcast it state before its
   * first sum (the world's always do). */
  bool routes;
  /* Ops in call order, oldest first; |post| is the first op rank 0 has not
   * posted its broadcasts for. */
  shim_op *head, *tail, *post;
  int npending; /* ops not complete */
  /* The channel's state (docs/architecture.md, "Joining a run in
   * progress"): its pieces are the buffers of the large start-up
   * broadcasts from rank 0 on its communicator and, for the world, those
   * registered through dedmpi.h, in call order; |step| keeps them, serves
   * them to joiners and reloads them when the job falls out of step. */
  ded_step step;
  bool started; /* a routed all-reduce began (a group's: a sum it does not route):
                 * the state's pieces are known */
  bool state_known; /* rank 0: the swarm said whether a run is in progress */
  int state_err;    /* rank 0: why it could not say (MPI error code) */
  ded_snapshot loaded; /* rank 0: the run's state (bytes until handed out) */
  ded_image_view loaded_view; /* rank 0: its pieces */
  uint64_t loaded_next, loaded_off;
  /* Rank 0, a channel that found no run in progress: the founding of its
   * initial state (docs/architecture.md, "One initial model"). Its first
   * all-reduce is not posted until the first round's contributors say
   * whose state the run starts from and, if another's, it is loaded. */
  _Atomic int found; /* enum shim_found; read without the lock */
  shim_op *found_op;
  uint8_t *found_cands; /* the first round's contributors (malloc), while DUE */
  unsigned found_ncands;
  /* Rank 0: why this channel could not take part (DED_LEAVE_*; 0 = it
   * could), for the LEAVE at MPI_Finalize: the other jobs log it. */
  uint8_t leave_reason;
  bool warned_not_dp; /* rank 0: said its sums stay, not being data-parallel */
  char prefix[80]; /* its driver's log lines */
} shim_chan;

struct ded_shim {
  bool active; /* routing to the swarm is on */
  ded_config cfg;
  int rank, size; /* in MPI_COMM_WORLD */
  /* Recursive: completing a generalized request the application already
   * freed calls greq_free from inside PMPI_Grequest_complete. */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  atomic_int pending; /* ops not complete, every channel's: the fast path of Wait/Test */
  /* What is routed (ded_route.h). Below min_count elements a sum goes to
   * PMPI after three compares, as does another op below watch_count,
   * unless the world's rank 0 is still counting its census. */
  ded_route route;
  int64_t min_count, watch_count;
  double weight;
  bool weight_set;
  dedmpi_round_info last;
  char last_codec[24]; /* dedmpi_last_codec */
  bool have_last;
  char prefix[48];
  int progress_fd; /* world rank 0: DEDMPI_PROGRESS, connected; -1 = none */
  shim_chan world;
  shim_chan *groups;
  /* ded_group.c: a private duplicate of the world for the splits, how
   * many splits of the whole job there were, the attribute naming a
   * group's channel on its communicators, and (world rank 0) the groups
   * its record publishes. */
  MPI_Comm comm_split;
  unsigned nsplits;
  int keyval;
  struct shim_published {
    uint16_t id;
    char addr[64];
  } *published;
  unsigned npublished;
  bool published_full_logged;
};

extern struct ded_shim shim;

/* ---------------------------------------------------------------- ded_shim.c */

void ded_shim_log(int level, const char *fmt, ...) DED_PRINTF(2, 3);

/* Moves the routed ops as far as they can go (one atomic load when none
 * is pending). */
void ded_shim_progress(void);

/* No routed op is pending: completion calls may go straight to PMPI. */
bool ded_shim_idle(void);

/* Waits a little between polls (spin, then yield, then sleep). */
void ded_shim_backoff(unsigned spins);

/* The channel whose sums and state |comm| carries: the world's for a
 * communicator congruent to MPI_COMM_WORLD, a group's for one of its
 * communicators, else NULL. */
shim_chan *ded_shim_chan_of(MPI_Comm comm);

/* Sets up |c| on |comm| (collective over it): its duplicates, its step,
 * and on its rank 0 a driver for run |run| with |dc|'s settings (its
 * callbacks are filled in here). 0, or a DED_ERR_* with |err| set on the
 * rank 0 that failed (every rank gets the code). */
int ded_shim_chan_open(shim_chan *c, MPI_Comm comm, int id, const char *run,
                       ded_driver_config *dc, char *err, size_t errlen);

/* Stops |c|'s driver and frees what it holds (collective over it). */
void ded_shim_chan_close(shim_chan *c);

/* Whether a sum of |count| elements the routing rule routes (the shim is
 * active, the count and the buffers as ded_route_classify wants); |*es|
 * the element size. */
bool ded_shim_sum_routes(const void *sendbuf, const void *recvbuf, int count, MPI_Datatype dt,
                         MPI_Op op, MPI_Comm comm, size_t *es);

/* A routed all-reduce, as the application's MPI_Allreduce of it. */
int ded_shim_allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op,
                       MPI_Comm comm);

/* ---------------------------------------------------------------- ded_state.c */

/* Rank 0: this channel failed in a way the other jobs should hear of when
 * it leaves; the first reason stays. Any thread. */
void ded_state_leave_reason(shim_chan *c, uint8_t reason);

/* |p| becomes the next piece of |c|'s state (every rank keeps the
 * addresses, to reload); in a joining job rank 0 gets the run's bytes
 * first. Returns an MPI error code. */
int ded_state_piece(shim_chan *c, void *p, size_t bytes);

/* Rank 0, |c|'s first routed all-reduce |op|, before it is submitted: the
 * state is complete. A founder hands the swarm the state it brings. */
void ded_state_start(shim_chan *c, shim_op *op);

/* Driver thread, under shim.mu: the first round of a founding channel
 * reported. */
void ded_state_found_first_round(shim_chan *c, const ded_round_result *res);

/* Rank 0, an application thread, without shim.mu: once the first round
 * named its contributors, finds whose state the run starts from. */
void ded_state_found_run(shim_chan *c);

/* Whether |op| waits for the founding before it may be posted. */
bool ded_state_found_holds(const shim_op *op);

/* Driver callbacks: a joiner wants a snapshot; the run goes on while
 * this channel routes nothing. */
void ded_state_want_snapshot(void *user);
void ded_state_quiet(void *user, uint64_t swarm_round, uint64_t quiet_s);

/* ---------------------------------------------------------------- ded_group.c */

/* MPI_Init, after the world channel: the attribute and the duplicate the
 * splits use. MPI_Finalize: every group's channel closes. */
int ded_group_init(void);
void ded_group_fini(void);

#endif /* DED_SHIM_INT_H */
