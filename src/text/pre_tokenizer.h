// BPE pre-tokenization: the regex lists llama.cpp applies per `tokenizer.ggml.pre` value, and a PCRE2
// splitter that applies such a list (each regex refines the pieces left by the previous one; both the
// matches and the gaps between them become pieces).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"

namespace strata::text::detail {

struct PreTokenizerSpec {
  std::span<const std::string_view> names;    // tokenizer.ggml.pre values that select this spec
  std::span<const std::string_view> regexes;  // applied in order
  bool ignore_merges = false;                 // a piece that is a whole vocab token is emitted as is
  bool add_bos = false;                       // default for add_bos_token
  bool clean_spaces = true;                   // detokenizer clean-up (clean_up_tokenization_spaces)
  bool clear_bos = false;                     // the vocab has no BOS unless the file names one
};

// The spec for a pre-tokenizer name; "" (key missing) selects "default". nullptr when unknown.
const PreTokenizerSpec* find_pre_tokenizer(std::string_view pre);
// Every supported spec (for tests).
std::span<const PreTokenizerSpec> all_pre_tokenizers();

// Byte range [first, second) of one piece.
using Piece = std::pair<size_t, size_t>;

class RegexSplitter {
 public:
  // Compiles each regex with PCRE2 (UTF + UCP). Errors name the regex and the PCRE2 message.
  static Result<std::unique_ptr<RegexSplitter>> compile(std::span<const std::string_view> regexes);
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  // `text` must be valid UTF-8 (it is not re-checked). Returns contiguous pieces covering the text.
  // Thread-safe. A regex that fails at match time (e.g. a PCRE2 resource limit) leaves the rest of
  // the piece it was working on unsplit rather than failing.
  std::vector<Piece> split(std::string_view text) const;

 private:
  struct Compiled;
  RegexSplitter() = default;
  std::vector<std::unique_ptr<Compiled>> compiled_;
};

}  // namespace strata::text::detail
