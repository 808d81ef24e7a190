/*
 * sim.h: a deterministic simulator driver for ded_node.
 *
 * Many engines run in one process over a modelled network: each node has
 * an uplink of a given rate, each connection a one-way latency with
 * jitter (per-connection FIFO, as TCP), and the byte stream is cut into
 * segments of random size, so frames arrive split at arbitrary points.
 * Time is virtual; one 64-bit seed fixes everything (the shape of
 * TigerBeetle's VOPR): the same seed replays the same run, event for event.
 *
 * The simulator knows nothing of rounds: scenarios drive jobs through the
 * callbacks below and check what the nodes report.
 *
 * Faults (crash, restart, freeze, partition, link resets and delay spikes)
 * draw from the same seed. A run that uses none of them (no call below,
 * fault fields of sim_link_params zero) is the same, event for event, as
 * one on a simulator without them.
 */
#ifndef DED_SIM_H
#define DED_SIM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ded_node.h"

/* splitmix64-seeded xoshiro256**: fast, and the same on every platform. */
typedef struct sim_rng {
  uint64_t s[4];
} sim_rng;

void sim_rng_seed(sim_rng *r, uint64_t seed);
uint64_t sim_rng_next(sim_rng *r);
/* Uniform in [lo, hi]. */
uint64_t sim_rng_range(sim_rng *r, uint64_t lo, uint64_t hi);
/* Uniform in [0, 1). */
double sim_rng_unit(sim_rng *r);
/* True with probability |p|. */
bool sim_rng_chance(sim_rng *r, double p);

typedef struct sim sim;

typedef struct sim_link_params {
  uint64_t latency_ns; /* one way */
  uint64_t jitter_ns;  /* added uniformly per segment, FIFO preserved */
  uint32_t segment_max; /* largest segment pulled from a node at once */
  /* Faults, per segment sent (0 = off). */
  double reset_prob;   /* the connection breaks instead (loss TCP could not
                          recover): the segment and everything in flight on
                          the link is lost, both sides see it closed after
                          the latency */
  double spike_prob;   /* the segment is held spike_ns longer; later ones of
                          the same direction wait behind it (FIFO) */
  uint64_t spike_ns;
} sim_link_params;

typedef struct sim_node_params {
  ded_node_settings settings; /* run, min_peers, bootstrap, ... (announce is set by sim) */
  uint64_t start_ns;          /* when the node comes up */
  double uplink_bytes_per_s;
  /* 0: unlimited. Otherwise segments to the node arrive one at a time at
   * this rate, in the order they reach it (a FIFO at its access link). */
  double downlink_bytes_per_s;
} sim_node_params;

typedef struct sim_hooks {
  void *user;
  /* A node finished a round. */
  void (*round_done)(void *user, int node, void *ctx, const ded_round_result *res);
  /* A node came up (its ded_node exists): submit work from here. */
  void (*started)(void *user, int node);
  /* A timer set with sim_at fired. */
  void (*timer)(void *user, int node, uint64_t tag);
  /* A node's log line (optional). */
  void (*log)(void *user, int node, int level, const char *line);
  /* A node event (optional). */
  void (*event)(void *user, int node, const ded_event *ev);
  /* A joiner asked the node for its state (optional): hand a snapshot to
   * ded_node_snapshot_set at the node's next step. Without it the nodes
   * get no want_snapshot callback: they offer no state. */
  void (*want_snapshot)(void *user, int node);
  /* The node's ded_node_state_fetch finished (optional; without it the
   * nodes get no state_done callback, and ded_node_state_fetch refuses).
   * With |status| 0 and |snap|, the hook may take snap->bytes (libc
   * allocator, unless settings.mem says otherwise) by setting it to NULL;
   * the engine frees what is left there once the hook returns. */
  void (*state_done)(void *user, int node, int status, ded_snapshot *snap);
} sim_hooks;

/* A network of |n| nodes. Node i listens at 10.0.i/8-style address
 * sim_node_addr(i). */
sim *sim_new(uint64_t seed, int n, const sim_link_params *link, const sim_hooks *hooks);
void sim_free(sim *s);

/* The address node |i| announces and listens on. */
ded_addr sim_node_addr(int i);

/* Configures node |i|, which comes up at p->start_ns: before sim_run, or
 * later (from a hook, for a node that starts mid-run: a start in the past
 * means now). Each node is set up once; sim_restart brings a crashed one
 * back. */
void sim_node_setup(sim *s, int i, const sim_node_params *p);

