/*
 * ded_round.h: the member side of a round, as a state machine.
 *
 * Owns: this job's rounds in flight (struct ded_round, one per submitted
 * all-reduce, in struct ded_rounds), from submission to the report: who
 * coordinates it (view v of the lineage, or the genesis rendezvous), its
 * JOIN or failover report, the attempt it holds (ded_attempt.h), the HAVE
 * votes it heard, and the report itself; and this job's own catching up
 * (its announcements of the next round it will join, where the swarm said
 * it is, and the round a STALE said the swarm is at).
 *
 * The states (docs/architecture.md draws them with every transition):
 *
 *   WAIT_PREV  the previous round's lineage (its COMMIT), or the
 *              rendezvous of the swarm's first round, is not here yet
 *   JOINING    the coordinator is chosen; its connection is not ready
 *   JOINED     our JOIN (or failover report) is sent; a decision is awaited
 *   RUNNING    an attempt we are a member of: reduce-scatter, all-gather
 *   FETCHING   an attempt that stands (DECIDE), or one we are not in: its
 *              shards are fetched from their holders; or our whole result
 *              is not the round's bytes: they are fetched again from a
 *              member that holds them
 *   DONE_WAIT  the whole result, chosen; earlier rounds report first
 *   DRAINING   reported; frames into its memory are still queued
 *   DEAD       reaped at the end of the entry point
 *
 * The events, one function each, each a switch on the state: advance (a
 * lineage, a connection or a peer may be there now), commit, decide,
 * data, have, peer down, probe, stale, redirect, deadline (the soft wait
 * ran out) and bound (the hard bound, or the rendezvous's). Completion
 * (the whole result, then a quorum of HAVEs for it with its digest) is a
 * transition every event may lead to, never an event of its own.
 *
 * Beside the state, a round holds an attempt or not (|att_state|): NONE,
 * LIVE (ours to run, in RUNNING or FETCHING), or FROZEN (we reported to a
 * newer view: it sends and adds nothing more, and completes only if a
 * coordinator says it stands, or someone completed it).
 *
 * The module's code is in five files (sharing ded_round_int.h):
 * ded_round.c, the state machine; ded_join.c, joining (the membership a
 * round goes by, its view and coordinator, the JOIN) and failing over;
 * ded_submit.c, the all-reduces submitted and the rounds cut from them
 * (ded_stream.h); ded_complete.c,
 * completion and the report; ded_late.c, late members both ways (serving
 * them from rounds we finished, and announcing ourselves when we are one).
 *
 * Invariants: the caller's buffer is untouched until the report, which
 * happens exactly once, in round order, with the state going to DRAINING;
 * a round completes only an attempt that a quorum of its acceptors voted
 * for in one view with one digest (or, for a member that cannot count a
 * quorum itself, that someone said it completed, with which digest),
 * planned on the attempt the previous round ended with here, and only
 * with bytes that hash to that digest; only a round that completed is
 * served to others afterwards; a round is freed only once no queued frame
 * refers to its memory (refs_user, refs_res).
 */
#ifndef DED_ROUND_H
#define DED_ROUND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../avg/ded_attempt.h"
#include "../core/ded_limits.h"
#include "../core/ded_msg.h"
#include "../ded_node.h"
#include "../match/ded_quorum.h"
#include "ded_stream.h"

struct ded_peer;
struct ded_conn;

typedef enum round_state {
  ROUND_WAIT_PREV,
  ROUND_JOINING,
  ROUND_JOINED,
  ROUND_RUNNING,
  ROUND_FETCHING,
  ROUND_DONE_WAIT,
  ROUND_DRAINING,
  ROUND_DEAD,
} round_state;

/* The attempt a round holds. */
typedef enum round_att {
  ROUND_ATT_NONE,
  ROUND_ATT_LIVE,
  ROUND_ATT_FROZEN,
} round_att;

/* A data frame that overtook the COMMIT of its attempt. */
typedef struct early_frame {
  struct early_frame *next;
  uint8_t type;
  uint8_t from[DED_ID_BYTES];
  size_t len;
  uint8_t payload[];
} early_frame;

