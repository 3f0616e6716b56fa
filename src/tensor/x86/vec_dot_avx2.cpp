// AVX2 + FMA + F16C dot products. Integer parts are exact (maddubs pairs never saturate for these
// formats: |u8*s8 + u8*s8| <= 2*128*127 < 2^15); only the float accumulation order differs from the
// scalar reference. Bound (checked by tests/tensor/vec_dot_simd_test.cpp):
//   |simd - scalar| <= 2^-22 * (n/32 + 16) * M,  M = sum_i |a_i| * (|w_i| + |min term_i|).
// Only intrinsics and internal-linkage helpers here (see blocks.h on why).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "tensor/blocks.h"
#include "tensor/x86/avx2_common.h"
#include "tensor/x86/tile_driver.h"

namespace strata::tensor::detail {
namespace {

// Sum of products of signed bytes, as 8 int32 lanes (each the sum of 4 products).
inline __m256i dot_i8(__m256i x, __m256i y) {
  const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
  return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

// Unsigned bytes (< 128) times signed bytes, as 8 int32 lanes.
inline __m256i dot_u8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

// 16 packed nibbles -> 32 bytes: low nibbles first, then high nibbles (the 32-block layout).
inline __m256i nibbles32(const uint8_t* p) {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m256i b = _mm256_inserti128_si256(_mm256_castsi128_si256(t), _mm_srli_epi16(t, 4), 1);
  return _mm256_and_si256(b, _mm256_set1_epi8(0x0f));
}

// 32 bits -> 32 bytes, 0x10 where the bit is set (Q5_0/Q5_1 fifth bit).
inline __m256i bits32_to_0x10(const uint8_t* p) {
  uint32_t bits;
  std::memcpy(&bits, p, 4);
  const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2,
                                        2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i sel = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)), shuf);
  const __m256i on = _mm256_cmpeq_epi8(_mm256_and_si256(b, sel), sel);
  return _mm256_and_si256(on, _mm256_set1_epi8(0x10));
}


// ---------------------------------------------------------------- float formats

float dot_f32(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const float*>(vw);
  const auto* a = static_cast<const float*>(va);
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    #pragma GCC unroll 8
    for (int k = 0; k < 4; ++k) {
      acc[k] = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8 * k), _mm256_loadu_ps(a + i + 8 * k), acc[k]);
    }
  }
  for (; i + 8 <= n; i += 8) acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(a + i), acc[0]);
  float sum = hsum256(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
  for (; i < n; ++i) sum += w[i] * a[i];
  return sum;
}

inline __m256 load_f16x8(const uint16_t* p) { return _mm256_cvtph_ps(load128(p)); }
inline __m256 load_bf16x8(const uint16_t* p) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load128(p)), 16));
}
inline float bf2f(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

template <bool kBf16>
float dot_half(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const uint16_t*>(vw);
  const auto* a = static_cast<const uint16_t*>(va);
  auto load = [](const uint16_t* p) { return kBf16 ? load_bf16x8(p) : load_f16x8(p); };
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    #pragma GCC unroll 8
    for (int k = 0; k < 4; ++k) acc[k] = _mm256_fmadd_ps(load(w + i + 8 * k), load(a + i + 8 * k), acc[k]);
  }
  for (; i + 8 <= n; i += 8) acc[0] = _mm256_fmadd_ps(load(w + i), load(a + i), acc[0]);
  float sum = hsum256(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
  for (; i < n; ++i) sum += kBf16 ? bf2f(w[i]) * bf2f(a[i]) : h2f(w[i]) * h2f(a[i]);
  return sum;
}

// ---------------------------------------------------------------- 32-element blocks

// Shared loop over 32-element blocks: unpack(block) gives the 32 weight bytes in element order,
// signed for kSigned, else unsigned; the block scale is d_w * d_a. Two accumulators.
template <typename WBlock, typename ABlock, bool kSigned, typename Unpack>
inline float dot_blocks32(int64_t nb, const WBlock* w, const ABlock* a, Unpack unpack) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 2 <= nb; i += 2) {
    const __m256i w0 = unpack(w[i]), w1 = unpack(w[i + 1]);
    const __m256i a0 = load256(a[i].qs), a1 = load256(a[i + 1].qs);
    const __m256i p0 = kSigned ? dot_i8(w0, a0) : dot_u8(w0, a0);
    const __m256i p1 = kSigned ? dot_i8(w1, a1) : dot_u8(w1, a1);
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(h2f(w[i].d) * h2f(a[i].d)), _mm256_cvtepi32_ps(p0), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_set1_ps(h2f(w[i + 1].d) * h2f(a[i + 1].d)), _mm256_cvtepi32_ps(p1), acc1);
  }
  if (i < nb) {
    const __m256i w0 = unpack(w[i]), a0 = load256(a[i].qs);
    const __m256i p0 = kSigned ? dot_i8(w0, a0) : dot_u8(w0, a0);
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(h2f(w[i].d) * h2f(a[i].d)), _mm256_cvtepi32_ps(p0), acc0);
  }
  return hsum256(_mm256_add_ps(acc0, acc1));
}

