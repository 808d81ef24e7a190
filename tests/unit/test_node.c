/*
 * test_node.c: ded_node against one scripted peer.
 *
 * The peer is bytes the test writes (ngtcp2's conn tests: scripted input,
 * integer time). It checks what only the whole node shows: that a round
 * averages with the commit's weights in the commit's order, that the node
 * says the right things on the wire, and that strangers are dropped.
 * Rounds under load, loss and crashes are the simulator's job (tests/sim).
 */
#include "unit_util.h"

#include "core/ded_limits.h"
#include "core/ded_msg.h"
#include "ded_node.h"

#define RUN "unit-node"
#define NOW_NS (1000ull * 1000 * 1000 * 1000)
#define NOW_MS (NOW_NS / 1000000)
/* Elements per chunk: 64 bytes of float, the smallest chunk a COMMIT may
 * carry (DED_CHUNK_BYTES_MIN); every shard below is two chunks. */
#define CHUNK 16
#define COUNT (4 * CHUNK)
#define TICK_NS (20ull * 1000 * 1000) /* ded_node.c's timer period */

static const uint8_t node_seed[DED_SEED_BYTES] = {9, 9, 9};

typedef struct tnode {
  ded_node *node;
  ded_ident ident; /* the node's, for building commits */
  uint32_t conn;
  bool closed; /* the node closed |conn| */
  int rounds_done;
  ded_round_result last;
  uint8_t last_members[2][DED_ID_BYTES];
} tnode;

static int tn_connect(void *user, uint32_t conn_id, const ded_addr *addr) {
  (void)user;
  (void)conn_id;
  (void)addr;
  return -1;
}

static void tn_close(void *user, uint32_t conn_id) {
  tnode *t = user;
  if (conn_id == t->conn) t->closed = true;
}

static void tn_round_done(void *user, void *ctx, const ded_round_result *res) {
  tnode *t = user;
  (void)ctx;
  t->rounds_done++;
  t->last = *res;
  if (res->members && res->contributors == 2)
    memcpy(t->last_members, res->members, sizeof t->last_members);
  t->last.members = NULL;
}

/* A node that waits for one peer, with its first |rounds| rounds (f32,
 * COUNT elements, weight |w|, |n_local| ranks) submitted, and an inbound
 * connection from the peer. */
static void tnode_start(tnode *t, float *bufs[], unsigned rounds, double w, uint32_t n_local) {
  memset(t, 0, sizeof *t);
  assert_int_equal(ded_crypto_init(), 0);
  ded_ident_from_seed(&t->ident, node_seed);
  ded_node_settings s;
  memset(&s, 0, sizeof s);
  s.run = RUN;
  s.min_peers = 2;
  s.identity_seed = node_seed;
  s.rendezvous_timeout_ns = 10ull * 1000 * 1000 * 1000;
  s.round_timeout_ns = 10ull * 1000 * 1000 * 1000;
  s.chunk_bytes = 64;
  ded_node_callbacks cb;
  memset(&cb, 0, sizeof cb);
  cb.connect = tn_connect;
  cb.close = tn_close;
  cb.round_done = tn_round_done;
  assert_int_equal(ded_node_new(&s, &cb, t, NOW_NS, &t->node), 0);
  assert_int_equal(ded_node_start(t->node, NOW_NS), 0);
  for (unsigned r = 0; r < rounds; r++) {
    ded_round_args a = {bufs[r], COUNT, DED_DTYPE_F32, w, n_local, NULL};
    assert_int_equal(ded_node_round_submit(t->node, &a, NOW_NS), r);
  }
  ded_addr remote;
  assert_int_equal(ded_addr_parse("10.0.0.2:4000", &remote), 0);
  assert_int_equal(ded_node_conn_accepted(t->node, &remote, &t->conn, NOW_NS), 0);
}

