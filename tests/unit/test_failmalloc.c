/*
 * test_failmalloc.c: out of memory is an error return, never a crash or a
 * leak (nghttp2's failmalloc_test.c).
 *
 * Each scenario runs with an allocator that fails its N-th allocation, for
 * N = 0, 1, 2, ... until a run completes without reaching N. Every run
 * that failed must report DED_ERR_NOMEM where the API returns an error,
 * leave its data structures usable, and give back every block.
 */
#include "unit_util.h"

#include "avg/ded_digest.h"
#include "core/ded_limits.h"
#include "core/ded_msg.h"
#include "dht/ded_table.h"
#include "ded_node.h"
#include "match/ded_match.h"

/* Runs |scenario| once per allocation it makes, failing that one; returns
 * how many runs failed. The scenario checks its own results. */
static long failmalloc_sweep(void (*scenario)(unit_failmem *fm, void *arg), void *arg) {
  for (long n = 0;; n++) {
    unit_failmem fm;
    unit_failmem_init(&fm, n);
    scenario(&fm, arg);
    if (fm.live != 0) fail_msg("%ld blocks leaked when allocation %ld failed", fm.live, n);
    if (!fm.failed) return n;
    /* A scenario that never ends would mean it allocates without bound. */
    assert_true(n < 100000);
  }
}

/* ------------------------------------------------------ commit decode */

typedef struct commit_bytes {
  uint8_t *p;
  size_t len;
} commit_bytes;

static void scenario_commit_decode(unit_failmem *fm, void *arg) {
  const commit_bytes *cb = arg;
  ded_msg_commit c;
  int rv = ded_msg_commit_decode(cb->p, cb->len, &fm->mem, &c);
  if (fm->failed) {
    assert_int_equal(rv, DED_ERR_NOMEM);
    assert_null(c.members);
    return;
  }
  assert_int_equal(rv, 0);
  assert_int_equal(c.k, 4);
  ded_msg_commit_free(&c, &fm->mem);
}

static ded_msg_join failmalloc_join(uint64_t round, uint8_t dtype, uint64_t count, double weight,
                                    uint32_t n_local, uint8_t flags) {
  ded_msg_join j;
  memset(&j, 0, sizeof j);
  j.round = round;
  j.dtype = dtype;
  j.count = count;
  j.weight = weight;
  j.n_local = n_local;
  j.flags = flags;
  return j;
}

static void scenario_join_status_decode(unit_failmem *fm, void *arg) {
  const commit_bytes *cb = arg;
  ded_msg_join j;
  int rv = ded_msg_join_decode(cb->p, cb->len, &fm->mem, &j);
  if (fm->failed) {
    assert_int_equal(rv, DED_ERR_NOMEM);
    assert_null(j.plan.members);
    return;
  }
  assert_int_equal(rv, 0);
  assert_true(j.flags & DED_JOIN_F_STATUS);
  assert_true(j.flags & DED_JOIN_F_DONE);
  assert_int_equal(j.acc_view, 1);
  assert_int_equal(j.plan.k, 4);
  assert_int_equal(j.plan.nacc, 5);
  assert_int_equal(j.have[0], 0x0b);
  ded_msg_join_free(&j, &fm->mem);
}

static void scenario_decide_decode(unit_failmem *fm, void *arg) {
  const commit_bytes *cb = arg;
  ded_msg_decide d;
  int rv = ded_msg_decide_decode(cb->p, cb->len, &fm->mem, &d);
  if (fm->failed) {
    assert_int_equal(rv, DED_ERR_NOMEM);
    assert_null(d.plan.members);
    assert_null(d.holders);
    return;
  }
  assert_int_equal(rv, 0);
  assert_int_equal(d.flags, DED_DECIDE_F_CHOSEN);
  assert_int_equal(d.plan.k, 4);
  assert_int_equal(d.holders[0], 3);
  assert_int_equal(d.holders[3], 0);
  ded_msg_decide_free(&d, &fm->mem);
}

static void scenario_commit_copy(unit_failmem *fm, void *arg) {
  const ded_msg_commit *src = arg;
  ded_msg_commit dst;
  int rv = ded_msg_commit_copy(&dst, src, &fm->mem);
  if (fm->failed) {
    assert_int_equal(rv, DED_ERR_NOMEM);
    assert_null(dst.members);
    return;
  }
  assert_int_equal(rv, 0);
  assert_int_equal(dst.k, src->k);
  assert_memory_equal(dst.members, src->members, (size_t)src->k * sizeof *src->members);
  ded_msg_commit_free(&dst, &fm->mem);
}

