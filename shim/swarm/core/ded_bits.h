/*
 * ded_bits.h: bitmaps as byte arrays, bit i in byte i / 8 (the wire's
 * order too: ded_msg.h's HAVE bitmaps and client bits).
 */
#ifndef DED_BITS_H
#define DED_BITS_H

#include <stdbool.h>
#include <stdint.h>

static inline void ded_bit_set(uint8_t *bits, uint64_t i) {
  bits[i >> 3] |= (uint8_t)(1u << (i & 7));
}

static inline bool ded_bit_get(const uint8_t *bits, uint64_t i) { return bits[i >> 3] >> (i & 7) & 1; }

#endif /* DED_BITS_H */
