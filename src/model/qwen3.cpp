// qwen3: qwen2 without biases, plus QK-norm (per-head RMSNorm of q and k before RoPE). The head dim comes
// from attention.key_length, so n_head * head_dim may differ from n_embd.
#include "model/dense_transformer.h"

namespace strata::model {

const Architecture& qwen3_architecture() {
  static const DenseTransformer arch("qwen3", {.attention_biases = false, .qk_norm = true});
  return arch;
}

}  // namespace strata::model
