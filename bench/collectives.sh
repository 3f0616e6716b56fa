#!/usr/bin/env bash
# Issue 14's choice of collective library: installs Gloo, Open MPI and UCX (Debian packages),
# builds bench/collectives/collective_latency.cpp and measures a 4-16 KB all-reduce and all-gather
# between two processes on this machine through each candidate, over TCP (what a LAN gives) and,
# for reference, through shared memory. Run it on a quiet machine.
#   bench/collectives.sh [ITERATIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
iters=${1:-5000}
pkgs=(libgloo-dev libopenmpi-dev openmpi-bin libucx-dev)
missing=()
for p in "${pkgs[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p"); done
if ((${#missing[@]})); then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
build=build-collectives
cmake -S bench/collectives -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" >/dev/null
bin=$build/collective_latency

pair() {  # pair LABEL BACKEND [env...]: both ranks on this machine, rendezvous in a fresh directory
  local label=$1 backend=$2 dir
  shift 2
  dir=$(mktemp -d)
  env "$@" "$bin" "$backend" 1 "$dir" "$iters" >/dev/null &
  env "$@" "$bin" "$backend" 0 "$dir" "$iters" | sed "s/^$backend /$label /"
  wait
  rm -rf "$dir"
}
mpi() {  # mpi LABEL MCA-ARGS...
  local label=$1
  shift
  mpirun --allow-run-as-root --oversubscribe -np 2 "$@" "$bin" mpi 0 /tmp "$iters" | sed "s/^mpi   /$label /"
}

echo "# over TCP (loopback)"
pair tcp tcp
pair gloo gloo
pair ucx-tcp ucx UCX_TLS=tcp
mpi mpi-tcp --mca pml ob1 --mca btl tcp,self
echo "# through shared memory (one machine only; for reference)"
pair ucx-shm ucx UCX_TLS=sm,self
mpi mpi-shm --mca pml ob1 --mca btl vader,self
