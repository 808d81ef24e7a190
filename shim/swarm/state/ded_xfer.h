/*
 * ded_xfer.h: state transfer, a joiner loading the run's state from its peers.
 *
 * Owns: both sides of it. As a donor: the snapshot of the trainer's state
 * this job offers (taken when asked, at the start of the trainer's next
 * step, and dropped after a minute unused), the lineage that comes with
 * it, and the joiners waiting for one. As a joiner: the peers asked
 * (STATE_ASK, up to DED_XFER_ASK_MAX of them), what each answered, the
 * snapshot chosen (the one most of them offer, byte for byte), and its
 * 256 KiB ranges, fetched striped over every peer that offers it
 * (STATE_GET/STATE_DATA, a window of ranges per peer), moving the ranges of
 * a peer that stalls or goes away to the others.
 *
 * The joiner's machine: IDLE -> ASKING (offers come in; once the offers
 * settle, choose) -> FETCHING (ranges) -> FINISHED (state_done called:
 * the snapshot's bytes, "no run in progress", or an error). A digest that
 * does not match, or a fetch whose peers all went, asks again, at most
 * DED_XFER_TRIES times. A reload (a job out of step) is the same with a
 * minimum round, and "no run in progress" is not an answer it can get.
 * The wire side is described in ded_msg.h, the rest in
 * docs/architecture.md ("Joining a run in progress", "Falling out of step").
 *
 * Founding, both sides too (docs/architecture.md, "One initial model"): a
 * job that started the run holds the state it brought to the first round
 * (its founding state, origin itself) and serves it; once the first round
 * reports, a job that is not its first contributor fetches the founding
 * state of the first contributor that a peer still holds, by the same
 * machine (ASKING with an origin, FETCHING), and then holds and serves that
 * as its founding state. It moves past a candidate only when that peer is
 * gone and every peer asked answered that it neither holds nor is
 * fetching that origin's state, so jobs that could reach each other end
 * with the same one; a candidate that is this job itself ends the search.
 *
 * Files: ded_donor.c holds the donor side (offers, ranges served, what
 * lies unused dropped), ded_xfer.c the joiner side and founding's search.
 *
 * Invariants: a donor offers only a snapshot of a round whose previous
 * round ended here with the swarm's result (it can vouch for the state);
 * a joiner takes a snapshot only whole and matching its digest; ranges in
 * flight are counted per donor, and a range is asked of one donor at once.
 */
#ifndef DED_XFER_H
#define DED_XFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/ded_msg.h"
#include "../ded_node.h"

struct ded_conn;
struct ded_peer;

#define DED_XFER_ASK_MAX 8

typedef struct ded_xfer_asker {
  uint8_t id[DED_ID_BYTES];
  uint64_t min_round;
} ded_xfer_asker;

/* A peer a joiner asked, and what it answered. */
typedef struct ded_xfer_donor {
  uint8_t id[DED_ID_BYTES];
  bool answered;
  ded_msg_state_offer offer; /* offer.lin points into |lin| */
  uint8_t (*lin)[DED_ID_BYTES];
  unsigned inflight;
  uint64_t last_ns; /* last answer or range from it */
  bool in_group;    /* offers the snapshot being fetched */
} ded_xfer_donor;

typedef enum ded_xfer_phase {
  DED_XFER_IDLE,
  DED_XFER_ASKING,
  DED_XFER_FETCHING,
  DED_XFER_FINISHED
} ded_xfer_phase;

