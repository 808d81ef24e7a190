/*
 * dedrun.c: the launcher's command line. So far its keys and invitations:
 *
 *   dedrun --id [--identity-file F]      this identity's public key
 *   dedrun --new-key                     a random DEDMPI_SWARM_KEY
 *   dedrun --invite KEY [--run NAME] [--identity-file F] [--expires D]
 *                                        the owner's invitation of KEY
 *
 * --identity-file and --run default to DEDMPI_IDENTITY_FILE and
 * DEDMPI_RUN. Running a trainer (-n, -x, --join, ...) comes with the rest
 * of the launcher; until then use mpirun as the README shows.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "core/ded_err.h"
#include "crypto/ded_ident.h"
#include "ded_driver.h"
#include "dht/ded_invite.h"

#ifndef DEDMPI_VERSION
#define DEDMPI_VERSION "0"
#endif

static const char usage_text[] =
    "usage: dedrun --id [--identity-file FILE]\n"
    "       dedrun --new-key\n"
    "       dedrun --invite KEY [--run NAME] [--identity-file FILE] [--expires DURATION]\n"
    "       dedrun --help | --version\n"
    "\n"
    "  --id             print this identity's public key (FILE is created, mode 0600, if\n"
    "                   missing): what the run owner needs to invite you, or what goes\n"
    "                   into DEDMPI_OWNER and DEDMPI_ALLOW_FILE\n"
    "  --new-key        print a random run secret for DEDMPI_SWARM_KEY (64 hex digits)\n"
    "  --invite KEY     as the run owner (FILE holds the owner's identity), print an\n"
    "                   invitation admitting the identity with public key KEY to run\n"
    "                   NAME; the invitee sets DEDMPI_INVITE to it, and the run's peers\n"
    "                   set DEDMPI_OWNER to the owner's key\n"
    "  --expires D      the invitation expires after D (such as 90m, 12h, 7d; default:\n"
    "                   never)\n"
    "  --identity-file  default: $DEDMPI_IDENTITY_FILE\n"
    "  --run            default: $DEDMPI_RUN, else 'default'\n"
    "\n"
    "Running a trainer comes with the rest of the launcher; until then use mpirun\n"
    "with LD_PRELOAD=libdedmpi.so as the README shows.\n";

static int usage(FILE *to, int rc) {
  fputs(usage_text, to);
  return rc;
}

/* "90m", "12h", "7d", "3600" (seconds): milliseconds, or -1. */
static long long parse_expiry(const char *s) {
  errno = 0;
  char *end;
  double v = strtod(s, &end);
  if (errno || end == s || !(v > 0)) return -1;
  double unit = 1000.0;
  if (!strcmp(end, "m")) unit = 60e3;
  else if (!strcmp(end, "h")) unit = 3600e3;
  else if (!strcmp(end, "d")) unit = 86400e3;
  else if (strcmp(end, "s") != 0 && *end != '\0') return -1;
  if (v * unit > 1e15) return -1;
  return (long long)(v * unit);
}

static int load_identity(const char *path, ded_ident *id) {
  uint8_t seed[DED_SEED_BYTES];
  bool created;
  char err[512] = "";
  if (!path || !path[0]) {
    fprintf(stderr, "dedrun: no identity file: pass --identity-file or set DEDMPI_IDENTITY_FILE\n");
    return 2;
  }
  if (ded_driver_identity_seed(path, seed, &created, err, sizeof err) != 0) {
    fprintf(stderr, "dedrun: %s\n", err);
    return 1;
  }
  ded_ident_from_seed(id, seed);
  ded_wipe(seed, sizeof seed);
  if (created) fprintf(stderr, "dedrun: created identity %s (mode 0600)\n", path);
  return 0;
}

static int cmd_id(const char *path) {
  ded_ident id;
  int rv = load_identity(path, &id);
  if (rv) return rv;
  char hex[2 * DED_PK_BYTES + 1];
  ded_hex_encode(id.pk, DED_PK_BYTES, hex);
  ded_ident_wipe(&id);
  printf("%s\n", hex);
  return 0;
}

static int cmd_new_key(void) {
  uint8_t key[DED_SWARM_KEY_BYTES];
  if (getrandom(key, sizeof key, 0) != (ssize_t)sizeof key) {
    fprintf(stderr, "dedrun: getrandom failed: %s\n", strerror(errno));
    return 1;
  }
  char hex[2 * DED_SWARM_KEY_BYTES + 1];
  ded_hex_encode(key, sizeof key, hex);
  printf("%s\n", hex);
  ded_wipe(key, sizeof key);
  ded_wipe(hex, sizeof hex);
  return 0;
}

