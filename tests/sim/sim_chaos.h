/*
 * sim_chaos.h: what the files of the fault-schedule tier share (sim_chaos
 * is one program in three files):
 *
 *   sim_chaos.c        the trainer model (steps, joiners, offers, loads),
 *                      the simulator's hooks, a seed's run and main;
 *   sim_chaos_check.c  the checks: agreement, validity, termination,
 *                      liveness, state and joining;
 *   sim_chaos_sched.c  the fault schedule: what a seed draws (faults,
 *                      joiners, restarts, an equivocating reducer), when it
 *                      is armed, and each fault applied.
 *
 * It owns the types of one seed's run (scenario, job, offer, round_out),
 * their bounds, the timer tags, the options and totals that outlive a
 * seed, and the prototypes the files call across.
 *
 * Invariants: jobs[0..n) are the swarm that starts the run, jobs[n..used)
 * the joiners and restarts in the order they started, jobs[used..slots)
 * slots not handed out yet; a job's node is its index. Rounds are the
 * engine's numbers, below |rounds| <= MAX_ROUNDS; in[r] and buf[r] exist
 * exactly for the rounds the job submitted. Fault, joiner and equivocation
 * times and heal_ns count from the swarm's existence until arm_faults,
 * and are absolute (virtual time) after it. A seed draws in a fixed order
 * from its streams (the seed's pick, then |extra| for joiners and
 * restarts, then one of the equivocation's own): any change to that order
 * changes what the seed runs (tests/sim/digests/).
 */
#ifndef SIM_CHAOS_H
/* A job late in step by this many steps reloads, as DED_STEP_RELOAD_GAP_STEPS
 * in shim/mpi/ded_step.h (which the simulator does not include: MPI). */
#define SIM_RELOAD_GAP_STEPS 8
#define SIM_CHAOS_H

#include <stdbool.h>
#include <stdint.h>

#include "sim.h"

#define MAX_NODES 64 /* the swarm at the start */
#define MAX_JOINERS 3
#define DRAWN_MAX_ROUNDS 24 /* a seed's rounds: 6..16, and up to 8 more where jobs join */
#define MAX_ROUNDS 160      /* a named scenario's run is longer (named_schedule) */
#define MAX_BRANCHES 64     /* foundings a seed's state check tells apart */
#define MAX_FAULTS 6        /* drawn per seed */
#define FAULT_SLOTS 64      /* a named scenario's schedule may hold more (churn) */
/* Restarts: one per drawn crash at most; a named scenario's swarm (6 at
 * most), joiners and restarts (churn: 30) fit as well. */
#define MAX_JOBS (MAX_NODES + MAX_JOINERS + MAX_FAULTS)
#define MS 1000000ull
#define SEC 1000000000ull

typedef struct round_out {
  bool done;
  int status;
  ded_round_result res;
  uint8_t members[MAX_JOBS][DED_ID_BYTES];
  uint64_t submit_ns, done_ns;
  /* The job's state was not the run's when the round completed (it
   * loaded a diverged offer, or ran a round alone since it last loaded):
   * its round may be a refounded group's, which reruns a round the run's
   * lost members completed (every peer that knew is gone), so agreement
   * with the run's result is not asked of it; validity is. */
  bool diverged;
} round_out;

enum { K_FIRST, K_JOINER, K_RESTART };