static void test_failmalloc_commit_decode(void **state) {
  (void)state;
  ded_msg_member members[4];
  memset(members, 0, sizeof members);
  for (int i = 0; i < 4; i++) {
    members[i].id[0] = (uint8_t)(i + 1);
    members[i].weight = 1.0;
    members[i].n_local = 1;
    members[i].shard_off = (uint64_t)i * 10;
    members[i].flags = i == 3 ? 0 : DED_MEMBER_F_ACCEPTOR;
  }
  members[1].flags |= DED_MEMBER_F_PRIMARY;
  ded_msg_commit c = {.round = 3,
                      .attempt = (uint64_t)1 << 32 | 7,
                      .base = 5,
                      .dtype = DED_DTYPE_F32,
                      .count = 40,
                      .chunk_elems = 16,
                      .k = 4,
                      .nacc = 5,
                      .members = members};
  uint8_t buf[DED_COMMIT_FRAME_BYTES(4)];
  ded_wr w = ded_wr_init(buf, sizeof buf);
  ded_msg_commit_encode(&w, &c);
  assert_false(w.err);
  commit_bytes cb = {buf + DED_FRAME_HDR_BYTES, w.pos - DED_FRAME_HDR_BYTES};
  assert_int_equal(failmalloc_sweep(scenario_commit_decode, &cb), 1);

  /* A JOIN with status owns its plan: one allocation. */
  uint8_t jbuf[DED_JOIN_STATUS_FRAME_BYTES(4)];
  ded_msg_join j = failmalloc_join(3, DED_DTYPE_F32, 40, 1.0, 1, DED_JOIN_F_DONE);
  j.acc_view = 1;
  const uint8_t have[1] = {0x0b};
  w = ded_wr_init(jbuf, sizeof jbuf);
  ded_msg_join_status_encode(&w, &j, &c, have);
  assert_false(w.err);
  commit_bytes jb = {jbuf + DED_FRAME_HDR_BYTES, w.pos - DED_FRAME_HDR_BYTES};
  assert_int_equal(failmalloc_sweep(scenario_join_status_decode, &jb), 1);

  /* A DECIDE: the plan's members, then the holders. */
  uint8_t dbuf[DED_DECIDE_FRAME_BYTES(4)];
  const uint16_t holders[4] = {3, 1, 1, 0};
  w = ded_wr_init(dbuf, sizeof dbuf);
  ded_msg_decide_encode(&w, 2, DED_DECIDE_F_CHOSEN, &c, holders);
  assert_false(w.err);
  commit_bytes db = {dbuf + DED_FRAME_HDR_BYTES, w.pos - DED_FRAME_HDR_BYTES};
  assert_int_equal(failmalloc_sweep(scenario_decide_decode, &db), 2);

  /* A deep copy: one allocation. */
  assert_int_equal(failmalloc_sweep(scenario_commit_copy, &c), 1);
}

/* ------------------------------------------------------ gather commit */

static void scenario_gather_commit(unit_failmem *fm, void *arg) {
  const ded_gather *g = arg;
  ded_msg_commit c;
  int rv = ded_gather_commit(g, &fm->mem, 4096, &c);
  if (fm->failed) {
    assert_int_equal(rv, DED_ERR_NOMEM);
    assert_null(c.members);
    return;
  }
  assert_int_equal(rv, 0);
  assert_int_equal(c.k, 5);
  ded_msg_commit_free(&c, &fm->mem);
}

/* Joins are gathered through the failing allocator too. */
static void scenario_gather_add(unit_failmem *fm, void *arg) {
  (void)arg;
  ded_gather g;
  ded_gather_init(&g, 0, true);
  int rv = 0;
  unsigned added = 0;
  for (unsigned i = 0; i < 40 && rv == 0; i++) {
    uint8_t id[DED_ID_BYTES] = {(uint8_t)(i * 37)};
    ded_msg_join j = failmalloc_join(0, DED_DTYPE_F64, 100, 1.0, 1, DED_JOIN_F_GENESIS);
    rv = ded_gather_add(&g, &fm->mem, id, &j);
    if (rv == 0) added++;
  }
  if (fm->failed) assert_int_equal(rv, DED_ERR_NOMEM);
  else assert_int_equal(rv, 0);
  /* What was added before the failure is all there. */
  assert_int_equal(g.n, added);
  for (size_t i = 1; i < g.n; i++) assert_true(memcmp(g.v[i - 1].id, g.v[i].id, DED_ID_BYTES) < 0);
  ded_gather_free(&g, &fm->mem);
}

