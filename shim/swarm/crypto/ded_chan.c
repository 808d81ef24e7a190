/* ded_chan.c: the handshake's messages on the stream, then sealed records. */
#include "ded_chan.h"

#include <string.h>

#include "../core/ded_err.h"

/* Buffers: small while the handshake runs (a flood of half-open
 * connections holds little), a record's worth in and two out once open. */
#define CHAN_HS_CAP 256
/* The initiator's two messages may both wait unsent. */
DED_STATIC_ASSERT(DED_CHAN_MAGIC_BYTES + DED_NOISE_INITIATION_BYTES + DED_NOISE_FINAL_BYTES <=
                      CHAN_HS_CAP,
                  "handshake output");
#define CHAN_IN_CAP (DED_CHAN_HDR_BYTES + DED_CHAN_SEALED_MAX)
#define CHAN_RECORD_SPACE (DED_CHAN_HDR_BYTES + DED_CHAN_SEALED_MAX)
/* Records sealed ahead of the socket: one send() takes them all. */
#define CHAN_OUT_RECORDS 4
#define CHAN_OUT_CAP (CHAN_OUT_RECORDS * CHAN_RECORD_SPACE)

static void put_u32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}

static uint32_t get_u32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void out_put(ded_chan *ch, const uint8_t *p, size_t n) {
  DED_ASSERT(ch->out_len + n <= ch->out_cap);
  memcpy(ch->out + ch->out_len, p, n);
  ch->out_len += n;
}

static int chan_fail(ded_chan *ch, int rv, const char *why) {
  ch->failed = rv;
  ch->why = why;
  ded_noise_wipe(&ch->hs);
  ded_aead_wipe(&ch->tx);
  ded_aead_wipe(&ch->rx);
  return rv;
}

void ded_chan_notice_bytes(uint8_t reason, uint8_t out[DED_CHAN_NOTICE_BYTES]) {
  DED_STATIC_ASSERT(sizeof DED_CHAN_NOTICE_PREFIX == DED_CHAN_NOTICE_BYTES, "notice prefix");
  memcpy(out, DED_CHAN_NOTICE_PREFIX, DED_CHAN_NOTICE_BYTES - 1);
  out[DED_CHAN_NOTICE_BYTES - 1] = reason;
}

/* Responder: fails, leaving the notice of |reason| to write. */
static int chan_refuse(ded_chan *ch, int rv, const char *why, uint8_t reason) {
  chan_fail(ch, rv, why);
  uint8_t notice[DED_CHAN_NOTICE_BYTES];
  ded_chan_notice_bytes(reason, notice);
  ch->out_pos = ch->out_len = 0;
  out_put(ch, notice, sizeof notice);
  return rv;
}

int ded_chan_init(ded_chan *ch, const ded_mem *mem, const ded_ident *self, const uint8_t *psk,
                  const uint8_t run_id[DED_RUN_ID_BYTES], bool initiator, const uint8_t *expect_id,
                  const uint8_t eph[32], uint64_t now_ns) {
  memset(ch, 0, sizeof *ch);
  ch->mem = mem;
  ch->in = ded_mem_malloc(mem, CHAN_HS_CAP);
  ch->out = ded_mem_malloc(mem, CHAN_HS_CAP);
  ch->in_cap = ch->out_cap = CHAN_HS_CAP;
  if (!ch->in || !ch->out) {
    ded_chan_free(ch);
    return DED_ERR_NOMEM;
  }
  ded_noise_init(&ch->hs, self, psk, run_id, initiator);
  ch->tx.since_ns = now_ns;
  memcpy(ch->eph, eph, sizeof ch->eph);
  if (expect_id) {
    ch->expect = true;
    memcpy(ch->expect_id, expect_id, DED_ID_BYTES);
  }
  if (initiator) {
    uint8_t msg[DED_NOISE_INITIATION_BYTES];
    int rv = ded_noise_create_initiation(&ch->hs, ch->eph, msg);
    ded_wipe(ch->eph, sizeof ch->eph);
    DED_ASSERT(rv == 0); /* a fresh handshake is always in turn */
    out_put(ch, (const uint8_t *)DED_CHAN_MAGIC, DED_CHAN_MAGIC_BYTES);
    out_put(ch, msg, sizeof msg);
  }
  return 0;
}

