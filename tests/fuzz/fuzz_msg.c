/*
 * fuzz_msg.c: every message decoder, on payloads a peer chose.
 *
 * Input: u8 selector | payload. The selector picks the decoder
 * (FUZZ_MSG_TYPES). Besides the sanitizers, these properties are checked:
 * a payload that decodes is canonical, i.e. encoding what was decoded
 * gives back exactly the same bytes (a decoder that accepted two
 * spellings of one message, or lost a field, would fail that); what
 * decodes keeps the invariants of ded_msg.h (plans of COMMIT, DECIDE and
 * JOIN with status, their acceptors, clients and aux members included;
 * holders; bitmaps; the flags of JOIN, DECIDE and HAVE; the bounds of a
 * state snapshot, its lineage's client bits and the coordinators drawn
 * from it, and the ranges fetched of it); and the decoders that allocate
 * give everything back, through their _free or by themselves on error.
 */
#include <math.h>
#include <string.h>

#include "fuzz.h"

#include "core/ded_err.h"
#include "core/ded_limits.h"
#include "core/ded_msg.h"
#include "dht/ded_record.h"

/* Checks that |w| holds one frame of |type| whose payload is |p|/|len|. */
static void check_reencoded(const ded_wr *w, uint8_t type, const uint8_t *p, size_t len) {
  FUZZ_CHECK(!w->err);
  FUZZ_CHECK(w->pos == DED_FRAME_HDR_BYTES + len);
  uint8_t hdr[DED_FRAME_HDR_BYTES];
  ded_frame_put_hdr(hdr, type, len);
  FUZZ_CHECK(memcmp(w->p, hdr, sizeof hdr) == 0);
  FUZZ_CHECK(len == 0 || memcmp(w->p + DED_FRAME_HDR_BYTES, p, len) == 0);
}

/* A record inside HELLO or RECORDS: decoded, it re-encodes to itself. */
static void check_record(const uint8_t *p, size_t len) {
  ded_record rec;
  if (ded_record_decode(p, len, &rec) != 0) return;
  uint8_t buf[DED_RECORD_BYTES_MAX];
  int n = ded_record_encode(&rec, buf, sizeof buf);
  FUZZ_CHECK(n >= 0 && (size_t)n == len && memcmp(buf, p, len) == 0);
  uint8_t run_id[DED_RUN_ID_BYTES];
  ded_hash32(FUZZ_RUN, FUZZ_RUN_LEN, run_id);
  int rv = ded_record_verify(&rec, run_id, FUZZ_NOW_MS);
  FUZZ_CHECK(rv == 0 || rv == DED_ERR_SIGNATURE || rv == DED_ERR_WRONG_RUN ||
             rv == DED_ERR_EXPIRED);
}

static void fuzz_hello(const uint8_t *p, size_t len, uint8_t *out, size_t cap) {
  ded_msg_hello h;
  int rv = ded_msg_hello_decode(p, len, &h);
  FUZZ_CHECK(rv == 0 || rv == DED_ERR_PROTO || rv == DED_ERR_VERSION);
  if (rv) return;
  FUZZ_CHECK(h.rec_len <= DED_RECORD_BYTES_MAX);
  FUZZ_CHECK(h.rec >= p && h.rec + h.rec_len == p + len);
  ded_wr w = ded_wr_init(out, cap);
  ded_msg_hello_encode(&w, h.run_id, h.rec, h.rec_len);
  check_reencoded(&w, DED_MSG_HELLO, p, len);
  check_record(h.rec, h.rec_len);
}

static void fuzz_records(const uint8_t *p, size_t len, uint8_t *out, size_t cap) {
  ded_msg_records_rd it;
  if (ded_msg_records_begin_rd(&it, p, len) != 0) return;
  ded_wr w = ded_wr_init(out, cap);
  ded_msg_records_wr rw;
  ded_msg_records_begin(&rw, &w);
  const uint8_t *rec;
  size_t rec_len;
  int rv;
  unsigned n = 0;
  while ((rv = ded_msg_records_next(&it, &rec, &rec_len)) == 1) {
    FUZZ_CHECK(rec >= p && rec + rec_len <= p + len && rec_len <= DED_RECORD_BYTES_MAX);
    FUZZ_CHECK(++n <= DED_RECORDS_PER_FRAME_MAX);
    FUZZ_CHECK(ded_msg_records_add(&rw, rec, rec_len) == 0);
    check_record(rec, rec_len);
  }
  FUZZ_CHECK(rv == 0 || rv == DED_ERR_PROTO);
  if (rv) return;
  ded_msg_records_end(&rw);
  check_reencoded(&w, DED_MSG_RECORDS, p, len);
}

