#include "ded_record.h"

#include <stdbool.h>
#include <string.h>

#include "../core/ded_err.h"
#include "../core/ded_wire.h"

/* Everything but the signature. Returns the length, or -1 if it didn't fit. */
static int record_put_body(const ded_record *rec, ded_wr *w) {
  if (rec->naddr > DED_RECORD_ADDRS_MAX || rec->ext_len > DED_RECORD_EXT_MAX) return -1;
  ded_wr_u8(w, DED_RECORD_VERSION);
  ded_wr_u8(w, rec->mode);
  ded_wr_u16(w, rec->flags);
  ded_wr_bytes(w, rec->pk, DED_PK_BYTES);
  ded_wr_bytes(w, rec->run_id, DED_RUN_ID_BYTES);
  ded_wr_u64(w, rec->seq);
  ded_wr_u64(w, rec->issued_ms);
  ded_wr_u32(w, rec->ttl_ms);
  ded_wr_u8(w, rec->naddr);
  for (unsigned i = 0; i < rec->naddr; i++) {
    ded_wr_u8(w, rec->addr[i].family);
    ded_wr_bytes(w, rec->addr[i].ip, 16);
    ded_wr_u16(w, rec->addr[i].port);
  }
  ded_wr_u16(w, rec->ext_len);
  ded_wr_bytes(w, rec->ext, rec->ext_len);
  return w->err ? -1 : (int)w->pos;
}

int ded_record_encode(const ded_record *rec, uint8_t *out, size_t cap) {
  if (rec->naddr > DED_RECORD_ADDRS_MAX || rec->ext_len > DED_RECORD_EXT_MAX)
    return DED_ERR_INVALID_ARG;
  ded_wr w = ded_wr_init(out, cap);
  if (record_put_body(rec, &w) < 0) return DED_ERR_INVALID_ARG;
  ded_wr_bytes(&w, rec->sig, DED_SIG_BYTES);
  return w.err ? DED_ERR_INVALID_ARG : (int)w.pos;
}

void ded_record_sign(ded_record *rec, const ded_ident *ident) {
  uint8_t body[DED_RECORD_BYTES_MAX];
  memcpy(rec->pk, ident->pk, DED_PK_BYTES);
  ded_wr w = ded_wr_init(body, sizeof body);
  int n = record_put_body(rec, &w);
  DED_ASSERT(n > 0); /* our own record: a malformed one is a bug here */
  ded_ident_sign(ident, body, (size_t)n, rec->sig);
}

/* Walks the extension's entries: 0 if well-formed (entries fit exactly,
 * a known tag at most once, a known tag long enough), -1 if not. With
 * |want|, stops at that tag and sets |*val| and |*len|: 1. */
static int record_ext_walk(const ded_record *rec, int want, const uint8_t **val, size_t *len) {
  bool seen_perf = false, seen_invite = false, seen_progress = false;
  size_t i = 0;
  while (i < rec->ext_len) {
    if (rec->ext_len - i < 2) return -1;
    uint8_t tag = rec->ext[i], n = rec->ext[i + 1];
    if (rec->ext_len - i - 2 < n) return -1;
    if (tag == DED_RECORD_EXT_PERF) {
      if (seen_perf || n < DED_RECORD_PERF_BYTES) return -1;
      seen_perf = true;
    }
    if (tag == DED_RECORD_EXT_INVITE) {
      if (seen_invite || n != DED_RECORD_INVITE_BYTES) return -1;
      seen_invite = true;
    }
    if (tag == DED_RECORD_EXT_PROGRESS) {
      if (seen_progress || n < DED_RECORD_PROGRESS_BYTES) return -1;
      seen_progress = true;
    }
    if (tag == want) {
      *val = rec->ext + i + 2;
      *len = n;
      return 1;
    }
    i += 2 + (size_t)n;
  }
  return 0;
}

void ded_record_perf_set(ded_record *rec, const ded_perf *perf) {
  ded_wr w = ded_wr_init(rec->ext, sizeof rec->ext);
  ded_wr_u8(&w, DED_RECORD_EXT_PERF);
  ded_wr_u8(&w, DED_RECORD_PERF_BYTES);
  ded_wr_u32(&w, perf->up_kBps);
  ded_wr_u32(&w, perf->down_kBps);
  ded_wr_u32(&w, perf->add_kBps);
  DED_ASSERT(!w.err);
  rec->ext_len = (uint16_t)w.pos;
}

void ded_record_invite_add(ded_record *rec, uint64_t expires_ms, const uint8_t sig[DED_SIG_BYTES]) {
  ded_wr w = ded_wr_init(rec->ext + rec->ext_len, sizeof rec->ext - rec->ext_len);
  ded_wr_u8(&w, DED_RECORD_EXT_INVITE);
  ded_wr_u8(&w, DED_RECORD_INVITE_BYTES);
  ded_wr_u64(&w, expires_ms);
  ded_wr_bytes(&w, sig, DED_SIG_BYTES);
  DED_ASSERT(!w.err);
  rec->ext_len = (uint16_t)(rec->ext_len + w.pos);
}

