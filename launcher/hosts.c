/*
 * hosts.c: dedrun's --host and --hostfile. dedrun passes both to mpirun
 * as given; here they are checked first (a typo is a usage error, not an
 * mpirun failure after the start-up), and dedrun learns where rank 0, the
 * job's swarm peer, will run: its progress line needs rank 0 on this
 * machine.
 */
#define _GNU_SOURCE
#include "hosts.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define HOST_NAME_LEN 255

static bool name_char(char c) { return isalnum((unsigned char)c) || c == '.' || c == '-' || c == '_'; }

/* A user name before '@', as mpirun takes it. */
static bool user_ok(const char *s, size_t n) {
  if (n == 0 || !isalnum((unsigned char)s[0])) return false;
  for (size_t i = 1; i < n; i++)
    if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '_') return false;
  return true;
}

/* |s| (|n| bytes) as a host: [user@]name, a name or IPv4 address (letters,
 * digits, '.', '-', '_', starting with a letter or digit) or, where
 * |ipv6|, an IPv6 address (hex digits, ':' and '.'). Sets *host to the part
 * after any "user@". */
static bool host_ok(const char *s, size_t n, bool ipv6, const char **host, size_t *hn) {
  const char *at = memchr(s, '@', n);
  if (at) {
    if (!user_ok(s, (size_t)(at - s))) return false;
    n -= (size_t)(at + 1 - s);
    s = at + 1;
  }
  if (n == 0 || n > HOST_NAME_LEN) return false;
  bool name = isalnum((unsigned char)s[0]), v6 = ipv6;
  for (size_t i = 0; i < n; i++) {
    name = name && name_char(s[i]);
    v6 = v6 && (isxdigit((unsigned char)s[i]) || s[i] == ':' || s[i] == '.');
  }
  *host = s;
  *hn = n;
  return name || (v6 && memchr(s, ':', n));
}

/* A slot count: digits only, 1 to DEDRUN_SLOTS_MAX. */
static bool slots_ok(const char *s, size_t n) {
  if (n == 0 || n > 4) return false;
  long v = 0;
  for (size_t i = 0; i < n; i++) {
    if (!isdigit((unsigned char)s[i])) return false;
    v = v * 10 + (s[i] - '0');
  }
  return v >= 1 && v <= DEDRUN_SLOTS_MAX;
}

static bool call_each(dedrun_host_fn each, void *arg, const char *host, size_t n) {
  char name[HOST_NAME_LEN + 1];
  snprintf(name, sizeof name, "%.*s", (int)n, host);
  return each(name, arg);
}

int dedrun_host_list(const char *list, dedrun_host_fn each, void *arg, char *err, size_t errlen) {
  const char *p = list;
  for (;;) {
    size_t n = strcspn(p, ",");
    const char *colon = memchr(p, ':', n), *host;
    size_t hn = colon ? (size_t)(colon - p) : n;
    if (n == 0) {
      snprintf(err, errlen, "an empty entry (expected HOST[:SLOTS],...)");
      return -1;
    }
    if (!host_ok(p, hn, false, &host, &hn)) {
      snprintf(err, errlen, "'%.*s' is not a host name or IPv4 address (expected "
               "HOST[:SLOTS],...)", (int)(colon ? (size_t)(colon - p) : n), p);
      return -1;
    }
    if (colon && !slots_ok(colon + 1, (size_t)(p + n - colon - 1))) {
      snprintf(err, errlen, "'%.*s': expected HOST:SLOTS, SLOTS a number from 1 to %d", (int)n,
               p, DEDRUN_SLOTS_MAX);
      return -1;
    }
    if (each && !call_each(each, arg, host, hn)) return 0;
    if (p[n] == '\0') return 0;
    p += n + 1;
  }
}

static const char *skip_space(const char *s) {
  while (*s == ' ' || *s == '\t' || *s == '\f' || *s == '\v' || *s == '\r') s++;
  return s;
}

/* One line of a hostfile, comments cut off: blank, or HOST then KEY=N
 * pairs. 1 and the host in *host (|hn| bytes) for a host line, 0 for a
 * blank one, -1 if it is neither. */
static int hostfile_line(const char *s, const char **host, size_t *hn) {
  s = skip_space(s);
  if (*s == '\0') return 0;
  size_t n = strcspn(s, " \t\f\v\r=");
  if (!host_ok(s, n, true, host, hn)) return -1;
  for (s = skip_space(s + n); *s; s = skip_space(s)) {
    static const char *const keys[] = {"slots", "max_slots", "max-slots", "slots_max",
                                       "slots-max"};
    size_t k = strcspn(s, " \t\f\v\r="), i;
    for (i = 0; i < sizeof keys / sizeof keys[0]; i++)
      if (strlen(keys[i]) == k && !strncmp(s, keys[i], k)) break;
    if (i == sizeof keys / sizeof keys[0]) return -1;
    s = skip_space(s + k);
    if (*s != '=') return -1;
    s = skip_space(s + 1);
    size_t d = strspn(s, "0123456789");
    if (!slots_ok(s, d)) return -1;
    s += d;
  }
  return 1;
}

