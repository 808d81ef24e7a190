/*
 * sharded.c: two ways real trainers all-reduce gradients without
 * MPI_Allreduce, as a toy model trained by plain SGD.
 *
 *   sharded --mode zero|persist --steps N --seed S --shard K --out FILE
 *           [--init-seed S]
 *
 * zero: ZeRO-style sharded gradients. Each step every rank's gradient
 * (a pure function of the seed, shard + rank, the step and the current
 * parameters) goes through MPI_Reduce_scatter_block (MPI_SUM of floats)
 * for a small tensor's and MPI_Reduce_scatter (uneven blocks) for the
 * large one's; each rank updates its block of the parameters with the
 * mean and MPI_Allgather(v) puts the blocks back together on every rank.
 *
 * persist: persistent all-reduces. One MPIX_Allreduce_init (Open MPI
 * 4.1's name for MPI-4's MPI_Allreduce_init) per tensor, in place, made
 * once; each step MPI_Startall, then MPI_Waitall, then the update; the
 * requests are freed at the end.
 *
 * Rank 0's parameters go to every rank at the start (MPI_Bcast: the
 * model, so a swarm starts every job from one of them). The output is the
 * parameters (rank 0) and a line `final checksum <hex>`.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <mpi.h>

#include <mpi-ext.h> /* after mpi.h: MPIX_Allreduce_init */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "toy.h"

enum { SMALL = 96, LARGE = 6000, NT = 2 };
static const int sizes[NT] = {SMALL, LARGE};

static int usage(void) {
  fprintf(stderr, "usage: sharded --mode zero|persist --steps N --seed S --shard K --out FILE "
                  "[--init-seed S]\n");
  return 2;
}

/* The gradient of a toy loss: pulls each parameter towards a target
 * drawn from the sample, plus noise. */
static void gradient(float *g, const float *p, int t, uint64_t seed, int sample, int step) {
  for (int i = 0; i < sizes[t]; i++) {
    float target = unit(seed, (uint64_t)t, (uint64_t)i, 7);
    float noise = unit(seed, (uint64_t)sample, (uint64_t)step, (uint64_t)(t * 100003 + i));
    g[i] = p[i] - target + 0.5f * noise;
  }
}

static uint64_t checksum(float *const p[NT]) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int t = 0; t < NT; t++) {
    const unsigned char *b = (const unsigned char *)p[t];
    for (size_t i = 0; i < (size_t)sizes[t] * sizeof(float); i++) h = (h ^ b[i]) * 0x100000001b3ull;
  }
  return h;
}

int main(int argc, char **argv) {
  const char *mode = NULL, *out = NULL;
  int steps = 0, shard = 0;
  uint64_t seed = 1, init_seed = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--mode")) mode = argv[i + 1];
    else if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--seed")) seed = strtoull(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--init-seed")) init_seed = strtoull(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--shard")) shard = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--out")) out = argv[i + 1];
    else return usage();
  }
  if (argc % 2 == 0 || !mode || !out || steps <= 0 ||
      (strcmp(mode, "zero") != 0 && strcmp(mode, "persist") != 0))
    return usage();
  if (!init_seed) init_seed = seed;
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  float *p[NT], *g[NT], *blk[NT];
  for (int t = 0; t < NT; t++) {
    p[t] = malloc((size_t)sizes[t] * sizeof(float));
    g[t] = malloc((size_t)sizes[t] * sizeof(float));
    blk[t] = malloc((size_t)sizes[t] * sizeof(float));
    if (!p[t] || !g[t] || !blk[t]) MPI_Abort(MPI_COMM_WORLD, 1);
    for (int i = 0; i < sizes[t]; i++) p[t][i] = unit(init_seed, 11, (uint64_t)t, (uint64_t)i);
    MPI_Bcast(p[t], sizes[t], MPI_FLOAT, 0, MPI_COMM_WORLD);
  }
  /* zero: the small tensor in equal blocks (SMALL divides by 1 to 4 ranks),
   * the large one in uneven blocks: rank r holds counts[r] from displs[r]. */
  int *counts = malloc((size_t)size * sizeof *counts), *displs = malloc((size_t)size * sizeof *displs);
  if (!counts || !displs || SMALL % size != 0) MPI_Abort(MPI_COMM_WORLD, 1);
  for (int r = 0, off = 0; r < size; r++) {
    counts[r] = LARGE / size + (r < LARGE % size);
    displs[r] = off;
    off += counts[r];
  }
  MPI_Request req[NT];
  if (!strcmp(mode, "persist"))
    for (int t = 0; t < NT; t++)
      MPIX_Allreduce_init(MPI_IN_PLACE, g[t], sizes[t], MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                          MPI_INFO_NULL, &req[t]);
  const float lr = 0.1f;
  for (int step = 1; step <= steps; step++) {
    for (int t = NT - 1; t >= 0; t--) gradient(g[t], p[t], t, seed, shard + rank, step);
    if (!strcmp(mode, "persist")) {
      MPI_Startall(NT, req);
      MPI_Waitall(NT, req, MPI_STATUSES_IGNORE);
      for (int t = 0; t < NT; t++)
        for (int i = 0; i < sizes[t]; i++) p[t][i] -= lr * g[t][i] / (float)size;
      continue;
    }
    int b = SMALL / size;
    MPI_Reduce_scatter_block(g[0], blk[0], b, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Reduce_scatter(g[1], blk[1], counts, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; i < b; i++) blk[0][i] = p[0][rank * b + i] - lr * blk[0][i] / (float)size;
    for (int i = 0; i < counts[rank]; i++)
      blk[1][i] = p[1][displs[rank] + i] - lr * blk[1][i] / (float)size;
    MPI_Allgather(blk[0], b, MPI_FLOAT, p[0], b, MPI_FLOAT, MPI_COMM_WORLD);
    MPI_Allgatherv(blk[1], counts[rank], MPI_FLOAT, p[1], counts, displs, MPI_FLOAT,
                   MPI_COMM_WORLD);
  }
  if (!strcmp(mode, "persist"))
    for (int t = 0; t < NT; t++) MPI_Request_free(&req[t]);
  int rc = 0;
  if (rank == 0) {
    printf("final checksum 0x%016" PRIx64 "\n", checksum(p));
    FILE *f = fopen(out, "wb");
    for (int t = 0; f && t < NT; t++)
      if (fwrite(p[t], sizeof(float), (size_t)sizes[t], f) != (size_t)sizes[t]) rc = 1;
    if (!f || fclose(f) != 0) rc = 1;
  }
  for (int t = 0; t < NT; t++) {
    free(p[t]);
    free(g[t]);
    free(blk[t]);
  }
  free(counts);
  free(displs);
  MPI_Finalize();
  return rc;
}
