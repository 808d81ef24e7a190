#include "ded_types.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ded_err.h"

void ded_addr_format(const ded_addr *addr, char *buf, size_t len) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (addr->family == 4)
    inet_ntop(AF_INET, addr->ip, host, sizeof host);
  else if (addr->family == 6)
    inet_ntop(AF_INET6, addr->ip, host, sizeof host);
  if (addr->family == 6)
    snprintf(buf, len, "[%s]:%u", host, addr->port);
  else
    snprintf(buf, len, "%s:%u", host, addr->port);
}

static int addr_parse_port(const char *s, uint16_t *port) {
  if (*s == '\0') return DED_ERR_INVALID_ARG;
  for (const char *c = s; *c; c++)
    if (*c < '0' || *c > '9') return DED_ERR_INVALID_ARG;
  errno = 0;
  unsigned long v = strtoul(s, NULL, 10);
  if (errno || v > 65535) return DED_ERR_INVALID_ARG;
  *port = (uint16_t)v;
  return 0;
}

int ded_addr_parse(const char *text, ded_addr *out) {
  char host[64];
  const char *port;
  memset(out, 0, sizeof *out);
  if (text[0] == '[') {
    const char *end = strchr(text, ']');
    if (!end || end[1] != ':' || (size_t)(end - text - 1) >= sizeof host) return DED_ERR_INVALID_ARG;
    memcpy(host, text + 1, (size_t)(end - text - 1));
    host[end - text - 1] = '\0';
    port = end + 2;
    if (inet_pton(AF_INET6, host, out->ip) != 1) return DED_ERR_INVALID_ARG;
    out->family = 6;
  } else {
    const char *colon = strrchr(text, ':');
    if (!colon || (size_t)(colon - text) >= sizeof host) return DED_ERR_INVALID_ARG;
    memcpy(host, text, (size_t)(colon - text));
    host[colon - text] = '\0';
    port = colon + 1;
    out->family = 4;
    if (host[0] != '\0' && inet_pton(AF_INET, host, out->ip) != 1) return DED_ERR_INVALID_ARG;
  }
  return addr_parse_port(port, &out->port);
}

bool ded_addr_equal(const ded_addr *a, const ded_addr *b) {
  size_t n = a->family == 4 ? 4 : 16;
  return a->family == b->family && a->port == b->port && memcmp(a->ip, b->ip, n) == 0;
}

bool ded_addr_is_any(const ded_addr *a) {
  static const uint8_t zero[16];
  return memcmp(a->ip, zero, a->family == 4 ? 4 : 16) == 0;
}

size_t ded_id_lower_bound(const void *base, size_t n, size_t stride,
                          const uint8_t id[DED_ID_BYTES]) {
  const uint8_t *p = base;
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (memcmp(p + mid * stride, id, DED_ID_BYTES) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

void ded_id_short(const uint8_t id[DED_ID_BYTES], char out[9]) {
  static const char hex[] = "0123456789abcdef";
  for (int i = 0; i < 4; i++) {
    out[2 * i] = hex[id[i] >> 4];
    out[2 * i + 1] = hex[id[i] & 15];
  }
  out[8] = '\0';
}
