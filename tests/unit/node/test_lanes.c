/*
 * test_lanes.c: lanes (settings.streams) and the link probe
 * (settings.probe_bytes), against scripted peers (harness.h).
 */
#include "harness.h"

/* ------------------------------------------------------------- lanes */

/*
 * settings.streams: a node that calls a peer opens streams - 1 further
 * connections ("lanes") to the same address once the first one's HELLO
 * came. Round data (DATA, RESULT) takes the connections in turn; control
 * frames keep to the first. A lane that breaks hands what it had queued
 * to the first; LEAVE that comes on the first leaves the lanes open, for
 * the last chunks the leaver was writing on them; a node that leaves puts
 * what its lanes had not begun ahead of LEAVE on the first.
 */

/* Checks that the node dialled PEER_ADDR for conn[i]. */
static void expect_dialled(const tnode *t, unsigned i) {
  ded_addr a;
  assert_int_equal(ded_addr_parse(PEER_ADDR, &a), 0);
  assert_true(ded_addr_equal(&t->dialled[i], &a));
}

/* A node that calls its one peer, at PEER_ADDR, with |streams| connections
 * to each peer it calls; its first |rounds| rounds (weight 1, one rank)
 * submitted. conn[0] is the call, not established yet. */
static void tnode_start_calling(tnode *t, float *bufs[], unsigned rounds, uint8_t streams) {
  tnode_new(t, bufs, rounds, 1.0, 1, NULL, true, streams);
  /* Its DEDMPI_JOIN, and nothing else before anyone answers. */
  assert_int_equal(t->connects, 1);
  assert_int_equal(t->nconn, 1);
  expect_dialled(t, 0);
}

/* How many frames |out| holds; they fill it exactly. */
static int frame_count_all(const uint8_t *out, size_t len) {
  ded_frame_dec dec;
  ded_frame_dec_init(&dec, NULL);
  ded_frame fr;
  int n = 0, rv;
  while ((rv = ded_frame_dec_next(&dec, &out, &len, &fr)) == 1) n++;
  assert_int_equal(rv, 0);
  assert_int_equal(dec.have, 0); /* no frame cut short */
  ded_frame_dec_free(&dec);
  return n;
}

/* The type of the last frame in |out| (0: none). */
static uint8_t frame_last_type(const uint8_t *out, size_t len) {
  ded_frame_dec dec;
  ded_frame_dec_init(&dec, NULL);
  ded_frame fr;
  uint8_t type = 0;
  while (ded_frame_dec_next(&dec, &out, &len, &fr) == 1) type = fr.type;
  ded_frame_dec_free(&dec);
  return type;
}

/* The call on conn[i] is established and |peer| answers it: the node's
 * HELLO comes first, and alone; then |peer|'s. */
static void tnode_answer(tnode *t, unsigned i, const ded_ident *peer) {
  ded_node_conn_connected(t->node, t->conn[i], t->now);
  size_t len;
  uint8_t *out = tnode_output_on(t, i, &len, t->now);
  assert_int_equal(frame_count_all(out, len), 1);
  ded_frame fr;
  assert_true(frame_find(out, len, DED_MSG_HELLO, 0, &fr));
  free(out);
  send_hello(t, i, peer, RUN);
  assert_false(t->closed[i]);
}

/* The node's further calls (its lanes, conn[1..]) are established and
 * |peer| answers each: nothing but the HELLO goes on a lane (no table). */
static void tnode_lanes_up(tnode *t, const ded_ident *peer) {
  for (unsigned i = 1; i < t->nconn; i++) {
    tnode_answer(t, i, peer);
    size_t len;
    uint8_t *out = tnode_output_on(t, i, &len, t->now);
    assert_int_equal(len, 0);
    free(out);
  }
  assert_int_equal(ded_node_peer_count(t->node), 1);
}

/* What the node sent on each connection so far, as its peer read it. */
typedef struct twire {
  uint8_t *out[TN_PEERS];
  size_t len[TN_PEERS];
} twire;

static void twire_add(twire *w, unsigned i, const uint8_t *p, size_t n) {
  if (n == 0) return;
  w->out[i] = realloc(w->out[i], w->len[i] + n);
  assert_non_null(w->out[i]);
  memcpy(w->out[i] + w->len[i], p, n);
  w->len[i] += n;
}

/* Appends everything the node wants to send on connection |i| to |w|
 * (consumed). */
static void twire_take_on(tnode *t, twire *w, unsigned i) {
  size_t len;
  uint8_t *out = tnode_output_on(t, i, &len, t->now);
  twire_add(w, i, out, len);
  free(out);
}

/* The same, on every connection. */
static void twire_take(tnode *t, twire *w) {
  for (unsigned i = 0; i < t->nconn; i++) twire_take_on(t, w, i);
}

static void twire_free(twire *w) {
  for (unsigned i = 0; i < TN_PEERS; i++) free(w->out[i]);
  memset(w, 0, sizeof *w);
}

/* Round data frames (DATA and RESULT) on connection |i| of |w|. */
static int twire_data_frames(const twire *w, unsigned i) {
  return frame_count(w->out[i], w->len[i], DED_MSG_DATA) +
         frame_count(w->out[i], w->len[i], DED_MSG_RESULT);
}

