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
 * It opens each connection with the real handshake (ded_chan, no swarm
 * key: the victim runs an open swarm) and seals what it sends.
 *
 * Exits 0 when it played its part; the test then checks the victim.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
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
#include "crypto/ded_chan.h"
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
 * |out|, its identity in |ident|. */
static size_t make_hello(const char *run, uint8_t s0, const ded_addr *announce, uint8_t *out,
                         ded_ident *ident) {
  uint8_t seed[DED_SEED_BYTES];
  memset(seed, s0, sizeof seed);
  seed[1] ^= 0x5a;
  ded_ident_from_seed(ident, seed);
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

/* A connection to the victim: a socket and its channel. */
typedef struct econn {
  int fd;
  ded_chan ch;
  bool open;
} econn;

static bool ec_opened(void *u, const uint8_t pk[DED_PK_BYTES]) {
  (void)pk;
  ((econn *)u)->open = true;
  return true;
}
static bool ec_plain(void *u, const uint8_t *p, size_t n) { /* we only listen */
  (void)u, (void)p, (void)n;
  return true;
}
static const ded_chan_cb ec_cb = {ec_opened, ec_plain};

static void ec_flush(econn *e) {
  const uint8_t *p;
  size_t n;
  while ((n = ded_chan_out(&e->ch, &p)) > 0) {
    write_all(e->fd, p, n);
    ded_chan_out_done(&e->ch, n);
  }
}

/* Reads once into the channel: bytes read, 0 at EOF or a broken channel. */
static ssize_t ec_read(econn *e) {
  uint8_t buf[65536];
  ssize_t n = read(e->fd, buf, sizeof buf);
  if (n <= 0 || ded_chan_recv(&e->ch, buf, (size_t)n, &ec_cb, e) != 0) return 0;
  ec_flush(e);
  return n;
}

/* Dials the victim as |ident| of |run| and runs the handshake. */
static void ec_dial(econn *e, int port, const ded_ident *ident, const char *run) {
  memset(e, 0, sizeof *e);
  e->fd = dial(port);
  uint8_t run_id[DED_RUN_ID_BYTES], eph[32];
  ded_hash32(run, strlen(run), run_id);
  for (size_t i = 0; i < sizeof eph; i++) eph[i] = (uint8_t)(rand() ^ (int)i);
  if (ded_chan_init(&e->ch, NULL, ident, NULL, run_id, true, NULL, eph, now_ns()) != 0) exit(2);
  ec_flush(e);
  while (!e->open)
    if (ec_read(e) == 0) {
      fprintf(stderr, "evil_peer: the handshake failed\n");
      exit(2);
    }
}

/* Seals and writes |n| bytes. */
static void ec_send(econn *e, const uint8_t *p, size_t n) {
  while (n > 0) {
    ded_iov iov = {p, n};
    size_t took = ded_chan_seal(&e->ch, &iov, 1, now_ns());
    p += took;
    n -= took;
    ec_flush(e);
  }
}

static int slot_reuse(const char *run, int port) {
  uint8_t hello[1024], other[1024];
  ded_ident me, oid;
  size_t hl = make_hello(run, 3, NULL, hello, &me);
  /* A third identity, announced at the victim's own port (any address the
   * victim can dial will do), with a large id: the victim calls it. */
  ded_addr at;
  char txt[64];
  snprintf(txt, sizeof txt, "127.0.0.1:%d", port);
  ded_addr_parse(txt, &at);
  for (int s0 = 10; s0 < 255; s0++) {
    make_hello(run, (uint8_t)s0, &at, other, &oid);
    if (oid.id[0] >= 0xf0) break;
  }
  econn first, second;
  ec_dial(&first, port, &me, run);
  ec_send(&first, hello, hl);
  usleep(300000);
  ec_dial(&second, port, &me, run);
  ec_send(&second, hello, hl);
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
  ec_send(&second, b, o);
  free(b);
  sleep(2);
  close(first.fd);
  close(second.fd);
  ded_chan_free(&first.ch);
  ded_chan_free(&second.ch);
  return 0;
}

static int join_after_fin(const char *run, int port) {
  uint8_t hello[1024];
  ded_ident me;
  size_t hl = make_hello(run, 7, NULL, hello, &me);
  econn e;
  ec_dial(&e, port, &me, run);
  ec_send(&e, hello, hl);
  bool told = false;
  for (;;) {
    struct pollfd p = {e.fd, POLLIN, 0};
    if (poll(&p, 1, 60000) <= 0) return 1;
    ssize_t n = ec_read(&e);
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
    ec_send(&e, f, w.pos);
    sleep(1);
    close(e.fd);
    ded_chan_free(&e.ch);
    return 0;
  }
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN); /* the victim may drop us: writes then fail, quietly */
  if (ded_crypto_init() != 0) return 2;
  if (argc != 4) {
    fprintf(stderr, "usage: evil_peer slot-reuse|join-after-fin RUN PORT\n");
    return 2;
  }
  if (!strcmp(argv[1], "slot-reuse")) return slot_reuse(argv[2], atoi(argv[3]));
  if (!strcmp(argv[1], "join-after-fin")) return join_after_fin(argv[2], atoi(argv[3]));
  fprintf(stderr, "evil_peer: unknown scenario %s\n", argv[1]);
  return 2;
}
