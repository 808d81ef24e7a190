/*
 * gen_corpus.c: writes the seed corpora of the fuzz targets.
 *
 * Usage: fuzz_gen_corpus DIR   (writes DIR/{frame,msg,record,node,noise,chan,invite,image,ckpt}/NAME)
 *
 * Seeds are valid encodings of every message, records, and whole
 * conversations with the fuzzed node (fuzz_node.c): a HELLO signed for the
 * fuzz run, then the frames a real peer would send next, so that the
 * fuzzer starts deep inside the protocol instead of at the signature.
 * Truncated and corrupted variants are added so that error paths are
 * covered from the first run. Everything is deterministic (fixed seeds,
 * fixed clock): rerunning the generator rewrites the same bytes.
 */
#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

#include "avg/ded_codec.h"
#include "avg/ded_digest.h"
#include "avg/ded_reduce.h"
#include "core/ded_limits.h"
#include "core/ded_msg.h"
#include "core/ded_types.h"
#include "crypto/ded_ident.h"
#include "dht/ded_record.h"
#include "dht/ded_invite.h"
#include "state/ded_image.h"
#include "ded_ckpt.h"
#include "fuzz_chan_world.h"
#include "fuzz_noise_world.h"

/* ------------------------------------------------------------ buffers */

typedef struct gbuf {
  uint8_t *p;
  size_t len, cap;
} gbuf;

static void gbuf_put(gbuf *b, const void *p, size_t n) {
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n) cap *= 2;
    uint8_t *q = realloc(b->p, cap);
    FUZZ_CHECK(q);
    b->p = q;
    b->cap = cap;
  }
  if (n) memcpy(b->p + b->len, p, n);
  b->len += n;
}

static void gbuf_u8(gbuf *b, uint8_t v) { gbuf_put(b, &v, 1); }

static void gbuf_reset(gbuf *b) { b->len = 0; }

static void gbuf_free(gbuf *b) {
  free(b->p);
  memset(b, 0, sizeof *b);
}

/* -------------------------------------------------------------- files */

static const char *out_dir;

static void make_dir(const char *path) {
  if (mkdir(path, 0755) != 0 && errno != EEXIST) {
    fprintf(stderr, "gen_corpus: mkdir %s: %s\n", path, strerror(errno));
    exit(1);
  }
}

static void write_seed(const char *target, const char *name, const uint8_t *p, size_t len) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", out_dir, target);
  make_dir(path);
  snprintf(path, sizeof path, "%s/%s/%s", out_dir, target, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(p, 1, len, f) != len || fclose(f) != 0) {
    fprintf(stderr, "gen_corpus: %s: %s\n", path, strerror(errno));
    exit(1);
  }
}

/* ---------------------------------------------------- identities, records */

static uint8_t run_id[DED_RUN_ID_BYTES];

static void ident_from_byte(ded_ident *id, uint8_t b) {
  uint8_t seed[DED_SEED_BYTES];
  memset(seed, b, sizeof seed);
  ded_ident_from_seed(id, seed);
}

typedef struct rec_opts {
  uint8_t naddr;
  uint16_t ext_len;
  uint16_t flags;
  uint8_t mode;
  uint64_t issued_ms;
  const uint8_t *run; /* NULL: the fuzz run */
} rec_opts;

/* A signed record of |id|, encoded into |out|; its length. */
static size_t make_record(const ded_ident *id, const rec_opts *o, uint8_t *out) {
  ded_record rec;
  memset(&rec, 0, sizeof rec);
  rec.mode = o->mode;
  rec.flags = o->flags;
  memcpy(rec.run_id, o->run ? o->run : run_id, DED_RUN_ID_BYTES);
  rec.seq = 1;
  rec.issued_ms = o->issued_ms ? o->issued_ms : FUZZ_NOW_MS;
  rec.ttl_ms = 300000;
  rec.naddr = o->naddr;
  for (unsigned i = 0; i < o->naddr; i++) {
    rec.addr[i].family = i % 2 ? 6 : 4;
    rec.addr[i].ip[0] = 10;
    rec.addr[i].ip[15] = (uint8_t)(i + 1);
    rec.addr[i].port = (uint16_t)(7000 + i);
  }
  /* A well-formed extension: the rates when there is room, then entries
   * of a tag this version skips (255 bytes at most each) filling the rest. */
  size_t pos = 0;
  if (o->ext_len >= 2 + DED_RECORD_PERF_BYTES + 2) {
    ded_perf perf = {12500, 6250, 4000000, DED_PERF_F_DOWN_EARLY};
    ded_record_perf_set(&rec, &perf);
    pos = rec.ext_len;
  }
  FUZZ_CHECK(o->ext_len == 0 || o->ext_len - pos >= 2);
  for (size_t i = pos; i < o->ext_len; i++) rec.ext[i] = (uint8_t)(i * 13);
  while (o->ext_len > pos) {
    size_t len = o->ext_len - pos - 2;
    if (len > 255) len = o->ext_len - pos - 2 - 255 == 1 ? 254 : 255; /* no 1-byte tail */
    rec.ext[pos] = 0x40;
    rec.ext[pos + 1] = (uint8_t)len;
    pos += 2 + len;
  }
  rec.ext_len = o->ext_len;
  ded_record_sign(&rec, id);
  int n = ded_record_encode(&rec, out, DED_RECORD_BYTES_MAX);
  FUZZ_CHECK(n > 0);
  return (size_t)n;
}

/* ------------------------------------------------------------- frames */

/* A HELLO whose record says |mode|. A client's or an aux peer's record
 * publishes its rates, so that the coordinator's plan gives it its due
 * share (none for a client); a client's has no address (it accepts no
 * connections). */
static void frame_hello_mode(gbuf *b, const ded_ident *id, const uint8_t *run, uint8_t mode) {
  uint8_t rec[DED_RECORD_BYTES_MAX];
  rec_opts o = {.naddr = mode == DED_MODE_CLIENT ? 0 : 1,
                .ext_len = mode == DED_MODE_NODE ? 0 : 2 + DED_RECORD_PERF_BYTES + 2,
                .mode = mode,
                .run = run};
  size_t rl = make_record(id, &o, rec);
  uint8_t f[DED_HELLO_FRAME_BYTES(DED_RECORD_BYTES_MAX)];
  ded_wr w = ded_wr_init(f, sizeof f);
  ded_msg_hello_encode(&w, run ? run : run_id, rec, rl);
  FUZZ_CHECK(!w.err);
  gbuf_put(b, f, w.pos);
}

static void frame_hello(gbuf *b, const ded_ident *id, const uint8_t *run) {
  frame_hello_mode(b, id, run, DED_MODE_NODE);
}

/* RECORDS with the records of identities |bytes[0..n)|, varied shapes. */
static void frame_records(gbuf *b, const uint8_t *bytes, unsigned n) {
  uint8_t f[DED_FRAME_HDR_BYTES + 2 + 8 * (2 + DED_RECORD_BYTES_MAX)];
  ded_wr w = ded_wr_init(f, sizeof f);
  ded_msg_records_wr rw;
  ded_msg_records_begin(&rw, &w);
  for (unsigned i = 0; i < n && i < 8; i++) {
    ded_ident id;
    ident_from_byte(&id, bytes[i]);
    uint8_t rec[DED_RECORD_BYTES_MAX];
    rec_opts o = {.naddr = (uint8_t)(1 + i % DED_RECORD_ADDRS_MAX),
                  .ext_len = (uint16_t)(i * 20),
                  .flags = i == 2 ? DED_RECORD_F_NO_ROUNDS : 0,
                  .mode = (uint8_t)(i % 3)};
    size_t rl = make_record(&id, &o, rec);
    FUZZ_CHECK(ded_msg_records_add(&rw, rec, rl) == 0);
  }
  ded_msg_records_end(&rw);
  FUZZ_CHECK(!w.err);
  gbuf_put(b, f, w.pos);
}

/* The attempt a coordinator |id| makes in |view| (ded_msg.h). */
static uint64_t attempt_of(uint32_t view, const uint8_t id[DED_ID_BYTES]) {
  return (uint64_t)view << 32 | (uint64_t)id[0] << 24 | (uint64_t)id[1] << 16 |
         (uint64_t)id[2] << 8 | id[3];
}

static ded_msg_join join_of(uint64_t round, uint32_t view, uint8_t dtype, uint64_t count,
                            double weight, uint32_t n_local, uint8_t flags) {
  ded_msg_join j;
  memset(&j, 0, sizeof j);
  j.round = round;
  j.view = view;
  j.dtype = dtype;
  j.count = count;
  j.weight = weight;
  j.n_local = n_local;
  j.flags = flags;
  return j;
}

static void frame_join(gbuf *b, uint64_t round, uint32_t view, uint8_t dtype, uint64_t count,
                       double weight, uint32_t n_local, uint8_t flags) {
  ded_msg_join j = join_of(round, view, dtype, count, weight, n_local, flags);
  uint8_t f[DED_JOIN_FRAME_BYTES];
  ded_wr w = ded_wr_init(f, sizeof f);
  ded_msg_join_encode(&w, &j);
  FUZZ_CHECK(!w.err);
  gbuf_put(b, f, w.pos);
}

/* A plan (COMMIT body) of |k| <= 16 members with ids |ids| (increasing),
 * equal shards of |count|; every member an acceptor, member 0 the
 * primary, of k acceptors (as ded_gather_commit builds a first round).
 * Members live in |m|. */
static ded_msg_commit plan_of(ded_msg_member *m, uint64_t round, uint64_t attempt, uint64_t base,
                              uint8_t dtype, uint64_t count, uint32_t chunk_elems,
                              const uint8_t *const *ids, const double *w, const uint32_t *n_local,
                              unsigned k) {
  memset(m, 0, (size_t)k * sizeof *m);
  for (unsigned i = 0; i < k; i++) {
    memcpy(m[i].id, ids[i], DED_ID_BYTES);
    m[i].weight = w[i];
    m[i].n_local = n_local[i];
    m[i].shard_off = count * i / k;
    m[i].flags = DED_MEMBER_F_ACCEPTOR | (i == 0 ? DED_MEMBER_F_PRIMARY : 0);
  }
  ded_msg_commit c;
  memset(&c, 0, sizeof c);
  c.round = round;
  c.attempt = attempt;
  c.base = base;
  c.dtype = dtype;
  c.count = count;
  c.chunk_elems = chunk_elems;
  c.k = (uint16_t)k;
  c.nacc = (uint16_t)k;
  c.members = m;
  return c;
}

/* Makes members 1, 4, 7, ... of |c| clients and 2, 5, 8, ... aux members
 * (weight 0), as ded_gather_commit does for joiners that said so; member
 * 0 stays a node, the round's contributor. */
static void plan_modes(ded_msg_commit *c) {
  for (unsigned i = 0; i < c->k; i++) {
    if (i % 3 == 1) c->members[i].flags |= DED_MEMBER_F_CLIENT;
    if (i % 3 == 2) {
      c->members[i].flags |= DED_MEMBER_F_AUX;
      c->members[i].weight = 0.0;
    }
  }
}

static void frame_commit(gbuf *b, const ded_msg_commit *c) {
  size_t cap = DED_COMMIT_FRAME_BYTES(c->k);
  uint8_t *f = malloc(cap);
  FUZZ_CHECK(f);
  ded_wr wr = ded_wr_init(f, cap);
  ded_msg_commit_encode(&wr, c);
  FUZZ_CHECK(!wr.err);
  gbuf_put(b, f, wr.pos);
  free(f);
}

/* A two-member COMMIT; |ids| in increasing order. */
static void frame_commit2(gbuf *b, uint64_t round, uint64_t attempt, uint64_t base, uint8_t dtype,
                          uint64_t count, uint32_t chunk_elems, const uint8_t *ids[2],
                          const double w[2], const uint32_t n_local[2]) {
  ded_msg_member m[2];
  ded_msg_commit c = plan_of(m, round, attempt, base, dtype, count, chunk_elems, ids, w, n_local, 2);
  frame_commit(b, &c);
}

/* A JOIN reporting attempt |plan| with the shards of |have|. */
static void frame_join_status(gbuf *b, const ded_msg_join *j, const ded_msg_commit *plan,
                              const uint8_t *have) {
  size_t cap = DED_JOIN_STATUS_FRAME_BYTES(plan->k) +
               (j->flags & DED_JOIN_F_VOID ? DED_JOIN_VOID_BYTES : 0);
  uint8_t *f = malloc(cap);
  FUZZ_CHECK(f);
  ded_wr w = ded_wr_init(f, cap);
  ded_msg_join_status_encode(&w, j, plan, have);
  FUZZ_CHECK(!w.err && w.pos == cap);
  gbuf_put(b, f, w.pos);
  free(f);
}

static void frame_decide(gbuf *b, uint32_t view, uint8_t flags, const ded_msg_commit *plan,
                         const uint16_t *holders) {
  size_t cap = DED_DECIDE_FRAME_BYTES(plan->k);
  uint8_t *f = malloc(cap);
  FUZZ_CHECK(f);
  ded_wr w = ded_wr_init(f, cap);
  ded_msg_decide_encode(&w, view, flags, plan, holders);
  FUZZ_CHECK(!w.err && w.pos == cap);
  gbuf_put(b, f, w.pos);
  free(f);
}

