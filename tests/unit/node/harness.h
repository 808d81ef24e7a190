/*
 * harness.h: the node's unit tests against scripted peers (protocol
 * version 9), shared by the programs in tests/unit/node/, one a behaviour.
 *
 * The peers are bytes the test writes (ngtcp2's conn tests: scripted
 * input, integer time). The programs check what only the whole node
 * shows: that a round averages with the commit's weights in the commit's
 * order and hands the caller n_j * g only once the whole result is in and
 * a quorum of the attempt's acceptors holds it too, that the node says
 * the right things on the wire (attempts, views, reports to a new view,
 * fetches, HAVEs), that it takes decisions only from the coordinator it
 * joined, and that strangers are dropped. Rounds under load, loss and
 * crashes at random are the simulator's job (tests/sim).
 *
 * The harness owns:
 * - tnode, one real ded_node and what its callbacks saw (rounds done,
 *   connections closed and called, state transfer, log lines): a test
 *   starts it (tnode_start, tnode_new), scripts its peers' frames on
 *   conn[i] (send_*), takes what the node wrote there (tnode_output_on),
 *   looks into it (frame_find, frame_count, output_*, expect_*), lets time
 *   pass (tnode_advance) and frees t.node at the end;
 * - what more than one behaviour builds on that: a genesis round a peer
 *   coordinates (peer_coord_round), a swarm of scripted acceptors for HAVE
 *   quorums (tswarm), JOINs and COMMITs of views (join_of, tlin_commits),
 *   a scripted donor of state (send_state_*, scripted_offer) and a node
 *   without state_done;
 * - tnet, real nodes over an in-memory network, for what needs several
 *   real peers at once (tnet_new ... tnet_free, which checks that nothing
 *   leaked).
 *
 * The scripts follow version 3: a COMMIT's attempt is view << 32 | the
 * coordinator's first four id bytes (big endian), view 0 at first; every
 * DATA and RESULT carries the attempt of the COMMIT it belongs to; a
 * RESULT carries the weighted mean g, not n_j * g. A COMMIT flags the
 * round's acceptors (a first round's: every member, member 0 the primary,
 * nacc = k), and a scripted peer that holds an attempt's whole result
 * says so with HAVE (round, attempt, the view it took the attempt in), as
 * a version 3 peer does; a member completes an attempt only once
 * acceptors of it have sent HAVE for it in one view: more than nacc / 2,
 * or exactly nacc / 2 with the primary among them (its own HAVE counts).
 * Since version 9 a HAVE carries the digest of the result's bytes
 * (result_digest), and only HAVEs with one digest add up: an honest
 * scripted peer says the digest of the result the node must end with.
 * Since version 6 a STATE_OFFER's lineage ends with one client bit per
 * member (DED_LIN_BYTES); the scripted peers here are all nodes, bits 0.
 */
#ifndef DED_UNIT_NODE_HARNESS_H
#define DED_UNIT_NODE_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "unit_util.h"

#include "core/ded_limits.h"
#include "core/ded_msg.h"
#include "ded_node.h"

/* ----------------------------------------------- scripted peers (tnode) */

#define RUN "unit-node"
#define NOW_NS (1000ull * 1000 * 1000 * 1000)
#define NOW_MS (NOW_NS / 1000000)
/* Elements per chunk: 64 bytes of float, the smallest chunk a COMMIT may
 * carry (DED_CHUNK_BYTES_MIN); every shard below is two chunks. */
#define CHUNK 16
#define COUNT (4 * CHUNK)
#define TICK_NS (20ull * 1000 * 1000) /* ded_node.c's timer period */
/* Scripted peers, each on its own inbound connection. */
#define TN_PEERS 4

/* The identity seed of every tnode. */
extern const uint8_t node_seed[DED_SEED_BYTES];

