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
 *            [--tensors T] [--log-every K] [--step-ms MS] [--linger-ms MS]
 *
 * The model is a toy: tensors of 1000, 10, 300, 3 and 2 floats, or with
 * --tensors T a model of T tensors as real ones are, most of them small
 * (2 to 64 floats: biases, norms) and every 60th one large (4096); each
 * step every rank's gradient is a pure function of (seed, shard + rank,
 * step, parameter index) and the current parameters, and the update is
 * plain SGD. The output is the parameters (rank 0).
 *
 * --fuse 0 turns fusion off (HOROVOD_FUSION_THRESHOLD=0): one
 * MPI_Allreduce per tensor, in place, in backward order. --log-every K
 * prints (rank 0) `step <s> checksum <hex>` every K steps and the last,
 * the FNV-1a hash of the parameters after step s; --step-ms adds compute
 * time per step; --linger-ms waits before MPI_Finalize (with the shim,
 * peers may still fetch from this job).
 *
 * Joining a run in progress: the step counter is registered as state
 * through dedmpi.h (looked up at run time, as examples/trainer.c does),
 * after the per-tensor broadcasts, so a job started late loads the run's
 * parameters from those broadcasts and its step, and says `resumed at
 * step <s>`.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <inttypes.h>
#include <mpi.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "toy.h"

#define NT_MAX 4096
static const int default_sizes[] = {1000, 10, 300, 3, 2};

static struct {
  MPI_Comm comm;
  int rank, size, steps, shard, nt, log_every, step_ms, linger_ms;
  int sizes[NT_MAX];
  uint64_t seed, fuse;
  float *p[NT_MAX], *g[NT_MAX], *fusion;
  long long step; /* the step being trained (1-based): state, like p */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int want;  /* exchanges handed to the background thread */
  int done;  /* exchanges it finished */
  int cur;   /* the step of the exchange handed over */
  bool quit; /* no more exchanges */
  int rc;
} H = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

/* The sizes of --tensors |n|: mostly small, every 60th large. */
static void sizes_make(int n) {
  H.nt = n;
  for (int t = 0; t < n; t++)
    H.sizes[t] = t % 60 == 0 ? 4096 : 2 + (int)(mix((uint64_t)t) % 63);
}

/* FNV-1a over the parameters' bytes. */
static uint64_t checksum(void) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int t = 0; t < H.nt; t++) {
    const unsigned char *b = (const unsigned char *)H.p[t];
    for (size_t i = 0; i < (size_t)H.sizes[t] * sizeof(float); i++) h = (h ^ b[i]) * 0x100000001b3ull;
  }
  return h;
}

/* The gradients of this rank at |step|. */
static void compute(int step) {
  for (int t = 0; t < H.nt; t++)
    for (int i = 0; i < H.sizes[t]; i++)
      H.g[t][i] = 0.1f * H.p[t][i] +
                  unit(H.seed, (uint64_t)(H.shard + H.rank), (uint64_t)step, (uint64_t)t << 32 | (uint64_t)i);
}

/* One step's exchange, on the background thread: the bit vector, then the
 * tensors in backward order, fused and cut at random (--fuse 0: each
 * tensor on its own). */
static int exchange(int step) {
  uint64_t ready[4] = {~0ull, ~0ull, ~0ull, ~0ull};
  int rc = MPI_Allreduce(MPI_IN_PLACE, ready, 4, MPI_UINT64_T, MPI_BAND, H.comm);
  if (rc != MPI_SUCCESS) return rc;
  if (H.fuse == 0) {
    for (int t = H.nt - 1; t >= 0; t--) {
      rc = MPI_Allreduce(MPI_IN_PLACE, H.g[t], H.sizes[t], MPI_FLOAT, MPI_SUM, H.comm);
      if (rc != MPI_SUCCESS) return rc;
      for (int i = 0; i < H.sizes[t]; i++) H.g[t][i] /= (float)H.size;
    }
    return MPI_SUCCESS;
  }
  int used = 0, first = H.nt - 1;
  for (int t = H.nt - 1; t >= 0; t--) {
    memcpy(H.fusion + used, H.g[t], (size_t)H.sizes[t] * sizeof(float));
    used += H.sizes[t];
    bool cut = t == 0 || (mix(H.fuse ^ mix((uint64_t)step * (uint64_t)H.nt + (uint64_t)t)) & 1);
    if (!cut) continue;
    rc = MPI_Allreduce(MPI_IN_PLACE, H.fusion, used, MPI_FLOAT, MPI_SUM, H.comm);
    if (rc != MPI_SUCCESS) return rc;
    for (int k = first, at = 0; k >= t; at += H.sizes[k], k--)
      for (int i = 0; i < H.sizes[k]; i++) H.g[k][i] = H.fusion[at + i] / (float)H.size;
    used = 0;
    first = t - 1;
  }
  return MPI_SUCCESS;
}

static void *background(void *arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&H.mu);
    while (H.want == H.done && !H.quit) pthread_cond_wait(&H.cv, &H.mu);
    bool quit = H.want == H.done;
    int step = H.cur;
    pthread_mutex_unlock(&H.mu);
    if (quit) break;
    int rc = exchange(step);
    pthread_mutex_lock(&H.mu);
    if (rc != MPI_SUCCESS) H.rc = rc;
    H.done++;
    pthread_cond_broadcast(&H.cv);
    pthread_mutex_unlock(&H.mu);
  }
  return NULL;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

