/*
 * sim_join.c: what joining a run in progress costs, measured in the simulator.
 *
 * |n| donors with equal uplinks average a 256 KiB float32 vector round
 * after round, with 50 ms of modelled compute between a round's end and
 * the next submission. At 2 s a joiner starts (bootstrap to donor 0); once
 * bootstrapped it calls ded_node_state_fetch. A donor asked for its state
 * takes a snapshot at its next submission: S bytes in two pieces, the same
 * bytes on every donor (a pure function of the round), round = the round
 * being submitted, step_rounds = 1. The joiner checks the bytes it gets
 * against that function (a mismatch fails the run) and submits rounds from
 * then on, as the donors do.
 *
 * Measured: the joiner's time from its start to the end of its first round
 * ("first"), against the ideal S/(k*B), k being the donors it loaded the
 * state from (its "from %u peers" log line) and B one uplink; against all
 * n donors, S/(n*B); and against a single donor, S/B. A second scenario
 * starts two joiners at once (ideals with 2S); its time is the later
 * joiner's and its k the larger of theirs. Each figure is the median over
 * the seeds; k and the snapshots the donors took are listed per seed. The
 * simulator is deterministic: the figures measure the protocol (bootstrap,
 * asking, the offer grace, the fetch window), not this machine.
 *
 * The simulator models uplinks only: a node's segments leave one at a time
 * at its uplink rate and are never queued at the receiver. A joiner's
 * downlink is therefore unlimited, and the ideal is limited by the donors'
 * uplinks alone, which also carry the rounds the donors keep running.
 *
 * Other columns: "loaded" is the joiner's state_done; "in swarm" its first
 * round not finished late (its vector averaged with the others'), "-" if
 * that took more than 30 s; "swarm round" the donors' median round time
 * (submission to result) before the join and while the state was fetched.
 * A joiner resumes at the snapshot's round, which the swarm has passed by
 * the time the state is in: its first rounds are late (it fetches their
 * results) until it catches up.
 *
 * The joiner calls ded_node_state_fetch when bootstrap reports, not from
 * the started hook: called before bootstrap it knows no peer and reports
 * at once that no run is in progress.
 *
 * Usage: sim_join [--nodes N] [--mbps B] [--seeds S] [-v]
 * (-v prints every node's log; use it with --seeds 1).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

#define MS 1000000ull
#define SEC 1000000000ull
#define MIB (1024ull * 1024)

enum { TAG_SUBMIT = 1, TAG_FETCH = 2 };
enum { JOINERS_MAX = 2, SEEDS_MAX = 99, ROUNDS_MAX = 4096 };

#define JOIN_AT_NS (2 * SEC)
#define COMPUTE_NS (50 * MS)
#define VECTOR_BYTES (256 * 1024)
#define SWARM_WAIT_NS (30 * SEC) /* how long "in swarm" is waited for */

typedef struct job {
  bool joiner;
  bool want;           /* a joiner asked for our state */
  bool busy;           /* a round in flight */
  int64_t next_round;  /* the number the next submission gets */
  float *buf;
  /* Donors: each round's submission and end, for the swarm's pace. */
  uint64_t *sub_ns, *done_ns;
  /* Joiners. */
  uint64_t start_ns, loaded_ns, first_ns, swarm_ns;
  uint64_t first_round;
  bool first_late;
  unsigned served; /* donors it loaded from */
  unsigned drops;  /* donors dropped from the fetch */
} job;

typedef struct bench {
  sim *s;
  int n, nj;
  uint64_t count, state_bytes;
  job *jobs;
  int snap_set, snap_fail;
  bool verbose;
} bench;

/* The state: a pure function of the round, so every donor holds the same. */
static uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static uint64_t state_word(uint64_t round, uint64_t i) {
  return mix(round * 0x9e3779b97f4a7c15ull + i + 1);
}

static void state_gen(uint8_t *p, uint64_t len, uint64_t round) {
  uint64_t i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t v = state_word(round, i);
    memcpy(p + i, &v, 8);
  }
  if (i < len) {
    uint64_t v = state_word(round, i);
    memcpy(p + i, &v, (size_t)(len - i));
  }
}

/* The first offset where |p| differs from the state of |round|, or |len|. */
static uint64_t state_check(const uint8_t *p, uint64_t len, uint64_t round) {
  uint64_t i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t v = state_word(round, i);
    if (memcmp(p + i, &v, 8) != 0) return i;
  }
  if (i < len) {
    uint64_t v = state_word(round, i);
    if (memcmp(p + i, &v, (size_t)(len - i)) != 0) return i;
  }
  return len;
}

static void die(bench *b, int node, const char *what) {
  fprintf(stderr, "sim_join: FAIL at %.3f s, node %d: %s\n", (double)sim_now(b->s) / 1e9, node,
          what);
  exit(1);
}

