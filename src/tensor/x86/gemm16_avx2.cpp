// AVX2 kernels for the 16-row repacked formats (repack_blocks.h), for CPUs without AVX-512 VNNI
// (Zen 2/3 Ryzens among them). A 64-byte k-step holds 4 elements of 16 rows: rows 0-7 in its first
// 32 bytes, rows 8-15 in the second, so one ymm register ("half") is 8 rows. vpmaddubsw multiplies
// unsigned weight bytes by 4 broadcast activation bytes into int16 pairs; those are summed over as
// many k-steps as the format's bound allows, then vpmaddwd against the sub-block scale (or ones)
// gives each row's int32, the integer the AVX-512 kernel's vpdpbusd chain reaches. Integer sums are
// exact and the float side is the AVX-512 kernel's, operation for operation, so both give the same
// bits, and one token and tiles of tokens run the same operations per output.
// Only intrinsics and internal-linkage helpers here (see blocks.h on why).
#include <algorithm>
#include <type_traits>

#include "tensor/repack_blocks.h"
#include "tensor/x86/gemm16_common.h"
#include "tensor/x86/avx2_common.h"

namespace strata::tensor::detail {
namespace {

inline __m256i bcast32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// Eight f16 values at p as floats.
inline __m256 f16x8(const uint16_t* p) { return _mm256_cvtph_ps(load128(p)); }

// Half h (rows 8h..8h+7) of a 16-row byte row.
inline __m256i half(const uint8_t (&row)[16][4], int h) { return load256(row[8 * h]); }

inline void nibbles(__m256i v, __m256i& lo, __m256i& hi) {
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  lo = _mm256_and_si256(v, m4);
  hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
}

// Int16 pairs (x_r, y_r) of 8 rows -> (x_r, x_r) (h = 0) or (y_r, y_r) (h = 1): a row's scale for
// both of its vpmaddubsw pairs.
inline __m256i dup_pair(__m256i pairs, int h) {
  return h == 0 ? _mm256_shufflehi_epi16(_mm256_shufflelo_epi16(pairs, 0xA0), 0xA0)
                : _mm256_shufflehi_epi16(_mm256_shufflelo_epi16(pairs, 0xF5), 0xF5);
}

// Per-row scales of sub-block s from pair-interleaved bytes sc[s / 2] (16 rows x 2), rows of half h.
inline __m256i scales_u8(const uint8_t (&sc)[16][2], int h, int s) {
  return dup_pair(_mm256_cvtepu8_epi16(load128(sc[8 * h])), s % 2);
}
inline __m256i scales_i8(const int8_t (&sc)[16][2], int h, int s) {
  return dup_pair(_mm256_cvtepi8_epi16(load128(sc[8 * h])), s % 2);
}

// Pins an accumulator to a register at this point of the chain. GCC otherwise computes every
// product of an unrolled sub-block first and sums them afterwards, spilling most of them (Q4_K
// prompts ran markedly slower).
inline void in_order(__m256i& v) { asm("" : "+x"(v)); }

inline __m256i madd_add(__m256i acc, __m256i pairs16, __m256i scale16) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs16, scale16));
}

template <typename V, int H, int N>
inline void zero_all(V (&v)[H][N]) {
  #pragma GCC unroll 8
  for (int h = 0; h < H; ++h) {
    #pragma GCC unroll 8
    for (int t = 0; t < N; ++t) v[h][t] = V{};
  }
}
template <int H, int N>
inline void store_tokens(const __m256 (&acc)[H][N], int h0, float* y, int64_t ys) {
  #pragma GCC unroll 8
  for (int h = 0; h < H; ++h) {
    #pragma GCC unroll 8
    for (int t = 0; t < N; ++t) _mm256_storeu_ps(y + t * ys + 8 * (h0 + h), acc[h][t]);
  }
}

// Every kernel below: halves [h0, h0 + H) of one group times N tokens from t0.

