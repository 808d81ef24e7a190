/*
 * ded_msg.h: every message of the wire protocol (DED_PROTO_VERSION).
 *
 * One header for the whole protocol (WireGuard's messages.h): the layout
 * of each message, its encoder and its bounded decoder. Decoders check
 * syntax and the bounds of ded_limits.h; what a message means for a round
 * is checked by the engine. docs/wire-protocol.md is the prose version of
 * this file and must be kept in step with it.
 *
 * All integers are little endian; f64 is IEEE-754 binary64. Every frame is
 * "u32 len | u8 type | payload" (ded_frame.h); the layouts below are the
 * payloads. The first frame on a connection, in both directions, is HELLO.
 */
#ifndef DED_MSG_H
#define DED_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ded_assert.h"
#include "ded_frame.h"
#include "ded_limits.h"
#include "ded_mem.h"
#include "ded_types.h"
#include "ded_wire.h"

#define DED_PROTO_VERSION 15
#define DED_HELLO_MAGIC "DEDMPI"
#define DED_HELLO_MAGIC_LEN 6

enum ded_msg_type {
  DED_MSG_HELLO = 1,
  DED_MSG_RECORDS = 2,
  DED_MSG_JOIN = 3,
  DED_MSG_COMMIT = 4,
  DED_MSG_DECIDE = 5,
  DED_MSG_REDIRECT = 6,
  DED_MSG_DATA = 7,
  DED_MSG_RESULT = 8,
  DED_MSG_LEAVE = 9,
  DED_MSG_STALE = 10,
  DED_MSG_FETCH = 11,
  DED_MSG_PROBE = 12,
  DED_MSG_HAVE = 13,
  DED_MSG_STATE_ASK = 14,
  DED_MSG_STATE_OFFER = 15,
  DED_MSG_STATE_GET = 16,
  DED_MSG_STATE_DATA = 17,
  DED_MSG_AHEAD = 18,
  DED_MSG_SPEED = 19,
  DED_MSG_ABSTAIN = 20,
};

/* Name of |type| for logs. */
const char *ded_msg_name(uint8_t type);

/*
 * HELLO: magic[6] "DEDMPI" | u16 version | run_id[32] | u16 rec_len |
 * record[rec_len]. The sender's own signed record (ded_record.h).
 */
typedef struct ded_msg_hello {
  uint16_t version;
  uint8_t run_id[DED_RUN_ID_BYTES];
  const uint8_t *rec; /* points into the decoded payload */
  size_t rec_len;
} ded_msg_hello;

/* RECORDS: u16 n (<= DED_RECORDS_PER_FRAME_MAX) | n x (u16 len | record). */

