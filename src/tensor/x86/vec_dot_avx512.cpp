// AVX-512 (F/BW/VL/DQ) dot products, each in two flavours chosen at run time: with AVX512-VNNI
// (vpdpbusd/vpdpwssd) and without (vpmaddubsw/vpmaddwd). Super-block kernels process 64 weights per
// 512-bit register in natural element order and form the whole super-block's integer sum before
// a single float multiply-add. Float-accumulation bound vs the scalar reference as in the AVX2 file:
//   |simd - scalar| <= 2^-22 * (n/32 + 16) * M,  M = sum_i |a_i| * (|w_i| + |min term_i|).
// Q4_K, Q5_K and Q6_K live in vec_dot_kquant_avx512.cpp.
// Only intrinsics and internal-linkage helpers here (see blocks.h on why).
#include "tensor/x86/avx512_common.h"
#include "tensor/x86/tile_driver.h"

namespace strata::tensor::detail {
namespace {

// ---------------------------------------------------------------- float formats

float dot_f32(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const float*>(vw);
  const auto* a = static_cast<const float*>(va);
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    #pragma GCC unroll 8
    for (int k = 0; k < 4; ++k) {
      acc[k] = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 16 * k), _mm512_loadu_ps(a + i + 16 * k), acc[k]);
    }
  }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? 0xffff : static_cast<__mmask16>((1u << (n - i)) - 1);
    acc[0] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w + i), _mm512_maskz_loadu_ps(m, a + i), acc[0]);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
}

template <bool kBf16>
inline __m512 load_half16(const uint16_t* p, __mmask16 m) {
  const __m256i h = _mm256_maskz_loadu_epi16(m, p);
  if constexpr (kBf16) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  } else {
    return _mm512_cvtph_ps(h);
  }
}

template <bool kBf16>
float dot_half(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const uint16_t*>(vw);
  const auto* a = static_cast<const uint16_t*>(va);
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    #pragma GCC unroll 8
    for (int k = 0; k < 4; ++k) {
      acc[k] = _mm512_fmadd_ps(load_half16<kBf16>(w + i + 16 * k, 0xffff),
                               load_half16<kBf16>(a + i + 16 * k, 0xffff), acc[k]);
    }
  }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? 0xffff : static_cast<__mmask16>((1u << (n - i)) - 1);
    acc[0] = _mm512_fmadd_ps(load_half16<kBf16>(w + i, m), load_half16<kBf16>(a + i, m), acc[0]);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
}

// ---------------------------------------------------------------- 32-element blocks
// Eight blocks per step, two per 512-bit register; block scales are fetched four at a time with
// fields4 (vpgatherdd is slower here). Leftover blocks go one per 256-bit register.

enum class Mode { kSigned, kUnsigned, kOffset8, kOffset16 };

inline __m256i nibbles32(const uint8_t* p) {
  const __m128i t = load128(p);
  const __m256i b = _mm256_inserti128_si256(_mm256_castsi128_si256(t), _mm_srli_epi16(t, 4), 1);
  return _mm256_and_si256(b, _mm256_set1_epi8(0x0f));
}

// Two blocks' nibbles in element order: 128-bit lanes [q0 & 15, q0 >> 4, q1 & 15, q1 >> 4].
inline __m512i nibbles64(const uint8_t* p0, const uint8_t* p1) {
  const __m512i x = _mm512_castsi256_si512(_mm256_inserti128_si256(_mm256_castsi128_si256(load128(p0)), load128(p1), 1));
  const __m512i d = _mm512_shuffle_i64x2(x, x, _MM_SHUFFLE(1, 1, 0, 0));
  return _mm512_and_si512(_mm512_mask_srli_epi16(d, 0xff00ff00u, d, 4), _mm512_set1_epi8(0x0f));
}

inline __m512i pair256(const void* p0, const void* p1) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(load256(p0)), load256(p1), 1);
}

inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline __m256i add_bit4(__m256i q, const uint8_t* qh) {
  return _mm256_mask_add_epi8(q, static_cast<__mmask32>(load_u32(qh)), q, _mm256_set1_epi8(0x10));
}
inline __m512i add_bit4(__m512i q, const uint8_t* qh0, const uint8_t* qh1) {
  const uint64_t bits = load_u32(qh0) | (static_cast<uint64_t>(load_u32(qh1)) << 32);
  return _mm512_mask_add_epi8(q, static_cast<__mmask64>(bits), q, _mm512_set1_epi8(0x10));
}

