/*
 * evil_peer.c: a swarm peer that misbehaves on purpose, against a real job.
 *
 * It speaks the protocol with the engine's own encoders and a real
 * identity, so it gets past HELLO, and then does what a hostile or merely
 * unlucky peer could:
 *
 *   evil_peer slot-reuse RUN PORT
 *       Two connections with the same identity; on the second, a frame of
 *       an unknown type (the victim drops that connection), enough
 *       empty RECORDS to need another read(), then the record of a new
 *       peer that the victim will call: the victim opens a connection in
 *       the slot it just freed, before its driver settled the old one.
 *   evil_peer join-after-fin RUN PORT
 *       A quiet backbone peer that, when the victim half-closes on leaving,
 *       sends a JOIN: the victim answers on a socket it already shut, which
 *       must cost it an EPIPE, not a SIGPIPE.
 *
 *   evil_peer flood PORT ADDRS PER_ADDR SECONDS
 *       No protocol at all: from each of ADDRS source addresses
 *       (127.0.0.2, 127.0.0.3, ...: loopback takes any of 127/8), PER_ADDR
 *       connections to the victim kept open, every other one silent and
 *       the rest sending junk; each one the victim closes is opened again
 *       at once. Prints "flooding" once every connection was opened (or
 *       after 2 s), then, at the end (SECONDS, or SIGTERM), what it did.
 *
 * It opens each connection with the real handshake (ded_chan, no swarm
 * key: the victim runs an open swarm) and seals what it sends (but for
 * the flood, which never gets that far).
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
#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
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
  /* A frame of a type no version has (a protocol violation: the victim
   * drops the connection; a JOIN far ahead did, before version 12 took
   * it for a peer of a run that went on). */
  const uint8_t unknown[5] = {1, 0, 0, 0, 0xc8};
  memcpy(b, unknown, sizeof unknown);
  o = sizeof unknown;
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

/* ---- flood ---- */

static volatile sig_atomic_t flood_stop;
static void on_term(int sig) {
  (void)sig;
  flood_stop = 1;
}

typedef struct fconn {
  int fd;
  bool connecting, junk;
  unsigned src; /* 127.0.0.(2 + src) */
} fconn;

typedef struct flood_stats {
  unsigned long opened, closed_by_victim, failed;
} flood_stats;

/* Opens |c| again (nonblocking): 0, or -1 if the socket could not be made. */
static int flood_open(fconn *c, int port, flood_stats *st) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1;
  setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
  struct sockaddr_in src, dst;
  memset(&src, 0, sizeof src);
  src.sin_family = AF_INET;
  src.sin_addr.s_addr = htonl(0x7f000002u + c->src);
  memset(&dst, 0, sizeof dst);
  dst.sin_family = AF_INET;
  dst.sin_addr.s_addr = htonl(0x7f000001u);
  dst.sin_port = htons((uint16_t)port);
  if (bind(fd, (struct sockaddr *)&src, sizeof src) != 0 ||
      (connect(fd, (struct sockaddr *)&dst, sizeof dst) != 0 && errno != EINPROGRESS)) {
    close(fd);
    st->failed++;
    return -1;
  }
  c->fd = fd;
  c->connecting = true;
  st->opened++;
  return 0;
}

static int flood(int port, unsigned addrs, unsigned per_addr, unsigned seconds) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  signal(SIGTERM, on_term);
  unsigned n = addrs * per_addr;
  fconn *c = calloc(n, sizeof *c);
  struct pollfd *pf = calloc(n, sizeof *pf);
  if (!c || !pf) return 2;
  flood_stats st = {0, 0, 0};
  for (unsigned i = 0; i < n; i++) {
    c[i].fd = -1;
    c[i].src = i % addrs;
    c[i].junk = (i / addrs) % 2 == 1;
  }
  static const char junk[] = "GET / HTTP/1.1\r\nHost: victim\r\n\r\n";
  uint64_t t0 = now_ns(), end = t0 + (uint64_t)seconds * 1000000000ull;
  bool told = false;
  unsigned long connected = 0;
  while (!flood_stop && now_ns() < end) {
    for (unsigned i = 0; i < n; i++) {
      if (c[i].fd < 0) flood_open(&c[i], port, &st);
      pf[i].fd = c[i].fd;
      pf[i].events = c[i].fd < 0 ? 0 : c[i].connecting ? POLLOUT : POLLIN;
      pf[i].revents = 0;
    }
    if (!told && (connected >= n || now_ns() > t0 + 2000000000ull)) {
      printf("flooding: %lu of %u connected\n", connected, n);
      fflush(stdout);
      told = true;
    }
    if (poll(pf, n, 100) < 0 && errno != EINTR) break;
    for (unsigned i = 0; i < n; i++) {
      if (c[i].fd < 0 || !pf[i].revents) continue;
      if (c[i].connecting) {
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(c[i].fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err == 0 && (pf[i].revents & POLLOUT)) {
          c[i].connecting = false;
          connected++;
          if (c[i].junk) (void)!send(c[i].fd, junk, sizeof junk - 1, MSG_NOSIGNAL);
          continue;
        }
        st.failed++;
      } else {
        char buf[4096];
        ssize_t r = read(c[i].fd, buf, sizeof buf);
        if (r > 0 || (r < 0 && (errno == EAGAIN || errno == EINTR))) continue; /* its HELLO? never */
        st.closed_by_victim++;
      }
      close(c[i].fd);
      c[i].fd = -1;
    }
  }
  unsigned open_now = 0;
  for (unsigned i = 0; i < n; i++)
    if (c[i].fd >= 0) {
      open_now += !c[i].connecting;
      close(c[i].fd);
    }
  printf("flood done: %.1f s, %lu opened, %lu closed by the victim, %lu failed, %u open at the end\n",
         (double)(now_ns() - t0) / 1e9, st.opened, st.closed_by_victim, st.failed, open_now);
  fflush(stdout);
  free(c);
  free(pf);
  return 0;
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN); /* the victim may drop us: writes then fail, quietly */
  if (ded_crypto_init() != 0) return 2;
  if (argc == 6 && !strcmp(argv[1], "flood"))
    return flood(atoi(argv[2]), (unsigned)atoi(argv[3]), (unsigned)atoi(argv[4]),
                 (unsigned)atoi(argv[5]));
  if (argc != 4) {
    fprintf(stderr, "usage: evil_peer slot-reuse|join-after-fin RUN PORT\n"
                    "       evil_peer flood PORT ADDRS PER_ADDR SECONDS\n");
    return 2;
  }
  if (!strcmp(argv[1], "slot-reuse")) return slot_reuse(argv[2], atoi(argv[3]));
  if (!strcmp(argv[1], "join-after-fin")) return join_after_fin(argv[2], atoi(argv[3]));
  fprintf(stderr, "evil_peer: unknown scenario %s\n", argv[1]);
  return 2;
}