typedef struct tnode {
  ded_node *node;
  ded_ident ident; /* the node's, for building commits */
  uint32_t conn[TN_PEERS];
  bool closed[TN_PEERS]; /* the node closed conn[i] */
  /* conn[i]'s peer said HELLO, and sends keepalives as time advances
   * (tnode_advance) unless |mute|: a scripted peer is not silent. */
  bool hello[TN_PEERS];
  bool mute[TN_PEERS];
  unsigned nconn;
  int rounds_done;
  ded_round_result last;
  uint8_t last_members[4][DED_ID_BYTES];
  uint64_t now; /* the time of what the peers send (NOW_NS unless a test advances it) */
  /* State transfer: want_snapshot calls, state_done calls and what the
   * last one reported (the snapshot's bytes taken over). */
  unsigned want_snapshots;
  unsigned state_calls;
  int state_status;
  bool state_has_snap;
  ded_snapshot state_snap;
  /* Log lines (INFO and worse) that contain |log_want|, when set. */
  const char *log_want;
  unsigned log_hits;
  /* Outbound connections: the connect calls the node made, and, with
   * |dial| (test_lanes.c's tnode_start_calling), the address each call
   * went to; a call that succeeds becomes the next conn[i]. Without |dial|
   * every call fails. */
  bool dial;
  unsigned connects;
  ded_addr dialled[TN_PEERS];
} tnode;

/* Another inbound connection; its index. */
unsigned tnode_accept(tnode *t);

/* The address a calling node (test_lanes.c's tnode_start_calling) has
 * as its one DEDMPI_JOIN: its peer's. */
#define PEER_ADDR "10.0.0.9:7000"

/* settings.probe_bytes and .sessions of the next node tnode_new makes
 * (then 0 again). */
extern uint32_t tn_next_probe;
extern bool tn_next_sessions;
/* Access control of the next node (then none again). */
extern const ded_node_settings *tn_next_access;
/* The training step (ded_round_args.step, elements) of the rounds the
 * next node submits (then 0, not known, again). */
extern uint64_t tn_next_step;

/* A started node that waits for one peer, with its first |rounds| rounds
 * (f32, COUNT elements, weight |w|, |n_local| ranks) submitted and no
 * connection yet; |streams| connections to each peer it calls, and with
 * |dial|, PEER_ADDR to call (it has, as conn[0], once this returns). */
void tnode_new(tnode *t, float *bufs[], unsigned rounds, double w, uint32_t n_local,
               const ded_mem *mem, bool dial, uint8_t streams);

/* A node that waits for one peer, with its first |rounds| rounds (f32,
 * COUNT elements, weight |w|, |n_local| ranks) submitted, and an inbound
 * connection (index 0) from the first peer. */
void tnode_start_mem(tnode *t, float *bufs[], unsigned rounds, double w, uint32_t n_local,
                     const ded_mem *mem);

void tnode_start(tnode *t, float *bufs[], unsigned rounds, double w, uint32_t n_local);

/* Everything the node wants to send on connection |i|, consumed. */
uint8_t *tnode_output_on(tnode *t, unsigned i, size_t *len, uint64_t now);

uint8_t *tnode_output(tnode *t, size_t *len, uint64_t now);

/* The |nth| frame of |type| in |out|, or false. */
bool frame_find(const uint8_t *out, size_t len, uint8_t type, int nth, ded_frame *found);

/* How many frames of |type| |out| holds. */
int frame_count(const uint8_t *out, size_t len, uint8_t type);

/* A JOIN for |round| in |out| (the first one); its plain fields in
 * |join|, its plan (if it reports one) dropped. */
bool output_has_join(const uint8_t *out, size_t len, uint64_t round, ded_msg_join *join);

void send_raw(tnode *t, unsigned i, const uint8_t *p, size_t n);

/* Lets |ns| pass in timer ticks of 100 ms (shorter than the deadline
 * floor, so that the node never takes the gap for a stall). */
void tnode_advance(tnode *t, uint64_t ns);

void send_hello(tnode *t, unsigned i, const ded_ident *peer, const char *run);
/* A HELLO from |ident| whose record says it completed round |round|
 * (its result attempt |attempt|, |contributors| of them). */
