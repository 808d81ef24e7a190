#include "ded_noise.h"

#include <sodium.h>
#include <string.h>

#include "../core/ded_err.h"

/* Not Noise's own BLAKE2b (HASHLEN 64): ours hashes to 32 bytes, so the
 * name says so and claims no interoperability. */
static const char protocol_name[] = "dedmpi_XXpsk0_25519_ChaChaPoly_BLAKE2b256";
static const char prologue_label[] = "dedmpi noise v1";
static const char mac1_label[] = "dedmpi mac1";

DED_STATIC_ASSERT(DED_NOISE_KEY_BYTES == crypto_aead_chacha20poly1305_ietf_KEYBYTES, "key size");
DED_STATIC_ASSERT(DED_NOISE_TAG_BYTES == crypto_aead_chacha20poly1305_ietf_ABYTES, "tag size");
DED_STATIC_ASSERT(crypto_scalarmult_BYTES == 32 && crypto_scalarmult_SCALARBYTES == 32, "x25519");

/* ---------------------------------------------------------------- symmetric state */

/* h = HASH(h || data) */
static void mix_hash(uint8_t h[32], const uint8_t *data, size_t len) {
  crypto_generichash_state st;
  crypto_generichash_init(&st, NULL, 0, 32);
  crypto_generichash_update(&st, h, 32);
  crypto_generichash_update(&st, data, len);
  crypto_generichash_final(&st, h, 32);
}

/* Keyed BLAKE2b-256: the PRF of the KDF. HKDF's shape with keyed BLAKE2b
 * in HMAC's place, our own choice (WireGuard's KDF uses HMAC-BLAKE2s and
 * keeps keyed BLAKE2s for its MACs): BLAKE2's keyed mode is a PRF by
 * design. */
static void prf(uint8_t out[32], const uint8_t key[32], const uint8_t *in, size_t len) {
  crypto_generichash(out, 32, in, len, key, 32);
}

/* HKDF(ck, ikm) into two or three 32-byte outputs. */
static void kdf(const uint8_t ck[32], const uint8_t *ikm, size_t ikm_len, uint8_t o1[32],
                uint8_t o2[32], uint8_t *o3) {
  uint8_t prk[32], in[33];
  prf(prk, ck, ikm, ikm_len);
  in[0] = 1;
  prf(o1, prk, in, 1);
  memcpy(in, o1, 32);
  in[32] = 2;
  prf(o2, prk, in, 33);
  if (o3) {
    memcpy(in, o2, 32);
    in[32] = 3;
    prf(o3, prk, in, 33);
  }
  sodium_memzero(prk, sizeof prk);
  sodium_memzero(in, sizeof in);
}

/* The part of the handshake state a message changes: consume functions
 * work on a copy and commit it only once every check passed. */
typedef struct symm {
  uint8_t h[32], ck[32], k[32];
  uint64_t n; /* nonce of |k|'s next use */
} symm;

static void symm_load(symm *s, const ded_noise *hs) {
  memcpy(s->h, hs->h, 32);
  memcpy(s->ck, hs->ck, 32);
  memcpy(s->k, hs->k, 32);
  s->n = hs->n;
}

static void symm_commit(ded_noise *hs, const symm *s) {
  memcpy(hs->h, s->h, 32);
  memcpy(hs->ck, s->ck, 32);
  memcpy(hs->k, s->k, 32);
  hs->n = s->n;
}

static void mix_key(symm *s, const uint8_t *ikm, size_t len) {
  uint8_t ck[32];
  kdf(s->ck, ikm, len, ck, s->k, NULL);
  memcpy(s->ck, ck, 32);
  s->n = 0;
  sodium_memzero(ck, sizeof ck);
}

static void mix_key_and_hash(symm *s, const uint8_t *ikm, size_t len) {
  uint8_t ck[32], th[32];
  kdf(s->ck, ikm, len, ck, th, s->k);
  memcpy(s->ck, ck, 32);
  mix_hash(s->h, th, 32);
  s->n = 0;
  sodium_memzero(ck, sizeof ck);
  sodium_memzero(th, sizeof th);
}

/* Noise's ChaChaPoly nonce: 32 zero bits, then the counter, little endian. */
static void nonce_of(uint8_t nonce[12], uint64_t n) {
  memset(nonce, 0, 4);
  for (int i = 0; i < 8; i++) nonce[4 + i] = (uint8_t)(n >> (8 * i));
}

