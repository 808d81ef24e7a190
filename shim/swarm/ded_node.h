/*
 * ded_node.h: one swarm peer, as a sans-I/O state machine.
 *
 * A ded_node never touches a socket, a clock, a random source or a
 * thread. Its driver feeds it bytes, connection events and the current
 * monotonic time; it answers through callbacks (open or close a
 * connection, "I have bytes to send", a round finished) and through
 * ded_node_conn_pending(), which hands out what to write. Two drivers
 * exist: shim/io/ (epoll and TCP, one background thread) and tests/sim/
 * (hundreds of nodes in one process over a modelled network, one seed per
 * run).
 *
 * Threading: a node is not thread-safe; one thread calls into it. No
 * callback may call back into the node.
 *
 * Time: every entry point takes |now_ns|, a monotonic clock in
 * nanoseconds. Wall-clock time (for record expiry) is now_ns +
 * settings.wall_offset_ns.
 *
 * Buffers: a submitted round's buffer belongs to the node until its
 * round_done callback; the node reads and writes it in place.
 */
#ifndef DED_NODE_H
#define DED_NODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/ded_err.h"
#include "core/ded_limits.h"
#include "core/ded_mem.h"
#include "core/ded_types.h"
#include "crypto/ded_ident.h"
#include "dht/ded_record.h"

typedef struct ded_node ded_node;

enum ded_log_level {
  DED_LOG_ERROR = 0,
  DED_LOG_WARN = 1,
  DED_LOG_INFO = 2,
  DED_LOG_DEBUG = 3,
};

/* How a round's coordinator cuts the vector among its members. */
enum ded_plan {
  DED_PLAN_LP = 0,    /* DeDLOC's program over the members' published rates */
  DED_PLAN_EQUAL = 1, /* equal shares (clients still reduce nothing) */
};

typedef struct ded_node_settings {
  /* Run name: peers of different runs never talk. Required. */
  const char *run;
  /* enum ded_mode. */
  uint8_t mode;
  /* The first round waits until this many peers (us included) are present. */
  uint32_t min_peers;
  /* 32 bytes of secret randomness the identity is derived from. Required. */
  const uint8_t *identity_seed;
  /* Addresses published in our record, where others can reach us. None
   * means we accept no connections. */
  ded_addr announce[DED_RECORD_ADDRS_MAX];
  unsigned n_announce;
  /* DEDMPI_JOIN. None means we start a new swarm. */
  ded_addr bootstrap[DED_BOOTSTRAP_MAX];
  unsigned n_bootstrap;
  /* How long to try the bootstrap addresses before giving up. */
  uint64_t bootstrap_timeout_ns;
  /* How long the first round waits for min_peers. */
  uint64_t rendezvous_timeout_ns;
  /* The bound on a round: whatever happens, it reports within this time of
   * its submission (alone and late, keeping its own values, when the swarm
   * could not finish it). Soft deadlines are learned from arrival times
   * and stay well inside it. */
  uint64_t round_timeout_ns;
  /* Floor of the learned deadlines (how long a coordinator waits for a
   * missing member, how long a member tolerates no progress). 0 = 500 ms. */
  uint64_t deadline_floor_ns;
  /* Bytes of finished results kept to serve members that fall behind.
   * 0 = 256 MiB; UINT64_MAX = keep nothing. */
  uint64_t history_bytes;
  /* Size of the chunks a shard travels in. 0 = 64 KiB. */
  uint32_t chunk_bytes;
  /* TCP connections to open to each peer we call, 1 to DED_STREAMS_MAX
   * (0 = 1): round data is spread over them where one stream cannot fill
   * a long fat pipe. Control frames keep to the first. */
  uint8_t streams;
  /* Link probe at join: bytes of filler sent to the first peer that comes
   * up, and asked back from it (SPEED), so our rates are measured before
   * the first round's plan; at most DED_SPEED_WANT_MAX, 0 = no probe. */
  uint32_t probe_bytes;
  /* Lifetime of our discovery record; refreshed at a third of it. 0 = 5 min. */
  uint32_t record_ttl_ms;
  /* Wall clock minus monotonic clock, in ns. */
  int64_t wall_offset_ns;
  /* Lines above this level are not formatted at all. */
  int log_level;
  /* This peer takes no part in rounds (backbone). */
  bool no_rounds;
  /* Declared upload and download rates, bytes per second, for experiments;
   * 0 = measure them from our own traffic (ded_meter.h). */
  double up_Bps, down_Bps;
  /* How fast this machine adds incoming vectors, bytes per second, as the
   * driver measured it; 0 = unknown. */
  double add_Bps;
  /* How a coordinator of ours cuts a round (enum ded_plan). */
  uint8_t plan;
  /* Connections are secure channels (ded_chan.h): the driver reports
   * each one's proven peer key (ded_node_conn_secured) before its first
   * byte, and a HELLO must carry that key; and since what the node hands
   * over waits in the channel's buffer before the socket takes it, the
   * driver reports bytes as they leave (ded_node_sent) for the upload
   * meter. Off only in tests that speak frames to the node directly. */
  bool sessions;
  /* Access control (DEDMPI_OWNER, DEDMPI_ALLOW_FILE). With |access|, a
   * peer gets in (its HELLO, its record from anyone) only if its key is
   * |owner| (when |has_owner|), one of the |nallow| keys at |allow|
   * (copied), or its record carries |owner|'s valid invitation of it. */
  bool access;
  bool has_owner;
  uint8_t owner[DED_PK_BYTES];
  const uint8_t (*allow)[DED_PK_BYTES];
  unsigned nallow;
  /* Our own invitation (DEDMPI_INVITE), published in our record. */
  bool has_invite;
  uint64_t invite_expires_ms;
  uint8_t invite_sig[DED_SIG_BYTES];
  /* DEDMPI_COMPRESS: the codec this job asks its rounds' contributions
   * to travel in (avg/ded_codec.h, a kind NONE to TOPK, with top-k's
   * fraction in millionths), or with DED_NODE_COMPRESS_AUTO, the lossiest
   * codec `auto` may choose. A round uses what its members allow: the
   * least lossy of their choices (docs/configuration.md). */
  uint8_t compress;
  uint32_t compress_ppm;
  /* Compress without error feedback (DEDMPI_FEEDBACK=off): to measure
   * what the feedback is worth; never for training. */
  bool no_feedback;
  /* Allocator; NULL = libc. */
  const ded_mem *mem;
} ded_node_settings;

