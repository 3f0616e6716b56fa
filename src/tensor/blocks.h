// Internal: byte layouts of the block formats (llama.cpp-compatible), shared helpers, and the
// per-ISA kernel tables. Included by the portable sources and by the x86/*_avx2/_avx512 files, so
// everything here is either a plain declaration, a POD struct, or an internal-linkage (static)
// function: an inline function with external linkage compiled under -mavx512f could be picked by
// the linker for the portable code and crash CPUs without AVX-512.
#pragma once

#include <cstdint>
#include <cstring>

#include "tensor/quants.h"

namespace strata::tensor::detail {

constexpr int kQK = 32;    // elements per small block (Q4_0 ... Q8_1, IQ4_NL)
constexpr int kQKK = 256;  // elements per super-block (K-quants, IQ4_XS, Q8_K)

// Activation blocks (Q8_0, Q8_1, Q8_K) hold quants in [-127, 127] as quantize_activations produces
// them; the SIMD kernels rely on that (|q| < 128 for the sign tricks), as llama.cpp's do.
struct BlockQ4_0 { uint16_t d; uint8_t qs[16]; };
struct BlockQ4_1 { uint16_t d; uint16_t m; uint8_t qs[16]; };
struct BlockQ5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; };
struct BlockQ5_1 { uint16_t d; uint16_t m; uint8_t qh[4]; uint8_t qs[16]; };
struct BlockQ8_0 { uint16_t d; int8_t qs[32]; };
struct BlockQ8_1 { uint16_t d; uint16_t s; int8_t qs[32]; };
struct BlockIQ4NL { uint16_t d; uint8_t qs[16]; };
struct BlockQ2K { uint8_t scales[16]; uint8_t qs[64]; uint16_t d; uint16_t dmin; };
struct BlockQ3K { uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; uint16_t d; };
struct BlockQ4K { uint16_t d; uint16_t dmin; uint8_t scales[12]; uint8_t qs[128]; };
struct BlockQ5K { uint16_t d; uint16_t dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; };
struct BlockQ6K { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; };
struct BlockQ8K { float d; int8_t qs[256]; int16_t bsums[16]; };
struct BlockIQ4XS { uint16_t d; uint16_t scales_h; uint8_t scales_l[4]; uint8_t qs[128]; };

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34 && sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockIQ4NL) == 18 && sizeof(BlockQ2K) == 84 && sizeof(BlockQ3K) == 110);
static_assert(sizeof(BlockQ4K) == 144 && sizeof(BlockQ5K) == 176 && sizeof(BlockQ6K) == 210);
static_assert(sizeof(BlockQ8K) == 292 && sizeof(BlockIQ4XS) == 136);

// The 16 IQ4_NL / IQ4_XS code points (kvalues_iq4nl).
alignas(16) inline constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                      1,    13,   25,  38,  53,  69,  89,  113};

// Unpacks the twelve Q4_K/Q5_K scale bytes into eight 6-bit scales (sc) and eight 6-bit mins (m),
// one per byte: sc[j] is byte j of *sc.
static inline void unpack_k4_scales(const uint8_t* scales, uint64_t* sc, uint64_t* m) {
  uint32_t s0, s1, s2;
  std::memcpy(&s0, scales + 0, 4);
  std::memcpy(&s1, scales + 4, 4);
  std::memcpy(&s2, scales + 8, 4);
  const uint32_t sc_lo = s0 & 0x3f3f3f3fu;
  const uint32_t m_lo = s1 & 0x3f3f3f3fu;
  const uint32_t sc_hi = (s2 & 0x0f0f0f0fu) | (((s0 >> 6) & 0x03030303u) << 4);
  const uint32_t m_hi = ((s2 >> 4) & 0x0f0f0f0fu) | (((s1 >> 6) & 0x03030303u) << 4);
  *sc = sc_lo | (static_cast<uint64_t>(sc_hi) << 32);
  *m = m_lo | (static_cast<uint64_t>(m_hi) << 32);
}

// Unpacks the twelve Q3_K scale bytes into sixteen 6-bit values in [0, 63] (the scale is value-32).
static inline void unpack_q3k_scales(const uint8_t* scales, uint8_t out[16]) {
  uint32_t s0, s1, s2;
  std::memcpy(&s0, scales + 0, 4);
  std::memcpy(&s1, scales + 4, 4);
  std::memcpy(&s2, scales + 8, 4);
  const uint32_t k4 = 0x0f0f0f0fu, k2 = 0x03030303u;
  const uint32_t w[4] = {(s0 & k4) | ((s2 & k2) << 4), (s1 & k4) | (((s2 >> 2) & k2) << 4),
                         ((s0 >> 4) & k4) | (((s2 >> 4) & k2) << 4),
                         ((s1 >> 4) & k4) | (((s2 >> 6) & k2) << 4)};
  std::memcpy(out, w, 16);
}

// IQ4_XS 6-bit sub-block scale ib (0..7), in [0, 63]; the multiplier is value-32.
static inline int iq4xs_scale(const BlockIQ4XS& b, int ib) {
  return ((b.scales_l[ib / 2] >> (4 * (ib % 2))) & 15) | (((b.scales_h >> (2 * ib)) & 3) << 4);
}

// Kernel tables. Each returns the kernel for weight type w or nullptr.
VecDotFn scalar_vec_dot(DType w);
VecDotFn avx2_vec_dot(DType w);                 // x86/vec_dot_avx2.cpp
VecDotTileFn avx2_vec_dot_tile(DType w);
VecDotFn avx512_vec_dot(DType w, bool vnni);    // x86/vec_dot_avx512.cpp; vnni picks dpbusd
VecDotTileFn avx512_vec_dot_tile(DType w, bool vnni);
VecDotFn avx512_kquant_dot(DType w, bool vnni);          // x86/vec_dot_kquant_avx512.cpp: Q4_K-Q6_K
VecDotTileFn avx512_kquant_dot_tile(DType w, bool vnni);

// CPU features (cached).
bool cpu_has_avx2();     // AVX2 + FMA + F16C
bool cpu_has_avx512();   // F + BW + VL + DQ
bool cpu_has_avx512_vnni();

// Activation quantizers (portable, bit-exact on every machine).
void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t n);
void quantize_row_q8_1(const float* x, BlockQ8_1* y, int64_t n);
void quantize_row_q8_k(const float* x, BlockQ8K* y, int64_t n);
// Their AVX2 twins (x86/quantize_avx2.cpp), bit-identical; quantize_activations picks them.
void quantize_row_q8_0_avx2(const float* x, BlockQ8_0* y, int64_t n);
void quantize_row_q8_k_avx2(const float* x, BlockQ8K* y, int64_t n);

}  // namespace strata::tensor::detail
