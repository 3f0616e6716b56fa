// Internal: the portable repacking of one GGUF block of one row into its place in a 16-row block
// (layouts in repack_blocks.h). Works on 64-bit words: every output dword is a few shifts and masks
// of 8 source bytes, the high bits are transposed with delta swaps, no per-element loop or branch.
// Internal linkage only (see blocks.h), so a SIMD file could include it under its own flags. An
// AVX-512 version (four rows transposed per store; commit c2af80c) ran faster in cache but no
// faster from memory, where loading is (both well under a memcpy), so it was dropped.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

#include "tensor/repack_blocks.h"

namespace strata::tensor::detail {
namespace {

static_assert(std::endian::native == std::endian::little, "the word tricks below assume little endian");

inline uint64_t load64(const uint8_t* p) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  return w;
}
inline uint32_t load32(const void* p) {
  uint32_t w;
  std::memcpy(&w, p, 4);
  return w;
}
inline void store32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }
inline void store16(void* p, uint64_t v) {
  const auto h = static_cast<uint16_t>(v);
  std::memcpy(p, &h, 2);
}

// Byte j < 4 of the result: nibble h of p[j] (low) and nibble h of p[4 + j] (high), which is how
// every repacked nibble dword pairs elements 8p + j and 8p + 4 + j.
inline uint32_t nibble_pairs(const uint8_t* p, int h) {
  const uint64_t t = (load64(p) >> (4 * h)) & 0x0f0f0f0f0f0f0f0full;
  return static_cast<uint32_t>(t | t >> 28);
}

// Delta swaps: exchange the bits of x at m with those d above them (within a word), or the bits of b
// at m with the bits of a d above them (between words).
inline uint64_t swap_bits(uint64_t x, uint64_t m, int d) {
  const uint64_t t = ((x >> d) ^ x) & m;
  return x ^ t ^ (t << d);
}
inline void swap_words(uint64_t& a, uint64_t& b, uint64_t m, int d) {
  const uint64_t t = ((a >> d) ^ b) & m;
  b ^= t;
  a ^= t << d;
}

[[gnu::always_inline]] inline void repack_row(const BlockQ8_0& b, BlockQ8_0x16& x, int r) {
  x.d[r] = b.d;
  #pragma GCC unroll 16
  for (int k = 0; k < 8; ++k) store32(x.qs[k][r], load32(b.qs + 4 * k) ^ 0x80808080u);
}

// Q4_0: byte l holds element l (low) and l + 16 (high).
[[gnu::always_inline]] inline void repack_row(const BlockQ4_0& b, BlockQ4_0x16& x, int r) {
  x.d[r] = b.d;
  #pragma GCC unroll 16
  for (int p = 0; p < 4; ++p) store32(x.qs[p][r], nibble_pairs(b.qs + 8 * (p % 2), p / 2));
}

template <typename X, typename B>
[[gnu::always_inline]] inline void k4_header(const B& b, X& x, int r) {
  x.d[r] = b.d;
  x.dmin[r] = b.dmin;
  uint64_t sc, m;
  unpack_k4_scales(b.scales, &sc, &m);
  #pragma GCC unroll 16
  for (int p = 0; p < 4; ++p) store16(x.sc[p][r], sc >> (16 * p)), store16(x.m[p][r], m >> (16 * p));
}

// Q4_K: qs[32c + l] holds element 64c + l (low) and 64c + 32 + l (high); repacked nibble dword
// p = 8c + 4h + q pairs elements 64c + 32h + 8q + j and + 4.
[[gnu::always_inline]] inline void repack_row(const BlockQ4K& b, BlockQ4Kx16& x, int r) {
  k4_header(b, x, r);
  #pragma GCC unroll 16
  for (int c = 0; c < 4; ++c) {
    #pragma GCC unroll 16
    for (int h = 0; h < 2; ++h) {
      #pragma GCC unroll 16
      for (int q = 0; q < 4; ++q) store32(x.qs[8 * c + 4 * h + q][r], nibble_pairs(b.qs + 32 * c + 8 * q, h));
    }
  }
}

