/*
 * ded_attempt.h: one attempt's data plane, as one member runs it.
 *
 * Owns: the layout a COMMIT fixes (members in summation order, shards,
 * chunks, which member we are), our own shard's reduction (per chunk, the
 * next member to add in commit order; contributions that came out of
 * order, staged), which chunks of every shard's result we hold, who serves
 * each shard when we fetch (a DECIDE's holders) and which we asked for,
 * and the peers that fetched our shard while we still reduce it.
 *
 * It knows no peer, connection or clock: data and results come in
 * (ded_attempt_take), and "send these bytes to member m" goes out through
 * the env's |send|, in the order the frames must go. The round that holds
 * the attempt decides what to do when a member is unreachable.
 *
 * Reduce-scatter plus all-gather: member i reduces shard i (possibly
 * empty). Contributions are added strictly in commit order, in the
 * element type, without fused multiply-add (ded_reduce.h), so the same
 * inputs give the same bits on every machine; a chunk whose contributions
 * are all in is divided by the total weight and sent to every other
 * member, and to those that fetched it.
 *
 * Compression (avg/ded_codec.h): with a COMMIT's codec other than NONE,
 * our contribution is encoded once, when the attempt starts, chunk by
 * chunk as the layout cuts it, and decoded back at once: |q| is what
 * every reducer adds of ours, our own shard's reducer (us) included, and
 * what the job's error feedback compares its contribution with. A
 * reducer decodes each contribution, adds it as above, and encodes each
 * finished chunk of the mean once in the result codec; every member,
 * the reducer too, holds the decoded result, so every member's bytes are
 * the same. Results served again (a FETCH) travel as plain elements.
 *
 * Invariants: res_bits marks exactly the chunks of the result the round's
 * buffer holds (res_got of them), and |dig| counts exactly their bytes
 * in; a chunk of our shard is marked only once every contribution to it
 * was added; a (member, chunk) contribution is taken at most once, and a
 * second one is a protocol violation; the caller's buffer (env.input) is
 * only read.
 */
#ifndef DED_ATTEMPT_H
#define DED_ATTEMPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/ded_mem.h"
#include "../core/ded_msg.h"
#include "../round/ded_history.h"
#include "ded_codec.h"
#include "ded_digest.h"

/* A FETCH of our shard while we still reduce it: answered chunk by chunk. */
typedef struct ded_attempt_fetcher {
  struct ded_attempt_fetcher *next;
  uint8_t id[DED_ID_BYTES];
} ded_attempt_fetcher;

typedef struct ded_attempt {
  ded_msg_commit plan;
  unsigned me;            /* our index in plan, or plan.k when we only fetch */
  double total_w;         /* the members' weights, summed */
  unsigned ncontrib;      /* members without DED_MEMBER_F_AUX */
  unsigned first_contrib; /* the first of them, in commit order */
  uint64_t chunk;         /* elements per chunk */
  /* Reducer of our own shard: the accumulator is the result at my_off. */
  uint64_t my_off, my_len, my_nchunks;
  uint16_t *next_m;   /* per chunk: next member to add, in commit order */
  uint8_t *recv_bits; /* (member, chunk) contributions received */
  uint8_t **staging;  /* per member: out-of-order contributions */
  uint64_t reduced;   /* chunks of our shard finished */
  uint64_t reduced_ns; /* when the last of them was */
  ded_attempt_fetcher *fetchers;
  /* Every shard of the result: res_bits marks the chunks held. */
  uint64_t *res_base; /* per shard: index of its first chunk in res_bits */
  uint8_t *res_bits;
  uint64_t res_got;
  ded_digest dig; /* the held chunks' blocks, hashed as they complete */
  uint16_t *holders;   /* fetching: who serves each shard (a DECIDE's, or
                          the member asked again for the round's bytes) */
  uint8_t *fetch_sent; /* ... and which shards we asked for */
  bool refetch;        /* fetching again: results only from the holders */
  /* Compression: the contributions' codec and the result's (NONE: the
   * element type's own bytes). */
  ded_codec codec, rcodec;
  float *q;          /* our contribution as decoded, plan.count (NULL: none) */
  uint8_t *enc;      /* our encoded chunks, every shard but ours (round memory) */
  uint64_t *enc_off; /* per chunk (res_base order): where its slot begins in enc */
  uint32_t *enc_len; /* per chunk: its encoded bytes */
  uint8_t *enc_raw;  /* per chunk: the codec refused it; it goes as plain floats */
  /* Encoding is done in slices (ded_attempt_encode), in passes: chunk
   * |enc_pass| of each shard in member order, |enc_m| the next member;
   * |enc_passes| is the most chunks of any shard. */
  bool enc_pending;
  unsigned enc_m;
  uint64_t enc_pass, enc_passes;
  float *scratch;    /* one chunk of floats, decoded */
  uint8_t *escratch; /* one chunk's encoding at most */
} ded_attempt;

