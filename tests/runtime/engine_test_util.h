// Engines over a model file for the runtime tests, and comparisons of their logits.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "runtime/generate.h"
#include "testing/synth_models.h"

namespace strata::testing {

inline std::unique_ptr<runtime::Engine> open_engine(const std::string& path, int32_t threads, int32_t n_batch,
                                                    int32_t n_seq = 1, int32_t n_ctx_per_seq = 256) {
  runtime::EngineOptions o;
  o.model_path = path;
  o.n_ctx = n_ctx_per_seq * n_seq;
  o.n_threads = threads;
  o.n_seq = n_seq;
  o.n_batch = n_batch;
  auto e = runtime::Engine::load(o);
  EXPECT_TRUE(e.ok()) << e.error().message;
  return e.ok() ? std::move(*e) : nullptr;
}

// Logits of every position of `tokens` on sequence 0.
inline std::vector<float> prompt_logits(runtime::Engine& e, const std::vector<int32_t>& tokens) {
  auto logits = runtime::evaluate_prompt(e, 0, tokens, true);
  EXPECT_TRUE(logits.ok()) << logits.error().message;
  return logits.ok() ? std::move(*logits) : std::vector<float>{};
}

inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::abs(double{a[i]} - b[i]));
  return m;
}

inline bool all_finite(const std::vector<float>& v) {
  for (float x : v) {
    if (!std::isfinite(x)) return false;
  }
  return !v.empty();
}

}  // namespace strata::testing