/*
 * JOIN (member -> coordinator): u64 round | u32 view | u8 dtype |
 * u64 count | u64 pos | u64 step | f64 weight | u32 n_local |
 * u8 compress | u32 compress_ppm | u32 compute_us | u8 flags [| status].
 * status = u32 acc_view | COMMIT body | have bitmap.
 * |pos| is where the member's elements begin in the run's gradient stream
 * (the elements of every routed all-reduce in order since the run began)
 * and |count| how many it offers from there: the rest of its current
 * all-reduce. The round averages the shortest offer of the members at the
 * round's position (docs/architecture.md, "Alignment by the gradient
 * stream"); a member whose offer is longer averages its remainder in the
 * rounds that follow. |step| is the length of the member's training step
 * in elements of the stream, as far as it knows it (0: not known yet).
 * |weight| is the job's weight w_j (0 .. DED_WEIGHT_MAX), |n_local| its
 * rank count n_j, |view| the coordinator view the member addresses (0 for
 * the first try; every failover adds one). A JOIN to view v is also the
 * sender's promise to take no part in any view below v. A JOIN is also a
 * member's report in a failover: with DED_JOIN_F_STATUS it carries
 * |compress| is the member's DEDMPI_COMPRESS: the low bits a codec kind
 * (NONE to TOPK, avg/ded_codec.h), with top-k's fraction in
 * |compress_ppm| (millionths; 0 for the others), and DED_JOIN_COMPRESS_AUTO
 * set when the codec is auto's floor: the lossiest it may choose.
 * |compute_us| is how long the member's trainer computed over its last
 * training step (the time with none of its all-reduces in flight, over a
 * step's worth of elements; 0: not known yet), which `auto` weighs a
 * step's exchange against.
 * |acc_view|, the view in which the member accepted the attempt (sent HAVE
 * for it; DED_VIEW_NONE if it did not), the attempt the member was running,
 * as the COMMIT payload of that attempt (a COMMIT body, see below), then a
 * bitmap of ceil(k/8) bytes, bit s set when the member holds the finished
 * result of shard s in full (unused bits zero). DED_JOIN_F_DONE (with
 * status only): the member completed the round with this attempt, which is
 * therefore the round's result. DED_JOIN_F_INTENT announces a member that
 * will join this round, or the first one after it still undecided (it is
 * catching up, fetching an earlier round's result): whoever coordinates
 * such a round waits for it for a while. DED_JOIN_F_CLIENT: the member accepts no
 * connections (DEDMPI_MODE=client); DED_JOIN_F_AUX: it reduces but brings
 * no vector (DEDMPI_MODE=aux). At most one of the two.
 * DED_JOIN_F_VOID: the member vouches that every round from |void_round|+1
 * to |round|-1 ended here without a result and that it voted for none of
 * their attempts (nor ever will); |void_round| ended here with the swarm's
 * result, attempt |void_attempt| (nonzero). Two u64 fields right after
 * the flags carry them (DED_JOIN_VOID_BYTES more), |void_round| + 1 <
 * |round|. A coordinator that hears it from a quorum of that attempt's
 * members takes them as the round's acceptors (docs/architecture.md, "A
 * round with no result anywhere").
 * DED_JOIN_F_HELD: the member is out of step and cannot vouch so (it
 * voted in one of those rounds, or holds no result at all): every round
 * before |round| has ended here, the round before without the swarm's
 * result, and the newest result this peer holds is round |held_round|-1's,
 * attempt |held_attempt| (0: not known); |held_round| 0: none (none too
 * while its state is not the run's, waiting to reload). The same two u64
 * slots as VOID's carry them (never both flags), |held_round| <= |round|
 * - 1. A coordinator that does not know the round's acceptors and hears
 * VOID or HELD from every peer it can talk to that takes part in rounds
 * (every other one not gone for good holding nothing) rolls the run back
 * to the newest of those results (docs/architecture.md, "Rollback").
 */
enum {
  DED_JOIN_F_GENESIS = 1,
  DED_JOIN_F_STATUS = 2,
  DED_JOIN_F_INTENT = 4,
  DED_JOIN_F_DONE = 8,
  DED_JOIN_F_CLIENT = 16,
  DED_JOIN_F_AUX = 32,
  DED_JOIN_F_VOID = 64,
  DED_JOIN_F_HELD = 128,
};
#define DED_JOIN_VOID_BYTES 16
#define DED_JOIN_COMPRESS_AUTO 0x80
#define DED_VIEW_NONE UINT32_MAX

typedef struct ded_msg_commit ded_msg_commit;

/* Member flags: an acceptor of the round (a member of the previous round's
 * attempt, whose HAVE counts towards completing it), the acceptor that
 * breaks a tie (see COMMIT), a client (reachable by no one: it never
 * coordinates, and no one but the reducers talks to it) and an aux member
 * (its vector is not part of the sum: weight 0, it sends none). */
enum {
  DED_MEMBER_F_ACCEPTOR = 1,
  DED_MEMBER_F_PRIMARY = 2,
  DED_MEMBER_F_CLIENT = 4,
  DED_MEMBER_F_AUX = 8,
  /* The attempt takes the acceptors of an older result over rounds that
   * had none anywhere (DED_JOIN_F_VOID); the members' states differ, and
   * this member's goes on: every other member reloads it once the round
   * is done. At most one, never an aux member. */
  DED_MEMBER_F_FOUNDER = 16,
};

typedef struct ded_msg_member {
  uint8_t id[DED_ID_BYTES];
  double weight;
  uint32_t n_local;
  uint64_t shard_off;
  uint8_t flags;
} ded_msg_member;