void send_hello_progress(tnode *t, unsigned i, const ded_ident *ident, uint64_t round,
                         uint64_t attempt, uint32_t contributors);
void send_commit(tnode *t, unsigned i, const ded_msg_commit *c);
void send_join(tnode *t, unsigned i, const ded_msg_join *j);
void send_decide(tnode *t, unsigned i, uint32_t view, uint8_t flags,
                 const ded_msg_commit *plan, const uint16_t *holders);

/* A failover report: JOIN |j| (its flags, acc_view) with the status of
 * attempt |plan| and the shard bitmap |have|. */
void send_join_status(tnode *t, unsigned i, const ded_msg_join *j,
                      const ded_msg_commit *plan, const uint8_t *have);

/* HAVE: the peer on connection |i| holds |attempt|'s result, whose bytes
 * hash to |digest| (result_digest), and accepts it in |view|
 * (DED_HAVE_F_DONE: it completed the round with it, with those bytes). */
void send_have(tnode *t, unsigned i, uint64_t round, uint64_t attempt, uint32_t view,
               uint8_t flags, const uint8_t digest[DED_RESULT_DIGEST_BYTES]);

/* The digest a HAVE carries for a result of COUNT floats |g| (the mean,
 * every shard; not n_j * g): BLAKE2b-256 of its bytes. */
void result_digest(const float *g, uint8_t digest[DED_RESULT_DIGEST_BYTES]);

void send_probe(tnode *t, unsigned i, uint64_t round, uint32_t view);
void send_fetch(tnode *t, unsigned i, uint64_t round, uint64_t attempt, uint16_t shard);
void send_stale(tnode *t, unsigned i, uint64_t round, uint64_t next);
void send_ahead(tnode *t, unsigned i, uint64_t round, uint64_t next);
void send_data(tnode *t, unsigned i, uint8_t type, uint64_t round, uint64_t attempt,
               uint64_t off, const float *v, size_t n);

/* |n| elements from |off| as frames of CHUNK elements. */
void send_chunks(tnode *t, unsigned i, uint8_t type, uint64_t round, uint64_t attempt,
                 uint64_t off, const float *v, size_t n);

/* The attempt a coordinator |id| makes in |view| (ded_msg.h). */
uint64_t attempt_of(uint32_t view, const uint8_t id[DED_ID_BYTES]);

void member_set(ded_msg_member *m, const uint8_t id[DED_ID_BYTES], double w, uint32_t n,
                uint64_t shard_off);

/* A COMMIT of round |round|, f32, COUNT elements in chunks of CHUNK. Its
 * acceptors are those of a first round, or of a round whose previous one
 * had exactly these members: every member, member 0 (the smallest id) the
 * primary, nacc = k (|m|'s flags are set here; a test that wants others
 * sets them after). */
ded_msg_commit commit_of(uint64_t round, uint64_t attempt, uint64_t base,
                         ded_msg_member *m, uint16_t k);

/* Checks that |out| holds exactly one HAVE, and that it says what the
 * other arguments say (|digest| too, unless NULL). */
void expect_have(const uint8_t *out, size_t len, uint64_t round, uint64_t attempt,
                 uint32_t view, uint8_t flags, const uint8_t *digest);

/* The digest of the first HAVE for |round| and |attempt| in |out| into
 * |digest|; false if there is none. */
bool output_have_digest(const uint8_t *out, size_t len, uint64_t round, uint64_t attempt,
                        uint8_t digest[DED_RESULT_DIGEST_BYTES]);

/* The digest of the result the node holds, from its HAVE for |round| and
 * |attempt| on connection |i| (its output there is consumed; fails if it
 * sent none): what an honest scripted peer that holds the same result
 * says in its own HAVE. */
void tnode_have_digest(tnode *t, unsigned i, uint64_t round, uint64_t attempt,
                       uint8_t digest[DED_RESULT_DIGEST_BYTES]);

