// AVX2 twins of the activation quantizers Q8_0 and Q8_K (quantize_scalar.cpp), bit for bit: the
// same maximum, the same f32 products (no FMA), vcvtps2dq's nearest-even rounding after the scalar
// code's saturation, so quantized activations still do not depend on the machine.
// Only intrinsics and internal-linkage helpers here (see blocks.h on why).
#include <cmath>

#include "tensor/blocks.h"
#include "tensor/quants.h"
#include "tensor/x86/avx2_common.h"

namespace strata::tensor::detail {
namespace {

inline float hmax256(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

// max |x[j]| over n (a multiple of 8) floats; NaNs are skipped, as the scalar `a > amax` does
// (vmaxps returns its second operand when either is NaN).
inline float max_abs(const float* x, int n) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_setzero_ps();
  for (int j = 0; j < n; j += 8) m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)), m);
  return hmax256(m);
}

// round_sat_i8 of 8 products: NaN and v <= -128 give -128, v >= 127 gives 127, else nearest even.
inline __m256i round_sat(__m256 v) {
  v = _mm256_max_ps(v, _mm256_set1_ps(-128.0f));  // NaN -> -128 (second operand)
  return _mm256_cvtps_epi32(_mm256_min_ps(v, _mm256_set1_ps(127.0f)));
}

// Four vectors of 8 int32 in [-128, 127] as 32 int8 in order.
inline __m256i pack32(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);  // lanes interleaved
  const __m256i bytes = _mm256_packs_epi16(ab, cd);
  return _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// 32 quantized values of x * s (each 8-float product in f32, as the scalar code).
inline __m256i quantize32(const float* x, __m256 s, __m256i (&q32)[4]) {
  for (int k = 0; k < 4; ++k) q32[k] = round_sat(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), s));
  return pack32(q32[0], q32[1], q32[2], q32[3]);
}

inline int hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  return _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32(s, 1)));
}

}  // namespace

void quantize_row_q8_0_avx2(const float* x, BlockQ8_0* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    const float amax = max_abs(x, kQK);
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    y[i].d = fp32_to_fp16(d);
    __m256i q32[4];
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[i].qs), quantize32(x, _mm256_set1_ps(id), q32));
  }
}

void quantize_row_q8_k_avx2(const float* x, BlockQ8K* y, int64_t n) {
  for (int64_t i = 0; i < n / kQKK; ++i, x += kQKK) {
    const float amax = max_abs(x, kQKK);
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof(BlockQ8K));
      continue;
    }
    int j = 0;  // the first element of the largest magnitude, as the scalar scan picks it
    while (std::fabs(x[j]) != amax) ++j;
    const float iscale = -127.0f / x[j];
    const __m256 s = _mm256_set1_ps(iscale);
    for (int c = 0; c < kQKK / 32; ++c) {
      __m256i q32[4];
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[i].qs + 32 * c), quantize32(x + 32 * c, s, q32));
      y[i].bsums[2 * c] = static_cast<int16_t>(hsum_i32(_mm256_add_epi32(q32[0], q32[1])));
      y[i].bsums[2 * c + 1] = static_cast<int16_t>(hsum_i32(_mm256_add_epi32(q32[2], q32[3])));
    }
    y[i].d = 1.0f / iscale;
  }
}

}  // namespace strata::tensor::detail
