/*
 * ded_boot.h: bootstrap, reaching the run through DEDMPI_JOIN addresses.
 *
 * Owns: the bootstrap addresses and, per address, its backoff and whether
 * a peer answered there (or it was our own); the bootstrap state machine:
 *
 *   IDLE --start--> RUNNING --a HELLO through a slot----> DONE
 *     \                 \----every slot was ourselves---> DONE
 *      \                 \---the bound, no answer-------> FAILED
 *       \--start, no address------------------------------> DONE
 *
 * DONE and FAILED are reported once (DED_EVENT_BOOTSTRAP). In DONE, every
 * address is still tried until a peer answers there: two groups that came
 * up through different addresses would otherwise never meet.
 *
 * Addresses may come later too (ded_boot_add: the group peers other jobs
 * publish): each is tried in the background as DONE tries its own, in
 * any state (in FAILED, only they are), and changes no state's outcome
 * but one: RUNNING ends in DONE when a peer answers at any address. The
 * first-peer rule (every address ours) looks at the starting addresses
 * alone, and DONE and FAILED stay as they are. A duplicate is dropped; our own address is found out as
 * a starting one is. Past DED_BOOTSTRAP_MAX slots, a reached or own slot
 * with no attempt in flight is reused (outside RUNNING); with none free,
 * the address is dropped with a log line.
 *
 * Invariants: a slot has at most one attempt in flight (|connecting|),
 * whose connection names it (ded_conn.boot_idx) until the attempt ends
 * (the connection goes, or a peer answers there: the connection is the
 * peer's from then on and names no slot); a slot that was our own
 * address or was reached is never tried again.
 */
#ifndef DED_BOOT_H
#define DED_BOOT_H

#include <stdbool.h>
#include <stdint.h>

#include "../core/ded_limits.h"
#include "../core/ded_types.h"
#include "../ded_node.h"

struct ded_peer;

typedef enum ded_boot_state { DED_BOOT_IDLE, DED_BOOT_RUNNING, DED_BOOT_DONE, DED_BOOT_FAILED } ded_boot_state;

typedef struct ded_boot_slot {
  ded_addr addr;
  uint64_t next_try_ns;
  uint32_t backoff_ms;
  bool self;       /* it was our own address */
  bool reached;    /* a peer answered there once: from now on it is a peer like any */
  bool connecting; /* an attempt is in flight */
  bool later;      /* added after the start (ded_boot_add) */
  bool refused;    /* the latest attempt failed its handshake (DED_ERR_AUTH): our key refused, most likely */
} ded_boot_slot;

typedef struct ded_boot {
  ded_boot_state state;
  uint64_t deadline_ns;
  ded_boot_slot slots[DED_BOOTSTRAP_MAX];
  unsigned n;
} ded_boot;

void ded_boot_init(ded_boot *b, const ded_addr *addrs, unsigned n);

/* IDLE -> RUNNING (or DONE without addresses). DED_ERR_INVALID_ARG if not IDLE. */
int ded_boot_start(ded_node *node, uint64_t now_ns);

/* Tries the addresses due; RUNNING ends in DONE or FAILED when it must. */
void ded_boot_tick(ded_node *node, uint64_t now_ns);

/* Adds |n| addresses to try, as ded_boot.h says; returns how many were
 * taken (duplicates and those with no slot left are not). */
unsigned ded_boot_add(ded_node *node, const ded_addr *addrs, unsigned n, uint64_t now_ns);

/* Slot |idx|'s attempt went (its connection closed). */
void ded_boot_conn_gone(ded_node *node, int idx, int why);

/* Slot |idx| was our own address. */
void ded_boot_self(ded_node *node, int idx);

/* A peer, |p|, answered through slot |idx|: RUNNING -> DONE. The
 * attempt is over: the caller's connection names the slot no more. */
void ded_boot_reached(ded_node *node, int idx, const struct ded_peer *p);

/* True while bootstrap is RUNNING, or an address is still to be tried. */
bool ded_boot_need_tick(const ded_node *node);

#endif /* DED_BOOT_H */
