// The portable attention kernel (plain floats, std::exp) and the run-time choice among the ISAs.
#include "tensor/attention_kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/dtype.h"
#include "tensor/attention_impl.h"
#include "tensor/blocks.h"

namespace strata::tensor {
namespace detail {

void attention_avx2(const AttentionTask& task);
void attention_avx512(const AttentionTask& task);
void attention_exp_avx2(const float* x, float* out, int64_t n);
void attention_exp_avx512(const float* x, float* out, int64_t n);

namespace {

// One lane: the reference the SIMD versions are checked against.
struct ScalarOps {
  static constexpr int W = 1;
  static constexpr int kValueVectors = 4;
  static constexpr int kScoreRows = 4, kScoreVectors = 4;
  using V = float;
  static V zero() { return 0.0f; }
  static V set1(float x) { return x; }
  static V load(const float* p) { return *p; }
  static void store(float* p, V v) { *p = v; }
  static V add(V a, V b) { return a + b; }
  static V sub(V a, V b) { return a - b; }
  static V mul(V a, V b) { return a * b; }
  static V max(V a, V b) { return a > b ? a : b; }
  static V fma(V a, V b, V c) { return a * b + c; }
  static float hsum(V v) { return v; }
  static float hmax(V v) { return v; }
  static void transpose(V*) {}
  static V load_f16(const uint16_t* src, int) { return fp16_to_fp32(*src); }
  static V exp(V x) { return std::exp(x); }
  static void f16_to_f32(const uint16_t* src, float* dst, int64_t n, int64_t n_pad) {
    for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(src[i]);
    for (int64_t i = n; i < n_pad; ++i) dst[i] = 0.0f;
  }
};

void attention_scalar(const AttentionTask& task) { AttentionKernel<ScalarOps>::run(task); }

}  // namespace
}  // namespace detail

void combine_attention_spans(int32_t n, const float* const* acc, const float* m, const float* l, int32_t dv,
                             float* out) {
  float top = m[0];
  for (int32_t s = 1; s < n; ++s) top = std::max(top, m[s]);
  float sum = 0.0f;
  for (int32_t d = 0; d < dv; ++d) out[d] = 0.0f;
  for (int32_t s = 0; s < n; ++s) {
    if (m[s] == -std::numeric_limits<float>::infinity()) continue;  // no position in this span
    const float e = std::exp(m[s] - top);  // exactly 1 for the span holding the max
    sum += l[s] * e;
    for (int32_t d = 0; d < dv; ++d) out[d] += acc[s][d] * e;
  }
  const float inv = 1.0f / sum;
  for (int32_t d = 0; d < dv; ++d) out[d] *= inv;
}

AttentionFn attention_fn(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return detail::attention_scalar;
    case Isa::Avx2: return detail::cpu_has_avx2() ? detail::attention_avx2 : nullptr;
    case Isa::Avx512: return detail::cpu_has_avx512() ? detail::attention_avx512 : nullptr;
  }
  return nullptr;
}

AttentionFn attention_fn() {
  static const AttentionFn fn = [] {
    for (int i = static_cast<int>(best_isa()); i >= 0; --i) {
      if (AttentionFn f = attention_fn(static_cast<Isa>(i))) return f;
    }
    return detail::attention_scalar;
  }();
  return fn;
}

ExpFn attention_exp_fn(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return nullptr;
    case Isa::Avx2: return detail::cpu_has_avx2() ? detail::attention_exp_avx2 : nullptr;
    case Isa::Avx512: return detail::cpu_has_avx512() ? detail::attention_exp_avx512 : nullptr;
  }
  return nullptr;
}

}  // namespace strata::tensor
