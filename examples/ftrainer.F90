! ftrainer.F90: a data-parallel loop in Fortran, the kind of program the
! shim is preloaded into. Built three times, once per Fortran binding of
! Open MPI (-DBIND_MPI: `use mpi`; -DBIND_F08: `use mpi_f08`;
! -DBIND_MPIFH: mpif.h), since each reaches MPI_ALLREDUCE by another path.
!
!   ftrainer SEED SEED_1 ... SEED_K
!
! Every step each rank makes a "gradient" of N reals from (SEED, step,
! index), all-reduces it in place (MPI_SUM over MPI_COMM_WORLD) and takes
! an SGD step; it also all-reduces a third of it in DOUBLE PRECISION, out
! of place (ftrainer_dp.F90). It checks every element of every result against the mean
! of the gradients the K jobs of the swarm (seeds SEED_1..SEED_K, one rank
! each) make, which is what dedmpi returns, and prints
!
!   fortran <binding> steps <S> mismatches <M> checksum <sum of parameters>
!
! Plain MPI (no swarm), a job sees only its own gradient: nearly every
! result is a mismatch (all 2 N S of them for seed 1 of seeds 1 3 5).
program ftrainer
#include "ftrainer_mpi.inc"
#if defined(BIND_F08)
#define BINDING "mpi_f08"
#elif defined(BIND_MPI)
#define BINDING "mpi"
#else
#define BINDING "mpif.h"
#endif
  integer, parameter :: n = 65536, steps = 20
  real, allocatable :: p(:), g(:)
  double precision, allocatable :: gd(:), hd(:)
  integer :: ierr, i, s, seed, nseeds, k, bad
  integer :: seeds(64)
  character(len=32) :: arg
  double precision :: want

  call MPI_Init(ierr)
  if (command_argument_count() < 2 .or. command_argument_count() > 65) then
    write(*,'(a)') 'usage: ftrainer SEED SEED_1 ... SEED_K'
    call MPI_Abort(MPI_COMM_WORLD, 2, ierr)
  end if
  call get_command_argument(1, arg)
  read(arg, *) seed
  nseeds = command_argument_count() - 1
  do k = 1, nseeds
    call get_command_argument(k + 1, arg)
    read(arg, *) seeds(k)
  end do
  allocate(p(n), g(n), gd(n), hd(n))
  p = 0.0
  bad = 0
  do s = 1, steps
    do i = 1, n
      g(i) = grad(seed, s, i)
      gd(i) = dble(g(i)) / 3d0
    end do
    call MPI_Allreduce(MPI_IN_PLACE, g, n, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, ierr)
    if (ierr /= MPI_SUCCESS) bad = bad + n
    ! The same in DOUBLE PRECISION (values that need it), out of place.
    call allreduce_dp(gd, hd, n, ierr)
    if (ierr /= MPI_SUCCESS) bad = bad + n
    do i = 1, n
      want = 0d0
      do k = 1, nseeds
        want = want + grad(seeds(k), s, i)
      end do
      if (abs(g(i) - want / nseeds) > 1d-6) bad = bad + 1
      if (abs(hd(i) - want / 3d0 / nseeds) > 1d-12) bad = bad + 1
    end do
    p = p - 0.5 * g
  end do
  write(*, '(a,a,a,i0,a,i0,a,es24.16)') 'fortran ', BINDING, ' steps ', steps, &
      ' mismatches ', bad, ' checksum ', sum(dble(p))
  call MPI_Finalize(ierr)

contains

  ! Multiples of 1/64 below 1: exact in a REAL, and so are sums of a few.
  real function grad(sd, st, i)
    integer, intent(in) :: sd, st, i
    grad = real(mod(i * 7 + st * 13 + sd * 31, 64)) / 64.0
  end function grad
end program ftrainer