/* A counting allocator for the decoders that allocate: whatever one hands
 * out must be back by the end of the input (in every build, not only
 * under LeakSanitizer). */
static long fuzz_live;

static void *fuzz_malloc(size_t size, void *user) {
  (void)user;
  void *p = malloc(size ? size : 1);
  if (p) fuzz_live++;
  return p;
}

static void fuzz_free(void *ptr, void *user) {
  (void)user;
  if (!ptr) return;
  fuzz_live--;
  free(ptr);
}

static void *fuzz_calloc(size_t nmemb, size_t size, void *user) {
  (void)user;
  void *p = calloc(nmemb ? nmemb : 1, size ? size : 1);
  if (p) fuzz_live++;
  return p;
}

static void *fuzz_realloc(void *ptr, size_t size, void *user) {
  (void)user;
  void *p = realloc(ptr, size ? size : 1);
  if (p && !ptr) fuzz_live++;
  return p;
}

static const ded_mem fuzz_mem = {NULL, fuzz_malloc, fuzz_free, fuzz_calloc, fuzz_realloc};

/* The invariants the engine builds on (ded_msg.h) for a decoded plan. */
static void check_plan(const ded_msg_commit *c) {
  FUZZ_CHECK(c->members != NULL);
  FUZZ_CHECK(ded_dtype_size(c->dtype) != 0 && c->count > 0 && c->count <= DED_COUNT_MAX);
  FUZZ_CHECK(c->k >= 1 && c->k <= DED_ROUND_MEMBERS_MAX && c->members[0].shard_off == 0);
  FUZZ_CHECK(c->nacc <= DED_ROUND_MEMBERS_MAX);
  uint64_t chunk_bytes = (uint64_t)c->chunk_elems * ded_dtype_size(c->dtype);
  FUZZ_CHECK(chunk_bytes >= DED_CHUNK_BYTES_MIN && chunk_bytes <= DED_CHUNK_BYTES_MAX);
  double total = 0.0;
  unsigned acc = 0, primary = 0, contributors = 0, founders = 0;
  for (unsigned i = 0; i < c->k; i++) {
    /* Acceptors that can make a quorum: known flags only, a primary only
     * among the acceptors. */
    uint8_t fl = c->members[i].flags;
    FUZZ_CHECK((fl & ~(DED_MEMBER_F_ACCEPTOR | DED_MEMBER_F_PRIMARY | DED_MEMBER_F_CLIENT |
                       DED_MEMBER_F_AUX | DED_MEMBER_F_FOUNDER)) == 0);
    /* One founder at most, never an aux member. */
    FUZZ_CHECK(!(fl & DED_MEMBER_F_FOUNDER) || !(fl & DED_MEMBER_F_AUX));
    founders += (fl & DED_MEMBER_F_FOUNDER) != 0;
    FUZZ_CHECK(!(fl & DED_MEMBER_F_PRIMARY) || (fl & DED_MEMBER_F_ACCEPTOR));
    /* A client or an aux member, not both; an aux member brings no
     * vector (weight 0), the others are the contributors. */
    FUZZ_CHECK(!(fl & DED_MEMBER_F_CLIENT) || !(fl & DED_MEMBER_F_AUX));
    FUZZ_CHECK(!(fl & DED_MEMBER_F_AUX) || c->members[i].weight == 0.0);
    contributors += !(fl & DED_MEMBER_F_AUX);
    acc += (fl & DED_MEMBER_F_ACCEPTOR) != 0;
    primary += (fl & DED_MEMBER_F_PRIMARY) != 0;
    if (i > 0) {
      FUZZ_CHECK(memcmp(c->members[i - 1].id, c->members[i].id, DED_ID_BYTES) < 0);
      FUZZ_CHECK(c->members[i - 1].shard_off <= c->members[i].shard_off);
    }
    FUZZ_CHECK(c->members[i].shard_off <= c->count && c->members[i].n_local > 0);
    FUZZ_CHECK(c->members[i].weight >= 0.0 && c->members[i].weight <= DED_WEIGHT_MAX);
    total += c->members[i].weight;
  }
  FUZZ_CHECK(total > 0.0 && isfinite(total) && contributors >= 1);
  FUZZ_CHECK(acc >= 1 && acc <= c->nacc && primary <= 1 && founders <= 1);
}

