/*
 * harness.c: the scripted peers and the tnode of the node's unit tests
 * (harness.h says what each is for; the in-process network is tnet.c).
 */
#include "harness.h"

#include <stdio.h>

#include "avg/ded_digest.h"

/* ----------------------------------------------- scripted peers (tnode) */

const uint8_t node_seed[DED_SEED_BYTES] = {9, 9, 9};

static int tn_connect(void *user, uint32_t conn_id, const ded_addr *addr) {
  tnode *t = user;
  t->connects++;
  if (!t->dial || t->nconn == TN_PEERS) return -1;
  unsigned i = t->nconn++;
  t->conn[i] = conn_id;
  t->closed[i] = false;
  t->dialled[i] = *addr;
  return 0;
}

static void tn_close(void *user, uint32_t conn_id) {
  tnode *t = user;
  for (unsigned i = 0; i < t->nconn; i++)
    if (conn_id == t->conn[i]) t->closed[i] = true;
}

static void tn_round_done(void *user, void *ctx, const ded_round_result *res) {
  tnode *t = user;
  (void)ctx;
  t->rounds_done++;
  t->last = *res;
  memset(t->last_members, 0, sizeof t->last_members);
  if (res->members && res->contributors <= 4)
    memcpy(t->last_members, res->members, (size_t)res->contributors * DED_ID_BYTES);
  t->last.members = NULL;
}

static void tn_log(void *user, int level, const char *line) {
  tnode *t = user;
  (void)level;
  if (t->log_want && strstr(line, t->log_want)) t->log_hits++;
  /* TN_LOG=1 prints the node's log, to debug a test. */
  if (getenv("TN_LOG")) fprintf(stderr, "log: %s\n", line);
}

static void tn_want_snapshot(void *user) {
  tnode *t = user;
  t->want_snapshots++;
}

static void tn_state_done(void *user, int status, ded_snapshot *snap) {
  tnode *t = user;
  t->state_calls++;
  t->state_status = status;
  t->state_has_snap = snap != NULL;
  if (snap) {
    t->state_snap = *snap;
    snap->bytes = NULL; /* ours now */
  }
}

unsigned tnode_accept(tnode *t) {
  assert_true(t->nconn < TN_PEERS);
  ded_addr remote;
  assert_int_equal(ded_addr_parse("10.0.0.2:4000", &remote), 0);
  remote.port = (uint16_t)(remote.port + t->nconn);
  unsigned i = t->nconn++;
  assert_int_equal(ded_node_conn_accepted(t->node, &remote, &t->conn[i], t->now), 0);
  t->closed[i] = false;
  return i;
}

uint32_t tn_next_probe;
bool tn_next_sessions;
const ded_node_settings *tn_next_access;
uint64_t tn_next_step;

void tnode_new(tnode *t, float *bufs[], unsigned rounds, double w, uint32_t n_local,
               const ded_mem *mem, bool dial, uint8_t streams) {
  memset(t, 0, sizeof *t);
  t->now = NOW_NS;
  t->dial = dial;
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
  s.streams = streams;
  s.probe_bytes = tn_next_probe;
  tn_next_probe = 0;
  s.sessions = tn_next_sessions;
  tn_next_sessions = false;
  if (tn_next_access) {
    const ded_node_settings *a = tn_next_access;
    s.access = a->access;
    s.has_owner = a->has_owner;
    memcpy(s.owner, a->owner, DED_PK_BYTES);
    s.allow = a->allow;
    s.nallow = a->nallow;
    s.has_invite = a->has_invite;
    s.invite_expires_ms = a->invite_expires_ms;
    memcpy(s.invite_sig, a->invite_sig, DED_SIG_BYTES);
    tn_next_access = NULL;
  }
  if (dial) {
    assert_int_equal(ded_addr_parse(PEER_ADDR, &s.bootstrap[0]), 0);
    s.n_bootstrap = 1;
    s.bootstrap_timeout_ns = 10ull * 1000 * 1000 * 1000;
  }
  s.mem = mem;
  s.log_level = DED_LOG_INFO;
  ded_node_callbacks cb;
  memset(&cb, 0, sizeof cb);
  cb.connect = tn_connect;
  cb.close = tn_close;
  cb.round_done = tn_round_done;
  cb.log = tn_log;
  cb.want_snapshot = tn_want_snapshot;
  cb.state_done = tn_state_done;
  assert_int_equal(ded_node_new(&s, &cb, t, NOW_NS, &t->node), 0);
  assert_int_equal(ded_node_start(t->node, NOW_NS), 0);
  uint64_t step = tn_next_step;
  tn_next_step = 0;
  for (unsigned r = 0; r < rounds; r++) {
    ded_round_args a = {bufs[r], COUNT, DED_DTYPE_F32, w, n_local, NULL, step};
    assert_int_equal(ded_node_round_submit(t->node, &a, NOW_NS), r);
  }
}

