#!/bin/bash
# lammps_passthrough.sh LIB: LAMMPS's melt example must print the same
# physics with LIB preloaded as without it.
#
#   plain:     mpirun --oversubscribe -np 2 lmp -in in.melt -log log.lammps -screen none
#   preloaded: the same with -x LD_PRELOAD=LIB
#
# LAMMPS makes only small MPI_Allreduce calls (4-32 bytes: thermo sums,
# neighbour counts), none of which dedmpi may route, plus halo exchange,
# Bcast, Scan and friends; all of it must pass through untouched.
#
# Compared (from log.lammps): the thermo table (header and rows: Step Temp
# E_pair E_mol TotEng Press, 8 significant digits every 50 of 250 steps;
# the dynamics is chaotic, so a wrong value anywhere shows up in later
# rows), the processor grid and atom count, the per-rank atom/ghost/
# neighbour statistics with their histograms, and the neighbour totals,
# which LAMMPS gathers with MPI_Allreduce. Not compared: "Loop time",
# "Performance", "% CPU use", the timing breakdown table, "create_atoms
# CPU", "Total wall time" and the LAMMPS banner.
#
# Checked that the comparison can fail (lmp 29 Sep 2021, Open MPI 4.1.4):
#  - PT_PERTURB=1 gives the preloaded run another velocity seed (87287 ->
#    87288): the thermo rows from step 50 on and the neighbour statistics
#    differ, exit 1.
#  - a preload that scales every MPI_DOUBLE MPI_Allreduce result by
#    1 + 2^-20: every thermo row and the neighbour totals differ, exit 1.
#  - a preload that adds 1 to every MPI_INT MPI_SUM MPI_Allreduce result:
#    the preloaded run fails, exit 1.
#  - a preload that does nothing (a bare .so, seen loaded in both ranks of
#    the preloaded run only): exit 0. So does the dedmpi shim of this tree.
#  - a missing library, a non-ELF file (ld.so "cannot be preloaded") or a
#    run that fails: exit 1; lmp not on PATH: exit 77.
# Limit: a preload that moves double sums by 1 ulp passes here, because
# LAMMPS uses those sums only for the 8 digits it prints (melt's dynamics
# needs no reduction); hpcc_passthrough.sh does catch that one.
#
# Environment: PT_PERTURB=1 (self-check above), PT_TIMEOUT_S (per run,
# default 120).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=passthrough_common.sh
. "$here/passthrough_common.sh"

pt_init lammps_passthrough "${1:-}" lmp

# The stock example or, when lammps-examples is absent, the same input
# without its commented-out dump commands.
melt=/usr/share/lammps/examples/melt/in.melt
write_input() {
  if [[ -r $melt ]]; then
    cp "$melt" "$1/in.melt"
  else
    cat >"$1/in.melt" <<'EOF'
# 3d Lennard-Jones melt

units		lj
atom_style	atomic

lattice		fcc 0.8442
region		box block 0 10 0 10 0 10
create_box	1 box
create_atoms	1 box
mass		1 1.0

velocity	all create 3.0 87287 loop geom

pair_style	lj/cut 2.5
pair_coeff	1 1 1.0 1.0 2.5

neighbor	0.3 bin
neigh_modify	every 20 delay 0 check no

fix		1 all nve

thermo		50
run		250
EOF
  fi
}

# The deterministic part of a log: see the header for what and why.
extract() {
  awk '
    /^Loop time of / { in_thermo = 0 }
    $1 == "Step" { in_thermo = 1 }
    in_thermo { print; next }
    /MPI processor grid$/ || /^Created [0-9]+ atoms/ { print; next }
    /^(Nlocal|Nghost|Neighs|Histogram):/ { print; next }
    /^(Total # of neighbors|Ave neighs\/atom|Neighbor list builds|Dangerous builds)/ { print }
  ' "$1"
}

lmp_args=(lmp -in in.melt -log log.lammps -screen none)
for run in plain preloaded; do
  mkdir "$pt_work/$run"
  write_input "$pt_work/$run"
done
if [[ ${PT_PERTURB:-0} == 1 ]]; then
  sed -i 's/create 3.0 87287/create 3.0 87288/' "$pt_work/preloaded/in.melt"
fi
pt_run plain no "${lmp_args[@]}"
pt_run preloaded yes "${lmp_args[@]}"

for run in plain preloaded; do
  extract "$pt_work/$run/log.lammps" >"$pt_work/$run.results"
done
# Guard against comparing two empty extractions: the run must have
# finished and printed its thermo table (a header and at least one row).
rows=$(awk '$1 == "Step" { t = 1; next } t && $1 ~ /^[0-9]+$/ { n++ } END { print n + 0 }' \
  "$pt_work/plain.results")
if ((rows < 1)) || ! grep -q '^Loop time of ' "$pt_work/plain/log.lammps"; then
  echo "FAIL: no thermo output in the plain run's log.lammps" >&2
  cat "$pt_work/plain/log.lammps" >&2
  exit 1
fi
pt_compare "$pt_work/plain.results" "$pt_work/preloaded.results"