/* A deep copy of a decoded plan: equal, in memory of its own. */
static void check_plan_copy(const ded_msg_commit *c) {
  ded_msg_commit copy;
  FUZZ_CHECK(ded_msg_commit_copy(&copy, c, &fuzz_mem) == 0);
  FUZZ_CHECK(copy.members != c->members);
  FUZZ_CHECK(copy.round == c->round && copy.attempt == c->attempt && copy.base == c->base &&
             copy.dtype == c->dtype && copy.count == c->count &&
             copy.chunk_elems == c->chunk_elems && copy.k == c->k && copy.nacc == c->nacc);
  FUZZ_CHECK(memcmp(copy.members, c->members, (size_t)c->k * sizeof *c->members) == 0);
  ded_msg_commit_free(&copy, &fuzz_mem);
  FUZZ_CHECK(copy.members == NULL);
}

static void fuzz_join(const uint8_t *p, size_t len, uint8_t *out, size_t cap) {
  ded_msg_join j;
  int rv = ded_msg_join_decode(p, len, &fuzz_mem, &j);
  FUZZ_CHECK(rv == 0 || rv == DED_ERR_PROTO);
  if (rv) {
    FUZZ_CHECK(j.plan.members == NULL); /* nothing to free on error */
    return;
  }
  FUZZ_CHECK(ded_dtype_size(j.dtype) != 0 && j.count > 0 && j.count <= DED_COUNT_MAX);
  FUZZ_CHECK(j.weight >= 0.0 && j.weight <= DED_WEIGHT_MAX && j.n_local > 0);
  FUZZ_CHECK((j.flags & ~(DED_JOIN_F_GENESIS | DED_JOIN_F_STATUS | DED_JOIN_F_INTENT |
                          DED_JOIN_F_DONE | DED_JOIN_F_CLIENT | DED_JOIN_F_AUX |
                          DED_JOIN_F_VOID | DED_JOIN_F_HELD)) == 0);
  /* Vouching for rounds with no result: at least one round between the
   * result named (attempt nonzero) and this one; never in a first round
   * nor in an intent. */
  if (j.flags & DED_JOIN_F_VOID) {
    FUZZ_CHECK(j.void_attempt != 0 && j.void_round < j.round && j.void_round + 1 < j.round);
    FUZZ_CHECK(!(j.flags & (DED_JOIN_F_GENESIS | DED_JOIN_F_INTENT)));
  } else {
    FUZZ_CHECK(j.void_round == 0 && j.void_attempt == 0);
  }
  /* Out of step, holding the result of round held_round - 1 (0: none,
   * and then no attempt), before this round's; never with VOID, in a
   * first round or in an intent. */
  if (j.flags & DED_JOIN_F_HELD) {
    FUZZ_CHECK(j.held_round < j.round && (j.held_round != 0 || j.held_attempt == 0));
    FUZZ_CHECK(!(j.flags & (DED_JOIN_F_GENESIS | DED_JOIN_F_INTENT | DED_JOIN_F_VOID)));
  } else {
    FUZZ_CHECK(j.held_round == 0 && j.held_attempt == 0);
  }
  /* A client or an aux peer, not both. */
  FUZZ_CHECK(!(j.flags & DED_JOIN_F_CLIENT) || !(j.flags & DED_JOIN_F_AUX));
  ded_wr w = ded_wr_init(out, cap);
  if (j.flags & DED_JOIN_F_STATUS) {
    /* A failover report: the view it accepted in (acc_view, any value),
     * an attempt of this very round, and a bitmap of ceil(k/8) bytes in
     * the payload, unused bits zero. */
    check_plan(&j.plan);
    FUZZ_CHECK(j.plan.round == j.round);
    size_t nb = ((size_t)j.plan.k + 7) / 8;
    FUZZ_CHECK(j.have != NULL && j.have >= p && j.have + nb == p + len);
    if (j.plan.k % 8) FUZZ_CHECK((j.have[nb - 1] >> (j.plan.k % 8)) == 0);
    check_plan_copy(&j.plan);
    ded_msg_join_status_encode(&w, &j, &j.plan, j.have);
  } else {
    /* DONE only comes with a status. */
    FUZZ_CHECK(!(j.flags & DED_JOIN_F_DONE));
    FUZZ_CHECK(j.plan.members == NULL && j.have == NULL);
    ded_msg_join_encode(&w, &j);
  }
  check_reencoded(&w, DED_MSG_JOIN, p, len);
  ded_msg_join_free(&j, &fuzz_mem);
  FUZZ_CHECK(j.plan.members == NULL && j.have == NULL);
}

