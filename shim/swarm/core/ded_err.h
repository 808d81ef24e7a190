/*
 * ded_err.h: error codes of the swarm engine.
 *
 * Every function returns 0 or a negative DED_ERR_* code, ngtcp2 style.
 * Codes in (DED_ERR_FATAL, 0) concern one peer or one operation: the peer
 * is dropped or the operation fails, and the node goes on. Codes at or
 * below DED_ERR_FATAL mean the node itself cannot continue.
 */
#ifndef DED_ERR_H
#define DED_ERR_H

#include <stdbool.h>

enum ded_err {
  DED_OK = 0,
  /* An argument from the caller (not a peer) is invalid. */
  DED_ERR_INVALID_ARG = -201,
  /* A peer sent bytes that are not the protocol: drop that peer. */
  DED_ERR_PROTO = -202,
  /* A frame declared a length above DED_FRAME_MAX. */
  DED_ERR_FRAME_SIZE = -203,
  /* A signature did not verify. */
  DED_ERR_SIGNATURE = -204,
  /* A record or message is expired, or dated too far in the future. */
  DED_ERR_EXPIRED = -205,
  /* The peer belongs to a different run. */
  DED_ERR_WRONG_RUN = -206,
  /* Members of one round disagree on the buffer's type or length. */
  DED_ERR_SIZE_MISMATCH = -207,
  /* A bounded wait ran out. */
  DED_ERR_TIMEOUT = -208,
  /* A member of a round went away before the round completed. */
  DED_ERR_PEER_LOST = -209,
  /* A limit of ded_limits.h was reached. */
  DED_ERR_LIMIT = -210,
  /* No DEDMPI_JOIN address answered within the bound. */
  DED_ERR_BOOTSTRAP = -212,
  /* Fewer than DEDMPI_MIN_PEERS peers arrived within the bound. */
  DED_ERR_RENDEZVOUS = -213,
  /* The node is shutting down. */
  DED_ERR_CLOSING = -214,
  /* The protocol version of the peer is not ours. */
  DED_ERR_VERSION = -215,
  /* A handshake or an encrypted frame did not authenticate: another run
   * or secret, an impostor, or bytes changed, replayed or reordered. */
  DED_ERR_AUTH = -217,
  /* A run with access control does not admit the peer: its key is neither
   * the owner's nor on the allow-list, and it has no valid invitation. */
  DED_ERR_NOT_ADMITTED = -218,
  /* Threshold for fatal errors. */
  DED_ERR_FATAL = -500,
  DED_ERR_NOMEM = -501,
  DED_ERR_INTERNAL = -503,
};

/* A static, human-readable description of |err|. Never NULL. */
const char *ded_strerror(int err);

/* True when |err| means the node must stop. */
static inline bool ded_err_is_fatal(int err) { return err <= DED_ERR_FATAL; }

#endif /* DED_ERR_H */
