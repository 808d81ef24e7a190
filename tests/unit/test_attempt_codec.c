/*
 * test_attempt_codec.c: avg/ded_attempt with a codec (avg/ded_codec.h).
 *
 * Three members run one float32 attempt each in this process; every frame
 * an attempt sends is copied into a queue and then handed to the
 * addressee's attempt. With each codec, every member ends with the same
 * bytes, and those are the ones computed here independently: each
 * contribution encoded and decoded chunk by chunk as the layout cuts it,
 * summed in commit order in float32, divided by the total weight, then
 * sent through the result codec (ded_codec_result) with the chunk as the
 * whole vector. A chunk the codec refuses (a non-finite value) goes as
 * plain floats; a malformed payload is a protocol violation.
 *
 * The layout is chosen so that int8's blocks of 512 straddle both shard
 * and chunk edges: shards [0, 1100), [1100, 2333), [2333, 3000) in chunks
 * of 700.
 */
#include "unit_util.h"

#include <math.h>

#include "avg/ded_attempt.h"
#include "avg/ded_codec.h"
#include "core/ded_assert.h"

#define K 3
#define COUNT 3000
#define CHUNK 700
#define NCH 5 /* chunks of every shard: 2 + 2 + 1 */
#define ES sizeof(float)

static const uint64_t cw_off[K] = {0, 1100, 2333};

/* One frame an attempt sent, its bytes copied. */
typedef struct cw_frame {
  unsigned from, to;
  uint8_t type, codec;
  uint64_t off;
  uint8_t *bytes;
  size_t len;
} cw_frame;

struct cw_world;

/* One member: its attempt, its env (|ctx| is the node) and its cache. */
typedef struct cw_node {
  struct cw_world *w;
  unsigned me;
  ded_bufcache cache;
  ded_attempt a;
  ded_attempt_env env;
} cw_node;

typedef struct cw_world {
  unit_failmem fm;
  ded_codec codec, rcodec;
  ded_msg_member m[K];
  ded_msg_commit plan;
  cw_node node[K];
  float x[K][COUNT];   /* every member's contribution */
  float res[K][COUNT]; /* every member's round buffer */
  uint64_t clo[NCH], cn[NCH];
  unsigned cs[NCH]; /* every chunk: where, how long, whose shard */
  /* The reference: each member's contribution as decoded, which of its
   * chunks the codec refused, which result chunks the result codec
   * refused, and the result. */
  float q[K][COUNT];
  bool raw[K][NCH], rraw[NCH];
  float want[COUNT];
  cw_frame *f;
  size_t nf, capf;
  uint8_t **wire;
  size_t nwire, capwire;
} cw_world;

/* Small values, a few large outliers, different for every member. */
static float cw_value(unsigned m, unsigned i) {
  float v = sinf(0.013f * (float)i * (float)(m + 1) + (float)m) * (1.0f + 0.25f * (float)m);
  if (i % 397 == m * 50 + 11) v *= 40.0f;
  return v;
}

static int cw_send(void *ctx, const uint8_t id[DED_ID_BYTES], uint8_t type, uint64_t off,
                   uint8_t codec, const uint8_t *elems, size_t len, bool user) {
  cw_node *nd = ctx;
  cw_world *w = nd->w;
  unsigned to = K;
  for (unsigned m = 0; m < K; m++)
    if (memcmp(id, w->m[m].id, DED_ID_BYTES) == 0) to = m;
  assert_true(to < K && to != nd->me);
  /* Only a plain contribution goes out of the caller's buffer. */
  assert_int_equal(user, type == DED_MSG_DATA && w->codec.kind == DED_CODEC_NONE);
  if (w->nf == w->capf) {
    w->capf = w->capf ? 2 * w->capf : 32;
    w->f = realloc(w->f, w->capf * sizeof *w->f);
    assert_non_null(w->f);
  }
  cw_frame *f = &w->f[w->nf++];
  *f = (cw_frame){nd->me, to, type, codec, off, malloc(len + 1), len};
  assert_non_null(f->bytes);
  memcpy(f->bytes, elems, len);
  return 0;
}

