// AVX-512 Q4_K, Q5_K and Q6_K dot products against Q8_K, as M x N tiles (M weight rows, N
// activation rows): each super-block of a weight row is unpacked once and used for every token of
// the tile. The single-row dot is the 1 x 1 instance. Per output, every instance performs the same
// float operations in the same order and lane layout (integer sums are exact, so how they are
// grouped does not matter), so tiled and single-row results are bit-identical. Error bound vs the
// scalar reference as stated in vec_dot_avx512.cpp.
// Only intrinsics and internal-linkage helpers here (see blocks.h on why).
#include "tensor/x86/avx512_common.h"
#include "tensor/x86/tile_driver.h"

namespace strata::tensor::detail {
namespace {

// Q4_K/Q5_K: the twelve packed bytes at s (four bytes past them are read and ignored) unpacked to
// sixteen bytes [sc0..sc7, m0..m7] (see unpack_k4_scales in blocks.h), in registers.
inline __m128i k4_scales_mins(const uint8_t* s) {
  const __m128i v = load128(s);
  // Low bits: sc0-3 = b0-3 & 63, sc4-7 = b8-11 & 15, m0-3 = b4-7 & 63, m4-7 = b8-11 >> 4.
  const __m128i a1 = _mm_shuffle_epi8(v, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, -1, -1, -1, -1));
  const __m128i a2 = _mm_shuffle_epi8(_mm_srli_epi16(v, 4),
                                      _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 8, 9, 10, 11));
  const __m128i low = _mm_and_si128(_mm_or_si128(a1, a2),
                                    _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 15, 15, 15, 15));
  // High 2 bits of sc4-7 / m4-7: the top bits of b0-3 / b4-7, moved to bits 4-5.
  const __m128i high = _mm_and_si128(
      _mm_shuffle_epi8(_mm_srli_epi16(v, 2), _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7)),
      _mm_set1_epi8(0x30));
  return _mm_or_si128(low, high);
}


// Integer partial sums per output: the 1 x 1 instance keeps two chains (even and odd chunks) for
// instruction-level parallelism; tiles have enough independent chains already.
template <int M, int N>
constexpr int kChains = M * N == 1 ? 2 : 1;

// Q4_K / Q5_K. Chunk c (elements 64c..64c+63) is the 32 bytes qs[32c..] broadcast to both halves,
// low nibbles in the low half (sub-block 2c) and high nibbles in the high half (sub-block 2c+1).
template <bool V, bool kFive, typename Block>
struct Q45K {
  // Measured on 2048 x 2048 x 512 products: with VNNI 8 tokens beat 4; without, 4 beat 8.
  static constexpr int kM = 1, kN = V ? 8 : 4;