/* Checks that the chunk of |type| at element offset |off| went exactly
 * once over the first |nconn| connections of |w|, whole and right (round
 * 0, |attempt|, CHUNK elements of |want|); the connection it took. */
static unsigned expect_chunk(const twire *w, unsigned nconn, uint8_t type, uint64_t attempt,
                             uint64_t off, const float *want) {
  unsigned found = 0, on = 0;
  for (unsigned i = 0; i < nconn; i++) {
    ded_frame fr;
    for (int k = 0; frame_find(w->out[i], w->len[i], type, k, &fr); k++) {
      ded_msg_data d;
      assert_int_equal(ded_msg_data_decode(fr.payload, fr.len, &d), 0);
      if (d.offset != off) continue;
      assert_int_equal(d.round, 0);
      assert_int_equal(d.attempt, attempt);
      assert_int_equal(d.len, CHUNK * sizeof(float));
      assert_memory_equal(d.elems, want, CHUNK * sizeof(float));
      found++;
      on = i;
    }
  }
  if (found != 1)
    fail_msg("%s at %llu went %u times over the node's connections", ded_msg_name(type),
             (unsigned long long)off, found);
  return on;
}

/* What the node has for connection |i|, not consumed (a peek at a socket
 * the driver has not written yet); NULL if nothing. */
static uint8_t *tnode_pending_on(tnode *t, unsigned i, size_t *len) {
  uint8_t *out = NULL;
  *len = 0;
  ded_iov iov[16];
  int n = ded_node_conn_pending(t->node, t->conn[i], iov, 16);
  assert_true(n < 16); /* all of it */
  for (int k = 0; k < n; k++) {
    out = realloc(out, *len + iov[k].len);
    assert_non_null(out);
    memcpy(out + *len, iov[k].base, iov[k].len);
    *len += iov[k].len;
  }
  return out;
}

static void send_leave_why(tnode *t, unsigned i, uint8_t reason) {
  uint8_t f[DED_LEAVE_FRAME_BYTES];
  ded_wr w = ded_wr_init(f, sizeof f);
  ded_msg_leave_encode(&w, reason);
  assert_false(w.err);
  send_raw(t, i, f, w.pos);
}

static void send_leave(tnode *t, unsigned i) { send_leave_why(t, i, DED_LEAVE_FINALIZE); }

/*
 * streams = 3: once the peer the node called says HELLO, the node opens
 * exactly two more connections to the same address, and no more when
 * those answer or time passes. streams = 0, 1: none. A node with
 * streams = 3 that was called opens none either.
 */
static void test_node_lanes_opened(void **state) {
  (void)state;
  float buf[COUNT], *bufs[1] = {buf};
  for (int i = 0; i < COUNT; i++) buf[i] = (float)i;
  const uint8_t streams[] = {0, 1, 2, 3};
  for (unsigned s = 0; s < sizeof streams; s++) {
    tnode t;
    tnode_start_calling(&t, bufs, 1, streams[s]);
    ded_ident lo, hi;
    peers_around(&t, &lo, &hi);
    /* Not before the first call is answered. */
    ded_node_conn_connected(t.node, t.conn[0], t.now);
    assert_int_equal(t.connects, 1);
    tnode_answer(&t, 0, &hi);
    assert_int_equal(ded_node_peer_count(t.node), 1);
    const unsigned want = streams[s] > 1 ? streams[s] : 1;
    assert_int_equal(t.connects, want);
    assert_int_equal(t.nconn, want);
    for (unsigned i = 1; i < want; i++) expect_dialled(&t, i);
    tnode_lanes_up(&t, &hi);
    assert_int_equal(t.connects, want);
    tnode_advance(&t, 1000ull * 1000 * 1000);
    assert_int_equal(t.connects, want);
    for (unsigned i = 0; i < want; i++) assert_false(t.closed[i]);
    assert_int_equal(ded_node_peer_count(t.node), 1);
    ded_node_free(t.node);
  }
  /* Called, not calling: one connection (tn_connect would count a call). */
  tnode t;
  tnode_new(&t, bufs, 1, 1.0, 1, NULL, false, 3);
  tnode_accept(&t);
  ded_ident lo, hi;
  peers_around(&t, &lo, &hi);
  send_hello(&t, 0, &hi, RUN);
  assert_int_equal(ded_node_peer_count(t.node), 1);
  tnode_advance(&t, 1000ull * 1000 * 1000);
  assert_int_equal(t.connects, 0);
  ded_node_free(t.node);
}

/*
 * A genesis round the node coordinates with the peer it calls (hi, the
 * larger id), on |streams| connections: lane_round_start brings them all
 * up and has hi JOIN on the first, so that the node commits: attempt
 * 0 << 32 | the node's id, the node's shard [0, COUNT/2), hi's the rest.
 * The node's output is not taken.
 */
typedef struct lane_round {
  ded_ident lo, hi;
  uint64_t attempt;
  float orig[COUNT];
  float peer_x[COUNT];
  float mean[COUNT]; /* node first: it has the smaller id */
} lane_round;

/* |buf|, the peer's vector and the mean of both. */
static void lane_round_values(float *buf, lane_round *lr) {
  for (int i = 0; i < COUNT; i++) {
    buf[i] = (float)i;
    lr->orig[i] = buf[i];
    lr->peer_x[i] = 100.0f + (float)i;
    lr->mean[i] = (buf[i] + lr->peer_x[i]) / 2.0f;
  }
}

