/*
 * ded_secrets.c: the identity file, the run's secret and access control
 * (see ded_secrets.h).
 */
#define _GNU_SOURCE
#include "ded_secrets.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "crypto/ded_ident.h"
#include "ded_driver.h"

/* ---------------------------------------------------------------- identity */

/* An identity file: this line, then the seed in hex, then a newline. */
#define ID_FILE_MAGIC "dedmpi-identity-v1 "
#define ID_FILE_BYTES (sizeof ID_FILE_MAGIC - 1 + 2 * DED_SEED_BYTES + 1)

/* Reads |fd| until |cap| bytes, EOF or an error: how many were read. */
static size_t read_upto(int fd, void *buf, size_t cap) {
  size_t n = 0;
  while (n < cap) {
    ssize_t r = read(fd, (char *)buf + n, cap - n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    n += (size_t)r;
  }
  return n;
}

/* The open |fd| of |path| (named by variable |var|) must be a regular
 * file of this user that no one else may read or write: it holds |what|. */
static int private_file_check(int fd, const char *var, const char *path, const char *what,
                              char *err, size_t errlen) {
  struct stat st;
  if (fstat(fd, &st) != 0) {
    snprintf(err, errlen, "%s=%s: %s", var, path, strerror(errno));
    return DED_ERR_INVALID_ARG;
  }
  if (!S_ISREG(st.st_mode)) {
    snprintf(err, errlen, "%s=%s: not a regular file", var, path);
    return DED_ERR_INVALID_ARG;
  }
  if (st.st_uid != geteuid()) {
    snprintf(err, errlen, "%s=%s: owned by uid %u, not by this user (%u)", var, path,
             (unsigned)st.st_uid, (unsigned)geteuid());
    return DED_ERR_INVALID_ARG;
  }
  if (st.st_mode & 077) {
    snprintf(err, errlen, "%s=%s: others may read or write it (mode %03o): it holds %s; chmod 600 it",
             var, path, (unsigned)(st.st_mode & 0777), what);
    return DED_ERR_INVALID_ARG;
  }
  return 0;
}

/* Reads the seed from the open |fd| of |path|, a private file. */
static int identity_read(int fd, const char *path, uint8_t seed[DED_SEED_BYTES], char *err,
                         size_t errlen) {
  int rv = private_file_check(fd, "DEDMPI_IDENTITY_FILE", path, "this peer's secret key", err,
                              errlen);
  if (rv) return rv;
  char buf[ID_FILE_BYTES + 1];
  size_t n = read_upto(fd, buf, sizeof buf);
  bool ok = n == ID_FILE_BYTES && memcmp(buf, ID_FILE_MAGIC, sizeof ID_FILE_MAGIC - 1) == 0 &&
            buf[ID_FILE_BYTES - 1] == '\n' &&
            ded_hex_decode(buf + sizeof ID_FILE_MAGIC - 1, 2 * DED_SEED_BYTES, seed,
                           DED_SEED_BYTES) == 0;
  ded_wipe(buf, sizeof buf);
  if (!ok) {
    ded_wipe(seed, DED_SEED_BYTES);
    snprintf(err, errlen,
             "DEDMPI_IDENTITY_FILE=%s: not a dedmpi identity file (one line: '%s' and %d hex "
             "digits)",
             path, ID_FILE_MAGIC "", 2 * DED_SEED_BYTES);
    return DED_ERR_INVALID_ARG;
  }
  return 0;
}

/* Writes a fresh seed to |path|, which must not exist: the whole file is
 * written under a temporary name and linked into place, so a process that
 * races us reads either nothing or all of it. EEXIST if it appeared. */
static int identity_create(const char *path, uint8_t seed[DED_SEED_BYTES], char *err,
                           size_t errlen) {
  char tmp[4096];
  if ((size_t)snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid()) >= sizeof tmp) {
    snprintf(err, errlen, "DEDMPI_IDENTITY_FILE=%s: name too long", path);
    return DED_ERR_INVALID_ARG;
  }
  if (getrandom(seed, DED_SEED_BYTES, 0) != (ssize_t)DED_SEED_BYTES) {
    snprintf(err, errlen, "getrandom failed: %s", strerror(errno));
    return DED_ERR_INTERNAL;
  }
  char buf[ID_FILE_BYTES + 1]; /* + the NUL hex encoding ends with */
  memcpy(buf, ID_FILE_MAGIC, sizeof ID_FILE_MAGIC - 1);
  ded_hex_encode(seed, DED_SEED_BYTES, buf + sizeof ID_FILE_MAGIC - 1);
  buf[ID_FILE_BYTES - 1] = '\n';
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  bool ok = fd >= 0;
  size_t n = 0;
  while (ok && n < ID_FILE_BYTES) {
    ssize_t w = write(fd, buf + n, ID_FILE_BYTES - n);
    if (w < 0 && errno == EINTR) continue;
    ok = w > 0;
    if (ok) n += (size_t)w;
  }
  ok = ok && fsync(fd) == 0;
  int saved = errno;
  if (fd >= 0) close(fd);
  ded_wipe(buf, sizeof buf);
  if (ok && link(tmp, path) != 0) {
    saved = errno;
    ok = false;
  }
  if (fd >= 0) unlink(tmp);
  if (!ok) {
    ded_wipe(seed, DED_SEED_BYTES);
    if (saved == EEXIST) return -EEXIST;
    snprintf(err, errlen, "DEDMPI_IDENTITY_FILE=%s: cannot create it: %s", path,
             strerror(saved));
    return DED_ERR_INVALID_ARG;
  }
  return 0;
}