  template <int M, int N>
  static void run(int64_t n, const uint8_t* vw, size_t ws, const uint8_t* va, size_t as, float* y, int64_t ys) {
    static const ScaleCtrl<V> sctl(32);
    constexpr int S = kChains<M, N>;
    const TileRows<Block, M, N> p(vw, ws, va, as);
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    __m512 acc[M][N];
    __m256 acc_m[M][N];
    #pragma GCC unroll 16
    for (int m = 0; m < M; ++m) {
      #pragma GCC unroll 16
      for (int t = 0; t < N; ++t) acc[m][t] = _mm512_setzero_ps(), acc_m[m][t] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < n / kQKK; ++i) {
      __m512i sc[M], qh[M];
      __m256i mins[M];
      __m128 dw[M];
      #pragma GCC unroll 16
      for (int m = 0; m < M; ++m) {
        const Block& b = p.w[m][i];
        const __m128i scm = k4_scales_mins(b.scales);
        sc[m] = bcast8x16(_mm_cvtepu8_epi16(scm));
        const __m128i mdup = _mm_shuffle_epi8(scm, _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15));
        mins[m] = _mm256_cvtepu8_epi16(mdup);
        // d and dmin are adjacent halves: convert both at once.
        uint32_t ddm;
        std::memcpy(&ddm, &b.d, 4);
        dw[m] = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(ddm)));
        if constexpr (kFive) qh[m] = bcast256(b.qh);
      }
      __m512i s[S][M][N];
      zero_tile(s);
      #pragma GCC unroll 8
      for (int c = 0; c < 4; ++c) {
        __m512i q[M], scl[M];
        #pragma GCC unroll 16
        for (int m = 0; m < M; ++m) {
          q[m] = bcast256(p.w[m][i].qs + 32 * c);
          q[m] = _mm512_and_si512(_mm512_mask_srli_epi16(q[m], 0xffff0000u, q[m], 4), m4);
          if constexpr (kFive) {
            q[m] = _mm512_mask_add_epi8(q[m], _mm512_test_epi8_mask(qh[m], plane_bits(c)), q[m], _mm512_set1_epi8(0x10));
          }
          scl[m] = scale_vec(sctl.ctrl[c], sc[m]);
        }
        #pragma GCC unroll 16
        for (int t = 0; t < N; ++t) {
          const __m512i yv = load512(p.a[t][i].qs + 64 * c);
          #pragma GCC unroll 16
          for (int m = 0; m < M; ++m) s[c % S][m][t] = dot_scaled<V>(s[c % S][m][t], q[m], yv, scl[m]);
        }
      }
      #pragma GCC unroll 16
      for (int m = 0; m < M; ++m) {
        #pragma GCC unroll 16
        for (int t = 0; t < N; ++t) {
          const BlockQ8K& a = p.a[t][i];
          const __m256i summ = _mm256_madd_epi16(load256(a.bsums), mins[m]);
          const __m128 dd = _mm_mul_ps(dw[m], _mm_set1_ps(a.d));  // [d * d_a, dmin * d_a]
          acc_m[m][t] = _mm256_fmadd_ps(_mm256_broadcastss_ps(_mm_movehdup_ps(dd)), _mm256_cvtepi32_ps(summ), acc_m[m][t]);
          const __m512i sum = S == 2 ? _mm512_add_epi32(s[0][m][t], s[S - 1][m][t]) : s[0][m][t];
          acc[m][t] = _mm512_fmadd_ps(_mm512_broadcastss_ps(dd), _mm512_cvtepi32_ps(sum), acc[m][t]);
        }
      }
    }
    #pragma GCC unroll 16
    for (int m = 0; m < M; ++m) {
      #pragma GCC unroll 16
      for (int t = 0; t < N; ++t) y[t * ys + m] = _mm512_reduce_add_ps(acc[m][t]) - hsum256(acc_m[m][t]);
    }
  }
};

// Q6_K. Per half h: low nibbles of ql[64h..64h+63] are elements 0..63 of the half in order, high
// nibbles elements 64..127; the two high bits come from qh[32h..] (bit pair 2g for quarter g).
template <bool V>
struct Q6K {
  // 4 and 8 tokens measure the same with VNNI; 4 is faster without.
  static constexpr int kM = 1, kN = 4;