int main(int argc, char **argv) {
  const char *out = NULL;
  H.steps = 20;
  H.seed = 1;
  H.fuse = 1;
  H.nt = (int)(sizeof default_sizes / sizeof default_sizes[0]);
  memcpy(H.sizes, default_sizes, sizeof default_sizes);
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--steps")) H.steps = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--seed")) H.seed = strtoull(argv[i + 1], NULL, 0);
    else if (!strcmp(argv[i], "--fuse")) H.fuse = strtoull(argv[i + 1], NULL, 0);
    else if (!strcmp(argv[i], "--shard")) H.shard = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--out")) out = argv[i + 1];
    else if (!strcmp(argv[i], "--tensors") && atoi(argv[i + 1]) >= 1 && atoi(argv[i + 1]) <= NT_MAX)
      sizes_make(atoi(argv[i + 1]));
    else if (!strcmp(argv[i], "--log-every") && atoi(argv[i + 1]) >= 1) H.log_every = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--step-ms")) H.step_ms = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--linger-ms")) H.linger_ms = atoi(argv[i + 1]);
    else {
      fprintf(stderr, "usage: hvd_like [--steps N] [--seed S] [--fuse F] [--shard K] [--out FILE]\n"
                      "                [--tensors T] [--log-every K] [--step-ms MS] [--linger-ms MS]\n");
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
  for (int t = 0; t < H.nt; t++) {
    H.p[t] = malloc((size_t)H.sizes[t] * sizeof(float));
    H.g[t] = malloc((size_t)H.sizes[t] * sizeof(float));
    total += H.sizes[t];
    /* Rank 0's initial parameters (the same in every job: seeded). */
    for (int i = 0; i < H.sizes[t]; i++)
      H.p[t][i] = H.rank == 0 ? unit(H.seed, 7, (uint64_t)t, (uint64_t)i) : 0.0f;
  }
  H.fusion = malloc((size_t)total * sizeof(float));
  /* broadcast_parameters: each tensor from rank 0. */
  for (int t = 0; t < H.nt; t++) MPI_Bcast(H.p[t], H.sizes[t], MPI_FLOAT, 0, H.comm);
  /* Under dedmpi, the step counter is state too (see the top of the file). */
  H.step = 1;
  int (*register_state)(void *, size_t);
  *(void **)&register_state = dlsym(RTLD_DEFAULT, "dedmpi_register_state");
  if (register_state && register_state(&H.step, sizeof H.step) != MPI_SUCCESS)
    MPI_Abort(MPI_COMM_WORLD, 1);
  if (H.rank == 0 && H.step > 1) {
    printf("resumed at step %lld\n", H.step);
    fflush(stdout);
  }
  pthread_t th;
  pthread_create(&th, NULL, background, NULL);
  for (; H.step <= H.steps && H.rc == MPI_SUCCESS; H.step++) {
    if (H.step_ms > 0) sleep_ms(H.step_ms);
    compute((int)H.step);
    pthread_mutex_lock(&H.mu);
    H.cur = (int)H.step;
    int want = ++H.want;
    pthread_cond_broadcast(&H.cv);
    pthread_mutex_unlock(&H.mu);
    /* synchronize(): wait for the background thread, probing meanwhile. */
    for (;;) {
      pthread_mutex_lock(&H.mu);
      bool fin = H.done >= want;
      pthread_mutex_unlock(&H.mu);
      if (fin) break;
      int flag = 0;
      MPI_Iprobe(MPI_ANY_SOURCE, 77, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
      struct timespec ts = {0, 200000};
      nanosleep(&ts, NULL);
    }
    /* A job that fell behind reloads the run's state as a step's last
     * all-reduce returns, its step counter included. */
    for (int t = 0; t < H.nt; t++)
      for (int i = 0; i < H.sizes[t]; i++) H.p[t][i] -= 0.5f * H.g[t][i];
    if (H.rank == 0 && H.log_every > 0 && (H.step % H.log_every == 0 || H.step == H.steps)) {
      printf("step %lld checksum %016" PRIx64 "\n", H.step, checksum());
      fflush(stdout);
    }
  }
  pthread_mutex_lock(&H.mu);
  H.quit = true;
  pthread_cond_broadcast(&H.cv);
  pthread_mutex_unlock(&H.mu);
  pthread_join(th, NULL);
  if (H.rc != MPI_SUCCESS) {
    fprintf(stderr, "hvd_like: an all-reduce failed (%d)\n", H.rc);
    MPI_Abort(MPI_COMM_WORLD, 4);
  }
  if (H.rank == 0 && out) {
    FILE *f = fopen(out, "wb");
    for (int t = 0; f && t < H.nt; t++) fwrite(H.p[t], sizeof(float), (size_t)H.sizes[t], f);
    if (f) fclose(f);
  }
  if (H.rank == 0) printf("hvd_like done %d steps\n", H.steps);
  if (H.linger_ms > 0) sleep_ms(H.linger_ms);
  MPI_Comm_free(&H.comm);
  MPI_Finalize();
  return 0;
}
