// Helpers for the quantization tests: random weight rows with sane scales, activation rows, the
// magnitude M that error bounds are relative to, and the list of kernels to compare.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "tensor/blocks.h"
#include "tensor/quants.h"

namespace strata::tensor::testing {

// Weight types with a dot product.
inline const std::vector<DType>& dot_types() {
  static const std::vector<DType> t = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1,
                                       DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::IQ4_NL, DType::Q2_K,
                                       DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS};
  return t;
}

inline int64_t block_elems(DType t) { return info(t).block_elems; }
inline size_t block_bytes(DType t) { return info(t).block_bytes; }

// Byte offsets of a block's f16 scale (`d`) and of its f16 min/offset field (-1 if none).
inline int d_offset(DType t) {
  switch (t) {
    case DType::Q2_K: return 80;
    case DType::Q3_K: return 108;
    case DType::Q6_K: return 208;
    default: return 0;
  }
}
inline int min_offset(DType t) {
  switch (t) {
    case DType::Q4_1:
    case DType::Q5_1:
    case DType::Q4_K:
    case DType::Q5_K: return 2;
    case DType::Q2_K: return 82;
    default: return -1;
  }
}

inline void put_f16(uint8_t* p, float v) {
  const uint16_t h = fp32_to_fp16(v);
  std::memcpy(p, &h, 2);
}

// A row of n weights: random bytes, with the f16 scale fields replaced by values of magnitude
// 1e-3..1e-1 (random sign for d and Q4_1/Q5_1 m; K-quant dmin positive). Float types get N(0,1).
inline std::vector<uint8_t> random_weights(DType t, int64_t n, std::mt19937& rng) {
  std::vector<uint8_t> row(row_bytes(t, n));
  std::uniform_real_distribution<float> mag(1e-3f, 1e-1f);
  std::bernoulli_distribution neg(0.5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  if (t == DType::F32 || t == DType::F16 || t == DType::BF16) {
    for (int64_t i = 0; i < n; ++i) {
      const float v = normal(rng);
      if (t == DType::F32) std::memcpy(row.data() + 4 * i, &v, 4);
      const uint16_t h = t == DType::F16 ? fp32_to_fp16(v) : fp32_to_bf16(v);
      if (t != DType::F32) std::memcpy(row.data() + 2 * i, &h, 2);
    }
    return row;
  }
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& b : row) b = static_cast<uint8_t>(byte(rng));
  const bool k_min = t == DType::Q2_K || t == DType::Q4_K || t == DType::Q5_K;
  for (size_t off = 0; off < row.size(); off += block_bytes(t)) {
    put_f16(row.data() + off + d_offset(t), neg(rng) ? -mag(rng) : mag(rng));
    if (min_offset(t) >= 0) put_f16(row.data() + off + min_offset(t), (k_min || !neg(rng)) ? mag(rng) : -mag(rng));
  }
  return row;
}

inline std::vector<float> random_floats(int64_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = normal(rng);
  return x;
}

// Activations for weight type t: random floats quantized to vec_dot_type(t). Returned as 4-byte
// aligned storage (Q8_K holds an f32).
inline std::vector<uint32_t> activations_for(DType t, const std::vector<float>& x) {
  const DType f = vec_dot_type(t);
  std::vector<uint32_t> buf((row_bytes(f, static_cast<int64_t>(x.size())) + 3) / 4);
  quantize_activations(f, x.data(), buf.data(), static_cast<int64_t>(x.size()));
  return buf;
}

inline std::vector<float> dequant(DType t, const void* p, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n));
  dequantize_row(t, p, y.data(), n);
  return y;
}

// M = sum_i |a_i| * (|w_i - mt_i| + |mt_i|) where mt_i is the weight's min/offset term (the
// dequantization with d forced to 0). Float rounding in any of the kernels is bounded relative to
// this: it covers the scaled-quant part and the min part separately, which may cancel in w_i.
inline double magnitude(DType t, const std::vector<uint8_t>& w, const std::vector<float>& a) {
  const int64_t n = static_cast<int64_t>(a.size());
  const std::vector<float> wd = dequant(t, w.data(), n);
  std::vector<float> mt(static_cast<size_t>(n), 0.0f);
  if (min_offset(t) >= 0) {
    std::vector<uint8_t> zeroed = w;
    for (size_t off = 0; off < zeroed.size(); off += block_bytes(t)) put_f16(zeroed.data() + off + d_offset(t), 0.0f);
    mt = dequant(t, zeroed.data(), n);
  }
  double m = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    m += std::fabs(static_cast<double>(a[i])) * (std::fabs(static_cast<double>(wd[i]) - mt[i]) + std::fabs(mt[i]));
  }
  return m;
}

// The stated SIMD-vs-scalar bound (see the comments in src/tensor/x86/*.cpp).
inline double simd_bound(int64_t n, double m) { return std::ldexp(1.0, -22) * (static_cast<double>(n) / 32 + 16) * m + 1e-30; }

// Every SIMD kernel this CPU can run for weight type t, with a name for messages.
struct NamedKernel {
  std::string name;
  VecDotFn fn;
};
inline std::vector<NamedKernel> simd_kernels(DType t) {
  std::vector<NamedKernel> out;
  if (detail::cpu_has_avx2()) {
    if (VecDotFn f = detail::avx2_vec_dot(t)) out.push_back({"avx2", f});
  }
  if (detail::cpu_has_avx512()) {
    if (VecDotFn f = detail::avx512_vec_dot(t, false)) out.push_back({"avx512", f});
    if (detail::cpu_has_avx512_vnni()) {
      if (VecDotFn f = detail::avx512_vec_dot(t, true)) out.push_back({"avx512-vnni", f});
    }
  }
  return out;
}

}  // namespace strata::tensor::testing
