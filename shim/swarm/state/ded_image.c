/*
 * ded_image.c: the layout of a snapshot's bytes (see ded_image.h).
 */
#include "ded_image.h"

#include "../core/ded_limits.h"

static uint64_t rd_u64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static void wr_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

void ded_image_write_table(uint8_t *out, const uint64_t *sizes, uint64_t n) {
  wr_u64(out, n);
  for (uint64_t i = 0; i < n; i++) wr_u64(out + 8 + 8 * i, sizes[i]);
}

int ded_image_parse(const uint8_t *img, uint64_t len, ded_image_view *v) {
  if (len < 8 || len > DED_STATE_BYTES_MAX) return -1;
  uint64_t n = rd_u64(img);
  if (n > (len - 8) / 8) return -1; /* the table does not fit */
  uint64_t rest = len - ded_image_table_bytes(n), sum = 0;
  for (uint64_t i = 0; i < n; i++) {
    uint64_t s = rd_u64(img + 8 + 8 * i);
    if (s > rest - sum) return -1; /* more than the bytes left: no overflow either */
    sum += s;
  }
  if (sum != rest) return -1;
  v->n = n;
  v->table = img + 8;
  v->data = img + ded_image_table_bytes(n);
  v->data_len = rest;
  return 0;
}

uint64_t ded_image_size(const ded_image_view *v, uint64_t i) { return rd_u64(v->table + 8 * i); }
