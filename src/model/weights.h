// Views of a model's weights, named as in the GGUF file. Only the layers this node owns are bound.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/matmul.h"

namespace strata::model {

using tensor::MatrixView;

// A 1-D F32 weight (norm scales, biases).
struct VectorView {
  const float* data = nullptr;
  int64_t n = 0;
  bool empty() const { return data == nullptr; }
};

struct LayerWeights {
  VectorView attn_norm;
  MatrixView attn_q, attn_k, attn_v, attn_output;
  VectorView attn_q_bias, attn_k_bias, attn_v_bias, attn_output_bias;
  VectorView attn_q_norm, attn_k_norm;  // QK-norm (qwen3 family)
  VectorView ffn_norm;
  MatrixView ffn_gate, ffn_up, ffn_down;
  VectorView ffn_gate_bias, ffn_up_bias, ffn_down_bias;
};

struct GlobalWeights {
  MatrixView token_embd;
  VectorView output_norm;
  MatrixView output;      // token_embd when the file has no output.weight (tied)
  VectorView output_bias;
  VectorView rope_freqs;  // llama-3 style rotary frequency factors
};

struct Weights {
  GlobalWeights global;
  std::vector<LayerWeights> layers;  // n_layer entries; only owned layers are bound
};

}  // namespace strata::model