/* Everything the node wants to send on the connection, consumed. */
static uint8_t *tnode_output(tnode *t, size_t *len, uint64_t now) {
  uint8_t *out = NULL;
  *len = 0;
  ded_iov iov[16];
  int n;
  while ((n = ded_node_conn_pending(t->node, t->conn, iov, 16)) > 0) {
    size_t total = 0;
    for (int i = 0; i < n; i++) {
      out = realloc(out, *len + iov[i].len);
      assert_non_null(out);
      memcpy(out + *len, iov[i].base, iov[i].len);
      *len += iov[i].len;
      total += iov[i].len;
    }
    ded_node_conn_consume(t->node, t->conn, total, now);
  }
  return out;
}

/* The |nth| frame of |type| in |out|, or false. */
static bool frame_find(const uint8_t *out, size_t len, uint8_t type, int nth, ded_frame *found) {
  ded_frame_dec dec;
  ded_frame_dec_init(&dec, NULL);
  ded_frame fr;
  bool ok = false;
  while (!ok && ded_frame_dec_next(&dec, &out, &len, &fr) == 1)
    if (fr.type == type && nth-- == 0) {
      *found = fr;
      ok = true;
    }
  ded_frame_dec_free(&dec);
  return ok;
}

static bool output_has_join(const uint8_t *out, size_t len, uint64_t round, ded_msg_join *join) {
  ded_frame fr;
  for (int i = 0; frame_find(out, len, DED_MSG_JOIN, i, &fr); i++) {
    ded_msg_join j;
    assert_int_equal(ded_msg_join_decode(fr.payload, fr.len, &j), 0);
    if (j.round == round) {
      if (join) *join = j;
      return true;
    }
  }
  return false;
}

static void send_hello(tnode *t, const ded_ident *peer, const char *run) {
  uint8_t f[DED_HELLO_FRAME_BYTES(DED_RECORD_BYTES_MAX)];
  size_t n = unit_hello_frame(f, sizeof f, peer, run, NOW_MS);
  ded_node_conn_recv(t->node, t->conn, f, n, NOW_NS);
}

static void send_data(tnode *t, uint8_t type, uint64_t round, uint64_t off, const float *v,
                      size_t n) {
  uint8_t f[DED_DATA_HDR_BYTES + COUNT * sizeof(float)];
  ded_msg_data_hdr_encode(f, type, round, off, n * sizeof(float));
  memcpy(f + DED_DATA_HDR_BYTES, v, n * sizeof(float));
  ded_node_conn_recv(t->node, t->conn, f, DED_DATA_HDR_BYTES + n * sizeof(float), NOW_NS);
}

/* |n| elements from |off| as frames of CHUNK elements. */
static void send_chunks(tnode *t, uint8_t type, uint64_t round, uint64_t off, const float *v,
                        size_t n) {
  for (size_t i = 0; i < n; i += CHUNK) send_data(t, type, round, off + i, v + i, CHUNK);
}

/* Identities sorting before and after the node's. */
static void peers_around(const tnode *t, ded_ident *lo, ded_ident *hi) {
  bool have_lo = false, have_hi = false;
  for (unsigned s = 1; s < 256 && !(have_lo && have_hi); s++) {
    ded_ident id;
    unit_ident(&id, (uint8_t)s);
    int c = memcmp(id.id, t->ident.id, DED_ID_BYTES);
    if (c < 0 && !have_lo) {
      *lo = id;
      have_lo = true;
    } else if (c > 0 && !have_hi) {
      *hi = id;
      have_hi = true;
    }
  }
  assert_true(have_lo && have_hi);
}

/*
 * The peer coordinates. Weights 3 (peer, 1 rank) and 1 (node, 2 ranks):
 * the node reduces the second shard as ((a0 x_peer) + (a1 x_node)) / W in
 * float, a_m = w_m / n_m, W = 4, and hands back n_local times the mean.
 * Chunks of 2 elements: each shard travels in two frames.
 */
