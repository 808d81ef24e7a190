/*
 * evil_peer.c: a swarm peer that misbehaves on purpose, against a real job.
 *
 * It speaks the protocol with the engine's own encoders and a real
 * identity, so it gets past HELLO, and then does what a hostile or merely
 * unlucky peer could:
 *
 *   evil_peer slot-reuse RUN PORT
 *       Two connections with the same identity; on the second, a JOIN far
 *       ahead (the victim drops this peer's *other* connection), enough
 *       empty RECORDS to need another read(), then the record of a new
 *       peer that the victim will call: the victim opens a connection in
 *       the slot it just freed, before its driver settled the old one.
 *   evil_peer join-after-fin RUN PORT
 *       A quiet backbone peer that, when the victim half-closes on leaving,
 *       sends a JOIN: the victim answers on a socket it already shut, which
 *       must cost it an EPIPE, not a SIGPIPE.
 *
 * Exits 0 when it played its part; the test then checks the victim.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/ded_frame.h"
#include "core/ded_msg.h"
#include "core/ded_wire.h"
#include "ded_node.h"

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int64_t wall_offset_ns(void) {
  struct timespec rt;
  clock_gettime(CLOCK_REALTIME, &rt);
  return (int64_t)rt.tv_sec * 1000000000 + rt.tv_nsec - (int64_t)now_ns();
}

static int no_connect(void *u, uint32_t id, const ded_addr *a) {
  (void)u, (void)id, (void)a;
  return -1;
}
static void no_close(void *u, uint32_t id) { (void)u, (void)id; }
static void no_write(void *u, uint32_t id) { (void)u, (void)id; }
static void no_round(void *u, void *c, const ded_round_result *r) { (void)u, (void)c, (void)r; }

/* A backbone node of |run| with identity seed |s0|: its HELLO frame in
 * |out|, its id in |id|. */
static size_t make_hello(const char *run, uint8_t s0, const ded_addr *announce, uint8_t *out,
                         uint8_t id[DED_ID_BYTES]) {
  uint8_t seed[DED_SEED_BYTES];
  memset(seed, s0, sizeof seed);
  seed[1] ^= 0x5a;
  ded_node_settings s;
  memset(&s, 0, sizeof s);
  s.run = run;
  s.min_peers = 1;
  s.identity_seed = seed;
  s.no_rounds = true;
  s.wall_offset_ns = wall_offset_ns();
  if (announce) {
    s.announce[0] = *announce;
    s.n_announce = 1;
  }
  ded_node_callbacks cb = {no_connect, no_close, no_write, no_round, NULL, NULL, NULL, NULL};
  ded_node *n;
  if (ded_node_new(&s, &cb, NULL, now_ns(), &n) != 0) exit(2);
  memcpy(id, ded_node_id(n), DED_ID_BYTES);
  ded_addr any;
  memset(&any, 0, sizeof any);
  any.family = 4;
  any.port = 1;
  uint32_t cid;
  ded_node_conn_accepted(n, &any, &cid, now_ns());
  ded_iov iov[4];
  int k = ded_node_conn_pending(n, cid, iov, 4);
  size_t len = 0;
  for (int i = 0; i < k; i++) {
    memcpy(out + len, iov[i].base, iov[i].len);
    len += iov[i].len;
  }
  ded_node_free(n);
  return len;
}

static int dial(int port) {
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(0x7f000001);
  sa.sin_port = htons((uint16_t)port);
  for (int tries = 0; tries < 200; tries++) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) return fd;
    close(fd);
    usleep(50000);
  }
  fprintf(stderr, "evil_peer: nobody listens on port %d\n", port);
  exit(2);
}

static void write_all(int fd, const uint8_t *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w <= 0) return; /* the victim may drop us: that is its right */
    p += w;
    n -= (size_t)w;
  }
}

static int slot_reuse(const char *run, int port) {
  uint8_t hello[1024], other[1024], id[DED_ID_BYTES], oid[DED_ID_BYTES];
  size_t hl = make_hello(run, 3, NULL, hello, id);
  /* A third identity, announced at the victim's own port (any address the
   * victim can dial will do), with a large id: the victim calls it. */
  ded_addr at;
  char txt[64];
  snprintf(txt, sizeof txt, "127.0.0.1:%d", port);
  ded_addr_parse(txt, &at);
  for (int s0 = 10; s0 < 255; s0++) {
    make_hello(run, (uint8_t)s0, &at, other, oid);
    if (oid[0] >= 0xf0) break;
  }
  int first = dial(port);
  write_all(first, hello, hl);
  usleep(300000);
  int second = dial(port);
  write_all(second, hello, hl);
  usleep(300000);
  size_t cap = 400000, o;
  uint8_t *b = malloc(cap);
  ded_wr w = ded_wr_init(b, cap);
  ded_msg_join far;
  memset(&far, 0, sizeof far);
  far.round = 100000;
  far.dtype = DED_DTYPE_F32;
  far.count = 16384;
  far.weight = 1.0;
  far.n_local = 1;
  ded_msg_join_encode(&w, &far);
  o = w.pos;
  while (o < 300000) { /* empty RECORDS: u32 len 3 | type | u16 n = 0 */
    const uint8_t empty[7] = {3, 0, 0, 0, DED_MSG_RECORDS, 0, 0};
    memcpy(b + o, empty, sizeof empty);
    o += sizeof empty;
  }
  /* HELLO payload: magic 6 | version 2 | run 32 | u16 record length | record */
  size_t rl = (size_t)other[5 + 40] | (size_t)other[5 + 41] << 8;
  ded_wr r = ded_wr_init(b + o, cap - o);
  ded_msg_records_wr rw;
  ded_msg_records_begin(&rw, &r);
  ded_msg_records_add(&rw, other + 5 + 42, rl);
  ded_msg_records_end(&rw);
  o += r.pos;
  write_all(second, b, o);
  free(b);
  sleep(2);
  close(first);
  close(second);
  return 0;
}

static int join_after_fin(const char *run, int port) {
  uint8_t hello[1024], id[DED_ID_BYTES], buf[65536];
  size_t hl = make_hello(run, 7, NULL, hello, id);
  int fd = dial(port);
  write_all(fd, hello, hl);
  bool told = false;
  for (;;) {
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 60000) <= 0) return 1;
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) { /* HELLO, records, LEAVE: we just listen */
      if (!told) { /* the test starts the rest of the swarm now */
        printf("connected\n");
        fflush(stdout);
        told = true;
      }
      continue;
    }
    /* EOF: the victim left and half-closed. A JOIN crosses its LEAVE. */
    uint8_t f[DED_JOIN_FRAME_BYTES];
    ded_wr w = ded_wr_init(f, sizeof f);
    ded_msg_join j;
    memset(&j, 0, sizeof j);
    j.dtype = DED_DTYPE_F32;
    j.count = 16384;
    j.weight = 1.0;
    j.n_local = 1;
    j.flags = DED_JOIN_F_GENESIS;
    ded_msg_join_encode(&w, &j);
    write_all(fd, f, w.pos);
    sleep(1);
    close(fd);
    return 0;
  }
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: evil_peer slot-reuse|join-after-fin RUN PORT\n");
    return 2;
  }
  if (!strcmp(argv[1], "slot-reuse")) return slot_reuse(argv[2], atoi(argv[3]));
  if (!strcmp(argv[1], "join-after-fin")) return join_after_fin(argv[2], atoi(argv[3]));
  fprintf(stderr, "evil_peer: unknown scenario %s\n", argv[1]);
  return 2;
}