#define DED_NODE_COMPRESS_AUTO 0x80

/* What a finished round reports. */
typedef struct ded_round_result {
  int status;            /* 0 or a DED_ERR_* code */
  uint64_t round;        /* the round number */
  /* The elements the round covered: [off, off + count) of the submitted
   * buffer, at |pos| in the run's gradient stream. A submission is
   * averaged by one round or several in a row (docs/architecture.md,
   * "Alignment by the gradient stream"); |last| says this round was its
   * last: the buffer is the caller's again. */
  uint64_t pos, off, count;
  bool last;
  uint32_t contributors; /* members whose vectors were averaged (1 = alone) */
  double total_weight;   /* sum of their weights */
  bool alone;            /* the buffer was left as it was (no one else) */
  bool late;             /* the round went on without us: we fetched its result (our own
                          * input dropped; alone = false) or kept our own values (alone) */
  uint32_t recoveries;   /* failovers this round went through (0 normally) */
  /* How the contributions travelled (avg/ded_codec.h's kind; top-k's
   * fraction in millionths); NONE when alone or late. */
  uint8_t codec;
  uint32_t codec_ppm;
  /* This job's state is not the run's: the round took the acceptors of
   * an older result over rounds that had none anywhere, and another
   * member's state goes on (its founder); or a round of this job's kept
   * its own values (alone and late, with |behind|) since its state was
   * last loaded, this round included (ded_node_astray). Said by every report until a reload loads the run's
   * state. Reload it at the next step's start, at the round the job is at
   * then (ded_node_state_reload with the next round's number). */
  bool diverged;
  /* The same kind of round, with this job as its founder: its state is
   * the run's from here on (the other members reload it). */
  bool founder;
  /* Nonzero: the swarm has moved past this round for good (it was at
   * round |behind|) and this job is out of step (alone and late). Reload
   * the run's state at a step's start: ded_node_state_reload. */
  uint64_t behind;
  /* For a round this job came late to (late, not alone): where the swarm
   * was when it last said so (AHEAD), if ahead of this round; else 0. A
   * caller far behind may reload state rather than catch up. */
  uint64_t swarm_round;
  /* The contributors' ids in summation order, |contributors| x
   * DED_ID_BYTES; valid only during the callback; NULL when alone. */
  const uint8_t *members;
  /* Peers with a ready connection that take part in rounds, now (as
   * ded_node_round_peer_count): the callback must not call the node. */
  unsigned peers;
} ded_round_result;

