// Logits and greedy continuations against llama.cpp's golden outputs, for every golden file of the
// architectures built so far (llama, also with rope factors; qwen3, qwen3moe, qwen35, qwen35moe,
// qwen3next), in batch and token-by-token mode.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "runtime/engine.h"
#include "runtime/generate.h"
#include "testing/golden.h"
#include "testing/shared_data.h"

namespace strata {
namespace {

using testing::Golden;

struct Diff {
  double max_abs = 0, sum_abs = 0;
  int64_t count = 0;
  double mean() const { return count ? sum_abs / count : 0; }
};

// Compares one position's logits (full row) with the golden row.
void accumulate(const Golden& g, size_t pos, const float* ours, Diff& d) {
  const std::vector<float>& want = g.logits[pos];
  for (size_t k = 0; k < want.size(); ++k) {
    const int32_t id = g.topk_ids.empty() ? static_cast<int32_t>(k) : g.topk_ids[pos][k];
    const double diff = std::abs(static_cast<double>(ours[id]) - want[k]);
    d.max_abs = std::max(d.max_abs, diff);
    d.sum_abs += diff;
    ++d.count;
  }
}

std::unique_ptr<runtime::Engine> load(const Golden& g, int32_t threads, int32_t batch) {
  runtime::EngineOptions o;
  o.model_path = g.model_path;
  o.n_ctx = 256;
  o.n_threads = threads;
  o.n_batch = batch;
  auto e = runtime::Engine::load(o);
  EXPECT_TRUE(e.ok()) << e.error().message;
  return e.ok() ? std::move(*e) : nullptr;
}

TEST(GoldenTolerance, names_map_to_the_tolerance_of_their_weight_type) {
  using testing::tolerance_for;
  EXPECT_EQ(tolerance_for("qwen35moe-40L-f16", 16).max_abs, 0.03);    // F16, not F32 or BF16
  EXPECT_EQ(tolerance_for("llama-dense-bf16", 16).max_abs, 0.15);
  EXPECT_EQ(tolerance_for("qwen35moe-f32", 16).max_abs, 0.03);
  EXPECT_EQ(tolerance_for("qwen35moe-f32.long", 100).max_abs, 0.05);  // the long-prompt F32 tolerance
  EXPECT_EQ(tolerance_for("qwen35-dense-f32", 16).max_abs, 0.03);
  EXPECT_EQ(tolerance_for("stories260K.long", 100).max_abs, 0.05);
  EXPECT_EQ(tolerance_for("qwen3moe-q4_k_m", 16).max_abs, 0.5);
  EXPECT_EQ(tolerance_for("qwen35moe-q4_k_m", 16).mean_abs, 0.06);
  EXPECT_EQ(tolerance_for("TinyStories-656K-Q8_0", 13).max_abs, 0.5);
  EXPECT_EQ(tolerance_for("llama-2-tiny-random", 15).max_abs, 1e-4);
  EXPECT_EQ(tolerance_for("qwen3next-f32", 22).max_abs, 0.03);
  EXPECT_EQ(tolerance_for("qwen3next-f32", 22).mean_abs, 0.003);
  EXPECT_EQ(tolerance_for("llama-ropefreqs-f32", 16).max_abs, 0.03);
  for (const char* q : {"llama-dense-q2_k", "llama-dense-q3_k_m", "llama-dense-q4_1", "llama-dense-q5_1",
                        "llama-dense-iq4_nl"}) {
    EXPECT_EQ(tolerance_for(q, 16).max_abs, 0.5) << q;
    EXPECT_EQ(tolerance_for(q, 16).mean_abs, 0.06) << q;
  }
}

class GoldenParity : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenParity, batch_logits_match_llama_cpp_within_tolerance) {
  Golden g;
  if (!testing::load_golden(GetParam(), g)) return;
  auto engine = load(g, 2, 256);
  ASSERT_TRUE(engine);
  ASSERT_EQ(engine->n_vocab(), g.n_vocab);
  if (g.json.contains("prompt_text") && g.json["prompt_text"].is_string()) {
    EXPECT_EQ(engine->vocab().tokenize(g.json["prompt_text"].get<std::string>(), true, false), g.prompt_tokens)
        << "tokenization of the golden prompt differs";
  }
  auto logits = runtime::evaluate_prompt(*engine, 0, g.prompt_tokens, true);
  ASSERT_TRUE(logits.ok()) << logits.error().message;
  Diff d;
  const auto margins = g.json.at("top2_margin_batch").get<std::vector<double>>();
  const auto argmax = g.json.at("argmax_batch").get<std::vector<int32_t>>();
  for (size_t i = 0; i < g.prompt_tokens.size(); ++i) {
    const float* row = logits->data() + i * g.n_vocab;
    accumulate(g, i, row, d);
    if (margins[i] > 2 * g.tolerance.max_abs) {
      EXPECT_EQ(std::max_element(row, row + g.n_vocab) - row, argmax[i]) << "argmax differs at position " << i;
    }
  }
  EXPECT_LE(d.max_abs, g.tolerance.max_abs) << "max abs logit difference";
  EXPECT_LE(d.mean(), g.tolerance.mean_abs) << "mean abs logit difference";
  RecordProperty("max_abs_diff", std::to_string(d.max_abs));
  std::printf("[ golden   ] %s: max abs %.3g, mean abs %.3g (tolerance %.3g / %.3g)\n", g.name.c_str(), d.max_abs,
              d.mean(), g.tolerance.max_abs, g.tolerance.mean_abs);
}

TEST_P(GoldenParity, token_by_token_logits_match_llama_cpp_within_tolerance) {
  Golden g;
  if (!testing::load_golden(GetParam(), g)) return;
  auto engine = load(g, 1, 1);
  ASSERT_TRUE(engine);
  auto logits = runtime::evaluate_prompt(*engine, 0, g.prompt_tokens, true);
  ASSERT_TRUE(logits.ok()) << logits.error().message;
  Diff d;
  for (size_t i = 0; i < g.prompt_tokens.size(); ++i) accumulate(g, i, logits->data() + i * g.n_vocab, d);
  EXPECT_LE(d.max_abs, g.tolerance.max_abs);
  EXPECT_LE(d.mean(), g.tolerance.mean_abs);
  std::printf("[ golden   ] %s token by token: max abs %.3g, mean abs %.3g (tolerance %.3g / %.3g)\n", g.name.c_str(),
              d.max_abs, d.mean(), g.tolerance.max_abs, g.tolerance.mean_abs);
}

// Every greedy step is compared. Where the golden's top-2 gap exceeds twice the tolerance, our argmax
// must be the golden token. Where it does not, the two engines may legitimately pick different tokens
// of a near-tie, so the rule is the one the tolerance implies: if every logit is within `tol` of the
// golden's, our logit for the golden token is within 2 * tol of our maximum. Either way the golden
// token is fed next (teacher forcing), so the context stays the golden's and later steps still count.
TEST_P(GoldenParity, greedy_continuation_matches_with_near_ties_checked_by_the_tolerance) {
  Golden g;
  if (!testing::load_golden(GetParam(), g)) return;
  auto engine = load(g, 2, 256);
  ASSERT_TRUE(engine);
  auto logits = runtime::evaluate_prompt(*engine, 0, g.prompt_tokens, false);
  ASSERT_TRUE(logits.ok()) << logits.error().message;
  const auto want = g.json.at("greedy_tokens").get<std::vector<int32_t>>();
  const auto margins = g.json.at("greedy_top2_margin").get<std::vector<double>>();
  ASSERT_EQ(want.size(), margins.size());
  ASSERT_FALSE(want.empty()) << "the golden has no greedy tokens";
  std::vector<float> last = std::move(*logits);
  size_t exact = 0, near_tie = 0, different = 0;
  double widest_gap = 0;  // the largest (our max - our logit of the golden token) at a near-tie
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(static_cast<int32_t>(last.size()), g.n_vocab);
    ASSERT_TRUE(want[i] >= 0 && want[i] < g.n_vocab) << "golden token out of range at step " << i;
    const int32_t token = static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin());
    if (margins[i] >= 2 * g.tolerance.max_abs) {
      EXPECT_EQ(token, want[i]) << "greedy step " << i << " (golden margin " << margins[i] << ")";
      ++exact;
    } else {
      const double gap = static_cast<double>(last[token]) - last[want[i]];
      EXPECT_LE(gap, 2 * g.tolerance.max_abs)
          << "greedy step " << i << ": we chose " << token << ", the golden " << want[i] << " (golden margin "
          << margins[i] << "), and our logit for the golden token is " << gap << " below our maximum";
      ++near_tie;
      different += token != want[i];
      widest_gap = std::max(widest_gap, gap);
    }
    model::Batch b;
    b.add(want[i], static_cast<int32_t>(g.prompt_tokens.size() + i), 0, true);
    auto next = engine->decode(b);
    ASSERT_TRUE(next.ok()) << next.error().message;
    last = std::move(*next);
  }
  EXPECT_GT(exact + near_tie, 0u) << "no greedy token was compared";
  EXPECT_EQ(exact + near_tie, want.size());
  RecordProperty("greedy_exact", std::to_string(exact));
  RecordProperty("greedy_near_tie", std::to_string(near_tie));
  std::printf("[ golden   ] %s: %zu of %zu greedy tokens compared: %zu exactly, %zu as near-ties (%zu of them "
              "chose another token; widest gap %.3g, bound %.3g)\n",
              g.name.c_str(), exact + near_tie, want.size(), exact, near_tie, different, widest_gap,
              2 * g.tolerance.max_abs);
}

INSTANTIATE_TEST_SUITE_P(
    Golden, GoldenParity,
    ::testing::Values("stories260K", "stories260K.long", "TinyStories-656K-Q8_0", "llama-2-tiny-random",
                      "llama-dense-f32", "llama-dense-f16", "llama-dense-bf16", "llama-dense-q8_0",
                      "llama-dense-q6_k", "llama-dense-q5_k_m", "llama-dense-q4_k_m", "llama-dense-q4_0",
                      "llama-dense-iq4_xs", "qwen3-dense-f32", "qwen3moe-f32", "qwen3moe-q4_k_m",
                      "qwen35moe-f32", "qwen35moe-f32.long", "qwen35moe-q4_k_m", "qwen35moe-40L-f16",
                      "qwen35-dense-f32", "qwen3next-f32", "llama-ropefreqs-f32", "llama-dense-q2_k",
                      "llama-dense-q3_k_m", "llama-dense-q4_1", "llama-dense-q5_1", "llama-dense-iq4_nl"),
    [](const ::testing::TestParamInfo<std::string>& info) {
      std::string n = info.param;
      for (char& c : n) if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      return n;
    });

}  // namespace
}  // namespace strata
