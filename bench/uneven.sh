#!/usr/bin/env bash
# An uneven cluster on one machine: this machine and one local worker held to half a core of CPU time
# (--local-worker-cpus 0.5), each with one thread, decoding with -ts 1,1 against -ts auto, layer and
# tensor split, interleaved, with the plan's predicted tokens/s beside each measured figure:
#   bench/uneven.sh MODEL [repetitions] [rounds] [depth]
# depth (llama-bench's -d, default 0): tokens already in the context; the plan balances and predicts
# for it (attention over the cache, at each node's measured cost per element).
# Needs a writable cgroup cpu controller (root; cgroup v1 "cpu", or v2 with cpu enabled). Two nodes on
# a 2-core machine: each member of a tensor split has a core to itself (a third would share one, and
# its waits would take CPU time from the others). Speeds are measured once per host and CPU share,
# then corrected by what each run decodes at (tensor/decode_rates.h): later rounds predict from that.
# The coordinator runs on CPU 0 and the worker on the others (taskset, where the host has it).
set -euo pipefail
cd "$(dirname "$0")/.."
STRATA=${STRATA:-build/src/cli/strata}
MODEL=${1:?usage: bench/uneven.sh MODEL [repetitions] [rounds] [depth]}
REPS=${2:-3}
ROUNDS=${3:-2}
DEPTH=${4:-0}
# This machine on CPU 0, the worker on the rest (local workers keep off the cores this process's
# affinity leaves out): each node keeps its cores and caches, as separate machines would.
PIN=""
if command -v taskset >/dev/null && (( $(nproc) >= 2 )); then PIN="taskset -c 0"; fi

run() {  # split-mode ts -> "predicted measured"
  local out predicted measured
  out=$($PIN "$STRATA" bench -m "$MODEL" -p 0 -n 32 -d "$DEPTH" -r "$REPS" -t 1 -sm "$1" --local-workers 1 --local-worker-cpus 0.5 \
        -ts "$2" -o json 2>&1)
  predicted=$(grep -o 'predicted: [0-9.]* tokens/s' <<<"$out" | head -1 | awk '{print $2}')
  measured=$(grep -o '"avg_ts": *[0-9.]*' <<<"$out" | tail -1 | awk -F: '{printf "%.2f", $2}')
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
