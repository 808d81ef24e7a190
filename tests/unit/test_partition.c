/*
 * test_partition.c: avg/ded_partition, how a vector is cut among reducers.
 *
 * Every peer computes the cut on its own, so it must be a pure function of
 * its inputs: shares that sum to the count exactly, equal ones differing
 * by at most one element, weighted ones within one element of the exact
 * proportion, ties resolved the same way everywhere.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "unit_util.h"

#include "avg/ded_partition.h"
#include "core/ded_limits.h"

#define K_MAX 64

/* A small deterministic generator: tests must not depend on libc rand. */
static uint64_t lcg_state = 0x9e3779b97f4a7c15ull;
static uint64_t lcg_next(void) {
  lcg_state = lcg_state * 6364136223846793005ull + 1442695040888963407ull;
  return lcg_state >> 11;
}

/* Offsets start at 0, never decrease, and the shards cover |count|. */
static void partition_check_cover(const uint64_t *off, unsigned k, uint64_t count) {
  assert_int_equal(off[0], 0);
  uint64_t sum = 0;
  for (unsigned i = 0; i < k; i++) {
    if (i > 0) assert_true(off[i] >= off[i - 1]);
    assert_true(off[i] <= count);
    sum += ded_shard_len(off, k, count, i);
  }
  assert_int_equal(sum, count);
}

static void test_partition_equal(void **state) {
  (void)state;
  const uint64_t counts[] = {0, 1, 2, 3, 7, 63, 64, 65, 1000, 1000003, DED_COUNT_MAX};
  for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
    for (unsigned k = 1; k <= K_MAX; k++) {
      uint64_t off[K_MAX];
      ded_partition_equal(counts[c], k, off);
      partition_check_cover(off, k, counts[c]);
      uint64_t base = counts[c] / k, extra = counts[c] % k;
      for (unsigned i = 0; i < k; i++) {
        /* The first count % k shards carry the extra element. */
        uint64_t len = ded_shard_len(off, k, counts[c], i);
        assert_int_equal(len, base + (i < extra ? 1 : 0));
      }
    }
  }
}

static void test_partition_weighted_sums_and_proportion(void **state) {
  (void)state;
  for (int trial = 0; trial < 2000; trial++) {
    unsigned k = 1 + (unsigned)(lcg_next() % K_MAX);
    uint64_t count = trial % 3 == 0 ? lcg_next() % 50 : lcg_next() % 10000000;
    double frac[K_MAX], total = 0.0;
    unsigned nonzero = 0;
    for (unsigned i = 0; i < k; i++) {
      /* About one share in five is zero: a peer that reduces nothing. */
      frac[i] = lcg_next() % 5 == 0 ? 0.0 : (double)(lcg_next() % 1000000) / 1000.0;
      total += frac[i];
      nonzero += frac[i] > 0.0;
    }
    if (nonzero == 0) {
      frac[k - 1] = 1.0;
      total = 1.0;
    }
    uint64_t off[K_MAX];
    assert_int_equal(ded_partition_weighted(count, k, frac, off), 0);
    partition_check_cover(off, k, count);
    for (unsigned i = 0; i < k; i++) {
      uint64_t len = ded_shard_len(off, k, count, i);
      if (frac[i] == 0.0) assert_int_equal(len, 0);
      double exact = (double)count * (frac[i] / total);
      if (!(fabs((double)len - exact) < 1.0))
        fail_msg("shard %u of %u: %llu elements for an exact share of %f", i, k,
                 (unsigned long long)len, exact);
    }
  }
}

/* Equal weights give exactly the equal partition: the remainders tie and
 * go to the lowest indices. */
static void test_partition_weighted_equal_weights(void **state) {
  (void)state;
  for (unsigned k = 1; k <= 16; k++) {
    for (uint64_t count = 0; count < 100; count++) {
      double frac[16];
      for (unsigned i = 0; i < k; i++) frac[i] = 0.25;
      uint64_t a[16], b[16];
      assert_int_equal(ded_partition_weighted(count, k, frac, a), 0);
      ded_partition_equal(count, k, b);
      assert_memory_equal(a, b, k * sizeof a[0]);
    }
  }
}

static void test_partition_weighted_ties_and_remainders(void **state) {
  (void)state;
  uint64_t off[4];
  /* One element, three equal claims: the first wins. */
  const double equal3[3] = {1, 1, 1};
  assert_int_equal(ded_partition_weighted(1, 3, equal3, off), 0);
  assert_int_equal(ded_shard_len(off, 3, 1, 0), 1);
  assert_int_equal(ded_shard_len(off, 3, 1, 1), 0);
  assert_int_equal(ded_shard_len(off, 3, 1, 2), 0);
  /* The largest remainder wins over the lower index. */
  const double skew[3] = {1, 1, 2};
  assert_int_equal(ded_partition_weighted(1, 3, skew, off), 0);
  assert_int_equal(ded_shard_len(off, 3, 1, 2), 1);
  /* 10 by 1:2:... remainders 0.333 / 0.666: 3 and 7. */
  const double third[2] = {1, 2};
  assert_int_equal(ded_partition_weighted(10, 2, third, off), 0);
  assert_int_equal(ded_shard_len(off, 2, 10, 0), 3);
  assert_int_equal(ded_shard_len(off, 2, 10, 1), 7);
  /* A zero share between two equal ones never gets the odd element. */
  const double gap[3] = {1, 0, 1};
  assert_int_equal(ded_partition_weighted(3, 3, gap, off), 0);
  assert_int_equal(ded_shard_len(off, 3, 3, 0), 2);
  assert_int_equal(ded_shard_len(off, 3, 3, 1), 0);
  assert_int_equal(ded_shard_len(off, 3, 3, 2), 1);
  /* Only one share: everything, and the scale of the fractions is irrelevant. */
  const double tiny[4] = {0, 0, 1e-300, 0};
  assert_int_equal(ded_partition_weighted(12345, 4, tiny, off), 0);
  assert_int_equal(ded_shard_len(off, 4, 12345, 2), 12345);
  assert_int_equal(off[3], 12345);
}

