#!/bin/sh
# Builds dedmpi and runs every test tier (docs/testing.md): unit, sim, mp,
# mpi and fuzz, first in a normal build, then the whole suite again in an
# AddressSanitizer + UndefinedBehaviorSanitizer build, then each libFuzzer
# target for a short while. Exits non-zero if anything fails.
#   FUZZ_SECONDS  seconds per fuzz target (default 10)
#   SIM_SEEDS     seeds of the simulator tier (default 500; SIM_SEEDS_ASAN, 100, under ASan)
#   CHAOS_SEEDS   seeds of its fault-schedule part (default 400; CHAOS_SEEDS_ASAN, 50, under ASan)
#   STRICT_SEEDS  seeds of the strict fault-schedule tier in all (default 2000): those past
#                 CHAOS_SEEDS run in the background, at the lowest priority, beside the rest
set -eu
cd "$(dirname "$0")/.."
sh scripts/setup.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
jobs=$(nproc)
SIM_SEEDS=${SIM_SEEDS:-500}
CHAOS_SEEDS=${CHAOS_SEEDS:-400}
STRICT_SEEDS=${STRICT_SEEDS:-2000}
bg=""
trap 'for p in $bg; do kill "$p" 2>/dev/null || true; done' EXIT

step() { printf '\n==== %s\n' "$*"; }

step "release build"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDEDMPI_SIM_SEEDS="$SIM_SEEDS" \
  -DDEDMPI_CHAOS_SEEDS="$CHAOS_SEEDS" >/dev/null
cmake --build build -j"$jobs"

# The strict fault-schedule tier (docs/testing.md): ctest runs seeds 1 to
# CHAOS_SEEDS; the rest, up to STRICT_SEEDS, run here in two processes at
# nice 19. The real-process tests mostly wait on timers, and leave the
# cores idle for as long as these need; checked at the end.
rest=$((STRICT_SEEDS - CHAOS_SEEDS))
if [ "$rest" -gt 0 ]; then
  step "strict fault-schedule tier: seeds $((CHAOS_SEEDS + 1)) to $STRICT_SEEDS, in the background"
  half=$(((rest + 1) / 2))
  rm -f build/strict-*.txt
  nice -n 19 build/tests/sim/sim_chaos --first $((CHAOS_SEEDS + 1)) --seeds "$half" \
    >build/strict-1.txt 2>&1 &
  bg="$bg $!"
  if [ "$rest" -gt "$half" ]; then
    nice -n 19 build/tests/sim/sim_chaos --first $((CHAOS_SEEDS + 1 + half)) \
      --seeds $((rest - half)) >build/strict-2.txt 2>&1 &
    bg="$bg $!"
  fi
fi

step "tests (release build)"
ctest --test-dir build --output-on-failure -j"$jobs"

step "sanitizer build (ASan + UBSan)"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DDEDMPI_SANITIZE=ON \
  -DDEDMPI_SIM_SEEDS="${SIM_SEEDS_ASAN:-100}" -DDEDMPI_CHAOS_SEEDS="${CHAOS_SEEDS_ASAN:-50}" >/dev/null
cmake --build build-asan -j"$jobs"
step "tests (sanitizer build)"
ASAN_OPTIONS=detect_leaks=0 ctest --test-dir build-asan --output-on-failure -j"$jobs"

step "fuzzing (libFuzzer, ${FUZZ_SECONDS:-10} s per target)"
cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DDEDMPI_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build-fuzz -j"$jobs"
FUZZ_SECONDS=${FUZZ_SECONDS:-10} sh tests/fuzz/run.sh build-fuzz

if [ -n "$bg" ]; then
  step "strict fault-schedule tier: waiting for it"
  rc=0
  for p in $bg; do wait "$p" || rc=1; done
  bg=""
  grep -h -e '^FAIL' -e 'replay:' -e 'seeds, ' build/strict-*.txt || true
  [ "$rc" = 0 ] || { echo "the strict fault-schedule tier failed (build/strict-*.txt)"; exit 1; }
fi

step "all tests passed"
