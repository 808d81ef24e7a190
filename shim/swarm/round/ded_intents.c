#include "ded_intents.h"

#include <string.h>

#include "../core/ded_assert.h"

uint64_t ded_intents_hold_ns(const ded_timing *t, double down_Bps, uint64_t count, size_t es) {
  double rate = down_Bps;
  if (!(rate > 0.0)) rate = DED_RATE_UNKNOWN_BPS;
  double ns = 2e9 * (double)count * (double)es / rate;
  if (!(ns < (double)ded_timing_cap(t))) return UINT64_MAX;
  return DED_MIN(t->floor_ns + (uint64_t)ns, ded_timing_cap(t));
}

void ded_intents_add(ded_intents *in, const uint8_t id[DED_ID_BYTES], uint64_t round,
                     uint64_t until_ns, bool heard) {
  ded_intent *slot = &in->v[0];
  for (unsigned i = 0; i < DED_INTENTS; i++) {
    ded_intent *it = &in->v[i];
    if (it->used && memcmp(it->id, id, DED_ID_BYTES) == 0) {
      if (round < it->spent) return; /* held for once already, in vain */
      slot = it;
      break;
    }
    if (!it->used || (slot->used && it->until_ns < slot->until_ns)) slot = it;
  }
  if (!slot->used || memcmp(slot->id, id, DED_ID_BYTES) != 0) slot->spent = 0;
  slot->used = true;
  slot->round = round;
  slot->until_ns = until_ns;
  slot->heard = heard;
  memcpy(slot->id, id, DED_ID_BYTES);
}

void ded_intents_spent(ded_intents *in, uint64_t no, ded_intents_pred member, void *ctx) {
  for (unsigned i = 0; i < DED_INTENTS; i++) {
    ded_intent *it = &in->v[i];
    if (!it->used || it->until_ns == 0 || it->round > no) continue;
    if (member(ctx, it->id)) continue;
    it->until_ns = 0;
    it->spent = DED_MAX(it->spent, no + 1);
  }
}

void ded_intents_done(ded_intents *in, const uint8_t id[DED_ID_BYTES], uint64_t round) {
  for (unsigned i = 0; i < DED_INTENTS; i++) {
    ded_intent *it = &in->v[i];
    if (it->used && it->round <= round && memcmp(it->id, id, DED_ID_BYTES) == 0) {
      it->until_ns = 0;
      it->spent = 0;
    }
  }
}

uint64_t ded_intents_until(const ded_intents *in, uint64_t round, uint64_t now_ns,
                           bool heard_only, ded_intents_pred waited, void *ctx) {
  uint64_t until = 0;
  for (unsigned i = 0; i < DED_INTENTS; i++) {
    const ded_intent *it = &in->v[i];
    if (!it->used || (heard_only && !it->heard) || it->round > round || it->until_ns <= now_ns ||
        it->until_ns <= until)
      continue;
    if (!waited(ctx, it->id)) continue;
    until = it->until_ns;
  }
  return until;
}

void ded_intents_each(const ded_intents *in, uint64_t round, uint64_t now_ns,
                      void (*f)(void *ctx, const uint8_t id[DED_ID_BYTES]), void *ctx) {
  for (unsigned i = 0; i < DED_INTENTS; i++)
    if (in->v[i].round <= round && in->v[i].until_ns > now_ns) f(ctx, in->v[i].id);
}
