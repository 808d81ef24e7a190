/*
 * ded_sendq.h: one connection's output, frames waiting to be written.
 *
 * Owns: the frames queued on one connection, in four priority classes, and
 * the frame the driver is in the middle of writing.
 *
 * A frame is either built in full (|owned|, freed with the item) or a data
 * frame whose header is inline (|hdr|) and whose payload |ref| points into
 * memory an owner lends (a round's buffer or accumulator), never copied.
 * The queue tells the owner when it lets go of such a reference (the
 * env's |unref|), so the owner knows when its memory is free again.
 *
 * Invariants:
 *  - The driver sees the frames in write order: |cur| (a frame partly
 *    handed to the driver) first, then each class in priority order, each
 *    class first in, first out. ded_sendq_pending and ded_sendq_consume
 *    walk that one order (sendq_next in the .c).
 *  - A frame begun on the wire is finished before any other: once a byte
 *    of it went to the driver it is |cur|, and nothing overtakes it.
 *  - Every item in class queue c has cls == c; |partial| marks the copied
 *    tail of a frame begun on this connection, which makes no sense on
 *    another (ded_sendq_move drops it).
 */
#ifndef DED_SENDQ_H
#define DED_SENDQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ded_mem.h"
#include "ded_types.h"
#include "ded_msg.h"

/* Priority classes of output: control frames overtake results, results
 * overtake contributions (all-gather latency is what members wait on),
 * and contributions overtake link-probe filler (a probe measures a link,
 * it must not delay the rounds that start while it is on its way). */
enum ded_sendq_class { DED_Q_CTRL, DED_Q_RESULT, DED_Q_DATA, DED_Q_BULK, DED_Q_COUNT };

typedef struct ded_sendq_item {
  struct ded_sendq_item *next;
  void *owner;   /* set when |ref| points into memory |owner| lends */
  bool ref_user; /* which of the owner's memories (the caller's buffer, else its accumulator) */
  uint8_t *owned;
  size_t owned_len;
  uint8_t hdr[DED_DATA_HDR_BYTES];
  const uint8_t *ref;
  size_t ref_len;
  size_t pos;   /* bytes of head+payload already handed to the driver */
  bool partial; /* the rest of a frame begun on this connection: never moved */
  uint8_t cls;  /* the class it was queued in */
} ded_sendq_item;

/* What the queues need from their user: an allocator, and who to tell
 * when a reference into an owner's memory comes and goes. */
typedef struct ded_sendq_env {
  const ded_mem *mem;
  void (*ref)(void *ctx, void *owner, bool user);
  void (*unref)(void *ctx, void *owner, bool user);
  void *ctx;
} ded_sendq_env;

typedef struct ded_sendq {
  ded_sendq_item *cur; /* partially written frame; it finishes first */
  struct {
    ded_sendq_item *head, *tail;
  } q[DED_Q_COUNT];
} ded_sendq;

/* True if anything waits to be written. */
bool ded_sendq_has_output(const ded_sendq *q);

/* True if class |cls| holds a frame not yet begun. */
bool ded_sendq_has_class(const ded_sendq *q, int cls);

/* A zeroed item from env->mem (NULL: out of memory). */
ded_sendq_item *ded_sendq_item_new(const ded_sendq_env *env);

/* Makes |it|'s payload the |len| bytes at |ref|, in |owner|'s memory (the
 * caller's buffer if |user|, else its accumulator), and tells the owner. */
void ded_sendq_item_lend(const ded_sendq_env *env, ded_sendq_item *it, void *owner, bool user,
                         const uint8_t *ref, size_t len);

/* Frees |it|, telling the owner its reference went. */
void ded_sendq_item_free(const ded_sendq_env *env, ded_sendq_item *it);

/* Appends |it| to class |cls|. */
void ded_sendq_push(ded_sendq *q, int cls, ded_sendq_item *it);

/* Drops every frame still queued in class |cls| (not |cur|). */
void ded_sendq_drop_class(const ded_sendq_env *env, ded_sendq *q, int cls);

/* Drops everything, |cur| included. */
void ded_sendq_free(const ded_sendq_env *env, ded_sendq *q);

/* Fills up to |max| pieces of what goes out next, in write order.
 * Returns how many. */
int ded_sendq_pending(const ded_sendq *q, ded_iov *iov, int max);

/* The driver took |n| bytes: frames written in full are freed. For every
 * frame that got bytes, |each| (may be NULL) sees its owner (NULL for an
 * owned frame) before it may be freed. */
void ded_sendq_consume(const ded_sendq_env *env, ded_sendq *q, size_t n,
                       void (*each)(void *ctx, void *owner), void *ctx);

/*
 * Lets go of |owner|'s memory: queued frames of |owner| (only those into
 * the caller's buffer when |user_only|) are dropped, and a frame already
 * half written gets the rest of its payload copied, since the stream must
 * stay whole. DED_ERR_NOMEM if that copy fails: the stream cannot stay
 * whole, and the connection must go (the reference is let go all the same,
 * and the frame, a header without its payload now, is |partial|:
 * ded_sendq_move drops it rather than begin it on another connection).
 */
int ded_sendq_detach(const ded_sendq_env *env, ded_sendq *q, const void *owner, bool user_only);

/* Moves every frame of |from| to the end of |to|'s classes, the one half
 * written too: the peer never got it whole, so it is sent again from its
 * start (a |partial| tail is dropped instead). */
void ded_sendq_move(const ded_sendq_env *env, ded_sendq *from, ded_sendq *to);

#endif /* DED_SENDQ_H */