typedef struct ded_round {
  uint64_t no;
  round_state state;
  bool genesis; /* coordinated by the smallest id in sight, not by the lineage */
  ded_round_args a; /* the rest of its call from |off| on; once |fixed|, the round's elements */
  size_t es;         /* element size */
  uint64_t pos;      /* its first element's position in the run's gradient stream */
  uint64_t off;      /* where it begins in its call's buffer */
  uint64_t call;     /* its call's number (ded_stream.h) */
  bool fixed;        /* a.count is the round's length (its first attempt, or its report) */
  /* Who coordinates: view |view| of the lineage |lin| (round no-1's
   * members, as this peer knows them), or the genesis coordinator. */
  uint32_t view;
  uint8_t coord[DED_ID_BYTES];
  uint8_t (*lin)[DED_ID_BYTES];
  unsigned nlin;
  uint64_t lin_attempt; /* the attempt of round no-1 |lin| comes from */
  uint64_t bound_ns;    /* the call returns by then, whatever happens */
  uint64_t wait_ns;     /* the current soft deadline: a decision, or progress */
  uint64_t est_ns;      /* what the attempt should take (ded_plan_estimate_ns) */
  uint64_t submit_ns, joined_ns, started_ns;
  uint64_t got_ns; /* the whole result here */
  /* The attempt, and the result (every shard; the attempt marks the
   * chunks of it held in att.res_bits). */
  round_att att_state;
  ded_attempt att;
  uint8_t *res;
  /* The result's digest (BLAKE2b-256 of |res|, every shard), once whole;
   * when our bytes are not the round's (ded_complete.c): the members
   * asked for the round's bytes in this attempt (bit m; NULL: none yet),
   * and whether that failed over once already for want of a member to
   * ask. */
  bool digested;
  uint8_t digest[DED_RESULT_DIGEST_BYTES];
  uint8_t *asked;
  bool mend_failed;
  /* Data that arrived before the commit of its attempt. */
  early_frame *early_head, *early_tail;
  size_t early_bytes;
  /* Queued frames pointing into our memory. */
  unsigned refs_user, refs_res;
  /* Completion (the COMMIT comment in ded_msg.h): the view in which we
   * took the current attempt, whether we sent HAVE for it, the HAVEs heard
   * (any attempt, any view), and an attempt known to be the round's result. */
  uint32_t acc_view;
  bool accepted;
  uint64_t chosen;
  /* The bytes |chosen| completed with, as someone who completed it said
   * (HAVE with the done flag; a DECIDE's flag says only which attempt). */
  bool chosen_digested;
  uint8_t chosen_digest[DED_RESULT_DIGEST_BYTES];
  uint8_t chosen_by[DED_ID_BYTES];
  ded_votes votes;
  uint32_t recoveries; /* failovers so far */
  uint64_t behind;     /* a STALE said the swarm is at this round */
  bool with_result;    /* reported with the round's result: it goes to the history */
  /* Compression (ded_compress.c): our contribution as float32 with the
   * job's residual added (NULL until an attempt with a codec needs it),
   * and the encoded bytes the attempt's frames point into, freed with the
   * attempt (after its frames are detached) or the round. */
  float *cin;
  uint64_t fb_resets; /* the residual's resets when cin's began (ded_feedback.resets) */
  struct ded_wire_blob *wire;
} ded_round;

