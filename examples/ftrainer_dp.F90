! ftrainer_dp.F90: ftrainer's DOUBLE PRECISION all-reduce, in a file of
! its own: mpif.h declares no interfaces, and gfortran (10 and later)
! refuses one external routine called with REAL and DOUBLE PRECISION
! buffers in the same file.
subroutine allreduce_dp(sendbuf, recvbuf, n, ierr)
#include "ftrainer_mpi.inc"
  integer, intent(in) :: n
  double precision, intent(in) :: sendbuf(n)
  double precision, intent(out) :: recvbuf(n)
  integer, intent(out) :: ierr
  call MPI_Allreduce(sendbuf, recvbuf, n, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
end subroutine allreduce_dp
