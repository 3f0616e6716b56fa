// Tokenizer behaviour beyond the test vectors: BOS/EOS rules, special-token parsing, end-of-generation
// set, pieces, detokenization rules, load errors and load time.
#include <gtest/gtest.h>

#include <chrono>

#include "test_vocab.h"
#include "testing/sanitizers.h"

namespace strata::text {
namespace {

using testing_util::load_shared_vocab;

constexpr const char* kQwen3 = "models/vocab/ggml-vocab-qwen3.gguf";

TEST(SpmTokenizer, PrependsBosWhenAddSpecialAndTheVocabAsksForIt) {
  const auto vocab = load_shared_vocab("models/stories260K.gguf");
  ASSERT_NE(vocab, nullptr);
  EXPECT_EQ(vocab->kind(), VocabKind::Spm);
  EXPECT_EQ(vocab->bos(), 1);
  EXPECT_EQ(vocab->eos(), 2);
  EXPECT_TRUE(vocab->add_bos());
  EXPECT_FALSE(vocab->add_eos());
  const std::string prompt = "Once upon a time, there was a little girl named Lily.";
  const std::vector<Token> with_bos = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426};
  EXPECT_EQ(vocab->tokenize(prompt, /*add_special=*/true, /*parse_special=*/false), with_bos);
  EXPECT_EQ(vocab->tokenize(prompt, false, false), std::vector<Token>(with_bos.begin() + 1, with_bos.end()));
  EXPECT_EQ(vocab->tokenize("", true, false), std::vector<Token>{1});
  EXPECT_TRUE(vocab->tokenize("", false, false).empty());
}

TEST(SpmTokenizer, DetokenizeHandlesBosAndTheSpacePrefixLikeLlamaCpp) {
  const auto vocab = load_shared_vocab("models/stories260K.gguf");
  ASSERT_NE(vocab, nullptr);
  const std::string prompt = "Once upon a time, there was a little girl named Lily.";
  const auto ids = vocab->tokenize(prompt, true, false);
  // llama_detokenize strips the space prefix from the first piece only when no BOS was removed; a
  // kept BOS is that first piece (rendering as nothing), so the prefix survives in both cases.
  EXPECT_EQ(vocab->detokenize(ids, /*remove_special=*/true, /*unparse_special=*/false), " " + prompt);
  EXPECT_EQ(vocab->detokenize(ids, false, false), " " + prompt);
  EXPECT_EQ(vocab->detokenize(ids, false, true), "<s> " + prompt);
  // Without BOS the first piece loses its leading space.
  EXPECT_EQ(vocab->detokenize(vocab->tokenize(prompt, false, false), false, false), prompt);
}

TEST(SpmTokenizer, PiecesDecodeSpacesAndByteTokens) {
  const auto vocab = load_shared_vocab("models/vocab/ggml-vocab-llama-spm.gguf");
  ASSERT_NE(vocab, nullptr);
  EXPECT_EQ(vocab->token_text(13), "<0x0A>");
  EXPECT_EQ(vocab->token_type(13), TokenType::Byte);
  EXPECT_EQ(vocab->token_to_piece(13, false), "\n");
  EXPECT_EQ(vocab->token_to_piece(15043, false), " Hello");  // "▁Hello"
  EXPECT_EQ(vocab->token_to_piece(1, false), "");
  EXPECT_EQ(vocab->token_to_piece(1, true), "<s>");
  EXPECT_EQ(vocab->token_to_piece(-1, true), "");
  EXPECT_EQ(vocab->token_to_piece(vocab->n_tokens(), true), "");
  // A character with no token of its own falls back to its UTF-8 bytes.
  const auto ids = vocab->tokenize("\xF0\x9F\xA6\x99", false, false);  // U+1F999
  EXPECT_EQ(ids, (std::vector<Token>{29871, 243, 162, 169, 156}));
  EXPECT_EQ(vocab->detokenize(ids, false, false), "\xF0\x9F\xA6\x99");
}

TEST(SpmTokenizer, AppendsEosOnlyWhenTheVocabAsksForIt) {
  const auto vocab = load_shared_vocab("models/vocab/ggml-vocab-phi-3.gguf");
  ASSERT_NE(vocab, nullptr);
  EXPECT_EQ(vocab->eos(), 32000);
  EXPECT_FALSE(vocab->add_eos());
  const auto ids = vocab->tokenize("Hello", true, false);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), 1);
  EXPECT_NE(ids.back(), 32000);
  EXPECT_TRUE(vocab->is_eog(32000));  // <|endoftext|>
  EXPECT_TRUE(vocab->is_eog(32007));  // <|end|>
  EXPECT_FALSE(vocab->is_eog(32001));  // <|assistant|>
}

