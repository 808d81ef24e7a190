/*
 * wanrelay.c: the delay stage of the WAN lab (tests/wan/README.md).
 *
 *   wanrelay [--rt PRIO] [--die-with-parent] [--tick-us T] [--max-mbytes M]
 *            [--no-offload] [--mtu BYTES] NETNS_PATH,IPV4,DELAY_US ...
 *
 * One argument per emulated host: the network namespace of that host's
 * router (a path such as /run/netns/dw42-r1), the host's IPv4 address and
 * its one-way delay in microseconds. The relay creates a TUN device named
 * "tun0" inside every router namespace (setns, then TUNSETIFF; the devices
 * live exactly as long as this process), prints "ready" on stdout and then
 * moves IPv4 packets between them: a packet read from router i's TUN for
 * the address of host j is written into router j's TUN after
 * d_i/2 + d_j/2. Rates, queues and loss are the kernel's business (tbf and
 * nftables in the namespaces); this process only delays.
 *
 * Packets wait in a min-heap ordered by (release time, arrival order), so
 * equal release times keep their order and every path stays FIFO. Two
 * modes, as NAPI has: with little traffic the relay sleeps in epoll_pwait2
 * until a packet arrives or the next one is due (ns timeout, released
 * within 20 us of its time). Under load, where a wake-up per packet would
 * cost more than the packet (a context switch, in a VM an exit), it polls:
 * it wakes every --tick-us (default 100 us), reads everything that arrived,
 * stamped with the middle of the tick, and releases everything due by the
 * middle of the next one. Delay is then exact to about +-tick/2.
 *
 * The TUNs carry a virtio-net header and accept TSO and checksum offload
 * (unless --no-offload): a train of TCP segments that the sender's stack
 * built as one GSO packet crosses the relay in one read and one write, and
 * the kernel cuts it into frames after the relay where it must (tbf does,
 * for a packet larger than its burst). Per-packet cost, not bytes, is what
 * limits a relay on two cores, and this keeps 4 x 100 Mbit/s both ways at
 * a small share of one core. The header is passed through untouched. Where
 * per-frame loss matters the lab turns GSO off on the hosts
 * (gso_max_segs 1), and then every packet is one frame.
 *
 * Counters go to stderr on SIGUSR1 and on exit (SIGINT, SIGTERM, SIGHUP).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <linux/virtio_net.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#define MAX_HOSTS 64
#define PKT_MAX (65536 + 256) /* one GSO packet (64 KiB) and its virtio-net header */
#define READ_BUDGET 64        /* packets read from one TUN before serving the others */

struct pkt {
  uint64_t due_ns;
  uint64_t seq;
  uint32_t len;
  uint16_t to;
  uint8_t data[]; /* [virtio_net_hdr] IPv4 packet, as read */
};

struct host {
  const char *ns_path;
  uint32_t addr; /* network byte order */
  uint64_t delay_ns;
  int fd;
  /* "from host" = read from this host's TUN, "to host" = written into it */
  uint64_t in_pkts, in_bytes, out_pkts, out_bytes, out_errors;
};

static struct host hosts[MAX_HOSTS];
static int n_hosts;

static struct pkt **heap;
static size_t heap_n, heap_cap, queue_peak;
static uint64_t queued_bytes, queued_bytes_peak, max_bytes = 256ull << 20;
static uint64_t seq_next, tick_ns = 100000;
#define EVENT_SLACK_NS 20000u /* event mode: release what is due this soon */
#define POLL_QUEUE 8          /* poll while at least this many packets wait */
static size_t vhdr; /* bytes of virtio-net header before each packet: 0 without offload */
static uint8_t rbuf[PKT_MAX];

static uint64_t drop_noroute, drop_self, drop_full, drop_notv4;
static uint64_t small_pkts, gso_pkts; /* <= 128 B (ACKs), > 1514 B (GSO trains) */
static uint64_t late_max_ns, late_sum_ns, late_1ms, released, wakeups;

static void die(const char *what) {
  fprintf(stderr, "wanrelay: %s: %s\n", what, strerror(errno));
  exit(1);
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---------------------------------------------------------------- heap */

static int before(const struct pkt *a, const struct pkt *b) {
  return a->due_ns < b->due_ns || (a->due_ns == b->due_ns && a->seq < b->seq);
}

static int heap_push(struct pkt *p) {
  if (heap_n == heap_cap) {
    size_t cap = heap_cap ? heap_cap * 2 : 4096;
    struct pkt **h = realloc(heap, cap * sizeof *h);
    if (!h) return -1;
    heap = h;
    heap_cap = cap;
  }
  size_t i = heap_n++;
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!before(p, heap[parent])) break;
    heap[i] = heap[parent];
    i = parent;
  }
  heap[i] = p;
  if (heap_n > queue_peak) queue_peak = heap_n;
  return 0;
}

