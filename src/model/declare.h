// Helpers for the tensor declarations architectures share (the names are gguf/names.h's).
#pragma once

#include <string>
#include <vector>

#include "gguf/names.h"
#include "model/architecture.h"

namespace strata::model {

class Declarations {
 public:
  explicit Declarations(const HParams& hp) : hp_(hp) {}

  template <typename Slot>
  void global(std::string_view name, int layer, std::vector<int64_t> shape, bool required, Slot slot) {
    list_.push_back({std::string(name), layer, std::move(shape), required, slot});
  }
  // blk.<il>.<base>.<suffix>
  template <typename Slot>
  TensorDecl& layer(int il, std::string_view base, std::string_view suffix, std::vector<int64_t> shape, bool required,
                    Slot slot) {
    list_.push_back({gguf::names::layer_tensor(il, base, suffix), il, std::move(shape), required, slot});
    return list_.back();
  }
  // blk.<il>.<base>.weight
  template <typename Slot>
  TensorDecl& layer(int il, std::string_view base, std::vector<int64_t> shape, bool required, Slot slot) {
    return layer(il, base, gguf::names::tensor::kWeight, std::move(shape), required, slot);
  }

  // token_embd, output_norm, output (optional: tied to token_embd), rope_freqs (optional).
  void embeddings_and_head();
  // attn_norm, attn_q/k/v/output (+ optional biases when `biases`), QK-norm when `qk_norm`.
  void attention(int il, bool biases, bool qk_norm);
  // ffn_norm: the pre-FFN norm of the classic layer.
  void ffn_norm(int il);
  // ffn_gate/up/down (SwiGLU).
  void dense_ffn(int il);
  // Routed experts: router ffn_gate_inp, ffn_gate_exps + ffn_up_exps (or the fused ffn_gate_up_exps)
  // and ffn_down_exps; with `shared`, the sigmoid-gated shared expert (ffn_*_shexp).
  void moe_ffn(int il, bool shared);

  // Hybrid (qwen35 family) layers: attn_norm before the mixer and post_attention_norm before the FFN.
  void hybrid_norms(int il);
  // Gated full attention: attn_q holds query and gate ({E, 2 * n_head * head_dim}), QK-norm.
  void gated_attention(int il);
  // Gated DeltaNet. qwen3next files may carry ssm_in (q, k, v, z fused) instead of attn_qkv +
  // attn_gate, and always carry ssm_ba instead of ssm_beta + ssm_alpha (`fused_beta_alpha`).
  void gated_delta_net(int il, bool fused_beta_alpha);

  // A multi-token-prediction block il (>= n_layer): the MTP-only tensors; the caller declares the
  // block's gated attention and FFN and marks the whole block with mark_mtp(il).
  void nextn(int il);
  void mark_mtp(int il);

  std::vector<TensorDecl> take() { return std::move(list_); }

 private:
  const HParams& hp_;
  std::vector<TensorDecl> list_;
};

}  // namespace strata::model
