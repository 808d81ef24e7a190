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

static uint64_t digest_mix(uint64_t h) {
  h ^= h >> 31;
  h *= 0x7fb5d329728ea185ull;
  h ^= h >> 27;
  h *= 0x81dadef4bc2dd44dull;
  return h ^ (h >> 33);
}

/* Four independent lanes of multiply-xor over 8-byte words (several GB/s),
 * folded with the length. */
uint64_t ded_digest64(const void *p, size_t len) {
  static const uint64_t k = 0x9e3779b97f4a7c15ull;
  const uint8_t *b = p;
  uint64_t lane[4] = {k, k ^ 1, k ^ 2, k ^ 3};
  size_t i = 0;
  for (; i + 32 <= len; i += 32)
    for (int j = 0; j < 4; j++) {
      const uint8_t *q = b + i + 8 * (size_t)j; /* little-endian on every host */
      uint64_t w = (uint64_t)q[0] | (uint64_t)q[1] << 8 | (uint64_t)q[2] << 16 |
                   (uint64_t)q[3] << 24 | (uint64_t)q[4] << 32 | (uint64_t)q[5] << 40 |
                   (uint64_t)q[6] << 48 | (uint64_t)q[7] << 56;
      lane[j] = (lane[j] ^ w) * 0xff51afd7ed558ccdull;
      lane[j] ^= lane[j] >> 32;
    }
  uint64_t h = (uint64_t)len * k;
  for (int j = 0; j < 4; j++) h = digest_mix(h ^ lane[j]);
  for (; i < len; i++) h = digest_mix(h ^ b[i]);
  return h;
}
