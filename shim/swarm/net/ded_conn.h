/*
 * ded_conn.h: the node's connections.
 *
 * Owns: every connection of the node (struct ded_conn), by slot, with a
 * generation per slot so that a connection id (generation << 16 | slot)
 * never names a later connection of the same slot; each connection's
 * state, frame decoder and output queue (ded_sendq.h).
 *
 * A connection goes CONNECTING (outbound, the driver dials) ->
 * AWAIT_HELLO (established; for DED_HELLO_TIMEOUT_MS at most, or
 * DED_HELLO_TIMEOUT_PRESSED_MS under pressure) -> READY (the peer is
 * known: any frame may flow) -> DEAD. DEAD is final: the
 * driver has been told (or told us), and the memory goes when the node
 * reaps at the end of the entry point (ded_conns_release), never while a
 * caller up the stack may still hold it.
 *
 * Invariants: v[s] is NULL or a connection whose id's slot is s; n counts
 * the non-NULL slots and stays within DED_CONNS_MAX; ded_conns_get never
 * returns a DEAD connection; a connection whose LEAVE is queued
 * (leave_queued) takes no more frames.
 *
 * Admission (ded_conns_admit): who gets an inbound slot while connections
 * that have not proved a key (inbound, AWAIT_HELLO, not |secured|: junk,
 * silent sockets, a flood) hold many. Such a connection may be evicted
 * for a newer one, oldest first, from the address that holds the most
 * (the bounds are in ded_limits.h, DED_HANDSHAKES_*); one that proved
 * the key never is. While more than half the handshake slots hold such
 * connections, they get DED_HELLO_TIMEOUT_PRESSED_MS, not
 * DED_HELLO_TIMEOUT_MS (ded_conns_tick).
 *
 * The table (ded_conns_*) needs only an allocator; opening, closing and
 * queueing output (ded_conn_*) tell the driver and the peers, and take
 * the node.
 */
#ifndef DED_CONN_H
#define DED_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/ded_frame.h"
#include "../core/ded_mem.h"
#include "../core/ded_sendq.h"
#include "../core/ded_types.h"
#include "../ded_node.h"

struct ded_peer;

typedef enum ded_conn_state {
  DED_CONN_CONNECTING,  /* outbound, waiting for the driver to connect */
  DED_CONN_AWAIT_HELLO, /* established; the peer's HELLO has not arrived */
  DED_CONN_READY,       /* the peer is known; any frame may flow */
  DED_CONN_DEAD,        /* closed; reaped at the end of the entry point */
} ded_conn_state;

typedef struct ded_conn {
  uint32_t id;
  ded_conn_state state;
  bool outbound;
  int boot_idx; /* index into the bootstrap list, or -1 */
  uint64_t opened_ns;
  uint64_t seq; /* opening order (ded_conns.opened): the oldest is evicted first */
  ded_addr remote;
  struct ded_peer *peer; /* once known: the peer we called, or the HELLO's */
  bool secured;          /* the handshake proved the peer holds |pk| */
  uint8_t pk[DED_PK_BYTES];
  ded_frame_dec dec;
  ded_sendq out;     /* frames to write; a round's payloads are lent */
  bool leave_queued; /* we left: LEAVE is its last frame */
} ded_conn;

typedef struct ded_conns {
  const ded_mem *mem;
  ded_conn **v;  /* by slot */
  uint16_t *gen; /* per slot: the generation of its latest connection */
  uint32_t nslots;
  uint32_t n; /* live slots */
  uint64_t opened; /* connections opened so far */
  /* Admission (ded_conns_admit, ded_conns_tick): under pressure now; when
   * that was last logged; unproven connections evicted and timed out since. */
  bool pressed;
  uint64_t pressed_logged_ns;
  uint64_t evicted, timed_out;
} ded_conns;

/* The live (not DEAD) connection |id|, or NULL. */
ded_conn *ded_conns_get(const ded_conns *t, uint32_t id);

/* A new connection in the first free slot, opened at |now_ns|: CONNECTING
 * if |outbound|, else AWAIT_HELLO. NULL past DED_CONNS_MAX, or short of
 * memory. */
ded_conn *ded_conns_new(ded_conns *t, bool outbound, const ded_addr *remote, uint64_t now_ns);

/* Frees |c| (DEAD, or the node going) and its output; its slot is free. */
void ded_conns_release(ded_conns *t, ded_conn *c, const ded_sendq_env *env);

/* Frees every connection and the table. */
void ded_conns_free(ded_conns *t, const ded_sendq_env *env);

/* Slot |s| (< nslots): a connection, DEAD ones included, or NULL. */
static inline ded_conn *ded_conns_at(const ded_conns *t, uint32_t s) { return t->v[s]; }

/* ---- what takes the node ---- */

/* A new connection (ded_conns_new at the node's time); the node wakes
 * soon, since its HELLO has a deadline. */
ded_conn *ded_conn_open(ded_node *node, bool outbound, const ded_addr *remote);

/* Marks |c| DEAD and, if |notify|, tells the driver; its peer loses it. */
void ded_conn_close(ded_node *node, ded_conn *c, int why, bool notify);

/* Logs that |c|'s peer broke the protocol (|what|, |rv|) and closes it. */
void ded_conn_protocol_error(ded_node *node, ded_conn *c, int rv, const char *what);

bool ded_conn_has_output(const ded_conn *c);

/* True if some connection has output queued. */
bool ded_conns_have_output(const ded_node *node);

/* Queues a whole frame |frame| (from the node's allocator) in class
 * |cls|; the queue owns it on every path. */
int ded_conn_send_owned(ded_node *node, ded_conn *c, int cls, uint8_t *frame, size_t len);

/* Queues a copy of a control frame (nothing to a peer that left). */
int ded_conn_send_ctrl(ded_node *node, ded_conn *c, const uint8_t *frame, size_t len);

/* Queues a DATA or RESULT frame of round |no|, attempt |attempt|, whose
 * |len| bytes at |elems| stay in |owner|'s memory (the caller's buffer if
 * |user|, else its accumulator) until the queue lets go of them
 * (ded_sendq_env.unref). Nothing after our LEAVE, nothing to a peer that
 * left: then no reference is taken. */
int ded_conn_send_data(ded_node *node, ded_conn *c, void *owner, uint8_t type, uint64_t no,
                       uint64_t attempt, uint64_t off, uint8_t codec, const uint8_t *elems,
                       size_t len, bool user);

/* Lets go of |owner|'s memory on every connection (ded_sendq_detach); a
 * connection whose stream cannot stay whole closes. */
void ded_conns_detach(ded_node *node, const void *owner, bool user_only);

/* Moves what the dead |from| still had queued to |to|. */
void ded_conn_move_output(ded_node *node, ded_conn *from, ded_conn *to);

/* Makes room for an inbound connection from |remote|: 0 if it may open
 * (after closing the connection it evicts, if any), DED_ERR_LIMIT if it
 * must be refused (no unproven connection to evict in its place). */
int ded_conns_admit(ded_node *node, const ded_addr *remote);

/* Closes every connection whose HELLO is overdue at |now_ns| (sooner
 * under pressure: see Admission above). */
void ded_conns_tick(ded_node *node, uint64_t now_ns);

#endif /* DED_CONN_H */
