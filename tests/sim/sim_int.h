/*
 * sim_int.h: what the simulator's two files share (sim.c: the event loop,
 * the network and the driver side of every node; sim_faults.c: crashes,
 * restarts, freezes, partitions, the lying reducer and the network's
 * healing). Owns nothing itself: the struct sim they both work on, its
 * parts, and the few helpers of sim.c that the faults call. Not for the
 * tiers: they see sim.h only.
 */
#ifndef SIM_INT_H
#define SIM_INT_H

#include "sim.h"

#include "core/ded_msg.h"

#include <stdio.h>

#define SIM_NODES_MAX 256

typedef struct segment {
  struct segment *next;
  uint64_t arrive_ns;
  size_t len;
  uint8_t data[];
} segment;

/* One direction of a connection. */
typedef struct half {
  segment *head, *tail;
  uint64_t last_arrive_ns;
  /* Its deliveries in (at, seq) order, the first of them in the heap (see
   * sim_push_deliver): evq[evq_head .. evq_head + evq_n) waits behind it. */
  struct event *evq;
  size_t evq_head, evq_n, evq_cap;
  bool ev_in_heap;
  uint64_t ev_last_at; /* the last delivery queued arrives then */
  /* Where the sender's byte stream is in its frames (for sim_equivocate):
   * the header bytes of the frame begun, then the payload bytes seen of
   * it and the frame's type and payload length. */
  uint8_t hdr[DED_FRAME_HDR_BYTES];
  unsigned hlen;
  uint64_t seen, plen;
  uint64_t round; /* a DATA or RESULT payload's round, once its 8 bytes are seen */
} half;

typedef struct link {
  int node[2];        /* [0] = caller, [1] = listener */
  uint32_t conn[2];   /* each side's conn id */
  bool open[2];       /* side i still has the connection */
  bool fin[2];        /* side i closed: the other side sees EOF after its data */
  bool dead;          /* reset, or an end crashed: no new data, a pending connect fails */
  half dir[2];        /* dir[i]: bytes from side i to side 1-i */
} link;

/*
 * EV_CONNECT's tag: CONN_SYN when the attempt reaches the listener (the
 * listener accepts, or the caller is refused, and the caller learns it in
 * the same event unless it is frozen); CONN_DONE and CONN_REFUSED tell a
 * caller that was frozen at that moment, once it runs again.
 */
enum { CONN_SYN = 0, CONN_DONE = 1, CONN_REFUSED = 2 };

enum ev_type { EV_START, EV_TICK, EV_PUMP, EV_CONNECT, EV_DELIVER, EV_TIMER, EV_THAW };

typedef struct event {
  uint64_t at;
  uint64_t seq;
  int type;
  int node;
  int link;
  int side;
  uint64_t tag;
  uint32_t gen; /* the node's generation when pushed (EV_PUMP, EV_TICK) */
  uint32_t chained; /* the first of its half's queued deliveries (sim_push_deliver) */
} event;

typedef struct cb_ctx {
  sim *s;
  int node;
} cb_ctx;

typedef struct snode {
  sim_node_params p;
  ded_node *node;
  ded_node *zombie; /* crashed during the current event: freed after it */
  cb_ctx ctx;       /* the callbacks' |user| */
  bool up;          /* started and not crashed */
  bool crashed;     /* callbacks from its engine are ignored */
  bool restarting;  /* crashed, a restart is scheduled */
  uint32_t gen;     /* crashes so far: events of an older life are stale */
  uint64_t frozen_until; /* 0 = running; else the pending EV_THAW's tag */
  event *deferred;  /* events that reached it while frozen, in pop order */
  size_t ndeferred, deferred_cap;
  uint64_t uplink_free_ns;
  uint64_t downlink_free_ns; /* with a downlink rate: when it is idle again */
  bool pump_scheduled;
  /* Called into (or its pointer handed out) since its timer was last
   * synced: only such a node's expiry can have changed (the engine has
   * no clock of its own), so only such nodes are synced after an event. */
  bool dirty;
  uint64_t tick_at; /* the tick event we have scheduled, 0 = none */
  unsigned rr;      /* round-robin cursor over links */
  /* Its connections that may have output, by slot (id & 0xffff): id + 1,
   * or 0. Set when the engine asks to write or a connect completes,
   * cleared when the pump finds nothing: a superset of those with output,
   * so the pump asks the engine of these only. */
  uint64_t *wants;
  uint32_t nwants;
  int *lks;         /* the links it is an end of, in increasing order */
  int nlks, lks_cap;
  uint8_t seed[DED_SEED_BYTES];
} snode;

/* A partition: |a| and |b| (b < 0: everyone else) cannot talk until |until|. */
typedef struct cut {
  int a, b;
  uint64_t until;
} cut;

struct sim {
  sim_rng rng;
  sim_link_params lp;
  sim_hooks hooks;
  ded_node_callbacks cb; /* every node's, from |hooks| */
  int n;
  snode nodes[SIM_NODES_MAX];
  int dirty[SIM_NODES_MAX]; /* the nodes with |dirty| set, in the order touched */
  int ndirty;
  link *links;
  int nlinks, links_cap;
  cut *cuts;
  size_t ncuts, cuts_cap;
  event *heap;
  size_t nheap, heap_cap;
  uint64_t seq;
  uint64_t now;
  uint64_t events;
  bool stop;
  bool in_event; /* inside sim_handle: a crash defers the engine's free */
  bool reap;     /* some node has a zombie */
  uint64_t digest; /* sim_digest */
  FILE *trace;     /* sim_trace */
  /* sim_equivocate: liar -> victim until equiv_until; frames altered. */
  int equiv_liar, equiv_victim;
  uint64_t equiv_until, equivocated;
  /* sim_network_heals_at (0: never). */
  uint64_t net_heal_ns;
  uint64_t equiv_rounds; /* bit r: a frame of round r altered (r >= 63: bit 63) */
};

/* sim.c: the event heap (ties break in push order) and an event at
 * |at| (|gen| is the node's, for its pumps and ticks). */
void sim_heap_push(sim *s, event e);
void sim_push(sim *s, uint64_t at, int type, int node, int lk, int side, uint64_t tag);

/* sim.c: a half-link's segments dropped; side |side| of link |lk| gone
 * (the other side sees EOF after what is in flight); the link broken
 * (what is in flight is lost, both sides see it closed). */
void sim_half_drop(half *h);
void sim_link_fin(sim *s, int lk, int side);
void sim_link_reset(sim *s, int lk);

/* sim.c: whether node |i| is frozen now. */
bool sim_node_frozen(const sim *s, int i);

/* sim_faults.c: follows the frames node |from| sends |to| on half |h|
 * and alters the RESULT frames of an equivocating reducer. */
void sim_half_walk(sim *s, half *h, int from, int to, uint8_t *p, size_t len);

#endif /* SIM_INT_H */
