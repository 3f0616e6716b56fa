// Sub-layers shared by the architectures: attention (plain and gated) and the SwiGLU feed-forward
// network. The Gated DeltaNet is in gated_delta_net.h, the mixture of experts in moe.h.
#pragma once

#include <vector>

#include "model/architecture.h"
#include "tensor/matmul.h"

namespace strata::model {

// Per-batch working memory, reused across layers and calls.
struct Scratch {
  std::vector<float> norm, q, k, v, attn, proj, gate, up;
  std::vector<float> qg;                                    // gated attention: query + gate projection
  std::vector<float> mix, z, beta, decay, conv, delta, ba;  // Gated DeltaNet
  std::vector<float> router, expert_in, expert_gate, expert_up, expert_out, shared;  // MoE
};

// Rows of one projection input (the batch's, unless `rows` says otherwise), converted to each weight
// format on first use: Q, K and V of one normalized input share a single quantization.
class ProjectionInput {
 public:
  ProjectionInput(const LayerContext& ctx, const float* x, int64_t rows = -1)
      : ctx_(ctx), x_(x), rows_(rows < 0 ? ctx.batch.size() : rows) {}
  const tensor::QuantizedActivations& as(const MatrixView& w);
  int64_t rows() const { return rows_; }

 private:
  const LayerContext& ctx_;
  const float* x_;
  int64_t rows_;
  std::vector<tensor::QuantizedActivations> formats_;
};

// y = in * w^T + bias: in.rows() x w.rows floats.
void project(const LayerContext& ctx, ProjectionInput& in, const MatrixView& w, const VectorView& bias, float* y);

// Self-attention sub-layer with its residual add: x += Wo * Attn(rope(q), rope(k), v) of rms(x).
// Handles optional q/k/v/o biases and QK-norm (each present when its weight is bound).
void attention_sublayer(const LayerContext& ctx, const LayerWeights& w, int il, float* x);

// Gated attention sub-layer (qwen35, qwen3next) with its residual add: attn_q yields per head
// [query | gate]; x += Wo * (Attn(rope(qnorm(q)), rope(knorm(k)), v) * sigmoid(gate)) of rms(x).
void gated_attention_sublayer(const LayerContext& ctx, const LayerWeights& w, int il, float* x);

// Feed-forward sub-layer with its residual add: x += down(silu(gate(xn)) * up(xn)), xn = rms(x) * norm.
void swiglu_sublayer(const LayerContext& ctx, const VectorView& norm, const LayerWeights& w, float* x);

// The matrices (and optional biases) of one SwiGLU FFN.
struct SwigluWeights {
  const MatrixView& gate;
  const MatrixView& up;
  const MatrixView& down;
  VectorView gate_bias = {}, up_bias = {}, down_bias = {};
};

// out = down(silu(gate * in) * (up * in)) for in.rows() rows (out: in.rows() x down.rows floats): the
// dense FFN and the shared expert. gate_buf and up_buf are scratch.
void swiglu(const LayerContext& ctx, ProjectionInput& in, const SwigluWeights& w, std::vector<float>& gate_buf,
            std::vector<float>& up_buf, float* out);

// x += a sub-layer's output (n floats); under a tensor split, the group's sum of the members'
// partial outputs (LayerContext::collective).
void add_sublayer_output(const LayerContext& ctx, float* x, float* out, int64_t n);
// A tensor-split member with no slice of this sub-layer (width 0: no heads or rows) adds zeros to the
// group's sum and returns true; else false.
bool no_slice_here(const LayerContext& ctx, int64_t width, float* x);

// Grows v to at least n elements (scratch buffers only grow).
inline void ensure_size(std::vector<float>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(n);
}

}  // namespace strata::model
