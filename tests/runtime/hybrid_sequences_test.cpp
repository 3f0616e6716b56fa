// Sequences on the hybrid qwen35moe model: chunked vs token-by-token Gated DeltaNet, several sequences
// interleaved in one batch, and what clear / remove / copy do to the recurrent state.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine_test_util.h"
#include "testing/shared_data.h"

namespace strata::model {
namespace {

using namespace strata::testing;

constexpr int32_t kVocab = 512;

std::vector<int32_t> tokens(int32_t n, int32_t seed) {
  std::vector<int32_t> t = {1};
  for (int32_t i = 1; i < n; ++i) t.push_back(3 + (seed * 131 + i * 71) % (kVocab - 3));
  return t;
}

// Decodes `toks` on `seq` from position `pos0` in one batch; logits of every row.
std::vector<float> decode(runtime::Engine& e, int32_t seq, int32_t pos0, const std::vector<int32_t>& toks) {
  Batch b;
  for (size_t i = 0; i < toks.size(); ++i) b.add(toks[i], pos0 + static_cast<int32_t>(i), seq, true);
  auto r = e.decode(b);
  EXPECT_TRUE(r.ok()) << r.error().message;
  return r.ok() ? std::move(*r) : std::vector<float>{};
}

std::vector<int32_t> slice(const std::vector<int32_t>& v, size_t a, size_t b) { return {v.begin() + a, v.begin() + b}; }

std::vector<float> row(const std::vector<float>& logits, size_t r) {
  return {logits.begin() + r * kVocab, logits.begin() + (r + 1) * kVocab};
}

std::unique_ptr<runtime::Engine> qwen35moe(int32_t threads, int32_t n_batch, int32_t n_seq = 1) {
  const std::string path = ::strata::testing::shared_file("models/synth/qwen35moe-f32.gguf");
  if (path.empty()) return nullptr;
  return open_engine(path, threads, n_batch, n_seq);
}

TEST(HybridSequences, chunked_and_token_by_token_delta_net_agree_on_a_100_token_prompt) {
  STRATA_SHARED_FILE(golden, "golden/qwen35moe-f32.long.json");
  const auto json = nlohmann::json::parse(::strata::testing::read_text_file(golden));
  const auto prompt = json.at("prompt_tokens").get<std::vector<int32_t>>();
  ASSERT_EQ(prompt.size(), 100u);
  auto chunked = qwen35moe(2, 256);     // one batch: two chunks (64 + 36) per delta-net layer
  auto one_by_one = qwen35moe(2, 1);    // the recurrence, token by token
  ASSERT_TRUE(chunked && one_by_one);
  const std::vector<float> a = prompt_logits(*chunked, prompt);
  const std::vector<float> b = prompt_logits(*one_by_one, prompt);
  const double diff = max_abs_diff(a, b);
  EXPECT_LE(diff, 2e-3);  // logit std ~4; the F32 golden tolerance for 100 tokens is 0.05
  std::printf("[ chunked  ] 100 tokens, batch 256 vs 1: max abs logit difference %.3g\n", diff);
}

TEST(HybridSequences, interleaved_sequences_with_one_cleared_mid_way_match_running_each_alone) {
  const std::vector<int32_t> A = tokens(16, 1), B = tokens(8, 2), C = tokens(8, 3);
  // Alone, with the same batch boundaries per sequence.
  auto alone = qwen35moe(2, 64);
  ASSERT_TRUE(alone);
  std::vector<float> ref_a = decode(*alone, 0, 0, slice(A, 0, 8));
  const std::vector<float> ref_a2 = decode(*alone, 0, 8, slice(A, 8, 16));
  ref_a.insert(ref_a.end(), ref_a2.begin(), ref_a2.end());
  ASSERT_TRUE(alone->clear_seq(0).ok());
  const std::vector<float> ref_b = decode(*alone, 0, 0, B);
  ASSERT_TRUE(alone->clear_seq(0).ok());
  const std::vector<float> ref_c = decode(*alone, 0, 0, C);

  auto both = qwen35moe(2, 64, 2);
  ASSERT_TRUE(both);
  Batch first;  // A[0..8) on sequence 0 and B on sequence 1, alternating
  for (int32_t i = 0; i < 8; ++i) {
    first.add(A[i], i, 0, true);
    first.add(B[i], i, 1, true);
  }
  auto l1 = both->decode(first);
  ASSERT_TRUE(l1.ok()) << l1.error().message;
  ASSERT_TRUE(both->clear_seq(1).ok());  // B is dropped; C starts over on sequence 1
  Batch second;
  for (int32_t i = 0; i < 8; ++i) {
    second.add(C[i], i, 1, true);
    second.add(A[8 + i], 8 + i, 0, true);
  }
  auto l2 = both->decode(second);
  ASSERT_TRUE(l2.ok()) << l2.error().message;
  double diff = 0;
  for (size_t i = 0; i < 8; ++i) {
    diff = std::max(diff, max_abs_diff(row(*l1, 2 * i), row(ref_a, i)));
    diff = std::max(diff, max_abs_diff(row(*l1, 2 * i + 1), row(ref_b, i)));
    diff = std::max(diff, max_abs_diff(row(*l2, 2 * i), row(ref_c, i)));
    diff = std::max(diff, max_abs_diff(row(*l2, 2 * i + 1), row(ref_a, 8 + i)));
  }
  EXPECT_LE(diff, 1e-5);
}

TEST(HybridSequences, removing_at_or_past_the_end_keeps_the_recurrent_state) {
  const std::vector<int32_t> A = tokens(12, 4);
  auto ref = qwen35moe(1, 64);
  auto e = qwen35moe(1, 64);
  ASSERT_TRUE(ref && e);
  decode(*ref, 0, 0, slice(A, 0, 11));
  decode(*e, 0, 0, slice(A, 0, 11));
  EXPECT_TRUE(e->remove_from(0, 11).ok());
  EXPECT_TRUE(e->remove_from(0, 200).ok());
  EXPECT_EQ(e->n_past(0), 11);
  EXPECT_EQ(decode(*e, 0, 11, {A[11]}), decode(*ref, 0, 11, {A[11]}));
}

TEST(HybridSequences, partial_rollback_of_a_recurrent_sequence_is_refused_and_changes_nothing) {
  const std::vector<int32_t> A = tokens(12, 5);
  auto ref = qwen35moe(1, 64);
  auto e = qwen35moe(1, 64);
  ASSERT_TRUE(ref && e);
  decode(*ref, 0, 0, slice(A, 0, 11));
  decode(*e, 0, 0, slice(A, 0, 11));
  const Status st = e->remove_from(0, 5);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("cannot be rolled back"), std::string::npos) << st.error().message;
  EXPECT_EQ(e->n_past(0), 11);
  EXPECT_EQ(decode(*e, 0, 11, {A[11]}), decode(*ref, 0, 11, {A[11]}));
}

TEST(HybridSequences, removing_from_zero_restarts_the_sequence_from_an_empty_state) {
  const std::vector<int32_t> A = tokens(10, 6), B = tokens(10, 7);
  auto e = qwen35moe(1, 64);
  ASSERT_TRUE(e);
  const std::vector<float> first = decode(*e, 0, 0, A);
  decode(*e, 0, 10, slice(B, 1, 10));
  ASSERT_TRUE(e->remove_from(0, 0).ok());
  EXPECT_EQ(e->n_past(0), 0);
  EXPECT_EQ(decode(*e, 0, 0, A), first);
}

TEST(HybridSequences, a_copied_sequence_continues_exactly_like_the_original) {
  const std::vector<int32_t> A = tokens(9, 8);
  auto e = qwen35moe(2, 64, 2);
  ASSERT_TRUE(e);
  decode(*e, 0, 0, slice(A, 0, 8));
  ASSERT_TRUE(e->copy_seq(0, 1).ok());
  EXPECT_EQ(e->n_past(1), 8);
  Batch b;
  b.add(A[8], 8, 0, true);
  b.add(A[8], 8, 1, true);
  auto l = e->decode(b);
  ASSERT_TRUE(l.ok()) << l.error().message;
  EXPECT_EQ(row(*l, 0), row(*l, 1));
}

}  // namespace
}  // namespace strata::model
