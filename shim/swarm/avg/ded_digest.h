/*
 * ded_digest.h: the digest of a round's result, as HAVE carries it.
 *
 * The digest of a result of B bytes (the whole vector, every shard, in the
 * element type's bytes) is BLAKE2b-256 of the concatenation, in order, of
 * the BLAKE2b-256 digests of its blocks of DED_DIGEST_BLOCK_BYTES (the
 * last one shorter). A member hashes each block as soon as its last byte
 * is in, while the rest of the result is still on its way, so the whole
 * digest costs one short hash once the result is whole.
 *
 * Owns: one result's block digests and, per block, how many of its bytes
 * are not yet in (struct ded_digest).
 *
 * Invariants: a block's digest is set exactly when none of its bytes is
 * missing, and is then that of the buffer's bytes as they were when the
 * last of them came in (a caller never changes bytes it said are in); the
 * missing counts never go below zero (a caller says each byte is in at
 * most once between resets).
 */
#ifndef DED_DIGEST_H
#define DED_DIGEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/ded_mem.h"

#define DED_DIGEST_BLOCK_BYTES (64u * 1024u)
#define DED_DIGEST_BYTES 32

typedef struct ded_digest {
  uint64_t bytes;    /* the result's length */
  uint64_t nblk;     /* its blocks */
  uint64_t complete; /* blocks with no byte missing */
  uint8_t *blk;      /* nblk digests */
  uint32_t *missing; /* per block, bytes not in yet */
} ded_digest;

/* For a result of |bytes| bytes, none of them in yet. 0 or DED_ERR_NOMEM
 * (then |d| holds nothing to free). */
int ded_digest_init(ded_digest *d, const ded_mem *mem, uint64_t bytes);

void ded_digest_free(ded_digest *d, const ded_mem *mem);

/* Bytes [off, off + len) of |buf| (the whole result's buffer) are in, for
 * good: every block they complete is hashed. */
void ded_digest_got(ded_digest *d, const uint8_t *buf, uint64_t off, uint64_t len);

/* Every byte is missing again but those of [keep_off, keep_off + keep_len)
 * (a result fetched again, but for our own shard): blocks wholly inside
 * that range keep their digests. */
void ded_digest_reset(ded_digest *d, uint64_t keep_off, uint64_t keep_len);

/* True once no byte is missing. */
bool ded_digest_whole(const ded_digest *d);

/* The digest; only once ded_digest_whole. */
void ded_digest_final(const ded_digest *d, uint8_t out[DED_DIGEST_BYTES]);

/* The same digest of a whole buffer at once (what a peer that holds those
 * bytes says): for tests and tools. */
void ded_digest_of(const void *buf, uint64_t bytes, uint8_t out[DED_DIGEST_BYTES]);

#endif /* DED_DIGEST_H */