void ded_chan_free(ded_chan *ch) {
  ded_noise_wipe(&ch->hs);
  ded_aead_wipe(&ch->tx);
  ded_aead_wipe(&ch->rx);
  ded_wipe(ch->eph, sizeof ch->eph);
  if (ch->in) ded_wipe(ch->in, ch->in_cap);
  if (ch->out) ded_wipe(ch->out, ch->out_cap);
  ded_mem_free(ch->mem, ch->in);
  ded_mem_free(ch->mem, ch->out);
  ch->in = ch->out = NULL;
}

/* |*buf| (|*cap| bytes, |used| of them kept) grown to |cap_new|. */
static int buf_grow(const ded_mem *mem, uint8_t **buf, size_t *cap, size_t used, size_t cap_new) {
  uint8_t *b = ded_mem_malloc(mem, cap_new);
  if (!b) return DED_ERR_NOMEM;
  memcpy(b, *buf, used);
  ded_wipe(*buf, *cap);
  ded_mem_free(mem, *buf);
  *buf = b;
  *cap = cap_new;
  return 0;
}

/* The handshake is established on our side: keys for each direction. */
static int chan_open(ded_chan *ch, const ded_chan_cb *cb, void *user) {
  if (buf_grow(ch->mem, &ch->in, &ch->in_cap, 0, CHAN_IN_CAP) ||
      buf_grow(ch->mem, &ch->out, &ch->out_cap, ch->out_len, CHAN_OUT_CAP))
    return chan_fail(ch, DED_ERR_NOMEM, "out of memory");
  ded_noise_keys keys;
  int rv = ded_noise_split(&ch->hs, &keys);
  DED_ASSERT(rv == 0);
  (void)rv;
  ded_aead_init(&ch->tx, keys.send, keys.aes256gcm, ch->tx.since_ns);
  ded_aead_init(&ch->rx, keys.recv, keys.aes256gcm, ch->tx.since_ns);
  ch->open = true;
  uint8_t pk[DED_PK_BYTES];
  memcpy(pk, keys.peer_pk, sizeof pk);
  ded_wipe(&keys, sizeof keys);
  if (!cb->open(user, pk)) ch->failed = DED_ERR_CLOSING;
  return 0;
}

/* Bytes the unit being gathered needs in all: a handshake message, a
 * record's header, or a whole record. */
static size_t chan_need(const ded_chan *ch) {
  if (ch->open) return ch->need ? ch->need : DED_CHAN_HDR_BYTES;
  switch (ch->hs.state) {
  case DED_NOISE_ZEROED:
    return DED_CHAN_MAGIC_BYTES + DED_NOISE_INITIATION_BYTES;
  case DED_NOISE_CREATED_INITIATION:
    return DED_NOISE_RESPONSE_BYTES;
  case DED_NOISE_CREATED_RESPONSE:
    return DED_NOISE_FINAL_BYTES;
  default:
    return 0;
  }
}

/* Responder: the first |ch->have| bytes, as far as they go, must be the
 * magic. Checked as they arrive: junk is refused at its first byte, not
 * held until a whole initiation's worth came (or never does). */
static int chan_check_magic(ded_chan *ch) {
  size_t n = ch->have < DED_CHAN_MAGIC_BYTES - 1 ? ch->have : DED_CHAN_MAGIC_BYTES - 1;
  if (memcmp(ch->in, DED_CHAN_MAGIC, n) != 0)
    return chan_fail(ch, DED_ERR_PROTO, "not a dedmpi peer");
  if (ch->have >= DED_CHAN_MAGIC_BYTES &&
      ch->in[DED_CHAN_MAGIC_BYTES - 1] != (uint8_t)DED_CHAN_MAGIC[DED_CHAN_MAGIC_BYTES - 1])
    return chan_refuse(ch, DED_ERR_VERSION, "another protocol version", DED_CHAN_NOTICE_VERSION);
  return 0;
}

/* Responder: the magic and the initiation in; the response out. */
static int chan_on_initiation(ded_chan *ch) {
  if (chan_check_magic(ch)) return ch->failed;
  /* mac1 failed (the initiation's own tag fails only under a sender that
   * knows the key and garbles it on purpose): the key or the run name. */
  if (ded_noise_consume_initiation(&ch->hs, ch->in + DED_CHAN_MAGIC_BYTES) != 0)
    return chan_refuse(ch, DED_ERR_AUTH, "handshake refused: another swarm key or run name",
                       DED_CHAN_NOTICE_KEY);
  uint8_t msg[DED_NOISE_RESPONSE_BYTES];
  int rv = ded_noise_create_response(&ch->hs, ch->eph, msg);
  ded_wipe(ch->eph, sizeof ch->eph);
  if (rv) return chan_fail(ch, DED_ERR_AUTH, "handshake refused: a degenerate ephemeral key");
  out_put(ch, msg, sizeof msg);
  return 0;
}