/* This job's rounds, and where it stands in the swarm. */
typedef struct ded_rounds {
  ded_round *v[DED_ROUNDS_ACTIVE_MAX]; /* in round order */
  unsigned n;
  uint64_t next; /* the number the next round gets */
  ded_stream stream; /* the submitted all-reduces, cut into rounds */
  /* Catching up, late: the round we last announced we will join, when,
   * and where the swarm said it was when that round had passed there;
   * when we first announced it, and the announcement itself (sent again
   * while our trainer computes that round, ded_rounds_announce_again). */
  uint64_t intent_round, intent_ns, catch_up;
  uint64_t intent_first_ns;
  uint8_t intent_frame[DED_JOIN_FRAME_BYTES];
  bool intent_sent;
  /* The newest round that completed here late (its result fetched from
   * the members that made it), plus one, or the round a loaded state
   * resumes at; 0: none. Such a round extends our previous one in their
   * lineage, and a loaded state comes with the run's: we are catching up
   * in our group. */
  uint64_t late_done;
  /* Out of step: a STALE said the swarm is at this round (or a group we
   * yield to is past it). Our rounds below it are over before they
   * start, until a state loads (it lowers this to the state's round). */
  uint64_t stale;
  /* A round that took an older result's acceptors reported here with
   * another member as its founder: this job's state is not the run's
   * until it reloads, so it offers none. */
  bool diverged;
  uint8_t founder[DED_ID_BYTES]; /* ... whose state is the run's: a reload asks it first */
  /* A round of ours reported out of step (alone and late, with |behind|:
   * it kept our own values, and the swarm went on without them; not at
   * the bound, ded_complete.c) since our state was last loaded: it is
   * not the run's until a reload, even once our rounds are back at the swarm's (a
   * joiner that learnt its step only after its out-of-step rounds ran
   * on in step, and was refused the reload: churn soak 3052993591). Every
   * report says |diverged| then, a reload may be of the next round
   * itself, and no snapshot is offered. Unlike |diverged| it leaves the
   * JOIN's HELD claim alone (ded_round_held): a founder is chosen by the
   * newest result each member holds. After DED_NODE_ASTRAY_TRIES reloads
   * in a row that heard no peer in step (|astray_fails|, from 0 as it
   * went astray, at |astray_ns|), once a bound has passed since, no peer
   * is taken to hold the run's state: ours goes on as the run's. */
  bool astray;
  unsigned astray_fails;
  uint64_t astray_ns;
  /* Our group yields to another group of the run (ded_rounds_check_groups):
   * every round of ours ends out of step at once, |diverged| is set with
   * |founder| the peer of the other group, until a reload ends (loaded,
   * or failed: the groups are compared again). */
  bool yielding;
  bool reporting; /* reports are being made: nothing may report meanwhile */
  uint64_t last_report_ns; /* when a round last reported to the caller (0: never) */
  /* The trainer's compute (time with nothing of ours in flight) over the
   * elements submitted since the last step's worth, and over the last
   * whole step, in µs (0: not known yet): what `auto` weighs a step's
   * exchange against (ded_compress.c). */
  uint64_t compute_acc_ns, compute_elems, compute_step_us;
} ded_rounds;

/* Queues the all-reduce |args|, validated by the caller, on the stream
 * and cuts its first round if it can; returns the number of the round it
 * begins in unless a round before it is cut short, or DED_ERR_LIMIT,
 * DED_ERR_NOMEM. */
int64_t ded_round_submit(ded_node *node, const ded_round_args *args, uint64_t now_ns);

/* Cuts the stream's next rounds while no round is open and there is room:
 * each begins where the last one whose length is fixed ends. At the end
 * of an entry point only (a round it cuts may report at once). */
void ded_rounds_pump(ded_node *node, uint64_t now_ns);

/* Whether ded_rounds_pump would cut a round now. */
bool ded_rounds_can_cut(const ded_node *node);

/* Late for the round before the next one, which we announced (a JOIN
 * with DED_JOIN_F_INTENT): while our trainer computes that round, we go
 * on announcing it, every deadline floor, for a quarter of the bound at
 * most from the first announcement (docs/architecture.md, "Catching up").
 * From the node's tick; ded_rounds_announcing says whether it has work. */
void ded_rounds_announce_again(ded_node *node, uint64_t now_ns);
bool ded_rounds_announcing(ded_node *node, uint64_t now_ns);

/* The job reloads the run's state instead (ded_xfer_reload): it will not
 * come to the round it announced, and stops announcing it, so that the
 * swarm's rounds, and the donors' steps where the snapshot it waits for
 * is taken, are held for it no longer than a fetch after the last one. */
void ded_rounds_announce_stop(ded_node *node);

/* The process did not run for |gap_ns| past when it was due (SIGSTOP, a
 * closed lid): the bound of every open round and queued call moves that
 * much later, so that a call's bound counts the time its job ran, as the
 * silence of others does (ded_peers_forgive_silence). A job stopped for
 * most of a bound would otherwise give up its round at once when it
 * resumes, before it could hear the result. */
void ded_rounds_postpone(ded_node *node, uint64_t gap_ns);

/* Leaving: every submitted element no round covers yet is reported, with
 * |status|, as rounds of their own (numbered as the next round). */
void ded_rounds_fail_queued(ded_node *node, int status);

/* The live round |no|, or NULL. */
ded_round *ded_round_find(ded_node *node, uint64_t no);

/* The newest round that ended here with the swarm's result, when every
 * round after it before |r| ended here without one and voted for nothing
 * that can still count (ded_rounds_void_base) and none before |r| is
 * still running here: this peer vouches for those rounds in |r|'s JOIN
 * (DED_JOIN_F_VOID) and takes that result's members as |r|'s lineage.
 * NULL otherwise. */
struct ded_lin_entry;
const struct ded_lin_entry *ded_round_void_base(ded_node *node, const ded_round *r);