TEST(SpmTokenizer, Phi3SpecialTokensEatTheWhitespaceAfterThem) {
  // llama.cpp sets RSTRIP on phi-3's special tokens (by model name).
  const auto vocab = load_shared_vocab("models/vocab/ggml-vocab-phi-3.gguf");
  ASSERT_NE(vocab, nullptr);
  const auto stripped = vocab->tokenize("<|user|>  Hi", false, true);
  const auto plain = vocab->tokenize("<|user|>Hi", false, true);
  EXPECT_EQ(stripped, plain);
  ASSERT_FALSE(plain.empty());
  EXPECT_EQ(plain.front(), 32010);
}

TEST(BpeTokenizer, ParsesSpecialTokensOnlyWhenAsked) {
  const auto vocab = load_shared_vocab(kQwen3);
  ASSERT_NE(vocab, nullptr);
  EXPECT_EQ(vocab->kind(), VocabKind::Bpe);
  const std::string chat = "<|im_start|>user\nHello world<|im_end|><think></think>";
  const std::vector<Token> parsed = {151644, 872, 198, 9707, 1879, 151645, 151667, 151668};
  EXPECT_EQ(vocab->tokenize(chat, false, true), parsed);
  // add_bos_token is false for Qwen3: add_special changes nothing.
  EXPECT_EQ(vocab->tokenize(chat, true, true), parsed);

  // Without parse_special the control tokens are plain text; user-defined ones are still split out.
  const auto plain = vocab->tokenize(chat, false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 151644), 0);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 151645), 0);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 151667), 1);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 151668), 1);
  EXPECT_EQ(vocab->detokenize(plain, false, false), chat);

  EXPECT_EQ(vocab->detokenize(parsed, false, /*unparse_special=*/true), chat);
  EXPECT_EQ(vocab->detokenize(parsed, false, false), "user\nHello world<think></think>");
  EXPECT_EQ(vocab->token_to_piece(151644, false), "");
  EXPECT_EQ(vocab->token_to_piece(151644, true), "<|im_start|>");
  EXPECT_EQ(vocab->token_to_piece(1879, false), " world");
}

TEST(BpeTokenizer, Qwen3EndOfGenerationSetAndTypes) {
  const auto vocab = load_shared_vocab(kQwen3);
  ASSERT_NE(vocab, nullptr);
  EXPECT_EQ(vocab->n_tokens(), 151936);
  EXPECT_EQ(vocab->bos(), 151643);
  EXPECT_EQ(vocab->eos(), 151645);
  EXPECT_FALSE(vocab->add_bos());
  EXPECT_TRUE(vocab->is_eog(151645));   // <|im_end|>
  EXPECT_TRUE(vocab->is_eog(151643));   // <|endoftext|>
  EXPECT_TRUE(vocab->is_eog(151662));   // <|fim_pad|>
  EXPECT_TRUE(vocab->is_eog(151663));   // <|repo_name|>
  EXPECT_TRUE(vocab->is_eog(151664));   // <|file_sep|>
  EXPECT_FALSE(vocab->is_eog(151644));  // <|im_start|>
  EXPECT_FALSE(vocab->is_eog(198));
  EXPECT_FALSE(vocab->is_eog(-1));
  EXPECT_EQ(vocab->token_type(151645), TokenType::Control);
  EXPECT_EQ(vocab->token_type(151667), TokenType::UserDefined);
  EXPECT_EQ(vocab->token_type(151700), TokenType::Unused);
  EXPECT_EQ(vocab->token_to_piece(151700, true), "");  // unused fillers render as nothing
}