static void test_node_round_peer_coordinates(void **state) {
  (void)state;
  float buf[COUNT], *bufs[1] = {buf};
  for (int i = 0; i < COUNT; i++) buf[i] = (float)(i + 1);
  tnode t;
  tnode_start(&t, bufs, 1, 1.0, 2);
  ded_ident lo, hi;
  peers_around(&t, &lo, &hi);
  send_hello(&t, &lo, RUN);
  assert_false(t.closed);
  assert_int_equal(ded_node_peer_count(t.node), 1);
  size_t len;
  uint8_t *out = tnode_output(&t, &len, NOW_NS);
  /* The node answered with its HELLO and joined the genesis round at the
   * smallest id it sees: the peer's. */
  ded_frame fr;
  assert_true(frame_find(out, len, DED_MSG_HELLO, 0, &fr));
  ded_msg_join j;
  assert_true(output_has_join(out, len, 0, &j));
  assert_int_equal(j.dtype, DED_DTYPE_F32);
  assert_int_equal(j.count, COUNT);
  assert_true(j.weight == 1.0);
  assert_int_equal(j.n_local, 2);
  assert_int_equal(j.flags, DED_JOIN_F_GENESIS);
  free(out);

  ded_msg_member m[2];
  memset(m, 0, sizeof m);
  memcpy(m[0].id, lo.id, DED_ID_BYTES);
  m[0].weight = 3.0;
  m[0].n_local = 1;
  memcpy(m[1].id, t.ident.id, DED_ID_BYTES);
  m[1].weight = 1.0;
  m[1].n_local = 2;
  m[1].shard_off = COUNT / 2;
  ded_msg_commit c = {0, DED_DTYPE_F32, COUNT, CHUNK, 2, m};
  uint8_t cf[DED_COMMIT_FRAME_BYTES(2)];
  ded_wr w = ded_wr_init(cf, sizeof cf);
  ded_msg_commit_encode(&w, &c);
  ded_node_conn_recv(t.node, t.conn, cf, w.pos, NOW_NS);
  assert_false(t.closed);

  float peer_x[COUNT], peer_result[COUNT / 2], want[COUNT];
  for (int i = 0; i < COUNT; i++) peer_x[i] = (float)(10 * i) + 0.5f;
  const float a0 = (float)(3.0 / 1.0), a1 = (float)(1.0 / 2.0), W = 4.0f;
  for (int i = COUNT / 2; i < COUNT; i++) {
    float acc = a0 * peer_x[i];
    acc += a1 * buf[i];
    want[i] = 2.0f * (acc / W);
  }
  for (int i = 0; i < COUNT / 2; i++) {
    peer_result[i] = (float)i * 0.25f;
    want[i] = 2.0f * peer_result[i];
  }
  /* On the wire: our vector's first shard, to its reducer, in chunks. */
  out = tnode_output(&t, &len, NOW_NS);
  for (int k = 0; k < 2; k++) {
    assert_true(frame_find(out, len, DED_MSG_DATA, k, &fr));
    ded_msg_data d;
    assert_int_equal(ded_msg_data_decode(fr.payload, fr.len, &d), 0);
    assert_int_equal(d.round, 0);
    assert_int_equal(d.offset, CHUNK * k);
    assert_int_equal(d.len, CHUNK * sizeof(float));
    assert_memory_equal(d.elems, buf + CHUNK * k, CHUNK * sizeof(float));
  }
  free(out);
  send_chunks(&t, DED_MSG_DATA, 0, COUNT / 2, peer_x + COUNT / 2, COUNT / 2);
  /* Our shard is reduced: its mean (before the n_local scaling) goes back. */
  out = tnode_output(&t, &len, NOW_NS);
  for (int k = 0; k < 2; k++) {
    assert_true(frame_find(out, len, DED_MSG_RESULT, k, &fr));
    ded_msg_data d;
    assert_int_equal(ded_msg_data_decode(fr.payload, fr.len, &d), 0);
    assert_int_equal(d.offset, COUNT / 2 + CHUNK * k);
    float mean[CHUNK];
    for (int i = 0; i < CHUNK; i++) mean[i] = want[COUNT / 2 + CHUNK * k + i] / 2.0f;
    assert_memory_equal(d.elems, mean, sizeof mean);
  }
  send_data(&t, DED_MSG_RESULT, 0, 0, peer_result, CHUNK);
  assert_int_equal(t.rounds_done, 0);
  send_data(&t, DED_MSG_RESULT, 0, CHUNK, peer_result + CHUNK, CHUNK);
  assert_int_equal(t.rounds_done, 1);
  assert_int_equal(t.last.status, 0);
  assert_int_equal(t.last.contributors, 2);
  assert_true(t.last.total_weight == 4.0);
  assert_false(t.last.alone);
  assert_memory_equal(t.last_members[0], lo.id, DED_ID_BYTES);
  assert_memory_equal(t.last_members[1], t.ident.id, DED_ID_BYTES);
  assert_memory_equal(buf, want, sizeof want);
  free(out);
  ded_node_free(t.node);
}

