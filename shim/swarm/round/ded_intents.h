/*
 * ded_intents.h: late members that announced they are coming.
 *
 * Owns: the announcements this peer heard (JOIN with DED_JOIN_F_INTENT):
 * a member that came late for a round fetches its result and says it will
 * join the next one; whoever coordinates that round, or a later one, holds
 * it in view 0 for as long as the fetch should take the announcer
 * (ded_intents_hold_ns), and so does a member's own wait for a decision.
 * Pure: the caller says who is a member, who is still waited for, and
 * what time it is.
 *
 * Invariants: one entry per peer (its latest announcement); at most
 * DED_INTENTS of them (the one that expires first gives way); a round
 * decided without an announcer spends its announcements of that round and
 * earlier (|spent|): one peer's announcements, true or not, hold each
 * round at most once (as long as the table does not overflow: with more
 * than DED_INTENTS announcers at once, a spent entry, which holds nothing,
 * gives way first, and with it the memory of its round); an entry with
 * until_ns 0 holds nothing.
 */
#ifndef DED_INTENTS_H
#define DED_INTENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/ded_types.h"
#include "ded_timing.h"

#define DED_INTENTS 32

typedef struct ded_intent {
  uint64_t round;    /* it joins this round, or the first one after it still undecided */
  uint64_t until_ns; /* waited for until then; 0: not waited for */
  uint64_t spent;    /* a round below this was decided without it: its older
                        announcements hold nothing */
  bool heard;        /* it announced itself to the swarm (every member waits
                        for it too); else only this peer knows (a donor's
                        offer) */
  bool used;
  uint8_t id[DED_ID_BYTES];
} ded_intent;

typedef struct ded_intents {
  ded_intent v[DED_INTENTS];
} ded_intents;

/* Who the caller still waits for: true if |id| may still come (it takes
 * part in rounds, and has not joined the round in question yet). */
typedef bool (*ded_intents_pred)(void *ctx, const uint8_t id[DED_ID_BYTES]);

/* How long to wait for a member that announced it fetches a result of
 * |count| elements of |es| bytes at |down_Bps| (0: unknown, a slow home
 * link's assumed, DED_RATE_UNKNOWN_BPS): twice that plus the deadline
 * floor; UINT64_MAX if that is more than the cap of |t|: a round is never
 * held that long, and the member could not make it. */
uint64_t ded_intents_hold_ns(const ded_timing *t, double down_Bps, uint64_t count, size_t es);

/* |id| will join |round| (or the first one after it still undecided) and
 * is waited for until |until_ns|. |heard|: |id| announced it to every peer
 * (a JOIN with DED_JOIN_F_INTENT), so every member of the round waits for
 * it as long as its coordinator does; else only this peer knows (it
 * offered |id| the run's state), and the other members of a round held
 * for |id| wait only as long as they always do. Ignored if |id| was held
 * for that round, or a later one, in vain already. */
void ded_intents_add(ded_intents *in, const uint8_t id[DED_ID_BYTES], uint64_t round,
                     uint64_t until_ns, bool heard);

/* Round |no| was decided (or adopted) without the peers |member| denies:
 * their announcements of |no| or earlier held it in vain, and hold
 * nothing more. */
void ded_intents_spent(ded_intents *in, uint64_t no, ded_intents_pred member, void *ctx);

/* |id| joined |round|: its announcement of that round or an earlier one
 * is fulfilled. */
void ded_intents_done(ded_intents *in, const uint8_t id[DED_ID_BYTES], uint64_t round);

/* Until when an announced member is still waited for in |round| (0: none
 * is): one that announced this round or an earlier one (to the swarm, if
 * |heard_only|), whose hold has not run out at |now_ns|, and that
 * |waited| says may still come. */
uint64_t ded_intents_until(const ded_intents *in, uint64_t round, uint64_t now_ns,
                           bool heard_only, ded_intents_pred waited, void *ctx);

/* Calls |f| with every announcer of |round| or an earlier one whose hold
 * runs past |now_ns|, heard or not: those a coordinator of |round|
 * expects. */
void ded_intents_each(const ded_intents *in, uint64_t round, uint64_t now_ns,
                      void (*f)(void *ctx, const uint8_t id[DED_ID_BYTES]), void *ctx);

#endif /* DED_INTENTS_H */
