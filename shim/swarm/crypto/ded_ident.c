#include "ded_ident.h"

#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "../core/ded_err.h"

DED_STATIC_ASSERT(DED_PK_BYTES == crypto_sign_PUBLICKEYBYTES, "public key size");
DED_STATIC_ASSERT(DED_SK_BYTES == crypto_sign_SECRETKEYBYTES, "secret key size");
DED_STATIC_ASSERT(DED_SIG_BYTES == crypto_sign_BYTES, "signature size");
DED_STATIC_ASSERT(DED_SEED_BYTES == crypto_sign_SEEDBYTES, "seed size");

int ded_crypto_init(void) { return sodium_init() < 0 ? DED_ERR_INTERNAL : 0; }

void ded_ident_from_seed(ded_ident *ident, const uint8_t seed[DED_SEED_BYTES]) {
  int rv = crypto_sign_seed_keypair(ident->pk, ident->sk, seed);
  DED_ASSERT(rv == 0);
  ded_peer_id(ident->pk, ident->id);
}

void ded_ident_wipe(ded_ident *ident) { sodium_memzero(ident->sk, sizeof ident->sk); }

void ded_ident_sign(const ded_ident *ident, const uint8_t *msg, size_t len,
                    uint8_t sig[DED_SIG_BYTES]) {
  int rv = crypto_sign_detached(sig, NULL, msg, len, ident->sk);
  DED_ASSERT(rv == 0);
}

int ded_ident_verify(const uint8_t pk[DED_PK_BYTES], const uint8_t *msg, size_t len,
                     const uint8_t sig[DED_SIG_BYTES]) {
  return crypto_sign_verify_detached(sig, msg, len, pk) == 0 ? 0 : -1;
}

void ded_peer_id(const uint8_t pk[DED_PK_BYTES], uint8_t id[DED_ID_BYTES]) {
  /* Keyed with a domain label so an id is never confused with another hash
   * of the same key. */
  static const uint8_t label[] = "dedmpi peer id v1";
  int rv = crypto_generichash(id, DED_ID_BYTES, pk, DED_PK_BYTES, label, sizeof label - 1);
  DED_ASSERT(rv == 0);
}

void ded_hash32(const void *in, size_t len, uint8_t out[32]) {
  int rv = crypto_generichash(out, 32, in, len, NULL, 0);
  DED_ASSERT(rv == 0);
}

void ded_hex_encode(const uint8_t *bin, size_t len, char *hex) {
  sodium_bin2hex(hex, 2 * len + 1, bin, len);
}

int ded_hex_decode(const char *hex, size_t hex_len, uint8_t *bin, size_t len) {
  size_t got = 0;
  const char *end = NULL;
  if (hex_len != 2 * len || sodium_hex2bin(bin, len, hex, hex_len, NULL, &got, &end) != 0 ||
      got != len || end != hex + hex_len)
    return -1;
  return 0;
}

void ded_wipe(void *p, size_t len) { sodium_memzero(p, len); }

static bool key_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

static bool key_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

bool ded_swarm_key_suspect(const char *text, size_t len, char *why, size_t cap) {
  size_t b = 0, e = len, digits = 0;
  while (b < e && key_blank(text[b])) b++;
  while (e > b && key_blank(text[e - 1])) e--;
  for (size_t i = b; i < e; i++) digits += key_hex(text[i]);
  bool hex_only = e > b && digits == e - b;
  if (hex_only && digits == 2 * DED_SWARM_KEY_BYTES && e - b == len) return false; /* a key */
  if (hex_only && digits == 2 * DED_SWARM_KEY_BYTES) {
    if (cap) snprintf(why, cap, "%d hex digits with blanks around them: a key is the digits "
                      "alone; remove the blanks", 2 * DED_SWARM_KEY_BYTES);
    return true;
  }
  if (hex_only) {
    if (cap) snprintf(why, cap, "%zu hex digit%s: a key has %d; a typo? (a passphrase of hex "
                      "digits only is refused)", digits, digits == 1 ? "" : "s",
                      2 * DED_SWARM_KEY_BYTES);
    return true;
  }
  if (len == 2 * DED_SWARM_KEY_BYTES) {
    if (cap) snprintf(why, cap, "%d characters but not hex digits: a mistyped key? (a passphrase "
                      "of exactly %d characters is refused for that reason)",
                      2 * DED_SWARM_KEY_BYTES, 2 * DED_SWARM_KEY_BYTES);
    return true;
  }
  return false;
}

int ded_swarm_key_derive(const char *text, size_t len, const uint8_t run_id[DED_RUN_ID_BYTES],
                         uint8_t psk[DED_SWARM_KEY_BYTES]) {
  if (ded_swarm_key_suspect(text, len, NULL, 0)) return DED_ERR_INVALID_ARG;
  if (len == 2 * DED_SWARM_KEY_BYTES &&
      ded_hex_decode(text, len, psk, DED_SWARM_KEY_BYTES) == 0)
    return 0;
  if (len < DED_PASSPHRASE_MIN) return DED_ERR_INVALID_ARG;
  /* Salted with the run: one passphrase makes another key in each run,
   * and no table computed ahead serves all runs. */
  uint8_t salt[32];
  static const uint8_t label[] = "dedmpi swarm key v1";
  int rv = crypto_generichash(salt, sizeof salt, run_id, DED_RUN_ID_BYTES, label, sizeof label - 1);
  DED_ASSERT(rv == 0);
  DED_STATIC_ASSERT(crypto_pwhash_SALTBYTES <= sizeof salt, "salt");
  rv = crypto_pwhash(psk, DED_SWARM_KEY_BYTES, text, len, salt, crypto_pwhash_OPSLIMIT_INTERACTIVE,
                     crypto_pwhash_MEMLIMIT_INTERACTIVE, crypto_pwhash_ALG_ARGON2ID13);
  return rv == 0 ? 0 : DED_ERR_NOMEM;
}
