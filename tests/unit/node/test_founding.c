/*
 * test_founding.c: one initial model (version 11). The jobs that start a
 * run together take one job's state as the run's first: the founding
 * state is offered (FOUNDING) by its origin and by whoever already
 * fetched it, fetched striped, kept through the rendezvous, and the next
 * candidate asked when one is gone. Against scripted peers (tnode).
 */
#include "harness.h"

/* The round a founding state names on the wire and in state_done
 * (ded_msg.h, FOUNDING): the state before the run's first round. */
#define FOUND_ROUND 0

/* Byte |i| of the founding state of the job whose ids start with |tag|. */
static uint8_t found_byte(uint64_t i, uint8_t tag) { return (uint8_t)(snap_byte(i) ^ tag); }

/* A founding state of |len| bytes (found_byte(i, tag)), allocated with
 * |mem|, as a shim hands it to ded_node_found_set (the node sets round
 * and digest). */
static ded_snapshot found_snap(const ded_mem *mem, uint64_t len, uint8_t tag) {
  ded_snapshot s;
  memset(&s, 0, sizeof s);
  s.len = len;
  s.bytes = ded_mem_malloc(mem, len ? len : 1);
  assert_non_null(s.bytes);
  for (uint64_t i = 0; i < len; i++) s.bytes[i] = found_byte(i, tag);
  return s;
}

static uint64_t found_digest(uint64_t len, uint8_t tag) {
  uint8_t *b = malloc(len ? len : 1);
  assert_non_null(b);
  for (uint64_t i = 0; i < len; i++) b[i] = found_byte(i, tag);
  uint64_t d = ded_digest64(b, len);
  free(b);
  return d;
}

/* A founding ask for |origin|'s state, from the peer on connection |i|. */
static void send_found_ask(tnode *t, unsigned i, const uint8_t origin[DED_ID_BYTES]) {
  ded_msg_state_ask m;
  memset(&m, 0, sizeof m);
  memcpy(m.origin, origin, DED_ID_BYTES);
  uint8_t f[DED_STATE_ASK_FRAME_BYTES];
  ded_wr w = ded_wr_init(f, sizeof f);
  ded_msg_state_ask_encode(&w, &m);
  assert_false(w.err);
  send_raw(t, i, f, w.pos);
}

/* The FOUNDING a scripted peer on connection |i| answers: |origin|'s
 * state of |len| bytes with |digest|. */
static void send_found_offer(tnode *t, unsigned i, const uint8_t origin[DED_ID_BYTES],
                             uint64_t len, uint64_t digest) {
  uint8_t lin[DED_LIN_BYTES(1)];
  memset(lin, 0, sizeof lin);
  memcpy(lin, origin, DED_ID_BYTES);
  ded_msg_state_offer m;
  memset(&m, 0, sizeof m);
  m.status = DED_STATE_FOUNDING;
  m.round = FOUND_ROUND;
  m.digest = digest;
  m.len = len;
  m.nlin = 1;
  m.lin = lin;
  send_state_offer(t, i, &m);
}

/* Checks that connection |i|'s output is exactly one FOUNDING of
 * |origin|'s state: |len| bytes with |digest|. */
static void expect_founding(tnode *t, unsigned i, const uint8_t origin[DED_ID_BYTES],
                            uint64_t len, uint64_t digest) {
  size_t n;
  uint8_t *out = tnode_output_on(t, i, &n, t->now);
  assert_int_equal(frame_count(out, n, DED_MSG_STATE_OFFER), 1);
  ded_msg_state_offer m;
  assert_true(output_offer(out, n, 0, &m));
  assert_int_equal(m.status, DED_STATE_FOUNDING);
  assert_int_equal(m.round, FOUND_ROUND);
  assert_int_equal(m.len, len);
  assert_int_equal(m.digest, digest);
  assert_int_equal(m.pos, 0);
  assert_int_equal(m.step_rounds, 0);
  assert_int_equal(m.lin_attempt, 0);
  assert_int_equal(m.nlin, 1);
  assert_memory_equal(m.lin, origin, DED_ID_BYTES);
  assert_false(ded_lin_client(m.lin, 1, 0));
  free(out);
}

