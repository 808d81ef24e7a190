/*
 * mpi1.c: dedmpi's own MPI for a job of one rank, with Open MPI 4.1's ABI
 * (libmpi.so.40), so that a trainer built with mpicc, or Debian's mpi4py,
 * runs on a machine without Open MPI. Each process is a job of one rank
 * whose large all-reduces go to the swarm: the shim (ded_shim.c, linked
 * into the same library) defines MPI_Allreduce and the calls around it
 * and uses the PMPI_ functions here as its "real MPI".
 *
 * What a data-parallel trainer calls is implemented for a world of one:
 * initialisation and queries, communicators (dup, split, groups,
 * attributes, names, error handlers), datatypes (predefined, contiguous),
 * collectives (a copy, or nothing), point-to-point to oneself (a queue),
 * requests (including generalized ones, which the shim's nonblocking
 * all-reduce is), the MPI-1 calls removed in MPI-3.0 that have an exact
 * successor here, and the attribute callbacks Open MPI exports. Every
 * other MPI function answers MPI_ERR_UNSUPPORTED_OPERATION with a log
 * line naming it, through the handler of the communicator it was given
 * (abi_stubs.c, generated). An error's log line names the MPI function
 * the application called (FN, below).
 *
 * Not thread-safe beyond MPI_THREAD_SERIALIZED, which is what
 * MPI_Init_thread grants at most.
 */
#define _GNU_SOURCE
#define OMPI_OMIT_MPI1_COMPAT_DECLS 0 /* MPI_Type_extent and its kin, removed in MPI-3.0 */
#include <mpi.h>

#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "abi.h"
#include "abi_objects.h"

#ifndef DEDMPI_VERSION
#define DEDMPI_VERSION "0"
#endif

#define HDR(h) ((abi_hdr *)(void *)(h))

static bool initialized, finalized;
static int thread_level = MPI_THREAD_SINGLE;

