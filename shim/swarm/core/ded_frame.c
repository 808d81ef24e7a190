#include "ded_frame.h"

#include <string.h>

#include "ded_assert.h"
#include "ded_err.h"
#include "ded_limits.h"

void ded_frame_dec_init(ded_frame_dec *dec, const ded_mem *mem) {
  memset(dec, 0, sizeof *dec);
  dec->mem = mem;
}

void ded_frame_dec_free(ded_frame_dec *dec) {
  ded_mem_free(dec->mem, dec->buf);
  dec->buf = NULL;
  dec->have = dec->need = dec->cap = 0;
}

static uint32_t frame_get_len(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int frame_check_len(uint32_t len) {
  return (len == 0 || len > DED_FRAME_MAX) ? DED_ERR_FRAME_SIZE : 0;
}

/* Makes room for |n| bytes in the gather buffer. */
static int frame_reserve(ded_frame_dec *dec, size_t n) {
  if (dec->cap >= n) return 0;
  size_t cap = dec->cap ? dec->cap : 4096;
  while (cap < n) cap *= 2;
  uint8_t *p = ded_mem_realloc(dec->mem, dec->buf, cap);
  if (!p) return DED_ERR_NOMEM;
  dec->buf = p;
  dec->cap = cap;
  return 0;
}

static void frame_emit(const uint8_t *p, size_t total, ded_frame *out) {
  out->type = p[4];
  out->payload = p + DED_FRAME_HDR_BYTES;
  out->len = total - DED_FRAME_HDR_BYTES;
}

/* Continues a frame that an earlier call left incomplete. */
static int frame_gather(ded_frame_dec *dec, const uint8_t **data, size_t *len, ded_frame *out) {
  if (dec->need == 0) {
    size_t take = DED_MIN(*len, DED_FRAME_HDR_BYTES - dec->have);
    memcpy(dec->buf + dec->have, *data, take);
    dec->have += take;
    *data += take;
    *len -= take;
    if (dec->have < DED_FRAME_HDR_BYTES) return 0;
    uint32_t flen = frame_get_len(dec->buf);
    int rv = frame_check_len(flen);
    if (rv) return rv;
    dec->need = 4 + (size_t)flen;
    rv = frame_reserve(dec, dec->need);
    if (rv) return rv;
  }
  size_t take = DED_MIN(*len, dec->need - dec->have);
  memcpy(dec->buf + dec->have, *data, take);
  dec->have += take;
  *data += take;
  *len -= take;
  if (dec->have < dec->need) return 0;
  frame_emit(dec->buf, dec->need, out);
  /* The buffer stays valid until the next call, which starts afresh. */
  dec->have = dec->need = 0;
  return 1;
}

int ded_frame_dec_next(ded_frame_dec *dec, const uint8_t **data, size_t *len, ded_frame *out) {
  if (dec->failed) return dec->failed;
  int rv;
  if (dec->have > 0) {
    rv = frame_gather(dec, data, len, out);
  } else if (*len >= DED_FRAME_HDR_BYTES) {
    uint32_t flen = frame_get_len(*data);
    rv = frame_check_len(flen);
    if (rv == 0) {
      size_t total = 4 + (size_t)flen;
      if (*len >= total) {
        frame_emit(*data, total, out);
        *data += total;
        *len -= total;
        return 1;
      }
      rv = frame_reserve(dec, total);
      if (rv == 0) rv = frame_gather(dec, data, len, out);
    }
  } else if (*len > 0) {
    rv = frame_reserve(dec, DED_FRAME_HDR_BYTES);
    if (rv == 0) rv = frame_gather(dec, data, len, out);
  } else {
    rv = 0;
  }
  if (rv < 0) dec->failed = rv;
  return rv;
}

void ded_frame_put_hdr(uint8_t hdr[DED_FRAME_HDR_BYTES], uint8_t type, size_t payload_len) {
  DED_ASSERT(payload_len + 1 <= DED_FRAME_MAX);
  uint32_t len = (uint32_t)(payload_len + 1);
  hdr[0] = (uint8_t)len;
  hdr[1] = (uint8_t)(len >> 8);
  hdr[2] = (uint8_t)(len >> 16);
  hdr[3] = (uint8_t)(len >> 24);
  hdr[4] = type;
}
