#include "ded_attempt.h"

#include <string.h>

#include "../core/ded_assert.h"
#include "../core/ded_bits.h"
#include "../core/ded_err.h"
#include "../core/ded_types.h"
#include "ded_partition.h"
#include "ded_reduce.h"

void ded_attempt_clear(ded_attempt *a, const ded_mem *mem, ded_bufcache *cache, size_t es) {
  ded_mem_free(mem, a->next_m);
  ded_mem_free(mem, a->recv_bits);
  if (a->staging)
    for (unsigned i = 0; i < a->plan.k; i++) ded_bufcache_put(cache, a->staging[i], a->my_len * es);
  ded_mem_free(mem, a->staging);
  ded_mem_free(mem, a->res_base);
  ded_mem_free(mem, a->res_bits);
  ded_digest_free(&a->dig, mem);
  ded_mem_free(mem, a->holders);
  ded_mem_free(mem, a->fetch_sent);
  if (a->q) ded_bufcache_put(cache, a->q, (size_t)a->plan.count * sizeof *a->q);
  ded_mem_free(mem, a->enc_off);
  ded_mem_free(mem, a->enc_len);
  ded_mem_free(mem, a->enc_raw);
  ded_mem_free(mem, a->scratch);
  ded_mem_free(mem, a->escratch);
  ded_attempt_drop_fetchers(a, mem);
  ded_msg_commit_free(&a->plan, mem);
  memset(a, 0, sizeof *a);
}

int ded_attempt_layout(ded_attempt *a, const ded_mem *mem, const ded_msg_commit *plan,
                       const uint8_t self[DED_ID_BYTES]) {
  int rv = ded_msg_commit_copy(&a->plan, plan, mem);
  if (rv) return rv;
  unsigned k = plan->k;
  a->me = k;
  for (unsigned i = 0; i < k; i++)
    if (memcmp(plan->members[i].id, self, DED_ID_BYTES) == 0) a->me = i;
  a->total_w = 0.0;
  a->ncontrib = 0;
  a->first_contrib = k;
  for (unsigned i = 0; i < k; i++) {
    a->total_w += plan->members[i].weight;
    if (plan->members[i].flags & DED_MEMBER_F_AUX) continue;
    if (a->ncontrib++ == 0) a->first_contrib = i;
  }
  a->chunk = plan->chunk_elems;
  if (ded_codec_from_wire(plan->codec, plan->codec_ppm, &a->codec) != 0)
    a->codec = (ded_codec){DED_CODEC_NONE, DED_CODEC_TOPK_DEFAULT}; /* checked when decoded */
  a->rcodec = ded_codec_result(&a->codec);
  a->res_base = ded_mem_calloc(mem, k + 1, sizeof *a->res_base);
  if (!a->res_base) return DED_ERR_NOMEM;
  for (unsigned m = 0; m < k; m++)
    a->res_base[m + 1] = a->res_base[m] + ded_chunks(ded_attempt_shard_len(a, m), a->chunk);
  a->res_bits = ded_mem_calloc(mem, (a->res_base[k] + 7) / 8, 1);
  if (!a->res_bits) return DED_ERR_NOMEM;
  return ded_digest_init(&a->dig, mem, plan->count * ded_dtype_size(plan->dtype));
}

uint64_t ded_attempt_shard_lo(const ded_attempt *a, unsigned s) { return a->plan.members[s].shard_off; }

uint64_t ded_attempt_shard_len(const ded_attempt *a, unsigned s) {
  uint64_t hi = s + 1 < a->plan.k ? a->plan.members[s + 1].shard_off : a->plan.count;
  return hi - a->plan.members[s].shard_off;
}

bool ded_attempt_shard_done(const ded_attempt *a, unsigned s) {
  for (uint64_t b = a->res_base[s]; b < a->res_base[s + 1]; b++)
    if (!ded_bit_get(a->res_bits, b)) return false;
  return true;
}

bool ded_attempt_whole(const ded_attempt *a) {
  return a->res_bits && a->res_got == a->res_base[a->plan.k];
}