/* hi JOINs the genesis round on connection |i|. */
static void lane_round_join_on(tnode *t, unsigned i, lane_round *lr) {
  ded_msg_join j;
  memset(&j, 0, sizeof j);
  j.dtype = DED_DTYPE_F32;
  j.count = COUNT;
  j.weight = 1.0;
  j.n_local = 1;
  j.flags = DED_JOIN_F_GENESIS;
  send_join(t, i, &j);
  lr->attempt = attempt_of(0, t->ident.id);
}

static void lane_round_join(tnode *t, lane_round *lr) { lane_round_join_on(t, 0, lr); }

static void lane_round_start(tnode *t, float *buf, uint8_t streams, lane_round *lr) {
  float *bufs[1] = {buf};
  lane_round_values(buf, lr);
  tnode_start_calling(t, bufs, 1, streams);
  peers_around(t, &lr->lo, &lr->hi);
  tnode_answer(t, 0, &lr->hi);
  assert_int_equal(t->nconn, streams);
  tnode_lanes_up(t, &lr->hi);
  lane_round_join(t, lr);
}

/* Checks the node's round result: the mean of both, as round 0. */
static void expect_lane_round_done(const tnode *t, const float *buf, const lane_round *lr) {
  assert_int_equal(t->rounds_done, 1);
  assert_int_equal(t->last.status, 0);
  assert_int_equal(t->last.round, 0);
  assert_int_equal(t->last.contributors, 2);
  assert_false(t->last.alone);
  assert_false(t->last.late);
  assert_int_equal(t->last.recoveries, 0);
  assert_memory_equal(buf, lr->mean, sizeof lr->mean);
}

/*
 * Runs a round lane_round_start began (hi joined) to its end, the peer
 * sending on the first connection, and checks the node's side of it on its
 * three connections: its DATA and RESULT chunks went over all three (each
 * got some), every chunk exactly once; its COMMIT and HAVE on the first
 * only, nothing but round data on the others; the exact mean.
 */
static void lane_round_spread(tnode *t, float *buf, lane_round *lr) {
  twire w;
  memset(&w, 0, sizeof w);
  twire_take(t, &w);
  send_chunks(t, 0, DED_MSG_DATA, 0, lr->attempt, 0, lr->peer_x, COUNT / 2);
  twire_take(t, &w);
  assert_int_equal(t->rounds_done, 0);
  send_chunks(t, 0, DED_MSG_RESULT, 0, lr->attempt, COUNT / 2, lr->mean + COUNT / 2, COUNT / 2);
  expect_lane_round_done(t, buf, lr);
  twire_take(t, &w);

  /* Every chunk once: our contribution to hi's shard, our shard's mean. */
  for (int k = 0; k < 2; k++) {
    expect_chunk(&w, 3, DED_MSG_DATA, lr->attempt, COUNT / 2 + CHUNK * k,
                 lr->orig + COUNT / 2 + CHUNK * k);
    expect_chunk(&w, 3, DED_MSG_RESULT, lr->attempt, CHUNK * k, lr->mean + CHUNK * k);
  }
  for (unsigned i = 0; i < 3; i++) {
    assert_false(t->closed[i]);
    /* Each connection carried round data. */
    assert_true(twire_data_frames(&w, i) > 0);
  }
  /* The decisions and the HAVE on the first connection only. */
  assert_int_equal(frame_count(w.out[0], w.len[0], DED_MSG_COMMIT), 1);
  uint8_t d[DED_RESULT_DIGEST_BYTES];
  result_digest(lr->mean, d);
  expect_have(w.out[0], w.len[0], 0, lr->attempt, 0, 0, d);
  for (unsigned i = 1; i < 3; i++)
    assert_int_equal(frame_count_all(w.out[i], w.len[i]), twire_data_frames(&w, i));
  twire_free(&w);
}

/* The node coordinates a round with the peer it calls, on three
 * connections. */
static void test_node_lanes_spread_data(void **state) {
  (void)state;
  float buf[COUNT];
  tnode t;
  lane_round lr;
  lane_round_start(&t, buf, 3, &lr);
  lane_round_spread(&t, buf, &lr);
  ded_node_free(t.node);
}

/* The called side: a peer that called the node on three connections gets
 * the node's round data over all three as well (the node opens none). */
static void test_node_lanes_called_spread_data(void **state) {
  (void)state;
  float buf[COUNT], *bufs[1] = {buf};
  lane_round lr;
  lane_round_values(buf, &lr);
  tnode t;
  tnode_start(&t, bufs, 1, 1.0, 1);
  peers_around(&t, &lr.lo, &lr.hi);
  send_hello(&t, 0, &lr.hi, RUN);
  for (unsigned i = 1; i < 3; i++) {
    assert_int_equal(tnode_accept(&t), i);
    send_hello(&t, i, &lr.hi, RUN);
    assert_false(t.closed[i]);
    /* The node's HELLO, and its table (a called node sends it on every
     * connection that says HELLO). */
    size_t len;
    uint8_t *out = tnode_output_on(&t, i, &len, t.now);
    assert_int_equal(frame_count(out, len, DED_MSG_HELLO), 1);
    assert_int_equal(frame_count_all(out, len), 1 + frame_count(out, len, DED_MSG_RECORDS));
    free(out);
  }
  assert_int_equal(ded_node_peer_count(t.node), 1);
  assert_int_equal(t.connects, 0);
  lane_round_join(&t, &lr);
  lane_round_spread(&t, buf, &lr);
  ded_node_free(t.node);
}