/*
 * COMMIT (coordinator -> everyone who asked to join the round):
 * u64 round | u64 attempt | u64 base | u8 dtype | u64 count | u64 pos |
 * u64 step | u32 chunk_elems | u8 codec | u32 codec_ppm | u16 k | u16 nacc |
 * k x (id[32] | f64 weight | u32 n_local | u64 shard_off | u8 flags).
 * |codec| is how the members' contributions travel (a kind of
 * avg/ded_codec.h, NONE to TOPK, with top-k's fraction in |codec_ppm|,
 * millionths, 0 for the others; anything but NONE only for float32
 * elements), and the result in the codec ded_codec_result names.
 * The members without DED_MEMBER_F_AUX are the round's contributors: at
 * least one, with a positive total weight; an aux member has weight 0.
 * One attempt at the round: |attempt| = view << 32 | the first four bytes
 * of the coordinator's id (big endian), unique per coordinator and view.
 * |base| is the attempt of round - 1 the coordinator's lineage comes from
 * (0: none); a member whose own round - 1 ended with another attempt must
 * not complete this one. Members appear in increasing id order, which is
 * also the fixed order of summation; member i reduces elements
 * [shard_off_i, shard_off_{i+1}), the last one up to |count|, and every
 * shard travels in chunks of |chunk_elems| elements
 * (DED_CHUNK_BYTES_MIN..DED_CHUNK_BYTES_MAX bytes). The round averages
 * elements [pos, pos + count) of the run's gradient stream: |count| is
 * the shortest offer among the members, and the same in every attempt of
 * the round. |step| is the training step's length the members that know
 * it share (0: none knows it): a joiner that knows another runs another
 * model and is not listed. A peer that joined but is not listed was left out because
 * its buffer differs from the round's (dtype/pos/count tell it what the
 * round's is).
 * |nacc| is the number of the round's acceptors (the previous round's
 * members still counted, listed or not); members that are acceptors carry
 * DED_MEMBER_F_ACCEPTOR, at least one of them. A member completes the
 * attempt only once acceptors of it have sent HAVE for it in one view:
 * more than nacc/2, or exactly nacc/2 including the one flagged
 * DED_MEMBER_F_PRIMARY (at most one, an acceptor). A coordinator of a later
 * view starts a new attempt only with JOINs from such a quorum, so two
 * attempts of a round can never both complete.
 */
#define DED_COMMIT_MEMBER_BYTES (DED_ID_BYTES + 8 + 4 + 8 + 1)
#define DED_COMMIT_BODY_BYTES(k)                                                          \
  (8 + 8 + 8 + 1 + 8 + 8 + 8 + 4 + 1 + 4 + 2 + 2 + (size_t)(k)*DED_COMMIT_MEMBER_BYTES)

struct ded_msg_commit {
  uint64_t round;
  uint64_t attempt;
  uint64_t base;
  uint8_t dtype;
  uint64_t count;
  uint64_t pos;  /* the round's first element in the run's gradient stream */
  uint64_t step; /* the members' training step, in elements (0: not known) */
  uint32_t chunk_elems;
  uint8_t codec;      /* ded_codec_kind of the contributions */
  uint32_t codec_ppm; /* top-k's fraction, millionths */
  uint16_t k;
  uint16_t nacc;
  ded_msg_member *members; /* owned; ded_msg_commit_free */
};

typedef struct ded_msg_join {
  uint64_t round;
  uint32_t view;
  uint8_t dtype;
  uint64_t count; /* offered: the elements the joiner holds from |pos| on */
  uint64_t pos;   /* where they begin in the run's gradient stream */
  uint64_t step;  /* its training step, in elements (0: not known) */
  double weight;
  uint32_t n_local;
  uint8_t compress; /* a codec kind, | DED_JOIN_COMPRESS_AUTO */
  uint32_t compress_ppm;
  uint32_t compute_us;
  uint8_t flags;
  /* With DED_JOIN_F_VOID: */
  uint64_t void_round;
  uint64_t void_attempt;
  /* With DED_JOIN_F_HELD (in VOID's slots): the newest result held, as its
   * round + 1 (0: none) and attempt (0: not known). */
  uint64_t held_round;
  uint64_t held_attempt;
  /* With DED_JOIN_F_STATUS: */
  uint32_t acc_view;
  ded_msg_commit plan; /* owned; ded_msg_join_free */
  const uint8_t *have; /* plan.k bits, points into the decoded payload */
} ded_msg_join;

