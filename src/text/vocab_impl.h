// Internal: the one Vocab implementation. Loading is in vocab_load.cpp, tokenization in tokenize.cpp
// (special-token partition, SPM, BPE) and wpm.cpp (WordPiece), detokenization in detokenize.cpp.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/pre_tokenizer.h"
#include "text/vocab.h"

namespace strata::text::detail {

// Token attributes as llama.cpp keeps them: a bit set, so a token can be e.g. USER_DEFINED | CONTROL
// after the end-of-generation detection forces CONTROL onto it.
enum TokenAttr : uint32_t {
  kAttrUndefined = 0,
  kAttrUnknown = 1u << 0,
  kAttrUnused = 1u << 1,
  kAttrNormal = 1u << 2,
  kAttrControl = 1u << 3,
  kAttrUserDefined = 1u << 4,
  kAttrByte = 1u << 5,
  kAttrLstrip = 1u << 7,  // eat whitespace left of the token when partitioning
  kAttrRstrip = 1u << 8,  // eat whitespace right of the token when partitioning
};

struct TokenInfo {
  std::string_view text;  // points into VocabImpl::arena_
  float score = 0.0f;
  uint32_t attr = kAttrUndefined;
};

// A stretch of the input after the special-token partition: a token, or a byte range of raw text.
struct Fragment {
  Token token = -1;  // >= 0: this fragment is that token
  size_t offset = 0;
  size_t length = 0;
};

// False when the build has no ICU; WordPiece vocabularies then fail to load.
bool wpm_supported();

class VocabImpl final : public Vocab {
 public:
  Status load(const gguf::File& file);

  VocabKind kind() const override { return kind_; }
  int32_t n_tokens() const override { return static_cast<int32_t>(tokens_.size()); }
  std::string_view token_text(Token t) const override { return valid(t) ? tokens_[t].text : std::string_view(); }
  TokenType token_type(Token t) const override;
  Token bos() const override { return bos_; }
  Token eos() const override { return eos_; }
  bool add_bos() const override { return add_bos_; }
  bool add_eos() const override { return add_eos_; }
  bool is_eog(Token t) const override;

  size_t max_bytes_per_token() const override;
  std::vector<Token> tokenize(std::string_view text, bool add_special, bool parse_special) const override;
  std::string token_to_piece(Token t, bool special) const override { return piece(t, special, false); }
  std::string detokenize(std::span<const Token> tokens, bool remove_special, bool unparse_special) const override;

 private:
  bool valid(Token t) const { return t >= 0 && static_cast<size_t>(t) < tokens_.size(); }
  Token find(std::string_view text) const {
    const auto it = ids_.find(text);
    return it == ids_.end() ? -1 : it->second;
  }

  // vocab_load.cpp
  Status load_tokens(const gguf::File& file);
  Status load_merges(const gguf::File& file);
  Status load_special_ids(const gguf::File& file);
  void detect_special_tokens();
  void build_special_cache(const gguf::File& file);
  void build_byte_tokens();

  // tokenize.cpp
  std::vector<Fragment> partition(std::string_view text, bool parse_special) const;
  void tokenize_spm(std::string_view text, std::vector<Token>& out) const;
  void tokenize_bpe(std::string_view text, std::vector<Token>& out) const;
  void tokenize_bpe_word(std::string_view word, std::vector<Token>& out) const;
  int32_t merge_rank(Token left_id, std::string_view left, Token right_id, std::string_view right) const;
  // wpm.cpp
  void tokenize_wpm(std::string_view text, std::vector<Token>& out) const;
  // detokenize.cpp
  std::string piece(Token t, bool special, bool strip_leading_space) const;

  VocabKind kind_ = VocabKind::Spm;
  std::string arena_;                 // all token texts, back to back
  std::vector<TokenInfo> tokens_;
  std::unordered_map<std::string_view, Token> ids_;
  size_t max_token_len_ = 0;

  // BPE: merge ranks keyed by (left id << 32 | right id); merges whose parts are not both tokens are
  // kept by text (length-prefixed left + right).
  std::unordered_map<uint64_t, int32_t> ranks_;
  std::unordered_map<std::string, int32_t> ranks_by_text_;
  std::unique_ptr<RegexSplitter> splitter_;
  bool ignore_merges_ = false;

  // WPM normalizer options.
  bool lowercase_ = true;
  bool strip_accents_ = true;

  bool add_space_prefix_ = false;
  bool add_bos_ = false;
  bool add_eos_ = false;
  bool add_sep_ = false;
  bool clean_spaces_ = false;

  Token bos_ = -1, eos_ = -1, eot_ = -1, eom_ = -1, unk_ = -1, sep_ = -1, pad_ = -1, mask_ = -1;
  Token fim_pre_ = -1, fim_suf_ = -1, fim_mid_ = -1, fim_pad_ = -1, fim_rep_ = -1, fim_sep_ = -1;

  std::vector<Token> special_tokens_;  // partition candidates, longest text first
  std::vector<Token> eog_;             // sorted
  std::array<Token, 256> byte_tokens_{};  // byte-fallback token per byte, -1 when the vocab has none
};

}  // namespace strata::text::detail
