#!/usr/bin/env bash
# strata serve against the reference llama-server on the same model file with the same slots,
# threads and context: both are started, waited for (/health), loaded in interleaved rounds with
# scripts/serve_load.py (one server idle while the other works), stopped, and summed up in a table.
#
#   scripts/serve_side_by_side.sh MODEL [-np 4] [-t 2] [-c 4096] [--clients 8] [--requests 4]
#                                       [--max-tokens 64] [--rounds 3]
#
# STRATA (default build/src/cli/strata) and LLAMA_RUN (default ../shared/peer/llama.cpp/run) pick the
# binaries; logs go to $OUT (default a fresh directory under /tmp).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)

usage() { sed -n '5,6p' "$0" >&2; exit 2; }
[[ $# -ge 1 && $1 != -* ]] || usage
model=$1; shift
np=4 threads=2 ctx=4096 clients=8 requests=4 max_tokens=64 rounds=3
while [[ $# -gt 0 ]]; do
  [[ $# -ge 2 ]] || usage
  case $1 in
    -np|--parallel) np=$2 ;;
    -t|--threads) threads=$2 ;;
    -c|--ctx-size) ctx=$2 ;;
    --clients) clients=$2 ;;
    --requests) requests=$2 ;;
    --max-tokens) max_tokens=$2 ;;
    --rounds) rounds=$2 ;;
    *) echo "unknown option $1" >&2; usage ;;
  esac
  shift 2
done
for v in "$np" "$threads" "$ctx" "$clients" "$requests" "$max_tokens" "$rounds"; do
  [[ $v =~ ^[1-9][0-9]{0,6}$ ]] || { echo "expected a positive number, got '$v'" >&2; exit 2; }
done
[[ -f $model ]] || { echo "no model file $model" >&2; exit 2; }
strata=${STRATA:-$repo/build/src/cli/strata}
llama_run=${LLAMA_RUN:-$repo/../shared/peer/llama.cpp/run}
[[ -x $strata ]] || { echo "no strata binary at $strata (build it, or set STRATA)" >&2; exit 2; }
[[ -x $llama_run ]] || { echo "no llama.cpp runner at $llama_run (set LLAMA_RUN)" >&2; exit 2; }
out=${OUT:-$(mktemp -d /tmp/serve_side_by_side.XXXXXX)}
mkdir -p "$out"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Both get the same model, slots (context per slot = ctx / np in both), threads and address.
strata_port=$(free_port)
"$strata" serve -m "$model" -np "$np" -t "$threads" -c "$ctx" --host 127.0.0.1 --port "$strata_port" \
  >"$out/strata.log" 2>&1 &
pids+=($!)
llama_port=$(free_port)
"$llama_run" llama-server -m "$model" -np "$np" -t "$threads" -tb "$threads" -c "$ctx" --host 127.0.0.1 \
  --port "$llama_port" >"$out/llama-server.log" 2>&1 &
pids+=($!)

wait_ready() {  # name port pid
  for _ in $(seq 1 600); do
    kill -0 "$3" 2>/dev/null || { echo "$1 exited during startup; see $out/$1.log" >&2; tail -5 "$out/$1.log" >&2; exit 1; }
    code=$(python3 - "$2" <<'EOF'
import sys, urllib.request, urllib.error
try:
    print(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/health", timeout=2).status)
except urllib.error.HTTPError as e:
    print(e.code)
except Exception:
    print(0)
EOF
)
    [[ $code == 200 ]] && return 0
    sleep 0.5
  done
  echo "$1 not ready after 300 s; see $out/$1.log" >&2
  exit 1
}
wait_ready strata "$strata_port" "${pids[0]}"
wait_ready llama-server "$llama_port" "${pids[1]}"

load() {  # label port -> one JSON line
  python3 "$here/serve_load.py" --url "http://127.0.0.1:$2" --clients "$clients" --requests-per-client "$requests" \
    --max-tokens "$max_tokens" --label "$1" --json
}
# A short warm-up each (first-touch of pages, thread start), not counted.
for s in "strata $strata_port" "llama-server $llama_port"; do
  set -- $s
  python3 "$here/serve_load.py" --url "http://127.0.0.1:$2" --clients "$np" --requests-per-client 1 \
    --max-tokens 8 --json >/dev/null || { echo "$1: warm-up failed" >&2; exit 1; }
done
: >"$out/rounds.jsonl"
status=0
for r in $(seq 1 "$rounds"); do
  # Alternate which server goes first, so neither always follows the other's load.
  order=("strata $strata_port" "llama-server $llama_port")
  (( r % 2 == 0 )) && order=("llama-server $llama_port" "strata $strata_port")
  for s in "${order[@]}"; do
    set -- $s
    line=$(load "$1" "$2") || status=1
    echo "$line" >>"$out/rounds.jsonl"
    python3 -c 'import json, sys; print("round {}: {label:12s} {tokens_per_s:8.1f} tokens/s, p50 {latency_p50_s:.2f} s, {failed} failed".format(sys.argv[2], **json.loads(sys.argv[1])))' "$line" "$r"
  done
done

# Evidence that strata's slots decoded together: slots fed per engine call, from its /metrics.
busy=$(python3 - "$strata_port" <<'EOF'
import sys, urllib.request
try:
    text = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=5).read().decode()
    print("{:.2f}".format(float(next(l.split()[1] for l in text.splitlines() if l.startswith("strata_busy_slots_per_decode ")))))
except Exception:
    print("?")
EOF
)
echo
echo "model $(basename "$model"), -np $np, -t $threads, -c $ctx, $clients clients x $requests requests x $max_tokens tokens, $rounds rounds (medians)"
python3 - "$out/rounds.jsonl" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = {}
for r in rows:
    by.setdefault(r["label"], []).append(r)
print(f"{'server':12s} | {'tokens/s':>9s} | {'wall s':>7s} | {'p50 s':>6s} | {'p90 s':>6s} | failed")
print(f"{'-'*12}-|-{'-'*9}-|-{'-'*7}-|-{'-'*6}-|-{'-'*6}-|-------")
med = {}
for label in ("strata", "llama-server"):
    rs = by.get(label, [])
    if not rs:
        continue
    m = lambda k: statistics.median(r[k] for r in rs)
    med[label] = m("tokens_per_s")
    print(f"{label:12s} | {med[label]:9.1f} | {m('wall_s'):7.2f} | {m('latency_p50_s'):6.2f} | {m('latency_p90_s'):6.2f} | "
          f"{sum(r['failed'] for r in rs)}")
if med.get("llama-server"):
    print(f"ratio strata / llama-server: {med['strata'] / med['llama-server']:.2f}x")
EOF
echo "strata: $busy slots per engine call on average (strata_busy_slots_per_decode)"
echo "logs and per-round figures: $out"
exit $status