static void frame_fetch(gbuf *b, uint64_t round, uint64_t attempt, uint16_t shard) {
  ded_msg_fetch m = {round, attempt, shard};
  uint8_t f[DED_FETCH_FRAME_BYTES];
  ded_wr w = ded_wr_init(f, sizeof f);
  ded_msg_fetch_encode(&w, &m);
  FUZZ_CHECK(!w.err);
  gbuf_put(b, f, w.pos);
}

/* The sender holds |attempt|'s result, whose bytes hash to |digest|, and
 * accepts it in |view|. */
static void frame_have(gbuf *b, uint64_t round, uint64_t attempt, uint32_t view, uint8_t flags,
                       const uint8_t digest[DED_RESULT_DIGEST_BYTES]) {
  ded_msg_have m = {round, attempt, view, flags, {0}};
  memcpy(m.digest, digest, DED_RESULT_DIGEST_BYTES);
  uint8_t f[DED_HAVE_FRAME_BYTES];
  ded_wr w = ded_wr_init(f, sizeof f);
  ded_msg_have_encode(&w, &m);
  FUZZ_CHECK(!w.err);
  gbuf_put(b, f, w.pos);
}

static void frame_abstain(gbuf *b, uint64_t round) {
  ded_msg_abstain m = {round};
  uint8_t f[DED_ABSTAIN_FRAME_BYTES];
  ded_wr w = ded_wr_init(f, sizeof f);
  ded_msg_abstain_encode(&w, &m);
  gbuf_put(b, f, w.pos);
}

static void frame_probe(gbuf *b, uint64_t round, uint32_t view) {
  ded_msg_probe m = {round, view};
  uint8_t f[DED_PROBE_FRAME_BYTES];
  ded_wr w = ded_wr_init(f, sizeof f);
  ded_msg_probe_encode(&w, &m);
  FUZZ_CHECK(!w.err);
  gbuf_put(b, f, w.pos);
}

static void frame_redirect(gbuf *b, uint64_t round, uint32_t view, const uint8_t id[DED_ID_BYTES]) {
  ded_msg_redirect m = {.round = round, .view = view};
  memcpy(m.id, id, DED_ID_BYTES);
  uint8_t f[DED_REDIRECT_FRAME_BYTES];
  ded_wr w = ded_wr_init(f, sizeof f);
  ded_msg_redirect_encode(&w, &m);
  gbuf_put(b, f, w.pos);
}

static void frame_leave(gbuf *b, uint8_t reason) {
  uint8_t f[DED_LEAVE_FRAME_BYTES];
  ded_wr w = ded_wr_init(f, sizeof f);
  ded_msg_leave_encode(&w, reason);
  gbuf_put(b, f, w.pos);
}

/* STALE, or AHEAD (same body). */
static void frame_rounds(gbuf *b, bool ahead, uint64_t round, uint64_t next) {
  ded_msg_stale m = {round, next};
  uint8_t f[DED_STALE_FRAME_BYTES];
  ded_wr w = ded_wr_init(f, sizeof f);
  (ahead ? ded_msg_ahead_encode : ded_msg_stale_encode)(&w, &m);
  gbuf_put(b, f, w.pos);
}

static void frame_stale(gbuf *b, uint64_t round, uint64_t next) {
  frame_rounds(b, false, round, next);
}

static void frame_ahead(gbuf *b, uint64_t round, uint64_t next) {
  frame_rounds(b, true, round, next);
}

/* A SPEED frame asking for |want| bytes back, with |fill| zeros. */
static void frame_speed(gbuf *b, uint32_t want, size_t fill) {
  uint8_t h[DED_SPEED_HDR_BYTES];
  ded_msg_speed_hdr_encode(h, want, fill);
  gbuf_put(b, h, sizeof h);
  for (size_t i = 0; i < fill; i++) gbuf_u8(b, 0);
}

/* |origin| NULL: a plain ask; else a founding one (min_round 0). */
static void frame_state_ask(gbuf *b, uint64_t min_round, const uint8_t *origin) {
  ded_msg_state_ask m;
  memset(&m, 0, sizeof m);
  m.min_round = min_round;
  if (origin) memcpy(m.origin, origin, DED_ID_BYTES);
  uint8_t f[DED_STATE_ASK_FRAME_BYTES];
  ded_wr w = ded_wr_init(f, sizeof f);
  ded_msg_state_ask_encode(&w, &m);
  FUZZ_CHECK(!w.err);
  gbuf_put(b, f, w.pos);
}

/* A STATE_OFFER; |m->lin| holds a lineage: m->nlin ids, then
 * DED_LIN_BITS(m->nlin) bytes of client bits (ded_msg.h). */
static void frame_state_offer(gbuf *b, const ded_msg_state_offer *m) {
  size_t cap = DED_STATE_OFFER_FRAME_BYTES(m->nlin);
  uint8_t *f = malloc(cap);
  FUZZ_CHECK(f);
  ded_wr w = ded_wr_init(f, cap);
  ded_msg_state_offer_encode(&w, m);
  FUZZ_CHECK(!w.err && w.pos == cap);
  gbuf_put(b, f, w.pos);
  free(f);
}

/* A status-only STATE_OFFER (FRESH, PENDING, NONE, GONE). */
static void frame_state_status(gbuf *b, uint8_t status, uint64_t round, uint64_t digest) {
  ded_msg_state_offer m;
  memset(&m, 0, sizeof m);
  m.status = status;
  m.round = round;
  m.digest = digest;
  frame_state_offer(b, &m);
}

static void frame_state_get(gbuf *b, uint64_t round, uint64_t digest, uint64_t offset,
                            uint32_t len) {
  ded_msg_state_get m = {round, digest, offset, len};
  uint8_t f[DED_STATE_GET_FRAME_BYTES];
  ded_wr w = ded_wr_init(f, sizeof f);
  ded_msg_state_get_encode(&w, &m);
  FUZZ_CHECK(!w.err);
  gbuf_put(b, f, w.pos);
}

/* A STATE_DATA frame: bytes [offset, offset + n) of a state whose byte i
 * is (uint8_t)(i * 31). */
static void frame_state_data(gbuf *b, uint64_t round, uint64_t digest, uint64_t offset, size_t n) {
  uint8_t hdr[DED_STATE_DATA_HDR_BYTES];
  ded_msg_state_data_hdr_encode(hdr, round, digest, offset, n);
  gbuf_put(b, hdr, sizeof hdr);
  for (size_t i = 0; i < n; i++) gbuf_u8(b, (uint8_t)((offset + i) * 31));
}

/* DATA or RESULT frames of |attempt| covering elements [from, to) in
 * chunks of |chunk|; element i has the value base + i. */
static void frames_data(gbuf *b, uint8_t type, uint64_t round, uint64_t attempt, uint8_t dtype,
                        uint64_t from, uint64_t to, uint64_t chunk, double base) {
  size_t es = ded_dtype_size(dtype);
  for (uint64_t off = from; off < to; off += chunk) {
    uint64_t n = to - off < chunk ? to - off : chunk;
    uint8_t hdr[DED_DATA_HDR_BYTES];
    ded_msg_data_hdr_encode(hdr, type, round, attempt, off, 0, n * es);
    gbuf_put(b, hdr, sizeof hdr);
    for (uint64_t i = off; i < off + n; i++) {
      if (dtype == DED_DTYPE_F32) {
        float v = (float)(base + (double)i);
        gbuf_put(b, &v, sizeof v);
      } else {
        double v = base + (double)i;
        gbuf_put(b, &v, sizeof v);
      }
    }
  }
}

/* A contribution to the fuzzed node's shard, in commit order: the node's
 * own buffer (fuzz_node.c's: doubles 0.25 i, read as the round's element
 * type), or a peer's DATA as frames_data writes it (|base| + i); times
 * |a| = w / n_local of its member. */
typedef struct gcontrib {
  bool node;
  double base;
  double a;
} gcontrib;

/* The digest of the result the fuzzed node holds once a round's result is
 * whole (what a HAVE carries, ded_msg.h): its own shard [from, to) reduced
 * from |c| in that order and divided by |W|, as ded_reduce.h does; every
 * other element a peer's RESULT as frames_data writes it (|peer_base| +
 * i). An honest peer's HAVE says this digest, so the node completes on
 * it. */
static void node_result_digest(uint8_t d[DED_RESULT_DIGEST_BYTES], uint8_t dtype, uint64_t from,
                               uint64_t to, const gcontrib *c, unsigned nc, double W,
                               double peer_base) {
  const uint64_t n = FUZZ_NODE_COUNT;
  size_t es = ded_dtype_size(dtype);
  FUZZ_CHECK(es != 0 && from <= to && to <= n && (nc > 0) == (from < to));
  uint8_t res[FUZZ_NODE_COUNT * sizeof(double)], x[FUZZ_NODE_COUNT * sizeof(double)];
  double node_buf[FUZZ_NODE_COUNT];
  for (int i = 0; i < FUZZ_NODE_COUNT; i++) node_buf[i] = 0.25 * i;
  for (uint64_t i = 0; i < n; i++) {
    if (i >= from && i < to) continue;
    float vf = (float)(peer_base + (double)i);
    double vd = peer_base + (double)i;
    memcpy(res + i * es, es == sizeof vf ? (const void *)&vf : (const void *)&vd, es);
  }
  for (unsigned m = 0; m < nc; m++) {
    const uint8_t *src = (const uint8_t *)node_buf + from * es;
    if (!c[m].node) {
      for (uint64_t i = from; i < to; i++) {
        float vf = (float)(c[m].base + (double)i);
        double vd = c[m].base + (double)i;
        memcpy(x + i * es, es == sizeof vf ? (const void *)&vf : (const void *)&vd, es);
      }
      src = x + from * es;
    }
    ded_reduce_axpy(dtype, res + from * es, src, (size_t)(to - from), c[m].a, m == 0);
  }
  if (nc) ded_reduce_div(dtype, res + from * es, (size_t)(to - from), W);
  ded_digest_of(res, n * es, d);
}

/* Empty RECORDS frames: valid and without effect. They lengthen a
 * conversation, so the node's timers get to run between two phases (the
 * fuzz driver advances time between reads). */
static void frames_padding(gbuf *b, unsigned n) {
  for (unsigned i = 0; i < n; i++) {
    uint8_t f[DED_FRAME_HDR_BYTES + 2];
    ded_wr w = ded_wr_init(f, sizeof f);
    ded_msg_records_wr rw;
    ded_msg_records_begin(&rw, &w);
    ded_msg_records_end(&rw);
    gbuf_put(b, f, w.pos);
  }
}

/* ------------------------------------------------------------- record */

static void gen_record(void) {
  ded_ident id;
  ident_from_byte(&id, 0x11);
  uint8_t rec[DED_RECORD_BYTES_MAX];
  static const struct {
    const char *name;
    rec_opts o;
  } shapes[] = {
      {"minimal", {0}},
      {"two_addrs", {.naddr = 2, .ext_len = 3}},
      {"largest", {.naddr = DED_RECORD_ADDRS_MAX, .ext_len = DED_RECORD_EXT_MAX}},
      {"no_rounds_client", {.naddr = 1, .flags = DED_RECORD_F_NO_ROUNDS, .mode = DED_MODE_CLIENT}},
      {"aux", {.naddr = 3, .mode = DED_MODE_AUX}},
      {"expired", {.naddr = 1, .issued_ms = 1000}},
      {"future", {.naddr = 1, .issued_ms = FUZZ_NOW_MS + 24 * 3600 * 1000ull}},
  };
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    size_t n = make_record(&id, &shapes[i].o, rec);
    write_seed("record", shapes[i].name, rec, n);
  }
  uint8_t other_run[DED_RUN_ID_BYTES];
  ded_hash32("other", 5, other_run);
  rec_opts o = {.naddr = 1, .run = other_run};
  size_t n = make_record(&id, &o, rec);
  write_seed("record", "wrong_run", rec, n);
  /* Broken ones: cut short, a bit flipped in the signature, a byte too many. */
  o = (rec_opts){.naddr = 2, .ext_len = 5};
  n = make_record(&id, &o, rec);
  write_seed("record", "truncated", rec, n / 2);
  rec[n - 1] ^= 1;
  write_seed("record", "bad_signature", rec, n);
  rec[n - 1] ^= 1;
  rec[n] = 0;
  write_seed("record", "trailing_byte", rec, n + 1);
  /* Rates and a last completed round, as a peer in a run publishes them. */
  ded_record full;
  o = (rec_opts){.naddr = 1};
  n = make_record(&id, &o, rec);
  FUZZ_CHECK(ded_record_decode(rec, n, &full) == 0);
  ded_record_perf_set(&full, &(ded_perf){12500, 6250, 900000, 0});
  ded_record_progress_add(&full, &(ded_progress){4321, 4470, 4, 0x1234, 0, 0});
  ded_record_sign(&full, &id);
  int m = ded_record_encode(&full, rec, sizeof rec);
  FUZZ_CHECK(m > 0);
  write_seed("record", "progress", rec, (size_t)m);
  /* The same as an older peer writes it: 16 bytes, no attempt. */
  ded_record_perf_set(&full, &(ded_perf){12500, 6250, 900000, 0});
  const uint8_t old_progress[] = {DED_RECORD_EXT_PROGRESS, 16, 0xe1, 0x10, 0, 0, 0, 0, 0, 0,
                                  0x76, 0x11, 0, 0, 4, 0, 0, 0};
  memcpy(full.ext + full.ext_len, old_progress, sizeof old_progress);
  full.ext_len = (uint16_t)(full.ext_len + sizeof old_progress);
  ded_record_sign(&full, &id);
  m = ded_record_encode(&full, rec, sizeof rec);
  FUZZ_CHECK(m > 0);
  write_seed("record", "progress_short", rec, (size_t)m);
  /* Group peers: a job's few on two hosts, and the largest list (every
   * entry on a host of its own, in three entries) beside the others. */
  ded_group_addr g[DED_RECORD_GROUPS_MAX];
  for (unsigned i = 0; i < DED_RECORD_GROUPS_MAX; i++) {
    memset(&g[i], 0, sizeof g[i]);
    g[i].id = (uint16_t)(1 + 3 * i);
    g[i].addr.family = i % 2 ? 6 : 4;
    g[i].addr.ip[0] = 10;
    g[i].addr.ip[2] = (uint8_t)i;
    g[i].addr.port = (uint16_t)(7100 + i);
  }
  ded_record_perf_set(&full, &(ded_perf){12500, 6250, 900000, 0});
  ded_record_progress_add(&full, &(ded_progress){4321, 4470, 4, 0x1234, 0, 0});
  ded_group_addr few[4];
  for (unsigned i = 0; i < 4; i++) {
    few[i] = g[i % 2];
    few[i].id = (uint16_t)(2 * i);
    few[i].addr.port = (uint16_t)(7200 + i);
  }
  FUZZ_CHECK(ded_record_groups_add(&full, few, 4) == 0);
  ded_record_sign(&full, &id);
  m = ded_record_encode(&full, rec, sizeof rec);
  FUZZ_CHECK(m > 0);
  write_seed("record", "groups", rec, (size_t)m);
  ded_record_perf_set(&full, &(ded_perf){12500, 6250, 900000, 0});
  uint8_t isig[DED_SIG_BYTES] = {0x5a};
  ded_record_invite_add(&full, 0, isig);
  ded_record_progress_add(&full, &(ded_progress){4321, 4470, 4, 0x1234, 0, 0});
  FUZZ_CHECK(ded_record_groups_add(&full, g, DED_RECORD_GROUPS_MAX) == 0);
  ded_record_sign(&full, &id);
  m = ded_record_encode(&full, rec, sizeof rec);
  FUZZ_CHECK(m > 0);
  write_seed("record", "groups_largest", rec, (size_t)m);
}

