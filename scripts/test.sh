#!/usr/bin/env bash
# Installs dependencies, builds, and runs the whole test suite: once optimized, once under
# AddressSanitizer + UndefinedBehaviorSanitizer, the runtime and server tests once more under
# ThreadSanitizer, and a short run of every fuzz harness on its seed corpus (a crash fails).
# Tests read ../shared (models, golden outputs). Each phase prints how long it took.
# Usage: scripts/test.sh [--no-sanitize] [ctest args...]
#   --no-sanitize: only the optimized build and its tests (no ASan/UBSan, TSan or fuzz runs).
#   FUZZ_CI_RUNS, FUZZ_CI_SECONDS: inputs per fuzz harness (default 20000), at most that many seconds
#   each (default 30).
set -euo pipefail
cd "$(dirname "$0")/.."
sanitize=1
if [ "${1:-}" = "--no-sanitize" ]; then sanitize=0; shift; fi
jobs=$(nproc)
t0=$(date +%s)
phase_start=$t0
phase() {  # phase <name>: how long the phase that just ended took
  local now
  now=$(date +%s)
  echo "test.sh: $1: $((now - phase_start)) s (total $((now - t0)) s)"
  phase_start=$now
}

# run_tests DIR [ctest args...]: ctest, then how many tests were skipped and why (GTEST_SKIP's message).
run_tests() {
  local dir=$1 log
  shift
  log=$(mktemp)
  ctest --test-dir "$dir" --output-on-failure "$@" | tee "$log"
  local skipped
  skipped=$(grep -E '^\s*[0-9]+ - .* \(Skipped\)' "$log" | sed -E 's/^\s*[0-9]+ - (.*) \(Skipped\)/\1/' || true)
  echo "test.sh: $dir: $(printf '%s' "$skipped" | grep -c . || true) test(s) skipped"
  for t in $skipped; do
    echo "  $t: $(ctest --test-dir "$dir" -R "^$t\$" -V 2>&1 | grep -m1 -iE 'skipped|skip' | sed -E 's/^[0-9]+: //')"
  done
  rm -f "$log"
}

bash scripts/setup.sh build
phase "release build"
run_tests build -j"$jobs" --timeout 600 "$@"
phase "release tests"

if [ "$sanitize" = 1 ]; then
  # Sanitizer builds at -O1 with line tables only: they compile much faster than -O2 -g and still
  # report file:line stacks.
  cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" -DSTRATA_SANITIZE=ON -DSTRATA_BUILD_BENCH=OFF
  cmake --build build-sanitize -j"$jobs"
  phase "ASan/UBSan build"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_tests build-sanitize -j"$jobs" --timeout 900 "$@"
  phase "ASan/UBSan tests"

  # ThreadSanitizer: the runtime and server tests, which run engines, schedulers and gRPC workers on
  # many threads (they spawn the strata binary, so it is built with TSan too).
  cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" -DSTRATA_TSAN=ON -DSTRATA_BUILD_BENCH=OFF
  cmake --build build-tsan -j"$jobs" --target strata runtime_tests server_tests
  phase "TSan build"
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/scripts/tsan.supp" \
    run_tests build-tsan -L 'runtime|server' -j"$jobs" --timeout 900 "$@"
  phase "TSan tests"

  # The fuzz harnesses, briefly, on the seeds (scripts/fuzz.sh with a larger count fuzzes for real).
  FUZZ_NICE=0 FUZZ_ARGS="-max_total_time=${FUZZ_CI_SECONDS:-30}" bash scripts/fuzz.sh "${FUZZ_CI_RUNS:-20000}"
  phase "fuzz build and runs"
fi