/* Checks that connection |i|'s output is exactly one STATE_DATA of the
 * founding state with |digest|: bytes [off, off + len) of |tag|'s. */
static void expect_found_data(tnode *t, unsigned i, uint64_t digest, uint64_t off, size_t len,
                              uint8_t tag) {
  size_t n;
  uint8_t *out = tnode_output_on(t, i, &n, t->now);
  assert_int_equal(frame_count(out, n, DED_MSG_STATE_DATA), 1);
  ded_frame fr;
  assert_true(frame_find(out, n, DED_MSG_STATE_DATA, 0, &fr));
  ded_msg_state_data d;
  assert_int_equal(ded_msg_state_data_decode(fr.payload, fr.len, &d), 0);
  assert_int_equal(d.round, FOUND_ROUND);
  assert_int_equal(d.digest, digest);
  assert_int_equal(d.offset, off);
  assert_int_equal(d.len, len);
  for (size_t k = 0; k < len; k++)
    if (d.bytes[k] != found_byte(off + k, tag))
      fail_msg("founding byte %llu differs", (unsigned long long)(off + k));
  free(out);
}

/* The founding asks in connection |i|'s output (consumed): how many; each
 * must ask for no round, and for |origin| (unless NULL). */
static int found_asks_on(tnode *t, unsigned i, const uint8_t *origin) {
  size_t n;
  uint8_t *out = tnode_output_on(t, i, &n, t->now);
  int k = 0;
  ded_frame fr;
  for (; frame_find(out, n, DED_MSG_STATE_ASK, k, &fr); k++) {
    ded_msg_state_ask a;
    assert_int_equal(ded_msg_state_ask_decode(fr.payload, fr.len, &a), 0);
    assert_int_equal(a.min_round, 0);
    if (origin) assert_memory_equal(a.origin, origin, DED_ID_BYTES);
  }
  free(out);
  return k;
}

/* A job that started the run, with a scripted peer |lo| on connection 0
 * and |hi| on connection 1, every output so far consumed. */
static void found_start(tnode *t, const ded_mem *mem, ded_ident *lo, ded_ident *hi) {
  tnode_start_mem(t, NULL, 0, 1.0, 1, mem);
  peers_around(t, lo, hi);
  send_hello(t, 0, lo, RUN);
  assert_int_equal(tnode_accept(t), 1);
  send_hello(t, 1, hi, RUN);
  assert_int_equal(ded_node_peer_count(t->node), 2);
  for (unsigned i = 0; i < 2; i++) free(tnode_output_on(t, i, &(size_t){0}, t->now));
}

/*
 * A job that started the run holds its founding state: a founding ask for
 * its own id is answered FOUNDING (round 0, its id the lineage, the
 * state's length and digest), and STATE_GET of round 0 is served from it,
 * byte for byte; a founding ask for another origin is answered NONE, and
 * a plain ask as before. ded_node_found_set takes the bytes on every path
 * and is refused once rounds were submitted, or twice.
 */
