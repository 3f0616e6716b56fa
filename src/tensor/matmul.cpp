#include "tensor/matmul.h"

#include <algorithm>

#include "tensor/quants.h"

namespace strata::tensor {

void QuantizedActivations::quantize(DType weight_type, const float* x, int64_t n_tokens, int64_t cols,
                                    ThreadPool& pool) {
  format_ = vec_dot_type(weight_type);
  cols_ = cols;
  row_bytes_ = row_bytes(format_, cols);
  buf_.resize(row_bytes_ * static_cast<size_t>(n_tokens));
  auto convert = [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) quantize_activations(format_, x + t * cols, buf_.data() + t * row_bytes_, cols);
  };
  if (n_tokens >= 4) {
    pool.parallel_for(n_tokens, 1, convert);
  } else {
    convert(0, n_tokens);
  }
}

void matmul_rows(const MatrixView& w, const QuantizedActivations& x, int64_t x_first, int64_t n_tokens, float* y,
                 int64_t y_stride, int64_t r0, int64_t r1) {
  const int64_t n = w.cols;
  if (n_tokens > 1) {
    // Each weight block is unpacked once per tile of tokens; the kernel walks token tiles in the
    // outer loop so the tile's activations stay in L1 while these rows (L1/L2) stream past.
    if (const VecDotTileFn tile = vec_dot_tile_fn(w.type)) {
      tile(n, w.row(r0), w.row_stride, r1 - r0, x.row(x_first), x.row_stride(), n_tokens, y + r0, y_stride);
      return;
    }
  }
  const VecDotFn dot = vec_dot_fn(w.type);
  for (int64_t t = 0; t < n_tokens; ++t) {
    const uint8_t* a = x.row(x_first + t);
    float* yt = y + t * y_stride;
    for (int64_t r = r0; r < r1; ++r) yt[r] = dot(n, w.row(r), a);
  }
}

void matmul(const MatrixView& w, const QuantizedActivations& x, int64_t n_tokens, float* y, int64_t y_stride,
            ThreadPool& pool) {
  // Rows are handed out in blocks; within a block every token reuses the rows while they are in cache.
  auto rows = [&](int64_t r0, int64_t r1) { matmul_rows(w, x, 0, n_tokens, y, y_stride, r0, r1); };
  if (n_tokens == 1) {
    pool.parallel_for_shares(w.rows, kDecodeRowsPerStep, rows);  // streams weights: long runs
  } else {
    pool.parallel_for(w.rows, 16, rows);  // compute-bound: blocks every token reuses from cache
  }
}

void matmul(const MatrixView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  QuantizedActivations q;
  q.quantize(w.type, x, n_tokens, w.cols, pool);
  matmul(w, q, n_tokens, y, w.rows, pool);
}

void dequantize_matrix_row(const MatrixView& w, int64_t r, float* out) {
  dequantize_row(w.type, w.row(r), out, w.cols);
}

}  // namespace strata::tensor
