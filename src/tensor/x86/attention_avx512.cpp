// AVX-512 (F + BW + VL) instantiation of the attention kernel (attention_impl.h): 16 lanes, masked
// loads for row tails, and the same polynomial exp as the AVX2 file.
// GCC 12's _mm512_undefined_* trips -W(maybe-)uninitialized when inlined (GCC bug 105593, fixed in
// 13); the diagnostic is attributed to the header, so it is silenced before including it.
#pragma GCC diagnostic ignored "-Wuninitialized"
#ifndef __clang__  // clang has no such warning (and warns about the unknown name)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "tensor/attention_impl.h"

namespace strata::tensor::detail {
namespace {

struct Avx512Ops {
  static constexpr int W = 16;
  static constexpr int kValueVectors = 4;  // 4 rows x 4 accumulators + loads fit the 32 registers
  static constexpr int kScoreRows = 4, kScoreVectors = 4;  // 16 accumulators, 4 key loads, 4 queries
  using V = __m512;
  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V max(V a, V b) { return _mm512_max_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static float hsum(V v) { return _mm512_reduce_add_ps(v); }
  static float hmax(V v) { return _mm512_reduce_max_ps(v); }
  // 16 x 16 in place: pairs of rows interleaved, pairs of pairs, then 128-bit lanes in two rounds.
  static void transpose(V* r) {
    V t[16];
    #pragma GCC unroll 16
    for (int i = 0; i < 16; i += 2) t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]), t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    #pragma GCC unroll 16
    for (int i = 0; i < 16; i += 4) {
      r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
      r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xee);
      r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
      r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xee);
    }
    #pragma GCC unroll 16
    for (int h = 0; h < 16; h += 8) {
      #pragma GCC unroll 16
      for (int i = 0; i < 4; ++i) {
        t[h + i] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0x88);
        t[h + i + 4] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0xdd);
      }
    }
    #pragma GCC unroll 16
    for (int i = 0; i < 8; ++i) {
      r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
      r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
    }
  }
  static V load_f16(const uint16_t* src, int lanes) {
    if (lanes >= 16) return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src)));
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(static_cast<__mmask16>((1u << lanes) - 1), src));
  }
  // e^x for x <= 0, as in attention_avx2.cpp (degree-7 Taylor polynomial on |r| <= ln2/2).
  static V exp(V x) {
    const __mmask16 in_range = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_GE_OQ);
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
    const V n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    V r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    V p = _mm512_set1_ps(1.0f / 5040);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    const __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_maskz_mul_ps(in_range, p, _mm512_castsi512_ps(bits));
  }
  static void f16_to_f32(const uint16_t* src, float* dst, int64_t n, int64_t n_pad) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
      _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
    }
    if (i < n) {  // masked tail: lanes past n load as 0 and never touch memory
      const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
      _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, src + i)));
      i += 16;
    }
    for (; i < n_pad; ++i) dst[i] = 0.0f;
  }
};

}  // namespace

void attention_avx512(const AttentionTask& task) { AttentionKernel<Avx512Ops>::run(task); }

void attention_exp_avx512(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i + 16 <= n; i += 16) Avx512Ops::store(out + i, Avx512Ops::exp(Avx512Ops::load(x + i)));
}

}  // namespace strata::tensor::detail
