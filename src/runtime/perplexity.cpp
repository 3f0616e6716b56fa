#include "runtime/perplexity.h"

#include <cmath>

#include "runtime/generate.h"

namespace strata::runtime {

Result<PerplexityResult> perplexity(Engine& engine, const std::vector<text::Token>& tokens, int32_t n_ctx,
                                    const std::function<void(int32_t, double)>& on_chunk) {
  if (n_ctx < 4) return make_error("perplexity: context {} is too small", n_ctx);
  if (n_ctx > engine.n_ctx_per_seq()) {
    return make_error("perplexity: chunk of {} tokens exceeds the engine context {}", n_ctx, engine.n_ctx_per_seq());
  }
  PerplexityResult r;
  r.n_chunks = static_cast<int32_t>(tokens.size() / n_ctx);
  if (r.n_chunks == 0) {
    return make_error("perplexity: the text has {} tokens, fewer than one chunk of {}", tokens.size(), n_ctx);
  }
  const int32_t n_vocab = engine.n_vocab();
  const int32_t first = n_ctx / 2;
  double nll = 0, nll2 = 0;
  for (int32_t c = 0; c < r.n_chunks; ++c) {
    std::vector<text::Token> chunk(tokens.begin() + int64_t{c} * n_ctx, tokens.begin() + int64_t{c + 1} * n_ctx);
    if (engine.vocab().add_bos() && engine.vocab().bos() >= 0) chunk[0] = engine.vocab().bos();
    STRATA_ASSIGN(std::vector<float> logits, evaluate_prompt(engine, 0, chunk, true));
    for (int32_t j = first; j < n_ctx - 1; ++j) {
      const float* row = logits.data() + int64_t{j} * n_vocab;
      float max = row[0];
      for (int32_t v = 1; v < n_vocab; ++v) max = std::max(max, row[v]);
      double sum = 0;
      for (int32_t v = 0; v < n_vocab; ++v) sum += std::exp(static_cast<double>(row[v] - max));
      const double log_prob = static_cast<double>(row[chunk[j + 1]] - max) - std::log(sum);
      nll -= log_prob;
      nll2 += log_prob * log_prob;
      ++r.n_scored;
    }
    r.running_ppl.push_back(std::exp(nll / r.n_scored));
    if (on_chunk) on_chunk(c, r.running_ppl.back());
  }
  const double mean = nll / r.n_scored;
  const double var = nll2 / r.n_scored - mean * mean;
  r.ppl = std::exp(mean);
  r.ppl_stderr = r.n_scored > 1 ? r.ppl * std::sqrt(std::max(0.0, var) / (r.n_scored - 1)) : 0;
  return r;
}

}  // namespace strata::runtime