static void fuzz_commit(const uint8_t *p, size_t len, uint8_t *out, size_t cap) {
  ded_msg_commit c;
  int rv = ded_msg_commit_decode(p, len, &fuzz_mem, &c);
  FUZZ_CHECK(rv == 0 || rv == DED_ERR_PROTO);
  if (rv) {
    FUZZ_CHECK(c.members == NULL);
    return;
  }
  check_plan(&c);
  check_plan_copy(&c);
  ded_wr w = ded_wr_init(out, cap);
  ded_msg_commit_encode(&w, &c);
  check_reencoded(&w, DED_MSG_COMMIT, p, len);
  ded_msg_commit_free(&c, &fuzz_mem);
  FUZZ_CHECK(c.members == NULL);
}

static void fuzz_decide(const uint8_t *p, size_t len, uint8_t *out, size_t cap) {
  ded_msg_decide d;
  int rv = ded_msg_decide_decode(p, len, &fuzz_mem, &d);
  FUZZ_CHECK(rv == 0 || rv == DED_ERR_PROTO);
  if (rv) {
    FUZZ_CHECK(d.plan.members == NULL && d.holders == NULL);
    return;
  }
  check_plan(&d.plan);
  FUZZ_CHECK(d.plan.round == d.round);
  FUZZ_CHECK((d.flags & ~DED_DECIDE_F_CHOSEN) == 0);
  FUZZ_CHECK(d.holders != NULL);
  for (unsigned s = 0; s < d.plan.k; s++) FUZZ_CHECK(d.holders[s] < d.plan.k);
  check_plan_copy(&d.plan);
  ded_wr w = ded_wr_init(out, cap);
  ded_msg_decide_encode(&w, d.view, d.flags, &d.plan, d.holders);
  check_reencoded(&w, DED_MSG_DECIDE, p, len);
  ded_msg_decide_free(&d, &fuzz_mem);
  FUZZ_CHECK(d.plan.members == NULL && d.holders == NULL);
}

/* A STATE_OFFER: the limits of ded_limits.h, sizes that add up to len,
 * the lineage (ids, then client bits, the unused ones zero) last in the
 * payload, and what a snapshot must carry; the coordinators drawn from
 * the lineage are members of it, and clients only when all are. */
