// Internal: AVX-512 helpers shared by the x86/*_avx512.cpp kernel files. Only intrinsics and
// internal-linkage helpers (see blocks.h on why).
// GCC 12's _mm512_undefined_* ("__Y = __Y") trips -Wuninitialized when inlined (GCC bug 105593,
// fixed in 13); the diagnostic is attributed to the header, so it is silenced before including it.
#pragma once
#pragma GCC diagnostic ignored "-Wuninitialized"
#ifndef __clang__  // clang has no such warning (and warns about the unknown name)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "tensor/blocks.h"
#include "tensor/x86/avx2_common.h"

namespace strata::tensor::detail {
namespace {

inline __m512i load512(const void* p) { return _mm512_loadu_si512(p); }
inline __m512i bcast256(const void* p) { return _mm512_broadcast_i64x4(load256(p)); }

// acc += per-lane integer dot of u (unsigned bytes) and s (signed bytes) times per-lane scales.
// V: vpdpbusd lanes are sums of four products, |sum| < 2^15 for every format here, so each lane is
// a sign-extended int16 and vpdpwssd against (scale, 0) pairs multiplies it by the scale.
// !V: vpmaddubsw pairs times int16 scales. The scale vector comes from scale_vec.
template <bool V>
inline __m512i dot_scaled(__m512i acc, __m512i u, __m512i s, __m512i scale) {
  if constexpr (V) {
    return _mm512_dpwssd_epi32(acc, _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, s), scale);
  } else {
    return _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), scale));
  }
}

// Scales for one 64-element chunk, one int16 per position: position i covers chunk elements 2i and
// 2i+1 (V: int32 lane i/2 covers elements 4(i/2)..+3 and odd positions are zero), so it takes the
// scale of group (64*chunk + 2i) / group_size. Built with vpshufb from a 128-bit-lane broadcast of
// eight int16 scales (for 16-element groups: groups 8h..8h+7, h = chunk / 2).
template <bool V>
struct ScaleCtrl {
  __m512i ctrl[4];
  explicit ScaleCtrl(int group) {
    for (int c = 0; c < 4; ++c) {
      alignas(64) int8_t v[64];
      for (int b = 0; b < 64; ++b) {
        const int e = V ? 64 * c + 4 * (b / 4) : 64 * c + 2 * (b / 2);
        const int g = (e / group) % 8;
        v[b] = static_cast<int8_t>(V && b % 4 >= 2 ? -128 : 2 * g + b % 2);
      }
      ctrl[c] = _mm512_load_si512(v);
    }
  }
};

inline __m512i scale_vec(__m512i ctrl, __m512i bc) { return _mm512_shuffle_epi8(bc, ctrl); }
inline __m512i bcast8x16(__m128i x) { return _mm512_broadcast_i32x4(x); }

// Byte masks selecting bit 2c in the low 32 bytes and bit 2c+1 in the high 32 bytes: the high bit
// planes (Q3_K hmask, Q5_K qh) for 64-element chunk c when the 32 plane bytes are broadcast.
inline __m512i plane_bits(int c) {
  const __m256i lo = _mm256_set1_epi8(static_cast<char>(1 << (2 * c)));
  const __m256i hi = _mm256_set1_epi8(static_cast<char>(1 << (2 * c + 1)));
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// Per-16-bit-word shift counts: a in the low 256 bits, b in the high 256 bits.
inline __m512i counts(int a, int b) {
  return _mm512_inserti64x4(_mm512_set1_epi16(static_cast<int16_t>(a)), _mm256_set1_epi16(static_cast<int16_t>(b)), 1);
}

// Zeroes a tile's integer accumulators: S chains x M weight rows x N tokens.
template <int S, int M, int N>
inline void zero_tile(__m512i (&s)[S][M][N]) {
  #pragma GCC unroll 16
  for (int k = 0; k < S; ++k) {
    #pragma GCC unroll 16
    for (int m = 0; m < M; ++m) {
      #pragma GCC unroll 16
      for (int t = 0; t < N; ++t) s[k][m][t] = _mm512_setzero_si512();
    }
  }
}

}  // namespace
}  // namespace strata::tensor::detail
