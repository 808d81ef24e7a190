/*
 * ded_meter.h: how fast a peer's link moves bytes, measured from its own
 * traffic (DeDLOC's plan needs every peer's rates; hivemind trusts what the
 * user types, we measure).
 *
 * A meter sees bytes and the times they moved. A busy period is a stretch
 * in which the link had work the whole time: for uploads, output was
 * queued from the first byte handed to the network to the last (the
 * driver keeps the kernel's unsent backlog small, so handing over is
 * sending); for downloads, bytes kept arriving with no gap longer than
 * DED_METER_GAP_NS. A period's clock starts DED_METER_SETTLE_NS after its
 * first bytes, and what moved before is not counted: it went into empty
 * buffers at once (every connection's socket takes its share within a
 * millisecond, megabytes with several streams per peer), or, arriving,
 * came in over an unknown time. Each period long enough to mean something gives a
 * sample, bytes over time; a long period gives one per second. The
 * estimate is the largest of the last DED_METER_SAMPLES samples: a period
 * in which the other side was the bottleneck reads low, never high, so
 * the recent maximum is the link's capacity (BBR's bandwidth filter).
 */
#ifndef DED_METER_H
#define DED_METER_H

#include <stdbool.h>
#include <stdint.h>

enum {
  DED_METER_SAMPLES = 8,
  /* Fewer samples than this, and the estimate is early: a lower bound.
   * A link's first periods read low (connections and their windows ramp
   * up) and a fast link's transfers are short bursts, few of them long
   * enough to sample; a slow link's long transfers give a sample a
   * second and settle it within a round. */
  DED_METER_SETTLED = 4,
};

/* A period counts from this much data and time on. */
#define DED_METER_MIN_BYTES (1024u * 1024u)
#define DED_METER_MIN_NS (50u * 1000000u)
/* A longer period is sampled every so often (once it holds
 * DED_METER_MIN_BYTES), so the estimate follows. */
#define DED_METER_PERIOD_NS (1000u * 1000000u)
/* What moves this soon after a period's first bytes is buffers filling. */
#define DED_METER_SETTLE_NS (20u * 1000000u)
/* Downloads: a silence this long ends a busy period. */
#define DED_METER_GAP_NS (30u * 1000000u)

typedef struct ded_meter {
  bool open;         /* a busy period is running */
  bool moved;        /* its first bytes moved, at first_ns */
  bool primed;       /* ... and DED_METER_SETTLE_NS passed: the clock runs */
  uint64_t first_ns;
  uint64_t start_ns; /* where the clock started */
  uint64_t last_ns;  /* its latest byte */
  uint64_t bytes;    /* bytes moved after start_ns */
  double sample[DED_METER_SAMPLES];
  unsigned nsample, next;
} ded_meter;

/* Uploads. The link got work to do (output queued while none was): a
 * busy period begins, unless one runs. */
void ded_meter_begin(ded_meter *m);
/* |bytes| moved at |now_ns| within the running period. */
void ded_meter_add(ded_meter *m, uint64_t bytes, uint64_t now_ns);
/* The work ran out: the period ends at its last byte. */
void ded_meter_end(ded_meter *m);

/* Downloads: |bytes| arrived at |now_ns|. A gap ends the period before and
 * starts one here. */
void ded_meter_arrive(ded_meter *m, uint64_t bytes, uint64_t now_ns);

/* The estimate in bytes per second; 0 before any sample. */
double ded_meter_rate(const ded_meter *m);

/* Whether the estimate is early: fewer than DED_METER_SETTLED samples
 * (the link may well be faster). */
bool ded_meter_early(const ded_meter *m);

#endif /* DED_METER_H */
