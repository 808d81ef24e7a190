/*
 * ded_driver_int.h: the driver's private state, shared by ded_driver.c and
 * ded_dconn.c. ded_driver.h is the driver's public face; this header is not.
 *
 * Owns: struct ded_driver (one per job: its node, epoll set, listening
 * socket and wake-up eventfd, the table of connections, the queues other
 * threads fill under |mu|), struct dconn (one connection's socket and
 * secure channel: ded_dconn.c), pending_round (a submitted round not
 * yet in the node: ded_driver.c), pending_join and pending_hints (added
 * bootstrap addresses and hint questions: ded_dgroups.c).
 *
 * Invariants:
 *  - Threads. Once the driver thread runs, it alone touches the node, the
 *    connections and the driver's fields, but for those the struct marks
 *    as shared (read and written under |mu|), |peers_up| (atomic) and what
 *    is fixed before it starts (|port|, |sid|, |addr_text|). Until then,
 *    ded_driver_start does its work on the caller's thread.
 *  - Table. conns[s] is NULL or the live connection whose id's slot
 *    (id & 0xffff) is s. A connection the node closed or that failed is
 *    detached at once (socket closed, fd -1, |closing|, out of the table) so
 *    the node may reuse its slot; its struct lives on the settle list until
 *    driver_settle frees it.
 *  - Settle list. |settle| chains, through next_settle, each connection
 *    with work for driver_settle at most once: it is on it iff |in_list|.
 *  - Flags. |out_armed| says whether EPOLLOUT is in the socket's interest
 *    set; |backlog| whether the channel holds output the open socket has
 *    not taken (brought up to date at every write and detach), and
 *    |nbacklog| counts the connections with it set.
 *  - Epoll tags. A socket's event carries its connection id (32 bits);
 *    DRV_TAG_LISTEN and DRV_TAG_WAKE can never be one.
 *
 * Interface: ded_dgroups.c is the API of group peers (publishing them,
 * reading others', adding bootstrap addresses) and its driver-thread side
 * (drv_groups_on_wake); ded_dconn.c keeps the table (dconn_get/add/free/detach),
 * handles socket events (drv_on_accept, drv_on_conn) and carries out what
 * the node asked for (dconn_settle_mark, driver_settle, driver_meter_poll);
 * ded_driver.c runs the loop, the node's callbacks and the API, and logs
 * (drv_log).
 */
#ifndef DED_DRIVER_INT_H
#define DED_DRIVER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/ded_assert.h"
#include "crypto/ded_chan.h"
#include "crypto/ded_noise.h"
#include "ded_driver.h"

#define DRV_READ_BYTES (256 * 1024)
#define DRV_TAG_LISTEN UINT64_MAX
#define DRV_TAG_WAKE (UINT64_MAX - 1)
/* Refused handshakes are logged once per remote host per
 * DRV_REFUSED_LOG_NS, for at most DRV_REFUSED_HOSTS hosts at a time. */
#define DRV_REFUSED_HOSTS 16
#define DRV_REFUSED_LOG_NS (60ull * 1000 * 1000 * 1000)

/* A host whose handshake we refused: when it was last logged, and the
 * refusals since that were not. */
typedef struct drv_refused {
  ded_addr host; /* port 0; family 0 = a free slot */
  uint64_t logged_ns;
  uint64_t unlogged;
} drv_refused;

typedef struct dconn {
  uint32_t id;
  int fd;
  bool connecting;
  bool out_armed; /* EPOLLOUT is in the interest set */
  bool dirty;     /* the node may have output for it */
  bool closing;   /* the node closed it: close the socket */
  bool in_list;   /* on the settle list */
  bool shut;      /* leaving: our FIN is sent, we read until theirs */
  bool inbound;
  ded_addr remote;
  bool chan_on; /* |ch| is set up (from connect or accept on) */
  ded_chan ch;
  bool backlog; /* |ch| holds output the socket has not taken */
  /* Bytes the kernel held, unsent or unacknowledged, after our last write;
   * -1 once our output ran out (what it held then leaves unwatched). */
  int outq;
  struct dconn *next_settle;
} dconn;

typedef struct pending_round {
  struct pending_round *next;
  ded_round_args args;
} pending_round;

/* Bootstrap addresses to add (ded_driver_join_more), in order. */
typedef struct pending_join {
  struct pending_join *next;
  unsigned n;
  ded_addr addrs[DED_BOOTSTRAP_MAX];
} pending_join;

/* A question for ded_node_group_hints, on its caller's stack: the driver
 * thread answers it under |mu| (the call is read-only and calls back
 * nothing) and sets |done|; a caller that gives up takes it off the list
 * under |mu| first. */
typedef struct pending_hints {
  struct pending_hints *next;
  uint16_t id;
  bool done;
  size_t n;
  unsigned waiting;
  ded_addr out[DED_BOOTSTRAP_MAX];
} pending_hints;