/*
 * The peer the node called coordinates, on three connections, and sends
 * its DATA and RESULT on the lanes: the node takes them (no connection
 * dropped) and ends the round with the exact result; its own JOIN and
 * HAVE stay on the first connection, its chunks go over all three.
 */
static void test_node_lanes_data_received(void **state) {
  (void)state;
  float buf[COUNT], orig[COUNT], *bufs[1] = {buf};
  for (int i = 0; i < COUNT; i++) orig[i] = buf[i] = (float)(i + 1);
  tnode t;
  tnode_start_calling(&t, bufs, 1, 3);
  ded_ident lo, hi;
  peers_around(&t, &lo, &hi);
  tnode_answer(&t, 0, &lo);
  tnode_lanes_up(&t, &lo);
  assert_int_equal(t.nconn, 3);
  twire w;
  memset(&w, 0, sizeof w);
  twire_take(&t, &w);
  /* It joined the genesis round at the peer, on the first connection. */
  assert_true(output_has_join(w.out[0], w.len[0], 0, NULL));

  ded_msg_member m[2];
  member_set(&m[0], lo.id, 3.0, 1, 0);
  member_set(&m[1], t.ident.id, 1.0, 1, COUNT / 2);
  const uint64_t attempt = attempt_of(0, lo.id);
  ded_msg_commit c = commit_of(0, attempt, 0, m, 2);
  send_commit(&t, 0, &c);
  twire_take(&t, &w);

  float peer_x[COUNT], peer_result[COUNT / 2], g[COUNT];
  for (int i = 0; i < COUNT; i++) peer_x[i] = (float)(10 * i) + 0.5f;
  const float a0 = 3.0f, a1 = 1.0f, W = 4.0f;
  for (int i = COUNT / 2; i < COUNT; i++) {
    float acc = a0 * peer_x[i];
    acc += a1 * buf[i];
    g[i] = acc / W;
  }
  for (int i = 0; i < COUNT / 2; i++) g[i] = peer_result[i] = (float)i * 0.25f;
  /* The peer's contribution to our shard, one chunk per lane. */
  send_data(&t, 1, DED_MSG_DATA, 0, attempt, COUNT / 2, peer_x + COUNT / 2, CHUNK);
  send_data(&t, 2, DED_MSG_DATA, 0, attempt, COUNT / 2 + CHUNK, peer_x + COUNT / 2 + CHUNK, CHUNK);
  twire_take(&t, &w);
  /* Its shard's mean, the other way round. */
  send_data(&t, 2, DED_MSG_RESULT, 0, attempt, 0, peer_result, CHUNK);
  assert_int_equal(t.rounds_done, 0);
  send_data(&t, 1, DED_MSG_RESULT, 0, attempt, CHUNK, peer_result + CHUNK, CHUNK);
  /* The node holds it all; the primary's HAVE is still missing. */
  assert_int_equal(t.rounds_done, 0);
  assert_memory_equal(buf, orig, sizeof orig);
  twire_take(&t, &w);
  uint8_t d[DED_RESULT_DIGEST_BYTES];
  result_digest(g, d);
  send_have(&t, 0, 0, attempt, 0, 0, d);
  assert_int_equal(t.rounds_done, 1);
  assert_int_equal(t.last.status, 0);
  assert_int_equal(t.last.contributors, 2);
  assert_true(t.last.total_weight == 4.0);
  assert_false(t.last.late);
  assert_memory_equal(buf, g, sizeof g); /* n_local = 1: g itself */
  for (unsigned i = 0; i < 3; i++) assert_false(t.closed[i]);

  for (int k = 0; k < 2; k++) {
    expect_chunk(&w, 3, DED_MSG_DATA, attempt, CHUNK * k, orig + CHUNK * k);
    expect_chunk(&w, 3, DED_MSG_RESULT, attempt, COUNT / 2 + CHUNK * k, g + COUNT / 2 + CHUNK * k);
  }
  for (unsigned i = 0; i < 3; i++) assert_true(twire_data_frames(&w, i) > 0);
  expect_have(w.out[0], w.len[0], 0, attempt, 0, 0, d);
  for (unsigned i = 1; i < 3; i++)
    assert_int_equal(frame_count_all(w.out[i], w.len[i]), twire_data_frames(&w, i));
  twire_free(&w);
  ded_node_free(t.node);
}

/* Frames queued on lanes 1 and 2, all of |type| (asserted); |first| gets
 * the first lane with any. */
static int lanes_queued(tnode *t, uint8_t type, unsigned *first) {
  int queued = 0;
  for (unsigned i = 1; i < 3; i++) {
    size_t len;
    uint8_t *out = tnode_pending_on(t, i, &len);
    int n = frame_count_all(out, len);
    assert_int_equal(frame_count(out, len, type), n);
    queued += n;
    if (n > 0 && *first == 0) *first = i;
    free(out);
  }
  return queued;
}

