/*
 * test_meter.c: core/ded_meter, link rates from a peer's own traffic.
 *
 * Busy periods give samples of bytes over time, their first bytes not
 * counted (they fill empty buffers at once, one socket or a dozen); short periods give none; long
 * ones give one a second; a download period ends at a gap; the estimate is
 * the largest recent sample, so a period slowed by the other side does
 * not pull it down, and old samples age out.
 */
#include <math.h>

#include "unit_util.h"

#include "core/ded_meter.h"

#define MS 1000000ull

/* |total| bytes in pieces of |piece| at |Bps|, from |t0|, as an upload. */
static uint64_t upload(ded_meter *m, uint64_t t0, uint64_t total, uint64_t piece, double Bps) {
  ded_meter_begin(m);
  uint64_t t = t0;
  ded_meter_add(m, 512 * 1024, t); /* the socket buffers fill at once */
  for (uint64_t sent = 0; sent < total; sent += piece) {
    t += (uint64_t)((double)piece / Bps * 1e9);
    ded_meter_add(m, piece, t);
  }
  ded_meter_end(m);
  return t;
}

static void test_meter_upload_rate(void **state) {
  (void)state;
  ded_meter m;
  memset(&m, 0, sizeof m);
  assert_true(ded_meter_rate(&m) == 0.0);
  upload(&m, 0, 8u << 20, 64 * 1024, 12.5e6);
  /* The burst into the buffers is not counted: the link's rate. */
  assert_true(fabs(ded_meter_rate(&m) - 12.5e6) < 0.01 * 12.5e6);
}

/* Twelve connections (3 peers, 4 streams each) each take 384 KiB at the
 * start, a millisecond apart, then the link drains at 12.5 MB/s for 1.2 s:
 * the buffers' 4.5 MiB must not read as link rate (counted, they made a
 * 100 Mbit/s link read 150 in the WAN lab). */
static void test_meter_upload_many_sockets(void **state) {
  (void)state;
  ded_meter m;
  memset(&m, 0, sizeof m);
  ded_meter_begin(&m);
  uint64_t t = 0;
  for (int i = 0; i < 12; i++) ded_meter_add(&m, 384 * 1024, t += MS);
  for (uint64_t sent = 0; sent < 15000000; sent += 125000) ded_meter_add(&m, 125000, t += 10 * MS);
  ded_meter_end(&m);
  assert_int_equal(m.nsample, 2);
  assert_true(fabs(ded_meter_rate(&m) - 12.5e6) < 0.02 * 12.5e6);
}

static void test_meter_short_periods_ignored(void **state) {
  (void)state;
  ded_meter m;
  memset(&m, 0, sizeof m);
  upload(&m, 0, 512 * 1024, 64 * 1024, 1e9); /* too few bytes and too short */
  assert_true(ded_meter_rate(&m) == 0.0);
  ded_meter_begin(&m);
  ded_meter_end(&m); /* nothing moved */
  assert_true(ded_meter_rate(&m) == 0.0);
}

static void test_meter_max_of_recent(void **state) {
  (void)state;
  ded_meter m;
  memset(&m, 0, sizeof m);
  uint64_t t = upload(&m, 0, 4u << 20, 64 * 1024, 10e6);
  /* A period slowed by a slow receiver does not lower the estimate. */
  t = upload(&m, t + 100 * MS, 4u << 20, 64 * 1024, 2e6);
  assert_true(fabs(ded_meter_rate(&m) - 10e6) < 0.01 * 10e6);
  /* After DED_METER_SAMPLES slower periods the old one is gone. */
  for (int i = 0; i < DED_METER_SAMPLES; i++) t = upload(&m, t + 100 * MS, 4u << 20, 64 * 1024, 5e6);
  assert_true(fabs(ded_meter_rate(&m) - 5e6) < 0.01 * 5e6);
}

/* Early until DED_METER_SETTLED samples: a lower bound till then. */
static void test_meter_early_until_settled(void **state) {
  (void)state;
  ded_meter m;
  memset(&m, 0, sizeof m);
  assert_true(ded_meter_early(&m));
  uint64_t t = 0;
  for (int i = 0; i < DED_METER_SETTLED; i++) {
    assert_true(ded_meter_early(&m));
    t = upload(&m, t + 100 * MS, 4u << 20, 64 * 1024, 10e6);
  }
  assert_false(ded_meter_early(&m));
  assert_true(fabs(ded_meter_rate(&m) - 10e6) < 0.01 * 10e6);
}

static void test_meter_long_period_samples_each_second(void **state) {
  (void)state;
  ded_meter m;
  memset(&m, 0, sizeof m);
  ded_meter_begin(&m);
  uint64_t t = 0;
  ded_meter_add(&m, 1, t);
  /* 3 s at 1 MB/s, then the rate rises: the estimate follows before the
   * period ends. */
  for (int i = 0; i < 3000; i++) ded_meter_add(&m, 1000, t += MS);
  assert_true(fabs(ded_meter_rate(&m) - 1e6) < 0.01 * 1e6);
  for (int i = 0; i < 3000; i++) ded_meter_add(&m, 4000, t += MS);
  assert_true(fabs(ded_meter_rate(&m) - 4e6) < 0.01 * 4e6);
}

static void test_meter_download_gaps(void **state) {
  (void)state;
  ded_meter m;
  memset(&m, 0, sizeof m);
  uint64_t t = 0;
  /* 2 MB at 2 MB/s, a pause longer than the gap, then 4 MB at 8 MB/s:
   * the pause is in neither period. */
  for (int i = 0; i <= 1000; i++) ded_meter_arrive(&m, 2000, t += MS);
  t += 10 * DED_METER_GAP_NS;
  for (int i = 0; i <= 500; i++) ded_meter_arrive(&m, 8000, t += MS);
  ded_meter_end(&m);
  assert_int_equal(m.nsample, 2);
  assert_true(fabs(ded_meter_rate(&m) - 8e6) < 0.01 * 8e6);
  double lo = m.sample[0] < m.sample[1] ? m.sample[0] : m.sample[1];
  assert_true(fabs(lo - 2e6) < 0.01 * 2e6);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_meter_upload_rate),
      cmocka_unit_test(test_meter_upload_many_sockets),
      cmocka_unit_test(test_meter_short_periods_ignored),
      cmocka_unit_test(test_meter_max_of_recent),
      cmocka_unit_test(test_meter_long_period_samples_each_second),
      cmocka_unit_test(test_meter_early_until_settled),
      cmocka_unit_test(test_meter_download_gaps),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