/* What an attempt needs from the round that runs it. */
typedef struct ded_attempt_env {
  const ded_mem *mem;
  ded_bufcache *cache;
  uint8_t dtype;
  size_t es;
  /* Our contribution: the caller's buffer, or, when the attempt's codec
   * is not NONE, the round's float32 copy of it plus the error feedback
   * (avg/ded_feedback.h). */
  const uint8_t *input;
  bool input_user; /* |input| is the caller's buffer */
  uint8_t *res;         /* the result, every shard: the round's buffer */
  uint64_t now_ns;
  /* Queue |len| bytes at |elems| (element offset |off|, encoded with
   * |codec|) as a |type| frame (DED_MSG_DATA or DED_MSG_RESULT) to peer
   * |id|, the bytes staying where they are (|user|: in the caller's
   * buffer); nonzero: an error to pass on. */
  int (*send)(void *ctx, const uint8_t id[DED_ID_BYTES], uint8_t type, uint64_t off, uint8_t codec,
              const uint8_t *elems, size_t len, bool user);
  /* |len| bytes that live as long as the round's memory (frames queued
   * from them outlive the attempt), or NULL. */
  uint8_t *(*wire)(void *ctx, size_t len);
  /* Makes |input|'s elements [first, first + n) ready (with a codec:
   * compensated), before they are first encoded; NULL: ready already. */
  void (*prepare)(void *ctx, uint64_t first, uint64_t n);
  void *ctx;
} ded_attempt_env;

/* Frees everything the attempt holds and zeroes it. */
void ded_attempt_clear(ded_attempt *a, const ded_mem *mem, ded_bufcache *cache, size_t es);

/* Takes |plan| (copied), with |self| as our id: members, shards, chunks,
 * which of them we are. 0 or DED_ERR_NOMEM (then the attempt holds what
 * it got: clear it). */
int ded_attempt_layout(ded_attempt *a, const ded_mem *mem, const ded_msg_commit *plan,
                       const uint8_t self[DED_ID_BYTES]);

/* Shard |s|'s [offset, end) in elements. */
uint64_t ded_attempt_shard_lo(const ded_attempt *a, unsigned s);
uint64_t ded_attempt_shard_len(const ded_attempt *a, unsigned s);

/* True if we hold every chunk of shard |s|'s result. */
bool ded_attempt_shard_done(const ded_attempt *a, unsigned s);

/* True once we hold every chunk of the result. */
bool ded_attempt_whole(const ded_attempt *a);

/* The digest of the result we hold (ded_digest.h); only once whole. */
void ded_attempt_digest(const ded_attempt *a, uint8_t out[DED_DIGEST_BYTES]);

/* The shards we hold in full, as a bitmap (NULL: out of memory). */
uint8_t *ded_attempt_have_bits(const ded_attempt *a, const ded_mem *mem);

