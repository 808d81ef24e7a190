/*
 * codec_bench.c: encode and decode throughput of the gradient codecs
 * (avg/ded_codec), one core.
 *
 *   codec_bench [--mib M] [--reps R]
 *
 * A gradient-like vector of M MiB of float32 (default 64: a 16 M-parameter
 * model), each codec encoding and decoding it whole R times (default 5);
 * one line per codec, the median, in GB/s of float32 input (the rate a
 * round's payload is made and read at), next to the target of
 * 1 GB/s per core:
 *   codec=<name> encode_GBps=<x> decode_GBps=<y> ratio=<float bytes / encoded> target_GBps=1
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "avg/ded_codec.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  size_t mib = 64;
  int reps = 5;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--mib") && i + 1 < argc && atoi(argv[i + 1]) > 0) {
      mib = (size_t)atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--reps") && i + 1 < argc && atoi(argv[i + 1]) > 0) {
      reps = atoi(argv[++i]);
    } else {
      fprintf(stderr, "usage: %s [--mib M] [--reps R]\n", argv[0]);
      return 2;
    }
  }
  size_t n = mib * 1024 * 1024 / sizeof(float);
  float *v = malloc(n * sizeof *v), *out = malloc(n * sizeof *out);
  uint64_t s = 0x853c49e6748fea9bull;
  for (size_t i = 0; i < n && v; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    v[i] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5) * 1e-2f;
  }
  const char *codecs[] = {"fp16", "bf16", "int8", "topk"};
  double *enc = malloc((size_t)reps * sizeof *enc), *dec = malloc((size_t)reps * sizeof *dec);
  if (!v || !out || !enc || !dec) {
    fprintf(stderr, "codec_bench: out of memory\n");
    return 1;
  }
  for (size_t c = 0; c < sizeof codecs / sizeof codecs[0]; c++) {
    ded_codec codec;
    if (ded_codec_parse(codecs[c], &codec)) return 1;
    size_t cap = ded_codec_bound(&codec, n), len = 0;
    uint8_t *buf = malloc(cap);
    if (!buf) return 1;
    for (int r = 0; r < reps; r++) {
      double t0 = now_s();
      if (ded_codec_encode(&codec, v, n, 0, n, buf, cap, &len, ded_mem_default())) return 1;
      double t1 = now_s();
      if (ded_codec_decode(&codec, buf, len, n, 0, n, out)) return 1;
      double t2 = now_s();
      enc[r] = t1 - t0;
      dec[r] = t2 - t1;
    }
    qsort(enc, (size_t)reps, sizeof *enc, cmp_double);
    qsort(dec, (size_t)reps, sizeof *dec, cmp_double);
    double bytes = (double)n * sizeof(float);
    printf("codec=%s encode_GBps=%.2f decode_GBps=%.2f ratio=%.1f target_GBps=1\n", codecs[c],
           bytes / enc[reps / 2] / 1e9, bytes / dec[reps / 2] / 1e9, bytes / (double)len);
    free(buf);
  }
  free(v);
  free(out);
  free(enc);
  free(dec);
  return 0;
}