/* out = AEAD(k, n++, ad = h, plain); h = HASH(h || out). out: len + 16. */
static void encrypt_and_hash(symm *s, const uint8_t *plain, size_t len, uint8_t *out) {
  uint8_t nonce[12];
  nonce_of(nonce, s->n++);
  unsigned long long clen;
  crypto_aead_chacha20poly1305_ietf_encrypt(out, &clen, plain, len, s->h, 32, NULL, nonce, s->k);
  mix_hash(s->h, out, (size_t)clen);
}

/* The inverse: -1 if |in| (len + 16 bytes) does not authenticate. */
static int decrypt_and_hash(symm *s, const uint8_t *in, size_t len, uint8_t *plain) {
  uint8_t nonce[12];
  nonce_of(nonce, s->n++);
  unsigned long long plen;
  if (crypto_aead_chacha20poly1305_ietf_decrypt(plain, &plen, NULL, in, len + DED_NOISE_TAG_BYTES,
                                                s->h, 32, nonce, s->k) != 0)
    return -1;
  mix_hash(s->h, in, len + DED_NOISE_TAG_BYTES);
  return 0;
}

/* X25519; -1 for a low-order point (an all-zero shared secret). */
static int dh(uint8_t out[32], const uint8_t sk[32], const uint8_t pk[32]) {
  return crypto_scalarmult(out, sk, pk) == 0 ? 0 : -1;
}

/* ---------------------------------------------------------------- handshake */

void ded_noise_init(ded_noise *hs, const ded_ident *self, const uint8_t *psk,
                    const uint8_t run_id[DED_RUN_ID_BYTES], bool initiator) {
  memset(hs, 0, sizeof *hs);
  hs->initiator = initiator;
  hs->self = self;
  if (psk) memcpy(hs->psk, psk, DED_NOISE_PSK_BYTES);
  crypto_generichash(hs->h, 32, (const uint8_t *)protocol_name,
                     sizeof protocol_name - 1, NULL, 0);
  memcpy(hs->ck, hs->h, 32);
  uint8_t prologue[sizeof prologue_label - 1 + DED_RUN_ID_BYTES];
  memcpy(prologue, prologue_label, sizeof prologue_label - 1);
  memcpy(prologue + sizeof prologue_label - 1, run_id, DED_RUN_ID_BYTES);
  mix_hash(hs->h, prologue, sizeof prologue);
  /* mac1's key: HASH(label || psk || run id). */
  crypto_generichash_state st;
  crypto_generichash_init(&st, NULL, 0, 32);
  crypto_generichash_update(&st, (const uint8_t *)mac1_label, sizeof mac1_label - 1);
  crypto_generichash_update(&st, hs->psk, sizeof hs->psk);
  crypto_generichash_update(&st, run_id, DED_RUN_ID_BYTES);
  crypto_generichash_final(&st, hs->mac1_key, 32);
  hs->caps = crypto_aead_aes256gcm_is_available() ? DED_NOISE_CAP_AES256GCM : 0;
  hs->state = DED_NOISE_ZEROED;
}

void ded_noise_wipe(ded_noise *hs) {
  const ded_ident *self = hs->self;
  bool initiator = hs->initiator;
  sodium_memzero(hs, sizeof *hs);
  hs->self = self;
  hs->initiator = initiator;
  hs->state = DED_NOISE_FAILED;
}

static void mac1_of(const ded_noise *hs, const uint8_t *msg, size_t len,
                    uint8_t mac[DED_NOISE_MAC1_BYTES]) {
  crypto_generichash(mac, DED_NOISE_MAC1_BYTES, msg, len, hs->mac1_key, 32);
}

/* Our static key's X25519 form. */
static void self_x25519(const ded_noise *hs, uint8_t sk[32]) {
  int rv = crypto_sign_ed25519_sk_to_curve25519(sk, hs->self->sk);
  DED_ASSERT(rv == 0);
}

int ded_noise_create_initiation(ded_noise *hs, const uint8_t eph[32],
                                uint8_t out[DED_NOISE_INITIATION_BYTES]) {
  if (!hs->initiator || hs->state != DED_NOISE_ZEROED) return DED_ERR_INVALID_ARG;
  symm s;
  symm_load(&s, hs);
  /* psk */
  mix_key_and_hash(&s, hs->psk, sizeof hs->psk);
  /* e */
  memcpy(hs->e_sk, eph, 32);
  crypto_scalarmult_base(hs->e_pk, hs->e_sk);
  memcpy(out, hs->e_pk, 32);
  mix_hash(s.h, hs->e_pk, 32);
  mix_key(&s, hs->e_pk, 32); /* psk handshakes mix e into the key too */
  /* {} */
  encrypt_and_hash(&s, NULL, 0, out + 32);
  /* mac1 */
  mac1_of(hs, out, 32 + DED_NOISE_TAG_BYTES, out + 32 + DED_NOISE_TAG_BYTES);
  symm_commit(hs, &s);
  sodium_memzero(&s, sizeof s);
  hs->state = DED_NOISE_CREATED_INITIATION;
  return 0;
}

