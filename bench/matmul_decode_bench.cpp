// One-token products on two threads, as decode runs them: a 256 MB Q4_K weight (beyond every
// cache) split into 32-row blocks handed out in turn (the old split), into one contiguous run per
// thread (static halves), or as matmul does it (contiguous shares walked in 32-row steps, with
// stealing). Reports weight GB/s.
//   matmul_decode/<type>/<threads>/{plain,repacked}: the GGUF layout against the 16-row repacked one
//   matmul_decode/Q4_K/2threads/repacked/<n>tokens/{blocks16,shares}: n tokens at once (server slots
//     decoding together) with 16-row groups handed out in turn (before) or as matmul splits them now
//   matmul_decode/Q4_K/1threads/repacked/chain<n>MiB: 256 MiB as a chain of n MiB matrices (a tensor
//     split's smaller slices against one node's whole matrices)
//   ./strata_microbench --benchmark_filter='matmul_decode'
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "bench_random.h"
#include "tensor/matmul.h"
#include "tensor/quants.h"
#include "tensor/repack.h"
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

// One token through a 256 MB matrix of type t, plain or repacked, on `threads` threads.
void bench_layout(benchmark::State& state, DType t, int threads, bool repacked) {
  const int64_t rows = (int64_t{256} << 20) / static_cast<int64_t>(row_bytes(t, kCols)) / 16 * 16;
  std::vector<uint8_t> w = bench::random_quant_matrix(t, kCols, rows);
  MatrixView m{t, kCols, rows, w.data(), row_bytes(t, kCols)};
  std::vector<uint8_t> packed;
  if (repacked) {
    packed.resize(static_cast<size_t>(rows) * repacked_row_bytes(t, kCols));
    m = repack_groups(m, packed.data(), 0, rows / kRepackRows);
    std::vector<uint8_t>().swap(w);
  }
  ThreadPool pool(threads);
  std::vector<float> x(kCols, 0.5f), y(static_cast<size_t>(rows));
  QuantizedActivations q;
  q.quantize(t, x.data(), 1, kCols, pool);
  for (auto _ : state) {
    matmul(m, q, 1, y.data(), rows, pool);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * rows * static_cast<int64_t>(m.row_stride));
}

// n tokens through a 256 MB repacked Q4_K matrix on two threads: 16-row groups handed out in turn,
// or matmul's split (contiguous shares for up to 8 tokens).
void bench_few_tokens(benchmark::State& state, int64_t n, bool shares) {
  const DType t = DType::Q4_K;
  const int64_t rows = (int64_t{256} << 20) / static_cast<int64_t>(row_bytes(t, kCols)) / 16 * 16;
  const std::vector<uint8_t> w = bench::random_quant_matrix(t, kCols, rows);
  std::vector<uint8_t> packed(static_cast<size_t>(rows) * repacked_row_bytes(t, kCols));
  const MatrixView m = repack_groups({t, kCols, rows, w.data(), row_bytes(t, kCols)}, packed.data(), 0, rows / kRepackRows);
  ThreadPool pool(2);
  std::vector<float> x(static_cast<size_t>(kCols * n), 0.5f), y(static_cast<size_t>(rows * n));
  QuantizedActivations q;
  q.quantize(t, x.data(), n, kCols, pool);
  auto groups = [&](int64_t r0, int64_t r1) { matmul_rows(m, q, 0, n, y.data(), rows, r0, r1); };
  for (auto _ : state) {
    if (shares) {
      matmul(m, q, n, y.data(), rows, pool);
    } else {
      pool.parallel_for(rows, kRepackRows, groups);
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * rows * static_cast<int64_t>(m.row_stride));
}

// One token through a chain of repacked Q4_K matrices of `mb` MiB each, 256 MiB in all (beyond every
// cache), one after another as a model's layers run: what smaller matrices (a tensor split's
// slices) cost per byte against one large one.
void bench_chain(benchmark::State& state, int64_t mb) {
  const DType t = DType::Q4_K;
  const int64_t rows = (mb << 20) / static_cast<int64_t>(row_bytes(t, kCols)) / 16 * 16;
  const int64_t n = 256 / mb;
  std::vector<std::vector<uint8_t>> packed(static_cast<size_t>(n));
  std::vector<MatrixView> m;
  const std::vector<uint8_t> w = bench::random_quant_matrix(t, kCols, rows);
  for (auto& p : packed) {
    p.resize(static_cast<size_t>(rows) * repacked_row_bytes(t, kCols));
    m.push_back(repack_groups({t, kCols, rows, w.data(), row_bytes(t, kCols)}, p.data(), 0, rows / kRepackRows));
  }
  ThreadPool pool(1);
  std::vector<float> x(kCols, 0.5f), y(static_cast<size_t>(rows));
  QuantizedActivations q;
  q.quantize(t, x.data(), 1, kCols, pool);
  for (auto _ : state) {
    for (const MatrixView& v : m) matmul(v, q, 1, y.data(), rows, pool);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * n * rows * static_cast<int64_t>(m[0].row_stride));
}

[[maybe_unused]] const bool registered = [] {
  for (DType t : {DType::Q4_K, DType::Q6_K, DType::Q8_0}) {
    for (int threads : {1, 2}) {
      for (bool repacked : {false, true}) {
        if (repacked && !repacks(t, 16, kCols)) continue;
        const std::string name = "matmul_decode/" + std::string(dtype_name(t)) + "/" + std::to_string(threads) +
                                 "threads/" + (repacked ? "repacked" : "plain");
        benchmark::RegisterBenchmark(name.c_str(), bench_layout, t, threads, repacked)->UseRealTime();
      }
    }
  }
  if (repacks(DType::Q4_K, 16, kCols)) {
    for (int64_t mb : {1, 2, 4, 8, 32}) {
      const std::string name = "matmul_decode/Q4_K/1threads/repacked/chain" + std::to_string(mb) + "MiB";
      benchmark::RegisterBenchmark(name.c_str(), bench_chain, mb)->UseRealTime();
    }
    for (int64_t n : {2, 4, 8}) {
      for (bool shares : {false, true}) {
        const std::string name = "matmul_decode/Q4_K/2threads/repacked/" + std::to_string(n) + "tokens/" +
                                 (shares ? "shares" : "blocks16");
        benchmark::RegisterBenchmark(name.c_str(), bench_few_tokens, n, shares)->UseRealTime();
      }
    }
  }
  return true;
}();

BENCHMARK_CAPTURE(bench_decode, blocks32, Split::kBlocks32)->Name("matmul_decode/Q4_K/2threads/blocks32")->UseRealTime();
BENCHMARK_CAPTURE(bench_decode, halves, Split::kHalves)->Name("matmul_decode/Q4_K/2threads/halves")->UseRealTime();
BENCHMARK_CAPTURE(bench_decode, shares, Split::kShares)->Name("matmul_decode/Q4_K/2threads/shares")->UseRealTime();

}  // namespace
}  // namespace strata::tensor
