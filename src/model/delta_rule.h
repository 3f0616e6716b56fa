// The gated delta rule of one value head over one sequence's tokens, token by token and in chunks.
// Pure math on float arrays, shared by the Gated DeltaNet layer and its tests.
//
// Per token t, with the head's d_k x d_v state S (layout: see memory/recurrent_state.h, row j holds
// column j of S), log-decay g_t <= 0 and write strength beta_t:
//   S <- exp(g_t) S;   delta = beta_t (v_t - S^T k_t);   S <- S + k_t delta^T;   o_t = scale S^T q_t.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/quants.h"

namespace strata::model {

// One head's inputs and outputs. Token i of the sequence lives at batch row rows[i]: its q and k are
// d_k floats at q + row * qk_stride (k alike), its v d_v floats at v + row * v_stride, its g and beta
// at g[row * gb_stride] and beta[row * gb_stride], and its output goes to out + row * out_stride.
struct DeltaHead {
  const float* q;
  const float* k;
  int64_t qk_stride;
  const float* v;
  int64_t v_stride;
  const float* g;
  const float* beta;
  int64_t gb_stride;
  float* out;
  int64_t out_stride;
};

struct DeltaShape {
  int32_t d_k = 0;
  int32_t d_v = 0;
  float scale = 1.0f;  // applied to the outputs (1 / sqrt(d_k))
};

// Runs the recurrence one token at a time (what llama.cpp's fused CPU kernel does), with the widest
// vector build the CPU runs; the second form caps it (tests: every build gives the same bits).
void delta_rule_tokens(const DeltaHead& h, const int32_t* rows, int64_t n, const DeltaShape& shape, float* state);
void delta_rule_tokens(const DeltaHead& h, const int32_t* rows, int64_t n, const DeltaShape& shape, float* state,
                       tensor::Isa isa);

// The same result computed in chunks of `chunk` tokens (the WY/UT form of the product of the per-token
// updates). Within a chunk, with G_i the cumulative log-decay up to token i and S the incoming state:
//   delta_i = beta_i (v_i - e^{G_i} S^T k_i) - sum_{j<i} beta_i e^{G_i - G_j} (k_i . k_j) delta_j
//   o_i     = scale (e^{G_i} S^T q_i + sum_{j<=i} e^{G_i - G_j} (q_i . k_j) delta_j)
//   S      <- e^{G_L} S + sum_j e^{G_L - G_j} k_j delta_j^T
// The first line is the triangular solve (I + A) Delta = R of the chunked form, done by forward
// substitution. `work` is scratch.
void delta_rule_chunked(const DeltaHead& h, const int32_t* rows, int64_t n, const DeltaShape& shape, float* state,
                        int32_t chunk, std::vector<float>& work);

inline constexpr int32_t kDeltaChunk = 64;

}  // namespace strata::model