enum ded_event_type {
  /* Bootstrap finished: status 0, or DED_ERR_BOOTSTRAP after the bound. */
  DED_EVENT_BOOTSTRAP = 1,
  /* A peer's connection became ready. */
  DED_EVENT_PEER_UP = 2,
  /* A peer went away (status: why). */
  DED_EVENT_PEER_DOWN = 3,
};

typedef struct ded_event {
  int type; /* enum ded_event_type */
  int status;
  uint8_t peer[DED_ID_BYTES];
} ded_event;

/*
 * A snapshot of the trainer's state (docs/architecture.md, "Joining a run
 * in progress"): what a job that joins a run in progress loads before its
 * first round.
 * It is the state after every round below |round|, which begins a training
 * step. The bytes are opaque to the node: the shim's state image
 * (state/ded_image.h), the trainer's pieces under a table of their sizes.
 * A founding state (ded_node_found_set) is the same with |round| 0: the
 * state a job that started the run brought to its first round.
 */
typedef struct ded_snapshot {
  uint64_t round;       /* the round to resume at (> 0; 0: a founding state) */
  uint64_t pos;         /* where it begins in the gradient stream (the node fills it in) */
  uint32_t step_rounds; /* routed all-reduces per training step */
  uint64_t len;    /* bytes, at most DED_STATE_BYTES_MAX */
  uint64_t digest; /* ded_digest64(bytes, len) */
  uint8_t *bytes;  /* allocated with the node's allocator (settings.mem) */
} ded_snapshot;

typedef struct ded_node_callbacks {
  /*
   * Open a connection |conn_id| to |addr|. Report the outcome later with
   * ded_node_conn_connected() or ded_node_conn_closed(). Return nonzero if
   * it cannot even be attempted (the node treats that as closed).
   */
  int (*connect)(void *user, uint32_t conn_id, const ded_addr *addr);
  /* Close |conn_id|. The node has already forgotten it. */
  void (*close)(void *user, uint32_t conn_id);
  /* |conn_id| has bytes to send: poll ded_node_conn_pending() when writable. */
  void (*want_write)(void *user, uint32_t conn_id);
  /* A round of a submission finished (the submission is done when
   * res->last); |ctx| is its ded_round_args.ctx. */
  void (*round_done)(void *user, void *ctx, const ded_round_result *res);
  /* Something the driver may want to know (optional). */
  void (*event)(void *user, const ded_event *ev);
  /* One formatted log line, without newline (optional). */
  void (*log)(void *user, int level, const char *line);
  /* A joiner asked for our state: take a snapshot at the start of the
   * trainer's next step and hand it to ded_node_snapshot_set (optional;
   * without it this peer offers no state). */
  void (*want_snapshot)(void *user);
  /* ded_node_state_fetch or ded_node_state_reload finished. |status| 0 with |snap|: the state of the
   * run in progress; the node resumes at snap->round. The callee may take
   * snap->bytes (set it to NULL, free it later with the node's allocator);
   * the node frees it otherwise, after the call. |status| 0 without
   * |snap|: no run in progress, start from your own state. Otherwise a
   * DED_ERR_* (DED_ERR_TIMEOUT: no peer offered state within the bound). */
  void (*state_done)(void *user, int status, ded_snapshot *snap);
} ded_node_callbacks;

/* One round: an intercepted all-reduce. */
typedef struct ded_round_args {
  void *buf;        /* in: this job's sum S_j; out: n_j * weighted mean */
  uint64_t count;   /* elements, 1..DED_COUNT_MAX */
  uint8_t dtype;    /* enum ded_dtype */
  double weight;    /* w_j >= 0 */
  uint32_t n_local; /* n_j >= 1: ranks whose sum |buf| holds */
  void *ctx;        /* handed back to round_done */
  /* The caller's training step, in elements of its gradient stream (0:
   * not known yet): a round whose members know another length runs
   * another model, and fails here (DED_ERR_SIZE_MISMATCH). */
  uint64_t step;
} ded_round_args;

/*
 * Creates a node. Returns 0 and sets |*out|, or DED_ERR_INVALID_ARG,
 * DED_ERR_NOMEM. Nothing happens on the network until ded_node_start().
 */
int ded_node_new(const ded_node_settings *settings, const ded_node_callbacks *cb, void *user,
                 uint64_t now_ns, ded_node **out);