static void test_node_state_founding_served(void **state) {
  (void)state;
  unit_failmem fm;
  unit_failmem_init(&fm, -1);
  tnode t;
  ded_ident lo, hi;
  found_start(&t, &fm.mem, &lo, &hi);
  const uint64_t len = 1000;
  const uint8_t tag = t.ident.id[0];
  uint64_t digest = found_digest(len, tag);
  long live = fm.live;
  ded_snapshot s = found_snap(&fm.mem, len, tag);
  assert_int_equal(ded_node_found_set(t.node, &s, t.now), 0);
  assert_null(s.bytes); /* the node took it */
  assert_int_equal(fm.live, live + 1);
  assert_int_equal(t.state_calls, 0);
  /* Its own origin: FOUNDING, on either connection. */
  send_found_ask(&t, 0, t.ident.id);
  expect_founding(&t, 0, t.ident.id, len, digest);
  send_found_ask(&t, 1, t.ident.id);
  expect_founding(&t, 1, t.ident.id, len, digest);
  /* Another origin, the asker's own included: PENDING (round 0), since
   * its own first round is still to report and it may yet take another's. */
  send_found_ask(&t, 0, lo.id);
  expect_offer(&t, 0, DED_STATE_PENDING, 0);
  send_found_ask(&t, 1, lo.id);
  expect_offer(&t, 1, DED_STATE_PENDING, 0);
  send_found_ask(&t, 1, hi.id);
  expect_offer(&t, 1, DED_STATE_PENDING, 0);
  /* A plain ask is not a founding one: no run in progress yet. */
  send_state_ask(&t, 0, 0);
  expect_offer(&t, 0, DED_STATE_FRESH, 0);
  assert_int_equal(t.want_snapshots, 0);
  /* The ranges of round 0: exactly the bytes, the last one included. */
  send_state_get(&t, 0, FOUND_ROUND, digest, 0, (uint32_t)len);
  expect_found_data(&t, 0, digest, 0, len, tag);
  send_state_get(&t, 1, FOUND_ROUND, digest, 100, 900);
  expect_found_data(&t, 1, digest, 100, 900, tag);
  send_state_get(&t, 1, FOUND_ROUND, digest, len - 1, 1);
  expect_found_data(&t, 1, digest, len - 1, 1, tag);
  /* Another digest: GONE; round 1 names a snapshot, which it has not. */
  send_state_get(&t, 0, FOUND_ROUND, digest ^ 1, 0, 10);
  ded_msg_state_offer m = expect_offer(&t, 0, DED_STATE_GONE, FOUND_ROUND);
  assert_int_equal(m.digest, digest ^ 1);
  send_state_get(&t, 0, 1, digest, 0, 10);
  expect_offer(&t, 0, DED_STATE_GONE, 1);
  assert_false(t.closed[0]);
  /* Twice: refused, the bytes freed, the first state kept. */
  live = fm.live;
  s = found_snap(&fm.mem, 10, 0x33);
  assert_int_equal(ded_node_found_set(t.node, &s, t.now), DED_ERR_INVALID_ARG);
  assert_null(s.bytes);
  assert_int_equal(fm.live, live);
  send_found_ask(&t, 1, t.ident.id);
  expect_founding(&t, 1, t.ident.id, len, digest);
  /* Beyond the end: a protocol error. */
  send_state_get(&t, 1, FOUND_ROUND, digest, len, 1);
  assert_true(t.closed[1]);
  assert_false(t.closed[0]);
  free(tnode_output_on(&t, 1, &(size_t){0}, t.now));
  ded_node_free(t.node);
  assert_int_equal(fm.live, 0);

  /* Once a round was submitted: refused, the bytes freed. */
  float buf[COUNT], *bufs[1] = {buf};
  for (int i = 0; i < COUNT; i++) buf[i] = (float)i;
  tnode_start_mem(&t, bufs, 1, 1.0, 1, &fm.mem);
  live = fm.live;
  s = found_snap(&fm.mem, 10, 0x44);
  assert_int_equal(ded_node_found_set(t.node, &s, t.now), DED_ERR_INVALID_ARG);
  assert_null(s.bytes);
  assert_int_equal(fm.live, live);
  ded_node_free(t.node);
  assert_int_equal(fm.live, 0);
}

/*
 * The first contributor of the run's first round is this job: its own
 * founding state is the run's initial state, reported at once (state_done
 * 0, no snapshot), without asking anyone; it goes on serving it.
 * ded_node_state_found is refused without a founding state, or with no
 * candidates.
 */
static void test_node_state_found_self_first(void **state) {
  (void)state;
  tnode t;
  ded_ident lo, hi;
  found_start(&t, NULL, &lo, &hi);
  uint8_t cands[3 * DED_ID_BYTES];
  memcpy(cands, t.ident.id, DED_ID_BYTES);
  memcpy(cands + DED_ID_BYTES, lo.id, DED_ID_BYTES);
  memcpy(cands + 2 * DED_ID_BYTES, hi.id, DED_ID_BYTES);
  /* No founding state yet. */
  assert_int_equal(ded_node_state_found(t.node, cands, 3, t.now), DED_ERR_INVALID_ARG);
  assert_int_equal(t.state_calls, 0);
  ded_snapshot s = found_snap(NULL, 300, 0x5a);
  uint64_t digest = found_digest(300, 0x5a);
  assert_int_equal(ded_node_found_set(t.node, &s, t.now), 0);
  assert_int_equal(ded_node_state_found(t.node, cands, 3, t.now), 0);
  assert_int_equal(t.state_calls, 1);
  assert_int_equal(t.state_status, 0);
  assert_false(t.state_has_snap);
  assert_int_equal(found_asks_on(&t, 0, NULL), 0);
  assert_int_equal(found_asks_on(&t, 1, NULL), 0);
  tnode_advance(&t, SEC_NS);
  assert_int_equal(t.state_calls, 1);
  assert_int_equal(found_asks_on(&t, 0, NULL), 0);
  send_found_ask(&t, 1, t.ident.id);
  expect_founding(&t, 1, t.ident.id, 300, digest);
  ded_node_free(t.node);
}

