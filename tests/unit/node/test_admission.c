/*
 * test_admission.c: who gets an inbound slot while connections that never
 * finish their handshake hold many (ded_conns_admit, ded_conns_tick;
 * DED_HANDSHAKES_*, DED_HELLO_TIMEOUT_*): a flooding address pays with its
 * own oldest connections, not the others; a connection that proved the
 * key is never evicted; under pressure the unproven get 1 s, not 10.
 */
#include <stdio.h>

#include "harness.h"

/* Whether connection |id| is still open: an accepted one keeps its HELLO
 * queued (nobody here takes it), a closed one has no output. */
static bool conn_open(tnode *t, uint32_t id) {
  ded_iov iov[1];
  return ded_node_conn_pending(t->node, id, iov, 1) > 0;
}

/* Accepts a connection from |host| (port |port|); its id. */
static uint32_t accept_from(tnode *t, const char *host, unsigned port) {
  char s[64];
  snprintf(s, sizeof s, "%s:%u", host, port);
  ded_addr a;
  assert_int_equal(ded_addr_parse(s, &a), 0);
  uint32_t id = 0;
  assert_int_equal(ded_node_conn_accepted(t->node, &a, &id, t->now), 0);
  assert_true(conn_open(t, id));
  return id;
}

static int accept_rv(tnode *t, const char *host, unsigned port) {
  char s[64];
  snprintf(s, sizeof s, "%s:%u", host, port);
  ded_addr a;
  assert_int_equal(ded_addr_parse(s, &a), 0);
  uint32_t id;
  return ded_node_conn_accepted(t->node, &a, &id, t->now);
}

/* One address at its bound (DED_HANDSHAKES_PER_ADDR_MAX): its next
 * connection evicts its own oldest, never another address's; with every
 * slot taken (DED_HANDSHAKES_MAX), a new address evicts the oldest of the
 * address holding the most; where an address ties for the most, it pays
 * itself. */
static void test_node_admission_evicts_flooder(void **state) {
  (void)state;
  float b0[COUNT], *bufs[1] = {b0};
  tnode t;
  tnode_start(&t, bufs, 0, 1.0, 1); /* conn[0], from 10.0.0.2: one handshake */
  uint32_t a[DED_HANDSHAKES_PER_ADDR_MAX + 2];
  for (unsigned i = 0; i < DED_HANDSHAKES_PER_ADDR_MAX; i++)
    a[i] = accept_from(&t, "10.0.0.66", 1000 + i);
  a[DED_HANDSHAKES_PER_ADDR_MAX] = accept_from(&t, "10.0.0.66", 999);
  assert_false(conn_open(&t, a[0]));
  for (unsigned i = 1; i <= DED_HANDSHAKES_PER_ADDR_MAX; i++) assert_true(conn_open(&t, a[i]));
  assert_true(conn_open(&t, t.conn[0]));
  /* Fill every slot: other addresses, 8 each. */
  unsigned n = DED_HANDSHAKES_PER_ADDR_MAX + 1;
  uint32_t others[DED_HANDSHAKES_MAX];
  unsigned no = 0;
  for (unsigned h = 0; n < DED_HANDSHAKES_MAX; h++) {
    char s[32];
    snprintf(s, sizeof s, "10.1.%u.%u", h / 200, h % 200 + 1);
    for (unsigned i = 0; i < 8 && n < DED_HANDSHAKES_MAX; i++, n++)
      others[no++] = accept_from(&t, s, 2000 + i);
  }
  /* A new address: the oldest of 10.0.0.66 goes, nobody else. */
  uint32_t x = accept_from(&t, "10.2.0.1", 7);
  assert_false(conn_open(&t, a[1]));
  for (unsigned i = 2; i <= DED_HANDSHAKES_PER_ADDR_MAX; i++) assert_true(conn_open(&t, a[i]));
  for (unsigned i = 0; i < no; i++) assert_true(conn_open(&t, others[i]));
  assert_true(conn_open(&t, t.conn[0]) && conn_open(&t, x));
  /* 10.0.0.66 keeps at most its bound: 63 now, and a flood of a thousand
   * more from it costs only its own. */
  for (unsigned i = 0; i < 1000; i++) accept_from(&t, "10.0.0.66", 3000 + i);
  for (unsigned i = 0; i < no; i++) assert_true(conn_open(&t, others[i]));
  assert_true(conn_open(&t, t.conn[0]) && conn_open(&t, x));
  ded_node_free(t.node);

  /* Ties: four addresses at 64 each hold every slot; one of them pays for
   * its own next connection, and a fifth address takes from the one whose
   * oldest is oldest. */
  tnode_new(&t, bufs, 0, 1.0, 1, NULL, false, 0);
  uint32_t h[4][DED_HANDSHAKES_PER_ADDR_MAX];
  for (unsigned k = 0; k < 4; k++)
    for (unsigned i = 0; i < DED_HANDSHAKES_PER_ADDR_MAX; i++) {
      char s[32];
      snprintf(s, sizeof s, "10.3.0.%u", k + 1);
      h[k][i] = accept_from(&t, s, 1000 + i);
    }
  accept_from(&t, "10.3.0.3", 999);
  assert_false(conn_open(&t, h[2][0]));
  assert_true(conn_open(&t, h[0][0]) && conn_open(&t, h[1][0]) && conn_open(&t, h[3][0]));
  accept_from(&t, "10.4.0.1", 1);
  assert_false(conn_open(&t, h[0][0]));
  assert_true(conn_open(&t, h[1][0]) && conn_open(&t, h[3][0]) && conn_open(&t, h[2][1]));
  ded_node_free(t.node);
}

