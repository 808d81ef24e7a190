/*
 * abi.h: what dedmpi's own libmpi.so.40 shares between its generated
 * parts (gen_abi.py) and its implementation (mpi1.c).
 *
 * Every handle points at bytes that start with an abi_hdr: a predefined
 * object (ompi_mpi_comm_world and the other ones Open MPI's mpi.h names,
 * each at Open MPI's exact size, copied into the executable by the
 * loader) or an object made at run time (Comm_dup, Type_contiguous,
 * Isend ...). This file must not include mpi.h: the objects are defined
 * under Open MPI's names with types of our own.
 */
#ifndef ABI_H
#define ABI_H

#include <stdint.h>

#define ABI_EXPORT __attribute__((visibility("default")))
#define ABI_MAGIC 0x4244u /* "DB" */

enum abi_kind {
  ABI_KIND_COMMUNICATOR = 1,
  ABI_KIND_DATATYPE,
  ABI_KIND_ERRHANDLER,
  ABI_KIND_FILE,
  ABI_KIND_GROUP,
  ABI_KIND_INFO,
  ABI_KIND_MESSAGE,
  ABI_KIND_OP,
  ABI_KIND_REQUEST,
  ABI_KIND_WIN,
};

typedef struct abi_hdr {
  uint16_t magic;
  uint16_t kind;  /* enum abi_kind */
  int32_t index;  /* a predefined object's index in its kind (abi_objects.h); -1: made at run time */
} abi_hdr;

/* A predefined object: the header, then zeros up to Open MPI's size. No
 * pointers in it: the loader copies its initial bytes into executables. */
#define ABI_OBJECT(name, size, kind, idx)                              \
  ABI_EXPORT struct {                                                  \
    abi_hdr h;                                                         \
    unsigned char pad[(size) - sizeof(abi_hdr)];                       \
  } name = {{ABI_MAGIC, (kind), (idx)}, {0}}

/* Logs, once per function, that |fn| is not part of this library, and
 * answers MPI_ERR_UNSUPPORTED_OPERATION through the error handler that
 * applies, as in any MPI: that of |comm| (the call's communicator, an
 * MPI_Comm passed as a pointer; NULL: MPI_COMM_WORLD's, fatal by default),
 * or, for an MPI_File_ call, the files' default handler, which is
 * MPI_ERRORS_RETURN (no file can be opened here, so none has another). */
int abi_unsupported(const char *fn, const void *comm);

#endif /* ABI_H */
