/*
 * ded_round_mem.c: a round's memory (ded_round.h): finding a round,
 * dropping its attempt, freeing it, and the references its lent buffers
 * hold until the connections that send them let go. Moved out of
 * ded_round.c as it is; the round's events stay there.
 */
#include "ded_round.h"

#include <string.h>

#include "../core/ded_assert.h"
#include "../ded_node_int.h"
#include "ded_round_int.h"

ded_round *ded_round_find(ded_node *node, uint64_t no) {
  for (unsigned i = 0; i < node->rounds.n; i++)
    if (node->rounds.v[i]->no == no && node->rounds.v[i]->state != ROUND_DEAD)
      return node->rounds.v[i];
  return NULL;
}

void ded_round_drop_attempt(ded_node *node, ded_round *r) {
  /* Every caller detached the round's frames first: the encoded bytes of
   * the attempt (and of any before it) are no one's now. */
  ded_attempt_clear(&r->att, node->mem, &node->cache, r->es);
  ded_round_wire_drop(node, r);
  r->att_state = ROUND_ATT_NONE;
  r->accepted = false;
  r->got_ns = 0;
  r->digested = false;
  ded_mem_free(node->mem, r->asked);
  r->asked = NULL;
  r->mend_failed = false;
}

static void early_free_list(ded_node *node, early_frame *e) {
  while (e) {
    early_frame *next = e->next;
    ded_mem_free(node->mem, e);
    e = next;
  }
}

void ded_round_free(ded_node *node, ded_round *r) {
  if (r->with_result)
    ded_history_add(&node->hist, r->no, &r->att.plan, &r->res, ded_round_bytes(r), r->digest);
  ded_round_drop_attempt(node, r);
  ded_round_wire_free(node, r);
  ded_bufcache_put(&node->cache, r->res, ded_round_bytes(r));
  ded_mem_free(node->mem, r->lin);
  ded_votes_free(&r->votes, node->mem);
  early_free_list(node, r->early_head);
  ded_mem_free(node->mem, r);
}

/* DRAINING -> DEAD once nothing queued refers to the round's memory. */
void ded_round_maybe_dead(ded_node *node, ded_round *r) {
  if (r->state == ROUND_DRAINING && r->refs_user == 0 && r->refs_res == 0) {
    r->state = ROUND_DEAD;
    node->reap_needed = true;
  }
}

void ded_round_lend_ref(void *ctx, void *owner, bool user) {
  ded_round *r = owner;
  (void)ctx;
  if (user)
    r->refs_user++;
  else
    r->refs_res++;
}

void ded_round_lend_unref(void *ctx, void *owner, bool user) {
  ded_round *r = owner;
  if (user) {
    DED_ASSERT(r->refs_user > 0);
    r->refs_user--;
  } else {
    DED_ASSERT(r->refs_res > 0);
    r->refs_res--;
  }
  ded_round_maybe_dead(ctx, r);
}
