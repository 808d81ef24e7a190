#include "ded_lineage.h"

#include <string.h>

#include "../core/ded_bits.h"
#include "../core/ded_err.h"

void ded_lineage_init(ded_lineage *l, const ded_mem *mem) {
  memset(l, 0, sizeof *l);
  l->mem = mem;
}

static void lin_clear(ded_lineage *l, ded_lin_entry *e) {
  ded_mem_free(l->mem, e->ids);
  ded_mem_free(l->mem, e->have);
  memset(e, 0, sizeof *e);
}

void ded_lineage_lose(ded_lineage *l) {
  for (unsigned i = 0; i < DED_LIN_RING; i++) lin_clear(l, &l->ring[i]);
  l->have_members = false;
}

ded_lin_entry *ded_lineage_get(ded_lineage *l, uint64_t round) {
  ded_lin_entry *e = &l->ring[round % DED_LIN_RING];
  return e->ids && e->round == round ? e : NULL;
}

ded_lin_entry *ded_lineage_newest_below(ded_lineage *l, uint64_t round) {
  ded_lin_entry *best = NULL;
  for (unsigned i = 0; i < DED_LIN_RING; i++) {
    ded_lin_entry *e = &l->ring[i];
    if (e->ids && e->round < round && (!best || e->round > best->round)) best = e;
  }
  return best;
}

uint8_t (*ded_lineage_of_plan(const ded_mem *mem, const ded_msg_commit *plan))[DED_ID_BYTES] {
  uint8_t(*ids)[DED_ID_BYTES] = ded_mem_calloc(mem, DED_LIN_BYTES(plan->k), 1);
  if (!ids) return NULL;
  uint8_t *clients = (uint8_t *)ids + (size_t)plan->k * DED_ID_BYTES;
  for (unsigned i = 0; i < plan->k; i++) {
    memcpy(ids[i], plan->members[i].id, DED_ID_BYTES);
    if (plan->members[i].flags & DED_MEMBER_F_CLIENT) ded_bit_set(clients, i);
  }
  return ids;
}

int ded_lineage_set(ded_lineage *l, uint64_t no, const ded_msg_commit *plan) {
  ded_lin_entry *e = &l->ring[no % DED_LIN_RING];
  if (e->ids && e->round == no && e->attempt == plan->attempt) return 0;
  uint8_t(*ids)[DED_ID_BYTES] = ded_lineage_of_plan(l->mem, plan);
  if (!ids) return DED_ERR_NOMEM;
  bool was_final = e->ids && e->round == no && e->final;
  bool voted = e->ids && e->round == no && e->voted;
  uint64_t fa = e->final_attempt;
  lin_clear(l, e);
  e->round = no;
  e->attempt = plan->attempt;
  e->ids = ids;
  e->n = plan->k;
  e->end = plan->pos + plan->count;
  e->final = was_final;
  e->final_attempt = fa;
  e->voted = voted;
  if (!l->have_members || no > l->members_round) l->members_round = no;
  l->have_members = l->ever_members = true;
  return 0;
}

void ded_lineage_install(ded_lineage *l, uint64_t no, uint64_t attempt, uint8_t (*ids)[DED_ID_BYTES],
                         unsigned n, uint64_t end) {
  ded_lin_entry *e = &l->ring[no % DED_LIN_RING];
  lin_clear(l, e);
  e->ids = ids;
  e->round = no;
  e->attempt = attempt;
  e->n = n;
  e->end = end;
  e->final = true;
  e->final_attempt = attempt;
  if (!l->have_members || no > l->members_round) l->members_round = no;
  l->have_members = l->ever_members = true;
}

void ded_lineage_take_have(ded_lineage *l, uint64_t round, uint64_t attempt,
                           const uint8_t id[DED_ID_BYTES], uint64_t now_ns) {
  ded_lin_entry *e = ded_lineage_get(l, round);
  if (!e || e->attempt != attempt) return;
  for (unsigned i = 0; i < e->n; i++) {
    if (memcmp(e->ids[i], id, DED_ID_BYTES) != 0) continue;
    if (!e->have) e->have = ded_mem_calloc(l->mem, ((size_t)e->n + 7) / 8, 1);
    if (e->have && !ded_bit_get(e->have, i)) { /* short of memory: taken for still finishing */
      ded_bit_set(e->have, i);
      e->have_ns = now_ns;
    }
    return;
  }
}

const ded_lin_entry *ded_lineage_void_base(const ded_lineage *l, uint64_t round,
                                           ded_lin_vote_moot moot, void *ctx) {
  const ded_lin_entry *base = NULL;
  for (unsigned i = 0; i < DED_LIN_RING; i++) {
    const ded_lin_entry *e = &l->ring[i];
    if (e->ids && e->round < round && e->final && e->attempt != 0 && e->final_attempt == e->attempt &&
        (!base || e->round > base->round))
      base = e;
  }
  if (!base || base->round + 1 >= round || round - base->round >= DED_LIN_RING) return NULL;
  for (uint64_t x = base->round + 1; x < round; x++) {
    const ded_lin_entry *e = &l->ring[x % DED_LIN_RING];
    if (!e->ids || e->round < x) continue; /* no attempt of x here */
    /* A later round took x's slot: what x's entry said is lost. */
    if (e->round > x || !e->final || e->final_attempt != 0) return NULL;
    if (e->voted && !(moot && moot(ctx, base, e))) return NULL;
  }
  return base;
}

uint32_t ded_lineage_view_hint(const ded_lineage *l, uint64_t round) {
  unsigned i = (unsigned)(round % DED_VIEW_HINTS);
  return l->hints[i].round == round ? l->hints[i].view : 0;
}

void ded_lineage_set_view_hint(ded_lineage *l, uint64_t round, uint32_t view) {
  unsigned i = (unsigned)(round % DED_VIEW_HINTS);
  if (l->hints[i].round != round || l->hints[i].view < view) {
    l->hints[i].round = round;
    l->hints[i].view = view;
  }
}