int ded_record_invite(const ded_record *rec, uint64_t *expires_ms, uint8_t sig[DED_SIG_BYTES]) {
  const uint8_t *v = NULL;
  size_t n = 0;
  if (record_ext_walk(rec, DED_RECORD_EXT_INVITE, &v, &n) != 1) return 0;
  ded_rd r = ded_rd_init(v, n);
  *expires_ms = ded_rd_u64(&r);
  ded_rd_bytes(&r, sig, DED_SIG_BYTES);
  return 1;
}

void ded_record_progress_add(ded_record *rec, const ded_progress *prog) {
  ded_wr w = ded_wr_init(rec->ext + rec->ext_len, sizeof rec->ext - rec->ext_len);
  ded_wr_u8(&w, DED_RECORD_EXT_PROGRESS);
  ded_wr_u8(&w, DED_RECORD_PROGRESS_BYTES);
  ded_wr_u64(&w, prog->round);
  ded_wr_u32(&w, prog->round_ms);
  ded_wr_u32(&w, prog->contributors);
  DED_ASSERT(!w.err);
  rec->ext_len = (uint16_t)(rec->ext_len + w.pos);
}

int ded_record_progress(const ded_record *rec, ded_progress *prog) {
  memset(prog, 0, sizeof *prog);
  const uint8_t *v = NULL;
  size_t n = 0;
  if (record_ext_walk(rec, DED_RECORD_EXT_PROGRESS, &v, &n) != 1) return 0;
  ded_rd r = ded_rd_init(v, n);
  prog->round = ded_rd_u64(&r);
  prog->round_ms = ded_rd_u32(&r);
  prog->contributors = ded_rd_u32(&r);
  return 1;
}

int ded_record_perf(const ded_record *rec, ded_perf *perf) {
  memset(perf, 0, sizeof *perf);
  const uint8_t *v = NULL;
  size_t n = 0;
  if (record_ext_walk(rec, DED_RECORD_EXT_PERF, &v, &n) != 1) return 0;
  ded_rd r = ded_rd_init(v, n);
  perf->up_kBps = ded_rd_u32(&r);
  perf->down_kBps = ded_rd_u32(&r);
  perf->add_kBps = ded_rd_u32(&r);
  return 1;
}

int ded_record_decode(const uint8_t *p, size_t len, ded_record *rec) {
  memset(rec, 0, sizeof *rec);
  if (len > DED_RECORD_BYTES_MAX) return DED_ERR_PROTO;
  ded_rd r = ded_rd_init(p, len);
  if (ded_rd_u8(&r) != DED_RECORD_VERSION) return DED_ERR_PROTO;
  rec->mode = ded_rd_u8(&r);
  rec->flags = ded_rd_u16(&r);
  ded_rd_bytes(&r, rec->pk, DED_PK_BYTES);
  ded_rd_bytes(&r, rec->run_id, DED_RUN_ID_BYTES);
  rec->seq = ded_rd_u64(&r);
  rec->issued_ms = ded_rd_u64(&r);
  rec->ttl_ms = ded_rd_u32(&r);
  rec->naddr = ded_rd_u8(&r);
  if (rec->mode > DED_MODE_AUX || rec->naddr > DED_RECORD_ADDRS_MAX) return DED_ERR_PROTO;
  for (unsigned i = 0; i < rec->naddr; i++) {
    ded_addr *a = &rec->addr[i];
    a->family = ded_rd_u8(&r);
    ded_rd_bytes(&r, a->ip, 16);
    a->port = ded_rd_u16(&r);
    if ((a->family != 4 && a->family != 6) || a->port == 0) return DED_ERR_PROTO;
  }
  rec->ext_len = ded_rd_u16(&r);
  if (rec->ext_len > DED_RECORD_EXT_MAX) return DED_ERR_PROTO;
  ded_rd_bytes(&r, rec->ext, rec->ext_len);
  ded_rd_bytes(&r, rec->sig, DED_SIG_BYTES);
  if (!ded_rd_done(&r)) return DED_ERR_PROTO;
  if (rec->ttl_ms == 0 || rec->ttl_ms > DED_RECORD_TTL_MS_MAX) return DED_ERR_PROTO;
  if (record_ext_walk(rec, -1, NULL, NULL) != 0) return DED_ERR_PROTO;
  return 0;
}

int ded_record_verify(const ded_record *rec, const uint8_t run_id[DED_RUN_ID_BYTES],
                      uint64_t now_ms) {
  if (memcmp(rec->run_id, run_id, DED_RUN_ID_BYTES) != 0) return DED_ERR_WRONG_RUN;
  if (rec->issued_ms > now_ms + DED_CLOCK_SKEW_MS_MAX) return DED_ERR_EXPIRED;
  if (ded_record_expiry_ms(rec) + DED_CLOCK_SKEW_MS_MAX < now_ms) return DED_ERR_EXPIRED;
  uint8_t body[DED_RECORD_BYTES_MAX];
  ded_wr w = ded_wr_init(body, sizeof body);
  int n = record_put_body(rec, &w);
  if (n < 0) return DED_ERR_PROTO;
  if (ded_ident_verify(rec->pk, body, (size_t)n, rec->sig) != 0) return DED_ERR_SIGNATURE;
  return 0;
}
