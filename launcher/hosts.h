/*
 * hosts.h: dedrun's --host and --hostfile (docs/configuration.md,
 * "dedrun"): mpirun's syntax for them, checked before mpirun starts, and
 * which host the job's rank 0, its swarm peer, runs on.
 */
#ifndef DEDRUN_HOSTS_H
#define DEDRUN_HOSTS_H

#include <stdbool.h>
#include <stddef.h>

#define DEDRUN_SLOTS_MAX 4096 /* as -n: ranks of one job */

/* Called with each host of a list, in order (without a "user@"); false stops. */
typedef bool (*dedrun_host_fn)(const char *host, void *arg);

/*
 * --host LIST, mpirun's syntax: HOST[:SLOTS],... where HOST is a name or an
 * IPv4 address and SLOTS from 1 to DEDRUN_SLOTS_MAX. Calls |each| (may be
 * NULL) with every host; 0, or -1 and a message in |err| naming what is
 * wrong (to follow "--host LIST: ").
 */
int dedrun_host_list(const char *list, dedrun_host_fn each, void *arg, char *err, size_t errlen);

/*
 * --hostfile FILE, mpirun's syntax: a host a line, `HOST [slots=N]
 * [max_slots=N]` (also `max-slots`, `slots_max`, `slots-max`, and spaces
 * around `=`); `#` or `//` starts a comment. Calls |each| as above; 0, or
 * -1 and a message in |err| (to follow "--hostfile FILE: "): the file
 * cannot be read, or its line N is not of that form, or it names no host.
 */
int dedrun_hostfile(const char *path, dedrun_host_fn each, void *arg, char *err, size_t errlen);

/* Whether |host| is this machine as mpirun judges it: "localhost", this
 * machine's name, or a name or address of one of its interfaces. */
bool dedrun_host_is_local(const char *host);

/*
 * Where Open MPI 4.1's mpirun puts rank 0 for these options (either may be
 * NULL; with both, the hosts of |list|): on this machine if one of the
 * hosts is this machine, whatever its place in the list, else on the
 * first host. True when that is this machine; else false and the host in
 * |out|. Both must have been checked.
 */
bool dedrun_rank0_here(const char *list, const char *hostfile, char *out, size_t len);

#endif /* DEDRUN_HOSTS_H */
