#!/bin/bash
# hpcc_passthrough.sh LIB: the HPC Challenge benchmark must reach the same
# numerical results with LIB preloaded as without it.
#
#   plain:     mpirun --oversubscribe -np 2 hpcc      (reads hpccinf.txt)
#   preloaded: the same with -x LD_PRELOAD=LIB
#
# hpcc is the broadest MPI client we have: Allreduce (mostly 4-byte),
# Alltoall, Bcast, Reduce, Gather, Sendrecv, Isend/Irecv with Iprobe and
# Testany, Comm_split, user-defined ops and derived datatypes. None of its
# reductions is big enough for dedmpi to route, so all must pass through.
#
# Input: Debian's example hpccinf.txt shrunk (HPL N 1000 -> 500, P x Q
# 2x2 -> 1x2), about half a second for both ranks. hpcc appends to hpccoutf.txt, so
# each run gets a fresh directory.
#
# Compared, from hpccoutf.txt; everything here was identical in six plain
# runs:
#  - Summary keys that are verdicts: Success; HPL's residual norms
#    (HPL_RnormI and the A/x/b norms); PTRANS_residual; the RandomAccess
#    error counts; MPIFFT_maxErr.
#  - Summary keys that are problem sizes and process grids: CommWorldProcs,
#    HPL_N/NB/nprow/npcol and the other HPL_* run parameters, DGEMM_N,
#    PTRANS_n/nb/nprow/npcol, the RandomAccess table sizes and update counts
#    (fixed unless a run hits the 60 s time bound), STREAM_VectorSize,
#    FFT_N, MPIFFT_N, MPIFFT_Procs.
#  - Body lines: the HPL scaled residual with PASSED/FAILED (7 decimals,
#    more than the Summary gives), the "tests completed and passed/failed
#    residual checks" counts (HPL and PTRANS), RandomAccess "Found N errors
#    in M locations", "Node(s) with error", STREAM "Solution Validates",
#    both FFT max(|x-x0|), and the processor counts and table/vector sizes.
# Not compared: every time, rate (Gflop/s, GUP/s, GB/s), latency and
# bandwidth; dates, "Current time", hostname, compile date; build constants
# (sizeof_*, *MACH*, CPS_*, Version*), which no MPI call can change; and
# StarDGEMM's "Scaled residual", which changes from one plain run to the
# next (its matrices are seeded from the clock); and the rows of the PTRANS
# table, whose WALL and CPU rows come in a varying order and, in about one
# plain run in ten, one fewer (PTRANS's verdicts are compared through its
# "tests completed" counts and PTRANS_residual).
#
# Checked that the comparison can fail (hpcc 1.5.0, Open MPI 4.1.4):
#  - PT_PERTURB=1 gives the preloaded run HPL N = 520 (which also resizes
#    the other tests): sizes, the HPL residual and norms, both FFT errors
#    differ, exit 1.
#  - a preload that moves every MPI_DOUBLE MPI_Allreduce result up by 1
#    ulp: PTRANS_residual 0 -> 4.94066e-324, exit 1.
#  - a preload that adds 1 to every MPI_INT MPI_SUM MPI_Allreduce result:
#    most of the output differs or is missing, exit 1.
#  - a preload that does nothing (a bare .so): exit 0. So does the dedmpi
#    shim of this tree.
#  - a missing library, or a run that fails: exit 1; hpcc not on PATH:
#    exit 77.
# Limit: scaling double sums by 1 + 2^-20 passes here (the double
# Allreduce results we compare are 0, like PTRANS's residual, or printed to
# 6 digits, like MPIFFT_maxErr); the LAMMPS test catches that one.
#
# Environment: PT_PERTURB=1 (self-check above), PT_TIMEOUT_S (per run,
# default 120).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=passthrough_common.sh
. "$here/passthrough_common.sh"

pt_init hpcc_passthrough "${1:-}" hpcc

