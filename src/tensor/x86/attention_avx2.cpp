// AVX2 + FMA + F16C instantiation of the attention kernel (attention_impl.h): 8 lanes, F16C
// conversion, and a polynomial exp for the softmax weights.
#include <immintrin.h>

#include "tensor/attention_impl.h"

namespace strata::tensor::detail {
namespace {

struct Avx2Ops {
  static constexpr int W = 8;
  static constexpr int kValueVectors = 2;  // 4 rows x 2 accumulators + loads fit the 16 registers
  static constexpr int kScoreRows = 2, kScoreVectors = 4;  // 8 accumulators, 4 key loads, 2 queries
  using V = __m256;
  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V max(V a, V b) { return _mm256_max_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static float hsum(V v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // 8 x 8 in place: pairs of rows interleaved, then pairs of pairs, then the 128-bit halves.
  static void transpose(V* r) {
    V t[8];
    #pragma GCC unroll 8
    for (int i = 0; i < 8; i += 2) t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]), t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    #pragma GCC unroll 8
    for (int i = 0; i < 8; i += 4) {
      r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
      r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
      r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
      r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
    }
    #pragma GCC unroll 8
    for (int i = 0; i < 4; ++i) {
      t[i] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x20);
      t[i + 4] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x31);
    }
    #pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) r[i] = t[i];
  }
  static V load_f16(const uint16_t* src, int lanes) {
    if (lanes >= 8) return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
    alignas(16) uint16_t h[8] = {};
    for (int i = 0; i < lanes; ++i) h[i] = src[i];
    return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(h)));
  }
  static float hmax(V v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // e^x for x <= 0: x = n ln2 + r with |r| <= ln2/2 (ln2 split in two so n ln2 is exact enough),
  // e^r by its degree-7 Taylor polynomial (truncation < 6e-9 relative), times 2^n built in the
  // exponent bits. Below -87 (and for -inf) the result is 0 so 2^n stays a normal number.
  static V exp(V x) {
    const V in_range = _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_GE_OQ);
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
    const V n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    V r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    V p = _mm256_set1_ps(1.0f / 5040);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_and_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(bits)), in_range);
  }
  static void f16_to_f32(const uint16_t* src, float* dst, int64_t n, int64_t n_pad) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
    }
    for (; i < n; ++i) dst[i] = _cvtsh_ss(src[i]);
    for (; i < n_pad; ++i) dst[i] = 0.0f;
  }
};

}  // namespace

void attention_avx2(const AttentionTask& task) { AttentionKernel<Avx2Ops>::run(task); }

void attention_exp_avx2(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i + 8 <= n; i += 8) Avx2Ops::store(out + i, Avx2Ops::exp(Avx2Ops::load(x + i)));
}

}  // namespace strata::tensor::detail
