/*
 * fuzz_node.c: a whole swarm peer, talking to one fuzzed stranger.
 *
 * Input: u8 flags (FUZZ_NODE_F_*) | u8 schedule seed | bytes the stranger
 * sends. The stranger either connects to the node, or (FUZZ_NODE_F_OUTBOUND)
 * is the bootstrap address the node dials. The bytes arrive in reads of
 * varying size, interleaved with the driver's other duties: taking the
 * node's output (all of it, part of it, or none for a while, as a full
 * socket would), and running its timers at increasing times. Whenever the
 * node drops the connection, the stranger connects again (or the node
 * dials again) and the rest of the bytes go on the new connection, so one
 * input can try several HELLOs. At the end the node may leave, its timers
 * run far ahead (round and rendezvous timeouts, record refresh and
 * expiry), and it is freed: LeakSanitizer reports what it kept.
 *
 * Checked besides the sanitizers: every round submitted is reported
 * exactly once, within its timeouts, with a sane result.
 *
 * State transfer: the node's trainer hands it a small snapshot whenever
 * the node asks for one (want_snapshot), as the driver does, so a
 * stranger that asks for the run's state reaches the donor side. With
 * FUZZ_NODE_F_STATE_FETCH the node is a job that starts mid-run: it calls
 * ded_node_state_fetch once the stranger is up (or at the end if it never
 * is), so the stranger's offers and ranges reach the joiner side.
 * Checked: the fetch is refused after a round was submitted, and reported
 * exactly once (by the end, all timers run); a state it reports matches
 * its digest and sizes, and the node's next round is the state's round.
 *
 * The node is real: signatures are checked, so to get past the HELLO the
 * corpus carries HELLOs signed for this run (gen_corpus.c), after which
 * the fuzzer mutates the frames that follow.
 */
#include <string.h>

#include "fuzz.h"

#include "ded_node.h"

#define FUZZ_NODE_CONNS_MAX 4
#define SEC_NS (1000ull * 1000 * 1000)
/* The node fetches the run's state before its first round (a flag bit no
 * committed seed sets; it belongs with the others in fuzz.h once
 * gen_corpus.c writes seeds for it). */
#define FUZZ_NODE_F_STATE_FETCH 0x80

typedef struct fuzz_driver {
  uint32_t conn;
  bool conn_open;
  ded_addr boot;     /* the bootstrap address, in outbound mode */
  bool dial_boot;    /* outbound mode: dials to |boot| succeed */
  bool dial_pending; /* the node dialled |dial| and waits for it */
  uint32_t dial;
  unsigned rounds_done;
  bool peer_up;         /* a PEER_UP event came */
  bool want_snap;       /* the node asked for a snapshot; the loop hands one over */
  unsigned snaps_given;
  unsigned state_dones; /* state_done calls */
  bool state_snap;      /* the last one carried a state */
  uint64_t state_round; /* its round */
} fuzz_driver;

/* DEDMPI_FUZZ_VERBOSE=1 prints what the node logs and reports: how to
 * see what a corpus input makes the node do. */
static int fuzz_verbose = -1;

static bool drv_verbose(void) {
  if (fuzz_verbose < 0) fuzz_verbose = getenv("DEDMPI_FUZZ_VERBOSE") != NULL;
  return fuzz_verbose;
}

/* Only the stranger can be reached, and only in outbound mode. */
static int drv_connect(void *user, uint32_t conn_id, const ded_addr *addr) {
  fuzz_driver *d = user;
  if (!d->dial_boot || d->dial_pending || !ded_addr_equal(addr, &d->boot)) return -1;
  d->dial = conn_id;
  d->dial_pending = true;
  return 0;
}

static void drv_close(void *user, uint32_t conn_id) {
  fuzz_driver *d = user;
  if (conn_id == d->conn) d->conn_open = false;
  if (d->dial_pending && conn_id == d->dial) d->dial_pending = false;
}

static void drv_want_write(void *user, uint32_t conn_id) {
  (void)user;
  (void)conn_id;
}

static void drv_round_done(void *user, void *ctx, const ded_round_result *res) {
  fuzz_driver *d = user;
  (void)ctx;
  FUZZ_CHECK(res->status <= 0);
  FUZZ_CHECK(res->contributors >= 1 && res->contributors <= DED_ROUND_MEMBERS_MAX);
  FUZZ_CHECK(res->alone ? res->members == NULL : 1);
  FUZZ_CHECK(res->count >= 1 && res->count <= FUZZ_NODE_COUNT &&
             res->off + res->count <= FUZZ_NODE_COUNT);
  d->rounds_done += res->last; /* a submission ends with its last round */
  if (drv_verbose())
    fprintf(stderr, "  round %llu done: status %d, %u contributors%s%s\n",
            (unsigned long long)res->round, res->status, res->contributors,
            res->alone ? ", alone" : "", res->late ? ", late" : "");
}

