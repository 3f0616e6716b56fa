// `strata run`'s generation: one sequence through the engine, driven by the same Generation state
// machine as every server slot.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "runtime/generation.h"
#include "runtime/speculative.h"
#include "sampling/sampler.h"

namespace strata::runtime {

struct GenerationStats {
  int32_t n_prompt = 0;
  double prompt_seconds = 0;
  int32_t n_generated = 0;
  double generation_seconds = 0;
  bool stopped_at_eog = false;
  SpecStats spec;  // drafted and kept tokens, with speculation
  double prompt_tokens_per_second() const { return prompt_seconds > 0 ? n_prompt / prompt_seconds : 0; }
  double generation_tokens_per_second() const {
    return generation_seconds > 0 ? n_generated / generation_seconds : 0;
  }
};

// Called for each generated token with its text (complete UTF-8 characters, except that the last
// token's text also carries whatever the generation ends with); return false to stop. Text left over
// after an end-of-generation token or a stop comes with token -1.
using TokenCallback = std::function<bool(text::Token token, const std::string& text)>;

struct GenerationRequest {
  std::vector<text::Token> prompt;
  int32_t n_predict = 128;  // < 0: until end of generation or the context is full; 0: the prompt only
  int32_t seq = 0;
  bool ignore_eos = false;
  std::shared_ptr<const grammar::Grammar> grammar = nullptr;  // constrains the tokens (GenerationParams::grammar)
  SpecParams spec{};  // speculative decoding (the engine keeps Speculation::checkpoints_needed checkpoints)
  // With speculation: each draft checked, after the token it follows and that token's position
  // (llama-server -v logs the same).
  std::function<void(int32_t pos, text::Token after, std::span<const text::Token> draft)> on_draft = nullptr;
};

// The engine's facts a Generation needs.
inline GenerationModel generation_model(const Engine& engine) {
  return {&engine.vocab(), engine.n_vocab(), engine.n_ctx_per_seq()};
}

// Clears the sequence, evaluates the prompt, then samples up to n_predict tokens. The generation owns
// its sampler, so it takes a copy of the caller's (same seed, same history).
Result<GenerationStats> generate(Engine& engine, const GenerationRequest& request, sampling::Sampler sampler,
                                 const TokenCallback& on_token);

// Evaluates tokens on a cleared sequence in batches of the engine's batch size. Returns the logits of
// every position when all_logits, else of the last position only (only its top_k best when
// top_k > 0, see Engine::decode).
Result<std::vector<float>> evaluate_prompt(Engine& engine, int32_t seq, const std::vector<text::Token>& tokens,
                                           bool all_logits, int32_t top_k = 0);

}  // namespace strata::runtime
