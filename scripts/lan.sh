#!/usr/bin/env bash
# A LAN on one machine: N network namespaces (strata-lan0 .. strata-lanN-1, 10.77.0.10+i/24) joined by
# veth pairs to one bridge, each with `tc netem` on its egress, so every packet between two nodes
# is delayed once by DELAY and paced at RATE, as on a switched Ethernet. Needs root and iproute2
# (ip, tc) with the kernel's sch_netem. Node 0 is meant for the coordinator, the rest for workers.
#
# Usage:
#   scripts/lan.sh up N [DELAY [RATE]]   e.g. up 3 0.15ms 1gbit (the defaults)
#   scripts/lan.sh exec I CMD...         run CMD in node I's namespace
#   scripts/lan.sh bench N MODEL [strata bench args...]
#       up N, a worker (1 thread) in each of nodes 1..N-1, `strata bench --rpc ...` in node 0, down
#   scripts/lan.sh down                  remove everything `up` made (also run on exit of `bench`)
# STRATA (default build/src/cli/strata) is the binary; the workers map MODEL from its folder
# (--model-dir), as machines with their own copy would.
# LAN_NETEM=0 skips netem (plain veth links), for kernels without sch_netem: the namespaces, routes
# and commands still run, only without the delay and rate.
set -euo pipefail
cd "$(dirname "$0")/.."
STRATA=${STRATA:-build/src/cli/strata}
PREFIX=strata-lan
BRIDGE=strata-lanbr

die() { echo "lan.sh: $*" >&2; exit 1; }
addr() { echo "10.77.0.$((10 + $1))"; }

down() {
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$PREFIX" || true); do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
  ip link del "$BRIDGE" 2>/dev/null || true
  for l in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | grep "^${PREFIX}v" | cut -d@ -f1 || true); do
    ip link del "$l" 2>/dev/null || true
  done
}

up() {
  local n=$1 delay=${2:-0.15ms} rate=${3:-1gbit}
  [ "$n" -ge 2 ] && [ "$n" -le 16 ] || die "N must be 2..16"
  command -v ip >/dev/null && command -v tc >/dev/null || die "needs iproute2 (ip, tc)"
  [ "$(id -u)" -eq 0 ] || die "needs root (network namespaces)"
  down
  ip link add "$BRIDGE" type bridge
  ip link set "$BRIDGE" up
  for ((i = 0; i < n; i++)); do
    local ns=$PREFIX$i host=${PREFIX}v$i peer=${PREFIX}p$i
    ip netns add "$ns"
    ip link add "$host" type veth peer name "$peer"
    ip link set "$host" master "$BRIDGE" up
    ip link set "$peer" netns "$ns"
    ip -n "$ns" addr add "$(addr "$i")/24" dev "$peer"
    ip -n "$ns" link set "$peer" up
    ip -n "$ns" link set lo up
    # netem on the node's egress only: one delay per packet between any two nodes.
    [ "${LAN_NETEM:-1}" = 0 ] && continue
    if ! ip netns exec "$ns" tc qdisc add dev "$peer" root netem delay "$delay" rate "$rate" limit 100000 2>/tmp/lan-netem.err; then
      down
      die "tc netem failed ($(cat /tmp/lan-netem.err)); this kernel lacks sch_netem (CONFIG_NET_SCH_NETEM)"
    fi
  done
  local how="netem delay $delay one way, rate $rate"
  [ "${LAN_NETEM:-1}" = 0 ] && how="no netem (LAN_NETEM=0): plain veth"
  echo "lan.sh: $n nodes up ($(addr 0) .. $(addr $((n - 1)))), $how"
}

bench() {
  local n=$1 model=$2
  shift 2
  [ -f "$model" ] || die "no model file '$model'"
  trap down EXIT
  up "$n"
  local token rpc="" pids=()
  token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
  for ((i = 1; i < n; i++)); do
    ip netns exec "$PREFIX$i" "$STRATA" worker --host "$(addr "$i")" --port 50052 -t 1 --token "$token" \
      --model-dir "$(dirname "$model")" \
      >"/tmp/lan-worker-$i.log" 2>&1 &
    pids+=($!)
    rpc+="${rpc:+,}$(addr "$i"):50052"
  done
  for ((i = 1; i < n; i++)); do
    for _ in $(seq 100); do grep -q "listening" "/tmp/lan-worker-$i.log" && break; sleep 0.1; done
  done
  ip netns exec "${PREFIX}0" "$STRATA" bench -m "$model" --rpc "$rpc" --token "$token" "$@"
  kill "${pids[@]}" 2>/dev/null || true
}

case "${1:-}" in
  up) shift; up "$@" ;;
  down) down ;;
  exec) shift; i=$1; shift; ip netns exec "$PREFIX$i" "$@" ;;
  bench) shift; bench "$@" ;;
  *) sed -n '2,19p' "$0"; exit 2 ;;
esac
