// Token -> text: pieces (llama_token_to_piece), whole sequences with llama.cpp's clean-up rules
// (llama_detokenize), and the streaming UTF-8 joiner.
#include <algorithm>

#include "text/utf8.h"
#include "text/vocab_impl.h"

namespace strata::text {

namespace detail {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// "<0xAB>" -> 0xAB; reads up to two hex digits at offset 3 and stops at the first other character.
char byte_of(std::string_view text) {
  int value = 0;
  for (size_t i = 3; i < std::min<size_t>(text.size(), 5); ++i) {
    const int digit = hex_value(text[i]);
    if (digit < 0) break;
    value = value * 16 + digit;
  }
  return static_cast<char>(value);
}

// Replaces every "▁" (U+2581) with a space.
std::string unescape_spaces(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text.compare(i, 3, "\xE2\x96\x81") == 0) {
      out += ' ';
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

// Byte-level BPE text -> bytes. A code point that stands for no byte is rendered as llama.cpp does:
// "[UNK_BYTE_0x<hex of its UTF-8>" + the whole token text + "]".
std::string decode_byte_level(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (uint32_t cpt : decode_utf8_lenient(text)) {
    const int byte = gpt2_cpt_to_byte(cpt);
    if (byte >= 0) {
      out += static_cast<char>(byte);
      continue;
    }
    std::string utf8;
    append_utf8(utf8, cpt);
    out += "[UNK_BYTE_0x";
    for (char c : utf8) out += fmt::format("{:02x}", static_cast<uint8_t>(c));
    out.append(text);
    out += ']';
  }
  return out;
}

bool is_clean_punct(char c) { return c == '?' || c == '!' || c == '.' || c == ','; }

// clean_up_tokenization_spaces, pass for pass as llama_detokenize applies it.
void clean_spaces(std::string& text) {
  if (text.empty()) return;
  // 1. " ?" " !" " ." " ," lose the space.
  std::string out(1, text[0]);
  for (size_t i = 1; i < text.size(); ++i) {
    if (text[i - 1] == ' ' && is_clean_punct(text[i])) out.pop_back();
    out += text[i];
  }
  // 2. " ' " becomes "'" (the following character is consumed too, and its slot reads as NUL
  //    when the next character looks back at it).
  std::string in = std::move(out);
  out.assign(1, in[0]);
  for (size_t i = 1; i < in.size(); ++i) {
    const char x = in[i];
    if (x == '\'' && i + 1 < in.size() && in[i - 1] == ' ' && in[i + 1] == ' ') {
      out.pop_back();
      in[++i] = '\0';
    }
    out += x;
  }
  // 3. " 's" " 'm" " 're" " 've" lose the space (" 't" " 'd" " 'll" keep it).
  in = std::move(out);
  out.assign(1, in[0]);
  for (size_t i = 1; i < in.size(); ++i) {
    const char x = in[i];
    if (in[i - 1] == ' ' && x == '\'' && i + 1 < in.size()) {
      const char x1 = in[i + 1];
      if (x1 == 's' || x1 == 'm') {
        out.pop_back();
      } else if (x1 != 't' && x1 != 'd' && i + 2 < in.size()) {
        const char x2 = in[i + 2];
        if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) out.pop_back();
      }
    }
    out += x;
  }
  text = std::move(out);
}

}  // namespace

std::string VocabImpl::piece(Token t, bool special, bool strip_leading_space) const {
  if (!valid(t)) return {};
  const TokenInfo& token = tokens_[t];
  const uint32_t attr = token.attr;
  if (!special && (attr & (kAttrUnknown | kAttrControl))) return {};
  std::string out;
  if (attr & (kAttrUnknown | kAttrControl | kAttrUserDefined)) {
    out = token.text;
  } else if (attr & kAttrNormal) {
    out = kind_ == VocabKind::Bpe ? decode_byte_level(token.text) : unescape_spaces(token.text);
  } else if (attr & kAttrByte) {
    out.assign(1, byte_of(token.text));
  }  // UNUSED and UNDEFINED tokens render as nothing
  if (strip_leading_space && !out.empty() && out[0] == ' ') out.erase(0, 1);
  return out;
}

std::string VocabImpl::detokenize(std::span<const Token> tokens, bool remove_special, bool unparse_special) const {
  bool strip_space = add_space_prefix_;  // the SPM space prefix comes off the first piece
  if (remove_special && add_bos_ && !tokens.empty() && tokens.front() == bos_) {
    strip_space = false;
    tokens = tokens.subspan(1);
  }
  if (remove_special && add_eos_ && !tokens.empty() && tokens.back() == eos_) tokens = tokens.first(tokens.size() - 1);
  std::string text;
  for (Token t : tokens) {
    text += piece(t, unparse_special, strip_space);
    strip_space = false;
  }
  if (clean_spaces_) clean_spaces(text);
  return text;
}

}  // namespace detail

namespace {

// Bytes at the end of `s` that start a UTF-8 sequence which is not complete yet (0 when none).
size_t incomplete_tail(std::string_view s) {
  for (size_t k = 1; k <= std::min<size_t>(3, s.size()); ++k) {
    const auto b = static_cast<uint8_t>(s[s.size() - k]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    if (b < 0xC0 || b >= 0xF8) return 0;  // ASCII or a byte that starts nothing: pass through
    return detail::utf8_seq_len(b) > k ? k : 0;
  }
  return 0;
}

}  // namespace

std::string Utf8Stream::push(std::string_view piece) {
  pending_.append(piece);
  const size_t ready = pending_.size() - incomplete_tail(pending_);
  std::string out = pending_.substr(0, ready);
  pending_.erase(0, ready);
  return out;
}

std::string Utf8Stream::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace strata::text
