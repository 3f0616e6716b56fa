// qwen3moe: qwen3's attention (QK-norm, NEOX RoPE) with a mixture-of-experts FFN: softmax router over
// all experts, top expert_used_count, weights renormalized; no shared expert.
#include "model/dense_transformer.h"

namespace strata::model {

const Architecture& qwen3moe_architecture() {
  static const DenseTransformer arch("qwen3moe", {.attention_biases = false, .qk_norm = true, .moe = true});
  return arch;
}

}  // namespace strata::model
