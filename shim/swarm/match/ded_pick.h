/*
 * ded_pick.h: the codec a round's contributions travel in, as its
 * coordinator chooses it (issue 23; docs/configuration.md, "Compression").
 *
 * Owns nothing: a pure function of the members' JOINs (their
 * DEDMPI_COMPRESS and how long their trainers computed before the round)
 * and the plan's estimate of the round's time.
 *
 * The rule:
 *  - No compression for a round of fewer than two contributors (a job
 *    alone keeps plain MPI's bits) or of elements that are not float32.
 *  - The members allow the least lossy of their choices (ded_codec_rank;
 *    a fixed codec, or auto's floor): no member's bytes travel lossier
 *    than it asked.
 *  - If no member asked for auto, that codec it is.
 *  - Auto: from the least lossy up to what the members allow, the first
 *    codec whose estimated round time (the plan's seconds per byte times
 *    the bytes the codec sends, ded_pick_ratio) is within the members'
 *    compute (the shortest time a member's trainer computed before its
 *    JOIN that a member reports), or whose round would take at most
 *    DED_PICK_FAST_S anyway; failing all of them, the lossiest allowed.
 *    Rates not known yet (a member's links not measured: no estimate): no
 *    compression.
 */
#ifndef DED_PICK_H
#define DED_PICK_H

#include <stdint.h>

#include "../avg/ded_codec.h"
#include "../core/ded_msg.h"

/* A round that takes at most this long uncompressed is not worth losing
 * bits for (loopback, a LAN). */
#define DED_PICK_FAST_S 0.05

/* The bytes a round of |ncontrib| contributors sends with |c|, over what
 * it sends uncompressed (float32), both phases together, as estimated. */
double ded_pick_ratio(const ded_codec *c, unsigned ncontrib);

typedef struct ded_pick_member {
  uint8_t compress; /* the JOIN's: a kind | DED_JOIN_COMPRESS_AUTO */
  uint32_t compress_ppm;
  uint32_t compute_us;
} ded_pick_member;

/*
 * The round's codec, from its |n| members' choices (|ncontrib| of them
 * contributors), its |dtype| and |count|, and |t_per_byte| (the plan's
 * estimate, seconds per byte of the float32 vector; 0 or not finite:
 * unknown), into |*out|.
 */
void ded_pick_codec(const ded_pick_member *m, unsigned n, unsigned ncontrib, uint8_t dtype,
                    uint64_t count, double t_per_byte, ded_codec *out);

#endif /* DED_PICK_H */