void ded_attempt_digest(const ded_attempt *a, uint8_t out[DED_DIGEST_BYTES]) {
  ded_digest_final(&a->dig, out);
}

uint8_t *ded_attempt_have_bits(const ded_attempt *a, const ded_mem *mem) {
  uint8_t *have = ded_mem_calloc(mem, ((size_t)a->plan.k + 7) / 8, 1);
  for (unsigned s = 0; have && s < a->plan.k; s++)
    if (ded_attempt_shard_done(a, s)) ded_bit_set(have, s);
  return have;
}

/* Whether our chunk |j| of shard |m| is encoded (in |q|, and in |enc|
 * for another member's shard): every chunk is once the encoding is over;
 * while it runs, those before its cursor (chunk |enc_pass| of each shard
 * in member order, then the next pass). */
static bool enc_done(const ded_attempt *a, unsigned m, uint64_t j) {
  return !a->enc_pending || j < a->enc_pass || (j == a->enc_pass && m < a->enc_m);
}

/* Sets up the encoding of our contribution: |q| (from |cache|, back to it
 * when cleared), the per-chunk bookkeeping and, when |env| gives round
 * memory, room for every chunk of the other shards at the codec's bound
 * (each chunk has its slot: they are encoded in passes, not in order).
 * Nothing is encoded yet. */
static int enc_setup(ded_attempt *a, const ded_attempt_env *env, const ded_mem *mem,
                     ded_bufcache *cache) {
  uint64_t nch = a->res_base[a->plan.k], count = a->plan.count;
  a->q = ded_bufcache_get(cache, (size_t)count * sizeof *a->q);
  a->enc_off = ded_mem_calloc(mem, (size_t)nch + 1, sizeof *a->enc_off);
  a->enc_len = ded_mem_calloc(mem, (size_t)nch + 1, sizeof *a->enc_len);
  a->enc_raw = ded_mem_calloc(mem, ((size_t)nch + 7) / 8 + 1, 1);
  if (!a->escratch) a->escratch = ded_mem_malloc(mem, ded_codec_bound(&a->codec, a->chunk));
  if (!a->q || !a->enc_off || !a->enc_len || !a->enc_raw || !a->escratch) return DED_ERR_NOMEM;
  size_t at = 0;
  a->enc_passes = 0;
  for (unsigned m = 0; m < a->plan.k; m++) {
    uint64_t len = ded_attempt_shard_len(a, m);
    a->enc_passes = DED_MAX(a->enc_passes, a->res_base[m + 1] - a->res_base[m]);
    for (uint64_t e = 0, c = a->res_base[m]; e < len; e += a->chunk, c++) {
      a->enc_off[c] = at;
      if (env && m != a->me) at += ded_codec_bound(&a->codec, (size_t)DED_MIN(a->chunk, len - e));
    }
  }
  a->enc_off[nch] = at;
  if (env) a->enc = env->wire(env->ctx, at + 1);
  if (env && !a->enc) return DED_ERR_NOMEM;
  a->enc_pass = 0;
  a->enc_m = 0;
  a->enc_pending = a->enc_passes > 0;
  return 0;
}

/* Encodes chunk |j| of shard |m| of our contribution |x| into its slot
 * (our own shard's: scratch only) and decodes it again into |q|. A chunk
 * the codec refuses (a non-finite value) goes as plain floats: |q| is
 * then the input itself. 0 or DED_ERR_NOMEM. */
