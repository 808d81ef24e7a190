/*
 * ded_driver.c: epoll, TCP and a thread around one ded_node: the node's
 * callbacks, the loop and the API.
 *
 * Every call into the node happens on the driver thread. After each one,
 * driver_settle() carries out what the node asked for through its
 * callbacks: connections it closed are closed, connections it gave output
 * are written until the kernel pushes back (then EPOLLOUT takes over).
 *
 * The connections' side of that (their sockets and secure channels,
 * accepting, reading, writing, settling) is ded_dconn.c; the state both
 * share is ded_driver_int.h; the API of group peers is ded_dgroups.c.
 * Starting, the driver resolves its addresses
 * (ded_resolve.c) and reads the job's identity, the run's secret and its
 * access control (ded_secrets.c) before the node exists.
 */
#define _GNU_SOURCE
#include "ded_driver_int.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "avg/ded_reduce.h"
#include "core/ded_assert.h"
#include "core/ded_msg.h"
#include "crypto/ded_chan.h"
#include "crypto/ded_ident.h"
#include "ded_resolve.h"
#include "ded_secrets.h"

#define DRV_EVENTS_MAX 64

uint64_t ded_driver_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void ded_cond_wait_ns(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t ns) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts); /* the condvar's clock */
  uint64_t nsec = (uint64_t)ts.tv_nsec + ns;
  ts.tv_sec += (time_t)(nsec / 1000000000u);
  ts.tv_nsec = (long)(nsec % 1000000000u);
  pthread_cond_timedwait(cv, mu, &ts);
}

static int64_t drv_wall_offset_ns(void) {
  struct timespec rt;
  clock_gettime(CLOCK_REALTIME, &rt);
  int64_t wall = (int64_t)rt.tv_sec * 1000000000 + rt.tv_nsec;
  return wall - (int64_t)ded_driver_now_ns();
}

static const char *drv_level_name(int level) {
  switch (level) {
  case DED_LOG_ERROR: return "error";
  case DED_LOG_WARN: return "warning";
  case DED_LOG_INFO: return "info";
  default: return "debug";
  }
}

static void drv_write_log(const ded_driver *d, int level, const char *line) {
  struct timespec rt;
  struct tm tm;
  clock_gettime(CLOCK_REALTIME, &rt);
  localtime_r(&rt.tv_sec, &tm);
  fprintf(stderr, "%02d:%02d:%02d.%03ld %s %s: %s\n", tm.tm_hour, tm.tm_min, tm.tm_sec,
          rt.tv_nsec / 1000000, d->log_prefix, drv_level_name(level), line);
}

DED_PRINTF(3, 4)
void drv_log(const ded_driver *d, int level, const char *fmt, ...) {
  if (level > d->cfg.node.log_level) return;
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  drv_write_log(d, level, line);
}

/* ---------------------------------------------------------------- node callbacks */

