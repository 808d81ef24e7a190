/*
 * ded_image.h: the bytes of a snapshot of a trainer's state, as the shim
 * lays them out (docs/wire-protocol.md, "State image").
 *
 * The node moves a snapshot as an opaque run of bytes under a digest;
 * what is inside is the shim's: the trainer's pieces of state (its
 * start-up broadcasts and registered buffers, in call order), listed in
 * a table at the front so that a joiner can check them against its own
 * pieces before it copies a byte.
 *
 *   u64 n | n x u64 size | the pieces' bytes, back to back
 *
 * All little-endian. The table is part of the image, so the number of
 * pieces is bounded by bytes alone: the image, table included, is at
 * most DED_STATE_BYTES_MAX. An image comes from a peer: ded_image_parse
 * checks every length before anything is read through it.
 *
 * Owns nothing: a view points into the caller's bytes.
 */
#ifndef DED_IMAGE_H
#define DED_IMAGE_H

#include <stddef.h>
#include <stdint.h>

typedef struct ded_image_view {
  uint64_t n;           /* pieces */
  const uint8_t *table; /* n sizes */
  const uint8_t *data;  /* their bytes, back to back */
  uint64_t data_len;    /* the sum of the sizes */
} ded_image_view;

/* Bytes of the table of |n| pieces (the count included). */
static inline uint64_t ded_image_table_bytes(uint64_t n) { return 8 + 8 * n; }

/* Writes the table of |n| pieces of |sizes| bytes at |out|
 * (ded_image_table_bytes(n) bytes); the pieces' bytes go after it. */
void ded_image_write_table(uint8_t *out, const uint64_t *sizes, uint64_t n);

/* 0 and |*v| if |img| (|len| bytes) is a well-formed image: a table that
 * fits, sizes that add up to exactly the bytes after it, at most
 * DED_STATE_BYTES_MAX in all. -1 otherwise. */
int ded_image_parse(const uint8_t *img, uint64_t len, ded_image_view *v);

/* The size of piece |i| < v->n. */
uint64_t ded_image_size(const ded_image_view *v, uint64_t i);

#endif /* DED_IMAGE_H */
