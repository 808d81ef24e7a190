/*
 * ded_dconn.c: the driver's side of each connection: its socket and its
 * secure channel (struct dconn, ded_driver_int.h).
 *
 * Opening: drv_on_accept takes what the listening socket offers and tells
 * the node; an outbound socket is opened by the node's connect callback
 * (ded_driver.c). Then drv_on_conn reads a socket's bytes through its
 * channel into the node, and driver_settle, after every call into the
 * node, closes the connections it closed and writes the output it gave
 * (sealed into the channel while it has room) until the kernel pushes
 * back, when EPOLLOUT takes over. The upload meter counts bytes the peer
 * acknowledged, not bytes written (dconn_delivered, driver_meter_poll).
 *
 * Everything here runs on the driver thread (or in ded_driver_start,
 * before it exists).
 */
#define _GNU_SOURCE
#include "ded_driver_int.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <linux/sockios.h>

#include "core/ded_assert.h"
#include "crypto/ded_chan.h"
#include "crypto/ded_ident.h"
#include "ded_resolve.h"

#define DRV_READS_PER_EVENT 16
/* Connections accepted per readiness of the listening socket: a flood
 * that keeps its queue full must not keep the loop from the sockets
 * (and timers) it already has. Level-triggered, it is back next round. */
#define DRV_ACCEPTS_PER_EVENT 64
#define DRV_IOV_MAX 64

/* ---------------------------------------------------------------- connections */

dconn *dconn_get(ded_driver *d, uint32_t id) {
  uint32_t slot = id & 0xffff;
  if (slot >= d->nconns || !d->conns[slot] || d->conns[slot]->id != id) return NULL;
  return d->conns[slot];
}

dconn *dconn_add(ded_driver *d, uint32_t id, int fd) {
  uint32_t slot = id & 0xffff;
  if (slot >= d->nconns) {
    uint32_t n = d->nconns ? d->nconns : 16;
    while (n <= slot) n *= 2;
    dconn **v = realloc(d->conns, n * sizeof *v);
    if (!v) return NULL;
    for (uint32_t i = d->nconns; i < n; i++) v[i] = NULL;
    d->conns = v;
    d->nconns = n;
  }
  DED_ASSERT(!d->conns[slot]);
  dconn *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->id = id;
  c->fd = fd;
  d->conns[slot] = c;
  return c;
}

void dconn_free(dconn *c) {
  if (c->chan_on) ded_chan_free(&c->ch);
  free(c);
}

void dconn_settle_mark(ded_driver *d, dconn *c) {
  if (c->in_list) return;
  c->in_list = true;
  c->next_settle = d->settle;
  d->settle = c;
}

/* Keeps |c->backlog| and the driver's count of them true. */
static void dconn_backlog_update(ded_driver *d, dconn *c) {
  const uint8_t *p;
  bool now = c->chan_on && c->fd >= 0 && ded_chan_out(&c->ch, &p) > 0;
  if (now == c->backlog) return;
  c->backlog = now;
  if (now)
    d->nbacklog++;
  else
    d->nbacklog--;
}

/* Takes |c| out of the table and closes its socket at once, so the node
 * may reuse its slot right away (a peer's frame can make the node close
 * one connection and open another before we settle). The struct itself is
 * freed when settled. */
void dconn_detach(ded_driver *d, dconn *c) {
  if (c->fd < 0) return;
  epoll_ctl(d->ep, EPOLL_CTL_DEL, c->fd, NULL);
  close(c->fd);
  c->fd = -1;
  dconn_backlog_update(d, c);
  if (d->conns[c->id & 0xffff] == c) d->conns[c->id & 0xffff] = NULL;
  c->closing = true;
  dconn_settle_mark(d, c);
}

static void set_out(ded_driver *d, dconn *c, bool on) {
  if (c->out_armed == on) return;
  struct epoll_event ev;
  memset(&ev, 0, sizeof ev);
  ev.events = EPOLLIN | EPOLLRDHUP | (on ? EPOLLOUT : 0);
  ev.data.u64 = c->id;
  epoll_ctl(d->ep, EPOLL_CTL_MOD, c->fd, &ev);
  c->out_armed = on;
}

