#include "ded_config.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "avg/ded_codec.h"
#include "core/ded_assert.h"
#include "core/ded_types.h"
#include "ded_driver.h"
#include "ded_node.h"

typedef struct parse_ctx {
  ded_config *cfg;
  char *err;
  size_t errlen;
  int nerr;
} parse_ctx;

static void cfg_error(parse_ctx *p, const char *name, const char *val, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void cfg_error(parse_ctx *p, const char *name, const char *val, const char *fmt, ...) {
  size_t used = strlen(p->err);
  if (used < p->errlen) {
    int n = snprintf(p->err + used, p->errlen - used, "%s='%s': ", name, val);
    if (n > 0 && used + (size_t)n < p->errlen) {
      va_list ap;
      va_start(ap, fmt);
      vsnprintf(p->err + used + (size_t)n, p->errlen - used - (size_t)n, fmt, ap);
      va_end(ap);
      used = strlen(p->err);
      if (used + 1 < p->errlen) strcat(p->err, "\n");
    }
  }
  p->nerr++;
}

/* Integer with an optional binary suffix (K, M, G). */
static int parse_size(const char *s, uint64_t *out) {
  errno = 0;
  char *end;
  if (*s < '0' || *s > '9') return -1;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno) return -1;
  uint64_t mul = 1;
  if (*end == 'K' || *end == 'k') mul = 1ull << 10, end++;
  else if (*end == 'M' || *end == 'm') mul = 1ull << 20, end++;
  else if (*end == 'G' || *end == 'g') mul = 1ull << 30, end++;
  if (*end == 'i' || *end == 'B') end += *end == 'i' ? (end[1] == 'B' ? 2 : 1) : 1;
  if (*end != '\0' || v > UINT64_MAX / mul) return -1;
  *out = v * mul;
  return 0;
}

/* A duration: a number of seconds, or with a unit (ms, s, m). */
static int parse_duration(const char *s, uint64_t *ns) {
  errno = 0;
  char *end;
  double v = strtod(s, &end);
  if (errno || end == s || !isfinite(v) || v < 0) return -1;
  double unit = 1e9;
  if (!strcmp(end, "ms")) unit = 1e6;
  else if (!strcmp(end, "m") || !strcmp(end, "min")) unit = 60e9;
  else if (strcmp(end, "s") != 0 && *end != '\0') return -1;
  if (v * unit > 1e18) return -1;
  *ns = (uint64_t)(v * unit);
  return 0;
}

