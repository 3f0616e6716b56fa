// llama.cpp's tokenizer test vectors (models/ggml-vocab-*.gguf.inp/.out, as test-tokenizer-0 runs
// them: add_special = false, parse_special = false) must come out id for id.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "test_vocab.h"

namespace strata::text {
namespace {

using testing_util::load_shared_vocab;
using testing_util::parse_out;
using testing_util::split_inp;

struct VectorCase {
  std::string name;    // test name
  std::string gguf;    // vocab file under shared/
  std::string vectors; // .inp/.out stem under shared/
};

void PrintTo(const VectorCase& c, std::ostream* os) { *os << c.name; }

// Every vocab in shared/models/vocab that has both a .gguf and vectors, plus vectors that apply to
// another file (README §3 and §6).
const std::vector<VectorCase> kCases = {
    {"llama_spm", "models/vocab/ggml-vocab-llama-spm.gguf", "models/vocab/ggml-vocab-llama-spm.gguf"},
    {"phi_3", "models/vocab/ggml-vocab-phi-3.gguf", "models/vocab/ggml-vocab-phi-3.gguf"},
    {"gpt_2", "models/vocab/ggml-vocab-gpt-2.gguf", "models/vocab/ggml-vocab-gpt-2.gguf"},
    {"deepseek_coder", "models/vocab/ggml-vocab-deepseek-coder.gguf", "models/vocab/ggml-vocab-deepseek-coder.gguf"},
    {"deepseek_llm", "models/vocab/ggml-vocab-deepseek-llm.gguf", "models/vocab/ggml-vocab-deepseek-llm.gguf"},
    {"falcon", "models/vocab/ggml-vocab-falcon.gguf", "models/vocab/ggml-vocab-falcon.gguf"},
    {"mpt", "models/vocab/ggml-vocab-mpt.gguf", "models/vocab/ggml-vocab-mpt.gguf"},
    {"refact", "models/vocab/ggml-vocab-refact.gguf", "models/vocab/ggml-vocab-refact.gguf"},
    {"starcoder", "models/vocab/ggml-vocab-starcoder.gguf", "models/vocab/ggml-vocab-starcoder.gguf"},
    {"bert_bge", "models/vocab/ggml-vocab-bert-bge.gguf", "models/vocab/ggml-vocab-bert-bge.gguf"},
    // Qwen3's tokenizer uses the qwen2 pre-tokenizer; llama.cpp matches all 46 qwen2 vectors on it.
    {"qwen2_vectors_on_qwen3", "models/vocab/ggml-vocab-qwen3.gguf", "models/vocab/ggml-vocab-qwen2.gguf"},
    // Same tokens, scores and types as ggml-vocab-llama-spm.gguf.
    {"llama_spm_vectors_on_llama2_tiny", "models/llama-2-tiny-random.gguf", "models/vocab/ggml-vocab-llama-spm.gguf"},
};

class VocabVectors : public ::testing::TestWithParam<VectorCase> {};

TEST_P(VocabVectors, TokenizesEveryCaseLikeLlamaCpp) {
  const VectorCase& c = GetParam();
  STRATA_SHARED_FILE(inp_path, c.vectors + ".inp");
  STRATA_SHARED_FILE(out_path, c.vectors + ".out");
  const auto vocab = load_shared_vocab(c.gguf);
  ASSERT_NE(vocab, nullptr);

  const auto cases = split_inp(::strata::testing::read_text_file(inp_path));
  const auto expected = parse_out(::strata::testing::read_text_file(out_path));
  ASSERT_EQ(cases.size(), expected.size()) << "the .inp and .out files disagree on the number of cases";
  ASSERT_FALSE(cases.empty());
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(vocab->tokenize(cases[i], /*add_special=*/false, /*parse_special=*/false), expected[i])
        << "case " << i << ": \"" << cases[i] << "\"";
  }
}

INSTANTIATE_TEST_SUITE_P(SharedVocabs, VocabVectors, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<VectorCase>& info) { return info.param.name; });

// Keeps kCases honest: a vocab with vectors that shows up in the shared folder must be added above.
TEST(VocabVectors, CoversEveryVocabWithVectorsInTheSharedFolder) {
  const auto dir = ::strata::testing::shared_dir() / "models" / "vocab";
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << "shared vocab folder missing: " << dir;
  std::set<std::string> listed;
  for (const auto& c : kCases) listed.insert(c.gguf);
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string file = entry.path().filename().string();
    if (entry.path().extension() != ".gguf") continue;
    if (!std::filesystem::exists(entry.path().string() + ".inp") || !std::filesystem::exists(entry.path().string() + ".out")) {
      continue;
    }
    EXPECT_TRUE(listed.count("models/vocab/" + file)) << file << " has test vectors but no test case";
  }
}

}  // namespace
}  // namespace strata::text