static void drv_event(void *user, const ded_event *ev) {
  fuzz_driver *d = user;
  FUZZ_CHECK(ev->type >= DED_EVENT_BOOTSTRAP && ev->type <= DED_EVENT_PEER_DOWN);
  if (ev->type == DED_EVENT_PEER_UP) d->peer_up = true;
}

static void drv_want_snapshot(void *user) {
  fuzz_driver *d = user;
  d->want_snap = true;
}

/* A state the node reports is whole: its sizes add up, its bytes match
 * its digest. The bytes are ours: freed here, and the pointer cleared so
 * that the node does not free them too. */
static void drv_state_done(void *user, int status, ded_snapshot *snap) {
  fuzz_driver *d = user;
  d->state_dones++;
  FUZZ_CHECK(d->state_dones == 1);
  FUZZ_CHECK(status <= 0);
  FUZZ_CHECK(status == 0 || snap == NULL);
  d->state_snap = snap != NULL;
  if (snap) {
    FUZZ_CHECK(snap->round > 0 && snap->step_rounds >= 1 &&
               snap->step_rounds <= DED_STATE_STEP_ROUNDS_MAX);
    FUZZ_CHECK(snap->len <= DED_STATE_BYTES_MAX);
    FUZZ_CHECK(snap->bytes != NULL);
    FUZZ_CHECK(ded_digest64(snap->bytes, (size_t)snap->len) == snap->digest);
    d->state_round = snap->round;
    free(snap->bytes); /* settings.mem is libc */
    snap->bytes = NULL;
  }
  if (drv_verbose())
    fprintf(stderr, "  state done: status %d%s\n", status, snap ? ", with a state" : "");
}

/* The trainer's side: when the node asked, a snapshot at the next round
 * this job would submit (refused when the node cannot vouch for it; the
 * node takes the bytes either way). Always the same FUZZ_NODE_SNAP_LEN
 * bytes, byte i being (uint8_t)(i * 31), so that an input can name its
 * digest in a STATE_GET. */
#define FUZZ_NODE_SNAP_LEN 700
static void drv_give_snapshot(ded_node *node, fuzz_driver *d, unsigned submitted, uint64_t now) {
  if (!d->want_snap) return;
  d->want_snap = false;
  ded_snapshot snap;
  memset(&snap, 0, sizeof snap);
  snap.round = submitted ? submitted : 1;
  snap.step_rounds = 1 + d->snaps_given % 2;
  snap.len = FUZZ_NODE_SNAP_LEN;
  snap.bytes = malloc((size_t)snap.len);
  FUZZ_CHECK(snap.bytes != NULL);
  for (uint64_t i = 0; i < snap.len; i++) snap.bytes[i] = (uint8_t)(i * 31);
  snap.digest = ded_digest64(snap.bytes, (size_t)snap.len);
  int rv = ded_node_snapshot_set(node, &snap, now);
  FUZZ_CHECK(rv == 0 || rv == DED_ERR_INVALID_ARG);
  FUZZ_CHECK(snap.bytes == NULL);
  d->snaps_given++;
}

/* The joiner's start: ded_node_state_fetch, refused after a round. True
 * if a fetch is under way (or done). */
static bool drv_fetch(ded_node *node, bool no_rounds, unsigned submitted, uint64_t now) {
  int rv = ded_node_state_fetch(node, now);
  if (submitted || no_rounds)
    FUZZ_CHECK(rv == DED_ERR_INVALID_ARG);
  else
    FUZZ_CHECK(rv == 0);
  return rv == 0;
}

/* Formatting runs (log_level is DEBUG), so format bugs show; the text goes
 * nowhere unless asked for. */
static void drv_log(void *user, int level, const char *line) {
  (void)user;
  FUZZ_CHECK(line != NULL && strlen(line) < 512);
  if (drv_verbose()) fprintf(stderr, "  log %d %s\n", level, line);
}

/* Takes the node's output for the connection: usually all of it, now and
 * then a short write, sometimes stopping there as a full socket would. */