/* Frees the node. Rounds still in flight are NOT reported: finish them
 * (ded_node_leave) first if anyone waits on them. */
void ded_node_free(ded_node *node);

/* Starts bootstrap. DED_EVENT_BOOTSTRAP reports the outcome. */
int ded_node_start(ded_node *node, uint64_t now_ns);

/* Our peer id. */
const uint8_t *ded_node_id(const ded_node *node);

/* Our identity (key pair and id) and the run's id, for the handshake. */
const ded_ident *ded_node_ident(const ded_node *node);
const uint8_t *ded_node_run_id(const ded_node *node);

/* An inbound connection from |remote|; sets |*conn_id|. DED_ERR_LIMIT if
 * there are too many: the driver closes the socket. */
int ded_node_conn_accepted(ded_node *node, const ded_addr *remote, uint32_t *conn_id,
                           uint64_t now_ns);

/* An outbound connection asked for by the connect callback is established. */
void ded_node_conn_connected(ded_node *node, uint32_t conn_id, uint64_t now_ns);

/* For an outbound |conn_id|: true, with |id|, when it calls a known peer
 * (the handshake must reach that one); false for a bootstrap address,
 * where anyone in the run may answer. */
bool ded_node_conn_expects(const ded_node *node, uint32_t conn_id, uint8_t id[DED_ID_BYTES]);

/* |conn_id|'s handshake proved the peer holds |pk|: its HELLO must name
 * it (settings.sessions). Our own key closes it (we called ourselves). */
void ded_node_conn_secured(ded_node *node, uint32_t conn_id, const uint8_t pk[DED_PK_BYTES],
                           uint64_t now_ns);

/* Bytes arrived on |conn_id|. The node may decide to close the connection
 * (the close callback fires); unknown ids are ignored. */
void ded_node_conn_recv(ded_node *node, uint32_t conn_id, const uint8_t *data, size_t len,
                        uint64_t now_ns);

/* |conn_id| is gone (EOF, error, failed connect). |status| is informative. */
void ded_node_conn_closed(ded_node *node, uint32_t conn_id, int status, uint64_t now_ns);

/*
 * Fills up to |max| pieces of what |conn_id| should send next, in order.
 * Returns how many. The pieces stay valid until the next call into the
 * node other than ded_node_conn_pending.
 */
int ded_node_conn_pending(ded_node *node, uint32_t conn_id, ded_iov *iov, int max);

/* The driver handed |n| bytes of the pending output to the network. */
void ded_node_conn_consume(ded_node *node, uint32_t conn_id, size_t n, uint64_t now_ns);

/* When the node next needs ded_node_handle_expiry (UINT64_MAX: never). */
/* With settings.sessions: |n| bytes left for the network (the upload
 * meter); |backlog|: the driver still holds some not yet taken. */
void ded_node_sent(ded_node *node, size_t n, bool backlog, uint64_t now_ns);

uint64_t ded_node_expiry(const ded_node *node);

/* Runs timers due at |now_ns|. */
void ded_node_handle_expiry(ded_node *node, uint64_t now_ns);

/*
 * Submits an all-reduce of |args|: its elements come next in this job's
 * gradient stream, which the swarm averages element by element with the
 * same elements of the other jobs' streams, in rounds cut wherever any
 * member's all-reduce ends (docs/architecture.md, "Alignment by the
 * gradient stream"). Returns the number of the round it will begin in if
 * no round before it is cut short (>= 0), or DED_ERR_INVALID_ARG,
 * DED_ERR_LIMIT (too many all-reduces in flight), DED_ERR_CLOSING,
 * DED_ERR_NOMEM. round_done fires once per round, in round order, the
 * last one of the submission with |last| set, possibly from inside this
 * call.
 */
int64_t ded_node_round_submit(ded_node *node, const ded_round_args *args, uint64_t now_ns);

/*
 * Finds out whether a run is in progress and, if so, fetches its state
 * from the peers (striped over every peer that offers the same snapshot)
 * and makes the node resume at the snapshot's round. Call it once, after
 * bootstrap and before the first ded_node_round_submit. The state_done
 * callback reports, possibly from inside this call. Returns 0, or
 * DED_ERR_INVALID_ARG (rounds already submitted, a fetch already made, no
 * state_done callback), DED_ERR_CLOSING.
 */
int ded_node_state_fetch(ded_node *node, uint64_t now_ns);

