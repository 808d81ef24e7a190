/*
 * ded_driver.h: the real driver of a ded_node: TCP, a clock, randomness
 * and one background thread.
 *
 * The thread owns the node and runs an epoll loop (Redis ae style: file
 * events, the node's next deadline as the poll timeout, an eventfd to wake
 * it). Other threads talk to it only through the calls below (each posts
 * to the driver thread, or waits on its answer); completions come back
 * through the config's callback, called on the driver thread.
 */
#ifndef DED_DRIVER_H
#define DED_DRIVER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ded_node.h"
#include "dht/ded_invite.h"

typedef struct ded_driver ded_driver;

/* Called on the driver thread when a submitted round finishes; |ctx| is
 * ded_round_args.ctx. Must not block. */
typedef void (*ded_driver_done_fn)(void *user, void *ctx, const ded_round_result *res);

typedef struct ded_driver_config {
  /* Engine settings. The driver fills in identity_seed, announce,
   * bootstrap and wall_offset_ns itself. */
  ded_node_settings node;
  /* "host:port" to accept peers on; NULL or "" = do not listen. */
  const char *listen;
  /* Comma-separated "host:port" list (DEDMPI_JOIN); names are resolved. */
  const char *join;
  /* Comma-separated "host:port" list to publish instead of the addresses
   * found on the machine (DEDMPI_ANNOUNCE); NULL = find them. */
  const char *announce;
  ded_driver_done_fn done;
  /* Called on the driver thread when a joiner asks for this job's state:
   * take a snapshot at the trainer's next step and pass it to
   * ded_driver_snapshot_set (optional: without it, no state is offered). */
  void (*want_snapshot)(void *user);
  /* Called once on the driver thread when the run's rounds go on (the
   * peers publish newer rounds) while this job has submitted nothing for
   * |quiet_s| seconds, at least one round bound: its trainer's gradients
   * do not reach the swarm (optional). */
  void (*quiet)(void *user, uint64_t swarm_round, uint64_t quiet_s);
  void *user;
  /* DEDMPI_IDENTITY_FILE: where the identity's seed is kept (created,
   * mode 0600, when missing); NULL or "" = a fresh identity. */
  const char *identity_file;
  /* The run's secret (ded_swarm_key_derive): DEDMPI_SWARM_KEY's text, or
   * the first line of DEDMPI_SWARM_KEY_FILE (a file of this user that no
   * one else may read); both NULL or "" = the run has none (a warning). */
  const char *swarm_key;
  const char *swarm_key_file;
  /* Access control: the owner's public key (DEDMPI_OWNER; NULL = none),
   * a file of admitted keys (DEDMPI_ALLOW_FILE; NULL or "" = none), and
   * this job's own invitation (DEDMPI_INVITE; NULL = none), which must be
   * for this job's identity and run (and, with an owner, signed by it and
   * unexpired). */
  const uint8_t *owner;
  const char *allow_file;
  const ded_invite *invite;
  /* Prefix of log lines, e.g. "dedmpi[1234]". */
  const char *log_prefix;
  /* Another peer of this process said what the run's settings warn of
   * (no swarm key): do not say it again. */
  bool settings_said;
} ded_driver_config;

/*
 * Opens the listening socket, creates the node, starts the thread and waits
 * until bootstrap finished (at most cfg->node.bootstrap_timeout_ns).
 * Returns 0, or a negative DED_ERR_* with a message in |err|:
 * DED_ERR_INVALID_ARG (bad address; an identity file that is not one, or
 * that others may read), DED_ERR_BOOTSTRAP (nobody answered, or only to
 * turn us away as full or leaving), DED_ERR_AUTH (a peer refused our key:
 * another swarm key or run name; |err| names it),
 * DED_ERR_INTERNAL (a system call failed).
 */
int ded_driver_start(const ded_driver_config *cfg, ded_driver **out, char *err, size_t errlen);

/* Queues a round; thread-safe. 0, or DED_ERR_CLOSING after stop. The
 * outcome arrives through cfg->done (also for a round the node refuses). */
