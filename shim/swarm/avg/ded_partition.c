#include "ded_partition.h"

#include <math.h>
#include <string.h>

#include "../core/ded_assert.h"

void ded_partition_equal(uint64_t count, unsigned k, uint64_t *off) {
  DED_ASSERT(k > 0);
  uint64_t base = count / k, extra = count % k, pos = 0;
  for (unsigned i = 0; i < k; i++) {
    off[i] = pos;
    pos += base + (i < extra ? 1 : 0);
  }
  DED_ASSERT(pos == count);
}

int ded_partition_weighted(uint64_t count, unsigned k, const double *frac, uint64_t *off) {
  DED_ASSERT(k > 0);
  /* Scaled by the largest fraction first: finite inputs whose plain sum
   * would overflow still have a finite total (at most k). */
  double top = 0.0;
  for (unsigned i = 0; i < k; i++) {
    if (!isfinite(frac[i]) || frac[i] < 0.0) return -1;
    top = DED_MAX(top, frac[i]);
  }
  if (!(top > 0.0)) return -1;
  double total = 0.0;
  for (unsigned i = 0; i < k; i++) total += frac[i] / top;
  /* Floors first, then hand out the remaining elements one by one to the
   * largest remainders. */
  uint64_t given = 0;
  for (unsigned i = 0; i < k; i++) {
    double exact = (double)count * (frac[i] / top / total);
    uint64_t fl = (uint64_t)floor(exact);
    if (fl > count) fl = count;
    off[i] = fl; /* shard sizes for now */
    given += fl;
  }
  while (given > count) { /* rounding of the double sum; take from the largest */
    unsigned big = 0;
    for (unsigned i = 1; i < k; i++)
      if (off[i] > off[big]) big = i;
    off[big]--;
    given--;
  }
  while (given < count) {
    unsigned best = k;
    double best_rem = -1.0;
    for (unsigned i = 0; i < k; i++) {
      if (frac[i] == 0.0) continue;
      double rem = (double)count * (frac[i] / top / total) - (double)off[i];
      if (rem > best_rem) {
        best_rem = rem;
        best = i;
      }
    }
    DED_ASSERT(best < k);
    off[best]++;
    given++;
  }
  uint64_t pos = 0;
  for (unsigned i = 0; i < k; i++) {
    uint64_t len = off[i];
    off[i] = pos;
    pos += len;
  }
  DED_ASSERT(pos == count);
  return 0;
}