/*
 * Both lanes break with the node's DATA still queued on them, one of
 * them with a frame half written: the first connection sends every one of
 * those chunks, each exactly once and whole (the half-written one from its
 * start), and the round, on that connection alone from then on, ends with
 * the exact mean.
 */
static void test_node_lanes_lost_output_moves(void **state) {
  (void)state;
  float buf[COUNT];
  tnode t;
  lane_round lr;
  lane_round_start(&t, buf, 3, &lr);
  twire w;
  memset(&w, 0, sizeof w);
  twire_take_on(&t, &w, 0);
  assert_int_equal(frame_count(w.out[0], w.len[0], DED_MSG_COMMIT), 1);
  /* What waits on the lanes: DATA only, and some (two chunks, three
   * connections in turn). */
  unsigned half = 0;
  int queued = lanes_queued(&t, DED_MSG_DATA, &half);
  assert_true(queued >= 1);
  assert_int_equal(queued + frame_count(w.out[0], w.len[0], DED_MSG_DATA), 2);
  /* One lane hands part of a frame to its socket, then both break. */
  ded_node_conn_consume(t.node, t.conn[half], DED_DATA_HDR_BYTES + 8, t.now);
  ded_node_conn_closed(t.node, t.conn[1], DED_ERR_PEER_LOST, t.now);
  ded_node_conn_closed(t.node, t.conn[2], DED_ERR_PEER_LOST, t.now);
  assert_int_equal(ded_node_peer_count(t.node), 1);
  assert_false(t.closed[0]);
  twire_take_on(&t, &w, 0);
  for (int k = 0; k < 2; k++)
    expect_chunk(&w, 1, DED_MSG_DATA, lr.attempt, COUNT / 2 + CHUNK * k,
                 lr.orig + COUNT / 2 + CHUNK * k);
  frame_count_all(w.out[0], w.len[0]); /* whole frames, nothing cut */

  send_chunks(&t, 0, DED_MSG_DATA, 0, lr.attempt, 0, lr.peer_x, COUNT / 2);
  send_chunks(&t, 0, DED_MSG_RESULT, 0, lr.attempt, COUNT / 2, lr.mean + COUNT / 2, COUNT / 2);
  expect_lane_round_done(&t, buf, &lr);
  twire_take_on(&t, &w, 0);
  for (int k = 0; k < 2; k++)
    expect_chunk(&w, 1, DED_MSG_RESULT, lr.attempt, CHUNK * k, lr.mean + CHUNK * k);
  frame_count_all(w.out[0], w.len[0]);
  assert_false(t.closed[0]);
  twire_free(&w);
  ded_node_free(t.node);
}

/*
 * The node JOINs the genesis round of the peer it calls (lo, the smaller
 * id: the coordinator) on the first connection, and the driver hands the
 * frame to the socket; then that connection breaks and a lane takes over.
 * A reset loses what the kernels held, so the node JOINs again on the
 * lane, once; and it does not when no JOIN waits (sim_chaos seed 1446:
 * the JOIN lost with the connection, the coordinator short of
 * DEDMPI_MIN_PEERS for good, and no run).
 */
static void test_node_lanes_join_again_on_takeover(void **state) {
  (void)state;
  float buf[COUNT], *bufs[1] = {buf};
  for (int i = 0; i < COUNT; i++) buf[i] = (float)i;
  tnode t;
  tnode_start_calling(&t, bufs, 1, 3);
  ded_ident lo, hi;
  peers_around(&t, &lo, &hi);
  tnode_answer(&t, 0, &lo);
  tnode_lanes_up(&t, &lo);
  size_t len;
  uint8_t *out = tnode_output_on(&t, 0, &len, t.now);
  ded_msg_join j;
  assert_true(output_has_join(out, len, 0, &j));
  assert_true(j.flags & DED_JOIN_F_GENESIS);
  free(out);
  ded_node_conn_closed(t.node, t.conn[0], DED_ERR_PEER_LOST, t.now);
  assert_int_equal(ded_node_peer_count(t.node), 1);
  int joins = 0;
  for (unsigned i = 1; i < t.nconn; i++) {
    out = tnode_output_on(&t, i, &len, t.now);
    joins += frame_count(out, len, DED_MSG_JOIN);
    if (output_has_join(out, len, 0, &j)) assert_int_equal(j.view, 0);
    free(out);
  }
  if (joins != 1) fail_msg("%d JOINs after the takeover, not 1", joins);
  /* lo's COMMIT comes: the round runs, and another takeover sends no JOIN. */
  ded_msg_member m[2];
  member_set(&m[0], lo.id, 1.0, 1, 0);
  member_set(&m[1], t.ident.id, 1.0, 1, COUNT / 2);
  ded_msg_commit c = commit_of(0, attempt_of(0, lo.id), 0, m, 2);
  unsigned first = 1; /* the connection that took over: the lanes in order */
  send_commit(&t, first, &c);
  for (unsigned i = 1; i < t.nconn; i++) free(tnode_output_on(&t, i, &len, t.now));
  ded_node_conn_closed(t.node, t.conn[first], DED_ERR_PEER_LOST, t.now);
  joins = 0;
  for (unsigned i = 1; i < t.nconn; i++) {
    if (t.closed[i] || i == first) continue;
    out = tnode_output_on(&t, i, &len, t.now);
    joins += frame_count(out, len, DED_MSG_JOIN);
    free(out);
  }
  assert_int_equal(joins, 0);
  ded_node_free(t.node);
}

