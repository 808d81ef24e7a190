/*
 * fuzz_invite.c: invitations as text (DEDMPI_INVITE) and as checked.
 *
 * Input: the text. ded_invite_parse answers 0 or DED_ERR_PROTO; what it
 * takes formats back to the same text (hex digits in either case); the
 * check against a fixed owner and run (fuzz.h, FUZZ_INVITE_*) answers
 * only 0, DED_ERR_SIGNATURE or DED_ERR_EXPIRED, and 0 only before the
 * expiry.
 */
#include <ctype.h>
#include <string.h>

#include "fuzz.h"

#include "core/ded_err.h"
#include "dht/ded_invite.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static ded_ident owner;
  static uint8_t run[DED_RUN_ID_BYTES];
  static int ready;
  if (!ready) {
    FUZZ_CHECK(ded_crypto_init() == 0);
    uint8_t seed[DED_SEED_BYTES];
    memset(seed, FUZZ_INVITE_OWNER_SEED_BYTE, sizeof seed);
    ded_ident_from_seed(&owner, seed);
    ded_hash32(FUZZ_RUN, FUZZ_RUN_LEN, run);
    ready = 1;
  }
  ded_invite inv;
  int rv = ded_invite_parse((const char *)data, size, &inv);
  FUZZ_CHECK(rv == 0 || rv == DED_ERR_PROTO);
  if (rv) return 0;
  char text[DED_INVITE_TEXT_LEN + 1];
  ded_invite_format(&inv, text);
  FUZZ_CHECK(size == DED_INVITE_TEXT_LEN);
  for (size_t i = 0; i < size; i++) FUZZ_CHECK(tolower(data[i]) == text[i]);
  rv = ded_invite_check(owner.pk, run, inv.pk, inv.expires_ms, inv.sig, FUZZ_NOW_MS);
  FUZZ_CHECK(rv == 0 || rv == DED_ERR_SIGNATURE || rv == DED_ERR_EXPIRED);
  if (rv == 0) FUZZ_CHECK(inv.expires_ms == 0 || FUZZ_NOW_MS < inv.expires_ms);
  return 0;
}
