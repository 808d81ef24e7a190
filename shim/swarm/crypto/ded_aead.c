#include "ded_aead.h"

#include <sodium.h>
#include <string.h>

#include "../core/ded_err.h"

DED_STATIC_ASSERT(DED_AEAD_KEY_BYTES == crypto_aead_aes256gcm_KEYBYTES &&
                      DED_AEAD_KEY_BYTES == crypto_aead_xchacha20poly1305_ietf_KEYBYTES,
                  "key size");
DED_STATIC_ASSERT(DED_AEAD_TAG_BYTES == crypto_aead_aes256gcm_ABYTES &&
                      DED_AEAD_TAG_BYTES == crypto_aead_xchacha20poly1305_ietf_ABYTES,
                  "tag size");
/* AES-GCM reads the first 12 bytes of the nonce buffer: the counter's 8
 * and 4 zeros, unique per frame as XChaCha's 24. */
DED_STATIC_ASSERT(crypto_aead_aes256gcm_NPUBBYTES == 12 &&
                      crypto_aead_xchacha20poly1305_ietf_NPUBBYTES == 24,
                  "nonce sizes");

void ded_aead_init(ded_aead *a, const uint8_t key[DED_AEAD_KEY_BYTES], bool aes256gcm,
                   uint64_t now_ns) {
  /* libsodium has AES-GCM only in hardware: the handshake's caps chose it
   * only where both machines have it. */
  DED_ASSERT(!aes256gcm || crypto_aead_aes256gcm_is_available());
  memset(a, 0, sizeof *a);
  memcpy(a->key, key, DED_AEAD_KEY_BYTES);
  a->aes256gcm = aes256gcm;
  a->since_ns = now_ns;
}

bool ded_aead_rekey_due(const ded_aead *a, uint64_t now_ns) {
  return a->bytes >= DED_AEAD_REKEY_BYTES ||
         (now_ns >= a->since_ns && now_ns - a->since_ns >= DED_AEAD_REKEY_NS);
}

/* The counter, little endian, zero padded to the cipher's nonce. */
static void nonce_of(uint8_t nonce[crypto_aead_xchacha20poly1305_ietf_NPUBBYTES], uint64_t n) {
  memset(nonce, 0, crypto_aead_xchacha20poly1305_ietf_NPUBBYTES);
  for (int i = 0; i < 8; i++) nonce[i] = (uint8_t)(n >> (8 * i));
}

#ifdef DED_NULL_CIPHER
/* The test-only build of CMake's DEDMPI_NULL_CIPHER: frames in the clear,
 * a zero tag, no authentication (bench/crypto.py's baseline). */
bool ded_aead_null_cipher(void) { return true; }
#else
bool ded_aead_null_cipher(void) { return false; }
#endif

static void seal_raw(const ded_aead *a, uint64_t n, const uint8_t *ad, size_t ad_len,
                     const uint8_t *plain, size_t len, uint8_t *out) {
#ifdef DED_NULL_CIPHER
  (void)a, (void)n, (void)ad, (void)ad_len;
  memmove(out, plain, len);
  memset(out + len, 0, DED_AEAD_TAG_BYTES);
  return;
#endif
  uint8_t nonce[crypto_aead_xchacha20poly1305_ietf_NPUBBYTES];
  nonce_of(nonce, n);
  int rv = a->aes256gcm ? crypto_aead_aes256gcm_encrypt(out, NULL, plain, len, ad, ad_len, NULL,
                                                        nonce, a->key)
                        : crypto_aead_xchacha20poly1305_ietf_encrypt(out, NULL, plain, len, ad,
                                                                     ad_len, NULL, nonce, a->key);
  DED_ASSERT(rv == 0);
}

void ded_aead_rekey(ded_aead *a, uint64_t now_ns) {
  /* Noise's REKEY: the first 32 bytes of 32 zeros sealed at the last
   * nonce, which no frame uses. */
  uint8_t zeros[DED_AEAD_KEY_BYTES] = {0}, next[DED_AEAD_KEY_BYTES + DED_AEAD_TAG_BYTES];
  seal_raw(a, UINT64_MAX, NULL, 0, zeros, sizeof zeros, next);
  memcpy(a->key, next, DED_AEAD_KEY_BYTES);
  sodium_memzero(next, sizeof next);
  a->n = 0;
  a->bytes = 0;
  a->since_ns = now_ns;
}

void ded_aead_seal(ded_aead *a, const uint8_t *ad, size_t ad_len, const uint8_t *plain,
                   size_t len, uint8_t *out) {
  DED_ASSERT(a->n < UINT64_MAX); /* rekeyed long before */
  seal_raw(a, a->n++, ad, ad_len, plain, len, out);
  a->bytes += len;
}

int ded_aead_open(ded_aead *a, const uint8_t *ad, size_t ad_len, const uint8_t *in, size_t len,
                  uint8_t *plain) {
  if (len < DED_AEAD_TAG_BYTES || a->n == UINT64_MAX) return DED_ERR_AUTH;
#ifdef DED_NULL_CIPHER
  static const uint8_t zero_tag[DED_AEAD_TAG_BYTES];
  if (memcmp(in + len - DED_AEAD_TAG_BYTES, zero_tag, DED_AEAD_TAG_BYTES) != 0) return DED_ERR_AUTH;
  memmove(plain, in, len - DED_AEAD_TAG_BYTES);
  a->n++;
  a->bytes += len - DED_AEAD_TAG_BYTES;
  (void)ad, (void)ad_len;
  return 0;
#endif
  uint8_t nonce[crypto_aead_xchacha20poly1305_ietf_NPUBBYTES];
  nonce_of(nonce, a->n);
  int rv = a->aes256gcm ? crypto_aead_aes256gcm_decrypt(plain, NULL, NULL, in, len, ad, ad_len,
                                                        nonce, a->key)
                        : crypto_aead_xchacha20poly1305_ietf_decrypt(plain, NULL, NULL, in, len,
                                                                     ad, ad_len, nonce, a->key);
  if (rv != 0) return DED_ERR_AUTH;
  a->n++;
  a->bytes += len - DED_AEAD_TAG_BYTES;
  return 0;
}

void ded_aead_wipe(ded_aead *a) { sodium_memzero(a, sizeof *a); }