/*
 * DECIDE (coordinator -> members, after a failover or to a late member):
 * u64 round | u32 view | u8 flags | COMMIT body of the attempt that stands |
 * k x u16 holder. The attempt's result exists in full among the members:
 * shard s can be fetched (FETCH) from member holder_s of that attempt.
 * Members not listed in the attempt (late ones) fetch every shard and do
 * not contribute. DED_DECIDE_F_CHOSEN: someone completed the round with
 * this attempt; it needs no HAVE quorum any more.
 */
enum { DED_DECIDE_F_CHOSEN = 1 };

typedef struct ded_msg_decide {
  uint64_t round;
  uint32_t view;
  uint8_t flags;
  ded_msg_commit plan; /* owned */
  uint16_t *holders;   /* plan.k entries, each < plan.k; owned */
} ded_msg_decide;

/* FETCH (member -> holder): u64 round | u64 attempt | u16 shard. Answered
 * with the RESULT frames of that shard once the holder has them. */
typedef struct ded_msg_fetch {
  uint64_t round;
  uint64_t attempt;
  uint16_t shard;
} ded_msg_fetch;

/* HAVE (member -> the attempt's members): u64 round | u64 attempt |
 * u32 view | u8 flags | 32 bytes digest. The sender holds the attempt's
 * whole result, whose bytes hash to |digest| (avg/ded_digest.h: BLAKE2b-256
 * over the BLAKE2b-256 of each 64 KiB block of the result vector, every
 * shard, as the element type's bytes), and accepts it in
 * |view| (the view whose COMMIT or DECIDE it follows); it sends none for a
 * view below one it has joined. A quorum counts only HAVEs of one view
 * that carry one digest. DED_HAVE_F_DONE: the sender completed the round
 * with this attempt and those bytes (an answer to a HAVE, or to a late
 * member). */
enum { DED_HAVE_F_DONE = 1 };

#define DED_RESULT_DIGEST_BYTES 32

typedef struct ded_msg_have {
  uint64_t round;
  uint64_t attempt;
  uint32_t view;
  uint8_t flags;
  uint8_t digest[DED_RESULT_DIGEST_BYTES];
} ded_msg_have;

/* PROBE (coordinator of a new view -> members): u64 round | u32 view.
 * "Stop the attempt you are running and report to me (JOIN with status)." */
typedef struct ded_msg_probe {
  uint64_t round;
  uint32_t view;
} ded_msg_probe;

/* ABSTAIN (a member whose trainer has not come to |round| while peers
 * wait for it -> every peer): u64 round, at least 1. "I take no part in
 * any view of |round|, and never vote in it: do not count me among its
 * acceptors, nor wait for me until I join a later round." */
typedef struct ded_msg_abstain {
  uint64_t round;
} ded_msg_abstain;

/* REDIRECT (would-be coordinator -> member): u64 round | u32 view | id[32].
 * Genesis: join |id| instead (smaller than the sender's). Later rounds:
 * the round has moved on to |view|, coordinated by |id|. */
typedef struct ded_msg_redirect {
  uint64_t round;
  uint32_t view;
  uint8_t id[DED_ID_BYTES];
} ded_msg_redirect;

/*
 * DATA (member -> reducer) and RESULT (reducer or holder -> member):
 * u64 round | u64 attempt | u64 offset | u8 codec | elements. |offset|
 * counts elements from the start of the vector; a frame carries one
 * chunk of a shard (the COMMIT's layout says how many elements). |codec|
 * says how the elements are encoded (avg/ded_codec.h): the round's codec
 * (DATA) or its result codec (RESULT), or NONE, the element type's own
 * bytes (a range that codec refused, or a holder serving a result again).
 * A RESULT carries the weighted mean g itself, not n_j * g.
 */
#define DED_DATA_HDR_BYTES (DED_FRAME_HDR_BYTES + 25)

typedef struct ded_msg_data {
  uint64_t round;
  uint64_t attempt;
  uint64_t offset;
  const uint8_t *elems; /* points into the decoded payload */
  size_t len;           /* bytes */
  uint8_t codec;
} ded_msg_data;