static int cb_connect(void *user, uint32_t conn_id, const ded_addr *addr) {
  ded_driver *d = user;
  struct sockaddr_storage ss;
  socklen_t len;
  ded_resolve_to_sockaddr(addr, &ss, &len);
  int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  drv_sock_tune(fd);
  int rv = connect(fd, (struct sockaddr *)&ss, len);
  if (rv < 0 && errno != EINPROGRESS) {
    close(fd);
    return -1;
  }
  dconn *c = dconn_add(d, conn_id, fd);
  if (!c) {
    close(fd);
    return -1;
  }
  c->connecting = true;
  c->remote = *addr;
  struct epoll_event ev;
  memset(&ev, 0, sizeof ev);
  ev.events = EPOLLOUT | EPOLLIN | EPOLLRDHUP;
  ev.data.u64 = conn_id;
  c->out_armed = true;
  if (epoll_ctl(d->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
    d->conns[conn_id & 0xffff] = NULL;
    free(c);
    close(fd);
    return -1;
  }
  return 0;
}

static void cb_close(void *user, uint32_t conn_id) {
  ded_driver *d = user;
  dconn *c = dconn_get(d, conn_id);
  if (c) dconn_detach(d, c);
}

static void cb_want_write(void *user, uint32_t conn_id) {
  ded_driver *d = user;
  dconn *c = dconn_get(d, conn_id);
  if (!c) return;
  c->dirty = true;
  dconn_settle_mark(d, c);
}

static void cb_round_done(void *user, void *ctx, const ded_round_result *res) {
  ded_driver *d = user;
  /* Fresh for the round's report: a peer's record (whether it takes part
   * in rounds) may have come after its connection. */
  atomic_store_explicit(&d->peers_up, res->peers, memory_order_relaxed);
  d->cfg.done(d->cfg.user, ctx, res);
}

static uint64_t wall_ms_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void cb_event(void *user, const ded_event *ev) {
  ded_driver *d = user;
  if (ev->type == DED_EVENT_PEER_UP || ev->type == DED_EVENT_PEER_DOWN) {
    d->peers_changed = true;
    pthread_mutex_lock(&d->mu);
    ded_driver_event *e = &d->events[d->nevents++ % DED_DRIVER_EVENTS];
    e->wall_ms = wall_ms_now();
    memcpy(e->id, ev->peer, DED_ID_BYTES);
    e->up = ev->type == DED_EVENT_PEER_UP;
    e->status = ev->status;
    pthread_mutex_unlock(&d->mu);
    return;
  }
  if (ev->type != DED_EVENT_BOOTSTRAP) return;
  pthread_mutex_lock(&d->mu);
  d->booted = true;
  d->boot_status = ev->status;
  pthread_cond_broadcast(&d->cv);
  pthread_mutex_unlock(&d->mu);
}

static void cb_log(void *user, int level, const char *line) { drv_write_log(user, level, line); }

static void cb_want_snapshot(void *user) {
  ded_driver *d = user;
  if (d->cfg.want_snapshot) d->cfg.want_snapshot(d->cfg.user);
}

static void cb_state_done(void *user, int status, ded_snapshot *snap) {
  ded_driver *d = user;
  pthread_mutex_lock(&d->mu);
  d->fetch_done = true;
  d->fetch_status = status;
  memset(&d->fetch_snap, 0, sizeof d->fetch_snap);
  if (snap) {
    d->fetch_snap = *snap;
    snap->bytes = NULL; /* ours now (the node's allocator is libc) */
  }
  pthread_cond_broadcast(&d->cv);
  pthread_mutex_unlock(&d->mu);
}

static const ded_node_callbacks drv_callbacks = {
    cb_connect, cb_close, cb_want_write, cb_round_done, cb_event, cb_log,
    cb_want_snapshot, cb_state_done};

/* ---------------------------------------------------------------- the loop */

/*
 * Hands waiting rounds to the node, in order, while it has room. A trainer
 * may have more all-reduces in flight than the node holds at once
 * (DED_ROUNDS_ACTIVE_MAX); the rest wait here and go in as rounds finish.
 */
static void driver_submit_waiting(ded_driver *d) {
  if (d->wait_head) d->quiet_since_ns = 0; /* not quiet: driver_quiet_check starts over */
  while (d->wait_head) {
    pending_round *p = d->wait_head;
    int64_t rv = ded_node_round_submit(d->node, &p->args, ded_driver_now_ns());
    if (rv == DED_ERR_LIMIT) return;
    d->wait_head = p->next;
    if (!d->wait_head) d->wait_tail = NULL;
    if (rv < 0) {
      ded_round_result res;
      memset(&res, 0, sizeof res);
      res.status = (int)rv;
      res.count = p->args.count;
      res.last = true;
      d->cfg.done(d->cfg.user, p->args.ctx, &res);
    }
    free(p);
  }
}

/* The snapshot ded_driver_status asked for; under |mu|, on the driver
 * thread (the node is its alone). */
static void driver_status_fill(ded_driver *d, ded_swarm_status *out) {
  memset(out, 0, sizeof *out);
  out->wall_ms = wall_ms_now();
  out->peers = malloc(DED_PEERS_MAX * sizeof *out->peers);
  d->status_rv = out->peers ? 0 : DED_ERR_NOMEM;
  if (out->peers) out->npeers = ded_node_status(d->node, out->peers, DED_PEERS_MAX);
  uint64_t first = d->nevents > DED_DRIVER_EVENTS ? d->nevents - DED_DRIVER_EVENTS : 0;
  for (uint64_t i = first; i < d->nevents; i++)
    out->events[out->nevents++] = d->events[i % DED_DRIVER_EVENTS];
}

/* Moves queued submissions into the node; handles a stop request. */
static void on_wake(ded_driver *d) {
  uint64_t v;
  while (read(d->wake_fd, &v, sizeof v) > 0) {
  }
  pthread_mutex_lock(&d->mu);
  pending_round *list = d->subs_head;
  d->subs_head = d->subs_tail = NULL;
  bool stop = d->stop_requested;
  uint8_t leave_reason = d->leave_reason;
  bool fetch = d->fetch_asked, pull = d->fetch_pull;
  uint64_t fetch_min = d->fetch_min;
  uint8_t *cands = d->fetch_cands;
  unsigned ncands = d->fetch_ncands;
  d->fetch_cands = NULL;
  d->fetch_asked = false;
  ded_snapshot *give = d->give_snap, *found = d->give_found, *keep = d->give_keep;
  d->give_snap = d->give_found = d->give_keep = NULL;
  if (d->status_asked) {
    d->status_asked = false;
    driver_status_fill(d, d->status_out);
    d->status_ready = true;
    pthread_cond_broadcast(&d->cv);
  }
  pthread_mutex_unlock(&d->mu);
  drv_groups_on_wake(d);
  /* The founding state goes in before this job's first round does. */
  if (found) {
    ded_node_found_set(d->node, found, ded_driver_now_ns());
    free(found);
  }
  if (fetch) {
    uint64_t now = ded_driver_now_ns();
    int rv = pull        ? ded_node_state_pull(d->node, fetch_min, now)
             : cands     ? ded_node_state_found(d->node, cands, ncands, now)
             : fetch_min ? ded_node_state_reload(d->node, fetch_min, now)
                         : ded_node_state_fetch(d->node, now);
    if (rv) cb_state_done(d, rv, NULL);
  }
  free(cands);
  if (give) {
    ded_node_snapshot_set(d->node, give, ded_driver_now_ns());
    free(give);
  }
  if (keep) {
    ded_node_keep_set(d->node, keep, ded_driver_now_ns());
    free(keep);
  }
  while (list) {
    pending_round *p = list;
    list = p->next;
    p->next = NULL;
    if (d->wait_tail)
      d->wait_tail->next = p;
    else
      d->wait_head = p;
    d->wait_tail = p;
  }
  driver_submit_waiting(d);
  if (stop && !d->leaving) {
    /* Rounds still waiting for room never started: they end here. */
    while (d->wait_head) {
      pending_round *p = d->wait_head;
      d->wait_head = p->next;
      ded_round_result res;
      memset(&res, 0, sizeof res);
      res.status = DED_ERR_CLOSING;
      res.count = p->args.count;
      res.last = true;
      d->cfg.done(d->cfg.user, p->args.ctx, &res);
      free(p);
    }
    d->wait_tail = NULL;
    d->leaving = true;
    d->leave_deadline_ns = ded_driver_now_ns() + d->flush_ns;
    ded_node_leave_reason(d->node, leave_reason);
    ded_node_leave(d->node, ded_driver_now_ns());
  }
  driver_settle(d);
}

/*
 * Leaving, once our output is out: half-close every connection and keep
 * reading until the peer closes too. Closing a socket that still has unread
 * input makes the kernel send RST, and a RST can destroy data the peer has
 * not read yet, such as the last results we sent it.
 */
static bool driver_leave_done(ded_driver *d, uint64_t now) {
  if (now >= d->leave_deadline_ns) return true;
  if (!ded_node_flushed(d->node)) return false;
  bool any = false;
  for (uint32_t i = 0; i < d->nconns; i++) {
    dconn *c = d->conns[i];
    if (!c || c->closing) continue;
    /* A handshake someone opened and never finished (a flood's, a silent
     * socket): nothing to say goodbye to, so it does not hold the leave
     * to its HELLO deadline. */
    if (c->inbound && c->chan_on && !c->ch.open) {
      uint32_t id = c->id;
      dconn_detach(d, c);
      ded_node_conn_closed(d->node, id, DED_ERR_CLOSING, now);
      continue;
    }
    any = true;
    /* Sealed but not yet written: the node counts it sent already. */
    const uint8_t *out;
    if (c->chan_on && ded_chan_out(&c->ch, &out) > 0) continue;
    if (!c->shut && !c->connecting) {
      shutdown(c->fd, SHUT_WR);
      c->shut = true;
    }
  }
  return !any;
}

/* Once a second at most: says (cfg.quiet, once) that the run's rounds go
 * on while this job has submitted nothing for a round bound or more. */
static void driver_quiet_check(ded_driver *d, uint64_t now) {
  if (!d->cfg.quiet || d->quiet_said || now < d->quiet_next_ns) return;
  d->quiet_next_ns = now + 1000000000ull;
  uint64_t swarm = ded_node_swarm_round(d->node);
  if (d->quiet_since_ns == 0 || swarm < d->quiet_round) { /* the first look, a submission, a new run */
    d->quiet_round = swarm;
    d->quiet_since_ns = now;
    return;
  }
  uint64_t bound = DED_MAX(d->cfg.node.round_timeout_ns, 1000000000ull);
  if (swarm > d->quiet_round && now - d->quiet_since_ns >= bound) {
    d->quiet_said = true;
    d->cfg.quiet(d->cfg.user, swarm, (now - d->quiet_since_ns) / 1000000000ull);
  }
}

static void *driver_main(void *arg) {
  ded_driver *d = arg;
  struct epoll_event evs[DRV_EVENTS_MAX];
  for (;;) {
    uint64_t now = ded_driver_now_ns();
    if (d->leaving && driver_leave_done(d, now)) break;
    uint64_t exp = ded_node_expiry(d->node);
    if (d->leaving) exp = DED_MIN(exp, d->leave_deadline_ns);
    int timeout = exp <= now ? 0 : (int)DED_MIN((exp - now + 999999) / 1000000, 1000);
    int n = epoll_wait(d->ep, evs, DRV_EVENTS_MAX, timeout);
    for (int i = 0; i < n; i++) {
      uint64_t tag = evs[i].data.u64;
      if (tag == DRV_TAG_LISTEN)
        drv_on_accept(d);
      else if (tag == DRV_TAG_WAKE)
        on_wake(d);
      else {
        dconn *c = dconn_get(d, (uint32_t)tag);
        if (c) drv_on_conn(d, c, evs[i].events);
      }
    }
    now = ded_driver_now_ns();
    driver_meter_poll(d, now);
    if (now >= ded_node_expiry(d->node)) {
      ded_node_handle_expiry(d->node, now);
      driver_settle(d);
    }
    if (d->accept_paused_until && now >= d->accept_paused_until) drv_accept_pause(d, false);
    if (d->wait_head) driver_submit_waiting(d);
    driver_quiet_check(d, now);
    if (d->peers_changed) { /* recounted after a peer came or went, not per wake-up */
      d->peers_changed = false;
      atomic_store_explicit(&d->peers_up, ded_node_round_peer_count(d->node), memory_order_relaxed);
    }
  }
  return NULL;
}

unsigned ded_driver_peer_count(const ded_driver *d) {
  return atomic_load_explicit(&d->peers_up, memory_order_relaxed);
}

/* ---------------------------------------------------------------- API */

/* Connections the kernel may hold established for us to accept: well past
 * what a flood keeps queued (each connection evicted comes back at once),
 * so that an honest one still finds room rather than a dropped SYN and
 * its retry a second later. The kernel caps it (net.core.somaxconn). */
#define DRV_LISTEN_BACKLOG 4096

static int open_listener(ded_driver *d, const ded_addr *a, char *err, size_t errlen) {
  struct sockaddr_storage ss;
  socklen_t len;
  ded_resolve_to_sockaddr(a, &ss, &len);
  int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
      bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, DRV_LISTEN_BACKLOG) != 0) {
    char txt[64];
    ded_addr_format(a, txt, sizeof txt);
    snprintf(err, errlen, "cannot listen on %s: %s", txt, strerror(errno));
    if (fd >= 0) close(fd);
    return DED_ERR_INVALID_ARG;
  }
  len = sizeof ss;
  getsockname(fd, (struct sockaddr *)&ss, &len);
  ded_addr bound;
  ded_resolve_from_sockaddr((struct sockaddr *)&ss, &bound);
  d->port = bound.port;
  d->listen_fd = fd;
  return 0;
}

