// The classic decoder layer: attention sub-layer then a feed-forward sub-layer (SwiGLU, or a mixture
// of SwiGLU experts), each with pre-RMSNorm and a residual add. llama, qwen2, qwen3 and qwen3moe are
// this layer with different options and data.
#pragma once

#include "model/blocks.h"
#include "model/declare.h"
#include "model/moe.h"

namespace strata::model {

struct DenseOptions {
  bool attention_biases = false;  // optional q/k/v/o biases (llama, qwen2)
  bool qk_norm = false;           // per-head RMSNorm of q and k before RoPE (qwen3)
  bool moe = false;               // routed experts instead of the dense FFN (qwen3moe)
};

class DenseTransformer final : public Architecture {
 public:
  DenseTransformer(std::string_view name, DenseOptions options) : name_(name), options_(options) {}

  std::string_view name() const override { return name_; }

  std::vector<TensorDecl> declare(const HParams& hp) const override {
    Declarations d(hp);
    d.embeddings_and_head();
    for (int il = 0; il < hp.n_layer; ++il) {
      d.attention(il, options_.attention_biases, options_.qk_norm);
      d.ffn_norm(il);
      if (options_.moe) {
        d.moe_ffn(il, /*shared=*/false);
      } else {
        d.dense_ffn(il);
      }
    }
    return d.take();
  }

  void forward_layer(const LayerContext& ctx, const LayerWeights& w, int il, float* x) const override {
    attention_sublayer(ctx, w, il, x);
    if (options_.moe) {
      moe_sublayer(ctx, w.ffn_norm, w, x);
    } else {
      swiglu_sublayer(ctx, w.ffn_norm, w, x);
    }
  }

 private:
  std::string_view name_;
  DenseOptions options_;
};

}  // namespace strata::model
