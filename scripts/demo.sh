#!/bin/sh
# The demo: builds dedmpi, then trains one small model with three separate
# Open MPI jobs (2 + 1 + 1 ranks) on this machine that average their
# gradients through a dedmpi swarm on loopback. Watch the loss fall in
# every job, and the final parameter checksums agree bit for bit.
set -eu
cd "$(dirname "$0")/.."
sh scripts/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)" >/dev/null
exec /usr/bin/python3 scripts/demo.py --build "$BUILD_DIR" "$@"