/* A connection whose handshake proved a key is never evicted: an address
 * whose every handshake slot holds such connections is refused, and
 * connections that said HELLO count up to DED_CONNS_PER_ADDR_MAX from one
 * address (one peer's further connections stay idle); another address
 * still gets in. */
static void test_node_admission_keeps_proven(void **state) {
  (void)state;
  float b0[COUNT], *bufs[1] = {b0};
  ded_ident peer;
  unit_ident(&peer, 0x61);
  tnode t;
  tnode_new(&t, bufs, 0, 1.0, 1, NULL, false, 0);
  uint32_t p[DED_HANDSHAKES_PER_ADDR_MAX];
  for (unsigned i = 0; i < DED_HANDSHAKES_PER_ADDR_MAX; i++) {
    p[i] = accept_from(&t, "10.0.0.66", 1000 + i);
    ded_node_conn_secured(t.node, p[i], peer.pk, t.now);
  }
  assert_int_equal(accept_rv(&t, "10.0.0.66", 999), DED_ERR_LIMIT);
  for (unsigned i = 0; i < DED_HANDSHAKES_PER_ADDR_MAX; i++) assert_true(conn_open(&t, p[i]));
  accept_from(&t, "10.0.0.67", 1);
  ded_node_free(t.node);

  tnode_start(&t, bufs, 0, 1.0, 1);
  uint8_t f[DED_HELLO_FRAME_BYTES(DED_RECORD_BYTES_MAX)];
  size_t fl = unit_hello_frame(f, sizeof f, &peer, RUN, NOW_MS);
  for (unsigned i = 0; i < DED_CONNS_PER_ADDR_MAX; i++) {
    uint32_t id = accept_from(&t, "10.0.0.77", 1000 + i);
    ded_node_conn_recv(t.node, id, f, fl, t.now);
  }
  assert_int_equal(accept_rv(&t, "10.0.0.77", 999), DED_ERR_LIMIT);
  accept_from(&t, "10.0.0.78", 1);
  ded_node_free(t.node);
}

/* Pressure: while more than half the handshake slots hold unproven
 * connections, those are closed after DED_HELLO_TIMEOUT_PRESSED_MS; one
 * that proved the key keeps DED_HELLO_TIMEOUT_MS. Below half, the
 * unproven keep DED_HELLO_TIMEOUT_MS too. */