static void parse_bool(parse_ctx *p, const char *name, const char *v, bool *out) {
  if (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on"))
    *out = true;
  else if (!strcmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no") || !strcasecmp(v, "off"))
    *out = false;
  else
    cfg_error(p, name, v, "expected 0 or 1");
}

static void set_disable(parse_ctx *p, const char *name, const char *v) {
  parse_bool(p, name, v, &p->cfg->disable);
}

static void set_state_bcast(parse_ctx *p, const char *name, const char *v) {
  parse_bool(p, name, v, &p->cfg->state_bcast);
}

static void set_step_rounds(parse_ctx *p, const char *name, const char *v) {
  uint64_t n;
  if (parse_size(v, &n) != 0 || n > DED_STATE_STEP_ROUNDS_MAX)
    cfg_error(p, name, v, "expected an integer from 0 to %d", DED_STATE_STEP_ROUNDS_MAX);
  else
    p->cfg->step_rounds = (uint32_t)n;
}

static void set_run(parse_ctx *p, const char *name, const char *v) {
  size_t n = strlen(v);
  bool ok = n > 0 && n <= DED_RUN_NAME_MAX;
  for (size_t i = 0; ok && i < n; i++)
    ok = (v[i] >= 'a' && v[i] <= 'z') || (v[i] >= 'A' && v[i] <= 'Z') || (v[i] >= '0' && v[i] <= '9') ||
         v[i] == '-' || v[i] == '_' || v[i] == '.';
  if (!ok)
    cfg_error(p, name, v, "expected 1 to %d letters, digits, '-', '_' or '.'", DED_RUN_NAME_MAX);
  else
    snprintf(p->cfg->run, sizeof p->cfg->run, "%s", v);
}

/* "host:port" with a port in 0..65535 (host may be a name: resolved later). */
static bool host_port_ok(const char *s, bool allow_any, bool allow_port0) {
  const char *colon = s[0] == '[' ? strstr(s, "]:") : strrchr(s, ':');
  if (!colon) return false;
  if (s[0] == '[') colon++;
  if (colon == s && !allow_any) return false;
  const char *port = colon + 1;
  if (!*port || strlen(port) > 5) return false;
  for (const char *c = port; *c; c++)
    if (*c < '0' || *c > '9') return false;
  long v = strtol(port, NULL, 10);
  return v <= 65535 && (v > 0 || allow_port0);
}

static void set_addr_list(parse_ctx *p, const char *name, const char *v, char *dst, size_t cap,
                          unsigned max) {
  char buf[2048];
  if (strlen(v) >= sizeof buf || strlen(v) >= cap) {
    cfg_error(p, name, v, "too long");
    return;
  }
  snprintf(buf, sizeof buf, "%s", v);
  unsigned n = 0;
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    while (*tok == ' ') tok++;
    if (!*tok) continue;
    if (!host_port_ok(tok, false, false)) {
      cfg_error(p, name, v, "'%s' is not host:port", tok);
      return;
    }
    n++;
  }
  if (n > max) {
    cfg_error(p, name, v, "at most %u addresses", max);
    return;
  }
  snprintf(dst, cap, "%s", v);
}

static void set_join(parse_ctx *p, const char *name, const char *v) {
  set_addr_list(p, name, v, p->cfg->join, sizeof p->cfg->join, DED_BOOTSTRAP_MAX);
}

static void set_announce(parse_ctx *p, const char *name, const char *v) {
  set_addr_list(p, name, v, p->cfg->announce, sizeof p->cfg->announce, DED_RECORD_ADDRS_MAX);
}

static void set_listen(parse_ctx *p, const char *name, const char *v) {
  if (!host_port_ok(v, true, true))
    cfg_error(p, name, v, "expected host:port (':0' = any address, any free port)");
  else
    snprintf(p->cfg->listen, sizeof p->cfg->listen, "%s", v);
}

static void set_identity_file(parse_ctx *p, const char *name, const char *v) {
  if (v[0] == '\0' || strlen(v) >= sizeof p->cfg->identity_file)
    cfg_error(p, name, v, "expected a file name of 1 to %zu bytes",
              sizeof p->cfg->identity_file - 1);
  else
    snprintf(p->cfg->identity_file, sizeof p->cfg->identity_file, "%s", v);
}

static void set_min_bytes(parse_ctx *p, const char *name, const char *v) {
  if (parse_size(v, &p->cfg->min_bytes) != 0)
    cfg_error(p, name, v, "expected a byte count such as 65536 or 64K");
}

static void set_min_elements(parse_ctx *p, const char *name, const char *v) {
  uint64_t n;
  if (parse_size(v, &n) != 0 || n < 1 || n > DED_COUNT_MAX)
    cfg_error(p, name, v, "expected an element count from 1 to %llu",
              (unsigned long long)DED_COUNT_MAX);
  else
    p->cfg->min_elements = (uint32_t)n;
}

static void set_min_peers(parse_ctx *p, const char *name, const char *v) {
  uint64_t n;
  if (parse_size(v, &n) != 0 || n < 1 || n > DED_PEERS_MAX)
    cfg_error(p, name, v, "expected an integer from 1 to %d", DED_PEERS_MAX);
  else
    p->cfg->min_peers = (uint32_t)n;
}

/* node: reduces a share and contributes; client: behind NAT, accepts no
 * connections (it calls every node) and reduces nothing; aux: reduces a
 * share, its own vector is not averaged (it gets the swarm's mean back). */
static void set_mode(parse_ctx *p, const char *name, const char *v) {
  if (!strcmp(v, "node"))
    p->cfg->mode = DED_MODE_NODE;
  else if (!strcmp(v, "client"))
    p->cfg->mode = DED_MODE_CLIENT;
  else if (!strcmp(v, "aux"))
    p->cfg->mode = DED_MODE_AUX;
  else
    cfg_error(p, name, v, "expected node, client or aux");
}

static void set_log(parse_ctx *p, const char *name, const char *v) {
  static const char *names[] = {"error", "warn", "info", "debug"};
  for (int i = 0; i < 4; i++)
    if (!strcasecmp(v, names[i])) {
      p->cfg->log_level = i;
      return;
    }
  cfg_error(p, name, v, "expected error, warn, info or debug");
}

static void set_duration(parse_ctx *p, const char *name, const char *v, uint64_t *dst) {
  uint64_t ns;
  if (parse_duration(v, &ns) != 0 || ns == 0)
    cfg_error(p, name, v, "expected a positive duration such as 30, 30s, 500ms or 2m");
  else
    *dst = ns;
}

static void set_join_timeout(parse_ctx *p, const char *name, const char *v) {
  set_duration(p, name, v, &p->cfg->join_timeout_ns);
}

static void set_rendezvous_timeout(parse_ctx *p, const char *name, const char *v) {
  set_duration(p, name, v, &p->cfg->rendezvous_timeout_ns);
}

static void set_round_timeout(parse_ctx *p, const char *name, const char *v) {
  set_duration(p, name, v, &p->cfg->round_timeout_ns);
}

static void set_deadline_floor(parse_ctx *p, const char *name, const char *v) {
  set_duration(p, name, v, &p->cfg->deadline_floor_ns);
}

static void set_history(parse_ctx *p, const char *name, const char *v) {
  uint64_t n;
  if (parse_size(v, &n) != 0)
    cfg_error(p, name, v, "expected a size such as 0, 64M or 1G");
  else
    p->cfg->history_bytes = n == 0 ? UINT64_MAX : n; /* the engine's "keep nothing" */
}

static void set_chunk(parse_ctx *p, const char *name, const char *v) {
  uint64_t n;
  if (parse_size(v, &n) != 0 || n < DED_CHUNK_BYTES_MIN || n > DED_CHUNK_BYTES_MAX)
    cfg_error(p, name, v, "expected a size from %d to %d bytes", DED_CHUNK_BYTES_MIN,
              DED_CHUNK_BYTES_MAX);
  else
    p->cfg->chunk_bytes = (uint32_t)n;
}

static void set_streams(parse_ctx *p, const char *name, const char *v) {
  char *end;
  long n = strtol(v, &end, 10);
  if (end == v || *end != '\0' || n < 1 || n > DED_STREAMS_MAX)
    cfg_error(p, name, v, "expected a number of connections from 1 to %d", DED_STREAMS_MAX);
  else
    p->cfg->streams = (uint8_t)n;
}

static void set_probe(parse_ctx *p, const char *name, const char *v) {
  uint64_t n;
  if (parse_size(v, &n) != 0 || n > DED_SPEED_WANT_MAX)
    cfg_error(p, name, v, "expected a size from 0 to %dM", DED_SPEED_WANT_MAX >> 20);
  else
    p->cfg->probe_bytes = (uint32_t)n;
}

static void set_plan(parse_ctx *p, const char *name, const char *v) {
  if (!strcmp(v, "lp"))
    p->cfg->plan = 0; /* DED_PLAN_LP */
  else if (!strcmp(v, "equal"))
    p->cfg->plan = 1; /* DED_PLAN_EQUAL */
  else
    cfg_error(p, name, v, "expected lp or equal");
}

/* "none", "fp16", "bf16", "int8", "topk[:F]", "auto" or "auto:CODEC" (the
 * lossiest codec auto may choose; plain auto: int8). */
static void set_compress(parse_ctx *p, const char *name, const char *v) {
  bool is_auto = !strcmp(v, "auto") || !strncmp(v, "auto:", 5);
  const char *codec = !strcmp(v, "auto") ? "int8" : is_auto ? v + 5 : v;
  ded_codec c;
  if (ded_codec_parse(codec, &c) != 0 || (is_auto && c.kind == DED_CODEC_NONE)) {
    cfg_error(p, name, v,
              "expected none, fp16, bf16, int8, topk, topk:FRACTION (0.000001 to 1), auto, or "
              "auto:CODEC (the lossiest codec auto may choose)");
    return;
  }
  ded_codec_to_wire(&c, &p->cfg->compress, &p->cfg->compress_ppm);
  if (is_auto) p->cfg->compress |= DED_NODE_COMPRESS_AUTO;
}

static void set_feedback(parse_ctx *p, const char *name, const char *v) {
  if (!strcmp(v, "on"))
    p->cfg->no_feedback = false;
  else if (!strcmp(v, "off"))
    p->cfg->no_feedback = true;
  else
    cfg_error(p, name, v, "expected on or off");
}

/* "UP" or "UP/DOWN", Mbit/s (decimal: 1 Mbit = 10^6 bits), each > 0. */
static void set_bandwidth(parse_ctx *p, const char *name, const char *v) {
  if (v[0] == '\0') return; /* measured */
  char *end;
  double up = strtod(v, &end), down = up;
  if (end != v && *end == '/') {
    const char *d = end + 1;
    down = strtod(d, &end);
    if (end == d) end = (char *)v; /* nothing after the slash */
  }
  if (end == v || *end != '\0' || !(up > 0.0 && up < 1e7) || !(down > 0.0 && down < 1e7))
    cfg_error(p, name, v, "expected UP or UP/DOWN in Mbit/s, such as 100 or 10/50");
  else
    p->cfg->up_Bps = up * 1e6 / 8, p->cfg->down_Bps = down * 1e6 / 8;
}

/* The key's text is checked here for shape only (the driver derives the
 * key); it is never echoed in an error. */
static void set_swarm_key(parse_ctx *p, const char *name, const char *v) {
  size_t n = strlen(v);
  char why[256];
  if (ded_swarm_key_suspect(v, n, why, sizeof why))
    cfg_error(p, name, "...", "%s", why);
  else if (n < DED_PASSPHRASE_MIN || n >= sizeof p->cfg->swarm_key)
    cfg_error(p, name, "...",
              "expected 64 hex digits (a random key: head -c32 /dev/urandom | od -An -tx1 | "
              "tr -d ' \\n') or a passphrase of %d to %zu characters",
              DED_PASSPHRASE_MIN, sizeof p->cfg->swarm_key - 1);
  else
    memcpy(p->cfg->swarm_key, v, n + 1);
}

static void set_swarm_key_file(parse_ctx *p, const char *name, const char *v) {
  if (v[0] == '\0' || strlen(v) >= sizeof p->cfg->swarm_key_file)
    cfg_error(p, name, v, "expected a file name of 1 to %zu characters",
              sizeof p->cfg->swarm_key_file - 1);
  else
    snprintf(p->cfg->swarm_key_file, sizeof p->cfg->swarm_key_file, "%s", v);
}

static void set_owner(parse_ctx *p, const char *name, const char *v) {
  if (ded_hex_decode(v, strlen(v), p->cfg->owner, DED_PK_BYTES) != 0)
    cfg_error(p, name, v, "expected the run owner's public key, 64 hex digits (dedrun --id)");
  else
    p->cfg->has_owner = true;
}

static void set_allow_file(parse_ctx *p, const char *name, const char *v) {
  if (v[0] == '\0' || strlen(v) >= sizeof p->cfg->allow_file)
    cfg_error(p, name, v, "expected a file name of 1 to %zu characters",
              sizeof p->cfg->allow_file - 1);
  else
    snprintf(p->cfg->allow_file, sizeof p->cfg->allow_file, "%s", v);
}

static void set_invite(parse_ctx *p, const char *name, const char *v) {
  if (ded_invite_parse(v, strlen(v), &p->cfg->invite) != 0)
    cfg_error(p, name, "...", "expected an invitation, '%s' and %d hex digits (dedrun --invite)",
              DED_INVITE_PREFIX, 2 * DED_INVITE_BYTES);
  else
    p->cfg->has_invite = true;
}

/* A local datagram socket for progress reports: a path, or '@' and an
 * abstract name (what dedrun passes). */
static void set_progress(parse_ctx *p, const char *name, const char *v) {
  if (v[0] == '\0' || strlen(v) >= sizeof p->cfg->progress)
    cfg_error(p, name, v, "expected a socket path or @name of 1 to %zu bytes",
              sizeof p->cfg->progress - 1);
  else
    snprintf(p->cfg->progress, sizeof p->cfg->progress, "%s", v);
}

/* What an unknown DEDMPI_* name is: an error (a typo must not pass for a
 * setting taken), or with "warn" a warning. */
static void set_unknown_vars(parse_ctx *p, const char *name, const char *v) {
  if (!strcmp(v, "error"))
    p->cfg->unknown_warn = false;
  else if (!strcmp(v, "warn"))
    p->cfg->unknown_warn = true;
  else
    cfg_error(p, name, v, "expected error or warn");
}

/* Read by dedrun alone (launcher/run.c): known here so that neither the
 * launcher nor a job that inherits one calls it a typo. */
static void set_checkpoint_dir(parse_ctx *p, const char *name, const char *v) {
  if (strlen(v) >= sizeof p->cfg->checkpoint_dir - 64) /* room for the file names */
    cfg_error(p, name, v, "expected a directory name of at most %zu bytes",
              sizeof p->cfg->checkpoint_dir - 65);
  else
    snprintf(p->cfg->checkpoint_dir, sizeof p->cfg->checkpoint_dir, "%s", v);
}

/* N steps (digits alone), or a duration with its unit (30s, 10m). */
static void set_checkpoint_every(parse_ctx *p, const char *name, const char *v) {
  uint64_t n = 0;
  bool digits = v[0] != '\0' && strspn(v, "0123456789") == strlen(v) && strlen(v) <= 9;
  for (const char *c = v; digits && *c; c++) n = n * 10 + (uint64_t)(*c - '0');
  if (digits && n > 0) {
    p->cfg->checkpoint_every = n;
    p->cfg->checkpoint_every_ns = false;
  } else if (!digits && parse_duration(v, &n) == 0 && n >= 1000000000ull) {
    p->cfg->checkpoint_every = n;
    p->cfg->checkpoint_every_ns = true;
  } else {
    cfg_error(p, name, v, "expected a number of training steps (such as 100) or a duration of "
              "at least a second with its unit (such as 30s or 10m)");
  }
}

static void set_checkpoint_keep(parse_ctx *p, const char *name, const char *v) {
  uint64_t n;
  if (parse_size(v, &n) != 0 || n < 1 || n > 1000)
    cfg_error(p, name, v, "expected an integer from 1 to 1000");
  else
    p->cfg->checkpoint_keep = (uint32_t)n;
}

static void set_launcher_only(parse_ctx *p, const char *name, const char *v) {
  (void)p;
  (void)name;
  (void)v;
}

typedef struct var_def {
  ded_config_var doc;
  void (*set)(parse_ctx *p, const char *name, const char *v);
} var_def;

static const var_def vars[] = {
    {{"DEDMPI_RUN", "default", "run name; peers of different runs never mix"}, set_run},
    {{"DEDMPI_JOIN", "", "comma-separated host:port of peers to bootstrap from; empty = start a new swarm"}, set_join},
    {{"DEDMPI_LISTEN", "0.0.0.0:0", "host:port to accept peers on (port 0 = any free port)"}, set_listen},
    {{"DEDMPI_IDENTITY_FILE", "", "file keeping this job's identity (its Ed25519 key, so its peer id) from run to run; created with mode 0600 if missing; unset: a fresh identity per process"}, set_identity_file},
    {{"DEDMPI_ANNOUNCE", "", "host:port list to publish instead of this machine's addresses (NAT port forwards)"}, set_announce},
    {{"DEDMPI_SWARM_KEY", "", "the run's secret: 64 hex digits, or a passphrase of 16+ characters (stretched with Argon2id); only peers holding it get in, and every connection is encrypted with keys it authenticates; unset: an open run (a warning)"}, set_swarm_key},
    {{"DEDMPI_OWNER", "", "the run owner's public key (64 hex digits, dedrun --id): with it, only the owner, keys on DEDMPI_ALLOW_FILE and identities the owner invited get in"}, set_owner},
    {{"DEDMPI_ALLOW_FILE", "", "file of admitted public keys, one per line (64 hex digits; # comments): with it, only those (and the owner, and invited identities) get in"}, set_allow_file},
    {{"DEDMPI_INVITE", "", "this job's invitation from the run owner (dedrun --invite), for its identity (DEDMPI_IDENTITY_FILE)"}, set_invite},
    {{"DEDMPI_SWARM_KEY_FILE", "", "file holding DEDMPI_SWARM_KEY (its first line), readable by this user only"}, set_swarm_key_file},
    {{"DEDMPI_MIN_ELEMENTS", "2", "smallest all-reduce (elements) that goes to the swarm: one value is taken for a metric or a count and stays with the job"}, set_min_elements},
    {{"DEDMPI_MIN_BYTES", "0", "smallest all-reduce (bytes) that goes to the swarm, besides DEDMPI_MIN_ELEMENTS"}, set_min_bytes},
    {{"DEDMPI_MIN_PEERS", "1", "the run's first round waits until this many peers are present"}, set_min_peers},
    {{"DEDMPI_MODE", "node", "node, client (no inbound connections) or aux (reduces, contributes nothing)"}, set_mode},
    {{"DEDMPI_LOG", "warn", "error, warn, info or debug (to stderr, one line per event)"}, set_log},
    {{"DEDMPI_DISABLE", "0", "1 = pure pass-through to the real MPI"}, set_disable},
    {{"DEDMPI_STATE_BCAST", "1", "1 = rank 0's large start-up broadcasts are state a joining job loads from the run; 0 = only registered buffers are"}, set_state_bcast},
    {{"DEDMPI_STEP_ROUNDS", "0", "routed all-reduces per training step; 0 = learnt from the calls (set it when equal buckets share a buffer)"}, set_step_rounds},
    {{"DEDMPI_JOIN_TIMEOUT", "30s", "how long MPI_Init tries the DEDMPI_JOIN peers"}, set_join_timeout},
    {{"DEDMPI_RENDEZVOUS_TIMEOUT", "300s", "how long the first round waits for DEDMPI_MIN_PEERS"}, set_rendezvous_timeout},
    {{"DEDMPI_ROUND_TIMEOUT", "60s", "bound on one all-reduce: past it the job keeps its own values (out of step)"}, set_round_timeout},
    {{"DEDMPI_DEADLINE_FLOOR", "500ms", "shortest learned deadline (waiting for a missing member, for progress)"}, set_deadline_floor},
    {{"DEDMPI_HISTORY_BYTES", "256M", "finished results kept to serve members that fall behind (0 = none)"}, set_history},
    {{"DEDMPI_CHUNK_BYTES", "256K", "size of the pieces a shard travels in"}, set_chunk},
    {{"DEDMPI_STREAMS", "4", "TCP connections to each peer this job calls; round data is spread over them (long fat pipes, lossy links)"}, set_streams},
    {{"DEDMPI_PROBE_BYTES", "2M", "link probe at join: bytes sent to the first peer reached, and asked back, so the links are measured before the first round; 0 = none"}, set_probe},
    {{"DEDMPI_PLAN", "lp", "how a round is cut among reducers: lp (DeDLOC's program over measured rates) or equal"}, set_plan},
    {{"DEDMPI_COMPRESS", "none", "how gradients travel: none, fp16, bf16, int8 (blocks of 512 with a scale each), topk[:FRACTION] (the largest 1 % of each chunk, or FRACTION), or auto[:FLOOR] (per round, by the measured links and the trainer's compute, never lossier than FLOOR, default int8); a round uses the least lossy of its members' choices; lossy codecs keep an error-feedback residual"}, set_compress},
    {{"DEDMPI_FEEDBACK", "on", "on, or off: compress without error feedback (to measure what it is worth; not for training)"}, set_feedback},
    {{"DEDMPI_BANDWIDTH", "", "UP[/DOWN] Mbit/s to publish instead of the measured rates (experiments)"}, set_bandwidth},
    {{"DEDMPI_PROGRESS", "", "local datagram socket (a path, or @name for an abstract one) that rank 0 reports each finished round to; dedrun sets it for its progress line"}, set_progress},
    {{"DEDMPI_CHECKPOINT_DIR", "", "backbone only: directory where it keeps checkpoints of the run's state (pulled from the trainers), serves them to joiners once no trainer is left, and loads the newest at start; unset: no checkpoints"}, set_checkpoint_dir},
    {{"DEDMPI_CHECKPOINT_EVERY", "5m", "backbone only: how often it pulls a checkpoint: a number of training steps (100) or a duration (30s, 10m)"}, set_checkpoint_every},
    {{"DEDMPI_CHECKPOINT_KEEP", "3", "backbone only: checkpoints kept in DEDMPI_CHECKPOINT_DIR (the newest); an older one is the fallback for a torn or corrupt newest"}, set_checkpoint_keep},
    {{"DEDMPI_UNKNOWN_VARS", "error", "what a DEDMPI_* name not listed here is: error (MPI_Init fails, dedrun stops: most likely a typo) or warn (a warning, and it is ignored)"}, set_unknown_vars},
    {{"DEDMPI_LIB", "next to dedrun", "dedrun only: the libdedmpi.so it preloads into mpirun's job"}, set_launcher_only},
    {{"DEDMPI_STANDALONE_DIR", "next to dedrun", "dedrun only: the directory of dedmpi's own libmpi.so.40 for --standalone"}, set_launcher_only},
    {{NULL, NULL, NULL}, NULL},
};

const ded_config_var *ded_config_vars(void) {
  DED_STATIC_ASSERT(offsetof(var_def, doc) == 0, "doc first");
  static ded_config_var table[sizeof vars / sizeof vars[0]];
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) table[i] = vars[i].doc;
  return table;
}