/* Initiator: a notice where the response begins (its first
 * DED_CHAN_NOTICE_BYTES are in): the peer's reason, as ch->why. */
static int chan_on_notice(ded_chan *ch) {
  uint8_t reason = ch->in[DED_CHAN_NOTICE_BYTES - 1];
  ch->notice = reason;
  switch (reason) {
  case DED_CHAN_NOTICE_KEY:
    return chan_fail(ch, DED_ERR_AUTH, "refused our key: another swarm key or run name");
  case DED_CHAN_NOTICE_VERSION:
    return chan_fail(ch, DED_ERR_VERSION, "refused our handshake: another protocol version");
  case DED_CHAN_NOTICE_FULL:
    return chan_fail(ch, DED_ERR_LIMIT, "turned us away: it has no room for another handshake "
                                        "from us now");
  case DED_CHAN_NOTICE_LEAVING:
    return chan_fail(ch, DED_ERR_PEER_LOST, "turned us away: it is leaving the run");
  default:
    ch->notice = 0;
    return chan_fail(ch, DED_ERR_PROTO, "refused our handshake for a reason we do not know "
                                        "(a newer version?)");
  }
}

static bool chan_is_notice(const ded_chan *ch) {
  return !ch->open && ch->hs.initiator && ch->hs.state == DED_NOISE_CREATED_INITIATION &&
         ch->have >= DED_CHAN_NOTICE_BYTES &&
         memcmp(ch->in, DED_CHAN_NOTICE_PREFIX, DED_CHAN_NOTICE_BYTES - 1) == 0;
}

/* Initiator: the response in; the peer checked; the final out. */
static int chan_on_response(ded_chan *ch, const ded_chan_cb *cb, void *user) {
  if (ded_noise_consume_response(&ch->hs, ch->in) != 0)
    return chan_fail(ch, DED_ERR_AUTH, "handshake refused: the response did not authenticate");
  if (ch->expect) {
    uint8_t id[DED_ID_BYTES];
    ded_peer_id(ded_noise_peer_pk(&ch->hs), id);
    if (memcmp(id, ch->expect_id, DED_ID_BYTES) != 0)
      return chan_fail(ch, DED_ERR_AUTH, "reached another peer than the one called");
  }
  uint8_t msg[DED_NOISE_FINAL_BYTES];
  if (ded_noise_create_final(&ch->hs, msg) != 0)
    return chan_fail(ch, DED_ERR_AUTH, "handshake refused: a degenerate ephemeral key");
  out_put(ch, msg, sizeof msg);
  return chan_open(ch, cb, user);
}

/* Responder: the final in; the channel opens. */
static int chan_on_final(ded_chan *ch, const ded_chan_cb *cb, void *user) {
  if (ded_noise_consume_final(&ch->hs, ch->in) != 0)
    return chan_fail(ch, DED_ERR_AUTH, "handshake refused: the final did not authenticate");
  return chan_open(ch, cb, user);
}

/* A whole record in |ch->in|: opened in place, handed on. */
static int chan_on_record(ded_chan *ch, const ded_chan_cb *cb, void *user, bool *stop) {
  uint32_t hdr = get_u32(ch->in);
  size_t sealed = hdr & ~DED_CHAN_F_REKEY;
  if (hdr & DED_CHAN_F_REKEY) ded_aead_rekey(&ch->rx, 0);
  uint8_t *body = ch->in + DED_CHAN_HDR_BYTES;
  if (ded_aead_open(&ch->rx, ch->in, DED_CHAN_HDR_BYTES, body, sealed, body) != 0)
    return chan_fail(ch, DED_ERR_AUTH, "a record did not authenticate (changed, replayed or reordered)");
  *stop = !cb->plain(user, body, sealed - DED_AEAD_TAG_BYTES);
  if (*stop) ch->failed = DED_ERR_CLOSING;
  return 0;
}