// Integer block dot: int32 lanes, each the sum of four products. kSigned: both signed (uses |q|
// and y negated where q < 0); kUnsigned: q in [0, 127]; kOffsetN: q unsigned, stored value q+N.
template <bool V, Mode M>
inline __m512i dot_mode(__m512i q, __m512i y) {
  const __m512i zero = _mm512_setzero_si512();
  if constexpr (M == Mode::kSigned) {
    const __m512i ax = _mm512_abs_epi8(q);
    const __m512i sy = _mm512_mask_sub_epi8(y, _mm512_movepi8_mask(q), zero, y);
    if constexpr (V) return _mm512_dpbusd_epi32(zero, ax, sy);
    else return _mm512_madd_epi16(_mm512_maddubs_epi16(ax, sy), _mm512_set1_epi16(1));
  } else if constexpr (M == Mode::kUnsigned) {
    if constexpr (V) return _mm512_dpbusd_epi32(zero, q, y);
    else return _mm512_madd_epi16(_mm512_maddubs_epi16(q, y), _mm512_set1_epi16(1));
  } else {
    const __m512i off = _mm512_set1_epi8(M == Mode::kOffset8 ? 8 : 16);
    if constexpr (V) return _mm512_sub_epi32(_mm512_dpbusd_epi32(zero, q, y), _mm512_dpbusd_epi32(zero, off, y));
    else return _mm512_madd_epi16(_mm512_sub_epi16(_mm512_maddubs_epi16(q, y), _mm512_maddubs_epi16(off, y)),
                                  _mm512_set1_epi16(1));
  }
}

template <bool V, Mode M>
inline __m256i dot_mode(__m256i q, __m256i y) {
  const __m256i zero = _mm256_setzero_si256();
  if constexpr (M == Mode::kSigned) {
    const __m256i ax = _mm256_abs_epi8(q);
    const __m256i sy = _mm256_mask_sub_epi8(y, _mm256_movepi8_mask(q), zero, y);
    if constexpr (V) return _mm256_dpbusd_epi32(zero, ax, sy);
    else return _mm256_madd_epi16(_mm256_maddubs_epi16(ax, sy), _mm256_set1_epi16(1));
  } else if constexpr (M == Mode::kUnsigned) {
    if constexpr (V) return _mm256_dpbusd_epi32(zero, q, y);
    else return _mm256_madd_epi16(_mm256_maddubs_epi16(q, y), _mm256_set1_epi16(1));
  } else {
    const __m256i off = _mm256_set1_epi8(M == Mode::kOffset8 ? 8 : 16);
    if constexpr (V) return _mm256_sub_epi32(_mm256_dpbusd_epi32(zero, q, y), _mm256_dpbusd_epi32(zero, off, y));
    else return _mm256_madd_epi16(_mm256_sub_epi16(_mm256_maddubs_epi16(q, y), _mm256_maddubs_epi16(off, y)),
                                  _mm256_set1_epi16(1));
  }
}

// Per-format traits: block types, integer mode, whether m_w * s_a terms exist, and unpackers for
// one block (256-bit) and two blocks (512-bit) into weight bytes in element order.
struct Q8_0Fmt {
  using W = BlockQ8_0;
  using A = BlockQ8_0;
  static constexpr Mode kMode = Mode::kSigned;
  static constexpr bool kMin = false;
  static __m256i one(const W& b) { return load256(b.qs); }
  static __m512i two(const W& b0, const W& b1) { return pair256(b0.qs, b1.qs); }
};
struct Q4_0Fmt {
  using W = BlockQ4_0;
  using A = BlockQ8_0;
  static constexpr Mode kMode = Mode::kOffset8;
  static constexpr bool kMin = false;
  static __m256i one(const W& b) { return nibbles32(b.qs); }
  static __m512i two(const W& b0, const W& b1) { return nibbles64(b0.qs, b1.qs); }
};
struct Q5_0Fmt {
  using W = BlockQ5_0;
  using A = BlockQ8_0;
  static constexpr Mode kMode = Mode::kOffset16;
  static constexpr bool kMin = false;
  static __m256i one(const W& b) { return add_bit4(nibbles32(b.qs), b.qh); }
  static __m512i two(const W& b0, const W& b1) { return add_bit4(nibbles64(b0.qs, b1.qs), b0.qh, b1.qh); }
};
struct Iq4NlFmt {
  using W = BlockIQ4NL;
  using A = BlockQ8_0;
  static constexpr Mode kMode = Mode::kSigned;
  static constexpr bool kMin = false;
  static __m256i one(const W& b) {
    return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(load128(kIq4Values)), nibbles32(b.qs));
  }
  static __m512i two(const W& b0, const W& b1) {
    return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(load128(kIq4Values)), nibbles64(b0.qs, b1.qs));
  }
};
struct Q4_1Fmt {
  using W = BlockQ4_1;
  using A = BlockQ8_1;
  static constexpr Mode kMode = Mode::kUnsigned;
  static constexpr bool kMin = true;
  static __m256i one(const W& b) { return nibbles32(b.qs); }
  static __m512i two(const W& b0, const W& b1) { return nibbles64(b0.qs, b1.qs); }
};
struct Q5_1Fmt {
  using W = BlockQ5_1;
  using A = BlockQ8_1;
  static constexpr Mode kMode = Mode::kUnsigned;
  static constexpr bool kMin = true;
  static __m256i one(const W& b) { return add_bit4(nibbles32(b.qs), b.qh); }
  static __m512i two(const W& b0, const W& b1) { return add_bit4(nibbles64(b0.qs, b1.qs), b0.qh, b1.qh); }
};

