/*
 * ded_chan.h: one connection's secure channel, between the socket and the
 * node's frames.
 *
 * A connection opens with the handshake of ded_noise.h; from then on every
 * byte is in sealed records (ded_aead.h). On the wire (the session format
 * that wire protocol 8 brought; its version byte stays 8 while HELLO's
 * protocol version moves on, ded_msg.h):
 *
 *   initiator -> "dedmpi" 0x00 0x08 (the magic: the session format's version)
 *                initiation (DED_NOISE_INITIATION_BYTES)
 *   responder -> response   (DED_NOISE_RESPONSE_BYTES)
 *   initiator -> final      (DED_NOISE_FINAL_BYTES)
 *   then, each way, records:
 *                u32 hdr    little endian: bits 0-30 the sealed length
 *                           (plaintext + DED_AEAD_TAG_BYTES), bit 31 set on
 *                           the first record under the sender's next key
 *                sealed     the plaintext under the direction's key, the
 *                           4 header bytes as associated data
 *
 * A responder that will not answer says why before it closes, in a notice
 * outside the session format's versions (unauthenticated, so the initiator
 * reports it as the peer's word):
 *
 *   responder -> "dedmpi" 0x00 0xff, then a reason byte (DED_CHAN_NOTICE_*)
 *
 * It takes the response's place; an initiator that reads its 9 bytes where
 * the response begins stops there (a response's first bytes are a random
 * public key: they start like a notice with probability 2^-64). A refusal
 * for the key tells the initiator only what a missing response would: a
 * peer that knows the key gets a response, one that does not gets none.
 *
 * The plaintext is the node's frame stream (ded_frame.h), cut into records
 * without regard to frame boundaries. Nothing the node sends leaves before
 * the channel is open, and nothing reaches the node that did not open
 * under the session's key at the next counter: a byte changed, a record
 * replayed, dropped or moved fails, and the connection must go.
 *
 * Sans-I/O: the caller moves bytes between the socket and ded_chan_recv,
 * ded_chan_out and ded_chan_seal.
 */
#ifndef DED_CHAN_H
#define DED_CHAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/ded_assert.h"
#include "../core/ded_mem.h"
#include "../core/ded_types.h"
#include "ded_aead.h"
#include "ded_noise.h"

#define DED_CHAN_MAGIC "dedmpi\x00\x08"
#define DED_CHAN_MAGIC_BYTES 8
#define DED_CHAN_HDR_BYTES 4
#define DED_CHAN_F_REKEY 0x80000000u
/* Plaintext bytes per record, at most. */
#define DED_CHAN_RECORD_MAX (16 * 1024)
#define DED_CHAN_SEALED_MAX (DED_CHAN_RECORD_MAX + DED_AEAD_TAG_BYTES)

/* The notice: the prefix, then a reason. */
#define DED_CHAN_NOTICE_PREFIX "dedmpi\x00\xff"
#define DED_CHAN_NOTICE_BYTES 9
typedef enum ded_chan_notice {
  DED_CHAN_NOTICE_KEY = 'K',     /* the initiation's mac1 did not check: another key or run name */
  DED_CHAN_NOTICE_VERSION = 'V', /* another session format (the magic's version byte) */
  DED_CHAN_NOTICE_FULL = 'F',    /* no room for another handshake, or for one more from its host */
  DED_CHAN_NOTICE_LEAVING = 'L', /* the peer is leaving the run */
} ded_chan_notice;

typedef struct ded_chan_cb {
  /* The handshake is done: |peer_pk| is the peer's proven Ed25519 key.
   * Called once, before any plaintext. False: stop. */
  bool (*open)(void *user, const uint8_t peer_pk[DED_PK_BYTES]);
  /* Plaintext in order. False: stop. After a stop (the caller closed the
   * connection) the channel takes nothing more: DED_ERR_CLOSING. */
  bool (*plain)(void *user, const uint8_t *p, size_t len);
} ded_chan_cb;

typedef struct ded_chan {
  const ded_mem *mem;
  ded_noise hs;
  ded_aead tx, rx;
  bool open;
  int failed; /* sticky: a broken channel stays broken */
  const char *why;
  uint8_t notice; /* initiator: the reason in the peer's notice, 0 if none came */
  bool expect; /* initiator: the peer it means to reach */
  uint8_t expect_id[DED_ID_BYTES];
  uint8_t eph[32]; /* randomness of our ephemeral key */
  /* A partial message or record: |need| bytes in all, |have| so far
   * (need is 0 until a record's header is in). */
  uint8_t *in;
  size_t in_cap, have, need;
  /* Handshake messages and sealed records to write, from |out_pos|. */
  uint8_t *out;
  size_t out_cap, out_pos, out_len;
} ded_chan;

/*
 * Starts a channel as initiator (we called) or responder, for run |run_id|
 * with secret |psk| (NULL: none), as |self| (outliving the channel).
 * |eph| is 32 random bytes. An initiator with |expect_id| accepts only
 * that peer. 0 or DED_ERR_NOMEM. The initiator's first message is queued.
 */
DED_UNUSED_RESULT int ded_chan_init(ded_chan *ch, const ded_mem *mem, const ded_ident *self,
                                    const uint8_t *psk, const uint8_t run_id[DED_RUN_ID_BYTES],
                                    bool initiator, const uint8_t *expect_id,
                                    const uint8_t eph[32], uint64_t now_ns);

/* The notice for |reason| (a DED_CHAN_NOTICE_*), for a caller that turns
 * a connection away before it has a channel (a peer full or leaving). */
void ded_chan_notice_bytes(uint8_t reason, uint8_t out[DED_CHAN_NOTICE_BYTES]);

/* Wipes the keys and frees the buffers. */
void ded_chan_free(ded_chan *ch);

/*
 * Bytes from the socket. Runs the handshake and opens records, handing
 * plaintext to |cb|. 0, or a negative code (the connection must be closed;
 * ch->why says what failed): DED_ERR_VERSION (another session format),
 * DED_ERR_AUTH (another secret or run, an impostor, a peer other than
 * the one expected, a record that did not open), DED_ERR_FRAME_SIZE;
 * for an initiator, a notice in the response's place: DED_ERR_AUTH (our
 * key refused), DED_ERR_VERSION, DED_ERR_LIMIT (the peer is full) or
 * DED_ERR_PEER_LOST (it is leaving), ch->notice its reason; DED_ERR_CLOSING
 * on a call after a callback said stop (that call itself returns 0).
 * A responder that refuses an initiation for its key (mac1) or its
 * version leaves the notice in its output: the caller writes it (best
 * effort) before it closes.
 */
DED_UNUSED_RESULT int ded_chan_recv(ded_chan *ch, const uint8_t *data, size_t len,
                                    const ded_chan_cb *cb, void *user);

/* The bytes to write next (handshake messages, sealed records); 0 when
 * nothing waits. */
size_t ded_chan_out(const ded_chan *ch, const uint8_t **p);

/* |n| bytes of ded_chan_out were written. */
void ded_chan_out_done(ded_chan *ch, size_t n);

/* True when the channel is open and its output has room for a record. */
bool ded_chan_can_seal(const ded_chan *ch);

/*
 * Seals up to DED_CHAN_RECORD_MAX bytes gathered from |iov| (|n| pieces,
 * in order) as one record, rotating the key first when it is due.
 * Returns the plaintext bytes taken (0 if it cannot seal now).
 */
size_t ded_chan_seal(ded_chan *ch, const ded_iov *iov, int n, uint64_t now_ns);

#endif /* DED_CHAN_H */
