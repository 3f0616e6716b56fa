// Perplexity as llama-perplexity computes it: chunks of n_ctx tokens, each starting with BOS and
// evaluated from an empty cache; only the second half of each chunk is scored.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "runtime/engine.h"

namespace strata::runtime {

struct PerplexityResult {
  double ppl = 0;
  double ppl_stderr = 0;
  int32_t n_chunks = 0;
  int32_t n_scored = 0;
  std::vector<double> running_ppl;  // after each chunk
};

// tokens: the whole text tokenized with BOS. n_ctx: chunk length.
Result<PerplexityResult> perplexity(Engine& engine, const std::vector<text::Token>& tokens, int32_t n_ctx,
                                    const std::function<void(int32_t chunk, double running_ppl)>& on_chunk);

}  // namespace strata::runtime
