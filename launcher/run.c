/*
 * run.c: dedrun runs a trainer. With Open MPI installed, one mpirun job
 * with libdedmpi.so preloaded: the DEDMPI_* settings travel as `-x NAME`
 * (values stay out of the process list), the library as
 * `-x LD_PRELOAD=...`.
 *
 * With --host or --hostfile the ranks spread over hosts: mpirun gets the
 * options as given, and -x (which Open MPI forwards to remote ranks, unlike
 * the rest of the environment) carries the settings and the library's path
 * there. Rank 0, the job's peer, lands on this machine if a host listed is
 * this machine, else on the first host (hosts.c); then it has no progress
 * socket to report to, and dedrun says so.
 *
 * Without Open MPI (or with --standalone), each of the -n processes is a
 * job of one rank on dedmpi's own libmpi.so.40 (standalone/).
 *
 * dedrun stays the trainer's parent: it forwards the signals sent to it
 * (a terminal's ^C reaches the whole process group by itself), kills what
 * is left 10 s after a terminating signal, adopts the job's orphans
 * (PR_SET_CHILD_SUBREAPER) and ends any still there when its children
 * have ended, and its children get a signal when it dies
 * (PR_SET_PDEATHSIG: SIGTERM for mpirun, which then ends its ranks;
 * SIGKILL for a standalone trainer). Rank 0 reports
 * each finished round to a datagram socket of dedrun's (DEDMPI_PROGRESS);
 * on a terminal dedrun keeps one updating line at the bottom, relaying the
 * trainer's output through a pseudo-terminal so the two never garble each
 * other; otherwise it prints a plain line every 10 s.
 */
#define _GNU_SOURCE
#include "run.h"
#include "hosts.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#ifndef DEDRUN_LIBDIR
#define DEDRUN_LIBDIR "lib"
#endif

#define KILL_GRACE_S 10.0 /* after a terminating signal, then SIGKILL */
#define PLAIN_EVERY_S 10.0
#define DRAIN_MAX_S 2.0 /* relaying what is left on the pty once the children ended */

extern char **environ;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static bool is_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* A file of ours: |given| if set (it must exist), else the first of |rel|
 * (paths relative to this executable's directory) that exists, resolved. */
static bool find_file(const char *given, const char *const *rel, size_t nrel, char *out, size_t len) {
  if (given && given[0]) {
    snprintf(out, len, "%s", given);
    return is_file(out);
  }
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return false;
  exe[n] = '\0';
  char *slash = strrchr(exe, '/');
  if (!slash) return false;
  *slash = '\0';
  for (size_t i = 0; i < nrel; i++) {
    char path[PATH_MAX + 64], real[PATH_MAX];
    int m = snprintf(path, sizeof path, "%s/%s", exe, rel[i]);
    if (m > 0 && (size_t)m < sizeof path && is_file(path) && realpath(path, real)) {
      snprintf(out, len, "%s", real);
      return true;
    }
  }
  return false;
}

/* libdedmpi.so: $DEDMPI_LIB, else next to this executable, installed
 * (<prefix>/bin/dedrun, <prefix>/<libdir>/libdedmpi.so) or in the build
 * tree (build/launcher/dedrun, build/shim/libdedmpi.so). */
static bool find_lib(char *out, size_t len) {
  static const char *const rel[] = {"../" DEDRUN_LIBDIR "/libdedmpi.so", "../shim/libdedmpi.so"};
  return find_file(getenv("DEDMPI_LIB"), rel, 2, out, len);
}

/* |name| on $PATH, as a path. */
static bool find_in_path(const char *name, char *out, size_t len) {
  const char *path = getenv("PATH");
  if (!path) path = "/usr/local/bin:/usr/bin:/bin";
  while (*path) {
    size_t n = strcspn(path, ":");
    int m = snprintf(out, len, "%.*s/%s", (int)n, n ? path : ".", name);
    if (m > 0 && (size_t)m < len && access(out, X_OK) == 0 && is_file(out)) return true;
    path += n + (path[n] == ':');
  }
  return false;
}

/* ---------------------------------------------------------------- progress */

typedef struct progress {
  int fd;                    /* the datagram socket rank 0 reports to */
  bool tty;                  /* stderr is a terminal: one updating line */
  bool shown;                /* the line is on the screen now */
  bool midline;              /* relayed output ended without a newline */
  bool have;                 /* a report came */
  unsigned long long round, bytes, rounds;
  double ms, last_plain;
  unsigned contributors, peers, recoveries;
  int late, alone, error;
  char run[64];
} progress;

static int progress_socket(char *name, size_t len) {
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  uint8_t rnd[8];
  if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) memset(rnd, 0, sizeof rnd);
  char tag[17];
  for (size_t i = 0; i < sizeof rnd; i++) snprintf(tag + 2 * i, 3, "%02x", rnd[i]);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  int n = snprintf(sa.sun_path + 1, sizeof sa.sun_path - 1, "dedrun-%d-%s", (int)getpid(), tag);
  int one = 1;
  if (bind(fd, (struct sockaddr *)&sa, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n)) != 0 ||
      setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof one) != 0) {
    close(fd);
    return -1;
  }
  snprintf(name, len, "@%s", sa.sun_path + 1);
  return fd;
}