TEST(BpeTokenizer, Qwen3LoadsWellUnderASecond) {
  STRATA_SHARED_FILE(path, kQwen3);
  auto file = gguf::File::open(path);
  ASSERT_TRUE(file.ok()) << file.error().message;
  const auto start = std::chrono::steady_clock::now();
  auto vocab = Vocab::load(*file.value());
  const auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(vocab.ok()) << vocab.error().message;
  RecordProperty("qwen3_vocab_load_ms", std::to_string(ms));
#if defined(NDEBUG) && !STRATA_TEST_ASAN
  EXPECT_LT(ms, 1000.0) << "151k tokens and 151k merges should load in well under a second";
#endif
}

TEST(BpeTokenizer, Gpt2DetokenizeCleansSpacesAroundPunctuation) {
  const auto vocab = load_shared_vocab("models/vocab/ggml-vocab-gpt-2.gguf");
  ASSERT_NE(vocab, nullptr);
  auto round = [&](const std::string& s) { return vocab->detokenize(vocab->tokenize(s, false, false), false, false); };
  EXPECT_EQ(round("Hello , world ! Is it ? Yes ."), "Hello, world! Is it? Yes.");
  EXPECT_EQ(round("I 'm sure you 're right , it 's he 'll"), "I'm sure you're right, it's he 'll");
  EXPECT_EQ(round("rock ' n roll"), "rock'n roll");
  // clean_spaces is off for qwen2-style vocabs: text comes back as it went in.
  const auto qwen = load_shared_vocab(kQwen3);
  ASSERT_NE(qwen, nullptr);
  const std::string s = "Hello , world ! I 'm ' here";
  EXPECT_EQ(qwen->detokenize(qwen->tokenize(s, false, false), false, false), s);
}

TEST(BpeTokenizer, LlamaCppDefaultBosForBpeIsEleven) {
  // falcon's file names BOS = EOS = 11 (the BPE placeholder default) and add_bos is off.
  const auto vocab = load_shared_vocab("models/vocab/ggml-vocab-falcon.gguf");
  ASSERT_NE(vocab, nullptr);
  EXPECT_EQ(vocab->bos(), 11);
  EXPECT_FALSE(vocab->add_bos());
  EXPECT_EQ(vocab->tokenize("Hello", true, false), vocab->tokenize("Hello", false, false));
  // deepseek-llm asks for BOS.
  const auto deepseek = load_shared_vocab("models/vocab/ggml-vocab-deepseek-llm.gguf");
  ASSERT_NE(deepseek, nullptr);
  const auto ids = deepseek->tokenize("Hello", true, false);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), 100000);
}

TEST(WpmTokenizer, AddsClsAndSepAroundTheText) {
  const auto vocab = load_shared_vocab("models/vocab/ggml-vocab-bert-bge.gguf");
  ASSERT_NE(vocab, nullptr);
  EXPECT_EQ(vocab->kind(), VocabKind::Wpm);
  EXPECT_EQ(vocab->tokenize("Hello world", true, false), (std::vector<Token>{101, 7592, 2088, 102}));
  EXPECT_EQ(vocab->tokenize("Hello world", false, false), (std::vector<Token>{7592, 2088}));
  EXPECT_EQ(vocab->detokenize(std::vector<Token>{7592, 2088}, false, false), " hello world");
}

}  // namespace
}  // namespace strata::text
