// qwen3moe (Qwen3 MoE, e.g. 30B-A3B): qwen3's attention (QK-norm, NEOX RoPE) with a mixture-of-experts
// FFN in every layer: a softmax router over all experts, the top expert_used_count kept and their
// weights renormalized. Qwen3 dropped Qwen2-MoE's shared expert, so there is none.
#include "model/dense_transformer.h"

namespace strata::model {

const Architecture& qwen3moe_architecture() {
  static const DenseTransformer arch({
      .arch = "qwen3moe",
      .rope = RopeType::Neox,
      .qk_norm = true,
      .moe = true,
  });
  return arch;
}

}  // namespace strata::model