/* Our shard's reduction begins (we are a member, me < plan.k); with a
 * codec, our contribution is to be encoded (unless we are aux): the
 * caller calls ded_attempt_encode while ded_attempt_encoding says so.
 * 0 or DED_ERR_NOMEM. */
int ded_attempt_start(ded_attempt *a, const ded_attempt_env *env);

/* True while chunks of our contribution remain to be encoded. */
bool ded_attempt_encoding(const ded_attempt *a);

/* Encodes the next chunks of our contribution (env->input), about
 * |budget| elements of them, each in turn of the shards (a pass gives
 * every reducer its next chunk), and sends each as soon as it is encoded;
 * a chunk of our own shard joins its reduction. Between calls the frames
 * go out: a 32 MiB contribution does not wait for its whole encoding, nor
 * does a COMMIT queued before it. 0, an error of env->send, or
 * DED_ERR_NOMEM. */
int ded_attempt_encode(ded_attempt *a, const ded_attempt_env *env, uint64_t budget);

/* What the reducers of this attempt decoded of our contribution |x| (a
 * member's, with a codec), in |a->q|, when the attempt did not run here
 * (we took it over from a DECIDE after sending its data in an earlier
 * hold of it), or its encoding here did not finish (the rest of |q|,
 * sending nothing): the encoding is a pure function of |x| and the
 * layout, so it is what they decoded then. |q| comes from |cache| (and goes back to
 * it when the attempt is cleared). 0 (nothing to do, or done) or
 * DED_ERR_NOMEM. */
int ded_attempt_decoded_contrib(ded_attempt *a, const ded_mem *mem, ded_bufcache *cache,
                                const float *x);

/* Our contribution to member |m|'s shard, chunk by chunk (DED_MSG_DATA):
 * with a codec, the chunks encoded so far (ded_attempt_encode sends the
 * others). */
int ded_attempt_send_contrib(ded_attempt *a, const ded_attempt_env *env, unsigned m);

/* Adds our own contribution to every chunk of our shard it is ready for
 * (all of them without a codec). */
int ded_attempt_reduce_own(ded_attempt *a, const ded_attempt_env *env);

/*
 * A DATA or RESULT frame |d| from peer |from| for this attempt, |running|
 * (reduce-scatter) or |fetching| (a DECIDE's holders serve). 0 (taken, or
 * while fetching again a member's RESULT other than the holder's,
 * ignored), or DED_ERR_PROTO (the sender broke the protocol: drop it), or
 * an error of env->send or DED_ERR_NOMEM (the round fails).
 */
int ded_attempt_take(ded_attempt *a, const ded_attempt_env *env, const uint8_t from[DED_ID_BYTES],
                     uint8_t type, const ded_msg_data *d, bool running, bool fetching);

/* True if the attempt still waits for anything from member |m|: a
 * contribution to our shard, or a chunk of its shard's result (|fetching|:
 * of a shard |m| was named to serve). */
bool ded_attempt_needs(const ded_attempt *a, unsigned m, bool fetching);

/* Serves shard |s| to peer |to|: the chunks we hold now, and, if it is our
 * own shard and still being reduced and |pending| allows, the others as
 * they are finished. */
void ded_attempt_serve(ded_attempt *a, const ded_attempt_env *env, unsigned s,
                       const uint8_t to[DED_ID_BYTES], bool pending);

/* Our result's bytes are not the round's: forget every shard but our own
 * (the holders, set by the caller, serve them again), and take results
 * from the holders only from now on. With |own|, forget our own shard too:
 * the other shards came from a holder of the round's bytes and ours still
 * differ, so ours is the shard that differs (we reduced it while a fault
 * altered what we sent, or while we lied): the holder serves it. */
void ded_attempt_refetch(ded_attempt *a, const ded_mem *mem, bool own);

/* Forgets the peers waiting for our shard (a frozen attempt sends nothing). */
void ded_attempt_drop_fetchers(ded_attempt *a, const ded_mem *mem);

#endif /* DED_ATTEMPT_H */
