// llama.cpp's default sampler chain: penalties -> top_k -> top_p -> min_p -> temperature -> dist(seed).
// temp <= 0 is greedy (argmax, lowest id on ties).
#pragma once

#include <cstdint>
#include <deque>
#include <random>
#include <span>
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
Status validate(const Params& p);

struct Candidate {
  int32_t id;
  float logit;
  float p = 0.0f;
};

class Sampler {
 public:
  Sampler(const Params& params, int32_t n_vocab);
  // Picks the next token from one row of logits (size n_vocab). Does not record it; call accept().
  int32_t sample(std::span<const float> logits);
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
  std::deque<int32_t> history_;
  std::vector<Candidate> cur_;
};

}  // namespace strata::sampling
