#!/usr/bin/env bash
# Every side-by-side figure of the README in one run: strata bench against the reference
# llama-bench (../shared/peer/side-by-side.sh) on the four benchmark models that bench/run.sh
# makes, the decode roofline share of each, depth, and strata serve against llama-server.
#   bench/side_by_side.sh [model_dir] [rounds] [sections...]
# Sections: pp-tg (pp512 + tg128, 2 threads), roofline (strata's tg128 share of the measured read
# bandwidth), tg1 (tg128, 1 thread), depth (pp512 + tg32 at depth 8192, f16 and q8_0 caches),
# serve (8 clients x 2 requests of 64 tokens, -np 4, 2 threads). Default: pp-tg roofline depth serve.
# ISA=avx2 runs both sides on their AVX2 code on an AVX-512 host (STRATA_MAX_ISA=avx2 and llama.cpp's
# haswell backend alone), the path AVX2-only hosts take; the header says which ran. MODELS="name ..."
# runs only those models.
# Run on a quiet machine; it prints markdown tables.
set -euo pipefail
cd "$(dirname "$0")/.."
STRATA=${STRATA:-build/src/cli/strata}
DIR=${1:-/tmp/strata-bench}
ROUNDS=${2:-2}
shift $(( $# > 2 ? 2 : $# ))
sections=("$@")
[[ ${#sections[@]} -gt 0 ]] || sections=(pp-tg roofline depth serve)
peer=../shared/peer
[[ -f $peer/side-by-side.sh ]] || { echo "missing $peer/side-by-side.sh (the reference llama.cpp)" >&2; exit 1; }
models=(llama-1b-q4_k_m llama-1b-q8_0 a3b-32x-q4_k_m a3b-256x-8l-q4_k_m)
[[ -z ${MODELS:-} ]] || read -r -a models <<<"$MODELS"  # MODELS="a b": only these
for m in "${models[@]}"; do
  [[ -f $DIR/$m.gguf ]] || { echo "missing $DIR/$m.gguf: run bench/run.sh $DIR first" >&2; exit 1; }
done

# A private copy of the peer holding one CPU backend, so ggml loads that one.
sbs=$peer/side-by-side.sh
backend="llama.cpp's best backend for this CPU"
if [[ ${ISA:-} == avx2 ]]; then
  export STRATA_MAX_ISA=avx2
  copy=$(mktemp -d /tmp/strata-peer-avx2.XXXXXX)
  trap 'rm -rf "$copy"' EXIT
  mkdir -p "$copy/llama.cpp/bin"
  cp "$peer/side-by-side.sh" "$copy/"
  cp "$peer/llama.cpp/run" "$copy/llama.cpp/"
  ln -s "$(realpath "$peer/llama.cpp/lib")" "$copy/llama.cpp/lib"
  for f in "$peer"/llama.cpp/bin/*; do
    case $(basename "$f") in libggml-cpu-*) ;; *) ln -s "$(realpath "$f")" "$copy/llama.cpp/bin/" ;; esac
  done
  cp "$peer/llama.cpp/bin/libggml-cpu-haswell.so" "$copy/llama.cpp/bin/"
  sbs=$copy/side-by-side.sh
  export LLAMA_RUN=$copy/llama.cpp/run
  backend="llama.cpp's haswell (AVX2) backend alone"
fi

cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
isa=$(grep -o -w -e avx512f -e avx512_vnni -e avx_vnni -e avx2 /proc/cpuinfo | sort -u | tr '\n' ' ')
echo "## $(date -u +%F) $cpu, $(nproc) cores, CPU flags: $isa"
echo "strata $(git rev-parse --short HEAD) on ${STRATA_MAX_ISA:-its best ISA}; $backend"
echo

run() {  # title model flags...
  local title=$1 model=$2
  shift 2
  echo "### $title: \`side-by-side.sh $model $ROUNDS -- $*\`"
  bash "$sbs" "$STRATA" "$DIR/$model.gguf" "$ROUNDS" -- "$@"
  echo
}

roofline() {
  echo "### Decode against the read bandwidth: \`strata bench -p 0 -n 128 -t 2 --roofline\`"
  echo "| model | tg128 t/s | bound t/s | share |"
  echo "| --- | ---: | ---: | ---: |"
  for m in "${models[@]}"; do
    "$STRATA" bench -m "$DIR/$m.gguf" -p 0 -n 128 -r 2 -t 2 --roofline -o json 2>/dev/null | python3 -c '
import json, sys
rows = json.load(sys.stdin)
rows = rows if isinstance(rows, list) else rows.get("results", [rows])
r = next(r for r in rows if r.get("n_gen"))
t, b, p = r["avg_ts"], r["roofline_ts"], r["roofline_pct"]
print(f"| {sys.argv[1]} | {t:.2f} | {b:.2f} | {p:.0f}% |")' "$m"
  done
  echo
}

for s in "${sections[@]}"; do
  case $s in
    pp-tg) for m in "${models[@]}"; do run "2 threads" "$m" -p 512 -n 128 -r 2 -t 2; done ;;
    roofline) roofline ;;
    tg1) for m in "${models[@]}"; do if [[ $m == llama-* ]]; then run "1 thread" "$m" -p 0 -n 128 -r 2 -t 1; fi; done ;;
    depth)
      for m in "${models[@]}"; do
        for c in f16 q8_0; do run "depth 8192, $c cache" "$m" -p 512 -n 32 -d 8192 -r 1 -t 2 -ctk "$c" -ctv "$c" -fa 1; done
      done ;;
    serve)
      echo "### Serving: \`scripts/serve_side_by_side.sh llama-1b-q4_k_m -np 4 -t 2 --clients 8 --requests 2\`"
      scripts/serve_side_by_side.sh "$DIR/llama-1b-q4_k_m.gguf" -np 4 -t 2 --clients 8 --requests 2 --max-tokens 64 \
        --rounds "$ROUNDS" | tail -8 | head -7
      echo ;;
    *) echo "unknown section $s" >&2; exit 1 ;;
  esac
done
