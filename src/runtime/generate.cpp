#include "runtime/generate.h"

#include <chrono>

#include "runtime/prompt_chunks.h"

namespace strata::runtime {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

Status check_prompt(const Engine& engine, const std::vector<text::Token>& tokens) {
  if (tokens.empty()) return make_error("the prompt is empty");
  if (static_cast<int64_t>(tokens.size()) > engine.n_ctx_per_seq()) {
    return make_error("the prompt has {} tokens but the context holds {}", tokens.size(), engine.n_ctx_per_seq());
  }
  return {};
}

// Feeds the prompt in batches of the engine's size; returns the logits row of its last token.
Result<std::vector<float>> feed_prompt(Engine& engine, Generation& gen, int32_t top_k) {
  model::Batch batch;
  while (true) {
    batch.clear();
    const Feed fed = gen.feed(batch, engine.n_batch());
    if (batch.size() == 0) return make_error("the prompt asked for no logits");
    STRATA_ASSIGN(std::vector<float> logits, engine.decode(batch, top_k));
    if (fed.wants_logits) return logits;
  }
}

}  // namespace

Result<std::vector<float>> evaluate_prompt(Engine& engine, int32_t seq, const std::vector<text::Token>& tokens,
                                           bool all_logits, int32_t top_k) {
  STRATA_TRY(check_prompt(engine, tokens));
  STRATA_TRY(engine.clear_seq(seq));
  std::vector<float> logits;
  const auto decode_chunk = [&](const model::Batch& batch) -> Status {
    STRATA_ASSIGN(std::vector<float> part, engine.decode(batch, all_logits ? 0 : top_k));
    logits.insert(logits.end(), part.begin(), part.end());
    return {};
  };
  STRATA_TRY(feed_prompt_chunks(tokens, engine.n_batch(), {seq, 0, all_logits}, decode_chunk));
  return logits;
}

Result<GenerationStats> generate(Engine& engine, const GenerationRequest& request, sampling::Sampler sampler,
                                 const TokenCallback& on_token) {
  STRATA_TRY(check_prompt(engine, request.prompt));
  GenerationParams params;
  params.prompt = request.prompt;
  params.max_tokens = request.n_predict;
  params.ignore_eos = request.ignore_eos;
  params.grammar = request.grammar;
  params.sampling = sampler.params();
  Generation gen(std::move(params), request.seq, generation_model(engine), std::move(sampler));
  // Only the candidates the sampler can keep cross the network (all of them when penalties are on).
  const int32_t top_k = gen.candidates_needed();

  GenerationStats stats;
  stats.n_prompt = static_cast<int32_t>(request.prompt.size());
  auto start = std::chrono::steady_clock::now();
  STRATA_TRY(engine.clear_seq(request.seq));
  STRATA_ASSIGN(std::vector<float> logits, feed_prompt(engine, gen, top_k));
  stats.prompt_seconds = seconds_since(start);
  if (request.n_predict == 0) return stats;

  start = std::chrono::steady_clock::now();
  std::string rest;  // text after the last token reported
  model::Batch batch;
  Speculation spec(request.spec);
  std::vector<GenerationStep> steps = {gen.next_token(logits)};
  while (true) {
    bool stop = false;
    for (GenerationStep& step : steps) {
      if (step.end_of_generation) {
        stats.stopped_at_eog = true;
        rest = std::move(step.text);
        stop = true;
      } else if (!on_token(step.token, step.text)) {
        rest = gen.finish_early();
        stop = true;
      }
      if (stop || step.done) break;
    }
    stats.n_generated = gen.n_generated();
    if (stop || gen.done()) break;
    batch.clear();
    STRATA_ASSIGN(const std::vector<text::Token> draft, spec.draft(engine, gen));
    if (draft.empty()) {
      gen.feed(batch, 1);
      STRATA_ASSIGN(logits, engine.decode(batch, top_k));
      steps = {gen.next_token(logits)};
      continue;
    }
    if (request.on_draft) request.on_draft(gen.n_past(), gen.waiting(), draft);
    STRATA_TRY(spec.feed(engine, gen, draft, batch));
    STRATA_ASSIGN(logits, engine.decode(batch, top_k));
    STRATA_ASSIGN(Generation::DraftResult checked, spec.accept(engine, gen, logits));
    steps = std::move(checked.steps);
  }
  if (!rest.empty()) on_token(-1, rest);
  stats.generation_seconds = seconds_since(start);
  stats.spec = spec.stats();
  return stats;
}

}  // namespace strata::runtime