// Q5_K: nibbles as Q4_K, sub-block s = 2c + h. Bit 4 of element 32s + l is bit s of qh[l]; the
// repacked qh dword of s has bit b of byte j = bit s of qh[4b + j]. Seen as words W_k = qh[8k..8k+7],
// bit (b, s, j) sits at word b/2, bit 32(b%2) + 8j + s; three delta swaps trade b's index bits for
// s's, leaving sub-block s's dword at word s/2, bits 32(s%2)...
[[gnu::always_inline]] inline void q5_high(const BlockQ5K& b, BlockQ5Kx16& x, int r) {
  uint64_t w[4] = {load64(b.qh), load64(b.qh + 8), load64(b.qh + 16), load64(b.qh + 24)};
  for (uint64_t& v : w) v = swap_bits(v, 0x00000000aaaaaaaaull, 31);
  swap_words(w[0], w[1], 0x3333333333333333ull, 2);
  swap_words(w[2], w[3], 0x3333333333333333ull, 2);
  swap_words(w[0], w[2], 0x0f0f0f0f0f0f0f0full, 4);
  swap_words(w[1], w[3], 0x0f0f0f0f0f0f0f0full, 4);
  #pragma GCC unroll 16
  for (int s = 0; s < 8; ++s) store32(x.sub[s].qh[r], static_cast<uint32_t>(w[s / 2] >> (32 * (s % 2))));
}
[[gnu::always_inline]] inline void repack_row(const BlockQ5K& b, BlockQ5Kx16& x, int r) {
  k4_header(b, x, r);
  #pragma GCC unroll 16
  for (int s = 0; s < 8; ++s) {
    #pragma GCC unroll 16
    for (int p = 0; p < 4; ++p) store32(x.sub[s].qs[p][r], nibble_pairs(b.qs + 32 * (s / 2) + 8 * p, s % 2));
  }
  q5_high(b, x, r);
}

// Q6_K: element 128h + 32g + l takes nibble g/2 of ql[64h + 32(g%2) + l] and crumb g of qh[32h + l].
// Sub-block s (16 elements) = 8h + 2g + o covers l = 16o..16o+15. Its qh dword has crumb b of byte j
// = crumb g of qh[32h + 16o + 4b + j]: per (h, o) two words hold crumb (b, g, j) at word b/2, bits
// 32(b%2) + 8j + 2g, and two delta swaps trade b for g.
[[gnu::always_inline]] inline void repack_row(const BlockQ6K& b, BlockQ6Kx16& x, int r) {
  x.d[r] = b.d;
  #pragma GCC unroll 16
  for (int p = 0; p < 8; ++p) std::memcpy(x.sc[p][r], b.scales + 2 * p, 2);
  #pragma GCC unroll 16
  for (int s = 0; s < 16; ++s) {
    const int h = s / 8, g = s % 8 / 2, o = s % 2;
    const uint8_t* ql = b.ql + 64 * h + 32 * (g % 2) + 16 * o;
    #pragma GCC unroll 16
    for (int p = 0; p < 2; ++p) store32(x.sub[s].ql[p][r], nibble_pairs(ql + 8 * p, g / 2));
  }
  #pragma GCC unroll 16
  for (int h = 0; h < 2; ++h) {
    #pragma GCC unroll 16
    for (int o = 0; o < 2; ++o) {
      const uint8_t* qh = b.qh + 32 * h + 16 * o;
      uint64_t w0 = swap_bits(load64(qh), 0x00000000ccccccccull, 30);
      uint64_t w1 = swap_bits(load64(qh + 8), 0x00000000ccccccccull, 30);
      swap_words(w0, w1, 0x0f0f0f0f0f0f0f0full, 4);
      #pragma GCC unroll 16
      for (int g = 0; g < 4; ++g) {
        store32(x.sub[8 * h + 2 * g + o].qh[r], static_cast<uint32_t>((g < 2 ? w0 : w1) >> (32 * (g % 2))));
      }
    }
  }
}

// Groups [g0, g1) of a matrix (rows of B blocks, nb per row, row_stride apart) into dst
// (group_bytes per group of 16 rows), each block through Row. The source is read front to back, row
// by row: block by block across 16 rows made 16 streams that the prefetchers lost. A
// group's output stays in cache meanwhile.
template <typename B, typename X, void (*Row)(const B&, X&, int)>
void repack_rows(const uint8_t* src, size_t row_stride, int64_t nb, uint8_t* dst, size_t group_bytes, int64_t g0,
                 int64_t g1) {
  for (int64_t g = g0; g < g1; ++g) {
    X* out = reinterpret_cast<X*>(dst + static_cast<size_t>(g) * group_bytes);
    for (int r = 0; r < 16; ++r) {
      const B* row = reinterpret_cast<const B*>(src + static_cast<size_t>(16 * g + r) * row_stride);
      for (int64_t i = 0; i < nb; ++i) Row(row[i], out[i], r);
    }
  }
}

}  // namespace

}  // namespace strata::tensor::detail
