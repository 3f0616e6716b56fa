// AVX-512 repacking of Q4_K, Q5_K and Q6_K rows (the bulk of a K-quant model): the nibble dwords
// of a whole row in a few vector ops, scattered to their places in the 16-row block (64 bytes
// apart), in the same row-by-row order as the portable code, which it matches byte for byte (see
// repack_rows.h for the element maps; tests compare the two). Headers and Q5_K's high bits stay
// scalar; Q4_0 and Q8_0 stay portable (small blocks, little to gain).
#include "tensor/x86/avx512_common.h"  // first: silences GCC 12's intrinsics warnings

#include "tensor/repack_rows.h"

namespace strata::tensor::detail {
namespace {

// Per 64-bit lane of v, nibble_pairs(lane bytes, 0) in the low dword (lo) and nibble_pairs(.., 1)
// in the low dword (hi); the high dwords hold garbage.
inline void nibble_pair_lanes(__m512i v, __m512i& lo, __m512i& hi) {
  const __m512i m = _mm512_set1_epi8(0x0f);
  const __m512i l = _mm512_and_si512(v, m);
  const __m512i h = _mm512_and_si512(_mm512_srli_epi64(v, 4), m);
  lo = _mm512_or_si512(l, _mm512_srli_epi64(l, 28));
  hi = _mm512_or_si512(h, _mm512_srli_epi64(h, 28));
}

// Low dwords of lo's 8 lanes then of hi's 8 lanes.
inline __m512i low_dwords(__m512i lo, __m512i hi) {
  const __m512i idx = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  return _mm512_permutex2var_epi32(lo, idx, hi);
}

// 128 bytes of Q4_K/Q5_K qs as 32 dwords in the order p = 8c + 4h + q (see the Q4_K map): lanes of
// the first vector are c = 0, 1, of the second c = 2, 3.
inline void k4_nibbles(const uint8_t* qs, __m512i& a, __m512i& b) {
  const __m512i idx = _mm512_setr_epi32(0, 2, 4, 6, 16, 18, 20, 22, 8, 10, 12, 14, 24, 26, 28, 30);
  __m512i lo, hi;
  nibble_pair_lanes(_mm512_loadu_si512(qs), lo, hi);
  a = _mm512_permutex2var_epi32(lo, idx, hi);
  nibble_pair_lanes(_mm512_loadu_si512(qs + 64), lo, hi);
  b = _mm512_permutex2var_epi32(lo, idx, hi);
}

// Four rows' vectors of 16 dwords each (a[k] lane l = dword l of row r0 + k): dword l of the four
// rows, 16 contiguous bytes, goes to base + off[l]. A 4x4 transpose per 128-bit lane instead of
// scatters (three times slower on Zen 4), and four rows at a time keep four source streams.
inline void store_quads(uint8_t* base, const uint32_t (&off)[16], const __m512i (&a)[4]) {
  const __m512i t0 = _mm512_unpacklo_epi32(a[0], a[1]), t1 = _mm512_unpackhi_epi32(a[0], a[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(a[2], a[3]), t3 = _mm512_unpackhi_epi32(a[2], a[3]);
  const __m512i u[4] = {_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2), _mm512_unpacklo_epi64(t1, t3),
                        _mm512_unpackhi_epi64(t1, t3)};
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {  // u[j]'s 128-bit lane k holds dword 4k + j of the four rows
    _mm_storeu_si128(reinterpret_cast<__m128i*>(base + off[j]), _mm512_castsi512_si128(u[j]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(base + off[4 + j]), _mm512_extracti32x4_epi32(u[j], 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(base + off[8 + j]), _mm512_extracti32x4_epi32(u[j], 2));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(base + off[12 + j]), _mm512_extracti32x4_epi32(u[j], 3));
  }
}

// Byte offsets of the rows' dword p = 0..15 (x.qs[p][r], 64 bytes apart).
alignas(64) constexpr uint32_t kQ4kOff[16] = {0, 64, 128, 192, 256, 320, 384, 448, 512, 576, 640, 704, 768, 832, 896, 960};

[[gnu::always_inline]] inline void quad_q4k(const BlockQ4K* const b[4], BlockQ4Kx16& x, int r0) {
  __m512i lo[4], hi[4];
  for (int k = 0; k < 4; ++k) k4_header(*b[k], x, r0 + k), k4_nibbles(b[k]->qs, lo[k], hi[k]);
  store_quads(x.qs[0][r0], kQ4kOff, lo);
  store_quads(x.qs[16][r0], kQ4kOff, hi);
}

// p = 8c + 4h + q is sub-block s = 2c + h, dword q: x.sub[s].qs[q][r], 320 s + 64 q bytes on.
alignas(64) constexpr uint32_t kQ5kOff[16] = {0, 64, 128, 192, 320, 384, 448, 512, 640, 704, 768, 832, 960, 1024, 1088, 1152};

[[gnu::always_inline]] inline void quad_q5k(const BlockQ5K* const b[4], BlockQ5Kx16& x, int r0) {
  static_assert(sizeof(BlockQ5Kx16::Sub) == 320);
  __m512i lo[4], hi[4];
  for (int k = 0; k < 4; ++k) {
    k4_header(*b[k], x, r0 + k);
    k4_nibbles(b[k]->qs, lo[k], hi[k]);
    q5_high(*b[k], x, r0 + k);
  }
  store_quads(x.sub[0].qs[0][r0], kQ5kOff, lo);
  store_quads(x.sub[4].qs[0][r0], kQ5kOff, hi);
}

// Q6_K high bits: the portable code's two delta swaps on all eight words (h, o, w) at once, the
// between-word swap pairing each even lane (w = 0) with the odd one after it.
inline __m512i q6_high(const uint8_t* qh) {
  const __m512i v = _mm512_loadu_si512(qh);
  const __m512i m30 = _mm512_set1_epi64(0x00000000ccccccccll);
  __m512i t = _mm512_and_si512(_mm512_xor_si512(_mm512_srli_epi64(v, 30), v), m30);
  const __m512i x = _mm512_xor_si512(v, _mm512_xor_si512(t, _mm512_slli_epi64(t, 30)));
  const __mmask8 odd = 0xaa;
  const __m512i partner = _mm512_shuffle_epi32(x, _MM_PERM_BADC);  // swaps the two words of each pair
  const __m512i a = _mm512_mask_blend_epi64(odd, x, partner);    // w = 0 word of the pair in both lanes
  const __m512i b = _mm512_mask_blend_epi64(odd, partner, x);    // w = 1 word
  t = _mm512_and_si512(_mm512_xor_si512(_mm512_srli_epi64(a, 4), b), _mm512_set1_epi8(0x0f));
  return _mm512_xor_si512(x, _mm512_mask_blend_epi64(odd, _mm512_slli_epi64(t, 4), t));
}

// Half h of ql: lane l < 8 is word k = l of the low nibbles (g = k / 4), lane 8 + k of the high ones
// (g = 2 + k / 4); o = k / 2 % 2, p = k % 2; sub-block s = 2g + o (+ 8h), 192 s + 64 p bytes on.
alignas(64) constexpr uint32_t kQ6kQlOff[16] = {0, 64, 192, 256, 384, 448, 576, 640, 768, 832, 960, 1024, 1152, 1216, 1344, 1408};
// qh word (h, o, w) = lane 4h + 2o + w; its dword e is g = 2w + e of sub-block 8h + 2g + o.
alignas(64) constexpr uint32_t kQ6kQhOff[16] = {0, 384, 768, 1152, 192, 576, 960, 1344, 1536, 1920, 2304, 2688, 1728, 2112, 2496, 2880};

[[gnu::always_inline]] inline void quad_q6k(const BlockQ6K* const b[4], BlockQ6Kx16& x, int r0) {
  static_assert(sizeof(BlockQ6Kx16::Sub) == 192);
  __m512i ql[2][4], qh[4];
  for (int k = 0; k < 4; ++k) {
    x.d[r0 + k] = b[k]->d;
    for (int p = 0; p < 8; ++p) std::memcpy(x.sc[p][r0 + k], b[k]->scales + 2 * p, 2);
    for (int h = 0; h < 2; ++h) {
      __m512i lo, hi;
      nibble_pair_lanes(_mm512_loadu_si512(b[k]->ql + 64 * h), lo, hi);
      ql[h][k] = low_dwords(lo, hi);
    }
    qh[k] = q6_high(b[k]->qh);
  }
  store_quads(x.sub[0].ql[0][r0], kQ6kQlOff, ql[0]);
  store_quads(x.sub[8].ql[0][r0], kQ6kQlOff, ql[1]);
  store_quads(x.sub[0].qh[r0], kQ6kQhOff, qh);
}

// repack_rows four rows at a time (software prefetch gained nothing measurable).
template <typename B, typename X, void (*Quad)(const B* const[4], X&, int)>
void repack_quads(const uint8_t* src, size_t row_stride, int64_t nb, uint8_t* dst, size_t group_bytes, int64_t g0,
                  int64_t g1) {
  for (int64_t g = g0; g < g1; ++g) {
    X* out = reinterpret_cast<X*>(dst + static_cast<size_t>(g) * group_bytes);
    for (int r0 = 0; r0 < 16; r0 += 4) {
      const B* rows[4];
      for (int k = 0; k < 4; ++k) rows[k] = reinterpret_cast<const B*>(src + static_cast<size_t>(16 * g + r0 + k) * row_stride);
      for (int64_t i = 0; i < nb; ++i) {
        const B* const b[4] = {rows[0] + i, rows[1] + i, rows[2] + i, rows[3] + i};
        Quad(b, out[i], r0);
      }
    }
  }
}

}  // namespace

RepackFn avx512_repack(DType t) {
  if (!cpu_has_avx512()) return nullptr;
  switch (t) {
    case DType::Q4_K: return repack_quads<BlockQ4K, BlockQ4Kx16, quad_q4k>;
    case DType::Q5_K: return repack_quads<BlockQ5K, BlockQ5Kx16, quad_q5k>;
    case DType::Q6_K: return repack_quads<BlockQ6K, BlockQ6Kx16, quad_q6k>;
    default: return nullptr;
  }
}

}  // namespace strata::tensor::detail