/* Whether this peer says in |r|'s JOIN that it is out of step there
 * (DED_JOIN_F_HELD): every round before |r| ended here, the round before
 * without the swarm's result, and |r| cannot vouch (ded_round_void_base is
 * NULL). |*round1| is the newest result it holds, as round + 1 (0: none;
 * none too while its state is not the run's, ded_rounds.diverged),
 * |*attempt| that result's attempt (0: not known). False where it holds
 * the round before's state all the same (it loaded it). */
bool ded_round_held(ded_node *node, const ded_round *r, uint64_t *round1, uint64_t *attempt);

/* ded_lineage_void_base of our lineage below |round|, a vote of ours in a
 * round between counting as none when every other member of the result
 * before it and of the attempt we took in it is gone for good (evicted,
 * left or unknown) and no peer we can talk to says it completed that
 * round or a later one: no completion with our vote can remain anywhere
 * (a lone survivor that voted, its fellows crashed: without this it
 * could never complete a round again). */
const struct ded_lin_entry *ded_rounds_void_base(ded_node *node, uint64_t round);

/* The newest round a peer we can talk to says, in its record, it
 * completed or holds the state of (0: none). What a peer now gone said
 * does not count: a round whose every holder crashed is lost, and the
 * run goes on from an older state rather than stop (a rollback). */
uint64_t ded_rounds_run_ahead(ded_node *node);

/* True once the round reported (DRAINING or DEAD). */
static inline bool ded_round_over(const ded_round *r) {
  return r->state == ROUND_DRAINING || r->state == ROUND_DEAD;
}

/* Fails |r| with |status| (once; nothing if it reported already). */
void ded_round_fail(ded_node *node, ded_round *r, int status);

/* Frees a DEAD round (its result goes to the history if it ended with it). */
void ded_round_free(ded_node *node, ded_round *r);

/* The send queues' references into a round's memory (ded_sendq_env). */
void ded_round_lend_ref(void *ctx, void *owner, bool user);
void ded_round_lend_unref(void *ctx, void *owner, bool user);

/* How long a member that joined |r| waits while its coordinator holds
 * the round for an announced member, until |until|. */
uint64_t ded_round_held_wait(const ded_node *node, const ded_round *r, uint64_t until);

/* ---- events ---- */

/* advance: every round (a lineage, a connection or a peer may be there). */
void ded_rounds_advance(ded_node *node, uint64_t now_ns);

/* commit, decide: a decision for round |r| from |from| (the coordinator's
 * id; ours for our own coordinator side). Taken in JOINED, from the view's
 * coordinator; moot otherwise. Returns DED_ERR_PROTO if the decision lies
 * about us (the round failed; the caller drops the sender). */
int ded_round_on_commit(ded_node *node, ded_round *r, const uint8_t from[DED_ID_BYTES],
                        const ded_msg_commit *cm, uint64_t now_ns);
int ded_round_on_decide(ded_node *node, ded_round *r, const uint8_t from[DED_ID_BYTES],
                        const ded_msg_decide *d, uint64_t now_ns);

/* data: a DATA or RESULT frame (|payload|, as on the wire) from |from| on
 * |via| (NULL: kept from earlier, the peer's own connection then). */
void ded_round_on_data(ded_node *node, ded_round *r, struct ded_peer *from, struct ded_conn *via,
                       uint8_t type, const uint8_t *payload, size_t len, uint64_t now_ns);

/* have: |from| holds |h|'s attempt and accepts it (or completed with it). */
void ded_round_on_have(ded_node *node, ded_round *r, const uint8_t from[DED_ID_BYTES],
                       const char *from_sid, const ded_msg_have *h, uint64_t now_ns);

/* peer down: every round; peer |id| (short id |sid|; |left|: it said
 * goodbye) went away. */
void ded_rounds_on_peer_down(ded_node *node, const uint8_t id[DED_ID_BYTES], const char *sid,
                             bool left, uint64_t now_ns);

/* connection replaced: the connection to peer |id| (short id |sid|)
 * broke and another took over; a JOIN sent on the broken one may never
 * have arrived, so every round that joined |id| and waits for its COMMIT
 * sends its JOIN again (the coordinator takes a second JOIN of a view as
 * the first, or answers how the round went), its waits unchanged. */
void ded_rounds_on_conn_replaced(ded_node *node, const uint8_t id[DED_ID_BYTES], const char *sid,
                                 uint64_t now_ns);

