/*
 * ded_group.c: data-parallel groups that are not the whole job
 * (docs/architecture.md, "Data-parallel groups").
 *
 * A pipeline- or tensor-parallel trainer sums its gradients over the
 * groups of an MPI_Comm_split: a pipeline stage's data-parallel ranks
 * hold the same slice of the model. Each such group's rank 0 is a swarm
 * peer of its own, in a run of the group's own, "RUN/gS.G" (the S-th
 * split of the whole job, its G-th group by lowest world rank; a job of
 * the same program numbers its splits and groups alike), so a job with
 * two pipeline stages takes part as two peers, each averaging its stage's
 * gradients with the same stage of the other jobs.
 *
 * Owns: the interception of MPI_Comm_split of a communicator congruent to
 * MPI_COMM_WORLD; for the group this rank is in, a channel
 * (ded_shim_int.h) whose rank 0 runs the group's peer; the attribute that
 * names that channel on the group's communicator and on its duplicates;
 * and, on the world's rank 0, the list of this job's group peers its
 * record publishes (DED_RECORD_EXT_GROUPS), through which the group peers
 * of other jobs find them: a group's peer starts from the addresses other
 * jobs published for it, and is given those published while it started.
 *
 * Which groups are data-parallel: a group's sums route once its rank 0
 * broadcast it state before its first sum (ded_state.c), as every
 * data-parallel trainer broadcasts its slice of the parameters; a
 * tensor-parallel group's sums (activations) stay in the job.
 *
 * Invariants: every rank of the world takes the same steps of a split in
 * the same order (the split is collective over the whole job), so the
 * collectives here always match; a group's ranks agree on whether its
 * channel opened (ded_shim_chan_open broadcasts the outcome); channels
 * live until MPI_Finalize.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ded_node.h" /* DED_LOG_* */
#include "dht/ded_record.h"
#include "ded_shim_int.h"

/* Splits of the whole job that get groups (a trainer splits a few times
 * at start; one that splits every step must not start a peer each time),
 * and groups a split may have (the id's low byte). */
#define GROUP_SPLITS_MAX 16
#define GROUP_PER_SPLIT_MAX 256

/* A group's addresses, as its peer's bootstrap list. */
#define GROUP_HINTS_BYTES 1024
#define GROUP_ADDR_BYTES 64

/* How long the world's rank 0 waits, after publishing its groups, for
 * the jobs it knows of to publish theirs (jobs started together split at
 * about the same time; a job that never splits costs this once). */
#define GROUP_WAIT_NS (2ull * 1000000000ull)

/* How long a group's peer tries the addresses published for it before it
 * starts the group's run afresh. */
#define GROUP_BOOT_NS (10ull * 1000000000ull)

static int attr_copy(MPI_Comm old, int keyval, void *extra, void *in, void *out, int *flag) {
  (void)old;
  (void)keyval;
  (void)extra;
  *(void **)out = in;
  *flag = 1;
  return MPI_SUCCESS;
}

static int attr_delete(MPI_Comm comm, int keyval, void *val, void *extra) {
  (void)comm;
  (void)keyval;
  (void)val;
  (void)extra;
  return MPI_SUCCESS;
}

int ded_group_init(void) {
  shim.keyval = MPI_KEYVAL_INVALID;
  int rc = PMPI_Comm_create_keyval(attr_copy, attr_delete, &shim.keyval, NULL);
  if (rc == MPI_SUCCESS) rc = PMPI_Comm_dup(MPI_COMM_WORLD, &shim.comm_split);
  return rc;
}

void ded_group_fini(void) {
  while (shim.groups) {
    shim_chan *c = shim.groups;
    shim.groups = c->next;
    ded_shim_chan_close(c);
    free(c);
  }
  if (shim.comm_split != MPI_COMM_NULL) PMPI_Comm_free(&shim.comm_split);
  if (shim.keyval != MPI_KEYVAL_INVALID) PMPI_Comm_free_keyval(&shim.keyval);
  free(shim.published);
  shim.published = NULL;
  shim.npublished = 0;
}

