// AVX-512 VNNI kernels for the 16-row repacked formats (repack_blocks.h): one zmm lane per weight
// row, vpdpbusd of 64 weight bytes (4 elements x 16 rows) against 4 activation bytes broadcast.
// A tile is one group of 16 rows times N <= 8 tokens; every (row, token) output goes through the
// same integer sums and the same float operations in the same order for any N, so one-token decode
// and prompt tiles give identical bits. Integer sums are exact (bounds noted per format); the float
// side is, per block column: acc = fma(float(isum), d_w * d_a, acc) (K-quants then subtract the mins
// the same way). Only intrinsics and internal-linkage helpers here (see blocks.h on why).
#include <algorithm>
#include <type_traits>

#include "tensor/repack_blocks.h"
#include "tensor/x86/gemm16_common.h"
#include "tensor/x86/avx512_common.h"

namespace strata::tensor::detail {
namespace {

inline __m512i bcast32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// Sixteen f16 values at p as floats.
inline __m512 f16x16(const uint16_t* p) { return _mm512_cvtph_ps(load256(p)); }

// Weight nibbles of byte row p: k-step 2p in the low nibbles, 2p+1 in the high ones.
inline void nibbles(const uint8_t (&qs)[16][4], __m512i& lo, __m512i& hi) {
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  const __m512i v = load512(qs);
  lo = _mm512_and_si512(v, m4);
  hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
}

// Int32 per row from pair-interleaved bytes (p, r, 0|1) widened to int16 pairs: element h of each pair.
inline __m512i pair_elem(__m512i pairs, int h) {
  return h == 0 ? _mm512_srai_epi32(_mm512_slli_epi32(pairs, 16), 16) : _mm512_srai_epi32(pairs, 16);
}

// The sum over K k-steps of q[k] (16 rows x 4 bytes) times activation bytes a[4k .. 4k+3]. One
// token (decode) has no other tokens' chains to overlap with, so it runs two chains: integer sums
// are exact, so the result is the same bits either way.
template <int K, int N>
inline __m512i dot_steps(const __m512i (&q)[K], const int8_t* a) {
  if constexpr (N == 1 && K % 2 == 0) {
    __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
    #pragma GCC unroll 8
    for (int k = 0; k < K; k += 2) {
      s0 = _mm512_dpbusd_epi32(s0, q[k], bcast32(a + 4 * k));
      s1 = _mm512_dpbusd_epi32(s1, q[k + 1], bcast32(a + 4 * k + 4));
    }
    return _mm512_add_epi32(s0, s1);
  } else {
    __m512i s = _mm512_setzero_si512();
    #pragma GCC unroll 8
    for (int k = 0; k < K; ++k) s = _mm512_dpbusd_epi32(s, q[k], bcast32(a + 4 * k));
    return s;
  }
}

// Tile plumbing shared by the kernels: zeroed accumulators, stored outputs.
template <typename V, int N>
inline void zero_all(V (&v)[N]) {
  #pragma GCC unroll 8
  for (int t = 0; t < N; ++t) v[t] = V{};
}
template <int N>
inline void store_tokens(const __m512 (&acc)[N], float* y, int64_t ys) {
  #pragma GCC unroll 8
  for (int t = 0; t < N; ++t) _mm512_storeu_ps(y + t * ys, acc[t]);
}

// Q8_0 / Q4_0 against Q8_0 activations. Weights are stored plus a bias (128 / 8 would be 0 for the
// signed value), taken back out as bias * sum(a) per block: |isum| <= 32 * 255 * 127 fits easily.
template <bool kFour>
struct Blocks32x16 {
  using X = std::conditional_t<kFour, BlockQ4_0x16, BlockQ8_0x16>;
  static constexpr int kBiasShift = kFour ? 3 : 7;

  template <int N, bool kStream>
  static void run(int64_t n, const X* w, const ActRows& a, int64_t t0, float* y, int64_t ys) {
    const BlockQ8_0* ab[N];
    const int32_t* sums[N];
    token_rows(a, t0, ab);
    #pragma GCC unroll 8
    for (int t = 0; t < N; ++t) sums[t] = a.sums + (t0 + t) * a.sums_stride;
    __m512 acc[N];
    zero_all(acc);
    for (int64_t i = 0; i < n / kQK; ++i) {
      if constexpr (kStream) prefetch_ahead(w + i);
      const X& b = w[i];
      __m512i q[8];
      if constexpr (kFour) {
        #pragma GCC unroll 4
        for (int p = 0; p < 4; ++p) nibbles(b.qs[p], q[2 * p], q[2 * p + 1]);
      } else {
        #pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) q[k] = load512(b.qs[k]);
      }
      const __m512 dw = f16x16(b.d);
      #pragma GCC unroll 8
      for (int t = 0; t < N; ++t) {
        const __m512i isum = _mm512_sub_epi32(dot_steps<std::size(q), N>(q, ab[t][i].qs), _mm512_set1_epi32(sums[t][i] << kBiasShift));
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, _mm512_set1_ps(h2f(ab[t][i].d))), acc[t]);
      }
    }
    store_tokens(acc, y, ys);
  }
};

