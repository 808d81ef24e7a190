/*
 * ded_fortran.c: Fortran trainers under interposition.
 *
 * Open MPI's Fortran bindings (libmpi_mpifh for `use mpi` and mpif.h,
 * libmpi_usempif08 for `use mpi_f08`) call PMPI_ directly, so the shim's
 * C wrappers never see a Fortran program's calls. These definitions come
 * first (the library is preloaded) and turn the calls the shim cares
 * about into the C calls it wraps: MPI_INIT and MPI_INIT_THREAD (the
 * swarm starts there), MPI_FINALIZE, MPI_ALLREDUCE (rerouted) and
 * MPI_BCAST (a joiner's start-up state). Fortran handles are converted
 * with the f2c functions, MPI_IN_PLACE and MPI_BOTTOM are recognised by
 * the address of Open MPI's common blocks, and the C call's result goes
 * to IERROR. Each is defined under every name Open MPI's Fortran layer
 * exports it by: mpi_x_, mpi_x__, mpi_x, MPI_X and ompi_x_f (mpi_f08).
 */
#include <dlfcn.h>
#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>

#define DED_EXPORT __attribute__((visibility("default")))

/* The addresses of Open MPI's MPI_IN_PLACE and MPI_BOTTOM common blocks
 * (every spelling), looked up once; NULL where the program has none. */
static void *in_place[4], *bottom[4];

static void fortran_sentinels(void) {
  static bool done;
  if (done) return;
  static const char *const ip[] = {"mpi_fortran_in_place_", "mpi_fortran_in_place__",
                                   "mpi_fortran_in_place", "MPI_FORTRAN_IN_PLACE"};
  static const char *const bt[] = {"mpi_fortran_bottom_", "mpi_fortran_bottom__",
                                   "mpi_fortran_bottom", "MPI_FORTRAN_BOTTOM"};
  for (int i = 0; i < 4; i++) {
    in_place[i] = dlsym(RTLD_DEFAULT, ip[i]);
    bottom[i] = dlsym(RTLD_DEFAULT, bt[i]);
  }
  done = true;
}

static const void *f2c_buf(const void *p) {
  fortran_sentinels();
  for (int i = 0; i < 4; i++) {
    if (p && p == in_place[i]) return MPI_IN_PLACE;
    if (p && p == bottom[i]) return MPI_BOTTOM;
  }
  return p;
}

static void f_init(MPI_Fint *ierr) { *ierr = (MPI_Fint)MPI_Init(NULL, NULL); }

static void f_init_thread(MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr) {
  int prov = 0;
  *ierr = (MPI_Fint)MPI_Init_thread(NULL, NULL, (int)*required, &prov);
  *provided = (MPI_Fint)prov;
}

static void f_finalize(MPI_Fint *ierr) { *ierr = (MPI_Fint)MPI_Finalize(); }

static void f_allreduce(const void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *datatype,
                        MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierr) {
  *ierr = (MPI_Fint)MPI_Allreduce(f2c_buf(sendbuf), (void *)f2c_buf(recvbuf), (int)*count,
                                  PMPI_Type_f2c(*datatype), PMPI_Op_f2c(*op),
                                  PMPI_Comm_f2c(*comm));
}

static void f_bcast(void *buf, MPI_Fint *count, MPI_Fint *datatype, MPI_Fint *root, MPI_Fint *comm,
                    MPI_Fint *ierr) {
  *ierr = (MPI_Fint)MPI_Bcast((void *)f2c_buf(buf), (int)*count, PMPI_Type_f2c(*datatype),
                              (int)*root, PMPI_Comm_f2c(*comm));
}

/* Every name of one Fortran entry point. */
#define DED_FORTRAN(lower, upper, impl, params, args)  \
  DED_EXPORT void lower##_ params;                     \
  DED_EXPORT void lower##__ params;                    \
  DED_EXPORT void lower params;                        \
  DED_EXPORT void upper params;                        \
  void lower##_ params { impl args; }                  \
  void lower##__ params { impl args; }                 \
  void lower params { impl args; }                     \
  void upper params { impl args; }

#define P_INIT (MPI_Fint * ierr)
#define P_INIT_THREAD (MPI_Fint * required, MPI_Fint * provided, MPI_Fint * ierr)
#define P_ALLREDUCE                                                                            \
  (const void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *datatype, MPI_Fint *op,     \
   MPI_Fint *comm, MPI_Fint *ierr)
#define P_BCAST                                                                                \
  (void *buf, MPI_Fint *count, MPI_Fint *datatype, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierr)

DED_FORTRAN(mpi_init, MPI_INIT, f_init, P_INIT, (ierr))
DED_FORTRAN(mpi_init_thread, MPI_INIT_THREAD, f_init_thread, P_INIT_THREAD,
            (required, provided, ierr))
DED_FORTRAN(mpi_finalize, MPI_FINALIZE, f_finalize, P_INIT, (ierr))
DED_FORTRAN(mpi_allreduce, MPI_ALLREDUCE, f_allreduce, P_ALLREDUCE,
            (sendbuf, recvbuf, count, datatype, op, comm, ierr))
DED_FORTRAN(mpi_bcast, MPI_BCAST, f_bcast, P_BCAST, (buf, count, datatype, root, comm, ierr))

/* mpi_f08's bind(C) entry points. */
DED_EXPORT void ompi_init_f P_INIT;
DED_EXPORT void ompi_init_thread_f P_INIT_THREAD;
DED_EXPORT void ompi_finalize_f P_INIT;
DED_EXPORT void ompi_allreduce_f P_ALLREDUCE;
DED_EXPORT void ompi_bcast_f P_BCAST;
void ompi_init_f P_INIT { f_init(ierr); }
void ompi_init_thread_f P_INIT_THREAD { f_init_thread(required, provided, ierr); }
void ompi_finalize_f P_INIT { f_finalize(ierr); }
void ompi_allreduce_f P_ALLREDUCE { f_allreduce(sendbuf, recvbuf, count, datatype, op, comm, ierr); }
void ompi_bcast_f P_BCAST { f_bcast(buf, count, datatype, root, comm, ierr); }