/* "HOST:0" for DEDMPI_LISTEN's "HOST:PORT": a group's peer listens where
 * the job's does, on a port of its own. */
static void group_listen(const char *listen, char *out, size_t len) {
  const char *colon = strrchr(listen, ':');
  int host = colon ? (int)(colon - listen) : (int)strlen(listen);
  snprintf(out, len, "%.*s:0", host, listen);
}

/* This rank's part of group |id| of communicator |comm| (this rank's
 * group): its channel, its peer on the group's rank 0 starting from
 * |hints|. NULL if it did not open (every rank of the group agrees). */
static shim_chan *group_open(MPI_Comm comm, int id, const char *hints) {
  char run[DED_RUN_NAME_MAX + 1];
  int n = snprintf(run, sizeof run, "%s/g%d.%d", shim.cfg.run, id >> 8, id & 0xff);
  /* The group's ranks agree on whether it opens: one without memory makes
   * it open on none. */
  int grank = 0;
  PMPI_Comm_rank(comm, &grank);
  shim_chan *c = calloc(1, sizeof *c);
  int have = c != NULL, all_have = 0;
  PMPI_Allreduce(&have, &all_have, 1, MPI_INT, MPI_MIN, comm);
  if (!all_have) {
    if (grank == 0)
      ded_shim_log(DED_LOG_ERROR, "no memory for group %d.%d of this job: its sums stay in the "
                   "job", id >> 8, id & 0xff);
    free(c);
    return NULL;
  }
  ded_driver_config dc;
  ded_config_driver(&shim.cfg, &dc);
  char listen[sizeof shim.cfg.listen];
  if (dc.listen) {
    group_listen(dc.listen, listen, sizeof listen);
    dc.listen = listen;
  }
  dc.node.run = run;
  dc.join = hints;
  dc.announce = NULL;     /* the machine's addresses: the group's rank 0 may be on another host */
  dc.identity_file = NULL; /* a fresh identity: one file cannot be two peers */
  dc.settings_said = true;  /* the job's peer warned of the run's settings */
  /* Published peers that are gone (a crashed job's record lives on until
   * it expires) must not hold the whole job's split for long. */
  dc.node.bootstrap_timeout_ns = DED_MIN(dc.node.bootstrap_timeout_ns, GROUP_BOOT_NS);
  char err[512] = "";
  int status = n > 0 && (size_t)n < sizeof run ? 0 : DED_ERR_INVALID_ARG;
  if (status == 0) status = ded_shim_chan_open(c, comm, id, run, &dc, err, sizeof err);
  if (status == DED_ERR_BOOTSTRAP || status == DED_ERR_AUTH) {
    /* The jobs that published the group are gone (a refused key: another
     * run's job took a gone one's port): it starts anew. */
    if (grank == 0)
      ded_shim_log(DED_LOG_WARN, "no peer of run '%s' answered at its published addresses (%s): "
                   "this group's peer starts it", run, hints);
    dc.join = "";
    status = ded_shim_chan_open(c, comm, id, run, &dc, err, sizeof err);
  }
  if (status != 0) {
    if (grank == 0)
      ded_shim_log(DED_LOG_ERROR, "group %d.%d of this job cannot take part in run '%s' (%s): its "
                   "sums stay in the job", id >> 8, id & 0xff, run,
                   err[0] ? err : ded_strerror(status));
    free(c);
    return NULL;
  }
  if (c->rank == 0)
    ded_shim_log(DED_LOG_INFO, "group %d.%d of this job (%d rank%s) is peer %s of run '%s'",
                 id >> 8, id & 0xff, c->size, c->size == 1 ? "" : "s",
                 ded_driver_peer_sid(c->driver), run);
  return c;
}

/* World rank 0: the addresses other jobs published for the groups
 * |first| .. |first| + |n| - 1, into |hints| (GROUP_HINTS_BYTES each),
 * waiting up to |wait_ns| for the jobs it knows of to publish theirs. */