/* The node coordinates: its COMMIT lists both, in id order, with equal
 * shares and chunks of chunk_bytes. */
static void test_node_round_node_coordinates(void **state) {
  (void)state;
  float buf[COUNT], *bufs[1] = {buf};
  for (int i = 0; i < COUNT; i++) buf[i] = (float)i;
  tnode t;
  tnode_start(&t, bufs, 1, 1.0, 1);
  ded_ident lo, hi;
  peers_around(&t, &lo, &hi);
  send_hello(&t, &hi, RUN);
  size_t len;
  uint8_t *out = tnode_output(&t, &len, NOW_NS);
  assert_false(output_has_join(out, len, 0, NULL)); /* it joined itself */
  free(out);
  uint8_t jf[DED_JOIN_FRAME_BYTES];
  ded_wr w = ded_wr_init(jf, sizeof jf);
  ded_msg_join j = {0, DED_DTYPE_F32, COUNT, 1.0, 1, DED_JOIN_F_GENESIS};
  ded_msg_join_encode(&w, &j);
  ded_node_conn_recv(t.node, t.conn, jf, w.pos, NOW_NS);
  out = tnode_output(&t, &len, NOW_NS);
  ded_frame fr;
  assert_true(frame_find(out, len, DED_MSG_COMMIT, 0, &fr));
  ded_msg_commit c;
  assert_int_equal(ded_msg_commit_decode(fr.payload, fr.len, NULL, &c), 0);
  assert_int_equal(c.round, 0);
  assert_int_equal(c.k, 2);
  assert_int_equal(c.count, COUNT);
  assert_int_equal(c.chunk_elems, 64 / sizeof(float));
  assert_memory_equal(c.members[0].id, t.ident.id, DED_ID_BYTES);
  assert_memory_equal(c.members[1].id, hi.id, DED_ID_BYTES);
  assert_int_equal(c.members[0].shard_off, 0);
  assert_int_equal(c.members[1].shard_off, COUNT / 2);
  ded_msg_commit_free(&c, NULL);
  free(out);

  float peer_x[COUNT], mean[COUNT];
  for (int i = 0; i < COUNT; i++) {
    peer_x[i] = 100.0f + (float)i;
    mean[i] = (buf[i] + peer_x[i]) / 2.0f; /* node first: it has the smaller id */
  }
  send_chunks(&t, DED_MSG_DATA, 0, 0, peer_x, COUNT / 2);
  send_chunks(&t, DED_MSG_RESULT, 0, COUNT / 2, mean + COUNT / 2, COUNT / 2);
  assert_int_equal(t.rounds_done, 1);
  assert_int_equal(t.last.status, 0);
  assert_memory_equal(buf, mean, sizeof mean);
  ded_node_free(t.node);
}

/* The whole peer-coordinated conversation, one byte per read, gives the
 * same bits as whole frames. */