/* A peer on connection |i| that completed |round| with |attempt| and the
 * bytes of |digest| answers the node's HAVE for it: checks that the node
 * sent one there (its output on |i| is consumed) with that digest, and
 * sends HAVE DONE with it, in the view the node's HAVE says. A DECIDE
 * that says the attempt was chosen says nothing of its bytes: a late
 * member completes on this answer. */
void answer_have_done(tnode *t, unsigned i, uint64_t round, uint64_t attempt,
                      const uint8_t digest[DED_RESULT_DIGEST_BYTES]);

/* Checks the |nth| frame of |type| in |out|: round, attempt, offset and
 * the elements. */
void expect_data(const uint8_t *out, size_t len, uint8_t type, int nth, uint64_t round,
                 uint64_t attempt, uint64_t off, const float *want, size_t n);

/* Identities sorting before and after the node's. */
void peers_around(const tnode *t, ded_ident *lo, ded_ident *hi);

/* Two identities sorting before the node's: *lo1 < *lo2 < node. */
void peers_below(const tnode *t, ded_ident *lo1, ded_ident *lo2);

/* ------------------------------------------- a round a peer coordinates */

/*
 * The peer |lo| (smaller id) coordinates the genesis round: weights 3
 * (peer, 1 rank) and 1 (node, |n_local| ranks), the node reduces the
 * second shard as ((a0 x_peer) + (a1 x_node)) / W in float, a_m = w_m /
 * n_m, W = 4. peer_coord_round runs it to the end on connection 0 and
 * fills |g| with the mean the node must hold; the caller's buffer must
 * then be n_local * g.
 */
typedef struct peer_round {
  ded_ident lo, hi;
  uint64_t attempt;
  float g[COUNT];
  uint8_t digest[DED_RESULT_DIGEST_BYTES]; /* of g */
  float orig[COUNT];
} peer_round;

void peer_coord_round(tnode *t, float *buf, uint32_t n_local, peer_round *pr);

/* ------------------------------------------------ HAVE quorums (tswarm) */

/*
 * An attempt of the genesis round among k members (2 <= k <= 4) in id
 * order, the node one of them but not member 0, every other member a
 * scripted peer on its own connection; member 0 coordinates. Shards are
 * whole chunks, weights 1, one rank each: the node's shard of the mean is
 * (x_0 + x_1 + ...) / k in member order, the other shards are whatever
 * their reducers send.
 */
typedef struct tswarm {
  unsigned k, me;
  unsigned conn[4]; /* the connection of member m (m != me) */
  ded_msg_member m[4];
  ded_msg_commit c; /* its members are m: flags and nacc may be changed before swarm_commit */
  uint64_t attempt;
  float x[4][COUNT]; /* each member's vector; x[me] is the node's */
  float g[COUNT];    /* the mean every member ends with */
  uint8_t digest[DED_RESULT_DIGEST_BYTES]; /* of g: what honest members' HAVEs carry */
} tswarm;

/* The end of member |m|'s shard (the next member's offset, or COUNT). */
uint64_t swarm_shard_end(const tswarm *sw, unsigned m);

/* The peers say HELLO in id order (so the node joins the genesis round at
 * member 0), connection 0 first, then one new connection each. */
void swarm_start(tnode *t, tswarm *sw, const float *buf, const ded_ident *peers,
                 unsigned npeers);

/* Member 0 sends the COMMIT; the node sends its vector to the reducers. */
void swarm_commit(tnode *t, tswarm *sw);

/* Every peer's contribution to the node's shard, then every reducer's
 * result of its own shard; with |hold_last|, all but the last chunk of the
 * last reducer's (swarm_feed_last sends it). The node's own HAVEs are
 * left in its output. */
void swarm_feed(tnode *t, tswarm *sw, bool hold_last);

/* The same, each reducer's RESULT taken from |g| instead of sw->g (a
 * reducer that sends the node other bytes than it sends the others). */
void swarm_feed_with(tnode *t, tswarm *sw, const float *g, bool hold_last);

void swarm_feed_last(tnode *t, tswarm *sw);