// The f16 fields of four consecutive blocks at p, as floats: lanes 0-3 are the words at byte 0 of
// each block (d), lanes 4-7 the words at byte 2 (m or s; unused otherwise). Two 64-byte loads (the
// second masked to the four blocks) and one word permute replace eight scalar conversions.
template <typename B>
inline __m256 fields4(const B* p) {
  constexpr int kStep = static_cast<int>(sizeof(B)) / 2;  // words per block
  static_assert(sizeof(B) % 2 == 0 && 4 * sizeof(B) > 64 && 3 * kStep + 1 < 64);
  constexpr int kHiWords = 4 * sizeof(B) >= 128 ? 32 : static_cast<int>(4 * sizeof(B) - 64) / 2;
  alignas(64) static constexpr int16_t kIdx[32] = {0, kStep, 2 * kStep, 3 * kStep, 1, kStep + 1, 2 * kStep + 1,
                                                   3 * kStep + 1};
  const __m512i lo = _mm512_loadu_si512(p);
  const __m512i hi = _mm512_maskz_loadu_epi16(static_cast<__mmask32>((uint64_t{1} << kHiWords) - 1),
                                              reinterpret_cast<const char*>(p) + 64);
  const __m512i idx = _mm512_load_si512(kIdx);
  return _mm256_cvtph_ps(_mm512_castsi512_si128(_mm512_permutex2var_epi16(lo, idx, hi)));
}

// The weight half of dot_mode, hoisted out of a tile's token loop: for kSigned, |q| and the sign
// mask that is later applied to each activation row (same integer results as dot_mode).
struct Prepped {
  __m512i q;
  __mmask64 neg;
};

template <Mode M>
inline Prepped prep(__m512i q) {
  if constexpr (M == Mode::kSigned) {
    return {_mm512_abs_epi8(q), _mm512_movepi8_mask(q)};
  } else {
    return {q, 0};
  }
}

template <bool V, Mode M>
inline __m512i dot_prepped(const Prepped& w, __m512i y) {
  if constexpr (M == Mode::kSigned) {
    const __m512i zero = _mm512_setzero_si512();
    const __m512i sy = _mm512_mask_sub_epi8(y, w.neg, zero, y);
    if constexpr (V) return _mm512_dpbusd_epi32(zero, w.q, sy);
    else return _mm512_madd_epi16(_mm512_maddubs_epi16(w.q, sy), _mm512_set1_epi16(1));
  } else {
    return dot_mode<V, M>(w.q, y);
  }
}

// 32-element block formats as M x N tiles (see tile_driver.h); the single-row dot is 1 x 1 and
// every instance does the same float operations per output.
template <bool V, typename F>
struct Blocks32 {
  using W = typename F::W;
  using A = typename F::A;
  // The activation side (block scales, pairs of blocks) costs as much as the weight side here, so
  // two rows share it; 2 x 2 measured faster than 1 x 4 and 1 x 6 (more accumulators would spill).
  static constexpr int kM = 2, kN = 2;

