// qwen35 (Qwen3.5 dense): hybrid layers, Gated DeltaNet on three of every four (value heads tiled over
// key heads), gated full attention with IMRoPE (from hparams) on the fourth, dense SwiGLU FFN.
#include "model/hybrid_transformer.h"

namespace strata::model {

const Architecture& qwen35_architecture() {
  static const HybridTransformer arch("qwen35", {.moe = false, .fused_beta_alpha = false, .delta_net = {}});
  return arch;
}

}  // namespace strata::model