/* ---------------------------------------------------------------- http */

/* Requests to a backbone's status server (launcher/http.c). */
static void gen_http(void) {
  static const struct {
    const char *name, *text;
  } seeds[] = {
      {"get_root", "GET / HTTP/1.1\r\nHost: 127.0.0.1:7001\r\nUser-Agent: x\r\n\r\n"},
      {"head_json_query", "HEAD /status.json?t=1 HTTP/1.0\r\n\r\n"},
      {"get_bare_lf", "GET /status.txt HTTP/1.1\n\n"},
      {"post", "POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n"},
      {"http2_preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"},
      {"no_version", "GET /\r\n\r\n"},
      {"incomplete", "GET / HTTP/1.1\r\nHost: x\r\n"},
  };
  for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++)
    write_seed("http", seeds[i].name, (const uint8_t *)seeds[i].text, strlen(seeds[i].text));
}

/* ---------------------------------------------------------------- msg */

/* The acceptors of a later round in |c|: some members are not (they
 * missed the previous round), the primary is not member 0, and nacc
 * counts acceptors that are not listed. */
static void plan_later_round(ded_msg_commit *c) {
  unsigned acc = 0;
  for (unsigned i = 0; i < c->k; i++) {
    c->members[i].flags = i % 3 != 2 ? DED_MEMBER_F_ACCEPTOR : 0;
    acc += i % 3 != 2;
  }
  c->members[c->k > 4 ? 4 : 0].flags |= DED_MEMBER_F_PRIMARY;
  c->nacc = (uint16_t)(acc + 2);
}

/* Writes |frame| as a fuzz_msg input: selector, then the payload. */
static void write_msg(const char *name, const gbuf *frame, size_t payload_len) {
  static const uint8_t types[FUZZ_MSG_NTYPES] = FUZZ_MSG_TYPES;
  uint8_t type = frame->p[4], sel = 0;
  while (sel < FUZZ_MSG_NTYPES && types[sel] != type) sel++;
  FUZZ_CHECK(sel < FUZZ_MSG_NTYPES);
  gbuf in = {0};
  gbuf_u8(&in, sel);
  gbuf_put(&in, frame->p + DED_FRAME_HDR_BYTES, payload_len);
  write_seed("msg", name, in.p, in.len);
  gbuf_free(&in);
}

/* The frame's payload whole, cut in half, and with a byte too many. */
static void write_msg_variants(const char *name, gbuf *frame) {
  char n[128];
  size_t payload = frame->len - DED_FRAME_HDR_BYTES;
  write_msg(name, frame, payload);
  snprintf(n, sizeof n, "%s_truncated", name);
  write_msg(n, frame, payload / 2);
  gbuf_u8(frame, 0);
  snprintf(n, sizeof n, "%s_trailing", name);
  write_msg(n, frame, payload + 1);
  frame->len--;
}