// Q4_K / Q5_K against Q8_K. Per 32-element sub-block isum <= 32 * 31 * 127; times a 6-bit scale and
// summed over 8 sub-blocks < 2^31. Mins: int16 pairs (m_2p, m_2p+1) . (S_2p, S_2p+1), |S| <= 4064.
template <bool kFive>
struct K45x16 {
  using X = std::conditional_t<kFive, BlockQ5Kx16, BlockQ4Kx16>;

  template <int N, bool kStream>
  static void run(int64_t n, const X* w, const ActRows& a, int64_t t0, float* y, int64_t ys) {
    const BlockQ8K* ab[N];
    token_rows(a, t0, ab);
    __m512 acc[N];
    zero_all(acc);
    for (int64_t i = 0; i < n / kQKK; ++i) {
      if constexpr (kStream) prefetch_ahead(w + i);
      const X& b = w[i];
      __m512i sumi[N];
      zero_all(sumi);
      #pragma GCC unroll 1
      for (int s = 0; s < 8; ++s) {
        __m512i q[8];
        #pragma GCC unroll 4
        for (int p = 0; p < 4; ++p) nibbles(sub_qs<kFive>(b, s)[p], q[2 * p], q[2 * p + 1]);
        if constexpr (kFive) {
          const __m512i h = load512(b.sub[s].qh);
          #pragma GCC unroll 8
          for (int k = 0; k < 8; ++k) {
            const __mmask64 bit = _mm512_test_epi8_mask(h, _mm512_set1_epi8(static_cast<char>(1 << k)));
            q[k] = _mm512_mask_add_epi8(q[k], bit, q[k], _mm512_set1_epi8(0x10));
          }
        }
        const __m512i sc = pair_elem(_mm512_cvtepu8_epi16(load256(b.sc[s / 2])), s % 2);
        #pragma GCC unroll 8
        for (int t = 0; t < N; ++t) {
          sumi[t] = _mm512_add_epi32(sumi[t], _mm512_mullo_epi32(dot_steps<std::size(q), N>(q, ab[t][i].qs + 32 * s), sc));
        }
      }
      const __m512 d = f16x16(b.d), dmin = f16x16(b.dmin);
      #pragma GCC unroll 8
      for (int t = 0; t < N; ++t) {
        const int32_t* pr = a.sums + (t0 + t) * a.sums_stride + 4 * i;
        __m512i summ = _mm512_setzero_si512();
        #pragma GCC unroll 4
        for (int p = 0; p < 4; ++p) summ = _mm512_dpwssd_epi32(summ, _mm512_cvtepu8_epi16(load256(b.m[p])), _mm512_set1_epi32(pr[p]));
        const __m512 da = _mm512_set1_ps(ab[t][i].d);
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi[t]), _mm512_mul_ps(d, da), acc[t]);
        acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(summ), _mm512_mul_ps(dmin, da), acc[t]);
      }
    }
    store_tokens(acc, y, ys);
  }
};

// Q6_K against Q8_K. Stored q in [0, 63]; q - 32 is meant: 32 * sum_s sc_s * bsum_s comes off at
// the end. Per 16-element sub-block isum <= 16 * 63 * 127, times |sc| <= 128, 16 sub-blocks < 2^31.
struct Q6Kx16 {
  using X = BlockQ6Kx16;