static uint8_t *cw_wire(void *ctx, size_t len) {
  cw_world *w = ((cw_node *)ctx)->w;
  if (w->nwire == w->capwire) {
    w->capwire = w->capwire ? 2 * w->capwire : 8;
    w->wire = realloc(w->wire, w->capwire * sizeof *w->wire);
    assert_non_null(w->wire);
  }
  return w->wire[w->nwire++] = malloc(len);
}

/* Three members laid out as above with contribution codec |kind|
 * (|fraction| for top-k); member |inf_m| (or -1) has +inf at |inf_at|. */
static cw_world *cw_new(ded_codec_kind kind, double fraction, int inf_m, unsigned inf_at) {
  cw_world *w = calloc(1, sizeof *w);
  assert_non_null(w);
  unit_failmem_init(&w->fm, -1);
  w->codec = (ded_codec){kind, fraction};
  w->rcodec = ded_codec_result(&w->codec);
  uint8_t ck;
  uint32_t ppm;
  ded_codec_to_wire(&w->codec, &ck, &ppm);
  for (unsigned m = 0; m < K; m++) {
    w->m[m] = unit_member(m + 1, DED_MEMBER_F_ACCEPTOR, cw_off[m]);
    for (unsigned i = 0; i < COUNT; i++) w->x[m][i] = cw_value(m, i);
  }
  if (inf_m >= 0) w->x[inf_m][inf_at] = INFINITY;
  w->plan = unit_plan((uint64_t)1 << 32 | 3, w->m, K, K, COUNT, CHUNK);
  w->plan.dtype = DED_DTYPE_F32;
  w->plan.codec = ck;
  w->plan.codec_ppm = ppm;
  unsigned c = 0;
  for (unsigned s = 0; s < K; s++) {
    uint64_t hi = s + 1 < K ? cw_off[s + 1] : COUNT;
    for (uint64_t lo = cw_off[s]; lo < hi; lo += CHUNK, c++) {
      w->clo[c] = lo;
      w->cn[c] = DED_MIN(CHUNK, hi - lo);
      w->cs[c] = s;
    }
  }
  assert_int_equal(c, NCH);
  for (unsigned m = 0; m < K; m++) {
    cw_node *nd = &w->node[m];
    nd->w = w;
    nd->me = m;
    nd->cache.mem = &w->fm.mem;
    memset(w->res[m], 0xff, sizeof w->res[m]); /* NaN: what is not written shows */
    nd->env = (ded_attempt_env){.mem = &w->fm.mem,
                                .cache = &nd->cache,
                                .dtype = DED_DTYPE_F32,
                                .es = ES,
                                .input = (const uint8_t *)w->x[m],
                                .input_user = kind == DED_CODEC_NONE,
                                .res = (uint8_t *)w->res[m],
                                .now_ns = 1000,
                                .send = cw_send,
                                .wire = cw_wire,
                                .ctx = nd};
    uint8_t self[DED_ID_BYTES];
    unit_id(self, m + 1);
    assert_int_equal(ded_attempt_layout(&nd->a, &w->fm.mem, &w->plan, self), 0);
    assert_int_equal(nd->a.me, m);
    assert_int_equal(nd->a.codec.kind, kind);
  }
  return w;
}

static void cw_free(cw_world *w) {
  for (unsigned m = 0; m < K; m++) {
    ded_attempt_clear(&w->node[m].a, &w->fm.mem, &w->node[m].cache, ES);
    ded_bufcache_free(&w->node[m].cache);
  }
  assert_int_equal(w->fm.live, 0);
  for (size_t i = 0; i < w->nf; i++) free(w->f[i].bytes);
  for (size_t i = 0; i < w->nwire; i++) free(w->wire[i]);
  free(w->f);
  free(w->wire);
  free(w);
}

/* Every member starts, adds its own and sends its contribution to every
 * other member's shard, as a round does: with a codec nothing is encoded
 * yet, so nothing goes. Then each encodes its contribution in slices of
 * about a chunk (ded_attempt_encode), which sends each chunk as it is
 * encoded and adds our own. */
