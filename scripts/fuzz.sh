#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang, ASan + UBSan, in build-fuzz) and runs each one in turn on its
# corpus: build-fuzz/corpus/<target> (kept between runs, grows with what the fuzzer finds) plus fresh
# seeds from ../shared (build-fuzz/seeds/<target>). Prints per target the inputs run, exec/s and
# any crash; a crash input is saved as build-fuzz/crashes/<target>-crash-<sha1> and the script fails.
# Usage: scripts/fuzz.sh [RUNS | SECONDSs] [target...]
#   RUNS: inputs per target (default 1000000); SECONDSs, e.g. 60s: time per target instead.
#   FUZZ_BUILD_DIR (default build-fuzz), FUZZ_NICE (default 10), FUZZ_ARGS: extra libFuzzer flags,
#   FUZZ_TESTS=ON: keep the test suites in the build (scripts/test.sh runs them from the same build).
# Reproduce a crash: build-fuzz/fuzz/fuzz_<target> <crash-file>
set -euo pipefail
cd "$(dirname "$0")/.."
limit=${1:-1000000}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(gguf_reader chat_template openai_request worker_messages tokenizer grammar chat_output)
build=${FUZZ_BUILD_DIR:-build-fuzz}
nice_level=${FUZZ_NICE:-10}
case "$limit" in
  *s) budget=(-max_total_time="${limit%s}") ;;
  *) budget=(-runs="$limit") ;;
esac

export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# -O1 and line tables only: sanitizer builds compile faster and still give file:line stacks.
cmake -S . -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" -DSTRATA_FUZZ=ON -DSTRATA_BUILD_TESTS="${FUZZ_TESTS:-OFF}" \
  -DSTRATA_BUILD_BENCH=OFF "${launcher[@]}" >/dev/null
cmake --build "$build" -j"$(nproc)" --target fuzz_seed_writer "${targets[@]/#/fuzz_}"
bash scripts/fuzz-seeds.sh "$build" "$build/seeds"

# Longest input per target: enough for its seeds, small enough to stay fast.
declare -A max_len=([gguf_reader]=65536 [chat_template]=16384 [openai_request]=4096 [worker_messages]=131072
                    [tokenizer]=2048 [grammar]=4096 [chat_output]=4096)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
mkdir -p "$build/logs" "$build/crashes"
failed=()
for t in "${targets[@]}"; do
  mkdir -p "$build/corpus/$t"
  log=$build/logs/$t.log
  start=$(date +%s)
  rc=0
  nice -n "$nice_level" "$build/fuzz/fuzz_$t" "${budget[@]}" -max_len="${max_len[$t]:-4096}" -timeout=30 \
    -rss_limit_mb=3072 -print_final_stats=1 -artifact_prefix="$build/crashes/$t-" ${FUZZ_ARGS:-} \
    "$build/corpus/$t" "$build/seeds/$t" >"$log" 2>&1 || rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  corpus=$(ls "$build/corpus/$t" | wc -l)
  if [ "$rc" = 0 ]; then
    echo "fuzz $t: ${runs:-?} inputs, ${speed:-?} exec/s, $(($(date +%s) - start)) s, corpus $corpus files: ok"
  else
    failed+=("$t")
    echo "fuzz $t: FAILED (exit $rc) after ${runs:-?} inputs; log $log"
    grep -E "ERROR: |runtime error:|Test unit written to|SUMMARY:" "$log" | head -8 | sed 's/^/  /'
  fi
done
if ((${#failed[@]})); then
  echo "fuzz: crashes in ${failed[*]} (inputs in $build/crashes/)" >&2
  exit 1
fi