static void test_partition_weighted_invalid(void **state) {
  (void)state;
  uint64_t off[3] = {7, 7, 7};
  const double bad[][3] = {
      {1, -1, 1}, {1, NAN, 1}, {INFINITY, 1, 1}, {1, 1, -INFINITY}, {0, 0, 0}, {-0.0, 0, 0},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    assert_int_equal(ded_partition_weighted(100, 3, bad[i], off), -1);
}

/*
 * Runs ded_partition_weighted in a child process, so that an assertion
 * failing inside it fails this test instead of killing the whole program.
 * Returns its result, or sets |*aborted|.
 */
static int partition_weighted_isolated(uint64_t count, unsigned k, const double *frac,
                                       uint64_t *off, bool *aborted) {
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    int rv = ded_partition_weighted(count, k, frac, off);
    ssize_t w1 = write(fds[1], &rv, sizeof rv);
    ssize_t w2 = write(fds[1], off, k * sizeof *off);
    _exit(w1 == (ssize_t)sizeof rv && w2 == (ssize_t)(k * sizeof *off) ? 0 : 1);
  }
  close(fds[1]);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  *aborted = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  int rv = -2;
  if (!*aborted) {
    assert_int_equal(read(fds[0], &rv, sizeof rv), sizeof rv);
    assert_int_equal(read(fds[0], off, k * sizeof *off), k * sizeof *off);
  }
  close(fds[0]);
  return rv;
}

/*
 * Finite fractions whose sum overflows to infinity. Each is a legal input
 * (finite, non-negative), so the function must either refuse them (-1,
 * "unusable") or cut proportionally: here about 50/50/0. It must neither
 * abort nor return a cut unrelated to the fractions.
 */
static void test_partition_weighted_overflowing_sum(void **state) {
  (void)state;
  const double frac[3] = {DBL_MAX, DBL_MAX, 1.0};
  uint64_t off[3];
  bool aborted;
  int rv = partition_weighted_isolated(100, 3, frac, off, &aborted);
  if (aborted)
    fail_msg("ded_partition_weighted aborted on fractions {DBL_MAX, DBL_MAX, 1} "
             "(their sum is infinite) instead of returning -1");
  if (rv == -1) return;
  assert_int_equal(rv, 0);
  partition_check_cover(off, 3, 100);
  uint64_t third = ded_shard_len(off, 3, 100, 2);
  if (third > 1)
    fail_msg("a share of 1/DBL_MAX got %llu of 100 elements", (unsigned long long)third);
}

/* Counts near the MPI limit stay exact (doubles hold 2^31 exactly). */
static void test_partition_weighted_large_count(void **state) {
  (void)state;
  const double frac[5] = {0.1, 0.2, 0.3, 0.15, 0.25};
  uint64_t off[5];
  assert_int_equal(ded_partition_weighted(DED_COUNT_MAX, 5, frac, off), 0);
  partition_check_cover(off, 5, DED_COUNT_MAX);
  for (unsigned i = 0; i < 5; i++) {
    double exact = (double)DED_COUNT_MAX * frac[i];
    assert_true(fabs((double)ded_shard_len(off, 5, DED_COUNT_MAX, i) - exact) < 1.0);
  }
}

static void test_partition_shard_len_and_chunks(void **state) {
  (void)state;
  const uint64_t off[4] = {0, 10, 10, 25};
  assert_int_equal(ded_shard_len(off, 4, 30, 0), 10);
  assert_int_equal(ded_shard_len(off, 4, 30, 1), 0);
  assert_int_equal(ded_shard_len(off, 4, 30, 2), 15);
  assert_int_equal(ded_shard_len(off, 4, 30, 3), 5); /* the last ends at the count */
  assert_int_equal(ded_shard_len(off, 4, 25, 3), 0);
  assert_int_equal(ded_chunks(0, 16), 0);
  assert_int_equal(ded_chunks(1, 16), 1);
  assert_int_equal(ded_chunks(16, 16), 1);
  assert_int_equal(ded_chunks(17, 16), 2);
  assert_int_equal(ded_chunks(32, 16), 2);
  assert_int_equal(ded_chunks(DED_COUNT_MAX, 1), DED_COUNT_MAX);
  assert_int_equal(ded_chunks(DED_COUNT_MAX, DED_CHUNK_BYTES_MAX / 4),
                   (DED_COUNT_MAX + DED_CHUNK_BYTES_MAX / 4 - 1) / (DED_CHUNK_BYTES_MAX / 4));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_partition_equal),
      cmocka_unit_test(test_partition_weighted_sums_and_proportion),
      cmocka_unit_test(test_partition_weighted_equal_weights),
      cmocka_unit_test(test_partition_weighted_ties_and_remainders),
      cmocka_unit_test(test_partition_weighted_invalid),
      cmocka_unit_test(test_partition_weighted_overflowing_sum),
      cmocka_unit_test(test_partition_weighted_large_count),
      cmocka_unit_test(test_partition_shard_len_and_chunks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
