// Internal: byte layouts of the 16-row repacked formats (see repack.h). One struct holds one block
// column (32 or 256 elements) of 16 rows; a group of rows is these structs in column order. Quants
// are stored per k-step: qs[k][r][j] is element 4k+j of row r (or two k-steps as nibbles), so one
// 64-byte load feeds one vpdpbusd for all 16 rows. Weights are unsigned (the signed value plus a
// bias the kernels take back out through the activations' block sums).
#pragma once

#include <cstdint>

#include "tensor/blocks.h"

namespace strata::tensor::detail {

// Q8_0: byte (k, r, j) = q + 128 of element 4k+j of row r.
struct BlockQ8_0x16 { static constexpr int kElems = 32; uint16_t d[16]; uint8_t qs[8][16][4]; };
// Q4_0: byte (p, r, j): low nibble element 8p+j, high nibble element 8p+4+j (values q, q-8 is meant).
struct BlockQ4_0x16 { static constexpr int kElems = 32; uint16_t d[16]; uint8_t qs[4][16][4]; };
// Q4_K: nibbles as Q4_0 over 256 elements; sc/m (p, r, 0|1) = scale/min of sub-block 2p / 2p+1.
struct BlockQ4Kx16 {
  static constexpr int kElems = 256;
  uint16_t d[16];
  uint16_t dmin[16];
  uint8_t sc[4][16][2];
  uint8_t m[4][16][2];
  uint8_t qs[32][16][4];
};
// Q5_K: Q4_K's header, then per 32-element sub-block s its nibbles (elements 32s + 8p + j as in
// Q4_0) and its high bits: bit b of qh byte (r, j) is bit 4 of element 32s + 4b + j. Sub-blocks are
// contiguous so that decode reads the block front to back (two streams a block apart defeated the
// prefetcher).
struct BlockQ5Kx16 {
  static constexpr int kElems = 256;
  uint16_t d[16];
  uint16_t dmin[16];
  uint8_t sc[4][16][2];
  uint8_t m[4][16][2];
  struct Sub { uint8_t qs[4][16][4]; uint8_t qh[16][4]; } sub[8];
};
// Q6_K: per 16-element sub-block s its low nibbles (elements 16s + 8p + j as in Q4_0) and bits
// 4-5 in qh: bits 2b..2b+1 of byte (r, j) belong to element 16s + 4b + j. Before them d and sc
// (p, r, 0|1) = scale of sub-block 2p / 2p+1 (first, as they are read first). Values are q, q-32 is meant.
struct BlockQ6Kx16 {
  static constexpr int kElems = 256;
  uint16_t d[16];
  int8_t sc[8][16][2];
  struct Sub { uint8_t ql[2][16][4]; uint8_t qh[16][4]; } sub[16];
};

static_assert(sizeof(BlockQ8_0x16) == 16 * sizeof(BlockQ8_0) && sizeof(BlockQ4_0x16) == 16 * sizeof(BlockQ4_0));
static_assert(sizeof(BlockQ4Kx16) == 2368 && sizeof(BlockQ5Kx16) == 2880 && sizeof(BlockQ6Kx16) == 16 * sizeof(BlockQ6K));

// Activations as the repacked kernels read them: rows of vec_dot_type blocks, plus their block sums
// (QuantizedActivations::sums: Q8_0 n/32 per token, Q8_K n/64).
struct ActRows {
  const uint8_t* data;
  size_t stride;
  const int32_t* sums;
  size_t sums_stride;
};

// y[t * ys + 16 g + r] = row 16g+r of w times token t, for g < groups, t < tokens; w points at the
// matrix's group 0 (group_bytes apart).
using Gemm16Fn = void (*)(int64_t n, const uint8_t* w, size_t group_bytes, int64_t groups, const ActRows& a,
                          int64_t tokens, float* y, int64_t ys);
Gemm16Fn avx512_gemm16(DType w);  // x86/gemm16_avx512.cpp (needs VNNI); null if w has none
Gemm16Fn avx2_gemm16(DType w);    // x86/gemm16_avx2.cpp
// The kernel this machine runs for w (the best ISA within STRATA_MAX_ISA), null if none: every
// repacked matrix goes through it, so one token and prompts take the same one.
Gemm16Fn gemm16_fn(DType w);
// Whether one-token products ask for the weights ahead in software (tensor::set_decode_prefetch).
bool decode_prefetch();

}  // namespace strata::tensor::detail