/*
 * SPEED (link probe): u32 want | fill. A peer that joins sends filler to
 * the first peer it reaches and asks, in |want| (at most
 * DED_SPEED_WANT_MAX), for as many bytes back: both ends' rate meters see
 * a burst, so its links are measured before its first round. Every frame
 * after the first of a burst has want 0; the fill is zeros, and its
 * values mean nothing.
 */
#define DED_SPEED_HDR_BYTES (DED_FRAME_HDR_BYTES + 4)

typedef struct ded_msg_speed {
  uint32_t want;
  const uint8_t *fill; /* points into the decoded payload */
  size_t len;
} ded_msg_speed;

/* LEAVE: u8 reason. The sender is going away for good. FINALIZE and
 * SHUTDOWN are a job's ordinary end; the others (version 11) say that
 * its job could not take part, so that the peers left behind can log who
 * and why rather than a bare goodbye. */
enum {
  DED_LEAVE_FINALIZE = 1,       /* MPI_Finalize */
  DED_LEAVE_SHUTDOWN = 2,       /* a shutdown (accepted; no process of this version sends it) */
  DED_LEAVE_MISMATCH_STEP = 3,  /* its training step (length or element type) differs */
  DED_LEAVE_MISMATCH_STATE = 4, /* its state's pieces differ from the run's */
  DED_LEAVE_ERROR = 5,          /* another error kept it out (the run's state would not load) */
  DED_LEAVE_REASON_MAX = DED_LEAVE_ERROR
};

/* Why a peer that sent LEAVE with |reason| left, for logs ("its training
 * step differs from the swarm's ..."); NULL for the ordinary ends and
 * for values no decoder accepts. */
const char *ded_leave_why(uint8_t reason);

/* STALE (coordinator -> late member): u64 round | u64 next_round.
 * |round| was committed without the member; the swarm is at |next_round|.
 * AHEAD has the same body: the answer to a member that announced it will
 * join |round| (JOIN with DED_JOIN_F_INTENT) when the sender has already
 * finished that round; the swarm is at |next_round|. */
typedef struct ded_msg_stale {
  uint64_t round;
  uint64_t next_round;
} ded_msg_stale;

/*
 * A lineage (a round's membership, as the next round's coordinators are
 * drawn from it): n ids in increasing order, then DED_LIN_BITS(n) bytes
 * whose bit i is set when member i is a client. The coordinator of view v
 * of round r is eligible member (r + v) mod e of the e members that are
 * not clients (every member, if all are): a client is reachable by no one.
 */
#define DED_LIN_BITS(n) (((size_t)(n) + 7) / 8)
#define DED_LIN_BYTES(n) ((size_t)(n)*DED_ID_BYTES + DED_LIN_BITS(n))

static inline bool ded_lin_client(const uint8_t *lin, unsigned n, unsigned i) {
  return lin[(size_t)n * DED_ID_BYTES + i / 8] >> (i % 8) & 1;
}

static inline const uint8_t *ded_lin_coord(const uint8_t *lin, unsigned n, uint64_t round,
                                           uint32_t view) {
  unsigned e = 0;
  for (unsigned i = 0; i < n; i++) e += !ded_lin_client(lin, n, i);
  uint64_t want = (round + view) % (e ? e : n);
  for (unsigned i = 0; i < n; i++)
    if ((!e || !ded_lin_client(lin, n, i)) && want-- == 0) return lin + (size_t)i * DED_ID_BYTES;
  DED_ASSERT(0);
  return lin;
}

