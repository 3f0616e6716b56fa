// The classic decoder layer: attention sub-layer then a feed-forward sub-layer (SwiGLU, or a mixture
// of SwiGLU experts), each with pre-RMSNorm and a residual add. llama, qwen2, qwen3 and qwen3moe are
// this layer with other traits (biases, QK-norm, experts) and data.
#pragma once

#include "model/blocks.h"
#include "model/declare.h"
#include "model/moe.h"

namespace strata::model {

class DenseTransformer final : public Architecture {
 public:
  // traits.hybrid must be false: every layer is attention.
  explicit DenseTransformer(const ArchTraits& traits) : Architecture(traits) {}

  std::vector<TensorDecl> declare(const HParams& hp) const override {
    const ArchTraits& t = traits();
    Declarations d(hp);
    d.embeddings_and_head();
    for (int il = 0; il < hp.n_layer; ++il) {
      d.attention(il, t.attention_biases, t.qk_norm);
      d.ffn_norm(il);
      if (t.moe) {
        d.moe_ffn(il, t.shared_expert);
      } else {
        d.dense_ffn(il);
      }
    }
    return d.take();
  }

  // Biases and QK-norm apply when their weights are bound, so only the FFN kind is chosen here.
  void forward_layer(const LayerContext& ctx, const LayerWeights& w, int il, float* x) const override {
    attention_sublayer(ctx, w, il, x);
    if (traits().moe) {
      moe_sublayer(ctx, w.ffn_norm, w, x);
    } else {
      swiglu_sublayer(ctx, w.ffn_norm, w, x);
    }
  }
};

}  // namespace strata::model
