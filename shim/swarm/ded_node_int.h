/*
 * ded_node_int.h: the node's private state, shared by the engine's modules.
 *
 * ded_node.h is the engine's public face; this header is not. It defines
 * struct ded_node, which holds one instance of each module's state, and
 * the few helpers every module uses (logging, time, identity checks).
 * Modules that need the whole node take a ded_node *; those that can do
 * with less (send queues, timing, quorum rules, lineage, history, one
 * attempt's data plane) take only what they use, and know nothing of it.
 */
#ifndef DED_NODE_INT_H
#define DED_NODE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ded_node.h"
#include "avg/ded_feedback.h"
#include "core/ded_frame.h"
#include "core/ded_meter.h"
#include "core/ded_msg.h"
#include "core/ded_sendq.h"
#include "dht/ded_record.h"
#include "dht/ded_table.h"
#include "dht/ded_disc.h"
#include "match/ded_coord.h"
#include "match/ded_match.h"
#include "match/ded_plan.h"
#include "match/ded_quorum.h"
#include "net/ded_boot.h"
#include "net/ded_conn.h"
#include "net/ded_peer.h"
#include "core/ded_bits.h"
#include "round/ded_abstain.h"
#include "round/ded_history.h"
#include "round/ded_intents.h"
#include "round/ded_lineage.h"
#include "round/ded_round.h"
#include "round/ded_timing.h"
#include "state/ded_xfer.h"

/* ------------------------------------------------------------------ */
/* 1. types                                                            */
/* ------------------------------------------------------------------ */

#define NODE_TICK_NS (20ull * 1000 * 1000)
/* With nothing pending (no round, no attempt to connect, no handshake), the
 * node wakes only this often: an idle trainer's peer costs no CPU. */
#define NODE_IDLE_TICK_NS (1000ull * 1000 * 1000)
#define NODE_CHUNK_BYTES_DEFAULT (64u * 1024)
#define NODE_RECORD_TTL_MS_DEFAULT (5u * 60 * 1000)
/* Rates that moved are republished at most this often. */
#define NODE_PERF_REPUBLISH_NS (2000u * 1000000ull)
/* Our record tells of our last completed round at most this often. */
#define NODE_PROGRESS_REPUBLISH_NS (5000u * 1000000ull)
#define NODE_DEADLINE_FLOOR_NS_DEFAULT (500ull * 1000 * 1000)
#define NODE_HISTORY_BYTES_DEFAULT (256ull << 20)
#define NODE_BACKOFF_MS_MIN 50u
#define NODE_BACKOFF_MS_MAX 5000u
/* A peer outside our latest round whose record shows a round this far
 * past it belongs to another group of the run that went on without us
 * (ded_rounds_check_groups). */
#define NODE_GROUP_GAP_ROUNDS 16u
/* A larger-id peer waits this long for the smaller one to call before it
 * calls itself (the usual direction fails when only one side can accept). */
#define NODE_CONNECT_PATIENCE_NS (2ull * 1000 * 1000 * 1000)
/* Members wait this many round timeouts for a commit or for data: the
 * coordinator's own deadline comes first, so members never give up on a
 * round the coordinator is about to commit. */
#define NODE_MEMBER_TIMEOUT_FACTOR 2


struct ded_node {
  ded_node_settings s;
  char run[DED_RUN_NAME_MAX + 1];
  ded_node_callbacks cb;
  void *user;
  const ded_mem *mem;
  ded_ident ident;
  char sid[9];
  uint8_t run_id[DED_RUN_ID_BYTES];
  /* Discovery: the run's records, ours among them (ded_disc.h). */
  ded_disc disc;
  /* Our links, measured from our own traffic. */
  ded_meter up, down;
  /* The last plan our coordinator logged (ded_plan.h). */
  ded_planner planner;
  ded_conns conns;
  ded_peers peers;
  /* Our rounds, and where we stand in the swarm (ded_round.h). */
  ded_rounds rounds;
  /* Others' announcements (one per peer, the latest). */
  ded_intents intents;
  /* Our step-down from a round our trainer did not come to (ded_abstain.h). */
  ded_abstain abstain;
  /* The lineage: per recent round, the members of the latest attempt we
   * adopted (a round's coordinators come from the previous round's), and
   * the attempt each of our reported rounds ended with. */
  ded_lineage lin;
  /* Rounds we coordinate (open or recently committed). */
  ded_coords coords;
  /* Bootstrap. */
  ded_boot boot;
  /* Freed round buffers, for reuse; results of finished rounds. */
  ded_bufcache cache;
  ded_history hist;
  /* Learned timing: the spread of a round's joins, the time from a commit
   * to the whole result, and the waits made of them (ded_timing.h). */
  ded_timing timing;
  /* The residual compression dropped from our contributions (EF-SGD),
   * and whether we said it waits for the step's length. */
  ded_feedback fb;
  bool fb_waiting_logged;
  uint64_t tick_ns;
  uint64_t now_ns; /* time of the entry point being run */
  bool wake_soon;  /* something needs the fast tick: set where work appears */
  uint64_t quiet_until_ns; /* back from a stall: no decisions before this */
  ded_xfer xfer; /* state transfer, both sides (ded_xfer.h) */
  /* Events for the end of the entry point (node_post_*), in order. */
  struct node_ev *ev_head, *ev_tail;
  bool leaving;
  uint8_t leave_reason; /* what our LEAVE says (DED_LEAVE_*; 0 = finalize) */
  bool reap_needed;
  ded_sendq_env qenv;  /* the queues' allocator, and round_unref for what they lend */
};

/* ---- events the orchestrator drains at the end of each entry point ----
 *
 * No handler runs inside another: what one part of the node tells another
 * (a member its own coordinator, a coordinator its own member, the rounds
 * and views that a peer is down) is queued, and ded_node.c hands it over
 * once the entry point's own work is done, in the order it was posted;
 * what that work posts in turn goes to the back of the queue. */

/* A frame to ourselves (JOIN, COMMIT, DECIDE or PROBE, encoded as on the
 * wire): handled as if it came from us. Short of memory it is lost, as on
 * a broken connection; the sender's deadlines recover. */
void node_post_self(ded_node *node, const uint8_t *frame, size_t len);

/* |p|'s last connection went: its rounds and the views we coordinate learn
 * it (ded_rounds_on_peer_down, ded_coords_evaluate). */
void node_post_peer_down(ded_node *node, const ded_peer *p);

/* |p|'s connection broke and another of its connections took over: what
 * the broken one had handed to the network is lost (a reset drops what
 * the kernels held), so our rounds that joined |p| ask it again
 * (ded_rounds_on_conn_replaced), and the views we coordinate and the
 * rounds we run tell it again what they would tell a peer back up
 * (ded_coords_on_peer_up, ded_rounds_on_peer_up). */
void node_post_conn_replaced(ded_node *node, const ded_peer *p);

/* ---- helpers every module uses (ded_node.c) ---- */

/* One log line at |level|, formatted only if the level is on. */
DED_PRINTF(3, 4) void node_log(ded_node *node, int level, const char *fmt, ...);
/* Wall-clock milliseconds at monotonic |now_ns|. */
uint64_t node_wall_ms(const ded_node *node, uint64_t now_ns);
/* True if |id| is this node's. */
bool id_is_me(const ded_node *node, const uint8_t id[DED_ID_BYTES]);
/* Hands |type| to the driver's event callback, if it has one. */
void node_emit(ded_node *node, int type, int status, const uint8_t *peer);


#endif /* DED_NODE_INT_H */
