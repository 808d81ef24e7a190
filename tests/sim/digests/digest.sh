#!/bin/sh
# The simulator's trace digests (tests/sim/sim.h): a refactor that changes
# no behaviour leaves every seed's digest as recorded here.
#
#   sh tests/sim/digests/digest.sh check  BUILD [AVG_SEEDS [CHAOS_SEEDS]]
#   sh tests/sim/digests/digest.sh record BUILD
#
# check runs the first AVG_SEEDS sim_avg and CHAOS_SEEDS sim_chaos seeds
# (default: every seed recorded, 2000 of each) of BUILD (a build
# directory) and compares their digests with sim_avg.txt and
# sim_chaos.txt; it names the seeds that differ and exits 1 if any does.
# record writes those files anew from 2000 seeds of each: do it in the
# commit that changes behaviour on purpose, and say why there.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
mode=${1:-}
build=${2:-}
if [ "$mode" != check ] && [ "$mode" != record ] || [ -z "$build" ]; then
  echo "usage: $0 check BUILD [AVG_SEEDS [CHAOS_SEEDS]] | record BUILD" >&2
  exit 2
fi
bin="$build/tests/sim"
for b in sim_avg sim_chaos; do
  [ -x "$bin/$b" ] || { echo "digest: $bin/$b not built" >&2; exit 2; }
done
avg=${3:-2000}
chaos=${4:-2000}
if [ "$mode" = record ]; then
  avg=2000
  chaos=2000
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Two halves of the chaos seeds at once: they dominate the time. Each
# run's own checks count too: a seed that fails them is never recorded.
half=$(( (chaos + 1) / 2 ))
"$bin/sim_chaos" --weak-liveness --digest --seeds "$half" >"$tmp/c1.out" 2>&1 &
c1=$!
"$bin/sim_chaos" --weak-liveness --digest --first $((half + 1)) --seeds $((chaos - half)) \
  >"$tmp/c2.out" 2>&1 &
c2=$!
rc=0
"$bin/sim_avg" --digest --seeds "$avg" >"$tmp/a.out" 2>&1 || rc=1
wait $c1 || rc=1
wait $c2 || rc=1
if [ $rc -ne 0 ]; then
  grep -h -i 'fail' "$tmp/a.out" "$tmp/c1.out" "$tmp/c2.out" | head -n 20 >&2
  echo "digest: a simulator run failed its own checks; nothing compared or recorded" >&2
  exit 1
fi
grep '^seed ' "$tmp/a.out" >"$tmp/sim_avg.txt"
cat "$tmp/c1.out" "$tmp/c2.out" | grep '^seed ' >"$tmp/sim_chaos.txt"
if [ "$mode" = record ]; then
  cp "$tmp/sim_avg.txt" "$tmp/sim_chaos.txt" "$here/"
  echo "digest: recorded $(wc -l <"$here/sim_avg.txt") sim_avg and $(wc -l <"$here/sim_chaos.txt") sim_chaos seeds"
  exit 0
fi
bad=0
for t in sim_avg sim_chaos; do
  n=$(wc -l <"$tmp/$t.txt")
  head -n "$n" "$here/$t.txt" >"$tmp/$t.want"
  if [ "$(wc -l <"$tmp/$t.want")" -ne "$n" ]; then
    echo "digest: $t: only $(wc -l <"$tmp/$t.want") seeds recorded, $n asked" >&2
    bad=1
    continue
  fi
  diff "$tmp/$t.want" "$tmp/$t.txt" | sed -n "s/^> seed \([0-9]*\) .*/  $t seed \1 differs/p" >"$tmp/$t.diff" || true
  d=$(wc -l <"$tmp/$t.diff")
  echo "digest: $t: $n seeds, $d differ"
  if [ "$d" -ne 0 ]; then
    head -n 20 "$tmp/$t.diff"
    bad=1
  fi
done
exit $bad
