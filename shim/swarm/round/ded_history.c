#include "ded_history.h"

#include <string.h>

#include "../core/ded_limits.h"

void *ded_bufcache_get(ded_bufcache *c, size_t len) {
  for (unsigned i = 0; i < c->n; i++)
    if (c->v[i].len == len) {
      void *p = c->v[i].p;
      memmove(&c->v[i], &c->v[i + 1], (c->n - i - 1) * sizeof c->v[0]); /* the oldest stays first */
      c->n--;
      return p;
    }
  return ded_mem_malloc(c->mem, len);
}

void ded_bufcache_put(ded_bufcache *c, void *p, size_t len) {
  if (!p) return;
  if (c->n == DED_BUF_CACHE) { /* evict the oldest */
    ded_mem_free(c->mem, c->v[0].p);
    memmove(&c->v[0], &c->v[1], (DED_BUF_CACHE - 1) * sizeof c->v[0]);
    c->n--;
  }
  c->v[c->n].p = p;
  c->v[c->n].len = len;
  c->n++;
}

void ded_bufcache_free(ded_bufcache *c) {
  for (unsigned i = 0; i < c->n; i++) ded_mem_free(c->mem, c->v[i].p);
  c->n = 0;
}

void ded_history_init(ded_history *h, const ded_mem *mem, ded_bufcache *cache, uint64_t cap) {
  memset(h, 0, sizeof *h);
  h->mem = mem;
  h->cache = cache;
  h->cap = cap;
}

ded_hist_entry *ded_history_find(ded_history *h, uint64_t round) {
  for (size_t i = 0; i < h->n; i++)
    if (h->v[i].round == round) return &h->v[i];
  return NULL;
}

static void hist_drop_oldest(ded_history *h) {
  ded_hist_entry *e = &h->v[0];
  h->bytes -= e->bytes;
  ded_msg_commit_free(&e->plan, h->mem);
  ded_bufcache_put(h->cache, e->res, e->bytes);
  memmove(h->v, h->v + 1, (h->n - 1) * sizeof *h->v);
  h->n--;
}

void ded_history_add(ded_history *h, uint64_t round, ded_msg_commit *plan, uint8_t **res,
                     size_t bytes, const uint8_t digest[DED_RESULT_DIGEST_BYTES]) {
  if (bytes > h->cap || ded_history_find(h, round)) return;
  while (h->n > 0 && (h->bytes + bytes > h->cap || h->n >= DED_ROUNDS_AHEAD_MAX))
    hist_drop_oldest(h);
  if (h->n == h->vcap) {
    size_t ncap = h->vcap ? h->vcap * 2 : 16;
    ded_hist_entry *v = ded_mem_realloc(h->mem, h->v, ncap * sizeof *v);
    if (!v) return;
    h->v = v;
    h->vcap = ncap;
  }
  ded_hist_entry *e = &h->v[h->n++];
  e->round = round;
  e->plan = *plan;
  plan->members = NULL;
  e->res = *res;
  *res = NULL;
  e->bytes = bytes;
  memcpy(e->digest, digest, DED_RESULT_DIGEST_BYTES);
  h->bytes += bytes;
}

void ded_history_free(ded_history *h) {
  while (h->n) hist_drop_oldest(h);
  ded_mem_free(h->mem, h->v);
  h->v = NULL;
  h->vcap = 0;
}
