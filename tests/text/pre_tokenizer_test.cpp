// The PCRE2 pre-tokenizer: every regex list compiles, and splitting keeps both matches and gaps.
#include <gtest/gtest.h>

#include "text/pre_tokenizer.h"

namespace strata::text::detail {
namespace {

std::vector<std::string> split_with(std::string_view pre, std::string_view text) {
  const PreTokenizerSpec* spec = find_pre_tokenizer(pre);
  if (spec == nullptr) {
    ADD_FAILURE() << "no pre-tokenizer " << pre;
    return {};
  }
  auto splitter = RegexSplitter::compile(spec->regexes);
  if (!splitter.ok()) {
    ADD_FAILURE() << splitter.error().message;
    return {};
  }
  std::vector<std::string> out;
  for (const Piece& p : splitter.value()->split(text)) out.emplace_back(text.substr(p.first, p.second - p.first));
  return out;
}

using Pieces = std::vector<std::string>;

TEST(PreTokenizer, EveryKnownRegexListCompiles) {
  for (const PreTokenizerSpec& spec : all_pre_tokenizers()) {
    ASSERT_FALSE(spec.names.empty());
    auto splitter = RegexSplitter::compile(spec.regexes);
    EXPECT_TRUE(splitter.ok()) << spec.names[0] << ": " << (splitter.ok() ? "" : splitter.error().message);
  }
}

TEST(PreTokenizer, NamesResolveAndUnknownNamesDoNot) {
  EXPECT_EQ(find_pre_tokenizer(""), find_pre_tokenizer("default"));
  EXPECT_EQ(find_pre_tokenizer("llama-bpe"), find_pre_tokenizer("llama3"));
  EXPECT_TRUE(find_pre_tokenizer("llama3")->ignore_merges);
  EXPECT_TRUE(find_pre_tokenizer("llama3")->add_bos);
  EXPECT_FALSE(find_pre_tokenizer("qwen2")->clean_spaces);
  EXPECT_TRUE(find_pre_tokenizer("gpt-2")->clean_spaces);
  EXPECT_EQ(find_pre_tokenizer("no-such-pre"), nullptr);
}

TEST(PreTokenizer, TrailingWhitespaceRunLeavesItsLastSpaceToTheNextWord) {
  // \s+(?!\S): the run stops one short so that " world" keeps its space.
  EXPECT_EQ(split_with("gpt-2", "Hello   world"), (Pieces{"Hello", "  ", " world"}));
  EXPECT_EQ(split_with("gpt-2", "Hello   "), (Pieces{"Hello", "   "}));
  EXPECT_EQ(split_with("gpt-2", "I'm here"), (Pieces{"I", "'m", " here"}));
  // A lone tab before a word matches no alternative; the gap still becomes a piece.
  EXPECT_EQ(split_with("gpt-2", "a\tb"), (Pieces{"a", "\t", "b"}));
}

TEST(PreTokenizer, Qwen2SplitsDigitsSinglyAndLlama3InThrees) {
  EXPECT_EQ(split_with("qwen2", "x 12345\n\n"), (Pieces{"x", " ", "1", "2", "3", "4", "5", "\n\n"}));
  EXPECT_EQ(split_with("llama3", "x 12345\n\n"), (Pieces{"x", " ", "123", "45", "\n\n"}));
  EXPECT_EQ(split_with("qwen2", "HELLO'S"), (Pieces{"HELLO", "'S"}));
  EXPECT_EQ(split_with("qwen2", "(hi)"), (Pieces{"(hi", ")"}));
}

TEST(PreTokenizer, Qwen35KeepsCombiningMarksWithLetters) {
  const std::string decomposed = "e\xCC\x81t\xC3\xA9";  // e + U+0301, t, é
  EXPECT_EQ(split_with("qwen35", decomposed), (Pieces{decomposed}));
  EXPECT_EQ(split_with("qwen2", decomposed), (Pieces{"e", "\xCC\x81t\xC3\xA9"}));
}

TEST(PreTokenizer, RegexListsRefineEachOthersPieces) {
  // default: punctuation runs first, then the GPT-2 regex, then digit runs, then groups of three digits.
  EXPECT_EQ(split_with("default", "a+b 12345"), (Pieces{"a", "+", "b", " ", "123", "45"}));
  // starcoder: every digit alone, before the GPT-2 regex sees the text.
  EXPECT_EQ(split_with("starcoder", "x 123"), (Pieces{"x", " ", "1", "2", "3"}));
}

TEST(PreTokenizer, EmptyMatchesOnlyCut) {
  // superbpe's second regex matches the empty string before each group of three trailing digits.
  EXPECT_EQ(split_with("superbpe", "1234567"), (Pieces{"1", "234", "567"}));
}

TEST(PreTokenizer, DollarMeansEndOfPieceOnly) {
  // deepseek-llm's \s+$ must not match before a final newline (PCRE2_DOLLAR_ENDONLY); the newline is cut
  // out first by [\r\n] anyway, so "a  " ends its piece.
  EXPECT_EQ(split_with("deepseek-llm", "a  \nb"), (Pieces{"a", "  ", "\n", "b"}));
}

}  // namespace
}  // namespace strata::text::detail
