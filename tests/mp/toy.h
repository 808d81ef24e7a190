/*
 * toy.h: what the test trainers of tests/mp share: a counter-based random
 * number (splitmix64's finalizer), so that a gradient is a pure function of
 * the seed, the sample, the step and the element, whatever the job's size.
 */
#ifndef TOY_H
#define TOY_H

#include <stdint.h>

static inline uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* A float in [-0.5, 0.5) drawn from four counters. */
static inline float unit(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  return (float)(mix(mix(mix(mix(a) ^ b) ^ c) ^ d) >> 40) * 0x1p-24f - 0.5f;
}

#endif /* TOY_H */
