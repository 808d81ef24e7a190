/*
 * fuzz_ckpt.c: a backbone's checkpoint file as a disk may hand it back
 * (shim/io/ded_ckpt.h): torn, corrupt, another run's, or crafted.
 *
 * Input: the file's bytes. ded_ckpt_parse answers 0 or -1 (with a
 * reason); what it takes is a header and exactly the bytes it announces,
 * a state image that parses, and writing the header again from what was
 * taken gives the same bytes.
 */
#include <string.h>

#include "fuzz.h"

#include "crypto/ded_ident.h"
#include "ded_ckpt.h"
#include "state/ded_image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static uint8_t run[32];
  static int ready;
  if (!ready) {
    FUZZ_CHECK(ded_crypto_init() == 0);
    ded_ckpt_run_hash(FUZZ_RUN, run);
    ready = 1;
  }
  ded_snapshot snap;
  uint64_t wall = 0;
  const char *why = NULL;
  int rv = ded_ckpt_parse(data, size, run, &snap, &wall, &why);
  FUZZ_CHECK(rv == 0 || rv == -1);
  if (rv) {
    FUZZ_CHECK(why != NULL);
    return 0;
  }
  FUZZ_CHECK(why == NULL && size >= DED_CKPT_HDR_BYTES);
  FUZZ_CHECK(snap.bytes == data + DED_CKPT_HDR_BYTES && snap.len == size - DED_CKPT_HDR_BYTES);
  FUZZ_CHECK(snap.round > 0 && snap.step_rounds > 0);
  FUZZ_CHECK(ded_digest64(snap.bytes, snap.len) == snap.digest);
  ded_image_view v;
  FUZZ_CHECK(ded_image_parse(snap.bytes, snap.len, &v) == 0);
  uint8_t hdr[DED_CKPT_HDR_BYTES];
  ded_ckpt_header(hdr, run, &snap, wall);
  FUZZ_CHECK(memcmp(hdr, data, DED_CKPT_HDR_BYTES) == 0);
  return 0;
}
