// llama.cpp's default sampler chain: penalties -> top_k -> top_p -> min_p -> temperature -> dist(seed).
// temp <= 0 is greedy (argmax, lowest id on ties).
#pragma once

#include <cstdint>
#include <deque>
#include <random>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/result.h"

namespace strata::sampling {

struct Params {
  float temp = 0.8f;
  int32_t top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  int32_t penalty_last_n = 64;   // 0: none, -1: whole history
  float repeat_penalty = 1.0f;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  uint32_t seed = 0xFFFFFFFF;    // 0xFFFFFFFF: draw a random seed
};

// Checks ranges (temp finite, top_p in [0,1], ...); the message names the parameter.
// Sampler does not validate; call this first.
Status validate(const Params& p);

inline constexpr uint32_t kRandomSeed = 0xFFFFFFFF;

struct Candidate {
  int32_t id;
  float logit;
  float p = 0.0f;
};

// How many of a row's best logits the chain can ever look at: k when only the top-k candidates
// matter (top_k on, no penalties), 1 for greedy, 0 when it needs the whole row. A stage that
// computes logits far from the sampler sends only these (see top_candidates).
int32_t candidates_needed(const Params& p, int32_t n_vocab);

// The k highest logits of a row, best first, ties to the lower id: exactly the set the sampler's
// top-k (and greedy) step keeps, so a row rebuilt from them with -inf elsewhere samples the same.
std::vector<Candidate> top_candidates(std::span<const float> logits, size_t k);

class Sampler {
 public:
  Sampler(const Params& params, int32_t n_vocab);
  // Picks the next token from one row of logits (size n_vocab). Does not record it; call accept().
  int32_t sample(std::span<const float> logits);
  // The candidates that survived the chain in the last sample(), in chain order (sorted by
  // descending logit once any truncation sorted them), with `logit` the final (tempered) logit and
  // `p` the probability the token was drawn with. Greedy leaves the chosen token alone with p = 1.
  std::span<const Candidate> candidates() const { return {cur_.data(), n_cur_}; }
  // The n most probable tokens of the raw logits (no penalties/truncation/temperature), most
  // probable first (lowest id first on ties): `logit` is the raw logit, `p` the log-softmax value.
  static std::vector<Candidate> top_logprobs(std::span<const float> logits, int n);
  // Records a token in the penalty history (prompt tokens and generated ones).
  void accept(int32_t token);
  void reset();
  uint32_t seed() const { return seed_; }
  const Params& params() const { return params_; }

 private:
  Params params_;
  int32_t n_vocab_;
  uint32_t seed_;
  std::mt19937 rng_;
  std::deque<int32_t> history_;                   // last penalty_last_n accepted (empty when unbounded)
  std::unordered_map<int32_t, int32_t> counts_;  // token -> occurrences in the penalty window
  std::vector<float> logits_;                     // working copy of the row (penalized)
  std::vector<Candidate> cur_;                    // n_vocab slots; the first n_cur_ are live
  size_t n_cur_ = 0;
};

}  // namespace strata::sampling
