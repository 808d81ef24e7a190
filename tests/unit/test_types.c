/*
 * test_types.c: core/ded_types and core/ded_err, the small value types.
 *
 * Addresses come from the user (DEDMPI_JOIN, DEDMPI_LISTEN): the parser
 * must take exactly the documented forms and refuse the rest.
 */
#include "unit_util.h"

#include "core/ded_types.h"

static void test_types_addr_parse_v4(void **state) {
  (void)state;
  ded_addr a;
  assert_int_equal(ded_addr_parse("1.2.3.4:5", &a), 0);
  assert_int_equal(a.family, 4);
  const uint8_t ip[4] = {1, 2, 3, 4};
  assert_memory_equal(a.ip, ip, 4);
  assert_int_equal(a.port, 5);
  assert_false(ded_addr_is_any(&a));
  assert_int_equal(ded_addr_parse("255.255.255.255:65535", &a), 0);
  assert_int_equal(a.port, 65535);
  assert_int_equal(a.ip[3], 255);
}

static void test_types_addr_parse_any(void **state) {
  (void)state;
  ded_addr a;
  memset(&a, 0xee, sizeof a);
  assert_int_equal(ded_addr_parse(":7000", &a), 0);
  assert_int_equal(a.family, 4);
  assert_int_equal(a.port, 7000);
  assert_true(ded_addr_is_any(&a));
  static const uint8_t zero[16];
  assert_memory_equal(a.ip, zero, 16); /* nothing left from before */
  assert_int_equal(ded_addr_parse("0.0.0.0:1", &a), 0);
  assert_true(ded_addr_is_any(&a));
  assert_int_equal(ded_addr_parse("[::]:1", &a), 0);
  assert_true(ded_addr_is_any(&a));
}

static void test_types_addr_parse_v6(void **state) {
  (void)state;
  ded_addr a;
  assert_int_equal(ded_addr_parse("[::1]:80", &a), 0);
  assert_int_equal(a.family, 6);
  assert_int_equal(a.port, 80);
  for (int i = 0; i < 15; i++) assert_int_equal(a.ip[i], 0);
  assert_int_equal(a.ip[15], 1);
  assert_false(ded_addr_is_any(&a));
  assert_int_equal(ded_addr_parse("[2001:db8::7:8]:443", &a), 0);
  assert_int_equal(a.ip[0], 0x20);
  assert_int_equal(a.ip[1], 0x01);
  assert_int_equal(a.ip[15], 8);
  assert_int_equal(ded_addr_parse("[::ffff:1.2.3.4]:9", &a), 0);
  assert_int_equal(a.family, 6);
  assert_int_equal(a.ip[12], 1);
}

static void test_types_addr_parse_invalid(void **state) {
  (void)state;
  const char *bad[] = {
      "x",           "1.2.3.4",     "1.2.3.4:99999", "1.2.3.4:-1",     "[::1]80",
      "",            ":",           "1.2.3.4:",      "1.2.3.4:65536",  "1.2.3.4:8x",
      "1.2.3:5",     "1.2.3.4.5:5", "256.1.1.1:5",   "host.example:80", "::1:80",
      "[::1]",       "[::1:80",     "[1.2.3.4]:80",  "[]:80",          "1.2.3.4: 5",
      "1.2.3.4:+5",  "[::1]:",      "1.2.3.4:99999999999999999999999",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ded_addr a;
    if (ded_addr_parse(bad[i], &a) != DED_ERR_INVALID_ARG) fail_msg("accepted \"%s\"", bad[i]);
  }
  /* A host too long for any numeric address. */
  char longer[200];
  memset(longer, '1', sizeof longer);
  memcpy(longer + sizeof longer - 4, ":80", 4);
  ded_addr a;
  assert_int_equal(ded_addr_parse(longer, &a), DED_ERR_INVALID_ARG);
  longer[0] = '[';
  memcpy(longer + sizeof longer - 5, "]:80", 5);
  assert_int_equal(ded_addr_parse(longer, &a), DED_ERR_INVALID_ARG);
}

static void test_types_addr_format_round_trip(void **state) {
  (void)state;
  const char *texts[] = {"1.2.3.4:5", "[::1]:80", "10.0.0.255:65535", "[2001:db8::1]:7000",
                         "0.0.0.0:0"};
  for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
    ded_addr a, b;
    assert_int_equal(ded_addr_parse(texts[i], &a), 0);
    char buf[64];
    ded_addr_format(&a, buf, sizeof buf);
    assert_string_equal(buf, texts[i]);
    assert_int_equal(ded_addr_parse(buf, &b), 0);
    assert_true(ded_addr_equal(&a, &b));
  }
  /* ":port" is the any address. */
  ded_addr a;
  assert_int_equal(ded_addr_parse(":7000", &a), 0);
  char buf[64];
  ded_addr_format(&a, buf, sizeof buf);
  assert_string_equal(buf, "0.0.0.0:7000");
  /* A short buffer is truncated, never overrun. */
  char tiny[6];
  memset(tiny, 'z', sizeof tiny);
  ded_addr_format(&a, tiny, 5);
  assert_string_equal(tiny, "0.0.");
  assert_int_equal(tiny[5], 'z');
  /* An unset address prints something harmless. */
  ded_addr unset;
  memset(&unset, 0, sizeof unset);
  ded_addr_format(&unset, buf, sizeof buf);
  assert_string_equal(buf, "?:0");
}

