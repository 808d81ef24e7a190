# shellcheck shell=bash
# passthrough_common.sh: sourced by the *_passthrough.sh tests.
#
# Each test runs one real MPI program twice with `mpirun --oversubscribe
# -np 2` in fresh directories, once plain and once with a library
# preloaded, and compares the parts of the output that do not depend on
# timing. A program that never makes a large float sum must behave exactly
# as without the shim (docs/architecture.md, "Routing"), so any difference
# is a failure.
#
# Exit codes: 0 equal, 1 different or a run failed, 77 program not
# installed (ctest's SKIP_RETURN_CODE).

set -euo pipefail

# pt_init NAME LIB PROGRAM: checks the inputs, sets up the environment and
# a scratch directory ($pt_work) that is removed on exit.
pt_init() {
  pt_name=$1
  local lib=${2:-} program=$3
  if [[ -z $lib ]]; then
    echo "usage: $pt_name.sh LIBRARY_TO_PRELOAD" >&2
    exit 1
  fi
  if ! command -v "$program" >/dev/null 2>&1; then
    echo "SKIP: $program is not installed"
    exit 77
  fi
  command -v mpirun >/dev/null 2>&1 || { echo "FAIL: mpirun not found" >&2; exit 1; }
  # ld.so only warns about a preload it cannot open and runs the program
  # anyway, which would make the test pass without testing anything.
  if [[ ! -f $lib || ! -r $lib ]]; then
    echo "FAIL: cannot read library to preload: $lib" >&2
    exit 1
  fi
  pt_lib=$(realpath "$lib")

  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  # One thread per rank: two ranks share the machine, and threaded
  # libraries have no business changing the numbers we compare.
  export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
  # If the preload is dedmpi: keep its swarm on loopback and apart from
  # any other test running at the same time. Other libraries ignore these.
  export DEDMPI_RUN=${DEDMPI_RUN:-$pt_name-$$}
  export DEDMPI_LISTEN=${DEDMPI_LISTEN:-127.0.0.1:0}

  pt_work=$(mktemp -d "${TMPDIR:-/tmp}/$pt_name.XXXXXX")
  trap 'rm -rf "$pt_work"' EXIT
}

# pt_run LABEL PRELOAD(yes|no) PROGRAM [ARGS...]: runs the program with
# two ranks in $pt_work/LABEL (which the caller has filled with inputs);
# stdout and stderr go to LABEL/mpirun.out and mpirun.err. Any failure
# ends the test.
pt_run() {
  local label=$1 preload=$2
  shift 2
  local dir=$pt_work/$label
  local -a mpi=(mpirun --oversubscribe -np 2 --timeout "${PT_TIMEOUT_S:-120}"
    -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS)
  if [[ $preload == yes ]]; then
    # PT_PRELOAD_EXTRA: libraries that must load first (the sanitizer
    # runtimes, when the library under test is a sanitizer build).
    mpi+=(-x "LD_PRELOAD=${PT_PRELOAD_EXTRA:+$PT_PRELOAD_EXTRA }$pt_lib" -x DEDMPI_RUN
      -x DEDMPI_LISTEN -x ASAN_OPTIONS=detect_leaks=0)
  fi
  local rc=0
  (cd "$dir" && "${mpi[@]}" "$@") >"$dir/mpirun.out" 2>"$dir/mpirun.err" || rc=$?
  if ((rc != 0)); then
    echo "FAIL: $label run exited with $rc: ${mpi[*]} $*" >&2
    tail -n 30 "$dir/mpirun.out" "$dir/mpirun.err" >&2
    exit 1
  fi
  if grep -q 'cannot be preloaded' "$dir/mpirun.err"; then
    echo "FAIL: $label run: the library was not preloaded" >&2
    cat "$dir/mpirun.err" >&2
    exit 1
  fi
}

# pt_compare PLAIN PRELOADED: the extracted results must be identical.
pt_compare() {
  if diff -a -u --label plain --label "preloaded $pt_lib" "$1" "$2"; then
    echo "PASS: $pt_name: $(wc -l <"$1") result lines identical with $pt_lib preloaded"
    return 0
  fi
  echo "FAIL: $pt_name: results differ with $pt_lib preloaded (diff above)" >&2
  exit 1
}