static void gen_msg(void) {
  ded_ident a, b;
  ident_from_byte(&a, 0x21);
  ident_from_byte(&b, 0x22);
  const uint8_t *ids[2] = {a.id, b.id};
  if (memcmp(a.id, b.id, DED_ID_BYTES) > 0) {
    ids[0] = b.id;
    ids[1] = a.id;
  }
  const double w[2] = {1.0, 3.5};
  const uint32_t nl[2] = {1, 4};
  const uint64_t att = attempt_of(1, ids[0]), base = attempt_of(0, ids[1]);
  gbuf f = {0};
  frame_hello(&f, &a, NULL);
  write_msg_variants("hello", &f);
  gbuf_reset(&f);
  const uint8_t rb[4] = {0x31, 0x32, 0x33, 0x34};
  frame_records(&f, rb, 4);
  write_msg_variants("records", &f);
  gbuf_reset(&f);
  frames_padding(&f, 1);
  write_msg("records_empty", &f, f.len - DED_FRAME_HDR_BYTES);
  gbuf_reset(&f);
  frame_join(&f, 7, 0, DED_DTYPE_F32, 1000, 1.0, 2, DED_JOIN_F_GENESIS);
  write_msg_variants("join", &f);
  gbuf_reset(&f);
  frame_join(&f, 8, 3, DED_DTYPE_F64, 3, 0.0, 1, DED_JOIN_F_INTENT);
  write_msg("join_f64", &f, f.len - DED_FRAME_HDR_BYTES);
  gbuf_reset(&f);
  /* What the sender is: a client, an aux peer; never both. */
  frame_join(&f, 7, 0, DED_DTYPE_F32, 1000, 1.0, 2, DED_JOIN_F_GENESIS | DED_JOIN_F_CLIENT);
  write_msg_variants("join_client", &f);
  gbuf_reset(&f);
  frame_join(&f, 8, 3, DED_DTYPE_F64, 3, 0.0, 1, DED_JOIN_F_INTENT | DED_JOIN_F_AUX);
  write_msg("join_aux", &f, f.len - DED_FRAME_HDR_BYTES);
  gbuf_reset(&f);
  frame_join(&f, 7, 0, DED_DTYPE_F32, 1000, 1.0, 2, DED_JOIN_F_CLIENT | DED_JOIN_F_AUX);
  write_msg("join_client_and_aux", &f, f.len - DED_FRAME_HDR_BYTES);
  gbuf_reset(&f);
  {
    /* Vouching that rounds 4 to 8 had no result anywhere (the newest
     * result the sender holds is round 3's, attempt 0x10000abcd). */
    ded_msg_join jv = join_of(9, 1, DED_DTYPE_F32, 1000, 1.0, 2, DED_JOIN_F_VOID);
    jv.void_round = 3;
    jv.void_attempt = 0x10000abcdull;
    uint8_t fv[DED_JOIN_FRAME_BYTES + DED_JOIN_VOID_BYTES];
    ded_wr wv = ded_wr_init(fv, sizeof fv);
    ded_msg_join_encode(&wv, &jv);
    FUZZ_CHECK(!wv.err && wv.pos == sizeof fv);
    gbuf_put(&f, fv, wv.pos);
    write_msg_variants("join_void", &f);
    gbuf_reset(&f);
    /* Out of step, unable to vouch: the newest result held is round 5's
     * (held_round 6), attempt 0x20000beef; and none at all. */
    jv = join_of(9, 2, DED_DTYPE_F32, 1000, 1.0, 2, DED_JOIN_F_HELD);
    jv.held_round = 6;
    jv.held_attempt = 0x20000beefull;
    wv = ded_wr_init(fv, sizeof fv);
    ded_msg_join_encode(&wv, &jv);
    FUZZ_CHECK(!wv.err && wv.pos == sizeof fv);
    gbuf_put(&f, fv, wv.pos);
    write_msg_variants("join_held", &f);
    gbuf_reset(&f);
    jv.held_round = jv.held_attempt = 0;
    wv = ded_wr_init(fv, sizeof fv);
    ded_msg_join_encode(&wv, &jv);
    FUZZ_CHECK(!wv.err && wv.pos == sizeof fv);
    gbuf_put(&f, fv, wv.pos);
    write_msg("join_held_none", &f, f.len - DED_FRAME_HDR_BYTES);
    gbuf_reset(&f);
  }
  /* Failover reports: the view the attempt was accepted in, a plan of the
   * round and one bit per shard; two members, and nine (a bitmap of two
   * bytes). One member holds one shard of two (and accepted nothing), one
   * completed the round. */
  ded_msg_member m[16];
  ded_msg_commit plan = plan_of(m, 7, att, base, DED_DTYPE_F32, 1000, 128, ids, w, nl, 2);
  ded_msg_join j = join_of(7, 2, DED_DTYPE_F32, 1000, 1.0, 4, 0);
  j.acc_view = DED_VIEW_NONE;
  const uint8_t have1[1] = {0x02};
  frame_join_status(&f, &j, &plan, have1);
  write_msg_variants("join_status", &f);
  gbuf_reset(&f);
  j.flags = DED_JOIN_F_DONE;
  j.acc_view = 1;
  const uint8_t have_all[1] = {0x03};
  frame_join_status(&f, &j, &plan, have_all);
  write_msg("join_status_done", &f, f.len - DED_FRAME_HDR_BYTES);
  gbuf_reset(&f);
  /* A failover report that vouches for rounds with no result too: the two
   * fields between the flags and the report. */
  j.flags = DED_JOIN_F_VOID;
  j.void_round = 4;
  j.void_attempt = 0x20000beefull;
  j.acc_view = DED_VIEW_NONE;
  frame_join_status(&f, &j, &plan, have1);
  write_msg_variants("join_status_void", &f);
  gbuf_reset(&f);
  j.void_round = j.void_attempt = 0;
  /* A client's report, of a plan where it is one (member 1). */
  plan_modes(&plan);
  j.flags = DED_JOIN_F_CLIENT;
  j.acc_view = DED_VIEW_NONE;
  frame_join_status(&f, &j, &plan, have1);
  write_msg("join_status_client", &f, f.len - DED_FRAME_HDR_BYTES);
  gbuf_reset(&f);
  ded_ident nine[9];
  const uint8_t *ids9[9];
  double w9[9];
  uint32_t nl9[9];
  for (unsigned i = 0; i < 9; i++) {
    ident_from_byte(&nine[i], (uint8_t)(0x60 + i));
    w9[i] = 1.0 + i;
    nl9[i] = i % 3 + 1;
  }
  /* In id order. */
  for (unsigned i = 0; i < 9; i++) ids9[i] = nine[i].id;
  for (unsigned i = 1; i < 9; i++)
    for (unsigned k = i; k > 0 && memcmp(ids9[k - 1], ids9[k], DED_ID_BYTES) > 0; k--) {
      const uint8_t *tmp = ids9[k];
      ids9[k] = ids9[k - 1];
      ids9[k - 1] = tmp;
    }
  ded_msg_commit plan9 = plan_of(m, 11, attempt_of(4, ids9[3]), 0, DED_DTYPE_F64, 900, 64, ids9,
                                 w9, nl9, 9);
  plan_later_round(&plan9);
  ded_msg_join j9 = join_of(11, 4, DED_DTYPE_F64, 900, 2.0, 1, DED_JOIN_F_INTENT);
  j9.acc_view = 3;
  const uint8_t have9[2] = {0xff, 0x01};
  frame_join_status(&f, &j9, &plan9, have9);
  write_msg("join_status_k9", &f, f.len - DED_FRAME_HDR_BYTES);
  gbuf_reset(&f);
  frame_commit2(&f, 7, att, base, DED_DTYPE_F32, 1000, 128, ids, w, nl);
  write_msg_variants("commit", &f);
  gbuf_reset(&f);
  frame_commit(&f, &plan9);
  write_msg("commit_k9_acceptors", &f, f.len - DED_FRAME_HDR_BYTES);
  gbuf_reset(&f);
  /* Clients and aux members (weight 0): valid; an aux member with
   * weight, one that is a client too, a round of aux members only: not. */
  {
    ded_msg_member mc[16];
    ded_msg_commit pm = plan_of(mc, 7, att, base, DED_DTYPE_F32, 1000, 128, ids, w, nl, 2);
    plan_modes(&pm);
    frame_commit(&f, &pm);
    write_msg_variants("commit_client", &f);
    gbuf_reset(&f);
    pm = plan_of(mc, 11, attempt_of(4, ids9[3]), 0, DED_DTYPE_F64, 900, 64, ids9, w9, nl9, 9);
    plan_later_round(&pm);
    plan_modes(&pm);
    frame_commit(&f, &pm);
    write_msg("commit_k9_modes", &f, f.len - DED_FRAME_HDR_BYTES);
    gbuf_reset(&f);
    pm.members[2].weight = 2.0;
    frame_commit(&f, &pm);
    write_msg("commit_aux_weighted", &f, f.len - DED_FRAME_HDR_BYTES);
    gbuf_reset(&f);
    pm.members[2].weight = 0.0;
    pm.members[2].flags |= DED_MEMBER_F_CLIENT;
    frame_commit(&f, &pm);
    write_msg("commit_client_and_aux", &f, f.len - DED_FRAME_HDR_BYTES);
    gbuf_reset(&f);
    pm = plan_of(mc, 7, att, base, DED_DTYPE_F32, 1000, 128, ids, w, nl, 2);
    for (unsigned i = 0; i < 2; i++) {
      pm.members[i].flags |= DED_MEMBER_F_AUX;
      pm.members[i].weight = 0.0;
    }
    frame_commit(&f, &pm);
    write_msg("commit_all_aux", &f, f.len - DED_FRAME_HDR_BYTES);
    gbuf_reset(&f);
    /* An attempt over rounds with no result: its first contributor is the
     * founder (valid); two founders, an aux founder (not). */
    pm = plan_of(mc, 11, attempt_of(4, ids9[3]), 0, DED_DTYPE_F64, 900, 64, ids9, w9, nl9, 9);
    plan_later_round(&pm);
    plan_modes(&pm);
    pm.members[0].flags |= DED_MEMBER_F_FOUNDER;
    frame_commit(&f, &pm);
    write_msg_variants("commit_founder", &f);
    gbuf_reset(&f);
    pm.members[3].flags |= DED_MEMBER_F_FOUNDER;
    frame_commit(&f, &pm);
    write_msg("commit_two_founders", &f, f.len - DED_FRAME_HDR_BYTES);
    gbuf_reset(&f);
    pm.members[0].flags &= (uint8_t)~DED_MEMBER_F_FOUNDER;
    pm.members[3].flags &= (uint8_t)~DED_MEMBER_F_FOUNDER;
    pm.members[2].flags |= DED_MEMBER_F_FOUNDER; /* member 2 is aux */
    frame_commit(&f, &pm);
    write_msg("commit_aux_founder", &f, f.len - DED_FRAME_HDR_BYTES);
    gbuf_reset(&f);
  }
  const uint16_t holders[2] = {1, 1};
  plan = plan_of(m, 7, att, base, DED_DTYPE_F32, 1000, 128, ids, w, nl, 2);
  frame_decide(&f, 2, 0, &plan, holders);
  write_msg_variants("decide", &f);
  gbuf_reset(&f);
  frame_decide(&f, 3, DED_DECIDE_F_CHOSEN, &plan, holders);
  write_msg("decide_chosen", &f, f.len - DED_FRAME_HDR_BYTES);
  gbuf_reset(&f);
  const uint16_t holders9[9] = {0, 1, 2, 3, 4, 5, 6, 8, 8};
  plan9 = plan_of(m, 11, attempt_of(4, ids9[3]), 0, DED_DTYPE_F64, 900, 64, ids9, w9, nl9, 9);
  plan_later_round(&plan9);
  frame_decide(&f, 5, DED_DECIDE_F_CHOSEN, &plan9, holders9);
  write_msg("decide_k9", &f, f.len - DED_FRAME_HDR_BYTES);
  gbuf_reset(&f);
  plan_modes(&plan9);
  frame_decide(&f, 5, 0, &plan9, holders9);
  write_msg("decide_k9_modes", &f, f.len - DED_FRAME_HDR_BYTES);
  gbuf_reset(&f);
  uint8_t digest[DED_RESULT_DIGEST_BYTES];
  ded_hash32("have", 4, digest);
  frame_have(&f, 7, att, 1, 0, digest);
  write_msg_variants("have", &f);
  gbuf_reset(&f);
  frame_have(&f, 7, att, 2, DED_HAVE_F_DONE, digest);
  write_msg("have_done", &f, f.len - DED_FRAME_HDR_BYTES);
  /* A HAVE of protocol version 8: no digest, 32 bytes short. */
  write_msg("have_v8", &f, f.len - DED_FRAME_HDR_BYTES - DED_RESULT_DIGEST_BYTES);
  gbuf_reset(&f);
  frame_fetch(&f, 7, att, 1);
  write_msg_variants("fetch", &f);
  gbuf_reset(&f);
  frame_fetch(&f, 7, att, DED_ROUND_MEMBERS_MAX - 1);
  write_msg("fetch_last_shard", &f, f.len - DED_FRAME_HDR_BYTES);
  gbuf_reset(&f);
  frame_probe(&f, 7, 3);
  write_msg_variants("probe", &f);
  gbuf_reset(&f);
  frame_abstain(&f, 7);
  write_msg_variants("abstain", &f);
  gbuf_reset(&f);
  frame_redirect(&f, 7, 1, ids[0]);
  write_msg_variants("redirect", &f);
  gbuf_reset(&f);
  frames_data(&f, DED_MSG_DATA, 7, att, DED_DTYPE_F32, 500, 508, 8, 0.5);
  write_msg_variants("data", &f);
  gbuf_reset(&f);
  frames_data(&f, DED_MSG_RESULT, 7, att, DED_DTYPE_F64, 0, 4, 4, -2.0);
  write_msg_variants("result", &f);
  gbuf_reset(&f);
  frame_leave(&f, DED_LEAVE_FINALIZE);
  write_msg_variants("leave", &f);
  gbuf_reset(&f);
  frame_leave(&f, DED_LEAVE_MISMATCH_STEP);
  write_msg("leave_mismatch_step", &f, f.len - DED_FRAME_HDR_BYTES);
  gbuf_reset(&f);
  frame_leave(&f, DED_LEAVE_ERROR);
  write_msg("leave_error", &f, f.len - DED_FRAME_HDR_BYTES);
  gbuf_reset(&f);
  frame_stale(&f, 7, 9);
  write_msg_variants("stale", &f);
  gbuf_reset(&f);
  frame_ahead(&f, 7, 12);
  write_msg_variants("ahead", &f);
  gbuf_reset(&f);
  /* A link probe: an ask with filler, and filler alone. */
  frame_speed(&f, 4096, 64);
  write_msg_variants("speed", &f);
  gbuf_reset(&f);
  frame_speed(&f, 0, 0);
  write_msg("speed_fill_only", &f, f.len - DED_FRAME_HDR_BYTES);
  gbuf_reset(&f);
  /* State transfer: a joiner asks, peers answer with a snapshot (the two
   * members of round 7's attempt as lineage, the second a client) or a
   * status, and the joiner fetches ranges of it. */
  frame_state_ask(&f, 8, NULL);
  write_msg_variants("state_ask", &f);
  gbuf_reset(&f);
  /* Founding: an ask for a peer's founding state, and the answer. */
  frame_state_ask(&f, 0, ids[1]);
  write_msg_variants("state_ask_founding", &f);
  gbuf_reset(&f);
  uint8_t origin[DED_LIN_BYTES(1)];
  memcpy(origin, ids[1], DED_ID_BYTES);
  origin[DED_ID_BYTES] = 0;
  ded_msg_state_offer fo;
  memset(&fo, 0, sizeof fo);
  fo.status = DED_STATE_FOUNDING;
  fo.round = 0;
  fo.digest = 0x0123456789abcdefull;
  fo.len = 4196;
  fo.nlin = 1;
  fo.lin = origin;
  frame_state_offer(&f, &fo);
  write_msg_variants("state_offer_founding", &f);
  gbuf_reset(&f);
  origin[DED_ID_BYTES] = 1; /* a client bit: refused */
  frame_state_offer(&f, &fo);
  write_msg("state_offer_founding_client", &f, f.len - DED_FRAME_HDR_BYTES);
  gbuf_reset(&f);
  uint8_t lin[DED_LIN_BYTES(2)];
  memcpy(lin, ids[0], DED_ID_BYTES);
  memcpy(lin + DED_ID_BYTES, ids[1], DED_ID_BYTES);
  lin[2 * DED_ID_BYTES] = 0x02; /* client bits: member 1 */
  ded_msg_state_offer so;
  memset(&so, 0, sizeof so);
  so.status = DED_STATE_OFFER;
  so.round = 8;
  so.digest = 0x0123456789abcdefull;
  so.step_rounds = 2;
  so.len = 4196;
  so.lin_attempt = att;
  so.nlin = 2;
  so.lin = lin;
  frame_state_offer(&f, &so);
  write_msg_variants("state_offer", &f);
  gbuf_reset(&f);
  /* No client; both clients; a bit past the lineage's members (refused). */
  const uint8_t client_bits[3] = {0x00, 0x03, 0x04};
  const char *const client_names[3] = {"state_offer_no_client", "state_offer_all_clients",
                                       "state_offer_unused_client_bit"};
  for (unsigned i = 0; i < 3; i++) {
    lin[2 * DED_ID_BYTES] = client_bits[i];
    frame_state_offer(&f, &so);
    write_msg(client_names[i], &f, f.len - DED_FRAME_HDR_BYTES);
    gbuf_reset(&f);
  }
  /* Nine lineage members (1 and 8 clients: bits in both bytes) and the
   * most bytes a snapshot may hold. */
  uint8_t lin9[DED_LIN_BYTES(9)];
  for (unsigned i = 0; i < 9; i++) memcpy(lin9 + i * DED_ID_BYTES, ids9[i], DED_ID_BYTES);
  lin9[9 * DED_ID_BYTES] = 0x02;
  lin9[9 * DED_ID_BYTES + 1] = 0x01;
  so.round = 12;
  so.step_rounds = DED_STATE_STEP_ROUNDS_MAX;
  so.len = DED_STATE_BYTES_MAX;
  so.lin_attempt = attempt_of(4, ids9[3]);
  so.nlin = 9;
  so.lin = lin9;
  frame_state_offer(&f, &so);
  write_msg("state_offer_k9_len_max", &f, f.len - DED_FRAME_HDR_BYTES);
  gbuf_reset(&f);
  /* A backbone's checkpoint: no lineage, attempt 0 (protocol 12). */
  so.round = 40;
  so.step_rounds = 2;
  so.len = 4196;
  so.lin_attempt = 0;
  so.nlin = 0;
  so.lin = NULL;
  frame_state_offer(&f, &so);
  write_msg("state_offer_checkpoint", &f, f.len - DED_FRAME_HDR_BYTES);
  gbuf_reset(&f);
  frame_state_status(&f, DED_STATE_FRESH, 0, 0);
  write_msg("state_offer_fresh", &f, f.len - DED_FRAME_HDR_BYTES);
  gbuf_reset(&f);
  frame_state_status(&f, DED_STATE_PENDING, 9, 0);
  write_msg("state_offer_pending", &f, f.len - DED_FRAME_HDR_BYTES);
  gbuf_reset(&f);
  frame_state_status(&f, DED_STATE_NONE, 0, 0);
  write_msg("state_offer_none", &f, f.len - DED_FRAME_HDR_BYTES);
  gbuf_reset(&f);
  frame_state_status(&f, DED_STATE_GONE, 8, 0x0123456789abcdefull);
  write_msg("state_offer_gone", &f, f.len - DED_FRAME_HDR_BYTES);
  gbuf_reset(&f);
  frame_state_get(&f, 8, 0x0123456789abcdefull, 4000, 196);
  write_msg_variants("state_get", &f);
  gbuf_reset(&f);
  frame_state_get(&f, 8, 0x0123456789abcdefull, DED_STATE_BYTES_MAX - DED_STATE_GET_BYTES_MAX,
                  DED_STATE_GET_BYTES_MAX);
  write_msg("state_get_max", &f, f.len - DED_FRAME_HDR_BYTES);
  gbuf_reset(&f);
  frame_state_data(&f, 8, 0x0123456789abcdefull, 4000, 196);
  write_msg_variants("state_data", &f);
  gbuf_free(&f);
}

/* -------------------------------------------------------------- frame */

static void write_frame_input(const char *name, uint8_t seed, uint8_t bound, const gbuf *stream,
                              size_t len) {
  gbuf in = {0};
  gbuf_u8(&in, seed);
  gbuf_u8(&in, bound);
  gbuf_put(&in, stream->p, len);
  write_seed("frame", name, in.p, in.len);
  gbuf_free(&in);
}

