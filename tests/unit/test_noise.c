/*
 * test_noise.c: crypto/ded_noise (the handshake) and crypto/ded_aead (the
 * session it leaves).
 *
 * Two peers with the run's secret end with crossed keys and each other's
 * identity; a peer with another secret, no secret or another run is
 * turned away at the first message; no flipped bit of any message passes,
 * and a rejected message leaves the handshake as it was, so the genuine
 * one still completes; nothing runs out of turn. On the session, a frame
 * opens once, in order, with its header, under the key both sides rotated
 * to, and nowhere else.
 */
#include "unit_util.h"

#include "crypto/ded_aead.h"
#include "crypto/ded_noise.h"

#define NOW_NS 1000000000ull

typedef struct pair {
  ded_ident a_id, b_id; /* a calls b */
  ded_noise a, b;
  uint8_t m1[DED_NOISE_INITIATION_BYTES];
  uint8_t m2[DED_NOISE_RESPONSE_BYTES];
  uint8_t m3[DED_NOISE_FINAL_BYTES];
} pair;

static const uint8_t eph_a[32] = {1, 2, 3};
static const uint8_t eph_b[32] = {4, 5, 6};

static void psk_of(uint8_t psk[DED_NOISE_PSK_BYTES], uint8_t byte) {
  memset(psk, byte, DED_NOISE_PSK_BYTES);
}

/* Both sides initialised: |a| with |psk_a| in |run_a|, |b| with psk_b in
 * the unit run (a NULL psk: the run has none). */
static void pair_init(pair *p, const uint8_t *psk_a, const uint8_t *psk_b, const char *run_a) {
  uint8_t run[DED_RUN_ID_BYTES], run2[DED_RUN_ID_BYTES];
  unit_ident(&p->a_id, 0x11);
  unit_ident(&p->b_id, 0x22);
  unit_run_id(run);
  if (run_a)
    ded_hash32(run_a, strlen(run_a), run2);
  else
    memcpy(run2, run, sizeof run);
  ded_noise_init(&p->a, &p->a_id, psk_a, run2, true);
  ded_noise_init(&p->b, &p->b_id, psk_b, run, false);
}

/* The whole handshake; every step must succeed. */
static void pair_run(pair *p, ded_noise_keys *ka, ded_noise_keys *kb) {
  assert_int_equal(ded_noise_create_initiation(&p->a, eph_a, p->m1), 0);
  assert_int_equal(ded_noise_consume_initiation(&p->b, p->m1), 0);
  assert_int_equal(ded_noise_create_response(&p->b, eph_b, p->m2), 0);
  assert_int_equal(ded_noise_consume_response(&p->a, p->m2), 0);
  assert_int_equal(ded_noise_create_final(&p->a, p->m3), 0);
  assert_int_equal(ded_noise_consume_final(&p->b, p->m3), 0);
  assert_int_equal(ded_noise_split(&p->a, ka), 0);
  assert_int_equal(ded_noise_split(&p->b, kb), 0);
}

static void test_noise_handshake(void **state) {
  (void)state;
  pair p;
  uint8_t psk[DED_NOISE_PSK_BYTES];
  psk_of(psk, 0x5a);
  for (int with_psk = 0; with_psk < 2; with_psk++) {
    pair_init(&p, with_psk ? psk : NULL, with_psk ? psk : NULL, NULL);
    ded_noise_keys ka, kb;
    pair_run(&p, &ka, &kb);
    assert_memory_equal(ka.send, kb.recv, DED_NOISE_KEY_BYTES);
    assert_memory_equal(ka.recv, kb.send, DED_NOISE_KEY_BYTES);
    assert_memory_not_equal(ka.send, ka.recv, DED_NOISE_KEY_BYTES);
    assert_memory_equal(ka.peer_pk, p.b_id.pk, DED_PK_BYTES);
    assert_memory_equal(kb.peer_pk, p.a_id.pk, DED_PK_BYTES);
    assert_int_equal(ka.aes256gcm, kb.aes256gcm);
    /* split wiped the handshake: no second split. */
    assert_int_equal(ded_noise_split(&p.a, &ka), DED_ERR_INVALID_ARG);
  }
  /* The identity is not in the clear: neither public key is in any message. */
  for (size_t i = 0; i + DED_PK_BYTES <= sizeof p.m2; i++)
    assert_memory_not_equal(p.m2 + i, p.b_id.pk, DED_PK_BYTES);
  for (size_t i = 0; i + DED_PK_BYTES <= sizeof p.m3; i++)
    assert_memory_not_equal(p.m3 + i, p.a_id.pk, DED_PK_BYTES);
}

