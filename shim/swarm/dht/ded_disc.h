/*
 * ded_disc.h: discovery, the node's view of who is in the run.
 *
 * Owns: the table of the run's records (ded_table.h), our own signed
 * record (addresses, mode, measured rates, last completed round,
 * invitation, our job's group peers) and when it is renewed, and the
 * admission rule of a run with access control. Records arrive in a HELLO or in RECORDS frames;
 * one that is new or newer than what the table holds is verified,
 * admitted, stored and flooded to every other neighbour (once per peer,
 * on its first connection; never back to the sender); a peer coming up
 * gets the whole table.
 *
 * Invariants: the table holds only records that verified for this run
 * and were admitted, and our own, which is renewed at a third of its
 * lifetime, sooner when our rates moved by a fifth (at most every 2 s)
 * or our progress did (at most every 5 s), at once when our group list
 * is replaced, never while leaving; our group list is one our record
 * can carry (ded_record_groups_add accepts it); the table is read only
 * through ded_table.h's calls.
 *
 * Group peers (the GROUPS extension, ded_record.h): a job's world peer
 * publishes where the peers of its MPI_Comm_split groups listen
 * (ded_disc_groups_set), and reads what the other jobs' world peers
 * published for a group (ded_disc_group_hints).
 */
#ifndef DED_DISC_H
#define DED_DISC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/ded_frame.h"
#include "../ded_node.h"
#include "ded_record.h"
#include "ded_table.h"

struct ded_conn;
struct ded_peer;

typedef struct ded_disc {
  ded_table table;
  ded_record rec; /* ours */
  uint8_t rec_bytes[DED_RECORD_BYTES_MAX];
  size_t rec_len;
  uint64_t rec_refresh_ns;
  /* What our record says of our links, and when it last changed. */
  ded_perf perf;
  uint64_t perf_ns;
  /* Our last completed round, whether our record says so yet, and
   * whether it ever did (the first goes out at once: a joiner tells a run
   * in progress from none by it). */
  ded_progress progress;
  bool progress_set, progress_new, progress_said;
  /* Our job's group peers, ids increasing, once set: our record lists
   * them (an empty list too). */
  ded_group_addr groups[DED_RECORD_GROUPS_MAX];
  unsigned ngroups;
  bool groups_set;
} ded_disc;

/* Signs our record anew (now's rates and progress) and stores it. */
int ded_disc_build_record(ded_node *node, uint64_t now_ns);

/* Sends one record to every ready connection but |except|'s peer. */
void ded_disc_flood(ded_node *node, const uint8_t *rec, size_t len, struct ded_conn *except);

/* Sends our whole table to a connection that just became ready. */
void ded_disc_send_table(ded_node *node, struct ded_conn *c);

/* Verifies and stores a record that arrived on |from| (NULL: in a HELLO,
 * whose sender we are talking to already); |*out| (may be NULL) gets its
 * peer. 0, or why it was refused (DED_ERR_EXPIRED, DED_ERR_NOT_ADMITTED,
 * DED_ERR_LIMIT, a decoding or signature error). */
int ded_disc_take_record(ded_node *node, const uint8_t *bytes, size_t len, struct ded_conn *from,
                         uint64_t now_ns, struct ded_peer **out);

/* A RECORDS frame on |c|. */
void ded_disc_on_records(ded_node *node, struct ded_conn *c, const ded_frame *f, uint64_t now_ns);

/* Round |round| completed here after |ms| with |contributors|, taking
 * the result of |attempt| (0: none known), its contributions encoded with
 * |codec| (|codec_ppm|): our record tells of it at its next renewal. */
void ded_disc_progress(ded_node *node, uint64_t round, uint32_t ms, uint32_t contributors,
                       uint64_t attempt, uint8_t codec, uint32_t codec_ppm);

/* This job loaded the run's state after round |round| (a join or a
 * reload), whose result came from |attempt| with |contributors|: that is
 * now the newest round it holds, and its record says so at its next
 * renewal, replacing what it said before (a reload lost our own rounds).
 * Peers take a record's round as how far the run got: a joiner's loaded
 * state is as much the run's as a completed round. */
void ded_disc_progress_loaded(ded_node *node, uint64_t round, uint32_t contributors,
                              uint64_t attempt);

/* Replaces the group peers our record lists with the |n| at |g| (ids
 * strictly increasing; n 0: none), re-signs our record and floods it at
 * once. 0, DED_ERR_INVALID_ARG (a list a record cannot carry: more than
 * DED_RECORD_GROUPS_MAX, ids not increasing, a bad address) or
 * DED_ERR_CLOSING (leaving), with nothing changed. */
int ded_disc_groups_set(ded_node *node, const ded_group_addr *g, unsigned n, uint64_t now_ns);

/* The addresses other peers' live records (not ours, not expired at
 * |now_ns|, not of a peer that left) publish for group |id|, at most |max|
 * into |out|, distinct, in the table's order; how many. |*waiting| gets
 * the number of peers taking part in rounds (no DED_RECORD_F_NO_ROUNDS)
 * among them whose record lists no groups yet. */
size_t ded_disc_group_hints(const ded_node *node, uint16_t id, uint64_t now_ns, ded_addr *out,
                            size_t max, unsigned *waiting);

/* Renews and floods our record when due; drops expired records. */
void ded_disc_tick(ded_node *node, uint64_t now_ns);

#endif /* DED_DISC_H */
