// The engine's contract: batches are validated, results do not depend on threads or batching, and
// sequences do not see each other.
#include <gtest/gtest.h>

#include <cstring>

#include "runtime/engine.h"
#include "runtime/generate.h"
#include "testing/shared_data.h"

namespace strata::runtime {
namespace {

std::unique_ptr<Engine> open(const std::string& path, int32_t threads, int32_t n_seq = 1, int32_t n_batch = 64) {
  EngineOptions o;
  o.model_path = path;
  o.n_ctx = 128 * n_seq;
  o.n_threads = threads;
  o.n_seq = n_seq;
  o.n_batch = n_batch;
  auto e = Engine::load(o);
  EXPECT_TRUE(e.ok()) << e.error().message;
  return e.ok() ? std::move(*e) : nullptr;
}

const std::vector<int32_t> kPrompt = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426};

TEST(Engine, logits_are_bit_identical_with_one_or_two_threads) {
  STRATA_SHARED_FILE(path, "models/synth/llama-dense-q4_k_m.gguf");
  auto one = open(path, 1), two = open(path, 2);
  ASSERT_TRUE(one && two);
  auto a = evaluate_prompt(*one, 0, kPrompt, true);
  auto b = evaluate_prompt(*two, 0, kPrompt, true);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->size(), b->size());
  EXPECT_EQ(0, std::memcmp(a->data(), b->data(), a->size() * sizeof(float)));
}

TEST(Engine, decode_rejects_malformed_batches_and_keeps_working) {
  STRATA_SHARED_FILE(path, "models/stories260K.gguf");
  auto e = open(path, 1);
  ASSERT_TRUE(e);
  auto expect_error = [&](model::Batch b, const char* fragment) {
    auto r = e->decode(b);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find(fragment), std::string::npos) << r.error().message;
  };
  model::Batch b;
  expect_error(b, "empty");
  b.add(100000, 0, 0, true);
  expect_error(b, "token id");
  b.clear();
  b.add(1, 5, 0, true);
  expect_error(b, "expects position 0");
  b.clear();
  b.add(1, 0, 3, true);
  expect_error(b, "sequence 3");
  b.clear();
  for (int i = 0; i < 65; ++i) b.add(1, i, 0, false);
  expect_error(b, "exceeds the batch size");
  // Still works afterwards.
  b.clear();
  b.add(1, 0, 0, true);
  EXPECT_TRUE(e->decode(b).ok());
}

TEST(Engine, prompt_in_small_batches_equals_one_batch_closely) {
  STRATA_SHARED_FILE(path, "models/stories260K.gguf");
  auto big = open(path, 2, 1, 64), small = open(path, 2, 1, 3);
  ASSERT_TRUE(big && small);
  auto a = evaluate_prompt(*big, 0, kPrompt, true);
  auto b = evaluate_prompt(*small, 0, kPrompt, true);
  ASSERT_TRUE(a.ok() && b.ok());
  // Same per-row math; batching changes nothing in this engine's reduction order.
  EXPECT_EQ(0, std::memcmp(a->data(), b->data(), a->size() * sizeof(float)));
}

TEST(Engine, interleaved_sequences_give_the_same_logits_as_alone) {
  STRATA_SHARED_FILE(path, "models/stories260K.gguf");
  auto alone = open(path, 2, 2);
  ASSERT_TRUE(alone);
  auto ref = evaluate_prompt(*alone, 0, kPrompt, true);
  ASSERT_TRUE(ref.ok());
  const std::vector<int32_t> other = {1, 300, 301, 302, 303, 304};

  auto e = open(path, 2, 2);
  ASSERT_TRUE(e);
  model::Batch b;
  // Sequence 1 gets a different prompt, interleaved token by token with sequence 0.
  for (size_t i = 0; i < kPrompt.size(); ++i) {
    b.add(kPrompt[i], static_cast<int32_t>(i), 0, true);
    if (i < other.size()) b.add(other[i], static_cast<int32_t>(i), 1, false);
  }
  auto mixed = e->decode(b);
  ASSERT_TRUE(mixed.ok()) << mixed.error().message;
  ASSERT_EQ(mixed->size(), ref->size());
  EXPECT_EQ(0, std::memcmp(mixed->data(), ref->data(), ref->size() * sizeof(float)));

  // Clearing sequence 1 mid-way does not disturb sequence 0.
  ASSERT_TRUE(e->clear_seq(1).ok());
  EXPECT_EQ(e->n_past(1), 0);
  EXPECT_EQ(e->n_past(0), static_cast<int32_t>(kPrompt.size()));
}

TEST(Engine, removing_the_tail_and_decoding_again_reproduces_the_logits) {
  STRATA_SHARED_FILE(path, "models/stories260K.gguf");
  auto e = open(path, 2);
  ASSERT_TRUE(e);
  auto full = evaluate_prompt(*e, 0, kPrompt, true);
  ASSERT_TRUE(full.ok());
  ASSERT_TRUE(e->remove_from(0, 10).ok());
  model::Batch b;
  for (size_t i = 10; i < kPrompt.size(); ++i) b.add(kPrompt[i], static_cast<int32_t>(i), 0, true);
  auto tail = e->decode(b);
  ASSERT_TRUE(tail.ok()) << tail.error().message;
  const size_t V = e->n_vocab();
  EXPECT_EQ(0, std::memcmp(tail->data(), full->data() + 10 * V, tail->size() * sizeof(float)));
}

}  // namespace
}  // namespace strata::runtime