static void progress_text(const progress *p, char *out, size_t len) {
  double s = p->ms / 1e3;
  int n = snprintf(out, len, "run %s | %u peer%s | round %llu | %.*f %s | %.1f MB/s | %u contributor%s",
                   p->run, p->peers + 1, p->peers ? "s" : "", p->round, s < 1 ? 0 : 2,
                   s < 1 ? p->ms : s, s < 1 ? "ms" : "s",
                   s > 0 ? (double)p->bytes / s / 1e6 : 0.0, p->contributors,
                   p->contributors == 1 ? "" : "s");
  if (n < 0 || (size_t)n >= len) return;
  if (p->error) snprintf(out + n, len - (size_t)n, " | failed (%d)", p->error);
  else if (p->alone && p->late) snprintf(out + n, len - (size_t)n, " | out of step");
  else if (p->late) snprintf(out + n, len - (size_t)n, " | came late");
  else if (p->recoveries) snprintf(out + n, len - (size_t)n, " | %u failover%s", p->recoveries,
                                   p->recoveries == 1 ? "" : "s");
}

static void write_all(int fd, const char *s, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    s += w;
    n -= (size_t)w;
  }
}

static void progress_clear(progress *p) {
  if (!p->shown) return;
  write_all(STDERR_FILENO, "\r\033[K", 4);
  p->shown = false;
}

static void progress_draw(progress *p) {
  if (!p->tty || !p->have || p->midline) return;
  char text[256], line[300];
  progress_text(p, text, sizeof text);
  struct winsize ws;
  size_t width = ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 10 ? ws.ws_col : 80;
  /* "dedrun: " + text, cut to the width so the line never wraps. */
  int n = snprintf(line, sizeof line, "\r\033[Kdedrun: %.*s", (int)(width - 9), text);
  if (n > 0) write_all(STDERR_FILENO, line, (size_t)n);
  p->shown = true;
}

/* One datagram from rank 0: a finished round. Reports from another user
 * (the name is abstract: anyone on the host could send) are dropped. */
static void progress_read(progress *p) {
  for (;;) {
    char buf[512];
    union {
      struct cmsghdr h;
      char space[CMSG_SPACE(sizeof(struct ucred))];
    } ctl;
    struct iovec iov = {buf, sizeof buf - 1};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = &ctl,
                        .msg_controllen = sizeof ctl};
    ssize_t n = recvmsg(p->fd, &mh, MSG_DONTWAIT);
    if (n < 0) return;
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    struct ucred cred;
    if (!c || c->cmsg_type != SCM_CREDENTIALS) continue;
    memcpy(&cred, CMSG_DATA(c), sizeof cred);
    if (cred.uid != getuid()) continue;
    buf[n] = '\0';
    progress q = *p;
    if (sscanf(buf, "dedmpi-progress 1 round=%llu ms=%lf bytes=%llu contributors=%u peers=%u "
                    "late=%d alone=%d recoveries=%u error=%d",
               &q.round, &q.ms, &q.bytes, &q.contributors, &q.peers, &q.late, &q.alone,
               &q.recoveries, &q.error) != 9)
      continue;
    q.have = true;
    q.rounds++;
    *p = q;
    if (p->tty) {
      progress_draw(p);
    } else if (p->rounds == 1 || now_s() - p->last_plain >= PLAIN_EVERY_S) {
      char text[256], line[300];
      progress_text(p, text, sizeof text);
      int m = snprintf(line, sizeof line, "dedrun: %s\n", text);
      if (m > 0) write_all(STDERR_FILENO, line, (size_t)m);
      p->last_plain = now_s();
    }
  }
}