/* Another secret, no secret against one, one against none, another run:
 * the responder refuses the initiation (mac1, before any DH) and stays
 * ready for a genuine one. */
static void test_noise_outsiders(void **state) {
  (void)state;
  uint8_t psk[DED_NOISE_PSK_BYTES], other[DED_NOISE_PSK_BYTES];
  psk_of(psk, 0x5a);
  psk_of(other, 0x5b);
  const struct {
    const uint8_t *psk_a, *psk_b;
    const char *run_a;
  } cases[] = {{other, psk, NULL}, {NULL, psk, NULL}, {psk, NULL, NULL}, {psk, psk, "other run"}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    pair p;
    pair_init(&p, cases[c].psk_a, cases[c].psk_b, cases[c].run_a);
    assert_int_equal(ded_noise_create_initiation(&p.a, eph_a, p.m1), 0);
    assert_int_equal(ded_noise_consume_initiation(&p.b, p.m1), DED_ERR_AUTH);
    assert_int_equal(p.b.state, DED_NOISE_ZEROED);
  }
  /* Past mac1 the psk still decides: give the outsider the responder's
   * mac1 key (mac1 is only a cheap first filter), and the initiation still
   * fails, its empty payload sealed under a key the psk went into. */
  pair p;
  pair_init(&p, other, psk, NULL);
  memcpy(p.a.mac1_key, p.b.mac1_key, sizeof p.a.mac1_key);
  assert_int_equal(ded_noise_create_initiation(&p.a, eph_a, p.m1), 0);
  assert_int_equal(ded_noise_consume_initiation(&p.b, p.m1), DED_ERR_AUTH);
  assert_int_equal(p.b.state, DED_NOISE_ZEROED);
}

typedef int (*consume_fn)(ded_noise *hs, const uint8_t *in);

/* Every bit of |msg| flipped in turn: |consume| refuses it and leaves |hs|
 * byte for byte as it was (snapshots by memcpy: padding compares too);
 * then the genuine message passes. */
static void tamper_each_bit(ded_noise *hs, consume_fn consume, uint8_t *msg, size_t len) {
  ded_noise before;
  memcpy(&before, hs, sizeof before);
  for (size_t bit = 0; bit < 8 * len; bit++) {
    msg[bit / 8] ^= (uint8_t)(1u << bit % 8);
    assert_int_equal(consume(hs, msg), DED_ERR_AUTH);
    assert_memory_equal(hs, &before, sizeof before);
    msg[bit / 8] ^= (uint8_t)(1u << bit % 8);
  }
  assert_int_equal(consume(hs, msg), 0);
}

/* Every bit of every message flipped in turn: refused, and the receiver's
 * state unchanged, so the genuine message then completes the handshake
 * (consume functions commit only after every check). */
static void test_noise_tamper(void **state) {
  (void)state;
  uint8_t psk[DED_NOISE_PSK_BYTES];
  psk_of(psk, 0x5a);
  pair p;
  pair_init(&p, psk, psk, NULL);
  assert_int_equal(ded_noise_create_initiation(&p.a, eph_a, p.m1), 0);
  tamper_each_bit(&p.b, ded_noise_consume_initiation, p.m1, sizeof p.m1);
  assert_int_equal(ded_noise_create_response(&p.b, eph_b, p.m2), 0);
  tamper_each_bit(&p.a, ded_noise_consume_response, p.m2, sizeof p.m2);
  assert_int_equal(ded_noise_create_final(&p.a, p.m3), 0);
  tamper_each_bit(&p.b, ded_noise_consume_final, p.m3, sizeof p.m3);
  ded_noise_keys ka, kb;
  assert_int_equal(ded_noise_split(&p.a, &ka), 0);
  assert_int_equal(ded_noise_split(&p.b, &kb), 0);
  assert_memory_equal(ka.send, kb.recv, DED_NOISE_KEY_BYTES);
}

/* A man in the middle who knows the psk (an admitted peer) cannot pose as
 * the callee: it answers with its own identity, which the caller then
 * learns, or splices the callee's response onto its own initiation and
 * fails. */
