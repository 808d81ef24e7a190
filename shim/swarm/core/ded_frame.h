/*
 * ded_frame.h: the byte stream of a connection cut into frames.
 *
 * A frame on the wire is
 *
 *     u32 len   (little endian; bytes that follow: the type and the payload)
 *     u8  type  (enum ded_msg_type)
 *     payload   (len - 1 bytes)
 *
 * The decoder is incremental: it takes whatever the socket produced and
 * yields whole frames. When a frame lies entirely inside the bytes handed
 * in, it is returned in place (no copy); only a frame split across reads is
 * gathered into the decoder's own buffer, which never grows beyond
 * DED_FRAME_MAX + the header.
 */
#ifndef DED_FRAME_H
#define DED_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "ded_mem.h"

#define DED_FRAME_HDR_BYTES 5

typedef struct ded_frame {
  uint8_t type;
  const uint8_t *payload; /* valid until the next call on the decoder */
  size_t len;             /* payload bytes */
} ded_frame;

typedef struct ded_frame_dec {
  const ded_mem *mem;
  uint8_t *buf;  /* partial frame, header included */
  size_t have;   /* bytes in |buf| */
  size_t need;   /* total bytes of the partial frame, 0 while the header is incomplete */
  size_t cap;    /* allocated size of |buf| */
  int failed;    /* sticky error: a broken stream stays broken */
} ded_frame_dec;

void ded_frame_dec_init(ded_frame_dec *dec, const ded_mem *mem);
void ded_frame_dec_free(ded_frame_dec *dec);

/*
 * Takes bytes from |*data|/|*len| (advancing both) until one frame is
 * complete. Returns 1 with |*out| set, 0 when every byte was consumed and
 * no frame is complete yet, or a negative error: DED_ERR_FRAME_SIZE for a
 * length of 0 or above DED_FRAME_MAX, DED_ERR_NOMEM. After an error the
 * decoder refuses everything: the connection must be closed.
 */
int ded_frame_dec_next(ded_frame_dec *dec, const uint8_t **data, size_t *len, ded_frame *out);

/* Writes the header of a frame with |payload_len| payload bytes. */
void ded_frame_put_hdr(uint8_t hdr[DED_FRAME_HDR_BYTES], uint8_t type, size_t payload_len);

#endif /* DED_FRAME_H */
