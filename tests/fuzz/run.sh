#!/bin/sh
# run.sh: runs every fuzz target for a while, over a copy of its corpus.
#
# Usage: tests/fuzz/run.sh BUILD_DIR [TARGET...]
#   BUILD_DIR  configured with -DDEDMPI_FUZZ=ON -DCMAKE_C_COMPILER=clang and built
#   TARGET     frame msg record node noise chan invite http image (default: all)
# Environment:
#   FUZZ_SECONDS  time per target (default 20)
#   FUZZ_OUT      where corpora, logs and crashing inputs go
#                 (default BUILD_DIR/fuzz-out; rewritten on each run)
#   FUZZ_ARGS     extra libFuzzer flags, e.g. "-use_value_profile=1"
#
# The committed corpora (tests/fuzz/corpus) are never written: each target
# gets a fresh copy, so a run cannot pollute them. Exits nonzero if any
# target crashed, leaked, timed out or failed a check, after printing the
# path of the input that did it (replay it with the target, or with
# fuzz_<target>_replay in any build).
set -u

if [ $# -lt 1 ]; then
  sed -n '2,/^set -u/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'
  exit 2
fi
build=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
seconds=${FUZZ_SECONDS:-20}
out=${FUZZ_OUT:-$build/fuzz-out}
targets=${*:-frame msg record node noise chan invite http image ckpt codec}
failed=""

for t in $targets; do
  bin=$build/tests/fuzz/fuzz_$t
  if [ ! -x "$bin" ]; then
    echo "run.sh: $bin missing: configure $build with -DDEDMPI_FUZZ=ON -DCMAKE_C_COMPILER=clang" >&2
    exit 2
  fi
  dir=$out/$t
  rm -rf "$dir"
  mkdir -p "$dir/corpus" "$dir/crashes"
  cp "$here/corpus/$t"/* "$dir/corpus/"
  seeds=$(find "$dir/corpus" -type f | wc -l)
  # -timeout: one input taking longer is a hang; -max_len: room for a
  # conversation of several frames, not just one.
  # shellcheck disable=SC2086
  "$bin" -max_total_time="$seconds" -timeout=10 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$dir/crashes/" ${FUZZ_ARGS:-} "$dir/corpus" >"$dir/log" 2>&1
  rc=$?
  # libFuzzer prints "#N INITED cov: C ft: F ..." once the seeds are in,
  # and "#N DONE cov: C ft: F ..." at the end.
  cov='s/.*cov: \([0-9]*\) ft: \([0-9]*\).*/cov \1 ft \2/p'
  inited=$(grep -m1 'INITED' "$dir/log" | sed -n "$cov")
  done_=$(grep 'DONE' "$dir/log" | tail -1 | sed -n "$cov")
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$dir/log" | tail -1)
  corpus=$(find "$dir/corpus" -type f | wc -l)
  printf '%-7s %s: seeds %s -> corpus %s; %s -> %s; %s execs (%s/s)\n' "$t" \
    "$([ $rc -eq 0 ] && echo ok || echo FAILED)" "$seeds" "$corpus" "${inited:-?}" \
    "${done_:-?}" "${execs:-?}" "${rate:-?}"
  if [ $rc -ne 0 ]; then
    failed="$failed $t"
    grep -E 'ERROR|SUMMARY|check failed|assertion failed' "$dir/log" | head -5 | sed 's/^/    /'
    for a in "$dir"/crashes/*; do
      [ -e "$a" ] && echo "    crashing input: $a"
    done
    echo "    log: $dir/log"
  fi
done

if [ -n "$failed" ]; then
  echo "run.sh: failed:$failed" >&2
  exit 1
fi
