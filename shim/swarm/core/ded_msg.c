#include "ded_msg.h"

#include <math.h>
#include <string.h>

#include "../avg/ded_codec.h"
#include "ded_err.h"
#include "ded_limits.h"

const char *ded_msg_name(uint8_t type) {
  switch (type) {
  case DED_MSG_HELLO: return "HELLO";
  case DED_MSG_RECORDS: return "RECORDS";
  case DED_MSG_JOIN: return "JOIN";
  case DED_MSG_COMMIT: return "COMMIT";
  case DED_MSG_REDIRECT: return "REDIRECT";
  case DED_MSG_DATA: return "DATA";
  case DED_MSG_RESULT: return "RESULT";
  case DED_MSG_LEAVE: return "LEAVE";
  case DED_MSG_STALE: return "STALE";
  case DED_MSG_DECIDE: return "DECIDE";
  case DED_MSG_FETCH: return "FETCH";
  case DED_MSG_PROBE: return "PROBE";
  case DED_MSG_HAVE: return "HAVE";
  case DED_MSG_STATE_ASK: return "STATE_ASK";
  case DED_MSG_STATE_OFFER: return "STATE_OFFER";
  case DED_MSG_STATE_GET: return "STATE_GET";
  case DED_MSG_STATE_DATA: return "STATE_DATA";
  case DED_MSG_AHEAD: return "AHEAD";
  case DED_MSG_SPEED: return "SPEED";
  case DED_MSG_ABSTAIN: return "ABSTAIN";
  default: return "unknown";
  }
}

const char *ded_leave_why(uint8_t reason) {
  switch (reason) {
  case DED_LEAVE_MISMATCH_STEP:
    return "its training step differs from the swarm's (another model or configuration)";
  case DED_LEAVE_MISMATCH_STATE:
    return "its state differs from the run's (another model or configuration)";
  case DED_LEAVE_ERROR: return "an error kept its job from taking part (see that job's log)";
  default: return NULL;
  }
}

/* Writes the frame header with a placeholder length; msg_end fixes it. */
static size_t msg_begin(ded_wr *w, uint8_t type) {
  size_t start = w->pos;
  ded_wr_u32(w, 0);
  ded_wr_u8(w, type);
  return start;
}

static void msg_end(ded_wr *w, size_t start) {
  if (w->err) return;
  size_t payload = w->pos - start - DED_FRAME_HDR_BYTES;
  ded_frame_put_hdr(w->p + start, w->p[start + 4], payload);
}

void ded_msg_hello_encode(ded_wr *w, const uint8_t run_id[DED_RUN_ID_BYTES], const uint8_t *rec,
                          size_t rec_len) {
  size_t s = msg_begin(w, DED_MSG_HELLO);
  ded_wr_bytes(w, DED_HELLO_MAGIC, DED_HELLO_MAGIC_LEN);
  ded_wr_u16(w, DED_PROTO_VERSION);
  ded_wr_bytes(w, run_id, DED_RUN_ID_BYTES);
  ded_wr_u16(w, (uint16_t)rec_len);
  ded_wr_bytes(w, rec, rec_len);
  msg_end(w, s);
}

static void msg_join_fields(ded_wr *w, const ded_msg_join *m, uint8_t flags) {
  ded_wr_u64(w, m->round);
  ded_wr_u32(w, m->view);
  ded_wr_u8(w, m->dtype);
  ded_wr_u64(w, m->count);
  ded_wr_u64(w, m->pos);
  ded_wr_u64(w, m->step);
  ded_wr_f64(w, m->weight);
  ded_wr_u32(w, m->n_local);
  ded_wr_u8(w, m->compress);
  ded_wr_u32(w, m->compress_ppm);
  ded_wr_u32(w, m->compute_us);
  ded_wr_u8(w, flags);
  if (flags & DED_JOIN_F_VOID) {
    ded_wr_u64(w, m->void_round);
    ded_wr_u64(w, m->void_attempt);
  } else if (flags & DED_JOIN_F_HELD) {
    ded_wr_u64(w, m->held_round);
    ded_wr_u64(w, m->held_attempt);
  }
}

