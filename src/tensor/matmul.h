// Matrix products of a weight matrix (any supported block type) with f32 activations.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/dtype.h"
#include "tensor/thread_pool.h"

namespace strata::tensor {

// A 2-D weight: `rows` rows of `cols` elements, row r at data + r * row_stride. Repacked matrices
// (tensor/repack.h) hold groups of 16 rows interleaved, group g at data + 16 g * row_stride: row()
// then points at a group only for r a multiple of 16, and slices must start and end on groups.
struct MatrixView {
  DType type = DType::F32;
  int64_t cols = 0;
  int64_t rows = 0;
  const uint8_t* data = nullptr;
  size_t row_stride = 0;
  bool repacked = false;

  bool empty() const { return data == nullptr; }
  const uint8_t* row(int64_t r) const { return data + static_cast<size_t>(r) * row_stride; }
  // Rows [first, first + count) as a matrix of their own (e.g. one expert of a 3-D tensor).
  MatrixView slice_rows(int64_t first, int64_t count) const {
    return {type, cols, count, row(first), row_stride, repacked};
  }
};

// Activations converted once to the weight's vec_dot format, reusable across several matrices of the
// same type and width (e.g. Q, K and V projections of one input).
class QuantizedActivations {
 public:
  void quantize(DType weight_type, const float* x, int64_t n_tokens, int64_t cols, ThreadPool& pool);
  DType format() const { return format_; }
  int64_t cols() const { return cols_; }
  const uint8_t* row(int64_t t) const { return buf_.data() + static_cast<size_t>(t) * row_bytes_; }
  size_t row_stride() const { return row_bytes_; }
  // Block sums the repacked kernels take (ActRows::sums): Q8_0 the sum of each block's 32 quants
  // (cols / 32 per token), Q8_K four words of 32-element sums per 256-block (cols / 64 per token).
  bool has_sums() const { return !sums_.empty(); }
  const int32_t* sums(int64_t t) const { return sums_.data() + static_cast<size_t>(t) * sums_per_row(); }
  size_t sums_per_row() const;

 private:
  void block_sums(const uint8_t* row, int32_t* out) const;

  DType format_ = DType::F32;
  int64_t cols_ = 0;
  size_t row_bytes_ = 0;
  std::vector<uint8_t> buf_;
  std::vector<int32_t> sums_;
};

// y[t * y_stride + r] = dot(w.row(r), x[t]) for t < n_tokens, r < w.rows. Several tokens go through
// the tiled kernels (vec_dot_tile_fn), which compute each output bit-identically to one vec_dot
// call, so results depend neither on the thread count nor on how tokens are batched.
void matmul(const MatrixView& w, const QuantizedActivations& x, int64_t n_tokens, float* y, int64_t y_stride,
            ThreadPool& pool);
// Rows [r0, r1) of the above on the calling thread, for tokens x_first .. x_first + n_tokens - 1:
// y[t * y_stride + r] = dot(w.row(r), x[x_first + t]).
void matmul_rows(const MatrixView& w, const QuantizedActivations& x, int64_t x_first, int64_t n_tokens, float* y,
                 int64_t y_stride, int64_t r0, int64_t r1);
// One-token products stream the weights from memory: each thread walks its own contiguous share of
// the rows (ThreadPool::parallel_for_shares) in steps of this many rows. 32-row blocks handed out
// in turn made two threads read at the speed of one (matmul_decode bench).
inline constexpr int64_t kDecodeRowsPerStep = 32;

// Several independent products in one parallel region: a decode step of a mixture-of-experts layer
// multiplies ~16 small matrices (8 experts x gate, up) then 8 more (down); one region per group
// instead of one per matrix saves a barrier each, ~1,000 per token on a 40-layer model.
struct MatmulJob {
  MatrixView w;
  const QuantizedActivations* x = nullptr;  // in vec_dot_type(w.type), w.cols wide
  int64_t x_first = 0;                      // first activation row used
  int64_t n_tokens = 0;
  float* y = nullptr;                       // y[t * y_stride + r] for t < n_tokens, r < w.rows
  int64_t y_stride = 0;
};

// Runs every job; each output is computed exactly as matmul() computes it.
void matmul_batch(std::span<const MatmulJob> jobs, ThreadPool& pool);

// Convenience: quantizes x (n_tokens rows of w.cols floats) then multiplies.
void matmul(const MatrixView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool);

// Dequantizes row r of w into out (w.cols floats): embedding lookups.
void dequantize_matrix_row(const MatrixView& w, int64_t r, float* out);

}  // namespace strata::tensor