static void gen_frame(void) {
  ded_ident a;
  ident_from_byte(&a, 0x21);
  gbuf s = {0};
  frame_hello(&s, &a, NULL);
  frame_join(&s, 1, 0, DED_DTYPE_F32, 10, 1.0, 1, 0);
  frames_padding(&s, 2);
  frame_probe(&s, 1, 1);
  frames_data(&s, DED_MSG_DATA, 1, 1, DED_DTYPE_F64, 0, 700, 700, 0.0); /* > 4 KiB frame */
  frame_leave(&s, DED_LEAVE_SHUTDOWN);
  /* Piece bounds from 1 byte to 64 KiB. */
  const uint8_t bounds[] = {0, 1, 3, 7, 12, 16};
  for (size_t i = 0; i < sizeof bounds; i++) {
    char name[64];
    snprintf(name, sizeof name, "stream_bound%u", bounds[i]);
    write_frame_input(name, (uint8_t)(i * 40 + 1), bounds[i], &s, s.len);
  }
  write_frame_input("stream_partial_tail", 5, 4, &s, s.len - 3);
  /* A bad length after good frames: zero, and one past the largest. */
  gbuf bad = {0};
  frame_join(&bad, 1, 0, DED_DTYPE_F32, 10, 1.0, 1, 0);
  const uint8_t zero[DED_FRAME_HDR_BYTES] = {0, 0, 0, 0, 3};
  gbuf_put(&bad, zero, sizeof zero);
  write_frame_input("len_zero", 9, 2, &bad, bad.len);
  gbuf_reset(&bad);
  frame_leave(&bad, DED_LEAVE_FINALIZE);
  uint8_t huge[DED_FRAME_HDR_BYTES];
  ded_frame_put_hdr(huge, 7, DED_FRAME_MAX - 1);
  huge[2]++; /* length DED_FRAME_MAX + 1 */
  gbuf_put(&bad, huge, sizeof huge);
  write_frame_input("len_too_large", 3, 0, &bad, bad.len);
  gbuf_free(&bad);
  gbuf_free(&s);
}

/* --------------------------------------------------------------- node */

/* One conversation with the node: flags, schedule seed, the bytes. */
static void write_node(const char *name, uint8_t flags, uint8_t sched, const gbuf *bytes) {
  gbuf in = {0};
  gbuf_u8(&in, flags);
  gbuf_u8(&in, sched);
  gbuf_put(&in, bytes->p, bytes->len);
  write_seed("node", name, in.p, in.len);
  /* The same conversation cut short: the node must cope with a peer that
   * vanishes mid-frame. */
  if (bytes->len > 64) {
    char cut[128];
    snprintf(cut, sizeof cut, "%s_cut", name);
    write_seed("node", cut, in.p, 2 + bytes->len * 2 / 3);
  }
  gbuf_free(&in);
}

