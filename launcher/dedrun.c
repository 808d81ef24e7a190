/*
 * dedrun.c: the launcher's command line (docs/configuration.md, "dedrun"
 * and "A run for invited peers only").
 *
 *   dedrun [-n N] [-x VAR[=value]]... [--join HOST:PORT[,...]] [--listen HOST:PORT]
 *          [--run NAME] [--swarm-key-file F] [--mode M] ... PROGRAM [ARGS...]
 *                                        run a trainer on the swarm (run.c)
 *   dedrun --host H1,H2:4 | --hostfile F ... PROGRAM
 *                                        the same job spread over hosts (hosts.c)
 *   dedrun --id [--identity-file F]      this identity's public key
 *   dedrun --new-key                     a random DEDMPI_SWARM_KEY
 *   dedrun --invite KEY [--run NAME] [--identity-file F] [--expires D]
 *                                        the owner's invitation of KEY
 *
 * Every flag that configures the swarm sets one DEDMPI_* variable, so
 * dedrun and `mpirun -x` configure the same thing; --help lists them all.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "core/ded_err.h"
#include "crypto/ded_ident.h"
#include "ded_config.h"
#include "ded_driver.h"
#include "ded_secrets.h"
#include "dht/ded_invite.h"
#include "backbone.h"
#include "hosts.h"
#include "run.h"

#ifndef DEDMPI_VERSION
#define DEDMPI_VERSION "0"
#endif

extern char **environ;

static const char usage_text[] =
    "usage: dedrun [-n N] [-x VAR[=VALUE]]... [OPTIONS] PROGRAM [ARGS...]\n"
    "       dedrun --backbone [--listen HOST:PORT] [--http HOST:PORT] [--checkpoint-dir DIR]\n"
    "              [OPTIONS]\n"
    "       dedrun --status HOST:PORT\n"
    "       dedrun --id [--identity-file FILE]\n"
    "       dedrun --new-key\n"
    "       dedrun --invite KEY [--run NAME] [--identity-file FILE] [--expires DURATION]\n"
    "       dedrun --help | --version\n"
    "\n"
    "Runs PROGRAM, an MPI trainer, as one job of the swarm: its large all-reduces\n"
    "are averaged with every other job of the run; all else stays within the job.\n"
    "With Open MPI installed this is mpirun with libdedmpi.so preloaded; without\n"
    "it (or with --standalone), dedmpi's own libmpi.so.40 runs the same binary.\n"
    "\n"
    "  -n, -np N             ranks of the job (default 1)\n"
    "  -x VAR[=VALUE]        export VAR to the ranks, as mpirun -x does\n"
    "  -H, --host LIST       run the ranks on these hosts, mpirun's syntax: HOST[:SLOTS],...\n"
    "                        (a name or IPv4 address; SLOTS ranks there, default 1)\n"
    "  --hostfile FILE       the same from a file (also --machinefile): a host a line,\n"
    "                        'HOST [slots=N] [max_slots=N]', '#' comments. Both go to\n"
    "                        mpirun as given; without -n, a rank per slot. Rank 0, the\n"
    "                        job's peer, runs here if a host listed is this machine,\n"
    "                        else on the first host (then no progress line)\n"
    "  --join HOST:PORT,...  peers to bootstrap from (DEDMPI_JOIN); none: start a swarm\n"
    "  --listen HOST:PORT    accept peers there (DEDMPI_LISTEN; :0 = any free port)\n"
    "  --run NAME            the run's name (DEDMPI_RUN; default 'default')\n"
    "  --swarm-key-file F    the run's secret, first line of F (DEDMPI_SWARM_KEY_FILE)\n"
    "  --mode M              node, client (behind NAT) or aux (DEDMPI_MODE)\n"
    "  --min-peers N         the first round waits for N peers (DEDMPI_MIN_PEERS)\n"
    "  --compress CODEC      how gradients travel (DEDMPI_COMPRESS): none, fp16, bf16,\n"
    "                        int8, topk[:FRACTION] or auto[:FLOOR] (default none)\n"
    "  --identity-file F     keep this job's identity in F (DEDMPI_IDENTITY_FILE)\n"
    "  --log LEVEL           error, warn, info or debug (DEDMPI_LOG)\n"
    "  --no-progress         no progress line (on a terminal: one updating line;\n"
    "                        otherwise a line every 10 s)\n"
    "  --standalone          run on dedmpi's own MPI library (Open MPI's ABI), even where\n"
    "                        Open MPI is installed: each of the N processes is then a job\n"
    "                        of one rank (process i listens on the --listen port + i);\n"
    "                        without mpirun on PATH this is what dedrun does\n"
    "\n"
    "  --backbone            run no trainer: stay up, bootstrap newcomers and serve the\n"
    "                        run's status (peers, their bandwidth, rounds per minute,\n"
    "                        joins and leaves) over HTTP: /, /status.json, /status.txt\n"
    "  --http HOST:PORT      where the backbone serves it (default: the --listen host,\n"
    "                        127.0.0.1 if that is any address, and the next port)\n"
    "  --checkpoint-dir DIR  the backbone keeps checkpoints of the run's state in DIR\n"
    "                        (DEDMPI_CHECKPOINT_DIR): pulled from the trainers, served to\n"
    "                        joiners once no trainer is left, the newest loaded at start\n"
    "  --checkpoint-every N  pull one every N training steps, or every N with a unit\n"
    "                        (30s, 10m; DEDMPI_CHECKPOINT_EVERY, default 5m)\n"
    "  --checkpoint-keep K   keep the newest K (DEDMPI_CHECKPOINT_KEEP, default 3)\n"
    "  --status HOST:PORT    print the status a backbone serves at HOST:PORT (its --http)\n"
    "\n"
    "  --id                  print this identity's public key (FILE is created, mode\n"
    "                        0600, if missing): what the run owner needs to invite you,\n"
    "                        or what goes into DEDMPI_OWNER and DEDMPI_ALLOW_FILE\n"
    "  --new-key             print a random run secret for DEDMPI_SWARM_KEY (64 hex digits)\n"
    "  --invite KEY          as the run owner (FILE holds the owner's identity), print an\n"
    "                        invitation admitting the identity with public key KEY to run\n"
    "                        NAME; the invitee sets DEDMPI_INVITE to it, and the run's\n"
    "                        peers set DEDMPI_OWNER to the owner's key\n"
    "  --expires D           the invitation expires after D (such as 90m, 12h, 7d;\n"
    "                        default: never)\n"
    "\n"
    "Every setting is a DEDMPI_* variable, taken from the environment or -x:\n";

/* Prints |text| from column |indent| on, wrapped before column 80. */
static void print_wrapped(FILE *to, const char *text, int indent) {
  int col = indent;
  while (*text) {
    size_t w = strcspn(text, " ");
    if (col > indent && col + 1 + (int)w > 79) {
      fprintf(to, "\n%*s", indent, "");
      col = indent;
    } else if (col > indent) {
      fputc(' ', to);
      col++;
    }
    fprintf(to, "%.*s", (int)w, text);
    col += (int)w;
    text += w;
    while (*text == ' ') text++;
  }
  fputc('\n', to);
}