// Q8_0 against Q8_0 activations. Bytes are q + 128; vpmaddubsw needs |pair| < 2^15, so the signed q
// is restored and multiplied as |q| times a with q's sign (|pair| <= 2 * 128 * 127), one k-step at
// a time: the sum is sum(q * a), the integer the AVX-512 kernel gets by taking the bias back out.
struct Q8_0x16 {
  using X = BlockQ8_0x16;
  static constexpr bool kHalfTiles = false;
  static constexpr bool kPrefetch = true;

  template <int H, int N, bool kStream>
  static void run(int64_t n, const X* w, const ActRows& a, int64_t t0, int h0, float* y, int64_t ys) {
    const BlockQ8_0* ab[N];
    token_rows(a, t0, ab);
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80)), ones = _mm256_set1_epi16(1);
    __m256 acc[H][N];
    zero_all(acc);
    for (int64_t i = 0; i < n / kQK; ++i) {
      if constexpr (kStream) prefetch_ahead(w + i);
      const X& b = w[i];
      __m256i isum[H][N];
      zero_all(isum);
      #pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) {
        #pragma GCC unroll 2
        for (int h = 0; h < H; ++h) {
          const __m256i q = _mm256_xor_si256(half(b.qs[k], h0 + h), flip), mag = _mm256_abs_epi8(q);
          #pragma GCC unroll 8
          for (int t = 0; t < N; ++t) {
            const __m256i s = _mm256_sign_epi8(bcast32(ab[t][i].qs + 4 * k), q);
            isum[h][t] = madd_add(isum[h][t], _mm256_maddubs_epi16(mag, s), ones);
            in_order(isum[h][t]);
          }
        }
      }
      #pragma GCC unroll 2
      for (int h = 0; h < H; ++h) {
        const __m256 dw = f16x8(b.d + 8 * (h0 + h));
        #pragma GCC unroll 8
        for (int t = 0; t < N; ++t) {
          acc[h][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[h][t]), _mm256_mul_ps(dw, _mm256_set1_ps(h2f(ab[t][i].d))), acc[h][t]);
        }
      }
    }
    store_tokens(acc, h0, y, ys);
  }
};

// Q4_0 against Q8_0 activations: nibble pairs are at most 2 * 15 * 127, so a whole block (8
// k-steps) sums in int16; the bias 8 comes back out as 8 * sum(a).
struct Q4_0x16 {
  using X = BlockQ4_0x16;
  static constexpr bool kHalfTiles = false;
  static constexpr bool kPrefetch = true;

  template <int H, int N, bool kStream>
  static void run(int64_t n, const X* w, const ActRows& a, int64_t t0, int h0, float* y, int64_t ys) {
    const BlockQ8_0* ab[N];
    const int32_t* sums[N];
    token_rows(a, t0, ab);
    #pragma GCC unroll 8
    for (int t = 0; t < N; ++t) sums[t] = a.sums + (t0 + t) * a.sums_stride;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[H][N];
    zero_all(acc);
    for (int64_t i = 0; i < n / kQK; ++i) {
      if constexpr (kStream) prefetch_ahead(w + i);
      const X& b = w[i];
      __m256i p16[H][N];
      zero_all(p16);
      #pragma GCC unroll 4
      for (int p = 0; p < 4; ++p) {
        #pragma GCC unroll 2
        for (int h = 0; h < H; ++h) {
          __m256i lo, hi;
          nibbles(half(b.qs[p], h0 + h), lo, hi);
          #pragma GCC unroll 8
          for (int t = 0; t < N; ++t) {
            p16[h][t] = _mm256_add_epi16(p16[h][t], _mm256_maddubs_epi16(lo, bcast32(ab[t][i].qs + 8 * p)));
            p16[h][t] = _mm256_add_epi16(p16[h][t], _mm256_maddubs_epi16(hi, bcast32(ab[t][i].qs + 8 * p + 4)));
            in_order(p16[h][t]);
          }
        }
      }
      #pragma GCC unroll 2
      for (int h = 0; h < H; ++h) {
        const __m256 dw = f16x8(b.d + 8 * (h0 + h));
        #pragma GCC unroll 8
        for (int t = 0; t < N; ++t) {
          const __m256i isum = _mm256_sub_epi32(_mm256_madd_epi16(p16[h][t], ones), _mm256_set1_epi32(sums[t][i] << 3));
          acc[h][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, _mm256_set1_ps(h2f(ab[t][i].d))), acc[h][t]);
        }
      }
    }
    store_tokens(acc, h0, y, ys);
  }
};

