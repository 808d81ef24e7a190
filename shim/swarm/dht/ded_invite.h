/*
 * ded_invite.h: invitations, the run owner's word that one identity may
 * join a run.
 *
 * A run with access control (DEDMPI_OWNER, DEDMPI_ALLOW_FILE) admits a
 * peer whose key is the owner's or on the allow-list, or whose discovery
 * record carries an invitation: the owner's Ed25519 signature over
 *
 *     "dedmpi invite v1" || run id [32] || invitee's public key [32]
 *     || expires_ms (u64 little endian, Unix ms; 0 = never)
 *
 * The invitation names its invitee's key, so it is no secret: it admits
 * that identity and no other. `dedrun --invite KEY` makes one; the
 * invitee passes it in DEDMPI_INVITE as text:
 *
 *     dedmpi-invite-v1:<hex of run id | key | expires_ms | signature>
 */
#ifndef DED_INVITE_H
#define DED_INVITE_H

#include <stddef.h>
#include <stdint.h>

#include "../core/ded_assert.h"
#include "../core/ded_types.h"
#include "../crypto/ded_ident.h"

#define DED_INVITE_PREFIX "dedmpi-invite-v1:"
#define DED_INVITE_PREFIX_LEN (sizeof DED_INVITE_PREFIX - 1)
#define DED_INVITE_BYTES (DED_RUN_ID_BYTES + DED_PK_BYTES + 8 + DED_SIG_BYTES)
/* Characters of the text form, without a NUL. */
#define DED_INVITE_TEXT_LEN (DED_INVITE_PREFIX_LEN + 2 * DED_INVITE_BYTES)

typedef struct ded_invite {
  uint8_t run_id[DED_RUN_ID_BYTES];
  uint8_t pk[DED_PK_BYTES]; /* the invitee */
  uint64_t expires_ms;      /* 0 = never */
  uint8_t sig[DED_SIG_BYTES];
} ded_invite;

/* The owner |owner| invites |pk| to run |run_id| until |expires_ms|. */
void ded_invite_sign(ded_invite *inv, const ded_ident *owner, const uint8_t run_id[DED_RUN_ID_BYTES],
                     const uint8_t pk[DED_PK_BYTES], uint64_t expires_ms);

/*
 * 0 if |owner_pk| signed the invitation of |pk| (an expiry of |expires_ms|)
 * to |run_id|, still valid at |now_ms|. DED_ERR_SIGNATURE (forged, or for
 * another key, run or expiry), DED_ERR_EXPIRED.
 */
DED_UNUSED_RESULT int ded_invite_check(const uint8_t owner_pk[DED_PK_BYTES],
                                       const uint8_t run_id[DED_RUN_ID_BYTES],
                                       const uint8_t pk[DED_PK_BYTES], uint64_t expires_ms,
                                       const uint8_t sig[DED_SIG_BYTES], uint64_t now_ms);

/* The text form, NUL-terminated, into |out|. */
void ded_invite_format(const ded_invite *inv, char out[DED_INVITE_TEXT_LEN + 1]);

/* Parses exactly |len| characters of the text form: 0, or DED_ERR_PROTO
 * (not an invitation: prefix, length or digits). Checks nothing else. */
DED_UNUSED_RESULT int ded_invite_parse(const char *text, size_t len, ded_invite *inv);

#endif /* DED_INVITE_H */