static void driver_free(ded_driver *d) {
  while (d->settle) { /* closed ones are out of the table already */
    dconn *c = d->settle;
    d->settle = c->next_settle;
    c->in_list = false;
    if (c->closing) dconn_free(c);
  }
  for (uint32_t i = 0; i < d->nconns; i++)
    if (d->conns[i]) {
      close(d->conns[i]->fd);
      dconn_free(d->conns[i]);
    }
  ded_wipe(d->psk, sizeof d->psk);
  free(d->conns);
  while (d->subs_head) {
    pending_round *p = d->subs_head;
    d->subs_head = p->next;
    free(p);
  }
  while (d->wait_head) {
    pending_round *p = d->wait_head;
    d->wait_head = p->next;
    free(p);
  }
  if (d->give_snap) free(d->give_snap->bytes);
  free(d->give_snap);
  if (d->give_keep) free(d->give_keep->bytes);
  free(d->give_keep);
  if (d->give_found) free(d->give_found->bytes);
  free(d->give_found);
  free(d->fetch_cands);
  free(d->fetch_snap.bytes);
  drv_groups_free(d);
  ded_node_free(d->node);
  if (d->listen_fd >= 0) close(d->listen_fd);
  if (d->wake_fd >= 0) close(d->wake_fd);
  if (d->ep >= 0) close(d->ep);
  free(d->rbuf);
  pthread_mutex_destroy(&d->mu);
  pthread_cond_destroy(&d->cv);
  free(d);
}