// Bit k of every byte of qh moved to bit 4 (Q5_K's fifth bit of k-step k). 16-bit shifts: the bits
// a byte takes from its neighbour never reach bit 4 for these shift counts.
inline __m256i fifth_bit(__m256i qh, int k) {
  const __m256i m = _mm256_set1_epi8(0x10);
  return k < 4 ? _mm256_and_si256(_mm256_srli_epi16(_mm256_slli_epi16(qh, 4), k), m)
               : _mm256_and_si256(_mm256_srli_epi16(qh, k - 4), m);
}

// The K-quants against Q8_K: K::block<H, N> adds one 256-element block of halves [h0, h0 + H)
// times N tokens to acc; run sums every block of the row. Prompts run them one half at a time.
template <typename K>
struct KQuantBlocks {
  static constexpr bool kHalfTiles = true;
  static constexpr bool kPrefetch = false;

  template <int H, int N, bool kStream, typename X>
  static void run(int64_t n, const X* w, const ActRows& a, int64_t t0, int h0, float* y, int64_t ys) {
    const BlockQ8K* ab[N];
    token_rows(a, t0, ab);
    const int32_t* pair_sums[N];
    #pragma GCC unroll 8
    for (int t = 0; t < N; ++t) pair_sums[t] = a.sums + (t0 + t) * a.sums_stride;
    __m256 acc[H][N];
    zero_all(acc);
    for (int64_t i = 0; i < n / kQKK; ++i) {
      if constexpr (kStream) prefetch_ahead(w + i);
      K::block(w[i], ab, pair_sums, i, h0, acc);
    }
    store_tokens(acc, h0, y, ys);
  }
};

// Q4_K / Q5_K against Q8_K. Pairs are at most 2 * 15 * 128 (Q4_K: a sub-block's 8 k-steps sum in
// int16) or 2 * 31 * 128 (Q5_K: 4 k-steps); vpmaddwd by the 6-bit scale then gives isum * scale.
template <bool kFive>
struct K45x16 : KQuantBlocks<K45x16<kFive>> {
  using X = std::conditional_t<kFive, BlockQ5Kx16, BlockQ4Kx16>;
  static constexpr int kRun = kFive ? 4 : 8;  // k-steps summed in int16

