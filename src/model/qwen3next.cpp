// qwen3next (Qwen3-Next, e.g. 80B-A3B): the qwen35moe layer as first released. The model is text
// only, so its RoPE is plain NEOX (partial rotary, from hparams). Its converter keeps the checkpoint's
// fused projections: beta and alpha together (ssm_ba), optionally q/k/v/z too (ssm_in), both grouped
// per key head, and value heads in grouped order (v-head h reads k-head h / (H_v / H_k)).
#include "model/hybrid_transformer.h"

namespace strata::model {

const Architecture& qwen3next_architecture() {
  static const HybridTransformer arch({
      .arch = "qwen3next",
      .rope = RopeType::Neox,
      .qk_norm = true,
      .moe = true,
      .shared_expert = true,
      .hybrid = true,
      .nextn_blocks = true,
      .fused_beta_alpha = true,
      .grouped_value_heads = true,
  });
  return arch;
}

}  // namespace strata::model
