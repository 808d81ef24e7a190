/*
 * fuzz_image.c: a state image as a peer may send it (state/ded_image.h).
 *
 * Input: the image's bytes. ded_image_parse answers 0 or -1; what it
 * takes has a table that fits and sizes that add up to exactly the bytes
 * after it, every piece within them, and writing the table back gives the
 * same bytes.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

#include "state/ded_image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ded_image_view v;
  int rv = ded_image_parse(data, size, &v);
  FUZZ_CHECK(rv == 0 || rv == -1);
  if (rv) return 0;
  FUZZ_CHECK(v.table == data + 8 && v.data == data + ded_image_table_bytes(v.n));
  FUZZ_CHECK(ded_image_table_bytes(v.n) + v.data_len == size);
  uint64_t sum = 0;
  uint64_t *sizes = malloc((v.n ? v.n : 1) * sizeof *sizes);
  FUZZ_CHECK(sizes);
  for (uint64_t i = 0; i < v.n; i++) {
    sizes[i] = ded_image_size(&v, i);
    FUZZ_CHECK(sizes[i] <= v.data_len - sum);
    sum += sizes[i];
  }
  FUZZ_CHECK(sum == v.data_len);
  uint8_t *table = malloc(ded_image_table_bytes(v.n));
  FUZZ_CHECK(table);
  ded_image_write_table(table, sizes, v.n);
  FUZZ_CHECK(memcmp(table, data, ded_image_table_bytes(v.n)) == 0);
  free(table);
  free(sizes);
  return 0;
}
