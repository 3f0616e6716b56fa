// qwen2: llama with NEOX RoPE (from hparams) and q/k/v biases.
#include "model/dense_transformer.h"

namespace strata::model {

const Architecture& qwen2_architecture() {
  static const DenseTransformer arch("qwen2", {.attention_biases = true, .qk_norm = false});
  return arch;
}

}  // namespace strata::model
