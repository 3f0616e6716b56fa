// qwen35moe (Qwen3.5 / 3.6 MoE): the qwen35 hybrid layers (Gated DeltaNet and gated attention, IMRoPE,
// tiled value heads) with a mixture-of-experts FFN: a softmax router, the top-k renormalized, plus a
// shared expert every token passes through, scaled by its own sigmoid gate.
#include "model/hybrid_transformer.h"

namespace strata::model {

const Architecture& qwen35moe_architecture() {
  static const HybridTransformer arch({
      .arch = "qwen35moe",
      .rope = RopeType::IMrope,
      .qk_norm = true,
      .moe = true,
      .shared_expert = true,
      .hybrid = true,
      .nextn_blocks = true,
  });
  return arch;
}

}  // namespace strata::model
