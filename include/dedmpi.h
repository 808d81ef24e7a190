/*
 * dedmpi.h: what a trainer can ask dedmpi beyond plain MPI.
 *
 * Nothing here is needed: an unmodified MPI program runs under dedmpi as
 * it is. A trainer that wants to know who contributed to its last
 * all-reduce, or to weight its contribution by samples, includes this
 * header and links with -ldedmpi (or, under LD_PRELOAD only, looks the
 * symbols up with dlsym(RTLD_DEFAULT, "dedmpi_last_round")).
 *
 * Every function may be called from any rank, after MPI_Init and before
 * MPI_Finalize, from any thread. They return MPI error codes.
 */
#ifndef DEDMPI_H
#define DEDMPI_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DEDMPI_VERSION_MAJOR 0
#define DEDMPI_VERSION_MINOR 2

/* What happened in one swarm all-reduce (one "round"). */
typedef struct dedmpi_round_info {
  /* The round's number: the swarm's count of averaged all-reduces. */
  unsigned long long round;
  /* Jobs whose buffers were averaged (this one included, unless |late|). */
  int contributors;
  /* Sum of the contributors' weights (by default their rank counts, so
   * for jobs of one rank each this equals |contributors|). */
  double total_weight;
  /* 1 when this job's buffer was left as its own local sum: no other job
   * took part, or the swarm could not finish the round within
   * DEDMPI_ROUND_TIMEOUT (then |late| is 1 too: the job is out of step). */
  int alone;
  /* 1 when the round went on without this job: with |alone| 0 it got the
   * swarm's result all the same (its own gradient was dropped). */
  int late;
  /* Failovers the round went through (a member lost, a coordinator
   * replaced); 0 normally. */
  int recoveries;
  /* MPI_SUCCESS, or the error code the all-reduce returned. */
  int error;
} dedmpi_round_info;

/*
 * Fills |info| with the last swarm all-reduce this process completed
 * (blocking or not). Returns MPI_SUCCESS, MPI_ERR_ARG if |info| is NULL,
 * or MPI_ERR_OTHER if no all-reduce has gone to the swarm yet.
 */
int dedmpi_last_round(dedmpi_round_info *info);

/*
 * Writes how the gradients of that same all-reduce travelled, as its
 * members agreed on it (DEDMPI_COMPRESS): "none", "fp16", "bf16", "int8"
 * or "topk:FRACTION" ("none" when the job was alone), NUL-terminated,
 * into |name| (|len| bytes; 24 always suffice). Returns MPI_SUCCESS,
 * MPI_ERR_ARG if |name| is NULL or |len| too short for the name, or
 * MPI_ERR_OTHER if no all-reduce has gone to the swarm yet. New in 0.2.
 */
int dedmpi_last_codec(char *name, int len);

/*
 * Sets this job's weight w_j for the all-reduces that start after the call
 * (for example the number of samples behind this step's gradient). The
 * swarm returns n_j * sum_j(w_j * S_j / n_j) / sum_j(w_j); the default
 * w_j = n_j gives the plain mean over all ranks of all jobs. The job's
 * rank 0 value counts; call it on every rank with the same value.
 * Returns MPI_SUCCESS or MPI_ERR_ARG (negative, NaN, or above 2^53).
 */
int dedmpi_set_weight(double weight);

/*
 * Registers |bytes| at |buf| as part of the trainer's state (optimizer
 * moments, the step counter, the data loader's position): what a job that
 * joins a run in progress must load besides the parameters it broadcasts
 * from rank 0 at start-up. Call it on every rank, with the same sizes in
 * the same order on every job, after MPI_Init and before the first
 * all-reduce; the buffer must hold the live state until MPI_Finalize. In a
 * job that joins a run in progress, the call fills |buf| with the run's
 * state (on every rank); otherwise it leaves |buf| as it is. A job that
 * falls behind the run later reloads the run's state into |buf| as a
 * step's last all-reduce returns: read it again after each step's
 * all-reduces (the step counter may have jumped). Returns
 * MPI_SUCCESS, MPI_ERR_ARG (NULL or empty), MPI_ERR_COUNT (the run's state
 * has no such piece: another program or model), or MPI_ERR_OTHER (called
 * after training began, or the run's state could not be loaded).
 */
int dedmpi_register_state(void *buf, size_t bytes);

/* 1 if this process's large float sums go to the swarm, 0 if dedmpi is
 * passing everything through (DEDMPI_DISABLE=1, or no dedmpi at all). */
int dedmpi_active(void);

#ifdef __cplusplus
}
#endif

#endif /* DEDMPI_H */
