/*
 * unit_util.h: helpers shared by the unit tests (header-only, all static).
 *
 * - test identities and signed records from fixed seeds, so every run of a
 *   test sees the same keys and the same bytes;
 * - a counting allocator that can fail its N-th allocation (nghttp2's
 *   failmalloc): tests rerun a scenario for N = 0, 1, 2, ... until it
 *   succeeds and check that each failure is DED_ERR_NOMEM and leaks nothing.
 */
#ifndef DED_UNIT_UTIL_H
#define DED_UNIT_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/ded_err.h"
#include "core/ded_mem.h"
#include "core/ded_msg.h"
#include "crypto/ded_ident.h"
#include "dht/ded_record.h"

/* ------------------------------------------------------------ identities */

/* An identity derived from 32 copies of |seed_byte|. */
static inline void unit_ident(ded_ident *ident, uint8_t seed_byte) {
  uint8_t seed[DED_SEED_BYTES];
  memset(seed, seed_byte, sizeof seed);
  assert_int_equal(ded_crypto_init(), 0);
  ded_ident_from_seed(ident, seed);
}

/* The run id every test uses unless it tests run separation. */
static inline void unit_run_id(uint8_t run_id[DED_RUN_ID_BYTES]) { ded_hash32("unit", 4, run_id); }

/* A record of |ident| with two addresses and a few extension bytes, so
 * that every field of the encoding is exercised; signed. */
static inline void unit_record(ded_record *rec, const ded_ident *ident, uint64_t seq,
                               uint64_t issued_ms, uint32_t ttl_ms) {
  memset(rec, 0, sizeof *rec);
  rec->mode = DED_MODE_NODE;
  rec->flags = 0;
  unit_run_id(rec->run_id);
  rec->seq = seq;
  rec->issued_ms = issued_ms;
  rec->ttl_ms = ttl_ms;
  rec->naddr = 2;
  rec->addr[0].family = 4;
  rec->addr[0].ip[0] = 10;
  rec->addr[0].ip[3] = 7;
  rec->addr[0].port = 7000;
  rec->addr[1].family = 6;
  rec->addr[1].ip[15] = 1;
  rec->addr[1].port = 7001;
  rec->ext_len = 3;
  rec->ext[0] = 0xaa; /* an extension entry of a tag this version skips */
  rec->ext[1] = 1;
  rec->ext[2] = 0xcc;
  ded_record_sign(rec, ident);
}

/* An unsigned record of the run named |run| without addresses or
 * extension: sequence 1, issued at |issued_ms|, 5 minutes to live. */
static inline void unit_bare_record(ded_record *rec, const char *run, uint64_t issued_ms) {
  memset(rec, 0, sizeof *rec);
  ded_hash32(run, strlen(run), rec->run_id);
  rec->seq = 1;
  rec->issued_ms = issued_ms;
  rec->ttl_ms = 300000;
}

/* A HELLO frame from |ident| for the run named |run|, carrying a record
 * without addresses issued at |issued_ms| that publishes the rates
 * |perf| (NULL: none) and, with |inv_sig|, the owner's invitation
 * (expiring at |inv_expires_ms|). Returns the frame's length. */
static inline size_t unit_hello_frame_with(uint8_t *out, size_t cap, const ded_ident *ident,
                                           const char *run, uint64_t issued_ms,
                                           const ded_perf *perf, const uint8_t *inv_sig,
                                           uint64_t inv_expires_ms) {
  ded_record rec;
  unit_bare_record(&rec, run, issued_ms);
  const uint8_t *run_id = rec.run_id;
  if (perf) ded_record_perf_set(&rec, perf); /* the extension's first entry */
  if (inv_sig) ded_record_invite_add(&rec, inv_expires_ms, inv_sig);
  ded_record_sign(&rec, ident);
  uint8_t rb[DED_RECORD_BYTES_MAX];
  int rl = ded_record_encode(&rec, rb, sizeof rb);
  assert_true(rl > 0);
  ded_wr w = ded_wr_init(out, cap);
  ded_msg_hello_encode(&w, run_id, rb, (size_t)rl);
  assert_false(w.err);
  return w.pos;
}

/* The same without rates. */
static inline size_t unit_hello_frame_invited(uint8_t *out, size_t cap, const ded_ident *ident,
                                              const char *run, uint64_t issued_ms,
                                              const uint8_t *inv_sig, uint64_t inv_expires_ms) {
  return unit_hello_frame_with(out, cap, ident, run, issued_ms, NULL, inv_sig, inv_expires_ms);
}