int dedrun_hostfile(const char *path, dedrun_host_fn each, void *arg, char *err, size_t errlen) {
  FILE *f = fopen(path, "r");
  struct stat st;
  if (!f || fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    snprintf(err, errlen, "%s", f ? "not a regular file" : strerror(errno));
    if (f) fclose(f);
    return -1;
  }
  char *line = NULL;
  size_t cap = 0;
  int lineno = 0, hosts = 0, rv = 0;
  bool more = true;
  ssize_t len;
  while (more && (len = getline(&line, &cap, f)) >= 0) {
    lineno++;
    if (len > 0 && line[len - 1] == '\n') line[--len] = '\0';
    if (strlen(line) != (size_t)len) {
      snprintf(err, errlen, "line %d: a NUL byte (not a text file?)", lineno);
      rv = -1;
      break;
    }
    char *c = strchr(line, '#'), *c2 = strstr(line, "//");
    if (c) *c = '\0';
    if (c2) *c2 = '\0';
    const char *host;
    size_t hn;
    int k = hostfile_line(line, &host, &hn);
    if (k < 0) {
      snprintf(err, errlen, "line %d: '%.200s': expected HOST [slots=N] [max_slots=N], N from "
               "1 to %d", lineno, skip_space(line), DEDRUN_SLOTS_MAX);
      rv = -1;
      break;
    }
    if (k == 1) {
      hosts++;
      if (each) more = call_each(each, arg, host, hn);
    }
  }
  if (rv == 0 && more && ferror(f)) {
    snprintf(err, errlen, "%s", strerror(errno));
    rv = -1;
  }
  if (rv == 0 && more && hosts == 0) {
    snprintf(err, errlen, "no host in it");
    rv = -1;
  }
  free(line);
  fclose(f);
  return rv;
}

static bool same_addr(const struct sockaddr *a, const struct sockaddr *b) {
  if (a->sa_family != b->sa_family) return false;
  if (a->sa_family == AF_INET)
    return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
           ((const struct sockaddr_in *)b)->sin_addr.s_addr;
  if (a->sa_family == AF_INET6)
    return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                   &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr));
  return false;
}

static bool loopback(const struct sockaddr *a) {
  if (a->sa_family == AF_INET)
    return (ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr) >> 24) == 127;
  if (a->sa_family == AF_INET6)
    return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)a)->sin6_addr);
  return false;
}

/* |a| and |b| name one host if equal, or if one is the other's first
 * label ("node1" and "node1.example.org"). */
static bool same_name(const char *a, const char *b) {
  size_t la = strcspn(a, "."), lb = strcspn(b, ".");
  return !strcmp(a, b) || (!a[la] && la == lb && !strncmp(a, b, la)) ||
         (!b[lb] && la == lb && !strncmp(a, b, lb));
}

bool dedrun_host_is_local(const char *host) {
  char me[HOST_NAME_LEN + 1] = "";
  if (!strcmp(host, "localhost") || (gethostname(me, sizeof me - 1) == 0 && same_name(host, me)))
    return true;
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
  if (getaddrinfo(host, NULL, &hints, &res) != 0) return false;
  struct ifaddrs *ifs = NULL;
  bool local = false;
  if (getifaddrs(&ifs) != 0) ifs = NULL;
  for (struct addrinfo *r = res; r && !local; r = r->ai_next) {
    local = loopback(r->ai_addr);
    for (struct ifaddrs *i = ifs; i && !local; i = i->ifa_next)
      local = i->ifa_addr && same_addr(r->ai_addr, i->ifa_addr);
  }
  if (ifs) freeifaddrs(ifs);
  freeaddrinfo(res);
  return local;
}

typedef struct rank0 {
  char first[HOST_NAME_LEN + 1];
  bool here;
} rank0;

static bool rank0_each(const char *host, void *arg) {
  rank0 *r = arg;
  if (!r->first[0]) snprintf(r->first, sizeof r->first, "%s", host);
  r->here = dedrun_host_is_local(host);
  return !r->here;
}

bool dedrun_rank0_here(const char *list, const char *hostfile, char *out, size_t len) {
  rank0 r = {.first = "", .here = false};
  char err[512];
  if (list) dedrun_host_list(list, rank0_each, &r, err, sizeof err);
  else if (hostfile) dedrun_hostfile(hostfile, rank0_each, &r, err, sizeof err);
  else return true;
  if (!r.here) snprintf(out, len, "%s", r.first);
  return r.here;
}