/*
 * For a job that fell out of step (a round_done with |behind| set, or
 * with |diverged|: then |min_round| may be the next round itself):
 * fetches a snapshot of round |min_round| or later as ded_node_state_fetch
 * does and makes the node resume at its round, past every round it
 * missed. Call it at the start of a training step, with every submitted
 * round reported. state_done reports as for a fetch, except that "no run
 * in progress" cannot be the answer: without an offer in time it reports
 * DED_ERR_TIMEOUT and the node goes on where it was. Until state_done,
 * ded_node_round_submit is refused (DED_ERR_INVALID_ARG). Returns 0, or
 * DED_ERR_INVALID_ARG (rounds in flight, a fetch in progress, min_round
 * not past the next round unless diverged, no state_done callback),
 * DED_ERR_CLOSING.
 */
int ded_node_state_reload(ded_node *node, uint64_t min_round, uint64_t now_ns);

/*
 * A job that kept its own values in a round the swarm went on without (a
 * round_done alone and late, with |behind|) is astray: its reports say |diverged| until a reload loads the run's
 * state, or until DED_NODE_ASTRAY_TRIES reloads in a row failed with no
 * peer in step heard (none offered or said it would), the last a round
 * bound or more after that round reported: then no peer is taken to hold
 * the run's state to give (every job kept its own values, or the one it
 * would load from did too), and the node's state goes on as the run's.
 * ded_node_astray says whether it is astray now.
 */
#define DED_NODE_ASTRAY_TRIES 3
bool ded_node_astray(const ded_node *node);

/*
 * Hands the node a snapshot of this job's state, asked for through
 * want_snapshot: it offers it to the joiners that asked. The node takes
 * snap->bytes (allocated with its allocator) on every path. Returns 0, or
 * DED_ERR_INVALID_ARG (a malformed snapshot, or round-1 did not end here
 * with the swarm's result: this job cannot vouch for the state).
 */
int ded_node_snapshot_set(ded_node *node, ded_snapshot *snap, uint64_t now_ns);

/*
 * One initial model for the jobs that start a run together
 * (docs/architecture.md, "One initial model"). A job that found no run in
 * progress hands the node its state as it enters its first round, before
 * it submits it: the founding state of origin this peer (snap->round 0;
 * the node takes snap->bytes on every path). Returns 0, or
 * DED_ERR_INVALID_ARG (malformed, or rounds already submitted).
 */
int ded_node_found_set(ded_node *node, ded_snapshot *snap, uint64_t now_ns);

/*
 * Once the run's first round reported: its contributors |cands| (|n| ids,
 * in the order the round summed them) started the run together, and the
 * run's initial state is the founding state of the first of them that a
 * peer still holds. state_done reports: 0 without a snapshot when that is
 * this job's own; 0 with the snapshot (round 0) when it is another's, which
 * this node then holds and serves as that origin's; DED_ERR_TIMEOUT when no
 * candidate's state came within the round timeout. The node's rounds go on
 * meanwhile. |n| 0 says the first round had no contributor but this job
 * (alone, or it failed): its own state stands. The founding state is
 * kept until this is called, then a minute past its last use. Returns 0,
 * or DED_ERR_INVALID_ARG (no founding state set, a fetch in progress),
 * DED_ERR_NOMEM, DED_ERR_CLOSING.
 */
int ded_node_state_found(ded_node *node, const uint8_t *cands, unsigned n, uint64_t now_ns);

/*
 * A backbone's checkpoints (docs/architecture.md, "Checkpoints"). For a
 * node without rounds (settings.no_rounds): asks the run's trainers for
 * their state, of round |min_round| or later, as a joiner does, and
 * fetches it, without loading it: state_done reports 0 with the snapshot
 * (round, pos, step_rounds, len, digest, bytes), 0 without one when no
 * trainer offered any (none there, or none in a run), or DED_ERR_TIMEOUT
 * / DED_ERR_PEER_LOST. Returns 0, or DED_ERR_INVALID_ARG (a node with
 * rounds, a pull in progress, no state_done callback), DED_ERR_CLOSING.
 */
int ded_node_state_pull(ded_node *node, uint64_t min_round, uint64_t now_ns);

/*
 * For a node without rounds: the checkpoint (a snapshot as a pull
 * reports it, digest checked) that it offers to joiners while no trainer
 * connected to it shows a round at or past the checkpoint's; the joiner
 * that takes it starts the rounds anew at its round. Replaces the one
 * held. The node takes snap->bytes on every path. Returns 0 or
 * DED_ERR_INVALID_ARG (a node with rounds; a malformed snapshot).
 */
