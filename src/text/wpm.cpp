// WordPiece ("bert") tokenization as llama.cpp's llm_tokenizer_wpm_session does it: BERT-style
// normalization (accent stripping, lowercasing, punctuation and CJK split), then greedy longest-match
// per word with a "▁" word-start marker. Character properties come from ICU.
#include <algorithm>

#include "text/utf8.h"
#include "text/vocab_impl.h"

#if STRATA_TEXT_HAVE_ICU
#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#endif

namespace strata::text::detail {

#if STRATA_TEXT_HAVE_ICU

bool wpm_supported() { return true; }

namespace {

bool is_control(uint32_t c) {
  switch (u_charType(static_cast<UChar32>(c))) {
    case U_CONTROL_CHAR:
    case U_FORMAT_CHAR:
    case U_PRIVATE_USE_CHAR:
    case U_SURROGATE:
      return true;
    default:
      return false;
  }
}

bool is_mark(uint32_t c) {
  const auto type = u_charType(static_cast<UChar32>(c));
  return type == U_NON_SPACING_MARK || type == U_ENCLOSING_MARK || type == U_COMBINING_SPACING_MARK;
}

bool is_punctuation(uint32_t c) {
  switch (u_charType(static_cast<UChar32>(c))) {
    case U_DASH_PUNCTUATION:
    case U_START_PUNCTUATION:
    case U_END_PUNCTUATION:
    case U_CONNECTOR_PUNCTUATION:
    case U_OTHER_PUNCTUATION:
    case U_INITIAL_PUNCTUATION:
    case U_FINAL_PUNCTUATION:
      return true;
    default:
      return false;
  }
}

bool is_symbol(uint32_t c) {
  const auto type = u_charType(static_cast<UChar32>(c));
  return type == U_MATH_SYMBOL || type == U_CURRENCY_SYMBOL || type == U_MODIFIER_SYMBOL || type == U_OTHER_SYMBOL;
}

// The CJK ranges BERT splits into single-character words (as in HF tokenizers, including its
// 0x2B920 lower bound for extension E).
bool is_chinese(uint32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

// Canonical decomposition (NFD) of each code point; code points ICU cannot take pass through.
std::vector<uint32_t> decompose(const std::vector<uint32_t>& cpts) {
  UErrorCode status = U_ZERO_ERROR;
  const UNormalizer2* nfd = unorm2_getNFDInstance(&status);
  if (U_FAILURE(status) || nfd == nullptr) return cpts;
  std::vector<uint32_t> out;
  out.reserve(cpts.size());
  UChar buffer[64];
  for (uint32_t c : cpts) {
    status = U_ZERO_ERROR;
    const int32_t n = c <= 0x10FFFF ? unorm2_getDecomposition(nfd, static_cast<UChar32>(c), buffer, 64, &status) : -1;
    if (n < 0 || U_FAILURE(status)) {
      out.push_back(c);
      continue;
    }
    for (int32_t i = 0; i < n;) {
      UChar32 d;
      U16_NEXT(buffer, i, n, d);
      out.push_back(static_cast<uint32_t>(d));
    }
  }
  return out;
}

// Splits normalized text into words: whitespace separates, punctuation / ASCII symbols / CJK characters
// are words of their own, controls (and U+0000, U+FFFD) vanish.
std::vector<std::string> preprocess(std::string_view text, bool lowercase, bool strip_accents) {
  std::vector<uint32_t> cpts = decode_utf8_lenient(text);
  if (strip_accents) cpts = decompose(cpts);
  std::vector<std::string> words(1);
  for (uint32_t c : cpts) {
    if (c > 0x10FFFF) c = kReplacementChar;
    if (u_isUWhiteSpace(static_cast<UChar32>(c))) {
      if (!words.back().empty()) words.emplace_back();
      continue;
    }
    if (c == 0 || c == kReplacementChar || is_control(c)) continue;
    if (strip_accents && is_mark(c)) continue;
    std::string s;
    append_utf8(s, lowercase ? static_cast<uint32_t>(u_tolower(static_cast<UChar32>(c))) : c);
    if (is_punctuation(c) || (c < 0x7F && is_symbol(c)) || is_chinese(c)) {
      if (!words.back().empty()) words.emplace_back();
      words.back() = std::move(s);
      words.emplace_back();
    } else {
      words.back() += s;
    }
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

}  // namespace

void VocabImpl::tokenize_wpm(std::string_view text, std::vector<Token>& out) const {
  for (const std::string& word : preprocess(text, lowercase_, strip_accents_)) {
    if (word.empty()) continue;
    const std::string marked = "\xE2\x96\x81" + word;  // word-start marker, as the converted vocab spells it
    const std::string_view w = marked;
    const size_t n = w.size();
    const size_t first = out.size();
    for (size_t i = 0; i < n; ++i) {
      bool matched = false;
      for (size_t j = std::min(n, i + max_token_len_ + 1); j > i; --j) {
        if (const Token id = find(w.substr(i, j - i)); id >= 0) {
          out.push_back(id);
          matched = true;
          i = j - 1;
          break;
        }
      }
      if (!matched) {  // the word cannot be spelled: it becomes one unknown token
        out.resize(first);
        break;
      }
    }
    if (out.size() == first && unk_ >= 0) out.push_back(unk_);
  }
}

#else  // !STRATA_TEXT_HAVE_ICU

bool wpm_supported() { return false; }
void VocabImpl::tokenize_wpm(std::string_view, std::vector<Token>&) const {}

#endif

}  // namespace strata::text::detail