static struct pkt *heap_pop(void) {
  struct pkt *top = heap[0];
  struct pkt *last = heap[--heap_n];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= heap_n) break;
    if (c + 1 < heap_n && before(heap[c + 1], heap[c])) c++;
    if (!before(heap[c], last)) break;
    heap[i] = heap[c];
    i = c;
  }
  if (heap_n > 0) heap[i] = last;
  return top;
}

/* ---------------------------------------------------------------- setup */

static int tun_open_in(const char *ns_path, int home_ns, int mtu, int offload) {
  int ns = open(ns_path, O_RDONLY | O_CLOEXEC);
  if (ns < 0) die(ns_path);
  if (setns(ns, CLONE_NEWNET) < 0) die("setns");
  close(ns);
  int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) die("/dev/net/tun");
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  ifr.ifr_flags = IFF_TUN | IFF_NO_PI | (offload ? IFF_VNET_HDR : 0);
  snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "tun0");
  if (ioctl(fd, TUNSETIFF, &ifr) < 0) die("TUNSETIFF tun0");
  if (offload) {
    int hs = (int)sizeof(struct virtio_net_hdr);
    if (ioctl(fd, TUNSETVNETHDRSZ, &hs) < 0) die("TUNSETVNETHDRSZ");
    unsigned long off = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN;
    if (ioctl(fd, TUNSETOFFLOAD, off) < 0) die("TUNSETOFFLOAD");
  }
  /* The MTU bounds a packet without offload; with it, GSO packets are at
   * most 64 KiB. Either way a packet fits PKT_MAX. */
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) die("socket");
  ifr.ifr_mtu = mtu;
  if (ioctl(s, SIOCSIFMTU, &ifr) < 0) die("SIOCSIFMTU");
  close(s);
  if (setns(home_ns, CLONE_NEWNET) < 0) die("setns back");
  return fd;
}

static void parse_host(const char *arg, struct host *h) {
  char *copy = strdup(arg);
  if (!copy) die("strdup");
  char *c1 = strchr(copy, ',');
  char *c2 = c1 ? strchr(c1 + 1, ',') : NULL;
  struct in_addr a;
  char *end = NULL;
  unsigned long long d = 0;
  if (c1 && c2) {
    *c1 = *c2 = '\0';
    d = strtoull(c2 + 1, &end, 10);
  }
  if (!c1 || !c2 || inet_pton(AF_INET, c1 + 1, &a) != 1 || c2[1] == '\0' || *end ||
      d > 10000000ull) {
    fprintf(stderr, "wanrelay: bad host '%s' (want NETNS_PATH,IPV4,DELAY_US)\n", arg);
    exit(2);
  }
  h->ns_path = copy;
  h->addr = a.s_addr;
  h->delay_ns = (uint64_t)d * 1000u;
  h->fd = -1;
}

/* ---------------------------------------------------------------- stats */

