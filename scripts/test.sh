#!/usr/bin/env bash
# Installs dependencies, builds, and runs the test suite: every test optimized, then one clang build
# with AddressSanitizer + UndefinedBehaviorSanitizer (and libFuzzer's coverage hooks) that runs the
# suites of the modules reading input from outside (flags, files, HTTP, worker messages) and a short
# run of every fuzz harness on its seed corpus (a crash fails). Tests read ../shared (models, golden
# outputs). Each phase prints how long it took; CI (.ci/run) runs this: measured on a clean clone,
# 23-27 minutes on a 2-core Zen 4 VM (2026-12-02: builds 7 + 9 minutes, tests 1.5 + 4.5, fuzz 1; 1611 s
# in the afternoon, 1769 s in the evening; 1726 s on 2026-12-03, 1641 s later that day) and 45 minutes on a 2-core Zen 3 VM
# on 2026-12-02.
# Usage: scripts/test.sh [--no-sanitize | --full] [ctest args...]
#   --no-sanitize: only the optimized build and its tests.
#   --full: also the compute suites (tensor, model, memory, tools) under ASan + UBSan, and the runtime
#           and server suites under ThreadSanitizer (about 40 minutes more on 2 cores).
#   FUZZ_CI_RUNS, FUZZ_CI_SECONDS: inputs per fuzz harness (default 20000), at most that many seconds
#   each (default 20).
set -euo pipefail
cd "$(dirname "$0")/.."
sanitize=1
full=0
case "${1:-}" in
  --no-sanitize) sanitize=0; shift ;;
  --full) full=1; shift ;;
esac
# Suites whose modules take input from outside; --full adds the compute suites.
input_suites=(base jinja gguf text grammar chat sampling plan net memory server runtime cli)  # memory: saved sequences come from files and workers
compute_suites=(tensor model tools)
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
  suites=("${input_suites[@]}")
  [ "$full" = 1 ] && suites+=("${compute_suites[@]}")
  # One clang build for the sanitizer tests and the fuzz harnesses: -O1 and line tables only compile
  # much faster than -O2 -g and still give file:line stacks. Outside a fuzzer the coverage hooks are
  # the sanitizer runtime's no-ops.
  cmake -S . -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" -DSTRATA_FUZZ=ON -DSTRATA_BUILD_TESTS=ON \
    -DSTRATA_BUILD_BENCH=OFF >/dev/null
  cmake --build build-fuzz -j"$jobs" --target strata "${suites[@]/%/_tests}"
  phase "ASan/UBSan build"
  labels=$(IFS='|'; echo "${suites[*]}")
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_tests build-fuzz -L "^($labels)\$" -j"$jobs" --timeout 900 "$@"
  phase "ASan/UBSan tests (${suites[*]})"

  # The fuzz harnesses, briefly, on the seeds (scripts/fuzz.sh with a larger count fuzzes for real).
  FUZZ_TESTS=ON FUZZ_NICE=0 FUZZ_ARGS="-max_total_time=${FUZZ_CI_SECONDS:-20}" bash scripts/fuzz.sh "${FUZZ_CI_RUNS:-20000}"
  phase "fuzz build and runs"
fi

if [ "$full" = 1 ]; then
  # ThreadSanitizer: the runtime and server tests, which run engines, schedulers and gRPC workers on
  # many threads (they spawn the strata binary, so it is built with TSan too).
  cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" -DSTRATA_TSAN=ON -DSTRATA_BUILD_BENCH=OFF
  cmake --build build-tsan -j"$jobs" --target strata runtime_tests server_tests
  phase "TSan build"
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/scripts/tsan.supp" \
    run_tests build-tsan -L 'runtime|server' -j"$jobs" --timeout 900 "$@"
  phase "TSan tests"
fi
