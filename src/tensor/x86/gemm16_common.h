// Internal: what the AVX2 and AVX-512 kernels of the 16-row repacked formats share (block reading
// ahead, token rows, Q4_K/Q5_K sub-block rows). Only intrinsics and internal-linkage helpers (see blocks.h).
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "tensor/repack_blocks.h"

namespace strata::tensor::detail {
namespace {

// Asks for the weight bytes about 4 KB past block b (the next group's, past a group's end: groups
// are contiguous). Decode streams each weight once from memory, and the kernels' loads alone leave
// the hardware prefetchers too little lead when they stall on the arithmetic.
template <typename X>
inline void prefetch_ahead(const X* b) {
  constexpr size_t kAhead = (4096 + sizeof(X) - 1) / sizeof(X) * sizeof(X);
  const char* p = reinterpret_cast<const char*>(b) + kAhead;
  #pragma GCC unroll 64
  for (size_t o = 0; o < sizeof(X); o += 64) _mm_prefetch(p + o, _MM_HINT_T0);
}

// Token t0 + t's activation row, for t < N.
template <typename A, int N>
inline void token_rows(const ActRows& a, int64_t t0, const A* (&rows)[N]) {
  #pragma GCC unroll 8
  for (int t = 0; t < N; ++t) rows[t] = reinterpret_cast<const A*>(a.data + (t0 + t) * a.stride);
}

// The nibble rows of 32-element sub-block s of a Q4_K / Q5_K block.
template <bool kFive, typename X>
inline const uint8_t (*sub_qs(const X& b, int s))[16][4] {
  if constexpr (kFive) return b.sub[s].qs;
  else return b.qs + 4 * s;
}

}  // namespace
}  // namespace strata::tensor::detail
