/*
 * fuzz_frame.c: the frame decoder, fed in pieces.
 *
 * Input: u8 seed | u8 piece bound | stream. The stream goes to one decoder
 * in pieces of 0 .. 2^(bound % 17) bytes chosen by the seed, and to a
 * second decoder all at once. Framing does not depend on how the bytes
 * were cut, so both must produce the same frames and stop at the same
 * error: a differential check on top of the sanitizers.
 */
#include <string.h>

#include "fuzz.h"

#include "core/ded_err.h"
#include "core/ded_frame.h"
#include "core/ded_limits.h"

typedef struct ref_frame {
  uint8_t type;
  const uint8_t *payload;
  size_t len;
} ref_frame;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  uint32_t rng = fuzz_rng_seed(data[0]);
  size_t bound = (size_t)1 << (data[1] % 17);
  const uint8_t *stream = data + 2;
  size_t stream_len = size - 2;

  /* Reference: everything in one read. Frames lie whole in the input, so
   * they come out in place. */
  ref_frame *ref = malloc((stream_len / DED_FRAME_HDR_BYTES + 1) * sizeof *ref);
  FUZZ_CHECK(ref);
  size_t nref = 0;
  ded_frame_dec whole;
  ded_frame_dec_init(&whole, NULL);
  const uint8_t *p = stream;
  size_t left = stream_len;
  ded_frame fr;
  int ref_rv;
  while ((ref_rv = ded_frame_dec_next(&whole, &p, &left, &fr)) == 1) {
    FUZZ_CHECK(fr.payload >= stream + DED_FRAME_HDR_BYTES && fr.payload + fr.len <= p);
    FUZZ_CHECK(fr.len + 1 <= DED_FRAME_MAX);
    ref[nref++] = (ref_frame){fr.type, fr.payload, fr.len};
  }
  FUZZ_CHECK(ref_rv == 0 || ref_rv == DED_ERR_FRAME_SIZE);
  if (ref_rv == 0) FUZZ_CHECK(left == 0);
  /* Sticky: a broken stream stays broken. */
  if (ref_rv < 0) FUZZ_CHECK(ded_frame_dec_next(&whole, &p, &left, &fr) == ref_rv);
  ded_frame_dec_free(&whole);

  /* The same bytes, in pieces. */
  ded_frame_dec dec;
  ded_frame_dec_init(&dec, NULL);
  size_t pos = 0, got = 0;
  int rv = 0;
  while (rv >= 0 && pos <= stream_len) {
    size_t piece = fuzz_rng_next(&rng) % (bound + 1);
    if (piece > stream_len - pos) piece = stream_len - pos;
    const uint8_t *q = stream + pos;
    size_t n = piece;
    while ((rv = ded_frame_dec_next(&dec, &q, &n, &fr)) == 1) {
      FUZZ_CHECK(got < nref);
      FUZZ_CHECK(fr.type == ref[got].type && fr.len == ref[got].len);
      FUZZ_CHECK(fr.len == 0 || memcmp(fr.payload, ref[got].payload, fr.len) == 0);
      got++;
    }
    if (rv == 0) FUZZ_CHECK(n == 0);
    pos += piece;
    if (pos == stream_len) break;
  }
  FUZZ_CHECK(got == nref);
  FUZZ_CHECK(rv == ref_rv);
  ded_frame_dec_free(&dec);
  free(ref);
  return 0;
}