static void cw_start(cw_world *w) {
  for (unsigned m = 0; m < K; m++) {
    assert_int_equal(ded_attempt_start(&w->node[m].a, &w->node[m].env), 0);
    assert_int_equal(ded_attempt_reduce_own(&w->node[m].a, &w->node[m].env), 0);
  }
  size_t before = w->nf;
  for (unsigned m = 0; m < K; m++)
    for (unsigned s = 0; s < K; s++)
      if (s != m) assert_int_equal(ded_attempt_send_contrib(&w->node[m].a, &w->node[m].env, s), 0);
  if (w->node[0].a.codec.kind != DED_CODEC_NONE) assert_int_equal(w->nf, before);
  for (unsigned m = 0; m < K; m++) {
    unsigned slices = 0;
    while (ded_attempt_encoding(&w->node[m].a)) {
      assert_int_equal(ded_attempt_encode(&w->node[m].a, &w->node[m].env, w->node[m].a.chunk), 0);
      slices++;
    }
    if (w->node[0].a.codec.kind != DED_CODEC_NONE && !(w->plan.members[m].flags & DED_MEMBER_F_AUX))
      assert_true(slices > 1);
  }
}

/* Member |from|'s frame to member |to|, as take sees it. */
static int cw_take(cw_world *w, unsigned from, unsigned to, uint8_t type, uint64_t off,
                   uint8_t codec, const uint8_t *bytes, size_t len) {
  ded_msg_data d = {w->plan.round, w->plan.attempt, off, bytes, len, codec};
  cw_node *nd = &w->node[to];
  return ded_attempt_take(&nd->a, &nd->env, w->m[from].id, type, &d, true, false);
}

static int cw_deliver(cw_world *w, size_t i) {
  cw_frame f = w->f[i]; /* the queue may grow meanwhile */
  return cw_take(w, f.from, f.to, f.type, f.off, f.codec, f.bytes, f.len);
}

/* Delivers the contributions (last sent first, with |reverse|, so that
 * some wait in staging), then every frame they caused, in order. */
static void cw_run(cw_world *w, bool reverse) {
  size_t n0 = w->nf;
  for (size_t j = 0; j < n0; j++) assert_int_equal(cw_deliver(w, reverse ? n0 - 1 - j : j), 0);
  for (size_t i = n0; i < w->nf; i++) assert_int_equal(cw_deliver(w, i), 0);
}

static unsigned cw_chunk_of(const cw_world *w, uint64_t off) {
  for (unsigned c = 0; c < NCH; c++)
    if (off >= w->clo[c] && off < w->clo[c] + w->cn[c]) return c;
  fail();
  return 0;
}

/* The frame of |type| from |from| to |to| at |off|: its index. */
static size_t cw_find(const cw_world *w, uint8_t type, unsigned from, unsigned to, uint64_t off) {
  for (size_t i = 0; i < w->nf; i++)
    if (w->f[i].type == type && w->f[i].from == from && w->f[i].to == to && w->f[i].off == off)
      return i;
  fail();
  return 0;
}

/* The result as computed here, the way ded_attempt and ded_reduce do it:
 * acc = q_0, acc += q_1, acc += q_2 (weights 1, one local rank each),
 * acc /= (float)3, then the result codec's round trip. */
