#!/bin/sh
# Runs sim_chaos on single seeds of named scenarios, strict liveness
# (SCENARIO:SEED:weak: the weak one; every safety check either way).
#   sh scenario_seeds.sh SIM_CHAOS SCENARIO:SEED[:weak]...
# Prints each seed's verdict; exits 1 if any failed.
set -u
bin=$1
shift
rc=0
for p in "$@"; do
  scen=${p%%:*}
  seed=${p#*:}
  weak=
  case $seed in
  *:weak) seed=${seed%:weak}; weak=--weak-liveness ;;
  esac
  if out=$("$bin" --scenario "$scen" --seed "$seed" $weak); then
    echo "ok   $scen seed $seed${weak:+ (weak liveness)}"
  else
    rc=1
    printf '%s\n' "$out" | grep -e '^FAIL' -e 'replay:'
  fi
done
exit $rc
