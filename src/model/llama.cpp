// llama: RMSNorm -> GQA attention with interleaved (NORM) RoPE -> SwiGLU FFN; optional attention
// biases. Llama-3 style models are the same graph with other data (BPE vocab, rope_freqs).
#include "model/dense_transformer.h"

namespace strata::model {

const Architecture& llama_architecture() {
  static const DenseTransformer arch("llama", {.attention_biases = true, .qk_norm = false});
  return arch;
}

}  // namespace strata::model