static int enc_chunk(ded_attempt *a, const ded_mem *mem, const float *x, unsigned m, uint64_t j) {
  uint64_t lo = ded_attempt_shard_lo(a, m), e = j * a->chunk, c = a->res_base[m] + j;
  size_t n = (size_t)DED_MIN(a->chunk, ded_attempt_shard_len(a, m) - e), got = 0;
  size_t count = (size_t)a->plan.count;
  uint8_t *out = m == a->me || !a->enc ? a->escratch : a->enc + a->enc_off[c];
  int rv = ded_codec_encode(&a->codec, x, count, (size_t)(lo + e), n, out,
                            ded_codec_bound(&a->codec, n), &got, mem);
  if (rv == DED_ERR_NOMEM) return rv;
  if (rv == 0) rv = ded_codec_decode(&a->codec, out, got, count, (size_t)(lo + e), n, a->q + lo + e);
  if (rv) { /* refused: plain */
    ded_bit_set(a->enc_raw, c);
    memcpy(a->q + lo + e, x + lo + e, n * sizeof *x);
    got = 0;
  }
  a->enc_len[c] = got;
  return 0;
}

/* Readies the input chunk |j| of shard |m| encodes: the elements of the
 * int8 blocks it touches (whole blocks decide a scale), for any codec. */
static void enc_prepare(ded_attempt *a, const ded_attempt_env *env, unsigned m, uint64_t j) {
  uint64_t lo = ded_attempt_shard_lo(a, m) + j * a->chunk;
  uint64_t hi = lo + DED_MIN(a->chunk, ded_attempt_shard_len(a, m) - j * a->chunk);
  lo -= lo % DED_CODEC_INT8_BLOCK;
  hi = DED_MIN(a->plan.count, (hi + DED_CODEC_INT8_BLOCK - 1) / DED_CODEC_INT8_BLOCK *
                                  (uint64_t)DED_CODEC_INT8_BLOCK);
  env->prepare(env->ctx, lo, hi - lo);
}

/* Sends our chunk |j| of member |m|'s shard (encoded already). */
static int send_contrib_chunk(ded_attempt *a, const ded_attempt_env *env, unsigned m, uint64_t j) {
  uint64_t lo = ded_attempt_shard_lo(a, m), e = j * a->chunk, c = a->res_base[m] + j;
  uint64_t n = DED_MIN(a->chunk, ded_attempt_shard_len(a, m) - e);
  const uint8_t *id = a->plan.members[m].id;
  if (a->codec.kind == DED_CODEC_NONE)
    return env->send(env->ctx, id, DED_MSG_DATA, lo + e, DED_CODEC_NONE,
                     env->input + (lo + e) * env->es, n * env->es, env->input_user);
  if (ded_bit_get(a->enc_raw, c))
    return env->send(env->ctx, id, DED_MSG_DATA, lo + e, DED_CODEC_NONE,
                     (const uint8_t *)(a->q + lo + e), n * sizeof(float), false);
  return env->send(env->ctx, id, DED_MSG_DATA, lo + e, (uint8_t)a->codec.kind, a->enc + a->enc_off[c],
                   a->enc_len[c], false);
}

static int advance_chunk(ded_attempt *a, const ded_attempt_env *env, uint64_t c,
                         const uint8_t *direct, unsigned direct_m);

int ded_attempt_start(ded_attempt *a, const ded_attempt_env *env) {
  unsigned k = a->plan.k;
  a->my_off = ded_attempt_shard_lo(a, a->me);
  a->my_len = ded_attempt_shard_len(a, a->me);
  a->my_nchunks = ded_chunks(a->my_len, a->chunk);
  a->next_m = ded_mem_calloc(env->mem, a->my_nchunks ? a->my_nchunks : 1, sizeof *a->next_m);
  a->recv_bits = ded_mem_calloc(env->mem, ((uint64_t)k * a->my_nchunks + 7) / 8 + 1, 1);
  a->staging = ded_mem_calloc(env->mem, k, sizeof *a->staging);
  if (!a->next_m || !a->recv_bits || !a->staging) return DED_ERR_NOMEM;
  if (a->codec.kind == DED_CODEC_NONE) return 0;
  size_t cb = DED_MAX(ded_codec_bound(&a->codec, a->chunk), ded_codec_bound(&a->rcodec, a->chunk));
  a->scratch = ded_mem_malloc(env->mem, a->chunk * sizeof *a->scratch);
  a->escratch = ded_mem_malloc(env->mem, cb);
  if (!a->scratch || !a->escratch) return DED_ERR_NOMEM;
  if (a->plan.members[a->me].flags & DED_MEMBER_F_AUX) return 0;
  return enc_setup(a, env, env->mem, env->cache);
}

