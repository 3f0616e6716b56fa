#!/usr/bin/env bash
# Sets up and builds, then runs three demos across local nodes (this machine and local workers):
#  1. models/stories260K.gguf, a real 260K-parameter story model (llama2.c's tinyllamas, MIT; see
#     NOTICE): its placement plan, then a story in English, generated across the three nodes;
#  2. the same story with -sm tensor: every layer sliced over this machine and one worker, which
#     work on each token together;
#  3. a larger random-weight llama written by `strata synth`: the same path at a real model's shape
#     (its text is noise; the point is the plan and the speed).
# Needs nothing beyond this repository and Debian packages.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh build
strata=./build/src/cli/strata
model=models/stories260K.gguf
# Split the 5 layers over the two workers (-ngl 99: all of them, -ts 1,1: evenly); this machine keeps
# the token embeddings and samples.
split=(--local-workers 2 -ngl 99 -ts 1,1)
echo
echo "== strata plan: where every layer, cache and op of stories260K will live =="
"$strata" plan -m "$model" -c 512 "${split[@]}"
echo
echo "== strata run: a story across this machine and two local workers =="
"$strata" run -m "$model" -c 512 "${split[@]}" -p "Once upon a time, there was a little dog named Max." \
  -n 160 --temp 0.7 --seed 7

echo
echo "== -sm tensor: every layer of stories260K sliced over this machine and one worker =="
tensor=(--local-workers 1 -sm tensor -ts 1,1)
"$strata" plan -m "$model" -c 512 "${tensor[@]}" 2>&1 | grep -E "^(node|local|127|slices|  )" || true
"$strata" run -m "$model" -c 512 "${tensor[@]}" -p "Once upon a time, there was a little dog named Max." \
  -n 160 --temp 0.7 --seed 7

echo
echo "== the same over a synthetic model (strata synth: random weights, 12 layers x 512) =="
mkdir -p models
synth=models/demo-llama.gguf
[ -f "$synth" ] || "$strata" synth --arch llama --layers 12 --embd 512 --heads 8 --kv-heads 4 --ff 1536 --type f16 -o "$synth"
"$strata" plan -m "$synth" -c 2048 --local-workers 2
"$strata" run -m "$synth" -c 2048 -p "Once upon a time" -n 32 --temp 0.8 --seed 7 --local-workers 2
