#!/usr/bin/env bash
# Tensor split (-sm tensor) side by side with llama.cpp's, on one file, interleaved in one run:
#   bench/tensor_side_by_side.sh MODEL.gguf [ROUNDS] [N_GEN]
# Each round runs, every node with 1 thread, tg N_GEN (default 128):
#   strata   1 node                     strata bench -t 1
#   strata   this machine + 1 worker    --local-workers 1 --worker-threads 1 -sm tensor -ts 1,1
#   strata   2 workers (coordinator only embeds, samples, merges: llama.cpp's shape)
#                                       --local-workers 2 --worker-threads 1 -sm tensor -ts 1,1
#   strata   whole experts (WHOLE_EXPERTS=1, MoE models): this machine + 1 worker, --expert-split whole
#   strata   two 1-node runs at once    two strata bench -t 1 side by side: what this host gives two
#                                       single-thread processes together (their sum over one alone
#                                       is the most a 2-node split on this one host could reach)
#   llama.cpp 1 node                    llama-bench -t 1
#   llama.cpp 2 ggml-rpc-server (-t 1)  llama-bench --rpc A,B -sm tensor -ts 1/1
# and prints each row's best round, its ratio to the same tool's one node, and strata / llama.cpp.
# Everything runs on this machine over loopback: run it quiet, nothing else on the cores.
set -euo pipefail
cd "$(dirname "$0")/.."
STRATA=${STRATA:-build/src/cli/strata}
model=${1:?usage: tensor_side_by_side.sh MODEL.gguf [ROUNDS] [N_GEN]}
rounds=${2:-2}
ngen=${3:-128}
peer=../shared/peer/llama.cpp/run
[[ -f $peer ]] || { echo "missing $peer (the reference llama.cpp)" >&2; exit 1; }
out=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$out"; }
trap cleanup EXIT

# Two llama.cpp RPC workers, 1 thread each, on free ports.
ports=()
for i in 0 1; do
  ports+=("$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')")
done
start_rpc() {
  for i in 0 1; do
    bash "$peer" ggml-rpc-server -H 127.0.0.1 -p "${ports[$i]}" -t 1 >>"$out/rpc$i.log" 2>&1 &
    pids+=($!)
  done
  sleep 1
}
start_rpc
rpc="127.0.0.1:${ports[0]},127.0.0.1:${ports[1]}"

common=(-m "$model" -p 0 -n "$ngen" -r 2 -t 1 -o json)
declare -A cmds=(
  [s1]="$STRATA bench ${common[*]}"
  [s2]="$STRATA bench ${common[*]} --local-workers 1 --worker-threads 1 -sm tensor -ts 1,1"
  [s2w]="$STRATA bench ${common[*]} --local-workers 2 --worker-threads 1 -sm tensor -ts 1,1"
  [l1]="bash $peer llama-bench ${common[*]}"
  [l2]="bash $peer llama-bench ${common[*]} --rpc $rpc -sm tensor -ts 1/1"
)
[[ ${WHOLE_EXPERTS:-0} == 1 ]] && cmds[s2x]="${cmds[s2]} --expert-split whole"
order=(s1 s2 s2w ${cmds[s2x]:+s2x} pair l1 l2)
# A run that fails (llama.cpp's RPC client aborts when a worker crashes) is reported in the table
# with its error and the rounds go on; the RPC workers are restarted for the next round.
# The hypervisor's share of this VM's CPU time while each run ran (/proc/stat "steal"): a split waits
# for whichever member is held back, so it loses more to steal than one node does.
cpu_line() { head -1 /proc/stat; }
run_one() {
  local k=$1 r=$2
  if [[ $k == pair ]]; then  # two one-node runs at once; each writes its own file
    ${cmds[s1]} >"$out/pa.$r.json" 2>/dev/null & a=$!
    ${cmds[s1]} >"$out/pb.$r.json" 2>/dev/null & b=$!
    wait $a && wait $b || echo "round $r: the paired one-node runs failed" >&2
    return
  fi
  if ! ${cmds[$k]} >"$out/$k.$r.json" 2>"$out/$k.$r.err"; then
    grep -m1 -E "error|crashed|failed|abort" "$out/$k.$r.err" >"$out/$k.$r.fail" || tail -1 "$out/$k.$r.err" >"$out/$k.$r.fail"
    echo "round $r: $k failed: $(cat "$out/$k.$r.fail")" >&2
    rm -f "$out/$k.$r.json"
    if [[ $k == l2 ]]; then
      for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
      pids=()
      start_rpc
    fi
  fi
}
for ((r = 1; r <= rounds; r++)); do
  for k in "${order[@]}"; do
    cpu_line >"$out/$k.$r.cpu0"
    run_one "$k" "$r"
    cpu_line >"$out/$k.$r.cpu1"
  done
