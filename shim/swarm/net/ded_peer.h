/*
 * ded_peer.h: the peers this node knows, and how it stays connected to them.
 *
 * Owns: one struct ded_peer per peer id heard of (a record, a HELLO),
 * sorted by id; which connection is a peer's first (control frames) and
 * which are its further lanes (round data, round robin); the connect
 * policy (the smaller id calls; the larger one after a patience; a client
 * always calls) with backoff over the record's addresses; losing a peer
 * (its last connection went, or it went silent: nothing from it for
 * ded_timing_silence though every peer sends a keepalive when it has
 * nothing else to send) and evicting it (lost for half the round bound:
 * no longer waited for); and the link probe at join (SPEED filler, the
 * lowest class of output, dropped once a round has data).
 *
 * Invariants: v is sorted by id, without duplicates, at most
 * DED_PEERS_MAX; a peer's |conn| and |lanes| are READY connections whose
 * |peer| is it; |lost| is set exactly while a peer that did not leave has
 * no ready connection after having had one; |evicted| implies |lost|; a
 * peer is forgotten (ded_peers_tick) only once no connection or attempt
 * refers to it and its record expired.
 */
#ifndef DED_PEER_H
#define DED_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/ded_frame.h"
#include "../core/ded_msg.h"
#include "../dht/ded_record.h"
#include "ded_conn.h"

typedef struct ded_peer {
  uint8_t id[DED_ID_BYTES];
  char sid[9];
  ded_conn *conn; /* the ready connection we send on */
  /* Further ready connections round data is spread over, with |conn|
   * (settings.streams: the caller opens them; either side uses them). */
  ded_conn *lanes[DED_STREAMS_MAX - 1];
  unsigned nlanes;
  unsigned lane_rr; /* the next data frame's connection, round robin */
  bool connecting;
  bool left;
  bool lost;    /* its connection broke (cleared when one is ready again) */
  bool evicted; /* lost for longer than the eviction time: no longer waited for */
  uint64_t lost_ns; /* since when: the break, or the start of its silence */
  uint64_t heard_ns;     /* the last bytes from it, on any connection */
  uint64_t keepalive_ns; /* our last keepalive to it */
  uint64_t known_since_ns;
  uint64_t next_connect_ns;
  uint32_t backoff_ms;
  unsigned addr_idx;
  bool speed_answered; /* we sent it the bytes its probe asked for */
  /* A round its record said it completed, past our newest, and the
   * attempt it took: kept until our rounds get there, to tell whether it
   * is of our group (ded_rounds_check_groups); round 0: none. */
  uint64_t seen_round, seen_attempt;
  /* The newest round it stepped down from (ABSTAIN, ded_abstain.h): not
   * one of that round's acceptors; 0: none. While |idle| (until it joins
   * a later round) it is not waited for. */
  uint64_t abstain_round;
  bool idle;
} ded_peer;

typedef struct ded_peers {
  ded_peer **v; /* sorted by id */
  size_t n, cap;
  bool probed;        /* our link probe went out (settings.probe_bytes) */
  bool filler_queued; /* link-probe filler (ours, or an answer) may wait in a DED_Q_BULK */
} ded_peers;

/* Peer |id|, or NULL. */
ded_peer *ded_peer_find(const ded_node *node, const uint8_t id[DED_ID_BYTES]);

/* Peer |id|, added if new (NULL past DED_PEERS_MAX, or short of memory). */
ded_peer *ded_peer_get_or_add(ded_node *node, const uint8_t id[DED_ID_BYTES], uint64_t now_ns);

/* The record we hold for |p|, or NULL. */
const ded_record *ded_peer_record(const ded_node *node, const ded_peer *p);

/* A peer that takes part in rounds and that we can talk to right now. */
bool ded_peer_participates(const ded_node *node, const ded_peer *p);

/* True if |id| cannot coordinate: it left, or its connection broke (us:
 * we are leaving). */
bool ded_peer_gone(ded_node *node, const uint8_t id[DED_ID_BYTES]);

/* True if |id| is gone for good: unknown here, left, or evicted (never
 * us). */
bool ded_peer_evicted(ded_node *node, const uint8_t id[DED_ID_BYTES]);

/* True if there is at least one of the |n| ids at |ids| and every one is
 * gone for good (ded_peer_evicted): a membership that died. */
bool ded_peers_all_evicted(ded_node *node, const uint8_t (*ids)[DED_ID_BYTES], unsigned n);

/* Takes |c| off |p|'s lanes; true if it was one. */
bool ded_peer_lane_remove(ded_peer *p, const ded_conn *c);

/* The connection |p|'s next round data frame goes on: its lanes and its
 * first connection in turn (frames are equal-sized chunks, so turns keep
 * the streams' queues even). */
ded_conn *ded_peer_data_conn(ded_peer *p);

/* Starts an outbound connection to |p| if policy says we should. */
void ded_peer_maybe_connect(ded_node *node, ded_peer *p, uint64_t now_ns);

/* A connection of |p| died (ded_conn_close). */
void ded_peer_conn_lost(ded_node *node, ded_peer *p, ded_conn *c, int why);

/* A LEAVE with |reason| on |c|, one of |p|'s connections: |p| left. The
 * first one logs, at warn, why its job could not take part, if it says. */
void ded_peer_on_leave(ded_node *node, ded_peer *p, const ded_conn *c, uint8_t reason);

/* A HELLO on |c|: the peer proves who it is, and |c| is READY. */
void ded_peer_on_hello(ded_node *node, ded_conn *c, const ded_frame *f, uint64_t now_ns);

/* A SPEED from |c|'s peer: its probe's filler, and what it asks back. */
void ded_peer_on_speed(ded_node *node, ded_conn *c, const ded_msg_speed *m);

/* Drops link-probe filler not yet begun on any connection: a round has
 * data to send. */
void ded_peers_drop_filler(ded_node *node);

/* Peers we could see as members of a genesis round, us included, and the
 * smallest id among those that can coordinate (|min_id|, may be NULL). */
unsigned ded_peers_genesis_view(ded_node *node, const uint8_t **min_id);

/* Bytes from |c|'s peer arrived. */
void ded_peer_heard(ded_conn *c, uint64_t now_ns);

/* True if nothing came from |p| for half the silence time: two or more
 * of the keepalives it sends when it has nothing else to send are late. A
 * peer that quiet is most likely stopped; it is lost only at the silence
 * time (ded_peers_tick). */
bool ded_peer_quiet(const ded_node *node, const ded_peer *p, uint64_t now_ns);

/* This process did not run for |gap_ns| (a stop, a starved thread): what
 * it did not hear meanwhile is not the peers' silence, which is paused
 * for that long (not reset: a peer silent before stays so). */
void ded_peers_forgive_silence(ded_node *node, uint64_t gap_ns);

/* Sends keepalives, takes peers silent too long for lost (closing their
 * connections), evicts peers lost too long, forgets those nothing refers
 * to any more, and connects where policy says. */
void ded_peers_tick(ded_node *node, uint64_t now_ns);

/* True while some peer will want a timer soon (an attempt to make). */
bool ded_peers_need_tick(const ded_node *node);

void ded_peers_free(ded_node *node);

#endif /* DED_PEER_H */
