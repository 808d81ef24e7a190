/*
 * ded_partition.h: how a round's vector is cut among its reducers.
 *
 * Butterfly all-reduce: member i reduces the contiguous shard
 * [off_i, off_{i+1}) of the vector (the last shard ends at the count).
 * Each shard travels in chunks of a fixed number of elements, counted from
 * the start of the shard, so that sending, receiving and adding overlap.
 */
#ifndef DED_PARTITION_H
#define DED_PARTITION_H

#include <stddef.h>
#include <stdint.h>

/* Equal shares: the first |count| % |k| shards get one extra element. */
void ded_partition_equal(uint64_t count, unsigned k, uint64_t *off);

/*
 * Shares proportional to |frac| (non-negative, not all zero), rounded to
 * whole elements by largest remainder (Hagenbach-Bischoff), so the shares
 * sum to |count| exactly and a zero fraction gives an empty shard. Ties
 * go to the lower index, making the result a pure function of its inputs.
 * Returns 0, or -1 if |frac| is unusable.
 */
int ded_partition_weighted(uint64_t count, unsigned k, const double *frac, uint64_t *off);

/* Length of shard |i| of |k| given offsets |off| and the vector |count|. */
static inline uint64_t ded_shard_len(const uint64_t *off, unsigned k, uint64_t count, unsigned i) {
  uint64_t end = i + 1 < k ? off[i + 1] : count;
  return end - off[i];
}

/* Number of chunks of |chunk| elements that cover |len| elements. */
static inline uint64_t ded_chunks(uint64_t len, uint64_t chunk) {
  return (len + chunk - 1) / chunk;
}

#endif /* DED_PARTITION_H */