/* How fast this machine adds an incoming vector into a sum (the plan's
 * "compute" input): the reduction kernel over 4 MiB, best of 3, about
 * 10 ms in all. Bytes per second, or 0 if it cannot be measured. */
static double measure_add_Bps(void) {
  enum { ELEMS = 1 << 20 };
  float *acc = calloc(ELEMS, sizeof *acc), *x = calloc(ELEMS, sizeof *x);
  double best = 0.0;
  for (int rep = 0; acc && x && rep < 3; rep++) {
    uint64_t t0 = ded_driver_now_ns();
    ded_reduce_axpy(DED_DTYPE_F32, acc, x, ELEMS, 1.0, false);
    uint64_t dt = ded_driver_now_ns() - t0;
    if (dt > 0) best = fmax(best, (double)ELEMS * sizeof *x * 1e9 / (double)dt);
  }
  free(acc);
  free(x);
  return best;
}

static int driver_setup_net(ded_driver *d, ded_node_settings *st, char *err, size_t errlen) {
  int rv = ded_resolve_list(d->cfg.join, st->bootstrap, DED_BOOTSTRAP_MAX, &st->n_bootstrap,
                            false, err, errlen);
  if (rv) return rv;
  if (d->cfg.listen && d->cfg.listen[0]) {
    ded_addr la;
    rv = ded_resolve_addr(d->cfg.listen, true, &la, err, errlen);
    if (rv) return rv;
    rv = open_listener(d, &la, err, errlen);
    if (rv) return rv;
    la.port = d->port;
    if (d->cfg.announce && d->cfg.announce[0]) {
      rv = ded_resolve_list(d->cfg.announce, st->announce, DED_RECORD_ADDRS_MAX,
                            &st->n_announce, false, err, errlen);
      if (rv) return rv;
    } else {
      ded_resolve_announce(&la, st->announce, &st->n_announce);
    }
  }
  return 0;
}

