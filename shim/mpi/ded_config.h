/*
 * ded_config.h: the DEDMPI_* environment, parsed and checked.
 *
 * Configuration is environment first, so that `mpirun -x` and batch
 * schedulers carry it. Every variable is in one table (ded_config.c)
 * with its default and a one-line description; docs/configuration.md
 * mirrors it. An invalid value is an error reported at MPI_Init, never a
 * silent fallback; so is an unknown DEDMPI_ name (likely a typo), unless
 * DEDMPI_UNKNOWN_VARS=warn makes it a warning.
 */
#ifndef DED_CONFIG_H
#define DED_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/ded_limits.h"
#include "dht/ded_invite.h"

typedef struct ded_config {
  bool disable;                   /* DEDMPI_DISABLE */
  char run[DED_RUN_NAME_MAX + 1]; /* DEDMPI_RUN */
  char join[2048];                /* DEDMPI_JOIN */
  char listen[256];               /* DEDMPI_LISTEN */
  char announce[1024];            /* DEDMPI_ANNOUNCE */
  char identity_file[1024];       /* DEDMPI_IDENTITY_FILE */
  char swarm_key[512];            /* DEDMPI_SWARM_KEY (its text; "" = none) */
  char swarm_key_file[1024];      /* DEDMPI_SWARM_KEY_FILE */
  bool has_owner;                 /* DEDMPI_OWNER */
  uint8_t owner[DED_PK_BYTES];
  char allow_file[1024];          /* DEDMPI_ALLOW_FILE */
  bool has_invite;                /* DEDMPI_INVITE */
  ded_invite invite;
  uint64_t min_bytes;             /* DEDMPI_MIN_BYTES */
  uint32_t min_elements;          /* DEDMPI_MIN_ELEMENTS */
  uint32_t min_peers;             /* DEDMPI_MIN_PEERS */
  uint8_t mode;                   /* DEDMPI_MODE (enum ded_mode) */
  int log_level;                  /* DEDMPI_LOG (enum ded_log_level) */
  uint64_t join_timeout_ns;       /* DEDMPI_JOIN_TIMEOUT */
  uint64_t rendezvous_timeout_ns; /* DEDMPI_RENDEZVOUS_TIMEOUT */
  uint64_t round_timeout_ns;      /* DEDMPI_ROUND_TIMEOUT */
  uint32_t chunk_bytes;           /* DEDMPI_CHUNK_BYTES */
  uint8_t streams;                /* DEDMPI_STREAMS */
  uint32_t probe_bytes;           /* DEDMPI_PROBE_BYTES */
  uint64_t deadline_floor_ns;     /* DEDMPI_DEADLINE_FLOOR */
  uint64_t history_bytes;         /* DEDMPI_HISTORY_BYTES (UINT64_MAX: none) */
  bool state_bcast;               /* DEDMPI_STATE_BCAST */
  uint32_t step_rounds;           /* DEDMPI_STEP_ROUNDS (0: learnt) */
  uint8_t plan;                   /* DEDMPI_PLAN (enum ded_plan) */
  uint8_t compress;               /* DEDMPI_COMPRESS: a codec kind | DED_NODE_COMPRESS_AUTO */
  uint32_t compress_ppm;          /* ... top-k's fraction, millionths */
  bool no_feedback;               /* DEDMPI_FEEDBACK=off */
  double up_Bps, down_Bps;        /* DEDMPI_BANDWIDTH (0: measured) */
  char progress[108];             /* DEDMPI_PROGRESS ("" = none; '@' = abstract) */
  char checkpoint_dir[1024];      /* DEDMPI_CHECKPOINT_DIR ("" = no checkpoints; backbone) */
  uint64_t checkpoint_every;      /* DEDMPI_CHECKPOINT_EVERY: steps, or ns if ..._ns */
  bool checkpoint_every_ns;
  uint32_t checkpoint_keep;       /* DEDMPI_CHECKPOINT_KEEP */
  bool unknown_warn;              /* DEDMPI_UNKNOWN_VARS=warn */
} ded_config;

/*
 * Fills |cfg| from the environment (|getenv_fn| = getenv, or a test's own
 * lookup; |environ_list|, the whole environment, for names not known).
 * Problems go to |errors| and |warnings| as lines. Returns the number of
 * errors; |cfg| holds defaults for every variable in error.
 */
int ded_config_load(ded_config *cfg, const char *(*getenv_fn)(const char *), char **environ_list,
                    char *errors, size_t errlen, char *warnings, size_t warnlen);

/* One documented variable, for help texts. */
typedef struct ded_config_var {
  const char *name;
  const char *def;
  const char *help;
} ded_config_var;

/* The table, terminated by a NULL name. */
const ded_config_var *ded_config_vars(void);

/* The driver's settings for |cfg| (pointers into |cfg|, which must
 * outlive the start); callbacks and the log prefix are the caller's. */
struct ded_driver_config;
void ded_config_driver(const ded_config *cfg, struct ded_driver_config *dc);

#endif /* DED_CONFIG_H */