/* The node's engine once started, else NULL (also after sim_crash). A
 * frozen node's engine is returned too: driving it is the scenario's
 * business. */
ded_node *sim_node(sim *s, int i);

/* Nodes in the network (the |n| of sim_new). */
int sim_nodes(const sim *s);

/* True when node |i| is started and not crashed (it may be frozen). */
bool sim_up(const sim *s, int i);

/* Current virtual time. */
uint64_t sim_now(const sim *s);

/* The run's RNG, for scenario decisions (same seed, same choices). */
sim_rng *sim_rand(sim *s);

/* Calls hooks.timer(node, tag) at |at_ns| (later if |node| is frozen
 * then: at its thaw). |node| need not be a node: one outside 0..n-1, such
 * as -1, is never frozen, for timers of the scenario as a whole. */
void sim_at(sim *s, int node, uint64_t at_ns, uint64_t tag);

/* Runs events until none are left, |until_ns| passes, or sim_stop. */
void sim_run(sim *s, uint64_t until_ns);
void sim_stop(sim *s);

/* Events processed so far. */
uint64_t sim_events(const sim *s);

/* ---------------------------------------------------------------- digest
 *
 * A running 64-bit digest of the run (FNV-1a): every event handled (its
 * time, kind, node, link and tag), every segment a node sends (its bytes),
 * every connect and close a node asks for, every node event, snapshot
 * request and state fetch outcome, and every round a node reports (status,
 * flags, contributors in order). Two builds of the engine that behave the
 * same replay every seed the same, event for event, so they print the same
 * digest; a change of behaviour anywhere shows as another digest for some
 * seeds. Log lines are not part of it (their words may change).
 */
uint64_t sim_digest(const sim *s);
/* Mixes what only the scenario sees (a round's result bytes) into it. */
void sim_digest_add(sim *s, const void *p, size_t len);
/* Prints each step of the digest to |f| (NULL: off), to find where two
 * builds part: a line per event, segment, callback and round. */
void sim_trace(sim *s, FILE *f);

/* ---------------------------------------------------------------- faults
 *
 * All of these may be called from any hook (also from inside a callback of
 * the node they hit) or between sim_run calls. Called from a hook of the
 * node they hit, they take effect once the engine's current call returns:
 * the rest of that call still runs (a crashed engine's callbacks are
 * ignored from the crash on; a frozen one's still fire until it returns).
 */

/*
 * Node |i| dies now (SIGKILL); it must be up. No callback or hook fires
 * from its engine any more, and the engine is freed: at once between
 * sim_run calls, at the end of the current event from a hook. Rounds in
 * flight are never reported; their buffers are the scenario's again once
 * the engine is freed (from a hook: free them in a later event, e.g. a
 * timer). On every connection of |i|: what was on its way to |i| is lost;
 * what |i| had already sent still arrives, then the peer sees the
 * connection closed (ded_node_conn_closed), one latency after the crash
 * at the earliest; connects to |i| still pending are refused. Timers
 * (sim_at) for |i| keep firing. sim_node() returns NULL until a
 * sim_restart. Crashing a frozen node ends its freeze: what waited for it
 * is handled now (deliveries to it dropped, connects to it refused, its
 * timers fired).
 */
void sim_crash(sim *s, int i);

/*
 * Crashed node |i| comes back at |at_ns| (now if past) as a new process:
 * a new identity (its seed drawn from the run's RNG at this call), a fresh
 * engine built from |p| (p->start_ns is ignored; the announce address is
 * sim_node_addr(i) again), then hooks.started fires again. Old connections
 * of the slot stay dead. |i| must be crashed and not already restarting.
 */
void sim_restart(sim *s, int i, uint64_t at_ns, const sim_node_params *p);

/*
 * Node |i| stops (SIGSTOP, a closed laptop lid) until |until_ns|: no
 * timer, no output, nothing delivered to it, no connect accepted or
 * completed by it. Its connections stay open; bytes, closes and connects
 * reaching it wait (the kernel's buffers and backlog) and so do its
 * sim_at timers. At the thaw everything that waited is handled in arrival
 * order, then the node's expired timers run, then it sends again. A freeze
 * while frozen extends to the later time; an earlier |until_ns| does
 * nothing. A node not up yet (or crashed) may be frozen too: its start
 * (or restart) waits for the thaw.
 */
void sim_freeze(sim *s, int i, uint64_t until_ns);

/* True while node |i| is frozen. */
bool sim_frozen(const sim *s, int i);