typedef struct job {
  int node;
  int kind;       /* K_FIRST, K_JOINER, K_RESTART */
  int of;         /* K_RESTART: the crashed job it restarts */
  bool scheduled; /* a node starts (or started) in this slot */
  sim_node_params params;
  uint32_t n_local;
  double weight;
  /* Rounds are numbered by the engine: a joiner starts at its snapshot's
   * round, a reload skips to the snapshot's. */
  int first_round; /* its first round; -1 until known */
  int next;        /* the number its next submission gets */
  bool in_step;    /* a step's rounds are being submitted or run */
  int step_first, step_end;
  int inflight;
  bool crashed;
  bool loading;   /* a joiner: bootstrapping or fetching the state */
  bool fetching;  /* ded_node_state_fetch called */
  bool reloading; /* ded_node_state_reload in progress */
  uint64_t reload_min; /* the round the reload asked for, or later */
  bool gave_up;   /* a joiner that could not join: it left */
  bool want;      /* a joiner asked for our state */
  bool offering;  /* inside ded_node_snapshot_set */
  bool diverged;  /* a round alone since it started or last loaded */
  uint64_t behind; /* the swarm's round, from a result with |behind| */
  bool refound;    /* a result said this job's state is not the run's: reload where it is */
  /* A round out of step (alone and late: its own values kept) since it
   * last loaded: every report since must tell it to reload (|behind| past
   * its next round, or |refound|), else it would run on in step with the
   * swarm on parameters of its own; |retry| once a reload failed (the
   * step it held up starts at once, before any report). The engine stops
   * saying so when it gives up (ded_node_astray false again, no load):
   * its state goes on as the run's. */
  bool own, retry;
  int branch;      /* the founding its state descends from (0: the run's start; sim_chaos_check.c) */
  /* Late while in step, as the shim counts it (ded_step.c): the swarm's
   * round and ours in the latest late round (late_swarm 0: not late), and
   * the gap seen first after the last reload (|reload_gap_pending| until
   * seen). */
  uint64_t late_swarm, late_round, reload_gap;
  bool reload_gap_pending;
  uint64_t frozen_ns; /* total time frozen so far */
  uint64_t start_ns, fetch_ns, loaded_ns;
  int loaded_round; /* the round it joined at (-1: never) */
  bool no_run;      /* its fetch found no run in progress */
  int reloads;
  uint8_t id[DED_ID_BYTES];
  void *P; /* the trainer's state: count elements of dtype */
  void *in[MAX_ROUNDS];  /* inputs, kept for the check */
  void *buf[MAX_ROUNDS]; /* handed to the engine */
  round_out out[MAX_ROUNDS];
} job;

/* A snapshot a job handed to its engine: what joiners may load. */
typedef struct offer {
  int job, round;
  uint64_t digest;
  bool diverged;
  int branch; /* the offering job's */
  void *bytes;
} offer;

typedef struct scenario {
  uint64_t seed;
  bool verbose;
  sim *s;
  int n;     /* the swarm at the start */
  int slots; /* nodes of the simulator: the swarm, the joiners, the restarts */
  int used;  /* slots handed out so far */
  int rounds;
  int buckets;
  uint8_t dtype;
  uint64_t count;
  uint64_t compute_max_ns;
  uint64_t round_timeout_ns;
  uint64_t floor_ns;
  double reset_prob, spike_prob;
  bool weak_liveness; /* --weak-liveness: rejoining after a fault is not checked */
  uint64_t heal_ns; /* every fault is over (and the crashed are evicted) */
  int nfaults;
  bool armed, leaving;
  uint64_t swarm_ns; /* the first round finished somewhere: the swarm exists */
  struct fault {
    int kind; /* F_CRASH, F_FREEZE, F_PARTITION, F_ISOLATE */
    int a, b;
    uint64_t at_ns, len_ns;
    bool restart;         /* a crash: a new process follows */
    uint64_t restart_ns;  /* how long after the crash */
  } faults[FAULT_SLOTS];
  /* A reducer that equivocates: |liar| alters what it sends |victim| from
   * |equiv_ns| for |equiv_len_ns| (liar < 0: none). */
  int liar, victim;
  uint64_t equiv_ns, equiv_len_ns;
  int nj; /* joiners */
  uint64_t join_ns[MAX_JOINERS]; /* after the swarm exists */
  int joins_pending, restarts_pending; /* timers still to fire: the run waits for them */
  sim_rng extra; /* joiners, restarts: a stream of their own */
  void *P0;      /* the state every job of the start begins with */
  void *ref[MAX_ROUNDS + 1]; /* P of the first job in step at each step start */
  int ref_node[MAX_ROUNDS + 1];
  int ref_branch[MAX_ROUNDS + 1];
  uint64_t ref_ns[MAX_ROUNDS + 1]; /* when the ref was taken */
  /* Branches: a result of round F that makes its job the run's founder
   * (the rounds before had no result that still counts) starts one. For
   * each, when it started, and the older branches that no live job in
   * step held a state of past F then (bit b: branch b): their later
   * rounds died with their holders. A branch past MAX_BRANCHES has none
   * (the check is then the plain one). */
  int nbranches;
  uint64_t branch_over[MAX_BRANCHES];
  uint64_t branch_ns[MAX_BRANCHES];
  bool rolled_back; /* a state check passed over a branch that died with its holders */
  offer *offers;
  int noffers;
  int snap_refused, reload_failed;
  int astray_gave_up; /* jobs whose engine gave up waiting for the run's state */
  uint64_t over_ns; /* a job ran its last round */
  /* A named scenario (--scenario): its schedule replaces the drawn faults,
   * joiners and equivocation (named: SCEN_NONE otherwise). */
  int named;
  sim_rng named_rng;     /* its choices: a stream of their own */
  uint64_t pace_ns;      /* added to every step's compute time (0: none) */
  bool must_join;        /* a joiner that does not load the run's state fails */
  int churn_ticks;       /* churn: ticks left (TAG_CHURN), every churn_every_ns */
  uint64_t churn_every_ns;
  job jobs[MAX_JOBS];
  int failures;
  char why[512];
} scenario;