/* Output the trainer wrote to the pseudo-terminal: under the progress
 * line, which is redrawn once the output ends a line. */
static bool relay(progress *p, int master, int out) {
  char buf[65536];
  ssize_t n = read(master, buf, sizeof buf);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
  if (n <= 0) return false; /* EIO: every writer closed it */
  progress_clear(p);
  write_all(out, buf, (size_t)n);
  p->midline = buf[n - 1] != '\n';
  progress_draw(p);
  return true;
}

/* ---------------------------------------------------------------- children */

/* A pseudo-terminal for the trainer's output, the size of ours. */
static int open_pty(int *slave) {
  int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (m < 0) return -1;
  if (grantpt(m) != 0 || unlockpt(m) != 0) {
    close(m);
    return -1;
  }
  char *name = ptsname(m);
  int s = name ? open(name, O_RDWR | O_NOCTTY | O_CLOEXEC) : -1;
  if (s < 0) {
    close(m);
    return -1;
  }
  struct winsize ws;
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0) ioctl(m, TIOCSWINSZ, &ws);
  fcntl(m, F_SETFL, fcntl(m, F_GETFL) | O_NONBLOCK);
  *slave = s;
  return m;
}

typedef struct child {
  pid_t pid;
  bool done;
  int status;
} child;

/* Forks and execs |argv|. The child gets |deathsig| when dedrun dies
 * (PDEATHSIG), gets
 * the signal mask dedrun started with, |slave| as its terminal outputs
 * where |pty_out|/|pty_err|, and the variables of |env| (name, value, ...,
 * NULL; a NULL value unsets) set; |argv[0]| is looked up on PATH. An exec failure comes back
 * through a close-on-exec pipe. Returns the pid or -1 with errno. */
static pid_t spawn(char **argv, const sigset_t *mask, int deathsig, int slave, bool pty_out,
                   bool pty_err, char *const *env) {
  int pfd[2];
  if (pipe2(pfd, O_CLOEXEC) != 0) return -1;
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    close(pfd[0]);
    close(pfd[1]);
    return -1;
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, deathsig);
    if (getppid() != parent) _exit(127); /* dedrun died before the line above */
    if (pty_out) dup2(slave, STDOUT_FILENO);
    if (pty_err) dup2(slave, STDERR_FILENO);
    sigprocmask(SIG_SETMASK, mask, NULL);
    for (size_t i = 0; env && env[i]; i += 2) {
      if (env[i + 1]) setenv(env[i], env[i + 1], 1);
      else unsetenv(env[i]);
    }
    execvp(argv[0], argv);
    int e = errno;
    (void)!write(pfd[1], &e, sizeof e);
    _exit(127);
  }
  close(pfd[1]);
  int e = 0;
  ssize_t n;
  while ((n = read(pfd[0], &e, sizeof e)) < 0 && errno == EINTR) {
  }
  close(pfd[0]);
  if (n == (ssize_t)sizeof e) {
    waitpid(pid, NULL, 0);
    errno = e;
    return -1;
  }
  return pid;
}

/* Our children now, adopted orphans included (we are their subreaper):
 * up to |max| pids from /proc. */
static int children_now(pid_t *out, int max) {
  char path[64], buf[4096];
  snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)getpid());
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  int k = 0;
  for (char *p = buf, *end; k < max; p = end) {
    long v = strtol(p, &end, 10);
    if (end == p) break;
    out[k++] = (pid_t)v;
  }
  return k;
}

/* What is left of the job once dedrun's own children ended (a rank whose
 * mpirun was killed, a trainer's helper process): SIGTERM, 3 s, SIGKILL,
 * each reaped. Orphans that already ended are reaped first, unreported
 * (mpirun's remote-shell agents, on hosts, end just after it). */
static void end_descendants(void) {
  pid_t pids[256];
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
  int n = children_now(pids, 256);
  if (n == 0) return;
  for (int i = 0; i < n; i++) kill(pids[i], SIGTERM);
  for (double until = now_s() + 3.0; now_s() < until;) {
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
    if (children_now(pids, 256) == 0) break;
    struct timespec ts = {0, 20000000};
    nanosleep(&ts, NULL);
  }
  int left = children_now(pids, 256);
  for (int i = 0; i < left; i++) kill(pids[i], SIGKILL);
  while (left > 0 && waitpid(-1, NULL, 0) > 0) {
  }
  fprintf(stderr, "dedrun: %d process%s of the job outlived it: ended\n", n, n == 1 ? "" : "es");
}