int ded_noise_consume_initiation(ded_noise *hs, const uint8_t in[DED_NOISE_INITIATION_BYTES]) {
  if (hs->initiator || hs->state != DED_NOISE_ZEROED) return DED_ERR_INVALID_ARG;
  int rv = DED_ERR_AUTH;
  symm s;
  uint8_t mac[DED_NOISE_MAC1_BYTES];
  /* mac1 before anything costly: another run or secret stops here. */
  mac1_of(hs, in, 32 + DED_NOISE_TAG_BYTES, mac);
  if (sodium_memcmp(mac, in + 32 + DED_NOISE_TAG_BYTES, sizeof mac) != 0) return DED_ERR_AUTH;
  symm_load(&s, hs);
  /* psk */
  mix_key_and_hash(&s, hs->psk, sizeof hs->psk);
  /* e */
  mix_hash(s.h, in, 32);
  mix_key(&s, in, 32);
  /* {} */
  if (decrypt_and_hash(&s, in + 32, 0, NULL) != 0) goto out;
  memcpy(hs->re, in, 32);
  symm_commit(hs, &s);
  hs->state = DED_NOISE_CONSUMED_INITIATION;
  rv = 0;
out:
  sodium_memzero(&s, sizeof s);
  return rv;
}

int ded_noise_create_response(ded_noise *hs, const uint8_t eph[32],
                              uint8_t out[DED_NOISE_RESPONSE_BYTES]) {
  if (hs->initiator || hs->state != DED_NOISE_CONSUMED_INITIATION) return DED_ERR_INVALID_ARG;
  int rv = DED_ERR_AUTH;
  symm s;
  uint8_t shared[32], s_sk[32];
  symm_load(&s, hs);
  /* e */
  memcpy(hs->e_sk, eph, 32);
  crypto_scalarmult_base(hs->e_pk, hs->e_sk);
  memcpy(out, hs->e_pk, 32);
  mix_hash(s.h, hs->e_pk, 32);
  mix_key(&s, hs->e_pk, 32);
  /* ee */
  if (dh(shared, hs->e_sk, hs->re) != 0) goto out; /* their e is a low-order point */
  mix_key(&s, shared, 32);
  /* s */
  encrypt_and_hash(&s, hs->self->pk, DED_PK_BYTES, out + 32);
  /* es: our static, their ephemeral */
  self_x25519(hs, s_sk);
  if (dh(shared, s_sk, hs->re) != 0) goto out;
  mix_key(&s, shared, 32);
  /* {caps} */
  encrypt_and_hash(&s, &hs->caps, 1, out + 32 + DED_PK_BYTES + DED_NOISE_TAG_BYTES);
  symm_commit(hs, &s);
  hs->state = DED_NOISE_CREATED_RESPONSE;
  rv = 0;
out:
  sodium_memzero(&s, sizeof s);
  sodium_memzero(shared, sizeof shared);
  sodium_memzero(s_sk, sizeof s_sk);
  if (rv) ded_noise_wipe(hs);
  return rv;
}

int ded_noise_consume_response(ded_noise *hs, const uint8_t in[DED_NOISE_RESPONSE_BYTES]) {
  if (!hs->initiator || hs->state != DED_NOISE_CREATED_INITIATION) return DED_ERR_INVALID_ARG;
  int rv = DED_ERR_AUTH;
  symm s;
  uint8_t shared[32], rs[DED_PK_BYTES], rs_x[32], caps;
  symm_load(&s, hs);
  /* e */
  const uint8_t *re = in;
  mix_hash(s.h, re, 32);
  mix_key(&s, re, 32);
  /* ee */
  if (dh(shared, hs->e_sk, re) != 0) goto out;
  mix_key(&s, shared, 32);
  /* s */
  if (decrypt_and_hash(&s, in + 32, DED_PK_BYTES, rs) != 0) goto out;
  /* es: our ephemeral, their static */
  if (crypto_sign_ed25519_pk_to_curve25519(rs_x, rs) != 0) goto out;
  if (dh(shared, hs->e_sk, rs_x) != 0) goto out;
  mix_key(&s, shared, 32);
  /* {caps} */
  if (decrypt_and_hash(&s, in + 32 + DED_PK_BYTES + DED_NOISE_TAG_BYTES, 1, &caps) != 0) goto out;
  memcpy(hs->re, re, 32);
  memcpy(hs->rs, rs, DED_PK_BYTES);
  hs->rcaps = caps;
  symm_commit(hs, &s);
  hs->state = DED_NOISE_CONSUMED_RESPONSE;
  rv = 0;
out:
  sodium_memzero(&s, sizeof s);
  sodium_memzero(shared, sizeof shared);
  sodium_memzero(rs_x, sizeof rs_x);
  return rv;
}

