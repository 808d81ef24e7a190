/*
 * test_groups.c: group peers in discovery records, and bootstrap
 * addresses added later (ded_node_groups_set, ded_node_group_hints,
 * ded_node_join_more), on real nodes over the in-process network (tnet).
 *
 * A job's world peer publishes where its groups' peers listen; the other
 * peers read, per group, what the others published (never their own),
 * and how many peers that take part in rounds have published nothing yet.
 * Addresses added later are tried in the background until a peer answers
 * there, and never turn a bootstrap that is done into a failed one.
 */
#include "harness.h"

#include <stdio.h>

static ded_group_addr group_of(uint16_t id, const char *text) {
  ded_group_addr g;
  memset(&g, 0, sizeof g);
  g.id = id;
  assert_int_equal(ded_addr_parse(text, &g.addr), 0);
  return g;
}

/* Node |i|'s hints for group |id|: how many, the first in |*first|, and
 * the peers still waited for in |*waiting|. */
static size_t hints(tnet *net, int i, uint16_t id, ded_addr *first, unsigned *waiting) {
  ded_addr out[DED_BOOTSTRAP_MAX];
  size_t n = ded_node_group_hints(net->n[i].node, id, net->now, out, DED_BOOTSTRAP_MAX, waiting);
  if (n && first) *first = out[0];
  return n;
}

static unsigned waiting_of(tnet *net, int i) {
  unsigned w;
  hints(net, i, 0, NULL, &w);
  return w;
}

/* A publishes, B reads A's address for that group and nothing for
 * another; the count of peers waited for drops as each publishes (a
 * backbone never counts, nor our own record); a new list replaces the
 * old; a peer that left is not a hint. */
static void test_groups_hints(void **state) {
  (void)state;
  tnet *net = tnet_new();
  tnet_add_as(net, 1, true); /* 0: a backbone */
  tnet_add(net, 1);          /* 1: A */
  tnet_add(net, 1);          /* 2: B */
  tnet_add(net, 1);          /* 3: C */
  tnet_mesh(net);
  ded_addr a;
  unsigned w;
  assert_int_equal(hints(net, 2, 5, &a, &w), 0);
  assert_int_equal(w, 2); /* A and C */
  assert_int_equal(waiting_of(net, 0), 3); /* the backbone waits for A, B and C */

  ded_group_addr ga[2] = {group_of(5, "10.9.0.1:7105"), group_of(7, "[fd00::7]:7107")};
  assert_int_equal(ded_node_groups_set(net->n[1].node, ga, 2, net->now), 0);
  TNET_UNTIL(net, 5 * SEC_NS, waiting_of(net, 2) == 1);
  assert_int_equal(hints(net, 2, 5, &a, &w), 1);
  assert_true(ded_addr_equal(&a, &ga[0].addr));
  assert_int_equal(w, 1);
  assert_int_equal(hints(net, 2, 7, &a, &w), 1);
  assert_true(ded_addr_equal(&a, &ga[1].addr));
  assert_int_equal(hints(net, 2, 6, &a, &w), 0);
  assert_int_equal(hints(net, 3, 5, &a, &w), 1); /* C too */
  /* Our own list is no hint to ourselves. */
  assert_int_equal(hints(net, 1, 5, &a, &w), 0);
  assert_int_equal(w, 2); /* B and C */

  /* C publishes that it has no groups: nobody left to wait for. */
  assert_int_equal(ded_node_groups_set(net->n[3].node, NULL, 0, net->now), 0);
  TNET_UNTIL(net, 5 * SEC_NS, waiting_of(net, 2) == 0);
  assert_int_equal(waiting_of(net, 2), 0);
  assert_int_equal(hints(net, 2, 5, &a, &w), 1);

  /* A list a record cannot carry changes nothing. */
  ded_group_addr bad[2] = {group_of(7, "10.9.0.1:7105"), group_of(5, "10.9.0.1:7106")};
  assert_int_equal(ded_node_groups_set(net->n[1].node, bad, 2, net->now), DED_ERR_INVALID_ARG);
  bad[0] = group_of(4, "10.9.0.1:7105");
  bad[0].addr.port = 0;
  assert_int_equal(ded_node_groups_set(net->n[1].node, bad, 1, net->now), DED_ERR_INVALID_ARG);
  ded_group_addr many[DED_RECORD_GROUPS_MAX + 1];
  for (unsigned i = 0; i <= DED_RECORD_GROUPS_MAX; i++)
    many[i] = group_of((uint16_t)(100 + i), "10.9.0.1:7000");
  assert_int_equal(ded_node_groups_set(net->n[1].node, many, DED_RECORD_GROUPS_MAX + 1, net->now),
                   DED_ERR_INVALID_ARG);
  /* The largest list goes through. */
  assert_int_equal(ded_node_groups_set(net->n[3].node, many, DED_RECORD_GROUPS_MAX, net->now), 0);
  TNET_UNTIL(net, 5 * SEC_NS, hints(net, 2, 100 + DED_RECORD_GROUPS_MAX - 1, &a, &w) == 1);
  assert_int_equal(hints(net, 2, 100 + DED_RECORD_GROUPS_MAX - 1, &a, &w), 1);
  assert_true(ded_addr_equal(&a, &many[0].addr));
  assert_int_equal(hints(net, 2, 7, &a, &w), 1); /* A's is as it was */
  assert_true(ded_addr_equal(&a, &ga[1].addr));

  /* A replaces its list: group 7 is gone, group 6 is new. */
  ded_group_addr gb = group_of(6, "10.9.0.2:7206");
  assert_int_equal(ded_node_groups_set(net->n[1].node, &gb, 1, net->now), 0);
  TNET_UNTIL(net, 5 * SEC_NS, hints(net, 2, 6, &a, &w) == 1);
  assert_int_equal(hints(net, 2, 6, &a, &w), 1);
  assert_true(ded_addr_equal(&a, &gb.addr));
  assert_int_equal(hints(net, 2, 7, &a, &w), 0);

  /* A leaves: its list is no hint any more. */
  ded_node_leave(net->n[1].node, net->now);
  TNET_UNTIL(net, 5 * SEC_NS, hints(net, 2, 6, &a, &w) == 0);
  assert_int_equal(hints(net, 2, 6, &a, &w), 0);
  assert_int_equal(ded_node_groups_set(net->n[1].node, &gb, 1, net->now), DED_ERR_CLOSING);
  tnet_free(net);
}