# Debian's example input, or the same text when /usr/share/doc is not
# installed (minimal images drop it); either way shrunk to N=500 on 1x2.
example=/usr/share/doc/hpcc/examples/_hpccinf.txt
write_input() {
  local src=$example
  if [[ ! -r $src ]]; then
    src=$pt_work/_hpccinf.txt
    cat >"$src" <<'EOF'
HPLinpack benchmark input file
Innovative Computing Laboratory, University of Tennessee
HPL.out      output file name (if any)
8            device out (6=stdout,7=stderr,file)
1            # of problems sizes (N)
1000         Ns
1            # of NBs
80           NBs
0            PMAP process mapping (0=Row-,1=Column-major)
1            # of process grids (P x Q)
2            Ps
2            Qs
16.0         threshold
1            # of panel fact
2            PFACTs (0=left, 1=Crout, 2=Right)
1            # of recursive stopping criterium
4            NBMINs (>= 1)
1            # of panels in recursion
2            NDIVs
1            # of recursive panel fact.
1            RFACTs (0=left, 1=Crout, 2=Right)
1            # of broadcast
1            BCASTs (0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)
1            # of lookahead depth
1            DEPTHs (>=0)
2            SWAP (0=bin-exch,1=long,2=mix)
64           swapping threshold
0            L1 in (0=transposed,1=no-transposed) form
0            U  in (0=transposed,1=no-transposed) form
1            Equilibration (0=no,1=yes)
8            memory alignment in double (> 0)
##### This line (no. 32) is ignored (it serves as a separator). ######
0                      		Number of additional problem sizes for PTRANS
1200 10000 30000        	values of N
0                       	number of additional blocking sizes for PTRANS
40 9 8 13 13 20 16 32 64       	values of NB
EOF
  fi
  sed -e 's/^1000         Ns/500          Ns/' -e 's/^2            Ps/1            Ps/' \
    "$src" >"$1/hpccinf.txt"
}

# Summary keys compared; see the header.
summary_keys=(
  Success HPL_RnormI HPL_Anorm1 HPL_AnormI HPL_Xnorm1 HPL_XnormI HPL_BnormI
  PTRANS_residual MPIRandomAccess_Errors MPIRandomAccess_ErrorsFraction
  MPIRandomAccess_LCG_Errors MPIRandomAccess_LCG_ErrorsFraction MPIFFT_maxErr
  CommWorldProcs HPL_N HPL_NB HPL_nprow HPL_npcol HPL_depth HPL_nbdiv HPL_nbmin
  HPL_cpfact HPL_crfact HPL_ctop HPL_order HPLMaxProcs HPLMinProcs DGEMM_N
  PTRANS_n PTRANS_nb PTRANS_nprow PTRANS_npcol
  MPIRandomAccess_N MPIRandomAccess_ExeUpdates MPIRandomAccess_LCG_N
  MPIRandomAccess_LCG_ExeUpdates RandomAccess_N RandomAccess_LCG_N
  STREAM_VectorSize FFT_N MPIFFT_N MPIFFT_Procs
)

# The deterministic part of hpccoutf.txt: see the header for what and why.
extract() {
  awk -v keys="${summary_keys[*]}" '
    BEGIN { n = split(keys, k, " "); for (i = 1; i <= n; i++) want[k[i]] = 1 }
    /^Begin of Summary section/ { in_summary = 1; next }
    /^End of Summary section/ { in_summary = 0; next }
    in_summary {
      split($0, kv, "=")
      if (kv[1] in want) print "summary " $0
      next
    }
    /^\|\|Ax-b\|\|_oo\/\(eps/ ||
    /tests completed and (passed|failed) residual checks/ ||
    /tests skipped because of illegal input values/ ||
    /^Found [0-9]+ errors in [0-9]+ locations/ ||
    /^Node\(s\) with error/ ||
    /^Solution Validates/ ||
    /^max\(\|x-x0\|\)/ ||
    /^Running on [0-9]+ processors/ ||
    /[Tt]able size/ || /^Number of updates/ ||
    /^Array size/ || /^Vector size/ || /^Number of nodes/ {
      gsub(/[ \t]+/, " "); print "body " $0
    }
  ' "$1"
}

for run in plain preloaded; do
  mkdir "$pt_work/$run"
  write_input "$pt_work/$run"
done
if [[ ${PT_PERTURB:-0} == 1 ]]; then
  sed -i 's/^500          Ns/520          Ns/' "$pt_work/preloaded/hpccinf.txt"
fi
if ! grep -q '^500 ' "$pt_work/plain/hpccinf.txt"; then
  echo "FAIL: could not shrink the hpcc input" >&2
  exit 1
fi
pt_run plain no hpcc
pt_run preloaded yes hpcc

for run in plain preloaded; do
  extract "$pt_work/$run/hpccoutf.txt" >"$pt_work/$run.results"
done
# Guard against comparing two incomplete outputs: the plain run must have
# written every Summary key we compare.
got=$(grep -c '^summary ' "$pt_work/plain.results" || true)
if ((got != ${#summary_keys[@]})); then
  echo "FAIL: plain hpccoutf.txt has $got of ${#summary_keys[@]} Summary keys" >&2
  tail -n 40 "$pt_work/plain/hpccoutf.txt" >&2
  exit 1
fi
pt_compare "$pt_work/plain.results" "$pt_work/preloaded.results"
