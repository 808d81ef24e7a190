/*
 * sim_faults.c: the simulator's faults (sim.h): crashes and restarts,
 * freezes, partitions and isolation, the reducer that equivocates (its
 * RESULT frames altered on the way to one member, sim_half_walk), and the
 * end of the network's random faults (sim_network_heals_at). What a fault
 * does to the event loop is said at the top of sim.c.
 */
#include "sim_int.h"

#include "core/ded_assert.h"

#include <stdlib.h>

/* Follows the frames of the bytes |p| that node |from| sends |to| on one
 * half-link, and alters the RESULT frames of an equivocating reducer
 * (sim_equivocate): the first byte of the first element. */
void sim_half_walk(sim *s, half *h, int from, int to, uint8_t *p, size_t len) {
  bool alter = s->equiv_until > s->now && from == s->equiv_liar && to == s->equiv_victim;
  for (size_t i = 0; i < len; i++) {
    if (h->hlen < DED_FRAME_HDR_BYTES) { /* the 4-byte length (with the type), then the type */
      h->hdr[h->hlen++] = p[i];
      if (h->hlen == DED_FRAME_HDR_BYTES) {
        uint32_t n = (uint32_t)h->hdr[0] | (uint32_t)h->hdr[1] << 8 | (uint32_t)h->hdr[2] << 16 |
                     (uint32_t)h->hdr[3] << 24;
        h->plen = n ? n - 1 : 0;
        h->seen = 0;
        if (h->plen == 0) h->hlen = 0;
      }
      continue;
    }
    /* A DATA or RESULT payload: u64 round | u64 attempt | u64 offset | elements. */
    if (h->seen < 8) h->round = (h->seen ? h->round : 0) | (uint64_t)p[i] << (8 * h->seen);
    if (alter && h->hdr[DED_FRAME_HDR_BYTES - 1] == DED_MSG_RESULT && h->seen == 24) {
      p[i] ^= 0x01;
      s->equivocated++;
      s->equiv_rounds |= 1ull << DED_MIN(h->round, 63);
    }
    if (++h->seen == h->plen) h->hlen = 0;
  }
}

void sim_equivocate(sim *s, int liar, int victim, uint64_t until_ns) {
  s->equiv_liar = liar;
  s->equiv_victim = victim;
  s->equiv_until = until_ns;
}

uint64_t sim_equivocated(const sim *s) { return s->equivocated; }

void sim_network_heals_at(sim *s, uint64_t at_ns) { s->net_heal_ns = at_ns; }

bool sim_equivocated_round(const sim *s, uint64_t round) {
  return s->equiv_rounds >> DED_MIN(round, 63) & 1;
}


void sim_crash(sim *s, int i) {
  DED_ASSERT(i >= 0 && i < s->n);
  snode *sn = &s->nodes[i];
  DED_ASSERT(sn->up && !sn->zombie);
  sn->up = false;
  sn->crashed = true;
  sn->gen++; /* its pump and tick events still queued are void */
  sn->zombie = sn->node;
  sn->node = NULL;
  sn->tick_at = 0;
  sn->pump_scheduled = false;
  for (int lk = 0; lk < s->nlinks; lk++)
    for (int k = 0; k < 2; k++) {
      link *l = &s->links[lk];
      if (l->node[k] != i) continue;
      l->dead = true;             /* a connect to it pending is refused */
      sim_half_drop(&l->dir[1 - k]);  /* what was on its way to it is lost */
      if (!l->open[k]) continue;
      l->open[k] = false;
      /* The peer gets what it sent, then sees the connection closed
       * (also a listener whose accept is still to come: it sees it
       * closed right after). */
      if (l->node[1 - k] != i) sim_link_fin(s, lk, k);
    }
  if (sn->frozen_until) {
    /* A killed process is not stopped any more: what waited for it is
     * handled now, in order (mostly refused or dropped). */
    sn->frozen_until = 0;
    for (size_t k = 0; k < sn->ndeferred; k++) {
      event e = sn->deferred[k];
      e.at = s->now;
      sim_heap_push(s, e);
    }
    free(sn->deferred);
    sn->deferred = NULL;
    sn->ndeferred = sn->deferred_cap = 0;
  }
  if (s->in_event) {
    s->reap = true; /* its engine may be on the stack */
  } else {
    ded_node_free(sn->zombie);
    sn->zombie = NULL;
  }
}

void sim_restart(sim *s, int i, uint64_t at_ns, const sim_node_params *p) {
  DED_ASSERT(i >= 0 && i < s->n);
  snode *sn = &s->nodes[i];
  DED_ASSERT(sn->crashed && !sn->restarting);
  sn->restarting = true;
  sn->p = *p;
  if (sn->p.uplink_bytes_per_s <= 0) sn->p.uplink_bytes_per_s = 1e9;
  for (int b = 0; b < DED_SEED_BYTES; b++) sn->seed[b] = (uint8_t)sim_rng_next(&s->rng);
  sim_push(s, DED_MAX(at_ns, s->now), EV_START, i, -1, 0, 0);
}

void sim_freeze(sim *s, int i, uint64_t until_ns) {
  DED_ASSERT(i >= 0 && i < s->n);
  snode *sn = &s->nodes[i];
  if (until_ns <= s->now || until_ns <= sn->frozen_until) return;
  sn->frozen_until = until_ns;
  sim_push(s, until_ns, EV_THAW, i, -1, 0, until_ns);
}

bool sim_frozen(const sim *s, int i) { return sim_node_frozen(s, i); }

static void cut_add(sim *s, int a, int b, uint64_t until_ns) {
  if (until_ns <= s->now) return;
  size_t w = 0; /* forget the partitions that are over */
  for (size_t k = 0; k < s->ncuts; k++)
    if (s->cuts[k].until > s->now) s->cuts[w++] = s->cuts[k];
  s->ncuts = w;
  if (s->ncuts == s->cuts_cap) {
    s->cuts_cap = s->cuts_cap ? s->cuts_cap * 2 : 16;
    s->cuts = realloc(s->cuts, s->cuts_cap * sizeof *s->cuts);
    if (!s->cuts) abort();
  }
  s->cuts[s->ncuts++] = (cut){a, b, until_ns};
}

void sim_partition(sim *s, int a, int b, uint64_t until_ns) {
  DED_ASSERT(a >= 0 && a < s->n && b >= 0 && b < s->n);
  if (a == b) return;
  cut_add(s, a, b, until_ns);
  for (int lk = 0; lk < s->nlinks; lk++) {
    const link *l = &s->links[lk];
    if ((l->node[0] == a && l->node[1] == b) || (l->node[0] == b && l->node[1] == a))
      sim_link_reset(s, lk);
  }
}

void sim_isolate(sim *s, int a, uint64_t until_ns) {
  DED_ASSERT(a >= 0 && a < s->n);
  cut_add(s, a, -1, until_ns);
  for (int lk = 0; lk < s->nlinks; lk++) {
    const link *l = &s->links[lk];
    if (l->node[0] != l->node[1] && l->node[0] >= 0 && l->node[1] >= 0 &&
        (l->node[0] == a || l->node[1] == a))
      sim_link_reset(s, lk);
  }
}