int ded_driver_submit(ded_driver *d, const ded_round_args *args);

/*
 * Finds out whether a run is in progress and, if so, loads its state; call
 * it once, before the first ded_driver_submit. Blocks until the node knows
 * (its own bounds apply). Returns 0 with |snap| filled: snap->bytes NULL
 * means no run in progress; otherwise the caller owns snap->bytes (free())
 * and the node resumes at snap->round. Or a DED_ERR_*.
 */
int ded_driver_state_fetch(ded_driver *d, ded_snapshot *snap);

/*
 * For a job out of step (a round reported with |behind|): loads a snapshot
 * of round |min_round| or later, as ded_driver_state_fetch does, and makes
 * the node resume at its round. Call it with every submitted round
 * reported, at the start of a training step. Blocks within the node's
 * bounds. Returns 0 with |snap| filled (the caller owns snap->bytes), or a
 * DED_ERR_* with nothing loaded (DED_ERR_TIMEOUT: no peer offered one).
 */
int ded_driver_state_reload(ded_driver *d, uint64_t min_round, ded_snapshot *snap);

/* Hands the node a snapshot of this job's state (snap->bytes from malloc;
 * the driver takes it). Thread-safe. */
void ded_driver_snapshot_set(ded_driver *d, ded_snapshot *snap);

/* A job that found no run in progress, as its first round starts: hands
 * the node the state it brings to the run (ded_node_found_set; the driver
 * takes snap->bytes). Before that round's ded_driver_submit. */
void ded_driver_found_set(ded_driver *d, ded_snapshot *snap);

/*
 * Once the run's first round reported its contributors |cands| (|n| ids;
 * 0: none but this job, which then only says the round is over):
 * finds the run's initial state (ded_node_state_found). Blocks within the
 * node's bounds. Returns 0 with snap->bytes NULL when it is this job's own,
 * 0 with |snap| filled (round 0; the caller owns snap->bytes) when it is
 * another's, or a DED_ERR_*.
 */
int ded_driver_state_found(ded_driver *d, const uint8_t *cands, unsigned n, ded_snapshot *snap);

/*
 * A backbone's checkpoint (ded_node_state_pull): asks the run's trainers
 * for their state, of round |min_round| or later, and fetches it without
 * loading it. Blocks within the node's bounds. Returns 0 with |snap|
 * filled (the caller owns snap->bytes), 0 with snap->bytes NULL when no
 * trainer offered one, or a DED_ERR_*.
 */
int ded_driver_state_pull(ded_driver *d, uint64_t min_round, ded_snapshot *snap);

/* A backbone's checkpoint to offer joiners once no trainer is left
 * (ded_node_keep_set; the driver takes snap->bytes). Thread-safe. */
void ded_driver_keep_set(ded_driver *d, ded_snapshot *snap);

/* Leaves the swarm, flushes for at most |flush_ns|, stops the thread and
 * frees everything. Rounds still queued finish with DED_ERR_CLOSING. */
void ded_driver_stop(ded_driver *d, uint64_t flush_ns);

/* Why this job could not take part (a DED_LEAVE_* failure reason,
 * ded_node_leave_reason): the LEAVE of ded_driver_stop says so, and the
 * peers log it; the first reason stays. Thread-safe; call it before
 * ded_driver_stop. */
void ded_driver_leave_reason(ded_driver *d, uint8_t reason);

/* The port we listen on (0 if not listening). */
uint16_t ded_driver_port(const ded_driver *d);

/* Short printable id of this peer. */
const char *ded_driver_peer_sid(const ded_driver *d);

/* The identity seed DEDMPI_IDENTITY_FILE=|path| keeps (created, mode
 * 0600, when missing; |*created| says so), or a fresh one for NULL or "".
 * 0, or DED_ERR_INVALID_ARG / DED_ERR_INTERNAL with a message in |err|. */
int ded_driver_identity_seed(const char *path, uint8_t seed[DED_SEED_BYTES], bool *created,
                             char *err, size_t errlen);

/* Monotonic clock, ns. */
uint64_t ded_driver_now_ns(void);