bool ded_attempt_encoding(const ded_attempt *a) { return a->enc_pending; }

int ded_attempt_encode(ded_attempt *a, const ded_attempt_env *env, uint64_t budget) {
  const float *x = (const float *)(const void *)env->input;
  uint64_t done = 0;
  while (a->enc_pending && done < budget) {
    unsigned m = a->enc_m;
    uint64_t j = a->enc_pass;
    bool here = j < a->res_base[m + 1] - a->res_base[m];
    if (here) {
      if (env->prepare) enc_prepare(a, env, m, j);
      int rv = enc_chunk(a, env->mem, x, m, j);
      if (rv) return rv;
      done += DED_MIN(a->chunk, ded_attempt_shard_len(a, m) - j * a->chunk);
    }
    if (++a->enc_m == a->plan.k) {
      a->enc_m = 0;
      if (++a->enc_pass >= a->enc_passes) a->enc_pending = false;
    }
    if (!here) continue;
    /* Sent as soon as it is ready; ours joins the reduction. */
    int rv = m == a->me ? advance_chunk(a, env, j, NULL, 0) : send_contrib_chunk(a, env, m, j);
    if (rv) return rv;
  }
  return 0;
}

int ded_attempt_decoded_contrib(ded_attempt *a, const ded_mem *mem, ded_bufcache *cache,
                                const float *x) {
  if ((a->q && !a->enc_pending) || a->codec.kind == DED_CODEC_NONE || a->me >= a->plan.k ||
      a->plan.members[a->me].flags & DED_MEMBER_F_AUX)
    return 0;
  if (!a->q) {
    int rv = enc_setup(a, NULL, mem, cache);
    if (rv) return rv;
  }
  /* The rest of |q| only: what was not encoded was not sent either. */
  for (; a->enc_pending; a->enc_m = 0, a->enc_pending = ++a->enc_pass < a->enc_passes)
    for (; a->enc_m < a->plan.k; a->enc_m++) {
      if (a->enc_pass >= a->res_base[a->enc_m + 1] - a->res_base[a->enc_m]) continue;
      int rv = enc_chunk(a, mem, x, a->enc_m, a->enc_pass);
      if (rv) return rv;
    }
  return 0;
}

int ded_attempt_send_contrib(ded_attempt *a, const ded_attempt_env *env, unsigned m) {
  uint64_t nch = a->res_base[m + 1] - a->res_base[m];
  for (uint64_t j = 0; j < nch && enc_done(a, m, j); j++) {
    int rv = send_contrib_chunk(a, env, m, j);
    if (rv) return rv;
  }
  return 0;
}

/* Sends chunk |c| of our own shard (finished) to peer |id|: |enc| (|elen|
 * bytes in the result codec), or the plain elements when |enc| is NULL. */
static int send_result_chunk(ded_attempt *a, const ded_attempt_env *env,
                             const uint8_t id[DED_ID_BYTES], uint64_t c, const uint8_t *enc,
                             size_t elen) {
  uint64_t first = c * a->chunk;
  uint64_t n = DED_MIN(a->chunk, a->my_len - first);
  if (enc)
    return env->send(env->ctx, id, DED_MSG_RESULT, a->my_off + first, (uint8_t)a->rcodec.kind, enc,
                     elen, false);
  return env->send(env->ctx, id, DED_MSG_RESULT, a->my_off + first, DED_CODEC_NONE,
                   env->res + (a->my_off + first) * env->es, n * env->es, false);
}

/* The finished chunk of |n| floats at |v| in the result codec, once, in
 * round memory, and |v| decoded from those bytes (what every member will
 * hold). NULL with |*elen| 0: it goes plain (NONE, or refused); NULL with
 * |*elen| 1: out of memory. */