float dot_q8_0(int64_t n, const void* vw, const void* va) {
  return dot_blocks32<BlockQ8_0, BlockQ8_0, true>(n / kQK, static_cast<const BlockQ8_0*>(vw),
                                                  static_cast<const BlockQ8_0*>(va),
                                                  [](const BlockQ8_0& b) { return load256(b.qs); });
}

float dot_q4_0(int64_t n, const void* vw, const void* va) {
  return dot_blocks32<BlockQ4_0, BlockQ8_0, true>(
      n / kQK, static_cast<const BlockQ4_0*>(vw), static_cast<const BlockQ8_0*>(va),
      [](const BlockQ4_0& b) { return _mm256_sub_epi8(nibbles32(b.qs), _mm256_set1_epi8(8)); });
}

float dot_q5_0(int64_t n, const void* vw, const void* va) {
  return dot_blocks32<BlockQ5_0, BlockQ8_0, true>(
      n / kQK, static_cast<const BlockQ5_0*>(vw), static_cast<const BlockQ8_0*>(va),
      [](const BlockQ5_0& b) {
        const __m256i q = _mm256_or_si256(nibbles32(b.qs), bits32_to_0x10(b.qh));
        return _mm256_sub_epi8(q, _mm256_set1_epi8(16));
      });
}

float dot_iq4_nl(int64_t n, const void* vw, const void* va) {
  const __m256i table = _mm256_broadcastsi128_si256(load128(kIq4Values));
  return dot_blocks32<BlockIQ4NL, BlockQ8_0, true>(
      n / kQK, static_cast<const BlockIQ4NL*>(vw), static_cast<const BlockQ8_0*>(va),
      [table](const BlockIQ4NL& b) { return _mm256_shuffle_epi8(table, nibbles32(b.qs)); });
}

// Q4_1/Q5_1 add m_w * s_a per block; those products are summed separately in f32.
template <typename WBlock>
float min_terms(int64_t nb, const WBlock* w, const BlockQ8_1* a) {
  float s = 0.0f;
  for (int64_t i = 0; i < nb; ++i) s += h2f(w[i].m) * h2f(a[i].s);
  return s;
}

float dot_q4_1(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const BlockQ4_1*>(vw);
  const auto* a = static_cast<const BlockQ8_1*>(va);
  return dot_blocks32<BlockQ4_1, BlockQ8_1, false>(n / kQK, w, a,
                                                   [](const BlockQ4_1& b) { return nibbles32(b.qs); }) +
         min_terms(n / kQK, w, a);
}

float dot_q5_1(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const BlockQ5_1*>(vw);
  const auto* a = static_cast<const BlockQ8_1*>(va);
  return dot_blocks32<BlockQ5_1, BlockQ8_1, false>(
             n / kQK, w, a,
             [](const BlockQ5_1& b) { return _mm256_or_si256(nibbles32(b.qs), bits32_to_0x10(b.qh)); }) +
         min_terms(n / kQK, w, a);
}

// ---------------------------------------------------------------- super-blocks against Q8_K

// pshufb controls broadcasting int16 element k of a 128-bit lane across the lane.
inline __m256i bcast16_ctrl(int k) { return _mm256_set1_epi16(static_cast<int16_t>((2 * k) | ((2 * k + 1) << 8))); }
// Lane 0 gets int16 element k, lane 1 element k+1 (16-element groups: a 32-byte chunk spans two).
inline __m256i bcast16_pair_ctrl(int k) {
  const __m128i lo = _mm_set1_epi16(static_cast<int16_t>((2 * k) | ((2 * k + 1) << 8)));
  const __m128i hi = _mm_set1_epi16(static_cast<int16_t>((2 * k + 2) | ((2 * k + 3) << 8)));
  return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
}

// K-quant kernels are M x N tiles (see tile_driver.h): one weight row's super-block is unpacked
// once for N tokens, and the single-row dot is the 1 x 1 instance. Per output the float operations
// are the same in every instance (integer sums are exact, so their grouping does not matter).
// Only 16 ymm registers: tiles stay small and per-token state is kept to a few registers.

