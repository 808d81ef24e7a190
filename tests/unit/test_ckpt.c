/*
 * test_ckpt.c: a backbone's checkpoint files (shim/io/ded_ckpt.h) in a
 * scratch directory.
 *
 * A checkpoint written is loaded back as it was, under its round's name,
 * with no temporary file left; only the newest K stay; a newest file that
 * is torn (truncated anywhere), corrupt (a byte flipped anywhere, in the
 * header or the state) or of another run is skipped, with a log line,
 * for the one before; a directory of such files loads nothing. The parser
 * takes only a whole file: every shorter prefix and every single flipped
 * byte is refused.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "unit_util.h"

#include "crypto/ded_ident.h"
#include "ded_ckpt.h"
#include "state/ded_image.h"

typedef struct scratch {
  char dir[256];
  uint8_t run[32];
  unsigned logged;
  char last_log[1024];
} scratch;

static int setup(void **state) {
  scratch *s = calloc(1, sizeof *s);
  assert_non_null(s);
  snprintf(s->dir, sizeof s->dir, "/tmp/test_ckpt.XXXXXX");
  assert_non_null(mkdtemp(s->dir));
  assert_int_equal(ded_crypto_init(), 0);
  ded_ckpt_run_hash("unit-ckpt", s->run);
  *state = s;
  return 0;
}

static int teardown(void **state) {
  scratch *s = *state;
  DIR *d = opendir(s->dir);
  struct dirent *e;
  while (d && (e = readdir(d))) {
    char p[600];
    if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2]))) continue;
    snprintf(p, sizeof p, "%s/%s", s->dir, e->d_name);
    unlink(p);
  }
  if (d) closedir(d);
  rmdir(s->dir);
  free(s);
  return 0;
}

static void on_log(void *user, const char *line) {
  scratch *s = user;
  s->logged++;
  snprintf(s->last_log, sizeof s->last_log, "%s", line);
}

/* A state image of two pieces (|n| floats from |seed|, a step counter),
 * as a snapshot of |round|. */
static ded_snapshot make_snap(uint64_t round, size_t n, uint32_t seed) {
  uint64_t sizes[2] = {n * 4, 8};
  size_t len = ded_image_table_bytes(2) + sizes[0] + sizes[1];
  uint8_t *b = malloc(len);
  assert_non_null(b);
  ded_image_write_table(b, sizes, 2);
  for (size_t i = ded_image_table_bytes(2); i < len; i++) b[i] = (uint8_t)(seed * 31 + i * 7);
  ded_snapshot s;
  memset(&s, 0, sizeof s);
  s.round = round;
  s.pos = round * 1000;
  s.step_rounds = 2;
  s.len = len;
  s.digest = ded_digest64(b, len);
  s.bytes = b;
  return s;
}

static void write_ok(scratch *s, const ded_snapshot *snap, unsigned keep) {
  char err[512] = "";
  if (ded_ckpt_write(s->dir, s->run, snap, 1234, keep, err, sizeof err) != 0) fail_msg("%s", err);
}

static void path_of(const scratch *s, uint64_t round, char *out, size_t len) {
  snprintf(out, len, "%s/ckpt-%020llu.ded", s->dir, (unsigned long long)round);
}

static unsigned count_files(const scratch *s, bool tmp_only) {
  DIR *d = opendir(s->dir);
  assert_non_null(d);
  unsigned n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2]))) continue;
    n += !tmp_only || strstr(e->d_name, ".tmp") != NULL;
  }
  closedir(d);
  return n;
}

/* 1 and the snapshot the directory loads (the caller frees its bytes). */
static int load(scratch *s, ded_snapshot *got) {
  char err[512] = "", name[1024] = "";
  int rv = ded_ckpt_load(s->dir, s->run, got, name, sizeof name, on_log, s, err, sizeof err);
  assert_true(rv >= 0);
  if (rv) {
    char want[600];
    path_of(s, got->round, want, sizeof want);
    assert_string_equal(name, want);
  }
  return rv;
}

