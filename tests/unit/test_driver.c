/*
 * test_driver.c: two real drivers (shim/io) on loopback, for what the
 * node's tests cannot show: the driver's API of group peers
 * (ded_dgroups.c) across its thread, over TCP and the secure channel.
 *
 * A driver listening on 127.0.0.1:0 with no DEDMPI_JOIN comes up as the
 * first peer of its run; given another such driver's address later
 * (ded_driver_join_more) the two meet, and each counts the other. A list
 * of group peers one publishes is what the other reads for that group,
 * and nothing for another; a reader waits for a peer that has published
 * nothing, for at most what it was given. A caller with another key, or
 * none, is told so by the peer and its start says so.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "unit_util.h"

#include "ded_driver.h"

#define SEC_NS (1000ull * 1000 * 1000)
#define MS_NS (1000ull * 1000)

static void on_done(void *user, void *ctx, const ded_round_result *res) {
  (void)user;
  (void)ctx;
  (void)res;
}

static void driver_config(ded_driver_config *dc, const char *name) {
  memset(dc, 0, sizeof *dc);
  dc->node.run = "unit-driver";
  dc->node.mode = DED_MODE_NODE;
  dc->node.min_peers = 1;
  dc->node.bootstrap_timeout_ns = 5 * SEC_NS;
  dc->node.rendezvous_timeout_ns = 5 * SEC_NS;
  dc->node.round_timeout_ns = 10 * SEC_NS;
  dc->node.log_level = getenv("TEST_DRIVER_VERBOSE") ? DED_LOG_DEBUG : DED_LOG_ERROR;
  dc->listen = "127.0.0.1:0";
  dc->join = "";
  dc->done = on_done;
  dc->log_prefix = name;
  dc->settings_said = true; /* no warning of an open run */
}

static ded_driver *start_alone(const char *name) {
  ded_driver_config dc;
  driver_config(&dc, name);
  ded_driver *d = NULL;
  char err[256];
  int rv = ded_driver_start(&dc, &d, err, sizeof err);
  if (rv) fail_msg("driver %s: %s", name, err);
  return d;
}