int ded_chan_recv(ded_chan *ch, const uint8_t *data, size_t len, const ded_chan_cb *cb,
                  void *user) {
  while (len > 0) {
    if (ch->failed) return ch->failed;
    size_t need = chan_need(ch);
    if (need == 0) return chan_fail(ch, DED_ERR_PROTO, "bytes out of turn in the handshake");
    size_t take = need - ch->have < len ? need - ch->have : len;
    memcpy(ch->in + ch->have, data, take);
    ch->have += take;
    data += take;
    len -= take;
    if (chan_is_notice(ch)) return chan_on_notice(ch);
    if (!ch->open && ch->hs.state == DED_NOISE_ZEROED && chan_check_magic(ch)) return ch->failed;
    if (ch->have < need) return 0;
    if (ch->open && ch->need == 0) { /* a record's header: its length */
      size_t sealed = get_u32(ch->in) & ~DED_CHAN_F_REKEY;
      if (sealed <= DED_AEAD_TAG_BYTES || sealed > DED_CHAN_SEALED_MAX)
        return chan_fail(ch, DED_ERR_FRAME_SIZE, "a record of impossible length");
      ch->need = DED_CHAN_HDR_BYTES + sealed;
      continue;
    }
    int rv;
    bool stop = false;
    if (ch->open)
      rv = chan_on_record(ch, cb, user, &stop);
    else if (ch->hs.state == DED_NOISE_ZEROED)
      rv = chan_on_initiation(ch);
    else if (ch->hs.state == DED_NOISE_CREATED_INITIATION)
      rv = chan_on_response(ch, cb, user);
    else
      rv = chan_on_final(ch, cb, user);
    ch->have = ch->need = 0;
    if (rv) return rv;
    if (stop || ch->failed == DED_ERR_CLOSING) return 0;
  }
  return 0;
}

size_t ded_chan_out(const ded_chan *ch, const uint8_t **p) {
  *p = ch->out + ch->out_pos;
  return ch->out_len - ch->out_pos;
}

void ded_chan_out_done(ded_chan *ch, size_t n) {
  DED_ASSERT(n <= ch->out_len - ch->out_pos);
  ch->out_pos += n;
  if (ch->out_pos == ch->out_len) ch->out_pos = ch->out_len = 0;
}

bool ded_chan_can_seal(const ded_chan *ch) {
  return ch->open && !ch->failed && ch->out_cap - (ch->out_len - ch->out_pos) >= CHAN_RECORD_SPACE;
}

size_t ded_chan_seal(ded_chan *ch, const ded_iov *iov, int n, uint64_t now_ns) {
  if (!ded_chan_can_seal(ch)) return 0;
  if (ch->out_cap - ch->out_len < CHAN_RECORD_SPACE) { /* the unsent rest to the front */
    memmove(ch->out, ch->out + ch->out_pos, ch->out_len - ch->out_pos);
    ch->out_len -= ch->out_pos;
    ch->out_pos = 0;
  }
  uint8_t *rec = ch->out + ch->out_len, *body = rec + DED_CHAN_HDR_BYTES;
  /* A record from one piece is sealed straight from it (a data chunk's
   * usual case); pieces are gathered first. */
  const uint8_t *plain = body;
  size_t take = 0;
  if (n > 0 && iov[0].len >= DED_CHAN_RECORD_MAX) {
    plain = iov[0].base;
    take = DED_CHAN_RECORD_MAX;
  } else {
    for (int i = 0; i < n && take < DED_CHAN_RECORD_MAX; i++) {
      size_t m = iov[i].len < DED_CHAN_RECORD_MAX - take ? iov[i].len : DED_CHAN_RECORD_MAX - take;
      memcpy(body + take, iov[i].base, m);
      take += m;
    }
  }
  if (take == 0) return 0;
  uint32_t hdr = (uint32_t)(take + DED_AEAD_TAG_BYTES);
  if (ded_aead_rekey_due(&ch->tx, now_ns)) {
    ded_aead_rekey(&ch->tx, now_ns);
    hdr |= DED_CHAN_F_REKEY;
  }
  put_u32(rec, hdr);
  ded_aead_seal(&ch->tx, rec, DED_CHAN_HDR_BYTES, plain, take, body);
  ch->out_len += DED_CHAN_HDR_BYTES + take + DED_AEAD_TAG_BYTES;
  return take;
}
