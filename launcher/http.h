/*
 * http.h: the little HTTP/1.x a backbone's status page needs. The request
 * parser reads bytes from anyone who connects, so it has a fuzz target
 * (tests/fuzz/fuzz_http.c).
 */
#ifndef DEDRUN_HTTP_H
#define DEDRUN_HTTP_H

#include <stddef.h>

#define HTTP_HEAD_MAX 4096 /* a longer request head is refused (431) */
#define HTTP_PATH_MAX 256

enum {
  HTTP_INCOMPLETE = 0,
  HTTP_BAD = -400,        /* not an HTTP/1.x request line */
  HTTP_NOT_ALLOWED = -405, /* a method other than GET or HEAD */
  HTTP_TOO_LARGE = -431,   /* no end of head within HTTP_HEAD_MAX bytes */
  HTTP_URI_TOO_LONG = -414,
};

/*
 * Parses the request head at the start of |buf| (|len| bytes so far). On
 * a complete, valid GET or HEAD, returns the length of the head (through
 * its blank line) and sets |path| (the target up to '?', NUL-terminated)
 * and |*head| (1 for HEAD). Returns HTTP_INCOMPLETE while the head may
 * still end within HTTP_HEAD_MAX, or one of the negative codes, which are
 * minus the status to answer with.
 */
int http_parse_request(const char *buf, size_t len, char path[HTTP_PATH_MAX], int *head);

/*
 * Fetches http://|hostport||path| (GET, one connection, |timeout_ms| in
 * all) into a malloc'd, NUL-terminated |*body|. Returns the HTTP status,
 * or -1 with |err| set.
 */
int http_get(const char *hostport, const char *path, int timeout_ms, char **body, char *err,
             size_t errlen);

#endif /* DEDRUN_HTTP_H */