  template <int M, int N>
  static void run(int64_t n, const uint8_t* vw, size_t ws, const uint8_t* va, size_t as, float* y, int64_t ys) {
    const W* w[M];
    const A* a[N];
    #pragma GCC unroll 16
    for (int m = 0; m < M; ++m) w[m] = reinterpret_cast<const W*>(vw + m * ws);
    #pragma GCC unroll 16
    for (int t = 0; t < N; ++t) a[t] = reinterpret_cast<const A*>(va + t * as);
    const int64_t nb = n / kQK;
    // Broadcast selectors: lanes 0-7 from scale 2k, lanes 8-15 from scale 2k+1.
    const __m512i sel0 = _mm512_inserti64x4(_mm512_set1_epi32(0), _mm256_set1_epi32(1), 1);
    const __m512i sel1 = _mm512_inserti64x4(_mm512_set1_epi32(2), _mm256_set1_epi32(3), 1);
    __m512 acc[M][N][4];
    __m256 acc_min[M][N];  // lanes 4-7: sum of m_w * s_a
    #pragma GCC unroll 16
    for (int m = 0; m < M; ++m) {
      #pragma GCC unroll 16
      for (int t = 0; t < N; ++t) {
        #pragma GCC unroll 16
        for (int k = 0; k < 4; ++k) acc[m][t][k] = _mm512_setzero_ps();
        acc_min[m][t] = _mm256_setzero_ps();
      }
    }
    int64_t i = 0;
    for (; i + 8 <= nb; i += 8) {
      #pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const int64_t j = i + 4 * h;
        __m256 fw[M];
        Prepped q0[M], q1[M];
        #pragma GCC unroll 16
        for (int m = 0; m < M; ++m) {
          fw[m] = fields4(w[m] + j);
          q0[m] = prep<F::kMode>(F::two(w[m][j], w[m][j + 1]));
          q1[m] = prep<F::kMode>(F::two(w[m][j + 2], w[m][j + 3]));
        }
        #pragma GCC unroll 16
        for (int t = 0; t < N; ++t) {
          const __m256 fa = fields4(a[t] + j);
          const __m512i y0 = pair256(a[t][j].qs, a[t][j + 1].qs), y1 = pair256(a[t][j + 2].qs, a[t][j + 3].qs);
          #pragma GCC unroll 16
          for (int m = 0; m < M; ++m) {
            const __m512 scale = _mm512_castps256_ps512(_mm256_mul_ps(fw[m], fa));
            if constexpr (F::kMin) acc_min[m][t] = _mm256_fmadd_ps(fw[m], fa, acc_min[m][t]);
            const __m512i p0 = dot_prepped<V, F::kMode>(q0[m], y0), p1 = dot_prepped<V, F::kMode>(q1[m], y1);
            __m512* ac = acc[m][t];
            ac[2 * h] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p0), _mm512_permutexvar_ps(sel0, scale), ac[2 * h]);
            ac[2 * h + 1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p1), _mm512_permutexvar_ps(sel1, scale), ac[2 * h + 1]);
          }
        }
      }
    }
    #pragma GCC unroll 16
    for (int m = 0; m < M; ++m) {
      #pragma GCC unroll 16
      for (int t = 0; t < N; ++t) {
        // Leftover blocks: rare (rows of a multiple of 256 have none), so not shared across the tile.
        __m256 tail = _mm256_setzero_ps();
        float tail_min = 0.0f;
        for (int64_t k = i; k < nb; ++k) {
          const W& wb = w[m][k];
          const A& ab = a[t][k];
          const __m256i p = dot_mode<V, F::kMode>(F::one(wb), load256(ab.qs));
          tail = _mm256_fmadd_ps(_mm256_set1_ps(h2f(wb.d) * h2f(ab.d)), _mm256_cvtepi32_ps(p), tail);
          if constexpr (F::kMin) tail_min += h2f(wb.m) * h2f(ab.s);
        }
        const __m512* ac = acc[m][t];
        float sum = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(ac[0], ac[1]), _mm512_add_ps(ac[2], ac[3]))) +
                    hsum256(tail);
        if constexpr (F::kMin) {
          __m128 mm = _mm256_extractf128_ps(acc_min[m][t], 1);
          mm = _mm_add_ps(mm, _mm_movehl_ps(mm, mm));
          sum += _mm_cvtss_f32(_mm_add_ss(mm, _mm_movehdup_ps(mm))) + tail_min;
        }
        y[t * ys + m] = sum;
      }
    }
  }
};