typedef struct ded_xfer {
  /* Donor side. */
  bool have_snap;
  ded_snapshot snap;
  uint8_t (*snap_lin)[DED_ID_BYTES];
  unsigned snap_nlin;
  uint64_t snap_lin_attempt;
  uint64_t snap_used_ns;   /* last offered or served: idle after a minute */
  uint64_t snap_served_ns; /* last range served */
  bool snap_wanted;        /* asked the driver for one */
  /* We gave up waiting for the run's state while astray (ded_rounds): our
   * state is the run's now, but no snapshot of it is taken yet. Asks hear
   * NONE, not PENDING, until one is: a reloading peer that waited for our
   * next step would hold up the round that step waits for. */
  bool own_snap_due;
  ded_xfer_asker *askers;  /* waiting for a snapshot */
  size_t naskers, askers_cap;
  /* Founding: the state this job brought to the run's first round, or the
   * one it took from the candidate (ded_xfer_found), served as
   * |found_origin|'s; dropped a minute after its last use. */
  bool have_found;
  ded_snapshot found;
  uint8_t found_origin[DED_ID_BYTES];
  uint64_t found_used_ns;
  bool found_asked; /* ded_xfer_found ran: the first round is over */
  /* Joiner side. */
  ded_xfer_phase phase;
  bool founding; /* fetching a founding state: |cands|[|cand|]'s */
  uint8_t (*cands)[DED_ID_BYTES]; /* the first round's contributors (and this job, if late) */
  unsigned ncands, cand;
  unsigned self_at;       /* this job's place in |cands|: the candidates are before it */
  uint64_t found_gone_ns; /* since when the candidate has seemed gone (0: it is there) */
  uint64_t found_deadline_ns;
  bool reload;        /* a job out of step, not a new one */
  /* A reload of a job still in step, only far behind (it fetches the
   * results of the rounds it came late to): without an offer it goes on
   * catching up that way, as the log says. (It waits the whole bound all
   * the same: a donor offers at its trainer's next step, and a job that
   * gave up sooner stayed as far behind, catching up a round a step, in
   * sim_chaos --scenario long-freeze.) */
  bool reload_in_step;
  uint64_t min_round; /* offers of older snapshots are no use */
  unsigned tries;
  bool realigned; /* asked the offering peers again for one round */
  /* A fetch: a peer said PENDING or offered (a run is in progress, even
   * if no snapshot came of it), and we said we wait for it. */
  bool run_seen, run_wait_logged;
  /* While a run is in progress but offers nothing: the newest round a
   * peer's record showed completed, and how many more bounds the wait got
   * because that round moved on (DED_XFER_RUN_BOUNDS at most). */
  uint64_t run_round;
  unsigned run_bounds;
  ded_xfer_donor donors[DED_XFER_ASK_MAX];
  unsigned ndonors;
  uint64_t asked_ns, first_answer_ns, first_offer_ns, deadline_ns;
  ded_msg_state_offer want; /* the snapshot chosen (want.lin points into |lin|) */
  uint8_t (*lin)[DED_ID_BYTES];
  uint8_t *buf;
  uint8_t *chunk; /* per range: 0 to ask, 1 + donor index asked, 0xff done */
  uint64_t nchunks, ndone, next_todo;
  /* A backbone (state/ded_keep.c): the donor snapshot is its checkpoint
   * (|snap_kept|: no lineage, never dropped for idling), and a fetch may
   * only pull the run's state for one (|pull|: the node's rounds and
   * lineage untouched). */
  bool snap_kept;
  bool pull;
} ded_xfer;

/* The donor side (ded_donor.c): drop the snapshot held, or the founding
 * state; drop either once it has lain unused for a minute. */
void ded_xfer_snap_drop(ded_node *node);
void ded_xfer_found_drop(ded_node *node);
void ded_xfer_donor_tick(ded_node *node, uint64_t now_ns);

/* Tells the peers waiting for our next snapshot (PENDING) that none
 * comes (NONE): it would not be the run's, or not soon. */
void ded_xfer_askers_none(ded_node *node);

/* ded_node_state_fetch, without entering the node: 0 or an error. */
int ded_xfer_fetch(ded_node *node, uint64_t now_ns);

/* ded_node_state_reload, likewise. */
int ded_xfer_reload(ded_node *node, uint64_t min_round, uint64_t now_ns);

/* ded_node_snapshot_set, likewise (DED_ERR_NOMEM: nothing happened). */
int ded_xfer_snapshot_set(ded_node *node, ded_snapshot *snap, uint64_t now_ns);

/* ded_node_found_set and ded_node_state_found, likewise. */
int ded_xfer_found_set(ded_node *node, ded_snapshot *snap, uint64_t now_ns);
int ded_xfer_found(ded_node *node, const uint8_t *cands, unsigned n, uint64_t now_ns);

/* The frames of state transfer, from |c|'s peer. */
void ded_xfer_on_ask(ded_node *node, struct ded_conn *c, const ded_msg_state_ask *m);
void ded_xfer_on_offer(ded_node *node, struct ded_conn *c, const ded_msg_state_offer *m,
                       uint64_t now_ns);
void ded_xfer_on_get(ded_node *node, struct ded_conn *c, const ded_msg_state_get *m);
void ded_xfer_on_data(ded_node *node, struct ded_conn *c, const ded_msg_state_data *m,
                      uint64_t now_ns);

/* Decides what the answers so far mean; drops donors that stall; drops a
 * snapshot unused for a minute. */
void ded_xfer_tick(ded_node *node, uint64_t now_ns);

/* True while a fetch or reload is asking or fetching. */
bool ded_xfer_busy(const ded_node *node);

void ded_xfer_free(ded_node *node);

/* For state/ded_keep.c, the joiner's and donor's steps it reuses: an
 * answer of |status| (DED_STATE_OFFER: the donor snapshot) to |to|; asks
 * |p| unless asked already (false if it cannot be); begins asking (a try);
 * finishes the fetch with |status| and |snap| (state_done). */
void ded_xfer_offer_to(ded_node *node, struct ded_peer *to, uint8_t status);
bool ded_xfer_ask_peer(ded_node *node, struct ded_peer *p);
void ded_xfer_begin(ded_node *node, uint64_t now_ns);
void ded_xfer_done(ded_node *node, int status, ded_snapshot *snap);

#endif /* DED_XFER_H */