/* Edit distance between |a| (|n| bytes) and |b|, at most 3 (3: "or more"). */
static unsigned name_distance(const char *a, size_t n, const char *b) {
  size_t m = strlen(b);
  if (n > 64 || m > 64 || (n > m ? n - m : m - n) >= 3) return 3;
  unsigned row[65];
  for (size_t j = 0; j <= m; j++) row[j] = (unsigned)j;
  for (size_t i = 1; i <= n; i++) {
    unsigned diag = row[0];
    row[0] = (unsigned)i;
    for (size_t j = 1; j <= m; j++) {
      unsigned up = row[j];
      unsigned best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      row[j] = best;
      diag = up;
    }
  }
  return row[m] < 3 ? row[m] : 3;
}

/* The known name nearest |name| (|len| bytes), 2 edits away at most;
 * NULL if none is. */
static const char *nearest_var(const char *name, size_t len) {
  const char *best = NULL;
  unsigned best_d = 3;
  for (const var_def *v = vars; v->doc.name; v++) {
    unsigned d = name_distance(name, len, v->doc.name);
    if (d < best_d) best_d = d, best = v->doc.name;
  }
  return best;
}

int ded_config_load(ded_config *cfg, const char *(*getenv_fn)(const char *), char **environ_list,
                    char *errors, size_t errlen, char *warnings, size_t warnlen) {
  memset(cfg, 0, sizeof *cfg);
  snprintf(cfg->run, sizeof cfg->run, "default");
  snprintf(cfg->listen, sizeof cfg->listen, "0.0.0.0:0");
  cfg->min_bytes = 0;
  cfg->min_elements = 2;
  cfg->min_peers = 1;
  cfg->mode = DED_MODE_NODE;
  cfg->log_level = DED_LOG_WARN;
  cfg->join_timeout_ns = 30ull * 1000000000ull;
  cfg->rendezvous_timeout_ns = 300ull * 1000000000ull;
  cfg->round_timeout_ns = 60ull * 1000000000ull;
  cfg->chunk_bytes = 256 * 1024;
  cfg->streams = 4;
  cfg->probe_bytes = 2u << 20;
  cfg->deadline_floor_ns = 500ull * 1000000ull;
  cfg->history_bytes = 256ull << 20;
  cfg->state_bcast = true;
  cfg->checkpoint_every = 300ull * 1000000000ull;
  cfg->checkpoint_every_ns = true;
  cfg->checkpoint_keep = 3;
  if (errlen) errors[0] = '\0';
  if (warnlen) warnings[0] = '\0';
  parse_ctx p = {cfg, errors, errlen, 0};
  for (const var_def *v = vars; v->doc.name; v++) {
    const char *val = getenv_fn(v->doc.name);
    if (val) v->set(&p, v->doc.name, val);
  }
  if (cfg->swarm_key[0] && cfg->swarm_key_file[0]) {
    size_t used = strlen(errors);
    snprintf(errors + used, errlen - used,
             "DEDMPI_SWARM_KEY and DEDMPI_SWARM_KEY_FILE are both set: keep one\n");
    p.nerr++;
  }
  /* Names that look like ours but are not: most likely typos. */
  for (char **e = environ_list; e && *e; e++) {
    if (strncmp(*e, "DEDMPI_", 7) != 0) continue;
    size_t len = strcspn(*e, "=");
    bool known = false;
    for (const var_def *v = vars; v->doc.name && !known; v++)
      known = strlen(v->doc.name) == len && strncmp(v->doc.name, *e, len) == 0;
    if (known) continue;
    char hint[96] = "";
    const char *near = nearest_var(*e, len);
    if (near) snprintf(hint, sizeof hint, " (did you mean %s?)", near);
    if (cfg->unknown_warn) {
      size_t used = strlen(warnings);
      if (used < warnlen)
        snprintf(warnings + used, warnlen - used, "unknown variable %.*s%s (ignored: "
                 "DEDMPI_UNKNOWN_VARS=warn)\n", (int)len, *e, hint);
    } else {
      size_t used = strlen(errors);
      if (used < errlen)
        snprintf(errors + used, errlen - used, "unknown variable %.*s%s: not a dedmpi setting "
                 "(DEDMPI_UNKNOWN_VARS=warn lets it pass with a warning)\n", (int)len, *e, hint);
      p.nerr++;
    }
  }
  return p.nerr;
}

