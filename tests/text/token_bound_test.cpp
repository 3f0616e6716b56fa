// The server refuses a prompt longer than n_ctx * max_bytes_per_token() bytes without tokenizing
// it; that is only right if no token ever stands for more input bytes than the bound.
#include <gtest/gtest.h>

#include <random>

#include "test_vocab.h"

namespace strata::text {
namespace {

using testing_util::load_shared_vocab;
using testing_util::split_inp;

// Texts that make tokens cover as much input as they can: the vocab vectors, long runs of one
// character, spaces, invalid UTF-8 and random bytes.
std::vector<std::string> hard_texts(const std::string& vectors) {
  std::vector<std::string> texts =
      split_inp(::strata::testing::read_text_file(::strata::testing::shared_file(vectors + ".inp")));
  for (const char* run : {"a", " ", "\n", "\xff", "ab", "\xe2\x96\x81", "<|endoftext|>"}) {
    std::string t;
    for (int i = 0; i < 300; ++i) t += run;
    texts.push_back(t);
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 20; ++i) {
    std::string t(200, '\0');
    for (char& c : t) c = static_cast<char>(rng());
    texts.push_back(t);
  }
  return texts;
}

TEST(TokenBound, no_token_stands_for_more_bytes_than_the_bound) {
  int checked = 0;
  for (const char* name : {"llama-spm", "gpt-2", "qwen3", "starcoder", "deepseek-llm"}) {
    const std::string file = std::string("models/vocab/ggml-vocab-") + name + ".gguf";
    auto vocab = load_shared_vocab(file);
    if (!vocab) return;
    const size_t bound = vocab->max_bytes_per_token();
    ASSERT_GT(bound, 0u) << name;
    const std::string vectors = std::string(name) == "qwen3" ? "models/vocab/ggml-vocab-qwen2.gguf" : file;
    for (const std::string& text : hard_texts(vectors)) {
      for (bool special : {false, true}) {
        const size_t n = vocab->tokenize(text, true, special).size();
        EXPECT_LE(text.size(), n * bound) << name << ": " << text.size() << " bytes in " << n << " tokens";
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 100);
}

}  // namespace
}  // namespace strata::text