int ded_secrets_identity_seed(const char *path, uint8_t seed[DED_SEED_BYTES], bool *created,
                              char *err, size_t errlen) {
  *created = false;
  if (!path || !path[0]) {
    if (getrandom(seed, DED_SEED_BYTES, 0) == (ssize_t)DED_SEED_BYTES) return 0;
    snprintf(err, errlen, "getrandom failed: %s", strerror(errno));
    return DED_ERR_INTERNAL;
  }
  for (int tries = 0; tries < 2; tries++) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      int rv = identity_read(fd, path, seed, err, errlen);
      close(fd);
      return rv;
    }
    if (errno != ENOENT) {
      snprintf(err, errlen, "DEDMPI_IDENTITY_FILE=%s: %s", path, strerror(errno));
      return DED_ERR_INVALID_ARG;
    }
    int rv = identity_create(path, seed, err, errlen);
    if (rv != -EEXIST) {
      *created = rv == 0;
      return rv;
    }
    /* Another process created it meanwhile: read theirs. */
  }
  snprintf(err, errlen, "DEDMPI_IDENTITY_FILE=%s: appeared and vanished", path);
  return DED_ERR_INVALID_ARG;
}

/* ---------------------------------------------------------------- access control */

#define ALLOW_KEYS_MAX 65536

/* Reads DEDMPI_ALLOW_FILE: one public key per line in hex, blank lines and
 * '#' comments skipped. The file must not be writable by others (whoever
 * can write it admits peers). *keys is malloc'd. */