// ---------------------------------------------------------------- super-blocks against Q8_K

// Q3_K (kThree) / Q2_K. Per half h the 32 bytes qs[32h..] hold four 2-bit planes; chunk 2h takes
// planes 0/1 (low/high 32 bytes), chunk 2h+1 planes 2/3.
template <bool V, bool kThree, typename Block>
float dot_q23_k(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const Block*>(vw);
  const auto* a = static_cast<const BlockQ8K*>(va);
  static const ScaleCtrl<V> sctl(16);
  const __m512i m3 = _mm512_set1_epi8(3);
  const __m512i shr[2] = {counts(0, 2), counts(4, 6)};
  __m512i bits[4];
  for (int c = 0; c < 4; ++c) bits[c] = plane_bits(c);
  __m512 acc = _mm512_setzero_ps();
  __m256 acc_m = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const __m256i bsums = load256(a[i].bsums);
    __m256i sc16, corr;
    if constexpr (kThree) {
      sc16 = _mm256_cvtepi8_epi16(q3k_scales_i8(w[i].scales));
      // Stored values are q+4 (0..7): subtract 4 * sum_g sc_g * bsums_g.
      corr = _mm256_slli_epi32(_mm256_madd_epi16(bsums, sc16), 2);
    } else {
      const __m128i raw = load128(w[i].scales);
      sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(raw, _mm_set1_epi8(15)));
      const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(15)));
      acc_m = _mm256_fmadd_ps(_mm256_set1_ps(a[i].d * h2f(w[i].dmin)),
                              _mm256_cvtepi32_ps(_mm256_madd_epi16(bsums, mins)), acc_m);
      corr = _mm256_setzero_si256();
    }
    const __m512i sc[2] = {bcast8x16(_mm256_castsi256_si128(sc16)), bcast8x16(_mm256_extracti128_si256(sc16, 1))};
    __m512i hm;
    if constexpr (kThree) hm = bcast256(w[i].hmask);
    __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
    #pragma GCC unroll 8
    for (int h = 0; h < 2; ++h) {
      const __m512i q2 = bcast256(w[i].qs + 32 * h);
      #pragma GCC unroll 8
      for (int k = 0; k < 2; ++k) {
        const int c = 2 * h + k;
        __m512i q = _mm512_and_si512(_mm512_srlv_epi16(q2, shr[k]), m3);
        if constexpr (kThree) {
          q = _mm512_mask_add_epi8(q, _mm512_test_epi8_mask(hm, bits[c]), q, _mm512_set1_epi8(4));
        }
        const __m512i y = load512(a[i].qs + 64 * c);
        if (k) {
          s1 = dot_scaled<V>(s1, q, y, scale_vec(sctl.ctrl[c], sc[h]));
        } else {
          s0 = dot_scaled<V>(s0, q, y, scale_vec(sctl.ctrl[c], sc[h]));
        }
      }
    }
    const __m512i sumi = _mm512_sub_epi32(_mm512_add_epi32(s0, s1), _mm512_zextsi256_si512(corr));
    acc = _mm512_fmadd_ps(_mm512_set1_ps(a[i].d * h2f(w[i].d)), _mm512_cvtepi32_ps(sumi), acc);
  }
  return _mm512_reduce_add_ps(acc) - hsum256(acc_m);
}