static uint8_t *encode_result(ded_attempt *a, const ded_attempt_env *env, float *v, size_t n,
                              size_t *elen) {
  *elen = 0;
  if (a->rcodec.kind == DED_CODEC_NONE) return NULL;
  size_t cap = ded_codec_bound(&a->rcodec, n), got = 0;
  if (ded_codec_encode(&a->rcodec, v, n, 0, n, a->escratch, cap, &got, env->mem) != 0) return NULL;
  uint8_t *enc = env->wire(env->ctx, got + 1);
  if (!enc) {
    *elen = 1;
    return NULL;
  }
  memcpy(enc, a->escratch, got);
  if (ded_codec_decode(&a->rcodec, enc, got, n, 0, n, v) != 0) { /* cannot be: our own bytes */
    *elen = 1;
    return NULL;
  }
  *elen = got;
  return enc;
}

/* All contributions to chunk |c| are in: finish it and send it out. */
static int finish_chunk(ded_attempt *a, const ded_attempt_env *env, uint64_t c) {
  uint64_t first = c * a->chunk;
  uint64_t n = DED_MIN(a->chunk, a->my_len - first);
  ded_reduce_div(env->dtype, env->res + (a->my_off + first) * env->es, n, a->total_w);
  size_t elen;
  const uint8_t *enc =
      encode_result(a, env, (float *)(void *)(env->res + (a->my_off + first) * env->es), n, &elen);
  if (!enc && elen) return DED_ERR_NOMEM;
  ded_bit_set(a->res_bits, a->res_base[a->me] + c);
  a->res_got++;
  ded_digest_got(&a->dig, env->res, (a->my_off + first) * env->es, n * env->es);
  if (++a->reduced == a->my_nchunks) a->reduced_ns = env->now_ns;
  for (unsigned m = 0; m < a->plan.k; m++) {
    if (m == a->me) continue;
    /* A member that is gone cannot use the result; our round goes on. */
    int rv = send_result_chunk(a, env, a->plan.members[m].id, c, enc, elen);
    if (rv) return rv;
  }
  for (ded_attempt_fetcher *f = a->fetchers; f; f = f->next) {
    int rv = send_result_chunk(a, env, f->id, c, enc, elen);
    if (rv) return rv;
  }
  return 0;
}

/* Adds, in commit order, every contribution to chunk |c| that is ready.
 * |direct| is member |direct_m|'s data for |c| straight off the wire
 * (decoded already, with a codec). */
static int advance_chunk(ded_attempt *a, const ded_attempt_env *env, uint64_t c,
                         const uint8_t *direct, unsigned direct_m) {
  uint64_t first = c * a->chunk;
  uint64_t n = DED_MIN(a->chunk, a->my_len - first);
  uint8_t *acc = env->res + (a->my_off + first) * env->es;
  unsigned k = a->plan.k;
  while (a->next_m[c] < k) {
    unsigned m = a->next_m[c];
    const uint8_t *src;
    if (a->plan.members[m].flags & DED_MEMBER_F_AUX) { /* brings no vector */
      a->next_m[c]++;
      continue;
    }
    if (m == a->me && !enc_done(a, m, c))
      break; /* ours is not encoded yet (ded_attempt_encode) */
    else if (m == a->me)
      src = a->q ? (const uint8_t *)(a->q + a->my_off + first)
                 : env->input + (a->my_off + first) * env->es;
    else if (direct && m == direct_m)
      src = direct;
    else if (ded_bit_get(a->recv_bits, (uint64_t)m * a->my_nchunks + c))
      src = a->staging[m] + first * env->es;
    else
      break;
    double w = a->plan.members[m].weight / (double)a->plan.members[m].n_local;
    ded_reduce_axpy(env->dtype, acc, src, n, w, m == a->first_contrib);
    a->next_m[c]++;
  }
  return a->next_m[c] == k ? finish_chunk(a, env, c) : 0;
}