  // acc += block i of halves [h0, h0 + H) times N tokens.
  template <int H, int N>
  static void block(const X& b, const BlockQ8K* const* ab, const int32_t* const* pair_sums, int64_t i, int h0,
                    __m256 (&acc)[H][N]) {
    __m256i sumi[H][N];
    zero_all(sumi);
    #pragma GCC unroll 1
    for (int s = 0; s < 8; ++s) {
      const uint8_t(*qs)[16][4] = sub_qs<kFive>(b, s);
      __m256i sc[H], qh[H];
      #pragma GCC unroll 2
      for (int h = 0; h < H; ++h) {
        sc[h] = scales_u8(b.sc[s / 2], h0 + h, s);
        if constexpr (kFive) qh[h] = half(b.sub[s].qh, h0 + h);
      }
      __m256i p16[H][N];
      zero_all(p16);
      #pragma GCC unroll 4
      for (int p = 0; p < 4; ++p) {
        #pragma GCC unroll 2
        for (int h = 0; h < H; ++h) {
          __m256i q[2];
          nibbles(half(qs[p], h0 + h), q[0], q[1]);
          if constexpr (kFive) {
            q[0] = _mm256_or_si256(q[0], fifth_bit(qh[h], 2 * p));
            q[1] = _mm256_or_si256(q[1], fifth_bit(qh[h], 2 * p + 1));
          }
          #pragma GCC unroll 8
          for (int t = 0; t < N; ++t) {
            const int8_t* at = ab[t][i].qs + 32 * s + 8 * p;
            p16[h][t] = _mm256_add_epi16(p16[h][t], _mm256_maddubs_epi16(q[0], bcast32(at)));
            p16[h][t] = _mm256_add_epi16(p16[h][t], _mm256_maddubs_epi16(q[1], bcast32(at + 4)));
            in_order(p16[h][t]);
            if (2 * p + 2 == kRun || p == 3) {
              sumi[h][t] = madd_add(sumi[h][t], p16[h][t], sc[h]);
              p16[h][t] = _mm256_setzero_si256();
            }
          }
        }
      }
    }
    finish(b, ab, pair_sums, i, h0, sumi, acc);
  }

  // acc += isum * d * d_a - (mins . sub-block sums) * dmin * d_a, as the AVX-512 kernel.
  template <int H, int N>
  static void finish(const X& b, const BlockQ8K* const* ab, const int32_t* const* pair_sums, int64_t i, int h0,
                     const __m256i (&sumi)[H][N], __m256 (&acc)[H][N]) {
    #pragma GCC unroll 2
    for (int h = 0; h < H; ++h) {
      const __m256 d = f16x8(b.d + 8 * (h0 + h)), dmin = f16x8(b.dmin + 8 * (h0 + h));
      __m256i m[4];
      #pragma GCC unroll 4
      for (int p = 0; p < 4; ++p) m[p] = _mm256_cvtepu8_epi16(load128(b.m[p][8 * (h0 + h)]));
      #pragma GCC unroll 8
      for (int t = 0; t < N; ++t) {
        const int32_t* pr = pair_sums[t] + 4 * i;
        __m256i summ = _mm256_setzero_si256();
        #pragma GCC unroll 4
        for (int p = 0; p < 4; ++p) summ = madd_add(summ, m[p], _mm256_set1_epi32(pr[p]));
        const __m256 da = _mm256_set1_ps(ab[t][i].d);
        acc[h][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[h][t]), _mm256_mul_ps(d, da), acc[h][t]);
        acc[h][t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(summ), _mm256_mul_ps(dmin, da), acc[h][t]);
      }
    }
  }
};

// Q6_K against Q8_K. Stored q in [0, 63] (q - 32 is meant); pairs are at most 2 * 63 * 128, so two
// k-steps sum in int16 before vpmaddwd by the signed scale. 32 * sum_s sc_s * bsum_s comes off at
// the end, as in the AVX-512 kernel.
struct Q6Kx16 : KQuantBlocks<Q6Kx16> {
  using X = BlockQ6Kx16;

