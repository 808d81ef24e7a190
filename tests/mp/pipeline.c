/*
 * pipeline.c: a pipeline-parallel trainer of two stages, as a toy model
 * trained by plain SGD: the data-parallel gradient sums go over groups of
 * MPI_Comm_split, not over the whole job.
 *
 *   pipeline --steps N --seed S --shard K --out PREFIX [--init-seed S]
 *
 * The job's 2 * D ranks are two stages of D data-parallel ranks each
 * (world rank = stage * D + d). Two splits of the world, in this order:
 * the data-parallel groups (one per stage, color = stage) and the
 * pipeline groups (one per d, color = d: stage 0's rank d and stage 1's).
 * Each step, for sample shard + d: stage 0 sends its activations to stage
 * 1 (MPI_Send), stage 1 sends the gradient of the activations back; both
 * ranks of a pipeline group sum a vector over it (MPI_Allreduce on the
 * pipeline group: a tensor-parallel style sum, which must stay in the
 * job); each stage sums its gradients over its data-parallel group
 * (MPI_Allreduce in place) and steps with their mean. At the start each
 * stage's data-parallel rank 0 broadcasts the stage's parameters over the
 * group (the model's slice).
 *
 * The output: each stage's parameters, written by its data-parallel rank
 * 0 to PREFIX-s0.bin and PREFIX-s1.bin, and a line `stage S checksum <hex>`.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "toy.h"

enum { ACT = 64, NT0 = 2, NT1 = 1 };
/* Stage 0: a large tensor and a small one (a bias); stage 1: one. */
static const int sizes0[NT0] = {3000, 48};
static const int sizes1[NT1] = {2000};

static int usage(void) {
  fprintf(stderr, "usage: pipeline --steps N --seed S --shard K --out PREFIX [--init-seed S]\n");
  return 2;
}

static float mean(const float *v, int n) {
  double s = 0;
  for (int i = 0; i < n; i++) s += v[i];
  return (float)(s / n);
}

/* The gradient of a toy loss for tensor |t| of stage |stage|: pulls each
 * parameter towards a target drawn from the sample, plus noise, plus what
 * came through the pipeline (|couple|). */
static void gradient(float *g, const float *p, int n, int stage, int t, uint64_t seed, int sample,
                     int step, float couple) {
  for (int i = 0; i < n; i++) {
    float target = unit(seed, (uint64_t)(stage * 10 + t), (uint64_t)i, 7);
    float noise = unit(seed, (uint64_t)sample, (uint64_t)step, (uint64_t)(stage * 1000003 + t * 100003 + i));
    g[i] = p[i] - target + 0.5f * noise + 0.05f * couple;
  }
}

static uint64_t checksum(float *const *p, const int *sizes, int nt) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int t = 0; t < nt; t++) {
    const unsigned char *b = (const unsigned char *)p[t];
    for (size_t i = 0; i < (size_t)sizes[t] * sizeof(float); i++) h = (h ^ b[i]) * 0x100000001b3ull;
  }
  return h;
}

int main(int argc, char **argv) {
  const char *out = NULL;
  int steps = 0, shard = 0;
  uint64_t seed = 1, init_seed = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--seed")) seed = strtoull(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--init-seed")) init_seed = strtoull(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--shard")) shard = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--out")) out = argv[i + 1];
    else return usage();
  }
  if (argc % 2 == 0 || !out || steps <= 0) return usage();
  if (!init_seed) init_seed = seed;
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size % 2 != 0) {
    if (rank == 0) fprintf(stderr, "pipeline: needs an even number of ranks (two stages)\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int dp = size / 2, stage = rank / dp, d = rank % dp;
  MPI_Comm dp_comm, pp_comm;
  MPI_Comm_split(MPI_COMM_WORLD, stage, rank, &dp_comm);
  MPI_Comm_split(MPI_COMM_WORLD, d, rank, &pp_comm);
  const int nt = stage == 0 ? NT0 : NT1;
  const int *sizes = stage == 0 ? sizes0 : sizes1;
  float *p[NT0], *g[NT0];
  for (int t = 0; t < nt; t++) {
    p[t] = malloc((size_t)sizes[t] * sizeof(float));
    g[t] = malloc((size_t)sizes[t] * sizeof(float));
    if (!p[t] || !g[t]) MPI_Abort(MPI_COMM_WORLD, 1);
    for (int i = 0; i < sizes[t]; i++) p[t][i] = unit(init_seed, (uint64_t)(11 + stage), (uint64_t)t, (uint64_t)i);
    MPI_Bcast(p[t], sizes[t], MPI_FLOAT, 0, dp_comm);
  }
  float act[ACT], tp[ACT];
  const float lr = 0.1f;
  const int peer = stage == 0 ? dp + d : d; /* the other stage's rank of this pipeline */
  for (int step = 1; step <= steps; step++) {
    int sample = shard + d;
    float couple;
    if (stage == 0) {
      for (int i = 0; i < ACT; i++) act[i] = p[0][i] * unit(seed, (uint64_t)sample, (uint64_t)step, (uint64_t)i);
      MPI_Send(act, ACT, MPI_FLOAT, peer, 1, MPI_COMM_WORLD);
      MPI_Recv(act, ACT, MPI_FLOAT, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(act, ACT, MPI_FLOAT, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      for (int i = 0; i < ACT; i++) act[i] = act[i] + p[0][i];
      MPI_Send(act, ACT, MPI_FLOAT, peer, 2, MPI_COMM_WORLD);
    }
    /* A sum over the pipeline group: this job's two ranks only. */
    for (int i = 0; i < ACT; i++) tp[i] = act[i] * (float)(stage + 1);
    MPI_Allreduce(MPI_IN_PLACE, tp, ACT, MPI_FLOAT, MPI_SUM, pp_comm);
    couple = mean(tp, ACT);
    for (int t = nt - 1; t >= 0; t--) gradient(g[t], p[t], sizes[t], stage, t, seed, sample, step, couple);
    for (int t = nt - 1; t >= 0; t--) MPI_Allreduce(MPI_IN_PLACE, g[t], sizes[t], MPI_FLOAT, MPI_SUM, dp_comm);
    for (int t = 0; t < nt; t++)
      for (int i = 0; i < sizes[t]; i++) p[t][i] -= lr * g[t][i] / (float)dp;
  }
  int rc = 0;
  if (d == 0) {
    printf("stage %d checksum 0x%016" PRIx64 "\n", stage, checksum(p, sizes, nt));
    char path[4096];
    snprintf(path, sizeof path, "%s-s%d.bin", out, stage);
    FILE *f = fopen(path, "wb");
    for (int t = 0; f && t < nt; t++)
      if (fwrite(p[t], sizeof(float), (size_t)sizes[t], f) != (size_t)sizes[t]) rc = 1;
    if (!f || fclose(f) != 0) rc = 1;
  }
  for (int t = 0; t < nt; t++) {
    free(p[t]);
    free(g[t]);
  }
  MPI_Comm_free(&pp_comm);
  MPI_Comm_free(&dp_comm);
  MPI_Finalize();
  if (rank == 0) printf("pipeline done\n");
  return rc;
}
