/*
 * fuzz.h: what the fuzz targets, their replay driver and the corpus
 * generator share.
 *
 * Each target is a libFuzzer entry point. With DEDMPI_FUZZ it is linked
 * against libFuzzer; in every build it is also linked against replay.c,
 * which feeds it each file of its corpus, so the corpora are regression
 * tests even where there is no clang.
 *
 * The constants below fix the world a target runs in (run name, clock,
 * identities) so that inputs written by gen_corpus.c mean the same thing
 * to the target: a HELLO in the corpus is signed for this run and dated
 * at this clock, so the node under test accepts it.
 */
#ifndef DED_FUZZ_H
#define DED_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* The libFuzzer entry point every target defines. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The run every fuzzed node and record belongs to: run id = ded_hash32 of it. */
#define FUZZ_RUN "fuzz"
#define FUZZ_RUN_LEN 4

/* Monotonic time the node starts at; with a zero wall offset it is also
 * the wall clock, so records are issued at FUZZ_NOW_MS. */
#define FUZZ_NOW_NS (1000ull * 1000 * 1000 * 1000)
#define FUZZ_NOW_MS (FUZZ_NOW_NS / 1000000)

/* The node under test derives its identity from 32 copies of this byte. */
#define FUZZ_NODE_SEED_BYTE 0x42

/*
 * fuzz_node input: u8 flags | u8 schedule seed | bytes the peer sends.
 * The flags set the node up; the seed drives how the bytes are cut into
 * reads, how much output is consumed, and how time advances.
 */
enum {
  FUZZ_NODE_F_ROUND0 = 1 << 0,    /* submit round 0 before the peer arrives */
  FUZZ_NODE_F_F64 = 1 << 1,       /* rounds reduce f64 (else f32) */
  FUZZ_NODE_F_NO_ROUNDS = 1 << 2, /* the node is a backbone: takes no part in rounds */
  FUZZ_NODE_F_ALONE_OK = 1 << 3,  /* min_peers 1 (else 2) */
  FUZZ_NODE_F_ROUND1 = 1 << 4,    /* submit round 1 too */
  FUZZ_NODE_F_LEAVE = 1 << 5,     /* leave the swarm at the end */
  FUZZ_NODE_F_OUTBOUND = 1 << 6,  /* the node dials the stranger (its DEDMPI_JOIN) */
};

/* Where an outbound node dials: its one bootstrap address. */
#define FUZZ_NODE_BOOT_ADDR "10.0.0.1:7000"

/* Elements of a round the node submits, and its chunk size. */
#define FUZZ_NODE_COUNT 64
#define FUZZ_NODE_CHUNK_BYTES 64

/* fuzz_msg input: u8 selector | payload; the selector picks the decoder.
 * New types go at the end, so that the selectors of the committed seeds
 * keep their meaning. */
#define FUZZ_MSG_TYPES                                                                   \
  {                                                                                      \
    DED_MSG_HELLO, DED_MSG_RECORDS, DED_MSG_JOIN, DED_MSG_COMMIT, DED_MSG_REDIRECT,      \
        DED_MSG_DATA, DED_MSG_RESULT, DED_MSG_LEAVE, DED_MSG_STALE, DED_MSG_DECIDE,      \
        DED_MSG_FETCH, DED_MSG_PROBE, DED_MSG_HAVE, DED_MSG_STATE_ASK,                   \
        DED_MSG_STATE_OFFER, DED_MSG_STATE_GET, DED_MSG_STATE_DATA, DED_MSG_AHEAD,       \
        DED_MSG_SPEED, DED_MSG_ABSTAIN                                                   \
  }
#define FUZZ_MSG_NTYPES 20

/*
 * fuzz_noise input: u8 selector | bytes. The selector (mod 4) picks what
 * consumes the bytes: 0 the responder (the initiation), 1 the initiator
 * after its initiation (the response), 2 the responder after its
 * response to a genuine initiation (the final), 3 an established
 * session's receiving side (u32 header | sealed frame). The world is fixed:
 * identities from FUZZ_NOISE_{I,R}_SEED_BYTE, the psk 32 copies of
 * FUZZ_NOISE_PSK_BYTE, the run FUZZ_RUN, ephemerals 32 copies of
 * FUZZ_NOISE_EPH_{I,R}_BYTE, the session's cipher XChaCha20-Poly1305.
 */
#define FUZZ_NOISE_I_SEED_BYTE 0x61
#define FUZZ_NOISE_R_SEED_BYTE 0x62
#define FUZZ_NOISE_PSK_BYTE 0x63
#define FUZZ_NOISE_EPH_I_BYTE 0x64
#define FUZZ_NOISE_EPH_R_BYTE 0x65

/*
 * fuzz_chan input: u8 selector | u8 cut | bytes. The bytes go to one
 * channel in pieces of |cut| bytes (0: at once). The selector (mod 3)
 * picks it: 0 a fresh responder (magic, initiation, final), 1 an initiator
 * whose initiation went out (the response, then records), 2 the responder
 * of a channel already open (records). Identities, psk, run and
 * ephemerals as fuzz_noise's; the initiator expects the responder's id.
 */

/* fuzz_invite input: the text of an invitation. The owner's identity is
 * from 32 copies of FUZZ_INVITE_OWNER_SEED_BYTE, the run FUZZ_RUN. */
#define FUZZ_INVITE_OWNER_SEED_BYTE 0x71

/* A property of the code under test did not hold: a crash for libFuzzer. */
#define FUZZ_CHECK(cond)                                                                 \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);           \
      abort();                                                                           \
    }                                                                                    \
  } while (0)

/* xorshift32: a schedule from a seed byte, the same everywhere. */
static inline uint32_t fuzz_rng_next(uint32_t *s) {
  uint32_t x = *s;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  return *s = x;
}

static inline uint32_t fuzz_rng_seed(uint8_t seed) { return 0x9e3779b9u * ((uint32_t)seed + 1); }

#endif /* DED_FUZZ_H */