static void gen_node(void) {
  ded_ident node, lo, hi;
  ident_from_byte(&node, FUZZ_NODE_SEED_BYTE);
  /* |lo| sorts before the node (so it coordinates genesis rounds), |hi|
   * after it (the node coordinates). */
  bool have_lo = false, have_hi = false;
  for (unsigned s = 1; s < 256 && !(have_lo && have_hi); s++) {
    if (s == FUZZ_NODE_SEED_BYTE) continue;
    ded_ident id;
    ident_from_byte(&id, (uint8_t)s);
    bool below = memcmp(id.id, node.id, DED_ID_BYTES) < 0;
    if (below && !have_lo) {
      lo = id;
      have_lo = true;
    } else if (!below && !have_hi) {
      hi = id;
      have_hi = true;
    }
  }
  FUZZ_CHECK(have_lo && have_hi);
  const uint64_t N = FUZZ_NODE_COUNT, half = N / 2;
  const uint32_t one[2] = {1, 1};
  const double w1[2] = {1.0, 1.0};
  /* View 0's attempts of the genesis round, by who coordinates it. */
  const uint64_t A_lo = attempt_of(0, lo.id), A_node = attempt_of(0, node.id);
  const uint8_t *ids_lo[2] = {lo.id, node.id};
  const uint8_t *ids_hi[2] = {node.id, hi.id};
  ded_msg_member mm[4];
  gbuf b = {0};
  /* The digests of the results the node ends rounds with (its HAVEs',
   * and so an honest peer's): the genesis round the peer coordinates,
   * DATA from 100 and RESULTs from 50 (|d_pc|), and the one the node
   * coordinates (|d_nc|), per element type (f32 first). */
  uint8_t d_pc[2][DED_RESULT_DIGEST_BYTES], d_nc[2][DED_RESULT_DIGEST_BYTES];
  for (int f64 = 0; f64 <= 1; f64++) {
    uint8_t dtype = f64 ? DED_DTYPE_F64 : DED_DTYPE_F32;
    const gcontrib pc[2] = {{false, 100.0, 1.0}, {true, 0.0, 1.0}};
    const gcontrib nc[2] = {{true, 0.0, 1.0}, {false, 100.0, 1.0}};
    node_result_digest(d_pc[f64], dtype, half, N, pc, 2, 2.0, 50.0);
    node_result_digest(d_nc[f64], dtype, 0, half, nc, 2, 2.0, 50.0);
  }

  for (int f64 = 0; f64 <= 1; f64++) {
    uint8_t dtype = f64 ? DED_DTYPE_F64 : DED_DTYPE_F32;
    uint8_t flags = FUZZ_NODE_F_ROUND0 | (f64 ? FUZZ_NODE_F_F64 : 0);
    uint64_t node_chunk = FUZZ_NODE_CHUNK_BYTES / ded_dtype_size(dtype);
    char name[64];

    /* The peer coordinates the genesis round: HELLO, COMMIT, then its
     * data for our shard (the second), its results for its own, and its
     * HAVE (it is the primary: with the node's own, a quorum). */
    gbuf_reset(&b);
    frame_hello(&b, &lo, NULL);
    frame_commit2(&b, 0, A_lo, 0, dtype, N, (uint32_t)node_chunk, ids_lo, w1, one);
    frames_data(&b, DED_MSG_DATA, 0, A_lo, dtype, half, N, node_chunk, 100.0);
    frames_data(&b, DED_MSG_RESULT, 0, A_lo, dtype, 0, half, node_chunk, 50.0);
    frame_have(&b, 0, A_lo, 0, 0, d_pc[f64]);
    snprintf(name, sizeof name, "round_peer_coordinates_%s", f64 ? "f64" : "f32");
    write_node(name, flags, 1, &b);

    /* We coordinate: HELLO, JOIN, data for our shard (the first), results
     * for the peer's, in our chunk size, under our attempt; then the
     * peer's HAVE. */
    gbuf_reset(&b);
    frame_hello(&b, &hi, NULL);
    frame_join(&b, 0, 0, dtype, N, 1.0, 1, DED_JOIN_F_GENESIS);
    frames_data(&b, DED_MSG_DATA, 0, A_node, dtype, 0, half, node_chunk, 100.0);
    frames_data(&b, DED_MSG_RESULT, 0, A_node, dtype, half, N, node_chunk, 50.0);
    frame_have(&b, 0, A_node, 0, 0, d_nc[f64]);
    snprintf(name, sizeof name, "round_node_coordinates_%s", f64 ? "f64" : "f32");
    write_node(name, flags, 2, &b);
  }

  /* The peer coordinates the genesis round and equivocates: it sends
   * the node its shard's result from 50, but says HAVE (it is the
   * primary: a quorum alone) with the digest of a result from 60. The
   * node, whose bytes differ from the quorum's, fetches the peer's shard
   * again from it: sent from 60, the node completes with those bytes;
   * sent from 50 again, it fails over (view 1) rather than complete with
   * bytes the quorum does not hold. */
  for (int again_wrong = 0; again_wrong <= 1; again_wrong++) {
    uint8_t d_y[DED_RESULT_DIGEST_BYTES];
    const gcontrib pc[2] = {{false, 100.0, 1.0}, {true, 0.0, 1.0}};
    node_result_digest(d_y, DED_DTYPE_F32, half, N, pc, 2, 2.0, 60.0);
    gbuf_reset(&b);
    frame_hello(&b, &lo, NULL);
    frame_commit2(&b, 0, A_lo, 0, DED_DTYPE_F32, N, 16, ids_lo, w1, one);
    frames_data(&b, DED_MSG_DATA, 0, A_lo, DED_DTYPE_F32, half, N, 16, 100.0);
    frames_data(&b, DED_MSG_RESULT, 0, A_lo, DED_DTYPE_F32, 0, half, 16, 50.0);
    frame_have(&b, 0, A_lo, 0, 0, d_y);
    frames_data(&b, DED_MSG_RESULT, 0, A_lo, DED_DTYPE_F32, 0, half, 16, again_wrong ? 50.0 : 60.0);
    write_node(again_wrong ? "equivocation_fails_over" : "equivocation_refetch", FUZZ_NODE_F_ROUND0,
               (uint8_t)(38 + again_wrong), &b);
  }

  /* Data that overtakes the COMMIT, results before data, and a HAVE
   * before the node holds the whole result. */
  uint8_t d_early[DED_RESULT_DIGEST_BYTES];
  {
    const gcontrib pc[2] = {{false, 1.0, 1.0}, {true, 0.0, 1.0}};
    node_result_digest(d_early, DED_DTYPE_F32, half, N, pc, 2, 2.0, 2.0);
  }
  gbuf_reset(&b);
  frame_hello(&b, &lo, NULL);
  frames_data(&b, DED_MSG_DATA, 0, A_lo, DED_DTYPE_F32, half + 16, N, 16, 1.0);
  frame_commit2(&b, 0, A_lo, 0, DED_DTYPE_F32, N, 16, ids_lo, w1, one);
  frames_data(&b, DED_MSG_RESULT, 0, A_lo, DED_DTYPE_F32, 0, half, 16, 2.0);
  frame_have(&b, 0, A_lo, 0, 0, d_early);
  frames_data(&b, DED_MSG_DATA, 0, A_lo, DED_DTYPE_F32, half, half + 16, 16, 1.0);
  write_node("early_data", FUZZ_NODE_F_ROUND0, 3, &b);

  /* Frames of other attempts around the right one: older (moot), newer
   * (kept for a commit that never comes), then the round itself. */
  gbuf_reset(&b);
  frame_hello(&b, &lo, NULL);
  frame_commit2(&b, 0, A_lo, 0, DED_DTYPE_F32, N, 16, ids_lo, w1, one);
  frames_data(&b, DED_MSG_DATA, 0, A_lo - 1, DED_DTYPE_F32, half, N, 16, -1.0);
  frames_data(&b, DED_MSG_RESULT, 0, attempt_of(1, lo.id), DED_DTYPE_F32, 0, half, 16, -2.0);
  frames_data(&b, DED_MSG_DATA, 0, A_lo, DED_DTYPE_F32, half, N, 16, 1.0);
  frames_data(&b, DED_MSG_RESULT, 0, A_lo, DED_DTYPE_F32, 0, half, 16, 2.0);
  frame_have(&b, 0, attempt_of(1, lo.id), 1, 0, d_early); /* newer: no quorum for ours */
  frame_have(&b, 0, A_lo, 0, 0, d_early);
  write_node("other_attempts", FUZZ_NODE_F_ROUND0, 23, &b);

  /* Two rounds: we coordinate round 0; round 1's coordinator is the peer
   * (member 1 % 2), which commits with the weights we joined with, on
   * round 0's attempt as its base, with round 0's members as acceptors.
   * The peer sends HAVE for each round once it holds the result. */
  gbuf_reset(&b);
  frame_hello(&b, &hi, NULL);
  frame_join(&b, 0, 0, DED_DTYPE_F32, N, 1.0, 1, DED_JOIN_F_GENESIS);
  frames_data(&b, DED_MSG_DATA, 0, A_node, DED_DTYPE_F32, 0, half, 16, 100.0);
  frames_data(&b, DED_MSG_RESULT, 0, A_node, DED_DTYPE_F32, half, N, 16, 50.0);
  frame_have(&b, 0, A_node, 0, 0, d_nc[0]);
  frames_padding(&b, 20);
  const double w21[2] = {2.0, 1.0};
  const uint32_t n31[2] = {3, 1};
  const uint64_t A1_hi = attempt_of(0, hi.id);
  /* Round 1's result: the node's shard from its buffer (weight 2 over 3
   * ranks) and the peer's DATA from 7, over W = 3; the peer's from 9. */
  uint8_t d_r1[DED_RESULT_DIGEST_BYTES];
  {
    const gcontrib r1[2] = {{true, 0.0, 2.0 / 3.0}, {false, 7.0, 1.0}};
    node_result_digest(d_r1, DED_DTYPE_F32, 0, half, r1, 2, 3.0, 9.0);
  }
  frame_commit2(&b, 1, A1_hi, A_node, DED_DTYPE_F32, N, 16, ids_hi, w21, n31);
  frames_data(&b, DED_MSG_DATA, 1, A1_hi, DED_DTYPE_F32, 0, half, 16, 7.0);
  frames_data(&b, DED_MSG_RESULT, 1, A1_hi, DED_DTYPE_F32, half, N, 16, 9.0);
  frame_have(&b, 1, A1_hi, 0, 0, d_r1);
  write_node("two_rounds", FUZZ_NODE_F_ROUND0 | FUZZ_NODE_F_ROUND1, 5, &b);

  /* The same, but round 1 committed on a base round 0 did not end with:
   * the node must not complete it, and fails over (to itself, view 1). */
  gbuf_reset(&b);
  frame_hello(&b, &hi, NULL);
  frame_join(&b, 0, 0, DED_DTYPE_F32, N, 1.0, 1, DED_JOIN_F_GENESIS);
  frames_data(&b, DED_MSG_DATA, 0, A_node, DED_DTYPE_F32, 0, half, 16, 100.0);
  frames_data(&b, DED_MSG_RESULT, 0, A_node, DED_DTYPE_F32, half, N, 16, 50.0);
  frame_have(&b, 0, A_node, 0, 0, d_nc[0]);
  frame_commit2(&b, 1, A1_hi, A_node + 1, DED_DTYPE_F32, N, 16, ids_hi, w21, n31);
  frames_data(&b, DED_MSG_DATA, 1, A1_hi, DED_DTYPE_F32, 0, half, 16, 7.0);
  frames_data(&b, DED_MSG_RESULT, 1, A1_hi, DED_DTYPE_F32, half, N, 16, 9.0);
  frame_have(&b, 1, A1_hi, 0, 0, d_r1); /* the peer's HAVE does not make it ours */
  write_node("base_mismatch", FUZZ_NODE_F_ROUND0 | FUZZ_NODE_F_ROUND1, 24, &b);
  /* ... and then the peer breaks the framing and is dropped while the node
   * coordinates view 1: every later view is the node's own (a crash once:
   * unbounded failover recursion). */
  {
    uint8_t huge[DED_FRAME_HDR_BYTES];
    ded_frame_put_hdr(huge, DED_MSG_DATA, DED_FRAME_MAX - 1);
    huge[2]++; /* length DED_FRAME_MAX + 1 */
    gbuf_put(&b, huge, sizeof huge);
  }
  write_node("base_mismatch_peer_lost", FUZZ_NODE_F_ROUND0 | FUZZ_NODE_F_ROUND1, 24, &b);

  /* After round 0, the peer reports an attempt of round 1 to view 1,
   * which is the node's to coordinate (member (1 + 1) % 2 of round 0),
   * holding one shard of two, accepted in no view. */
  gbuf_reset(&b);
  frame_hello(&b, &hi, NULL);
  frame_join(&b, 0, 0, DED_DTYPE_F32, N, 1.0, 1, DED_JOIN_F_GENESIS);
  frames_data(&b, DED_MSG_DATA, 0, A_node, DED_DTYPE_F32, 0, half, 16, 100.0);
  frames_data(&b, DED_MSG_RESULT, 0, A_node, DED_DTYPE_F32, half, N, 16, 50.0);
  frame_have(&b, 0, A_node, 0, 0, d_nc[0]);
  {
    ded_msg_commit p1 = plan_of(mm, 1, A1_hi, A_node, DED_DTYPE_F32, N, 16, ids_hi, w21, n31, 2);
    ded_msg_join j = join_of(1, 1, DED_DTYPE_F32, N, 1.0, 1, 0);
    j.acc_view = DED_VIEW_NONE;
    const uint8_t have[1] = {0x02};
    gbuf head = {0};
    gbuf_put(&head, b.p, b.len); /* round 0 done, for the next input */
    frame_join_status(&b, &j, &p1, have);
    frames_padding(&b, 20);
    /* And reports again, holding both (still accepted in no view: joining
     * view 1 ruled out accepting in view 0): the attempt can stand. */
    const uint8_t both[1] = {0x03};
    j.view = 2;
    frame_join_status(&b, &j, &p1, both);
    write_node("status_join_to_node", FUZZ_NODE_F_ROUND0 | FUZZ_NODE_F_ROUND1, 25, &b);
    /* The peer completed round 1 with that attempt (accepted in view 0)
     * and says so in its report: the node decides it, chosen. */
    j.view = 1;
    j.flags = DED_JOIN_F_DONE;
    j.acc_view = 0;
    frame_join_status(&head, &j, &p1, both);
    write_node("status_done_to_node", FUZZ_NODE_F_ROUND0 | FUZZ_NODE_F_ROUND1, 31, &head);
    gbuf_free(&head);
  }

  /* A member left out of the attempt though its buffer matches: it
   * fetches the result, told by a COMMIT, or by a DECIDE. */
  gbuf_reset(&b);
  frame_hello(&b, &lo, NULL);
  {
    const uint8_t *only_lo[1] = {lo.id};
    const double w3[1] = {3.0};
    const uint32_t n1[1] = {1};
    ded_msg_commit c = plan_of(mm, 0, A_lo, 0, DED_DTYPE_F32, N, 16, only_lo, w3, n1, 1);
    frame_commit(&b, &c);
    frames_data(&b, DED_MSG_RESULT, 0, A_lo, DED_DTYPE_F32, 0, N, 16, 4.0);
    uint8_t d_all[DED_RESULT_DIGEST_BYTES];
    node_result_digest(d_all, DED_DTYPE_F32, 0, 0, NULL, 0, 1.0, 4.0);
    /* The peer completed the round alone: its answer to a late member. */
    frame_have(&b, 0, A_lo, 0, DED_HAVE_F_DONE, d_all);
    write_node("not_listed_fetch", FUZZ_NODE_F_ROUND0, 26, &b);
    /* The DECIDE says the attempt was chosen, not with which bytes: the
     * peer's answer to the node's HAVE (DONE, its digest) does. */
    gbuf_reset(&b);
    frame_hello(&b, &lo, NULL);
    const uint16_t holders[1] = {0};
    frame_decide(&b, 0, DED_DECIDE_F_CHOSEN, &c, holders);
    frames_data(&b, DED_MSG_RESULT, 0, A_lo, DED_DTYPE_F32, 0, N, 16, 4.0);
    frame_have(&b, 0, A_lo, 0, DED_HAVE_F_DONE, d_all);
    write_node("decide_fetch", FUZZ_NODE_F_ROUND0, 27, &b);
    /* ... and a peer that completed with other bytes than the ones it
     * sent the node: the node fetches the result again from it, and it
     * sends the same wrong bytes again; the node fails over rather than
     * complete with them. */
    uint8_t d_other[DED_RESULT_DIGEST_BYTES];
    node_result_digest(d_other, DED_DTYPE_F32, 0, 0, NULL, 0, 1.0, 5.0);
    b.len -= DED_HAVE_FRAME_BYTES;
    frame_have(&b, 0, A_lo, 0, DED_HAVE_F_DONE, d_other);
    frames_data(&b, DED_MSG_RESULT, 0, A_lo, DED_DTYPE_F32, 0, N, 16, 4.0);
    write_node("decide_fetch_done_differs", FUZZ_NODE_F_ROUND0, 37, &b);
  }

  /* After a round the peer coordinated: FETCHes of both shards, of an
   * attempt the node does not hold, and a PROBE of the round. */
  gbuf_reset(&b);
  frame_hello(&b, &lo, NULL);
  frame_commit2(&b, 0, A_lo, 0, DED_DTYPE_F32, N, 16, ids_lo, w1, one);
  frames_data(&b, DED_MSG_DATA, 0, A_lo, DED_DTYPE_F32, half, N, 16, 100.0);
  frames_data(&b, DED_MSG_RESULT, 0, A_lo, DED_DTYPE_F32, 0, half, 16, 50.0);
  frame_have(&b, 0, A_lo, 0, 0, d_pc[0]);
  size_t after_round = b.len;
  frame_fetch(&b, 0, A_lo, 0);
  frame_fetch(&b, 0, A_lo, 1);
  frame_fetch(&b, 0, A_lo + 1, 0);
  frame_fetch(&b, 0, A_lo, 2);
  frame_probe(&b, 0, 1);
  frame_fetch(&b, 9, A_lo, 0);
  write_node("fetch_probe_after_round", FUZZ_NODE_F_ROUND0, 28, &b);

  /* After the same round: the peer steps down from round 1, twice (the
   * second changes nothing), then from round 2, and probes round 1. */
  b.len = after_round;
  frame_abstain(&b, 1);
  frame_abstain(&b, 1);
  frame_abstain(&b, 2);
  frame_probe(&b, 1, 1);
  write_node("abstain_after_round", FUZZ_NODE_F_ROUND0, 41, &b);

  /* A FETCH of the node's shard while it is being reduced, then a PROBE
   * mid-round into view 2 (lo's again), and lo's new attempt there. */
  gbuf_reset(&b);
  frame_hello(&b, &lo, NULL);
  frame_commit2(&b, 0, A_lo, 0, DED_DTYPE_F32, N, 16, ids_lo, w1, one);
  frame_fetch(&b, 0, A_lo, 1);
  frames_data(&b, DED_MSG_DATA, 0, A_lo, DED_DTYPE_F32, half, N - 16, 16, 100.0);
  frame_probe(&b, 0, 2);
  {
    const uint64_t B = attempt_of(2, lo.id);
    frame_commit2(&b, 0, B, 0, DED_DTYPE_F32, N, 16, ids_lo, w1, one);
    frames_data(&b, DED_MSG_DATA, 0, B, DED_DTYPE_F32, half, N, 16, 10.0);
    frames_data(&b, DED_MSG_RESULT, 0, B, DED_DTYPE_F32, 0, half, 16, 20.0);
    uint8_t d_b[DED_RESULT_DIGEST_BYTES];
    const gcontrib pc[2] = {{false, 10.0, 1.0}, {true, 0.0, 1.0}};
    node_result_digest(d_b, DED_DTYPE_F32, half, N, pc, 2, 2.0, 20.0);
    frame_have(&b, 0, B, 2, 0, d_b);
  }
  write_node("probe_mid_round", FUZZ_NODE_F_ROUND0, 29, &b);

  /* A DECIDE after a report: the node reduced its shard, was probed into
   * view 2, and lo decides that the attempt stands; the HAVEs of view 2
   * complete it. Or lo decides it chosen (someone completed it): lo's
   * answer to the node's HAVE (DONE, with the digest) says with which
   * bytes. */
  for (int chosen = 0; chosen <= 1; chosen++) {
    gbuf_reset(&b);
    frame_hello(&b, &lo, NULL);
    frame_commit2(&b, 0, A_lo, 0, DED_DTYPE_F32, N, 16, ids_lo, w1, one);
    frames_data(&b, DED_MSG_DATA, 0, A_lo, DED_DTYPE_F32, half, N, 16, 100.0);
    frame_probe(&b, 0, 2);
    ded_msg_commit c = plan_of(mm, 0, A_lo, 0, DED_DTYPE_F32, N, 16, ids_lo, w1, one, 2);
    const uint16_t holders[2] = {0, 1};
    frame_decide(&b, 2, chosen ? DED_DECIDE_F_CHOSEN : 0, &c, holders);
    frames_data(&b, DED_MSG_RESULT, 0, A_lo, DED_DTYPE_F32, 0, half, 16, 50.0);
    frame_have(&b, 0, A_lo, 2, chosen ? DED_HAVE_F_DONE : 0, d_pc[0]);
    write_node(chosen ? "probe_decide_chosen" : "probe_decide", FUZZ_NODE_F_ROUND0,
               (uint8_t)(30 + 2 * chosen), &b);
  }

  /* Discovery: records of other peers (with addresses: the node tries to
   * call them), then the peer leaves. */
  gbuf_reset(&b);
  frame_hello(&b, &hi, NULL);
  const uint8_t others[5] = {0x51, 0x52, 0x53, 0x54, 0x55};
  frame_records(&b, others, 5);
  frame_records(&b, others, 2); /* the same again: duplicates */
  frame_leave(&b, DED_LEAVE_FINALIZE);
  write_node("records_then_leave", 0, 5, &b);

  /* A peer whose job could not take part leaves, saying why (logged). */
  gbuf_reset(&b);
  frame_hello(&b, &hi, NULL);
  frame_records(&b, others, 1);
  frame_leave(&b, DED_LEAVE_MISMATCH_STEP);
  write_node("leave_mismatch_step", 0, 5, &b);

  /* A genesis coordinator that redirects us to a smaller id, unknown to us. */
  gbuf_reset(&b);
  frame_hello(&b, &lo, NULL);
  uint8_t smaller[DED_ID_BYTES] = {0};
  frame_redirect(&b, 0, 0, smaller);
  write_node("redirect", FUZZ_NODE_F_ROUND0, 6, &b);

  /* The swarm went on without us. */
  gbuf_reset(&b);
  frame_hello(&b, &lo, NULL);
  frame_stale(&b, 0, 5);
  write_node("stale", FUZZ_NODE_F_ROUND0 | FUZZ_NODE_F_ROUND1, 7, &b);

  /* The answer to an announcement we never made, then a malformed one. */
  gbuf_reset(&b);
  frame_hello(&b, &lo, NULL);
  frame_ahead(&b, 1, 40);
  frame_ahead(&b, 3, 3);
  write_node("ahead", FUZZ_NODE_F_ROUND0 | FUZZ_NODE_F_ROUND1, 7, &b);

  /* A COMMIT for a buffer of another size, leaving us out. */
  gbuf_reset(&b);
  frame_hello(&b, &lo, NULL);
  const uint8_t *ids_x[2] = {lo.id, hi.id};
  frame_commit2(&b, 0, A_lo, 0, DED_DTYPE_F32, N / 2, 16, ids_x, w1, one);
  write_node("commit_size_mismatch", FUZZ_NODE_F_ROUND0, 8, &b);

  /* Joins the node must refuse or redirect. */
  gbuf_reset(&b);
  frame_hello(&b, &lo, NULL);
  frame_join(&b, 0, 0, DED_DTYPE_F32, N, 1.0, 1, DED_JOIN_F_GENESIS);
  frame_join(&b, 1000, 0, DED_DTYPE_F32, N, 1.0, 1, 0);
  write_node("joins_redirect_far_ahead", 0, 9, &b);
  gbuf_reset(&b);
  frame_hello(&b, &hi, NULL);
  frame_join(&b, 0, 0, DED_DTYPE_F64, N, 1.0, 1, DED_JOIN_F_GENESIS);
  frame_join(&b, 0, 0, DED_DTYPE_F64, N, 1.0, 1, DED_JOIN_F_GENESIS); /* twice */
  write_node("join_duplicate", FUZZ_NODE_F_ROUND0, 10, &b);
  gbuf_reset(&b);
  frame_hello(&b, &hi, NULL);
  frame_join(&b, 0, 0, DED_DTYPE_F32, N, 1.0, 1, DED_JOIN_F_GENESIS);
  write_node("backbone_join", FUZZ_NODE_F_NO_ROUNDS | FUZZ_NODE_F_ALONE_OK, 11, &b);

  /* Alone: rounds finish without the peer, which then only talks. */
  gbuf_reset(&b);
  frame_hello(&b, &hi, NULL);
  frame_records(&b, others, 1);
  write_node("alone_two_rounds",
             FUZZ_NODE_F_ROUND0 | FUZZ_NODE_F_ROUND1 | FUZZ_NODE_F_ALONE_OK, 12, &b);

  /* We leave in the middle of a round. */
  gbuf_reset(&b);
  frame_hello(&b, &hi, NULL);
  frame_join(&b, 0, 0, DED_DTYPE_F32, N, 1.0, 1, DED_JOIN_F_GENESIS);
  frames_data(&b, DED_MSG_DATA, 0, A_node, DED_DTYPE_F32, 0, 16, 16, 1.0);
  write_node("leave_mid_round", FUZZ_NODE_F_ROUND0 | FUZZ_NODE_F_LEAVE, 13, &b);

  /* Bad starts: no HELLO, a HELLO of another run, garbage, a bad length. */
  gbuf_reset(&b);
  frame_join(&b, 0, 0, DED_DTYPE_F32, N, 1.0, 1, DED_JOIN_F_GENESIS);
  write_node("no_hello", FUZZ_NODE_F_ROUND0, 14, &b);
  gbuf_reset(&b);
  uint8_t other_run[DED_RUN_ID_BYTES];
  ded_hash32("other", 5, other_run);
  frame_hello(&b, &hi, other_run);
  write_node("hello_wrong_run", 0, 15, &b);
  gbuf_reset(&b);
  frame_hello(&b, &hi, NULL);
  for (unsigned i = 0; i < 64; i++) gbuf_u8(&b, (uint8_t)(i * 97 + 3));
  write_node("garbage_after_hello", 0, 16, &b);
  gbuf_reset(&b);
  frame_hello(&b, &lo, NULL);
  const uint8_t zero_len[DED_FRAME_HDR_BYTES] = {0, 0, 0, 0, DED_MSG_JOIN};
  gbuf_put(&b, zero_len, sizeof zero_len);
  write_node("bad_frame_length", FUZZ_NODE_F_ROUND0, 17, &b);

  /* After round 0 (which we coordinated), JOINs for round 1: a genesis
   * one (we are past genesis: STALE), one for a round whose coordinator is
   * the peer itself, by the lineage, and late ones for round 0 (its result
   * comes back as a DECIDE). */
  gbuf_reset(&b);
  frame_hello(&b, &hi, NULL);
  frame_join(&b, 0, 0, DED_DTYPE_F32, N, 1.0, 1, DED_JOIN_F_GENESIS);
  frames_data(&b, DED_MSG_DATA, 0, A_node, DED_DTYPE_F32, 0, half, 16, 100.0);
  frames_data(&b, DED_MSG_RESULT, 0, A_node, DED_DTYPE_F32, half, N, 16, 50.0);
  frame_have(&b, 0, A_node, 0, 0, d_nc[0]);
  frame_join(&b, 1, 0, DED_DTYPE_F32, N, 1.0, 1, DED_JOIN_F_GENESIS);
  frame_join(&b, 1, 0, DED_DTYPE_F32, N, 1.0, 1, 0);
  frame_join(&b, 1, 1, DED_DTYPE_F32, N, 1.0, 1, DED_JOIN_F_INTENT);
  frame_join(&b, 0, 0, DED_DTYPE_F32, N, 1.0, 1, 0); /* late for round 0 */
  frame_join(&b, 0, 1, DED_DTYPE_F32, N, 1.0, 1, 0);
  write_node("joins_after_lineage", FUZZ_NODE_F_ROUND0, 19, &b);

  /* The node dials its bootstrap address: the peer coordinates, as above;
   * then the peer that answers is the node itself. */
  for (int f64 = 0; f64 <= 1; f64++) {
    uint8_t dtype = f64 ? DED_DTYPE_F64 : DED_DTYPE_F32;
    gbuf_reset(&b);
    frame_hello(&b, &lo, NULL);
    uint64_t chunk = FUZZ_NODE_CHUNK_BYTES / ded_dtype_size(dtype);
    frame_commit2(&b, 0, A_lo, 0, dtype, N, (uint32_t)chunk, ids_lo, w1, one);
    frames_data(&b, DED_MSG_DATA, 0, A_lo, dtype, half, N, chunk, 100.0);
    frames_data(&b, DED_MSG_RESULT, 0, A_lo, dtype, 0, half, chunk, 50.0);
    frame_have(&b, 0, A_lo, 0, 0, d_pc[f64]);
    write_node(f64 ? "outbound_round_f64" : "outbound_round_f32",
               FUZZ_NODE_F_OUTBOUND | FUZZ_NODE_F_ROUND0 | (f64 ? FUZZ_NODE_F_F64 : 0), 20, &b);
  }
  gbuf_reset(&b);
  frame_hello(&b, &node, NULL);
  write_node("outbound_self", FUZZ_NODE_F_OUTBOUND | FUZZ_NODE_F_ROUND0 | FUZZ_NODE_F_ALONE_OK, 21,
             &b);
  gbuf_reset(&b);
  frame_hello(&b, &hi, NULL);
  frame_records(&b, others, 3);
  frame_join(&b, 0, 0, DED_DTYPE_F32, N, 1.0, 1, DED_JOIN_F_GENESIS);
  write_node("outbound_join", FUZZ_NODE_F_OUTBOUND | FUZZ_NODE_F_ROUND0 | FUZZ_NODE_F_LEAVE, 22,
             &b);

  /* Client and aux peers. A client joins the genesis round the node
   * coordinates: it reduces nothing (an empty shard), so it sends its
   * whole vector to the node, which reduces all of it. */
  gbuf_reset(&b);
  frame_hello_mode(&b, &hi, NULL, DED_MODE_CLIENT);
  frame_join(&b, 0, 0, DED_DTYPE_F32, N, 1.0, 1, DED_JOIN_F_GENESIS | DED_JOIN_F_CLIENT);
  frames_data(&b, DED_MSG_DATA, 0, A_node, DED_DTYPE_F32, 0, N, 16, 100.0);
  uint8_t d_cl[DED_RESULT_DIGEST_BYTES];
  {
    const gcontrib cl[2] = {{true, 0.0, 1.0}, {false, 100.0, 1.0}};
    node_result_digest(d_cl, DED_DTYPE_F32, 0, N, cl, 2, 2.0, 0.0);
  }
  frame_have(&b, 0, A_node, 0, 0, d_cl);
  write_node("round_client_joins", FUZZ_NODE_F_ROUND0, 33, &b);
  /* ... and round 1 too: the client is in round 0's lineage but never
   * coordinates (member 1 % 2 would), so the node does again. */
  frames_padding(&b, 20);
  frame_join(&b, 1, 0, DED_DTYPE_F32, N, 1.0, 1, DED_JOIN_F_CLIENT);
  frames_data(&b, DED_MSG_DATA, 1, A_node, DED_DTYPE_F32, 0, N, 16, 7.0);
  {
    const gcontrib cl[2] = {{true, 0.0, 2.0 / 3.0}, {false, 7.0, 1.0}};
    node_result_digest(d_cl, DED_DTYPE_F32, 0, N, cl, 2, 3.0, 0.0);
  }
  frame_have(&b, 1, A_node, 0, 0, d_cl);
  write_node("two_rounds_client_lineage", FUZZ_NODE_F_ROUND0 | FUZZ_NODE_F_ROUND1, 34, &b);

  /* An aux peer coordinates the genesis round with equal shares (its
   * DEDMPI_PLAN=equal): it brings no vector (weight 0, no DATA) and
   * reduces the first shard, the node's vector alone, whose RESULT it
   * sends; the node is the only contributor. */
  gbuf_reset(&b);
  frame_hello_mode(&b, &lo, NULL, DED_MODE_AUX);
  {
    ded_msg_commit c = plan_of(mm, 0, A_lo, 0, DED_DTYPE_F32, N, 16, ids_lo, w1, one, 2);
    c.members[0].flags |= DED_MEMBER_F_AUX;
    c.members[0].weight = 0.0;
    frame_commit(&b, &c);
  }
  frames_data(&b, DED_MSG_RESULT, 0, A_lo, DED_DTYPE_F32, 0, half, 16, 0.0);
  uint8_t d_aux[DED_RESULT_DIGEST_BYTES];
  {
    const gcontrib own[1] = {{true, 0.0, 1.0}};
    node_result_digest(d_aux, DED_DTYPE_F32, half, N, own, 1, 1.0, 0.0);
  }
  frame_have(&b, 0, A_lo, 0, 0, d_aux);
  write_node("round_aux_coordinates", FUZZ_NODE_F_ROUND0, 35, &b);

  /* An aux peer joins the genesis round the node coordinates: with the
   * node the only contributor, the plan has it reduce its own vector
   * whole (at no cost) and the aux peer nothing; the aux peer sends no
   * vector, only its HAVE once the node's RESULT is in. */
  gbuf_reset(&b);
  frame_hello_mode(&b, &hi, NULL, DED_MODE_AUX);
  frame_join(&b, 0, 0, DED_DTYPE_F32, N, 1.0, 1, DED_JOIN_F_GENESIS | DED_JOIN_F_AUX);
  frames_padding(&b, 4);
  {
    const gcontrib own[1] = {{true, 0.0, 1.0}};
    node_result_digest(d_aux, DED_DTYPE_F32, 0, N, own, 1, 1.0, 0.0);
  }
  frame_have(&b, 0, A_node, 0, 0, d_aux);
  write_node("round_aux_joins", FUZZ_NODE_F_ROUND0, 36, &b);

  /* The peer is dropped, connects again as someone else, and joins. */
  gbuf_reset(&b);
  frame_hello(&b, &lo, NULL);
  frame_leave(&b, 0); /* an unknown reason: dropped */
  frame_hello(&b, &hi, NULL);
  frame_join(&b, 0, 0, DED_DTYPE_F32, N, 1.0, 1, DED_JOIN_F_GENESIS);
  frames_data(&b, DED_MSG_DATA, 0, A_node, DED_DTYPE_F32, 0, half, 16, 3.0);
  write_node("reconnect", FUZZ_NODE_F_ROUND0, 18, &b);
  gbuf_free(&b);
}

