// Internal: drives M x N tile kernels over any number of weight rows and tokens. A kernel family K
// provides kM, kN (the largest tile) and K::run<M, N>(n, w, w_stride, a, a_stride, y, y_stride),
// which writes y[t * y_stride + m] for m < M, t < N. Each output's arithmetic must not depend on
// M or N, so remainders simply use smaller instances and the single-row dot is run<1, 1>.
// Internal linkage only (included by ISA-specific files; see blocks.h).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "tensor/blocks.h"

namespace strata::tensor::detail {
namespace {

// Pointers to the blocks of M weight rows and N activation rows of a tile.
template <typename Block, int M, int N>
struct TileRows {
  const Block* w[M];
  const BlockQ8K* a[N];
  TileRows(const uint8_t* vw, size_t ws, const uint8_t* va, size_t as) {
    for (int m = 0; m < M; ++m) w[m] = reinterpret_cast<const Block*>(vw + m * ws);
    for (int t = 0; t < N; ++t) a[t] = reinterpret_cast<const BlockQ8K*>(va + t * as);
  }
};

template <typename K, int N>
inline void tile_rows(int64_t n, const uint8_t* w, size_t ws, int64_t rows, const uint8_t* a, size_t as, float* y,
                      int64_t ys) {
  int64_t r = 0;
  for (; r + K::kM <= rows; r += K::kM) K::template run<K::kM, N>(n, w + r * ws, ws, a, as, y + r, ys);
  for (; r < rows; ++r) K::template run<1, N>(n, w + r * ws, ws, a, as, y + r, ys);
}

template <typename K, int N = K::kN>
inline void tile_tokens(int64_t n, const uint8_t* w, size_t ws, int64_t rows, const uint8_t* a, size_t as, int nt,
                        float* y, int64_t ys) {
  if constexpr (N >= 1) {
    if (nt == N) {
      tile_rows<K, N>(n, w, ws, rows, a, as, y, ys);
    } else {
      tile_tokens<K, N - 1>(n, w, ws, rows, a, as, nt, y, ys);
    }
  }
}

// Token tiles outermost: a tile's activations stay in L1 while every row is swept past them.
template <typename K>
void tile_kernel(int64_t n, const void* w, size_t ws, int64_t rows, const void* a, size_t as, int64_t tokens, float* y,
                 int64_t ys) {
  for (int64_t t = 0; t < tokens; t += K::kN) {
    const int nt = static_cast<int>(std::min<int64_t>(K::kN, tokens - t));
    tile_tokens<K>(n, static_cast<const uint8_t*>(w), ws, rows, static_cast<const uint8_t*>(a) + t * as, as, nt,
                   y + t * ys, ys);
  }
}

template <typename K>
float tile_dot(int64_t n, const void* w, const void* a) {
  float r;
  K::template run<1, 1>(n, static_cast<const uint8_t*>(w), 0, static_cast<const uint8_t*>(a), 0, &r, 0);
  return r;
}

}  // namespace
}  // namespace strata::tensor::detail
