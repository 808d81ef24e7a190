/*
 * ded_ckpt.c: checkpoint files (see ded_ckpt.h).
 */
#define _GNU_SOURCE
#include "ded_ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/ded_limits.h"
#include "core/ded_types.h"
#include "crypto/ded_ident.h"
#include "state/ded_image.h"

static const uint8_t ckpt_magic[8] = {'D', 'E', 'D', 'C', 'K', 'P', 'T', 0};

static uint64_t rd64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static uint32_t rd32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void wr64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void wr32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

void ded_ckpt_run_hash(const char *run, uint8_t out[32]) { ded_hash32(run, strlen(run), out); }

void ded_ckpt_header(uint8_t hdr[DED_CKPT_HDR_BYTES], const uint8_t run_hash[32],
                     const ded_snapshot *snap, uint64_t wall_ms) {
  memset(hdr, 0, DED_CKPT_HDR_BYTES);
  memcpy(hdr, ckpt_magic, 8);
  wr32(hdr + 8, DED_CKPT_VERSION);
  wr32(hdr + 12, DED_CKPT_HDR_BYTES);
  memcpy(hdr + 16, run_hash, 32);
  wr64(hdr + 48, snap->round);
  wr64(hdr + 56, snap->pos);
  wr32(hdr + 64, snap->step_rounds);
  wr64(hdr + 72, snap->len);
  wr64(hdr + 80, snap->digest);
  wr64(hdr + 88, wall_ms);
  ded_hash32(snap->len ? snap->bytes : hdr, snap->len, hdr + 96);
  ded_hash32(hdr, 128, hdr + 128);
}

int ded_ckpt_parse(const uint8_t *file, size_t len, const uint8_t run_hash[32], ded_snapshot *snap,
                   uint64_t *wall_ms, const char **why) {
  uint8_t h[32];
  memset(snap, 0, sizeof *snap);
  *why = "shorter than its header";
  if (len < DED_CKPT_HDR_BYTES) return -1;
  *why = "not a checkpoint file";
  if (memcmp(file, ckpt_magic, 8) != 0) return -1;
  *why = "a version this build does not read";
  if (rd32(file + 8) != DED_CKPT_VERSION || rd32(file + 12) != DED_CKPT_HDR_BYTES) return -1;
  *why = "its header does not match its hash";
  ded_hash32(file, 128, h);
  if (memcmp(h, file + 128, 32) != 0) return -1;
  *why = "another run's";
  if (memcmp(file + 16, run_hash, 32) != 0) return -1;
  uint64_t round = rd64(file + 48), pos = rd64(file + 56), n = rd64(file + 72);
  uint32_t step = rd32(file + 64);
  *why = "a header field out of bounds";
  if (round == 0 || pos > DED_POS_MAX || step == 0 || step > DED_STATE_STEP_ROUNDS_MAX ||
      rd32(file + 68) != 0 || n > DED_STATE_BYTES_MAX)
    return -1;
  *why = "torn: its length is not the header's";
  if (n != len - DED_CKPT_HDR_BYTES) return -1;
  const uint8_t *bytes = file + DED_CKPT_HDR_BYTES;
  *why = "its bytes do not match their hash";
  ded_hash32(n ? bytes : file, n, h);
  if (memcmp(h, file + 96, 32) != 0) return -1;
  *why = "its bytes do not match their digest";
  if (ded_digest64(bytes, n) != rd64(file + 80)) return -1;
  ded_image_view v;
  *why = "not a state image";
  if (ded_image_parse(bytes, n, &v) != 0) return -1;
  snap->round = round;
  snap->pos = pos;
  snap->step_rounds = step;
  snap->len = n;
  snap->digest = rd64(file + 80);
  snap->bytes = (uint8_t *)(uintptr_t)bytes;
  if (wall_ms) *wall_ms = rd64(file + 88);
  *why = NULL;
  return 0;
}

/* ckpt-<20 digits>.ded: 1 and its round, else 0. */
static int ckpt_name_round(const char *name, uint64_t *round) {
  if (strncmp(name, "ckpt-", 5) != 0 || strlen(name) != 5 + 20 + 4 || strcmp(name + 25, ".ded"))
    return 0;
  uint64_t r = 0;
  for (int i = 5; i < 25; i++) {
    if (name[i] < '0' || name[i] > '9') return 0;
    if (r > (UINT64_MAX - 9) / 10) return 0;
    r = r * 10 + (uint64_t)(name[i] - '0');
  }
  *round = r;
  return 1;
}

