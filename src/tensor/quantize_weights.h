// Weight quantizers: f32 rows to llama.cpp block formats, following ggml's reference (no imatrix)
// quantizers so that llama.cpp reads the result as it would its own.
#pragma once

#include <cstdint>

#include "base/dtype.h"

namespace strata::tensor {

// True for the types quantize_row can produce: Q4_0, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, plus F32,
// F16 and BF16 (plain conversions).
bool can_quantize(DType type);

// Quantizes n elements (a multiple of the type's block size) of x into dst (row_bytes(type, n)
// bytes). type must satisfy can_quantize.
void quantize_row(DType type, const float* x, void* dst, int64_t n);

}  // namespace strata::tensor