static void test_types_addr_equal(void **state) {
  (void)state;
  ded_addr a, b;
  assert_int_equal(ded_addr_parse("1.2.3.4:5", &a), 0);
  assert_int_equal(ded_addr_parse("1.2.3.4:5", &b), 0);
  assert_true(ded_addr_equal(&a, &b));
  /* Bytes past an IPv4 address do not matter. */
  b.ip[10] = 99;
  assert_true(ded_addr_equal(&a, &b));
  assert_int_equal(ded_addr_parse("1.2.3.4:6", &b), 0);
  assert_false(ded_addr_equal(&a, &b));
  assert_int_equal(ded_addr_parse("1.2.3.5:5", &b), 0);
  assert_false(ded_addr_equal(&a, &b));
  assert_int_equal(ded_addr_parse("[::ffff:1.2.3.4]:5", &b), 0);
  assert_false(ded_addr_equal(&a, &b));
}

static void test_types_id_short(void **state) {
  (void)state;
  uint8_t id[DED_ID_BYTES] = {0x1a, 0x2b, 0x3c, 0x4d, 0xff};
  char out[9];
  ded_id_short(id, out);
  assert_string_equal(out, "1a2b3c4d");
  memset(id, 0, sizeof id);
  ded_id_short(id, out);
  assert_string_equal(out, "00000000");
}

static void test_types_dtype_size(void **state) {
  (void)state;
  assert_int_equal(ded_dtype_size(DED_DTYPE_F32), 4);
  assert_int_equal(ded_dtype_size(DED_DTYPE_F64), 8);
  assert_int_equal(ded_dtype_size(0), 0);
  assert_int_equal(ded_dtype_size(3), 0);
  assert_int_equal(ded_dtype_size(255), 0);
}

static void test_types_errors(void **state) {
  (void)state;
  const int codes[] = {DED_ERR_INVALID_ARG, DED_ERR_PROTO,     DED_ERR_FRAME_SIZE,
                       DED_ERR_SIGNATURE,   DED_ERR_EXPIRED,   DED_ERR_WRONG_RUN,
                       DED_ERR_SIZE_MISMATCH, DED_ERR_TIMEOUT, DED_ERR_PEER_LOST,
                       DED_ERR_LIMIT,       DED_ERR_BOOTSTRAP, DED_ERR_RENDEZVOUS,
                       DED_ERR_CLOSING,     DED_ERR_VERSION,   DED_ERR_AUTH,
                       DED_ERR_NOT_ADMITTED, DED_ERR_NOMEM,    DED_ERR_INTERNAL};
  const size_t n = sizeof codes / sizeof codes[0];
  for (size_t i = 0; i < n; i++) {
    const char *s = ded_strerror(codes[i]);
    assert_non_null(s);
    assert_string_not_equal(s, "unknown error");
    /* Each code has its own text. */
    for (size_t j = 0; j < i; j++) assert_string_not_equal(s, ded_strerror(codes[j]));
    assert_true(ded_err_is_fatal(codes[i]) == (codes[i] <= DED_ERR_FATAL));
  }
  assert_string_equal(ded_strerror(0), "success");
  assert_string_equal(ded_strerror(-1), "unknown error");
  assert_string_equal(ded_strerror(12345), "unknown error");
  assert_false(ded_err_is_fatal(DED_ERR_PROTO));
  assert_true(ded_err_is_fatal(DED_ERR_NOMEM));
  assert_false(ded_err_is_fatal(0));
}

/* ------------------------------------------------------------ digest */

/* A buffer whose bytes all differ from their neighbours. */
static void types_fill(uint8_t *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(i * 131 + seed * 17 + 5);
}

static void test_types_digest_deterministic(void **state) {
  (void)state;
  uint8_t a[200], b[200];
  types_fill(a, sizeof a, 1);
  memcpy(b, a, sizeof a);
  const size_t lens[] = {0, 1, 7, 31, 32, 33, 64, 100, 200};
  for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
    uint64_t d = ded_digest64(a, lens[i]);
    assert_int_equal(ded_digest64(a, lens[i]), d);
    /* The bytes, not where they are. */
    assert_int_equal(ded_digest64(b, lens[i]), d);
  }
  /* The input is only read. */
  assert_memory_equal(a, b, sizeof a);
  /* No bytes at all: NULL is as good as any pointer. */
  assert_int_equal(ded_digest64(NULL, 0), ded_digest64(a, 0));
}