static void msg_commit_body(ded_wr *w, const ded_msg_commit *m) {
  ded_wr_u64(w, m->round);
  ded_wr_u64(w, m->attempt);
  ded_wr_u64(w, m->base);
  ded_wr_u8(w, m->dtype);
  ded_wr_u64(w, m->count);
  ded_wr_u64(w, m->pos);
  ded_wr_u64(w, m->step);
  ded_wr_u32(w, m->chunk_elems);
  ded_wr_u8(w, m->codec);
  ded_wr_u32(w, m->codec_ppm);
  ded_wr_u16(w, m->k);
  ded_wr_u16(w, m->nacc);
  for (unsigned i = 0; i < m->k; i++) {
    ded_wr_bytes(w, m->members[i].id, DED_ID_BYTES);
    ded_wr_f64(w, m->members[i].weight);
    ded_wr_u32(w, m->members[i].n_local);
    ded_wr_u64(w, m->members[i].shard_off);
    ded_wr_u8(w, m->members[i].flags);
  }
}

void ded_msg_join_encode(ded_wr *w, const ded_msg_join *m) {
  size_t s = msg_begin(w, DED_MSG_JOIN);
  msg_join_fields(w, m, (uint8_t)(m->flags & ~(DED_JOIN_F_STATUS | DED_JOIN_F_DONE)));
  msg_end(w, s);
}

void ded_msg_join_status_encode(ded_wr *w, const ded_msg_join *m, const ded_msg_commit *plan,
                                const uint8_t *have) {
  size_t s = msg_begin(w, DED_MSG_JOIN);
  msg_join_fields(w, m, (uint8_t)(m->flags | DED_JOIN_F_STATUS));
  ded_wr_u32(w, m->acc_view);
  msg_commit_body(w, plan);
  ded_wr_bytes(w, have, ((size_t)plan->k + 7) / 8);
  msg_end(w, s);
}

void ded_msg_commit_encode(ded_wr *w, const ded_msg_commit *m) {
  size_t s = msg_begin(w, DED_MSG_COMMIT);
  msg_commit_body(w, m);
  msg_end(w, s);
}

void ded_msg_decide_encode(ded_wr *w, uint32_t view, uint8_t flags, const ded_msg_commit *plan,
                           const uint16_t *holders) {
  size_t s = msg_begin(w, DED_MSG_DECIDE);
  ded_wr_u64(w, plan->round);
  ded_wr_u32(w, view);
  ded_wr_u8(w, flags);
  msg_commit_body(w, plan);
  for (unsigned i = 0; i < plan->k; i++) ded_wr_u16(w, holders[i]);
  msg_end(w, s);
}

void ded_msg_fetch_encode(ded_wr *w, const ded_msg_fetch *m) {
  size_t s = msg_begin(w, DED_MSG_FETCH);
  ded_wr_u64(w, m->round);
  ded_wr_u64(w, m->attempt);
  ded_wr_u16(w, m->shard);
  msg_end(w, s);
}

void ded_msg_have_encode(ded_wr *w, const ded_msg_have *m) {
  size_t s = msg_begin(w, DED_MSG_HAVE);
  ded_wr_u64(w, m->round);
  ded_wr_u64(w, m->attempt);
  ded_wr_u32(w, m->view);
  ded_wr_u8(w, m->flags);
  ded_wr_bytes(w, m->digest, DED_RESULT_DIGEST_BYTES);
  msg_end(w, s);
}

void ded_msg_probe_encode(ded_wr *w, const ded_msg_probe *m) {
  size_t s = msg_begin(w, DED_MSG_PROBE);
  ded_wr_u64(w, m->round);
  ded_wr_u32(w, m->view);
  msg_end(w, s);
}

void ded_msg_abstain_encode(ded_wr *w, const ded_msg_abstain *m) {
  size_t s = msg_begin(w, DED_MSG_ABSTAIN);
  ded_wr_u64(w, m->round);
  msg_end(w, s);
}

void ded_msg_redirect_encode(ded_wr *w, const ded_msg_redirect *m) {
  size_t s = msg_begin(w, DED_MSG_REDIRECT);
  ded_wr_u64(w, m->round);
  ded_wr_u32(w, m->view);
  ded_wr_bytes(w, m->id, DED_ID_BYTES);
  msg_end(w, s);
}

void ded_msg_leave_encode(ded_wr *w, uint8_t reason) {
  size_t s = msg_begin(w, DED_MSG_LEAVE);
  ded_wr_u8(w, reason);
  msg_end(w, s);
}

static void msg_rounds_encode(ded_wr *w, uint8_t type, const ded_msg_stale *m) {
  size_t s = msg_begin(w, type);
  ded_wr_u64(w, m->round);
  ded_wr_u64(w, m->next_round);
  msg_end(w, s);
}

