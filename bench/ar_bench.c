/*
 * ar_bench.c: times MPI_Allreduce, the way a trainer calls it.
 *
 *   ar_bench --count N [--dtype float|double] [--reps R] [--warmup W]
 *       one in-place SUM of N elements per rep; rank 0 prints
 *       "rep <i> <seconds>" (the slowest rank's time) after W warm-ups.
 *   ar_bench --loop ITERS [--count N]
 *       ITERS back-to-back in-place SUMs of N (default 1) doubles, timed
 *       as a whole; rank 0 prints "loop <iters> <seconds>".
 *
 * Ordinary MPI: the benchmark scripts run it with and without dedmpi.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  long count = 1, loop = 0;
  int reps = 5, warmup = 1, dbl = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--count") && i + 1 < argc) count = atol(argv[++i]);
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--warmup") && i + 1 < argc) warmup = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--loop") && i + 1 < argc) loop = atol(argv[++i]);
    else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) dbl = !strcmp(argv[++i], "double");
    else {
      fprintf(stderr, "usage: ar_bench --count N [--dtype float|double] [--reps R] [--warmup W]\n"
                      "       ar_bench --loop ITERS [--count N]\n");
      return 2;
    }
  }
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (loop > 0) {
    double *v = calloc((size_t)count, sizeof *v);
    for (long i = 0; i < 1000; i++) MPI_Allreduce(MPI_IN_PLACE, v, (int)count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t = MPI_Wtime();
    for (long i = 0; i < loop; i++)
      MPI_Allreduce(MPI_IN_PLACE, v, (int)count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    t = MPI_Wtime() - t;
    double worst;
    MPI_Reduce(&t, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("loop %ld %.6f\n", loop, worst);
    free(v);
  } else {
    size_t es = dbl ? sizeof(double) : sizeof(float);
    void *buf = malloc((size_t)count * es);
    for (long i = 0; i < count; i++) {
      if (dbl)
        ((double *)buf)[i] = 1.0 / (double)(i % 97 + 1);
      else
        ((float *)buf)[i] = 1.0f / (float)(i % 97 + 1);
    }
    for (int r = -warmup; r < reps; r++) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t = MPI_Wtime();
      MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, dbl ? MPI_DOUBLE : MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
      t = MPI_Wtime() - t;
      double worst;
      MPI_Reduce(&t, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
      if (rank == 0 && r >= 0) printf("rep %d %.6f\n", r, worst);
      fflush(stdout);
    }
    free(buf);
  }
  MPI_Finalize();
  return 0;
}
