/* http.c: see http.h. */
#define _GNU_SOURCE
#include "http.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* The end of the head: "\r\n\r\n" (or "\n\n" from a hand-typed request). */
static size_t head_end(const char *buf, size_t len) {
  for (size_t i = 0; i + 1 < len; i++) {
    if (buf[i] == '\n' && buf[i + 1] == '\n') return i + 2;
    if (i + 3 < len && !memcmp(buf + i, "\r\n\r\n", 4)) return i + 4;
  }
  return 0;
}

int http_parse_request(const char *buf, size_t len, char path[HTTP_PATH_MAX], int *head) {
  size_t end = head_end(buf, len < HTTP_HEAD_MAX ? len : HTTP_HEAD_MAX);
  if (end == 0) return len >= HTTP_HEAD_MAX ? HTTP_TOO_LARGE : HTTP_INCOMPLETE;
  /* Request line: METHOD SP TARGET SP HTTP/1.x */
  size_t line = 0;
  while (line < end && buf[line] != '\r' && buf[line] != '\n') line++;
  const char *sp1 = memchr(buf, ' ', line);
  if (!sp1) return HTTP_BAD;
  size_t mlen = (size_t)(sp1 - buf);
  const char *target = sp1 + 1;
  const char *sp2 = memchr(target, ' ', line - (size_t)(target - buf));
  if (!sp2) return HTTP_BAD;
  size_t tlen = (size_t)(sp2 - target);
  size_t vlen = line - (size_t)(sp2 + 1 - buf);
  if (vlen != 8 || memcmp(sp2 + 1, "HTTP/1.", 7) != 0 || (sp2[8] != '0' && sp2[8] != '1'))
    return HTTP_BAD;
  if (tlen == 0 || target[0] != '/') return HTTP_BAD;
  for (size_t i = 0; i < tlen; i++)
    if ((unsigned char)target[i] <= ' ' || (unsigned char)target[i] >= 0x7f) return HTTP_BAD;
  if (mlen == 3 && !memcmp(buf, "GET", 3)) *head = 0;
  else if (mlen == 4 && !memcmp(buf, "HEAD", 4)) *head = 1;
  else return HTTP_NOT_ALLOWED;
  size_t plen = 0;
  while (plen < tlen && target[plen] != '?' && target[plen] != '#') plen++;
  if (plen >= HTTP_PATH_MAX) return HTTP_URI_TOO_LONG;
  memcpy(path, target, plen);
  path[plen] = '\0';
  return (int)end;
}

static double mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Waits for |events| on |fd| until |deadline| (mono_ms); 1, 0 on timeout. */
static int wait_fd(int fd, short events, double deadline) {
  for (;;) {
    int left = (int)(deadline - mono_ms());
    if (left <= 0) return 0;
    struct pollfd p = {fd, events, 0};
    int n = poll(&p, 1, left);
    if (n > 0) return 1;
    if (n < 0 && errno != EINTR) return 0;
  }
}

int http_get(const char *hostport, const char *path, int timeout_ms, char **body, char *err,
             size_t errlen) {
  *body = NULL;
  double deadline = mono_ms() + timeout_ms;
  char host[256];
  const char *colon = strrchr(hostport, ':');
  if (!colon || colon == hostport || (size_t)(colon - hostport) >= sizeof host || !colon[1]) {
    snprintf(err, errlen, "%s: expected host:port", hostport);
    return -1;
  }
  snprintf(host, sizeof host, "%.*s", (int)(colon - hostport), hostport);
  if (host[0] == '[' && host[strlen(host) - 1] == ']') { /* [v6]:port */
    memmove(host, host + 1, strlen(host));
    host[strlen(host) - 1] = '\0';
  }
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
  int g = getaddrinfo(host, colon + 1, &hints, &ai);
  if (g != 0) {
    snprintf(err, errlen, "%s: %s", hostport, gai_strerror(g));
    return -1;
  }
  int fd = -1;
  for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    int e = 0;
    socklen_t el = sizeof e;
    if ((connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) ||
        !wait_fd(fd, POLLOUT, deadline) || getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) != 0 ||
        e != 0) {
      snprintf(err, errlen, "cannot connect to %s: %s", hostport,
               e ? strerror(e) : errno ? strerror(errno) : "timed out");
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(ai);
  if (fd < 0) return -1;
  char req[512];
  int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: %s\r\nConnection: close\r\n\r\n",
                   path, hostport);
  if (n < 0 || n >= (int)sizeof req) {
    snprintf(err, errlen, "%.64s...: address too long", hostport);
    close(fd);
    return -1;
  }
  for (int off = 0; off < n;) {
    ssize_t w = send(fd, req + off, (size_t)(n - off), MSG_NOSIGNAL);
    if (w < 0 && errno == EAGAIN && wait_fd(fd, POLLOUT, deadline)) continue;
    if (w <= 0) {
      snprintf(err, errlen, "%s: %s", hostport, w < 0 ? strerror(errno) : "closed");
      close(fd);
      return -1;
    }
    off += (int)w;
  }
  size_t cap = 65536, len = 0;
  char *buf = malloc(cap);
  for (;;) {
    if (!buf || len + 1 >= cap) {
      char *nb = cap < (16u << 20) && buf ? realloc(buf, cap *= 2) : NULL;
      if (!nb) {
        snprintf(err, errlen, "%s: response too large", hostport);
        free(buf);
        close(fd);
        return -1;
      }
      buf = nb;
    }
    ssize_t r = recv(fd, buf + len, cap - len - 1, 0);
    if (r > 0) {
      len += (size_t)r;
      continue;
    }
    if (r == 0) break;
    if (errno == EAGAIN && wait_fd(fd, POLLIN, deadline)) continue;
    snprintf(err, errlen, "%s: %s", hostport, errno == EAGAIN ? "timed out" : strerror(errno));
    free(buf);
    close(fd);
    return -1;
  }
  close(fd);
  buf[len] = '\0';
  int status = 0;
  char *sep = strstr(buf, "\r\n\r\n");
  if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1 || !sep) {
    snprintf(err, errlen, "%s: not an HTTP response", hostport);
    free(buf);
    return -1;
  }
  memmove(buf, sep + 4, len - (size_t)(sep + 4 - buf) + 1);
  *body = buf;
  return status;
}
