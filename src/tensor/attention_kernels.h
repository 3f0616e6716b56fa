// Attention over an F16, Q8_0 or Q4_0 KV cache: a tiled online softmax (flash-attention style) for a
// group of query rows that share one KV head, with a scalar reference and AVX2 / AVX-512 versions
// picked at run time.
//
// Every K and V row of a tile is converted to F32 once and used by all rows of the task (the query
// heads of a GQA group times a few tokens of one sequence). Positions are walked in tiles aligned to
// absolute multiples of attention_tile_positions(dk, dv); a row's result depends only on its own query,
// its own n_kv and the cache contents, never on the other rows of the task or on the thread running
// it. Different ISAs agree to rounding only (bounds in tests/model/attention_test.cpp).
#pragma once

#include <cstdint>

#include "tensor/quants.h"

namespace strata::tensor {

// Query rows attending to one KV head. Row r reads positions [0, n_kv[r]) of the cache.
struct AttentionTask {
  int32_t n_rows = 0;
  const float* const* q = nullptr;  // n_rows pointers to dk floats, used as given (F32)
  float* const* out = nullptr;      // n_rows pointers to dv floats: softmax(q.K^T * scale) . V
  const int32_t* n_kv = nullptr;    // n_rows counts, each >= 1
  const uint8_t* k = nullptr;       // key of position p: k + p * k_stride_bytes (dk elements of k_type)
  const uint8_t* v = nullptr;       // value of position p: v + p * v_stride_bytes (dv elements of v_type)
  int64_t k_stride_bytes = 0;
  int64_t v_stride_bytes = 0;
  DType k_type = DType::F16;        // F16, Q8_0 or Q4_0; a quantized dk / dv is a multiple of 32
  DType v_type = DType::F16;
  int32_t dk = 0;
  int32_t dv = 0;
  float scale = 1.0f;
  // One span of the positions (flash-decoding): row r reads [p_begin, min(p_end, n_kv[r])) only;
  // p_begin is a multiple of attention_tile_positions. With m and l set, out[r] gets the
  // unnormalized sum of weights times values and m[r] / l[r] the row's score max and weight sum, so
  // spans can be combined (combine_attention_spans); a row with no position there gets m = -inf.
  int32_t p_begin = 0;
  int32_t p_end = 1 << 30;
  float* m = nullptr;
  float* l = nullptr;
};

// Combines n spans of one row computed with m/l set, in span order: out = sum_s acc_s e_s / sum_s
// l_s e_s with e_s = exp(m_s - max m). One span gives exactly the kernel's own normalized result.
void combine_attention_spans(int32_t n, const float* const* acc, const float* m, const float* l, int32_t dv,
                             float* out);

using AttentionFn = void (*)(const AttentionTask& task);
AttentionFn attention_fn();         // best_isa()'s kernel (STRATA_MAX_ISA caps it)
AttentionFn attention_fn(Isa isa);  // a specific ISA's kernel; null if the CPU lacks the ISA

// KV positions per tile: K and V tiles of about 32 KB of F32 (16..64 positions, a multiple of 16).
constexpr int32_t attention_tile_positions(int32_t dk, int32_t dv) {
  int32_t p = 8192 / (dk + dv > 0 ? dk + dv : 1);
  p = p < 16 ? 16 : p > 64 ? 64 : p;
  return p / 16 * 16;
}

// The AVX2 / AVX-512 exp used for the softmax weights, exposed for its error test: out[i] = e^x[i]
// for x[i] <= 0 (n a multiple of 8 resp. 16). Relative error <= 2^-22 on [-87, 0]; 0 below -87 and
// for -inf (true value < 1.7e-38). Null if the CPU lacks the ISA or for Isa::Scalar (std::exp).
using ExpFn = void (*)(const float* x, float* out, int64_t n);
ExpFn attention_exp_fn(Isa isa);

}  // namespace strata::tensor