static int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

/* Whether signalfd's |si| came from a process's kill() (forwarded) rather
 * than from the kernel (a terminal's ^C already reached the children). */
static bool sent_by_process(const struct signalfd_siginfo *si) {
  return si->ssi_code == SI_USER || si->ssi_code == SI_QUEUE || si->ssi_code == SI_TKILL;
}

/* ---------------------------------------------------------------- launch */

/* mpirun's command line: the job (its ranks, its hosts), our library
 * preloaded (after whatever this process or the user preloads:
 * sanitizers), every DEDMPI_* of the environment by name, then the user's
 * -x and the program. Everything the ranks need from dedrun goes by -x:
 * remote ranks get nothing else of its environment. */
static char **mpirun_argv(const dedrun_opts *o, const char *mpirun, const char *lib, char *np,
                          char *preload, size_t preload_len, char **names) {
  size_t cap = 20 + 2 * (size_t)o->nx, names_len = 1;
  for (char **e = environ; *e; e++) {
    cap += 2;
    names_len += strcspn(*e, "=") + 1;
  }
  for (char **a = o->argv; *a; a++) cap++;
  char **v = calloc(cap, sizeof *v);
  char *name = *names = malloc(names_len);
  if (!v || !name) {
    free(v);
    free(name);
    return NULL;
  }
  size_t n = 0;
  v[n++] = (char *)mpirun;
  if (o->np > 0) {
    v[n++] = "-np";
    snprintf(np, 16, "%d", o->np);
    v[n++] = np;
  }
  /* On hosts the slots given are the limit, as for mpirun; here, the cores. */
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (!o->host && !o->hostfile && cpus > 0 && o->np > cpus) v[n++] = "--oversubscribe";
  if (o->hostfile) {
    v[n++] = "--hostfile";
    v[n++] = (char *)o->hostfile;
  }
  if (o->host) {
    v[n++] = "--host";
    v[n++] = (char *)o->host;
  }
  const char *env_pre = getenv("LD_PRELOAD");
  const char *user_pre = NULL;
  for (int i = 0; i < o->nx; i++)
    if (!strncmp(o->x[i], "LD_PRELOAD=", 11)) user_pre = o->x[i] + 11;
  snprintf(preload, preload_len, "LD_PRELOAD=%s%s%s%s%s", env_pre ? env_pre : "",
           env_pre && env_pre[0] ? " " : "", user_pre ? user_pre : "",
           user_pre && user_pre[0] ? " " : "", lib);
  v[n++] = "-x";
  v[n++] = preload;
  for (char **e = environ; *e; e++) {
    if (strncmp(*e, "DEDMPI_", 7) != 0) continue;
    size_t len = strcspn(*e, "=");
    memcpy(name, *e, len);
    name[len] = '\0';
    v[n++] = "-x";
    v[n++] = name;
    name += len + 1;
  }
  for (int i = 0; i < o->nx; i++) {
    if (!strncmp(o->x[i], "LD_PRELOAD", 10) && (o->x[i][10] == '=' || !o->x[i][10]))
      continue; /* merged above (a bare name: the environment's, merged too) */
    if (!strncmp(o->x[i], "DEDMPI_", 7)) continue;
    v[n++] = "-x";
    v[n++] = (char *)o->x[i];
  }
  for (char **a = o->argv; *a; a++) v[n++] = *a;
  v[n] = NULL;
  return v;
}

/* The directory of dedmpi's own libmpi.so.40 (and libmpi_cxx.so.40):
 * $DEDMPI_STANDALONE_DIR, else next to this executable, installed
 * (<prefix>/<libdir>/dedmpi) or in the build tree (build/standalone/lib). */
static bool find_standalone(char *out, size_t len) {
  static const char *const rel[] = {"../" DEDRUN_LIBDIR "/dedmpi/libmpi.so.40",
                                    "../standalone/lib/libmpi.so.40"};
  const char *dir = getenv("DEDMPI_STANDALONE_DIR");
  char given[PATH_MAX + 16] = "";
  if (dir && dir[0]) snprintf(given, sizeof given, "%s/libmpi.so.40", dir);
  if (!find_file(given, rel, 2, out, len)) return false;
  *strrchr(out, '/') = '\0';
  return true;
}

