/*
 * ded_stream.c: a job's gradient stream, cut into rounds (ded_stream.h).
 */
#include "ded_stream.h"

#include <string.h>

#include "../core/ded_assert.h"
#include "../core/ded_err.h"
#include "../core/ded_types.h"

static ded_call *stream_at(ded_stream *st, unsigned i) {
  return &st->v[(st->head + i) % DED_ROUNDS_ACTIVE_MAX];
}

static const ded_call *stream_at_c(const ded_stream *st, unsigned i) {
  return &st->v[(st->head + i) % DED_ROUNDS_ACTIVE_MAX];
}

/* The index of the oldest call with elements not given to a round whose
 * length is fixed, or st->n if none. */
static unsigned stream_cutting(const ded_stream *st) {
  unsigned i = 0;
  while (i < st->n && stream_at_c(st, i)->cut == stream_at_c(st, i)->a.count) i++;
  return i;
}

void ded_stream_resume(ded_stream *st, uint64_t pos) {
  DED_ASSERT(st->n == 0 && !st->open);
  st->pos = pos;
}

void ded_stream_postpone(ded_stream *st, uint64_t gap_ns) {
  for (unsigned i = 0; i < st->n; i++) stream_at(st, i)->bound_ns += gap_ns;
}

int ded_stream_push(ded_stream *st, const ded_round_args *a, uint64_t bound_ns) {
  if (st->n == DED_ROUNDS_ACTIVE_MAX) return DED_ERR_LIMIT;
  ded_call *c = stream_at(st, st->n);
  memset(c, 0, sizeof *c);
  c->a = *a;
  c->bound_ns = bound_ns;
  c->seq = st->head_seq + st->n++;
  return 0;
}

unsigned ded_stream_waiting(const ded_stream *st) {
  unsigned k = 0, cutting = st->open ? stream_cutting(st) : st->n;
  for (unsigned i = 0; i < st->n; i++) k += stream_at_c(st, i)->cut == 0 && i != cutting;
  return k;
}

bool ded_stream_cut(ded_stream *st, ded_cut *out) {
  unsigned i = stream_cutting(st);
  if (st->open || i == st->n) return false;
  ded_call *c = stream_at(st, i);
  size_t es = ded_dtype_size(c->a.dtype);
  out->a = c->a;
  out->a.buf = (uint8_t *)c->a.buf + (size_t)c->cut * es;
  out->a.count = c->a.count - c->cut;
  out->pos = st->pos;
  out->off = c->cut;
  out->seq = c->seq;
  out->bound_ns = c->bound_ns;
  st->open = true;
  return true;
}

void ded_stream_fix(ded_stream *st, uint64_t count) {
  unsigned i = stream_cutting(st);
  DED_ASSERT(st->open && i < st->n);
  ded_call *c = stream_at(st, i);
  DED_ASSERT(count > 0 && count <= c->a.count - c->cut);
  c->cut += count;
  st->pos += count;
  st->open = false;
}

bool ded_stream_reported(ded_stream *st, uint64_t seq, uint64_t count) {
  DED_ASSERT(seq >= st->head_seq && seq - st->head_seq < st->n);
  ded_call *c = stream_at(st, (unsigned)(seq - st->head_seq));
  DED_ASSERT(c->reported + count <= c->cut);
  c->reported += count;
  bool whole = c->reported == c->a.count;
  while (st->n > 0 && stream_at(st, 0)->reported == stream_at(st, 0)->a.count) {
    st->head = (st->head + 1) % DED_ROUNDS_ACTIVE_MAX;
    st->head_seq++;
    st->n--;
  }
  return whole;
}

bool ded_stream_ready(const ded_stream *st) {
  return !st->open && stream_cutting(st) < st->n;
}

bool ded_stream_idle(const ded_stream *st) { return st->n == 0; }