  template <int N, bool kStream>
  static void run(int64_t n, const X* w, const ActRows& a, int64_t t0, float* y, int64_t ys) {
    const BlockQ8K* ab[N];
    token_rows(a, t0, ab);
    const __m512i m4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30);
    __m512 acc[N];
    zero_all(acc);
    for (int64_t i = 0; i < n / kQKK; ++i) {
      if constexpr (kStream) prefetch_ahead(w + i);
      const X& b = w[i];
      __m512i sumi[N];
      zero_all(sumi);
      #pragma GCC unroll 2
      for (int s = 0; s < 16; ++s) {
        __m512i q[4];
        const __m512i l0 = load512(b.sub[s].ql[0]), l1 = load512(b.sub[s].ql[1]), h = load512(b.sub[s].qh);
        // (x & m4) | (h' & m30): ternary-logic truth table 0xEA = (A & B) | C.
        q[0] = _mm512_ternarylogic_epi64(l0, m4, _mm512_and_si512(_mm512_slli_epi16(h, 4), m30), 0xEA);
        q[1] = _mm512_ternarylogic_epi64(_mm512_srli_epi16(l0, 4), m4, _mm512_and_si512(_mm512_slli_epi16(h, 2), m30), 0xEA);
        q[2] = _mm512_ternarylogic_epi64(l1, m4, _mm512_and_si512(h, m30), 0xEA);
        q[3] = _mm512_ternarylogic_epi64(_mm512_srli_epi16(l1, 4), m4, _mm512_and_si512(_mm512_srli_epi16(h, 2), m30), 0xEA);
        const __m512i sc = pair_elem(_mm512_cvtepi8_epi16(load256(b.sc[s / 2])), s % 2);
        #pragma GCC unroll 8
        for (int t = 0; t < N; ++t) {
          sumi[t] = _mm512_add_epi32(sumi[t], _mm512_mullo_epi32(dot_steps<std::size(q), N>(q, ab[t][i].qs + 16 * s), sc));
        }
      }
      const __m512 d = f16x16(b.d);
      #pragma GCC unroll 8
      for (int t = 0; t < N; ++t) {
        __m512i corr = _mm512_setzero_si512();
        #pragma GCC unroll 8
        for (int p = 0; p < 8; ++p) {
          corr = _mm512_dpwssd_epi32(corr, _mm512_cvtepi8_epi16(load256(b.sc[p])), bcast32(ab[t][i].bsums + 2 * p));
        }
        const __m512i total = _mm512_sub_epi32(sumi[t], _mm512_slli_epi32(corr, 5));
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(total), _mm512_mul_ps(d, _mm512_set1_ps(ab[t][i].d)), acc[t]);
      }
    }
    store_tokens(acc, y, ys);
  }
};

constexpr int kTileTokens = 8;

template <typename K, bool kStream, int N = kTileTokens>
inline void run_n(int nt, int64_t n, const typename K::X* w, const ActRows& a, int64_t t0, float* y, int64_t ys) {
  if constexpr (N >= 1) {
    if (nt == N) {
      K::template run<N, kStream>(n, w, a, t0, y, ys);
    } else {
      run_n<K, kStream, N - 1>(nt, n, w, a, t0, y, ys);
    }
  }
}

// One group at a time (its weights stay in L1/L2) for every tile of tokens. With one tile (decode,
// server slots) every weight is read once, streamed from memory with software prefetch; with more,
// the group is reused from cache and prefetching would only cost instructions.
template <typename K>
void gemm16(int64_t n, const uint8_t* w, size_t group_bytes, int64_t groups, const ActRows& a, int64_t tokens,
            float* y, int64_t ys) {
  const bool stream = tokens <= kTileTokens && decode_prefetch();
  for (int64_t g = 0; g < groups; ++g) {
    const auto* wg = reinterpret_cast<const typename K::X*>(w + g * group_bytes);
    for (int64_t t0 = 0; t0 < tokens; t0 += kTileTokens) {
      const int nt = static_cast<int>(std::min<int64_t>(kTileTokens, tokens - t0));
      if (stream) {
        run_n<K, true>(nt, n, wg, a, t0, y + t0 * ys + 16 * g, ys);
      } else {
        run_n<K, false>(nt, n, wg, a, t0, y + t0 * ys + 16 * g, ys);
      }
    }
  }
}

}  // namespace

Gemm16Fn avx512_gemm16(DType w) {
  if (!cpu_has_avx512() || !cpu_has_avx512_vnni()) return nullptr;
  switch (w) {
    case DType::Q8_0: return gemm16<Blocks32x16<false>>;
    case DType::Q4_0: return gemm16<Blocks32x16<true>>;
    case DType::Q4_K: return gemm16<K45x16<false>>;
    case DType::Q5_K: return gemm16<K45x16<true>>;
    case DType::Q6_K: return gemm16<Q6Kx16>;
    default: return nullptr;
  }
}

}  // namespace strata::tensor::detail