int ded_node_keep_set(ded_node *node, ded_snapshot *snap, uint64_t now_ns);

/*
 * Leaves the swarm: tells every peer, fails rounds in flight with
 * DED_ERR_CLOSING, and accepts no more work. Keep driving the node until
 * ded_node_flushed() so the goodbyes get out.
 */
void ded_node_leave(ded_node *node, uint64_t now_ns);

/*
 * Why this job could not take part (DED_LEAVE_MISMATCH_STEP and the other
 * failure reasons of ded_msg.h): the LEAVE that ded_node_leave sends
 * carries it, and the peers log it. The first reason set stays (what
 * follows is most likely its consequence); an ordinary end or an unknown
 * value is ignored. Without one, LEAVE says DED_LEAVE_FINALIZE.
 */
void ded_node_leave_reason(ded_node *node, uint8_t reason);

/* True when no connection has output pending. */
bool ded_node_flushed(const ded_node *node);

/* Peers with a ready connection (not counting us). */
unsigned ded_node_peer_count(const ded_node *node);

/* Peers with a ready connection that take part in rounds (backbones and
 * peers that left not counted; not counting us). */
unsigned ded_node_round_peer_count(const ded_node *node);

/* The newest round any other peer's record says it finished (its
 * published progress; records are republished every few seconds), or 0. */
uint64_t ded_node_swarm_round(const ded_node *node);

/* One peer as this node knows it, from its discovery record. */
typedef struct ded_status_peer {
  uint8_t id[DED_ID_BYTES];
  bool self;      /* this node */
  bool connected; /* a connection is ready (always, for self) */
  uint8_t mode;   /* enum ded_mode */
  bool no_rounds; /* a backbone */
  ded_addr addr;  /* the first address it publishes (family 0: none) */
  ded_perf perf;  /* its measured rates, kB/s (0: unknown) */
  ded_progress progress; /* its last completed round (all 0: none yet) */
  uint64_t issued_ms;    /* when it last renewed its record, its clock */
} ded_status_peer;

/* The peers this node knows a live record of (itself included), at most
 * |max| of them: what a backbone's status page shows. Returns how many. */
size_t ded_node_status(const ded_node *node, ded_status_peer *out, size_t max);

/* The rates this peer publishes (declared, or measured so far), in kB/s;
 * 0 = not known yet. */
void ded_node_rates(const ded_node *node, uint32_t *up_kBps, uint32_t *down_kBps);

/*
 * Group peers (the GROUPS extension of records, ded_record.h): the rank 0
 * of each MPI_Comm_split group of a job runs a peer of its own, in a run
 * of the group's; the job's world peer publishes where they listen, so
 * that the group peers of different jobs find each other.
 *
 * ded_node_groups_set replaces the list our record publishes with the |n|
 * entries at |groups| (ids strictly increasing, at most
 * DED_RECORD_GROUPS_MAX; n 0 says this job has none), re-signs our record
 * and floods it at once. 0, or DED_ERR_INVALID_ARG (a list a record
 * cannot carry), DED_ERR_CLOSING (leaving), with nothing changed.
 */
int ded_node_groups_set(ded_node *node, const ded_group_addr *groups, unsigned n, uint64_t now_ns);

/*
 * The addresses the other peers' live records (verified for this run, not
 * ours, not expired at |now_ns|, not of a peer that left) publish for
 * group |id|: at most |max| into |out|, distinct; how many. |*waiting|
 * gets how many of those peers take part in rounds (no
 * DED_RECORD_F_NO_ROUNDS) and list no groups yet, which a caller may wait
 * for.
 */
size_t ded_node_group_hints(const ded_node *node, uint16_t id, uint64_t now_ns, ded_addr *out,
                            size_t max, unsigned *waiting);

/*
 * More bootstrap addresses (say, another job's group peers for our
 * group): each is tried in the background, with backoff, until a peer
 * answers there, as a bootstrap that is DONE keeps trying its own; a
 * bootstrap RUNNING ends in DONE if one answers first, and no state
 * becomes FAILED for them. Duplicates and our own address are harmless.
 * Beyond DED_BOOTSTRAP_MAX addresses being tried, the rest are dropped
 * with a log line. Returns how many were taken.
 */
unsigned ded_node_join_more(ded_node *node, const ded_addr *addrs, unsigned n, uint64_t now_ns);

#endif /* DED_NODE_H */
