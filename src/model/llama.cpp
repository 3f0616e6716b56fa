// llama (Llama 1-3, and the many models converted to its graph): RMSNorm -> grouped-query attention
// -> SwiGLU FFN. RoPE is NORM (adjacent pairs rotated): the GGUF converter permutes q and k from the
// Hugging Face half-split layout back to Meta's interleaved one. Biases are optional because some
// converted models carry them. Llama 3 is the same graph with other data (BPE vocab, rope_freqs).
#include "model/dense_transformer.h"

namespace strata::model {

const Architecture& llama_architecture() {
  static const DenseTransformer arch({
      .arch = "llama",
      .rope = RopeType::Norm,
      .attention_biases = true,  // bound only when the file has them
  });
  return arch;
}

}  // namespace strata::model