int ded_attempt_reduce_own(ded_attempt *a, const ded_attempt_env *env) {
  for (uint64_t c = 0; c < a->my_nchunks; c++) {
    int rv = advance_chunk(a, env, c, NULL, 0);
    if (rv) return rv;
  }
  return 0;
}

/* Whether frame |d| of |n| elements may be read: plain elements of the
 * right length, or the codec |kind| the frame must use. */
static bool frame_fits(const ded_attempt_env *env, const ded_msg_data *d, ded_codec_kind kind,
                       uint64_t n) {
  if (d->codec == DED_CODEC_NONE) return d->len == n * env->es;
  return d->codec == kind;
}

/* Decodes frame |d| (|n| elements, the range at |first| of a vector of
 * |total|, in |c| unless plain) into |out|. DED_ERR_PROTO if malformed. */
static int frame_decode(const ded_attempt_env *env, const ded_msg_data *d, uint64_t n,
                        size_t first, size_t total, const ded_codec *c, uint8_t *out) {
  if (d->codec == DED_CODEC_NONE) {
    memcpy(out, d->elems, (size_t)n * env->es);
    return 0;
  }
  return ded_codec_decode(c, d->elems, d->len, total, first, (size_t)n, (float *)(void *)out);
}

int ded_attempt_take(ded_attempt *a, const ded_attempt_env *env, const uint8_t from[DED_ID_BYTES],
                     uint8_t type, const ded_msg_data *d, bool running, bool fetching) {
  unsigned k = a->plan.k, m = k;
  for (unsigned i = 0; i < k; i++)
    if (memcmp(a->plan.members[i].id, from, DED_ID_BYTES) == 0) m = i;
  if (type == DED_MSG_DATA) {
    if (m == k || m == a->me || a->me == k || !running) return DED_ERR_PROTO;
    if (d->offset < a->my_off || d->offset - a->my_off >= a->my_len) return DED_ERR_PROTO;
    uint64_t first = d->offset - a->my_off;
    uint64_t c = first / a->chunk;
    uint64_t n = DED_MIN(a->chunk, a->my_len - first);
    if (first % a->chunk != 0 || !frame_fits(env, d, a->codec.kind, n)) return DED_ERR_PROTO;
    if (a->plan.members[m].flags & DED_MEMBER_F_AUX) return DED_ERR_PROTO; /* it brings none */
    uint64_t bit = (uint64_t)m * a->my_nchunks + c;
    if (ded_bit_get(a->recv_bits, bit)) return DED_ERR_PROTO; /* duplicate */
    bool direct = a->next_m[c] == m;
    uint8_t *to;
    if (direct) {
      to = a->scratch ? (uint8_t *)a->scratch : NULL;
    } else {
      if (!a->staging[m]) {
        a->staging[m] = ded_bufcache_get(env->cache, a->my_len * env->es);
        if (!a->staging[m]) return DED_ERR_NOMEM;
      }
      to = a->staging[m] + first * env->es;
    }
    const uint8_t *src = d->elems;
    if (d->codec != DED_CODEC_NONE || !direct) {
      int rv = frame_decode(env, d, n, (size_t)d->offset, (size_t)a->plan.count, &a->codec, to);
      if (rv) return rv;
      src = to;
    }
    ded_bit_set(a->recv_bits, bit);
    return direct ? advance_chunk(a, env, c, src, m) : 0;
  }
  /* RESULT: a finished chunk of some shard. From its reducer while the
   * attempt runs; from the holder we asked while fetching. Fetching again
   * (refetch), only the holder's count: another member's may be an answer
   * sent before we asked elsewhere, or the very bytes we fetch again
   * because they differ; it is ignored. */
  unsigned s;
  for (s = 0; s + 1 < k && a->plan.members[s + 1].shard_off <= d->offset; s++) {
  }
  uint64_t lo = ded_attempt_shard_lo(a, s), len = ded_attempt_shard_len(a, s);
  if (d->offset < lo || d->offset - lo >= len) return DED_ERR_PROTO;
  uint64_t first = d->offset - lo;
  uint64_t n = DED_MIN(a->chunk, len - first);
  if (first % a->chunk != 0 || !frame_fits(env, d, a->rcodec.kind, n)) return DED_ERR_PROTO;
  if (m == k || m == a->me) return DED_ERR_PROTO;
  if (a->refetch) {
    if (m != a->holders[s]) return 0;
  } else if (m != s && !(a->holders && m == a->holders[s])) {
    return DED_ERR_PROTO;
  }
  uint64_t bit = a->res_base[s] + first / a->chunk;
  if (ded_bit_get(a->res_bits, bit)) return fetching ? 0 : DED_ERR_PROTO;
  /* A result chunk is the chunk as a whole vector (ded_codec_result). */
  int rv = frame_decode(env, d, n, 0, (size_t)n, &a->rcodec, env->res + d->offset * env->es);
  if (rv) return rv;
  ded_bit_set(a->res_bits, bit);
  a->res_got++;
  ded_digest_got(&a->dig, env->res, d->offset * env->es, n * env->es);
  return 0;
}

