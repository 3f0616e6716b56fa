// Grammar-constrained decoding: GBNF grammars (llama.cpp's syntax), JSON schema -> GBNF, and a
// per-request Matcher that says which tokens of a vocabulary may come next. Grammars work on raw
// bytes: character classes are compiled to UTF-8 byte sequences, so a token may end inside a
// multi-byte character. Every input (grammar text, schema) is bounded; errors name what is wrong.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "base/result.h"
#include "text/vocab.h"

namespace strata::grammar {

struct Grammar;  // parsed, immutable, shareable between requests (grammar_impl.h)

// Limits on grammar text (parse_gbnf refuses more, naming the limit).
inline constexpr size_t kMaxGrammarBytes = 1 << 20;
inline constexpr size_t kMaxRules = 100000;          // including rules made for groups and repetitions
inline constexpr size_t kMaxElements = 2000000;      // symbols over all alternatives
inline constexpr int kMaxNesting = 64;               // parentheses inside parentheses
inline constexpr int kMaxRepetition = 10000;         // m and n of x{m,n}

// Parses GBNF: rules `name ::= ...`, literals "..." (escapes \n \r \t \" \\ \[ \] \- \/ \xHH \uHHHH
// \UHHHHHHHH), classes [a-z] [^...], `.` (any character), groups ( ), alternatives |, repetition
// * + ? {m} {m,} {m,n}, comments #, rule references. The root rule is `root`. Errors read
// "line L, column C: what". Left recursion and grammars that match no finite text are refused.
Result<std::shared_ptr<const Grammar>> parse_gbnf(std::string_view text);

// JSON schema -> GBNF text; every rule name starts with `prefix` and the schema's rule is
// `<prefix>root`. Unsupported keywords are refused with an error naming the keyword and its path.
// Properties come in the schema's order with an ordered_json (parse the request body as one to keep
// the client's order); a nlohmann::json keeps its keys sorted, so its properties come sorted.
// Bounds on a schema, checked while converting (each step is linear in what it reads): properties
// over the whole schema, sub-schemas visited, and the grammar text, which stays within kMaxGrammarBytes.
inline constexpr size_t kMaxSchemaProperties = 4096;
inline constexpr size_t kMaxSchemaNodes = 65536;
Result<std::string> json_schema_to_gbnf(const nlohmann::json& schema, std::string_view prefix = "");
Result<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema, std::string_view prefix = "");

// GBNF for any JSON object (response_format {"type": "json_object"}).
std::string json_object_gbnf();

// A GBNF literal ("...", escaped) matching exactly these bytes.
std::string gbnf_literal(std::string_view bytes);

class MatcherState;  // matcher.cpp: interned parse stacks and the transition cache

// Per-request matching state over a vocabulary (which must outlive it). Not thread-safe; one per
// request. Tokens whose text is empty (control tokens) are never allowed; end-of-generation tokens
// only where the grammar can end.
class Matcher {
 public:
  Matcher(std::shared_ptr<const Grammar> grammar, const text::Vocab& vocab);
  ~Matcher();
  Matcher(Matcher&&) noexcept;
  Matcher& operator=(Matcher&&) noexcept;

  // True when the token's text can come next (EOG tokens: only when the grammar can end here).
  bool allows(text::Token token) const;
  // Sets the logit of every token the grammar does not allow to -inf (one walk of the vocabulary's
  // byte trie, or a recent state's cached answer). Entries past the vocabulary (a padded output
  // row) have no text and get -inf too.
  void mask(std::span<float> logits) const;
  // Advances over the chosen token; an error (and no change) when the grammar does not allow it.
  Status accept(text::Token token);
  bool can_end() const;   // the grammar is complete here (EOG allowed)
  bool finished() const;  // nothing but end is allowed

 private:
  std::shared_ptr<const Grammar> grammar_;
  const text::Vocab* vocab_;
  std::unique_ptr<MatcherState> state_;
};

}  // namespace strata::grammar
