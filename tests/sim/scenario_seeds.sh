#!/bin/sh
# Runs sim_chaos on single seeds of named scenarios, strict liveness.
#   sh scenario_seeds.sh SIM_CHAOS SCENARIO:SEED...
# Prints each seed's verdict; exits 1 if any failed.
set -u
bin=$1
shift
rc=0
for p in "$@"; do
  scen=${p%%:*}
  seed=${p#*:}
  if out=$("$bin" --scenario "$scen" --seed "$seed"); then
    echo "ok   $scen seed $seed"
  else
    rc=1
    printf '%s\n' "$out" | grep -e '^FAIL' -e 'replay:'
  fi
done
exit $rc