static int cmp_desc(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* The rounds of the checkpoints in |dir|, newest first (malloc'd, |*n|);
 * -1 if |dir| cannot be read. */
static int ckpt_list(const char *dir, uint64_t **out, size_t *n) {
  *out = NULL;
  *n = 0;
  DIR *dp = opendir(dir);
  if (!dp) return -1;
  size_t cap = 0;
  struct dirent *e;
  while ((e = readdir(dp))) {
    uint64_t r;
    if (!ckpt_name_round(e->d_name, &r)) continue;
    if (*n == cap) {
      size_t nc = cap ? cap * 2 : 16;
      uint64_t *v = realloc(*out, nc * sizeof *v);
      if (!v) break;
      *out = v;
      cap = nc;
    }
    (*out)[(*n)++] = r;
  }
  closedir(dp);
  if (*n) qsort(*out, *n, sizeof **out, cmp_desc);
  return 0;
}

static int write_all(int fd, const uint8_t *p, uint64_t n) {
  while (n) {
    ssize_t w = write(fd, p, n > (1u << 30) ? (1u << 30) : (size_t)n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    n -= (uint64_t)w;
  }
  return 0;
}

int ded_ckpt_write(const char *dir, const uint8_t run_hash[32], const ded_snapshot *snap,
                   uint64_t wall_ms, unsigned keep, char *err, size_t errlen) {
  char tmp[4096], path[4096];
  uint8_t hdr[DED_CKPT_HDR_BYTES];
  if (snprintf(path, sizeof path, "%s/ckpt-%020llu.ded", dir, (unsigned long long)snap->round) >=
          (int)sizeof path ||
      snprintf(tmp, sizeof tmp, "%s/.ckpt-%020llu.ded.%d.tmp", dir, (unsigned long long)snap->round,
               (int)getpid()) >= (int)sizeof tmp) {
    snprintf(err, errlen, "checkpoint directory name too long: %s", dir);
    return -1;
  }
  ded_ckpt_header(hdr, run_hash, snap, wall_ms);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    snprintf(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
    return -1;
  }
  if (write_all(fd, hdr, sizeof hdr) != 0 || write_all(fd, snap->bytes, snap->len) != 0 ||
      fsync(fd) != 0) {
    snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
    close(fd);
    unlink(tmp);
    return -1;
  }
  if (close(fd) != 0 || rename(tmp, path) != 0) {
    snprintf(err, errlen, "cannot put %s in place: %s", path, strerror(errno));
    unlink(tmp);
    return -1;
  }
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0 || fsync(dfd) != 0) {
    snprintf(err, errlen, "cannot sync the directory %s: %s", dir, strerror(errno));
    if (dfd >= 0) close(dfd);
    return -1;
  }
  close(dfd);
  uint64_t *rounds;
  size_t n;
  if (ckpt_list(dir, &rounds, &n) == 0) {
    for (size_t i = keep ? keep : 1; i < n; i++) {
      char old[4096];
      snprintf(old, sizeof old, "%s/ckpt-%020llu.ded", dir, (unsigned long long)rounds[i]);
      unlink(old);
    }
  }
  free(rounds);
  return 0;
}

/* |path|'s bytes (malloc'd, |*len|); -1 with errno. */
static int read_file(const char *path, uint8_t **out, size_t *len) {
  *out = NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) ||
      (uint64_t)sb.st_size > DED_CKPT_HDR_BYTES + (uint64_t)DED_STATE_BYTES_MAX ||
      (uint64_t)sb.st_size > SIZE_MAX) {
    close(fd);
    errno = EFBIG;
    return -1;
  }
  size_t n = (size_t)sb.st_size, got = 0;
  uint8_t *buf = malloc(n ? n : 1);
  if (!buf) {
    close(fd);
    errno = ENOMEM;
    return -1;
  }
  while (got < n) {
    ssize_t r = read(fd, buf + got, n - got > (1u << 30) ? (1u << 30) : n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break; /* shrank under us: the parse says it is torn */
    got += (size_t)r;
  }
  close(fd);
  *out = buf;
  *len = got;
  return 0;
}

int ded_ckpt_load(const char *dir, const uint8_t run_hash[32], ded_snapshot *snap, char *name,
                  size_t namelen, void (*log)(void *user, const char *line), void *user, char *err,
                  size_t errlen) {
  memset(snap, 0, sizeof *snap);
  uint64_t *rounds;
  size_t n;
  if (ckpt_list(dir, &rounds, &n) != 0) {
    snprintf(err, errlen, "cannot read the checkpoint directory %s: %s", dir, strerror(errno));
    return -1;
  }
  int found = 0;
  for (size_t i = 0; i < n && !found; i++) {
    char path[4096], line[4600];
    snprintf(path, sizeof path, "%s/ckpt-%020llu.ded", dir, (unsigned long long)rounds[i]);
    uint8_t *buf;
    size_t len;
    const char *why;
    if (read_file(path, &buf, &len) != 0) {
      snprintf(line, sizeof line, "checkpoint %s cannot be read (%s)%s", path, strerror(errno),
               i + 1 < n ? ": trying the one before" : "");
      if (log) log(user, line);
      continue;
    }
    ded_snapshot s;
    if (ded_ckpt_parse(buf, len, run_hash, &s, NULL, &why) != 0) {
      snprintf(line, sizeof line, "checkpoint %s is unusable (%s)%s", path, why,
               i + 1 < n ? ": trying the one before" : "");
      if (log) log(user, line);
      free(buf);
      continue;
    }
    if (s.round != rounds[i]) {
      snprintf(line, sizeof line, "checkpoint %s holds round %llu, not its name's%s", path,
               (unsigned long long)s.round, i + 1 < n ? ": trying the one before" : "");
      if (log) log(user, line);
      free(buf);
      continue;
    }
    memmove(buf, buf + DED_CKPT_HDR_BYTES, s.len);
    *snap = s;
    snap->bytes = buf;
    if (name) snprintf(name, namelen, "%s", path);
    found = 1;
  }
  free(rounds);
  return found;
}