static int usage(FILE *to, int rc) {
  fputs(usage_text, to);
  if (to == stdout) {
    for (const ded_config_var *v = ded_config_vars(); v->name; v++) {
      fprintf(to, "  %s (default: %s)\n      ", v->name, v->def[0] ? v->def : "none");
      print_wrapped(to, v->help, 6);
    }
  } else {
    fputs("  (dedrun --help lists them)\n", to);
  }
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

/* The value of option |argv[*i]| when it is |name| ("--join V" or
 * "--join=V"); NULL if it is another option. A missing value is an error
 * (*missing). */
static const char *opt_value(char **argv, int argc, int *i, const char *name, bool *missing) {
  size_t n = strlen(name);
  if (strncmp(argv[*i], name, n) != 0) return NULL;
  if (argv[*i][n] == '=') return argv[*i] + n + 1;
  if (argv[*i][n] != '\0') return NULL;
  if (*i + 1 >= argc) {
    *missing = true;
    return NULL;
  }
  return argv[++*i];
}

static const char *env_get(const char *name) { return getenv(name); }

/* Checks the DEDMPI_* settings the job will get (flags included) before
 * anything starts: the library would only refuse them in MPI_Init. The
 * swarm key's file too (DEDMPI_SWARM_KEY_FILE, --swarm-key-file): it
 * exists, is this user's alone, and holds a key or a passphrase. */
static int check_settings(void) {
  ded_config cfg;
  char errors[2048], warnings[1024];
  int nerr = ded_config_load(&cfg, env_get, environ, errors,
                             sizeof errors, warnings, sizeof warnings);
  for (char *save = NULL, *l = strtok_r(warnings, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
    fprintf(stderr, "dedrun: warning: %s\n", l);
  for (char *save = NULL, *l = strtok_r(errors, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
    fprintf(stderr, "dedrun: %s\n", l);
  char err[512];
  if (nerr == 0 && ded_secrets_swarm_key_check(cfg.swarm_key, cfg.swarm_key_file, err, sizeof err) != 0) {
    fprintf(stderr, "dedrun: %s\n", err);
    nerr++;
  }
  ded_wipe(&cfg, sizeof cfg);
  return nerr;
}

int main(int argc, char **argv) {
  static const struct {
    const char *flag, *var;
  } settings[] = {
      {"--join", "DEDMPI_JOIN"},
      {"--listen", "DEDMPI_LISTEN"},
      {"--run", "DEDMPI_RUN"},
      {"--swarm-key-file", "DEDMPI_SWARM_KEY_FILE"},
      {"--mode", "DEDMPI_MODE"},
      {"--min-peers", "DEDMPI_MIN_PEERS"},
      {"--compress", "DEDMPI_COMPRESS"},
      {"--identity-file", "DEDMPI_IDENTITY_FILE"},
      {"--log", "DEDMPI_LOG"},
      {"--checkpoint-dir", "DEDMPI_CHECKPOINT_DIR"},
      {"--checkpoint-every", "DEDMPI_CHECKPOINT_EVERY"},
      {"--checkpoint-keep", "DEDMPI_CHECKPOINT_KEEP"},
  };
  enum { CMD_RUN, CMD_ID, CMD_NEW_KEY, CMD_INVITE, CMD_BACKBONE, CMD_STATUS };
  dedrun_opts ro = {.np = 1, .progress = -1};
  bool np_given = false;
  const char *invite = NULL, *expires = NULL, *http = NULL, *status = NULL;
  int cmd = CMD_RUN, i;
  for (i = 1; i < argc; i++) {
    const char *a = argv[i], *v;
    bool missing = false, matched = false;
    if (a[0] != '-' || !strcmp(a, "-")) break; /* the program */
    if (!strcmp(a, "--")) {
      i++;
      break;
    }
    for (size_t k = 0; k < sizeof settings / sizeof settings[0] && !matched; k++) {
      if ((v = opt_value(argv, argc, &i, settings[k].flag, &missing))) {
        setenv(settings[k].var, v, 1);
        matched = true;
      }
    }
    if (matched) continue;
    if (missing) goto missing_value;
    if ((v = opt_value(argv, argc, &i, "--host", &missing)) ||
        (v = opt_value(argv, argc, &i, "-H", &missing))) {
      char err[1024];
      if (ro.host) {
        fprintf(stderr, "dedrun: --host given twice: list every host in one (--host A,B:2)\n");
        return usage(stderr, 2);
      }
      if (dedrun_host_list(v, NULL, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "dedrun: %.*s %s: %s\n", (int)strcspn(a, "="), a, v, err);
        return usage(stderr, 2);
      }
      ro.host = v;
    } else if ((v = opt_value(argv, argc, &i, "--hostfile", &missing)) ||
               (v = opt_value(argv, argc, &i, "--machinefile", &missing))) {
      char err[1024];
      if (ro.hostfile) {
        fprintf(stderr, "dedrun: --hostfile given twice: one file lists every host\n");
        return usage(stderr, 2);
      }
      if (dedrun_hostfile(v, NULL, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "dedrun: %.*s %s: %s\n", (int)strcspn(a, "="), a, v, err);
        return usage(stderr, 2);
      }
      ro.hostfile = v;
    } else if ((v = opt_value(argv, argc, &i, "-n", &missing)) ||
        (v = opt_value(argv, argc, &i, "-np", &missing)) ||
        (v = opt_value(argv, argc, &i, "--np", &missing))) {
      char *end;
      errno = 0;
      long n = strtol(v, &end, 10);
      if (errno || *end || n < 1 || n > 4096) {
        fprintf(stderr, "dedrun: -n %s: expected a number of ranks from 1 to 4096\n", v);
        return usage(stderr, 2);
      }
      ro.np = (int)n;
      np_given = true;
    } else if ((v = opt_value(argv, argc, &i, "-x", &missing))) {
      if (!v[0] || v[0] == '=') {
        fprintf(stderr, "dedrun: -x %s: expected VAR or VAR=VALUE\n", v);
        return usage(stderr, 2);
      }
      if (ro.nx == DEDRUN_X_MAX) {
        fprintf(stderr, "dedrun: more than %d -x\n", DEDRUN_X_MAX);
        return 2;
      }
      ro.x[ro.nx++] = v;
      /* The job's DEDMPI_* settings are checked and carried like the flags'. */
      const char *eq = strchr(v, '=');
      if (!strncmp(v, "DEDMPI_", 7) && eq) {
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)(eq - v), v);
        setenv(name, eq + 1, 1);
      }
    } else if ((v = opt_value(argv, argc, &i, "--invite", &missing))) {
      invite = v;
      if (cmd != CMD_RUN && cmd != CMD_INVITE) goto exclusive;
      cmd = CMD_INVITE;
    } else if ((v = opt_value(argv, argc, &i, "--expires", &missing))) {
      expires = v;
    } else if ((v = opt_value(argv, argc, &i, "--http", &missing))) {
      http = v;
    } else if ((v = opt_value(argv, argc, &i, "--status", &missing))) {
      status = v;
      if (cmd != CMD_RUN && cmd != CMD_STATUS) goto exclusive;
      cmd = CMD_STATUS;
    } else if (!strcmp(a, "--backbone")) {
      if (cmd != CMD_RUN && cmd != CMD_BACKBONE) goto exclusive;
      cmd = CMD_BACKBONE;
    } else if (missing) {
      goto missing_value;
    } else if (!strcmp(a, "--id") || !strcmp(a, "--new-key")) {
      int c = !strcmp(a, "--id") ? CMD_ID : CMD_NEW_KEY;
      if (cmd != CMD_RUN && cmd != c) goto exclusive;
      cmd = c;
    } else if (!strcmp(a, "--no-progress")) {
      ro.progress = 0;
    } else if (!strcmp(a, "--standalone")) {
      ro.standalone = true;
    } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      return usage(stdout, 0);
    } else if (!strcmp(a, "--version")) {
      printf("dedrun %s\n", DEDMPI_VERSION);
      return 0;
    } else {
      fprintf(stderr, "dedrun: unknown option %s\n", a);
      return usage(stderr, 2);
    }
    if (missing) goto missing_value;
  }
  if (ded_crypto_init() != 0) {
    fprintf(stderr, "dedrun: libsodium failed to initialise\n");
    return 1;
  }
  const char *run = getenv("DEDMPI_RUN"), *identity = getenv("DEDMPI_IDENTITY_FILE");
  if (!run || !run[0]) run = "default";
  if (strlen(run) > DED_RUN_NAME_MAX) {
    fprintf(stderr, "dedrun: --run: at most %d characters\n", DED_RUN_NAME_MAX);
    return 2;
  }
  if (expires && cmd != CMD_INVITE) {
    fprintf(stderr, "dedrun: --expires goes with --invite\n");
    return usage(stderr, 2);
  }
  if (http && cmd != CMD_BACKBONE) {
    fprintf(stderr, "dedrun: --http goes with --backbone\n");
    return usage(stderr, 2);
  }
  if ((ro.host || ro.hostfile) && (cmd != CMD_RUN || ro.standalone)) {
    fprintf(stderr, "dedrun: --host and --hostfile go with a trainer that mpirun runs%s\n",
            ro.standalone ? " (--standalone runs every process on this machine)" : "");
    return usage(stderr, 2);
  }
  /* On hosts, mpirun's own default: a rank per slot. */
  if ((ro.host || ro.hostfile) && !np_given) ro.np = 0;
  if (cmd != CMD_RUN) {
    if (i < argc) {
      fprintf(stderr, "dedrun: --backbone, --status, --id, --new-key and --invite take no "
                      "program (%s)\n", argv[i]);
      return usage(stderr, 2);
    }
    if (cmd == CMD_STATUS) return dedrun_status(status);
    if (cmd == CMD_BACKBONE) return dedrun_backbone(http);
    long long expires_in = 0;
    if (expires && (expires_in = parse_expiry(expires)) < 0) {
      fprintf(stderr, "dedrun: --expires %s: expected a duration such as 90m, 12h or 7d\n",
              expires);
      return usage(stderr, 2);
    }
    if (cmd == CMD_ID) return cmd_id(identity);
    if (cmd == CMD_NEW_KEY) return cmd_new_key();
    return cmd_invite(invite, run, identity, expires_in);
  }
  if (i >= argc) {
    fprintf(stderr, "dedrun: no program to run\n");
    return usage(stderr, 2);
  }
  if (check_settings() != 0) return 2;
  ro.argv = argv + i;
  return dedrun_launch(&ro);

missing_value:
  fprintf(stderr, "dedrun: %s needs a value\n", argv[i]);
  return usage(stderr, 2);
exclusive:
  fprintf(stderr, "dedrun: --backbone, --status, --id, --new-key and --invite exclude each other\n");
  return usage(stderr, 2);
}