static void print_stats(const char *when) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  char ip[INET_ADDRSTRLEN];
  fprintf(stderr, "wanrelay: stats (%s)\n", when);
  for (int i = 0; i < n_hosts; i++) {
    struct host *h = &hosts[i];
    inet_ntop(AF_INET, &h->addr, ip, sizeof ip);
    fprintf(stderr,
            "wanrelay: host %s from_host_pkts %llu from_host_bytes %llu to_host_pkts %llu "
            "to_host_bytes %llu write_errors %llu\n",
            ip, (unsigned long long)h->in_pkts, (unsigned long long)h->in_bytes,
            (unsigned long long)h->out_pkts, (unsigned long long)h->out_bytes,
            (unsigned long long)h->out_errors);
  }
  fprintf(stderr,
          "wanrelay: total released %llu small_pkts %llu gso_pkts %llu wakeups %llu queued %zu queue_peak %zu "
          "queued_bytes_peak %llu drop_noroute %llu drop_self %llu drop_full %llu "
          "drop_not_ipv4 %llu late_mean_us %.1f late_max_us %.1f late_over_1ms %llu "
          "cpu_user_s %.3f cpu_sys_s %.3f\n",
          (unsigned long long)released, (unsigned long long)small_pkts,
          (unsigned long long)gso_pkts, (unsigned long long)wakeups, heap_n, queue_peak,
          (unsigned long long)queued_bytes_peak, (unsigned long long)drop_noroute,
          (unsigned long long)drop_self, (unsigned long long)drop_full,
          (unsigned long long)drop_notv4,
          released ? (double)late_sum_ns / (double)released / 1e3 : 0.0, (double)late_max_ns / 1e3,
          (unsigned long long)late_1ms, (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6,
          (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6);
  fflush(stderr);
}

/* ---------------------------------------------------------------- loop */

static int host_of(uint32_t addr) {
  for (int i = 0; i < n_hosts; i++)
    if (hosts[i].addr == addr) return i;
  return -1;
}

/* Writes out every packet due by now + slack: a packet leaves at most
 * slack early; lateness counts what leaves after its time. */
static void release_due(uint64_t now, uint64_t slack) {
  while (heap_n > 0 && heap[0]->due_ns <= now + slack) {
    struct pkt *p = heap_pop();
    struct host *h = &hosts[p->to];
    ssize_t w = write(h->fd, p->data, p->len);
    if (w == (ssize_t)p->len) {
      h->out_pkts++;
      h->out_bytes += p->len;
    } else {
      h->out_errors++;
    }
    uint64_t late = now > p->due_ns ? now - p->due_ns : 0;
    late_sum_ns += late;
    if (late > late_max_ns) late_max_ns = late;
    if (late > 1000000u) late_1ms++;
    released++;
    queued_bytes -= p->len;
    free(p);
  }
}

/* Reads up to READ_BUDGET packets from host i's TUN and queues them as
 * arrived at `now`; returns how many it read. */
static int drain(int i, uint64_t now) {
  struct host *src = &hosts[i];
  int k = 0;
  for (; k < READ_BUDGET; k++) {
    ssize_t r = read(src->fd, rbuf, sizeof rbuf);
    if (r <= 0) {
      if (r < 0 && errno != EAGAIN && errno != EINTR) die("read tun");
      return k;
    }
    src->in_pkts++;
    src->in_bytes += (uint64_t)r;
    const uint8_t *ip = rbuf + vhdr;
    if ((size_t)r < vhdr + 20 || (ip[0] >> 4) != 4) {
      drop_notv4++;
      continue;
    }
    uint32_t dst;
    memcpy(&dst, ip + 16, 4);
    int j = host_of(dst);
    if (j < 0 || j == i) {
      if (j < 0)
        drop_noroute++;
      else
        drop_self++;
      continue;
    }
    /* A full queue is a loss, as at a router: the relay never blocks. */
    struct pkt *p = NULL;
    if (queued_bytes + (uint64_t)r <= max_bytes) p = malloc(sizeof *p + (size_t)r);
    if (!p) {
      drop_full++;
      continue;
    }
    memcpy(p->data, rbuf, (size_t)r);
    if ((size_t)r <= vhdr + 128)
      small_pkts++;
    else if ((size_t)r > vhdr + 1514)
      gso_pkts++;
    p->len = (uint32_t)r;
    p->to = (uint16_t)j;
    p->due_ns = now + src->delay_ns / 2 + hosts[j].delay_ns / 2;
    p->seq = seq_next++;
    if (heap_push(p) < 0) {
      drop_full++;
      free(p);
      continue;
    }
    queued_bytes += (uint64_t)r;
    if (queued_bytes > queued_bytes_peak) queued_bytes_peak = queued_bytes;
  }
  return k;
}

/* SIGUSR1 prints the counters; any other signal of the set ends the relay. */
static void signals(int sfd) {
  struct signalfd_siginfo si;
  while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
    if (si.ssi_signo != SIGUSR1) {
      print_stats("exit");
      exit(0);
    }
    print_stats("SIGUSR1");
  }
}

static void usage(void) {
  fprintf(stderr,
          "usage: wanrelay [--rt PRIO] [--die-with-parent] [--tick-us T] [--max-mbytes M]\n"
          "                [--no-offload] [--mtu BYTES] NETNS_PATH,IPV4,DELAY_US ...\n");
  exit(2);
}