void ded_msg_stale_encode(ded_wr *w, const ded_msg_stale *m) {
  msg_rounds_encode(w, DED_MSG_STALE, m);
}

void ded_msg_ahead_encode(ded_wr *w, const ded_msg_stale *m) {
  msg_rounds_encode(w, DED_MSG_AHEAD, m);
}

void ded_msg_state_ask_encode(ded_wr *w, const ded_msg_state_ask *m) {
  size_t s = msg_begin(w, DED_MSG_STATE_ASK);
  ded_wr_u64(w, m->min_round);
  ded_wr_bytes(w, m->origin, DED_ID_BYTES);
  msg_end(w, s);
}

void ded_msg_state_offer_encode(ded_wr *w, const ded_msg_state_offer *m) {
  size_t s = msg_begin(w, DED_MSG_STATE_OFFER);
  ded_wr_u8(w, m->status);
  ded_wr_u64(w, m->round);
  ded_wr_u64(w, m->pos);
  ded_wr_u64(w, m->digest);
  ded_wr_u32(w, m->step_rounds);
  ded_wr_u64(w, m->len);
  ded_wr_u64(w, m->lin_attempt);
  ded_wr_u16(w, m->nlin);
  ded_wr_bytes(w, m->lin, DED_LIN_BYTES(m->nlin));
  msg_end(w, s);
}

void ded_msg_state_get_encode(ded_wr *w, const ded_msg_state_get *m) {
  size_t s = msg_begin(w, DED_MSG_STATE_GET);
  ded_wr_u64(w, m->round);
  ded_wr_u64(w, m->digest);
  ded_wr_u64(w, m->offset);
  ded_wr_u32(w, m->len);
  msg_end(w, s);
}

void ded_msg_state_data_hdr_encode(uint8_t hdr[DED_STATE_DATA_HDR_BYTES], uint64_t round,
                                   uint64_t digest, uint64_t offset, size_t len) {
  ded_frame_put_hdr(hdr, DED_MSG_STATE_DATA, 24 + len);
  ded_wr w = ded_wr_init(hdr + DED_FRAME_HDR_BYTES, 24);
  ded_wr_u64(&w, round);
  ded_wr_u64(&w, digest);
  ded_wr_u64(&w, offset);
  DED_ASSERT(!w.err);
}

void ded_msg_data_hdr_encode(uint8_t hdr[DED_DATA_HDR_BYTES], uint8_t type, uint64_t round,
                             uint64_t attempt, uint64_t offset, uint8_t codec, size_t elem_bytes) {
  ded_frame_put_hdr(hdr, type, 25 + elem_bytes);
  ded_wr w = ded_wr_init(hdr + DED_FRAME_HDR_BYTES, 25);
  ded_wr_u64(&w, round);
  ded_wr_u64(&w, attempt);
  ded_wr_u64(&w, offset);
  ded_wr_u8(&w, codec);
  DED_ASSERT(!w.err);
}

void ded_msg_speed_hdr_encode(uint8_t hdr[DED_SPEED_HDR_BYTES], uint32_t want, size_t fill) {
  ded_frame_put_hdr(hdr, DED_MSG_SPEED, 4 + fill);
  ded_wr w = ded_wr_init(hdr + DED_FRAME_HDR_BYTES, 4);
  ded_wr_u32(&w, want);
  DED_ASSERT(!w.err);
}

void ded_msg_records_begin(ded_msg_records_wr *rw, ded_wr *w) {
  rw->w = w;
  rw->start = msg_begin(w, DED_MSG_RECORDS);
  ded_wr_u16(w, 0);
  rw->n = 0;
}

int ded_msg_records_add(ded_msg_records_wr *rw, const uint8_t *rec, size_t len) {
  ded_wr *w = rw->w;
  if (rw->n >= DED_RECORDS_PER_FRAME_MAX || w->err || w->cap - w->pos < 2 + len ||
      w->pos + 2 + len - rw->start > DED_FRAME_MAX)
    return -1;
  ded_wr_u16(w, (uint16_t)len);
  ded_wr_bytes(w, rec, len);
  rw->n++;
  return 0;
}

void ded_msg_records_end(ded_msg_records_wr *rw) {
  ded_wr *w = rw->w;
  if (w->err) return;
  uint8_t *n = w->p + rw->start + DED_FRAME_HDR_BYTES;
  n[0] = (uint8_t)rw->n;
  n[1] = (uint8_t)(rw->n >> 8);
  msg_end(w, rw->start);
}

