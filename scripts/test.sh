#!/usr/bin/env bash
# Installs dependencies, builds, and runs the whole test suite: once optimized, once under
# AddressSanitizer + UndefinedBehaviorSanitizer. Tests read ../shared (models, golden outputs).
# Usage: scripts/test.sh [--no-sanitize] [ctest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
sanitize=1
if [ "${1:-}" = "--no-sanitize" ]; then sanitize=0; shift; fi
jobs=$(nproc)

bash scripts/setup.sh build
ctest --test-dir build --output-on-failure -j"$jobs" --timeout 600 "$@"

if [ "$sanitize" = 1 ]; then
  cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_SANITIZE=ON -DSTRATA_BUILD_BENCH=OFF
  cmake --build build-sanitize -j"$jobs"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-sanitize --output-on-failure -j"$jobs" --timeout 900 "$@"
fi