/* Node |i| enters its next step: a snapshot first if a joiner asked. */
static void submit(bench *b, int i) {
  job *j = &b->jobs[i];
  ded_node *node = sim_node(b->s, i);
  if (!node || j->busy) return;
  if (j->want) {
    j->want = false;
    ded_snapshot snap;
    memset(&snap, 0, sizeof snap);
    snap.round = (uint64_t)j->next_round;
    snap.step_rounds = 1;
    snap.len = b->state_bytes;
    snap.bytes = malloc(b->state_bytes ? b->state_bytes : 1);
    if (!snap.bytes) die(b, i, "out of memory");
    state_gen(snap.bytes, snap.len, snap.round);
    snap.digest = ded_digest64(snap.bytes, snap.len);
    b->snap_set++;
    if (ded_node_snapshot_set(node, &snap, sim_now(b->s)) != 0) b->snap_fail++;
  }
  ded_round_args a = {j->buf, b->count, DED_DTYPE_F32, 1.0, 1, (void *)(intptr_t)j->next_round, 0};
  if (!j->joiner && j->next_round < ROUNDS_MAX) j->sub_ns[j->next_round] = sim_now(b->s);
  j->busy = true;
  int64_t rv = ded_node_round_submit(node, &a, sim_now(b->s));
  if (rv != j->next_round) {
    char why[96];
    snprintf(why, sizeof why, "round %" PRId64 " submitted as %" PRId64, j->next_round, rv);
    die(b, i, why);
  }
  j->next_round++;
}

static bool all_done(const bench *b) {
  for (int i = b->n; i < b->n + b->nj; i++)
    if (!b->jobs[i].swarm_ns) return false;
  return true;
}

static void on_done(void *user, int node, void *ctx, const ded_round_result *res) {
  bench *b = user;
  job *j = &b->jobs[node];
  int64_t round = (int64_t)(intptr_t)ctx;
  uint64_t now = sim_now(b->s);
  j->busy = false;
  if (!j->joiner && round < ROUNDS_MAX) j->done_ns[round] = now;
  if (j->joiner) {
    if (!j->first_ns) {
      j->first_ns = now;
      j->first_late = res->late;
    }
    if (!j->swarm_ns && res->status == 0 && !res->late && !res->alone) {
      j->swarm_ns = now;
      if (all_done(b)) {
        sim_stop(b->s);
        return;
      }
    }
  }
  sim_at(b->s, node, now + COMPUTE_NS, TAG_SUBMIT);
}

static void on_started(void *user, int node) {
  bench *b = user;
  job *j = &b->jobs[node];
  if (j->joiner)
    j->start_ns = sim_now(b->s); /* it fetches once bootstrapped (on_event) */
  else
    submit(b, node);
}

static void on_timer(void *user, int node, uint64_t tag) {
  bench *b = user;
  if (tag == TAG_SUBMIT) {
    submit(b, node);
  } else if (tag == TAG_FETCH) {
    int rv = ded_node_state_fetch(sim_node(b->s, node), sim_now(b->s));
    if (rv) die(b, node, ded_strerror(rv));
  }
}

static void on_event(void *user, int node, const ded_event *ev) {
  bench *b = user;
  if (!b->jobs[node].joiner || ev->type != DED_EVENT_BOOTSTRAP) return;
  if (ev->status) die(b, node, "bootstrap failed");
  /* Not from inside the node's callback: ask right after it. */
  sim_at(b->s, node, sim_now(b->s), TAG_FETCH);
}

static void on_log(void *user, int node, int level, const char *line) {
  bench *b = user;
  job *j = &b->jobs[node];
  if (b->verbose) printf("%10.6f n%-2d %d %s\n", (double)sim_now(b->s) / 1e9, node, level, line);
  if (!j->joiner) return;
  const char *p = strstr(line, "(from ");
  unsigned k;
  if (strstr(line, "joined the run at round") && p && sscanf(p, "(from %u", &k) == 1) j->served = k;
  if (strstr(line, "state fetch: peer")) j->drops++;
}

static void on_want_snapshot(void *user, int node) {
  bench *b = user;
  b->jobs[node].want = true;
}

static void on_state_done(void *user, int node, int status, ded_snapshot *snap) {
  bench *b = user;
  job *j = &b->jobs[node];
  char why[160];
  if (status != 0) {
    snprintf(why, sizeof why, "state fetch failed: %s", ded_strerror(status));
    die(b, node, why);
  }
  if (!snap) die(b, node, "state fetch found no run in progress");
  uint64_t bad = snap->len == b->state_bytes ? state_check(snap->bytes, snap->len, snap->round) : 0;
  if (snap->len != b->state_bytes || bad != snap->len || snap->round == 0 ||
      snap->step_rounds != 1 ||
      snap->digest != ded_digest64(snap->bytes, snap->len)) {
    snprintf(why, sizeof why,
             "the state loaded (round %" PRIu64 ", %" PRIu64 " bytes) is not the "
             "donors' (%" PRIu64 " bytes): first difference at byte %" PRIu64,
             snap->round, snap->len, b->state_bytes, bad);
    die(b, node, why);
  }
  j->loaded_ns = sim_now(b->s);
  j->first_round = snap->round;
  j->next_round = (int64_t)snap->round;
  free(snap->bytes); /* ours (the node's allocator is libc) */
  snap->bytes = NULL;
  sim_at(b->s, node, sim_now(b->s), TAG_SUBMIT); /* not from inside the callback */
}

