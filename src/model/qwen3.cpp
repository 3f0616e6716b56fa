// qwen3 (Qwen3 dense): qwen2 with QK-norm in place of the q/k/v biases (Qwen3 made that swap for
// training stability: a per-head RMSNorm of q and k before RoPE bounds the attention logits). NEOX
// RoPE as qwen2. The head dim comes from attention.key_length, so n_head * head_dim may differ from
// n_embd.
#include "model/dense_transformer.h"

namespace strata::model {

const Architecture& qwen3_architecture() {
  static const DenseTransformer arch({
      .arch = "qwen3",
      .rope = RopeType::Neox,
      .qk_norm = true,
  });
  return arch;
}

}  // namespace strata::model