/* A first round with no contributor but this job (n 0): its own state
 * stands at once, no ask goes out, and it is still served. */
static void test_node_state_found_alone(void **state) {
  (void)state;
  tnode t;
  ded_ident lo, hi;
  found_start(&t, NULL, &lo, &hi);
  ded_snapshot s = found_snap(NULL, 300, 0x5a);
  assert_int_equal(ded_node_found_set(t.node, &s, t.now), 0);
  assert_int_equal(ded_node_state_found(t.node, NULL, 0, t.now), 0);
  assert_int_equal(t.state_calls, 1);
  assert_int_equal(t.state_status, 0);
  assert_false(t.state_has_snap);
  assert_int_equal(found_asks_on(&t, 0, NULL), 0);
  assert_int_equal(found_asks_on(&t, 1, NULL), 0);
  send_found_ask(&t, 1, t.ident.id);
  tnode_advance(&t, 0);
  ded_msg_state_offer m = expect_offer(&t, 1, DED_STATE_FOUNDING, 0);
  assert_int_equal(m.len, 300);
  ded_node_free(t.node);
}

/*
 * Candidates [lo, hi, the node]: hi answers PENDING to the ask for lo's
 * state (it is fetching it itself), then lo goes away. hi will hold lo's
 * state (or move past lo) and say nothing: the node must ask it again,
 * and take lo's state from it, rather than wait out the bound.
 */
static void test_node_state_found_pending_asked_again(void **state) {
  (void)state;
  tnode t;
  ded_ident lo, hi;
  found_start(&t, NULL, &lo, &hi);
  ded_snapshot own = found_snap(NULL, 500, 0x77);
  assert_int_equal(ded_node_found_set(t.node, &own, t.now), 0);
  uint8_t cands[3 * DED_ID_BYTES];
  memcpy(cands, lo.id, DED_ID_BYTES);
  memcpy(cands + DED_ID_BYTES, hi.id, DED_ID_BYTES);
  memcpy(cands + 2 * DED_ID_BYTES, t.ident.id, DED_ID_BYTES);
  assert_int_equal(ded_node_state_found(t.node, cands, 3, t.now), 0);
  assert_int_equal(found_asks_on(&t, 0, lo.id), 1);
  assert_int_equal(found_asks_on(&t, 1, lo.id), 1);
  ded_msg_state_offer pend;
  memset(&pend, 0, sizeof pend);
  pend.status = DED_STATE_PENDING; /* round 0: fetching lo's itself */
  send_state_offer(&t, 1, &pend);
  tnode_advance(&t, 100 * MS_NS);
  ded_node_conn_closed(t.node, t.conn[0], DED_ERR_PEER_LOST, t.now);
  uint64_t t0 = t.now;
  int asks = 0;
  while (!asks && t.state_calls == 0 && t.now - t0 < 5 * SEC_NS) {
    tnode_advance(&t, 100 * MS_NS);
    asks = found_asks_on(&t, 1, lo.id);
  }
  if (!asks)
    fail_msg("hi, PENDING, never asked again (state_done %u, status %d, after %llu ms)",
             t.state_calls, t.state_status, (unsigned long long)((t.now - t0) / MS_NS));
  const uint64_t len = 700;
  uint64_t digest = found_digest(len, lo.id[0]);
  send_found_offer(&t, 1, lo.id, len, digest);
  tnode_advance(&t, 100 * MS_NS);
  uint8_t *bytes = malloc(len);
  assert_non_null(bytes);
  for (uint64_t i = 0; i < len; i++) bytes[i] = found_byte(i, lo.id[0]);
  send_state_data(&t, 1, FOUND_ROUND, digest, 0, bytes, len);
  assert_int_equal(t.state_calls, 1);
  assert_int_equal(t.state_status, 0);
  assert_true(t.state_has_snap);
  assert_memory_equal(t.state_snap.bytes, bytes, len);
  free(t.state_snap.bytes);
  free(bytes);
  ded_node_free(t.node);
}