  template <int M, int N>
  static void run(int64_t n, const uint8_t* vw, size_t ws, const uint8_t* va, size_t as, float* y, int64_t ys) {
    static const ScaleCtrl<V> sctl(16);
    constexpr int S = kChains<M, N>;
    const TileRows<BlockQ6K, M, N> p(vw, ws, va, as);
    const __m512i m4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30);
    const __m512i shl_4_2 = counts(4, 2), shr_0_2 = counts(0, 2);
    __m512 acc[M][N];
    #pragma GCC unroll 16
    for (int m = 0; m < M; ++m) {
      #pragma GCC unroll 16
      for (int t = 0; t < N; ++t) acc[m][t] = _mm512_setzero_ps();
    }
    for (int64_t i = 0; i < n / kQKK; ++i) {
      __m256i sc16[M];
      __m512i sc[M][2];
      #pragma GCC unroll 16
      for (int m = 0; m < M; ++m) {
        sc16[m] = _mm256_cvtepi8_epi16(load128(p.w[m][i].scales));
        sc[m][0] = bcast8x16(_mm256_castsi256_si128(sc16[m]));
        sc[m][1] = bcast8x16(_mm256_extracti128_si256(sc16[m], 1));
      }
      __m512i s[S][M][N];
      zero_tile(s);
      #pragma GCC unroll 8
      for (int h = 0; h < 2; ++h) {
        __m512i q0[M], q1[M], scl0[M], scl1[M];
        #pragma GCC unroll 16
        for (int m = 0; m < M; ++m) {
          const __m512i ql = load512(p.w[m][i].ql + 64 * h);
          const __m512i qh = bcast256(p.w[m][i].qh + 32 * h);
          const __m512i h0 = _mm512_and_si512(_mm512_sllv_epi16(qh, shl_4_2), m30);
          const __m512i h1 = _mm512_and_si512(_mm512_srlv_epi16(qh, shr_0_2), m30);
          // (x & m4) | h: ternary-logic truth table 0xEA = (A & B) | C.
          q0[m] = _mm512_ternarylogic_epi64(ql, m4, h0, 0xEA);
          q1[m] = _mm512_ternarylogic_epi64(_mm512_srli_epi16(ql, 4), m4, h1, 0xEA);
          scl0[m] = scale_vec(sctl.ctrl[2 * h], sc[m][h]);
          scl1[m] = scale_vec(sctl.ctrl[2 * h + 1], sc[m][h]);
        }
        #pragma GCC unroll 16
        for (int t = 0; t < N; ++t) {
          const __m512i y0 = load512(p.a[t][i].qs + 128 * h), y1 = load512(p.a[t][i].qs + 128 * h + 64);
          #pragma GCC unroll 16
          for (int m = 0; m < M; ++m) {
            s[0][m][t] = dot_scaled<V>(s[0][m][t], q0[m], y0, scl0[m]);
            s[S - 1][m][t] = dot_scaled<V>(s[S - 1][m][t], q1[m], y1, scl1[m]);
          }
        }
      }
      #pragma GCC unroll 16
      for (int m = 0; m < M; ++m) {
        const float dw = h2f(p.w[m][i].d);
        #pragma GCC unroll 16
        for (int t = 0; t < N; ++t) {
          const BlockQ8K& a = p.a[t][i];
          // Stored values are q+32: subtract 32 * sum_g sc_g * bsums_g.
          const __m256i corr = _mm256_slli_epi32(_mm256_madd_epi16(load256(a.bsums), sc16[m]), 5);
          const __m512i sum = S == 2 ? _mm512_add_epi32(s[0][m][t], s[S - 1][m][t]) : s[0][m][t];
          const __m512i sumi = _mm512_sub_epi32(sum, _mm512_zextsi256_si512(corr));
          acc[m][t] = _mm512_fmadd_ps(_mm512_set1_ps(a.d * dw), _mm512_cvtepi32_ps(sumi), acc[m][t]);
        }
      }
    }
    #pragma GCC unroll 16
    for (int m = 0; m < M; ++m) {
      #pragma GCC unroll 16
      for (int t = 0; t < N; ++t) y[t * ys + m] = _mm512_reduce_add_ps(acc[m][t]);
    }
  }
};


template <bool V>
VecDotFn dot_table(DType w) {
  switch (w) {
    case DType::Q4_K: return tile_dot<Q45K<V, false, BlockQ4K>>;
    case DType::Q5_K: return tile_dot<Q45K<V, true, BlockQ5K>>;
    case DType::Q6_K: return tile_dot<Q6K<V>>;
    default: return nullptr;
  }
}

template <bool V>
VecDotTileFn tile_table(DType w) {
  switch (w) {
    case DType::Q4_K: return tile_kernel<Q45K<V, false, BlockQ4K>>;
    case DType::Q5_K: return tile_kernel<Q45K<V, true, BlockQ5K>>;
    case DType::Q6_K: return tile_kernel<Q6K<V>>;
    default: return nullptr;
  }
}

}  // namespace

VecDotFn avx512_kquant_dot(DType w, bool vnni) { return vnni ? dot_table<true>(w) : dot_table<false>(w); }
VecDotTileFn avx512_kquant_dot_tile(DType w, bool vnni) { return vnni ? tile_table<true>(w) : tile_table<false>(w); }

}  // namespace strata::tensor::detail
