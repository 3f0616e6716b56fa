#include "runtime/generate.h"

#include <chrono>

namespace strata::runtime {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Result<std::vector<float>> evaluate_prompt(Engine& engine, int32_t seq, const std::vector<text::Token>& tokens,
                                           bool all_logits, int32_t top_k) {
  if (tokens.empty()) return make_error("the prompt is empty");
  if (static_cast<int64_t>(tokens.size()) > engine.n_ctx_per_seq()) {
    return make_error("the prompt has {} tokens but the context holds {}", tokens.size(), engine.n_ctx_per_seq());
  }
  STRATA_TRY(engine.clear_seq(seq));
  std::vector<float> logits;
  model::Batch batch;
  const int64_t n = static_cast<int64_t>(tokens.size());
  for (int64_t start = 0; start < n; start += engine.n_batch()) {
    const int64_t end = std::min<int64_t>(n, start + engine.n_batch());
    batch.clear();
    for (int64_t i = start; i < end; ++i) {
      batch.add(tokens[i], static_cast<int32_t>(i), seq, all_logits || i == n - 1);
    }
    STRATA_ASSIGN(std::vector<float> part, engine.decode(batch, all_logits ? 0 : top_k));
    logits.insert(logits.end(), part.begin(), part.end());
  }
  return logits;
}

Result<GenerationStats> generate(Engine& engine, const GenerationRequest& request, sampling::Sampler& sampler,
                                 const TokenCallback& on_token) {
  GenerationStats stats;
  stats.n_prompt = static_cast<int32_t>(request.prompt.size());
  auto start = std::chrono::steady_clock::now();
  // Only the candidates the sampler can keep cross the network (all of them when penalties are on).
  const int32_t top_k = sampling::candidates_needed(sampler.params(), engine.n_vocab());
  STRATA_ASSIGN(std::vector<float> logits, evaluate_prompt(engine, request.seq, request.prompt, false, top_k));
  stats.prompt_seconds = seconds_since(start);
  for (text::Token t : request.prompt) sampler.accept(t);

  start = std::chrono::steady_clock::now();
  text::Utf8Stream stream;
  int32_t pos = stats.n_prompt;
  model::Batch batch;
  while (request.n_predict < 0 || stats.n_generated < request.n_predict) {
    const text::Token token = sampler.sample(logits);
    sampler.accept(token);
    ++stats.n_generated;
    if (!request.ignore_eos && engine.vocab().is_eog(token)) {
      stats.stopped_at_eog = true;
      break;
    }
    if (!on_token(token, stream.push(engine.vocab().token_to_piece(token, false)))) break;
    const bool more = request.n_predict < 0 || stats.n_generated < request.n_predict;
    if (!more || pos >= engine.n_ctx_per_seq()) break;
    batch.clear();
    batch.add(token, pos++, request.seq, true);
    STRATA_ASSIGN(logits, engine.decode(batch, top_k));
  }
  const std::string rest = stream.flush();
  if (!rest.empty()) on_token(-1, rest);
  stats.generation_seconds = seconds_since(start);
  return stats;
}

}  // namespace strata::runtime
