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

  // Hybrid models: the norm between the mixer (attention or delta net) and the FFN.
  VectorView post_attention_norm;

  // Gated DeltaNet (linear attention).
  MatrixView attn_qkv;     // {E, conv channels}: q, k (per k-head) and v (per v-head), before the conv
  MatrixView attn_gate;    // {E, H_v * d_v}: z, the output gate
  MatrixView ssm_in;       // qwen3next legacy: q, k, v, z fused and grouped per k-head
  MatrixView ssm_beta;     // {E, H_v}
  MatrixView ssm_alpha;    // {E, H_v}
  MatrixView ssm_ba;       // qwen3next: beta and alpha fused, grouped per k-head
  VectorView ssm_conv1d;   // {K, conv channels}: K taps per channel
  VectorView ssm_dt_bias;  // {H_v}
  VectorView ssm_a;        // {H_v}: -exp(A_log)
  VectorView ssm_norm;     // {d_v}, shared by the heads
  MatrixView ssm_out;      // {H_v * d_v, E}

  // Mixture of experts. Expert tensors are 3-D {cols, F, X}: expert e is rows [e*F, (e+1)*F).
  MatrixView ffn_gate_inp;                          // router {E, X}
  MatrixView ffn_gate_exps, ffn_up_exps, ffn_down_exps;
  MatrixView ffn_gate_up_exps;                      // fused {E, 2F, X}: gate rows then up rows per expert
  MatrixView ffn_gate_inp_shexp;                    // shared-expert gate {E} (one row)
  MatrixView ffn_gate_shexp, ffn_up_shexp, ffn_down_shexp;

  // Multi-token prediction block (a gated-attention layer plus these).
  MatrixView nextn_eh_proj;           // {2E, E}
  VectorView nextn_enorm, nextn_hnorm;
  MatrixView nextn_embed_tokens;      // optional
  MatrixView nextn_shared_head_head;  // optional
  VectorView nextn_shared_head_norm;  // optional
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
  std::vector<LayerWeights> layers;  // n_layer_all entries (trunk, then MTP blocks); only owned layers are bound
};

}  // namespace strata::model