static void test_failmalloc_gather(void **state) {
  (void)state;
  ded_gather g;
  ded_gather_init(&g, 9, false);
  for (unsigned i = 0; i < 6; i++) {
    uint8_t id[DED_ID_BYTES] = {(uint8_t)(10 - i)};
    /* One joiner at another stream position, left out of the commit. */
    ded_msg_join j = failmalloc_join(9, DED_DTYPE_F32, 1000u, 0.0, 2, 0);
    if (i == 2) j.pos = 7;
    assert_int_equal(ded_gather_add(&g, NULL, id, &j), 0);
  }
  /* Three allocations: the members, the offsets scratch, and (version 15)
   * gather_codec's scratch of the members' compression wishes, from which
   * the round's codec is picked. Without link rates (ded_gather_commit
   * passes none) there is no LP scratch. */
  assert_int_equal(failmalloc_sweep(scenario_gather_commit, &g), 3);
  ded_gather_free(&g, NULL);
  /* 8, 16, 32, 64 slots. */
  assert_int_equal(failmalloc_sweep(scenario_gather_add, NULL), 4);
}

/* ------------------------------------------------------- table upsert */

#define TABLE_RECORDS 40
static ded_record table_recs[TABLE_RECORDS];

static void scenario_table_upsert(unit_failmem *fm, void *arg) {
  (void)arg;
  ded_table t;
  ded_table_init(&t, &fm->mem, 0);
  int rv = 0;
  size_t i;
  for (i = 0; i < TABLE_RECORDS; i++) {
    rv = ded_table_upsert(&t, &table_recs[i]);
    if (rv != 1) break;
  }
  if (fm->failed) {
    assert_int_equal(rv, DED_ERR_NOMEM);
    /* The table holds exactly the records before the failing one. */
    assert_int_equal(t.n, i);
    for (size_t j = 0; j < i; j++) {
      uint8_t id[DED_ID_BYTES];
      ded_peer_id(table_recs[j].pk, id);
      assert_non_null(ded_table_find(&t, id));
    }
    /* And it still works once memory is back. */
    fm->fail_at = -1;
    assert_int_equal(ded_table_upsert(&t, &table_recs[i]), 1);
    assert_int_equal(t.n, i + 1);
  } else {
    assert_int_equal(rv, 1);
    assert_int_equal(t.n, TABLE_RECORDS);
  }
  ded_table_free(&t);
}

static void test_failmalloc_table_upsert(void **state) {
  (void)state;
  for (int i = 0; i < TABLE_RECORDS; i++) {
    ded_ident id;
    unit_ident(&id, (uint8_t)(i + 1));
    memset(&table_recs[i], 0, sizeof table_recs[i]);
    memcpy(table_recs[i].pk, id.pk, DED_PK_BYTES);
    table_recs[i].seq = 1;
    table_recs[i].ttl_ms = 1000;
  }
  /* 16, 32, 64 entries. */
  assert_int_equal(failmalloc_sweep(scenario_table_upsert, NULL), 3);
}

/* ------------------------------------------------------ a whole round */

/*
 * A node and one scripted peer average a vector: HELLO, then the JOIN or
 * COMMIT the peer would send (whichever of the two coordinates), then the
 * peer's DATA and RESULT, and its HAVE once it holds the whole result (of
 * two acceptors, half is a quorum only with the primary, member 0: where
 * that is the peer, the node cannot complete the attempt without its
 * HAVE). Under a failing allocator the node may fail the round or drop the
 * peer, but it must not crash or leak; with memory enough, the round must
 * complete with the right average.
 */
#define NODE_COUNT 8
#define NODE_NOW_NS (1000ull * 1000 * 1000 * 1000) /* wall clock 1e6 ms */

typedef struct node_script {
  uint8_t *bytes; /* what the peer sends, all frames */
  uint64_t attempt; /* of round 0: the COMMIT's, which every DATA and RESULT carries */
  size_t len;
  float node_in[NODE_COUNT];
  float want[NODE_COUNT];
  bool late; /* the node is left out of the attempt and fetches the result */
} node_script;