// Integer partial sums per token: the single-row dot keeps two chains for instruction-level
// parallelism; tiles have enough independent chains already.
template <int N>
constexpr int kChains = N == 1 ? 2 : 1;

// Q4_K (kFive = false) and Q5_K: 8 sub-blocks of 32 with 6-bit scales and mins.
template <bool kFive, typename Block>
struct Q45K {
  // 4 tokens measured faster than 2 (2048 x 2048 x 512 products).
  static constexpr int kM = 1, kN = 4;

  template <int M, int N>
  static void run(int64_t n, const uint8_t* vw, size_t, const uint8_t* va, size_t as, float* y, int64_t ys) {
    static_assert(M == 1);
    constexpr int S = kChains<N>;
    const TileRows<Block, 1, N> p(vw, 0, va, as);
    const Block* w = p.w[0];
    const auto& a = p.a;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256 acc[N], acc_m[N];
    #pragma GCC unroll 16
    for (int t = 0; t < N; ++t) acc[t] = _mm256_setzero_ps(), acc_m[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / kQKK; ++i) {
      uint64_t sc8, m8;
      unpack_k4_scales(w[i].scales, &sc8, &m8);
      const __m256i sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(sc8))));
      const __m128i mb = _mm_cvtsi64_si128(static_cast<int64_t>(m8));
      const __m256i mins = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mb, mb));  // m0 m0 m1 m1 ...
      __m256i hm;
      if constexpr (kFive) hm = load256(w[i].qh);
      __m256i s[S][N];
      #pragma GCC unroll 16
      for (int k = 0; k < S; ++k) {
        #pragma GCC unroll 16
        for (int t = 0; t < N; ++t) s[k][t] = _mm256_setzero_si256();
      }
      #pragma GCC unroll 8
      for (int c = 0; c < 4; ++c) {
        const __m256i q = load256(w[i].qs + 32 * c);
        __m256i lo = _mm256_and_si256(q, m4);
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        if constexpr (kFive) {
          const __m256i one = _mm256_set1_epi8(1);
          lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(hm, one), 4));
          hm = _mm256_srli_epi16(hm, 1);
          hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(hm, one), 4));
          hm = _mm256_srli_epi16(hm, 1);
        }
        const __m256i sc_lo = _mm256_shuffle_epi8(sc, bcast16_ctrl(2 * c));
        const __m256i sc_hi = _mm256_shuffle_epi8(sc, bcast16_ctrl(2 * c + 1));
        #pragma GCC unroll 16
        for (int t = 0; t < N; ++t) {
          const int8_t* q8 = a[t][i].qs + 64 * c;
          const __m256i p0 = _mm256_maddubs_epi16(lo, load256(q8));
          const __m256i p1 = _mm256_maddubs_epi16(hi, load256(q8 + 32));
          s[0][t] = _mm256_add_epi32(s[0][t], _mm256_madd_epi16(p0, sc_lo));
          s[S - 1][t] = _mm256_add_epi32(s[S - 1][t], _mm256_madd_epi16(p1, sc_hi));
        }
      }
      const float dw = h2f(w[i].d), dmw = h2f(w[i].dmin);
      #pragma GCC unroll 16
      for (int t = 0; t < N; ++t) {
        const float da = a[t][i].d;
        const __m256i summ = _mm256_madd_epi16(load256(a[t][i].bsums), mins);
        acc_m[t] = _mm256_fmadd_ps(_mm256_set1_ps(da * dmw), _mm256_cvtepi32_ps(summ), acc_m[t]);
        const __m256i sum = S == 2 ? _mm256_add_epi32(s[0][t], s[S - 1][t]) : s[0][t];
        acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(da * dw), _mm256_cvtepi32_ps(sum), acc[t]);
      }
    }
    #pragma GCC unroll 16
    for (int t = 0; t < N; ++t) y[t * ys] = hsum256(acc[t]) - hsum256(acc_m[t]);
  }
};

// Scales of 16-element groups as int16: lanes hold groups 0..7 / 8..15 (from 16 int8).
inline __m256i scales16_i8(const int8_t* s) { return _mm256_cvtepi8_epi16(load128(s)); }

struct Q6K {
  static constexpr int kM = 1, kN = 4;