static void assert_same(const ded_snapshot *a, const ded_snapshot *b) {
  assert_int_equal(a->round, b->round);
  assert_int_equal(a->pos, b->pos);
  assert_int_equal(a->step_rounds, b->step_rounds);
  assert_int_equal(a->len, b->len);
  assert_int_equal(a->digest, b->digest);
  assert_memory_equal(a->bytes, b->bytes, a->len);
}

static void test_ckpt_round_trip(void **state) {
  scratch *s = *state;
  ded_snapshot got;
  assert_int_equal(load(s, &got), 0); /* empty: none */
  assert_null(got.bytes);
  ded_snapshot a = make_snap(120, 1000, 1);
  write_ok(s, &a, 3);
  assert_int_equal(count_files(s, true), 0);
  assert_int_equal(count_files(s, false), 1);
  char p[600];
  path_of(s, 120, p, sizeof p);
  struct stat sb;
  assert_int_equal(stat(p, &sb), 0);
  assert_int_equal((uint64_t)sb.st_size, DED_CKPT_HDR_BYTES + a.len);
  assert_int_equal(sb.st_mode & 0777, 0600);
  assert_int_equal(load(s, &got), 1);
  assert_same(&a, &got);
  assert_int_equal(s->logged, 0);
  free(got.bytes);
  free(a.bytes);
}

static void test_ckpt_keeps_newest(void **state) {
  scratch *s = *state;
  const uint64_t rounds[] = {40, 10, 30, 20, 50};
  ded_snapshot last;
  for (size_t i = 0; i < 5; i++) {
    ded_snapshot a = make_snap(rounds[i], 100, (uint32_t)i);
    write_ok(s, &a, 2);
    if (i == 4) last = a;
    else free(a.bytes);
  }
  /* Newest by round, whatever the order written: 40 and 50. */
  assert_int_equal(count_files(s, false), 2);
  char p[600];
  path_of(s, 40, p, sizeof p);
  assert_int_equal(access(p, F_OK), 0);
  path_of(s, 50, p, sizeof p);
  assert_int_equal(access(p, F_OK), 0);
  ded_snapshot got;
  assert_int_equal(load(s, &got), 1);
  assert_same(&last, &got);
  free(got.bytes);
  free(last.bytes);
}

/* Breaks the newest of two checkpoints with |how|: the older loads. */
static void fall_back(scratch *s, void (*how)(const char *path, size_t len)) {
  ded_snapshot old = make_snap(100, 500, 7), new = make_snap(110, 500, 8);
  write_ok(s, &old, 3);
  write_ok(s, &new, 3);
  char p[600];
  path_of(s, 110, p, sizeof p);
  how(p, DED_CKPT_HDR_BYTES + new.len);
  s->logged = 0;
  ded_snapshot got;
  assert_int_equal(load(s, &got), 1);
  assert_same(&old, &got);
  assert_int_equal(s->logged, 1);
  assert_non_null(strstr(s->last_log, "ckpt-00000000000000000110.ded"));
  assert_non_null(strstr(s->last_log, "trying the one before"));
  free(got.bytes);
  free(old.bytes);
  free(new.bytes);
}

static void truncate_half(const char *path, size_t len) { assert_int_equal(truncate(path, (off_t)(len / 2)), 0); }
static void truncate_one(const char *path, size_t len) { assert_int_equal(truncate(path, (off_t)(len - 1)), 0); }
static void truncate_header(const char *path, size_t len) {
  (void)len;
  assert_int_equal(truncate(path, 100), 0);
}

static void flip_at(const char *path, size_t at) {
  int fd = open(path, O_RDWR);
  assert_true(fd >= 0);
  uint8_t b;
  assert_int_equal(pread(fd, &b, 1, (off_t)at), 1);
  b ^= 0x10;
  assert_int_equal(pwrite(fd, &b, 1, (off_t)at), 1);
  close(fd);
}

static void flip_payload(const char *path, size_t len) { flip_at(path, len - 3); }
static void flip_round(const char *path, size_t len) {
  (void)len;
  flip_at(path, 48);
}
static void flip_payload_hash(const char *path, size_t len) {
  (void)len;
  flip_at(path, 100);
}

static void test_ckpt_torn_falls_back(void **state) {
  scratch *s = *state;
  fall_back(s, truncate_half);
}