int ded_driver_identity_seed(const char *path, uint8_t seed[DED_SEED_BYTES], bool *created,
                             char *err, size_t errlen) {
  return ded_secrets_identity_seed(path, seed, created, err, errlen);
}

int ded_driver_start(const ded_driver_config *cfg, ded_driver **out, char *err, size_t errlen) {
  *out = NULL;
  err[0] = '\0';
  ded_driver *d = calloc(1, sizeof *d);
  if (!d) return DED_ERR_NOMEM;
  d->cfg = *cfg;
  d->cfg.swarm_key = d->cfg.swarm_key_file = NULL; /* the caller's may go */
  d->ep = d->listen_fd = d->wake_fd = -1;
  snprintf(d->log_prefix, sizeof d->log_prefix, "%s", cfg->log_prefix ? cfg->log_prefix : "dedmpi");
  pthread_mutex_init(&d->mu, NULL);
  pthread_cond_init(&d->cv, NULL);
  d->rbuf = malloc(DRV_READ_BYTES);
  d->ep = epoll_create1(EPOLL_CLOEXEC);
  d->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (!d->rbuf || d->ep < 0 || d->wake_fd < 0) {
    snprintf(err, errlen, "cannot set up the event loop: %s", strerror(errno));
    driver_free(d);
    return DED_ERR_INTERNAL;
  }
  ded_node_settings st = cfg->node;
  int rv = driver_setup_net(d, &st, err, errlen);
  if (rv) {
    driver_free(d);
    return rv;
  }
  uint8_t seed[DED_SEED_BYTES];
  bool id_created;
  rv = ded_secrets_identity_seed(cfg->identity_file, seed, &id_created, err, errlen);
  if (rv) {
    driver_free(d);
    return rv;
  }
  uint8_t(*allow)[DED_PK_BYTES] = NULL;
  rv = ded_secrets_access(cfg, seed, &st, &allow, err, errlen);
  if (rv) {
    ded_wipe(seed, sizeof seed);
    driver_free(d);
    return rv;
  }
  st.identity_seed = seed;
  st.sessions = true;
  st.wall_offset_ns = drv_wall_offset_ns();
  if (st.add_Bps == 0.0) st.add_Bps = measure_add_Bps();
  rv = ded_node_new(&st, &drv_callbacks, d, ded_driver_now_ns(), &d->node);
  ded_wipe(seed, sizeof seed);
  free(allow); /* the node keeps a copy */
  if (rv) {
    snprintf(err, errlen, "cannot create the swarm node: %s", ded_strerror(rv));
    driver_free(d);
    return rv;
  }
  rv = ded_secrets_swarm_key(cfg->swarm_key, cfg->swarm_key_file, ded_node_run_id(d->node),
                             d->psk, &d->has_psk, err, errlen);
  if (rv) {
    driver_free(d);
    return rv;
  }
  ded_id_short(ded_node_id(d->node), d->sid);
  snprintf(d->log_prefix, sizeof d->log_prefix, "%s %s", cfg->log_prefix ? cfg->log_prefix : "dedmpi",
           d->sid);
  if (cfg->identity_file && cfg->identity_file[0])
    drv_log(d, DED_LOG_INFO, "identity %s from DEDMPI_IDENTITY_FILE=%s", id_created ? "created" : "kept",
            cfg->identity_file);
  char pk_hex[2 * DED_PK_BYTES + 1];
  ded_hex_encode(ded_node_ident(d->node)->pk, DED_PK_BYTES, pk_hex);
  drv_log(d, DED_LOG_INFO, "public key %s", pk_hex);
  if (st.access)
    drv_log(d, DED_LOG_INFO, "access control: %s%u listed key%s%s", st.has_owner ? "the owner, " : "",
            st.nallow, st.nallow == 1 ? "" : "s", st.has_owner ? ", identities the owner invited" : "");
  if (cfg->invite && !cfg->owner)
    drv_log(d, DED_LOG_WARN, "DEDMPI_INVITE without DEDMPI_OWNER: the invitation is published but "
                             "not checked here (set DEDMPI_OWNER to the run owner's key)");
  if (ded_aead_null_cipher())
    drv_log(d, DED_LOG_WARN, "built with DEDMPI_NULL_CIPHER (a benchmark build): frames travel "
                             "in the clear, unauthenticated; never use it for a real run");
  if (!d->has_psk && !cfg->settings_said)
    drv_log(d, DED_LOG_WARN,
            "no DEDMPI_SWARM_KEY: any peer that reaches this one can join the run, read its "
            "averages and add its own; set a key to keep the run to those who have it");
  struct epoll_event ev;
  memset(&ev, 0, sizeof ev);
  ev.events = EPOLLIN;
  ev.data.u64 = DRV_TAG_WAKE;
  epoll_ctl(d->ep, EPOLL_CTL_ADD, d->wake_fd, &ev);
  if (d->listen_fd >= 0 && st.n_announce > 0)
    ded_addr_format(&st.announce[0], d->addr_text, sizeof d->addr_text);
  if (d->listen_fd >= 0) {
    ev.data.u64 = DRV_TAG_LISTEN;
    epoll_ctl(d->ep, EPOLL_CTL_ADD, d->listen_fd, &ev);
    drv_log(d, DED_LOG_INFO, "listening on port %u", d->port);
  }
  ded_node_start(d->node, ded_driver_now_ns());
  driver_settle(d);
  if (pthread_create(&d->thread, NULL, driver_main, d) != 0) {
    snprintf(err, errlen, "cannot start the driver thread");
    driver_free(d);
    return DED_ERR_INTERNAL;
  }
  d->thread_started = true;
  /* Bootstrap is bounded by the node's own deadline; the slack covers a
   * loop that is slow to notice it. */
  uint64_t limit = ded_driver_now_ns() + cfg->node.bootstrap_timeout_ns + 5000000000ull;
  pthread_mutex_lock(&d->mu);
  while (!d->booted && ded_driver_now_ns() < limit) ded_cond_wait_ns(&d->cv, &d->mu, 50000000);
  int status = d->booted ? d->boot_status : DED_ERR_BOOTSTRAP;
  char refusal[sizeof d->boot_refusal];
  memcpy(refusal, d->boot_refusal, sizeof refusal);
  bool refused_key = d->boot_refused_key;
  pthread_mutex_unlock(&d->mu);
  if (status != 0 && refused_key) {
    /* Peers answered, and turned our key away: that is the cause. */
    snprintf(err, errlen, "%s", refusal);
    status = DED_ERR_AUTH;
    ded_driver_stop(d, 0);
    return status;
  }
  if (status != 0) {
    snprintf(err, errlen, "no peer %s at DEDMPI_JOIN=%s within %.0f s%s%s",
             refusal[0] ? "let us in" : "answered", cfg->join ? cfg->join : "",
             (double)cfg->node.bootstrap_timeout_ns / 1e9, refusal[0] ? "; last: " : "", refusal);
    ded_driver_stop(d, 0);
    return status;
  }
  *out = d;
  return 0;
}