static int allow_load(const char *path, uint8_t (**keys)[DED_PK_BYTES], unsigned *n, char *err,
                      size_t errlen) {
  *keys = NULL;
  *n = 0;
  FILE *f = fopen(path, "re");
  if (!f) {
    snprintf(err, errlen, "DEDMPI_ALLOW_FILE=%s: %s", path, strerror(errno));
    return DED_ERR_INVALID_ARG;
  }
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) || (st.st_mode & 022)) {
    snprintf(err, errlen, "DEDMPI_ALLOW_FILE=%s: not a regular file, or others may write it "
             "(whoever can write it admits peers); chmod go-w it", path);
    fclose(f);
    return DED_ERR_INVALID_ARG;
  }
  char line[512];
  unsigned lineno = 0, cap = 0;
  int rv = 0;
  while (rv == 0 && fgets(line, sizeof line, f)) {
    lineno++;
    char *s = line, *e;
    s[strcspn(s, "#\r\n")] = '\0';
    while (*s == ' ' || *s == '\t') s++;
    for (e = s + strlen(s); e > s && (e[-1] == ' ' || e[-1] == '\t'); e--) {}
    if (e == s) continue;
    if (*n == cap) {
      cap = cap ? 2 * cap : 64;
      uint8_t(*more)[DED_PK_BYTES] = cap <= ALLOW_KEYS_MAX ? realloc(*keys, (size_t)cap * DED_PK_BYTES) : NULL;
      if (!more) {
        snprintf(err, errlen, "DEDMPI_ALLOW_FILE=%s: more than %d keys", path, ALLOW_KEYS_MAX);
        rv = DED_ERR_INVALID_ARG;
        break;
      }
      *keys = more;
    }
    if (ded_hex_decode(s, (size_t)(e - s), (*keys)[*n], DED_PK_BYTES) != 0) {
      snprintf(err, errlen, "DEDMPI_ALLOW_FILE=%s:%u: expected a public key (64 hex digits)", path,
               lineno);
      rv = DED_ERR_INVALID_ARG;
      break;
    }
    (*n)++;
  }
  fclose(f);
  if (rv) {
    free(*keys);
    *keys = NULL;
    *n = 0;
  }
  return rv;
}

int ded_secrets_access(const ded_driver_config *cfg, const uint8_t seed[DED_SEED_BYTES],
                       ded_node_settings *st, uint8_t (**allow)[DED_PK_BYTES], char *err,
                       size_t errlen) {
  *allow = NULL;
  if (cfg->allow_file && cfg->allow_file[0]) {
    int rv = allow_load(cfg->allow_file, allow, &st->nallow, err, errlen);
    if (rv) return rv;
    st->allow = (const uint8_t(*)[DED_PK_BYTES]) * allow;
    st->access = true;
  }
  if (cfg->owner) {
    memcpy(st->owner, cfg->owner, DED_PK_BYTES);
    st->has_owner = st->access = true;
  }
  if (!cfg->invite) return 0;
  const ded_invite *inv = cfg->invite;
  ded_ident me;
  ded_ident_from_seed(&me, seed);
  bool mine = memcmp(inv->pk, me.pk, DED_PK_BYTES) == 0;
  ded_ident_wipe(&me);
  uint8_t run_id[DED_RUN_ID_BYTES];
  ded_hash32(st->run, strlen(st->run), run_id);
  int rv = 0;
  if (!mine)
    snprintf(err, errlen, "DEDMPI_INVITE: the invitation is for another identity (this job's "
             "comes from DEDMPI_IDENTITY_FILE%s)", cfg->identity_file && cfg->identity_file[0] ?
             "" : ", which is unset: a fresh one per process");
  else if (memcmp(inv->run_id, run_id, DED_RUN_ID_BYTES) != 0)
    snprintf(err, errlen, "DEDMPI_INVITE: the invitation is for another run than '%s'", st->run);
  else if (cfg->owner && (rv = ded_invite_check(cfg->owner, run_id, inv->pk, inv->expires_ms,
                                               inv->sig, (uint64_t)(time(NULL)) * 1000u)) != 0)
    snprintf(err, errlen, "DEDMPI_INVITE: %s", rv == DED_ERR_EXPIRED ?
             "the invitation has expired" : "the invitation is not signed by DEDMPI_OWNER");
  if (!mine || err[0]) return DED_ERR_INVALID_ARG;
  st->has_invite = true;
  st->invite_expires_ms = inv->expires_ms;
  memcpy(st->invite_sig, inv->sig, DED_SIG_BYTES);
  return 0;
}

/* ---------------------------------------------------------------- the run's secret */

/* The text of the run's secret into |text| (|*n| bytes; |cap| means too
 * long): |key_file|'s first line, without trailing blanks, when it is set
 * (a private file), else |key|. |*var| names the variable it came from.
 * 0 with *n = 0: neither is set. */