static void test_noise_man_in_the_middle(void **state) {
  (void)state;
  uint8_t psk[DED_NOISE_PSK_BYTES];
  psk_of(psk, 0x5a);
  pair p;
  pair_init(&p, psk, psk, NULL);
  ded_ident m_id;
  unit_ident(&m_id, 0x33);
  uint8_t run[DED_RUN_ID_BYTES];
  unit_run_id(run);
  ded_noise m_to_b; /* the middle calls b with its own ephemeral */
  ded_noise_init(&m_to_b, &m_id, psk, run, true);
  static const uint8_t eph_m[32] = {7, 8, 9};
  uint8_t mm1[DED_NOISE_INITIATION_BYTES];
  assert_int_equal(ded_noise_create_initiation(&p.a, eph_a, p.m1), 0);
  assert_int_equal(ded_noise_create_initiation(&m_to_b, eph_m, mm1), 0);
  assert_int_equal(ded_noise_consume_initiation(&p.b, mm1), 0);
  assert_int_equal(ded_noise_create_response(&p.b, eph_b, p.m2), 0);
  /* b's response, made for the middle's ephemeral, relayed to a. */
  assert_int_equal(ded_noise_consume_response(&p.a, p.m2), DED_ERR_AUTH);
  /* The middle answering a itself: a learns the middle's key, not b's. */
  ded_noise m_for_a;
  ded_noise_init(&m_for_a, &m_id, psk, run, false);
  assert_int_equal(ded_noise_consume_initiation(&m_for_a, p.m1), 0);
  uint8_t mm2[DED_NOISE_RESPONSE_BYTES];
  assert_int_equal(ded_noise_create_response(&m_for_a, eph_m, mm2), 0);
  assert_int_equal(ded_noise_consume_response(&p.a, mm2), 0);
  /* Before it says who it is, the caller sees whom it reached. */
  assert_memory_equal(ded_noise_peer_pk(&p.a), m_id.pk, DED_PK_BYTES);
  assert_int_equal(ded_noise_create_final(&p.a, p.m3), 0);
  ded_noise_keys ka;
  assert_int_equal(ded_noise_split(&p.a, &ka), 0);
  assert_memory_equal(ka.peer_pk, m_id.pk, DED_PK_BYTES);
  assert_memory_not_equal(ka.peer_pk, p.b_id.pk, DED_PK_BYTES);
}

/* An admitted peer (it has the psk) claiming another's public key without
 * its secret key fails "es" as responder and "se" as initiator. */
static void test_noise_impersonation(void **state) {
  (void)state;
  uint8_t psk[DED_NOISE_PSK_BYTES];
  psk_of(psk, 0x5a);
  pair p;
  pair_init(&p, psk, psk, NULL);
  ded_ident fake;
  unit_ident(&fake, 0x33);
  memcpy(fake.pk, p.b_id.pk, DED_PK_BYTES); /* b's key, the middle's secret */
  uint8_t run[DED_RUN_ID_BYTES];
  unit_run_id(run);
  static const uint8_t eph_m[32] = {7, 8, 9};
  /* As the responder a called. */
  ded_noise m;
  ded_noise_init(&m, &fake, psk, run, false);
  assert_int_equal(ded_noise_create_initiation(&p.a, eph_a, p.m1), 0);
  assert_int_equal(ded_noise_consume_initiation(&m, p.m1), 0);
  assert_int_equal(ded_noise_create_response(&m, eph_m, p.m2), 0);
  assert_int_equal(ded_noise_consume_response(&p.a, p.m2), DED_ERR_AUTH);
  assert_null(ded_noise_peer_pk(&p.a));
  /* As an initiator calling a (posing as b). */
  pair q;
  pair_init(&q, psk, psk, NULL);
  ded_noise_init(&m, &fake, psk, run, true);
  ded_noise_init(&q.a, &q.a_id, psk, run, false); /* a answers */
  assert_int_equal(ded_noise_create_initiation(&m, eph_m, q.m1), 0);
  assert_int_equal(ded_noise_consume_initiation(&q.a, q.m1), 0);
  assert_int_equal(ded_noise_create_response(&q.a, eph_a, q.m2), 0);
  assert_int_equal(ded_noise_consume_response(&m, q.m2), 0);
  assert_int_equal(ded_noise_create_final(&m, q.m3), 0);
  assert_int_equal(ded_noise_consume_final(&q.a, q.m3), DED_ERR_AUTH);
  assert_null(ded_noise_peer_pk(&q.a));
  /* The same with the genuine key pair passes: what failed was the key. */
  ded_noise_init(&m, &p.b_id, psk, run, true);
  ded_noise_init(&q.a, &q.a_id, psk, run, false);
  assert_int_equal(ded_noise_create_initiation(&m, eph_m, q.m1), 0);
  assert_int_equal(ded_noise_consume_initiation(&q.a, q.m1), 0);
  assert_int_equal(ded_noise_create_response(&q.a, eph_a, q.m2), 0);
  assert_int_equal(ded_noise_consume_response(&m, q.m2), 0);
  assert_int_equal(ded_noise_create_final(&m, q.m3), 0);
  assert_int_equal(ded_noise_consume_final(&q.a, q.m3), 0);
  assert_memory_equal(ded_noise_peer_pk(&q.a), p.b_id.pk, DED_PK_BYTES);
}

