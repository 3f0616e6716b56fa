// One-token products on two threads, as decode runs them: a 256 MB Q4_K weight (beyond every
// cache) split into 32-row blocks handed out in turn (the old split), into one contiguous run per
// thread (static halves), or as matmul does it (contiguous shares walked in 32-row steps, with
// stealing). Reports weight GB/s.
//   ./strata_microbench --benchmark_filter='matmul_decode'
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "base/dtype.h"
#include "bench_random.h"
#include "tensor/matmul.h"
#include "tensor/quants.h"
#include "tensor/thread_pool.h"

namespace strata::tensor {
namespace {

constexpr int64_t kCols = 2048;
constexpr int64_t kRows = 1 << 18;

enum class Split { kBlocks32, kHalves, kShares };

void bench_decode(benchmark::State& state, Split split) {
  const DType t = DType::Q4_K;
  const size_t rb = row_bytes(t, kCols);
  const std::vector<uint8_t> w = bench::random_quant_matrix(t, kCols, kRows);
  const MatrixView m{t, kCols, kRows, w.data(), rb};
  ThreadPool pool(2);
  std::vector<float> x(kCols, 0.5f), y(kRows);
  QuantizedActivations q;
  q.quantize(t, x.data(), 1, kCols, pool);
  auto rows = [&](int64_t r0, int64_t r1) { matmul_rows(m, q, 0, 1, y.data(), kRows, r0, r1); };
  for (auto _ : state) {
    if (split == Split::kShares) {
      matmul(m, q, 1, y.data(), kRows, pool);
    } else {
      pool.parallel_for(kRows, split == Split::kHalves ? kRows / 2 : 32, rows);
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(w.size()));
}

BENCHMARK_CAPTURE(bench_decode, blocks32, Split::kBlocks32)->Name("matmul_decode/Q4_K/2threads/blocks32")->UseRealTime();
BENCHMARK_CAPTURE(bench_decode, halves, Split::kHalves)->Name("matmul_decode/Q4_K/2threads/halves")->UseRealTime();
BENCHMARK_CAPTURE(bench_decode, shares, Split::kShares)->Name("matmul_decode/Q4_K/2threads/shares")->UseRealTime();

}  // namespace
}  // namespace strata::tensor