static void cw_reference(cw_world *w) {
  static uint8_t buf[4 + 14 * CHUNK]; /* the largest bound: sparse */
  for (unsigned c = 0; c < NCH; c++) {
    size_t lo = w->clo[c], n = w->cn[c], len = 0;
    assert_true(ded_codec_bound(&w->codec, n) <= sizeof buf);
    for (unsigned m = 0; m < K; m++) {
      w->raw[m][c] = false;
      if (w->codec.kind == DED_CODEC_NONE) {
        memcpy(&w->q[m][lo], &w->x[m][lo], n * ES);
        continue;
      }
      int rv = ded_codec_encode(&w->codec, w->x[m], COUNT, lo, n, buf, sizeof buf, &len, &w->fm.mem);
      if (rv == 0) {
        assert_int_equal(ded_codec_decode(&w->codec, buf, len, COUNT, lo, n, &w->q[m][lo]), 0);
      } else {
        assert_int_equal(rv, DED_ERR_INVALID_ARG);
        w->raw[m][c] = true;
        memcpy(&w->q[m][lo], &w->x[m][lo], n * ES);
      }
    }
    float *acc = &w->want[lo];
    memcpy(acc, &w->q[0][lo], n * ES);
    for (unsigned m = 1; m < K; m++)
      for (size_t i = 0; i < n; i++) acc[i] += w->q[m][lo + i];
    const float wf = (float)3.0;
    for (size_t i = 0; i < n; i++) acc[i] /= wf;
    w->rraw[c] = w->rcodec.kind == DED_CODEC_NONE;
    if (w->rraw[c]) continue;
    if (ded_codec_encode(&w->rcodec, acc, n, 0, n, buf, sizeof buf, &len, &w->fm.mem) == 0)
      assert_int_equal(ded_codec_decode(&w->rcodec, buf, len, n, 0, n, acc), 0);
    else
      w->rraw[c] = true;
  }
}

/* Everything was delivered: every member holds the reference result, its
 * own contribution as the reference decoded it, and every frame went in
 * the codec it had to. */
static void cw_check(cw_world *w) {
  cw_reference(w);
  for (unsigned m = 0; m < K; m++) {
    const ded_attempt *a = &w->node[m].a;
    assert_true(ded_attempt_whole(a));
    assert_int_equal(a->reduced, a->my_nchunks);
    assert_memory_equal(w->res[m], w->res[0], sizeof w->res[0]);
    assert_memory_equal(w->res[m], w->want, sizeof w->want);
    if (w->codec.kind == DED_CODEC_NONE)
      assert_null(a->q);
    else
      assert_memory_equal(a->q, w->q[m], sizeof w->q[m]);
    uint8_t got[DED_DIGEST_BYTES], want[DED_DIGEST_BYTES];
    ded_attempt_digest(a, got);
    ded_digest_of(w->want, sizeof w->want, want);
    assert_memory_equal(got, want, sizeof want);
  }
  /* Each member's chunks of the two other shards, and each result chunk
   * to the two other members. */
  size_t ndata = 0, nres = 0;
  for (size_t i = 0; i < w->nf; i++) {
    const cw_frame *f = &w->f[i];
    unsigned c = cw_chunk_of(w, f->off);
    assert_int_equal(f->off, w->clo[c]);
    size_t plain = w->cn[c] * ES;
    if (f->type == DED_MSG_DATA) {
      ndata++;
      assert_int_equal(f->to, w->cs[c]);
      bool raw = w->codec.kind == DED_CODEC_NONE || w->raw[f->from][c];
      assert_int_equal(f->codec, raw ? DED_CODEC_NONE : w->codec.kind);
      if (raw) assert_memory_equal(f->bytes, &w->x[f->from][w->clo[c]], plain);
      if (!raw) assert_true(f->len <= ded_codec_bound(&w->codec, w->cn[c]));
      if (!raw && w->codec.kind == DED_CODEC_TOPK) assert_true(f->len * 10 < plain);
    } else {
      nres++;
      assert_int_equal(f->type, DED_MSG_RESULT);
      assert_int_equal(f->from, w->cs[c]);
      assert_int_equal(f->codec, w->rraw[c] ? DED_CODEC_NONE : w->rcodec.kind);
      if (w->rraw[c]) assert_int_equal(f->len, plain);
    }
  }
  assert_int_equal(ndata, 10);
  assert_int_equal(nres, 2 * NCH);
}

/* Lazy inputs (ded_attempt_env.prepare): member m's input starts as NaN
 * and gets x[m] a range at a time, as the attempt asks. */
static float cw_lazy[K][COUNT];
static unsigned cw_prepared[K][COUNT]; /* times each element was readied */

