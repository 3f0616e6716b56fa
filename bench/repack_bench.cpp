// Repacking at load (tensor/repack.h): one thread rewrites a 64 MB matrix of each type into the
// 16-row layout, source and destination already in memory (no page faults), against a memcpy of the
// same bytes. Reports GB/s of source bytes.
//   repack/<type>, repack/memcpy
//   ./strata_microbench --benchmark_filter='repack/'
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "bench_random.h"
#include "tensor/repack.h"

namespace strata::tensor {
namespace {

constexpr int64_t kCols = 2048;
constexpr size_t kBytes = size_t{64} << 20;

int64_t rows_for(DType t) { return static_cast<int64_t>(kBytes / row_bytes(t, kCols)) / 16 * 16; }

void bench_repack(benchmark::State& state, DType t) {
  const int64_t rows = rows_for(t);
  const std::vector<uint8_t> w = bench::random_quant_matrix(t, kCols, rows);
  const MatrixView m{t, kCols, rows, w.data(), row_bytes(t, kCols)};
  std::vector<uint8_t> out(static_cast<size_t>(rows) * repacked_row_bytes(t, kCols));
  for (auto _ : state) {
    repack_groups(m, out.data(), 0, rows / kRepackRows);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(w.size()));
}

void bench_memcpy(benchmark::State& state) {
  const std::vector<uint8_t> w(kBytes, 1);
  std::vector<uint8_t> out(kBytes);
  for (auto _ : state) {
    std::memcpy(out.data(), w.data(), w.size());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(w.size()));
}

[[maybe_unused]] const bool registered = [] {
  for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    const std::string name = "repack/" + std::string(dtype_name(t));
    benchmark::RegisterBenchmark(name.c_str(), bench_repack, t);
  }
  benchmark::RegisterBenchmark("repack/memcpy", bench_memcpy);
  return true;
}();

}  // namespace
}  // namespace strata::tensor
