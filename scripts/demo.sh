#!/usr/bin/env bash
# Sets up and builds, writes a small random-weight model with `strata synth`, prints its placement
# plan over this machine and two local workers, then runs it across the three nodes.
# Needs nothing beyond this repository and Debian packages.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh build
strata=./build/src/cli/strata
mkdir -p models
model=models/demo-llama.gguf
[ -f "$model" ] || "$strata" synth --arch llama --layers 12 --embd 512 --heads 8 --kv-heads 4 --ff 1536 --type f16 -o "$model"
echo
echo "== strata plan: where every layer, cache and op will live =="
"$strata" plan -m "$model" -c 2048 --local-workers 2
echo
echo "== strata run across this machine and two local workers =="
"$strata" run -m "$model" -c 2048 -p "Once upon a time" -n 48 --temp 0.8 --seed 7 --local-workers 2