/* The variables child |i| of a standalone run gets (each process is a job
 * of one rank): our library first on the loader's path, and past the
 * first, the next port (when one was given) and the first as a peer to
 * join (when none was). Fills |env| (name, value pairs); false with a
 * message if the processes could not find each other. */
/* Whether the host part of "host:port" (|len| bytes) is the any-address. */
static bool any_host(const char *host, size_t len) {
  return len == 0 || (len == 7 && !strncmp(host, "0.0.0.0", 7)) || (len == 4 && !strncmp(host, "[::]", 4));
}

static bool standalone_env(int i, int n, const char *dir, char *ldpath, size_t ldlen, char *listen,
                           char *join, char *identity, size_t addrlen, const char **env) {
  const char *old = getenv("LD_LIBRARY_PATH");
  snprintf(ldpath, ldlen, "%s%s%s", dir, old && old[0] ? ":" : "", old ? old : "");
  size_t k = 0;
  env[k++] = "LD_LIBRARY_PATH";
  env[k++] = ldpath;
  const char *l = getenv("DEDMPI_LISTEN"), *j = getenv("DEDMPI_JOIN");
  const char *id = getenv("DEDMPI_IDENTITY_FILE"), *inv = getenv("DEDMPI_INVITE");
  const char *colon = l ? strrchr(l, ':') : NULL;
  long port = colon ? strtol(colon + 1, NULL, 10) : 0;
  if (n > 1 && port == 0 && !(j && j[0])) {
    fprintf(stderr, "dedrun: --standalone -n %d: give --listen HOST:PORT (process i listens on "
                    "PORT + i) or --join, so that the processes find each other\n", n);
    return false;
  }
  if (n > 1 && port + n - 1 > 65535) {
    fprintf(stderr, "dedrun: --standalone -n %d: ports %ld to %ld do not all exist\n", n, port,
            port + n - 1);
    return false;
  }
  if (n > 1 && inv && inv[0]) {
    fprintf(stderr, "dedrun: --standalone -n %d: an invitation admits one identity, and each "
                    "process is a peer of its own: run one process per invitation\n", n);
    return false;
  }
  if (i > 0 && port > 0) {
    int hl = (int)(colon - l);
    snprintf(listen, addrlen, "%.*s:%ld", hl, l, port + i);
    env[k++] = "DEDMPI_LISTEN";
    env[k++] = listen;
    if (!(j && j[0])) {
      bool any = any_host(l, (size_t)hl);
      snprintf(join, addrlen, "%.*s:%ld", any ? 9 : hl, any ? "127.0.0.1" : l, port);
      env[k++] = "DEDMPI_JOIN";
      env[k++] = join;
    }
  }
  if (i > 0) {
    /* Every process is a peer: one identity each (FILE, FILE.1, ...), and
     * one progress reporter (the first). */
    if (id && id[0]) {
      snprintf(identity, addrlen, "%s.%d", id, i);
      env[k++] = "DEDMPI_IDENTITY_FILE";
      env[k++] = identity;
    }
    env[k++] = "DEDMPI_PROGRESS";
    env[k++] = NULL;
  }
  env[k] = NULL;
  return true;
}

/* Rank 0, the job's peer, runs on |host|, not here: where it listens and
 * is reached, and why there is no progress line. */
static void rank0_elsewhere(const char *host) {
  fprintf(stderr, "dedrun: rank 0, the job's swarm peer, runs on %s (no host listed is this "
                  "machine): it listens there, and dedrun shows no progress line\n", host);
  const char *l = getenv("DEDMPI_LISTEN");
  const char *colon = l ? strrchr(l, ':') : NULL;
  if (!colon) return;
  char name[256];
  size_t n = (size_t)(colon - l);
  if (n >= 2 && l[0] == '[' && l[n - 1] == ']') /* [v6]:port */
    snprintf(name, sizeof name, "%.*s", (int)(n - 2), l + 1);
  else
    snprintf(name, sizeof name, "%.*s", (int)n, l);
  if (!any_host(l, n) && dedrun_host_is_local(name))
    fprintf(stderr, "dedrun: warning: --listen %s is this machine, but rank 0 listens on %s: "
                    "give an address of %s, or 0.0.0.0:PORT\n", l, host, host);
}

