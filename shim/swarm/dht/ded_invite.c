/* ded_invite.c: invitations (see the header). */
#include "ded_invite.h"

#include <string.h>

#include "../core/ded_err.h"
#include "../core/ded_wire.h"

static const char sig_label[] = "dedmpi invite v1";

/* What the owner signs. */
static size_t invite_msg(uint8_t *out, const uint8_t run_id[DED_RUN_ID_BYTES],
                         const uint8_t pk[DED_PK_BYTES], uint64_t expires_ms) {
  ded_wr w = ded_wr_init(out, sizeof sig_label - 1 + DED_RUN_ID_BYTES + DED_PK_BYTES + 8);
  ded_wr_bytes(&w, sig_label, sizeof sig_label - 1);
  ded_wr_bytes(&w, run_id, DED_RUN_ID_BYTES);
  ded_wr_bytes(&w, pk, DED_PK_BYTES);
  ded_wr_u64(&w, expires_ms);
  DED_ASSERT(!w.err);
  return w.pos;
}

#define INVITE_MSG_MAX (sizeof sig_label - 1 + DED_RUN_ID_BYTES + DED_PK_BYTES + 8)

void ded_invite_sign(ded_invite *inv, const ded_ident *owner, const uint8_t run_id[DED_RUN_ID_BYTES],
                     const uint8_t pk[DED_PK_BYTES], uint64_t expires_ms) {
  uint8_t msg[INVITE_MSG_MAX];
  memcpy(inv->run_id, run_id, DED_RUN_ID_BYTES);
  memcpy(inv->pk, pk, DED_PK_BYTES);
  inv->expires_ms = expires_ms;
  ded_ident_sign(owner, msg, invite_msg(msg, run_id, pk, expires_ms), inv->sig);
}

int ded_invite_check(const uint8_t owner_pk[DED_PK_BYTES], const uint8_t run_id[DED_RUN_ID_BYTES],
                     const uint8_t pk[DED_PK_BYTES], uint64_t expires_ms,
                     const uint8_t sig[DED_SIG_BYTES], uint64_t now_ms) {
  uint8_t msg[INVITE_MSG_MAX];
  if (ded_ident_verify(owner_pk, msg, invite_msg(msg, run_id, pk, expires_ms), sig) != 0)
    return DED_ERR_SIGNATURE;
  if (expires_ms != 0 && now_ms >= expires_ms) return DED_ERR_EXPIRED;
  return 0;
}

void ded_invite_format(const ded_invite *inv, char out[DED_INVITE_TEXT_LEN + 1]) {
  uint8_t bin[DED_INVITE_BYTES];
  ded_wr w = ded_wr_init(bin, sizeof bin);
  ded_wr_bytes(&w, inv->run_id, DED_RUN_ID_BYTES);
  ded_wr_bytes(&w, inv->pk, DED_PK_BYTES);
  ded_wr_u64(&w, inv->expires_ms);
  ded_wr_bytes(&w, inv->sig, DED_SIG_BYTES);
  DED_ASSERT(!w.err && w.pos == sizeof bin);
  memcpy(out, DED_INVITE_PREFIX, DED_INVITE_PREFIX_LEN);
  ded_hex_encode(bin, sizeof bin, out + DED_INVITE_PREFIX_LEN);
}

int ded_invite_parse(const char *text, size_t len, ded_invite *inv) {
  memset(inv, 0, sizeof *inv);
  uint8_t bin[DED_INVITE_BYTES];
  if (len != DED_INVITE_TEXT_LEN || memcmp(text, DED_INVITE_PREFIX, DED_INVITE_PREFIX_LEN) != 0 ||
      ded_hex_decode(text + DED_INVITE_PREFIX_LEN, 2 * DED_INVITE_BYTES, bin, sizeof bin) != 0)
    return DED_ERR_PROTO;
  ded_rd r = ded_rd_init(bin, sizeof bin);
  ded_rd_bytes(&r, inv->run_id, DED_RUN_ID_BYTES);
  ded_rd_bytes(&r, inv->pk, DED_PK_BYTES);
  inv->expires_ms = ded_rd_u64(&r);
  ded_rd_bytes(&r, inv->sig, DED_SIG_BYTES);
  DED_ASSERT(!r.err);
  return 0;
}