static void test_node_bytewise(void **state) {
  (void)state;
  float buf[COUNT], *bufs[1] = {buf};
  for (int i = 0; i < COUNT; i++) buf[i] = (float)(i * 3);
  tnode t;
  tnode_start(&t, bufs, 1, 1.0, 1);
  ded_ident lo, hi;
  peers_around(&t, &lo, &hi);
  uint8_t script[4096];
  size_t n = unit_hello_frame(script, sizeof script, &lo, RUN, NOW_MS);
  ded_msg_member m[2];
  memset(m, 0, sizeof m);
  memcpy(m[0].id, lo.id, DED_ID_BYTES);
  memcpy(m[1].id, t.ident.id, DED_ID_BYTES);
  m[0].weight = m[1].weight = 1.0;
  m[0].n_local = m[1].n_local = 1;
  m[1].shard_off = COUNT / 2;
  ded_msg_commit c = {0, DED_DTYPE_F32, COUNT, CHUNK, 2, m};
  ded_wr w = ded_wr_init(script + n, sizeof script - n);
  ded_msg_commit_encode(&w, &c);
  n += w.pos;
  float peer_x[COUNT / 2], result[COUNT / 2], want[COUNT];
  for (int i = 0; i < COUNT / 2; i++) {
    peer_x[i] = (float)(i + 1);
    result[i] = (float)(i + 5);
  }
  for (int k = 0; k < COUNT / 2; k += CHUNK) {
    ded_msg_data_hdr_encode(script + n, DED_MSG_DATA, 0, COUNT / 2 + k, CHUNK * sizeof(float));
    memcpy(script + n + DED_DATA_HDR_BYTES, peer_x + k, CHUNK * sizeof(float));
    n += DED_DATA_HDR_BYTES + CHUNK * sizeof(float);
    ded_msg_data_hdr_encode(script + n, DED_MSG_RESULT, 0, k, CHUNK * sizeof(float));
    memcpy(script + n + DED_DATA_HDR_BYTES, result + k, CHUNK * sizeof(float));
    n += DED_DATA_HDR_BYTES + CHUNK * sizeof(float);
  }
  for (int i = 0; i < COUNT / 2; i++) {
    want[i] = result[i];
    want[COUNT / 2 + i] = (peer_x[i] + buf[COUNT / 2 + i]) / 2.0f;
  }
  for (size_t i = 0; i < n; i++) {
    ded_node_conn_recv(t.node, t.conn, script + i, 1, NOW_NS);
    assert_false(t.closed);
  }
  assert_int_equal(t.rounds_done, 1);
  assert_int_equal(t.last.status, 0);
  assert_memory_equal(buf, want, sizeof want);
  ded_node_free(t.node);
}

/*
 * Round r+1 waits for round r's membership; once round r commits, the
 * node should ask round r+1's coordinator in at once. When the node itself
 * coordinated round r and the commit was set off by the last JOIN from a
 * peer, it does not: nothing calls rounds_advance on that path
 * (coord_on_join -> coord_commit -> coord_deliver -> round_on_commit), and
 * the JOIN for round r+1 leaves only at the next timer tick, up to
 * NODE_TICK_NS (20 ms) later. Every member waits for it, so with rounds
 * queued back to back (gradient buckets) each round can start up to a tick
 * late.
 */
static void test_node_coordinator_joins_next_round_at_once(void **state) {
  (void)state;
  float b0[COUNT] = {0}, b1[COUNT] = {0}, *bufs[2] = {b0, b1};
  tnode t;
  tnode_start(&t, bufs, 2, 1.0, 1);
  ded_ident lo, hi;
  peers_around(&t, &lo, &hi);
  send_hello(&t, &hi, RUN);
  size_t len;
  free(tnode_output(&t, &len, NOW_NS));
  /* The peer's JOIN completes round 0, which the node coordinates; round
   * 1's coordinator is member 1 % 2 of round 0: the peer. */
  uint8_t jf[DED_JOIN_FRAME_BYTES];
  ded_wr w = ded_wr_init(jf, sizeof jf);
  ded_msg_join j = {0, DED_DTYPE_F32, COUNT, 1.0, 1, DED_JOIN_F_GENESIS};
  ded_msg_join_encode(&w, &j);
  ded_node_conn_recv(t.node, t.conn, jf, w.pos, NOW_NS + 1000);
  uint8_t *out = tnode_output(&t, &len, NOW_NS + 1000);
  ded_frame fr;
  assert_true(frame_find(out, len, DED_MSG_COMMIT, 0, &fr)); /* round 0 is committed */
  bool at_once = output_has_join(out, len, 1, NULL);
  free(out);
  if (!at_once) {
    /* Show that the tick is what sends it. */
    ded_node_handle_expiry(t.node, NOW_NS + TICK_NS + 1000);
    out = tnode_output(&t, &len, NOW_NS + TICK_NS + 1000);
    bool after_tick = output_has_join(out, len, 1, NULL);
    free(out);
    ded_node_free(t.node);
    fail_msg("round 1's JOIN was not sent when round 0 committed%s",
             after_tick ? "; it left only at the next timer tick" : "");
  }
  ded_node_free(t.node);
}