  // acc += block i of halves [h0, h0 + H) times N tokens (Q8_K's own block sums, not the pair sums).
  template <int H, int N>
  static void block(const X& b, const BlockQ8K* const* ab, const int32_t* const*, int64_t i, int h0,
                    __m256 (&acc)[H][N]) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
    __m256i sumi[H][N];
    zero_all(sumi);
    #pragma GCC unroll 2
    for (int s = 0; s < 16; ++s) {
      #pragma GCC unroll 2
      for (int h = 0; h < H; ++h) {
        const __m256i l0 = half(b.sub[s].ql[0], h0 + h), l1 = half(b.sub[s].ql[1], h0 + h);
        const __m256i qh = half(b.sub[s].qh, h0 + h);
        const __m256i q[4] = {
            _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30)),
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30)),
            _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(qh, m30)),
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30))};
        const __m256i sc = scales_i8(b.sc[s / 2], h0 + h, s);
        #pragma GCC unroll 8
        for (int t = 0; t < N; ++t) {
          const int8_t* at = ab[t][i].qs + 16 * s;
          const __m256i p01 = _mm256_add_epi16(_mm256_maddubs_epi16(q[0], bcast32(at)), _mm256_maddubs_epi16(q[1], bcast32(at + 4)));
          const __m256i p23 = _mm256_add_epi16(_mm256_maddubs_epi16(q[2], bcast32(at + 8)), _mm256_maddubs_epi16(q[3], bcast32(at + 12)));
          sumi[h][t] = madd_add(madd_add(sumi[h][t], p01, sc), p23, sc);
          in_order(sumi[h][t]);
        }
      }
    }
    #pragma GCC unroll 2
    for (int h = 0; h < H; ++h) {
      const __m256 d = f16x8(b.d + 8 * (h0 + h));
      #pragma GCC unroll 8
      for (int t = 0; t < N; ++t) {
        __m256i corr = _mm256_setzero_si256();
        #pragma GCC unroll 8
        for (int p = 0; p < 8; ++p) {
          corr = madd_add(corr, _mm256_cvtepi8_epi16(load128(b.sc[p][8 * (h0 + h)])), bcast32(ab[t][i].bsums + 2 * p));
        }
        const __m256i total = _mm256_sub_epi32(sumi[h][t], _mm256_slli_epi32(corr, 5));
        acc[h][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(total), _mm256_mul_ps(d, _mm256_set1_ps(ab[t][i].d)), acc[h][t]);
      }
    }
  }
};

// Tiles: H halves times N tokens with H * N <= 4 keeps the accumulators in the 16 ymm registers.
// Both halves together read each weight byte once and share each activation broadcast (decode, and
// prompts of the 32-element formats, whose unpacking is cheap); the K-quants' prompts run one half
// at a time in tiles of 4 tokens, so each unpacked weight register serves 4 tokens, the group's
// other half then coming from L1/L2 (matmul/<type>/2048/repacked, one thread: faster for the
// K-quants, slower for Q8_0 and Q4_0).
template <typename K, int H, bool kStream, int N = 4 / H>
inline void run_n(int nt, int64_t n, const typename K::X* w, const ActRows& a, int64_t t0, int h0, float* y, int64_t ys) {
  if constexpr (N >= 1) {
    if (nt == N) {
      K::template run<H, N, kStream>(n, w, a, t0, h0, y, ys);
    } else {
      run_n<K, H, kStream, N - 1>(nt, n, w, a, t0, h0, y, ys);
    }
  }
}

// Halves [h0, h0 + H) of one group for every tile of tokens. With at most 8 tokens (decode, server
// slots) every weight is read once, and the first tile streams it from memory: the 32-element
// formats with software prefetch (faster for Q8_0), the K-quants without, as on Zen 3 their 37
// prefetches a block cost more than they gain (matmul_decode/<type>/<threads>/repacked, three
// interleaved runs each). The rest reuse the group from cache.
template <typename K, int H>
inline void tiles(int64_t n, const typename K::X* w, const ActRows& a, int64_t tokens, int h0, bool stream, float* y,
                  int64_t ys) {
  constexpr int kTile = 4 / H;
  for (int64_t t0 = 0; t0 < tokens; t0 += kTile) {
    const int nt = static_cast<int>(std::min<int64_t>(kTile, tokens - t0));
    if (K::kPrefetch && stream && h0 == 0 && t0 == 0) {
      run_n<K, H, true>(nt, n, w, a, t0, h0, y + t0 * ys, ys);
    } else {
      run_n<K, H, false>(nt, n, w, a, t0, h0, y + t0 * ys, ys);
    }
  }
}

