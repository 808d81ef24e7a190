/*
 * ded_wire.h: bounded little-endian readers and writers.
 *
 * A reader never reads past its end: the first short read sets |err| and
 * every later read returns zeros, so a decoder can read a whole message and
 * check |err| once. Writers behave the same way on overflow.
 */
#ifndef DED_WIRE_H
#define DED_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct ded_rd {
  const uint8_t *p;
  size_t len;
  size_t pos;
  bool err;
} ded_rd;

typedef struct ded_wr {
  uint8_t *p;
  size_t cap;
  size_t pos;
  bool err;
} ded_wr;

static inline ded_rd ded_rd_init(const uint8_t *p, size_t len) {
  ded_rd r = {p, len, 0, false};
  return r;
}

static inline size_t ded_rd_left(const ded_rd *r) { return r->err ? 0 : r->len - r->pos; }

/* Pointer to the next |n| bytes, or NULL (and err) if fewer remain. */
static inline const uint8_t *ded_rd_ptr(ded_rd *r, size_t n) {
  if (r->err || r->len - r->pos < n) {
    r->err = true;
    return NULL;
  }
  const uint8_t *p = r->p + r->pos;
  r->pos += n;
  return p;
}

static inline void ded_rd_bytes(ded_rd *r, void *out, size_t n) {
  const uint8_t *p = ded_rd_ptr(r, n);
  if (p)
    memcpy(out, p, n);
  else
    memset(out, 0, n);
}

static inline uint8_t ded_rd_u8(ded_rd *r) {
  const uint8_t *p = ded_rd_ptr(r, 1);
  return p ? p[0] : 0;
}

static inline uint16_t ded_rd_u16(ded_rd *r) {
  const uint8_t *p = ded_rd_ptr(r, 2);
  return p ? (uint16_t)(p[0] | (uint16_t)p[1] << 8) : 0;
}

static inline uint32_t ded_rd_u32(ded_rd *r) {
  const uint8_t *p = ded_rd_ptr(r, 4);
  if (!p) return 0;
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t ded_rd_u64(ded_rd *r) {
  uint64_t lo = ded_rd_u32(r);
  uint64_t hi = ded_rd_u32(r);
  return lo | hi << 32;
}

static inline double ded_rd_f64(ded_rd *r) {
  uint64_t u = ded_rd_u64(r);
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}

/* True when the reader consumed exactly all its bytes without error. */
static inline bool ded_rd_done(const ded_rd *r) { return !r->err && r->pos == r->len; }

static inline ded_wr ded_wr_init(uint8_t *p, size_t cap) {
  ded_wr w = {p, cap, 0, false};
  return w;
}

static inline uint8_t *ded_wr_ptr(ded_wr *w, size_t n) {
  if (w->err || w->cap - w->pos < n) {
    w->err = true;
    return NULL;
  }
  uint8_t *p = w->p + w->pos;
  w->pos += n;
  return p;
}

static inline void ded_wr_bytes(ded_wr *w, const void *src, size_t n) {
  uint8_t *p = ded_wr_ptr(w, n);
  if (p && n) memcpy(p, src, n);
}

static inline void ded_wr_u8(ded_wr *w, uint8_t v) {
  uint8_t *p = ded_wr_ptr(w, 1);
  if (p) p[0] = v;
}

static inline void ded_wr_u16(ded_wr *w, uint16_t v) {
  uint8_t *p = ded_wr_ptr(w, 2);
  if (!p) return;
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}

static inline void ded_wr_u32(ded_wr *w, uint32_t v) {
  uint8_t *p = ded_wr_ptr(w, 4);
  if (!p) return;
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}

static inline void ded_wr_u64(ded_wr *w, uint64_t v) {
  ded_wr_u32(w, (uint32_t)v);
  ded_wr_u32(w, (uint32_t)(v >> 32));
}

static inline void ded_wr_f64(ded_wr *w, double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  ded_wr_u64(w, u);
}

#endif /* DED_WIRE_H */