/*
 * The node coordinates the genesis round and sends its COMMIT on the first
 * connection, which then breaks; hi JOINs view 0 again on the connection
 * that took over (its COMMIT may be lost). The node sends the COMMIT
 * again, not STALE (it is past the first round: before, that answer made
 * a member that lost its COMMIT take itself for out of step).
 */
static void test_node_lanes_commit_again_on_join(void **state) {
  (void)state;
  float buf[COUNT];
  tnode t;
  lane_round lr;
  lane_round_start(&t, buf, 3, &lr);
  twire w;
  memset(&w, 0, sizeof w);
  twire_take(&t, &w);
  assert_int_equal(frame_count(w.out[0], w.len[0], DED_MSG_COMMIT), 1);
  twire_free(&w);
  ded_node_conn_closed(t.node, t.conn[0], DED_ERR_PEER_LOST, t.now);
  assert_int_equal(ded_node_peer_count(t.node), 1);
  twire_take(&t, &w); /* what the takeover sent */
  twire_free(&w);
  lane_round_join_on(&t, 1, &lr);
  twire_take(&t, &w);
  int commits = 0, stales = 0;
  for (unsigned i = 1; i < t.nconn; i++) {
    commits += frame_count(w.out[i], w.len[i], DED_MSG_COMMIT);
    stales += frame_count(w.out[i], w.len[i], DED_MSG_STALE);
  }
  if (commits != 1 || stales != 0)
    fail_msg("a second JOIN of the decided view got %d COMMITs and %d STALEs", commits, stales);
  twire_free(&w);
  ded_node_free(t.node);
}

/*
 * The peer leaves: LEAVE comes on the first connection, while its last
 * RESULT chunk is still on its way on a lane. The node closes the first
 * connection but not the lanes, takes that chunk and ends the round with
 * the exact mean; each lane ends with its own LEAVE (or its socket), and
 * the peer is down with the last of them.
 */
static void test_node_lanes_survive_leave(void **state) {
  (void)state;
  float buf[COUNT];
  tnode t;
  lane_round lr;
  lane_round_start(&t, buf, 3, &lr);
  send_chunks(&t, 0, DED_MSG_DATA, 0, lr.attempt, 0, lr.peer_x, COUNT / 2);
  twire w;
  memset(&w, 0, sizeof w);
  twire_take(&t, &w);
  send_data(&t, 1, DED_MSG_RESULT, 0, lr.attempt, COUNT / 2, lr.mean + COUNT / 2, CHUNK);
  send_leave(&t, 0);
  assert_true(t.closed[0]);
  assert_false(t.closed[1]);
  assert_false(t.closed[2]);
  assert_int_equal(t.rounds_done, 0);
  assert_int_equal(ded_node_peer_count(t.node), 1);
  send_data(&t, 2, DED_MSG_RESULT, 0, lr.attempt, COUNT / 2 + CHUNK, lr.mean + COUNT / 2 + CHUNK,
            CHUNK);
  expect_lane_round_done(&t, buf, &lr);
  assert_false(t.closed[1]);
  assert_false(t.closed[2]);
  send_leave(&t, 1);
  assert_true(t.closed[1]);
  assert_false(t.closed[2]);
  assert_int_equal(ded_node_peer_count(t.node), 1);
  ded_node_conn_closed(t.node, t.conn[2], DED_ERR_PEER_LOST, t.now);
  assert_int_equal(ded_node_peer_count(t.node), 0);
  assert_int_equal(t.rounds_done, 1);
  twire_free(&w);
  ded_node_free(t.node);
}

/*
 * The node leaves with RESULT chunks of a round it finished still queued
 * on its lanes: LEAVE goes once on every connection, the last frame there,
 * behind what that connection still had to send (one a lane is halfway
 * through writing too). Every chunk reaches the peer once, whole.
 */
static void test_node_lanes_leave_last_on_each(void **state) {
  (void)state;
  for (int halfway = 0; halfway < 2; halfway++) {
    float buf[COUNT];
    tnode t;
    lane_round lr;
    lane_round_start(&t, buf, 3, &lr);
    twire w;
    memset(&w, 0, sizeof w);
    twire_take_on(&t, &w, 0);
    send_chunks(&t, 0, DED_MSG_DATA, 0, lr.attempt, 0, lr.peer_x, COUNT / 2);
    twire_take_on(&t, &w, 0);
    send_chunks(&t, 0, DED_MSG_RESULT, 0, lr.attempt, COUNT / 2, lr.mean + COUNT / 2, COUNT / 2);
    expect_lane_round_done(&t, buf, &lr);
    twire_take_on(&t, &w, 0);
    /* The lanes still hold RESULTs (DATA into the caller's buffer went
     * when the round ended). */
    unsigned busy = 0;
    int queued = lanes_queued(&t, DED_MSG_RESULT, &busy);
    assert_true(queued >= 1);
    if (halfway) { /* the lane hands part of its first frame to its socket */
      size_t len;
      uint8_t *out = tnode_pending_on(&t, busy, &len);
      twire_add(&w, busy, out, DED_DATA_HDR_BYTES + 8);
      free(out);
      ded_node_conn_consume(t.node, t.conn[busy], DED_DATA_HDR_BYTES + 8, t.now);
    }
    ded_node_leave(t.node, t.now);
    twire_take(&t, &w);
    /* LEAVE once, last, on each connection. */
    for (unsigned i = 0; i < 3; i++) {
      assert_int_equal(frame_count(w.out[i], w.len[i], DED_MSG_LEAVE), 1);
      assert_int_equal(frame_last_type(w.out[i], w.len[i]), DED_MSG_LEAVE);
    }
    /* Every chunk of our shard's mean reached the peer once, whole. */
    for (int k = 0; k < 2; k++)
      expect_chunk(&w, 3, DED_MSG_RESULT, lr.attempt, CHUNK * k, lr.mean + CHUNK * k);
    /* What the lanes had queued stayed there, ahead of their LEAVE. */
    int on_lanes = frame_count_all(w.out[1], w.len[1]) + frame_count_all(w.out[2], w.len[2]);
    assert_int_equal(on_lanes, queued + 2);
    assert_true(ded_node_flushed(t.node));
    twire_free(&w);
    ded_node_free(t.node);
  }
}