/*
 * Cuts nodes |a| and |b| apart until |until_ns|: every connection between
 * them is reset now (what is in flight is lost, each side that has it
 * open sees it closed one latency later), and a connect between them, in
 * either direction, fails until then: the caller sees it closed after
 * one latency.
 */
void sim_partition(sim *s, int a, int b, uint64_t until_ns);

/* sim_partition of |a| from every other node. */
void sim_isolate(sim *s, int a, uint64_t until_ns);

/* True while a partition or an isolation cuts nodes |a| and |b| apart. */
bool sim_cut(const sim *s, int a, int b);

/*
 * Node |liar| equivocates towards node |victim| until |until_ns|: every
 * RESULT frame |liar| sends |victim| in that time reaches it with the
 * first byte of its first element flipped, so |victim| holds other bytes
 * of |liar|'s shard than the other members do (a reducer that sends
 * different members different results). The frames stay well formed.
 * sim_equivocated: the number of frames altered so far, over every call;
 * sim_equivocated_round: whether a RESULT frame of |round| was altered
 * (every round from 63 on counts as one).
 */
void sim_equivocate(sim *s, int liar, int victim, uint64_t until_ns);
uint64_t sim_equivocated(const sim *s);

/* The link parameters' random faults (reset_prob, spike_prob) end at
 * |at_ns|: segments sent from then on are neither lost nor held (the
 * draws go on all the same, so what a seed does before is unchanged).
 * Without a call they last the whole run. */
void sim_network_heals_at(sim *s, uint64_t at_ns);
bool sim_equivocated_round(const sim *s, uint64_t round);

/* The settings the benchmarks give every node of a swarm of |n|: run
 * "bench", the first round waits for all, generous bounds, a 200 ms
 * deadline floor. */
static inline void sim_bench_settings(ded_node_settings *s, int n) {
  s->run = "bench";
  s->min_peers = (uint32_t)n;
  s->bootstrap_timeout_ns = 60ull * 1000000000ull;
  s->rendezvous_timeout_ns = 60ull * 1000000000ull;
  s->round_timeout_ns = 120ull * 1000000000ull;
  s->deadline_floor_ns = 200ull * 1000000ull;
}

/* The links of the small end-to-end scenarios: |latency_ns| one way, up to
 * 1 ms of jitter, segments of up to 64 KiB. */
static inline sim_link_params sim_scenario_link(uint64_t latency_ns) {
  sim_link_params lp;
  memset(&lp, 0, sizeof lp);
  lp.latency_ns = latency_ns;
  lp.jitter_ns = 1000000ull;
  lp.segment_max = 64 * 1024;
  return lp;
}

/* Node |i| of a swarm of |n| as those scenarios set it up: the benchmarks'
 * settings, 64 KiB chunks, bootstrapping through node 0, up |i| ms after
 * the start, with links of |up_mbit| and (0: unlimited) |down_mbit|. */
static inline void sim_scenario_node(sim_node_params *p, int i, int n, double up_mbit,
                                     double down_mbit) {
  memset(p, 0, sizeof *p);
  sim_bench_settings(&p->settings, n);
  p->settings.chunk_bytes = 64 * 1024;
  p->settings.log_level = DED_LOG_INFO;
  if (i > 0) {
    p->settings.bootstrap[0] = sim_node_addr(0);
    p->settings.n_bootstrap = 1;
  }
  p->start_ns = (uint64_t)i * 1000000ull;
  p->uplink_bytes_per_s = up_mbit * 1e6 / 8;
  p->downlink_bytes_per_s = down_mbit * 1e6 / 8;
}

/* The options the small simulator tests share: --seeds S, --first F, -v.
 * Returns 0, or 2 after printing |name|'s usage. */
static inline int sim_seed_args(int argc, char **argv, const char *name, int *seeds, int *first,
                                bool *verbose) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--seeds") && i + 1 < argc) *seeds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--first") && i + 1 < argc) *first = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-v")) *verbose = true;
    else {
      fprintf(stderr, "usage: %s [--seeds S] [--first F] [-v]\n", name);
      return 2;
    }
  }
  return 0;
}

/* The share, in percent, that a coordinator's plan log line ("round R:
 * plan ...: <sid>=P%(...) ...") gives the peer with short id |sid|; -1 if
 * the line does not name it. */
static inline double sim_plan_share(const char *line, const char *sid) {
  const char *p = strstr(line, sid);
  return p && p[8] == '=' ? atof(p + 9) : -1.0;
}

#endif /* DED_SIM_H */
