/*
 * run.h: dedrun's running of a trainer (docs/configuration.md, "dedrun"):
 * mpirun with libdedmpi.so preloaded and the configuration carried by -x,
 * or (no Open MPI, or --standalone) each process a job of one rank on
 * dedmpi's own libmpi.so.40; the children's signals and lifetime; the
 * progress line. With --host or --hostfile the job spreads over hosts:
 * mpirun gets them as given, and -x carries the library and the settings
 * to the remote ranks.
 */
#ifndef DEDRUN_RUN_H
#define DEDRUN_RUN_H

#include <stdbool.h>

#define DEDRUN_X_MAX 256

typedef struct dedrun_opts {
  int np;                       /* -n/-np: ranks of the one job; standalone: processes;
                                   0: mpirun's default (a rank per slot of the hosts) */
  const char *host;             /* --host LIST for mpirun, checked (hosts.h); or NULL */
  const char *hostfile;         /* --hostfile FILE for mpirun, checked; or NULL */
  bool standalone;              /* each process a job of one rank on dedmpi's own libmpi */
  const char *x[DEDRUN_X_MAX]; /* -x VAR[=value], as given */
  int nx;
  int progress;                 /* 0: --no-progress; -1: by the terminal */
  char **argv;                  /* the program and its arguments */
} dedrun_opts;

/*
 * Runs the trainer and waits for it. The DEDMPI_* settings are in this
 * process's environment (the flags were put there). Returns the exit code
 * dedrun exits with: the trainer's (128 + signal if it was killed), or 1
 * and a message if it could not start.
 */
int dedrun_launch(const dedrun_opts *o);

#endif /* DEDRUN_RUN_H */