static int swarm_key_text(const char *key, const char *key_file, char *text, size_t cap,
                          size_t *n, const char **var, char *err, size_t errlen) {
  *n = 0;
  *var = "DEDMPI_SWARM_KEY";
  if (key_file && key_file[0]) {
    *var = "DEDMPI_SWARM_KEY_FILE";
    int fd = open(key_file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
      snprintf(err, errlen, "%s=%s: %s", *var, key_file, strerror(errno));
      return DED_ERR_INVALID_ARG;
    }
    int rv = private_file_check(fd, *var, key_file, "the run's secret", err, errlen);
    if (rv == 0) *n = read_upto(fd, text, cap);
    close(fd);
    if (rv) return rv;
    const char *nl = memchr(text, '\n', *n); /* its first line, without trailing blanks */
    if (nl) *n = (size_t)(nl - text);
    if (memchr(text, '\0', *n)) *n = cap; /* a NUL inside: refused as too long */
    while (*n > 0 && (text[*n - 1] == ' ' || text[*n - 1] == '\t' || text[*n - 1] == '\r')) (*n)--;
    if (*n == 0) {
      snprintf(err, errlen, "%s=%s: its first line is empty: expected 64 hex digits or a "
               "passphrase", *var, key_file);
      return DED_ERR_INVALID_ARG;
    }
  } else if (key && key[0]) {
    *n = strlen(key);
    if (*n >= cap) *n = cap; /* refused as too long */
    memcpy(text, key, *n < cap ? *n : cap);
  }
  return 0;
}

/* Whether |text| (|n| bytes, |cap| = too long) can be the run's secret:
 * a key, or a passphrase ded_swarm_key_derive takes; why not in |err|. */
static int swarm_key_shape(const char *text, size_t n, size_t cap, const char *var, char *err,
                           size_t errlen) {
  char why[256];
  if (n < cap && ded_swarm_key_suspect(text, n, why, sizeof why)) {
    snprintf(err, errlen, "%s: %s", var, why);
    return DED_ERR_INVALID_ARG;
  }
  if (n >= cap || n < DED_PASSPHRASE_MIN) {
    snprintf(err, errlen, "%s: expected 64 hex digits or a passphrase of %d to %zu characters",
             var, DED_PASSPHRASE_MIN, cap - 1);
    return DED_ERR_INVALID_ARG;
  }
  return 0;
}

#define SWARM_KEY_TEXT_MAX 512

int ded_secrets_swarm_key_check(const char *key, const char *key_file, char *err, size_t errlen) {
  char text[SWARM_KEY_TEXT_MAX];
  size_t n;
  const char *var;
  int rv = swarm_key_text(key, key_file, text, sizeof text, &n, &var, err, errlen);
  if (rv == 0 && n > 0) rv = swarm_key_shape(text, n, sizeof text, var, err, errlen);
  ded_wipe(text, sizeof text);
  return rv;
}

int ded_secrets_swarm_key(const char *key, const char *key_file,
                          const uint8_t run_id[DED_RUN_ID_BYTES],
                          uint8_t psk[DED_NOISE_PSK_BYTES], bool *has, char *err, size_t errlen) {
  char text[SWARM_KEY_TEXT_MAX];
  size_t n;
  const char *var;
  *has = false;
  int rv = swarm_key_text(key, key_file, text, sizeof text, &n, &var, err, errlen);
  if (rv == 0 && n > 0) rv = swarm_key_shape(text, n, sizeof text, var, err, errlen);
  if (rv == 0 && n > 0) {
    rv = ded_swarm_key_derive(text, n, run_id, psk);
    if (rv) snprintf(err, errlen, "%s: cannot stretch the passphrase: %s", var, ded_strerror(rv));
  }
  ded_wipe(text, sizeof text);
  if (rv || n == 0) return rv;
  *has = true;
  return 0;
}