static void group_hints(int first, int n, uint64_t wait_ns, char *hints) {
  for (int g = 0; g < n; g++) {
    char *h = hints + (size_t)g * GROUP_HINTS_BYTES;
    if (ded_driver_group_hints(shim.world.driver, (uint16_t)(first + g), g == 0 ? wait_ns : 0, h,
                               GROUP_HINTS_BYTES) < 0)
      h[0] = '\0';
  }
}

/* World rank 0: adds this split's group peers (|addrs|, GROUP_ADDR_BYTES
 * per world rank, "" where a rank is no group's rank 0; |ids| per world
 * rank) to those its record publishes. */
static void group_publish(const char *addrs, const int *ids) {
  for (int r = 0; r < shim.size; r++) {
    const char *a = addrs + (size_t)r * GROUP_ADDR_BYTES;
    if (!a[0] || ids[r] < 0) continue;
    if (shim.npublished == DED_RECORD_GROUPS_MAX) {
      /* The oldest splits' groups make room: the jobs that split with
       * this one have found them already; joiners will not. */
      if (!shim.published_full_logged)
        ded_shim_log(DED_LOG_WARN, "this job has more than %d group peers: its record publishes "
                     "the latest %d; later jobs do not find the groups of its first splits",
                     DED_RECORD_GROUPS_MAX, DED_RECORD_GROUPS_MAX);
      shim.published_full_logged = true;
      memmove(shim.published, shim.published + 1, --shim.npublished * sizeof *shim.published);
    }
    struct shim_published *p = realloc(shim.published, (shim.npublished + 1) * sizeof *p);
    if (!p) break;
    shim.published = p;
    p[shim.npublished].id = (uint16_t)ids[r];
    snprintf(p[shim.npublished].addr, sizeof p->addr, "%s", a);
    shim.npublished++;
  }
  uint16_t *id = malloc((shim.npublished + 1) * sizeof *id);
  const char **addr = malloc((shim.npublished + 1) * sizeof *addr);
  if (id && addr) {
    for (unsigned i = 0; i < shim.npublished; i++) {
      id[i] = shim.published[i].id;
      addr[i] = shim.published[i].addr;
    }
    int rv = ded_driver_groups_publish(shim.world.driver, id, addr, shim.npublished);
    if (rv != 0)
      ded_shim_log(DED_LOG_WARN, "cannot publish this job's %u group peer%s (%s): other jobs' "
                   "groups may not find them", shim.npublished, shim.npublished == 1 ? "" : "s",
                   ded_strerror(rv));
  }
  free(id);
  free(addr);
}

/* Rank |r|'s group: the ordinal of |roots|[r] among the distinct roots. */
static int group_ordinal(const int *roots, int r) {
  int ord = 0;
  for (int q = 0; q < shim.size; q++) {
    if (roots[q] < 0 || roots[q] >= roots[r]) continue;
    bool first = true; /* count each root once */
    for (int p = 0; p < q && first; p++) first = roots[p] != roots[q];
    ord += first;
  }
  return ord;
}

/* After a split of the whole job into |comm| (MPI_COMM_NULL where this
 * rank is in no group): the channel of this rank's group. Collective over
 * the whole job. */
