#!/bin/sh
# Jobs of real Horovod in one dedmpi swarm on loopback (docs/testing.md,
# "Real Horovod"). Outside CI: Horovod is no Debian package.
#
#   sh bench/horovod/run.sh LIB MIN_PEERS "NP1 NP2 ..." SCRIPT [ARGS...]
#
# One mpirun per NP, concurrently, LIB (libdedmpi.so) preloaded; the first
# listens on 127.0.0.1:7400 and every job joins it. Each job's RANK_OFFSET
# is the ranks before it; STEPS_LIST="S1 S2 ..." sets each job's STEPS.
# SEED seeds the model in every job; ROUND_TIMEOUT sets DEDMPI_ROUND_TIMEOUT.
# Logs go to $OUT (default /tmp/dedmpi-hvd), one per job.
set -eu
[ $# -ge 4 ] || { echo "usage: $0 LIB MIN_PEERS \"NP1 NP2 ...\" SCRIPT [ARGS...]" >&2; exit 2; }
lib=$1 minp=$2 nps=$3
shift 3
out=${OUT:-/tmp/dedmpi-hvd}
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
i=0 off=0 pids=""
for np in $nps; do
  listen=127.0.0.1:0
  [ $i -eq 0 ] && listen=127.0.0.1:7400
  steps=$(echo "${STEPS_LIST:-}" | awk -v k=$((i + 1)) '{print $k}')
  mpirun -np "$np" --oversubscribe --bind-to none -x LD_PRELOAD="$lib" -x DEDMPI_RUN=hvd \
    -x DEDMPI_LOG=info -x DEDMPI_LISTEN=$listen -x DEDMPI_JOIN=127.0.0.1:7400 \
    -x DEDMPI_MIN_PEERS="$minp" -x RANK_OFFSET=$off -x STEPS="${steps:-${STEPS:-20}}" \
    ${ROUND_TIMEOUT:+-x DEDMPI_ROUND_TIMEOUT=$ROUND_TIMEOUT} ${SEED:+-x SEED=$SEED} \
    /usr/bin/python3 "$@" >"$out/j$i.log" 2>&1 &
  pids="$pids $!"
  off=$((off + np))
  i=$((i + 1))
  [ $i -eq 1 ] && sleep 1
done
i=0
for p in $pids; do
  rc=0
  wait "$p" || rc=$?
  echo "job $i: exit $rc; $(grep -h 'CHECKSUM final' "$out/j$i.log" || echo 'no checksum')"
  i=$((i + 1))
done
