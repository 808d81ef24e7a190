/*
 * test_sessions.c: who gets in, against scripted peers (harness.h).
 * A HELLO counts only on a session that proved its key
 * (settings.sessions), and settings.access admits the owner, the
 * allow-list and the invited. (Handshakes in flight: test_admission.c.)
 */
#include <stdio.h>

#include "harness.h"

#include "dht/ded_invite.h"

/* settings.sessions: a HELLO counts only on a connection whose handshake
 * proved the key its record names; our own key closes the connection
 * and, on a call to a bootstrap address, makes that address ourselves. */
static void test_node_session_binds_hello(void **state) {
  (void)state;
  float b0[COUNT], *bufs[1] = {b0};
  ded_ident peer, other;
  unit_ident(&peer, 0x41);
  unit_ident(&other, 0x42);
  tnode t;
  tn_next_sessions = true;
  tnode_new(&t, bufs, 0, 1.0, 1, NULL, false, 0);
  unsigned plain = tnode_accept(&t); /* no handshake reported */
  send_hello(&t, plain, &peer, RUN);
  assert_true(t.closed[plain]);
  unsigned wrong = tnode_accept(&t); /* proved another key */
  ded_node_conn_secured(t.node, t.conn[wrong], other.pk, t.now);
  send_hello(&t, wrong, &peer, RUN);
  assert_true(t.closed[wrong]);
  assert_int_equal(ded_node_peer_count(t.node), 0);
  unsigned good = tnode_accept(&t);
  ded_node_conn_secured(t.node, t.conn[good], peer.pk, t.now);
  send_hello(&t, good, &peer, RUN);
  assert_false(t.closed[good]);
  assert_int_equal(ded_node_peer_count(t.node), 1);
  ded_node_free(t.node);

  /* Calling our own DEDMPI_JOIN address: the first peer of the run. */
  tn_next_sessions = true;
  tnode_new(&t, bufs, 0, 1.0, 1, NULL, true, 0);
  t.log_want = "first peer of the run";
  ded_node_conn_connected(t.node, t.conn[0], t.now);
  uint8_t want[DED_ID_BYTES];
  assert_false(ded_node_conn_expects(t.node, t.conn[0], want)); /* an address, not a peer */
  ded_node_conn_secured(t.node, t.conn[0], t.ident.pk, t.now);
  assert_true(t.closed[0]);
  tnode_advance(&t, 1000000000ull);
  assert_int_equal(t.log_hits, 1);
  unsigned self = tnode_accept(&t); /* and the same call, answered */
  ded_node_conn_secured(t.node, t.conn[self], t.ident.pk, t.now);
  assert_true(t.closed[self]);
  ded_node_free(t.node);

  /* A peer holding the secret answers at our DEDMPI_JOIN address with our
   * own (public) record: dropped, and the address is not taken for us. */
  tn_next_sessions = true;
  tnode_new(&t, bufs, 0, 1.0, 1, NULL, true, 0);
  t.log_want = "first peer of the run";
  ded_node_conn_connected(t.node, t.conn[0], t.now);
  ded_node_conn_secured(t.node, t.conn[0], other.pk, t.now);
  send_hello(&t, 0, &t.ident, RUN);
  assert_true(t.closed[0]);
  tnode_advance(&t, 1000000000ull);
  assert_int_equal(t.log_hits, 0);
  ded_node_free(t.node);
}

/* A HELLO from |peer| whose record carries |inv|'s signature (NULL: no
 * invitation). */
static void send_hello_invited(tnode *t, unsigned i, const ded_ident *peer, const ded_invite *inv) {
  uint8_t f[DED_HELLO_FRAME_BYTES(DED_RECORD_BYTES_MAX)];
  size_t n = unit_hello_frame_invited(f, sizeof f, peer, RUN, NOW_MS, inv ? inv->sig : NULL,
                                      inv ? inv->expires_ms : 0);
  send_raw(t, i, f, n);
}

/* settings.access: the owner, keys on the allow-list and identities the
 * owner invited get in; a peer without an invitation, with an expired
 * one or one not signed by the owner is dropped at HELLO; a relayed
 * record of a peer not admitted is skipped without blaming the relay;
 * the node's own invitation is in its record. */