struct ded_driver {
  ded_driver_config cfg;
  uint8_t psk[DED_NOISE_PSK_BYTES]; /* the run's secret, if it has one */
  bool has_psk;
  bool cipher_logged;
  char log_prefix[64];
  ded_node *node;
  char sid[9];
  int ep, listen_fd, wake_fd;
  uint16_t port;
  pthread_t thread;
  bool thread_started;
  /* Connections by node slot (id & 0xffff). */
  dconn **conns;
  uint32_t nconns;
  dconn *settle; /* conns with work for driver_settle */
  uint8_t *rbuf;
  unsigned nbacklog; /* connections with a backlog */
  uint64_t meter_polled_ns; /* driver_meter_poll */
  uint64_t accept_paused_until; /* out of descriptors: stop accepting a while */
  /* Inbound handshakes refused (a wrong key), so that a peer retrying,
   * or an intruder flooding us, costs a line a minute per host and at
   * most DRV_REFUSED_HOSTS lines a minute in all (ded_dconn.c). */
  drv_refused refused[DRV_REFUSED_HOSTS];
  uint64_t refused_unlogged; /* refusals no slot had room to log */
  /* Shared with other threads, under |mu|. */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pending_round *subs_head, *subs_tail;
  bool stop_requested;
  uint8_t leave_reason; /* ded_driver_leave_reason; 0 = none */
  /* State transfer: a fetch (or, |fetch_min| > 0, a reload) asked for and
   * its outcome; a snapshot to hand to the node. */
  bool fetch_asked, fetch_busy, fetch_joined, fetch_done;
  bool fetch_pull; /* a backbone's pull (ded_driver_state_pull) */
  uint64_t fetch_min;
  uint8_t *fetch_cands; /* founding: the first round's contributors (malloc) */
  unsigned fetch_ncands;
  int fetch_status;
  ded_snapshot fetch_snap;
  ded_snapshot *give_snap, *give_found, *give_keep;
  /* Rounds waiting for room in the node (DED_ROUNDS_ACTIVE_MAX), in order.
   * Driver thread only. */
  pending_round *wait_head, *wait_tail;
  uint64_t flush_ns;
  bool booted;
  int boot_status;
  /* Before bootstrap: the latest peer that turned our call away with a
   * notice, a key refusal kept over the others (under |mu|): what
   * ded_driver_start says if no peer let us in. */
  char boot_refusal[320];
  bool boot_refused_key;
  bool leaving;
  uint64_t leave_deadline_ns;
  _Atomic unsigned peers_up; /* ded_driver_peer_count */
  /* Driver thread: the swarm's round at the first look after this job
   * last submitted (or started), and when (0: to be taken at the next
   * look); the next look; whether quiet was said. */
  uint64_t quiet_round, quiet_since_ns, quiet_next_ns;
  bool quiet_said;
  bool peers_changed;        /* driver thread: a peer came or went since the count */
  /* ded_driver_status: the latest peer events (a ring, under |mu|), and
   * an asked-for snapshot, filled on the driver thread. */
  ded_driver_event events[DED_DRIVER_EVENTS];
  uint64_t nevents;
  bool status_asked, status_ready;
  ded_swarm_status *status_out;
  int status_rv;
  /* Group peers (ded_driver_groups_publish: the newest list not yet
   * handed to the node, if |groups_new|), bootstrap addresses to add and
   * hint questions; under |mu|. */
  bool groups_new;
  ded_group_addr groups[DED_RECORD_GROUPS_MAX];
  unsigned ngroups;
  pending_join *joins_head, *joins_tail;
  pending_hints *hints_head;
  /* ded_driver_address: the first address announced, fixed before the
   * thread starts ("" when not listening). */
  char addr_text[64];
};

/* ---------------------------------------------------------------- ded_driver.c */

/* A log line of |level| (DED_LOG_*), if the node's log_level lets it through. */
DED_PRINTF(3, 4)
void drv_log(const ded_driver *d, int level, const char *fmt, ...);

/* Wakes the driver's loop from another thread. */
void drv_wake(ded_driver *d);

/* ---------------------------------------------------------------- ded_dgroups.c */

/* On the driver thread, at each wake-up: hands the node a new list of
 * group peers and the bootstrap addresses added, and answers the hint
 * questions. */
void drv_groups_on_wake(ded_driver *d);

/* Frees what is still queued (the thread is gone). */
void drv_groups_free(ded_driver *d);

/* ---------------------------------------------------------------- ded_dconn.c */

/* The live connection |id|, or NULL (closed, or a later one in its slot). */
dconn *dconn_get(ded_driver *d, uint32_t id);

/* A connection |id| on socket |fd|, put in the table (its slot must be
 * free); NULL if out of memory. */
dconn *dconn_add(ded_driver *d, uint32_t id, int fd);

/* Frees |c| and its channel; the socket is the caller's. */
void dconn_free(dconn *c);

/* Puts |c| on the settle list (once). */
void dconn_settle_mark(ded_driver *d, dconn *c);

/* Takes |c| out of the table and closes its socket at once, so the node
 * may reuse its slot right away (a peer's frame can make the node close
 * one connection and open another before we settle). The struct itself is
 * freed when settled. */
void dconn_detach(ded_driver *d, dconn *c);

/* Socket options for a connection (TCP_NODELAY, SO_KEEPALIVE,
 * TCP_NOTSENT_LOWAT). */
void drv_sock_tune(int fd);

/* While uploads are queued, at most every DRV_METER_POLL_NS: counts what
 * the sockets delivered since it last looked. */
void driver_meter_poll(ded_driver *d, uint64_t now);

/* Carries out what the node asked for during the last calls. */
void driver_settle(ded_driver *d);

/* Stops (|pause|) or resumes watching the listening socket. */
void drv_accept_pause(ded_driver *d, bool pause);

/* The listening socket is readable: accepts what it holds. */
void drv_on_accept(ded_driver *d);

/* Epoll's |events| for |c|'s socket. */
void drv_on_conn(ded_driver *d, dconn *c, uint32_t events);

#endif /* DED_DRIVER_INT_H */
