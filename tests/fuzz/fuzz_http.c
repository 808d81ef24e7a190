/*
 * fuzz_http.c: request heads to a backbone's status server
 * (launcher/http.c), which anyone who reaches its port can send.
 *
 * Input: the bytes received so far. http_parse_request answers one of its
 * documented codes; a complete request's head lies within the input and
 * HTTP_HEAD_MAX, its path starts with '/' and holds no space, control
 * byte, '?' or '#'; and the answer for a prefix of a complete head is
 * "incomplete" (the parser never acts on a head it has not seen end).
 */
#include <string.h>

#include "fuzz.h"

#include "http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[HTTP_PATH_MAX];
  int head = -1;
  int rv = http_parse_request((const char *)data, size, path, &head);
  FUZZ_CHECK(rv == HTTP_INCOMPLETE || rv == HTTP_BAD || rv == HTTP_NOT_ALLOWED ||
             rv == HTTP_TOO_LARGE || rv == HTTP_URI_TOO_LONG || rv > 0);
  if (rv == HTTP_TOO_LARGE) FUZZ_CHECK(size >= HTTP_HEAD_MAX);
  if (rv <= 0) return 0;
  FUZZ_CHECK((size_t)rv <= size && rv <= HTTP_HEAD_MAX);
  FUZZ_CHECK(head == 0 || head == 1);
  size_t plen = strlen(path);
  FUZZ_CHECK(plen >= 1 && plen < HTTP_PATH_MAX && path[0] == '/');
  for (size_t i = 0; i < plen; i++)
    FUZZ_CHECK((unsigned char)path[i] > ' ' && (unsigned char)path[i] < 0x7f && path[i] != '?' &&
               path[i] != '#');
  /* The head ends with a blank line, and no shorter prefix parses. */
  FUZZ_CHECK(data[rv - 1] == '\n');
  if (rv >= 2) {
    char p2[HTTP_PATH_MAX];
    int h2;
    FUZZ_CHECK(http_parse_request((const char *)data, (size_t)rv - 1, p2, &h2) <= 0);
  }
  return 0;
}
