/*
 * ded_record.h: signed, expiring discovery records.
 *
 * A record is how a peer tells the swarm where to reach it. It is signed by
 * the owner's key and names the run, so it cannot be forged, moved to
 * another run, or replayed forever: it carries the owner's wall-clock issue
 * time and a lifetime, and a newer sequence number replaces an older one.
 *
 * Encoding (little endian), signature over every byte before it:
 *
 *     u8   version (1)
 *     u8   mode (enum ded_mode)
 *     u16  flags (DED_RECORD_F_*)
 *     pk   [32]
 *     run  [32]     run id
 *     u64  seq      strictly increasing per owner
 *     u64  issued_ms  owner's wall clock, Unix ms
 *     u32  ttl_ms
 *     u8   naddr (<= DED_RECORD_ADDRS_MAX), then per address:
 *          u8 family (4 or 6), ip [16], u16 port
 *     u16  ext_len (<= DED_RECORD_EXT_MAX), ext [ext_len]
 *     sig  [64]
 *
 * The extension is a list of entries, u8 tag | u8 len | value [len];
 * unknown tags are skipped, a known one appears at most once (but GROUPS,
 * whose value may need more than 255 bytes):
 *
 *     DED_RECORD_EXT_PERF (len >= 12): u32 up | u32 down | u32 add, in
 *     kB/s (1000 bytes), 0 = unknown [| u8 flags, when len >= 13:
 *     DED_PERF_F_*, which rates are early]: the owner's measured upload
 *     and download rates and how fast it adds incoming vectors
 *     (ded_meter.h), what a round's coordinator plans shares with
 *     (ded_lp.h, ded_plan.h).
 *     DED_RECORD_EXT_INVITE (len = 72): u64 expires_ms | sig [64]: the
 *     run owner's invitation of this record's key (ded_invite.h), for a
 *     run with access control.
 *     DED_RECORD_EXT_PROGRESS (len >= 16): u64 round | u32 round_ms |
 *     u32 contributors [| u64 attempt, when len >= 24]: the last round the
 *     owner completed, how long it took it, how many jobs it averaged and
 *     the attempt whose result it took (0: unknown), what a backbone's
 *     status page shows and how two groups of one run tell each other
 *     apart (ded_rounds_check_groups); republished every few seconds while
 *     rounds go on.
 *     DED_RECORD_EXT_GROUPS (one entry or several: its value is the
 *     concatenation of the values of every GROUPS entry, in order, each at
 *     most 255 bytes): the addresses of the group peers of the owner's
 *     job (the rank 0 of each MPI_Comm_split group, each a peer of a run
 *     of its own), as a table of hosts and a list of (group id, host,
 *     port):
 *         u8 nhost (<= DED_RECORD_GROUPS_MAX), nhost x (u8 family 4|6,
 *         ip [16]), u8 n (<= DED_RECORD_GROUPS_MAX), n x (u16 id,
 *         u8 host < nhost, u16 port != 0)
 *     with ids strictly increasing and nothing after the last entry. n 0
 *     says the job has no groups. Anything else is malformed.
 *
 * A record whose extension is malformed (entries that do not fill it
 * exactly, a known tag twice or too short, a GROUPS value that does not
 * parse) does not decode: DED_ERR_PROTO, as for any other field. A peer
 * built before GROUPS existed skips its entries as unknown, as long as
 * the record keeps within that peer's limits (an extension of 256 bytes,
 * a record of 512).
 */
#ifndef DED_RECORD_H
#define DED_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "../core/ded_limits.h"
#include "../core/ded_types.h"
#include "../crypto/ded_ident.h"

#define DED_RECORD_VERSION 1

/* Flags. */
enum {
  /* The owner takes no part in rounds: a backbone or an observer. */
  DED_RECORD_F_NO_ROUNDS = 1 << 0,
};

/* Extension tags. */
enum {
  DED_RECORD_EXT_PERF = 1,
  DED_RECORD_EXT_INVITE = 2,
  DED_RECORD_EXT_PROGRESS = 3,
  DED_RECORD_EXT_GROUPS = 4,
};
#define DED_RECORD_PERF_MIN_BYTES 12 /* the least a PERF entry holds */
#define DED_RECORD_PERF_BYTES 13     /* ... and with its flags */
#define DED_RECORD_INVITE_BYTES (8 + DED_SIG_BYTES)
#define DED_RECORD_PROGRESS_BYTES 16      /* the least a PROGRESS entry holds */
#define DED_RECORD_PROGRESS_FULL_BYTES 24 /* ... and with its attempt */
#define DED_RECORD_PROGRESS_CODEC_BYTES 29 /* ... and with its codec (version 15) */
/* Group peers one record lists at most, and the most bytes their entries
 * take: the value (every entry on its own host), cut in entries of at
 * most 255 bytes, each with its tag and length. */
#define DED_RECORD_GROUPS_MAX 32
#define DED_RECORD_GROUPS_VALUE_MAX (1 + DED_RECORD_GROUPS_MAX * 17 + 1 + DED_RECORD_GROUPS_MAX * 5)
#define DED_RECORD_GROUPS_EXT_MAX \
  (DED_RECORD_GROUPS_VALUE_MAX + 2 * ((DED_RECORD_GROUPS_VALUE_MAX + 254) / 255))

