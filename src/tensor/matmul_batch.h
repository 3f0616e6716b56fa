// Several independent matrix products in one parallel region: a decode step of a mixture-of-experts
// layer multiplies ~16 small matrices (8 experts x gate, up) then 8 more (down); one region per
// group instead of one per matrix saves a barrier each, ~1,000 per token on a 40-layer model.
#pragma once

#include <cstdint>
#include <span>

#include "tensor/matmul.h"

namespace strata::tensor {

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

}  // namespace strata::tensor