/* Sizes of whole frames (header included). */
/*
 * State transfer: how a job that joins a run in progress gets the
 * trainer's state (docs/architecture.md, "Joining a run in progress").
 *
 * STATE_ASK (joiner -> peer): u64 min_round | origin[32]. With an origin of
 * zeros: "offer me a snapshot of your state as of a round >= min_round".
 * Otherwise (min_round 0): "offer me the founding state of |origin|", the
 * state that peer brought to the run's first round (docs/architecture.md,
 * "One initial model").
 *
 * STATE_OFFER (peer -> joiner): u8 status | u64 round | u64 pos | u64 digest |
 * u32 step_rounds | u64 len | u64 lin_attempt | u16 nlin | nlin x id |
 * ceil(nlin/8) client bits.
 * One layout for every status:
 *   OFFER   a snapshot: the trainer's state after every round below
 *           |round| (a step boundary), |len| bytes (opaque here: the
 *           shim's state image, its pieces listed inside, under the
 *           digest), with ded_digest64 |digest|; |round| begins at element
 *           |pos| of the run's gradient stream; |step_rounds| rounds
 *           make one step; round-1 ended with attempt |lin_attempt| and
 *           members |lin| (the lineage the joiner's first round needs;
 *           bit i set: member i is a client, which never coordinates).
 *           A backbone's checkpoint (the state of a run whose trainers
 *           all left) has no lineage: nlin 0 and lin_attempt 0; a joiner
 *           that takes it starts the rounds anew at |round|, as a first
 *           round of its own.
 *   FRESH   the sender has not started a round: no run in progress.
 *   PENDING the sender is in a run (its next round is |round|) and will
 *           OFFER once its trainer reaches a step boundary.
 *   NONE    the sender has no state to give (a backbone, or leaving).
 *   GONE    the answer to a STATE_GET for a snapshot the sender no longer
 *           holds (|round| and |digest| name it).
 *   FOUNDING the founding state asked for: |round| 0 (the state before
 *           the run's first round, round 0), |len| bytes with
 *           |digest|, |lin| the one origin (nlin 1, no client bit);
 *           pos, step_rounds and lin_attempt 0.
 * Fields a status does not use are zero (PENDING and GONE use |round|,
 * GONE also |digest|). An OFFER's lineage ids are strictly increasing and
 * its lin_attempt is 0 exactly when it has none (a checkpoint). To a founding ask the answer is FOUNDING,
 * PENDING with round 0 (the sender is fetching that origin's state
 * itself), or NONE.
 *
 * STATE_GET (joiner -> peer): u64 round | u64 digest | u64 offset | u32 len.
 * STATE_DATA (peer -> joiner): u64 round | u64 digest | u64 offset | bytes:
 * exactly the range asked for, from the snapshot named.
 */
enum {
  DED_STATE_OFFER = 0,
  DED_STATE_FRESH = 1,
  DED_STATE_PENDING = 2,
  DED_STATE_NONE = 3,
  DED_STATE_GONE = 4,
  DED_STATE_FOUNDING = 5,
};

typedef struct ded_msg_state_ask {
  uint64_t min_round;
  uint8_t origin[DED_ID_BYTES]; /* zeros: any snapshot */
} ded_msg_state_ask;

typedef struct ded_msg_state_offer {
  uint8_t status;
  uint64_t round;
  uint64_t pos; /* where |round| begins in the gradient stream */
  uint64_t digest;
  uint32_t step_rounds;
  uint64_t len;
  uint64_t lin_attempt;
  uint16_t nlin;
  /* nlin x DED_ID_BYTES then DED_LIN_BITS(nlin) client bits (a
   * lineage's layout, above), pointing into the decoded payload. */
  const uint8_t *lin;
} ded_msg_state_offer;

typedef struct ded_msg_state_get {
  uint64_t round;
  uint64_t digest;
  uint64_t offset;
  uint32_t len;
} ded_msg_state_get;

typedef struct ded_msg_state_data {
  uint64_t round;
  uint64_t digest;
  uint64_t offset;
  const uint8_t *bytes; /* points into the decoded payload */
  size_t len;
} ded_msg_state_data;

#define DED_STATE_ASK_FRAME_BYTES (DED_FRAME_HDR_BYTES + 8 + DED_ID_BYTES)
#define DED_STATE_OFFER_FRAME_BYTES(nlin)                                                \
  (DED_FRAME_HDR_BYTES + 1 + 8 + 8 + 8 + 4 + 8 + 8 + 2 + DED_LIN_BYTES(nlin))
#define DED_STATE_GET_FRAME_BYTES (DED_FRAME_HDR_BYTES + 8 + 8 + 8 + 4)
#define DED_STATE_DATA_HDR_BYTES (DED_FRAME_HDR_BYTES + 24)