/* ------------------------------------------------------------ noise */

/* fuzz_noise: each genuine message of the fixed handshake and a sealed
 * frame of its session, then a few that must be refused. */
static void gen_noise(void) {
  fuzz_noise_world w;
  fuzz_noise_world_build(&w);
  gbuf in = {0};
  gbuf_u8(&in, 0);
  gbuf_put(&in, w.m1, sizeof w.m1);
  write_seed("noise", "initiation", in.p, in.len);
  in.len = 1 + sizeof w.m1 / 2;
  write_seed("noise", "initiation_short", in.p, in.len);
  gbuf_reset(&in);
  gbuf_u8(&in, 1);
  gbuf_put(&in, w.m2, sizeof w.m2);
  write_seed("noise", "response", in.p, in.len);
  gbuf_reset(&in);
  gbuf_u8(&in, 2);
  gbuf_put(&in, w.m3, sizeof w.m3);
  write_seed("noise", "final", in.p, in.len);
  in.p[1] ^= 0x80;
  write_seed("noise", "final_tampered", in.p, in.len);
  /* Another psk: the same initiator's initiation is refused at mac1. */
  ded_noise other;
  uint8_t psk[DED_NOISE_PSK_BYTES], m1[DED_NOISE_INITIATION_BYTES];
  memset(psk, FUZZ_NOISE_PSK_BYTE ^ 1, sizeof psk);
  ded_noise_init(&other, &w.i_id, psk, w.run, true);
  other.caps = 0;
  FUZZ_CHECK(ded_noise_create_initiation(&other, w.eph_i, m1) == 0);
  gbuf_reset(&in);
  gbuf_u8(&in, 0);
  gbuf_put(&in, m1, sizeof m1);
  write_seed("noise", "initiation_other_psk", in.p, in.len);
  /* A frame the initiator seals first: header, then type and payload. */
  ded_aead tx;
  ded_aead_init(&tx, w.ki.send, false, FUZZ_NOW_NS);
  const uint8_t hdr[4] = {9, 0, 0, 0};
  uint8_t plain[9] = {DED_MSG_LEAVE, 1, 2, 3, 4, 5, 6, 7, 8};
  uint8_t sealed[sizeof plain + DED_AEAD_TAG_BYTES];
  ded_aead_seal(&tx, hdr, sizeof hdr, plain, sizeof plain, sealed);
  gbuf_reset(&in);
  gbuf_u8(&in, 3);
  gbuf_put(&in, hdr, sizeof hdr);
  gbuf_put(&in, sealed, sizeof sealed);
  write_seed("noise", "frame", in.p, in.len);
  gbuf_free(&in);
}