typedef struct result {
  double first, loaded, swarm; /* s from the joiners' start; the later joiner's */
  unsigned k;                  /* donors that served, the more of the joiners' */
  bool late;                   /* a joiner's first round was late */
  unsigned drops;
  double round_before, round_during; /* the donors' median round, s */
  int snapshots;                     /* taken by the donors */
} result;

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  if (n == 0) return -1.0;
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The donors' median round time among rounds submitted in [from, to). */
static double swarm_round(const bench *b, uint64_t from, uint64_t to) {
  static double v[ROUNDS_MAX * 8];
  int nv = 0;
  for (int i = 0; i < b->n; i++) {
    const job *j = &b->jobs[i];
    for (int64_t r = 0; r < j->next_round && r < ROUNDS_MAX && nv < ROUNDS_MAX * 8; r++)
      if (j->sub_ns[r] >= from && j->sub_ns[r] < to && j->done_ns[r] > j->sub_ns[r])
        v[nv++] = (double)(j->done_ns[r] - j->sub_ns[r]) / 1e9;
  }
  return median(v, nv);
}

static result run(int n, int nj, double bps, uint64_t state_bytes, uint64_t seed, bool verbose) {
  bench b;
  memset(&b, 0, sizeof b);
  b.n = n;
  b.nj = nj;
  b.count = VECTOR_BYTES / sizeof(float);
  b.state_bytes = state_bytes;
  b.verbose = verbose;
  b.jobs = calloc((size_t)(n + nj), sizeof *b.jobs);
  if (!b.jobs) abort();
  sim_link_params lp;
  memset(&lp, 0, sizeof lp);
  lp.latency_ns = 10 * MS; /* a WAN: 20 ms round trips, as sim_recovery */
  lp.jitter_ns = 1 * MS;
  lp.segment_max = 64 * 1024;
  sim_hooks hooks = {&b,     on_done, on_started, on_timer, on_log, on_event, on_want_snapshot,
                     on_state_done};
  b.s = sim_new(seed, n + nj, &lp, &hooks);
  for (int i = 0; i < n + nj; i++) {
    job *j = &b.jobs[i];
    j->joiner = i >= n;
    j->buf = malloc(VECTOR_BYTES);
    if (!j->joiner) {
      j->sub_ns = calloc(ROUNDS_MAX, sizeof *j->sub_ns);
      j->done_ns = calloc(ROUNDS_MAX, sizeof *j->done_ns);
    }
    if (!j->buf || (!j->joiner && (!j->sub_ns || !j->done_ns))) abort();
    for (uint64_t e = 0; e < b.count; e++) j->buf[e] = (float)(i + 1);
    sim_node_params p;
    memset(&p, 0, sizeof p);
    sim_bench_settings(&p.settings, n);
    /* The joiners' log gives the donors they loaded from. */
    p.settings.log_level = verbose ? DED_LOG_DEBUG : j->joiner ? DED_LOG_INFO : DED_LOG_ERROR;
    if (i > 0) {
      p.settings.bootstrap[0] = sim_node_addr(0);
      p.settings.n_bootstrap = 1;
    }
    p.start_ns = j->joiner ? JOIN_AT_NS : (uint64_t)i * MS;
    p.uplink_bytes_per_s = bps;
    sim_node_setup(b.s, i, &p);
  }
  sim_run(b.s, JOIN_AT_NS + SWARM_WAIT_NS);
  result r;
  memset(&r, 0, sizeof r);
  uint64_t loaded = 0;
  for (int i = n; i < n + nj; i++) {
    job *j = &b.jobs[i];
    if (!j->first_ns) die(&b, i, "no round finished within the run");
    double first = (double)(j->first_ns - j->start_ns) / 1e9;
    double load = (double)(j->loaded_ns - j->start_ns) / 1e9;
    double swarm = j->swarm_ns ? (double)(j->swarm_ns - j->start_ns) / 1e9 : -1.0;
    if (first > r.first) r.first = first;
    if (load > r.loaded) r.loaded = load;
    if (r.swarm >= 0) r.swarm = swarm < 0 ? -1.0 : swarm > r.swarm ? swarm : r.swarm;
    if (j->served > r.k) r.k = j->served;
    r.late |= j->first_late;
    r.drops += j->drops;
    if (j->loaded_ns > loaded) loaded = j->loaded_ns;
  }
  r.snapshots = b.snap_set;
  r.round_before = swarm_round(&b, 500 * MS, JOIN_AT_NS);
  r.round_during = swarm_round(&b, JOIN_AT_NS, loaded);
  if (b.snap_fail) {
    char why[96];
    snprintf(why, sizeof why, "%d of %d snapshots refused by ded_node_snapshot_set", b.snap_fail,
             b.snap_set);
    die(&b, 0, why);
  }
  sim_free(b.s);
  for (int i = 0; i < n + nj; i++) {
    free(b.jobs[i].buf);
    free(b.jobs[i].sub_ns);
    free(b.jobs[i].done_ns);
  }
  free(b.jobs);
  return r;
}