/* The reason in the last frame of |out|, a LEAVE. */
static uint8_t last_leave_reason(const uint8_t *out, size_t len) {
  ded_frame_dec dec;
  ded_frame_dec_init(&dec, NULL);
  ded_frame fr;
  uint8_t reason = 0;
  while (ded_frame_dec_next(&dec, &out, &len, &fr) == 1) {
    assert_int_equal(fr.type, DED_MSG_LEAVE); /* nothing but LEAVE was left to send */
    assert_int_equal(ded_msg_leave_decode(fr.payload, fr.len, &reason), 0);
  }
  ded_frame_dec_free(&dec);
  return reason;
}

/*
 * A job that could not take part says why: its LEAVE carries the first
 * failure reason it was given (an ordinary end given first does not take
 * its place), on every connection. Its peer logs that reason at warn
 * once, though each connection brings a LEAVE; a plain goodbye logs
 * nothing at warn.
 */
static void test_node_leave_reason(void **state) {
  (void)state;
  float buf[COUNT], *bufs[1] = {buf};
  memset(buf, 0, sizeof buf);
  /* Sending. */
  tnode t;
  tnode_start_calling(&t, bufs, 1, 3);
  ded_ident lo, hi;
  peers_around(&t, &lo, &hi);
  tnode_answer(&t, 0, &hi);
  tnode_lanes_up(&t, &hi);
  twire w;
  memset(&w, 0, sizeof w);
  twire_take(&t, &w);
  twire_free(&w);
  ded_node_leave_reason(t.node, DED_LEAVE_FINALIZE);
  ded_node_leave_reason(t.node, 0);
  ded_node_leave_reason(t.node, DED_LEAVE_REASON_MAX + 1);
  ded_node_leave_reason(t.node, DED_LEAVE_MISMATCH_STEP);
  ded_node_leave_reason(t.node, DED_LEAVE_ERROR);
  ded_node_leave(t.node, t.now);
  twire_take(&t, &w);
  for (unsigned i = 0; i < 3; i++) assert_int_equal(last_leave_reason(w.out[i], w.len[i]), DED_LEAVE_MISMATCH_STEP);
  twire_free(&w);
  ded_node_free(t.node);
  /* Receiving: the peer leaves on each of its three connections. */
  for (int failed = 0; failed < 2; failed++) {
    tnode_start_calling(&t, bufs, 1, 3);
    peers_around(&t, &lo, &hi);
    tnode_answer(&t, 0, &hi);
    tnode_lanes_up(&t, &hi);
    t.log_want = " left the run: its training step differs from the swarm's";
    for (unsigned i = 0; i < 3; i++)
      send_leave_why(&t, i, failed ? DED_LEAVE_MISMATCH_STEP : DED_LEAVE_FINALIZE);
    assert_int_equal(ded_node_peer_count(t.node), 0);
    assert_int_equal(t.log_hits, failed ? 1 : 0);
    ded_node_free(t.node);
  }
}

/* ------------------------------------------------------- link probe */

/* The SPEED frames in |out|: how many, their fill in all, and the want of
 * the first (and that every later one wants nothing). */
static int speed_frames(const uint8_t *out, size_t len, size_t *fill, uint32_t *want) {
  *fill = 0;
  *want = 0;
  ded_frame fr;
  int n = 0;
  for (; frame_find(out, len, DED_MSG_SPEED, n, &fr); n++) {
    ded_msg_speed m;
    assert_int_equal(ded_msg_speed_decode(fr.payload, fr.len, &m), 0);
    if (n == 0)
      *want = m.want;
    else
      assert_int_equal(m.want, 0);
    *fill += m.len;
  }
  return n;
}

static void send_speed(tnode *t, unsigned i, uint32_t want, size_t fill) {
  uint8_t *f = calloc(1, DED_SPEED_HDR_BYTES + fill);
  assert_non_null(f);
  ded_msg_speed_hdr_encode(f, want, fill);
  send_raw(t, i, f, DED_SPEED_HDR_BYTES + fill);
  free(f);
}