/* Unsent bytes a socket may hold. Past it the socket is not writable, so
 * what the node hands over leaves at the link's pace: its upload meter
 * reads the link, not the kernel's buffer (which autotuning grows to
 * megabytes), and a control frame never waits behind seconds of data.
 * Bytes in flight are not counted: long fat pipes still fill. */
#define DRV_NOTSENT_LOWAT (128 * 1024)

void drv_sock_tune(int fd) {
  int one = 1, lowat = DRV_NOTSENT_LOWAT;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &lowat, sizeof lowat);
}

/* The socket failed or the peer closed: close it, then tell the node. */
static void dconn_fail(ded_driver *d, dconn *c, int status) {
  if (c->closing) return;
  uint32_t id = c->id;
  dconn_detach(d, c);
  ded_node_conn_closed(d->node, id, status, ded_driver_now_ns());
}

/* Sets up |c|'s secure channel: as initiator once connected (expecting
 * the peer the node calls, if it calls a known one), as responder on
 * accept. 0, or DED_ERR_NOMEM / DED_ERR_INTERNAL. */
static int dconn_chan_start(ded_driver *d, dconn *c) {
  uint8_t eph[32], expect[DED_ID_BYTES];
  if (getrandom(eph, sizeof eph, 0) != (ssize_t)sizeof eph) return DED_ERR_INTERNAL;
  bool known = !c->inbound && ded_node_conn_expects(d->node, c->id, expect);
  int rv = ded_chan_init(&c->ch, NULL, ded_node_ident(d->node), d->has_psk ? d->psk : NULL,
                         ded_node_run_id(d->node), !c->inbound, known ? expect : NULL, eph,
                         ded_driver_now_ns());
  ded_wipe(eph, sizeof eph);
  if (rv == 0) c->chan_on = true;
  return rv;
}

/* What the kernel holds for |c|, unsent or unacknowledged, or -1. */
static int dconn_outq(const dconn *c) {
  int q;
  return ioctl(c->fd, SIOCOUTQ, &q) == 0 && q >= 0 ? q : -1;
}

/* Of the bytes the kernel held for |c| before a write of |w| and those
 * written, how many it has since delivered (acknowledged by the peer): what
 * the upload meter counts. Bytes the socket takes are not yet sent: its
 * buffers and the congestion window grow for seconds into a transfer, and
 * counting writes read a 100 Mbit/s uplink as up to 150, and a 10 Mbit/s
 * one as 20. What was delivered while we had nothing to write is not
 * counted (dconn_flush takes a fresh baseline): it would show up as a burst
 * at the next write. Without SIOCOUTQ, the bytes written. */
static size_t dconn_delivered(dconn *c, int before, size_t w) {
  int q = dconn_outq(c);
  c->outq = q; /* -1: no baseline, taken afresh at the next write */
  if (q < 0 || before < 0) return w;
  size_t held = (size_t)before + w;
  return held > (size_t)q ? held - (size_t)q : 0;
}

/* While uploads are queued, every DRV_METER_POLL_NS: what each socket
 * with output delivered since we last looked, counted now. A socket is
 * written to only when it drains below TCP_NOTSENT_LOWAT, which on a slow
 * uplink shared by a dozen sockets is a second apart: counted at writes
 * alone, its bytes arrive at the meter in lumps, and a 10 Mbit/s uplink
 * read 11 to 13 in one-second samples. */
#define DRV_METER_POLL_NS (10ull * 1000 * 1000)
void driver_meter_poll(ded_driver *d, uint64_t now) {
  if (d->nbacklog == 0 || now < d->meter_polled_ns + DRV_METER_POLL_NS) return;
  d->meter_polled_ns = now;
  for (uint32_t i = 0; i < d->nconns; i++) {
    dconn *c = d->conns[i];
    if (!c || c->outq <= 0 || c->closing) continue;
    int q = dconn_outq(c);
    if (q < 0 || q >= c->outq) continue;
    ded_node_sent(d->node, (size_t)(c->outq - q), true, now);
    c->outq = q;
  }
}

/* Seals what the node has for |c| while the channel has room, and writes
 * the channel's output until done or the kernel is full. */
