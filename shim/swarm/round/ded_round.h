/*
 * ded_round.h: the member side of a round.
 *
 * Owns: this job's rounds in flight (struct ded_round, one per submitted
 * all-reduce), from submission to the report: who coordinates it (view v
 * of the lineage, or the genesis rendezvous), its JOIN or failover report,
 * the attempt it runs or fetches, the HAVE votes heard, and the report
 * itself; and this job's own catching up (its announcements of the next
 * round it joins, and where the swarm said it is).
 *
 * docs/architecture.md draws the state machine; in short: WAIT_PREV (the
 * previous round's lineage, or the rendezvous) -> JOINING (the
 * coordinator's connection) -> JOINED (a decision) -> RUNNING (an attempt)
 * or FETCHING (an attempt that stands) -> DONE_WAIT (the result, chosen:
 * earlier rounds report first) -> DRAINING (reported; frames into its
 * memory still queued) -> DEAD (reaped). A failover goes back to JOINED in
 * the next view, reporting what it holds.
 *
 * Invariants: the caller's buffer is untouched until the report, which
 * happens exactly once, in round order; a round completes only an attempt
 * a quorum of its acceptors voted for (or someone completed), planned on
 * the attempt the previous round ended with here; a DRAINING round is
 * freed only once no queued frame refers to its memory.
 */
#ifndef DED_ROUND_H
#define DED_ROUND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/ded_frame.h"
#include "../core/ded_msg.h"
#include "../ded_node.h"
#include "../avg/ded_attempt.h"
#include "../match/ded_quorum.h"

struct ded_peer;
struct ded_conn;

typedef enum round_state {
  ROUND_WAIT_PREV, /* needs the previous round's commit, or the rendezvous */
  ROUND_JOINING,   /* coordinator chosen; its connection is not ready yet */
  ROUND_JOINED,    /* JOIN (or a failover report) sent; waiting for a decision */
  ROUND_RUNNING,   /* an attempt: reduce-scatter and all-gather */
  ROUND_FETCHING,  /* the attempt that stands is fetched from its holders */
  ROUND_DONE_WAIT, /* the whole result is here; earlier rounds report first */
  ROUND_DRAINING,  /* reported; results to others still queued */
  ROUND_DEAD,      /* reaped at the end of the entry point */
} round_state;

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
  bool genesis;
  ded_round_args a;
  size_t es; /* element size */
  /* Who coordinates: view |view| of the lineage |lin| (round no-1's
   * members, as this peer knows them), or the genesis coordinator. */
  uint32_t view;
  uint8_t coord[DED_ID_BYTES];
  uint8_t (*lin)[DED_ID_BYTES];
  unsigned nlin;
  uint64_t lin_attempt; /* the attempt of round no-1 |lin| comes from */
  uint64_t bound_ns;    /* the call returns by then, whatever happens */
  uint64_t wait_ns;     /* the current soft deadline: a decision, or progress */
  uint64_t est_ns;      /* what the attempt should take (plan_estimate_ns) */
  uint64_t submit_ns, joined_ns, started_ns;
  uint64_t got_ns; /* the whole result here */
  /* The current attempt (has_plan), and the result (every shard; the
   * attempt's chunks of it are marked in att.res_bits). */
  bool has_plan;
  bool frozen; /* reported to a newer view: this attempt sends nothing more */
  ded_attempt att;
  uint8_t *res;
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
  ded_votes votes;
  uint32_t recoveries; /* failovers so far */
  uint64_t behind;     /* a STALE said the swarm is at this round */
  bool keep;           /* reported with the round's result: it goes to the history */
  bool reported;
} ded_round;

/* A new round (the next number) for |args|, validated by the caller, and
 * its first step; returns its number or DED_ERR_NOMEM. */
int64_t ded_round_submit(ded_node *node, const ded_round_args *args, uint64_t now_ns);

/* The live round |no|, or NULL. */
ded_round *ded_round_find(ded_node *node, uint64_t no);

/* Hands the round back with |status| (alone: its own values; late: the
 * swarm went on without it), exactly once. */
void ded_round_report(ded_node *node, ded_round *r, int status, bool alone, bool late);
void ded_round_fail(ded_node *node, ded_round *r, int status);
void ded_round_free(ded_node *node, ded_round *r);

/* The send queues' references into a round's memory (ded_sendq_env). */
void ded_round_lend_ref(void *ctx, void *owner, bool user);
void ded_round_lend_unref(void *ctx, void *owner, bool user);

/* How long a member that joined |r| waits while its coordinator holds
 * the round for an announced member, until |until|. */
uint64_t ded_round_held_wait(const ded_node *node, const ded_round *r, uint64_t until);

/* Timers: the rendezvous, the bound, the soft deadlines, announcing
 * ourselves while late. */
void ded_rounds_tick(ded_node *node, uint64_t now_ns);

/* Tries every round that waits on lineage or a connection. */
void ded_rounds_advance(ded_node *node, uint64_t now_ns);

/* A decision for our round |r| from the coordinator of its view (or from
 * ourselves). DED_ERR_PROTO if it lies about us: the caller drops the
 * sender. */
int ded_round_on_commit(ded_node *node, ded_round *r, const ded_msg_commit *cm, uint64_t now_ns);
int ded_round_on_decide(ded_node *node, ded_round *r, const ded_msg_decide *d, uint64_t now_ns);

/* A PROBE: the round moved to a new view (|from| NULL: our own coordinator side). */
void ded_round_on_probe(ded_node *node, struct ded_peer *from, const ded_msg_probe *m,
                        uint64_t now_ns);

/* A peer went away. */
void ded_rounds_on_peer_down(ded_node *node, struct ded_peer *p, uint64_t now_ns);

/* The attempt round |no| completed with here, if we still know it. */
const ded_msg_commit *ded_round_result_plan(ded_node *node, uint64_t no);

/* A FETCH from |to|. */
void ded_round_serve_fetch(ded_node *node, struct ded_peer *to, const ded_msg_fetch *f);

/* The frames of a round, from |c|'s peer. */
void ded_round_frame_commit(ded_node *node, struct ded_conn *c, const ded_frame *f, uint64_t now_ns);
void ded_round_frame_decide(ded_node *node, struct ded_conn *c, const ded_frame *f, uint64_t now_ns);
void ded_round_frame_redirect(ded_node *node, struct ded_conn *c, const ded_frame *f,
                              uint64_t now_ns);
void ded_round_frame_stale(ded_node *node, struct ded_conn *c, const ded_frame *f);
void ded_round_frame_ahead(ded_node *node, struct ded_conn *c, const ded_frame *f);
void ded_round_frame_have(ded_node *node, struct ded_conn *c, const ded_frame *f, uint64_t now_ns);
void ded_round_frame_data(ded_node *node, struct ded_conn *c, const ded_frame *f, uint64_t now_ns);

#endif /* DED_ROUND_H */