/* Each message only in its turn and on its side. */
static void test_noise_out_of_turn(void **state) {
  (void)state;
  pair p;
  pair_init(&p, NULL, NULL, NULL);
  ded_noise_keys k;
  assert_int_equal(ded_noise_create_initiation(&p.b, eph_b, p.m1), DED_ERR_INVALID_ARG);
  assert_int_equal(ded_noise_create_response(&p.b, eph_b, p.m2), DED_ERR_INVALID_ARG);
  assert_int_equal(ded_noise_consume_final(&p.b, p.m3), DED_ERR_INVALID_ARG);
  assert_int_equal(ded_noise_consume_response(&p.a, p.m2), DED_ERR_INVALID_ARG);
  assert_int_equal(ded_noise_create_final(&p.a, p.m3), DED_ERR_INVALID_ARG);
  assert_int_equal(ded_noise_split(&p.a, &k), DED_ERR_INVALID_ARG);
  assert_int_equal(ded_noise_create_initiation(&p.a, eph_a, p.m1), 0);
  assert_int_equal(ded_noise_create_initiation(&p.a, eph_a, p.m1), DED_ERR_INVALID_ARG);
  assert_int_equal(ded_noise_consume_initiation(&p.a, p.m1), DED_ERR_INVALID_ARG);
  assert_int_equal(ded_noise_consume_initiation(&p.b, p.m1), 0);
  assert_int_equal(ded_noise_consume_initiation(&p.b, p.m1), DED_ERR_INVALID_ARG);
  assert_int_equal(ded_noise_split(&p.b, &k), DED_ERR_INVALID_ARG);
}

/* AES-256-GCM only when both sides have it. */
static void test_noise_cipher_choice(void **state) {
  (void)state;
  const uint8_t caps[4][2] = {{0, 0}, {1, 0}, {0, 1}, {1, 1}};
  for (int c = 0; c < 4; c++) {
    pair p;
    pair_init(&p, NULL, NULL, NULL);
    p.a.caps = caps[c][0];
    p.b.caps = caps[c][1];
    ded_noise_keys ka, kb;
    pair_run(&p, &ka, &kb);
    assert_int_equal(ka.aes256gcm, c == 3);
    assert_int_equal(kb.aes256gcm, c == 3);
  }
}

/* One direction of a session, both ciphers where this machine has them:
 * frames open once and in order, with their header; rekeyed together
 * they go on, one side alone they do not. */
