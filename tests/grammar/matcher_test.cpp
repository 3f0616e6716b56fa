// The Matcher over vocabularies: multi-byte characters split across tokens, end-of-generation only
// where the grammar may end, and mask() agreeing with allows() token by token on real vocabularies.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "grammar/grammar.h"
#include "grammar_test_util.h"
#include "text/test_vocab.h"

namespace strata::grammar {
namespace {

using testing_util::ListVocab;
using testing_util::must_parse;

TEST(Matcher, a_character_split_across_tokens_is_matched_on_code_points) {
  // 0 lead byte of é, 1 its continuation, 2 é whole, 3 a quote, 4 first two bytes of €, 5 its last.
  const ListVocab vocab({"\xC3", "\xA9", "\xC3\xA9", "\"", "\xE2\x82", "\xAC", "e"});
  auto g = must_parse(R"(root ::= "\"" [^a-z"]+ "\"")");
  Matcher m(g, vocab);
  ASSERT_TRUE(m.accept(3).ok());
  EXPECT_TRUE(m.allows(0));
  EXPECT_TRUE(m.allows(2));
  EXPECT_FALSE(m.allows(6));  // 'e' is in a-z
  ASSERT_TRUE(m.accept(0).ok());
  EXPECT_FALSE(m.allows(3));  // the character is not complete
  EXPECT_FALSE(m.allows(0));
  ASSERT_TRUE(m.accept(1).ok());
  ASSERT_TRUE(m.accept(4).ok());
  EXPECT_TRUE(m.allows(1));  // E2 82 A9 is U+20A9, also outside a-z
  EXPECT_FALSE(m.allows(2));  // E2 82 C3 is no character
  EXPECT_TRUE(m.allows(5));
  ASSERT_TRUE(m.accept(5).ok());
  EXPECT_FALSE(m.can_end());
  ASSERT_TRUE(m.accept(3).ok());
  EXPECT_TRUE(m.finished());

  // A class without é still allows its lead byte (ê shares it) but not the byte that makes é.
  auto no_e_acute = must_parse("root ::= [^\xC3\xA9]+");
  Matcher n(no_e_acute, vocab);
  EXPECT_TRUE(n.allows(0));
  EXPECT_FALSE(n.allows(2));
  ASSERT_TRUE(n.accept(0).ok());
  EXPECT_FALSE(n.allows(1));
}

TEST(Matcher, end_of_generation_only_where_the_grammar_can_end) {
  const ListVocab vocab({"a", "b", "ab"});
  const text::Token eog = vocab.eos();
  auto g = must_parse(R"(root ::= "a" "b"+)");
  Matcher m(g, vocab);
  EXPECT_FALSE(m.allows(eog));
  std::vector<float> logits(4, 1.0f);
  m.mask(logits);
  EXPECT_EQ(logits, (std::vector<float>{1.0f, -INFINITY, 1.0f, -INFINITY}));
  EXPECT_FALSE(m.accept(eog).ok());
  EXPECT_FALSE(m.accept(1).ok());  // refused, and nothing changed
  ASSERT_TRUE(m.accept(2).ok());
  EXPECT_TRUE(m.can_end());
  EXPECT_FALSE(m.finished());  // more b's may come
  EXPECT_TRUE(m.allows(eog));
  logits.assign(4, 1.0f);
  m.mask(logits);
  EXPECT_EQ(logits, (std::vector<float>{-INFINITY, 1.0f, -INFINITY, 1.0f}));
  ASSERT_TRUE(m.accept(eog).ok());
  EXPECT_TRUE(m.finished());
}

TEST(Matcher, tokens_without_text_are_never_allowed) {
  auto vocab = text::testing_util::load_shared_vocab("models/vocab/ggml-vocab-qwen3.gguf");
  ASSERT_TRUE(vocab);
  auto g = must_parse(R"(root ::= [^x]*)");
  Matcher m(g, *vocab);
  const text::Token im_start = 151644;
  ASSERT_EQ(vocab->token_type(im_start), text::TokenType::Control);
  EXPECT_FALSE(m.allows(im_start));
  EXPECT_TRUE(m.allows(vocab->eos()));  // <|im_end|> ends generation, and the grammar may end
  EXPECT_FALSE(m.allows(-1));
  EXPECT_FALSE(m.allows(vocab->n_tokens()));
  EXPECT_FALSE(m.accept(vocab->n_tokens()).ok());
}

// mask() walks the vocabulary's trie; allows() walks one token's bytes: they must agree on every
// token, at several states of a JSON grammar, on byte-level BPE and SentencePiece vocabularies.
TEST(Matcher, mask_agrees_with_allows_for_every_token) {
  auto gbnf = json_schema_to_gbnf(nlohmann::json::parse(R"({"type":"object","properties":{
      "name":{"type":"string"},"n":{"type":"integer","minimum":-5,"maximum":300},
      "tags":{"type":"array","items":{"enum":["x","y\u00e9"]}}},"required":["name"]})"));
  ASSERT_TRUE(gbnf.ok()) << gbnf.error().message;
  auto g = must_parse(*gbnf);
  for (const char* path : {"models/vocab/ggml-vocab-qwen3.gguf", "models/vocab/ggml-vocab-llama-spm.gguf"}) {
    auto vocab = text::testing_util::load_shared_vocab(path);
    ASSERT_TRUE(vocab);
    Matcher m(g, *vocab);
    const std::vector<std::string> prefix = {"{", " \"n\"", ":", " 2", "9", ",", " \"name\"", ": \"", "ab\xC3", "\xA9"};
    for (size_t step = 0; step <= prefix.size(); ++step) {
      std::vector<float> logits(static_cast<size_t>(vocab->n_tokens()), 0.0f);
      m.mask(logits);
      size_t n_allowed = 0;
      for (text::Token t = 0; t < vocab->n_tokens(); ++t) {
        const bool kept = std::isfinite(logits[t]);
        n_allowed += kept;
        ASSERT_EQ(kept, m.allows(t)) << path << " step " << step << " token " << t << " '"
                                     << vocab->token_to_piece(t, false) << "'";
      }
      EXPECT_GT(n_allowed, 0u) << path << " step " << step;
      if (step == prefix.size()) break;
      ASSERT_TRUE(testing_util::spell(m, *vocab, prefix[step])) << path << " '" << prefix[step] << "'";
    }
  }
}

TEST(Matcher, deep_nesting_stops_at_the_stack_limit_instead_of_growing_without_bound) {
  auto g = must_parse(R"(root ::= "[" root? "]")");
  Matcher m(g, testing_util::byte_vocab());
  int depth = 0;
  while (m.allows('[') && depth < 100000) {
    ASSERT_TRUE(m.accept('[').ok());
    ++depth;
  }
  EXPECT_GT(depth, 500);
  EXPECT_LT(depth, 100000);
  EXPECT_TRUE(m.allows(']'));
}

}  // namespace
}  // namespace strata::grammar
