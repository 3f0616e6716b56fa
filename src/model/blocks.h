// Sub-layers shared by the architectures: attention and the SwiGLU feed-forward network.
#pragma once

#include <vector>

#include "model/architecture.h"
#include "tensor/matmul.h"

namespace strata::model {

// Per-batch working memory, reused across layers and calls.
struct Scratch {
  std::vector<float> norm, q, k, v, attn, proj, gate, up;
};

// The batch's rows of one projection input, converted to each weight format on first use: Q, K and V
// of one normalized input share a single quantization.
class ProjectionInput {
 public:
  ProjectionInput(const LayerContext& ctx, const float* x) : ctx_(ctx), x_(x) {}
  const tensor::QuantizedActivations& as(const MatrixView& w);

 private:
  const LayerContext& ctx_;
  const float* x_;
  std::vector<tensor::QuantizedActivations> formats_;
};

// y = in * w^T + bias: n_tokens x w.rows floats.
void project(const LayerContext& ctx, ProjectionInput& in, const MatrixView& w, const VectorView& bias, float* y);

// Self-attention sub-layer with its residual add: x += Wo * Attn(rope(q), rope(k), v) of rms(x).
// Handles optional q/k/v/o biases and QK-norm (each present when its weight is bound).
void attention_sublayer(const LayerContext& ctx, const LayerWeights& w, int il, float* x);

// Feed-forward sub-layer with its residual add: x += down(silu(gate(xn)) * up(xn)), xn = rms(x) * norm.
void swiglu_sublayer(const LayerContext& ctx, const VectorView& norm, const LayerWeights& w, float* x);

// Causal attention of the batch's queries over the KV cache of layer il, written to out
// (n_tokens x n_head*head_dim_v). q holds n_tokens x n_head*head_dim_k after RoPE.
void attend(const LayerContext& ctx, int il, const float* q, float* out);

}  // namespace strata::model
