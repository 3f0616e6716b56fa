// The hybrid layer of the Qwen3.5 / Qwen3-Next family: a mixer (Gated DeltaNet on recurrent layers,
// gated full attention with QK-norm on the others) then an FFN (dense SwiGLU or mixture of experts),
// each with pre-RMSNorm and a residual add. qwen35, qwen35moe and qwen3next are this layer with other
// traits (experts, fused projections, value-head order).
#pragma once

#include "base/checked.h"
#include "model/declare.h"
#include "model/gated_delta_net.h"
#include "model/moe.h"

namespace strata::model {

class HybridTransformer final : public Architecture {
 public:
  // traits.hybrid must be true: hparams then reads the ssm.* keys and the layer pattern.
  explicit HybridTransformer(const ArchTraits& traits)
      : Architecture(traits), delta_net_{.grouped_heads = traits.grouped_value_heads} {}

  std::vector<TensorDecl> declare(const HParams& hp) const override {
    const ArchTraits& t = traits();
    Declarations d(hp);
    d.embeddings_and_head();
    for (int il = 0; il < hp.n_layer; ++il) {
      d.hybrid_norms(il);
      if (hp.is_recurrent(il)) {
        d.gated_delta_net(il, t.fused_beta_alpha);
      } else {
        d.gated_attention(il);
      }
      if (t.moe) {
        d.moe_ffn(il, t.shared_expert);
      } else {
        d.dense_ffn(il);
      }
    }
    // MTP blocks: a full-attention layer with the trunk's FFN, plus the nextn tensors.
    for (int il = hp.n_layer; il < hp.n_layer_all; ++il) {
      d.hybrid_norms(il);
      d.gated_attention(il);
      if (t.moe) {
        d.moe_ffn(il, t.shared_expert);
      } else {
        d.dense_ffn(il);
      }
      d.nextn(il);
      d.mark_mtp(il);
    }
    return d.take();
  }

  void forward_layer(const LayerContext& ctx, const LayerWeights& w, int il, float* x) const override {
    if (ctx.hp.is_recurrent(il)) {
      gated_delta_net_sublayer(ctx, w, il, x, delta_net_);
    } else {
      gated_attention_sublayer(ctx, w, il, x);
    }
    if (traits().moe) {
      moe_sublayer(ctx, w.post_attention_norm, w, x);
    } else {
      swiglu_sublayer(ctx, w.post_attention_norm, w, x);
    }
  }

  bool layer_has_kv(const HParams& hp, int il) const override { return !hp.is_recurrent(il); }

 private:
  DeltaNetOptions delta_net_;
};

}  // namespace strata::model
