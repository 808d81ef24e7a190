#include "ded_record.h"

#include <stdbool.h>
#include <string.h>

#include "../core/ded_assert.h"
#include "../core/ded_err.h"
#include "../core/ded_wire.h"

/* Everything but the extension, with the most addresses: what
 * DED_RECORD_BYTES_MAX must hold besides DED_RECORD_EXT_MAX. */
#define RECORD_FIXED_BYTES \
  (1 + 1 + 2 + DED_PK_BYTES + DED_RUN_ID_BYTES + 8 + 8 + 4 + 1 + DED_RECORD_ADDRS_MAX * 19 + 2 + \
   DED_SIG_BYTES)
_Static_assert(RECORD_FIXED_BYTES + DED_RECORD_EXT_MAX <= DED_RECORD_BYTES_MAX,
               "a record with the largest extension must fit DED_RECORD_BYTES_MAX");
/* Our own record carries rates, an invitation, progress and a full list
 * of group peers at once. */
_Static_assert(2 + DED_RECORD_PERF_BYTES + 2 + DED_RECORD_INVITE_BYTES + 2 + DED_RECORD_PROGRESS_CODEC_BYTES +
                       DED_RECORD_GROUPS_EXT_MAX <=
                   DED_RECORD_EXT_MAX,
               "our own extension must fit DED_RECORD_EXT_MAX");