  template <int M, int N>
  static void run(int64_t n, const uint8_t* vw, size_t, const uint8_t* va, size_t as, float* y, int64_t ys) {
    static_assert(M == 1);
    constexpr int S = kChains<N>;
    const TileRows<BlockQ6K, 1, N> p(vw, 0, va, as);
    const BlockQ6K* w = p.w[0];
    const auto& a = p.a;
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
    __m256 acc[N];
    #pragma GCC unroll 16
    for (int t = 0; t < N; ++t) acc[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / kQKK; ++i) {
      const __m256i sc = scales16_i8(w[i].scales);
      __m256i s[S][N];
      #pragma GCC unroll 16
      for (int k = 0; k < S; ++k) {
        #pragma GCC unroll 16
        for (int t = 0; t < N; ++t) s[k][t] = _mm256_setzero_si256();
      }
      #pragma GCC unroll 8
      for (int h = 0; h < 2; ++h) {
        const __m256i scl = h ? _mm256_permute2x128_si256(sc, sc, 0x11) : _mm256_permute2x128_si256(sc, sc, 0x00);
        #pragma GCC unroll 8
        for (int g = 0; g < 4; ++g) {
          // Quarter g: low (g < 2) or high nibbles of ql[64h + 32(g % 2)..], bits 2g..2g+1 of qh[32h..].
          const __m256i ql = load256(w[i].ql + 64 * h + 32 * (g % 2));
          const __m256i qh = load256(w[i].qh + 32 * h);
          const __m256i nib = g < 2 ? _mm256_and_si256(ql, m4) : _mm256_and_si256(_mm256_srli_epi16(ql, 4), m4);
          const __m256i hb = g == 0 ? _mm256_slli_epi16(qh, 4) : g == 1 ? _mm256_slli_epi16(qh, 2)
                                                             : g == 2 ? qh : _mm256_srli_epi16(qh, 2);
          const __m256i q = _mm256_or_si256(nib, _mm256_and_si256(hb, m30));
          const __m256i scg = _mm256_shuffle_epi8(scl, bcast16_pair_ctrl(2 * g));
          #pragma GCC unroll 16
          for (int t = 0; t < N; ++t) {
            const __m256i p = _mm256_maddubs_epi16(q, load256(a[t][i].qs + 128 * h + 32 * g));
            s[(g % 2) % S][t] = _mm256_add_epi32(s[(g % 2) % S][t], _mm256_madd_epi16(p, scg));
          }
        }
      }
      const float dw = h2f(w[i].d);
      #pragma GCC unroll 16
      for (int t = 0; t < N; ++t) {
        // The stored value is q+32: subtract 32 * sum_g sc_g * bsums_g once per super-block.
        const __m256i corr = _mm256_slli_epi32(_mm256_madd_epi16(load256(a[t][i].bsums), sc), 5);
        const __m256i sum = S == 2 ? _mm256_add_epi32(s[0][t], s[S - 1][t]) : s[0][t];
        acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(a[t][i].d * dw), _mm256_cvtepi32_ps(_mm256_sub_epi32(sum, corr)), acc[t]);
      }
    }
    #pragma GCC unroll 16
    for (int t = 0; t < N; ++t) y[t * ys] = hsum256(acc[t]);
  }
};

// Q3_K (kThree) and Q2_K: 2-bit planes in qs; Q3_K adds the hmask bit, Q2_K has 4-bit scale/min.
template <bool kThree, typename Block>
float dot_q23_k(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const Block*>(vw);
  const auto* a = static_cast<const BlockQ8K*>(va);
  const __m256i m3 = _mm256_set1_epi8(3);
  __m256 acc = _mm256_setzero_ps(), acc_m = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQKK; ++i) {
    __m256i sc, corr;
    const __m256i bsums = load256(a[i].bsums);
    if constexpr (kThree) {
      sc = _mm256_cvtepi8_epi16(q3k_scales_i8(w[i].scales));
      // Stored values are q+4 (0..7): subtract 4 * sum_g sc_g * bsums_g.
      corr = _mm256_slli_epi32(_mm256_madd_epi16(bsums, sc), 2);
    } else {
      const __m128i raw = load128(w[i].scales);
      sc = _mm256_cvtepu8_epi16(_mm_and_si128(raw, _mm_set1_epi8(15)));
      const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(15)));
      acc_m = _mm256_fmadd_ps(_mm256_set1_ps(a[i].d * h2f(w[i].dmin)),
                              _mm256_cvtepi32_ps(_mm256_madd_epi16(bsums, mins)), acc_m);
      corr = _mm256_setzero_si256();
    }
    __m256i hm;
    if constexpr (kThree) hm = load256(w[i].hmask);
    __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
    #pragma GCC unroll 8
    for (int h = 0; h < 2; ++h) {
      const __m256i scl = h ? _mm256_permute2x128_si256(sc, sc, 0x11) : _mm256_permute2x128_si256(sc, sc, 0x00);
      const __m256i q2 = load256(w[i].qs + 32 * h);
      #pragma GCC unroll 8
      for (int g = 0; g < 4; ++g) {
        __m256i q = _mm256_and_si256(_mm256_srli_epi16(q2, 2 * g), m3);
        if constexpr (kThree) {
          q = _mm256_or_si256(q, _mm256_slli_epi16(_mm256_and_si256(hm, _mm256_set1_epi8(1)), 2));
          hm = _mm256_srli_epi16(hm, 1);
        }
        const __m256i p = _mm256_maddubs_epi16(q, load256(a[i].qs + 128 * h + 32 * g));
        const __m256i ps = _mm256_madd_epi16(p, _mm256_shuffle_epi8(scl, bcast16_pair_ctrl(2 * g)));
        if (g & 1) {
          s1 = _mm256_add_epi32(s1, ps);
        } else {
          s0 = _mm256_add_epi32(s0, ps);
        }
      }
    }
    const __m256i sumi = _mm256_sub_epi32(_mm256_add_epi32(s0, s1), corr);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(a[i].d * h2f(w[i].d)), _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum256(acc) - hsum256(acc_m);
}

