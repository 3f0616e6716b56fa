// qwen35 (Qwen3.5 dense): hybrid layers, Gated DeltaNet (linear attention with a recurrent state) on
// three of every four and gated full attention on the fourth, then a dense SwiGLU FFN. Qwen3.5 is
// multimodal, so its RoPE is IMRoPE (rotary pairs dealt to time, height and width in turn, from
// rope.dimension_sections; text gives all three the token's position), partial (rope.dimension_count
// < head dim). The converter reorders value heads so that v-head h reads k-head h mod H_k ("tiled").
#include "model/hybrid_transformer.h"

namespace strata::model {

const Architecture& qwen35_architecture() {
  static const HybridTransformer arch({
      .arch = "qwen35",
      .rope = RopeType::IMrope,
      .qk_norm = true,
      .hybrid = true,
      .nextn_blocks = true,
  });
  return arch;
}

}  // namespace strata::model