static void cw_prepare(void *ctx, uint64_t first, uint64_t n) {
  cw_node *nd = ctx;
  assert_true(first + n <= COUNT);
  for (uint64_t i = first; i < first + n; i++) {
    cw_lazy[nd->me][i] = nd->w->x[nd->me][i];
    cw_prepared[nd->me][i]++;
  }
}

/* ---------------------------------------------------------------- tests */

/* Each codec, contributions in either order: the same bytes everywhere,
 * those of the reference; the result codec is the one ded_codec_result
 * names (top-k's: sparse); top-k's frames are a small fraction of the
 * floats. */
static void test_attempt_codec_round(void **state) {
  (void)state;
  static const ded_codec_kind kinds[] = {DED_CODEC_FP16, DED_CODEC_BF16, DED_CODEC_INT8,
                                         DED_CODEC_TOPK};
  static const ded_codec_kind rkinds[] = {DED_CODEC_FP16, DED_CODEC_BF16, DED_CODEC_INT8,
                                          DED_CODEC_SPARSE};
  for (size_t i = 0; i < DED_ARRAY_LEN(kinds); i++)
    for (int reverse = 0; reverse < 2; reverse++) {
      cw_world *w = cw_new(kinds[i], 0.01, -1, 0);
      assert_int_equal(w->rcodec.kind, rkinds[i]);
      if (kinds[i] == DED_CODEC_TOPK) assert_int_equal(w->plan.codec_ppm, 10000);
      cw_start(w);
      cw_run(w, reverse);
      cw_check(w);
      for (unsigned m = 0; m < K; m++) {
        assert_memory_not_equal(w->q[m], w->x[m], sizeof w->x[m]); /* it is lossy */
        for (unsigned c = 0; c < NCH; c++) assert_false(w->raw[m][c]);
      }
      for (unsigned c = 0; c < NCH; c++) assert_false(w->rraw[c]);
      cw_free(w);
    }
}

/* A member that takes an attempt over from a DECIDE after sending its
 * data in an earlier hold of it (ded_attempt_decoded_contrib): what the
 * reducers decoded of its contribution is computed again, the same bytes;
 * an aux member, one not listed, or an attempt without a codec, has none. */
static void test_attempt_codec_decoded_again(void **state) {
  (void)state;
  static const ded_codec_kind kinds[] = {DED_CODEC_FP16, DED_CODEC_INT8, DED_CODEC_TOPK};
  for (size_t i = 0; i < DED_ARRAY_LEN(kinds); i++) {
    cw_world *w = cw_new(kinds[i], 0.01, -1, 0);
    cw_start(w);
    cw_run(w, false);
    for (unsigned m = 0; m < K; m++) {
      ded_attempt again;
      memset(&again, 0, sizeof again);
      uint8_t self[DED_ID_BYTES];
      unit_id(self, m + 1);
      assert_int_equal(ded_attempt_layout(&again, &w->fm.mem, &w->plan, self), 0);
      assert_null(again.q);
      assert_int_equal(ded_attempt_decoded_contrib(&again, &w->fm.mem, &w->node[m].cache, w->x[m]),
                       0);
      assert_non_null(again.q);
      assert_memory_equal(again.q, w->node[m].a.q, sizeof w->x[m]);
      ded_attempt_clear(&again, &w->fm.mem, &w->node[m].cache, ES);
    }
    /* not listed: nothing */
    ded_attempt other;
    memset(&other, 0, sizeof other);
    uint8_t stranger[DED_ID_BYTES];
    unit_id(stranger, 77);
    assert_int_equal(ded_attempt_layout(&other, &w->fm.mem, &w->plan, stranger), 0);
    assert_int_equal(ded_attempt_decoded_contrib(&other, &w->fm.mem, &w->node[0].cache, w->x[0]),
                     0);
    assert_null(other.q);
    ded_attempt_clear(&other, &w->fm.mem, &w->node[0].cache, ES);
    cw_free(w);
  }
}

/* With an input readied a range at a time (the round compensates its
 * contribution so, as it is encoded), every element an encoding reads is
 * readied first: the same bytes as with the whole input ready (a NaN left
 * unready would change an int8 block's scale, or go raw). A range is
 * readied at most as often as chunks touch its int8 blocks. */