static inline size_t unit_hello_frame(uint8_t *out, size_t cap, const ded_ident *ident,
                                      const char *run, uint64_t issued_ms) {
  return unit_hello_frame_invited(out, cap, ident, run, issued_ms, NULL, 0);
}

/* -------------------------------------------------------- plans by hand */

/* An id whose order among ids is that of |n| (ids compare as bytes). */
static inline void unit_id(uint8_t id[DED_ID_BYTES], unsigned n) {
  memset(id, 0x5a, DED_ID_BYTES);
  id[0] = (uint8_t)(n >> 8);
  id[1] = (uint8_t)n;
}

/* Member unit_id(|n|) of a COMMIT: weight 1, one local rank, |flags|,
 * its shard from |shard_off|. */
static inline ded_msg_member unit_member(unsigned n, uint8_t flags, uint64_t shard_off) {
  ded_msg_member m;
  memset(&m, 0, sizeof m);
  unit_id(m.id, n);
  m.weight = 1.0;
  m.n_local = 1;
  m.shard_off = shard_off;
  m.flags = flags;
  return m;
}

/* A COMMIT of |attempt| over the |k| |members| (in id order; not owned:
 * do not free it), |nacc| acceptors, |count| f64 elements in chunks of
 * |chunk|. */
static inline ded_msg_commit unit_plan(uint64_t attempt, ded_msg_member *members, unsigned k,
                                       unsigned nacc, uint64_t count, uint32_t chunk) {
  ded_msg_commit c;
  memset(&c, 0, sizeof c);
  c.round = 1;
  c.attempt = attempt;
  c.dtype = DED_DTYPE_F64;
  c.count = count;
  c.chunk_elems = chunk;
  c.k = (uint16_t)k;
  c.nacc = (uint16_t)nacc;
  c.members = members;
  return c;
}

/* ----------------------------------------------------- failing allocator */

typedef struct unit_failmem {
  ded_mem mem;
  long fail_at;  /* index of the allocation that fails; -1: none */
  long allocs;   /* allocation attempts so far (malloc, calloc, realloc) */
  long live;     /* blocks handed out and not yet freed */
  bool failed;   /* the planned failure happened */
} unit_failmem;

/* Decides whether allocation attempt number |fm->allocs| fails. */
static inline bool unit_failmem_trip(unit_failmem *fm) {
  bool fail = fm->allocs++ == fm->fail_at;
  if (fail) fm->failed = true;
  return fail;
}

static inline void *unit_failmem_malloc(size_t size, void *user) {
  unit_failmem *fm = user;
  if (unit_failmem_trip(fm)) return NULL;
  void *p = malloc(size);
  if (p) fm->live++;
  return p;
}

static inline void unit_failmem_free(void *ptr, void *user) {
  unit_failmem *fm = user;
  if (!ptr) return;
  fm->live--;
  free(ptr);
}

static inline void *unit_failmem_calloc(size_t nmemb, size_t size, void *user) {
  unit_failmem *fm = user;
  if (unit_failmem_trip(fm)) return NULL;
  void *p = calloc(nmemb, size);
  if (p) fm->live++;
  return p;
}

/* A failed realloc leaves the old block alive, as libc's does. */
static inline void *unit_failmem_realloc(void *ptr, size_t size, void *user) {
  unit_failmem *fm = user;
  if (unit_failmem_trip(fm)) return NULL;
  void *p = realloc(ptr, size);
  if (p && !ptr) fm->live++;
  return p;
}

/* Arms |fm| to fail attempt |fail_at| (-1: never). */
static inline void unit_failmem_init(unit_failmem *fm, long fail_at) {
  memset(fm, 0, sizeof *fm);
  fm->fail_at = fail_at;
  fm->mem.user = fm;
  fm->mem.malloc = unit_failmem_malloc;
  fm->mem.free = unit_failmem_free;
  fm->mem.calloc = unit_failmem_calloc;
  fm->mem.realloc = unit_failmem_realloc;
}

/* Encodes |c| (whatever it holds) as a whole frame into a fresh buffer of
 * exactly DED_COMMIT_FRAME_BYTES(c->k) bytes; the caller frees it. */
static inline uint8_t *unit_commit_frame(const ded_msg_commit *c, size_t *len) {
  size_t cap = DED_COMMIT_FRAME_BYTES(c->k);
  uint8_t *buf = malloc(cap);
  assert_non_null(buf);
  ded_wr w = ded_wr_init(buf, cap);
  ded_msg_commit_encode(&w, c);
  assert_false(w.err);
  assert_int_equal(w.pos, cap);
  *len = cap;
  return buf;
}

#endif /* DED_UNIT_UTIL_H */