static void print_row(uint64_t mib, int n, int nj, double B, const result *rs, int seeds) {
  double first[SEEDS_MAX], loaded[SEEDS_MAX], swarm[SEEDS_MAX], k[SEEDS_MAX], ratio[SEEDS_MAX],
      before[SEEDS_MAX], during[SEEDS_MAX];
  int nswarm = 0, late = 0;
  unsigned drops = 0;
  double S = (double)(mib * MIB) * nj;
  for (int s = 0; s < seeds; s++) {
    const result *r = &rs[s];
    first[s] = r->first;
    loaded[s] = r->loaded;
    k[s] = r->k;
    ratio[s] = r->first / (S / (r->k * B));
    before[s] = r->round_before;
    during[s] = r->round_during;
    if (r->swarm >= 0) swarm[nswarm++] = r->swarm;
    late += r->late;
    drops += r->drops;
  }
  double km = median(k, seeds), t = median(first, seeds);
  char sw[32];
  if (nswarm * 2 > seeds)
    snprintf(sw, sizeof sw, "%6.2f s", median(swarm, nswarm));
  else
    snprintf(sw, sizeof sw, "%8s", "-");
  printf("  %3" PRIu64 " MiB %7.3f s %7.3f s %4.1f %7.3f s %6.2f %7.3f s %6.2f %7.3f s %5.2f  %s  "
         "%5.3f/%5.3f s",
         mib, t, median(loaded, seeds), km, S / (km * B), median(ratio, seeds), S / (n * B),
         t / (S / (n * B)), S / B, t / (S / B), sw, median(before, seeds), median(during, seeds));
  printf("  k:");
  for (int s = 0; s < seeds; s++) printf("%s%u", s ? "," : "", rs[s].k);
  printf("  snapshots:");
  for (int s = 0; s < seeds; s++) printf("%s%d", s ? "," : "", rs[s].snapshots);
  if (late) printf("  (first round late: %d/%d)", late, seeds);
  if (drops) printf("  (%u donors dropped)", drops);
  printf("\n");
}

int main(int argc, char **argv) {
  int n = 4, seeds = 5;
  double mbps = 100;
  bool verbose = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-v")) verbose = true;
    else if (i + 1 < argc && !strcmp(argv[i], "--nodes")) n = atoi(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--mbps")) mbps = atof(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--seeds")) seeds = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: %s [--nodes N] [--mbps B] [--seeds S] [-v]\n", argv[0]);
      return 2;
    }
  }
  if (n < 1 || n > 64 || seeds < 1 || seeds > SEEDS_MAX || mbps <= 0) {
    fprintf(stderr, "sim_join: need 1..64 donors, 1..%d seeds, a positive rate\n", SEEDS_MAX);
    return 2;
  }
  double B = mbps * 1e6 / 8;
  static const uint64_t sizes[] = {4, 16, 64};
  printf("sim_join: %d donors, %.0f Mbit/s uplinks (modelled: uplinks only), 20 ms RTT, %d KiB "
         "rounds\n  with %.0f ms compute between them; joiners start at %.0f s; medians of %d "
         "seeds\n",
         n, mbps, VECTOR_BYTES / 1024, (double)COMPUTE_NS / 1e6, (double)JOIN_AT_NS / 1e9, seeds);
  for (int nj = 1; nj <= JOINERS_MAX; nj++) {
    printf("%s\n", nj == 1 ? "one joiner: its first round, from its start (S: the state)"
                           : "two joiners at once: the later one's first round (ideals with 2S)");
    printf("  state  first     loaded     k   S/(kB)    ratio  S/(nB)    ratio  S/B       ratio  "
           "in swarm  swarm round before/during\n");
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
      result rs[SEEDS_MAX];
      for (int s = 0; s < seeds; s++)
        rs[s] = run(n, nj, B, sizes[z] * MIB, 100 + (uint64_t)s, verbose);
      print_row(sizes[z], n, nj, B, rs, seeds);
    }
  }
  return 0;
}