static void group_split(MPI_Comm comm) {
  int root = -1;
  if (comm != MPI_COMM_NULL) {
    PMPI_Allreduce(&shim.rank, &root, 1, MPI_INT, MPI_MIN, comm);
  }
  int *roots = malloc((size_t)shim.size * sizeof *roots);
  int *ids = malloc((size_t)shim.size * sizeof *ids);
  int ok = roots && ids, all_ok = 0;
  PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, shim.comm_split);
  unsigned seq = shim.nsplits++;
  if (!all_ok) {
    if (ok) ded_shim_log(DED_LOG_ERROR, "no memory for the groups of split %u: their sums stay "
                         "in the job", seq);
    goto out;
  }
  PMPI_Allgather(&root, 1, MPI_INT, roots, 1, MPI_INT, shim.comm_split);
  int ngroups = 0;
  for (int r = 0; r < shim.size; r++) {
    ids[r] = roots[r] < 0 ? -1 : (int)(seq << 8) + group_ordinal(roots, r);
    if (roots[r] == r) ngroups++;
  }
  /* A split into one group of every rank is a group all the same: in a
   * smaller job of the same program, the same split has several (the
   * pipeline groups of a job of one data-parallel rank per stage are its
   * whole world), and must be routed, or not, alike. */
  if (ngroups == 0) goto out;
  if (seq >= GROUP_SPLITS_MAX || ngroups > GROUP_PER_SPLIT_MAX || shim.cfg.has_owner ||
      shim.cfg.allow_file[0]) {
    if (shim.rank == 0)
      ded_shim_log(DED_LOG_WARN, "split %u of this job into %d groups gets no peers of its own "
                   "(%s): sums on its groups stay in the job", seq, ngroups,
                   seq >= GROUP_SPLITS_MAX ? "too many splits"
                   : ngroups > GROUP_PER_SPLIT_MAX ? "too many groups"
                                                    : "a run with access control admits the job's "
                                                      "own identity only");
    goto out;
  }
  char *hints = calloc((size_t)ngroups, GROUP_HINTS_BYTES);
  char *addrs = shim.rank == 0 ? calloc((size_t)shim.size, GROUP_ADDR_BYTES) : NULL;
  char addr[GROUP_ADDR_BYTES] = "";
  ok = hints && (shim.rank != 0 || addrs);
  PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, shim.comm_split);
  if (!all_ok) goto out_free;
  /* The group's peer starts from what other jobs published before. */
  int first = (int)(seq << 8), ord = ids[shim.rank] - first;
  if (shim.rank == 0) group_hints(first, ngroups, 0, hints);
  PMPI_Bcast(hints, ngroups * GROUP_HINTS_BYTES, MPI_CHAR, 0, shim.comm_split);
  shim_chan *c = NULL;
  if (comm != MPI_COMM_NULL) {
    c = group_open(comm, ids[shim.rank], hints + (size_t)ord * GROUP_HINTS_BYTES);
    if (c && c->rank == 0 && ded_driver_address(c->driver, addr, sizeof addr) != 0) addr[0] = '\0';
  }
  /* The world's rank 0 publishes them, and hands each group what the
   * other jobs published meanwhile (jobs that split together). */
  PMPI_Gather(addr, GROUP_ADDR_BYTES, MPI_CHAR, addrs, GROUP_ADDR_BYTES, MPI_CHAR, 0,
              shim.comm_split);
  if (shim.rank == 0) {
    group_publish(addrs, ids);
    group_hints(first, ngroups, GROUP_WAIT_NS, hints);
  }
  PMPI_Bcast(hints, ngroups * GROUP_HINTS_BYTES, MPI_CHAR, 0, shim.comm_split);
  if (c) {
    const char *h = hints + (size_t)ord * GROUP_HINTS_BYTES;
    if (c->rank == 0 && h[0]) ded_driver_join_more(c->driver, h);
    PMPI_Comm_set_attr(comm, shim.keyval, c);
    pthread_mutex_lock(&shim.mu);
    c->next = shim.groups;
    shim.groups = c;
    pthread_mutex_unlock(&shim.mu);
  }
out_free:
  free(hints);
  free(addrs);
out:
  free(roots);
  free(ids);
}

DED_EXPORT int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm) {
  int rc = PMPI_Comm_split(comm, color, key, newcomm);
  /* A group of a split spans the whole job in a small job only (a stage's
   * pipeline group in a job of one rank per stage): a split of it is no
   * split of the whole job, in any job size. */
  if (rc == MPI_SUCCESS && shim.active && ded_route_comm_is_world(comm)) {
    shim_chan *c = ded_shim_chan_of(comm);
    if (c == &shim.world) group_split(*newcomm);
  }
  return rc;
}