static void test_node_access_control(void **state) {
  (void)state;
  float b0[COUNT], *bufs[1] = {b0};
  ded_ident owner, listed, guest, stranger, late, forger;
  unit_ident(&owner, 0x51);
  unit_ident(&listed, 0x52);
  unit_ident(&guest, 0x53);
  unit_ident(&stranger, 0x54);
  unit_ident(&late, 0x55);
  unit_ident(&forger, 0x56);
  uint8_t run[DED_RUN_ID_BYTES];
  ded_hash32(RUN, strlen(RUN), run);
  ded_ident self;
  ded_ident_from_seed(&self, node_seed);
  ded_invite mine, for_guest, for_late, forged;
  ded_invite_sign(&mine, &owner, run, self.pk, 0);
  ded_invite_sign(&for_guest, &owner, run, guest.pk, NOW_MS + 3600 * 1000);
  ded_invite_sign(&for_late, &owner, run, late.pk, NOW_MS - 1);
  ded_invite_sign(&forged, &forger, run, forger.pk, 0);
  uint8_t allow[1][DED_PK_BYTES];
  memcpy(allow[0], listed.pk, DED_PK_BYTES);
  ded_node_settings a;
  memset(&a, 0, sizeof a);
  a.access = a.has_owner = a.has_invite = true;
  memcpy(a.owner, owner.pk, DED_PK_BYTES);
  a.allow = (const uint8_t(*)[DED_PK_BYTES])allow;
  a.nallow = 1;
  a.invite_expires_ms = mine.expires_ms;
  memcpy(a.invite_sig, mine.sig, DED_SIG_BYTES);

  tnode t;
  tn_next_access = &a;
  tnode_new(&t, bufs, 0, 1.0, 1, NULL, false, 0);
  memset(allow, 0, sizeof allow); /* the node kept its own copy */
  unsigned c0 = tnode_accept(&t), c1 = tnode_accept(&t), c2 = tnode_accept(&t);
  /* Our own HELLO carries our invitation. */
  size_t len;
  uint8_t *out = tnode_output_on(&t, c0, &len, t.now);
  ded_frame fr;
  assert_true(frame_find(out, len, DED_MSG_HELLO, 0, &fr));
  ded_msg_hello h;
  ded_record rec;
  assert_int_equal(ded_msg_hello_decode(fr.payload, fr.len, &h), 0);
  assert_int_equal(ded_record_decode(h.rec, h.rec_len, &rec), 0);
  uint64_t exp;
  uint8_t sig[DED_SIG_BYTES];
  assert_int_equal(ded_record_invite(&rec, &exp, sig), 1);
  assert_memory_equal(sig, mine.sig, DED_SIG_BYTES);
  free(out);
  send_hello_invited(&t, c0, &listed, NULL);
  assert_false(t.closed[c0]);
  send_hello_invited(&t, c1, &stranger, NULL);
  assert_true(t.closed[c1]);
  send_hello_invited(&t, c2, &guest, &for_guest);
  assert_false(t.closed[c2]);
  assert_int_equal(ded_node_peer_count(t.node), 2);
  ded_node_free(t.node);

  tn_next_access = &a;
  a.nallow = 0;
  tnode_new(&t, bufs, 0, 1.0, 1, NULL, false, 0);
  c0 = tnode_accept(&t);
  c1 = tnode_accept(&t);
  c2 = tnode_accept(&t);
  send_hello_invited(&t, c0, &owner, NULL); /* the owner needs no invitation */
  assert_false(t.closed[c0]);
  send_hello_invited(&t, c1, &late, &for_late);
  assert_true(t.closed[c1]);
  send_hello_invited(&t, c2, &forger, &forged);
  assert_true(t.closed[c2]);
  /* The owner relays a stranger's record: skipped, the owner kept. */
  ded_record srec;
  unit_bare_record(&srec, RUN, NOW_MS);
  ded_record_sign(&srec, &stranger);
  uint8_t rb[DED_RECORD_BYTES_MAX], f[64 + DED_RECORD_BYTES_MAX];
  int rl = ded_record_encode(&srec, rb, sizeof rb);
  assert_true(rl > 0);
  ded_wr w = ded_wr_init(f, sizeof f);
  ded_msg_records_wr rw;
  ded_msg_records_begin(&rw, &w);
  ded_msg_records_add(&rw, rb, (size_t)rl);
  ded_msg_records_end(&rw);
  assert_false(w.err);
  send_raw(&t, c0, f, w.pos);
  assert_false(t.closed[c0]);
  assert_int_equal(ded_node_peer_count(t.node), 1);
  ded_node_free(t.node);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_node_access_control),
      cmocka_unit_test(test_node_session_binds_hello),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
