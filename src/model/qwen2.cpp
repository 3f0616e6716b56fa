// qwen2 (Qwen2, Qwen2.5): the llama layer as Qwen trained it. RoPE is NEOX (the two halves of a head
// rotated together): the converter keeps q and k in the Hugging Face half-split layout instead of
// permuting them as it does for llama. The q, k and v projections carry biases (Qwen2's attention
// has them; attn_output has none, so its optional bias stays unbound).
#include "model/dense_transformer.h"

namespace strata::model {

const Architecture& qwen2_architecture() {
  static const DenseTransformer arch({
      .arch = "qwen2",
      .rope = RopeType::Neox,
      .attention_biases = true,
  });
  return arch;
}

}  // namespace strata::model