void drv_wake(ded_driver *d) {
  uint64_t one = 1;
  ssize_t w = write(d->wake_fd, &one, sizeof one);
  (void)w; /* a full counter still wakes the loop */
}

int ded_driver_submit(ded_driver *d, const ded_round_args *args) {
  pending_round *p = calloc(1, sizeof *p);
  if (!p) return DED_ERR_NOMEM;
  p->args = *args;
  pthread_mutex_lock(&d->mu);
  if (d->stop_requested) {
    pthread_mutex_unlock(&d->mu);
    free(p);
    return DED_ERR_CLOSING;
  }
  if (d->subs_tail)
    d->subs_tail->next = p;
  else
    d->subs_head = p;
  d->subs_tail = p;
  pthread_mutex_unlock(&d->mu);
  drv_wake(d);
  return 0;
}

/* A fetch (|cands| NULL, |min_round| 0), a reload, a founding fetch
 * (|cands| from malloc, taken on every path), or a backbone's pull. */
static int driver_fetch(ded_driver *d, uint64_t min_round, uint8_t *cands, unsigned ncands,
                        bool pull, ded_snapshot *snap) {
  memset(snap, 0, sizeof *snap);
  pthread_mutex_lock(&d->mu);
  if (d->fetch_busy || (min_round == 0 && !cands && !pull && d->fetch_joined)) {
    pthread_mutex_unlock(&d->mu);
    free(cands);
    return DED_ERR_INVALID_ARG;
  }
  d->fetch_busy = d->fetch_asked = true;
  if (!pull) d->fetch_joined = true;
  d->fetch_pull = pull;
  d->fetch_done = false;
  d->fetch_min = min_round;
  d->fetch_cands = cands;
  d->fetch_ncands = ncands;
  pthread_mutex_unlock(&d->mu);
  drv_wake(d);
  pthread_mutex_lock(&d->mu);
  while (!d->fetch_done) ded_cond_wait_ns(&d->cv, &d->mu, 100000000);
  int status = d->fetch_status;
  *snap = d->fetch_snap;
  memset(&d->fetch_snap, 0, sizeof d->fetch_snap);
  d->fetch_busy = false;
  pthread_mutex_unlock(&d->mu);
  return status;
}