/* --------------------------------------------- views: JOINs and COMMITs */

/* A JOIN of |round| to |view| for an f32 buffer of COUNT elements. */
ded_msg_join join_of(uint64_t round, uint32_t view, uint8_t flags, uint32_t acc_view);

/* The COMMITs of round |round| on connection |i|: how many; the first in
 * |c| (the caller frees it). Fails if one of them could never complete:
 * its acceptor members not a quorum of its nacc. */
int tlin_commits(tnode *t, unsigned i, uint64_t round, ded_msg_commit *c);

/* ----------------------------------------- an in-process network (tnet) */

/*
 * tnet: real nodes over an in-memory network, for state transfer, where
 * what matters is several donors at once. Node i announces 10.1.0.<i+1>:
 * 7000 and bootstraps from node 0; a connect is accepted by the node
 * behind the address on the next pump, and every pump moves all the
 * output of every connection to the other side, whole, until nothing
 * moves. Frames are counted by sender and type on the way. Time moves in
 * timer ticks (TICK_NS) shared by every node. All nodes allocate from one
 * counting allocator, which must be back to zero once they are freed.
 */
#define TNET_NODES 5
#define TNET_LINKS 64
#define SEC_NS (1000ull * 1000 * 1000)
#define MS_NS (1000ull * 1000)
/* The snapshot the donors give: 1.5 MiB and a bit, in two pieces, so that
 * it travels in several ranges (ded_node.c asks 256 KiB at a time), the
 * last one short. */
#define SNAP_LEN (3ull * 512 * 1024 + 1000)
#define SNAP_PIECE0 (512ull * 1024 + 17)
#define SNAP_RANGE (256ull * 1024) /* ded_node.c's STATE_CHUNK_BYTES */
#define SNAP_RANGES ((SNAP_LEN + SNAP_RANGE - 1) / SNAP_RANGE)

typedef struct tnet tnet;

typedef struct tnet_node {
  tnet *net;
  int idx;
  ded_node *node;
  uint8_t seed[DED_SEED_BYTES];
  bool up;
  bool booted;
  bool hold; /* its output stays queued in the node (a stalled peer) */
  bool frozen; /* stopped (SIGSTOP): no ticks, no bytes either way, no news of closes */
  int side;  /* with net->cut, nodes of different sides hear nothing of each other */
  int rounds_done;
  ded_round_result last;
  float buf[COUNT];
  unsigned want_snapshots;
  unsigned state_calls;
  int state_status;
  bool state_has_snap;
  ded_snapshot snap; /* bytes taken over from the node */
  uint64_t state_done_ns;
  unsigned boot_failed; /* DED_EVENT_BOOTSTRAP with an error */
} tnet_node;

typedef struct tlink {
  bool used;
  bool accepted;
  int node[2]; /* [0] dialled [1] */
  uint32_t conn[2];
  bool open[2];
  ded_frame_dec dec[2]; /* what side s sends */
} tlink;

struct tnet {
  unit_failmem fm;
  tnet_node n[TNET_NODES];
  unsigned nn;
  tlink l[TNET_LINKS];
  uint64_t now;
  unsigned sent[TNET_NODES][256]; /* frames by sender and type */
  bool alone; /* nodes added from now on bootstrap from nobody */
  uint64_t bound_ns; /* their DEDMPI_ROUND_TIMEOUT: 10 s unless set */
  bool cut; /* a partition between the nodes' sides: bytes wait, connections are not answered */
};

tnet *tnet_new(void);

/* A node that waits for |min_peers| before its first round, bootstrapping
 * from node 0 unless it is node 0 (or net->alone is set); with
 * |no_rounds|, one that takes part in none (a backbone). Its index. */
int tnet_add_as(tnet *net, uint32_t min_peers, bool no_rounds);

int tnet_add(tnet *net, uint32_t min_peers);

/* The address node |i| announces (10.1.0.<i+1>:7000). */
ded_addr tnet_addr(int i);