/* Peers this one has a ready connection to that take part in rounds
 * (backbones not counted), as the driver thread last counted them (after
 * each peer that came or went, and at each finished round; any thread may
 * ask). */
unsigned ded_driver_peer_count(const ded_driver *d);

/* A peer's connection coming up or going away, as this node saw it. */
typedef struct ded_driver_event {
  uint64_t wall_ms;
  uint8_t id[DED_ID_BYTES];
  bool up;
  int status; /* going away: why (DED_ERR_*; 0 = it said goodbye) */
} ded_driver_event;

#define DED_DRIVER_EVENTS 32

/* What a backbone's status page shows (ded_driver_status). */
typedef struct ded_swarm_status {
  ded_status_peer *peers; /* free() it */
  size_t npeers;
  ded_driver_event events[DED_DRIVER_EVENTS]; /* the latest, oldest first */
  size_t nevents;
  uint64_t wall_ms; /* when it was taken */
} ded_swarm_status;

/*
 * Takes the node's view of the swarm (ded_node_status) and the latest
 * peer events, on the driver thread, for any other thread. Returns 0,
 * DED_ERR_NOMEM, or DED_ERR_TIMEOUT if the driver thread did not answer
 * within a second.
 */
int ded_driver_status(ded_driver *d, ded_swarm_status *out);

/* ---- group peers (ded_dgroups.c) ----
 *
 * A job whose trainer splits MPI_COMM_WORLD (MPI_Comm_split: pipeline or
 * tensor parallelism) runs a driver per data-parallel group on the
 * group's rank 0, in a run named after the group (a "group peer"); its
 * world peer (rank 0's driver, in the main run) publishes where they
 * listen in its discovery record (the GROUPS extension, ded_record.h),
 * and reads what the other jobs' world peers published, so that the
 * group peers of different jobs find each other. All are thread-safe. */

/* "host:port" at which peers reach this driver: its first announced
 * address (written to |out|, NUL-terminated); 0, or DED_ERR_INVALID_ARG
 * when it does not listen or |len| is too small. */
int ded_driver_address(const ded_driver *d, char *out, size_t len);

/* Publishes in this peer's record the addresses of its job's group peers:
 * |n| entries (at most DED_RECORD_GROUPS_MAX), ids[i] with addrs[i]
 * ("host:port", numeric IPv4 or [IPv6], not the any address), in any
 * order, no id twice; n 0 says the job has none. Replaces the previous
 * list; the record is re-signed and flooded at once (on the driver
 * thread, as soon as it wakes). 0, or DED_ERR_INVALID_ARG (a malformed
 * list), DED_ERR_CLOSING (stopping). */
int ded_driver_groups_publish(ded_driver *d, const uint16_t *ids, const char *const *addrs, unsigned n);

/* The addresses other peers of the run published for group |id|,
 * comma-separated "host:port" in |out| (NUL-terminated; at most
 * DED_BOOTSTRAP_MAX of them). Waits at most |wait_ns| while some peer
 * that takes part in rounds has published no groups yet. Returns the
 * number of addresses (>= 0) or a DED_ERR_* (DED_ERR_INVALID_ARG: |out|
 * too small; DED_ERR_CLOSING; DED_ERR_TIMEOUT: the driver thread did not
 * answer within a second). */
int ded_driver_group_hints(ded_driver *d, uint16_t id, uint64_t wait_ns, char *out, size_t len);

/* Adds bootstrap addresses (comma-separated "host:port", at most
 * DED_BOOTSTRAP_MAX, resolved as DEDMPI_JOIN is, on the caller's thread),
 * tried in the background until a peer answers at each
 * (ded_node_join_more). 0 or DED_ERR_* (DED_ERR_INVALID_ARG: a list that
 * does not resolve, logged; DED_ERR_CLOSING; DED_ERR_NOMEM). */
int ded_driver_join_more(ded_driver *d, const char *addrs);

/* pthread_cond_timedwait for at most |ns| from now (|mu| held). */
void ded_cond_wait_ns(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t ns);

#endif /* DED_DRIVER_H */