int ded_msg_hello_decode(const uint8_t *p, size_t len, ded_msg_hello *m) {
  ded_rd r = ded_rd_init(p, len);
  const uint8_t *magic = ded_rd_ptr(&r, DED_HELLO_MAGIC_LEN);
  if (!magic || memcmp(magic, DED_HELLO_MAGIC, DED_HELLO_MAGIC_LEN) != 0) return DED_ERR_PROTO;
  m->version = ded_rd_u16(&r);
  ded_rd_bytes(&r, m->run_id, DED_RUN_ID_BYTES);
  m->rec_len = ded_rd_u16(&r);
  m->rec = ded_rd_ptr(&r, m->rec_len);
  if (!ded_rd_done(&r)) return DED_ERR_PROTO;
  if (m->version != DED_PROTO_VERSION) return DED_ERR_VERSION;
  if (m->rec_len > DED_RECORD_BYTES_MAX) return DED_ERR_PROTO;
  return 0;
}

static bool msg_dtype_ok(uint8_t dtype) { return ded_dtype_size(dtype) != 0; }

static bool msg_weight_ok(double w) { return isfinite(w) && w >= 0.0 && w <= DED_WEIGHT_MAX; }

static int msg_commit_body_rd(ded_rd *r, const ded_mem *mem, ded_msg_commit *m);

int ded_msg_join_decode(const uint8_t *p, size_t len, const ded_mem *mem, ded_msg_join *m) {
  ded_rd r = ded_rd_init(p, len);
  memset(m, 0, sizeof *m);
  m->round = ded_rd_u64(&r);
  m->view = ded_rd_u32(&r);
  m->dtype = ded_rd_u8(&r);
  m->count = ded_rd_u64(&r);
  m->pos = ded_rd_u64(&r);
  m->step = ded_rd_u64(&r);
  m->weight = ded_rd_f64(&r);
  m->n_local = ded_rd_u32(&r);
  m->compress = ded_rd_u8(&r);
  m->compress_ppm = ded_rd_u32(&r);
  m->compute_us = ded_rd_u32(&r);
  m->flags = ded_rd_u8(&r);
  if (m->flags & DED_JOIN_F_VOID) {
    m->void_round = ded_rd_u64(&r);
    m->void_attempt = ded_rd_u64(&r);
    if (m->void_attempt == 0 || m->void_round >= m->round || m->void_round + 1 >= m->round)
      return DED_ERR_PROTO;
  } else if (m->flags & DED_JOIN_F_HELD) {
    m->held_round = ded_rd_u64(&r);
    m->held_attempt = ded_rd_u64(&r);
    if (m->held_round >= m->round || (m->held_round == 0 && m->held_attempt != 0))
      return DED_ERR_PROTO;
  }
  if (r.err) return DED_ERR_PROTO;
  if (!msg_dtype_ok(m->dtype) || m->count == 0 || m->count > DED_COUNT_MAX ||
      m->pos > DED_POS_MAX || m->step > DED_POS_MAX)
    return DED_ERR_PROTO;
  if (!msg_weight_ok(m->weight) || m->n_local == 0) return DED_ERR_PROTO;
  ded_codec want;
  if (ded_codec_from_wire(m->compress & (uint8_t)~DED_JOIN_COMPRESS_AUTO, m->compress_ppm, &want))
    return DED_ERR_PROTO;
  if (m->flags & ~(DED_JOIN_F_GENESIS | DED_JOIN_F_STATUS | DED_JOIN_F_INTENT | DED_JOIN_F_DONE |
                   DED_JOIN_F_CLIENT | DED_JOIN_F_AUX | DED_JOIN_F_VOID | DED_JOIN_F_HELD) ||
      (m->flags & (DED_JOIN_F_VOID | DED_JOIN_F_HELD) &&
       m->flags & (DED_JOIN_F_GENESIS | DED_JOIN_F_INTENT)) ||
      (m->flags & DED_JOIN_F_VOID && m->flags & DED_JOIN_F_HELD) ||
      (m->flags & DED_JOIN_F_CLIENT && m->flags & DED_JOIN_F_AUX))
    return DED_ERR_PROTO;
  if (!(m->flags & DED_JOIN_F_STATUS))
    return ded_rd_done(&r) && !(m->flags & DED_JOIN_F_DONE) ? 0 : DED_ERR_PROTO;
  m->acc_view = ded_rd_u32(&r);
  int rv = msg_commit_body_rd(&r, mem, &m->plan);
  if (rv) return rv;
  size_t nb = ((size_t)m->plan.k + 7) / 8;
  m->have = ded_rd_ptr(&r, nb);
  rv = DED_ERR_PROTO;
  if (ded_rd_done(&r) && m->plan.round == m->round &&
      (m->plan.k % 8 == 0 || (m->have[nb - 1] >> (m->plan.k % 8)) == 0))
    rv = 0;
  if (rv) ded_msg_join_free(m, mem);
  return rv;
}