/*
 * The first round may wait for its peers up to the rendezvous timeout
 * (300 s by default): the founding state, set as the job enters it, must
 * outlast that wait, to be served and for ded_node_state_found.
 */
static void test_node_state_found_kept_through_rendezvous(void **state) {
  (void)state;
  tnode t;
  ded_ident lo, hi;
  found_start(&t, NULL, &lo, &hi);
  ded_snapshot own = found_snap(NULL, 500, 0x77);
  uint64_t digest = found_digest(500, 0x77);
  assert_int_equal(ded_node_found_set(t.node, &own, t.now), 0);
  tnode_advance(&t, 90 * SEC_NS); /* nobody asked meanwhile */
  send_found_ask(&t, 1, t.ident.id);
  expect_founding(&t, 1, t.ident.id, 500, digest);
  assert_int_equal(ded_node_state_found(t.node, t.ident.id, 1, t.now), 0);
  assert_int_equal(t.state_calls, 1);
  assert_int_equal(t.state_status, 0);
  ded_node_free(t.node);
}

/* The node, with candidates [|lo|, the node]: it asks |lo| (connection 0)
 * for |lo|'s founding state, and the other peer (which may hold it) too. */
static void found_ask_lo(tnode *t, const ded_ident *lo) {
  uint8_t cands[2 * DED_ID_BYTES];
  memcpy(cands, lo->id, DED_ID_BYTES);
  memcpy(cands + DED_ID_BYTES, t->ident.id, DED_ID_BYTES);
  assert_int_equal(ded_node_state_found(t->node, cands, 2, t->now), 0);
  assert_int_equal(t->state_calls, 0);
  assert_int_equal(found_asks_on(t, 0, lo->id), 1);
  assert_int_equal(found_asks_on(t, 1, lo->id), 1);
  /* A second search meanwhile: refused. */
  assert_int_equal(ded_node_state_found(t->node, cands, 2, t->now), DED_ERR_INVALID_ARG);
}

/*
 * The first contributor is a peer: the node asks it for its founding
 * state, fetches the ranges (STATE_GET of round 0) once it answers
 * FOUNDING, and reports the state (round 0, its bytes). While it fetches,
 * a founding ask for that origin is answered PENDING (round 0); once it
 * has it, FOUNDING: it serves that origin's state, byte for byte.
 */