/* What the peer does besides one plain round (NODE_SCRIPT_*). */
enum {
  NODE_SCRIPT_ROUND,        /* the round, whoever coordinates */
  NODE_SCRIPT_SERVE,        /* then FETCHes of the result and a PROBE (peer coordinates) */
  NODE_SCRIPT_NOT_LISTED,   /* the peer commits without the node, which fetches */
};

typedef struct node_outcome {
  int calls;
  int status;
  bool late;
} node_outcome;

static int node_cb_connect(void *user, uint32_t conn_id, const ded_addr *addr) {
  (void)user;
  (void)conn_id;
  (void)addr;
  return -1;
}

static void node_cb_round_done(void *user, void *ctx, const ded_round_result *res) {
  (void)ctx;
  node_outcome *o = user;
  o->calls++;
  o->status = res->status;
  o->late = res->late;
}

static const uint8_t node_seed[DED_SEED_BYTES] = {1, 2, 3};

static void node_settings(ded_node_settings *s, const ded_mem *mem) {
  memset(s, 0, sizeof *s);
  s->run = "unit-node";
  s->min_peers = 2;
  s->identity_seed = node_seed;
  s->bootstrap_timeout_ns = 10ull * 1000 * 1000 * 1000;
  s->rendezvous_timeout_ns = 10ull * 1000 * 1000 * 1000;
  s->round_timeout_ns = 10ull * 1000 * 1000 * 1000;
  s->mem = mem;
}

static void script_append(node_script *sc, const uint8_t *p, size_t n) {
  sc->bytes = realloc(sc->bytes, sc->len + n);
  assert_non_null(sc->bytes);
  memcpy(sc->bytes + sc->len, p, n);
  sc->len += n;
}

static void script_data(node_script *sc, uint8_t type, uint64_t off, const float *v, size_t n) {
  uint8_t hdr[DED_DATA_HDR_BYTES];
  ded_msg_data_hdr_encode(hdr, type, 0, sc->attempt, off, 0, n * sizeof(float));
  script_append(sc, hdr, sizeof hdr);
  script_append(sc, (const uint8_t *)v, n * sizeof(float));
}

/* The peer's HAVE for the attempt of round 0, in view 0: it holds the
 * result the node should end with (its digest). */
static void script_have(node_script *sc, uint8_t flags) {
  uint8_t f[DED_HAVE_FRAME_BYTES];
  ded_wr w = ded_wr_init(f, sizeof f);
  ded_msg_have m = {0, sc->attempt, 0, flags, {0}};
  ded_digest_of(sc->want, sizeof sc->want, m.digest);
  ded_msg_have_encode(&w, &m);
  assert_false(w.err);
  script_append(sc, f, w.pos);
}

static void script_fetch(node_script *sc, uint64_t attempt, uint16_t shard) {
  uint8_t f[DED_FETCH_FRAME_BYTES];
  ded_wr w = ded_wr_init(f, sizeof f);
  ded_msg_fetch m = {0, attempt, shard};
  ded_msg_fetch_encode(&w, &m);
  script_append(sc, f, w.pos);
}