static void test_attempt_codec_prepared_lazily(void **state) {
  (void)state;
  static const ded_codec_kind kinds[] = {DED_CODEC_FP16, DED_CODEC_INT8, DED_CODEC_TOPK};
  for (size_t i = 0; i < DED_ARRAY_LEN(kinds); i++) {
    cw_world *w = cw_new(kinds[i], 0.01, -1, 0);
    memset(cw_lazy, 0xff, sizeof cw_lazy);
    memset(cw_prepared, 0, sizeof cw_prepared);
    for (unsigned m = 0; m < K; m++) {
      w->node[m].env.input = (const uint8_t *)cw_lazy[m];
      w->node[m].env.prepare = cw_prepare;
    }
    cw_start(w);
    cw_run(w, false);
    cw_check(w);
    for (unsigned m = 0; m < K; m++)
      for (unsigned e = 0; e < COUNT; e++) {
        assert_true(cw_prepared[m][e] >= 1);
        assert_true(cw_prepared[m][e] <= 2);
      }
    cw_free(w);
  }
}

/* The round completes while our encoding is still under way (a DECIDE
 * took it over): ded_attempt_decoded_contrib finishes |q| where it
 * stopped, sending nothing more, and it is what the whole encoding gives. */
static void test_attempt_codec_finish_encoding(void **state) {
  (void)state;
  static const ded_codec_kind kinds[] = {DED_CODEC_FP16, DED_CODEC_INT8, DED_CODEC_TOPK};
  for (size_t i = 0; i < DED_ARRAY_LEN(kinds); i++) {
    cw_world *w = cw_new(kinds[i], 0.01, -1, 0);
    ded_attempt *a = &w->node[1].a;
    assert_int_equal(ded_attempt_start(a, &w->node[1].env), 0);
    assert_true(ded_attempt_encoding(a));
    assert_int_equal(ded_attempt_encode(a, &w->node[1].env, 1), 0); /* one chunk */
    assert_true(ded_attempt_encoding(a));
    size_t sent = w->nf;
    assert_int_equal(ded_attempt_decoded_contrib(a, &w->fm.mem, &w->node[1].cache, w->x[1]), 0);
    assert_false(ded_attempt_encoding(a));
    assert_int_equal(w->nf, sent);
    cw_reference(w);
    assert_memory_equal(a->q, w->q[1], sizeof w->q[1]);
    cw_free(w);
  }
}

/* No codec: plain float32 frames (out of the caller's buffer), and the
 * result is the plain mean summed in commit order. */
static void test_attempt_codec_none(void **state) {
  (void)state;
  cw_world *w = cw_new(DED_CODEC_NONE, 0.01, -1, 0);
  assert_int_equal(w->plan.codec, 0);
  cw_start(w);
  cw_run(w, true);
  cw_check(w);
  for (unsigned i = 0; i < COUNT; i++) {
    float mean = w->x[0][i];
    mean += w->x[1][i];
    mean += w->x[2][i];
    mean /= 3.0f;
    assert_memory_equal(&w->res[1][i], &mean, ES);
  }
  for (size_t i = 0; i < w->nf; i++) {
    assert_int_equal(w->f[i].codec, 0);
    assert_int_equal(w->f[i].len, w->cn[cw_chunk_of(w, w->f[i].off)] * ES);
  }
  cw_free(w);
}

/* int8 refuses a block holding +inf: member 0's chunks that touch it go
 * as plain floats (its decoded contribution is its input there), the
 * chunk of the mean holding inf goes plain too, and the round completes
 * with the same bytes everywhere. */