static void test_node_state_found_fetch(void **state) {
  (void)state;
  unit_failmem fm;
  unit_failmem_init(&fm, -1);
  tnode t;
  ded_ident lo, hi;
  found_start(&t, &fm.mem, &lo, &hi);
  ded_snapshot own = found_snap(&fm.mem, 500, t.ident.id[0]);
  assert_int_equal(ded_node_found_set(t.node, &own, t.now), 0);
  found_ask_lo(&t, &lo);
  /* Asked for lo's origin while asking for it: PENDING. */
  send_found_ask(&t, 1, lo.id);
  expect_offer(&t, 1, DED_STATE_PENDING, 0);
  /* lo answers with its state: two ranges, the second short. */
  const uint64_t len = SNAP_RANGE + 100;
  const uint8_t tag = lo.id[0];
  uint64_t digest = found_digest(len, tag);
  send_found_offer(&t, 0, lo.id, len, digest);
  tnode_advance(&t, 100 * MS_NS);
  size_t n;
  uint8_t *out = tnode_output_on(&t, 0, &n, t.now);
  assert_int_equal(frame_count(out, n, DED_MSG_STATE_GET), 2);
  for (int k = 0; k < 2; k++) {
    ded_frame fr;
    assert_true(frame_find(out, n, DED_MSG_STATE_GET, k, &fr));
    ded_msg_state_get g;
    assert_int_equal(ded_msg_state_get_decode(fr.payload, fr.len, &g), 0);
    assert_int_equal(g.round, FOUND_ROUND);
    assert_int_equal(g.digest, digest);
    assert_int_equal(g.offset, k * SNAP_RANGE);
    assert_int_equal(g.len, k == 0 ? SNAP_RANGE : 100);
  }
  free(out);
  out = tnode_output_on(&t, 1, &n, t.now);
  assert_int_equal(frame_count(out, n, DED_MSG_STATE_GET), 0); /* hi was not asked */
  free(out);
  /* Fetching it: PENDING still, round 1 (being sent it). */
  send_found_ask(&t, 1, lo.id);
  expect_offer(&t, 1, DED_STATE_PENDING, 1);
  uint8_t *bytes = malloc(len);
  assert_non_null(bytes);
  for (uint64_t i = 0; i < len; i++) bytes[i] = found_byte(i, tag);
  send_state_data(&t, 0, FOUND_ROUND, digest, SNAP_RANGE, bytes + SNAP_RANGE, 100);
  assert_int_equal(t.state_calls, 0);
  send_state_data(&t, 0, FOUND_ROUND, digest, 0, bytes, SNAP_RANGE);
  assert_false(t.closed[0]);
  assert_int_equal(t.state_calls, 1);
  assert_int_equal(t.state_status, 0);
  assert_true(t.state_has_snap);
  assert_int_equal(t.state_snap.round, FOUND_ROUND);
  assert_int_equal(t.state_snap.len, len);
  assert_int_equal(t.state_snap.digest, digest);
  assert_memory_equal(t.state_snap.bytes, bytes, len);
  ded_mem_free(&fm.mem, t.state_snap.bytes);
  free(bytes);
  /* Now it serves lo's state, as lo's, to whoever asks. */
  send_found_ask(&t, 1, lo.id);
  expect_founding(&t, 1, lo.id, len, digest);
  send_state_get(&t, 1, FOUND_ROUND, digest, 0, SNAP_RANGE);
  expect_found_data(&t, 1, digest, 0, SNAP_RANGE, tag);
  send_state_get(&t, 1, FOUND_ROUND, digest, SNAP_RANGE, 100);
  expect_found_data(&t, 1, digest, SNAP_RANGE, 100, tag);
  /* It holds one founding state, the run's: not its own any more. */
  send_found_ask(&t, 1, t.ident.id);
  expect_offer(&t, 1, DED_STATE_NONE, 0);
  /* A FOUNDING that comes late is moot. */
  send_found_offer(&t, 0, lo.id, len, digest);
  tnode_advance(&t, SEC_NS);
  assert_int_equal(t.state_calls, 1);
  assert_false(t.closed[0]);
  ded_node_free(t.node);
  assert_int_equal(fm.live, 0);
}

/*
 * The first contributor goes away before it answers, and no peer asked
 * is fetching its state: the node moves past it. With itself next, its
 * own state is the run's initial state (state_done 0, no snapshot), at
 * once rather than at the bound; it still serves it as its own.
 */
static void test_node_state_found_candidate_gone(void **state) {
  (void)state;
  unit_failmem fm;
  unit_failmem_init(&fm, -1);
  tnode t;
  ded_ident lo, hi;
  found_start(&t, &fm.mem, &lo, &hi);
  ded_snapshot own = found_snap(&fm.mem, 500, 0x77);
  uint64_t digest = found_digest(500, 0x77);
  assert_int_equal(ded_node_found_set(t.node, &own, t.now), 0);
  found_ask_lo(&t, &lo);
  tnode_advance(&t, 200 * MS_NS);
  assert_int_equal(t.state_calls, 0); /* lo is there: it waits for its answer */
  uint64_t t_gone = t.now;
  ded_node_conn_closed(t.node, t.conn[0], DED_ERR_PEER_LOST, t.now);
  tnode_advance(&t, 200 * MS_NS);
  assert_int_equal(t.state_calls, 0); /* hi, asked too, has not answered */
  ded_msg_state_offer none;
  memset(&none, 0, sizeof none);
  none.status = DED_STATE_NONE; /* neither holds nor seeks lo's */
  send_state_offer(&t, 1, &none);
  tnode_advance(&t, 200 * MS_NS);
  assert_int_equal(t.state_calls, 1);
  assert_int_equal(t.state_status, 0);
  assert_false(t.state_has_snap);
  assert_true(t.now - t_gone < SEC_NS);
  send_found_ask(&t, 1, t.ident.id);
  expect_founding(&t, 1, t.ident.id, 500, digest);
  send_found_ask(&t, 1, lo.id);
  expect_offer(&t, 1, DED_STATE_NONE, 0);
  ded_node_free(t.node);
  assert_int_equal(fm.live, 0);
}

