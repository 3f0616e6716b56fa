// Tokenizer vocabulary loaded from GGUF metadata: SentencePiece-style ("llama"), byte-level BPE ("gpt2")
// and WordPiece ("bert") models, special tokens, BOS/EOS rules, detokenization. Token ids match
// llama.cpp's llama_tokenize / llama_detokenize for the same file. A loaded Vocab is immutable and safe
// to use from several threads; no method throws or crashes on any input (invalid UTF-8 included).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "gguf/gguf.h"

namespace strata::text {

using Token = int32_t;

enum class TokenType : int32_t {
  Undefined = 0, Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6,
};

enum class VocabKind { Spm, Bpe, Wpm };

class Vocab {
 public:
  static Result<std::shared_ptr<const Vocab>> load(const gguf::File& file);
  virtual ~Vocab() = default;

  virtual VocabKind kind() const = 0;
  virtual int32_t n_tokens() const = 0;
  virtual std::string_view token_text(Token t) const = 0;
  virtual TokenType token_type(Token t) const = 0;
  virtual Token bos() const = 0;          // -1 when unset
  virtual Token eos() const = 0;          // -1 when unset
  virtual bool add_bos() const = 0;
  virtual bool add_eos() const = 0;
  virtual bool is_eog(Token t) const = 0; // end of generation (eos, eot, <|im_end|>, ...)

  // Most bytes of input text one token can stand for, so a text longer than n * this cannot be n
  // tokens or fewer (checked before tokenizing a hostile prompt); 0 when there is no such bound
  // (WordPiece normalization and special tokens that swallow whitespace).
  virtual size_t max_bytes_per_token() const = 0;
  // add_special: BOS/EOS per the vocab's rules; parse_special: control-token text becomes the token.
  virtual std::vector<Token> tokenize(std::string_view text, bool add_special, bool parse_special) const = 0;
  // One token's bytes (may be a partial UTF-8 sequence). special: render control tokens' text.
  virtual std::string token_to_piece(Token t, bool special) const = 0;
  virtual std::string detokenize(std::span<const Token> tokens, bool remove_special, bool unparse_special) const = 0;
};

// Joins streamed pieces and holds back an incomplete UTF-8 sequence until it is complete.
class Utf8Stream {
 public:
  std::string push(std::string_view piece);  // the complete characters available now
  std::string flush();                       // whatever is left (may be invalid UTF-8)
 private:
  std::string pending_;
};

}  // namespace strata::text