int ded_driver_state_fetch(ded_driver *d, ded_snapshot *snap) {
  return driver_fetch(d, 0, NULL, 0, false, snap);
}

int ded_driver_state_reload(ded_driver *d, uint64_t min_round, ded_snapshot *snap) {
  if (min_round == 0) return DED_ERR_INVALID_ARG;
  return driver_fetch(d, min_round, NULL, 0, false, snap);
}

int ded_driver_state_found(ded_driver *d, const uint8_t *cands, unsigned n, ded_snapshot *snap) {
  uint8_t *copy = malloc(n ? (size_t)n * DED_ID_BYTES : 1); /* non-NULL: a founding fetch */
  if (!copy) return DED_ERR_NOMEM;
  if (n) memcpy(copy, cands, (size_t)n * DED_ID_BYTES);
  return driver_fetch(d, 0, copy, n, false, snap);
}

int ded_driver_state_pull(ded_driver *d, uint64_t min_round, ded_snapshot *snap) {
  return driver_fetch(d, min_round, NULL, 0, true, snap);
}

/* Hands |snap| to the driver thread through |*slot| (a newer one replaces
 * one not handed over yet). */
static void driver_give(ded_driver *d, ded_snapshot **slot, ded_snapshot *snap) {
  ded_snapshot *copy = malloc(sizeof *copy);
  if (!copy) {
    free(snap->bytes);
    snap->bytes = NULL;
    return;
  }
  *copy = *snap;
  snap->bytes = NULL;
  pthread_mutex_lock(&d->mu);
  ded_snapshot *old = *slot;
  *slot = copy;
  pthread_mutex_unlock(&d->mu);
  if (old) { /* never handed over: the newer one replaces it */
    free(old->bytes);
    free(old);
  }
  drv_wake(d);
}

