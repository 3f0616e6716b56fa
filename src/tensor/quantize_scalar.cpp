// Activation quantizers (f32 row -> vec_dot format). The scalar code is the definition; the AVX2
// twins of Q8_0 and Q8_K (x86/quantize_avx2.cpp) give the same bits, so quantized activations never
// depend on the machine. Semantics follow llama.cpp on x86:
//  - Q8_0 / Q8_1: the AVX path of quantize_row_q8_0/q8_1: amax = max|x|, d = amax/127 (stored f16),
//    id = amax ? 127/amax : 0, q = round-half-to-even(x*id) (x*id computed in f32, no FMA);
//    Q8_1 also stores s = f16(d * sum(q)) with the unrounded f32 d.
//  - Q8_K: quantize_row_q8_K_ref: m = first element of largest |x|, iscale = -127/m,
//    q = min(127, round-half-to-even(iscale*x)), d = 1/iscale as f32, bsums = sums of 16 q.
// For non-finite inputs the output is unspecified (but free of undefined behaviour).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tensor/blocks.h"
#include "tensor/quants.h"

namespace strata::tensor {
namespace detail {
namespace {

// Rounds half to even and saturates to [-128, 127]; NaN gives -128 (what cvtps_epi32 + packs do).
int8_t round_sat_i8(float v) {
  if (!(v == v)) return -128;
  if (v >= 127.0f) return 127;
  if (v <= -128.0f) return -128;
  // Adding and removing 1.5*2^23 rounds to an integer with the current (nearest-even) mode;
  // exact for |v| < 2^22. (Without -ffast-math the compiler may not fold the pair away.)
  const float r = (v + 12582912.0f) - 12582912.0f;
  return static_cast<int8_t>(static_cast<int>(r));
}

float max_abs(const float* x, int n) {
  float amax = 0.0f;
  for (int j = 0; j < n; ++j) {
    const float a = std::fabs(x[j]);
    amax = a > amax ? a : amax;
  }
  return amax;
}

}  // namespace

void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    const float amax = max_abs(x, kQK);
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < kQK; ++j) y[i].qs[j] = round_sat_i8(x[j] * id);
  }
}

void quantize_row_q8_1(const float* x, BlockQ8_1* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    const float amax = max_abs(x, kQK);
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int sum = 0;
    for (int j = 0; j < kQK; ++j) {
      y[i].qs[j] = round_sat_i8(x[j] * id);
      sum += y[i].qs[j];
    }
    y[i].d = fp32_to_fp16(d);
    y[i].s = fp32_to_fp16(d * static_cast<float>(sum));
  }
}

void quantize_row_q8_k(const float* x, BlockQ8K* y, int64_t n) {
  for (int64_t i = 0; i < n / kQKK; ++i, x += kQKK) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kQKK; ++j) {
      const float a = std::fabs(x[j]);
      if (a > amax) {
        amax = a;
        max = x[j];
      }
    }
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof(BlockQ8K));
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < kQKK; ++j) y[i].qs[j] = round_sat_i8(iscale * x[j]);
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += y[i].qs[16 * g + l];
      y[i].bsums[g] = static_cast<int16_t>(sum);
    }
    y[i].d = 1.0f / iscale;
  }
}

void f32_to_f16_f16c(const float* x, uint16_t* out, int64_t n);  // x86/vec_dot_avx2.cpp

}  // namespace detail

void quantize_activations(DType format, const float* x, void* dst, int64_t n) {
  switch (format) {
    case DType::F32: std::memcpy(dst, x, static_cast<size_t>(n) * sizeof(float)); return;
    case DType::F16: {  // exact rounding either way; F16C is just faster
      auto* h = static_cast<uint16_t*>(dst);
      if (best_isa() >= Isa::Avx2) return detail::f32_to_f16_f16c(x, h, n);
      for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_fp16(x[i]);
      return;
    }
    case DType::BF16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_bf16(x[i]);
      return;
    }
    case DType::Q8_0: {
      auto* y = static_cast<detail::BlockQ8_0*>(dst);
      return best_isa() >= Isa::Avx2 ? detail::quantize_row_q8_0_avx2(x, y, n) : detail::quantize_row_q8_0(x, y, n);
    }
    case DType::Q8_1: return detail::quantize_row_q8_1(x, static_cast<detail::BlockQ8_1*>(dst), n);
    case DType::Q8_K: {
      auto* y = static_cast<detail::BlockQ8K*>(dst);
      return best_isa() >= Isa::Avx2 ? detail::quantize_row_q8_k_avx2(x, y, n) : detail::quantize_row_q8_k(x, y, n);
    }
    default:
      std::fprintf(stderr, "strata: quantize_activations: unsupported format %.*s\n",
                   static_cast<int>(dtype_name(format).size()), dtype_name(format).data());
      std::abort();
  }
}

}  // namespace strata::tensor