static void dconn_flush(ded_driver *d, dconn *c) {
  c->dirty = false;
  if (c->connecting || c->closing || !c->chan_on) return;
  for (;;) {
    while (ded_chan_can_seal(&c->ch)) {
      ded_iov iov[DRV_IOV_MAX];
      int n = ded_node_conn_pending(d->node, c->id, iov, DRV_IOV_MAX);
      if (n == 0) break;
      size_t took = ded_chan_seal(&c->ch, iov, n, ded_driver_now_ns());
      ded_node_conn_consume(d->node, c->id, took, ded_driver_now_ns());
      if (c->closing) return;
    }
    const uint8_t *p;
    size_t len = ded_chan_out(&c->ch, &p);
    dconn_backlog_update(d, c);
    if (len == 0) {
      set_out(d, c, false);
      c->outq = -1;
      return;
    }
    int before = c->outq >= 0 ? c->outq : dconn_outq(c);
    /* MSG_NOSIGNAL: a peer that vanished must cost an EPIPE, not the
     * SIGPIPE that would kill the trainer. */
    ssize_t w = send(c->fd, p, len, MSG_NOSIGNAL);
    if (w > 0) {
      ded_chan_out_done(&c->ch, (size_t)w);
      dconn_backlog_update(d, c);
      ded_node_sent(d->node, dconn_delivered(c, before, (size_t)w), d->nbacklog > 0,
                    ded_driver_now_ns());
      continue;
    }
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      set_out(d, c, true);
      return;
    }
    if (w < 0 && errno == EINTR) continue;
    dconn_fail(d, c, DED_ERR_PEER_LOST);
    return;
  }
}

/* Carries out what the node asked for during the last calls. */
void driver_settle(ded_driver *d) {
  while (d->settle) {
    dconn *c = d->settle;
    d->settle = c->next_settle;
    c->in_list = false;
    if (c->closing)
      dconn_free(c); /* detached when it closed */
    else if (c->dirty)
      dconn_flush(d, c);
  }
}

/* ---------------------------------------------------------------- socket events */

/* Out of descriptors, the listening socket stays readable: stop watching
 * it for a moment rather than spin on it. */
void drv_accept_pause(ded_driver *d, bool pause) {
  struct epoll_event ev;
  memset(&ev, 0, sizeof ev);
  ev.events = EPOLLIN;
  ev.data.u64 = DRV_TAG_LISTEN;
  epoll_ctl(d->ep, pause ? EPOLL_CTL_DEL : EPOLL_CTL_ADD, d->listen_fd, &ev);
  d->accept_paused_until = pause ? ded_driver_now_ns() + 200000000ull : 0;
  if (pause) drv_log(d, DED_LOG_WARN, "out of file descriptors: not accepting for 200 ms");
}

/* Writes what a refused handshake left in |c|'s channel (its notice),
 * once and without waiting: the socket is about to close. */
static void dconn_write_notice(dconn *c) {
  const uint8_t *p;
  size_t n = c->inbound && c->chan_on && !c->ch.open ? ded_chan_out(&c->ch, &p) : 0;
  if (n == 0) return;
  ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (w > 0) ded_chan_out_done(&c->ch, (size_t)w);
}

/* A connection turned away at accept (|rv| from the node: leaving, or no
 * room): the notice that says so, then the close. What the caller sent
 * already (its initiation) is read first, best effort and a few reads at
 * most, so that the close is a FIN and not a RST that could overtake the
 * notice. */
static void drv_accept_refuse(int fd, int rv) {
  uint8_t notice[DED_CHAN_NOTICE_BYTES], junk[DED_CHAN_MAGIC_BYTES + DED_NOISE_INITIATION_BYTES];
  ded_chan_notice_bytes(rv == DED_ERR_CLOSING ? DED_CHAN_NOTICE_LEAVING : DED_CHAN_NOTICE_FULL,
                        notice);
  ssize_t w = send(fd, notice, sizeof notice, MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)w; /* best effort: the caller learns the rest from the close */
  for (int i = 0; i < 4 && recv(fd, junk, sizeof junk, MSG_DONTWAIT) > 0; i++) {}
  close(fd);
}