static void test_node_admission_pressure(void **state) {
  (void)state;
  float b0[COUNT], *bufs[1] = {b0};
  ded_ident peer;
  unit_ident(&peer, 0x62);
  const uint64_t pressed = (uint64_t)DED_HELLO_TIMEOUT_PRESSED_MS * 1000000u + 200000000u;
  const uint64_t full = (uint64_t)DED_HELLO_TIMEOUT_MS * 1000000u;
  tnode t;
  /* Exactly half, unproven: no pressure. */
  tnode_new(&t, bufs, 0, 1.0, 1, NULL, false, 0);
  uint32_t first = 0;
  for (unsigned i = 0; i < DED_HANDSHAKES_MAX / 2; i++) {
    char s[32];
    snprintf(s, sizeof s, "10.5.%u.1", i / DED_HANDSHAKES_PER_ADDR_MAX);
    uint32_t id = accept_from(&t, s, 1000 + i);
    if (i == 0) first = id;
  }
  tnode_advance(&t, pressed);
  assert_true(conn_open(&t, first));
  tnode_advance(&t, full - pressed + 200000000u);
  assert_false(conn_open(&t, first));
  ded_node_free(t.node);

  /* One more than half: the unproven go after 1 s, the proven one stays
   * to its 10 s. */
  tnode_new(&t, bufs, 0, 1.0, 1, NULL, false, 0);
  uint32_t proven = accept_from(&t, "10.6.0.1", 1);
  ded_node_conn_secured(t.node, proven, peer.pk, t.now);
  uint32_t ids[DED_HANDSHAKES_MAX / 2 + 1];
  for (unsigned i = 0; i < DED_HANDSHAKES_MAX / 2 + 1; i++) {
    char s[32];
    snprintf(s, sizeof s, "10.5.%u.1", i / DED_HANDSHAKES_PER_ADDR_MAX);
    ids[i] = accept_from(&t, s, 1000 + i);
  }
  t.log_want = "have not finished their handshake (more than half of 256)";
  tnode_advance(&t, pressed);
  for (unsigned i = 0; i < DED_HANDSHAKES_MAX / 2 + 1; i++) assert_false(conn_open(&t, ids[i]));
  assert_true(conn_open(&t, proven));
  assert_int_equal(t.log_hits, 1);
  tnode_advance(&t, full - pressed + 200000000u);
  assert_false(conn_open(&t, proven));
  ded_node_free(t.node);
}

/* What issue 22 saw: four addresses keep 200 silent connections each
 * open, reopening each one closed; an honest peer from a fifth address
 * still gets a slot at once and keeps it while the flood goes on. */
static void test_node_admission_flood_four_addresses(void **state) {
  (void)state;
  float b0[COUNT], *bufs[1] = {b0};
  tnode t;
  tnode_new(&t, bufs, 0, 1.0, 1, NULL, false, 0);
  unsigned port = 1000;
  for (unsigned i = 0; i < 200; i++)
    for (unsigned k = 0; k < 4; k++) {
      char s[32];
      snprintf(s, sizeof s, "127.0.0.%u", k + 2);
      accept_from(&t, s, port++);
    }
  /* Its handshake takes a moment, while the flood goes on; then it proved
   * the key. */
  uint32_t honest = accept_from(&t, "127.0.0.1", 5);
  for (unsigned i = 0; i < 1000; i++) {
    char s[32];
    snprintf(s, sizeof s, "127.0.0.%u", i % 4 + 2);
    accept_from(&t, s, port++);
  }
  assert_true(conn_open(&t, honest));
  ded_ident peer;
  unit_ident(&peer, 0x63);
  ded_node_conn_secured(t.node, honest, peer.pk, t.now);
  for (unsigned i = 0; i < 4000; i++) {
    char s[32];
    snprintf(s, sizeof s, "127.0.0.%u", i % 4 + 2);
    accept_from(&t, s, port++ % 60000 + 1);
    if (i % 400 == 0) tnode_advance(&t, 100000000u);
  }
  assert_true(conn_open(&t, honest));
  ded_node_free(t.node);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_node_admission_evicts_flooder),
      cmocka_unit_test(test_node_admission_keeps_proven),
      cmocka_unit_test(test_node_admission_pressure),
      cmocka_unit_test(test_node_admission_flood_four_addresses),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