static void test_aead_session(void **state) {
  (void)state;
  pair p;
  pair_init(&p, NULL, NULL, NULL);
  bool aes_here = (p.a.caps & DED_NOISE_CAP_AES256GCM) != 0; /* split wipes it */
  ded_noise_keys ka, kb;
  pair_run(&p, &ka, &kb);
  assert_int_equal(ka.aes256gcm, aes_here);
  for (int aes = 0; aes < 2; aes++) {
    if (aes && !aes_here) break; /* no AES in hardware here */
    ded_aead tx, rx;
    ded_aead_init(&tx, ka.send, aes, NOW_NS);
    ded_aead_init(&rx, kb.recv, aes, NOW_NS);
    uint8_t hdr[4] = {0, 0, 0, 9}, plain[3][64], sealed[3][64 + DED_AEAD_TAG_BYTES], out[64];
    for (int i = 0; i < 3; i++) {
      memset(plain[i], 'a' + i, sizeof plain[i]);
      ded_aead_seal(&tx, hdr, sizeof hdr, plain[i], sizeof plain[i], sealed[i]);
      assert_memory_not_equal(sealed[i], plain[i], sizeof plain[i]);
    }
    /* Out of order (frame 1 first) and with a changed header: refused,
     * and the counter stays. */
    assert_int_equal(ded_aead_open(&rx, hdr, sizeof hdr, sealed[1], sizeof sealed[1], out),
                     DED_ERR_AUTH);
    hdr[3] ^= 1;
    assert_int_equal(ded_aead_open(&rx, hdr, sizeof hdr, sealed[0], sizeof sealed[0], out),
                     DED_ERR_AUTH);
    hdr[3] ^= 1;
    assert_int_equal(ded_aead_open(&rx, hdr, sizeof hdr, sealed[0], sizeof sealed[0], out), 0);
    assert_memory_equal(out, plain[0], sizeof out);
    /* Replayed: refused. */
    assert_int_equal(ded_aead_open(&rx, hdr, sizeof hdr, sealed[0], sizeof sealed[0], out),
                     DED_ERR_AUTH);
    assert_int_equal(ded_aead_open(&rx, hdr, sizeof hdr, sealed[1], sizeof sealed[1], out), 0);
    assert_int_equal(ded_aead_open(&rx, hdr, sizeof hdr, sealed[2], sizeof sealed[2], out), 0);
    assert_memory_equal(out, plain[2], sizeof out);
    /* Too short to hold a tag. */
    assert_int_equal(ded_aead_open(&rx, hdr, sizeof hdr, sealed[0], DED_AEAD_TAG_BYTES - 1, out),
                     DED_ERR_AUTH);
    /* Rotation: due by time, then by bytes; both sides move at one frame. */
    assert_false(ded_aead_rekey_due(&tx, NOW_NS + 1));
    assert_true(ded_aead_rekey_due(&tx, NOW_NS + DED_AEAD_REKEY_NS));
    ded_aead_rekey(&tx, NOW_NS + DED_AEAD_REKEY_NS);
    assert_false(ded_aead_rekey_due(&tx, NOW_NS + DED_AEAD_REKEY_NS));
    tx.bytes = DED_AEAD_REKEY_BYTES;
    assert_true(ded_aead_rekey_due(&tx, NOW_NS + DED_AEAD_REKEY_NS));
    ded_aead_seal(&tx, hdr, sizeof hdr, plain[0], sizeof plain[0], sealed[0]);
    ded_aead cold = rx; /* a receiver that missed the rotation */
    assert_int_equal(ded_aead_open(&cold, hdr, sizeof hdr, sealed[0], sizeof sealed[0], out),
                     DED_ERR_AUTH);
    ded_aead_rekey(&rx, NOW_NS);
    assert_int_equal(ded_aead_open(&rx, hdr, sizeof hdr, sealed[0], sizeof sealed[0], out), 0);
    assert_memory_equal(out, plain[0], sizeof out);
    /* The other direction's key does not open this one's frames (both
     * fresh, at counter 0, so only the key differs). */
    ded_aead fresh, wrong, right;
    ded_aead_init(&fresh, ka.send, aes, NOW_NS);
    ded_aead_init(&wrong, ka.recv, aes, NOW_NS);
    ded_aead_init(&right, kb.recv, aes, NOW_NS);
    ded_aead_seal(&fresh, hdr, sizeof hdr, plain[1], sizeof plain[1], sealed[1]);
    assert_int_equal(ded_aead_open(&wrong, hdr, sizeof hdr, sealed[1], sizeof sealed[1], out),
                     DED_ERR_AUTH);
    assert_int_equal(ded_aead_open(&right, hdr, sizeof hdr, sealed[1], sizeof sealed[1], out), 0);
    ded_aead_wipe(&tx);
    ded_aead_wipe(&rx);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_noise_handshake),
      cmocka_unit_test(test_noise_outsiders),
      cmocka_unit_test(test_noise_tamper),
      cmocka_unit_test(test_noise_man_in_the_middle),
      cmocka_unit_test(test_noise_impersonation),
      cmocka_unit_test(test_noise_out_of_turn),
      cmocka_unit_test(test_noise_cipher_choice),
      cmocka_unit_test(test_aead_session),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