/* Any one byte changed, anywhere, changes the digest: 100 bytes are
 * three whole 32-byte blocks and a tail of 4. */
static void test_types_digest_byte_flips(void **state) {
  (void)state;
  uint8_t buf[100];
  const uint8_t masks[] = {0x01, 0x80, 0xff, 0x5a};
  const unsigned seeds[] = {0, 1};
  for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s++) {
    if (seeds[s] == 0) memset(buf, 0, sizeof buf);
    else types_fill(buf, sizeof buf, seeds[s]);
    const uint64_t d = ded_digest64(buf, sizeof buf);
    for (size_t i = 0; i < sizeof buf; i++)
      for (size_t m = 0; m < sizeof masks; m++) {
        buf[i] ^= masks[m];
        if (ded_digest64(buf, sizeof buf) == d)
          fail_msg("byte %zu ^ 0x%02x leaves the digest as it was", i, masks[m]);
        buf[i] ^= masks[m];
      }
    assert_int_equal(ded_digest64(buf, sizeof buf), d);
  }
  /* Two bytes of a block swapped. */
  types_fill(buf, sizeof buf, 2);
  const uint64_t d = ded_digest64(buf, sizeof buf);
  uint8_t t = buf[3];
  buf[3] = buf[4];
  buf[4] = t;
  assert_true(ded_digest64(buf, sizeof buf) != d);
}

/* Runs of zero bytes of different lengths have different digests: the
 * length counts, not only the bytes. */
static void test_types_digest_lengths(void **state) {
  (void)state;
  enum { N = 71 };
  static const uint8_t zero[N];
  uint64_t d[N];
  for (size_t n = 0; n < N; n++) {
    d[n] = ded_digest64(zero, n);
    for (size_t m = 0; m < n; m++)
      if (d[m] == d[n]) fail_msg("%zu and %zu zero bytes have the same digest", m, n);
  }
  /* A prefix differs from the whole. */
  uint8_t buf[N];
  types_fill(buf, sizeof buf, 3);
  for (size_t n = 1; n < N; n++) assert_true(ded_digest64(buf, n - 1) != ded_digest64(buf, n));
}

/* Input at any alignment gives what an aligned copy gives. */
static void test_types_digest_unaligned(void **state) {
  (void)state;
  uint64_t aligned[40]; /* 320 bytes, 8-aligned */
  uint8_t raw[320 + 16];
  const size_t lens[] = {0, 1, 8, 31, 32, 33, 63, 64, 65, 100, 255, 320};
  for (size_t off = 0; off < 8; off++)
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
      uint8_t *p = raw + off;
      types_fill(p, lens[i], (unsigned)i);
      memcpy(aligned, p, lens[i]);
      if (ded_digest64(p, lens[i]) != ded_digest64(aligned, lens[i]))
        fail_msg("%zu bytes at offset %zu: digest differs from the aligned copy", lens[i], off);
    }
}

/* The digest is on the wire (STATE_OFFER, STATE_GET, STATE_DATA): peers
 * must agree on it, so a change here is a change of the protocol. */
#define DIGEST_KNOWN_0 0x75e22adce7a9a241ull
#define DIGEST_KNOWN_1 0x2bbc392ccc772a5dull
#define DIGEST_KNOWN_32 0x8880a588e9bb941bull
#define DIGEST_KNOWN_100 0xba84212874759f20ull

static void test_types_digest_known(void **state) {
  (void)state;
  uint8_t buf[100];
  for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)i;
  assert_int_equal(ded_digest64(buf, 0), DIGEST_KNOWN_0);
  assert_int_equal(ded_digest64(buf, 1), DIGEST_KNOWN_1);
  assert_int_equal(ded_digest64(buf, 32), DIGEST_KNOWN_32);
  assert_int_equal(ded_digest64(buf, 100), DIGEST_KNOWN_100);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_types_addr_parse_v4),
      cmocka_unit_test(test_types_addr_parse_any),
      cmocka_unit_test(test_types_addr_parse_v6),
      cmocka_unit_test(test_types_addr_parse_invalid),
      cmocka_unit_test(test_types_addr_format_round_trip),
      cmocka_unit_test(test_types_addr_equal),
      cmocka_unit_test(test_types_id_short),
      cmocka_unit_test(test_types_dtype_size),
      cmocka_unit_test(test_types_errors),
      cmocka_unit_test(test_types_digest_deterministic),
      cmocka_unit_test(test_types_digest_byte_flips),
      cmocka_unit_test(test_types_digest_lengths),
      cmocka_unit_test(test_types_digest_unaligned),
      cmocka_unit_test(test_types_digest_known),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