void ded_driver_snapshot_set(ded_driver *d, ded_snapshot *snap) { driver_give(d, &d->give_snap, snap); }

void ded_driver_found_set(ded_driver *d, ded_snapshot *snap) { driver_give(d, &d->give_found, snap); }

void ded_driver_keep_set(ded_driver *d, ded_snapshot *snap) { driver_give(d, &d->give_keep, snap); }

void ded_driver_stop(ded_driver *d, uint64_t flush_ns) {
  if (!d) return;
  pthread_mutex_lock(&d->mu);
  d->stop_requested = true;
  d->flush_ns = flush_ns;
  pthread_mutex_unlock(&d->mu);
  drv_wake(d);
  if (d->thread_started) pthread_join(d->thread, NULL);
  driver_free(d);
}

void ded_driver_leave_reason(ded_driver *d, uint8_t reason) {
  pthread_mutex_lock(&d->mu);
  /* Read with the stop request, in on_wake; the first reason stays, as
   * in the node. */
  if (!d->leave_reason && ded_leave_why(reason)) d->leave_reason = reason;
  pthread_mutex_unlock(&d->mu);
}

int ded_driver_status(ded_driver *d, ded_swarm_status *out) {
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&d->mu);
  d->status_out = out;
  d->status_asked = true;
  d->status_ready = false;
  pthread_mutex_unlock(&d->mu);
  drv_wake(d);
  uint64_t deadline = ded_driver_now_ns() + 1000000000ull;
  pthread_mutex_lock(&d->mu);
  while (!d->status_ready && ded_driver_now_ns() < deadline) ded_cond_wait_ns(&d->cv, &d->mu, 10000000);
  int rv = d->status_ready ? d->status_rv : DED_ERR_TIMEOUT;
  if (!d->status_ready) {
    d->status_asked = false; /* |out| is the caller's again */
    d->status_out = NULL;
  }
  pthread_mutex_unlock(&d->mu);
  return rv;
}

uint16_t ded_driver_port(const ded_driver *d) { return d->port; }

const char *ded_driver_peer_sid(const ded_driver *d) { return d->sid; }