/* ------------------------------------------------------------- image */

/* fuzz_image: state images of no piece, of pieces of every size a
 * per-tensor trainer has (hundreds, most of them small), and broken ones:
 * a table past the end, sizes short of or past the bytes. */
static void gen_image(void) {
  enum { N = 300 };
  uint64_t sizes[N], total = 0;
  for (unsigned i = 0; i < N; i++) total += sizes[i] = i % 10 == 0 ? 256 : 4 * (i % 7);
  uint64_t len = ded_image_table_bytes(N) + total;
  uint8_t *img = calloc(1, len + 8);
  FUZZ_CHECK(img);
  ded_image_write_table(img, sizes, N);
  for (uint64_t i = ded_image_table_bytes(N); i < len; i++) img[i] = (uint8_t)(i * 31);
  write_seed("image", "pieces_300", img, len);
  write_seed("image", "one_byte_short", img, len - 1);
  write_seed("image", "one_byte_over", img, len + 1);
  write_seed("image", "table_cut", img, ded_image_table_bytes(N) - 3);
  uint64_t none = 0;
  ded_image_write_table(img, &none, 0);
  write_seed("image", "no_pieces", img, 8);
  uint64_t huge[2] = {UINT64_MAX, 9};
  ded_image_write_table(img, huge, 2);
  write_seed("image", "size_wraps", img, ded_image_table_bytes(2) + 8);
  uint64_t count = UINT64_MAX;
  memcpy(img, &count, 8);
  write_seed("image", "count_huge", img, 64);
  free(img);
}

/* ------------------------------------------------------------- ckpt */

/* fuzz_ckpt: a whole checkpoint of run FUZZ_RUN (a state image of two
 * pieces), torn (by one byte, in the header), with a byte flipped in the
 * state and in the header, another run's, and one of an empty image. */
static void gen_ckpt(void) {
  uint8_t run[32];
  ded_ckpt_run_hash(FUZZ_RUN, run);
  uint64_t sizes[2] = {64, 8};
  size_t ilen = ded_image_table_bytes(2) + 72;
  uint8_t *f = calloc(1, DED_CKPT_HDR_BYTES + ilen);
  FUZZ_CHECK(f);
  uint8_t *img = f + DED_CKPT_HDR_BYTES;
  ded_image_write_table(img, sizes, 2);
  for (size_t i = ded_image_table_bytes(2); i < ilen; i++) img[i] = (uint8_t)(i * 13);
  ded_snapshot s;
  memset(&s, 0, sizeof s);
  s.round = 120;
  s.pos = 4101720;
  s.step_rounds = 2;
  s.len = ilen;
  s.digest = ded_digest64(img, ilen);
  s.bytes = img;
  size_t n = DED_CKPT_HDR_BYTES + ilen;
  ded_ckpt_header(f, run, &s, FUZZ_NOW_MS);
  write_seed("ckpt", "whole", f, n);
  write_seed("ckpt", "torn_by_one", f, n - 1);
  write_seed("ckpt", "torn_header", f, DED_CKPT_HDR_BYTES - 5);
  f[n - 2] ^= 1;
  write_seed("ckpt", "state_flipped", f, n);
  f[n - 2] ^= 1;
  f[50] ^= 1;
  write_seed("ckpt", "header_flipped", f, n);
  f[50] ^= 1;
  uint8_t other[32];
  ded_ckpt_run_hash("another", other);
  ded_ckpt_header(f, other, &s, FUZZ_NOW_MS);
  write_seed("ckpt", "other_run", f, n);
  ded_image_write_table(img, sizes, 0);
  s.len = 8;
  s.digest = ded_digest64(img, 8);
  ded_ckpt_header(f, run, &s, FUZZ_NOW_MS);
  write_seed("ckpt", "no_pieces", f, DED_CKPT_HDR_BYTES + 8);
  free(f);
}

/* ------------------------------------------------------------ invite */

/* fuzz_invite: the fixed owner's invitations (forever, expired, in the
 * future), one signed by another, one in capitals, one cut short. */
static void gen_invite(void) {
  ded_ident owner, guest;
  uint8_t seed[DED_SEED_BYTES];
  memset(seed, FUZZ_INVITE_OWNER_SEED_BYTE, sizeof seed);
  ded_ident_from_seed(&owner, seed);
  memset(seed, FUZZ_INVITE_OWNER_SEED_BYTE + 1, sizeof seed);
  ded_ident_from_seed(&guest, seed);
  const struct {
    const char *name;
    const ded_ident *signer;
    uint64_t expires_ms;
  } v[] = {{"forever", &owner, 0},
           {"expired", &owner, FUZZ_NOW_MS - 1},
           {"later", &owner, FUZZ_NOW_MS + 1000},
           {"self_signed", &guest, 0}};
  char text[DED_INVITE_TEXT_LEN + 1];
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
    ded_invite inv;
    ded_invite_sign(&inv, v[i].signer, run_id, guest.pk, v[i].expires_ms);
    ded_invite_format(&inv, text);
    write_seed("invite", v[i].name, (const uint8_t *)text, DED_INVITE_TEXT_LEN);
  }
  for (size_t i = DED_INVITE_PREFIX_LEN; i < DED_INVITE_TEXT_LEN; i++)
    text[i] = (char)toupper((unsigned char)text[i]);
  write_seed("invite", "capitals", (const uint8_t *)text, DED_INVITE_TEXT_LEN);
  write_seed("invite", "short", (const uint8_t *)text, DED_INVITE_TEXT_LEN / 2);
}

/* ------------------------------------------------------------ chan */

/* |ch|'s output as a seed: selector, cut, bytes. */
static void chan_seed(const char *name, uint8_t sel, uint8_t cut, ded_chan *ch) {
  gbuf in = {0};
  gbuf_u8(&in, sel);
  gbuf_u8(&in, cut);
  const uint8_t *p;
  size_t n = ded_chan_out(ch, &p);
  gbuf_put(&in, p, n);
  write_seed("chan", name, in.p, in.len);
  gbuf_free(&in);
}

/* fuzz_chan: the genuine bytes of each phase, whole and cut, and records
 * (one under a rotated key); a stream of another version; the notices. */
static void gen_chan(void) {
  fuzz_chan_world w;
  fuzz_chan_world_build(&w);
  ded_chan a, b;
  fuzz_chan_fresh(&w, &a, &b);
  chan_seed("initiation", 0, 0, &a);
  chan_seed("initiation_cut", 0, 7, &a);
  const uint8_t *p;
  size_t n = ded_chan_out(&a, &p);
  ((uint8_t *)p)[DED_CHAN_MAGIC_BYTES - 1] = 7; /* a version 7 peer */
  chan_seed("initiation_v7", 0, 0, &a);
  ded_chan_free(&a);
  ded_chan_free(&b);
  fuzz_chan_fresh(&w, &a, &b);
  fuzz_chan_pump(&a, &b);
  chan_seed("response", 1, 0, &b);
  ded_chan_free(&a);
  ded_chan_free(&b);
  /* A responder's notices where the response belongs, whole and cut; one
   * with a reason not known. */
  static const struct {
    const char *name;
    uint8_t reason, cut;
  } notices[] = {{"notice_key", DED_CHAN_NOTICE_KEY, 0}, {"notice_key_cut", DED_CHAN_NOTICE_KEY, 1},
                 {"notice_version", DED_CHAN_NOTICE_VERSION, 0},
                 {"notice_full", DED_CHAN_NOTICE_FULL, 4},
                 {"notice_leaving", DED_CHAN_NOTICE_LEAVING, 0}, {"notice_unknown", 'Z', 0}};
  for (size_t i = 0; i < sizeof notices / sizeof notices[0]; i++) {
    gbuf in = {0};
    gbuf_u8(&in, 1);
    gbuf_u8(&in, notices[i].cut);
    uint8_t notice[DED_CHAN_NOTICE_BYTES];
    ded_chan_notice_bytes(notices[i].reason, notice);
    gbuf_put(&in, notice, sizeof notice);
    write_seed("chan", notices[i].name, in.p, in.len);
    gbuf_free(&in);
  }
  fuzz_chan_open_pair(&w, &a, &b);
  uint8_t frame[9] = {5, 0, 0, 0, DED_MSG_LEAVE, 1, 2, 3, 4};
  ded_iov iov = {frame, sizeof frame};
  FUZZ_CHECK(ded_chan_seal(&a, &iov, 1, FUZZ_NOW_NS) == sizeof frame);
  chan_seed("record", 2, 0, &a);
  FUZZ_CHECK(ded_chan_seal(&a, &iov, 1, FUZZ_NOW_NS + DED_AEAD_REKEY_NS) == sizeof frame);
  chan_seed("records_rekey", 2, 3, &a);
  (void)n;
  ded_chan_free(&a);
  ded_chan_free(&b);
}

/* fuzz_codec: u8 codec | u16 first | u16 n | u16 more | payload. Each
 * codec's encoding of a smooth vector with a few spikes, over a range
 * that cuts int8's blocks, and a few broken ones. */
static void write_codec(const char *name, uint8_t sel, size_t first, size_t n, size_t more,
                        const uint8_t *p, size_t len) {
  gbuf in = {0};
  gbuf_u8(&in, sel);
  gbuf_u8(&in, (uint8_t)first);
  gbuf_u8(&in, (uint8_t)(first >> 8));
  gbuf_u8(&in, (uint8_t)n);
  gbuf_u8(&in, (uint8_t)(n >> 8));
  gbuf_u8(&in, (uint8_t)more);
  gbuf_u8(&in, (uint8_t)(more >> 8));
  gbuf_put(&in, p, len);
  write_seed("codec", name, in.p, in.len);
  gbuf_free(&in);
}

static void gen_codec(void) {
  enum { TOTAL = 1400, FIRST = 300, N = 1000 };
  static float v[TOTAL];
  for (int i = 0; i < TOTAL; i++) v[i] = (float)((i % 37) - 18) / 7.0f;
  v[444] = 90.0f;
  v[1000] = -250.0f;
  static uint8_t buf[16 * TOTAL];
  const char *names[] = {"none", "fp16", "bf16", "int8", "topk", "sparse"};
  for (uint8_t k = 0; k < 6; k++) {
    ded_codec c = {(ded_codec_kind)k, 0.01}; /* selector k: fraction 0.01 */
    size_t len;
    FUZZ_CHECK(ded_codec_encode(&c, v, TOTAL, FIRST, N, buf, sizeof buf, &len,
                                ded_mem_default()) == 0);
    write_codec(names[k], k, FIRST, N, TOTAL - FIRST - N, buf, len);
    char cut[32];
    snprintf(cut, sizeof cut, "%s_short", names[k]);
    write_codec(cut, k, FIRST, N, TOTAL - FIRST - N, buf, len - 1);
  }
  /* top-k of fraction 0.1 (selector 6 * 2 + 4), and an index past the range */
  ded_codec c = {DED_CODEC_TOPK, 0.1};
  size_t len;
  FUZZ_CHECK(ded_codec_encode(&c, v, TOTAL, 0, 100, buf, sizeof buf, &len, ded_mem_default()) == 0);
  write_codec("topk_tenth", 16, 0, 100, TOTAL - 100, buf, len);
  buf[4] = 100; /* the first gap: index 100 of 100 */
  write_codec("topk_index_out", 16, 0, 100, TOTAL - 100, buf, len);
  /* int8 with a NaN scale, and a huge one */
  ded_codec i8 = {DED_CODEC_INT8, 0};
  FUZZ_CHECK(ded_codec_encode(&i8, v, TOTAL, 0, 600, buf, sizeof buf, &len, ded_mem_default()) == 0);
  uint8_t nan_scale[4] = {0x00, 0x00, 0xc0, 0x7f}, big_scale[4] = {0xff, 0xff, 0x7f, 0x7f};
  memcpy(buf, nan_scale, 4);
  write_codec("int8_nan_scale", 3, 0, 600, TOTAL - 600, buf, len);
  memcpy(buf, big_scale, 4);
  write_codec("int8_huge_scale", 3, 0, 600, TOTAL - 600, buf, len);
  /* sparse claiming more elements than the range has */
  ded_codec sp = {DED_CODEC_SPARSE, 0};
  FUZZ_CHECK(ded_codec_encode(&sp, v, TOTAL, 0, 50, buf, sizeof buf, &len, ded_mem_default()) == 0);
  buf[0] = 51;
  write_codec("sparse_too_many", 5, 0, 50, TOTAL - 50, buf, len);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  out_dir = argv[1];
  make_dir(out_dir);
  FUZZ_CHECK(ded_crypto_init() == 0);
  ded_hash32(FUZZ_RUN, FUZZ_RUN_LEN, run_id);
  gen_record();
  gen_msg();
  gen_frame();
  gen_node();
  gen_noise();
  gen_chan();
  gen_invite();
  gen_image();
  gen_ckpt();
  gen_http();
  gen_codec();
  return 0;
}