/* Builds |peer|'s side of the conversation, and the expected result. */
static void node_script_build(node_script *sc, const ded_ident *peer, int kind) {
  memset(sc, 0, sizeof *sc);
  ded_ident me;
  ded_ident_from_seed(&me, node_seed);
  uint8_t frame[DED_HELLO_FRAME_BYTES(DED_RECORD_BYTES_MAX)];
  script_append(sc, frame,
                unit_hello_frame(frame, sizeof frame, peer, "unit-node", NODE_NOW_NS / 1000000));
  bool peer_first = memcmp(peer->id, me.id, DED_ID_BYTES) < 0;
  unsigned me_i = peer_first ? 1 : 0, peer_i = 1 - me_i;
  const uint64_t off[2] = {0, NODE_COUNT / 2};
  /* The attempt of view 0 by the coordinator: its id's first four bytes. */
  const uint8_t *cid = peer_first ? peer->id : me.id;
  sc->attempt = (uint64_t)cid[0] << 24 | (uint64_t)cid[1] << 16 | (uint64_t)cid[2] << 8 | cid[3];
  if (kind == NODE_SCRIPT_NOT_LISTED) { /* the peer alone: the node fetches g */
    assert_true(peer_first);
    ded_msg_member m[1];
    memset(m, 0, sizeof m);
    memcpy(m[0].id, peer->id, DED_ID_BYTES);
    m[0].weight = 2.0;
    m[0].n_local = 1;
    m[0].flags = DED_MEMBER_F_ACCEPTOR | DED_MEMBER_F_PRIMARY;
    ded_msg_commit c = {.round = 0,
                        .attempt = sc->attempt,
                        .dtype = DED_DTYPE_F32,
                        .count = NODE_COUNT,
                        .chunk_elems = 16,
                        .k = 1,
                        .nacc = 1,
                        .members = m};
    uint8_t cf[DED_COMMIT_FRAME_BYTES(1)];
    ded_wr w = ded_wr_init(cf, sizeof cf);
    ded_msg_commit_encode(&w, &c);
    script_append(sc, cf, w.pos);
    for (int i = 0; i < NODE_COUNT; i++) {
      sc->node_in[i] = (float)(i + 1);
      sc->want[i] = 0.5f * (float)i;
    }
    script_data(sc, DED_MSG_RESULT, 0, sc->want, NODE_COUNT);
    /* The peer completed the round alone: its answer to a late member. */
    script_have(sc, DED_HAVE_F_DONE);
    sc->late = true;
    return;
  }
  if (peer_first) { /* the peer coordinates the genesis round: its COMMIT */
    ded_msg_member m[2];
    memset(m, 0, sizeof m);
    memcpy(m[peer_i].id, peer->id, DED_ID_BYTES);
    memcpy(m[me_i].id, me.id, DED_ID_BYTES);
    /* A genesis round: both acceptors, member 0 (the peer) the primary,
     * as ded_gather_commit builds it. */
    for (int i = 0; i < 2; i++) {
      m[i].weight = 1.0;
      m[i].n_local = 1;
      m[i].shard_off = off[i];
      m[i].flags = DED_MEMBER_F_ACCEPTOR | (i == 0 ? DED_MEMBER_F_PRIMARY : 0);
    }
    ded_msg_commit c = {.round = 0,
                        .attempt = sc->attempt,
                        .dtype = DED_DTYPE_F32,
                        .count = NODE_COUNT,
                        .chunk_elems = 16,
                        .k = 2,
                        .nacc = 2,
                        .members = m};
    uint8_t cf[DED_COMMIT_FRAME_BYTES(2)];
    ded_wr w = ded_wr_init(cf, sizeof cf);
    ded_msg_commit_encode(&w, &c);
    script_append(sc, cf, w.pos);
  } else { /* we coordinate: the peer's JOIN */
    ded_msg_join j = failmalloc_join(0, DED_DTYPE_F32, NODE_COUNT, 1.0, 1, DED_JOIN_F_GENESIS);
    uint8_t jf[DED_JOIN_FRAME_BYTES];
    ded_wr w = ded_wr_init(jf, sizeof jf);
    ded_msg_join_encode(&w, &j);
    script_append(sc, jf, w.pos);
  }
  float peer_in[NODE_COUNT], avg[NODE_COUNT];
  for (int i = 0; i < NODE_COUNT; i++) {
    sc->node_in[i] = (float)(i + 1);
    peer_in[i] = (float)(10 * (i + 1));
    /* Commit order: member 0 first. */
    float x0 = me_i == 0 ? sc->node_in[i] : peer_in[i];
    float x1 = me_i == 0 ? peer_in[i] : sc->node_in[i];
    avg[i] = (x0 + x1) / 2.0f;
    sc->want[i] = avg[i];
  }
  /* The peer's contribution to our shard, and its result for its own. */
  script_data(sc, DED_MSG_DATA, off[me_i], peer_in + off[me_i], NODE_COUNT / 2);
  script_data(sc, DED_MSG_RESULT, off[peer_i], avg + off[peer_i], NODE_COUNT / 2);
  script_have(sc, 0);
  if (kind == NODE_SCRIPT_SERVE) {
    /* The result served back: both shards, an attempt it does not hold
     * (STALE), and a report of the finished round to a new view. */
    script_fetch(sc, sc->attempt, 0);
    script_fetch(sc, sc->attempt, 1);
    script_fetch(sc, sc->attempt + 1, 0);
    uint8_t f[DED_PROBE_FRAME_BYTES];
    ded_wr w = ded_wr_init(f, sizeof f);
    ded_msg_probe m = {0, 1};
    ded_msg_probe_encode(&w, &m);
    script_append(sc, f, w.pos);
  }
}