static void fuzz_state_offer(const uint8_t *p, size_t len, uint8_t *out, size_t cap) {
  ded_msg_state_offer m;
  int rv = ded_msg_state_offer_decode(p, len, &m);
  FUZZ_CHECK(rv == 0 || rv == DED_ERR_PROTO);
  if (rv) return;
  FUZZ_CHECK(m.status <= DED_STATE_FOUNDING);
  FUZZ_CHECK(m.len <= DED_STATE_BYTES_MAX);
  FUZZ_CHECK(m.nlin <= DED_ROUND_MEMBERS_MAX);
  /* status | round | pos | digest | step_rounds | len | lin_attempt | nlin,
   * then the ids and the client bits. */
  FUZZ_CHECK(m.pos <= DED_POS_MAX);
  FUZZ_CHECK(m.lin == p + 1 + 8 + 8 + 8 + 4 + 8 + 8 + 2);
  FUZZ_CHECK(m.lin + DED_LIN_BYTES(m.nlin) == p + len);
  if (m.nlin % 8) FUZZ_CHECK((m.lin[DED_LIN_BYTES(m.nlin) - 1] >> (m.nlin % 8)) == 0);
  if (m.nlin) {
    unsigned eligible = 0;
    for (unsigned i = 0; i < m.nlin; i++) eligible += !ded_lin_client(m.lin, m.nlin, i);
    for (uint32_t v = 0; v < 3; v++) {
      const uint8_t *c = ded_lin_coord(m.lin, m.nlin, m.round, v);
      FUZZ_CHECK(c >= m.lin && c < m.lin + (size_t)m.nlin * DED_ID_BYTES);
      size_t at = (size_t)(c - m.lin);
      FUZZ_CHECK(at % DED_ID_BYTES == 0);
      FUZZ_CHECK(eligible == 0 || !ded_lin_client(m.lin, m.nlin, (unsigned)(at / DED_ID_BYTES)));
    }
  }
  if (m.status == DED_STATE_OFFER)
    /* No lineage, with attempt 0: a backbone's checkpoint (protocol 12). */
    FUZZ_CHECK(m.round > 0 && m.step_rounds >= 1 && m.step_rounds <= DED_STATE_STEP_ROUNDS_MAX &&
               (m.nlin >= 1) == (m.lin_attempt != 0));
  if (m.status == DED_STATE_FOUNDING)
    FUZZ_CHECK(m.round == 0 && m.nlin == 1 && !ded_lin_client(m.lin, 1, 0) && m.step_rounds == 0);
  ded_wr w = ded_wr_init(out, cap);
  ded_msg_state_offer_encode(&w, &m);
  check_reencoded(&w, DED_MSG_STATE_OFFER, p, len);
}