int dedrun_launch(const dedrun_opts *o) {
  char mpirun[PATH_MAX], lib[PATH_MAX], dir[PATH_MAX];
  bool standalone = o->standalone, hosts = o->host || o->hostfile;
  if (!standalone && !find_in_path("mpirun", mpirun, sizeof mpirun)) {
    if (hosts) {
      fprintf(stderr, "dedrun: --host and --hostfile need Open MPI's mpirun, and there is none "
                      "on PATH\n");
      return 1;
    }
    standalone = true;
    fprintf(stderr, "dedrun: no mpirun on PATH: running on dedmpi's own MPI library, each "
                    "process a job of one rank (install openmpi-bin for jobs of several ranks)\n");
  }
  if (standalone && !find_standalone(dir, sizeof dir)) {
    fprintf(stderr, "dedrun: dedmpi's own libmpi.so.40 not found%s%s: set "
                    "DEDMPI_STANDALONE_DIR to its directory\n",
            getenv("DEDMPI_STANDALONE_DIR") ? " in " : "",
            getenv("DEDMPI_STANDALONE_DIR") ? getenv("DEDMPI_STANDALONE_DIR") : "");
    return 1;
  }
  if (!standalone && !find_lib(lib, sizeof lib)) {
    fprintf(stderr, "dedrun: libdedmpi.so not found%s%s: set DEDMPI_LIB to its path\n",
            getenv("DEDMPI_LIB") ? " at " : "", getenv("DEDMPI_LIB") ? getenv("DEDMPI_LIB") : "");
    return 1;
  }
  /* Found: the trainer has no use for where (mpirun's local ranks inherit
   * its environment, -x or not). */
  unsetenv("DEDMPI_LIB");
  unsetenv("DEDMPI_STANDALONE_DIR");
  if (standalone) {
    for (int i = 0; i < o->nx; i++) /* -x is mpirun's: here the children inherit the variable */
      if (strchr(o->x[i], '=') && strncmp(o->x[i], "DEDMPI_", 7) != 0) {
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(strchr(o->x[i], '=') - o->x[i]), o->x[i]);
        setenv(name, strchr(o->x[i], '=') + 1, 1);
      }
  }
  int nchild = standalone ? o->np : 1;
  /* Orphans of the job (a rank whose mpirun was killed) become ours, so
   * that none outlives dedrun (end_descendants). */
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  progress p = {.fd = -1};
  const char *run = getenv("DEDMPI_RUN");
  snprintf(p.run, sizeof p.run, "%s", run && run[0] ? run : "default");
  char rank0[256];
  bool here = !hosts || dedrun_rank0_here(o->host, o->hostfile, rank0, sizeof rank0);
  if (!here) rank0_elsewhere(rank0);
  bool want = o->progress != 0 && here;
  p.tty = isatty(STDERR_FILENO) && o->progress != 0;
  if (want) {
    char name[108];
    p.fd = progress_socket(name, sizeof name);
    if (p.fd >= 0) setenv("DEDMPI_PROGRESS", name, 1);
    else fprintf(stderr, "dedrun: no progress line: %s\n", strerror(errno));
  }
  /* The trainer's outputs that are this terminal go through a pty of ours,
   * so the progress line stays below them. */
  bool pty_out = p.tty && isatty(STDOUT_FILENO), pty_err = p.tty;
  int slave = -1, master = -1;
  if (p.tty) {
    master = open_pty(&slave);
    if (master < 0) pty_out = pty_err = false;
  }
  char np[16], preload[3 * PATH_MAX], *names = NULL;
  char **argv = standalone ? o->argv : mpirun_argv(o, mpirun, lib, np, preload, sizeof preload, &names);
  if (!argv) {
    fprintf(stderr, "dedrun: out of memory\n");
    return 1;
  }
  const char *what = standalone ? o->argv[0] : mpirun;

  sigset_t mask, old;
  sigemptyset(&mask);
  int sigs[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH};
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) sigaddset(&mask, sigs[i]);
  sigprocmask(SIG_BLOCK, &mask, &old);
  int sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
  child *ch = calloc((size_t)nchild, sizeof *ch);
  int started = 0, failed = 0;
  for (; ch && sfd >= 0 && started < nchild; started++) {
    char ldpath[2 * PATH_MAX], listen[PATH_MAX], join[PATH_MAX], identity[PATH_MAX];
    const char *env[16];
    if (standalone && !standalone_env(started, nchild, dir, ldpath, sizeof ldpath, listen, join,
                                      identity, sizeof listen, env)) {
      failed = 2;
      break;
    }
    /* mpirun needs SIGTERM to end its ranks; a standalone process is the
     * trainer itself, and one that ignores SIGTERM must not outlive us. */
    ch[started].pid = spawn(argv, &old, standalone ? SIGKILL : SIGTERM, slave, pty_out, pty_err,
                            standalone ? (char *const *)env : NULL);
    if (ch[started].pid < 0) {
      fprintf(stderr, "dedrun: cannot run %s: %s\n", what, strerror(errno));
      failed = 1;
      break;
    }
  }
  if (!standalone) {
    free(argv);
    free(names);
  }
  if (slave >= 0) close(slave);
  if (!ch || sfd < 0 || failed) {
    /* mpirun ends its ranks on SIGTERM; a standalone trainer may ignore
     * it, and the wait below must not hang on one. */
    for (int i = 0; ch && i < started; i++) kill(ch[i].pid, standalone ? SIGKILL : SIGTERM);
    for (int i = 0; ch && i < started; i++) waitpid(ch[i].pid, NULL, 0);
    free(ch);
    sigprocmask(SIG_SETMASK, &old, NULL);
    return failed ? failed : 1;
  }
  int out = pty_out ? STDOUT_FILENO : STDERR_FILENO;

  double kill_at = 0, drain_until = 0;
  int left = nchild;
  while (left > 0 || master >= 0) {
    struct pollfd pf[3] = {{sfd, POLLIN, 0}, {p.fd, POLLIN, 0}, {master, POLLIN, 0}};
    int timeout = -1;
    if (kill_at > 0) timeout = (int)((kill_at - now_s()) * 1e3) + 1;
    if (left == 0) {
      /* Draining the pty: what is left comes at once, but a process of the
       * job that outlived the children and keeps writing must not keep us
       * (and so itself, end_descendants) alive. */
      if (drain_until == 0) drain_until = now_s() + DRAIN_MAX_S;
      if (now_s() >= drain_until) break;
      timeout = 100;
    }
    if (timeout < 0 && kill_at > 0) timeout = 0;
    int n = poll(pf, 3, timeout);
    if (n < 0) continue; /* EINTR; nothing else can fail here */
    if (n == 0 && left == 0) break;
    if (pf[2].revents) {
      if (!relay(&p, master, out)) {
        close(master);
        master = -1;
      }
    }
    if (pf[1].revents & POLLIN) progress_read(&p);
    struct signalfd_siginfo si;
    while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
      int sig = (int)si.ssi_signo;
      if (sig == SIGCHLD) {
        int st;
        pid_t pid;
        while (left > 0 && (pid = waitpid(-1, &st, WNOHANG)) > 0)
          for (int i = 0; i < nchild; i++)
            if (ch[i].pid == pid && !ch[i].done) {
              ch[i].done = true;
              ch[i].status = st;
              left--;
            }
      } else if (sig == SIGWINCH) {
        struct winsize ws;
        if (master >= 0 && ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0) ioctl(master, TIOCSWINSZ, &ws);
      } else {
        for (int i = 0; i < nchild; i++)
          if (sent_by_process(&si) && !ch[i].done) kill(ch[i].pid, sig);
        if (sig != SIGUSR1 && sig != SIGUSR2 && kill_at == 0) kill_at = now_s() + KILL_GRACE_S;
      }
    }
    if (kill_at > 0 && left > 0 && now_s() >= kill_at) {
      fprintf(stderr, "dedrun: %s still running %.0f s after the signal: killing it\n", what,
              KILL_GRACE_S);
      for (int i = 0; i < nchild; i++)
        if (!ch[i].done) kill(ch[i].pid, SIGKILL);
      kill_at = now_s() + 3600;
    }
  }
  end_descendants();
  if (p.fd >= 0) progress_read(&p);
  progress_clear(&p);
  if (p.have && p.tty) {
    char text[256];
    progress_text(&p, text, sizeof text);
    fprintf(stderr, "dedrun: %llu round%s; last: %s\n", p.rounds, p.rounds == 1 ? "" : "s", text);
  }
  if (p.fd >= 0) close(p.fd);
  if (master >= 0) close(master);
  close(sfd);
  sigprocmask(SIG_SETMASK, &old, NULL);
  int rc = 0;
  for (int i = 0; i < nchild && rc == 0; i++) rc = exit_code(ch[i].status);
  free(ch);
  return rc;
}
