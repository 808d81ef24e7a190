/*
 * ded_resolve.c: "host:port" text, sockaddrs and the addresses a job
 * announces (see ded_resolve.h).
 */
#define _GNU_SOURCE
#include "ded_resolve.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ded_err.h"
#include "core/ded_limits.h"

void ded_resolve_to_sockaddr(const ded_addr *a, struct sockaddr_storage *ss, socklen_t *len) {
  memset(ss, 0, sizeof *ss);
  if (a->family == 6) {
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
    s6->sin6_family = AF_INET6;
    memcpy(&s6->sin6_addr, a->ip, 16);
    s6->sin6_port = htons(a->port);
    *len = sizeof *s6;
  } else {
    struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
    s4->sin_family = AF_INET;
    memcpy(&s4->sin_addr, a->ip, 4);
    s4->sin_port = htons(a->port);
    *len = sizeof *s4;
  }
}

void ded_resolve_from_sockaddr(const struct sockaddr *sa, ded_addr *a) {
  memset(a, 0, sizeof *a);
  if (sa->sa_family == AF_INET6) {
    const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
    a->family = 6;
    memcpy(a->ip, &s6->sin6_addr, 16);
    a->port = ntohs(s6->sin6_port);
  } else if (sa->sa_family == AF_INET) {
    const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
    a->family = 4;
    memcpy(a->ip, &s4->sin_addr, 4);
    a->port = ntohs(s4->sin_port);
  }
}

/* Splits "host:port" / "[v6]:port" into its parts. */
static int split_host_port(const char *text, char *host, size_t hostlen, char *port,
                           size_t portlen) {
  const char *colon;
  if (text[0] == '[') {
    const char *end = strchr(text, ']');
    if (!end || end[1] != ':') return -1;
    if ((size_t)(end - text - 1) >= hostlen) return -1;
    memcpy(host, text + 1, (size_t)(end - text - 1));
    host[end - text - 1] = '\0';
    colon = end + 1;
  } else {
    colon = strrchr(text, ':');
    if (!colon || (size_t)(colon - text) >= hostlen) return -1;
    memcpy(host, text, (size_t)(colon - text));
    host[colon - text] = '\0';
  }
  if (strlen(colon + 1) == 0 || strlen(colon + 1) >= portlen) return -1;
  for (const char *c = colon + 1; *c; c++)
    if (*c < '0' || *c > '9') return -1;
  long p = strtol(colon + 1, NULL, 10);
  if (p < 0 || p > 65535) return -1;
  snprintf(port, portlen, "%s", colon + 1);
  return 0;
}

int ded_resolve_addr(const char *text, bool allow_any, ded_addr *out, char *err, size_t errlen) {
  char host[256], port[16];
  if (split_host_port(text, host, sizeof host, port, sizeof port) != 0) {
    snprintf(err, errlen, "'%s' is not host:port", text);
    return DED_ERR_INVALID_ARG;
  }
  if (host[0] == '\0' || strcmp(host, "*") == 0) {
    if (!allow_any) {
      snprintf(err, errlen, "'%s' has no host", text);
      return DED_ERR_INVALID_ARG;
    }
    snprintf(host, sizeof host, "0.0.0.0");
  }
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  int rv = getaddrinfo(host, port, &hints, &res);
  if (rv != 0 || !res) {
    snprintf(err, errlen, "cannot resolve '%s': %s", host, gai_strerror(rv));
    return DED_ERR_INVALID_ARG;
  }
  /* Prefer IPv4: loopback labs and most home links. */
  struct addrinfo *pick = res;
  for (struct addrinfo *ai = res; ai; ai = ai->ai_next)
    if (ai->ai_family == AF_INET) {
      pick = ai;
      break;
    }
  ded_resolve_from_sockaddr(pick->ai_addr, out);
  freeaddrinfo(res);
  return 0;
}

int ded_resolve_list(const char *text, ded_addr *out, unsigned max, unsigned *n, bool allow_any,
                     char *err, size_t errlen) {
  *n = 0;
  if (!text) return 0;
  char buf[2048];
  snprintf(buf, sizeof buf, "%s", text);
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    while (*tok == ' ') tok++;
    if (*tok == '\0') continue;
    if (*n >= max) {
      snprintf(err, errlen, "more than %u addresses in '%s'", max, text);
      return DED_ERR_INVALID_ARG;
    }
    int rv = ded_resolve_addr(tok, allow_any, &out[*n], err, errlen);
    if (rv) return rv;
    (*n)++;
  }
  return 0;
}

void ded_resolve_announce(const ded_addr *listen, ded_addr *out, unsigned *n) {
  *n = 0;
  if (!ded_addr_is_any(listen)) {
    out[(*n)++] = *listen;
    return;
  }
  struct ifaddrs *ifs = NULL;
  if (getifaddrs(&ifs) != 0) return;
  for (int pass = 0; pass < 2; pass++)
    for (struct ifaddrs *i = ifs; i && *n < DED_RECORD_ADDRS_MAX; i = i->ifa_next) {
      if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
      bool loop = (i->ifa_flags & IFF_LOOPBACK) != 0;
      if (loop != (pass == 1)) continue;
      ded_addr a;
      ded_resolve_from_sockaddr(i->ifa_addr, &a);
      a.port = listen->port;
      out[(*n)++] = a;
    }
  freeifaddrs(ifs);
}
