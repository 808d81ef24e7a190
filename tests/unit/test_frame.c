/*
 * test_frame.c: core/ded_frame, the byte stream cut into frames.
 *
 * The decoder must return frames in place when they lie whole in the
 * caller's bytes (zero copy), must reassemble frames however the socket
 * split them, and must refuse a bad length for good.
 */
#include "unit_util.h"

#include "core/ded_frame.h"
#include "core/ded_limits.h"

/* A test stream: frames of the sizes below, payload bytes a function of
 * (frame, offset) so that a misplaced byte shows. The large one forces the
 * gather buffer past its first 4 KiB. */
static const size_t stream_payload_lens[] = {0, 1, 7, 300, 5000, 2};
#define STREAM_FRAMES (sizeof stream_payload_lens / sizeof stream_payload_lens[0])

static uint8_t stream_byte(size_t frame, size_t i) { return (uint8_t)(frame * 31 + i * 7 + 1); }

/* Writes the stream into |buf| (NULL: only measure). Returns its length. */
static size_t stream_build(uint8_t *buf) {
  size_t pos = 0;
  for (size_t f = 0; f < STREAM_FRAMES; f++) {
    if (buf) ded_frame_put_hdr(buf + pos, (uint8_t)(f + 1), stream_payload_lens[f]);
    pos += DED_FRAME_HDR_BYTES;
    for (size_t i = 0; i < stream_payload_lens[f]; i++, pos++)
      if (buf) buf[pos] = stream_byte(f, i);
  }
  return pos;
}

/* Checks that |fr| is frame number |f| of the stream. */
static void stream_check_frame(const ded_frame *fr, size_t f) {
  assert_true(f < STREAM_FRAMES);
  assert_int_equal(fr->type, f + 1);
  assert_int_equal(fr->len, stream_payload_lens[f]);
  for (size_t i = 0; i < fr->len; i++) assert_int_equal(fr->payload[i], stream_byte(f, i));
}

/* Feeds |len| bytes to |dec|, checking each frame that comes out against
 * the stream; returns the index of the next expected frame. */
static size_t stream_feed(ded_frame_dec *dec, const uint8_t *p, size_t len, size_t next) {
  ded_frame fr;
  int rv;
  while ((rv = ded_frame_dec_next(dec, &p, &len, &fr)) == 1) stream_check_frame(&fr, next++);
  assert_int_equal(rv, 0);
  assert_int_equal(len, 0); /* 0 means every byte was taken */
  return next;
}

static void test_frame_whole_in_place(void **state) {
  (void)state;
  uint8_t buf[DED_FRAME_HDR_BYTES + 3] = {0};
  ded_frame_put_hdr(buf, 9, 3);
  buf[5] = 'a';
  buf[6] = 'b';
  buf[7] = 'c';
  ded_frame_dec dec;
  ded_frame_dec_init(&dec, NULL);
  const uint8_t *p = buf;
  size_t len = sizeof buf;
  ded_frame fr;
  assert_int_equal(ded_frame_dec_next(&dec, &p, &len, &fr), 1);
  assert_int_equal(fr.type, 9);
  assert_int_equal(fr.len, 3);
  /* Zero copy: the payload is the caller's own bytes. */
  assert_ptr_equal(fr.payload, buf + DED_FRAME_HDR_BYTES);
  assert_ptr_equal(p, buf + sizeof buf);
  assert_int_equal(len, 0);
  /* Nothing was gathered, so nothing was allocated. */
  assert_null(dec.buf);
  assert_int_equal(ded_frame_dec_next(&dec, &p, &len, &fr), 0);
  ded_frame_dec_free(&dec);
}