/* One group peer of a job: the rank 0 of MPI_Comm_split group |id|, and
 * where it listens. */
typedef struct ded_group_addr {
  uint16_t id;
  ded_addr addr; /* family 4 or 6, port != 0 */
} ded_group_addr;

/* A peer's last completed round as its record publishes it. */
typedef struct ded_progress {
  uint64_t round;
  uint32_t round_ms;
  uint32_t contributors;
  uint64_t attempt; /* whose result the round took; 0: unknown (an older record) */
  uint8_t codec;      /* how its contributions travelled (avg/ded_codec.h's kind) */
  uint32_t codec_ppm; /* ... top-k's fraction, millionths */
} ded_progress;

/* A peer's rates as its record publishes them, in kB/s; 0 = unknown. */
/* PERF flags: which rates are early, lower bounds (ded_meter_early). */
enum {
  DED_PERF_F_UP_EARLY = 1 << 0,
  DED_PERF_F_DOWN_EARLY = 1 << 1,
};

typedef struct ded_perf {
  uint32_t up_kBps;
  uint32_t down_kBps;
  uint32_t add_kBps;
  uint8_t flags; /* DED_PERF_F_*; 0 in a PERF of 12 bytes */
} ded_perf;

typedef struct ded_record {
  uint8_t mode;
  uint16_t flags;
  uint8_t pk[DED_PK_BYTES];
  uint8_t run_id[DED_RUN_ID_BYTES];
  uint64_t seq;
  uint64_t issued_ms;
  uint32_t ttl_ms;
  uint8_t naddr;
  ded_addr addr[DED_RECORD_ADDRS_MAX];
  uint16_t ext_len;
  uint8_t ext[DED_RECORD_EXT_MAX];
  uint8_t sig[DED_SIG_BYTES];
} ded_record;

/* Encodes |rec| (signature included) into |out|; the length or a negative
 * error (DED_ERR_INVALID_ARG when |cap| is too small or |rec| malformed). */
int ded_record_encode(const ded_record *rec, uint8_t *out, size_t cap);

/* Fills in |rec->pk| and |rec->sig| from |ident|. */
void ded_record_sign(ded_record *rec, const ded_ident *ident);

/*
 * Parses |len| bytes into |rec|, checking syntax only. DED_ERR_PROTO when
 * the bytes are not exactly one well-formed record.
 */
int ded_record_decode(const uint8_t *p, size_t len, ded_record *rec);

/*
 * Checks what syntax cannot: the signature, the run, and the time window
 * (issued no later than |now_ms| + skew, expiring no earlier than
 * |now_ms| - skew). 0, DED_ERR_SIGNATURE, DED_ERR_WRONG_RUN or
 * DED_ERR_EXPIRED.
 */
int ded_record_verify(const ded_record *rec, const uint8_t run_id[DED_RUN_ID_BYTES],
                      uint64_t now_ms);

/* Sets |rec|'s extension to |perf| alone (call before signing). */
void ded_record_perf_set(ded_record *rec, const ded_perf *perf);

/* The rates |rec| publishes: 1 and |*perf|, or 0 (none; |*perf| zeroed).
 * The extension of a decoded record is well-formed. */
int ded_record_perf(const ded_record *rec, ded_perf *perf);

/* Adds the owner's invitation of |rec|'s key to its extension (after
 * ded_record_perf_set, before signing). */
void ded_record_invite_add(ded_record *rec, uint64_t expires_ms, const uint8_t sig[DED_SIG_BYTES]);

/* The invitation |rec| carries: 1 with its expiry and signature, or 0. */
int ded_record_invite(const ded_record *rec, uint64_t *expires_ms, uint8_t sig[DED_SIG_BYTES]);

/* Adds |prog| to |rec|'s extension (after ded_record_perf_set, before
 * signing). */
void ded_record_progress_add(ded_record *rec, const ded_progress *prog);

/* The progress |rec| publishes: 1 and |*prog|, or 0 (none; zeroed). */
int ded_record_progress(const ded_record *rec, ded_progress *prog);

/* Adds the list of |n| group peers |g| to |rec|'s extension (after
 * ded_record_perf_set, before signing). 0, or DED_ERR_INVALID_ARG (more
 * than DED_RECORD_GROUPS_MAX, ids not strictly increasing, an address of
 * another family or port 0, no room left), |rec| unchanged. */
int ded_record_groups_add(ded_record *rec, const ded_group_addr *g, unsigned n);

/* The group peers |rec| publishes: how many (0 to DED_RECORD_GROUPS_MAX,
 * into |out|, ids increasing), or -1 if it publishes no list (no GROUPS
 * entry). The extension of a decoded record is well-formed. */
int ded_record_groups(const ded_record *rec, ded_group_addr out[DED_RECORD_GROUPS_MAX]);

/* Absolute expiry of |rec|, in the owner's clock. */
static inline uint64_t ded_record_expiry_ms(const ded_record *rec) {
  return rec->issued_ms + rec->ttl_ms;
}

#endif /* DED_RECORD_H */