/* Two nodes that each came up alone (the first peer of their run) meet
 * through an address added later; our own address and a duplicate are
 * harmless, an address nobody answers at makes no failure, and the
 * addresses being tried are bounded, done ones making room. */
static void test_groups_join_more(void **state) {
  (void)state;
  tnet *net = tnet_new();
  net->alone = true;
  tnet_add(net, 1);
  tnet_add(net, 1);
  tnet_pump(net);
  assert_true(net->n[0].booted && net->n[1].booted);
  assert_int_equal(ded_node_peer_count(net->n[1].node), 0);
  ded_addr nobody;
  assert_int_equal(ded_addr_parse("10.1.0.99:7000", &nobody), 0);
  ded_addr more[4] = {tnet_addr(0), tnet_addr(1), tnet_addr(0), nobody};
  assert_int_equal(ded_node_join_more(net->n[1].node, more, 4, net->now), 3);
  TNET_UNTIL(net, 10 * SEC_NS, tnet_meshed(net));
  assert_int_equal(ded_node_peer_count(net->n[0].node), 1);
  assert_int_equal(ded_node_peer_count(net->n[1].node), 1);
  assert_int_equal(ded_node_round_peer_count(net->n[0].node), 1);
  /* Long past the bootstrap bound: done, never failed. */
  TNET_UNTIL(net, 15 * SEC_NS, false);
  assert_int_equal(net->n[1].boot_failed, 0);
  assert_int_equal(ded_node_peer_count(net->n[1].node), 1);
  /* The bound: 3 slots in use, 1 of them done with (reached; tnet
   * refuses a call to oneself at once, so our own address is one that
   * fails here, not one found to be ours). */
  ded_addr others[DED_BOOTSTRAP_MAX + 1];
  for (unsigned i = 0; i <= DED_BOOTSTRAP_MAX; i++) {
    char text[32];
    snprintf(text, sizeof text, "10.2.0.%u:7000", i + 1);
    assert_int_equal(ded_addr_parse(text, &others[i]), 0);
  }
  assert_int_equal(ded_node_join_more(net->n[1].node, others, DED_BOOTSTRAP_MAX, net->now),
                   DED_BOOTSTRAP_MAX - 2);
  assert_int_equal(ded_node_join_more(net->n[1].node, &others[DED_BOOTSTRAP_MAX], 1, net->now), 0);
  TNET_UNTIL(net, 2 * SEC_NS, false);
  assert_int_equal(ded_node_peer_count(net->n[1].node), 1);
  assert_int_equal(net->n[1].boot_failed, 0);
  tnet_free(net);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_groups_hints),
      cmocka_unit_test(test_groups_join_more),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