static void test_frame_several_in_one_buffer(void **state) {
  (void)state;
  size_t total = stream_build(NULL);
  uint8_t *buf = malloc(total);
  assert_non_null(buf);
  stream_build(buf);
  ded_frame_dec dec;
  ded_frame_dec_init(&dec, NULL);
  const uint8_t *p = buf;
  size_t len = total, expect_off = 0;
  ded_frame fr;
  for (size_t f = 0; f < STREAM_FRAMES; f++) {
    assert_int_equal(ded_frame_dec_next(&dec, &p, &len, &fr), 1);
    stream_check_frame(&fr, f);
    assert_ptr_equal(fr.payload, buf + expect_off + DED_FRAME_HDR_BYTES);
    expect_off += DED_FRAME_HDR_BYTES + stream_payload_lens[f];
    assert_ptr_equal(p, buf + expect_off);
  }
  assert_int_equal(len, 0);
  assert_int_equal(ded_frame_dec_next(&dec, &p, &len, &fr), 0);
  assert_null(dec.buf);
  ded_frame_dec_free(&dec);
  free(buf);
}

/* Every split of the stream into two reads, and the stream byte by byte. */
static void test_frame_split_everywhere(void **state) {
  (void)state;
  size_t total = stream_build(NULL);
  uint8_t *buf = malloc(total);
  assert_non_null(buf);
  stream_build(buf);
  for (size_t cut = 0; cut <= total; cut++) {
    ded_frame_dec dec;
    ded_frame_dec_init(&dec, NULL);
    size_t next = stream_feed(&dec, buf, cut, 0);
    next = stream_feed(&dec, buf + cut, total - cut, next);
    assert_int_equal(next, STREAM_FRAMES);
    assert_int_equal(dec.have, 0);
    ded_frame_dec_free(&dec);
  }
  ded_frame_dec dec;
  ded_frame_dec_init(&dec, NULL);
  size_t next = 0;
  for (size_t i = 0; i < total; i++) next = stream_feed(&dec, buf + i, 1, next);
  assert_int_equal(next, STREAM_FRAMES);
  ded_frame_dec_free(&dec);
  free(buf);
}

/* Every split into three reads of a short stream: a split inside the
 * header followed by one inside the payload takes paths a single cut
 * does not. */
static void test_frame_split_twice(void **state) {
  (void)state;
  uint8_t buf[3 * DED_FRAME_HDR_BYTES + 4 + 0 + 9];
  size_t lens[3] = {4, 0, 9}, pos = 0;
  for (size_t f = 0; f < 3; f++) {
    ded_frame_put_hdr(buf + pos, (uint8_t)(0x40 + f), lens[f]);
    pos += DED_FRAME_HDR_BYTES;
    for (size_t i = 0; i < lens[f]; i++) buf[pos++] = (uint8_t)(f << 4 | i);
  }
  assert_int_equal(pos, sizeof buf);
  for (size_t a = 0; a <= sizeof buf; a++) {
    for (size_t b = a; b <= sizeof buf; b++) {
      ded_frame_dec dec;
      ded_frame_dec_init(&dec, NULL);
      size_t cuts[4] = {0, a, b, sizeof buf}, got = 0;
      for (int piece = 0; piece < 3; piece++) {
        const uint8_t *p = buf + cuts[piece];
        size_t len = cuts[piece + 1] - cuts[piece];
        ded_frame fr;
        int rv;
        while ((rv = ded_frame_dec_next(&dec, &p, &len, &fr)) == 1) {
          assert_true(got < 3);
          assert_int_equal(fr.type, 0x40 + got);
          assert_int_equal(fr.len, lens[got]);
          for (size_t i = 0; i < fr.len; i++) assert_int_equal(fr.payload[i], got << 4 | i);
          got++;
        }
        assert_int_equal(rv, 0);
        assert_int_equal(len, 0);
      }
      assert_int_equal(got, 3);
      ded_frame_dec_free(&dec);
    }
  }
}