static void test_attempt_codec_int8_inf(void **state) {
  (void)state;
  cw_world *w = cw_new(DED_CODEC_INT8, 0.01, 0, 2400);
  cw_start(w);
  cw_run(w, false);
  cw_check(w);
  unsigned c = cw_chunk_of(w, 2400); /* shard 2's only chunk */
  assert_int_equal(c, 4);
  assert_true(w->raw[0][c]);
  assert_false(w->raw[0][0] || w->raw[1][c] || w->raw[2][c]);
  /* [1800, 2333) shares int8 block [2048, 2560) with it: refused too */
  assert_true(w->raw[0][3]);
  for (unsigned cc = 3; cc <= 4; cc++) {
    assert_memory_equal(&w->node[0].a.q[w->clo[cc]], &w->x[0][w->clo[cc]], w->cn[cc] * ES);
    size_t i = cw_find(w, DED_MSG_DATA, 0, w->cs[cc], w->clo[cc]);
    assert_int_equal(w->f[i].codec, DED_CODEC_NONE);
    assert_int_equal(w->f[i].len, w->cn[cc] * ES);
  }
  assert_int_equal(w->f[cw_find(w, DED_MSG_DATA, 0, 1, 1100)].codec, DED_CODEC_INT8);
  /* The mean: inf at 2400, its chunk plain; the other chunks int8. */
  assert_true(w->rraw[c] && !w->rraw[3]);
  for (unsigned m = 0; m < K; m++) assert_true(isinf(w->res[m][2400]));
  assert_int_equal(w->f[cw_find(w, DED_MSG_RESULT, 2, 0, 2333)].codec, DED_CODEC_NONE);
  assert_int_equal(w->f[cw_find(w, DED_MSG_RESULT, 1, 0, 1800)].codec, DED_CODEC_INT8);
  cw_free(w);
}

/* A payload that does not decode is a protocol violation that leaves no
 * trace: the wrong codec, a truncated or padded one, a bad scale or
 * index, plain floats of the wrong length, a RESULT in another codec than
 * the result's. The genuine frames are taken afterwards, to the same end. */