void ded_config_driver(const ded_config *cfg, ded_driver_config *dc) {
  memset(dc, 0, sizeof *dc);
  dc->node.run = cfg->run;
  dc->node.mode = cfg->mode;
  dc->node.min_peers = cfg->min_peers;
  dc->node.bootstrap_timeout_ns = cfg->join_timeout_ns;
  dc->node.rendezvous_timeout_ns = cfg->rendezvous_timeout_ns;
  dc->node.round_timeout_ns = cfg->round_timeout_ns;
  dc->node.chunk_bytes = cfg->chunk_bytes;
  dc->node.streams = cfg->streams;
  dc->node.probe_bytes = cfg->probe_bytes;
  dc->node.deadline_floor_ns = cfg->deadline_floor_ns;
  dc->node.history_bytes = cfg->history_bytes;
  dc->node.log_level = cfg->log_level;
  dc->node.plan = cfg->plan;
  dc->node.compress = cfg->compress;
  dc->node.compress_ppm = cfg->compress_ppm;
  dc->node.no_feedback = cfg->no_feedback;
  dc->node.up_Bps = cfg->up_Bps;
  dc->node.down_Bps = cfg->down_Bps;
  dc->listen = cfg->mode == DED_MODE_CLIENT ? NULL : cfg->listen;
  dc->join = cfg->join;
  dc->announce = cfg->announce;
  dc->identity_file = cfg->identity_file;
  dc->swarm_key = cfg->swarm_key;
  dc->swarm_key_file = cfg->swarm_key_file;
  dc->owner = cfg->has_owner ? cfg->owner : NULL;
  dc->allow_file = cfg->allow_file;
  dc->invite = cfg->has_invite ? &cfg->invite : NULL;
}