/* Feeds a header declaring |flen| to a fresh decoder, whole or split. */
static int frame_try_len(uint32_t flen, size_t first_piece) {
  uint8_t hdr[DED_FRAME_HDR_BYTES + 2] = {(uint8_t)flen, (uint8_t)(flen >> 8),
                                          (uint8_t)(flen >> 16), (uint8_t)(flen >> 24), 1, 0, 0};
  ded_frame_dec dec;
  ded_frame_dec_init(&dec, NULL);
  const uint8_t *p = hdr;
  size_t len = first_piece;
  ded_frame fr;
  int rv = ded_frame_dec_next(&dec, &p, &len, &fr);
  if (rv == 0) {
    len = sizeof hdr - first_piece;
    rv = ded_frame_dec_next(&dec, &p, &len, &fr);
  }
  ded_frame_dec_free(&dec);
  return rv;
}

static void test_frame_bad_length(void **state) {
  (void)state;
  /* Whole header at once (the in-place path) and split (the gather path). */
  for (size_t first = 1; first <= DED_FRAME_HDR_BYTES + 2; first++) {
    assert_int_equal(frame_try_len(0, first), DED_ERR_FRAME_SIZE);
    assert_int_equal(frame_try_len(DED_FRAME_MAX + 1, first), DED_ERR_FRAME_SIZE);
    assert_int_equal(frame_try_len(UINT32_MAX, first), DED_ERR_FRAME_SIZE);
    /* The largest legal length is not an error, only incomplete. */
    assert_int_equal(frame_try_len(DED_FRAME_MAX, first), 0);
  }
}

static void test_frame_max_size_accepted(void **state) {
  (void)state;
  size_t payload = DED_FRAME_MAX - 1, total = DED_FRAME_HDR_BYTES + payload;
  uint8_t *buf = calloc(1, total);
  assert_non_null(buf);
  ded_frame_put_hdr(buf, 7, payload);
  buf[total - 1] = 0x5a;
  ded_frame_dec dec;
  ded_frame_dec_init(&dec, NULL);
  /* Split, so the gather buffer has to hold the largest frame. */
  const uint8_t *p = buf;
  size_t len = 100;
  ded_frame fr;
  assert_int_equal(ded_frame_dec_next(&dec, &p, &len, &fr), 0);
  len = total - 100;
  assert_int_equal(ded_frame_dec_next(&dec, &p, &len, &fr), 1);
  assert_int_equal(fr.type, 7);
  assert_int_equal(fr.len, payload);
  assert_int_equal(fr.payload[payload - 1], 0x5a);
  assert_true(dec.cap >= total);
  ded_frame_dec_free(&dec);
  free(buf);
}

/* After a bad length, the decoder refuses even a perfect frame. */
static void test_frame_error_is_sticky(void **state) {
  (void)state;
  uint8_t bad[DED_FRAME_HDR_BYTES] = {0, 0, 0, 0, 1};
  uint8_t good[DED_FRAME_HDR_BYTES + 1];
  ded_frame_put_hdr(good, 2, 1);
  good[5] = 3;
  ded_frame_dec dec;
  ded_frame_dec_init(&dec, NULL);
  const uint8_t *p = bad;
  size_t len = sizeof bad;
  ded_frame fr;
  assert_int_equal(ded_frame_dec_next(&dec, &p, &len, &fr), DED_ERR_FRAME_SIZE);
  for (int i = 0; i < 3; i++) {
    p = good;
    len = sizeof good;
    assert_int_equal(ded_frame_dec_next(&dec, &p, &len, &fr), DED_ERR_FRAME_SIZE);
    /* Nothing is consumed from a broken stream. */
    assert_ptr_equal(p, good);
    assert_int_equal(len, sizeof good);
  }
  /* Even an empty read reports it. */
  len = 0;
  assert_int_equal(ded_frame_dec_next(&dec, &p, &len, &fr), DED_ERR_FRAME_SIZE);
  ded_frame_dec_free(&dec);
}

