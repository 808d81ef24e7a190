/*
 * ded_limits.h: every bound on what a peer can make us hold.
 *
 * One header, so that the whole attack surface is readable at a glance
 * (WireGuard's messages.h). Crossing any of these is a protocol error that
 * drops the peer responsible; it never aborts the process.
 */
#ifndef DED_LIMITS_H
#define DED_LIMITS_H

enum ded_limits {
  /* Largest frame on the wire (type byte + payload). A data chunk plus its
   * header must fit; so must a COMMIT of DED_ROUND_MEMBERS_MAX members. */
  DED_FRAME_MAX = 1 << 20,
  /* Largest data chunk the engine sends (settings may choose smaller). */
  DED_CHUNK_BYTES_MAX = 512 * 1024,
  /* Smallest data chunk: keeps the per-frame overhead sane. */
  DED_CHUNK_BYTES_MIN = 64,
  /* Peers we keep records of; beyond this, records of strangers are
   * refused (a Kademlia DHT replaces the full table later). */
  DED_PEERS_MAX = 1024,
  /* Open connections, inbound and outbound together. */
  DED_CONNS_MAX = 2048,
  /* TCP connections one peer pair sends round data on at once (the first
   * and its lanes); a peer's further connections stay idle. */
  DED_STREAMS_MAX = 8,
  /* Filler bytes a peer sends back for one SPEED ask (its link probe at
   * join); it answers each peer once. */
  DED_SPEED_WANT_MAX = 8 << 20,
  /* Members of one round. */
  DED_ROUND_MEMBERS_MAX = 1024,
  /* Rounds a node has in flight at once (gradient buckets). */
  DED_ROUNDS_ACTIVE_MAX = 64,
  /* How far ahead of our own position a JOIN may be for a round that we
   * coordinate; anything further is a protocol error. */
  DED_ROUNDS_AHEAD_MAX = 256,
  /* HAVEs remembered per round (one per member and view it accepted in;
   * more are dropped, which can only delay completion). */
  DED_ROUND_VOTES_MAX = 4 * DED_ROUND_MEMBERS_MAX,
  /* Join requests held per round by its coordinator. */
  DED_JOINS_MAX = DED_ROUND_MEMBERS_MAX,
  /* Addresses in one discovery record. */
  DED_RECORD_ADDRS_MAX = 4,
  /* Extension bytes in a record: rates, invitation and progress (106
   * bytes together) and a full list of group peers (712 bytes at most,
   * DED_RECORD_GROUPS_MAX entries; ded_record.h), with room to spare.
   * Before the groups extension it was 256 (a record 512), and a peer
   * built before it refuses a larger record as malformed
   * (docs/wire-protocol.md, "Discovery records"). */
  DED_RECORD_EXT_MAX = 1024,
  /* Encoded record upper bound: 231 bytes besides the extension (with
   * DED_RECORD_ADDRS_MAX addresses), checked in ded_record.c. */
  DED_RECORD_BYTES_MAX = 1280,
  /* Longest lifetime a record may claim. */
  DED_RECORD_TTL_MS_MAX = 3600 * 1000,
  /* Records in one RECORDS frame. */
  DED_RECORDS_PER_FRAME_MAX = 256,
  /* Clock skew tolerated between peers' wall clocks. */
  DED_CLOCK_SKEW_MS_MAX = 60 * 1000,
  /* Bootstrap addresses in DEDMPI_JOIN. */
  DED_BOOTSTRAP_MAX = 16,
  /* Run names. */
  DED_RUN_NAME_MAX = 128,
  /* A connection must say HELLO within this long, or it is closed: a
   * silent or half-open socket cannot hold a slot forever. */
  DED_HELLO_TIMEOUT_MS = 10 * 1000,
  /* Under pressure (more than DED_HANDSHAKES_MAX / 2 inbound connections
   * whose handshake has not proved a key), those get this long instead. */
  DED_HELLO_TIMEOUT_PRESSED_MS = 1000,
  /* Inbound connections that have not said HELLO yet, from one IP address
   * and in all. One address holds at most a quarter of the slots. A new
   * connection that finds its address's bound (or DED_CONNS_PER_ADDR_MAX)
   * reached evicts the oldest of that address whose handshake has not
   * proved a key; one that finds every slot taken evicts the oldest such
   * of the address holding the most (its own on a tie): a flooding address
   * pays, not the others (ded_conns_admit, net/ded_conn.h). Refused only
   * when there is no such connection to evict. One address may be many
   * honest peers behind a NAT, each with DED_STREAMS_MAX connections
   * opening at once. */
  DED_HANDSHAKES_PER_ADDR_MAX = 64,
  DED_HANDSHAKES_MAX = 256,
  /* Inbound connections from one IP address, in any state: an admitted
   * peer, or many behind one NAT, cannot take every slot of DED_CONNS_MAX. */
  DED_CONNS_PER_ADDR_MAX = 256,
  /* Routed all-reduces per training step a snapshot may claim. */
  DED_STATE_STEP_ROUNDS_MAX = 1024,
  /* Largest range of a snapshot one STATE_GET may ask for. */
  DED_STATE_GET_BYTES_MAX = 512 * 1024,
};

/* Largest state a snapshot may announce (1 TiB): a joiner allocates it. */
#define DED_STATE_BYTES_MAX ((uint64_t)1 << 40)

/* Largest weight a job may claim (samples behind a gradient): every integer
 * up to it is exact in a double, and DED_ROUND_MEMBERS_MAX of them sum to
 * a finite total, so a commit can never overflow its own checks. */
#define DED_WEIGHT_MAX 9007199254740992.0 /* 2^53 */

/* Bytes a peer may make us buffer for a round we have joined but whose
 * commit has not reached us yet: data that overtook the COMMIT on another
 * connection. Bounded by the round's own size, plus slack for headers. */
#define DED_EARLY_BYTES_MAX(round_bytes) ((round_bytes) + (size_t)DED_FRAME_MAX)

/* Elements in one round: MPI counts are int. */
#define DED_COUNT_MAX ((uint64_t)0x7fffffff)
/* The furthest element of the run's gradient stream a round may begin at
 * (2^62: centuries of steps at any rate). */
#define DED_POS_MAX ((uint64_t)1 << 62)

#endif /* DED_LIMITS_H */