// IQ4_XS. Code points are signed (|K| <= 127), so products use |K| and the activation negated
// where K < 0 (nibble < 8); vpmaddubsw pair sums stay below 2^15 but sums of four would not, so
// both flavours use the vpmaddubsw + vpmaddwd(scale) path.
float dot_iq4_xs(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const BlockIQ4XS*>(vw);
  const auto* a = static_cast<const BlockQ8K*>(va);
  static const ScaleCtrl<false> sctl(32);
  alignas(16) int8_t abs_values[16];
  for (int j = 0; j < 16; ++j) abs_values[j] = static_cast<int8_t>(kIq4Values[j] < 0 ? -kIq4Values[j] : kIq4Values[j]);
  const __m512i table = _mm512_broadcast_i32x4(load128(abs_values));
  const __m512i m4 = _mm512_set1_epi8(0x0f), eight = _mm512_set1_epi8(8);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n / kQKK; ++i) {
    // Sub-block scales ls - 32 as int16, built in registers: low 4 bits are the nibbles of
    // scales_l in order, high 2 bits are bit pairs of scales_h.
    uint32_t sl;
    std::memcpy(&sl, w[i].scales_l, 4);
    const __m128i nib = _mm_unpacklo_epi8(_mm_cvtsi32_si128(static_cast<int>(sl & 0x0f0f0f0fu)),
                                          _mm_cvtsi32_si128(static_cast<int>((sl >> 4) & 0x0f0f0f0fu)));
    const __m256i hi2 = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32(w[i].scales_h), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
        _mm256_set1_epi32(3));
    const __m256i ls = _mm256_sub_epi32(_mm256_or_si256(_mm256_cvtepu8_epi32(nib), _mm256_slli_epi32(hi2, 4)),
                                        _mm256_set1_epi32(32));
    const __m512i sc = bcast8x16(_mm256_cvtepi32_epi16(ls));
    __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
    #pragma GCC unroll 8
    for (int c = 0; c < 4; ++c) {
      // 128-bit lanes [B0, B0>>4, B1, B1>>4] for the 32 bytes B0|B1 of sub-blocks 2c, 2c+1.
      const __m512i b = bcast256(w[i].qs + 32 * c);
      __m512i q = _mm512_shuffle_i64x2(b, b, _MM_SHUFFLE(1, 1, 0, 0));
      q = _mm512_and_si512(_mm512_mask_srli_epi16(q, 0xff00ff00u, q, 4), m4);
      const __m512i k = _mm512_shuffle_epi8(table, q);
      const __m512i y = load512(a[i].qs + 64 * c);
      const __m512i sy = _mm512_mask_sub_epi8(y, _mm512_cmplt_epu8_mask(q, eight), _mm512_setzero_si512(), y);
      if (c & 1) {
        s1 = dot_scaled<false>(s1, k, sy, scale_vec(sctl.ctrl[c], sc));
      } else {
        s0 = dot_scaled<false>(s0, k, sy, scale_vec(sctl.ctrl[c], sc));
      }
    }
    acc = _mm512_fmadd_ps(_mm512_set1_ps(a[i].d * h2f(w[i].d)), _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), acc);
  }
  return _mm512_reduce_add_ps(acc);
}

template <bool V>
VecDotFn table(DType w) {
  switch (w) {
    case DType::F32: return dot_f32;
    case DType::F16: return dot_half<false>;
    case DType::BF16: return dot_half<true>;
    case DType::Q4_0: return tile_dot<Blocks32<V, Q4_0Fmt>>;
    case DType::Q4_1: return tile_dot<Blocks32<V, Q4_1Fmt>>;
    case DType::Q5_0: return tile_dot<Blocks32<V, Q5_0Fmt>>;
    case DType::Q5_1: return tile_dot<Blocks32<V, Q5_1Fmt>>;
    case DType::Q8_0: return tile_dot<Blocks32<V, Q8_0Fmt>>;
    case DType::IQ4_NL: return tile_dot<Blocks32<V, Iq4NlFmt>>;
    case DType::Q2_K: return dot_q23_k<V, false, BlockQ2K>;
    case DType::Q3_K: return dot_q23_k<V, true, BlockQ3K>;
    case DType::IQ4_XS: return dot_iq4_xs;
    default: return avx512_kquant_dot(w, V);
  }
}

template <bool V>
VecDotTileFn tile_table(DType w) {
  switch (w) {
    case DType::Q4_0: return tile_kernel<Blocks32<V, Q4_0Fmt>>;
    case DType::Q4_1: return tile_kernel<Blocks32<V, Q4_1Fmt>>;
    case DType::Q5_0: return tile_kernel<Blocks32<V, Q5_0Fmt>>;
    case DType::Q5_1: return tile_kernel<Blocks32<V, Q5_1Fmt>>;
    case DType::Q8_0: return tile_kernel<Blocks32<V, Q8_0Fmt>>;
    case DType::IQ4_NL: return tile_kernel<Blocks32<V, Iq4NlFmt>>;
    default: return avx512_kquant_dot_tile(w, V);
  }
}

}  // namespace

VecDotFn avx512_vec_dot(DType w, bool vnni) { return vnni ? table<true>(w) : table<false>(w); }
VecDotTileFn avx512_vec_dot_tile(DType w, bool vnni) { return vnni ? tile_table<true>(w) : tile_table<false>(w); }

}  // namespace strata::tensor::detail
