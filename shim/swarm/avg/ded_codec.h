/*
 * ded_codec.h: the gradient codecs (issue 23): how a run of float32
 * elements travels compressed, and how a peer's compressed bytes are read
 * back, every length, index and count checked.
 *
 * Owns: a codec's description (ded_codec: which one, and top-k's
 * fraction) and the pure functions that encode and decode with it.
 * Nothing here sends, logs, keeps time or allocates but through the
 * caller's ded_mem (top-k's selection scratch).
 *
 * The codecs, on a range [first, first + n) of a vector of |total|
 * float32 elements (|first| and |total| matter to int8 alone):
 *  - NONE: the float32 bytes, little-endian.
 *  - FP16: IEEE binary16 per element, round to nearest even, saturating
 *    (a magnitude past 65504, infinities included, becomes +-65504; NaN
 *    stays NaN); 2 bytes an element.
 *  - BF16: the upper half of the float32, round to nearest even (NaN
 *    stays NaN); 2 bytes an element.
 *  - INT8: blockwise. The vector is cut into blocks of DED_CODEC_INT8_BLOCK
 *    elements counted from element 0 of the whole vector, whatever range
 *    is encoded: a block's scale is max|x| / 127 over the whole block, so
 *    any range decodes to the same values as the same elements of the
 *    whole vector, however the shards cut it. For each block the range
 *    touches, in order: its scale (float32, 0 to FLT_MAX / 127), then one
 *    signed byte per element of the range in it, q = x * (1 / scale) rounded to
 *    nearest even, in [-127, 127] (a block of zeros has scale 0, and so
 *    has one whose scale would be below FLT_MIN: its values are zeros).
 *    A value is q * scale.
 *  - TOPK: the k = ceil(fraction * n) largest magnitudes of the range
 *    (at least 1 for n > 0; ties at the k-th magnitude taken from the
 *    lowest index): u32 k, then the k indices (relative to |first|,
 *    strictly increasing) as LEB128 gaps (index minus the previous index
 *    minus 1, the first from -1), then the k values as float32. Every
 *    other element is 0.
 *  - SPARSE: the same layout as TOPK with any k up to n: every element
 *    of the range that is not zero (NaN included), in index order. It is
 *    lossless but for the sign of a zero. The result of a top-k round
 *    travels in it (ded_codec_result).
 * Everything is little-endian. Encoding refuses non-finite input for
 * INT8 and TOPK (DED_ERR_INVALID_ARG): a NaN would make every element of
 * its block NaN, or hide; the caller sends such a range uncompressed.
 *
 * Invariants: decode(encode(x)) is deterministic and the same on every
 * machine (the arithmetic is exact or IEEE round-to-nearest in float32,
 * with no contraction); a payload decodes only if it is exactly as long
 * as its counts say, its indices are strictly increasing and in range,
 * and its scales in [0, FLT_MAX / 127]; else DED_ERR_PROTO with |out| left in
 * an unspecified but initialised state.
 */
#ifndef DED_CODEC_H
#define DED_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/ded_mem.h"

#define DED_CODEC_INT8_BLOCK 512
#define DED_CODEC_TOPK_DEFAULT 0.01

typedef enum ded_codec_kind {
  DED_CODEC_NONE = 0,
  DED_CODEC_FP16 = 1,
  DED_CODEC_BF16 = 2,
  DED_CODEC_INT8 = 3,
  DED_CODEC_TOPK = 4,
  DED_CODEC_SPARSE = 5, /* results only: never a contribution's codec */
  DED_CODEC_KIND_MAX = DED_CODEC_SPARSE
} ded_codec_kind;

/* Top-k's fraction on the wire: millionths, 1 to 1,000,000. */
#define DED_CODEC_PPM 1000000u

typedef struct ded_codec {
  ded_codec_kind kind;
  double fraction; /* TOPK: of the elements kept, in (0, 1]; else unused */
} ded_codec;

/* "none", "fp16", "bf16", "int8", "topk", "sparse", or "?". */
const char *ded_codec_name(ded_codec_kind kind);

/* Parses |text| ("none", "fp16", "bf16", "int8", "topk" or
 * "topk:FRACTION" with 0.000001 <= FRACTION <= 1, rounded to millionths)
 * into |out|: 0, or DED_ERR_INVALID_ARG. */
int ded_codec_parse(const char *text, ded_codec *out);

/* A round's codec as the COMMIT carries it: the kind (NONE to TOPK), and
 * top-k's fraction in millionths (0 for the others). */
void ded_codec_to_wire(const ded_codec *c, uint8_t *kind, uint32_t *ppm);

/* The codec a COMMIT's (kind, ppm) describes: 0, or DED_ERR_PROTO when
 * the kind is not a contribution's, or ppm is out of range for it. */
int ded_codec_from_wire(uint8_t kind, uint32_t ppm, ded_codec *out);

/*
 * The codec a round's result travels in, for a round whose contributions
 * use |c| (the all-gather re-encodes each finished chunk once, at its
 * reducer, and every member decodes those bytes, the reducer too):
 *  - NONE, FP16, BF16: the same codec. The mean of values of a format is
 *    rounded once more to that format: an error of half a unit in its
 *    last place, no more than one contribution's own.
 *  - INT8: INT8 with the chunk as the whole vector (its blocks counted
 *    from the chunk's first element, which the reducer holds entire):
 *    the error is at most half a step of the block's largest mean value
 *    over 127, as a contribution's.
 *  - TOPK: SPARSE. The mean of k-sparse contributions is sparse; sent
 *    exactly, it adds no error at all.
 */
ded_codec ded_codec_result(const ded_codec *c);

/* The largest encoding of |n| elements with |c|. */
size_t ded_codec_bound(const ded_codec *c, size_t n);

/* Top-k's k for a range of |n| elements. */
size_t ded_codec_topk_k(double fraction, size_t n);

/* Encodes elements [first, first + n) of |v| (|total| elements; |v|
 * points at element 0) into |out| (|cap| bytes, at least
 * ded_codec_bound), its length in |*len|. 0, DED_ERR_INVALID_ARG (bad
 * arguments, or non-finite input for INT8 and TOPK), DED_ERR_NOMEM. */
int ded_codec_encode(const ded_codec *c, const float *v, size_t total, size_t first, size_t n,
                     uint8_t *out, size_t cap, size_t *len, const ded_mem *mem);

/* Decodes |len| bytes at |in| as elements [first, first + n) of a vector
 * of |total| with |c| into |out| (n floats). 0, or DED_ERR_PROTO. */
int ded_codec_decode(const ded_codec *c, const uint8_t *in, size_t len, size_t total, size_t first,
                     size_t n, float *out);

/* One element through the half-precision formats, for tests and the
 * shim. */
uint16_t ded_codec_f32_to_f16(float f);
float ded_codec_f16_to_f32(uint16_t h);
uint16_t ded_codec_f32_to_bf16(float f);
float ded_codec_bf16_to_f32(uint16_t h);

#endif /* DED_CODEC_H */