void ded_msg_join_free(ded_msg_join *m, const ded_mem *mem) {
  ded_msg_commit_free(&m->plan, mem);
  m->have = NULL;
}

/* Checks the invariants the engine relies on: ids strictly increasing (one
 * fixed summation order, no duplicates), shards contiguous, weights sane,
 * acceptors that can make a quorum. */
static int msg_commit_check(const ded_msg_commit *m) {
  double total = 0.0;
  unsigned acc = 0, primary = 0, contributors = 0, founders = 0;
  for (unsigned i = 0; i < m->k; i++) {
    const ded_msg_member *mb = &m->members[i];
    if (mb->flags & ~(DED_MEMBER_F_ACCEPTOR | DED_MEMBER_F_PRIMARY | DED_MEMBER_F_CLIENT |
                      DED_MEMBER_F_AUX | DED_MEMBER_F_FOUNDER))
      return DED_ERR_PROTO;
    if (mb->flags & DED_MEMBER_F_FOUNDER && (mb->flags & DED_MEMBER_F_AUX || founders++))
      return DED_ERR_PROTO;
    if (mb->flags & DED_MEMBER_F_PRIMARY && !(mb->flags & DED_MEMBER_F_ACCEPTOR))
      return DED_ERR_PROTO;
    if (mb->flags & DED_MEMBER_F_AUX && (mb->flags & DED_MEMBER_F_CLIENT || mb->weight != 0.0))
      return DED_ERR_PROTO;
    contributors += !(mb->flags & DED_MEMBER_F_AUX);
    acc += mb->flags & DED_MEMBER_F_ACCEPTOR ? 1 : 0;
    primary += mb->flags & DED_MEMBER_F_PRIMARY ? 1 : 0;
    if (i > 0 && memcmp(m->members[i - 1].id, mb->id, DED_ID_BYTES) >= 0) return DED_ERR_PROTO;
    if (!msg_weight_ok(mb->weight) || mb->n_local == 0) return DED_ERR_PROTO;
    uint64_t lo = i == 0 ? 0 : m->members[i - 1].shard_off;
    if (mb->shard_off < lo || mb->shard_off > m->count) return DED_ERR_PROTO;
    if (i == 0 && mb->shard_off != 0) return DED_ERR_PROTO;
    total += mb->weight;
  }
  if (!(total > 0.0) || !isfinite(total) || contributors == 0) return DED_ERR_PROTO;
  if (acc == 0 || acc > m->nacc || primary > 1) return DED_ERR_PROTO;
  return 0;
}

static int msg_commit_body_rd(ded_rd *r, const ded_mem *mem, ded_msg_commit *m) {
  m->members = NULL;
  m->round = ded_rd_u64(r);
  m->attempt = ded_rd_u64(r);
  m->base = ded_rd_u64(r);
  m->dtype = ded_rd_u8(r);
  m->count = ded_rd_u64(r);
  m->pos = ded_rd_u64(r);
  m->step = ded_rd_u64(r);
  m->chunk_elems = ded_rd_u32(r);
  m->codec = ded_rd_u8(r);
  m->codec_ppm = ded_rd_u32(r);
  m->k = ded_rd_u16(r);
  m->nacc = ded_rd_u16(r);
  if (r->err || !msg_dtype_ok(m->dtype) || m->count == 0 || m->count > DED_COUNT_MAX ||
      m->pos > DED_POS_MAX || m->step > DED_POS_MAX)
    return DED_ERR_PROTO;
  ded_codec codec;
  if (ded_codec_from_wire(m->codec, m->codec_ppm, &codec) ||
      (m->codec != DED_CODEC_NONE && m->dtype != DED_DTYPE_F32))
    return DED_ERR_PROTO;
  /* A floor as well as a ceiling: one-element chunks would make every
   * member queue a frame per element. */
  uint64_t chunk_bytes = (uint64_t)m->chunk_elems * ded_dtype_size(m->dtype);
  if (chunk_bytes < DED_CHUNK_BYTES_MIN || chunk_bytes > DED_CHUNK_BYTES_MAX) return DED_ERR_PROTO;
  if (m->k == 0 || m->k > DED_ROUND_MEMBERS_MAX || m->nacc > DED_ROUND_MEMBERS_MAX)
    return DED_ERR_PROTO;
  if (ded_rd_left(r) < (size_t)m->k * DED_COMMIT_MEMBER_BYTES) return DED_ERR_PROTO;
  m->members = ded_mem_calloc(mem, m->k, sizeof *m->members);
  if (!m->members) return DED_ERR_NOMEM;
  for (unsigned i = 0; i < m->k; i++) {
    ded_rd_bytes(r, m->members[i].id, DED_ID_BYTES);
    m->members[i].weight = ded_rd_f64(r);
    m->members[i].n_local = ded_rd_u32(r);
    m->members[i].shard_off = ded_rd_u64(r);
    m->members[i].flags = ded_rd_u8(r);
  }
  int rv = r->err ? DED_ERR_PROTO : msg_commit_check(m);
  if (rv) ded_msg_commit_free(m, mem);
  return rv;
}

