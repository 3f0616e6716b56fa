#!/usr/bin/env bash
# Every side-by-side figure of bench/README.md in one run: strata bench against the reference
# llama-bench (../shared/peer/side-by-side.sh) on the three benchmark models that bench/run.sh makes.
#   bench/side_by_side.sh [model_dir] [rounds] [sections...]
# Sections: pp-tg (pp512 + tg128, 2 threads), tg1 (tg128, 1 thread), depth (pp512 + tg32 at depth
# 8192, f16 and q8_0 caches). Default: all. Run on a quiet machine; it prints markdown tables.
set -euo pipefail
cd "$(dirname "$0")/.."
STRATA=${STRATA:-build/src/cli/strata}
DIR=${1:-/tmp/strata-bench}
ROUNDS=${2:-2}
shift $(( $# > 2 ? 2 : $# ))
sections=("$@")
[[ ${#sections[@]} -gt 0 ]] || sections=(pp-tg tg1 depth)
sbs=../shared/peer/side-by-side.sh
[[ -f $sbs ]] || { echo "missing $sbs (the reference llama.cpp)" >&2; exit 1; }
models=(llama-1b-q4_k_m llama-1b-q8_0 a3b-32x-q4_k_m)
for m in "${models[@]}"; do
  [[ -f $DIR/$m.gguf ]] || { echo "missing $DIR/$m.gguf: run bench/run.sh $DIR first" >&2; exit 1; }
done

run() {  # title model flags...
  local title=$1 model=$2
  shift 2
  echo "### $title: \`side-by-side.sh $STRATA $model $ROUNDS -- $*\`"
  bash "$sbs" "$STRATA" "$DIR/$model.gguf" "$ROUNDS" -- "$@"
  echo
}

for s in "${sections[@]}"; do
  case $s in
    pp-tg) for m in "${models[@]}"; do run "2 threads" "$m" -p 512 -n 128 -r 2 -t 2; done ;;
    tg1) for m in llama-1b-q4_k_m llama-1b-q8_0; do run "1 thread" "$m" -p 0 -n 128 -r 2 -t 1; done ;;
    depth)
      for m in "${models[@]}"; do
        for c in f16 q8_0; do run "depth 8192, $c cache" "$m" -p 512 -n 32 -d 8192 -r 1 -t 2 -ctk "$c" -ctv "$c" -fa 1; done
      done ;;
    *) echo "unknown section $s" >&2; exit 1 ;;
  esac
done