done

python3 - "$out" "$rounds" "$(basename "$model")" "$ngen" <<'PY'
import json, os, sys
out, rounds, name, ngen = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def ts(k, r):
    path = os.path.join(out, f"{k}.{r}.json")
    if not os.path.exists(path):
        return None
    d = json.load(open(path))
    d = d if isinstance(d, list) else d.get("results", [d])
    return max(x["avg_ts"] for x in d if x.get("n_gen"))
def fail(k):
    for r in range(1, rounds + 1):
        p = os.path.join(out, f"{k}.{r}.fail")
        if os.path.exists(p):
            return open(p).read().strip()[-120:]
    return ""
def steal(k, r):  # percent of all CPU time the hypervisor took during the run
    try:
        a, b = ([int(v) for v in open(os.path.join(out, f"{k}.{r}.{c}")).read().split()[1:9]] for c in ("cpu0", "cpu1"))
    except (OSError, ValueError):
        return None
    d = [y - x for x, y in zip(a, b)]
    return 100.0 * d[7] / sum(d) if sum(d) > 0 else None
keys = ("s1", "s2", "s2w", "s2x", "pair", "l1", "l2")
def pair(r):  # the two runs' sum
    a, b = ts("pa", r), ts("pb", r)
    return None if a is None or b is None else a + b
runs = {k: [pair(r) if k == "pair" else ts(k, r) for r in range(1, rounds + 1)] for k in keys}
best = {k: max([v for v in runs[k] if v is not None], default=None) for k in keys}
print(f"| {name}, tg{ngen}, 1 thread per node | t/s (best; each round) | x one node | CPU steal % (each round) |")
print("| --- | ---: | ---: | ---: |")
rows = [("strata, 1 node", "s1", "s1"), ("strata -sm tensor, this machine + 1 worker", "s2", "s1"),
        ("strata -sm tensor, 2 workers", "s2w", "s1"), ("strata -sm tensor --expert-split whole, this machine + 1 worker", "s2x", "s1"),
        ("two strata 1-node runs at once, their sum (this host's ceiling for 2 nodes)", "pair", "s1"), ("llama.cpp, 1 node", "l1", "l1"),
        ("llama.cpp -sm tensor, 2 ggml-rpc-server", "l2", "l1")]
for title, k, base in rows:
    if all(v is None for v in runs[k]) and k == "s2x":
        continue
    each = " / ".join("failed" if v is None else f"{v:.2f}" for v in runs[k])
    stolen = " / ".join("-" if v is None else f"{v:.0f}" for v in (steal(k, r) for r in range(1, rounds + 1)))
    if best[k] is None:
        print(f"| {title} | failed every round: `{fail(k)}` | - | {stolen} |")
    else:
        ratio = f"{best[k] / best[base]:.2f}x" if best[base] else "-"
        print(f"| {title} | {best[k]:.2f} ({each}) | {ratio} | {stolen} |")
if best["s1"] and best["l1"]:
    print(f"\nstrata / llama.cpp, 1 node: {best['s1'] / best['l1']:.2f}x")
if best["l2"] and (best["s2"] or best["s2w"]):
    print(f"strata / llama.cpp, 2 nodes tensor: {max(best['s2'] or 0, best['s2w'] or 0) / best['l2']:.2f}x")
PY
