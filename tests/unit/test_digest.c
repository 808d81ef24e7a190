/*
 * test_digest.c: avg/ded_digest, the digest of a round's result.
 *
 * Whatever order the bytes come in, and in whatever pieces, the digest
 * once they are all in is that of the whole buffer at once
 * (ded_digest_of); it is whole exactly when every byte is in; a reset
 * keeps the blocks inside the kept range and nothing else; one byte
 * changed anywhere changes it; out of memory leaves nothing to free.
 */
#include "unit_util.h"

#include <stdio.h>

#include "avg/ded_digest.h"

#define BLK DED_DIGEST_BLOCK_BYTES

/* A deterministic generator (xorshift64*), so a failure is reproducible. */
static uint64_t rng_next(uint64_t *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 0x2545f4914f6cdd1dull;
}

static uint8_t *filled(uint64_t bytes, uint64_t seed) {
  uint8_t *b = malloc(bytes ? bytes : 1);
  assert_non_null(b);
  for (uint64_t i = 0; i < bytes; i++) b[i] = (uint8_t)rng_next(&seed);
  return b;
}

/* Pieces of |piece| bytes (the last one shorter), in a random order. */
static uint64_t *shuffled_pieces(uint64_t bytes, uint64_t piece, uint64_t *n, uint64_t *seed) {
  *n = (bytes + piece - 1) / piece;
  uint64_t *order = malloc((*n ? *n : 1) * sizeof *order);
  assert_non_null(order);
  for (uint64_t i = 0; i < *n; i++) order[i] = i;
  for (uint64_t i = *n; i > 1; i--) {
    uint64_t j = rng_next(seed) % i, t = order[i - 1];
    order[i - 1] = order[j];
    order[j] = t;
  }
  return order;
}

/* Every byte in, piece by piece in a random order: whole only after the
 * last one, and then the digest of the buffer at once. */
static void feed_all(ded_digest *d, const uint8_t *buf, uint64_t bytes, uint64_t piece,
                     uint64_t *seed) {
  uint64_t n;
  uint64_t *order = shuffled_pieces(bytes, piece, &n, seed);
  for (uint64_t i = 0; i < n; i++) {
    assert_false(ded_digest_whole(d));
    uint64_t lo = order[i] * piece, len = bytes - lo < piece ? bytes - lo : piece;
    ded_digest_got(d, buf, lo, len);
  }
  free(order);
  assert_true(ded_digest_whole(d));
}

static const uint64_t sizes[] = {1, 7, BLK - 1, BLK, BLK + 1, 2 * BLK, 3 * BLK + BLK / 2 + 3};
static const uint64_t pieces[] = {1000, 4096, BLK, BLK + 8, 3 * BLK};

static void test_digest_any_order(void **state) {
  (void)state;
  uint64_t seed = 0x5eed;
  for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
    uint8_t *buf = filled(sizes[s], s + 1);
    uint8_t want[DED_DIGEST_BYTES], got[DED_DIGEST_BYTES];
    ded_digest_of(buf, sizes[s], want);
    for (size_t p = 0; p < sizeof pieces / sizeof *pieces; p++) {
      ded_digest d;
      assert_int_equal(ded_digest_init(&d, NULL, sizes[s]), 0);
      feed_all(&d, buf, sizes[s], pieces[p], &seed);
      ded_digest_final(&d, got);
      assert_memory_equal(got, want, sizeof want);
      ded_digest_free(&d, NULL);
    }
    free(buf);
  }
}

/* An empty result is whole at once; its digest is that of no bytes. */
static void test_digest_empty(void **state) {
  (void)state;
  ded_digest d;
  assert_int_equal(ded_digest_init(&d, NULL, 0), 0);
  assert_true(ded_digest_whole(&d));
  uint8_t got[DED_DIGEST_BYTES], want[DED_DIGEST_BYTES];
  ded_digest_final(&d, got);
  ded_digest_of(NULL, 0, want);
  assert_memory_equal(got, want, sizeof want);
  ded_digest_free(&d, NULL);
}

