#!/usr/bin/env bash
# An uneven cluster on one machine: two one-thread local workers, one held to half a core of CPU time
# (--local-worker-cpus 0,0.5: the other unheld), decoding with -ts 1,1 against -ts auto, layer and tensor split,
# interleaved, with the plan's predicted tokens/s beside each measured figure:
#   bench/uneven.sh MODEL [repetitions] [rounds]
# Needs a writable cgroup cpu controller (root, cgroup v1 "cpu" or v2 with cpu enabled). Under -sm tensor
# every member computes at once, so this machine is held to half a core too (three members, 2 cores of
# CPU time: none waits for a core); under -sm layer one node runs at a time and this machine is not held.
# Every node runs 1 thread. Speeds are measured once per host and CPU share (strata worker's log).
set -euo pipefail
cd "$(dirname "$0")/.."
STRATA=${STRATA:-build/src/cli/strata}
MODEL=${1:?usage: bench/uneven.sh MODEL [repetitions] [rounds]}
REPS=${2:-3}
ROUNDS=${3:-2}

# A cgroup holding this machine (the coordinator) to half a core, with a 10 ms period (as CpuShare).
share_dir() {
  for root in /sys/fs/cgroup/cpu /sys/fs/cgroup/cpu,cpuacct; do
    if [[ -w $root/cgroup.procs ]]; then
      local d=$root/strata-bench-coordinator
      mkdir -p "$d" && echo 10000 >"$d/cpu.cfs_period_us" && echo 5000 >"$d/cpu.cfs_quota_us" && echo "$d" && return
    fi
  done
  local d=/sys/fs/cgroup/strata-bench-coordinator
  echo +cpu >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
  mkdir -p "$d" && echo "5000 10000" >"$d/cpu.max" && echo "$d" && return
  echo "no writable cgroup cpu controller" >&2
  exit 1
}
COORD=$(share_dir)
trap 'rmdir "$COORD" 2>/dev/null || true' EXIT

run() {  # split-mode ts -> "predicted measured"
  local sm=$1 ts=$2 held=""
  [[ $sm == tensor ]] && held="echo \$\$ > $COORD/cgroup.procs;"
  local out
  out=$(sh -c "$held exec \"$STRATA\" bench -m \"$MODEL\" -p 0 -n 32 -r $REPS -t 1 -sm $sm --local-workers 2 \
        --local-worker-cpus 0,0.5 ${ts:+-ts $ts} -o json" 2>&1)
  local predicted measured
  predicted=$(grep -o 'predicted: [0-9.]* tokens/s' <<<"$out" | head -1 | awk '{print $2}')
  measured=$(grep -o '"avg_ts": *[0-9.]*' <<<"$out" | tail -1 | awk -F: '{print $2}' | tr -d ' ')
  echo "$predicted $measured"
}

echo "| split | -ts | predicted t/s | measured t/s | measured / predicted |"
echo "|---|---|---|---|---|"
for ((r = 0; r < ROUNDS; ++r)); do
  for sm in layer tensor; do
    for ts in 1,1 auto; do
      read -r p m < <(run "$sm" "$ts")
      echo "| $sm | $ts | $p | $m | $(awk -v p="$p" -v m="$m" 'BEGIN { if (p > 0) printf "%.2f", m / p }') |"
    done
  done
done