int ded_noise_create_final(ded_noise *hs, uint8_t out[DED_NOISE_FINAL_BYTES]) {
  if (!hs->initiator || hs->state != DED_NOISE_CONSUMED_RESPONSE) return DED_ERR_INVALID_ARG;
  int rv = DED_ERR_AUTH;
  symm s;
  uint8_t shared[32], s_sk[32];
  symm_load(&s, hs);
  /* s */
  encrypt_and_hash(&s, hs->self->pk, DED_PK_BYTES, out);
  /* se: our static, their ephemeral */
  self_x25519(hs, s_sk);
  if (dh(shared, s_sk, hs->re) != 0) goto out;
  mix_key(&s, shared, 32);
  /* {caps} */
  encrypt_and_hash(&s, &hs->caps, 1, out + DED_PK_BYTES + DED_NOISE_TAG_BYTES);
  symm_commit(hs, &s);
  hs->state = DED_NOISE_ESTABLISHED;
  rv = 0;
out:
  sodium_memzero(&s, sizeof s);
  sodium_memzero(shared, sizeof shared);
  sodium_memzero(s_sk, sizeof s_sk);
  if (rv) ded_noise_wipe(hs);
  return rv;
}

int ded_noise_consume_final(ded_noise *hs, const uint8_t in[DED_NOISE_FINAL_BYTES]) {
  if (hs->initiator || hs->state != DED_NOISE_CREATED_RESPONSE) return DED_ERR_INVALID_ARG;
  int rv = DED_ERR_AUTH;
  symm s;
  uint8_t shared[32], rs[DED_PK_BYTES], rs_x[32], caps;
  symm_load(&s, hs);
  /* s */
  if (decrypt_and_hash(&s, in, DED_PK_BYTES, rs) != 0) goto out;
  /* se: their static, our ephemeral */
  if (crypto_sign_ed25519_pk_to_curve25519(rs_x, rs) != 0) goto out;
  if (dh(shared, hs->e_sk, rs_x) != 0) goto out;
  mix_key(&s, shared, 32);
  /* {caps} */
  if (decrypt_and_hash(&s, in + DED_PK_BYTES + DED_NOISE_TAG_BYTES, 1, &caps) != 0) goto out;
  memcpy(hs->rs, rs, DED_PK_BYTES);
  hs->rcaps = caps;
  symm_commit(hs, &s);
  hs->state = DED_NOISE_ESTABLISHED;
  rv = 0;
out:
  sodium_memzero(&s, sizeof s);
  sodium_memzero(shared, sizeof shared);
  sodium_memzero(rs_x, sizeof rs_x);
  return rv;
}

const uint8_t *ded_noise_peer_pk(const ded_noise *hs) {
  return hs->state == DED_NOISE_CONSUMED_RESPONSE || hs->state == DED_NOISE_ESTABLISHED ? hs->rs
                                                                                       : NULL;
}

int ded_noise_split(ded_noise *hs, ded_noise_keys *keys) {
  if (hs->state != DED_NOISE_ESTABLISHED) return DED_ERR_INVALID_ARG;
  uint8_t k1[32], k2[32];
  kdf(hs->ck, NULL, 0, k1, k2, NULL);
  /* The initiator sends with the first key. */
  memcpy(keys->send, hs->initiator ? k1 : k2, 32);
  memcpy(keys->recv, hs->initiator ? k2 : k1, 32);
  memcpy(keys->peer_pk, hs->rs, DED_PK_BYTES);
  keys->aes256gcm = (hs->caps & hs->rcaps & DED_NOISE_CAP_AES256GCM) != 0;
  sodium_memzero(k1, sizeof k1);
  sodium_memzero(k2, sizeof k2);
  ded_noise_wipe(hs);
  return 0;
}