/* probe: round |m->round| moved to view |m->view| (|from| NULL: our own
 * coordinator side); a round we finished says so there. */
void ded_round_probe(ded_node *node, struct ded_peer *from, const ded_msg_probe *m,
                     uint64_t now_ns);

/* stale: the swarm is past round |r| for good (|m|), says the peer |from| asked. */
void ded_round_on_stale(ded_node *node, ded_round *r, const uint8_t from[DED_ID_BYTES],
                        const ded_msg_stale *m);

/* redirect: the genesis coordinator |from| names a smaller id. DED_ERR_PROTO
 * if it names no smaller one. */
int ded_round_on_redirect(ded_node *node, ded_round *r, const uint8_t from[DED_ID_BYTES],
                          const ded_msg_redirect *m, uint64_t now_ns);

/* deadline, bound: the timers of every round. */
void ded_rounds_tick(ded_node *node, uint64_t now_ns);

/* ---- what this peer serves of rounds it finished ---- */

/* The attempt round |no| completed with here, if we still know it, and
 * (|digest|, may be NULL) the digest of the result's bytes. */
const ded_msg_commit *ded_round_result_plan(ded_node *node, uint64_t no, const uint8_t **digest);

/* A FETCH from |to|: what we hold of the shard, now or as it is reduced. */
void ded_round_serve_fetch(ded_node *node, struct ded_peer *to, const ded_msg_fetch *f);

/* HAVE to |to| (nothing if it is not connected). */
/* |p| came up: rounds of ours that accepted an attempt |p| is a member
 * of, and still wait for a quorum's votes, say HAVE to it again (the HAVE
 * they sent at acceptance found it unreachable; a member that completed
 * long ago answers only what it is asked). */
void ded_rounds_on_peer_up(ded_node *node, struct ded_peer *p);

void ded_round_send_have(ded_node *node, struct ded_peer *to, uint64_t round, uint64_t attempt,
                         uint32_t view, uint8_t flags, const uint8_t digest[DED_RESULT_DIGEST_BYTES]);

/* Two groups of one run (a partition longer than half the bound: each side
 * evicted the other and went on) meet again. A connected peer is of
 * another group when its record's newest round took another result than
 * ours of the same round (the attempts differ), or when it is
 * NODE_GROUP_GAP_ROUNDS or more past our newest round without having been
 * in it. Ours yields to it (our rounds up to both groups' end out of step,
 * and the shim reloads the other's state once it gets there) when it is
 * that far ahead; closer than that, when its newest round had more
 * contributors than ours, or as many and its id is below every id of
 * ours. Between two groups that both see the other's latest round this is
 * a total order (contributors, then the smallest id), so exactly one of
 * them yields; records lag, so near the gap both may wait a while, and
 * docs/architecture.md ("Two groups meet") says why they cannot both yield
 * but there. */
void ded_rounds_check_groups(ded_node *node);

/* A peer we can talk to, not known to be of another group (a result of
 * a round we both took differs, as ded_rounds_check_groups tells), whose
 * record says it completed round |round| or a later one, or holds such a
 * state; its progress in |*prog|. NULL if none. The eviction rule's hole
 * (docs/architecture.md, "Eviction"): a coordinator that counts only
 * the acceptors not evicted may find no completion of |round| among
 * their reports while such a peer holds one. */
struct ded_peer *ded_rounds_holder_of(ded_node *node, uint64_t round, ded_progress *prog);

/* An AHEAD: the swarm is at |m->next_round|, past the round we announced. */
void ded_round_on_ahead(ded_node *node, const ded_msg_stale *m);

/* Contributions are encoded a slice at a time, about this many elements
 * (4 MiB of float32, some 2 ms of a core's encoding), between which the
 * driver writes what is queued: the first chunks leave while the rest is
 * encoded, and a coordinator's COMMIT does not wait for its own encoding. */
#define DED_ENCODE_SLICE_ELEMS (1u << 20)

/* Whether some round has a contribution still to encode: the node wants
 * to be called again at once (ded_node_expiry). */
bool ded_rounds_encoding(const ded_node *node);

/* The next slice of the oldest such round's encoding (ded_compress.c). */
void ded_rounds_encode(ded_node *node, uint64_t now_ns);

/* Forgets the job's error feedback residual (ded_compress.c), and says
 * so with |why| if it held one. */
void ded_rounds_feedback_reset(ded_node *node, const char *why);

#endif /* DED_ROUND_H */