static void sleep_ms(unsigned ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Waits up to 10 s until both count |n| peers. */
static bool wait_peers(ded_driver *a, ded_driver *b, unsigned n) {
  for (int i = 0; i < 1000; i++) {
    if (ded_driver_peer_count(a) == n && ded_driver_peer_count(b) == n) return true;
    sleep_ms(10);
  }
  return false;
}

static void test_driver_join_more_and_groups(void **state) {
  (void)state;
  ded_driver *a = start_alone("A"), *b = start_alone("B");
  assert_int_equal(ded_driver_peer_count(a), 0);
  assert_int_equal(ded_driver_peer_count(b), 0);

  char addr_a[64], addr_b[64], small[8];
  assert_int_equal(ded_driver_address(a, addr_a, sizeof addr_a), 0);
  assert_int_equal(ded_driver_address(b, addr_b, sizeof addr_b), 0);
  char want[64];
  snprintf(want, sizeof want, "127.0.0.1:%u", ded_driver_port(a));
  assert_string_equal(addr_a, want);
  assert_int_equal(ded_driver_address(a, small, sizeof small), DED_ERR_INVALID_ARG);

  /* Alone, a reader has nobody to wait for: it answers at once. */
  char out[256];
  uint64_t t0 = ded_driver_now_ns();
  assert_int_equal(ded_driver_group_hints(b, 3, 5 * SEC_NS, out, sizeof out), 0);
  assert_string_equal(out, "");
  assert_true(ded_driver_now_ns() - t0 < 2 * SEC_NS);

  /* B meets A through A's address (its own and a repeat are harmless). */
  char more[200];
  snprintf(more, sizeof more, "%s, %s,%s", addr_a, addr_b, addr_a);
  assert_int_equal(ded_driver_join_more(b, more), 0);
  assert_true(wait_peers(a, b, 1));
  assert_int_equal(ded_driver_join_more(b, "not an address"), DED_ERR_INVALID_ARG);

  /* A has published nothing: B waits the whole 300 ms for it. */
  t0 = ded_driver_now_ns();
  assert_int_equal(ded_driver_group_hints(b, 3, 300 * MS_NS, out, sizeof out), 0);
  assert_true(ded_driver_now_ns() - t0 >= 300 * MS_NS);

  /* A publishes, in any order; B reads group 3 and group 9, nothing for 4. */
  const uint16_t ids[2] = {9, 3};
  const char *const addrs[2] = {"[::1]:4568", "127.0.0.1:4567"};
  assert_int_equal(ded_driver_groups_publish(a, ids, addrs, 2), 0);
  t0 = ded_driver_now_ns();
  assert_int_equal(ded_driver_group_hints(b, 3, 10 * SEC_NS, out, sizeof out), 1);
  assert_true(ded_driver_now_ns() - t0 < 5 * SEC_NS);
  assert_string_equal(out, "127.0.0.1:4567");
  assert_int_equal(ded_driver_group_hints(b, 9, 0, out, sizeof out), 1);
  assert_string_equal(out, "[::1]:4568");
  assert_int_equal(ded_driver_group_hints(b, 4, 10 * SEC_NS, out, sizeof out), 0);
  assert_string_equal(out, "");
  /* A's own list is no hint to A; B has published nothing yet. */
  assert_int_equal(ded_driver_group_hints(a, 3, 0, out, sizeof out), 0);
  assert_int_equal(ded_driver_group_hints(b, 3, 0, small, 4), DED_ERR_INVALID_ARG);

  /* Lists a record cannot carry. */
  const uint16_t twice[2] = {3, 3};
  assert_int_equal(ded_driver_groups_publish(a, twice, addrs, 2), DED_ERR_INVALID_ARG);
  const char *const named[1] = {"localhost:4567"};
  assert_int_equal(ded_driver_groups_publish(a, ids, named, 1), DED_ERR_INVALID_ARG);
  const char *const any[1] = {"0.0.0.0:4567"};
  assert_int_equal(ded_driver_groups_publish(a, ids, any, 1), DED_ERR_INVALID_ARG);
  uint16_t many_ids[DED_RECORD_GROUPS_MAX + 1];
  const char *many_addrs[DED_RECORD_GROUPS_MAX + 1];
  for (unsigned i = 0; i <= DED_RECORD_GROUPS_MAX; i++) {
    many_ids[i] = (uint16_t)(100 + i);
    many_addrs[i] = "127.0.0.1:4000";
  }
  assert_int_equal(ded_driver_groups_publish(a, many_ids, many_addrs, DED_RECORD_GROUPS_MAX + 1),
                   DED_ERR_INVALID_ARG);
  /* A full list replaces the old one. */
  assert_int_equal(ded_driver_groups_publish(a, many_ids, many_addrs, DED_RECORD_GROUPS_MAX), 0);
  int n = 0;
  for (int i = 0; i < 500 && (n = ded_driver_group_hints(b, 131, 0, out, sizeof out)) == 0; i++)
    sleep_ms(10);
  assert_int_equal(n, 1);
  assert_string_equal(out, "127.0.0.1:4000");
  assert_int_equal(ded_driver_group_hints(b, 9, 0, out, sizeof out), 0);

  ded_driver_stop(b, SEC_NS);
  ded_driver_stop(a, SEC_NS);
}

#define KEY_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define KEY_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

/* A job that calls |join| with |key| (NULL: none) for a second: what
 * ded_driver_start says. */
static int start_joining(const char *join, const char *key, const char *run, char *err,
                         size_t errlen) {
  ded_driver_config dc;
  driver_config(&dc, "J");
  dc.node.bootstrap_timeout_ns = SEC_NS;
  dc.join = join;
  dc.swarm_key = key;
  if (run) dc.node.run = run;
  ded_driver *d = NULL;
  err[0] = '\0';
  int rv = ded_driver_start(&dc, &d, err, errlen);
  if (rv == 0) ded_driver_stop(d, 0);
  return rv;
}

/* A peer turns away a caller with another key, no key or another run
 * name, and says so (a notice): the caller's start fails naming the peer
 * and the cause, not as "no peer answered". A peer with no room says
 * that instead. */
static void test_driver_refused_key(void **state) {
  (void)state;
  ded_driver_config dc;
  driver_config(&dc, "A");
  dc.swarm_key = KEY_A;
  ded_driver *a = NULL;
  char err[512], want[512], join[64];
  assert_int_equal(ded_driver_start(&dc, &a, err, sizeof err), 0);
  snprintf(join, sizeof join, "127.0.0.1:%u", ded_driver_port(a));

  assert_int_equal(start_joining(join, KEY_B, NULL, err, sizeof err), DED_ERR_AUTH);
  snprintf(want, sizeof want, "the peer at %s refused our key: another swarm key or run name "
           "(check DEDMPI_SWARM_KEY or DEDMPI_SWARM_KEY_FILE, and DEDMPI_RUN)", join);
  assert_string_equal(err, want);
  assert_int_equal(start_joining(join, KEY_A, "another-run", err, sizeof err), DED_ERR_AUTH);
  assert_string_equal(err, want);
  assert_int_equal(start_joining(join, NULL, NULL, err, sizeof err), DED_ERR_AUTH);
  snprintf(want, sizeof want, "the peer at %s refused our key: another swarm key or run name "
           "(this job has no DEDMPI_SWARM_KEY: the run has one)", join);
  assert_string_equal(err, want);
  /* The right key gets in. */
  assert_int_equal(start_joining(join, KEY_A, NULL, err, sizeof err), 0);

  /* A's handshakes from this host, all taken by silent sockets: the next
   * caller from it takes the oldest one's place (a flood cannot keep a
   * keyed peer out) and gets in. (A peer with no room at all, every slot
   * proven, says so with a notice: unit.chan's test_chan_notices.) */
  int fds[DED_HANDSHAKES_PER_ADDR_MAX];
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons(ded_driver_port(a));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int i = 0; i < DED_HANDSHAKES_PER_ADDR_MAX; i++) {
    fds[i] = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fds[i] >= 0);
    assert_int_equal(connect(fds[i], (struct sockaddr *)&sa, sizeof sa), 0);
  }
  sleep_ms(100); /* accepted */
  assert_int_equal(start_joining(join, KEY_A, NULL, err, sizeof err), 0);
  for (int i = 0; i < DED_HANDSHAKES_PER_ADDR_MAX; i++) close(fds[i]);

  /* Nobody at all: as before. */
  assert_int_equal(start_joining("127.0.0.1:1", KEY_A, NULL, err, sizeof err), DED_ERR_BOOTSTRAP);
  assert_string_equal(err, "no peer answered at DEDMPI_JOIN=127.0.0.1:1 within 1 s");
  ded_driver_stop(a, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_driver_join_more_and_groups),
      cmocka_unit_test(test_driver_refused_key),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
