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
 *  - The contributors allow the most that all of their choices allow (a
 *    fixed codec, or auto's floor; aux members bring no vector and have
 *    no say): the same codec; top-k's largest fraction; none if one says
 *    none, or if one says fp16 and another bf16 (each keeps something
 *    the other drops); else the least lossy (fp16 and bf16 before int8,
 *    int8 before top-k). No member's bytes travel lossier than it asked.
 *  - If no member asked for auto, that codec it is.
 *  - Auto weighs a training step's exchange (the plan's seconds per byte
 *    times the bytes of a step, |elems|, with each codec, ded_pick_ratio)
 *    against a step's compute (the shortest any member reports; 0 when
 *    none knows it yet): no compression while a member's links are not
 *    measured (no estimate) or the step's exchange takes at most
 *    DED_PICK_FAST_S uncompressed; else the first of none, fp16, int8 and
 *    top-k that is allowed and fits within the compute; failing all of
 *    them, the lossiest allowed.
 */
#ifndef DED_PICK_H
#define DED_PICK_H

#include <stdbool.h>
#include <stdint.h>

#include "../avg/ded_codec.h"
#include "../core/ded_msg.h"

/* A step whose exchange takes at most this long uncompressed is not worth
 * losing bits for (loopback, a LAN). */
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
 * The round's codec, from its |n| contributors' choices, its |dtype|,
 * the elements of a training step
 * |elems| (the round's own count when the step is not known), and
 * |t_per_byte| (the plan's estimate, seconds per byte of the float32
 * vector; 0 or not finite: unknown), into |*out|.
 */
void ded_pick_codec(const ded_pick_member *m, unsigned n, uint8_t dtype, uint64_t elems,
                    double t_per_byte, ded_codec *out);

#endif /* DED_PICK_H */