int ded_msg_commit_decode(const uint8_t *p, size_t len, const ded_mem *mem, ded_msg_commit *m) {
  ded_rd r = ded_rd_init(p, len);
  int rv = msg_commit_body_rd(&r, mem, m);
  if (rv == 0 && !ded_rd_done(&r)) {
    ded_msg_commit_free(m, mem);
    rv = DED_ERR_PROTO;
  }
  return rv;
}

void ded_msg_commit_free(ded_msg_commit *m, const ded_mem *mem) {
  ded_mem_free(mem, m->members);
  m->members = NULL;
}

int ded_msg_commit_copy(ded_msg_commit *dst, const ded_msg_commit *src, const ded_mem *mem) {
  *dst = *src;
  dst->members = ded_mem_malloc(mem, (size_t)src->k * sizeof *src->members);
  if (!dst->members) return DED_ERR_NOMEM;
  memcpy(dst->members, src->members, (size_t)src->k * sizeof *src->members);
  return 0;
}

int ded_msg_decide_decode(const uint8_t *p, size_t len, const ded_mem *mem, ded_msg_decide *m) {
  ded_rd r = ded_rd_init(p, len);
  memset(m, 0, sizeof *m);
  m->round = ded_rd_u64(&r);
  m->view = ded_rd_u32(&r);
  m->flags = ded_rd_u8(&r);
  if (r.err || m->flags & ~DED_DECIDE_F_CHOSEN) return DED_ERR_PROTO;
  int rv = msg_commit_body_rd(&r, mem, &m->plan);
  if (rv) return rv;
  rv = DED_ERR_PROTO;
  if (m->plan.round == m->round && ded_rd_left(&r) == 2 * (size_t)m->plan.k) {
    m->holders = ded_mem_malloc(mem, (size_t)m->plan.k * sizeof *m->holders);
    rv = m->holders ? 0 : DED_ERR_NOMEM;
    for (unsigned i = 0; rv == 0 && i < m->plan.k; i++) {
      m->holders[i] = ded_rd_u16(&r);
      if (m->holders[i] >= m->plan.k) rv = DED_ERR_PROTO;
    }
  }
  if (rv) ded_msg_decide_free(m, mem);
  return rv;
}

void ded_msg_decide_free(ded_msg_decide *m, const ded_mem *mem) {
  ded_msg_commit_free(&m->plan, mem);
  ded_mem_free(mem, m->holders);
  m->holders = NULL;
}

int ded_msg_fetch_decode(const uint8_t *p, size_t len, ded_msg_fetch *m) {
  ded_rd r = ded_rd_init(p, len);
  m->round = ded_rd_u64(&r);
  m->attempt = ded_rd_u64(&r);
  m->shard = ded_rd_u16(&r);
  if (!ded_rd_done(&r) || m->shard >= DED_ROUND_MEMBERS_MAX) return DED_ERR_PROTO;
  return 0;
}