/*
 * Weights are bounded where they enter (DED_WEIGHT_MAX), so that no commit
 * can sum to infinity: a local round with a weight above the bound is
 * refused, and a peer's JOIN above it drops that peer before anything is
 * committed.
 */
static void test_node_weight_bounds(void **state) {
  (void)state;
  float buf[COUNT] = {0}, other[COUNT] = {0}, *bufs[1] = {buf};
  tnode t;
  tnode_start(&t, bufs, 1, DED_WEIGHT_MAX, 1);
  ded_round_args a = {other, COUNT, DED_DTYPE_F32, 1e308, 1, NULL};
  assert_int_equal(ded_node_round_submit(t.node, &a, NOW_NS), DED_ERR_INVALID_ARG);
  ded_ident lo, hi;
  peers_around(&t, &lo, &hi);
  send_hello(&t, &hi, RUN);
  size_t len;
  free(tnode_output(&t, &len, NOW_NS));
  uint8_t jf[DED_JOIN_FRAME_BYTES];
  ded_wr w = ded_wr_init(jf, sizeof jf);
  ded_msg_join j = {0, DED_DTYPE_F32, COUNT, 1e308, 1, DED_JOIN_F_GENESIS};
  ded_msg_join_encode(&w, &j);
  ded_node_conn_recv(t.node, t.conn, jf, w.pos, NOW_NS);
  assert_true(t.closed);
  uint8_t *out = tnode_output(&t, &len, NOW_NS);
  ded_frame fr;
  assert_false(frame_find(out, len, DED_MSG_COMMIT, 0, &fr));
  free(out);
  ded_node_free(t.node);
}

/* A HELLO of another run, or any other first frame: the connection goes. */
static void test_node_strangers_dropped(void **state) {
  (void)state;
  tnode t;
  tnode_start(&t, NULL, 0, 1.0, 1);
  ded_ident lo, hi;
  peers_around(&t, &lo, &hi);
  send_hello(&t, &hi, "another run");
  assert_true(t.closed);
  assert_int_equal(ded_node_peer_count(t.node), 0);
  ded_node_free(t.node);

  tnode_start(&t, NULL, 0, 1.0, 1);
  uint8_t jf[DED_JOIN_FRAME_BYTES];
  ded_wr w = ded_wr_init(jf, sizeof jf);
  ded_msg_join j = {0, DED_DTYPE_F32, COUNT, 1.0, 1, DED_JOIN_F_GENESIS};
  ded_msg_join_encode(&w, &j);
  ded_node_conn_recv(t.node, t.conn, jf, w.pos, NOW_NS);
  assert_true(t.closed);
  ded_node_free(t.node);

  /* A HELLO whose record is too old to be believed. */
  tnode_start(&t, NULL, 0, 1.0, 1);
  uint8_t f[DED_HELLO_FRAME_BYTES(DED_RECORD_BYTES_MAX)];
  size_t n = unit_hello_frame(f, sizeof f, &hi, RUN, NOW_MS - 3600ull * 1000 * 24);
  ded_node_conn_recv(t.node, t.conn, f, n, NOW_NS);
  assert_true(t.closed);
  assert_int_equal(ded_node_peer_count(t.node), 0);
  ded_node_free(t.node);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_node_round_peer_coordinates),
      cmocka_unit_test(test_node_round_node_coordinates),
      cmocka_unit_test(test_node_bytewise),
      cmocka_unit_test(test_node_coordinator_joins_next_round_at_once),
      cmocka_unit_test(test_node_weight_bounds),
      cmocka_unit_test(test_node_strangers_dropped),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
