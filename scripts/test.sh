#!/bin/sh
# Builds dedmpi and runs every test tier (docs/testing.md): unit, sim, mp,
# mpi and fuzz, first in a normal build, then the whole suite again in an
# AddressSanitizer + UndefinedBehaviorSanitizer build, then each libFuzzer
# target for a short while. Exits non-zero if anything fails.
#   FUZZ_SECONDS  seconds per fuzz target (default 10)
#   SIM_SEEDS     seeds of the simulator tier (default 500; SIM_SEEDS_ASAN, 100, under ASan)
#   CHAOS_SEEDS   seeds of its fault-schedule part (default 400; CHAOS_SEEDS_ASAN, 50, under ASan)
set -eu
cd "$(dirname "$0")/.."
sh scripts/setup.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
jobs=$(nproc)
SIM_SEEDS=${SIM_SEEDS:-500}
CHAOS_SEEDS=${CHAOS_SEEDS:-400}

step() { printf '\n==== %s\n' "$*"; }

step "release build"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDEDMPI_SIM_SEEDS="$SIM_SEEDS" \
  -DDEDMPI_CHAOS_SEEDS="$CHAOS_SEEDS" >/dev/null
cmake --build build -j"$jobs"
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

step "all tests passed"
