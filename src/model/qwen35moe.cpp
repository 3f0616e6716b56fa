// qwen35moe (Qwen3.5/3.6 MoE): the qwen35 hybrid layers with a mixture-of-experts FFN (softmax router,
// top-k renormalized, plus a sigmoid-gated shared expert).
#include "model/hybrid_transformer.h"

namespace strata::model {

const Architecture& qwen35moe_architecture() {
  static const HybridTransformer arch("qwen35moe", {.moe = true, .fused_beta_alpha = false, .delta_net = {}});
  return arch;
}

}  // namespace strata::model
