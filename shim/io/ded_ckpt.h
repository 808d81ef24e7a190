/*
 * ded_ckpt.h: a backbone's checkpoint files (docs/architecture.md,
 * "Checkpoints"): the run's state as a pull brought it, kept in
 * DEDMPI_CHECKPOINT_DIR so that the run outlives its trainers and its
 * backbone's restarts.
 *
 * A file, ckpt-<round, 20 digits>.ded, is a header of DED_CKPT_HDR_BYTES
 * and the snapshot's bytes (the shim's state image, state/ded_image.h).
 * The header, all little-endian:
 *
 *     0  magic "DEDCKPT\0"      8
 *     8  u32 version (1)        12  u32 header bytes (160)
 *    16  run hash[32]           BLAKE2b-256 of the run's name
 *    48  u64 round              the round the state resumes at (> 0)
 *    56  u64 pos                where that round begins in the gradient stream
 *    64  u32 step_rounds        72  u64 len (the bytes after the header)
 *    68  u32 zero               80  u64 digest (ded_digest64 of the bytes)
 *    88  u64 wall_ms            when it was pulled
 *    96  payload hash[32]       BLAKE2b-256 of the bytes
 *   128  header hash[32]        BLAKE2b-256 of the 128 bytes before it
 *
 * Owns nothing but the files: a write goes to a temporary file in the
 * directory, is fsynced, renamed into place and the directory fsynced, so
 * a file of that name is always whole; the newest |keep| are kept. A load
 * takes the newest file that parses (a torn or corrupt one, or one of
 * another run, is skipped with a log line, falling back to the one
 * before). A file is untrusted input (a disk, another user's mistake):
 * ded_ckpt_parse checks every field and both hashes before anything is
 * taken from it, and is fuzzed (tests/fuzz/fuzz_ckpt.c).
 */
#ifndef DED_CKPT_H
#define DED_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "ded_node.h"

#define DED_CKPT_HDR_BYTES 160
#define DED_CKPT_VERSION 1
#define DED_CKPT_KEEP_MAX 1000

/* BLAKE2b-256 of the run's name: what a file's run hash must be. */
void ded_ckpt_run_hash(const char *run, uint8_t out[32]);

/* The header of |snap| (its bytes hashed), pulled at |wall_ms|. */
void ded_ckpt_header(uint8_t hdr[DED_CKPT_HDR_BYTES], const uint8_t run_hash[32],
                     const ded_snapshot *snap, uint64_t wall_ms);

/* 0 and |*snap| (its bytes pointing into |file|; wall_ms in |*wall_ms| if
 * not NULL) if |file| (|len| bytes) is a whole checkpoint of the run of
 * |run_hash|: every header field in bounds, both hashes, the digest, and
 * a well-formed state image. -1 with |*why| (static text) otherwise. */
int ded_ckpt_parse(const uint8_t *file, size_t len, const uint8_t run_hash[32], ded_snapshot *snap,
                   uint64_t *wall_ms, const char **why);

/* Writes |snap| as ckpt-<round>.ded in |dir| (atomically: temporary file,
 * fsync, rename, fsync of the directory), then removes all but the newest
 * |keep| checkpoints. 0, or -1 with a message in |err|. */
int ded_ckpt_write(const char *dir, const uint8_t run_hash[32], const ded_snapshot *snap,
                   uint64_t wall_ms, unsigned keep, char *err, size_t errlen);

/* The newest checkpoint in |dir| that parses: 1 with |*snap| (snap->bytes
 * from malloc, the caller's) and its file name in |name|, 0 when there is
 * none, -1 with a message in |err| when |dir| cannot be read. Each file
 * skipped is told to |log| (a line, without newline). */
int ded_ckpt_load(const char *dir, const uint8_t run_hash[32], ded_snapshot *snap, char *name,
                  size_t namelen, void (*log)(void *user, const char *line), void *user, char *err,
                  size_t errlen);

#endif /* DED_CKPT_H */