/* One byte changed, in any block (first, middle, the short last one) or
 * at a block's edge, gives another digest; so do the same bytes under
 * another length. */
static void test_digest_one_byte(void **state) {
  (void)state;
  const uint64_t bytes = 3 * BLK + 100;
  uint8_t *buf = filled(bytes, 42);
  uint8_t base[DED_DIGEST_BYTES], d[DED_DIGEST_BYTES];
  ded_digest_of(buf, bytes, base);
  const uint64_t at[] = {0, 1, BLK - 1, BLK, 2 * BLK + 5, bytes - 1};
  for (size_t i = 0; i < sizeof at / sizeof *at; i++) {
    buf[at[i]] ^= 0x01;
    ded_digest_of(buf, bytes, d);
    assert_memory_not_equal(d, base, sizeof d);
    buf[at[i]] ^= 0x01;
  }
  ded_digest_of(buf, bytes, d);
  assert_memory_equal(d, base, sizeof d);
  ded_digest_of(buf, bytes - 1, d);
  assert_memory_not_equal(d, base, sizeof d);
  free(buf);
}

/* The bytes change after a reset (a result fetched again from another
 * holder): the digest is that of the new bytes, with the kept range's
 * bytes (our own shard, unchanged) counted without coming in again. A
 * kept range that cuts blocks keeps those blocks' kept bytes only. */
static void test_digest_reset(void **state) {
  (void)state;
  const uint64_t bytes = 5 * BLK + 777;
  const uint64_t keeps[][2] = {
      {0, 0}, {BLK, 2 * BLK}, {BLK / 2, BLK}, {3 * BLK + 9, bytes - 3 * BLK - 9}, {0, bytes}};
  uint64_t seed = 7;
  for (size_t k = 0; k < sizeof keeps / sizeof *keeps; k++) {
    uint64_t klo = keeps[k][0], khi = klo + keeps[k][1];
    uint8_t *buf = filled(bytes, 1);
    ded_digest d;
    assert_int_equal(ded_digest_init(&d, NULL, bytes), 0);
    feed_all(&d, buf, bytes, 5000, &seed);
    ded_digest_reset(&d, klo, khi - klo);
    assert_int_equal(ded_digest_whole(&d), khi - klo == bytes);
    /* Other bytes outside the kept range, coming in again in pieces. */
    uint8_t *other = filled(bytes, 2);
    memcpy(other + klo, buf + klo, khi - klo);
    const uint64_t span[2][2] = {{0, klo}, {khi, bytes}};
    for (int r = 0; r < 2; r++)
      for (uint64_t lo = span[r][0]; lo < span[r][1]; lo += 3000) {
        uint64_t len = span[r][1] - lo < 3000 ? span[r][1] - lo : 3000;
        memcpy(buf + lo, other + lo, len);
        ded_digest_got(&d, buf, lo, len);
      }
    assert_true(ded_digest_whole(&d));
    uint8_t got[DED_DIGEST_BYTES], want[DED_DIGEST_BYTES];
    ded_digest_final(&d, got);
    ded_digest_of(other, bytes, want);
    assert_memory_equal(got, want, sizeof want);
    ded_digest_free(&d, NULL);
    free(buf);
    free(other);
  }
}

/* Out of memory at either allocation: DED_ERR_NOMEM, nothing held. */
static void test_digest_nomem(void **state) {
  (void)state;
  for (long n = 0;; n++) {
    unit_failmem fm;
    unit_failmem_init(&fm, n);
    ded_digest d;
    int rv = ded_digest_init(&d, &fm.mem, 10 * BLK);
    if (fm.failed) {
      assert_int_equal(rv, DED_ERR_NOMEM);
      assert_int_equal(fm.live, 0);
      continue;
    }
    assert_int_equal(rv, 0);
    assert_true(n > 0);
    ded_digest_free(&d, &fm.mem);
    assert_int_equal(fm.live, 0);
    break;
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_digest_any_order), cmocka_unit_test(test_digest_empty),
      cmocka_unit_test(test_digest_one_byte),  cmocka_unit_test(test_digest_reset),
      cmocka_unit_test(test_digest_nomem),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
