/*
 * replay.c: runs a fuzz target over files, without libFuzzer.
 *
 * Usage: fuzz_<target>_replay PATH...  (files, or directories whose
 * regular files are replayed in name order). Each input is copied into a
 * buffer of exactly its size, so an over-read shows under ASan just as it
 * would under libFuzzer. A target signals a bug by crashing; replay
 * returns nonzero when it found no input at all, so a missing corpus
 * cannot pass silently.
 */
#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int replay_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
    return -1;
  }
  uint8_t *buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len == cap) {
      cap = cap ? 2 * cap : 4096;
      uint8_t *p = realloc(buf, cap);
      FUZZ_CHECK(p);
      buf = p;
    }
    size_t n = fread(buf + len, 1, cap - len, f);
    len += n;
    if (n == 0) break;
  }
  int err = ferror(f);
  fclose(f);
  if (err) {
    fprintf(stderr, "replay: %s: read error\n", path);
    free(buf);
    return -1;
  }
  /* Exactly |len| bytes, as libFuzzer hands them. */
  uint8_t *exact = malloc(len ? len : 1);
  FUZZ_CHECK(exact);
  if (len) memcpy(exact, buf, len);
  free(buf);
  LLVMFuzzerTestOneInput(exact, len);
  free(exact);
  return 0;
}

static int replay_name_cmp(const struct dirent **a, const struct dirent **b) {
  return strcmp((*a)->d_name, (*b)->d_name);
}

/* Replays |path|; adds the inputs run to |*count|. */
static int replay_path(const char *path, unsigned *count) {
  struct stat st;
  if (stat(path, &st) != 0) {
    fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
    return -1;
  }
  if (!S_ISDIR(st.st_mode)) {
    if (replay_file(path) != 0) return -1;
    ++*count;
    return 0;
  }
  struct dirent **names;
  int n = scandir(path, &names, NULL, replay_name_cmp);
  if (n < 0) {
    fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
    return -1;
  }
  int rv = 0;
  for (int i = 0; i < n; i++) {
    char file[4096];
    snprintf(file, sizeof file, "%s/%s", path, names[i]->d_name);
    if (rv == 0 && names[i]->d_name[0] != '.' && stat(file, &st) == 0 && S_ISREG(st.st_mode)) {
      if (replay_file(file) != 0) rv = -1;
      else ++*count;
    }
    free(names[i]);
  }
  free(names);
  return rv;
}

int main(int argc, char **argv) {
  unsigned count = 0;
  for (int i = 1; i < argc; i++)
    if (replay_path(argv[i], &count) != 0) return 1;
  printf("replayed %u inputs\n", count);
  return count > 0 ? 0 : 1;
}
