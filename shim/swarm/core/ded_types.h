/*
 * ded_types.h: small value types shared by every engine module.
 */
#ifndef DED_TYPES_H
#define DED_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DED_ID_BYTES 32
#define DED_PK_BYTES 32
#define DED_SK_BYTES 64
#define DED_SIG_BYTES 64
#define DED_SEED_BYTES 32
#define DED_RUN_ID_BYTES 32

/* A network endpoint. IPv4 addresses use the first 4 bytes of |ip|. */
typedef struct ded_addr {
  uint8_t family; /* 4 or 6; 0 = unset */
  uint8_t ip[16];
  uint16_t port;
} ded_addr;

/* Element types the swarm reduces. The values are on the wire. */
typedef enum ded_dtype {
  DED_DTYPE_F32 = 1,
  DED_DTYPE_F64 = 2,
} ded_dtype;

/* What part a peer plays (DEDMPI_MODE). The values are on the wire. */
typedef enum ded_mode {
  DED_MODE_NODE = 0,   /* reduces a share and contributes */
  DED_MODE_CLIENT = 1, /* accepts no connections, reduces nothing */
  DED_MODE_AUX = 2,    /* reduces a share, contributes nothing */
} ded_mode;

/* "node", "client", "aux", or "?". */
static inline const char *ded_mode_str(uint8_t mode) {
  switch (mode) {
  case DED_MODE_NODE: return "node";
  case DED_MODE_CLIENT: return "client";
  case DED_MODE_AUX: return "aux";
  default: return "?";
  }
}

/* Bytes per element of |dtype|, 0 if unknown. */
static inline size_t ded_dtype_size(uint8_t dtype) {
  switch (dtype) {
  case DED_DTYPE_F32: return 4;
  case DED_DTYPE_F64: return 8;
  default: return 0;
  }
}

/* Formats |addr| as "a.b.c.d:port" or "[v6]:port" into |buf|. */
void ded_addr_format(const ded_addr *addr, char *buf, size_t len);

/*
 * Parses "host:port", "[v6]:port" or ":port" (any address). |host| must be
 * numeric; name resolution belongs to the driver. Returns 0 or
 * DED_ERR_INVALID_ARG.
 */
int ded_addr_parse(const char *text, ded_addr *out);

bool ded_addr_equal(const ded_addr *a, const ded_addr *b);

/* True for 0.0.0.0 and ::. */
bool ded_addr_is_any(const ded_addr *a);

/*
 * Binary search in |n| elements of |stride| bytes sorted by a peer id that
 * starts each element: the index of the first element whose id is >= |id|.
 */
size_t ded_id_lower_bound(const void *base, size_t n, size_t stride,
                          const uint8_t id[DED_ID_BYTES]);

/* Short printable peer id: the first 4 bytes in hex, "1a2b3c4d". */
void ded_id_short(const uint8_t id[DED_ID_BYTES], char out[9]);

/*
 * A 64-bit digest of |len| bytes, to check that a transfer arrived whole
 * and that two peers offer the same bytes. Not cryptographic: the session
 * (AEAD) authenticates the sender; this catches corruption and mix-ups.
 */
uint64_t ded_digest64(const void *p, size_t len);

/* A piece of output: |len| bytes at |base|. */
typedef struct ded_iov {
  const void *base;
  size_t len;
} ded_iov;

#endif /* DED_TYPES_H */