bool ded_attempt_needs(const ded_attempt *a, unsigned m, bool fetching) {
  if (fetching) {
    for (unsigned s = 0; s < a->plan.k; s++)
      if (a->holders[s] == m && !ded_attempt_shard_done(a, s)) return true;
    return false;
  }
  if (a->me < a->plan.k && !(a->plan.members[m].flags & DED_MEMBER_F_AUX)) /* it brings none */
    for (uint64_t c = 0; c < a->my_nchunks; c++)
      if (!ded_bit_get(a->recv_bits, (uint64_t)m * a->my_nchunks + c)) return true;
  return !ded_attempt_shard_done(a, m);
}

void ded_attempt_serve(ded_attempt *a, const ded_attempt_env *env, unsigned s,
                       const uint8_t to[DED_ID_BYTES], bool pending) {
  uint64_t lo = ded_attempt_shard_lo(a, s), len = ded_attempt_shard_len(a, s);
  for (uint64_t c = 0; lo + c * a->chunk < lo + len; c++) {
    if (!ded_bit_get(a->res_bits, a->res_base[s] + c)) continue;
    uint64_t n = DED_MIN(a->chunk, len - c * a->chunk);
    if (env->send(env->ctx, to, DED_MSG_RESULT, lo + c * a->chunk, DED_CODEC_NONE,
                  env->res + (lo + c * a->chunk) * env->es, n * env->es, false))
      return;
  }
  if (!ded_attempt_shard_done(a, s) && s == a->me && pending) {
    ded_attempt_fetcher *f = ded_mem_calloc(env->mem, 1, sizeof *f);
    if (!f) return;
    memcpy(f->id, to, DED_ID_BYTES);
    f->next = a->fetchers;
    a->fetchers = f;
  }
}

void ded_attempt_refetch(ded_attempt *a, const ded_mem *mem, bool own_too) {
  bool own = a->me < a->plan.k && !own_too;
  memset(a->res_bits, 0, (a->res_base[a->plan.k] + 7) / 8);
  a->res_got = 0;
  if (own)
    for (uint64_t b = a->res_base[a->me]; b < a->res_base[a->me + 1]; b++, a->res_got++)
      ded_bit_set(a->res_bits, b);
  size_t es = ded_dtype_size(a->plan.dtype);
  uint64_t keep_lo = own ? ded_attempt_shard_lo(a, a->me) * es : 0;
  ded_digest_reset(&a->dig, keep_lo, own ? ded_attempt_shard_len(a, a->me) * es : 0);
  ded_mem_free(mem, a->fetch_sent);
  a->fetch_sent = NULL;
  a->refetch = true;
}

void ded_attempt_drop_fetchers(ded_attempt *a, const ded_mem *mem) {
  ded_attempt_fetcher *f = a->fetchers;
  while (f) {
    ded_attempt_fetcher *next = f->next;
    ded_mem_free(mem, f);
    f = next;
  }
  a->fetchers = NULL;
}
