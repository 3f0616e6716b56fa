// qwen3next (Qwen3-Next): the qwen35moe layer with plain NEOX RoPE (partial rotary, from hparams),
// beta and alpha projected together (ssm_ba, optionally q/k/v/z too: ssm_in), both grouped per key
// head, and value heads in grouped order (v-head h reads k-head h / (H_v / H_k)).
#include "model/hybrid_transformer.h"

namespace strata::model {

const Architecture& qwen3next_architecture() {
  static const HybridTransformer arch(
      "qwen3next", {.moe = true, .fused_beta_alpha = true, .delta_net = {.grouped_heads = true}});
  return arch;
}

}  // namespace strata::model