int main(int argc, char **argv) {
  int rt_prio = 0, die_with_parent = 0, mtu = 1500, offload = 1;
  int i = 1;
  for (; i < argc && argv[i][0] == '-'; i++) {
    if (!strcmp(argv[i], "--rt") && i + 1 < argc)
      rt_prio = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--die-with-parent"))
      die_with_parent = 1;
    else if (!strcmp(argv[i], "--tick-us") && i + 1 < argc)
      tick_ns = strtoull(argv[++i], NULL, 10) * 1000u;
    else if (!strcmp(argv[i], "--max-mbytes") && i + 1 < argc)
      max_bytes = strtoull(argv[++i], NULL, 10) << 20;
    else if (!strcmp(argv[i], "--no-offload"))
      offload = 0;
    else if (!strcmp(argv[i], "--mtu") && i + 1 < argc)
      mtu = atoi(argv[++i]);
    else
      usage();
  }
  if (i >= argc || argc - i > MAX_HOSTS || mtu < 576 || mtu > 9000 || max_bytes == 0 ||
      tick_ns > 10000000u)
    usage();
  for (; i < argc; i++) parse_host(argv[i], &hosts[n_hosts++]);
  vhdr = offload ? sizeof(struct virtio_net_hdr) : 0;

  if (die_with_parent) {
    pid_t parent = getppid();
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0) die("prctl");
    if (getppid() != parent) return 1; /* the parent is already gone */
  }
  /* Batching is ours (tick_ns); no timer slack from the kernel on top. */
  prctl(PR_SET_TIMERSLACK, 1UL);

  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGHUP);
  sigaddset(&sigs, SIGUSR1);
  if (sigprocmask(SIG_BLOCK, &sigs, NULL) < 0) die("sigprocmask");
  int sfd = signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC);
  if (sfd < 0) die("signalfd");

  int home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  if (home < 0) die("/proc/self/ns/net");
  int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) die("epoll_create1");
  for (int h = 0; h < n_hosts; h++) {
    hosts[h].fd = tun_open_in(hosts[h].ns_path, home, mtu, offload);
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)h};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, hosts[h].fd, &ev) < 0) die("epoll_ctl");
  }
  struct epoll_event sev = {.events = EPOLLIN, .data.u32 = UINT32_MAX};
  if (epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &sev) < 0) die("epoll_ctl");

  /* Delay must not depend on who else wants the CPU: Open MPI ranks
   * busy-poll both cores. The relay sleeps between packets, so a real-time
   * priority costs the others little. */
  if (rt_prio > 0) {
    struct sched_param sp = {.sched_priority = rt_prio};
    if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0)
      fprintf(stderr, "wanrelay: SCHED_FIFO %d refused (%s); running without\n", rt_prio,
              strerror(errno));
  }

  printf("ready\n");
  fflush(stdout);

  struct epoll_event evs[MAX_HOSTS + 1];
  int polling = 0;
  for (;;) {
    uint64_t now = now_ns();
    if (polling) {
      /* Woke on the tick: what arrived came during it, on average half a
       * tick ago; what is due by the middle of the next tick goes now. */
      int got = 0;
      for (int h = 0; h < n_hosts; h++) got += drain(h, now - tick_ns / 2);
      release_due(now, tick_ns / 2);
      signals(sfd);
      polling = got > 0 || heap_n >= POLL_QUEUE;
      if (polling) {
        struct timespec ts;
        uint64_t next = now + tick_ns;
        ts.tv_sec = (time_t)(next / 1000000000u);
        ts.tv_nsec = (long)(next % 1000000000u);
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
        }
        wakeups++;
        continue;
      }
      now = now_ns();
    }
    release_due(now, EVENT_SLACK_NS);
    struct timespec ts, *tsp = NULL;
    if (heap_n > 0) {
      uint64_t wait = heap[0]->due_ns - now; /* > slack: release_due took the rest */
      ts.tv_sec = (time_t)(wait / 1000000000u);
      ts.tv_nsec = (long)(wait % 1000000000u);
      tsp = &ts;
    }
    int n = epoll_pwait2(ep, evs, MAX_HOSTS + 1, tsp, NULL);
    if (n < 0) {
      if (errno == EINTR) continue;
      die("epoll_pwait2");
    }
    wakeups++;
    now = now_ns();
    int got = 0;
    for (int k = 0; k < n; k++) {
      if (evs[k].data.u32 == UINT32_MAX)
        signals(sfd);
      else
        got += drain((int)evs[k].data.u32, now);
    }
    polling = tick_ns > 0 && (got > 1 || heap_n >= POLL_QUEUE);
  }
}
