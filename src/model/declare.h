// Helpers for the tensor declarations architectures share (tensor names live here, in one table).
#pragma once

#include <string>
#include <vector>

#include "model/architecture.h"

namespace strata::model {

class Declarations {
 public:
  explicit Declarations(const HParams& hp) : hp_(hp) {}

  template <typename Slot>
  void global(const std::string& name, int layer, std::vector<int64_t> shape, bool required, Slot slot) {
    list_.push_back({name, layer, std::move(shape), required, slot});
  }
  template <typename Slot>
  void layer(int il, const std::string& suffix, std::vector<int64_t> shape, bool required, Slot slot) {
    list_.push_back({"blk." + std::to_string(il) + "." + suffix, il, std::move(shape), required, slot});
  }

  // token_embd, output_norm, output (optional: tied to token_embd), rope_freqs (optional).
  void embeddings_and_head();
  // attn_norm, attn_q/k/v/output (+ optional biases when `biases`), QK-norm when `qk_norm`.
  void attention(int il, bool biases, bool qk_norm);
  // ffn_norm, ffn_gate/up/down.
  void dense_ffn(int il);

  std::vector<TensorDecl> take() { return std::move(list_); }

 private:
  const HParams& hp_;
  std::vector<TensorDecl> list_;
};

}  // namespace strata::model