void tnode_start_mem(tnode *t, float *bufs[], unsigned rounds, double w, uint32_t n_local,
                     const ded_mem *mem) {
  tnode_new(t, bufs, rounds, w, n_local, mem, false, 0);
  tnode_accept(t);
}

void tnode_start(tnode *t, float *bufs[], unsigned rounds, double w, uint32_t n_local) {
  tnode_start_mem(t, bufs, rounds, w, n_local, NULL);
}

uint8_t *tnode_output_on(tnode *t, unsigned i, size_t *len, uint64_t now) {
  uint8_t *out = NULL;
  *len = 0;
  ded_iov iov[16];
  int n;
  while ((n = ded_node_conn_pending(t->node, t->conn[i], iov, 16)) > 0) {
    size_t total = 0;
    for (int k = 0; k < n; k++) {
      out = realloc(out, *len + iov[k].len);
      assert_non_null(out);
      memcpy(out + *len, iov[k].base, iov[k].len);
      *len += iov[k].len;
      total += iov[k].len;
    }
    ded_node_conn_consume(t->node, t->conn[i], total, now);
  }
  return out;
}

uint8_t *tnode_output(tnode *t, size_t *len, uint64_t now) {
  return tnode_output_on(t, 0, len, now);
}

bool frame_find(const uint8_t *out, size_t len, uint8_t type, int nth, ded_frame *found) {
  memset(found, 0, sizeof *found);
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

int frame_count(const uint8_t *out, size_t len, uint8_t type) {
  ded_frame fr;
  int n = 0;
  while (frame_find(out, len, type, n, &fr)) n++;
  return n;
}

bool output_has_join(const uint8_t *out, size_t len, uint64_t round, ded_msg_join *join) {
  ded_frame fr;
  for (int i = 0; frame_find(out, len, DED_MSG_JOIN, i, &fr); i++) {
    ded_msg_join j;
    assert_int_equal(ded_msg_join_decode(fr.payload, fr.len, NULL, &j), 0);
    bool hit = j.round == round;
    ded_msg_join_free(&j, NULL);
    if (hit) {
      if (join) *join = j;
      return true;
    }
  }
  return false;
}

void send_raw(tnode *t, unsigned i, const uint8_t *p, size_t n) {
  if (n > DED_FRAME_HDR_BYTES && p[4] == DED_MSG_HELLO) t->hello[i] = true; /* a frame's start */
  ded_node_conn_recv(t->node, t->conn[i], p, n, t->now);
}

void tnode_advance(tnode *t, uint64_t ns) {
  const uint64_t step = 100ull * 1000 * 1000;
  for (uint64_t d = 0; d < ns; d += step) {
    t->now += step;
    for (unsigned i = 0; i < t->nconn; i++) /* each peer's keepalive: an empty RECORDS */
      if (t->hello[i] && !t->closed[i] && !t->mute[i]) {
        uint8_t ka[DED_FRAME_HDR_BYTES + 2];
        ded_frame_put_hdr(ka, DED_MSG_RECORDS, 2);
        ka[DED_FRAME_HDR_BYTES] = ka[DED_FRAME_HDR_BYTES + 1] = 0;
        send_raw(t, i, ka, sizeof ka);
      }
    ded_node_handle_expiry(t->node, t->now);
  }
}

void send_hello(tnode *t, unsigned i, const ded_ident *peer, const char *run) {
  uint8_t f[DED_HELLO_FRAME_BYTES(DED_RECORD_BYTES_MAX)];
  size_t n = unit_hello_frame(f, sizeof f, peer, run, NOW_MS);
  send_raw(t, i, f, n);
}

/* A HELLO from |ident| whose record says it completed round |round|
 * (its result attempt |attempt|, |contributors| of them). */
void send_hello_progress(tnode *t, unsigned i, const ded_ident *ident, uint64_t round,
                                uint64_t attempt, uint32_t contributors) {
  ded_record rec;
  unit_bare_record(&rec, RUN, NOW_MS);
  ded_record_progress_add(&rec, &(ded_progress){round, 100, contributors, attempt, 0, 0});
  ded_record_sign(&rec, ident);
  uint8_t rb[DED_RECORD_BYTES_MAX], f[DED_HELLO_FRAME_BYTES(DED_RECORD_BYTES_MAX)];
  int rl = ded_record_encode(&rec, rb, sizeof rb);
  assert_true(rl > 0);
  ded_wr w = ded_wr_init(f, sizeof f);
  ded_msg_hello_encode(&w, rec.run_id, rb, (size_t)rl);
  assert_false(w.err);
  send_raw(t, i, f, w.pos);
}

void send_commit(tnode *t, unsigned i, const ded_msg_commit *c) {
  size_t n;
  uint8_t *f = unit_commit_frame(c, &n);
  send_raw(t, i, f, n);
  free(f);
}

void send_join(tnode *t, unsigned i, const ded_msg_join *j) {
  uint8_t f[DED_JOIN_FRAME_BYTES + DED_JOIN_VOID_BYTES]; /* (VOID or HELD: 16 more) */
  ded_wr w = ded_wr_init(f, sizeof f);
  ded_msg_join_encode(&w, j);
  assert_false(w.err);
  send_raw(t, i, f, w.pos);
}

void send_decide(tnode *t, unsigned i, uint32_t view, uint8_t flags,
                 const ded_msg_commit *plan, const uint16_t *holders) {
  uint8_t f[DED_DECIDE_FRAME_BYTES(TN_PEERS + 1)];
  assert_true(plan->k <= TN_PEERS + 1);
  ded_wr w = ded_wr_init(f, sizeof f);
  ded_msg_decide_encode(&w, view, flags, plan, holders);
  assert_false(w.err);
  send_raw(t, i, f, w.pos);
}

void send_join_status(tnode *t, unsigned i, const ded_msg_join *j,
                      const ded_msg_commit *plan, const uint8_t *have) {
  uint8_t f[DED_JOIN_STATUS_FRAME_BYTES(TN_PEERS + 1)];
  assert_true(plan->k <= TN_PEERS + 1);
  ded_wr w = ded_wr_init(f, sizeof f);
  ded_msg_join_status_encode(&w, j, plan, have);
  assert_false(w.err);
  send_raw(t, i, f, w.pos);
}

void send_have(tnode *t, unsigned i, uint64_t round, uint64_t attempt, uint32_t view,
               uint8_t flags, const uint8_t digest[DED_RESULT_DIGEST_BYTES]) {
  uint8_t f[DED_HAVE_FRAME_BYTES];
  ded_wr w = ded_wr_init(f, sizeof f);
  ded_msg_have m = {round, attempt, view, flags, {0}};
  memcpy(m.digest, digest, DED_RESULT_DIGEST_BYTES);
  ded_msg_have_encode(&w, &m);
  assert_false(w.err);
  assert_int_equal(w.pos, DED_HAVE_FRAME_BYTES);
  send_raw(t, i, f, w.pos);
}

void result_digest(const float *g, uint8_t digest[DED_RESULT_DIGEST_BYTES]) {
  ded_digest_of(g, COUNT * sizeof(float), digest);
}

void send_probe(tnode *t, unsigned i, uint64_t round, uint32_t view) {
  uint8_t f[DED_PROBE_FRAME_BYTES];
  ded_wr w = ded_wr_init(f, sizeof f);
  ded_msg_probe m = {round, view};
  ded_msg_probe_encode(&w, &m);
  send_raw(t, i, f, w.pos);
}

void send_fetch(tnode *t, unsigned i, uint64_t round, uint64_t attempt, uint16_t shard) {
  uint8_t f[DED_FETCH_FRAME_BYTES];
  ded_wr w = ded_wr_init(f, sizeof f);
  ded_msg_fetch m = {round, attempt, shard};
  ded_msg_fetch_encode(&w, &m);
  send_raw(t, i, f, w.pos);
}

void send_stale(tnode *t, unsigned i, uint64_t round, uint64_t next) {
  uint8_t f[DED_STALE_FRAME_BYTES];
  ded_wr w = ded_wr_init(f, sizeof f);
  ded_msg_stale m = {round, next};
  ded_msg_stale_encode(&w, &m);
  send_raw(t, i, f, w.pos);
}

void send_ahead(tnode *t, unsigned i, uint64_t round, uint64_t next) {
  uint8_t f[DED_STALE_FRAME_BYTES];
  ded_wr w = ded_wr_init(f, sizeof f);
  ded_msg_stale m = {round, next};
  ded_msg_ahead_encode(&w, &m);
  assert_false(w.err);
  send_raw(t, i, f, w.pos);
}

void send_data(tnode *t, unsigned i, uint8_t type, uint64_t round, uint64_t attempt,
               uint64_t off, const float *v, size_t n) {
  uint8_t f[DED_DATA_HDR_BYTES + COUNT * sizeof(float)];
  ded_msg_data_hdr_encode(f, type, round, attempt, off, 0, n * sizeof(float));
  memcpy(f + DED_DATA_HDR_BYTES, v, n * sizeof(float));
  send_raw(t, i, f, DED_DATA_HDR_BYTES + n * sizeof(float));
}

void send_chunks(tnode *t, unsigned i, uint8_t type, uint64_t round, uint64_t attempt,
                 uint64_t off, const float *v, size_t n) {
  for (size_t k = 0; k < n; k += CHUNK) send_data(t, i, type, round, attempt, off + k, v + k, CHUNK);
}

uint64_t attempt_of(uint32_t view, const uint8_t id[DED_ID_BYTES]) {
  return (uint64_t)view << 32 | (uint64_t)id[0] << 24 | (uint64_t)id[1] << 16 |
         (uint64_t)id[2] << 8 | id[3];
}

void member_set(ded_msg_member *m, const uint8_t id[DED_ID_BYTES], double w, uint32_t n,
                uint64_t shard_off) {
  memset(m, 0, sizeof *m);
  memcpy(m->id, id, DED_ID_BYTES);
  m->weight = w;
  m->n_local = n;
  m->shard_off = shard_off;
}

ded_msg_commit commit_of(uint64_t round, uint64_t attempt, uint64_t base,
                         ded_msg_member *m, uint16_t k) {
  ded_msg_commit c;
  memset(&c, 0, sizeof c);
  c.round = round;
  c.attempt = attempt;
  c.base = base;
  c.dtype = DED_DTYPE_F32;
  c.count = COUNT;
  c.pos = round * COUNT; /* every round of these tests is COUNT elements */
  c.chunk_elems = CHUNK;
  c.k = k;
  c.nacc = k;
  c.members = m;
  for (uint16_t i = 0; i < k; i++)
    m[i].flags = DED_MEMBER_F_ACCEPTOR | (i == 0 ? DED_MEMBER_F_PRIMARY : 0);
  return c;
}

/* The |nth| HAVE in |out|, decoded into |h|; false if there is none. */
static bool output_have(const uint8_t *out, size_t len, int nth, ded_msg_have *h) {
  ded_frame fr;
  if (!frame_find(out, len, DED_MSG_HAVE, nth, &fr)) return false;
  assert_int_equal(ded_msg_have_decode(fr.payload, fr.len, h), 0);
  return true;
}

void expect_have(const uint8_t *out, size_t len, uint64_t round, uint64_t attempt,
                 uint32_t view, uint8_t flags, const uint8_t *digest) {
  assert_int_equal(frame_count(out, len, DED_MSG_HAVE), 1);
  ded_msg_have h;
  assert_true(output_have(out, len, 0, &h));
  assert_int_equal(h.round, round);
  assert_int_equal(h.attempt, attempt);
  assert_int_equal(h.view, view);
  assert_int_equal(h.flags, flags);
  if (digest) assert_memory_equal(h.digest, digest, DED_RESULT_DIGEST_BYTES);
}

bool output_have_digest(const uint8_t *out, size_t len, uint64_t round, uint64_t attempt,
                        uint8_t digest[DED_RESULT_DIGEST_BYTES]) {
  ded_msg_have h;
  for (int n = 0; output_have(out, len, n, &h); n++)
    if (h.round == round && h.attempt == attempt) {
      memcpy(digest, h.digest, DED_RESULT_DIGEST_BYTES);
      return true;
    }
  return false;
}

void tnode_have_digest(tnode *t, unsigned i, uint64_t round, uint64_t attempt,
                       uint8_t digest[DED_RESULT_DIGEST_BYTES]) {
  size_t len;
  uint8_t *out = tnode_output_on(t, i, &len, t->now);
  bool found = output_have_digest(out, len, round, attempt, digest);
  free(out);
  if (!found)
    fail_msg("no HAVE of round %llu, attempt %llx on connection %u", (unsigned long long)round,
             (unsigned long long)attempt, i);
}

void expect_data(const uint8_t *out, size_t len, uint8_t type, int nth, uint64_t round,
                 uint64_t attempt, uint64_t off, const float *want, size_t n) {
  ded_frame fr;
  if (!frame_find(out, len, type, nth, &fr))
    fail_msg("no %s frame #%d in the node's output", ded_msg_name(type), nth);
  ded_msg_data d;
  assert_int_equal(ded_msg_data_decode(fr.payload, fr.len, &d), 0);
  assert_int_equal(d.round, round);
  assert_int_equal(d.attempt, attempt);
  assert_int_equal(d.offset, off);
  assert_int_equal(d.len, n * sizeof(float));
  assert_memory_equal(d.elems, want, n * sizeof(float));
}

void peers_around(const tnode *t, ded_ident *lo, ded_ident *hi) {
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

void peers_below(const tnode *t, ded_ident *lo1, ded_ident *lo2) {
  unsigned found = 0;
  ded_ident v[2];
  for (unsigned s = 1; s < 256 && found < 2; s++) {
    unit_ident(&v[found], (uint8_t)s);
    if (memcmp(v[found].id, t->ident.id, DED_ID_BYTES) < 0) found++;
  }
  assert_int_equal(found, 2);
  bool swap = memcmp(v[0].id, v[1].id, DED_ID_BYTES) > 0;
  *lo1 = v[swap ? 1 : 0];
  *lo2 = v[swap ? 0 : 1];
}

void answer_have_done(tnode *t, unsigned i, uint64_t round, uint64_t attempt,
                      const uint8_t digest[DED_RESULT_DIGEST_BYTES]) {
  size_t len;
  uint8_t *out = tnode_output_on(t, i, &len, t->now);
  ded_msg_have h;
  bool found = false;
  for (int n = 0; !found && output_have(out, len, n, &h); n++)
    found = h.round == round && h.attempt == attempt && !(h.flags & DED_HAVE_F_DONE);
  free(out);
  if (!found)
    fail_msg("no HAVE of round %llu, attempt %llx on connection %u to answer",
             (unsigned long long)round, (unsigned long long)attempt, i);
  assert_memory_equal(h.digest, digest, DED_RESULT_DIGEST_BYTES);
  send_have(t, i, round, attempt, h.view, DED_HAVE_F_DONE, digest);
}

/* ------------------------------------------- a round a peer coordinates */

void peer_coord_round(tnode *t, float *buf, uint32_t n_local, peer_round *pr) {
  memcpy(pr->orig, buf, sizeof pr->orig);
  peers_around(t, &pr->lo, &pr->hi);
  send_hello(t, 0, &pr->lo, RUN);
  assert_false(t->closed[0]);
  assert_int_equal(ded_node_peer_count(t->node), 1);
  size_t len;
  uint8_t *out = tnode_output(t, &len, NOW_NS);
  /* The node answered with its HELLO and joined the genesis round at the
   * smallest id it sees, the peer's, in view 0, reporting nothing. */
  ded_frame fr;
  assert_true(frame_find(out, len, DED_MSG_HELLO, 0, &fr));
  ded_msg_join j;
  assert_true(output_has_join(out, len, 0, &j));
  assert_int_equal(j.view, 0);
  assert_int_equal(j.dtype, DED_DTYPE_F32);
  assert_int_equal(j.count, COUNT);
  assert_true(j.weight == 1.0);
  assert_int_equal(j.n_local, n_local);
  assert_int_equal(j.flags, DED_JOIN_F_GENESIS);
  assert_int_equal(frame_count(out, len, DED_MSG_JOIN), 1);
  assert_int_equal(frame_find(out, len, DED_MSG_JOIN, 0, &fr) ? fr.len : 0,
                   DED_JOIN_FRAME_BYTES - DED_FRAME_HDR_BYTES);
  free(out);

  ded_msg_member m[2];
  member_set(&m[0], pr->lo.id, 3.0, 1, 0);
  member_set(&m[1], t->ident.id, 1.0, n_local, COUNT / 2);
  pr->attempt = attempt_of(0, pr->lo.id);
  ded_msg_commit c = commit_of(0, pr->attempt, 0, m, 2);
  send_commit(t, 0, &c);
  assert_false(t->closed[0]);

  float peer_x[COUNT], peer_result[COUNT / 2];
  for (int i = 0; i < COUNT; i++) peer_x[i] = (float)(10 * i) + 0.5f;
  const float a0 = (float)(3.0 / 1.0), a1 = (float)(1.0 / n_local), W = 4.0f;
  for (int i = COUNT / 2; i < COUNT; i++) {
    float acc = a0 * peer_x[i];
    acc += a1 * buf[i];
    pr->g[i] = acc / W;
  }
  for (int i = 0; i < COUNT / 2; i++) {
    peer_result[i] = (float)i * 0.25f;
    pr->g[i] = peer_result[i];
  }
  /* On the wire: our vector's first shard, to its reducer, in chunks,
   * under the COMMIT's attempt. */
  out = tnode_output(t, &len, NOW_NS);
  assert_int_equal(frame_count(out, len, DED_MSG_DATA), 2);
  for (int k = 0; k < 2; k++)
    expect_data(out, len, DED_MSG_DATA, k, 0, pr->attempt, CHUNK * k, buf + CHUNK * k, CHUNK);
  free(out);
  send_chunks(t, 0, DED_MSG_DATA, 0, pr->attempt, COUNT / 2, peer_x + COUNT / 2, COUNT / 2);
  /* Our shard is reduced: its mean g (not n_local * g) goes back. */
  out = tnode_output(t, &len, NOW_NS);
  assert_int_equal(frame_count(out, len, DED_MSG_RESULT), 2);
  for (int k = 0; k < 2; k++)
    expect_data(out, len, DED_MSG_RESULT, k, 0, pr->attempt, COUNT / 2 + CHUNK * k,
                pr->g + COUNT / 2 + CHUNK * k, CHUNK);
  free(out);
  /* Until the whole result is in, the caller's buffer is untouched. */
  assert_memory_equal(buf, pr->orig, sizeof pr->orig);
  send_data(t, 0, DED_MSG_RESULT, 0, pr->attempt, 0, peer_result, CHUNK);
  assert_int_equal(t->rounds_done, 0);
  assert_memory_equal(buf, pr->orig, sizeof pr->orig);
  send_data(t, 0, DED_MSG_RESULT, 0, pr->attempt, CHUNK, peer_result + CHUNK, CHUNK);
  assert_false(t->closed[0]);
  /* The node holds the whole result: it accepts it (HAVE to the peer, in
   * view 0), but its own HAVE is one of the two acceptors', without the
   * primary (the peer, member 0): not yet a quorum. */
  result_digest(pr->g, pr->digest);
  out = tnode_output(t, &len, NOW_NS);
  expect_have(out, len, 0, pr->attempt, 0, 0, pr->digest);
  free(out);
  assert_int_equal(t->rounds_done, 0);
  assert_memory_equal(buf, pr->orig, sizeof pr->orig);
  /* The peer's HAVE (it holds everything since our RESULTs came). */
  send_have(t, 0, 0, pr->attempt, 0, 0, pr->digest);
  assert_false(t->closed[0]);
}

/* ------------------------------------------------ HAVE quorums (tswarm) */

uint64_t swarm_shard_end(const tswarm *sw, unsigned m) {
  return m + 1 < sw->k ? sw->m[m + 1].shard_off : COUNT;
}

void swarm_start(tnode *t, tswarm *sw, const float *buf, const ded_ident *peers,
                 unsigned npeers) {
  memset(sw, 0, sizeof *sw);
  assert_true(npeers >= 1 && npeers <= 3 && npeers <= TN_PEERS);
  sw->k = npeers + 1;
  const ded_ident *who[4] = {NULL};
  const uint8_t *ids[4];
  ids[0] = t->ident.id;
  for (unsigned i = 0; i < npeers; i++) {
    ids[i + 1] = peers[i].id;
    who[i + 1] = &peers[i];
  }
  for (unsigned i = 1; i < sw->k; i++) /* insertion sort by id */
    for (unsigned j = i; j > 0 && memcmp(ids[j - 1], ids[j], DED_ID_BYTES) > 0; j--) {
      const uint8_t *ti = ids[j];
      ids[j] = ids[j - 1];
      ids[j - 1] = ti;
      const ded_ident *tw = who[j];
      who[j] = who[j - 1];
      who[j - 1] = tw;
    }
  sw->me = sw->k;
  for (unsigned m = 0; m < sw->k; m++)
    if (ids[m] == t->ident.id) sw->me = m;
  assert_true(sw->me > 0 && sw->me < sw->k);
  unsigned used = 0;
  for (unsigned m = 0; m < sw->k; m++) {
    if (m == sw->me) continue;
    sw->conn[m] = used++ == 0 ? 0 : tnode_accept(t);
    send_hello(t, sw->conn[m], who[m], RUN);
    assert_false(t->closed[sw->conn[m]]);
  }
  size_t len;
  for (unsigned m = 0; m < sw->k; m++)
    if (m != sw->me) free(tnode_output_on(t, sw->conn[m], &len, t->now));
  for (unsigned m = 0; m < sw->k; m++)
    member_set(&sw->m[m], ids[m], 1.0, 1, CHUNK * ((m * (COUNT / CHUNK)) / sw->k));
  sw->attempt = attempt_of(0, ids[0]);
  sw->c = commit_of(0, sw->attempt, 0, sw->m, (uint16_t)sw->k);
  for (unsigned m = 0; m < sw->k; m++)
    for (int i = 0; i < COUNT; i++)
      sw->x[m][i] = m == sw->me ? buf[i] : (float)(37 * m + 3 * i) * 0.5f - 11.0f;
  for (unsigned m = 0; m < sw->k; m++)
    for (uint64_t i = sw->m[m].shard_off; i < swarm_shard_end(sw, m); i++) {
      if (m != sw->me) {
        sw->g[i] = 0.25f * (float)i - (float)m;
        continue;
      }
      float acc = sw->x[0][i];
      for (unsigned n = 1; n < sw->k; n++) acc += sw->x[n][i];
      sw->g[i] = acc / (float)sw->k;
    }
  result_digest(sw->g, sw->digest);
}

void swarm_commit(tnode *t, tswarm *sw) {
  send_commit(t, sw->conn[0], &sw->c);
  assert_false(t->closed[sw->conn[0]]);
  size_t len;
  for (unsigned m = 0; m < sw->k; m++) {
    if (m == sw->me) continue;
    uint8_t *out = tnode_output_on(t, sw->conn[m], &len, t->now);
    assert_int_equal(frame_count(out, len, DED_MSG_DATA),
                     (int)((swarm_shard_end(sw, m) - sw->m[m].shard_off) / CHUNK));
    free(out);
  }
}

void swarm_feed(tnode *t, tswarm *sw, bool hold_last) { swarm_feed_with(t, sw, sw->g, hold_last); }

void swarm_feed_with(tnode *t, tswarm *sw, const float *g, bool hold_last) {
  const uint64_t lo = sw->m[sw->me].shard_off, hi = swarm_shard_end(sw, sw->me);
  for (unsigned m = 0; m < sw->k; m++)
    if (m != sw->me)
      send_chunks(t, sw->conn[m], DED_MSG_DATA, 0, sw->attempt, lo, sw->x[m] + lo, hi - lo);
  unsigned last = sw->k - 1 == sw->me ? sw->k - 2 : sw->k - 1;
  for (unsigned m = 0; m < sw->k; m++) {
    if (m == sw->me) continue;
    uint64_t a = sw->m[m].shard_off, b = swarm_shard_end(sw, m);
    if (hold_last && m == last) b -= CHUNK;
    send_chunks(t, sw->conn[m], DED_MSG_RESULT, 0, sw->attempt, a, g + a, b - a);
    assert_false(t->closed[sw->conn[m]]);
  }
}

void swarm_feed_last(tnode *t, tswarm *sw) {
  unsigned last = sw->k - 1 == sw->me ? sw->k - 2 : sw->k - 1;
  uint64_t off = swarm_shard_end(sw, last) - CHUNK;
  send_data(t, sw->conn[last], DED_MSG_RESULT, 0, sw->attempt, off, sw->g + off, CHUNK);
  assert_false(t->closed[sw->conn[last]]);
}

/* --------------------------------------------- views: JOINs and COMMITs */

ded_msg_join join_of(uint64_t round, uint32_t view, uint8_t flags, uint32_t acc_view) {
  ded_msg_join j;
  memset(&j, 0, sizeof j);
  j.round = round;
  j.view = view;
  j.dtype = DED_DTYPE_F32;
  j.count = COUNT;
  j.pos = round * COUNT;
  j.weight = 1.0;
  j.n_local = 1;
  j.flags = flags;
  j.acc_view = acc_view;
  return j;
}

int tlin_commits(tnode *t, unsigned i, uint64_t round, ded_msg_commit *c) {
  size_t len;
  uint8_t *out = tnode_output_on(t, i, &len, t->now);
  ded_frame fr;
  int n = 0;
  for (int k = 0; frame_find(out, len, DED_MSG_COMMIT, k, &fr); k++) {
    ded_msg_commit cm;
    assert_int_equal(ded_msg_commit_decode(fr.payload, fr.len, NULL, &cm), 0);
    if (cm.round != round) {
      ded_msg_commit_free(&cm, NULL);
      continue;
    }
    unsigned acc = 0;
    bool primary = false;
    for (unsigned m = 0; m < cm.k; m++) {
      acc += (cm.members[m].flags & DED_MEMBER_F_ACCEPTOR) != 0;
      primary |= (cm.members[m].flags & DED_MEMBER_F_PRIMARY) != 0;
    }
    if (!(2 * acc > cm.nacc || (2 * acc == cm.nacc && primary))) {
      unsigned members = cm.k, nacc = cm.nacc;
      ded_msg_commit_free(&cm, NULL);
      free(out);
      fail_msg("round %llu: a COMMIT of %u members, %u of them acceptors (%s the primary) of %u: "
               "it can never complete",
               (unsigned long long)round, members, acc, primary ? "with" : "without", nacc);
    }
    if (n++ == 0 && c)
      *c = cm;
    else
      ded_msg_commit_free(&cm, NULL);
  }
  free(out);
  return n;
}

/* -------------------------------- state transfer against scripted peers */

uint8_t snap_byte(uint64_t i) { return (uint8_t)(i * 131 + (i >> 9) + 7); }

void send_state_ask(tnode *t, unsigned i, uint64_t min_round) {
  uint8_t f[DED_STATE_ASK_FRAME_BYTES];
  ded_wr w = ded_wr_init(f, sizeof f);
  ded_msg_state_ask m;
  memset(&m, 0, sizeof m);
  m.min_round = min_round;
  ded_msg_state_ask_encode(&w, &m);
  assert_false(w.err);
  send_raw(t, i, f, w.pos);
}

void send_state_get(tnode *t, unsigned i, uint64_t round, uint64_t digest, uint64_t off,
                    uint32_t len) {
  uint8_t f[DED_STATE_GET_FRAME_BYTES];
  ded_wr w = ded_wr_init(f, sizeof f);
  ded_msg_state_get m = {round, digest, off, len};
  ded_msg_state_get_encode(&w, &m);
  assert_false(w.err);
  send_raw(t, i, f, w.pos);
}

void send_state_offer(tnode *t, unsigned i, const ded_msg_state_offer *m) {
  size_t cap = DED_STATE_OFFER_FRAME_BYTES(m->nlin);
  uint8_t *f = malloc(cap);
  assert_non_null(f);
  ded_wr w = ded_wr_init(f, cap);
  ded_msg_state_offer_encode(&w, m);
  assert_false(w.err);
  send_raw(t, i, f, w.pos);
  free(f);
}

void send_state_data(tnode *t, unsigned i, uint64_t round, uint64_t digest, uint64_t off,
                     const uint8_t *bytes, size_t len) {
  uint8_t *f = malloc(DED_STATE_DATA_HDR_BYTES + len);
  assert_non_null(f);
  ded_msg_state_data_hdr_encode(f, round, digest, off, len);
  memcpy(f + DED_STATE_DATA_HDR_BYTES, bytes, len);
  send_raw(t, i, f, DED_STATE_DATA_HDR_BYTES + len);
  free(f);
}

ded_msg_state_offer scripted_offer(const uint8_t *bytes, uint64_t len,
                                   const uint8_t lin[DED_LIN_BYTES(2)]) {
  ded_msg_state_offer m;
  memset(&m, 0, sizeof m);
  m.status = DED_STATE_OFFER;
  m.round = 5;
  m.digest = ded_digest64(bytes, len);
  m.step_rounds = 2;
  m.len = len;
  m.lin_attempt = 77;
  m.nlin = 2;
  m.lin = lin;
  return m;
}

ded_node *node_without_state_done(tnode *t) {
  ded_node_settings s;
  memset(&s, 0, sizeof s);
  s.run = RUN;
  s.min_peers = 2;
  s.identity_seed = node_seed;
  s.round_timeout_ns = 10 * SEC_NS;
  ded_node_callbacks cb;
  memset(&cb, 0, sizeof cb);
  cb.connect = tn_connect;
  cb.close = tn_close;
  cb.round_done = tn_round_done;
  ded_node *node;
  assert_int_equal(ded_node_new(&s, &cb, t, NOW_NS, &node), 0);
  assert_int_equal(ded_node_start(node, NOW_NS), 0);
  return node;
}

/* The |nth| STATE_OFFER in |out| (its lineage points into |out|). */
bool output_offer(const uint8_t *out, size_t len, int nth, ded_msg_state_offer *m) {
  ded_frame fr;
  if (!frame_find(out, len, DED_MSG_STATE_OFFER, nth, &fr)) return false;
  assert_int_equal(ded_msg_state_offer_decode(fr.payload, fr.len, m), 0);
  return true;
}

/* Checks that connection |i|'s output is exactly one STATE_OFFER with
 * |status| (and for OFFER, nothing but what |want| says); returns it. */
ded_msg_state_offer expect_offer(tnode *t, unsigned i, uint8_t status, uint64_t round) {
  size_t len;
  uint8_t *out = tnode_output_on(t, i, &len, t->now);
  assert_int_equal(frame_count(out, len, DED_MSG_STATE_OFFER), 1);
  ded_msg_state_offer m;
  assert_true(output_offer(out, len, 0, &m));
  assert_int_equal(m.status, status);
  assert_int_equal(m.round, round);
  m.lin = NULL; /* |out| goes */
  free(out);
  return m;
}