#define DED_JOIN_FRAME_BYTES (DED_FRAME_HDR_BYTES + 8 + 4 + 1 + 8 + 8 + 8 + 8 + 4 + 1 + 4 + 4 + 1)
#define DED_JOIN_STATUS_FRAME_BYTES(k)                                                   \
  (DED_JOIN_FRAME_BYTES + 4 + DED_COMMIT_BODY_BYTES(k) + ((size_t)(k) + 7) / 8)
#define DED_DECIDE_FRAME_BYTES(k)                                                        \
  (DED_FRAME_HDR_BYTES + 8 + 4 + 1 + DED_COMMIT_BODY_BYTES(k) + 2 * (size_t)(k))
#define DED_HAVE_FRAME_BYTES (DED_FRAME_HDR_BYTES + 8 + 8 + 4 + 1 + DED_RESULT_DIGEST_BYTES)
#define DED_FETCH_FRAME_BYTES (DED_FRAME_HDR_BYTES + 8 + 8 + 2)
#define DED_PROBE_FRAME_BYTES (DED_FRAME_HDR_BYTES + 8 + 4)
#define DED_ABSTAIN_FRAME_BYTES (DED_FRAME_HDR_BYTES + 8)
#define DED_REDIRECT_FRAME_BYTES (DED_FRAME_HDR_BYTES + 8 + 4 + DED_ID_BYTES)
#define DED_LEAVE_FRAME_BYTES (DED_FRAME_HDR_BYTES + 1)
#define DED_STALE_FRAME_BYTES (DED_FRAME_HDR_BYTES + 8 + 8) /* and AHEAD's */
#define DED_HELLO_FRAME_BYTES(rec_len)                                                   \
  (DED_FRAME_HDR_BYTES + DED_HELLO_MAGIC_LEN + 2 + DED_RUN_ID_BYTES + 2 + (rec_len))
#define DED_COMMIT_FRAME_BYTES(k) (DED_FRAME_HDR_BYTES + DED_COMMIT_BODY_BYTES(k))

/*
 * Encoders write a whole frame (header included) into |w| and leave
 * |w->err| set if it did not fit.
 */
void ded_msg_hello_encode(ded_wr *w, const uint8_t run_id[DED_RUN_ID_BYTES], const uint8_t *rec,
                          size_t rec_len);
void ded_msg_join_encode(ded_wr *w, const ded_msg_join *m);
void ded_msg_commit_encode(ded_wr *w, const ded_msg_commit *m);
/* |have|: plan.k bits, or NULL without status. */
void ded_msg_join_status_encode(ded_wr *w, const ded_msg_join *m, const ded_msg_commit *plan,
                                const uint8_t *have);
void ded_msg_decide_encode(ded_wr *w, uint32_t view, uint8_t flags, const ded_msg_commit *plan,
                           const uint16_t *holders);
void ded_msg_have_encode(ded_wr *w, const ded_msg_have *m);
void ded_msg_fetch_encode(ded_wr *w, const ded_msg_fetch *m);
void ded_msg_probe_encode(ded_wr *w, const ded_msg_probe *m);
void ded_msg_abstain_encode(ded_wr *w, const ded_msg_abstain *m);
void ded_msg_redirect_encode(ded_wr *w, const ded_msg_redirect *m);
void ded_msg_leave_encode(ded_wr *w, uint8_t reason);
void ded_msg_stale_encode(ded_wr *w, const ded_msg_stale *m);
void ded_msg_ahead_encode(ded_wr *w, const ded_msg_stale *m);
/* DATA/RESULT header only: the elements follow separately (zero copy). */
void ded_msg_state_ask_encode(ded_wr *w, const ded_msg_state_ask *m);
void ded_msg_state_offer_encode(ded_wr *w, const ded_msg_state_offer *m);
void ded_msg_state_get_encode(ded_wr *w, const ded_msg_state_get *m);
/* Writes STATE_DATA's header for |len| bytes that follow it. */
void ded_msg_state_data_hdr_encode(uint8_t hdr[DED_STATE_DATA_HDR_BYTES], uint64_t round,
                                   uint64_t digest, uint64_t offset, size_t len);
