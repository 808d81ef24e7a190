/*
 * ded_aead.h: one direction of an encrypted session.
 *
 * After the handshake (ded_noise.h) each direction of a connection has its
 * own key and a frame counter. A frame is sealed under the key with the
 * counter as nonce (never sent: TCP delivers in order, so a frame dropped,
 * replayed or moved reads at the wrong counter and fails to open), the
 * frame's cleartext header as associated data. Keys rotate: the sender
 * decides when (DED_AEAD_REKEY_BYTES or _NS) and flags the first frame
 * under the new key; both sides derive it from the old one (Noise's
 * REKEY), so an old key read from memory does not open later traffic.
 */
#ifndef DED_AEAD_H
#define DED_AEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/ded_assert.h"

#define DED_AEAD_KEY_BYTES 32
#define DED_AEAD_TAG_BYTES 16
/* A direction's key rotates after this much sealed data or this long. */
#define DED_AEAD_REKEY_BYTES (1ull << 30)
#define DED_AEAD_REKEY_NS (120ull * 1000000000ull)

typedef struct ded_aead {
  uint8_t key[DED_AEAD_KEY_BYTES];
  bool aes256gcm; /* else XChaCha20-Poly1305 */
  uint64_t n;     /* frames under |key| so far: the next nonce */
  uint64_t bytes; /* sealed or opened under |key| */
  uint64_t since_ns;
} ded_aead;

/* Takes |key| (from ded_noise_split) at |now_ns|; |aes256gcm| only as
 * the handshake chose it (asserted: this machine must have it). */
void ded_aead_init(ded_aead *a, const uint8_t key[DED_AEAD_KEY_BYTES], bool aes256gcm,
                   uint64_t now_ns);

/* True when the sender should move to the next key before its next frame. */
bool ded_aead_rekey_due(const ded_aead *a, uint64_t now_ns);

/* Moves to the next key (both sides at the same frame). */
void ded_aead_rekey(ded_aead *a, uint64_t now_ns);

/* Seals |len| bytes of |plain| into |out| (len + DED_AEAD_TAG_BYTES; may
 * be |plain|), with |ad| authenticated alongside. */
void ded_aead_seal(ded_aead *a, const uint8_t *ad, size_t ad_len, const uint8_t *plain,
                   size_t len, uint8_t *out);

/* Opens |len| bytes of |in| (ciphertext and tag) into |plain| (len -
 * DED_AEAD_TAG_BYTES; may be |in|, which a failure then leaves zeroed).
 * 0, or DED_ERR_AUTH (the counter does not move; the connection must go). */
DED_UNUSED_RESULT int ded_aead_open(ded_aead *a, const uint8_t *ad, size_t ad_len,
                                    const uint8_t *in, size_t len, uint8_t *plain);

/* True in the test-only build without encryption (DEDMPI_NULL_CIPHER). */
bool ded_aead_null_cipher(void);

/* Wipes the key. */
void ded_aead_wipe(ded_aead *a);

#endif /* DED_AEAD_H */
