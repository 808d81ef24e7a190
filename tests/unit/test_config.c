/*
 * test_config.c: the DEDMPI_* environment, parsed and checked
 * (mpi/ded_config.c), for what a typo becomes.
 *
 * An unknown DEDMPI_ name is an error by default, naming the known name
 * nearest it; DEDMPI_UNKNOWN_VARS=warn makes it a warning (anything else
 * there is an error). DEDMPI_SWARM_KEY text that looks like a key gone
 * wrong is an error that never echoes the text.
 */
#include <stdio.h>

#include "unit_util.h"

#include "ded_config.h"

/* The environment of a test: NAME=VALUE strings, NULL-terminated. */
static char *const *test_env;

static const char *env_get(const char *name) {
  size_t n = strlen(name);
  for (char *const *e = test_env; *e; e++)
    if (!strncmp(*e, name, n) && (*e)[n] == '=') return *e + n + 1;
  return NULL;
}

static int load(char *const *env, ded_config *cfg, char *errors, char *warnings) {
  test_env = env;
  return ded_config_load(cfg, env_get, (char **)env, errors, 2048, warnings, 2048);
}

static void test_config_unknown_vars(void **state) {
  (void)state;
  ded_config cfg;
  char errors[2048], warnings[2048];
  char *typo[] = {"DEDMPI_MINPEERS=3", "DEDMPI_RUN=x", "OTHER_VAR=1", "DEDMPI_NO_SUCH_THING=1",
                  NULL};
  assert_int_equal(load(typo, &cfg, errors, warnings), 2);
  assert_string_equal(errors,
                      "unknown variable DEDMPI_MINPEERS (did you mean DEDMPI_MIN_PEERS?): not a "
                      "dedmpi setting (DEDMPI_UNKNOWN_VARS=warn lets it pass with a warning)\n"
                      "unknown variable DEDMPI_NO_SUCH_THING: not a dedmpi setting "
                      "(DEDMPI_UNKNOWN_VARS=warn lets it pass with a warning)\n");
  assert_string_equal(warnings, "");
  assert_string_equal(cfg.run, "x");

  char *warn[] = {"DEDMPI_UNKNOWN_VARS=warn", "DEDMPI_SWARMKEY_FILE=k", NULL};
  assert_int_equal(load(warn, &cfg, errors, warnings), 0);
  assert_string_equal(errors, "");
  assert_string_equal(warnings, "unknown variable DEDMPI_SWARMKEY_FILE (did you mean "
                                "DEDMPI_SWARM_KEY_FILE?) (ignored: DEDMPI_UNKNOWN_VARS=warn)\n");

  char *bad[] = {"DEDMPI_UNKNOWN_VARS=ignore", NULL};
  assert_int_equal(load(bad, &cfg, errors, warnings), 1);
  assert_string_equal(errors, "DEDMPI_UNKNOWN_VARS='ignore': expected error or warn\n");

  /* Every name in the table is known, dedrun's own included. */
  char names[64][64], *all[65];
  size_t n = 0;
  for (const ded_config_var *v = ded_config_vars(); v->name; v++) {
    assert_true(n < 64);
    snprintf(names[n], sizeof names[n], "%s=", v->name);
    all[n] = names[n];
    n++;
  }
  all[n] = NULL;
  load(all, &cfg, errors, warnings);
  assert_null(strstr(errors, "unknown variable"));
  assert_string_equal(warnings, "");
}

static void test_config_swarm_key(void **state) {
  (void)state;
  ded_config cfg;
  char errors[2048], warnings[2048];
  char *typo[] = {"DEDMPI_SWARM_KEY=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde",
                  NULL};
  assert_int_equal(load(typo, &cfg, errors, warnings), 1);
  assert_string_equal(errors, "DEDMPI_SWARM_KEY='...': 63 hex digits: a key has 64; a typo? (a "
                              "passphrase of hex digits only is refused)\n");
  assert_string_equal(cfg.swarm_key, "");
  char *ok[] = {"DEDMPI_SWARM_KEY=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                NULL};
  assert_int_equal(load(ok, &cfg, errors, warnings), 0);
  assert_int_equal(strlen(cfg.swarm_key), 64);
  char *pass[] = {"DEDMPI_SWARM_KEY=correct horse battery staple", NULL};
  assert_int_equal(load(pass, &cfg, errors, warnings), 0);
  char *notkey[] = {"DEDMPI_SWARM_KEY=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdeX",
                    NULL};
  assert_int_equal(load(notkey, &cfg, errors, warnings), 1);
  assert_non_null(strstr(errors, "64 characters but not hex digits"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_config_unknown_vars),
      cmocka_unit_test(test_config_swarm_key),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