/*
 * Candidates [lo, hi, the node]: both peers are asked for lo's state. hi
 * neither holds nor fetches it (NONE); lo goes away: the node moves on to
 * hi's state, asks hi for it, and takes it from hi.
 */
static void test_node_state_found_next_candidate(void **state) {
  (void)state;
  unit_failmem fm;
  unit_failmem_init(&fm, -1);
  tnode t;
  ded_ident lo, hi;
  found_start(&t, &fm.mem, &lo, &hi);
  ded_snapshot own = found_snap(&fm.mem, 500, 0x77);
  assert_int_equal(ded_node_found_set(t.node, &own, t.now), 0);
  uint8_t cands[3 * DED_ID_BYTES];
  memcpy(cands, lo.id, DED_ID_BYTES);
  memcpy(cands + DED_ID_BYTES, hi.id, DED_ID_BYTES);
  memcpy(cands + 2 * DED_ID_BYTES, t.ident.id, DED_ID_BYTES);
  assert_int_equal(ded_node_state_found(t.node, cands, 3, t.now), 0);
  assert_int_equal(found_asks_on(&t, 0, lo.id), 1);
  assert_int_equal(found_asks_on(&t, 1, lo.id), 1);
  ded_msg_state_offer none;
  memset(&none, 0, sizeof none);
  none.status = DED_STATE_NONE;
  send_state_offer(&t, 1, &none);
  tnode_advance(&t, 100 * MS_NS);
  assert_int_equal(t.state_calls, 0);
  ded_node_conn_closed(t.node, t.conn[0], DED_ERR_PEER_LOST, t.now);
  tnode_advance(&t, 100 * MS_NS);
  assert_int_equal(t.state_calls, 0);
  assert_int_equal(found_asks_on(&t, 1, hi.id), 1);
  /* An answer with lo's state now is moot: it wants hi's. */
  send_found_offer(&t, 1, lo.id, 300, found_digest(300, lo.id[0]));
  tnode_advance(&t, 100 * MS_NS);
  size_t n;
  uint8_t *out = tnode_output_on(&t, 1, &n, t.now);
  assert_int_equal(frame_count(out, n, DED_MSG_STATE_GET), 0);
  free(out);
  assert_int_equal(t.state_calls, 0);
  const uint64_t len = 700;
  uint64_t digest = found_digest(len, hi.id[0]);
  send_found_offer(&t, 1, hi.id, len, digest);
  tnode_advance(&t, 100 * MS_NS);
  out = tnode_output_on(&t, 1, &n, t.now);
  assert_int_equal(frame_count(out, n, DED_MSG_STATE_GET), 1);
  free(out);
  uint8_t *bytes = malloc(len);
  assert_non_null(bytes);
  for (uint64_t i = 0; i < len; i++) bytes[i] = found_byte(i, hi.id[0]);
  send_state_data(&t, 1, FOUND_ROUND, digest, 0, bytes, len);
  assert_int_equal(t.state_calls, 1);
  assert_int_equal(t.state_status, 0);
  assert_true(t.state_has_snap);
  assert_int_equal(t.state_snap.round, FOUND_ROUND);
  assert_int_equal(t.state_snap.len, len);
  assert_memory_equal(t.state_snap.bytes, bytes, len);
  ded_mem_free(&fm.mem, t.state_snap.bytes);
  free(bytes);
  ded_node_free(t.node);
  assert_int_equal(fm.live, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_node_state_founding_served),
      cmocka_unit_test(test_node_state_found_self_first),
      cmocka_unit_test(test_node_state_found_alone),
      cmocka_unit_test(test_node_state_found_pending_asked_again),
      cmocka_unit_test(test_node_state_found_kept_through_rendezvous),
      cmocka_unit_test(test_node_state_found_fetch),
      cmocka_unit_test(test_node_state_found_candidate_gone),
      cmocka_unit_test(test_node_state_found_next_candidate),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