static void test_attempt_codec_malformed(void **state) {
  (void)state;
  static uint8_t junk[4 * CHUNK], p[4 * CHUNK];
  cw_world *w = cw_new(DED_CODEC_INT8, 0.01, -1, 0);
  cw_start(w);
  /* Member 1's chunk 0 goes to member 0 at once; member 2's waits. */
  for (unsigned from = 1; from < K; from++) {
    const cw_frame *f = &w->f[cw_find(w, DED_MSG_DATA, from, 0, 0)];
    assert_int_equal(f->codec, DED_CODEC_INT8);
    assert_int_equal(f->len, 700 + 4 * 2); /* blocks [0, 512) and [512, 1024) */
    assert_int_equal(cw_take(w, from, 0, DED_MSG_DATA, 0, DED_CODEC_FP16, junk, 2 * 700),
                     DED_ERR_PROTO);
    assert_int_equal(cw_take(w, from, 0, DED_MSG_DATA, 0, DED_CODEC_SPARSE, f->bytes, f->len),
                     DED_ERR_PROTO);
    assert_int_equal(cw_take(w, from, 0, DED_MSG_DATA, 0, DED_CODEC_INT8, f->bytes, f->len - 1),
                     DED_ERR_PROTO);
    memcpy(p, f->bytes, f->len);
    p[f->len] = 0;
    assert_int_equal(cw_take(w, from, 0, DED_MSG_DATA, 0, DED_CODEC_INT8, p, f->len + 1),
                     DED_ERR_PROTO);
    memcpy(p, "\xff\xff\xff\x7f", 4); /* a NaN scale */
    assert_int_equal(cw_take(w, from, 0, DED_MSG_DATA, 0, DED_CODEC_INT8, p, f->len),
                     DED_ERR_PROTO);
    memcpy(p, f->bytes, f->len);
    p[9] = 0x80; /* -128: never encoded */
    assert_int_equal(cw_take(w, from, 0, DED_MSG_DATA, 0, DED_CODEC_INT8, p, f->len),
                     DED_ERR_PROTO);
    assert_int_equal(cw_take(w, from, 0, DED_MSG_DATA, 0, DED_CODEC_NONE, junk, 4 * 700 - 4),
                     DED_ERR_PROTO);
    assert_int_equal(cw_take(w, from, 0, DED_MSG_DATA, 0, DED_CODEC_NONE, junk, 4 * 700 + 4),
                     DED_ERR_PROTO);
  }
  /* RESULTs of shard 1 from its reducer: fp16, or int8 cut short. */
  assert_int_equal(cw_take(w, 1, 0, DED_MSG_RESULT, 1100, DED_CODEC_FP16, junk, 2 * 700),
                   DED_ERR_PROTO);
  assert_int_equal(cw_take(w, 1, 0, DED_MSG_RESULT, 1100, DED_CODEC_INT8, junk, 700 + 4),
                   DED_ERR_PROTO);
  assert_int_equal(cw_take(w, 1, 0, DED_MSG_RESULT, 1100, DED_CODEC_NONE, junk, 4 * 700 - 4),
                   DED_ERR_PROTO);
  assert_int_equal(w->node[0].a.res_got, 0);
  assert_int_equal(w->node[0].a.next_m[0], 1); /* nothing added but our own */
  cw_run(w, false);
  cw_check(w);
  cw_free(w);

  /* Top-k: k = 7 of 700; an index past the chunk, a wrong k, a RESULT in
   * top-k rather than sparse, a sparse RESULT with an index past it. */
  w = cw_new(DED_CODEC_TOPK, 0.01, -1, 0);
  cw_start(w);
  for (unsigned from = 1; from < K; from++) {
    const cw_frame *f = &w->f[cw_find(w, DED_MSG_DATA, from, 0, 0)];
    assert_int_equal(f->codec, DED_CODEC_TOPK);
    assert_int_equal(f->bytes[0], 7);
    memset(p, 0, sizeof p);
    p[0] = 7;        /* k, then gaps 0 0 0 0 0 0 and 700: index 706 */
    p[10] = 0xbc;    /* 700 = 0x2bc as LEB128 */
    p[11] = 0x05;
    assert_int_equal(cw_take(w, from, 0, DED_MSG_DATA, 0, DED_CODEC_TOPK, p, 12 + 28),
                     DED_ERR_PROTO);
    p[10] = 0x01; /* gap 1: index 7, in range, but a byte too many */
    assert_int_equal(cw_take(w, from, 0, DED_MSG_DATA, 0, DED_CODEC_TOPK, p, 12 + 28),
                     DED_ERR_PROTO);
    memset(p, 0, sizeof p);
    p[0] = 8; /* k = 8: not top-k's */
    assert_int_equal(cw_take(w, from, 0, DED_MSG_DATA, 0, DED_CODEC_TOPK, p, 4 + 8 + 32),
                     DED_ERR_PROTO);
    assert_int_equal(cw_take(w, from, 0, DED_MSG_DATA, 0, DED_CODEC_TOPK, f->bytes, f->len - 1),
                     DED_ERR_PROTO);
    assert_int_equal(cw_take(w, from, 0, DED_MSG_DATA, 0, DED_CODEC_INT8, junk, 700 + 8),
                     DED_ERR_PROTO);
    if (from == 1) { /* a top-k payload for a 700-element chunk of shard 1 */
      assert_int_equal(cw_take(w, 1, 0, DED_MSG_RESULT, 1100, DED_CODEC_TOPK, f->bytes, f->len),
                       DED_ERR_PROTO);
      memset(p, 0, sizeof p);
      p[0] = 1;
      p[4] = 0xbc; /* one element, at 700 */
      p[5] = 0x05;
      assert_int_equal(cw_take(w, 1, 0, DED_MSG_RESULT, 1100, DED_CODEC_SPARSE, p, 6 + 4),
                       DED_ERR_PROTO);
    }
  }
  assert_int_equal(w->node[0].a.res_got, 0);
  cw_run(w, true);
  cw_check(w);
  cw_free(w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_attempt_codec_round),
      cmocka_unit_test(test_attempt_codec_none),
      cmocka_unit_test(test_attempt_codec_decoded_again),
      cmocka_unit_test(test_attempt_codec_prepared_lazily),
      cmocka_unit_test(test_attempt_codec_finish_encoding),
      cmocka_unit_test(test_attempt_codec_int8_inf),
      cmocka_unit_test(test_attempt_codec_malformed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
