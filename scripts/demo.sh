#!/usr/bin/env bash
# Sets up, builds, writes a small random-weight model with `strata synth`, and runs it.
# Needs nothing beyond this repository and Debian packages.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh build
mkdir -p models
model=models/demo-llama.gguf
[ -f "$model" ] || ./build/src/cli/strata synth --arch llama --layers 8 --embd 256 --heads 8 --kv-heads 4 --ff 768 -o "$model"
./build/src/cli/strata run -m "$model" -p "Once upon a time" -n 48 --temp 0.8 --seed 7
