/*
 * mpi_cxx.c: a tiny libmpi_cxx.so.40 for dedmpi's standalone MPI.
 *
 * Debian's mpicxx links every C++ program against libmpi_cxx.so.40 (and
 * without --as-needed), so a trainer written in C++ against the C API
 * still needs one to load. Open MPI's own needs its internals; this one
 * defines what such a program references: three members of the C++
 * bindings that the headers' inline code names (eagerly, in vtables) and
 * two hooks those bindings would call in libmpi. The C++ bindings
 * themselves (MPI::Comm and the rest, removed from MPI-3) are not
 * provided: calling them is not supported.
 */
#define ABI_EXPORT __attribute__((visibility("default")))

/* MPI::Comm::Comm(), MPI::Win::Free(), MPI::Datatype::Free(). */
ABI_EXPORT void _ZN3MPI4CommC2Ev(void *self);
ABI_EXPORT void _ZN3MPI3Win4FreeEv(void *self);
ABI_EXPORT void _ZN3MPI8Datatype4FreeEv(void *self);
ABI_EXPORT void ompi_op_set_cxx_callback(void *op, void *fn);
ABI_EXPORT void ompi_mpi_cxx_op_intercept(void *in, void *inout, int *len, void *type);

void _ZN3MPI4CommC2Ev(void *self) { (void)self; }
void _ZN3MPI3Win4FreeEv(void *self) { (void)self; }
void _ZN3MPI8Datatype4FreeEv(void *self) { (void)self; }
void ompi_op_set_cxx_callback(void *op, void *fn) { (void)op, (void)fn; }
void ompi_mpi_cxx_op_intercept(void *in, void *inout, int *len, void *type) {
  (void)in, (void)inout, (void)len, (void)type;
}