/* A bad frame after good ones: the good ones come out, then the error. */
static void test_frame_error_after_good_frames(void **state) {
  (void)state;
  uint8_t buf[2 * (DED_FRAME_HDR_BYTES + 2) + DED_FRAME_HDR_BYTES];
  ded_frame_put_hdr(buf, 1, 2);
  buf[5] = buf[6] = 0x11;
  ded_frame_put_hdr(buf + 7, 2, 2);
  buf[12] = buf[13] = 0x22;
  memset(buf + 14, 0xff, DED_FRAME_HDR_BYTES);
  ded_frame_dec dec;
  ded_frame_dec_init(&dec, NULL);
  const uint8_t *p = buf;
  size_t len = sizeof buf;
  ded_frame fr;
  assert_int_equal(ded_frame_dec_next(&dec, &p, &len, &fr), 1);
  assert_int_equal(fr.type, 1);
  assert_int_equal(ded_frame_dec_next(&dec, &p, &len, &fr), 1);
  assert_int_equal(fr.type, 2);
  assert_int_equal(ded_frame_dec_next(&dec, &p, &len, &fr), DED_ERR_FRAME_SIZE);
  assert_int_equal(ded_frame_dec_next(&dec, &p, &len, &fr), DED_ERR_FRAME_SIZE);
  ded_frame_dec_free(&dec);
}

static void test_frame_put_hdr_round_trip(void **state) {
  (void)state;
  const size_t lens[] = {0, 1, 255, 256, 65535, 65536, DED_FRAME_MAX - 1};
  for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
    uint8_t hdr[DED_FRAME_HDR_BYTES];
    ded_frame_put_hdr(hdr, (uint8_t)(200 + i), lens[i]);
    /* Little-endian length of type + payload, then the type. */
    uint32_t flen = (uint32_t)hdr[0] | (uint32_t)hdr[1] << 8 | (uint32_t)hdr[2] << 16 |
                    (uint32_t)hdr[3] << 24;
    assert_int_equal(flen, lens[i] + 1);
    assert_int_equal(hdr[4], 200 + i);
    /* And the decoder reads back what put_hdr wrote. */
    ded_frame_dec dec;
    ded_frame_dec_init(&dec, NULL);
    const uint8_t *p = hdr;
    size_t len = sizeof hdr;
    ded_frame fr;
    int rv = ded_frame_dec_next(&dec, &p, &len, &fr);
    if (lens[i] == 0) {
      assert_int_equal(rv, 1);
      assert_int_equal(fr.type, 200 + i);
      assert_int_equal(fr.len, 0);
    } else {
      assert_int_equal(rv, 0);
      assert_int_equal(dec.need, DED_FRAME_HDR_BYTES + lens[i]);
    }
    ded_frame_dec_free(&dec);
  }
}

/* An allocation failure while gathering is DED_ERR_NOMEM, and sticky. */
static void test_frame_nomem(void **state) {
  (void)state;
  uint8_t buf[DED_FRAME_HDR_BYTES + 4];
  ded_frame_put_hdr(buf, 1, 4);
  memset(buf + 5, 9, 4);
  for (size_t first = 1; first < sizeof buf; first++) {
    unit_failmem fm;
    unit_failmem_init(&fm, 0);
    ded_frame_dec dec;
    ded_frame_dec_init(&dec, &fm.mem);
    const uint8_t *p = buf;
    size_t len = first;
    ded_frame fr;
    assert_int_equal(ded_frame_dec_next(&dec, &p, &len, &fr), DED_ERR_NOMEM);
    assert_true(fm.failed);
    len = sizeof buf - first;
    assert_int_equal(ded_frame_dec_next(&dec, &p, &len, &fr), DED_ERR_NOMEM);
    ded_frame_dec_free(&dec);
    assert_int_equal(fm.live, 0);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_frame_whole_in_place),
      cmocka_unit_test(test_frame_several_in_one_buffer),
      cmocka_unit_test(test_frame_split_everywhere),
      cmocka_unit_test(test_frame_split_twice),
      cmocka_unit_test(test_frame_bad_length),
      cmocka_unit_test(test_frame_max_size_accepted),
      cmocka_unit_test(test_frame_error_is_sticky),
      cmocka_unit_test(test_frame_error_after_good_frames),
      cmocka_unit_test(test_frame_put_hdr_round_trip),
      cmocka_unit_test(test_frame_nomem),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