_Static_assert(DED_RECORD_GROUPS_MAX <= 255, "GROUPS counts are u8");

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
  /* GROUPS may appear several times (groups_gather joins them). */
  size_t i = 0;
  while (i < rec->ext_len) {
    if (rec->ext_len - i < 2) return -1;
    uint8_t tag = rec->ext[i], n = rec->ext[i + 1];
    if (rec->ext_len - i - 2 < n) return -1;
    if (tag == DED_RECORD_EXT_PERF) {
      if (seen_perf || n < DED_RECORD_PERF_MIN_BYTES) return -1;
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
  ded_wr_u8(&w, perf->flags);
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
  ded_wr_u8(&w, DED_RECORD_PROGRESS_CODEC_BYTES);
  ded_wr_u64(&w, prog->round);
  ded_wr_u32(&w, prog->round_ms);
  ded_wr_u32(&w, prog->contributors);
  ded_wr_u64(&w, prog->attempt);
  ded_wr_u8(&w, prog->codec);
  ded_wr_u32(&w, prog->codec_ppm);
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
  if (n >= DED_RECORD_PROGRESS_FULL_BYTES) prog->attempt = ded_rd_u64(&r);
  if (n >= DED_RECORD_PROGRESS_CODEC_BYTES) { /* shown, never acted on */
    prog->codec = ded_rd_u8(&r);
    prog->codec_ppm = ded_rd_u32(&r);
  }
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
  if (n >= DED_RECORD_PERF_BYTES) perf->flags = ded_rd_u8(&r) & (DED_PERF_F_UP_EARLY | DED_PERF_F_DOWN_EARLY);
  return 1;
}

/* The GROUPS value of |rec|: the values of its GROUPS entries joined, in
 * order, into |buf| (DED_RECORD_EXT_MAX bytes), their length in |*len|.
 * 1, 0 (no GROUPS entry) or -1 (the entries do not fill the extension). */
static int groups_gather(const ded_record *rec, uint8_t *buf, size_t *len) {
  int found = 0;
  size_t i = 0;
  *len = 0;
  while (i < rec->ext_len) {
    if (rec->ext_len - i < 2) return -1;
    uint8_t tag = rec->ext[i], n = rec->ext[i + 1];
    if (rec->ext_len - i - 2 < n) return -1;
    if (tag == DED_RECORD_EXT_GROUPS) {
      memcpy(buf + *len, rec->ext + i + 2, n); /* the entries lie within ext_len */
      *len += n;
      found = 1;
    }
    i += 2 + (size_t)n;
  }
  return found;
}

/* Parses a GROUPS value into |out|: the number of entries, or -1 if it is
 * malformed (ded_record.h). */
static int groups_parse(const uint8_t *v, size_t len, ded_group_addr out[DED_RECORD_GROUPS_MAX]) {
  ded_rd r = ded_rd_init(v, len);
  ded_addr hosts[DED_RECORD_GROUPS_MAX];
  unsigned nhost = ded_rd_u8(&r);
  if (r.err || nhost > DED_RECORD_GROUPS_MAX) return -1;
  for (unsigned i = 0; i < nhost; i++) {
    memset(&hosts[i], 0, sizeof hosts[i]);
    hosts[i].family = ded_rd_u8(&r);
    ded_rd_bytes(&r, hosts[i].ip, 16);
    if (hosts[i].family != 4 && hosts[i].family != 6) return -1;
  }
  unsigned n = ded_rd_u8(&r);
  if (r.err || n > DED_RECORD_GROUPS_MAX) return -1;
  for (unsigned i = 0; i < n; i++) {
    uint16_t id = ded_rd_u16(&r);
    unsigned host = ded_rd_u8(&r);
    uint16_t port = ded_rd_u16(&r);
    if (r.err || host >= nhost || port == 0 || (i > 0 && id <= out[i - 1].id)) return -1;
    out[i].id = id;
    out[i].addr = hosts[host];
    out[i].addr.port = port;
  }
  return ded_rd_done(&r) ? (int)n : -1;
}

int ded_record_groups_add(ded_record *rec, const ded_group_addr *g, unsigned n) {
  if (n > DED_RECORD_GROUPS_MAX) return DED_ERR_INVALID_ARG;
  ded_addr hosts[DED_RECORD_GROUPS_MAX];
  uint8_t host_of[DED_RECORD_GROUPS_MAX];
  unsigned nhost = 0;
  for (unsigned i = 0; i < n; i++) {
    const ded_addr *a = &g[i].addr;
    if ((a->family != 4 && a->family != 6) || a->port == 0 || (i > 0 && g[i].id <= g[i - 1].id))
      return DED_ERR_INVALID_ARG;
    unsigned h = 0;
    while (h < nhost && !(hosts[h].family == a->family && memcmp(hosts[h].ip, a->ip, 16) == 0)) h++;
    if (h == nhost) hosts[nhost++] = *a;
    host_of[i] = (uint8_t)h;
  }
  uint8_t v[DED_RECORD_GROUPS_VALUE_MAX];
  ded_wr w = ded_wr_init(v, sizeof v);
  ded_wr_u8(&w, (uint8_t)nhost);
  for (unsigned h = 0; h < nhost; h++) {
    ded_wr_u8(&w, hosts[h].family);
    ded_wr_bytes(&w, hosts[h].ip, 16);
  }
  ded_wr_u8(&w, (uint8_t)n);
  for (unsigned i = 0; i < n; i++) {
    ded_wr_u16(&w, g[i].id);
    ded_wr_u8(&w, host_of[i]);
    ded_wr_u16(&w, g[i].addr.port);
  }
  DED_ASSERT(!w.err);
  size_t entries = (w.pos + 254) / 255;
  if (rec->ext_len + w.pos + 2 * entries > DED_RECORD_EXT_MAX) return DED_ERR_INVALID_ARG;
  for (size_t off = 0; off < w.pos; off += 255) {
    size_t k = DED_MIN(w.pos - off, (size_t)255);
    rec->ext[rec->ext_len] = DED_RECORD_EXT_GROUPS;
    rec->ext[rec->ext_len + 1] = (uint8_t)k;
    memcpy(rec->ext + rec->ext_len + 2, v + off, k);
    rec->ext_len = (uint16_t)(rec->ext_len + 2 + k);
  }
  return 0;
}

int ded_record_groups(const ded_record *rec, ded_group_addr out[DED_RECORD_GROUPS_MAX]) {
  uint8_t v[DED_RECORD_EXT_MAX];
  size_t len;
  if (groups_gather(rec, v, &len) != 1) return -1;
  return groups_parse(v, len, out);
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
  /* A GROUPS value that does not parse is malformed like any other
   * known entry: the record does not decode. */
  uint8_t v[DED_RECORD_EXT_MAX];
  size_t vlen;
  ded_group_addr groups[DED_RECORD_GROUPS_MAX];
  if (groups_gather(rec, v, &vlen) == 1 && groups_parse(v, vlen, groups) < 0) return DED_ERR_PROTO;
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