int ded_msg_have_decode(const uint8_t *p, size_t len, ded_msg_have *m) {
  ded_rd r = ded_rd_init(p, len);
  m->round = ded_rd_u64(&r);
  m->attempt = ded_rd_u64(&r);
  m->view = ded_rd_u32(&r);
  m->flags = ded_rd_u8(&r);
  ded_rd_bytes(&r, m->digest, DED_RESULT_DIGEST_BYTES);
  if (!ded_rd_done(&r) || m->flags & ~DED_HAVE_F_DONE || m->attempt == 0) return DED_ERR_PROTO;
  return 0;
}

int ded_msg_probe_decode(const uint8_t *p, size_t len, ded_msg_probe *m) {
  ded_rd r = ded_rd_init(p, len);
  m->round = ded_rd_u64(&r);
  m->view = ded_rd_u32(&r);
  return ded_rd_done(&r) ? 0 : DED_ERR_PROTO;
}

int ded_msg_abstain_decode(const uint8_t *p, size_t len, ded_msg_abstain *m) {
  ded_rd r = ded_rd_init(p, len);
  m->round = ded_rd_u64(&r);
  return ded_rd_done(&r) && m->round > 0 ? 0 : DED_ERR_PROTO;
}

int ded_msg_redirect_decode(const uint8_t *p, size_t len, ded_msg_redirect *m) {
  ded_rd r = ded_rd_init(p, len);
  m->round = ded_rd_u64(&r);
  m->view = ded_rd_u32(&r);
  ded_rd_bytes(&r, m->id, DED_ID_BYTES);
  return ded_rd_done(&r) ? 0 : DED_ERR_PROTO;
}

int ded_msg_data_decode(const uint8_t *p, size_t len, ded_msg_data *m) {
  ded_rd r = ded_rd_init(p, len);
  m->round = ded_rd_u64(&r);
  m->attempt = ded_rd_u64(&r);
  m->offset = ded_rd_u64(&r);
  m->codec = ded_rd_u8(&r);
  if (r.err) return DED_ERR_PROTO;
  m->len = ded_rd_left(&r);
  m->elems = ded_rd_ptr(&r, m->len);
  if (m->len == 0 || m->offset > DED_COUNT_MAX || m->codec > DED_CODEC_KIND_MAX)
    return DED_ERR_PROTO;
  return 0;
}

int ded_msg_speed_decode(const uint8_t *p, size_t len, ded_msg_speed *m) {
  ded_rd r = ded_rd_init(p, len);
  m->want = ded_rd_u32(&r);
  if (r.err || m->want > DED_SPEED_WANT_MAX) return DED_ERR_PROTO;
  m->len = ded_rd_left(&r);
  m->fill = ded_rd_ptr(&r, m->len);
  return 0;
}

int ded_msg_leave_decode(const uint8_t *p, size_t len, uint8_t *reason) {
  ded_rd r = ded_rd_init(p, len);
  *reason = ded_rd_u8(&r);
  if (!ded_rd_done(&r)) return DED_ERR_PROTO;
  return (*reason >= DED_LEAVE_FINALIZE && *reason <= DED_LEAVE_REASON_MAX) ? 0 : DED_ERR_PROTO;
}

int ded_msg_stale_decode(const uint8_t *p, size_t len, ded_msg_stale *m) {
  ded_rd r = ded_rd_init(p, len);
  m->round = ded_rd_u64(&r);
  m->next_round = ded_rd_u64(&r);
  if (!ded_rd_done(&r) || m->next_round <= m->round) return DED_ERR_PROTO;
  return 0;
}

int ded_msg_ahead_decode(const uint8_t *p, size_t len, ded_msg_stale *m) {
  return ded_msg_stale_decode(p, len, m);
}

int ded_msg_state_ask_decode(const uint8_t *p, size_t len, ded_msg_state_ask *m) {
  ded_rd r = ded_rd_init(p, len);
  m->min_round = ded_rd_u64(&r);
  ded_rd_bytes(&r, m->origin, DED_ID_BYTES);
  if (!ded_rd_done(&r)) return DED_ERR_PROTO;
  bool any = true;
  for (unsigned i = 0; i < DED_ID_BYTES; i++) any = any && m->origin[i] == 0;
  return any || m->min_round == 0 ? 0 : DED_ERR_PROTO;
}