void drv_on_accept(ded_driver *d) {
  for (int k = 0; k < DRV_ACCEPTS_PER_EVENT; k++) {
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    int fd = accept4(d->listen_fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
        drv_accept_pause(d, true);
      return; /* EAGAIN, or a transient error: epoll tells us again */
    }
    drv_sock_tune(fd);
    ded_addr remote;
    ded_resolve_from_sockaddr((struct sockaddr *)&ss, &remote);
    uint32_t id;
    int rv = ded_node_conn_accepted(d->node, &remote, &id, ded_driver_now_ns());
    if (rv != 0) {
      drv_accept_refuse(fd, rv);
      continue;
    }
    dconn *c = dconn_add(d, id, fd);
    if (c) {
      c->inbound = true;
      c->remote = remote;
    }
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.u64 = id;
    if (!c || dconn_chan_start(d, c) != 0 || epoll_ctl(d->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
      if (c) d->conns[id & 0xffff] = NULL;
      if (c) dconn_free(c);
      close(fd);
      ded_node_conn_closed(d->node, id, DED_ERR_INTERNAL, ded_driver_now_ns());
      continue;
    }
    /* The node queued its HELLO already (want_write fired before we knew
     * the fd); it leaves once the handshake is done. */
    c->dirty = true;
    dconn_settle_mark(d, c);
    driver_settle(d);
  }
}

typedef struct chan_ctx {
  ded_driver *d;
  dconn *c;
} chan_ctx;

static bool chan_on_open(void *user, const uint8_t peer_pk[DED_PK_BYTES]) {
  chan_ctx *x = user;
  if (!x->d->cipher_logged) {
    x->d->cipher_logged = true;
    drv_log(x->d, DED_LOG_INFO, "sessions use %s",
            x->c->ch.tx.aes256gcm ? "AES-256-GCM" : "XChaCha20-Poly1305");
  }
  ded_node_conn_secured(x->d->node, x->c->id, peer_pk, ded_driver_now_ns());
  return !x->c->closing; /* closed: we called ourselves */
}

static bool chan_on_plain(void *user, const uint8_t *p, size_t len) {
  chan_ctx *x = user;
  ded_node_conn_recv(x->d->node, x->c->id, p, len, ded_driver_now_ns());
  return !x->c->closing;
}

static const ded_chan_cb drv_chan_cb = {chan_on_open, chan_on_plain};

/* Whether to log the refusal of an inbound handshake from |remote|, and
 * how many went unlogged before it (|*since|, from this host; |*others|,
 * from hosts that found no room). Anyone can connect and fail a
 * handshake, as often as they like: the log must not grow with it. */
static bool refused_log_due(ded_driver *d, const ded_addr *remote, uint64_t *since,
                            uint64_t *others) {
  ded_addr host;
  memset(&host, 0, sizeof host); /* compared whole: no stray padding */
  host.family = remote->family;
  memcpy(host.ip, remote->ip, sizeof host.ip);
  uint64_t now = ded_driver_now_ns();
  drv_refused *slot = NULL, *oldest = &d->refused[0];
  for (unsigned i = 0; i < DRV_REFUSED_HOSTS && !slot; i++) {
    drv_refused *r = &d->refused[i];
    if (r->host.family && memcmp(&r->host, &host, sizeof host) == 0) slot = r;
    else if (!r->host.family || (oldest->host.family && r->logged_ns < oldest->logged_ns)) oldest = r;
  }
  if (slot && now - slot->logged_ns < DRV_REFUSED_LOG_NS) {
    slot->unlogged++;
    return false;
  }
  if (!slot) {
    /* A new host takes the slot logged longest ago, once that one's
     * minute is over: so many hosts at once count, unlogged. */
    if (oldest->host.family && now - oldest->logged_ns < DRV_REFUSED_LOG_NS) {
      d->refused_unlogged++;
      return false;
    }
    slot = oldest;
    slot->host = host;
    slot->unlogged = 0;
  }
  *since = slot->unlogged;
  *others = d->refused_unlogged;
  slot->unlogged = 0;
  slot->logged_ns = now;
  d->refused_unlogged = 0;
  return true;
}

/* Our call's handshake failed on what the peer said or did (|why|): the
 * line that names the peer, and, before bootstrap is done, the reason
 * MPI_Init gives if no peer lets us in (a refused key above all). */
static void dconn_log_call_refused(ded_driver *d, dconn *c, const char *a, const char *why) {
  bool key = c->ch.notice == DED_CHAN_NOTICE_KEY;
  char line[sizeof d->boot_refusal];
  snprintf(line, sizeof line, "the peer at %s %s%s", a, why,
           !key ? "" : d->has_psk ? " (check DEDMPI_SWARM_KEY or DEDMPI_SWARM_KEY_FILE, and DEDMPI_RUN)"
                 : " (this job has no DEDMPI_SWARM_KEY: the run has one)");
  drv_log(d, DED_LOG_WARN, "%s", line);
  pthread_mutex_lock(&d->mu);
  if (!d->booted && (key || !d->boot_refused_key)) {
    snprintf(d->boot_refusal, sizeof d->boot_refusal, "%s", line);
    d->boot_refused_key |= key;
  }
  pthread_mutex_unlock(&d->mu);
}

/* A handshake or record failed on |c|: one line, at warn. Once per
 * connection on a session or our own call; for a handshake a peer
 * opened, once a minute per host (refused_log_due). */
static void dconn_log_refused(ded_driver *d, dconn *c, const char *why) {
  char a[64];
  ded_addr_format(&c->remote, a, sizeof a);
  if (!c->inbound && !c->ch.open && c->ch.notice) {
    dconn_log_call_refused(d, c, a, why);
    return;
  }
  if (c->inbound && !c->ch.open) {
    uint64_t since = 0, others = 0;
    if (!refused_log_due(d, &c->remote, &since, &others)) return;
    char more[160] = "";
    if (since || others)
      snprintf(more, sizeof more, " (refused since the last line: %llu more from this host, %llu "
               "from hosts not logged)", (unsigned long long)since, (unsigned long long)others);
    drv_log(d, DED_LOG_WARN, "refused a connection from %s: %s; more from its host are logged at "
            "most once a minute%s", a, why, more);
    return;
  }
  drv_log(d, DED_LOG_WARN, "dropping connection %s %s (%s): %s", c->inbound ? "from" : "to", a,
          c->ch.open ? "session" : "handshake", why);
}

void drv_on_conn(ded_driver *d, dconn *c, uint32_t events) {
  if (c->connecting && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      dconn_fail(d, c, DED_ERR_PEER_LOST);
      return;
    }
    c->connecting = false;
    ded_node_conn_connected(d->node, c->id, ded_driver_now_ns());
    if (c->closing) return;
    int rv = dconn_chan_start(d, c);
    if (rv) {
      dconn_fail(d, c, rv);
      return;
    }
    c->dirty = true;
    dconn_settle_mark(d, c);
  }
  uint32_t id = c->id;
  driver_settle(d);
  if (!dconn_get(d, id)) return;
  if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
    for (int i = 0; i < DRV_READS_PER_EVENT; i++) {
      ssize_t r = read(c->fd, d->rbuf, DRV_READ_BYTES);
      if (r > 0 && !c->chan_on) { /* cannot happen: connected first */
        dconn_fail(d, c, DED_ERR_INTERNAL);
        break;
      }
      if (r > 0) {
        chan_ctx ctx = {d, c};
        int rv = ded_chan_recv(&c->ch, d->rbuf, (size_t)r, &drv_chan_cb, &ctx);
        if (rv && !c->closing) {
          dconn_log_refused(d, c, c->ch.why);
          dconn_write_notice(c);
          dconn_fail(d, c, rv);
        }
        if (c->closing) break;
        c->dirty = true; /* the handshake's next message, or the node's first frames */
        dconn_settle_mark(d, c);
        continue;
      }
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      /* EOF or error before the channel opened, with no notice (those
       * fail in ded_chan_recv): the peer closed without saying why. */
      if (!c->ch.open && !c->inbound)
        dconn_log_refused(d, c, "closed during the handshake without saying why (it stopped, "
                                "timed us out or had no room, or an older version refused our key)");
      dconn_fail(d, c, DED_ERR_PEER_LOST);
      break;
    }
    driver_settle(d);
    if (!dconn_get(d, id)) return;
  }
  if ((events & EPOLLOUT) && !c->closing) {
    c->dirty = true;
    dconn_settle_mark(d, c);
    driver_settle(d);
  }
}
