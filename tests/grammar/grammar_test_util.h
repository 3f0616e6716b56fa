// Helpers for the grammar tests: small hand-made vocabularies, matching a byte string against a
// grammar, and random walks that sample allowed tokens from random logits.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "text/vocab.h"

namespace strata::grammar::testing_util {

// Tokens with the given texts (ids in order), then one end-of-generation token with no text.
class ListVocab : public text::Vocab {
 public:
  explicit ListVocab(std::vector<std::string> pieces) : pieces_(std::move(pieces)) {}
  text::VocabKind kind() const override { return text::VocabKind::Bpe; }
  int32_t n_tokens() const override { return static_cast<int32_t>(pieces_.size()) + 1; }
  std::string_view token_text(text::Token t) const override { return valid(t) ? pieces_[t] : std::string_view(); }
  text::TokenType token_type(text::Token t) const override {
    return t == eos() ? text::TokenType::Control : text::TokenType::Normal;
  }
  text::Token bos() const override { return -1; }
  text::Token eos() const override { return static_cast<text::Token>(pieces_.size()); }
  bool add_bos() const override { return false; }
  bool add_eos() const override { return false; }
  bool is_eog(text::Token t) const override { return t == eos(); }
  size_t max_bytes_per_token() const override { return 0; }
  std::vector<text::Token> tokenize(std::string_view, bool, bool) const override { return {}; }
  std::string token_to_piece(text::Token t, bool) const override { return valid(t) ? pieces_[t] : std::string(); }
  std::string detokenize(std::span<const text::Token> tokens, bool, bool) const override {
    std::string out;
    for (text::Token t : tokens) out += token_to_piece(t, false);
    return out;
  }

 private:
  bool valid(text::Token t) const { return t >= 0 && static_cast<size_t>(t) < pieces_.size(); }
  std::vector<std::string> pieces_;
};

// Token b is the single byte b (0..255); 256 ends generation.
inline const ListVocab& byte_vocab() {
  static const ListVocab vocab([] {
    std::vector<std::string> pieces;
    for (int b = 0; b < 256; ++b) pieces.emplace_back(1, static_cast<char>(b));
    return pieces;
  }());
  return vocab;
}

// True when the whole of `text` is in the grammar's language.
inline bool matches(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  Matcher m(g, byte_vocab());
  for (char c : text) {
    const auto token = static_cast<text::Token>(static_cast<uint8_t>(c));
    if (!m.allows(token)) return false;
    if (!m.accept(token).ok()) {
      ADD_FAILURE() << "allows() and accept() disagree";
      return false;
    }
  }
  return m.can_end();
}

inline std::shared_ptr<const Grammar> must_parse(std::string_view text) {
  auto g = parse_gbnf(text);
  EXPECT_TRUE(g.ok()) << g.error().message << "\n" << text;
  return g.ok() ? g.value() : nullptr;
}

// Accepts tokens spelling `text` (the longest allowed token that is a prefix of what is left).
inline bool spell(Matcher& m, const text::Vocab& vocab, std::string_view text) {
  while (!text.empty()) {
    text::Token best = -1;
    size_t best_len = 0;
    for (text::Token t = 0; t < vocab.n_tokens(); ++t) {
      const std::string piece = vocab.token_to_piece(t, false);
      if (piece.size() > best_len && text.substr(0, piece.size()) == piece && m.allows(t)) {
        best = t;
        best_len = piece.size();
      }
    }
    if (best < 0 || !m.accept(best).ok()) return false;
    text.remove_prefix(best_len);
  }
  return true;
}

struct Walk {
  std::string text;
  int steps = 0;
  bool ended = false;  // finished, or an end-of-generation token was allowed and drawn
};

// Samples tokens from random logits (uniform noise, plus a bonus for tokens holding structural
// JSON characters so strings end in reasonable time): the unconstrained favourite when the grammar
// allows it, else the favourite of the masked row.
// Per token of `vocab`: 1.5 when its text holds one of "}], (0 otherwise).
inline std::vector<float> structural_bonus(const text::Vocab& vocab) {
  std::vector<float> bonus(static_cast<size_t>(vocab.n_tokens()), 0.0f);
  for (text::Token t = 0; t < vocab.n_tokens(); ++t) {
    if (vocab.token_to_piece(t, false).find_first_of("\"}],") != std::string::npos) bonus[t] = 1.5f;
  }
  return bonus;
}

// `bonus`: structural_bonus(vocab).
inline Walk random_walk(const std::shared_ptr<const Grammar>& g, const text::Vocab& vocab, uint32_t seed, int max_steps,
                        const std::vector<float>& bonus) {
  uint32_t rng = seed * 2654435761u + 12345u;  // xorshift32: noise for 150k logits per step, cheaply
  auto noise = [&rng] {
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    return static_cast<float>(rng >> 8) * (1.0f / 16777216.0f);
  };
  Matcher m(g, vocab);
  Walk walk;
  std::vector<float> logits(bonus.size());
  while (walk.steps < max_steps && !m.finished()) {
    for (size_t i = 0; i < logits.size(); ++i) logits[i] = noise() + bonus[i];
    auto pick = [&] { return static_cast<text::Token>(std::max_element(logits.begin(), logits.end()) - logits.begin()); };
    text::Token t = pick();
    if (!m.allows(t)) {
      m.mask(logits);
      t = pick();
      if (!std::isfinite(logits[t])) {
        ADD_FAILURE() << "nothing allowed after " << walk.text;
        return walk;
      }
      EXPECT_TRUE(m.allows(t));
    }
    ++walk.steps;
    if (vocab.is_eog(t)) {
      walk.ended = true;
      return walk;
    }
    const Status s = m.accept(t);
    EXPECT_TRUE(s.ok()) << s.error().message;
    walk.text += vocab.token_to_piece(t, false);
  }
  walk.ended = m.finished();
  return walk;
}

}  // namespace strata::grammar::testing_util