int ded_msg_state_offer_decode(const uint8_t *p, size_t len, ded_msg_state_offer *m) {
  ded_rd r = ded_rd_init(p, len);
  memset(m, 0, sizeof *m);
  m->status = ded_rd_u8(&r);
  m->round = ded_rd_u64(&r);
  m->pos = ded_rd_u64(&r);
  m->digest = ded_rd_u64(&r);
  m->step_rounds = ded_rd_u32(&r);
  m->len = ded_rd_u64(&r);
  if (r.err || m->status > DED_STATE_FOUNDING || m->len > DED_STATE_BYTES_MAX ||
      m->pos > DED_POS_MAX)
    return DED_ERR_PROTO;
  m->lin_attempt = ded_rd_u64(&r);
  m->nlin = ded_rd_u16(&r);
  if (r.err || m->nlin > DED_ROUND_MEMBERS_MAX) return DED_ERR_PROTO;
  m->lin = ded_rd_ptr(&r, DED_LIN_BYTES(m->nlin));
  if (!ded_rd_done(&r)) return DED_ERR_PROTO;
  if (m->nlin % 8 && m->lin[DED_LIN_BYTES(m->nlin) - 1] >> (m->nlin % 8)) return DED_ERR_PROTO;
  if (m->status == DED_STATE_FOUNDING)
    return m->round == 0 && m->nlin == 1 && !(m->lin[DED_ID_BYTES] & 1) && !m->pos &&
                   !m->step_rounds && !m->lin_attempt
               ? 0
               : DED_ERR_PROTO;
  if (m->status != DED_STATE_OFFER) /* fields a status does not use are zero */
    return m->step_rounds || m->pos || m->len || m->lin_attempt || m->nlin ||
                   (m->status != DED_STATE_PENDING && m->status != DED_STATE_GONE && m->round) ||
                   (m->status != DED_STATE_GONE && m->digest)
               ? DED_ERR_PROTO
               : 0;
  /* No lineage (and attempt 0): a backbone's checkpoint, whose rounds
   * start anew at its round (docs/architecture.md, "Checkpoints"). */
  if (m->round == 0 || m->step_rounds == 0 || m->step_rounds > DED_STATE_STEP_ROUNDS_MAX ||
      (m->nlin == 0) != (m->lin_attempt == 0))
    return DED_ERR_PROTO;
  /* The lineage is a round's membership: ids strictly increasing, as in COMMIT. */
  for (unsigned i = 1; i < m->nlin; i++)
    if (memcmp(m->lin + (size_t)(i - 1) * DED_ID_BYTES, m->lin + (size_t)i * DED_ID_BYTES,
               DED_ID_BYTES) >= 0)
      return DED_ERR_PROTO;
  return 0;
}

int ded_msg_state_get_decode(const uint8_t *p, size_t len, ded_msg_state_get *m) {
  ded_rd r = ded_rd_init(p, len);
  m->round = ded_rd_u64(&r);
  m->digest = ded_rd_u64(&r);
  m->offset = ded_rd_u64(&r);
  m->len = ded_rd_u32(&r);
  if (!ded_rd_done(&r) || m->len == 0 || m->len > DED_STATE_GET_BYTES_MAX ||
      m->offset >= DED_STATE_BYTES_MAX)
    return DED_ERR_PROTO;
  return 0;
}

int ded_msg_state_data_decode(const uint8_t *p, size_t len, ded_msg_state_data *m) {
  ded_rd r = ded_rd_init(p, len);
  m->round = ded_rd_u64(&r);
  m->digest = ded_rd_u64(&r);
  m->offset = ded_rd_u64(&r);
  if (r.err) return DED_ERR_PROTO;
  m->len = ded_rd_left(&r);
  m->bytes = ded_rd_ptr(&r, m->len);
  if (m->len == 0 || m->len > DED_STATE_GET_BYTES_MAX || m->offset >= DED_STATE_BYTES_MAX)
    return DED_ERR_PROTO;
  return 0;
}

int ded_msg_records_begin_rd(ded_msg_records_rd *it, const uint8_t *p, size_t len) {
  it->r = ded_rd_init(p, len);
  it->left = ded_rd_u16(&it->r);
  if (it->r.err || it->left > DED_RECORDS_PER_FRAME_MAX) return DED_ERR_PROTO;
  return 0;
}

int ded_msg_records_next(ded_msg_records_rd *it, const uint8_t **rec, size_t *len) {
  if (it->left == 0) return ded_rd_done(&it->r) ? 0 : DED_ERR_PROTO;
  *len = ded_rd_u16(&it->r);
  *rec = ded_rd_ptr(&it->r, *len);
  if (it->r.err || *len > DED_RECORD_BYTES_MAX) return DED_ERR_PROTO;
  it->left--;
  return 1;
}
