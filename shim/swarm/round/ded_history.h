/*
 * ded_history.h: results of finished rounds, and round buffers for reuse.
 *
 * Owns: the results this peer completed rounds with (plan and bytes),
 * kept to serve members that come late (FETCH, a DECIDE naming us), and
 * the round buffers freed lately (accumulators, staging), kept for reuse:
 * a trainer repeats the same bucket sizes every step, and a fresh
 * multi-megabyte allocation costs a page fault and a zeroed page per 4 KiB.
 *
 * Invariants: the history holds each round at most once, oldest first,
 * at most DED_ROUNDS_AHEAD_MAX of them and at most |cap| bytes of results
 * (a result larger than that is not kept); the cache holds at most
 * DED_BUF_CACHE buffers, each of exactly the length it was put with, and
 * gives one back only for that exact length; the history's dropped
 * results go to the cache.
 */
#ifndef DED_HISTORY_H
#define DED_HISTORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/ded_mem.h"
#include "../core/ded_msg.h"

#define DED_BUF_CACHE 16

typedef struct ded_bufcache {
  const ded_mem *mem;
  struct {
    void *p;
    size_t len;
  } v[DED_BUF_CACHE];
  unsigned n;
} ded_bufcache;

/* A buffer of |len| bytes, from the cache when one fits exactly (NULL:
 * out of memory). Its contents are undefined. */
void *ded_bufcache_get(ded_bufcache *c, size_t len);

/* Gives |p| (|len| bytes, may be NULL) back; past DED_BUF_CACHE the
 * oldest is freed. */
void ded_bufcache_put(ded_bufcache *c, void *p, size_t len);

void ded_bufcache_free(ded_bufcache *c);

/* The result of a finished round. */
typedef struct ded_hist_entry {
  uint64_t round;
  ded_msg_commit plan;
  uint8_t *res;
  size_t bytes;
  uint8_t digest[DED_RESULT_DIGEST_BYTES]; /* of |res| */
} ded_hist_entry;

typedef struct ded_history {
  const ded_mem *mem;
  ded_bufcache *cache;
  uint64_t cap; /* bytes of results at most (settings.history_bytes) */
  ded_hist_entry *v;
  size_t n, vcap, bytes;
} ded_history;

void ded_history_init(ded_history *h, const ded_mem *mem, ded_bufcache *cache, uint64_t cap);

/* Round |round|'s result, or NULL. */
ded_hist_entry *ded_history_find(ded_history *h, uint64_t round);

/* Keeps round |round|'s result: on success |plan| (its members) and
 * |*res| (|bytes| long) are taken, and plan->members and |*res| become
 * NULL; otherwise (too large, kept already, out of memory) nothing is.
 * |digest| is that of the result's bytes. */
void ded_history_add(ded_history *h, uint64_t round, ded_msg_commit *plan, uint8_t **res,
                     size_t bytes, const uint8_t digest[DED_RESULT_DIGEST_BYTES]);

/* Drops every result (into the cache). */
void ded_history_free(ded_history *h);

#endif /* DED_HISTORY_H */