static int cmd_invite(const char *key, const char *run, const char *path, long long expires_in) {
  uint8_t pk[DED_PK_BYTES];
  if (ded_hex_decode(key, strlen(key), pk, sizeof pk) != 0) {
    fprintf(stderr, "dedrun: --invite %s: expected a public key, 64 hex digits (dedrun --id)\n", key);
    return 2;
  }
  ded_ident owner;
  int rv = load_identity(path, &owner);
  if (rv) return rv;
  uint8_t run_id[DED_RUN_ID_BYTES];
  ded_hash32(run, strlen(run), run_id);
  uint64_t expires = 0;
  if (expires_in > 0) expires = (uint64_t)time(NULL) * 1000u + (uint64_t)expires_in;
  ded_invite inv;
  ded_invite_sign(&inv, &owner, run_id, pk, expires);
  char owner_hex[2 * DED_PK_BYTES + 1], text[DED_INVITE_TEXT_LEN + 1];
  ded_hex_encode(owner.pk, DED_PK_BYTES, owner_hex);
  ded_ident_wipe(&owner);
  ded_invite_format(&inv, text);
  printf("%s\n", text);
  char when[64] = "never";
  if (expires) {
    time_t t = (time_t)(expires / 1000u);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", gmtime(&t));
  }
  fprintf(stderr,
          "dedrun: invitation of %.8s... to run '%s', expires %s.\n"
          "dedrun: the invitee sets DEDMPI_INVITE to it (with the DEDMPI_IDENTITY_FILE whose key\n"
          "dedrun: it names); every peer of the run sets DEDMPI_OWNER=%s\n",
          key, run, when, owner_hex);
  return 0;
}

int main(int argc, char **argv) {
  enum { OPT_ID = 1, OPT_NEW_KEY, OPT_INVITE, OPT_RUN, OPT_IDENTITY, OPT_EXPIRES, OPT_HELP, OPT_VERSION };
  static const struct option opts[] = {
      {"id", no_argument, NULL, OPT_ID},
      {"new-key", no_argument, NULL, OPT_NEW_KEY},
      {"invite", required_argument, NULL, OPT_INVITE},
      {"run", required_argument, NULL, OPT_RUN},
      {"identity-file", required_argument, NULL, OPT_IDENTITY},
      {"expires", required_argument, NULL, OPT_EXPIRES},
      {"help", no_argument, NULL, OPT_HELP},
      {"version", no_argument, NULL, OPT_VERSION},
      {NULL, 0, NULL, 0},
  };
  const char *run = getenv("DEDMPI_RUN"), *identity = getenv("DEDMPI_IDENTITY_FILE");
  const char *invite = NULL;
  long long expires_in = 0;
  int cmd = 0, o;
  if (!run || !run[0]) run = "default";
  opterr = 0;
  while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (o) {
    case OPT_ID:
    case OPT_NEW_KEY:
    case OPT_INVITE:
      if (cmd && cmd != o) {
        fprintf(stderr, "dedrun: --id, --new-key and --invite exclude each other\n");
        return usage(stderr, 2);
      }
      cmd = o;
      if (o == OPT_INVITE) invite = optarg;
      break;
    case OPT_RUN:
      run = optarg;
      break;
    case OPT_IDENTITY:
      identity = optarg;
      break;
    case OPT_EXPIRES:
      expires_in = parse_expiry(optarg);
      if (expires_in < 0) {
        fprintf(stderr, "dedrun: --expires %s: expected a duration such as 90m, 12h or 7d\n", optarg);
        return 2;
      }
      break;
    case OPT_HELP:
      return usage(stdout, 0);
    case OPT_VERSION:
      printf("dedrun %s\n", DEDMPI_VERSION);
      return 0;
    default:
      fprintf(stderr, "dedrun: unknown or incomplete option %s\n", argv[optind - 1]);
      return usage(stderr, 2);
    }
  }
  if (optind < argc) {
    fprintf(stderr, "dedrun: running a program (%s) is not available yet: use mpirun with "
                    "LD_PRELOAD=libdedmpi.so\n", argv[optind]);
    return usage(stderr, 2);
  }
  if (ded_crypto_init() != 0) {
    fprintf(stderr, "dedrun: libsodium failed to initialise\n");
    return 1;
  }
  if (strlen(run) > DED_RUN_NAME_MAX) {
    fprintf(stderr, "dedrun: --run: at most %d characters\n", DED_RUN_NAME_MAX);
    return 2;
  }
  switch (cmd) {
  case OPT_ID:
    return cmd_id(identity);
  case OPT_NEW_KEY:
    return cmd_new_key();
  case OPT_INVITE:
    return cmd_invite(invite, run, identity, expires_in);
  default:
    return usage(stderr, 2);
  }
}
