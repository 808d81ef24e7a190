#include "ded_err.h"

#include <stdio.h>
#include <stdlib.h>

#include "ded_assert.h"

const char *ded_strerror(int err) {
  switch (err) {
  case DED_OK: return "success";
  case DED_ERR_INVALID_ARG: return "invalid argument";
  case DED_ERR_PROTO: return "protocol violation by peer";
  case DED_ERR_FRAME_SIZE: return "frame too large";
  case DED_ERR_SIGNATURE: return "bad signature";
  case DED_ERR_EXPIRED: return "expired or future-dated";
  case DED_ERR_WRONG_RUN: return "peer belongs to another run";
  case DED_ERR_SIZE_MISMATCH: return "buffer type or length differs between peers";
  case DED_ERR_TIMEOUT: return "timed out";
  case DED_ERR_PEER_LOST: return "a member of the round went away";
  case DED_ERR_LIMIT: return "limit exceeded";
  case DED_ERR_BOOTSTRAP: return "no bootstrap peer answered";
  case DED_ERR_RENDEZVOUS: return "too few peers arrived for the first round";
  case DED_ERR_CLOSING: return "node is shutting down";
  case DED_ERR_VERSION: return "unsupported protocol version";
  case DED_ERR_AUTH: return "authentication failed";
  case DED_ERR_NOT_ADMITTED: return "not admitted to the run (not the owner, not on the allow-list, no valid invitation)";
  case DED_ERR_NOMEM: return "out of memory";
  case DED_ERR_INTERNAL: return "internal error";
  default: return "unknown error";
  }
}

void ded_assert_fail(const char *expr, const char *file, int line) {
  fprintf(stderr, "dedmpi: assertion failed: %s (%s:%d)\n", expr, file, line);
  fflush(stderr);
  abort();
}