static void drv_drain(ded_node *node, fuzz_driver *d, uint32_t *rng, uint64_t now) {
  for (int rounds = 0; rounds < 64 && d->conn_open; rounds++) {
    ded_iov iov[8];
    int n = ded_node_conn_pending(node, d->conn, iov, 8);
    if (n <= 0) return;
    size_t total = 0;
    for (int i = 0; i < n; i++) {
      FUZZ_CHECK(iov[i].len > 0);
      /* Touch the bytes: a dangling piece shows under ASan. */
      volatile uint8_t sink = 0;
      for (size_t j = 0; j < iov[i].len; j += 64) sink ^= ((const uint8_t *)iov[i].base)[j];
      sink ^= ((const uint8_t *)iov[i].base)[iov[i].len - 1];
      (void)sink;
      total += iov[i].len;
    }
    uint32_t r = fuzz_rng_next(rng);
    bool partial = r % 4 == 0;
    ded_node_conn_consume(node, d->conn, partial ? 1 + (size_t)(r >> 8) % total : total, now);
    if (partial && (r & 0x10)) return; /* the rest, maybe half a frame, waits */
  }
}

/* A (new) connection with the stranger: accepted, or the node's dial
 * answered. False when there is none to be had. */
static bool drv_open(ded_node *node, fuzz_driver *d, uint64_t now) {
  if (d->dial_boot) {
    if (!d->dial_pending) return false;
    d->dial_pending = false;
    d->conn = d->dial;
    d->conn_open = true;
    ded_node_conn_connected(node, d->conn, now);
    return true;
  }
  ded_addr remote;
  memset(&remote, 0, sizeof remote);
  remote.family = 4;
  remote.ip[0] = 10;
  remote.ip[3] = 9;
  remote.port = 40000;
  if (ded_node_conn_accepted(node, &remote, &d->conn, now) != 0) return false;
  d->conn_open = true;
  return true;
}

/* |by_ns| pass while the process runs: the node is called at each of its
 * expiries on the way, as a driver does (a node called late takes the
 * gap for a stop of its process, and moves its calls' bounds by it). */