static void test_ckpt_torn_by_one_falls_back(void **state) {
  scratch *s = *state;
  fall_back(s, truncate_one);
}

static void test_ckpt_torn_header_falls_back(void **state) {
  scratch *s = *state;
  fall_back(s, truncate_header);
}

static void test_ckpt_corrupt_state_falls_back(void **state) {
  scratch *s = *state;
  fall_back(s, flip_payload);
}

static void test_ckpt_corrupt_header_falls_back(void **state) {
  scratch *s = *state;
  fall_back(s, flip_round);
}

static void test_ckpt_corrupt_hash_falls_back(void **state) {
  scratch *s = *state;
  fall_back(s, flip_payload_hash);
}

/* Another run's checkpoint in the directory is not this run's state. */
static void test_ckpt_other_run_skipped(void **state) {
  scratch *s = *state;
  ded_snapshot a = make_snap(5, 50, 1);
  write_ok(s, &a, 3);
  uint8_t mine[32];
  memcpy(mine, s->run, 32);
  ded_ckpt_run_hash("another-run", s->run);
  ded_snapshot b = make_snap(9, 50, 2);
  write_ok(s, &b, 3);
  memcpy(s->run, mine, 32);
  ded_snapshot got;
  assert_int_equal(load(s, &got), 1);
  assert_same(&a, &got);
  assert_non_null(strstr(s->last_log, "another run's"));
  free(got.bytes);
  /* Only the other run's: nothing. */
  char p[600];
  path_of(s, 5, p, sizeof p);
  unlink(p);
  assert_int_equal(load(s, &got), 0);
  assert_null(got.bytes);
  free(a.bytes);
  free(b.bytes);
}

/* Every prefix, and every byte flipped, of a whole file is refused. */
static void test_ckpt_parse_whole_only(void **state) {
  scratch *s = *state;
  ded_snapshot a = make_snap(77, 20, 3);
  size_t n = DED_CKPT_HDR_BYTES + a.len;
  uint8_t *f = malloc(n);
  assert_non_null(f);
  ded_ckpt_header(f, s->run, &a, 99);
  memcpy(f + DED_CKPT_HDR_BYTES, a.bytes, a.len);
  ded_snapshot v;
  uint64_t wall = 0;
  const char *why = "unset";
  assert_int_equal(ded_ckpt_parse(f, n, s->run, &v, &wall, &why), 0);
  assert_null(why);
  assert_int_equal(wall, 99);
  assert_true(v.bytes == f + DED_CKPT_HDR_BYTES);
  assert_int_equal(v.round, 77);
  for (size_t len = 0; len < n; len++) {
    if (ded_ckpt_parse(f, len, s->run, &v, NULL, &why) != -1) fail_msg("prefix of %zu taken", len);
    assert_non_null(why);
  }
  for (size_t i = 0; i < n; i++) {
    f[i] ^= 0x01;
    if (ded_ckpt_parse(f, n, s->run, &v, NULL, &why) != -1) fail_msg("byte %zu flipped taken", i);
    f[i] ^= 0x01;
  }
  free(f);
  free(a.bytes);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_ckpt_round_trip, setup, teardown),
      cmocka_unit_test_setup_teardown(test_ckpt_keeps_newest, setup, teardown),
      cmocka_unit_test_setup_teardown(test_ckpt_torn_falls_back, setup, teardown),
      cmocka_unit_test_setup_teardown(test_ckpt_torn_by_one_falls_back, setup, teardown),
      cmocka_unit_test_setup_teardown(test_ckpt_torn_header_falls_back, setup, teardown),
      cmocka_unit_test_setup_teardown(test_ckpt_corrupt_state_falls_back, setup, teardown),
      cmocka_unit_test_setup_teardown(test_ckpt_corrupt_header_falls_back, setup, teardown),
      cmocka_unit_test_setup_teardown(test_ckpt_corrupt_hash_falls_back, setup, teardown),
      cmocka_unit_test_setup_teardown(test_ckpt_other_run_skipped, setup, teardown),
      cmocka_unit_test_setup_teardown(test_ckpt_parse_whole_only, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
