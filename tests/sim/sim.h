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
 */
#ifndef DED_SIM_H
#define DED_SIM_H

#include <stdbool.h>
#include <stdint.h>

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
} sim_link_params;

typedef struct sim_node_params {
  ded_node_settings settings; /* run, min_peers, bootstrap, ... (announce is set by sim) */
  uint64_t start_ns;          /* when the node comes up */
  double uplink_bytes_per_s;
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
} sim_hooks;

/* A network of |n| nodes. Node i listens at 10.0.i/8-style address
 * sim_node_addr(i). */
sim *sim_new(uint64_t seed, int n, const sim_link_params *link, const sim_hooks *hooks);
void sim_free(sim *s);

/* The address node |i| announces and listens on. */
ded_addr sim_node_addr(int i);

/* Configures node |i| (before sim_run). */
void sim_node_setup(sim *s, int i, const sim_node_params *p);

/* The node's engine once started, else NULL. */
ded_node *sim_node(sim *s, int i);

/* Current virtual time. */
uint64_t sim_now(const sim *s);

/* The run's RNG, for scenario decisions (same seed, same choices). */
sim_rng *sim_rand(sim *s);

/* Calls hooks.timer(node, tag) at |at_ns|. */
void sim_at(sim *s, int node, uint64_t at_ns, uint64_t tag);

/* Runs events until none are left, |until_ns| passes, or sim_stop. */
void sim_run(sim *s, uint64_t until_ns);
void sim_stop(sim *s);

/* Events processed so far. */
uint64_t sim_events(const sim *s);

#endif /* DED_SIM_H */
