// Internal: helpers at the AVX2 level (256-bit and SSE intrinsics) shared by the x86/*_avx2.cpp and
// *_avx512.cpp kernel files, both compiled with AVX2 + F16C. Only intrinsics and internal-linkage
// helpers (see blocks.h on why).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace strata::tensor::detail {
namespace {

inline float h2f(uint16_t h) { return _cvtsh_ss(h); }
inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

inline float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The sixteen Q3_K scales (6-bit value - 32) as signed bytes, unpacked in registers (writing them
// to memory and reloading as a vector would stall on store forwarding).
inline __m128i q3k_scales_i8(const uint8_t* s) {
  uint32_t top;
  std::memcpy(&top, s + 8, 4);
  const __m128i lo8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(s));
  const __m128i m4 = _mm_set1_epi8(0x0f);
  // Low 4 bits: bytes 0..7 low nibbles (scales 0..7), then their high nibbles (scales 8..15).
  const __m128i low = _mm_unpacklo_epi64(_mm_and_si128(lo8, m4), _mm_and_si128(_mm_srli_epi16(lo8, 4), m4));
  // High 2 bits: scale j takes bits 2*(j/4) of byte 8 + j%4, i.e. dword j/4 of `top` shifted by 2*(j/4).
  const __m128i t = _mm_srlv_epi32(_mm_set1_epi32(static_cast<int>(top)), _mm_setr_epi32(0, 2, 4, 6));
  const __m128i high = _mm_slli_epi16(_mm_and_si128(t, _mm_set1_epi8(3)), 4);
  return _mm_sub_epi8(_mm_or_si128(low, high), _mm_set1_epi8(32));
}

}  // namespace
}  // namespace strata::tensor::detail
