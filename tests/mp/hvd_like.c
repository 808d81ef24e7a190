/*
 * hvd_like.c: MPI as Horovod uses it, without Horovod (it is no Debian
 * package). MPI_Init_thread with MPI_THREAD_MULTIPLE; a private duplicate
 * of the world; a background thread that makes every collective: each
 * step it agrees on what is ready with a bit-vector MPI_Allreduce
 * (MPI_BAND on integers, Horovod's coordinator), then all-reduces the
 * ready tensors fused into one buffer, cut where a seeded draw says (as
 * tensor fusion's cycles do), and divides by the world size (Horovod's
 * average); the main thread hands it the work and waits, calling
 * MPI_Iprobe meanwhile (as the framework's own threads may). Rank 0's
 * parameters go to every rank at the start by MPI_Bcast of each tensor
 * (broadcast_parameters).
 *
 *   hvd_like --steps N --seed S --fuse F --shard K --out FILE
 *
 * The model is a toy: tensors of 1000, 10, 300, 3 and 2 floats; each
 * step every rank's gradient is a pure function of (seed, shard + rank,
 * step, parameter index) and the current parameters, and the update is
 * plain SGD. The output is the parameters (rank 0).
 */
#include <mpi.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NT 5
static const int sizes[NT] = {1000, 10, 300, 3, 2};

static struct {
  MPI_Comm comm;
  int rank, size, steps, shard;
  uint64_t seed, fuse;
  float *p[NT], *g[NT], *fusion;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int want; /* steps handed to the background thread */
  int done; /* steps it finished */
  int rc;
} H = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static float unit(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  return (float)(mix(mix(mix(mix(a) ^ b) ^ c) ^ d) >> 40) * 0x1p-24f - 0.5f;
}

/* The gradients of this rank at |step|. */
static void compute(int step) {
  for (int t = 0; t < NT; t++)
    for (int i = 0; i < sizes[t]; i++)
      H.g[t][i] = 0.1f * H.p[t][i] +
                  unit(H.seed, (uint64_t)(H.shard + H.rank), (uint64_t)step, (uint64_t)t << 32 | (uint64_t)i);
}

/* One step's exchange, on the background thread: the bit vector, then the
 * tensors in backward order, fused and cut at random. */
static int exchange(int step) {
  uint64_t ready[4] = {~0ull, ~0ull, ~0ull, ~0ull};
  int rc = MPI_Allreduce(MPI_IN_PLACE, ready, 4, MPI_UINT64_T, MPI_BAND, H.comm);
  if (rc != MPI_SUCCESS) return rc;
  int used = 0, first = NT - 1;
  for (int t = NT - 1; t >= 0; t--) {
    memcpy(H.fusion + used, H.g[t], (size_t)sizes[t] * sizeof(float));
    used += sizes[t];
    bool cut = t == 0 || (mix(H.fuse ^ mix((uint64_t)step * NT + (uint64_t)t)) & 1);
    if (!cut) continue;
    rc = MPI_Allreduce(MPI_IN_PLACE, H.fusion, used, MPI_FLOAT, MPI_SUM, H.comm);
    if (rc != MPI_SUCCESS) return rc;
    for (int k = first, at = 0; k >= t; at += sizes[k], k--)
      for (int i = 0; i < sizes[k]; i++) H.g[k][i] = H.fusion[at + i] / (float)H.size;
    used = 0;
    first = t - 1;
  }
  return MPI_SUCCESS;
}

static void *background(void *arg) {
  (void)arg;
  for (int step = 1; step <= H.steps; step++) {
    pthread_mutex_lock(&H.mu);
    while (H.want < step) pthread_cond_wait(&H.cv, &H.mu);
    pthread_mutex_unlock(&H.mu);
    int rc = exchange(step);
    pthread_mutex_lock(&H.mu);
    if (rc != MPI_SUCCESS) H.rc = rc;
    H.done = step;
    pthread_cond_broadcast(&H.cv);
    pthread_mutex_unlock(&H.mu);
  }
  return NULL;
}

int main(int argc, char **argv) {
  const char *out = NULL;
  H.steps = 20;
  H.seed = 1;
  H.fuse = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--steps")) H.steps = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--seed")) H.seed = strtoull(argv[i + 1], NULL, 0);
    else if (!strcmp(argv[i], "--fuse")) H.fuse = strtoull(argv[i + 1], NULL, 0);
    else if (!strcmp(argv[i], "--shard")) H.shard = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--out")) out = argv[i + 1];
    else {
      fprintf(stderr, "usage: hvd_like [--steps N] [--seed S] [--fuse F] [--shard K] [--out FILE]\n");
      return 2;
    }
  }
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  if (provided != MPI_THREAD_MULTIPLE) {
    fprintf(stderr, "hvd_like: MPI_THREAD_MULTIPLE not provided (%d)\n", provided);
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  MPI_Comm_dup(MPI_COMM_WORLD, &H.comm);
  MPI_Comm_rank(H.comm, &H.rank);
  MPI_Comm_size(H.comm, &H.size);
  int total = 0;
  for (int t = 0; t < NT; t++) {
    H.p[t] = malloc((size_t)sizes[t] * sizeof(float));
    H.g[t] = malloc((size_t)sizes[t] * sizeof(float));
    total += sizes[t];
    /* Rank 0's initial parameters (the same in every job: seeded). */
    for (int i = 0; i < sizes[t]; i++)
      H.p[t][i] = H.rank == 0 ? unit(H.seed, 7, (uint64_t)t, (uint64_t)i) : 0.0f;
  }
  H.fusion = malloc((size_t)total * sizeof(float));
  /* broadcast_parameters: each tensor from rank 0. */
  for (int t = 0; t < NT; t++) MPI_Bcast(H.p[t], sizes[t], MPI_FLOAT, 0, H.comm);
  pthread_t th;
  pthread_create(&th, NULL, background, NULL);
  for (int step = 1; step <= H.steps && H.rc == MPI_SUCCESS; step++) {
    compute(step);
    pthread_mutex_lock(&H.mu);
    H.want = step;
    pthread_cond_broadcast(&H.cv);
    pthread_mutex_unlock(&H.mu);
    /* synchronize(): wait for the background thread, probing meanwhile. */
    for (;;) {
      pthread_mutex_lock(&H.mu);
      bool fin = H.done >= step;
      pthread_mutex_unlock(&H.mu);
      if (fin) break;
      int flag = 0;
      MPI_Iprobe(MPI_ANY_SOURCE, 77, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
      struct timespec ts = {0, 200000};
      nanosleep(&ts, NULL);
    }
    for (int t = 0; t < NT; t++)
      for (int i = 0; i < sizes[t]; i++) H.p[t][i] -= 0.5f * H.g[t][i];
  }
  pthread_join(th, NULL);
  if (H.rc != MPI_SUCCESS) {
    fprintf(stderr, "hvd_like: an all-reduce failed (%d)\n", H.rc);
    MPI_Abort(MPI_COMM_WORLD, 4);
  }
  if (H.rank == 0 && out) {
    FILE *f = fopen(out, "wb");
    for (int t = 0; f && t < NT; t++) fwrite(H.p[t], sizeof(float), (size_t)sizes[t], f);
    if (f) fclose(f);
  }
  if (H.rank == 0) printf("hvd_like done %d steps\n", H.steps);
  MPI_Comm_free(&H.comm);
  MPI_Finalize();
  return 0;
}