static void fuzz_small(uint8_t type, const uint8_t *p, size_t len, uint8_t *out, size_t cap) {
  ded_wr w = ded_wr_init(out, cap);
  int rv;
  switch (type) {
  case DED_MSG_REDIRECT: {
    ded_msg_redirect m;
    rv = ded_msg_redirect_decode(p, len, &m);
    if (rv == 0) ded_msg_redirect_encode(&w, &m);
    break;
  }
  case DED_MSG_SPEED: {
    ded_msg_speed m;
    rv = ded_msg_speed_decode(p, len, &m);
    if (rv == 0) {
      FUZZ_CHECK(m.want <= DED_SPEED_WANT_MAX && m.fill == p + 4 && m.len == len - 4);
      uint8_t h[DED_SPEED_HDR_BYTES];
      ded_msg_speed_hdr_encode(h, m.want, m.len);
      ded_wr_bytes(&w, h, sizeof h);
      ded_wr_bytes(&w, m.fill, m.len);
    }
    break;
  }
  case DED_MSG_LEAVE: {
    uint8_t reason;
    rv = ded_msg_leave_decode(p, len, &reason);
    if (rv == 0) ded_msg_leave_encode(&w, reason);
    break;
  }
  case DED_MSG_STALE: {
    ded_msg_stale m;
    rv = ded_msg_stale_decode(p, len, &m);
    if (rv == 0) {
      FUZZ_CHECK(m.next_round > m.round);
      ded_msg_stale_encode(&w, &m);
    }
    break;
  }
  case DED_MSG_AHEAD: {
    ded_msg_stale m;
    rv = ded_msg_ahead_decode(p, len, &m);
    if (rv == 0) {
      FUZZ_CHECK(m.next_round > m.round);
      ded_msg_ahead_encode(&w, &m);
    }
    break;
  }
  case DED_MSG_FETCH: {
    ded_msg_fetch m;
    rv = ded_msg_fetch_decode(p, len, &m);
    if (rv == 0) {
      FUZZ_CHECK(m.shard < DED_ROUND_MEMBERS_MAX);
      ded_msg_fetch_encode(&w, &m);
    }
    break;
  }
  case DED_MSG_HAVE: {
    ded_msg_have m;
    rv = ded_msg_have_decode(p, len, &m);
    if (rv == 0) {
      FUZZ_CHECK(m.attempt != 0 && (m.flags & ~DED_HAVE_F_DONE) == 0);
      ded_msg_have_encode(&w, &m);
    }
    break;
  }
  case DED_MSG_PROBE: {
    ded_msg_probe m;
    rv = ded_msg_probe_decode(p, len, &m);
    if (rv == 0) ded_msg_probe_encode(&w, &m);
    break;
  }
  case DED_MSG_ABSTAIN: {
    ded_msg_abstain m;
    rv = ded_msg_abstain_decode(p, len, &m);
    if (rv == 0) {
      FUZZ_CHECK(m.round > 0);
      ded_msg_abstain_encode(&w, &m);
    }
    break;
  }
  case DED_MSG_STATE_ASK: {
    ded_msg_state_ask m;
    rv = ded_msg_state_ask_decode(p, len, &m);
    if (rv == 0) ded_msg_state_ask_encode(&w, &m);
    break;
  }
  case DED_MSG_STATE_GET: {
    ded_msg_state_get m;
    rv = ded_msg_state_get_decode(p, len, &m);
    if (rv == 0) {
      FUZZ_CHECK(m.len >= 1 && m.len <= DED_STATE_GET_BYTES_MAX);
      FUZZ_CHECK(m.offset < DED_STATE_BYTES_MAX);
      ded_msg_state_get_encode(&w, &m);
    }
    break;
  }
  case DED_MSG_STATE_DATA: { /* the header is encoded apart from the bytes */
    ded_msg_state_data d;
    rv = ded_msg_state_data_decode(p, len, &d);
    const size_t hdr = DED_STATE_DATA_HDR_BYTES - DED_FRAME_HDR_BYTES;
    if (rv == 0) {
      FUZZ_CHECK(d.len >= 1 && d.len <= DED_STATE_GET_BYTES_MAX);
      FUZZ_CHECK(d.bytes == p + hdr && d.len == len - hdr);
      FUZZ_CHECK(d.offset < DED_STATE_BYTES_MAX);
      uint8_t h[DED_STATE_DATA_HDR_BYTES];
      ded_msg_state_data_hdr_encode(h, d.round, d.digest, d.offset, d.len);
      ded_wr_bytes(&w, h, sizeof h);
      ded_wr_bytes(&w, d.bytes, d.len);
    }
    break;
  }
  default: { /* DATA, RESULT: the header is encoded apart from the elements */
    ded_msg_data d;
    rv = ded_msg_data_decode(p, len, &d);
    const size_t hdr = DED_DATA_HDR_BYTES - DED_FRAME_HDR_BYTES;
    if (rv == 0) {
      FUZZ_CHECK(d.len > 0 && d.elems == p + hdr && d.len == len - hdr);
      FUZZ_CHECK(d.offset <= DED_COUNT_MAX);
      uint8_t h[DED_DATA_HDR_BYTES];
      ded_msg_data_hdr_encode(h, type, d.round, d.attempt, d.offset, d.codec, d.len);
      ded_wr_bytes(&w, h, sizeof h);
      ded_wr_bytes(&w, d.elems, d.len);
    }
  }
  }
  FUZZ_CHECK(rv == 0 || rv == DED_ERR_PROTO);
  if (rv == 0) check_reencoded(&w, type, p, len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const uint8_t types[FUZZ_MSG_NTYPES] = FUZZ_MSG_TYPES;
  if (size < 1 || size - 1 + DED_FRAME_HDR_BYTES > DED_FRAME_MAX) return 0;
  uint8_t type = types[data[0] % FUZZ_MSG_NTYPES];
  const uint8_t *p = data + 1;
  size_t len = size - 1;
  /* Room for the re-encoded frame: never more than the payload plus the
   * header, since decoders take no more than they are given. */
  size_t cap = len + DED_FRAME_HDR_BYTES;
  uint8_t *out = malloc(cap);
  FUZZ_CHECK(out);
  switch (type) {
  case DED_MSG_HELLO: fuzz_hello(p, len, out, cap); break;
  case DED_MSG_RECORDS: fuzz_records(p, len, out, cap); break;
  case DED_MSG_JOIN: fuzz_join(p, len, out, cap); break;
  case DED_MSG_COMMIT: fuzz_commit(p, len, out, cap); break;
  case DED_MSG_DECIDE: fuzz_decide(p, len, out, cap); break;
  case DED_MSG_STATE_OFFER: fuzz_state_offer(p, len, out, cap); break;
  default: fuzz_small(type, p, len, out, cap); break;
  }
  free(out);
  FUZZ_CHECK(fuzz_live == 0); /* every decoder gave back what it took */
  return 0;
}