float dot_iq4_xs(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const BlockIQ4XS*>(vw);
  const auto* a = static_cast<const BlockQ8K*>(va);
  const __m256i table = _mm256_broadcastsi128_si256(load128(kIq4Values));
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQKK; ++i) {
    __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
    #pragma GCC unroll 8
    for (int ib = 0; ib < 8; ib += 2) {
      const __m256i k0 = _mm256_shuffle_epi8(table, nibbles32(w[i].qs + 16 * ib));
      const __m256i k1 = _mm256_shuffle_epi8(table, nibbles32(w[i].qs + 16 * ib + 16));
      const __m256i a0 = load256(a[i].qs + 32 * ib), a1 = load256(a[i].qs + 32 * ib + 32);
      // |K| <= 127, so the pair sums of maddubs stay below 2^15.
      const __m256i p0 = _mm256_maddubs_epi16(_mm256_sign_epi8(k0, k0), _mm256_sign_epi8(a0, k0));
      const __m256i p1 = _mm256_maddubs_epi16(_mm256_sign_epi8(k1, k1), _mm256_sign_epi8(a1, k1));
      const auto ls0 = static_cast<int16_t>(iq4xs_scale(w[i], ib) - 32);
      const auto ls1 = static_cast<int16_t>(iq4xs_scale(w[i], ib + 1) - 32);
      s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(p0, _mm256_set1_epi16(ls0)));
      s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(p1, _mm256_set1_epi16(ls1)));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(a[i].d * h2f(w[i].d)), _mm256_cvtepi32_ps(_mm256_add_epi32(s0, s1)), acc);
  }
  return hsum256(acc);
}

}  // namespace

VecDotFn avx2_vec_dot(DType w) {
  switch (w) {
    case DType::F32: return dot_f32;
    case DType::F16: return dot_half<false>;
    case DType::BF16: return dot_half<true>;
    case DType::Q4_0: return dot_q4_0;
    case DType::Q4_1: return dot_q4_1;
    case DType::Q5_0: return dot_q5_0;
    case DType::Q5_1: return dot_q5_1;
    case DType::Q8_0: return dot_q8_0;
    case DType::IQ4_NL: return dot_iq4_nl;
    case DType::Q2_K: return dot_q23_k<false, BlockQ2K>;
    case DType::Q3_K: return dot_q23_k<true, BlockQ3K>;
    case DType::Q4_K: return tile_dot<Q45K<false, BlockQ4K>>;
    case DType::Q5_K: return tile_dot<Q45K<true, BlockQ5K>>;
    case DType::Q6_K: return tile_dot<Q6K>;
    case DType::IQ4_XS: return dot_iq4_xs;
    default: return nullptr;
  }
}

// Tiled kernels for the K-quants; other types fall back to one dot per output in matmul.
VecDotTileFn avx2_vec_dot_tile(DType w) {
  switch (w) {
    case DType::Q4_K: return tile_kernel<Q45K<false, BlockQ4K>>;
    case DType::Q5_K: return tile_kernel<Q45K<true, BlockQ5K>>;
    case DType::Q6_K: return tile_kernel<Q6K>;
    default: return nullptr;
  }
}

// F32 <-> F16 rows with F16C: the same round-to-nearest-even (and exact widening) as
// fp32_to_fp16 / fp16_to_fp32, eight at a time.
void f32_to_f16_f16c(const float* x, uint16_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  for (; i < n; ++i) out[i] = fp32_to_fp16(x[i]);
}

void f16_to_f32_f16c(const uint16_t* h, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
  }
  for (; i < n; ++i) out[i] = fp16_to_fp32(h[i]);
}

}  // namespace strata::tensor::detail
