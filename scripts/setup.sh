#!/bin/sh
# Installs what dedmpi needs to build and test, from Debian 12's own
# packages, on a fresh machine (as root). Safe to run again: packages that
# are present are skipped, and apt is not touched at all when nothing is
# missing.
set -eu

PACKAGES="
  build-essential cmake pkg-config
  libopenmpi-dev openmpi-bin
  libsodium-dev liblpsolve55-dev
  libcmocka-dev
  python3 python3-mpi4py python3-numpy
  clang libclang-rt-14-dev
  lammps hpcc
  iproute2 iputils-ping nftables
  gfortran
  chromium
"

missing=""
for p in $PACKAGES; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "setup: missing packages:$missing" >&2
    echo "setup: run as root (or install them) and try again" >&2
    exit 1
  fi
  echo "setup: installing$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