static void drv_advance(ded_node *node, fuzz_driver *d, uint32_t *rng, uint64_t *now,
                        uint64_t by_ns) {
  uint64_t until = *now + by_ns;
  for (;;) {
    uint64_t exp = ded_node_expiry(node);
    *now = exp > *now && exp < until ? exp : until;
    if (*now >= exp) ded_node_handle_expiry(node, *now);
    drv_drain(node, d, rng, *now);
    if (*now >= until) break;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  uint8_t flags = data[0];
  uint32_t rng = fuzz_rng_seed(data[1]);
  const uint8_t *in = data + 2;
  size_t len = size - 2;

  fuzz_driver d;
  memset(&d, 0, sizeof d);
  uint8_t seed[DED_SEED_BYTES];
  memset(seed, FUZZ_NODE_SEED_BYTE, sizeof seed);
  ded_node_settings s;
  memset(&s, 0, sizeof s);
  s.run = FUZZ_RUN;
  s.mode = DED_MODE_NODE;
  s.min_peers = flags & FUZZ_NODE_F_ALONE_OK ? 1 : 2;
  s.identity_seed = seed;
  s.rendezvous_timeout_ns = 5 * SEC_NS;
  s.round_timeout_ns = 2 * SEC_NS;
  s.chunk_bytes = FUZZ_NODE_CHUNK_BYTES;
  s.record_ttl_ms = 30000; /* refreshed every 10 s: within an input's time */
  s.log_level = DED_LOG_DEBUG;
  s.no_rounds = flags & FUZZ_NODE_F_NO_ROUNDS;
  if (flags & FUZZ_NODE_F_OUTBOUND) {
    FUZZ_CHECK(ded_addr_parse(FUZZ_NODE_BOOT_ADDR, &d.boot) == 0);
    s.bootstrap[0] = d.boot;
    s.n_bootstrap = 1;
    s.bootstrap_timeout_ns = 3 * SEC_NS;
    d.dial_boot = true;
  }
  ded_node_callbacks cb = {drv_connect, drv_close, drv_want_write, drv_round_done, drv_event,
                           drv_log, drv_want_snapshot, drv_state_done};
  uint64_t now = FUZZ_NOW_NS;
  ded_node *node;
  FUZZ_CHECK(ded_node_new(&s, &cb, &d, now, &node) == 0);
  FUZZ_CHECK(ded_node_start(node, now) == 0);

  /* The rounds' buffers outlive the node: it is freed before we return. */
  double buf0[FUZZ_NODE_COUNT], buf1[FUZZ_NODE_COUNT];
  for (int i = 0; i < FUZZ_NODE_COUNT; i++) buf0[i] = buf1[i] = 0.25 * i;
  uint8_t dtype = flags & FUZZ_NODE_F_F64 ? DED_DTYPE_F64 : DED_DTYPE_F32;
  unsigned submitted = 0;
  if (flags & FUZZ_NODE_F_ROUND0) {
    ded_round_args a = {buf0, FUZZ_NODE_COUNT, dtype, 1.0, 1, NULL, 0};
    int64_t no = ded_node_round_submit(node, &a, now);
    FUZZ_CHECK(no == 0 || (s.no_rounds && no == DED_ERR_INVALID_ARG));
    submitted += no == 0;
    if (no == 0 && (flags & FUZZ_NODE_F_ROUND1)) {
      ded_round_args b = {buf1, FUZZ_NODE_COUNT, dtype, 2.0, 3, NULL, 0};
      FUZZ_CHECK(ded_node_round_submit(node, &b, now) == 1);
      submitted++;
    }
  }

  bool fetch = flags & FUZZ_NODE_F_STATE_FETCH, fetched = false, fetching = false;
  unsigned opened = drv_open(node, &d, now);
  size_t pos = 0;
  while (pos < len && d.conn_open) {
    uint32_t r = fuzz_rng_next(&rng);
    /* Mostly small reads, now and then a large one. */
    size_t piece = r % 8 == 0 ? 1 + (r >> 3) % 4096 : 1 + (r >> 3) % 64;
    if (piece > len - pos) piece = len - pos;
    ded_node_conn_recv(node, d.conn, in + pos, piece, now);
    pos += piece;
    drv_give_snapshot(node, &d, submitted, now);
    if (fetch && !fetched && d.peer_up) {
      fetched = true;
      fetching = drv_fetch(node, s.no_rounds, submitted, now);
    }
    drv_drain(node, &d, &rng, now);
    r = fuzz_rng_next(&rng);
    if (r % 4 == 0) {
      drv_advance(node, &d, &rng, &now, (r >> 2) % (50 * SEC_NS / 1000));
      drv_give_snapshot(node, &d, submitted, now);
    }
    if (!d.conn_open && pos < len && opened < FUZZ_NODE_CONNS_MAX) {
      /* A dial back takes the node's backoff: let its timers run. */
      for (int i = 0; i < 20 && d.dial_boot && !d.dial_pending; i++)
        drv_advance(node, &d, &rng, &now, SEC_NS / 10);
      opened += drv_open(node, &d, now);
    }
  }
  FUZZ_CHECK(d.rounds_done <= submitted);
  if (fetch && !fetched) { /* the stranger never came up: alone */
    fetched = true;
    fetching = drv_fetch(node, s.no_rounds, submitted, now);
    drv_drain(node, &d, &rng, now);
  }
  FUZZ_CHECK(fetching || d.state_dones == 0);
  /* Once the state is in, the node resumes at its round. */
  if (d.state_dones && d.state_snap && !(flags & FUZZ_NODE_F_LEAVE)) {
    ded_round_args a = {buf0, FUZZ_NODE_COUNT, dtype, 1.0, 1, NULL, 0};
    FUZZ_CHECK(ded_node_round_submit(node, &a, now) == (int64_t)d.state_round);
    submitted++;
    drv_drain(node, &d, &rng, now);
  }

  /* The end: leave if asked, then let every timer fire. */
  if (flags & FUZZ_NODE_F_LEAVE) {
    ded_node_leave(node, now);
    drv_drain(node, &d, &rng, now);
    /* Everything submitted is reported by now. */
    FUZZ_CHECK(d.rounds_done == submitted);
  }
  for (int step = 0; step < 4; step++) drv_advance(node, &d, &rng, &now, 3 * SEC_NS);
  /* Every round ends within its timeouts: reported once, never twice. */
  FUZZ_CHECK(d.rounds_done == submitted);
  /* Far ahead: the stranger's record expires and it is forgotten. */
  if (d.conn_open) ded_node_conn_closed(node, d.conn, DED_ERR_PEER_LOST, now);
  d.conn_open = false;
  drv_advance(node, &d, &rng, &now, 600 * SEC_NS);
  drv_advance(node, &d, &rng, &now, SEC_NS);
  FUZZ_CHECK(ded_node_peer_count(node) == 0);
  /* A fetch ends, whatever the stranger did: reported exactly once. */
  FUZZ_CHECK(d.state_dones == (fetching ? 1u : 0u));
  ded_node_free(node);
  return 0;
}
