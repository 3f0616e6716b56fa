// Dot-product kernels per weight type and ISA: each row of a weight matrix of 4096-wide rows
// against one activation row, as in single-token decode. Reports weight bytes per second and
// GFLOP/s (2 per weight element). Prompt-sized products are in matmul_bench.cpp.
//   vec_dot/<type>/<isa>         64 MB matrix (beyond the caches): memory-bound decode speed
//   vec_dot_cached/<type>/<isa>  512 KB matrix (L2-resident): kernel compute throughput
// Also times the activation quantizers.
//
//   ./strata_microbench --benchmark_filter='vec_dot/Q4_K'
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/dtype.h"
#include "bench_random.h"
#include "tensor/blocks.h"
#include "tensor/quants.h"

namespace strata::tensor {
namespace {

constexpr int64_t kCols = 4096;
constexpr size_t kLargeBytes = size_t{64} << 20;
constexpr size_t kCachedBytes = size_t{512} << 10;

using bench::next;
using bench::uniform;

int d_offset(DType t) { return t == DType::Q2_K ? 80 : t == DType::Q3_K ? 108 : t == DType::Q6_K ? 208 : 0; }
int min_offset(DType t) {
  switch (t) {
    case DType::Q4_1: case DType::Q5_1: case DType::Q4_K: case DType::Q5_K: return 2;
    case DType::Q2_K: return 82;
    default: return -1;
  }
}

// One weight matrix at a time (benchmarks of the same type and size run back to back).
struct Matrix {
  DType type;
  size_t bytes;
  size_t row_bytes;
  int64_t rows;
  std::vector<uint8_t> storage;
  uint8_t* data = nullptr;    // 64-byte aligned start of the rows inside storage
  size_t size = 0;
  std::vector<uint32_t> act;  // activation row in vec_dot_type(type), 4-byte aligned
};

const Matrix& matrix(DType t, size_t bytes) {
  static std::unique_ptr<Matrix> m;
  if (m && m->type == t && m->bytes == bytes) return *m;
  m.reset();
  auto mm = std::make_unique<Matrix>();
  mm->type = t;
  mm->bytes = bytes;
  mm->row_bytes = row_bytes(t, kCols);
  mm->rows = static_cast<int64_t>(bytes / mm->row_bytes);
  mm->size = mm->row_bytes * static_cast<size_t>(mm->rows);
  mm->storage.resize(mm->size + 64);
  const auto base = reinterpret_cast<uintptr_t>(mm->storage.data());
  mm->data = mm->storage.data() + (64 - base % 64) % 64;
  uint64_t s = 0x9E3779B97F4A7C15ull;
  uint8_t* p = mm->data;
  const size_t size = mm->size;
  if (t == DType::F32) {
    for (size_t i = 0; i + 4 <= size; i += 4) {
      const float v = uniform(s);
      std::memcpy(p + i, &v, 4);
    }
  } else if (t == DType::F16 || t == DType::BF16) {
    for (size_t i = 0; i + 2 <= size; i += 2) {
      const uint16_t h = t == DType::F16 ? fp32_to_fp16(uniform(s)) : fp32_to_bf16(uniform(s));
      std::memcpy(p + i, &h, 2);
    }
  } else {
    for (size_t i = 0; i + 8 <= size; i += 8) {
      const uint64_t r = next(s);
      std::memcpy(p + i, &r, 8);
    }
    const size_t bb = info(t).block_bytes;
    for (size_t off = 0; off < size; off += bb) {
      const uint16_t d = fp32_to_fp16(0.01f + 0.01f * uniform(s));
      std::memcpy(p + off + d_offset(t), &d, 2);
      if (min_offset(t) >= 0) std::memcpy(p + off + min_offset(t), &d, 2);
    }
  }
  std::vector<float> x(kCols);
  for (auto& v : x) v = uniform(s);
  const DType f = vec_dot_type(t);
  mm->act.resize((row_bytes(f, kCols) + 3) / 4);
  quantize_activations(f, x.data(), mm->act.data(), kCols);
  m = std::move(mm);
  return *m;
}

void bench_vec_dot(benchmark::State& state, DType t, VecDotFn fn, size_t bytes) {
  const Matrix& m = matrix(t, bytes);
  for (auto _ : state) {
    float acc = 0.0f;
    for (int64_t r = 0; r < m.rows; ++r) acc += fn(kCols, m.data + static_cast<size_t>(r) * m.row_bytes, m.act.data());
    benchmark::DoNotOptimize(acc);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(m.size));
  state.counters["rows"] = static_cast<double>(m.rows);
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(m.rows * kCols) * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

void bench_quantize(benchmark::State& state, DType f) {
  uint64_t s = 42;
  std::vector<float> x(kCols);
  for (auto& v : x) v = uniform(s);
  std::vector<uint32_t> out((row_bytes(f, kCols) + 3) / 4);
  for (auto _ : state) {
    quantize_activations(f, x.data(), out.data(), kCols);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * kCols * 4);
}

[[maybe_unused]] const bool registered = [] {
  const DType types[] = {DType::Q4_K, DType::Q6_K, DType::Q8_0, DType::Q5_K, DType::Q4_0, DType::IQ4_XS,
                         DType::Q3_K, DType::Q2_K, DType::Q5_0, DType::Q4_1, DType::Q5_1, DType::IQ4_NL,
                         DType::F16,  DType::BF16, DType::F32};
  for (const auto& [prefix, bytes] : {std::pair<std::string, size_t>{"vec_dot/", kLargeBytes},
                                     std::pair<std::string, size_t>{"vec_dot_cached/", kCachedBytes}}) {
    for (DType t : types) {
      const std::string base = prefix + std::string(dtype_name(t)) + "/";
      auto add = [&](const std::string& name, VecDotFn fn) {
        benchmark::RegisterBenchmark(name.c_str(), bench_vec_dot, t, fn, bytes)->Unit(benchmark::kMicrosecond);
      };
      for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
        if (VecDotFn fn = vec_dot_fn(t, isa)) {
          add(base + std::string(isa_name(isa)) + (isa == Isa::Avx512 && detail::cpu_has_avx512_vnni() ? "-vnni" : ""), fn);
        }
      }
      if (detail::cpu_has_avx512_vnni()) {
        if (VecDotFn fn = detail::avx512_vec_dot(t, false)) add(base + "avx512", fn);
      }
    }
  }
  for (DType f : {DType::Q8_0, DType::Q8_1, DType::Q8_K, DType::F16}) {
    benchmark::RegisterBenchmark(("quantize_activations/" + std::string(dtype_name(f))).c_str(), bench_quantize, f);
  }
  return true;
}();

}  // namespace
}  // namespace strata::tensor