static void scenario_node_round(unit_failmem *fm, void *arg) {
  const node_script *sc = arg;
  ded_node_settings s;
  node_settings(&s, &fm->mem);
  ded_node_callbacks cb;
  memset(&cb, 0, sizeof cb);
  cb.connect = node_cb_connect;
  cb.round_done = node_cb_round_done;
  node_outcome out = {0, 1, false};
  ded_node *node = NULL;
  uint64_t now = NODE_NOW_NS;
  int rv = ded_node_new(&s, &cb, &out, now, &node);
  if (rv != 0) {
    assert_int_equal(rv, DED_ERR_NOMEM);
    assert_null(node);
    return;
  }
  assert_int_equal(ded_node_start(node, now), 0);
  float buf[NODE_COUNT];
  memcpy(buf, sc->node_in, sizeof buf);
  ded_round_args a = {buf, NODE_COUNT, DED_DTYPE_F32, 1.0, 1, NULL, 0};
  int64_t no = ded_node_round_submit(node, &a, now);
  if (no < 0) {
    assert_int_equal(no, DED_ERR_NOMEM);
    ded_node_free(node);
    return;
  }
  assert_int_equal(no, 0);
  uint32_t conn;
  ded_addr remote;
  assert_int_equal(ded_addr_parse("10.0.0.2:4000", &remote), 0);
  if (ded_node_conn_accepted(node, &remote, &conn, now) == 0) {
    /* Byte by byte for the first frames would multiply the runs; frames
     * are whole here, and ded_frame has its own split tests. */
    ded_node_conn_recv(node, conn, sc->bytes, sc->len, now + 1000);
    ded_iov iov[8];
    int n;
    while ((n = ded_node_conn_pending(node, conn, iov, 8)) > 0) {
      size_t total = 0;
      for (int i = 0; i < n; i++) total += iov[i].len;
      ded_node_conn_consume(node, conn, total, now + 2000);
    }
  }
  if (!fm->failed) {
    assert_int_equal(out.calls, 1);
    assert_int_equal(out.status, 0);
    assert_int_equal(out.late, sc->late);
    for (int i = 0; i < NODE_COUNT; i++) assert_true(buf[i] == sc->want[i]);
  }
  /* A round not reported yet is abandoned with the node (ded_node_free). */
  assert_true(out.calls <= 1);
  ded_node_free(node);
}

/* Both ways round: the peer coordinates (its id is smaller), and the node
 * does (gathering, committing, sending the COMMIT). */
static void test_failmalloc_node_round(void **state) {
  (void)state;
  assert_int_equal(ded_crypto_init(), 0);
  ded_ident me;
  ded_ident_from_seed(&me, node_seed);
  bool seen[2] = {false, false};
  for (unsigned s = 1; s < 256 && !(seen[0] && seen[1]); s++) {
    ded_ident peer;
    unit_ident(&peer, (uint8_t)s);
    int side = memcmp(peer.id, me.id, DED_ID_BYTES) < 0;
    if (seen[side]) continue;
    seen[side] = true;
    node_script sc;
    node_script_build(&sc, &peer, NODE_SCRIPT_ROUND);
    long runs = failmalloc_sweep(scenario_node_round, &sc);
    /* The round allocates: the sweep must have failed somewhere in it. */
    assert_true(runs > 10);
    free(sc.bytes);
    if (!side) continue;
    /* Where the peer coordinates: the result served from the node, and
     * the node left out of the attempt, fetching. Both allocate more. */
    node_script_build(&sc, &peer, NODE_SCRIPT_SERVE);
    assert_true(failmalloc_sweep(scenario_node_round, &sc) > runs);
    free(sc.bytes);
    node_script_build(&sc, &peer, NODE_SCRIPT_NOT_LISTED);
    assert_true(failmalloc_sweep(scenario_node_round, &sc) > 10);
    free(sc.bytes);
  }
  assert_true(seen[0] && seen[1]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_failmalloc_commit_decode),
      cmocka_unit_test(test_failmalloc_gather),
      cmocka_unit_test(test_failmalloc_table_upsert),
      cmocka_unit_test(test_failmalloc_node_round),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
