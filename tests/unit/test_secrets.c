/*
 * test_secrets.c: the run's secret as a job reads it (io/ded_secrets.c,
 * on the rule of crypto/ded_ident.c's ded_swarm_key_suspect).
 *
 * 64 hex digits are a key; a passphrase is stretched; text that looks like
 * a key gone wrong (hex digits only but not 64 of them, 64 with blanks
 * around, 64 characters not all hex) is refused with a message that
 * counts and never echoes it, whether it comes from DEDMPI_SWARM_KEY or
 * a key file. A key file must exist, be a regular file and be this user's
 * alone; ded_secrets_swarm_key_check (dedrun's check) refuses what the
 * job would, without stretching anything.
 */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "unit_util.h"

#include "ded_secrets.h"

#define HEX64 "0123456789abcdef0123456789ABCDEF0123456789abcdef0123456789abcdef"

static void test_swarm_key_suspect(void **state) {
  (void)state;
  char why[256];
  static const struct {
    const char *text;
    const char *why; /* NULL: not suspect */
  } cases[] = {
      {HEX64, NULL},
      {"correct horse battery staple", NULL},
      {"a passphrase of sixty characters that are not all hex digits", NULL},
      {HEX64 "0", "65 hex digits: a key has 64; a typo? (a passphrase of hex digits only is refused)"},
      {&HEX64[1], "63 hex digits: a key has 64; a typo? (a passphrase of hex digits only is refused)"},
      {"0123456789012345", "16 hex digits: a key has 64; a typo?"},
      {"deadbeef", "8 hex digits"},
      {" " HEX64, "64 hex digits with blanks around them: a key is the digits alone; remove the blanks"},
      {HEX64 "\n", "64 hex digits with blanks around them"},
      {"\t" HEX64 " ", "64 hex digits with blanks around them"},
      {"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdeg",
       "64 characters but not hex digits: a mistyped key?"},
      {"   ", NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    why[0] = '\0';
    bool suspect = ded_swarm_key_suspect(cases[i].text, strlen(cases[i].text), why, sizeof why);
    if (suspect != (cases[i].why != NULL)) fail_msg("case %zu: suspect %d", i, suspect);
    if (cases[i].why && strncmp(why, cases[i].why, strlen(cases[i].why)) != 0)
      fail_msg("case %zu: '%s'", i, why);
  }
  /* The derivation refuses it too, whoever calls it. */
  uint8_t run[DED_RUN_ID_BYTES], psk[DED_SWARM_KEY_BYTES], want[DED_SWARM_KEY_BYTES];
  unit_run_id(run);
  assert_int_equal(ded_swarm_key_derive(&HEX64[1], 63, run, psk), DED_ERR_INVALID_ARG);
  assert_int_equal(ded_swarm_key_derive(" " HEX64, 65, run, psk), DED_ERR_INVALID_ARG);
  assert_int_equal(ded_swarm_key_derive(HEX64, 64, run, psk), 0);
  assert_int_equal(ded_hex_decode(HEX64, 64, want, sizeof want), 0);
  assert_memory_equal(psk, want, sizeof want);
}

static char dir[] = "/tmp/test_secrets.XXXXXX";

/* A file |name| in |dir| holding |text|, with |mode|; its path. */
static const char *key_file(const char *name, const char *text, mode_t mode) {
  static char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  assert_int_equal(chmod(path, mode), 0);
  return path;
}

/* Both entry points give the same verdict and message for |file| (or
 * |key|): 0, or an error that contains |want|. */
static void expect(const char *key, const char *file, const char *want) {
  char err[512] = "", err2[512] = "";
  uint8_t run[DED_RUN_ID_BYTES], psk[DED_SWARM_KEY_BYTES];
  unit_run_id(run);
  bool has = true;
  int rv = ded_secrets_swarm_key(key, file, run, psk, &has, err, sizeof err);
  int rv2 = ded_secrets_swarm_key_check(key, file, err2, sizeof err2);
  if (!want) {
    if (rv || rv2) fail_msg("refused: %s / %s", err, err2);
    assert_int_equal(has, (file && file[0]) || (key && key[0]));
    return;
  }
  assert_int_equal(rv, DED_ERR_INVALID_ARG);
  assert_int_equal(rv2, DED_ERR_INVALID_ARG);
  assert_false(has);
  assert_string_equal(err, err2);
  if (!strstr(err, want)) fail_msg("'%s' does not say '%s'", err, want);
}

static void test_swarm_key_sources(void **state) {
  (void)state;
  assert_non_null(mkdtemp(dir));
  expect(NULL, NULL, NULL); /* no secret: an open run */
  expect(HEX64, NULL, NULL);
  expect(&HEX64[1], NULL, "DEDMPI_SWARM_KEY: 63 hex digits: a key has 64");
  expect("short", NULL, "DEDMPI_SWARM_KEY: expected 64 hex digits or a passphrase of 16");
  expect(NULL, key_file("ok", HEX64 "  \n# the rest is not read\n", 0600), NULL);
  expect(NULL, key_file("ok_pass", "correct horse battery staple\n", 0400), NULL);
  expect(NULL, key_file("typo", HEX64 "0\n", 0600),
         "DEDMPI_SWARM_KEY_FILE: 65 hex digits: a key has 64; a typo?");
  expect(NULL, key_file("lead", " " HEX64 "\n", 0600),
         "DEDMPI_SWARM_KEY_FILE: 64 hex digits with blanks around them");
  expect(NULL, key_file("open", HEX64 "\n", 0644),
         "others may read or write it (mode 644): it holds the run's secret; chmod 600 it");
  expect(NULL, key_file("group", HEX64 "\n", 0640), "(mode 640)");
  expect(NULL, key_file("empty", "\nsecond line\n", 0600), "its first line is empty");
  char missing[600];
  snprintf(missing, sizeof missing, "%s/missing", dir);
  expect(NULL, missing, "No such file or directory");
  expect(NULL, dir, "not a regular file");
  /* The file wins over the text (the config refuses both at once). */
  expect("short", key_file("ok", HEX64 "\n", 0600), NULL);
  for (const char *n = "ok\0ok_pass\0typo\0lead\0open\0group\0empty\0"; *n; n += strlen(n) + 1) {
    char p[600];
    snprintf(p, sizeof p, "%s/%s", dir, n);
    unlink(p);
  }
  rmdir(dir);
}

int main(void) {
  assert_int_equal(ded_crypto_init(), 0);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_swarm_key_suspect),
      cmocka_unit_test(test_swarm_key_sources),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
