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

int ded_attempt_start(ded_attempt *a, const ded_attempt_env *env) {
  unsigned k = a->plan.k;
  a->my_off = ded_attempt_shard_lo(a, a->me);
  a->my_len = ded_attempt_shard_len(a, a->me);
  a->my_nchunks = ded_chunks(a->my_len, a->chunk);
  a->next_m = ded_mem_calloc(env->mem, a->my_nchunks ? a->my_nchunks : 1, sizeof *a->next_m);
  a->recv_bits = ded_mem_calloc(env->mem, ((uint64_t)k * a->my_nchunks + 7) / 8 + 1, 1);
  a->staging = ded_mem_calloc(env->mem, k, sizeof *a->staging);
  return a->next_m && a->recv_bits && a->staging ? 0 : DED_ERR_NOMEM;
}

int ded_attempt_send_contrib(ded_attempt *a, const ded_attempt_env *env, unsigned m) {
  uint64_t lo = ded_attempt_shard_lo(a, m), len = ded_attempt_shard_len(a, m);
  for (uint64_t e = 0; e < len; e += a->chunk) {
    uint64_t n = DED_MIN(a->chunk, len - e);
    int rv = env->send(env->ctx, a->plan.members[m].id, DED_MSG_DATA, lo + e,
                       env->input + (lo + e) * env->es, n * env->es, true);
    if (rv) return rv;
  }
  return 0;
}

/* Sends chunk |c| of our own shard (finished) to peer |id|. */
static int send_result_chunk(ded_attempt *a, const ded_attempt_env *env,
                             const uint8_t id[DED_ID_BYTES], uint64_t c) {
  uint64_t first = c * a->chunk;
  uint64_t n = DED_MIN(a->chunk, a->my_len - first);
  return env->send(env->ctx, id, DED_MSG_RESULT, a->my_off + first,
                   env->res + (a->my_off + first) * env->es, n * env->es, false);
}

/* All contributions to chunk |c| are in: finish it and send it out. */
static int finish_chunk(ded_attempt *a, const ded_attempt_env *env, uint64_t c) {
  uint64_t first = c * a->chunk;
  uint64_t n = DED_MIN(a->chunk, a->my_len - first);
  ded_reduce_div(env->dtype, env->res + (a->my_off + first) * env->es, n, a->total_w);
  ded_bit_set(a->res_bits, a->res_base[a->me] + c);
  a->res_got++;
  ded_digest_got(&a->dig, env->res, (a->my_off + first) * env->es, n * env->es);
  if (++a->reduced == a->my_nchunks) a->reduced_ns = env->now_ns;
  for (unsigned m = 0; m < a->plan.k; m++) {
    if (m == a->me) continue;
    /* A member that is gone cannot use the result; our round goes on. */
    int rv = send_result_chunk(a, env, a->plan.members[m].id, c);
    if (rv) return rv;
  }
  for (ded_attempt_fetcher *f = a->fetchers; f; f = f->next) {
    int rv = send_result_chunk(a, env, f->id, c);
    if (rv) return rv;
  }
  return 0;
}

/* Adds, in commit order, every contribution to chunk |c| that is ready.
 * |direct| is member |direct_m|'s data for |c| straight off the wire. */
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
    if (m == a->me)
      src = env->input + (a->my_off + first) * env->es;
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

int ded_attempt_take(ded_attempt *a, const ded_attempt_env *env, const uint8_t from[DED_ID_BYTES],
                     uint8_t type, const ded_msg_data *d, bool running, bool fetching) {
  unsigned k = a->plan.k, m = k;
  for (unsigned i = 0; i < k; i++)
    if (memcmp(a->plan.members[i].id, from, DED_ID_BYTES) == 0) m = i;
  if (d->len % env->es != 0) return DED_ERR_PROTO;
  uint64_t n = d->len / env->es;
  if (type == DED_MSG_DATA) {
    if (m == k || m == a->me || a->me == k || !running) return DED_ERR_PROTO;
    if (d->offset < a->my_off || d->offset - a->my_off >= a->my_len) return DED_ERR_PROTO;
    uint64_t first = d->offset - a->my_off;
    uint64_t c = first / a->chunk;
    if (first % a->chunk != 0 || n != DED_MIN(a->chunk, a->my_len - first)) return DED_ERR_PROTO;
    uint64_t bit = (uint64_t)m * a->my_nchunks + c;
    if (ded_bit_get(a->recv_bits, bit)) return DED_ERR_PROTO; /* duplicate */
    ded_bit_set(a->recv_bits, bit);
    if (a->next_m[c] == m) return advance_chunk(a, env, c, d->elems, m);
    if (!a->staging[m]) {
      a->staging[m] = ded_bufcache_get(env->cache, a->my_len * env->es);
      if (!a->staging[m]) return DED_ERR_NOMEM;
    }
    memcpy(a->staging[m] + first * env->es, d->elems, d->len);
    return 0;
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
  if (first % a->chunk != 0 || n != DED_MIN(a->chunk, len - first)) return DED_ERR_PROTO;
  if (m == k || m == a->me) return DED_ERR_PROTO;
  if (a->refetch) {
    if (m != a->holders[s]) return 0;
  } else if (m != s && !(a->holders && m == a->holders[s])) {
    return DED_ERR_PROTO;
  }
  uint64_t bit = a->res_base[s] + first / a->chunk;
  if (ded_bit_get(a->res_bits, bit)) return fetching ? 0 : DED_ERR_PROTO;
  ded_bit_set(a->res_bits, bit);
  memcpy(env->res + d->offset * env->es, d->elems, d->len);
  a->res_got++;
  ded_digest_got(&a->dig, env->res, d->offset * env->es, d->len);
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
    if (env->send(env->ctx, to, DED_MSG_RESULT, lo + c * a->chunk,
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