/*
 * settings.probe_bytes: the node sends that much filler to the first peer
 * that comes up and asks for as much back, once; it answers each peer's
 * first ask with the bytes asked for, ignores a second, and drops a peer
 * that asks for more than DED_SPEED_WANT_MAX.
 */
static void test_node_link_probe(void **state) {
  (void)state;
  const uint32_t probe = 600 * 1024; /* more than one frame's fill */
  float b0[COUNT];
  float *bufs[1] = {b0};
  tnode t;
  tn_next_probe = probe;
  tnode_start_calling(&t, bufs, 0, 1);
  t.log_want = "probing links";
  ded_ident lo, hi;
  peers_around(&t, &lo, &hi);
  tnode_answer(&t, 0, &hi);
  size_t len, fill;
  uint32_t want;
  uint8_t *out = tnode_output_on(&t, 0, &len, t.now);
  assert_int_equal(speed_frames(out, len, &fill, &want), 2);
  assert_int_equal(fill, probe);
  assert_int_equal(want, probe);
  assert_int_equal(t.log_hits, 1);
  free(out);
  /* The answer is read and dropped: nothing goes back. */
  send_speed(&t, 0, 0, 4096);
  out = tnode_output_on(&t, 0, &len, t.now);
  assert_int_equal(len, 0);
  free(out);
  /* A second peer: no probe of ours; its ask is answered, once. */
  unsigned i = tnode_accept(&t);
  send_hello(&t, i, &lo, RUN);
  out = tnode_output_on(&t, i, &len, t.now);
  assert_int_equal(speed_frames(out, len, &fill, &want), 0);
  free(out);
  send_speed(&t, i, 5000, 10);
  out = tnode_output_on(&t, i, &len, t.now);
  assert_int_equal(speed_frames(out, len, &fill, &want), 1);
  assert_int_equal(fill, 5000);
  assert_int_equal(want, 0);
  free(out);
  send_speed(&t, i, 5000, 0);
  out = tnode_output_on(&t, i, &len, t.now);
  assert_int_equal(len, 0);
  free(out);
  assert_false(t.closed[i]);
  /* Asking for more than any peer answers is a violation. */
  send_speed(&t, 0, DED_SPEED_WANT_MAX + 1, 0);
  assert_true(t.closed[0]);
  assert_false(t.closed[i]);
  assert_int_equal(t.log_hits, 1);
  ded_node_free(t.node);
}

/* The position of the first frame of |type| in |out| (frames counted
 * from 0), or -1. */
static int frame_index(const uint8_t *out, size_t len, uint8_t type) {
  ded_frame_dec dec;
  ded_frame_dec_init(&dec, NULL);
  ded_frame fr;
  int i = 0, at = -1;
  for (; at < 0 && ded_frame_dec_next(&dec, &out, &len, &fr) == 1; i++)
    if (fr.type == type) at = i;
  ded_frame_dec_free(&dec);
  return at;
}

/* A probe queued before a round begins does not delay the round: the
 * round's COMMIT and contributions, queued after the filler, go out
 * first (the filler is the lowest class of output), and the filler not
 * yet handed over is dropped once the round has data to send, so it
 * never lands in the sockets at the round's end, ahead of the next
 * round's control frames. */
static void test_node_probe_behind_round(void **state) {
  (void)state;
  float buf[COUNT], *bufs[1] = {buf};
  for (int i = 0; i < COUNT; i++) buf[i] = (float)i;
  tnode t;
  tn_next_probe = 64 * 1024;
  tnode_start(&t, bufs, 1, 1.0, 1);
  ded_ident lo, hi;
  peers_around(&t, &lo, &hi);
  send_hello(&t, 0, &hi, RUN); /* the peer is up: the probe is queued */
  ded_msg_join j;
  memset(&j, 0, sizeof j);
  j.dtype = DED_DTYPE_F32;
  j.count = COUNT;
  j.weight = 1.0;
  j.n_local = 1;
  j.flags = DED_JOIN_F_GENESIS;
  send_join(&t, 0, &j);
  size_t len;
  uint8_t *out = tnode_output(&t, &len, NOW_NS);
  int speed = frame_index(out, len, DED_MSG_SPEED), commit = frame_index(out, len, DED_MSG_COMMIT);
  assert_true(commit >= 0);
  assert_int_equal(frame_count(out, len, DED_MSG_DATA), 2);
  assert_int_equal(speed, -1);
  free(out);
  /* Nothing of it comes later either. */
  out = tnode_output(&t, &len, NOW_NS + SEC_NS);
  assert_int_equal(frame_index(out, len, DED_MSG_SPEED), -1);
  free(out);
  ded_node_free(t.node);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_node_lanes_opened),
      cmocka_unit_test(test_node_lanes_spread_data),
      cmocka_unit_test(test_node_lanes_called_spread_data),
      cmocka_unit_test(test_node_lanes_data_received),
      cmocka_unit_test(test_node_lanes_lost_output_moves),
      cmocka_unit_test(test_node_lanes_join_again_on_takeover),
      cmocka_unit_test(test_node_lanes_commit_again_on_join),
      cmocka_unit_test(test_node_lanes_survive_leave),
      cmocka_unit_test(test_node_lanes_leave_last_on_each),
      cmocka_unit_test(test_node_leave_reason),
      cmocka_unit_test(test_node_link_probe),
      cmocka_unit_test(test_node_probe_behind_round),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