enum { F_CRASH, F_FREEZE, F_PARTITION, F_ISOLATE };
extern const char *const fault_name[]; /* by kind: "crash", ... */
/* A fault's node |a| that is the primary of the first swarm (the smallest
 * id among its live nodes), found when the fault strikes. */
#define A_PRIMARY (-1)

/* Named scenarios (--scenario NAME, sim_chaos_sched.c). */
enum { SCEN_NONE, SCEN_LONG_FREEZE, SCEN_TOTAL_BREAK, SCEN_STOPPED_DONOR, SCEN_CHURN, SCEN_COUNT };
extern const char *const scen_name[SCEN_COUNT]; /* by SCEN_*: "none", "long-freeze", ... */
/* Timers of the scenario (node -1) carry a kind and an index. */
#define TAG_FAULT (1ull << 40)
#define TAG_LEAVE (1ull << 41)
#define TAG_JOIN (1ull << 42)
#define TAG_RESTART (1ull << 43)
#define TAG_EQUIVOCATE (1ull << 44)
#define TAG_CHURN (1ull << 45)
/* Timers of a job. */
enum { TAG_SUBMIT = 0, TAG_FETCH = 1, TAG_OFFER = 2, TAG_GIVE_UP = 3 };

/* Totals over the seeds run, for the last line. */
typedef struct chaos_totals {
  int joiner_seeds, restart_seeds, reload_seeds, liar_seeds, liar_stalls;
  uint64_t equivocated;
  int joined, joined_end, no_run, gave_up, gave_up_faults, gave_up_end;
  int reloads, reload_failed, diverged_loads, snap_refused, astray_gave_up;
  int rollback_seeds; /* a branch re-founded after every holder of a later one crashed */
} chaos_totals;
extern chaos_totals totals;

static inline size_t es_of(uint8_t dtype) { return dtype == DED_DTYPE_F32 ? 4 : 8; }
static inline size_t state_bytes(const scenario *sc) { return sc->count * es_of(sc->dtype); }

/* Options of the run (main). */
extern bool opt_weak_liveness, opt_no_spikes, opt_crash_only, opt_summary, opt_digest, opt_trace,
    opt_lasting_net;
extern int opt_named; /* --scenario: SCEN_* */

/* sim_chaos.c */
/* Records the seed's first failure (its message) and counts every one. */
void fail(scenario *sc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A line of the scenario's events with -v, stamped with the virtual time. */
void say(scenario *sc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void *xmalloc(size_t n); /* aborts when out of memory */
void *dup_bytes(const void *p, size_t n);

/* sim_chaos_check.c */
void check_state(scenario *sc, job *j, int R);
void check_loaded(scenario *sc, job *j, int round, uint64_t digest);
/* Job |j|'s round |round| made it the run's founder: its state starts a
 * branch of its own. */
void found_branch(scenario *sc, job *j, int round);
void check_round(scenario *sc, int r);
void check_jobs(scenario *sc, uint64_t limit_ns);

/* sim_chaos_sched.c */
void draw_faults(scenario *sc, sim_rng *pick, uint64_t safety_end_ns);
void draw_joiners(scenario *sc, uint64_t safety_end_ns);
void draw_equivocation(scenario *sc, uint64_t safety_end_ns);
void arm_faults(scenario *sc);
void apply_fault(scenario *sc, int fi);
/* A named scenario: the swarm's size (right after the seed drew its own,
 * before anything drawn per node), then the schedule in place of
 * draw_faults, draw_joiners and draw_equivocation. Neither draws from the
 * seed's streams (named_rng is the scenario's): the network and the jobs
 * are what the seed draws for a swarm of that size. */
void named_swarm(scenario *sc, int named);
void named_schedule(scenario *sc);
/* churn: one tick (TAG_CHURN). */
void churn_tick(scenario *sc);
/* SCEN_* of |name|, or -1. */
int scen_of(const char *name);

#endif /* SIM_CHAOS_H */