void ded_msg_data_hdr_encode(uint8_t hdr[DED_DATA_HDR_BYTES], uint8_t type, uint64_t round,
                             uint64_t attempt, uint64_t offset, uint8_t codec, size_t elem_bytes);
/* SPEED's header for |fill| bytes that follow it. */
void ded_msg_speed_hdr_encode(uint8_t hdr[DED_SPEED_HDR_BYTES], uint32_t want, size_t fill);

/*
 * RECORDS frames are built incrementally: begin, add records while
 * ded_msg_records_add returns 0, then end. |w| must have room for at
 * least the header.
 */
typedef struct ded_msg_records_wr {
  ded_wr *w;
  size_t start;
  uint16_t n;
} ded_msg_records_wr;

void ded_msg_records_begin(ded_msg_records_wr *rw, ded_wr *w);
/* 0, or -1 when the record does not fit (frame full): nothing written. */
int ded_msg_records_add(ded_msg_records_wr *rw, const uint8_t *rec, size_t len);
void ded_msg_records_end(ded_msg_records_wr *rw);

/*
 * Decoders take a frame's payload. They return 0 or DED_ERR_PROTO (or
 * DED_ERR_VERSION for a HELLO of another version, DED_ERR_NOMEM).
 */
int ded_msg_hello_decode(const uint8_t *p, size_t len, ded_msg_hello *m);
/* A JOIN with status owns its plan: release with ded_msg_join_free. */
int ded_msg_join_decode(const uint8_t *p, size_t len, const ded_mem *mem, ded_msg_join *m);
void ded_msg_join_free(ded_msg_join *m, const ded_mem *mem);
int ded_msg_commit_decode(const uint8_t *p, size_t len, const ded_mem *mem, ded_msg_commit *m);
void ded_msg_commit_free(ded_msg_commit *m, const ded_mem *mem);
/* Deep copy; DED_ERR_NOMEM. */
int ded_msg_commit_copy(ded_msg_commit *dst, const ded_msg_commit *src, const ded_mem *mem);
int ded_msg_decide_decode(const uint8_t *p, size_t len, const ded_mem *mem, ded_msg_decide *m);
void ded_msg_decide_free(ded_msg_decide *m, const ded_mem *mem);
int ded_msg_fetch_decode(const uint8_t *p, size_t len, ded_msg_fetch *m);
int ded_msg_have_decode(const uint8_t *p, size_t len, ded_msg_have *m);
int ded_msg_probe_decode(const uint8_t *p, size_t len, ded_msg_probe *m);
int ded_msg_abstain_decode(const uint8_t *p, size_t len, ded_msg_abstain *m);
int ded_msg_redirect_decode(const uint8_t *p, size_t len, ded_msg_redirect *m);
int ded_msg_data_decode(const uint8_t *p, size_t len, ded_msg_data *m);
int ded_msg_speed_decode(const uint8_t *p, size_t len, ded_msg_speed *m);
int ded_msg_leave_decode(const uint8_t *p, size_t len, uint8_t *reason);
int ded_msg_stale_decode(const uint8_t *p, size_t len, ded_msg_stale *m);
int ded_msg_ahead_decode(const uint8_t *p, size_t len, ded_msg_stale *m);
int ded_msg_state_ask_decode(const uint8_t *p, size_t len, ded_msg_state_ask *m);
int ded_msg_state_offer_decode(const uint8_t *p, size_t len, ded_msg_state_offer *m);
int ded_msg_state_get_decode(const uint8_t *p, size_t len, ded_msg_state_get *m);
int ded_msg_state_data_decode(const uint8_t *p, size_t len, ded_msg_state_data *m);

/*
 * Iterates over the records of a RECORDS payload: call _begin, then _next
 * until it returns 0 (end) or a negative error. Each record is handed out
 * as bytes for ded_record_decode.
 */
typedef struct ded_msg_records_rd {
  ded_rd r;
  uint16_t left;
} ded_msg_records_rd;

int ded_msg_records_begin_rd(ded_msg_records_rd *it, const uint8_t *p, size_t len);
int ded_msg_records_next(ded_msg_records_rd *it, const uint8_t **rec, size_t *len);

#endif /* DED_MSG_H */
