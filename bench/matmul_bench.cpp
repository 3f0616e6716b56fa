// Prompt-processing matrix products, single thread: a weight of rows x 2048 (2048 and 8192 rows)
// times 512 tokens, per weight type. Reports GFLOP/s (2 * rows * cols * tokens per iteration).
//   matmul/<type>/<rows>/dots       the pre-tile path: one vec_dot call per output
//   matmul/<type>/<rows>/tiles      matmul() with the tiled kernels (best ISA)
//   matmul/<type>/<rows>/tiles-novnni  AVX-512 tiles without VNNI (when the CPU has VNNI)
//   matmul/<type>/<rows>/repacked  matmul() on the 16-row repacked layout (tensor/repack.h)
//
//   ./strata_microbench --benchmark_filter='matmul/Q4_K'
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "bench_random.h"
#include "tensor/blocks.h"
#include "tensor/matmul.h"
#include "tensor/quants.h"
#include "tensor/repack.h"
#include "tensor/thread_pool.h"

namespace strata::tensor {
namespace {

constexpr int64_t kCols = 2048;
constexpr int64_t kTokens = 512;

using bench::random_quant_matrix;
using bench::uniform;

std::vector<uint8_t> random_matrix(DType t, int64_t rows) { return random_quant_matrix(t, kCols, rows); }

enum class Path { kDots, kTiles, kTilesNoVnni, kRepacked };

void bench_matmul(benchmark::State& state, DType t, int64_t rows, Path path) {
  const std::vector<uint8_t> w = random_matrix(t, rows);
  MatrixView mv{t, kCols, rows, w.data(), row_bytes(t, kCols)};
  std::vector<uint8_t> packed;
  if (path == Path::kRepacked) {
    packed.resize(static_cast<size_t>(rows) * repacked_row_bytes(t, kCols));
    mv = repack_groups(mv, packed.data(), 0, rows / kRepackRows);
  }
  std::vector<float> x(static_cast<size_t>(kTokens * kCols));
  uint64_t s = 7;
  for (auto& v : x) v = uniform(s);
  ThreadPool pool(1);
  QuantizedActivations q;
  q.quantize(t, x.data(), kTokens, kCols, pool);
  std::vector<float> y(static_cast<size_t>(kTokens * rows));
  const VecDotFn dot = vec_dot_fn(t);
  const VecDotTileFn novnni = detail::avx512_vec_dot_tile(t, false);
  for (auto _ : state) {
    if (path == Path::kTiles || path == Path::kRepacked) {
      matmul(mv, q, kTokens, y.data(), rows, pool);
    } else {
      // Blocks of 16 rows as matmul hands them out; every token sweeps the block.
      for (int64_t r0 = 0; r0 < rows; r0 += 16) {
        if (path == Path::kTilesNoVnni) {
          novnni(kCols, mv.row(r0), mv.row_stride, 16, q.row(0), q.row_stride(), kTokens, y.data() + r0, rows);
          continue;
        }
        for (int64_t k = 0; k < kTokens; ++k) {
          for (int64_t r = r0; r < r0 + 16; ++r) y[k * rows + r] = dot(kCols, mv.row(r), q.row(k));
        }
      }
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(rows * kCols * kTokens) * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

[[maybe_unused]] const bool registered = [] {
  for (DType t : {DType::Q4_K, DType::Q6_K, DType::Q8_0, DType::Q5_K, DType::Q4_0}) {
    for (int64_t rows : {2048, 8192}) {
      const std::string base = "matmul/" + std::string(dtype_name(t)) + "/" + std::to_string(rows) + "/";
      auto add = [&](const char* name, Path p) {
        benchmark::RegisterBenchmark((base + name).c_str(), bench_matmul, t, rows, p)
            ->Unit(benchmark::kMillisecond)
            ->MinTime(1.0);
      };
      add("dots", Path::kDots);
      if (vec_dot_tile_fn(t)) add("tiles", Path::kTiles);
      if (repacks(t, rows, kCols)) add("repacked", Path::kRepacked);
      if (detail::cpu_has_avx512_vnni() && detail::avx512_vec_dot_tile(t, false)) add("tiles-novnni", Path::kTilesNoVnni);
    }
  }
  return true;
}();

}  // namespace
}  // namespace strata::tensor