static void mlog(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void mlog(const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  fprintf(stderr, "dedmpi[%d] standalone MPI: %s\n", (int)getpid(), line);
}

static bool is(const void *h, int kind) {
  return h && HDR(h)->magic == ABI_MAGIC && HDR(h)->kind == kind;
}

/* A handle's object made at run time: zeroed, its header first. */
static void *obj_new(size_t size, int kind) {
  abi_hdr *h = calloc(1, size);
  if (h) *h = (abi_hdr){ABI_MAGIC, (uint16_t)kind, -1};
  return h;
}

/* ---------------------------------------------------------------- error handlers */

typedef struct abi_eh {
  abi_hdr h;
  MPI_Comm_errhandler_function *fn;
  int refs;
} abi_eh;

/* Per-communicator state; predefined communicators keep theirs here. */
typedef struct attr {
  int keyval;
  void *val;
  struct attr *next;
} attr;

typedef struct comm_state {
  MPI_Errhandler eh;
  attr *attrs;
  char name[MPI_MAX_OBJECT_NAME];
} comm_state;

typedef struct abi_comm {
  abi_hdr h;
  comm_state st;
} abi_comm;

static comm_state pre_comm[ABI_COMMUNICATOR_COUNT];

static comm_state *comm_st(MPI_Comm c) {
  if (!is(c, ABI_KIND_COMMUNICATOR)) return NULL;
  if (HDR(c)->index >= 0) return HDR(c)->index < ABI_COMMUNICATOR_COUNT ? &pre_comm[HDR(c)->index] : NULL;
  return &((abi_comm *)(void *)c)->st;
}

/* A usable communicator: world, self or one made from them. */
static bool comm_ok(MPI_Comm c) { return comm_st(c) && c != MPI_COMM_NULL; }

static const char *error_text(int code);

/* The error |code| on |comm| (MPI_COMM_WORLD when none applies): its
 * handler runs; fatal ones end the process, as Open MPI's do, with a line
 * naming |fn|, the MPI function the application called. */
static int raise_on(MPI_Comm comm, int code, const char *fn) {
  if (code == MPI_SUCCESS) return code;
  comm_state *st = comm_ok(comm) ? comm_st(comm) : comm_st(MPI_COMM_WORLD);
  MPI_Errhandler eh = st && st->eh ? st->eh : MPI_ERRORS_ARE_FATAL;
  if (eh == MPI_ERRORS_RETURN) return code;
  if (is(eh, ABI_KIND_ERRHANDLER) && HDR(eh)->index < 0) {
    MPI_Comm c = comm_ok(comm) ? comm : MPI_COMM_WORLD;
    ((abi_eh *)(void *)eh)->fn(&c, &code);
    return code;
  }
  mlog("%s: %s (error %d); the error handler is MPI_ERRORS_ARE_FATAL: aborting", fn,
       error_text(code), code);
  fflush(NULL);
  _exit(code & 0xff ? code & 0xff : 1);
}

/*
 * Error messages name the MPI function the application called. Inside a
 * PMPI_ function that is its own name, FN; a helper that may raise takes
 * the name from the PMPI_ function that calls it (its |fn| argument), and
 * no function here calls a PMPI_ one (gen_abi.py refuses FN or RAISE
 * outside a PMPI_ function, and any call of one).
 */
#define FN (__func__ + 1) /* "PMPI_Send" -> "MPI_Send" */
#define RAISE(comm, code) raise_on((comm), (code), FN)

int abi_unsupported(const char *fn, const void *comm) {
  static char seen[64][40];
  static unsigned nseen;
  bool logged = false;
  for (unsigned i = 0; i < nseen && !logged; i++) logged = !strcmp(seen[i], fn);
  if (!logged) {
    mlog("%s is not supported by dedmpi's own MPI library (one rank per process); run the "
         "trainer with Open MPI instead (dedrun without --standalone)", fn);
    if (nseen < 64) snprintf(seen[nseen++], sizeof seen[0], "%s", fn);
  }
  if (!strncmp(fn, "MPI_File_", 9)) return MPI_ERR_UNSUPPORTED_OPERATION;
  return raise_on(comm ? (MPI_Comm)(uintptr_t)comm : MPI_COMM_WORLD, MPI_ERR_UNSUPPORTED_OPERATION, fn);
}

/* User error handlers are counted: each communicator using one and each
 * handle the application holds (MPI_Comm_get_errhandler gives a new one). */
static void eh_ref(MPI_Errhandler eh) {
  if (is(eh, ABI_KIND_ERRHANDLER) && HDR(eh)->index < 0) ((abi_eh *)(void *)eh)->refs++;
}

static void eh_unref(MPI_Errhandler eh) {
  if (is(eh, ABI_KIND_ERRHANDLER) && HDR(eh)->index < 0 && --((abi_eh *)(void *)eh)->refs == 0) {
    HDR(eh)->magic = 0;
    free(eh);
  }
}

static int comm_set_errhandler(MPI_Comm comm, MPI_Errhandler eh, const char *fn) {
  comm_state *st = comm_st(comm);
  if (!st || comm == MPI_COMM_NULL) return raise_on(MPI_COMM_WORLD, MPI_ERR_COMM, fn);
  if (!is(eh, ABI_KIND_ERRHANDLER) || eh == MPI_ERRHANDLER_NULL)
    return raise_on(comm, MPI_ERR_ARG, fn);
  eh_ref(eh);
  eh_unref(st->eh);
  st->eh = eh;
  return MPI_SUCCESS;
}

static int comm_get_errhandler(MPI_Comm comm, MPI_Errhandler *eh, const char *fn) {
  comm_state *st = comm_st(comm);
  if (!st || comm == MPI_COMM_NULL) return raise_on(MPI_COMM_WORLD, MPI_ERR_COMM, fn);
  *eh = st->eh ? st->eh : MPI_ERRORS_ARE_FATAL;
  eh_ref(*eh);
  return MPI_SUCCESS;
}

static int comm_create_errhandler(MPI_Comm_errhandler_function *handler, MPI_Errhandler *eh,
                                  const char *fn) {
  abi_eh *e = obj_new(sizeof *e, ABI_KIND_ERRHANDLER);
  if (!handler || !e) {
    free(e);
    return raise_on(MPI_COMM_WORLD, handler ? MPI_ERR_NO_MEM : MPI_ERR_ARG, fn);
  }
  e->fn = handler;
  e->refs = 1;
  *eh = (MPI_Errhandler)(void *)e;
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler eh) {
  return comm_set_errhandler(comm, eh, FN);
}

ABI_EXPORT int PMPI_Comm_get_errhandler(MPI_Comm comm, MPI_Errhandler *eh) {
  return comm_get_errhandler(comm, eh, FN);
}

ABI_EXPORT int PMPI_Comm_create_errhandler(MPI_Comm_errhandler_function *handler,
                                           MPI_Errhandler *eh) {
  return comm_create_errhandler(handler, eh, FN);
}

/* MPI-1's names for them, removed in MPI-3.0 but still exported by
 * libmpi.so.40. */
ABI_EXPORT int PMPI_Errhandler_set(MPI_Comm comm, MPI_Errhandler eh) {
  return comm_set_errhandler(comm, eh, FN);
}

ABI_EXPORT int PMPI_Errhandler_get(MPI_Comm comm, MPI_Errhandler *eh) {
  return comm_get_errhandler(comm, eh, FN);
}

ABI_EXPORT int PMPI_Errhandler_create(MPI_Handler_function *handler, MPI_Errhandler *eh) {
  return comm_create_errhandler(handler, eh, FN);
}

ABI_EXPORT int PMPI_Errhandler_free(MPI_Errhandler *eh) {
  if (!eh || !is(*eh, ABI_KIND_ERRHANDLER)) return RAISE(MPI_COMM_WORLD, MPI_ERR_ARG);
  eh_unref(*eh);
  *eh = MPI_ERRHANDLER_NULL;
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Comm_call_errhandler(MPI_Comm comm, int code) {
  RAISE(comm, code);
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Error_class(int code, int *cls) {
  if (code < 0 || code > MPI_ERR_LASTCODE) return RAISE(MPI_COMM_WORLD, MPI_ERR_ARG);
  *cls = code;
  return MPI_SUCCESS;
}

/* The text of error |code|, as PMPI_Error_string gives it. */
static const char *error_text(int code) {
  static const struct {
    int code;
    const char *text;
  } texts[] = {
      {MPI_SUCCESS, "MPI_SUCCESS: no errors"},
      {MPI_ERR_BUFFER, "MPI_ERR_BUFFER: invalid buffer pointer"},
      {MPI_ERR_COUNT, "MPI_ERR_COUNT: invalid count argument"},
      {MPI_ERR_TYPE, "MPI_ERR_TYPE: invalid datatype"},
      {MPI_ERR_TAG, "MPI_ERR_TAG: invalid tag"},
      {MPI_ERR_COMM, "MPI_ERR_COMM: invalid communicator"},
      {MPI_ERR_RANK, "MPI_ERR_RANK: invalid rank"},
      {MPI_ERR_REQUEST, "MPI_ERR_REQUEST: invalid request"},
      {MPI_ERR_ROOT, "MPI_ERR_ROOT: invalid root"},
      {MPI_ERR_GROUP, "MPI_ERR_GROUP: invalid group"},
      {MPI_ERR_OP, "MPI_ERR_OP: invalid reduce operation"},
      {MPI_ERR_ARG, "MPI_ERR_ARG: invalid argument of some other kind"},
      {MPI_ERR_TRUNCATE, "MPI_ERR_TRUNCATE: message truncated"},
      {MPI_ERR_OTHER, "MPI_ERR_OTHER: known error not in list"},
      {MPI_ERR_INTERN, "MPI_ERR_INTERN: internal error"},
      {MPI_ERR_PENDING, "MPI_ERR_PENDING: pending request"},
      {MPI_ERR_IN_STATUS, "MPI_ERR_IN_STATUS: error code is in status"},
      {MPI_ERR_KEYVAL, "MPI_ERR_KEYVAL: invalid key value"},
      {MPI_ERR_NO_MEM, "MPI_ERR_NO_MEM: out of memory"},
      {MPI_ERR_UNSUPPORTED_OPERATION, "MPI_ERR_UNSUPPORTED_OPERATION: operation not supported"},
  };
  const char *t = "MPI_ERR_UNKNOWN: unknown error";
  for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
    if (texts[i].code == code) t = texts[i].text;
  return t;
}

ABI_EXPORT int PMPI_Error_string(int code, char *out, int *len) {
  if (!out || !len) return RAISE(MPI_COMM_WORLD, MPI_ERR_ARG);
  *len = snprintf(out, MPI_MAX_ERROR_STRING, "%s", error_text(code));
  return MPI_SUCCESS;
}

/* ---------------------------------------------------------------- init */

static int attr_delete(MPI_Comm comm, comm_state *st, int id);

static double t0_wtime;

static void comm_init_names(void) {
  snprintf(pre_comm[ABI_COMMUNICATOR_MPI_COMM_WORLD].name, MPI_MAX_OBJECT_NAME, "MPI_COMM_WORLD");
  snprintf(pre_comm[ABI_COMMUNICATOR_MPI_COMM_SELF].name, MPI_MAX_OBJECT_NAME, "MPI_COMM_SELF");
  snprintf(pre_comm[ABI_COMMUNICATOR_MPI_COMM_NULL].name, MPI_MAX_OBJECT_NAME, "MPI_COMM_NULL");
}

static int init_thread(int required, int *provided, const char *fn) {
  if (initialized || finalized) return raise_on(MPI_COMM_WORLD, MPI_ERR_OTHER, fn);
  initialized = true;
  thread_level = required < MPI_THREAD_SERIALIZED ? required : MPI_THREAD_SERIALIZED;
  if (provided) *provided = thread_level;
  comm_init_names();
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  t0_wtime = (double)ts.tv_sec;
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
  (void)argc, (void)argv;
  return init_thread(required, provided, FN);
}

ABI_EXPORT int PMPI_Init(int *argc, char ***argv) {
  (void)argc, (void)argv;
  int provided;
  return init_thread(MPI_THREAD_SINGLE, &provided, FN);
}

ABI_EXPORT int PMPI_Initialized(int *flag) {
  *flag = initialized;
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Finalized(int *flag) {
  *flag = finalized;
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Finalize(void) {
  if (!initialized || finalized) return RAISE(MPI_COMM_WORLD, MPI_ERR_OTHER);
  /* MPI_COMM_SELF's attributes are deleted first: libraries hook their
   * clean-up there. */
  comm_state *self = &pre_comm[ABI_COMMUNICATOR_MPI_COMM_SELF];
  while (self->attrs)
    if (attr_delete(MPI_COMM_SELF, self, self->attrs->keyval) != MPI_SUCCESS) {
      attr *a = self->attrs; /* a failing delete callback: dropped all the same */
      self->attrs = a->next;
      free(a);
    }
  finalized = true;
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Abort(MPI_Comm comm, int code) {
  (void)comm;
  mlog("MPI_Abort(%d): ending this process", code);
  fflush(NULL);
  _exit(code & 0xff ? code & 0xff : 1); /* never a status that reads as success */
}

ABI_EXPORT int PMPI_Query_thread(int *provided) {
  *provided = thread_level;
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Is_thread_main(int *flag) {
  *flag = 1;
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Get_version(int *version, int *subversion) {
  *version = MPI_VERSION;
  *subversion = MPI_SUBVERSION;
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Get_library_version(char *version, int *len) {
  *len = snprintf(version, MPI_MAX_LIBRARY_VERSION_STRING,
                  "dedmpi %s standalone MPI (Open MPI 4.1 ABI; one rank per process)",
                  DEDMPI_VERSION);
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Get_processor_name(char *name, int *len) {
  char host[MPI_MAX_PROCESSOR_NAME];
  if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "localhost");
  host[sizeof host - 1] = '\0';
  *len = snprintf(name, MPI_MAX_PROCESSOR_NAME, "%s", host);
  return MPI_SUCCESS;
}

ABI_EXPORT double PMPI_Wtime(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec - t0_wtime + (double)ts.tv_nsec / 1e9;
}

ABI_EXPORT double PMPI_Wtick(void) { return 1e-9; }

/* Addresses are plain virtual addresses, as in Open MPI on Linux. */
static int get_address(const void *location, MPI_Aint *address, const char *fn) {
  if (!address) return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG, fn);
  *address = (MPI_Aint)(uintptr_t)location;
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Get_address(const void *location, MPI_Aint *address) {
  return get_address(location, address, FN);
}

/* MPI-1's name for it. */
ABI_EXPORT int PMPI_Address(void *location, MPI_Aint *address) {
  return get_address(location, address, FN);
}

/* ---------------------------------------------------------------- datatypes */

typedef struct abi_type {
  abi_hdr h;
  MPI_Count size;
  MPI_Aint extent;
  bool committed;
  char name[MPI_MAX_OBJECT_NAME];
} abi_type;

/* Open MPI's predefined types: (size, extent) by name; pairs like
 * MPI_SHORT_INT are padded as C lays out the struct. */
static const struct {
  const char *name;
  int size, extent;
} type_table[] = {
    {"ompi_mpi_char", 1, 1}, {"ompi_mpi_signed_char", 1, 1}, {"ompi_mpi_unsigned_char", 1, 1},
    {"ompi_mpi_byte", 1, 1}, {"ompi_mpi_packed", 1, 1}, {"ompi_mpi_short", 2, 2},
    {"ompi_mpi_unsigned_short", 2, 2}, {"ompi_mpi_int", 4, 4}, {"ompi_mpi_unsigned", 4, 4},
    {"ompi_mpi_long", 8, 8}, {"ompi_mpi_unsigned_long", 8, 8}, {"ompi_mpi_long_long_int", 8, 8},
    {"ompi_mpi_unsigned_long_long", 8, 8}, {"ompi_mpi_float", 4, 4}, {"ompi_mpi_double", 8, 8},
    {"ompi_mpi_long_double", 16, 16}, {"ompi_mpi_wchar", 4, 4}, {"ompi_mpi_c_bool", 1, 1},
    {"ompi_mpi_int8_t", 1, 1}, {"ompi_mpi_int16_t", 2, 2}, {"ompi_mpi_int32_t", 4, 4},
    {"ompi_mpi_int64_t", 8, 8}, {"ompi_mpi_uint8_t", 1, 1}, {"ompi_mpi_uint16_t", 2, 2},
    {"ompi_mpi_uint32_t", 4, 4}, {"ompi_mpi_uint64_t", 8, 8}, {"ompi_mpi_aint", 8, 8},
    {"ompi_mpi_offset", 8, 8}, {"ompi_mpi_count", 8, 8}, {"ompi_mpi_c_complex", 8, 8},
    {"ompi_mpi_c_float_complex", 8, 8}, {"ompi_mpi_c_double_complex", 16, 16},
    {"ompi_mpi_c_long_double_complex", 32, 32}, {"ompi_mpi_cxx_bool", 1, 1},
    {"ompi_mpi_cxx_cplex", 8, 8}, {"ompi_mpi_cxx_dblcplex", 16, 16},
    {"ompi_mpi_cxx_ldblcplex", 32, 32}, {"ompi_mpi_float_int", 8, 8},
    {"ompi_mpi_double_int", 12, 16}, {"ompi_mpi_long_int", 12, 16}, {"ompi_mpi_2int", 8, 8},
    {"ompi_mpi_short_int", 6, 8}, {"ompi_mpi_longdbl_int", 20, 32},
    {"ompi_mpi_character", 1, 1}, {"ompi_mpi_logical", 4, 4}, {"ompi_mpi_integer", 4, 4},
    {"ompi_mpi_real", 4, 4}, {"ompi_mpi_dblprec", 8, 8}, {"ompi_mpi_cplex", 8, 8},
    {"ompi_mpi_dblcplex", 16, 16}, {"ompi_mpi_ldblcplex", 32, 32}, {"ompi_mpi_2integer", 8, 8},
    {"ompi_mpi_2real", 8, 8}, {"ompi_mpi_2dblprec", 16, 16}, {"ompi_mpi_2cplex", 16, 16},
    {"ompi_mpi_2dblcplex", 32, 32}, {"ompi_mpi_logical1", 1, 1}, {"ompi_mpi_logical2", 2, 2},
    {"ompi_mpi_logical4", 4, 4}, {"ompi_mpi_logical8", 8, 8}, {"ompi_mpi_integer1", 1, 1},
    {"ompi_mpi_integer2", 2, 2}, {"ompi_mpi_integer4", 4, 4}, {"ompi_mpi_integer8", 8, 8},
    {"ompi_mpi_integer16", 16, 16}, {"ompi_mpi_real2", 2, 2}, {"ompi_mpi_real4", 4, 4},
    {"ompi_mpi_real8", 8, 8}, {"ompi_mpi_real16", 16, 16}, {"ompi_mpi_complex4", 4, 4},
    {"ompi_mpi_complex8", 8, 8}, {"ompi_mpi_complex16", 16, 16}, {"ompi_mpi_complex32", 32, 32},
};

/* A datatype's size and extent; false for MPI_DATATYPE_NULL, MPI_LB,
 * MPI_UB, a freed or foreign handle. */
static bool type_info(MPI_Datatype t, MPI_Count *size, MPI_Aint *extent) {
  if (!is(t, ABI_KIND_DATATYPE)) return false;
  int idx = HDR(t)->index;
  if (idx < 0) {
    const abi_type *a = (const abi_type *)(void *)t;
    *size = a->size;
    *extent = a->extent;
    return true;
  }
  if (idx >= ABI_DATATYPE_COUNT) return false;
  const char *name = abi_datatype_names[idx];
  for (size_t i = 0; i < sizeof type_table / sizeof type_table[0]; i++)
    if (!strcmp(type_table[i].name, name)) {
      *size = type_table[i].size;
      *extent = type_table[i].extent;
      return true;
    }
  return false;
}

ABI_EXPORT int PMPI_Type_size(MPI_Datatype t, int *size) {
  MPI_Count s;
  MPI_Aint e;
  if (!type_info(t, &s, &e)) return RAISE(MPI_COMM_WORLD, MPI_ERR_TYPE);
  *size = s > INT_MAX ? MPI_UNDEFINED : (int)s;
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Type_size_x(MPI_Datatype t, MPI_Count *size) {
  MPI_Aint e;
  return type_info(t, size, &e) ? MPI_SUCCESS : RAISE(MPI_COMM_WORLD, MPI_ERR_TYPE);
}

static int type_get_extent(MPI_Datatype t, MPI_Aint *lb, MPI_Aint *extent, const char *fn) {
  MPI_Count s;
  if (!type_info(t, &s, extent)) return raise_on(MPI_COMM_WORLD, MPI_ERR_TYPE, fn);
  *lb = 0;
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Type_get_extent(MPI_Datatype t, MPI_Aint *lb, MPI_Aint *extent) {
  return type_get_extent(t, lb, extent, FN);
}

/* MPI-1's extent queries, still exported by libmpi.so.40 (every type
 * here starts at 0). */
ABI_EXPORT int PMPI_Type_extent(MPI_Datatype t, MPI_Aint *extent) {
  MPI_Aint lb;
  return type_get_extent(t, &lb, extent, FN);
}

ABI_EXPORT int PMPI_Type_lb(MPI_Datatype t, MPI_Aint *lb) {
  MPI_Aint extent;
  return type_get_extent(t, lb, &extent, FN);
}

ABI_EXPORT int PMPI_Type_ub(MPI_Datatype t, MPI_Aint *ub) {
  MPI_Aint lb = 0, extent = 0; /* set on success; zero for gcc -O3, which cannot see it */
  int rc = type_get_extent(t, &lb, &extent, FN);
  if (rc == MPI_SUCCESS) *ub = lb + extent;
  return rc;
}

ABI_EXPORT int PMPI_Type_get_true_extent(MPI_Datatype t, MPI_Aint *lb, MPI_Aint *extent) {
  MPI_Count s;
  MPI_Aint e;
  if (!type_info(t, &s, &e)) return RAISE(MPI_COMM_WORLD, MPI_ERR_TYPE);
  *lb = 0;
  *extent = (MPI_Aint)s; /* every type here is contiguous */
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Type_contiguous(int count, MPI_Datatype old, MPI_Datatype *out) {
  MPI_Count s;
  MPI_Aint e;
  if (count < 0) return RAISE(MPI_COMM_WORLD, MPI_ERR_COUNT);
  if (!type_info(old, &s, &e)) return RAISE(MPI_COMM_WORLD, MPI_ERR_TYPE);
  if (s != e) return abi_unsupported("MPI_Type_contiguous of a padded type", NULL);
  abi_type *a = obj_new(sizeof *a, ABI_KIND_DATATYPE);
  if (!a) return RAISE(MPI_COMM_WORLD, MPI_ERR_NO_MEM);
  a->size = s * count;
  a->extent = e * count;
  *out = (MPI_Datatype)(void *)a;
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Type_dup(MPI_Datatype old, MPI_Datatype *out) {
  MPI_Count s;
  MPI_Aint e;
  if (!type_info(old, &s, &e)) return RAISE(MPI_COMM_WORLD, MPI_ERR_TYPE);
  abi_type *a = obj_new(sizeof *a, ABI_KIND_DATATYPE);
  if (!a) return RAISE(MPI_COMM_WORLD, MPI_ERR_NO_MEM);
  a->size = s;
  a->extent = e;
  a->committed = true;
  *out = (MPI_Datatype)(void *)a;
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Type_commit(MPI_Datatype *t) {
  MPI_Count s;
  MPI_Aint e;
  if (!t || !type_info(*t, &s, &e)) return RAISE(MPI_COMM_WORLD, MPI_ERR_TYPE);
  if (HDR(*t)->index < 0) ((abi_type *)(void *)*t)->committed = true;
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Type_free(MPI_Datatype *t) {
  if (!t || !is(*t, ABI_KIND_DATATYPE) || HDR(*t)->index >= 0)
    return RAISE(MPI_COMM_WORLD, MPI_ERR_TYPE); /* predefined types are never freed */
  HDR(*t)->magic = 0;
  free(*t);
  *t = MPI_DATATYPE_NULL;
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Type_get_name(MPI_Datatype t, char *name, int *len) {
  if (!is(t, ABI_KIND_DATATYPE)) return RAISE(MPI_COMM_WORLD, MPI_ERR_TYPE);
  const char *n = HDR(t)->index >= 0 ? abi_datatype_names[HDR(t)->index] + 5 /* "ompi_" */
                                     : ((abi_type *)(void *)t)->name;
  char up[MPI_MAX_OBJECT_NAME] = "";
  if (HDR(t)->index >= 0) {
    size_t i = 0;
    for (; n[i] && i + 1 < sizeof up; i++) up[i] = (char)(n[i] >= 'a' && n[i] <= 'z' ? n[i] - 32 : n[i]);
    up[i] = '\0';
    n = up;
  }
  *len = snprintf(name, MPI_MAX_OBJECT_NAME, "%s", n);
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Type_set_name(MPI_Datatype t, const char *name) {
  if (!is(t, ABI_KIND_DATATYPE) || HDR(t)->index >= 0) return RAISE(MPI_COMM_WORLD, MPI_ERR_TYPE);
  snprintf(((abi_type *)(void *)t)->name, MPI_MAX_OBJECT_NAME, "%s", name);
  return MPI_SUCCESS;
}

/* Bytes of |count| elements of |t|, for copies; -1 if not a type. */
static long long span(int count, MPI_Datatype t) {
  MPI_Count s;
  MPI_Aint e;
  if (count < 0 || !type_info(t, &s, &e)) return -1;
  return count == 0 ? 0 : (long long)e * (count - 1) + s;
}

/* ---------------------------------------------------------------- ops */

typedef struct abi_op {
  abi_hdr h;
  MPI_User_function *fn;
  int commute;
} abi_op;

static bool op_ok(MPI_Op op) { return is(op, ABI_KIND_OP) && op != MPI_OP_NULL; }

ABI_EXPORT int PMPI_Op_create(MPI_User_function *fn, int commute, MPI_Op *op) {
  abi_op *o = obj_new(sizeof *o, ABI_KIND_OP);
  if (!fn || !o) {
    free(o);
    return RAISE(MPI_COMM_WORLD, fn ? MPI_ERR_NO_MEM : MPI_ERR_ARG);
  }
  o->fn = fn;
  o->commute = commute;
  *op = (MPI_Op)(void *)o;
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Op_free(MPI_Op *op) {
  if (!op || !is(*op, ABI_KIND_OP) || HDR(*op)->index >= 0) return RAISE(MPI_COMM_WORLD, MPI_ERR_OP);
  free(*op);
  *op = MPI_OP_NULL;
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Op_commutative(MPI_Op op, int *commute) {
  if (!op_ok(op)) return RAISE(MPI_COMM_WORLD, MPI_ERR_OP);
  *commute = HDR(op)->index >= 0 ? 1 : ((abi_op *)(void *)op)->commute;
  return MPI_SUCCESS;
}

/* ---------------------------------------------------------------- groups */

typedef struct abi_group {
  abi_hdr h;
  int size; /* 0 or 1 */
} abi_group;

static int group_size(MPI_Group g) {
  if (!is(g, ABI_KIND_GROUP) || g == MPI_GROUP_NULL) return -1;
  if (g == MPI_GROUP_EMPTY) return 0;
  return HDR(g)->index >= 0 ? 0 : ((abi_group *)(void *)g)->size;
}

static int group_new(int size, MPI_Group *out, const char *fn) {
  if (size == 0) {
    *out = MPI_GROUP_EMPTY;
    return MPI_SUCCESS;
  }
  abi_group *g = obj_new(sizeof *g, ABI_KIND_GROUP);
  if (!g) return raise_on(MPI_COMM_WORLD, MPI_ERR_NO_MEM, fn);
  g->size = size;
  *out = (MPI_Group)(void *)g;
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Comm_group(MPI_Comm comm, MPI_Group *g) {
  if (!comm_ok(comm)) return RAISE(MPI_COMM_WORLD, MPI_ERR_COMM);
  return group_new(1, g, FN);
}

ABI_EXPORT int PMPI_Group_size(MPI_Group g, int *size) {
  int n = group_size(g);
  if (n < 0) return RAISE(MPI_COMM_WORLD, MPI_ERR_GROUP);
  *size = n;
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Group_rank(MPI_Group g, int *rank) {
  int n = group_size(g);
  if (n < 0) return RAISE(MPI_COMM_WORLD, MPI_ERR_GROUP);
  *rank = n ? 0 : MPI_UNDEFINED;
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Group_incl(MPI_Group g, int n, const int ranks[], MPI_Group *out) {
  int size = group_size(g);
  if (size < 0) return RAISE(MPI_COMM_WORLD, MPI_ERR_GROUP);
  if (n < 0 || n > size) return RAISE(MPI_COMM_WORLD, MPI_ERR_ARG);
  for (int i = 0; i < n; i++)
    if (ranks[i] != 0) return RAISE(MPI_COMM_WORLD, MPI_ERR_RANK);
  return group_new(n, out, FN);
}

ABI_EXPORT int PMPI_Group_free(MPI_Group *g) {
  if (!g || group_size(*g) < 0) return RAISE(MPI_COMM_WORLD, MPI_ERR_GROUP);
  if (HDR(*g)->index < 0) free(*g);
  *g = MPI_GROUP_NULL;
  return MPI_SUCCESS;
}

/* ---------------------------------------------------------------- attributes */

typedef struct keyval {
  int id;
  MPI_Comm_copy_attr_function *copy;
  MPI_Comm_delete_attr_function *del;
  void *extra;
  struct keyval *next;
} keyval;

static keyval *keyvals;
static int next_keyval = 1000;

static keyval *keyval_find(int id) {
  for (keyval *k = keyvals; k; k = k->next)
    if (k->id == id) return k;
  return NULL;
}

ABI_EXPORT int PMPI_Comm_create_keyval(MPI_Comm_copy_attr_function *copy,
                                       MPI_Comm_delete_attr_function *del, int *id, void *extra) {
  keyval *k = calloc(1, sizeof *k);
  if (!k) return RAISE(MPI_COMM_WORLD, MPI_ERR_NO_MEM);
  *k = (keyval){next_keyval++, copy, del, extra, keyvals};
  keyvals = k;
  *id = k->id;
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Comm_free_keyval(int *id) {
  for (keyval **p = &keyvals; *p; p = &(*p)->next)
    if ((*p)->id == *id) {
      keyval *k = *p;
      *p = k->next;
      free(k);
      *id = MPI_KEYVAL_INVALID;
      return MPI_SUCCESS;
    }
  return RAISE(MPI_COMM_WORLD, MPI_ERR_KEYVAL);
}

static int attr_delete(MPI_Comm comm, comm_state *st, int id) {
  for (attr **p = &st->attrs; *p; p = &(*p)->next)
    if ((*p)->keyval == id) {
      attr *a = *p;
      keyval *k = keyval_find(id);
      int rc = k && k->del ? k->del(comm, id, a->val, k->extra) : MPI_SUCCESS;
      if (rc != MPI_SUCCESS) return rc;
      *p = a->next;
      free(a);
      return MPI_SUCCESS;
    }
  return MPI_ERR_KEYVAL;
}

ABI_EXPORT int PMPI_Comm_set_attr(MPI_Comm comm, int id, void *val) {
  comm_state *st = comm_ok(comm) ? comm_st(comm) : NULL;
  if (!st) return RAISE(MPI_COMM_WORLD, MPI_ERR_COMM);
  if (!keyval_find(id)) return RAISE(comm, MPI_ERR_KEYVAL);
  attr_delete(comm, st, id);
  attr *a = calloc(1, sizeof *a);
  if (!a) return RAISE(comm, MPI_ERR_NO_MEM);
  *a = (attr){id, val, st->attrs};
  st->attrs = a;
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Comm_get_attr(MPI_Comm comm, int id, void *val, int *flag) {
  static int tag_ub = INT_MAX, host = MPI_PROC_NULL, io = 0, wtime_global = 0, universe = 1,
             appnum = 0, lastcode = MPI_ERR_LASTCODE;
  comm_state *st = comm_ok(comm) ? comm_st(comm) : NULL;
  if (!st) return RAISE(MPI_COMM_WORLD, MPI_ERR_COMM);
  int *pre = NULL;
  switch (id) {
  case MPI_TAG_UB: pre = &tag_ub; break;
  case MPI_HOST: pre = &host; break;
  case MPI_IO: pre = &io; break;
  case MPI_WTIME_IS_GLOBAL: pre = &wtime_global; break;
  case MPI_UNIVERSE_SIZE: pre = &universe; break;
  case MPI_APPNUM: pre = &appnum; break;
  case MPI_LASTUSEDCODE: pre = &lastcode; break;
  default: break;
  }
  if (pre) {
    *(int **)val = pre;
    *flag = 1;
    return MPI_SUCCESS;
  }
  *flag = 0;
  for (attr *a = st->attrs; a; a = a->next)
    if (a->keyval == id) {
      *(void **)val = a->val;
      *flag = 1;
    }
  if (!*flag && !keyval_find(id) && id < MPI_TAG_UB + 64) return MPI_SUCCESS; /* other predefined */
  return *flag || keyval_find(id) ? MPI_SUCCESS : RAISE(comm, MPI_ERR_KEYVAL);
}

ABI_EXPORT int PMPI_Comm_delete_attr(MPI_Comm comm, int id) {
  comm_state *st = comm_ok(comm) ? comm_st(comm) : NULL;
  if (!st) return RAISE(MPI_COMM_WORLD, MPI_ERR_COMM);
  int rc = attr_delete(comm, st, id);
  return rc == MPI_SUCCESS ? rc : RAISE(comm, rc);
}

/* Open MPI's predefined attribute callbacks (MPI_COMM_NULL_COPY_FN and
 * the others are macros naming these). */
#define NULL_COPY(name, handle)                                                                 \
  ABI_EXPORT int name(handle h, int k, void *extra, void *in, void *out, int *flag) {           \
    (void)h, (void)k, (void)extra, (void)in, (void)out;                                         \
    *flag = 0;                                                                                  \
    return MPI_SUCCESS;                                                                         \
  }
#define DUP(name, handle)                                                                       \
  ABI_EXPORT int name(handle h, int k, void *extra, void *in, void *out, int *flag) {           \
    (void)h, (void)k, (void)extra;                                                              \
    *(void **)out = in;                                                                         \
    *flag = 1;                                                                                  \
    return MPI_SUCCESS;                                                                         \
  }
#define NULL_DELETE(name, handle)                                                               \
  ABI_EXPORT int name(handle h, int k, void *val, void *extra) {                                \
    (void)h, (void)k, (void)val, (void)extra;                                                   \
    return MPI_SUCCESS;                                                                         \
  }
NULL_COPY(OMPI_C_MPI_TYPE_NULL_COPY_FN, MPI_Datatype)
DUP(OMPI_C_MPI_TYPE_DUP_FN, MPI_Datatype)
NULL_DELETE(OMPI_C_MPI_TYPE_NULL_DELETE_FN, MPI_Datatype)
NULL_COPY(OMPI_C_MPI_COMM_NULL_COPY_FN, MPI_Comm)
DUP(OMPI_C_MPI_COMM_DUP_FN, MPI_Comm)
NULL_DELETE(OMPI_C_MPI_COMM_NULL_DELETE_FN, MPI_Comm)
NULL_COPY(OMPI_C_MPI_WIN_NULL_COPY_FN, MPI_Win)
DUP(OMPI_C_MPI_WIN_DUP_FN, MPI_Win)
NULL_DELETE(OMPI_C_MPI_WIN_NULL_DELETE_FN, MPI_Win)
NULL_COPY(OMPI_C_MPI_NULL_COPY_FN, MPI_Comm)
DUP(OMPI_C_MPI_DUP_FN, MPI_Comm)
NULL_DELETE(OMPI_C_MPI_NULL_DELETE_FN, MPI_Comm)

ABI_EXPORT int *MPI_F_STATUS_IGNORE = NULL;
ABI_EXPORT int *MPI_F_STATUSES_IGNORE = NULL;

/* ---------------------------------------------------------------- communicators */

ABI_EXPORT int PMPI_Comm_rank(MPI_Comm comm, int *rank) {
  if (!comm_ok(comm)) return RAISE(MPI_COMM_WORLD, MPI_ERR_COMM);
  *rank = 0;
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Comm_size(MPI_Comm comm, int *size) {
  if (!comm_ok(comm)) return RAISE(MPI_COMM_WORLD, MPI_ERR_COMM);
  *size = 1;
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Comm_test_inter(MPI_Comm comm, int *flag) {
  if (!comm_ok(comm)) return RAISE(MPI_COMM_WORLD, MPI_ERR_COMM);
  *flag = 0;
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Comm_compare(MPI_Comm a, MPI_Comm b, int *result) {
  if (!comm_ok(a) || !comm_ok(b)) return RAISE(MPI_COMM_WORLD, MPI_ERR_COMM);
  *result = a == b ? MPI_IDENT : MPI_CONGRUENT; /* every one has the same single process */
  return MPI_SUCCESS;
}

static int comm_free(MPI_Comm *comm, const char *fn);

/* A new communicator of this one process, with |from|'s error handler
 * and the attributes its keyvals' copy functions pass on. */
static int comm_new(MPI_Comm from, MPI_Comm *out, const char *fn) {
  comm_state *src = comm_st(from);
  abi_comm *c = obj_new(sizeof *c, ABI_KIND_COMMUNICATOR);
  if (!c) return raise_on(from, MPI_ERR_NO_MEM, fn);
  c->st.eh = src->eh;
  eh_ref(c->st.eh);
  MPI_Comm nc = (MPI_Comm)(void *)c;
  for (attr *a = src->attrs; a; a = a->next) {
    keyval *k = keyval_find(a->keyval);
    void *val = NULL;
    int flag = 0;
    if (!k || !k->copy) continue;
    int rc = k->copy(from, a->keyval, k->extra, a->val, &val, &flag);
    if (rc != MPI_SUCCESS) {
      comm_free(&nc, fn);
      return raise_on(from, rc, fn);
    }
    if (!flag) continue;
    attr *na = calloc(1, sizeof *na);
    if (!na) {
      comm_free(&nc, fn);
      return raise_on(from, MPI_ERR_NO_MEM, fn);
    }
    *na = (attr){a->keyval, val, c->st.attrs};
    c->st.attrs = na;
  }
  *out = nc;
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Comm_dup(MPI_Comm comm, MPI_Comm *out) {
  if (!comm_ok(comm)) return RAISE(MPI_COMM_WORLD, MPI_ERR_COMM);
  return comm_new(comm, out, FN);
}

static int comm_split(MPI_Comm comm, int color, MPI_Comm *out, const char *fn) {
  if (!comm_ok(comm)) return raise_on(MPI_COMM_WORLD, MPI_ERR_COMM, fn);
  if (color == MPI_UNDEFINED) {
    *out = MPI_COMM_NULL;
    return MPI_SUCCESS;
  }
  return comm_new(comm, out, fn);
}

ABI_EXPORT int PMPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *out) {
  (void)key;
  return comm_split(comm, color, out, FN);
}

ABI_EXPORT int PMPI_Comm_split_type(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm *out) {
  (void)key, (void)info;
  return comm_split(comm, type == MPI_UNDEFINED ? MPI_UNDEFINED : 0, out, FN);
}

static int comm_create(MPI_Comm comm, MPI_Group g, MPI_Comm *out, const char *fn) {
  int n = group_size(g);
  if (!comm_ok(comm)) return raise_on(MPI_COMM_WORLD, MPI_ERR_COMM, fn);
  if (n < 0) return raise_on(comm, MPI_ERR_GROUP, fn);
  if (n == 0) {
    *out = MPI_COMM_NULL;
    return MPI_SUCCESS;
  }
  return comm_new(comm, out, fn);
}

ABI_EXPORT int PMPI_Comm_create(MPI_Comm comm, MPI_Group g, MPI_Comm *out) {
  return comm_create(comm, g, out, FN);
}

ABI_EXPORT int PMPI_Comm_create_group(MPI_Comm comm, MPI_Group g, int tag, MPI_Comm *out) {
  (void)tag;
  return comm_create(comm, g, out, FN);
}

static int comm_free(MPI_Comm *comm, const char *fn) {
  if (!comm || !comm_ok(*comm) || HDR(*comm)->index >= 0)
    return raise_on(MPI_COMM_WORLD, MPI_ERR_COMM, fn); /* world and self are never freed */
  comm_state *st = comm_st(*comm);
  while (st->attrs) {
    int rc = attr_delete(*comm, st, st->attrs->keyval);
    if (rc != MPI_SUCCESS) return raise_on(*comm, rc, fn);
  }
  eh_unref(st->eh);
  HDR(*comm)->magic = 0;
  free(*comm);
  *comm = MPI_COMM_NULL;
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Comm_free(MPI_Comm *comm) { return comm_free(comm, FN); }

ABI_EXPORT int PMPI_Comm_set_name(MPI_Comm comm, const char *name) {
  comm_state *st = comm_ok(comm) ? comm_st(comm) : NULL;
  if (!st) return RAISE(MPI_COMM_WORLD, MPI_ERR_COMM);
  snprintf(st->name, MPI_MAX_OBJECT_NAME, "%s", name);
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Comm_get_name(MPI_Comm comm, char *name, int *len) {
  comm_state *st = comm_st(comm);
  if (!st) return RAISE(MPI_COMM_WORLD, MPI_ERR_COMM);
  *len = snprintf(name, MPI_MAX_OBJECT_NAME, "%s", st->name);
  return MPI_SUCCESS;
}

/* ---------------------------------------------------------------- requests */

enum { REQ_DONE, REQ_RECV, REQ_GREQ };

typedef struct abi_req {
  abi_hdr h;
  int type;
  bool complete;
  MPI_Status st;
  /* REQ_RECV: what it waits for */
  void *buf;
  long long cap;
  MPI_Datatype dt;
  int source, tag;
  MPI_Comm comm;
  /* REQ_GREQ */
  MPI_Grequest_query_function *query;
  MPI_Grequest_free_function *free_fn;
  MPI_Grequest_cancel_function *cancel;
  void *extra;
  struct abi_req *next_recv;
} abi_req;

static abi_req *posted_recvs; /* REQ_RECV requests not yet matched, in order */

static abi_req *req_new(int type) {
  abi_req *r = obj_new(sizeof *r, ABI_KIND_REQUEST);
  if (!r) return NULL;
  r->type = type;
  r->st.MPI_SOURCE = MPI_ANY_SOURCE;
  r->st.MPI_TAG = MPI_ANY_TAG;
  return r;
}

static bool req_ok(MPI_Request r) { return is(r, ABI_KIND_REQUEST); }

static void status_empty(MPI_Status *s) {
  if (s == MPI_STATUS_IGNORE) return;
  s->MPI_SOURCE = MPI_ANY_SOURCE;
  s->MPI_TAG = MPI_ANY_TAG;
  s->MPI_ERROR = MPI_SUCCESS;
  s->_cancelled = 0;
  s->_ucount = 0;
}

/* Finishes a complete request: its status out, its resources freed. */
static int req_finish(MPI_Request *rp, MPI_Status *status) {
  abi_req *r = (abi_req *)(void *)*rp;
  int rc = MPI_SUCCESS;
  if (r->type == REQ_GREQ) {
    MPI_Status tmp;
    status_empty(&tmp);
    rc = r->query(r->extra, &tmp);
    if (status != MPI_STATUS_IGNORE) *status = tmp;
    int frc = r->free_fn(r->extra);
    if (rc == MPI_SUCCESS) rc = frc;
  } else if (status != MPI_STATUS_IGNORE) {
    *status = r->st;
    rc = r->st.MPI_ERROR;
  } else {
    rc = r->st.MPI_ERROR;
  }
  r->h.magic = 0;
  free(r);
  *rp = MPI_REQUEST_NULL;
  return rc;
}

ABI_EXPORT int PMPI_Grequest_start(MPI_Grequest_query_function *query,
                                   MPI_Grequest_free_function *free_fn,
                                   MPI_Grequest_cancel_function *cancel, void *extra,
                                   MPI_Request *out) {
  abi_req *r = req_new(REQ_GREQ);
  if (!r) return RAISE(MPI_COMM_WORLD, MPI_ERR_NO_MEM);
  r->query = query;
  r->free_fn = free_fn;
  r->cancel = cancel;
  r->extra = extra;
  *out = (MPI_Request)(void *)r;
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Grequest_complete(MPI_Request req) {
  if (!req_ok(req) || ((abi_req *)(void *)req)->type != REQ_GREQ)
    return RAISE(MPI_COMM_WORLD, MPI_ERR_REQUEST);
  ((abi_req *)(void *)req)->complete = true;
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Status_set_elements(MPI_Status *s, MPI_Datatype t, int count) {
  MPI_Count size;
  MPI_Aint e;
  if (!type_info(t, &size, &e)) return RAISE(MPI_COMM_WORLD, MPI_ERR_TYPE);
  s->_ucount = (size_t)count * (size_t)size;
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Status_set_cancelled(MPI_Status *s, int flag) {
  s->_cancelled = flag;
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Test_cancelled(const MPI_Status *s, int *flag) {
  *flag = s->_cancelled;
  return MPI_SUCCESS;
}

static int get_count(const MPI_Status *s, MPI_Datatype t, int *count, const char *fn) {
  MPI_Count size;
  MPI_Aint e;
  if (!type_info(t, &size, &e)) return raise_on(MPI_COMM_WORLD, MPI_ERR_TYPE, fn);
  *count = size == 0 ? 0 : s->_ucount % (size_t)size ? MPI_UNDEFINED : (int)(s->_ucount / (size_t)size);
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Get_count(const MPI_Status *s, MPI_Datatype t, int *count) {
  return get_count(s, t, count, FN);
}

ABI_EXPORT int PMPI_Get_elements(const MPI_Status *s, MPI_Datatype t, int *count) {
  return get_count(s, t, count, FN);
}

static int test_one(MPI_Request *req, int *flag, MPI_Status *status, const char *fn) {
  if (*req == MPI_REQUEST_NULL) {
    *flag = 1;
    status_empty(status);
    return MPI_SUCCESS;
  }
  if (!req_ok(*req)) return raise_on(MPI_COMM_WORLD, MPI_ERR_REQUEST, fn);
  *flag = ((abi_req *)(void *)*req)->complete;
  if (!*flag) return MPI_SUCCESS;
  return raise_on(MPI_COMM_WORLD, req_finish(req, status), fn);
}

ABI_EXPORT int PMPI_Test(MPI_Request *req, int *flag, MPI_Status *status) {
  return test_one(req, flag, status, FN);
}

/* Nothing else runs here: a request that is not complete now completes
 * only through a generalized request's owner (the shim's progress, which
 * its own MPI_Wait runs) or a send to ourselves, so waiting polls. */
static void pause_briefly(unsigned *spins) {
  if (++*spins < 100) return;
  struct timespec ts = {0, 50000};
  nanosleep(&ts, NULL);
}

static bool waitable(MPI_Request r) {
  abi_req *q = (abi_req *)(void *)r;
  return q->complete || q->type == REQ_GREQ;
}

ABI_EXPORT int PMPI_Wait(MPI_Request *req, MPI_Status *status) {
  if (*req != MPI_REQUEST_NULL && req_ok(*req) && !waitable(*req)) {
    mlog("MPI_Wait on a receive that no send of this process matches: it would never complete");
    return RAISE(MPI_COMM_WORLD, MPI_ERR_PENDING);
  }
  int flag = 0;
  for (unsigned spins = 0;; pause_briefly(&spins)) {
    int rc = test_one(req, &flag, status, FN);
    if (rc != MPI_SUCCESS || flag) return rc;
  }
}

static int test_all(int n, MPI_Request reqs[], int *flag, MPI_Status statuses[], const char *fn) {
  *flag = 1;
  for (int i = 0; i < n; i++)
    if (reqs[i] != MPI_REQUEST_NULL) {
      if (!req_ok(reqs[i])) return raise_on(MPI_COMM_WORLD, MPI_ERR_REQUEST, fn);
      if (!((abi_req *)(void *)reqs[i])->complete) *flag = 0;
    }
  if (!*flag) return MPI_SUCCESS;
  int err = MPI_SUCCESS;
  for (int i = 0; i < n; i++) {
    MPI_Status *s = statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &statuses[i];
    int rc = MPI_SUCCESS, f;
    rc = test_one(&reqs[i], &f, s, fn);
    if (rc != MPI_SUCCESS) err = MPI_ERR_IN_STATUS;
  }
  return err;
}

ABI_EXPORT int PMPI_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status statuses[]) {
  return test_all(n, reqs, flag, statuses, FN);
}

ABI_EXPORT int PMPI_Waitall(int n, MPI_Request reqs[], MPI_Status statuses[]) {
  for (int i = 0; i < n; i++)
    if (reqs[i] != MPI_REQUEST_NULL && req_ok(reqs[i]) && !waitable(reqs[i])) {
      mlog("MPI_Waitall on a receive that no send of this process matches");
      return RAISE(MPI_COMM_WORLD, MPI_ERR_PENDING);
    }
  int flag = 0;
  for (unsigned spins = 0;; pause_briefly(&spins)) {
    int rc = test_all(n, reqs, &flag, statuses, FN);
    if (rc != MPI_SUCCESS || flag) return rc;
  }
}

static int test_any(int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *status,
                    const char *fn) {
  bool any_active = false;
  for (int i = 0; i < n; i++) {
    if (reqs[i] == MPI_REQUEST_NULL) continue;
    if (!req_ok(reqs[i])) return raise_on(MPI_COMM_WORLD, MPI_ERR_REQUEST, fn);
    any_active = true;
    if (((abi_req *)(void *)reqs[i])->complete) {
      *index = i;
      *flag = 1;
      return test_one(&reqs[i], flag, status, fn);
    }
  }
  *index = MPI_UNDEFINED;
  *flag = !any_active;
  if (!any_active) status_empty(status);
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Testany(int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *status) {
  return test_any(n, reqs, index, flag, status, FN);
}

/* Whether any active request in |reqs| can still complete (or none is
 * active); false: waiting for one would never end. */
static bool any_waitable(int n, MPI_Request reqs[]) {
  bool active = false;
  for (int i = 0; i < n; i++) {
    if (reqs[i] == MPI_REQUEST_NULL || !req_ok(reqs[i])) continue;
    active = true;
    if (waitable(reqs[i])) return true;
  }
  return !active;
}

ABI_EXPORT int PMPI_Waitany(int n, MPI_Request reqs[], int *index, MPI_Status *status) {
  if (!any_waitable(n, reqs)) {
    mlog("MPI_Waitany on receives that no send of this process matches");
    return RAISE(MPI_COMM_WORLD, MPI_ERR_PENDING);
  }
  int flag = 0;
  for (unsigned spins = 0;; pause_briefly(&spins)) {
    int rc = test_any(n, reqs, index, &flag, status, FN);
    if (rc != MPI_SUCCESS || flag) return rc;
  }
}

static int test_some(int n, MPI_Request reqs[], int *outcount, int indices[],
                     MPI_Status statuses[], const char *fn) {
  bool any_active = false;
  *outcount = 0;
  for (int i = 0; i < n; i++) {
    if (reqs[i] == MPI_REQUEST_NULL) continue;
    if (!req_ok(reqs[i])) return raise_on(MPI_COMM_WORLD, MPI_ERR_REQUEST, fn);
    any_active = true;
    if (!((abi_req *)(void *)reqs[i])->complete) continue;
    MPI_Status *s = statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &statuses[*outcount];
    int f;
    indices[*outcount] = i;
    ++*outcount;
    int rc = test_one(&reqs[i], &f, s, fn);
    if (rc != MPI_SUCCESS) return rc;
  }
  if (!any_active) *outcount = MPI_UNDEFINED;
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Testsome(int n, MPI_Request reqs[], int *outcount, int indices[],
                             MPI_Status statuses[]) {
  return test_some(n, reqs, outcount, indices, statuses, FN);
}

ABI_EXPORT int PMPI_Waitsome(int n, MPI_Request reqs[], int *outcount, int indices[],
                             MPI_Status statuses[]) {
  if (!any_waitable(n, reqs)) {
    mlog("MPI_Waitsome on receives that no send of this process matches");
    return RAISE(MPI_COMM_WORLD, MPI_ERR_PENDING);
  }
  for (unsigned spins = 0;; pause_briefly(&spins)) {
    int rc = test_some(n, reqs, outcount, indices, statuses, FN);
    if (rc != MPI_SUCCESS || *outcount != 0) return rc;
  }
}

ABI_EXPORT int PMPI_Request_get_status(MPI_Request req, int *flag, MPI_Status *status) {
  if (req == MPI_REQUEST_NULL) {
    *flag = 1;
    status_empty(status);
    return MPI_SUCCESS;
  }
  if (!req_ok(req)) return RAISE(MPI_COMM_WORLD, MPI_ERR_REQUEST);
  abi_req *r = (abi_req *)(void *)req;
  *flag = r->complete;
  if (*flag && status != MPI_STATUS_IGNORE) {
    if (r->type == REQ_GREQ) r->query(r->extra, status);
    else *status = r->st;
  }
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Request_free(MPI_Request *req) {
  if (!req || !req_ok(*req)) return RAISE(MPI_COMM_WORLD, MPI_ERR_REQUEST);
  abi_req *r = (abi_req *)(void *)*req;
  if (!r->complete) return abi_unsupported("MPI_Request_free of an active request", NULL);
  req_finish(req, MPI_STATUS_IGNORE);
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Cancel(MPI_Request *req) {
  if (!req || !req_ok(*req)) return RAISE(MPI_COMM_WORLD, MPI_ERR_REQUEST);
  abi_req *r = (abi_req *)(void *)*req;
  if (r->type == REQ_GREQ) return r->cancel(r->extra, r->complete);
  if (r->type == REQ_RECV && !r->complete) {
    for (abi_req **p = &posted_recvs; *p; p = &(*p)->next_recv)
      if (*p == r) {
        *p = r->next_recv;
        break;
      }
    r->complete = true;
    r->st._cancelled = 1;
  }
  return MPI_SUCCESS;
}

/* ---------------------------------------------------------------- messages to oneself */

typedef struct msg {
  MPI_Comm comm;
  int tag;
  long long len;
  struct msg *next;
  unsigned char data[];
} msg;

static msg *unexpected, **unexpected_tail = &unexpected;

static bool matches(MPI_Comm comm, int tag, MPI_Comm want_comm, int want_tag) {
  return comm == want_comm && (want_tag == MPI_ANY_TAG || want_tag == tag);
}

/* Delivers |len| bytes into a receive of |cap| bytes: the status says
 * what came; more than fits is MPI_ERR_TRUNCATE. */
static int deliver(void *buf, long long cap, const void *data, long long len, int tag,
                   MPI_Status *st) {
  long long n = len < cap ? len : cap;
  if (n > 0) memmove(buf, data, (size_t)n);
  if (st != MPI_STATUS_IGNORE) {
    st->MPI_SOURCE = 0;
    st->MPI_TAG = tag;
    st->MPI_ERROR = len > cap ? MPI_ERR_TRUNCATE : MPI_SUCCESS;
    st->_cancelled = 0;
    st->_ucount = (size_t)n;
  }
  return len > cap ? MPI_ERR_TRUNCATE : MPI_SUCCESS;
}

static int send_self(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm,
                     const char *fn) {
  long long len = span(count, dt);
  if (!comm_ok(comm)) return raise_on(MPI_COMM_WORLD, MPI_ERR_COMM, fn);
  if (len < 0) return raise_on(comm, count < 0 ? MPI_ERR_COUNT : MPI_ERR_TYPE, fn);
  if (dest == MPI_PROC_NULL) return MPI_SUCCESS;
  if (dest != 0) return raise_on(comm, MPI_ERR_RANK, fn);
  if (tag < 0) return raise_on(comm, MPI_ERR_TAG, fn);
  for (abi_req **p = &posted_recvs; *p; p = &(*p)->next_recv) {
    abi_req *r = *p;
    if (!matches(comm, tag, r->comm, r->tag)) continue;
    *p = r->next_recv;
    deliver(r->buf, r->cap, buf, len, tag, &r->st);
    r->complete = true;
    return MPI_SUCCESS;
  }
  msg *m = malloc(sizeof *m + (size_t)len);
  if (!m) return raise_on(comm, MPI_ERR_NO_MEM, fn);
  m->comm = comm;
  m->tag = tag;
  m->len = len;
  m->next = NULL;
  if (len > 0) memcpy(m->data, buf, (size_t)len);
  *unexpected_tail = m;
  unexpected_tail = &m->next;
  return MPI_SUCCESS;
}

/* The first queued message for (comm, tag), unlinked if |take|. */
static msg *find_msg(MPI_Comm comm, int tag, bool take) {
  for (msg **p = &unexpected; *p; p = &(*p)->next) {
    msg *m = *p;
    if (!matches(m->comm, m->tag, comm, tag)) continue;
    if (take) {
      *p = m->next;
      if (unexpected_tail == &m->next) unexpected_tail = p;
    }
    return m;
  }
  return NULL;
}

static int recv_check(int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm, long long *cap) {
  if (!comm_ok(comm)) return MPI_ERR_COMM;
  *cap = span(count, dt);
  if (*cap < 0) return count < 0 ? MPI_ERR_COUNT : MPI_ERR_TYPE;
  if (source != 0 && source != MPI_ANY_SOURCE && source != MPI_PROC_NULL) return MPI_ERR_RANK;
  if (tag < 0 && tag != MPI_ANY_TAG) return MPI_ERR_TAG;
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Send(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm) {
  return send_self(buf, count, dt, dest, tag, comm, FN);
}

ABI_EXPORT int PMPI_Ssend(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm) {
  return send_self(buf, count, dt, dest, tag, comm, FN);
}

ABI_EXPORT int PMPI_Isend(const void *buf, int count, MPI_Datatype dt, int dest, int tag,
                          MPI_Comm comm, MPI_Request *req) {
  int rc = send_self(buf, count, dt, dest, tag, comm, FN);
  if (rc != MPI_SUCCESS) return rc;
  abi_req *r = req_new(REQ_DONE);
  if (!r) return RAISE(comm, MPI_ERR_NO_MEM);
  r->complete = true;
  *req = (MPI_Request)(void *)r;
  return MPI_SUCCESS;
}

static int recv_self(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
                     MPI_Status *status, const char *fn) {
  long long cap;
  int rc = recv_check(count, dt, source, tag, comm, &cap);
  if (rc != MPI_SUCCESS) return raise_on(comm_ok(comm) ? comm : MPI_COMM_WORLD, rc, fn);
  if (source == MPI_PROC_NULL) {
    status_empty(status);
    if (status != MPI_STATUS_IGNORE) status->MPI_SOURCE = MPI_PROC_NULL;
    return MPI_SUCCESS;
  }
  msg *m = find_msg(comm, tag, true);
  if (!m) {
    mlog("%s with no matching send from this process, its only rank: it would wait forever", fn);
    return raise_on(comm, MPI_ERR_PENDING, fn);
  }
  rc = deliver(buf, cap, m->data, m->len, m->tag, status);
  free(m);
  return raise_on(comm, rc, fn);
}

ABI_EXPORT int PMPI_Recv(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
                         MPI_Status *status) {
  return recv_self(buf, count, dt, source, tag, comm, status, FN);
}

ABI_EXPORT int PMPI_Irecv(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
                          MPI_Request *req) {
  long long cap;
  int rc = recv_check(count, dt, source, tag, comm, &cap);
  if (rc != MPI_SUCCESS) return RAISE(comm_ok(comm) ? comm : MPI_COMM_WORLD, rc);
  abi_req *r = req_new(REQ_RECV);
  if (!r) return RAISE(comm, MPI_ERR_NO_MEM);
  r->buf = buf;
  r->cap = cap;
  r->dt = dt;
  r->source = source;
  r->tag = tag;
  r->comm = comm;
  msg *m = source == MPI_PROC_NULL ? NULL : find_msg(comm, tag, true);
  if (source == MPI_PROC_NULL) {
    r->complete = true;
    r->st.MPI_SOURCE = MPI_PROC_NULL;
  } else if (m) {
    deliver(buf, cap, m->data, m->len, m->tag, &r->st);
    free(m);
    r->complete = true;
  } else {
    abi_req **p = &posted_recvs;
    while (*p) p = &(*p)->next_recv;
    *p = r;
  }
  *req = (MPI_Request)(void *)r;
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype sdt, int dest, int stag,
                             void *rbuf, int rcount, MPI_Datatype rdt, int source, int rtag,
                             MPI_Comm comm, MPI_Status *status) {
  int rc = send_self(sbuf, scount, sdt, dest, stag, comm, FN);
  return rc != MPI_SUCCESS ? rc : recv_self(rbuf, rcount, rdt, source, rtag, comm, status, FN);
}

static int iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status,
                  const char *fn) {
  long long cap;
  int rc = recv_check(0, MPI_BYTE, source, tag, comm, &cap);
  if (rc != MPI_SUCCESS) return raise_on(comm_ok(comm) ? comm : MPI_COMM_WORLD, rc, fn);
  msg *m = source == MPI_PROC_NULL ? NULL : find_msg(comm, tag, false);
  *flag = m != NULL;
  if (m && status != MPI_STATUS_IGNORE) {
    status->MPI_SOURCE = 0;
    status->MPI_TAG = m->tag;
    status->MPI_ERROR = MPI_SUCCESS;
    status->_cancelled = 0;
    status->_ucount = (size_t)m->len;
  }
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status) {
  return iprobe(source, tag, comm, flag, status, FN);
}

ABI_EXPORT int PMPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status) {
  int flag = 0;
  int rc = iprobe(source, tag, comm, &flag, status, FN);
  if (rc != MPI_SUCCESS || flag) return rc;
  mlog("MPI_Probe with no matching send from this process, its only rank: it would wait forever");
  return RAISE(comm, MPI_ERR_PENDING);
}

/* ---------------------------------------------------------------- collectives of one */

/* The result of any reduction or gather over one process: its own data. */
static int copy_in(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Comm comm,
                   const char *fn) {
  long long len = span(count, dt);
  if (!comm_ok(comm)) return raise_on(MPI_COMM_WORLD, MPI_ERR_COMM, fn);
  if (len < 0) return raise_on(comm, count < 0 ? MPI_ERR_COUNT : MPI_ERR_TYPE, fn);
  if (sendbuf != MPI_IN_PLACE && len > 0 && sendbuf != recvbuf) memmove(recvbuf, sendbuf, (size_t)len);
  return MPI_SUCCESS;
}

static int root_check(int root, MPI_Comm comm, const char *fn) {
  if (!comm_ok(comm)) return raise_on(MPI_COMM_WORLD, MPI_ERR_COMM, fn);
  return root == 0 ? MPI_SUCCESS : raise_on(comm, MPI_ERR_ROOT, fn);
}

static int barrier(MPI_Comm comm, const char *fn) {
  return comm_ok(comm) ? MPI_SUCCESS : raise_on(MPI_COMM_WORLD, MPI_ERR_COMM, fn);
}

ABI_EXPORT int PMPI_Barrier(MPI_Comm comm) { return barrier(comm, FN); }

static int bcast(int count, MPI_Datatype dt, int root, MPI_Comm comm, const char *fn) {
  int rc = root_check(root, comm, fn);
  if (rc != MPI_SUCCESS) return rc;
  return span(count, dt) < 0 ? raise_on(comm, count < 0 ? MPI_ERR_COUNT : MPI_ERR_TYPE, fn)
                             : MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Bcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm) {
  (void)buf;
  return bcast(count, dt, root, comm, FN);
}

static int allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op,
                     MPI_Comm comm, const char *fn) {
  if (!op_ok(op)) return raise_on(comm_ok(comm) ? comm : MPI_COMM_WORLD, MPI_ERR_OP, fn);
  return copy_in(sendbuf, recvbuf, count, dt, comm, fn);
}

ABI_EXPORT int PMPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt,
                              MPI_Op op, MPI_Comm comm) {
  return allreduce(sendbuf, recvbuf, count, dt, op, comm, FN);
}

ABI_EXPORT int PMPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op,
                           int root, MPI_Comm comm) {
  int rc = root_check(root, comm, FN);
  if (rc != MPI_SUCCESS) return rc;
  return allreduce(sendbuf, recvbuf, count, dt, op, comm, FN);
}

ABI_EXPORT int PMPI_Scan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op,
                         MPI_Comm comm) {
  return allreduce(sendbuf, recvbuf, count, dt, op, comm, FN);
}

ABI_EXPORT int PMPI_Allgather(const void *sendbuf, int scount, MPI_Datatype sdt, void *recvbuf,
                              int rcount, MPI_Datatype rdt, MPI_Comm comm) {
  (void)rcount, (void)rdt;
  return copy_in(sendbuf, recvbuf, scount, sdt, comm, FN);
}

static int allgatherv(const void *sendbuf, int scount, MPI_Datatype sdt, void *recvbuf,
                      const int displs[], MPI_Datatype rdt, MPI_Comm comm, const char *fn) {
  MPI_Count s;
  MPI_Aint e;
  if (!type_info(rdt, &s, &e))
    return raise_on(comm_ok(comm) ? comm : MPI_COMM_WORLD, MPI_ERR_TYPE, fn);
  return copy_in(sendbuf, (char *)recvbuf + (long long)displs[0] * e, scount, sdt, comm, fn);
}

ABI_EXPORT int PMPI_Allgatherv(const void *sendbuf, int scount, MPI_Datatype sdt, void *recvbuf,
                               const int rcounts[], const int displs[], MPI_Datatype rdt,
                               MPI_Comm comm) {
  (void)rcounts;
  return allgatherv(sendbuf, scount, sdt, recvbuf, displs, rdt, comm, FN);
}

ABI_EXPORT int PMPI_Gather(const void *sendbuf, int scount, MPI_Datatype sdt, void *recvbuf,
                           int rcount, MPI_Datatype rdt, int root, MPI_Comm comm) {
  (void)rcount, (void)rdt;
  int rc = root_check(root, comm, FN);
  return rc != MPI_SUCCESS ? rc : copy_in(sendbuf, recvbuf, scount, sdt, comm, FN);
}

ABI_EXPORT int PMPI_Scatter(const void *sendbuf, int scount, MPI_Datatype sdt, void *recvbuf,
                            int rcount, MPI_Datatype rdt, int root, MPI_Comm comm) {
  (void)scount, (void)sdt;
  int rc = root_check(root, comm, FN);
  if (rc != MPI_SUCCESS) return rc;
  return recvbuf == MPI_IN_PLACE ? MPI_SUCCESS : copy_in(sendbuf, recvbuf, rcount, rdt, comm, FN);
}

ABI_EXPORT int PMPI_Alltoall(const void *sendbuf, int scount, MPI_Datatype sdt, void *recvbuf,
                             int rcount, MPI_Datatype rdt, MPI_Comm comm) {
  (void)rcount, (void)rdt;
  return copy_in(sendbuf, recvbuf, scount, sdt, comm, FN);
}

ABI_EXPORT int PMPI_Gatherv(const void *sendbuf, int scount, MPI_Datatype sdt, void *recvbuf,
                            const int rcounts[], const int displs[], MPI_Datatype rdt, int root,
                            MPI_Comm comm) {
  (void)rcounts;
  int rc = root_check(root, comm, FN);
  return rc != MPI_SUCCESS ? rc : allgatherv(sendbuf, scount, sdt, recvbuf, displs, rdt, comm, FN);
}

ABI_EXPORT int PMPI_Scatterv(const void *sendbuf, const int scounts[], const int displs[],
                             MPI_Datatype sdt, void *recvbuf, int rcount, MPI_Datatype rdt, int root,
                             MPI_Comm comm) {
  (void)scounts;
  MPI_Count s;
  MPI_Aint e;
  int rc = root_check(root, comm, FN);
  if (rc != MPI_SUCCESS) return rc;
  if (recvbuf == MPI_IN_PLACE) return MPI_SUCCESS;
  if (!type_info(sdt, &s, &e)) return RAISE(comm, MPI_ERR_TYPE);
  return copy_in((const char *)sendbuf + (long long)displs[0] * e, recvbuf, rcount, rdt, comm, FN);
}

ABI_EXPORT int PMPI_Alltoallv(const void *sendbuf, const int scounts[], const int sdispls[],
                              MPI_Datatype sdt, void *recvbuf, const int rcounts[],
                              const int rdispls[], MPI_Datatype rdt, MPI_Comm comm) {
  (void)rcounts;
  MPI_Count s;
  MPI_Aint se, re;
  if (!type_info(sdt, &s, &se) || !type_info(rdt, &s, &re))
    return RAISE(comm_ok(comm) ? comm : MPI_COMM_WORLD, MPI_ERR_TYPE);
  if (sendbuf == MPI_IN_PLACE) return comm_ok(comm) ? MPI_SUCCESS : RAISE(MPI_COMM_WORLD, MPI_ERR_COMM);
  return copy_in((const char *)sendbuf + (long long)sdispls[0] * se,
                 (char *)recvbuf + (long long)rdispls[0] * re, scounts[0], sdt, comm, FN);
}

ABI_EXPORT int PMPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int rcounts[],
                                   MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
  return allreduce(sendbuf, recvbuf, rcounts[0], dt, op, comm, FN);
}

ABI_EXPORT int PMPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int rcount,
                                         MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
  return allreduce(sendbuf, recvbuf, rcount, dt, op, comm, FN);
}

/* Rank 0's result of an exclusive scan is undefined: nothing to do. */
ABI_EXPORT int PMPI_Exscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op,
                           MPI_Comm comm) {
  (void)sendbuf, (void)recvbuf;
  if (!op_ok(op)) return RAISE(comm_ok(comm) ? comm : MPI_COMM_WORLD, MPI_ERR_OP);
  if (!comm_ok(comm)) return RAISE(MPI_COMM_WORLD, MPI_ERR_COMM);
  return span(count, dt) < 0 ? RAISE(comm, count < 0 ? MPI_ERR_COUNT : MPI_ERR_TYPE) : MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Sendrecv_replace(void *buf, int count, MPI_Datatype dt, int dest, int stag,
                                     int source, int rtag, MPI_Comm comm, MPI_Status *status) {
  int rc = send_self(buf, count, dt, dest, stag, comm, FN);
  return rc != MPI_SUCCESS ? rc : recv_self(buf, count, dt, source, rtag, comm, status, FN);
}

/* Profiling control: no profiler here, as the standard allows. */
ABI_EXPORT int PMPI_Pcontrol(const int level, ...) {
  (void)level;
  return MPI_SUCCESS;
}

/* Nonblocking collectives: done at the call. */
static int done_request(int rc, MPI_Request *req, const char *fn) {
  if (rc != MPI_SUCCESS) return rc;
  abi_req *r = req_new(REQ_DONE);
  if (!r) return raise_on(MPI_COMM_WORLD, MPI_ERR_NO_MEM, fn);
  r->complete = true;
  r->st.MPI_ERROR = MPI_SUCCESS;
  *req = (MPI_Request)(void *)r;
  return MPI_SUCCESS;
}

ABI_EXPORT int PMPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt,
                               MPI_Op op, MPI_Comm comm, MPI_Request *req) {
  return done_request(allreduce(sendbuf, recvbuf, count, dt, op, comm, FN), req, FN);
}

ABI_EXPORT int PMPI_Ibcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm,
                           MPI_Request *req) {
  (void)buf;
  return done_request(bcast(count, dt, root, comm, FN), req, FN);
}

ABI_EXPORT int PMPI_Ibarrier(MPI_Comm comm, MPI_Request *req) {
  return done_request(barrier(comm, FN), req, FN);
}