// One half and tiles of 4 tokens of K-quant block i into acc[h][0..tokens), NT tokens from t0.
template <typename K, int NT = 4>
inline void block_tile(int nt, const typename K::X& b, const BlockQ8K* const* ab, const int32_t* const* sums,
                       int64_t i, int h, __m256* acc) {
  if constexpr (NT >= 1) {
    if (nt != NT) return block_tile<K, NT - 1>(nt, b, ab, sums, i, h, acc);
    __m256 r[1][NT];
    #pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) r[0][t] = acc[t];
    K::template block<1, NT>(b, ab, sums, i, h, r);
    #pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) acc[t] = r[0][t];
  }
}

// 3-8 tokens (server slots decoding together) of a K-quant group: block by block, each block's
// halves and tiles of 4 tokens in turn, so that the weights stream from memory at an even pace
// while they are multiplied (one half over the whole group and then the other left the memory idle
// half of the time; matmul_decode/Q4_K/2threads/repacked/{4,8}tokens gained). What remains are
// stalls on the weight loads even with software prefetch. Every output sees the half tiles'
// operations in the same order, so the bits are theirs.
template <typename K>
void few_tokens(int64_t n, const typename K::X* w, const ActRows& a, int64_t tokens, bool stream, float* y,
                int64_t ys) {
  const BlockQ8K* ab[8];
  const int32_t* sums[8];
  for (int64_t t = 0; t < tokens; ++t) {
    ab[t] = reinterpret_cast<const BlockQ8K*>(a.data + t * a.stride);
    sums[t] = a.sums + t * a.sums_stride;
  }
  __m256 acc[2][8];
  for (auto& h : acc) std::fill(std::begin(h), std::end(h), _mm256_setzero_ps());
  for (int64_t i = 0; i < n / kQKK; ++i) {
    if (stream) prefetch_ahead(w + i);
    for (int h = 0; h < 2; ++h) {
      for (int64_t t0 = 0; t0 < tokens; t0 += 4) {
        const int nt = static_cast<int>(std::min<int64_t>(4, tokens - t0));
        block_tile<K>(nt, w[i], ab + t0, sums + t0, i, h, acc[h] + t0);
      }
    }
  }
  for (int h = 0; h < 2; ++h) {
    for (int64_t t = 0; t < tokens; ++t) _mm256_storeu_ps(y + t * ys + 8 * h, acc[h][t]);
  }
}

template <typename K>
void gemm16(int64_t n, const uint8_t* w, size_t group_bytes, int64_t groups, const ActRows& a, int64_t tokens,
            float* y, int64_t ys) {
  const bool stream = tokens <= 8 && decode_prefetch();
  for (int64_t g = 0; g < groups; ++g) {
    const auto* wg = reinterpret_cast<const typename K::X*>(w + g * group_bytes);
    float* yg = y + 16 * g;
    if constexpr (K::kHalfTiles) {
      if (tokens > 2 && tokens <= 8) {
        few_tokens<K>(n, wg, a, tokens, stream, yg, ys);
        continue;
      }
    }
    if (tokens <= 2 || !K::kHalfTiles) {
      tiles<K, 2>(n, wg, a, tokens, 0, stream, yg, ys);
    } else {
      for (int h = 0; h < 2; ++h) tiles<K, 1>(n, wg, a, tokens, h, stream, yg, ys);
    }
  }
}

}  // namespace

Gemm16Fn avx2_gemm16(DType w) {
  if (!cpu_has_avx2()) return nullptr;
  switch (w) {
    case DType::Q8_0: return gemm16<Q8_0x16>;
    case DType::Q4_0: return gemm16<Q4_0x16>;
    case DType::Q4_K: return gemm16<K45x16<false>>;
    case DType::Q5_K: return gemm16<K45x16<true>>;
    case DType::Q6_K: return gemm16<Q6Kx16>;
    default: return nullptr;
  }
}

}  // namespace strata::tensor::detail