/* Moves everything there is to move: connects, bytes and closes. */
void tnet_pump(tnet *net);

/* One timer tick for every node, then a pump. */
void tnet_step(tnet *net);

/* Pumps, then runs ticks until |cond| holds or |max_ns| have passed. */
#define TNET_UNTIL(net, max_ns, cond)                                                      \
  do {                                                                                     \
    tnet_pump(net);                                                                        \
    for (uint64_t t0_ = (net)->now; !(cond) && (net)->now - t0_ < (max_ns);)               \
      tnet_step(net);                                                                      \
  } while (0)

/* Node |i| crashes: freed, its connections closed under the others. */
void tnet_kill(tnet *net, int i);

/* Node |i| is stopped (SIGSTOP) with |on|, resumed without: while
 * stopped it runs no timer, bytes to and from it wait, a connection to
 * it is not answered, and it learns of closes only once resumed. */
void tnet_freeze(tnet *net, int i, bool on);

/* Index of the node of |net| whose id is the |rank|-th smallest
 * (0-based), or -1. */
int tnet_id_rank(const tnet *net, unsigned rank);

bool tnet_meshed(const tnet *net);

/* Every node up knows and talks to every other. */
void tnet_mesh(tnet *net);

/* Whether every node in |mask| has finished more rounds than |before|. */
bool tnet_rounds_past(const tnet *net, unsigned mask, const int *before);

/* Round |r| on the nodes in |mask|, each from values of its own; it
 * completes with all of them, and they all hold the same bytes. Node
 * |lead| (unless -1) submits first, and its JOIN is out before the others
 * submit: a coordinator decides once the members of the round before have
 * joined, and a newcomer later than that is left out, by design. */
void tnet_round(tnet *net, unsigned mask, int lead, uint64_t r);

/* The snapshot of the trainer's state at |round| every honest donor
 * gives, allocated with the nodes' allocator. */
ded_snapshot tnet_snap_make(const ded_mem *mem, uint64_t round);

/* What a joiner loaded is tnet_snap_make(round)'s, whole. */
void tnet_expect_snapshot(const tnet_node *j, uint64_t round);

/* Three jobs of |net| run rounds 0..2; a fourth comes up and begins to
 * fetch the run's state. Returns the fourth's index. */
int tnet_run_then_fetch(tnet *net);

/* Two nodes of one run, meshed, past round 0 together. */
tnet *tnet_pair_past_round0(void);

void tnet_free(tnet *net);

/* -------------------------------- state transfer against scripted peers */

/* Byte |i| of every snapshot the tests make. */
uint8_t snap_byte(uint64_t i);

void send_state_ask(tnode *t, unsigned i, uint64_t min_round);
void send_state_get(tnode *t, unsigned i, uint64_t round, uint64_t digest, uint64_t off,
                    uint32_t len);
void send_state_offer(tnode *t, unsigned i, const ded_msg_state_offer *m);
void send_state_data(tnode *t, unsigned i, uint64_t round, uint64_t digest, uint64_t off,
                     const uint8_t *bytes, size_t len);

/* The OFFER a scripted donor |d| makes: round 5, two ranges (the second
 * short), lineage |lin| (two ids, then their client bits: DED_LIN_BYTES(2)
 * bytes) under attempt 77. */
ded_msg_state_offer scripted_offer(const uint8_t *bytes, uint64_t len,
                                   const uint8_t lin[DED_LIN_BYTES(2)]);

/* A started node with no state_done callback (and no want_snapshot). */
ded_node *node_without_state_done(tnode *t);

/* The |nth| STATE_OFFER in |out| (its lineage points into |out|). */
bool output_offer(const uint8_t *out, size_t len, int nth, ded_msg_state_offer *m);

/* Checks that connection |i|'s output is exactly one STATE_OFFER with
 * |status| and |round|; returns it (its lineage not kept). */
ded_msg_state_offer expect_offer(tnode *t, unsigned i, uint8_t status, uint64_t round);

#endif /* DED_UNIT_NODE_HARNESS_H */
