#include "ded_digest.h"

#include <sodium.h>
#include <string.h>

#include "../core/ded_assert.h"
#include "../core/ded_err.h"
#include "../core/ded_msg.h"
#include "../crypto/ded_ident.h"

_Static_assert(DED_DIGEST_BYTES == DED_RESULT_DIGEST_BYTES, "HAVE carries this digest");

static uint64_t blk_len(const ded_digest *d, uint64_t b) {
  uint64_t lo = b * DED_DIGEST_BLOCK_BYTES;
  return d->bytes - lo < DED_DIGEST_BLOCK_BYTES ? d->bytes - lo : DED_DIGEST_BLOCK_BYTES;
}

int ded_digest_init(ded_digest *d, const ded_mem *mem, uint64_t bytes) {
  memset(d, 0, sizeof *d);
  d->bytes = bytes;
  d->nblk = (bytes + DED_DIGEST_BLOCK_BYTES - 1) / DED_DIGEST_BLOCK_BYTES;
  d->blk = ded_mem_malloc(mem, (size_t)(d->nblk ? d->nblk : 1) * DED_DIGEST_BYTES);
  d->missing = ded_mem_malloc(mem, (size_t)(d->nblk ? d->nblk : 1) * sizeof *d->missing);
  if (!d->blk || !d->missing) {
    ded_digest_free(d, mem);
    return DED_ERR_NOMEM;
  }
  ded_digest_reset(d, 0, 0);
  return 0;
}

void ded_digest_free(ded_digest *d, const ded_mem *mem) {
  ded_mem_free(mem, d->blk);
  ded_mem_free(mem, d->missing);
  memset(d, 0, sizeof *d);
}

void ded_digest_got(ded_digest *d, const uint8_t *buf, uint64_t off, uint64_t len) {
  DED_ASSERT(off <= d->bytes && len <= d->bytes - off);
  while (len > 0) {
    uint64_t b = off / DED_DIGEST_BLOCK_BYTES;
    uint64_t in = DED_DIGEST_BLOCK_BYTES - off % DED_DIGEST_BLOCK_BYTES;
    if (in > len) in = len;
    DED_ASSERT(d->missing[b] >= in);
    d->missing[b] -= (uint32_t)in;
    if (d->missing[b] == 0) {
      ded_hash32(buf + b * DED_DIGEST_BLOCK_BYTES, blk_len(d, b), d->blk + b * DED_DIGEST_BYTES);
      d->complete++;
    }
    off += in;
    len -= in;
  }
}

void ded_digest_reset(ded_digest *d, uint64_t keep_off, uint64_t keep_len) {
  uint64_t keep_hi = keep_off + keep_len;
  d->complete = 0;
  for (uint64_t b = 0; b < d->nblk; b++) {
    uint64_t lo = b * DED_DIGEST_BLOCK_BYTES, hi = lo + blk_len(d, b);
    uint64_t klo = keep_off > lo ? keep_off : lo, khi = keep_hi < hi ? keep_hi : hi;
    uint64_t kept = khi > klo ? khi - klo : 0;
    d->missing[b] = (uint32_t)(hi - lo - kept);
    d->complete += d->missing[b] == 0;
  }
}

bool ded_digest_whole(const ded_digest *d) { return d->complete == d->nblk; }

void ded_digest_final(const ded_digest *d, uint8_t out[DED_DIGEST_BYTES]) {
  DED_ASSERT(ded_digest_whole(d));
  ded_hash32(d->blk, (size_t)d->nblk * DED_DIGEST_BYTES, out);
}

void ded_digest_of(const void *buf, uint64_t bytes, uint8_t out[DED_DIGEST_BYTES]) {
  uint64_t nblk = (bytes + DED_DIGEST_BLOCK_BYTES - 1) / DED_DIGEST_BLOCK_BYTES;
  crypto_generichash_state st;
  int rv = crypto_generichash_init(&st, NULL, 0, DED_DIGEST_BYTES);
  DED_ASSERT(rv == 0);
  for (uint64_t b = 0; b < nblk; b++) {
    uint64_t lo = b * DED_DIGEST_BLOCK_BYTES;
    uint64_t n = bytes - lo < DED_DIGEST_BLOCK_BYTES ? bytes - lo : DED_DIGEST_BLOCK_BYTES;
    uint8_t h[DED_DIGEST_BYTES];
    ded_hash32((const uint8_t *)buf + lo, (size_t)n, h);
    rv = crypto_generichash_update(&st, h, sizeof h);
    DED_ASSERT(rv == 0);
  }
  rv = crypto_generichash_final(&st, out, DED_DIGEST_BYTES);
  DED_ASSERT(rv == 0);
}
