// Tokenization: special-token partition, then per fragment the SPM bigram merge or byte-level BPE
// (llama.cpp's llm_tokenizer_spm_session / llm_tokenizer_bpe_session semantics).
#include <algorithm>
#include <queue>

#include "text/utf8.h"
#include "text/vocab_impl.h"

namespace strata::text::detail {

namespace {

bool is_c_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

// A symbol of the merge loop: a byte range of the text, linked to its live neighbours.
struct Symbol {
  int prev;
  int next;
  size_t offset;
  size_t length;  // 0 once merged into its left neighbour
  Token id;       // BPE only: the symbol's token, -1 when its text is not a token
};

// Splits text into one symbol per (possibly malformed) UTF-8 character, judged by the lead byte.
std::vector<Symbol> split_chars(std::string_view text) {
  std::vector<Symbol> symbols;
  symbols.reserve(text.size());
  size_t offset = 0;
  int index = 0;
  while (offset < text.size()) {
    const size_t len = std::min(utf8_seq_len(static_cast<uint8_t>(text[offset])), text.size() - offset);
    const bool last = offset + len == text.size();
    symbols.push_back(Symbol{index - 1, last ? -1 : index + 1, offset, len, -1});
    offset += len;
    ++index;
  }
  return symbols;
}

struct SpmBigram {
  int left;
  int right;
  float score;
  size_t size;
};
// Highest score first; on ties the leftmost pair.
struct SpmOrder {
  bool operator()(const SpmBigram& a, const SpmBigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

struct BpeBigram {
  int left;
  int right;
  int32_t rank;
  size_t size;
};
// Lowest merge rank first; on ties the leftmost pair.
struct BpeOrder {
  bool operator()(const BpeBigram& a, const BpeBigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

std::vector<Fragment> VocabImpl::partition(std::string_view text, bool parse_special) const {
  std::vector<Fragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back(Fragment{-1, 0, text.size()});
  std::vector<Fragment> next;
  for (const Token id : special_tokens_) {
    const TokenInfo& special = tokens_[id];
    // Without parse_special only USER_DEFINED tokens are split out; CONTROL and UNKNOWN text is plain text.
    if (!parse_special && (special.attr & (kAttrControl | kAttrUnknown))) continue;
    const std::string_view needle = special.text;
    next.clear();
    for (const Fragment& fragment : fragments) {
      if (fragment.token >= 0) {
        next.push_back(fragment);
        continue;
      }
      size_t offset = fragment.offset;
      size_t length = fragment.length;
      while (length > 0) {
        const size_t match = text.substr(0, offset + length).find(needle, offset);
        if (match == std::string_view::npos) {
          next.push_back(Fragment{-1, offset, length});
          break;
        }
        size_t left = match - offset;
        if (special.attr & kAttrLstrip) {
          while (left > 0 && is_c_space(text[offset + left - 1])) --left;
        }
        if (left > 0) next.push_back(Fragment{-1, offset, left});
        next.push_back(Fragment{id, 0, 0});
        size_t right_offset = match + needle.size();
        size_t right_length = offset + length - right_offset;
        if (special.attr & kAttrRstrip) {
          while (right_length > 0 && is_c_space(text[right_offset])) ++right_offset, --right_length;
        }
        offset = right_offset;
        length = right_length;
      }
    }
    fragments.swap(next);
  }
  return fragments;
}

size_t VocabImpl::max_bytes_per_token() const {
  if (kind_ == VocabKind::Wpm) return 0;
  for (const Token t : special_tokens_) {
    if (tokens_[t].attr & (kAttrLstrip | kAttrRstrip)) return 0;
  }
  // A token covers at most its own text (SPM's escaped spaces and BPE's byte map only grow the
  // text), and an unknown or invalid character is at most 4 bytes.
  return std::max<size_t>(max_token_len_, 4);
}

std::vector<Token> VocabImpl::tokenize(std::string_view text, bool add_special, bool parse_special) const {
  std::vector<Token> out;
  const std::vector<Fragment> fragments = partition(text, parse_special);
  auto raw = [&](const Fragment& f) { return text.substr(f.offset, f.length); };
  switch (kind_) {
    case VocabKind::Spm: {
      if (add_special && add_bos_) out.push_back(bos_);
      bool prev_special = true;  // the first fragment gets the space prefix
      std::string escaped;
      for (const Fragment& f : fragments) {
        if (f.token >= 0) {
          out.push_back(f.token);
          prev_special = true;
          continue;
        }
        escaped.clear();
        if (add_space_prefix_ && prev_special) escaped += "\xE2\x96\x81";
        for (char c : raw(f)) {
          if (c == ' ') escaped += "\xE2\x96\x81";
          else escaped += c;
        }
        tokenize_spm(escaped, out);
        prev_special = false;
      }
      if (add_special && add_eos_) out.push_back(eos_);
      break;
    }
    case VocabKind::Bpe: {
      if (add_special && add_bos_) out.push_back(bos_);
      for (const Fragment& f : fragments) {
        if (f.token >= 0) out.push_back(f.token);
        else tokenize_bpe(raw(f), out);
      }
      if (add_special && add_eos_) out.push_back(eos_);
      break;
    }
    case VocabKind::Wpm: {
      if (add_special && bos_ >= 0) out.push_back(bos_);
      for (const Fragment& f : fragments) {
        if (f.token >= 0) out.push_back(f.token);
        else tokenize_wpm(raw(f), out);
      }
      if (add_special && sep_ >= 0) out.push_back(sep_);
      break;
    }
  }
  return out;
}

void VocabImpl::tokenize_spm(std::string_view text, std::vector<Token>& out) const {
  std::vector<Symbol> symbols = split_chars(text);
  if (symbols.empty()) return;
  std::priority_queue<SpmBigram, std::vector<SpmBigram>, SpmOrder> queue;
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const std::string_view merged = text.substr(symbols[left].offset, symbols[left].length + symbols[right].length);
    const Token id = find(merged);
    if (id < 0) return;
    queue.push(SpmBigram{left, right, tokens_[id].score, merged.size()});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const SpmBigram bigram = queue.top();
    queue.pop();
    Symbol& left = symbols[bigram.left];
    Symbol& right = symbols[bigram.right];
    if (left.length == 0 || right.length == 0 || left.length + right.length != bigram.size) continue;  // stale
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = bigram.left;
    try_add(left.prev, bigram.left);
    try_add(bigram.left, left.next);
  }

  for (int i = 0; i != -1; i = symbols[i].next) {
    const std::string_view piece = text.substr(symbols[i].offset, symbols[i].length);
    if (const Token id = find(piece); id >= 0) {
      out.push_back(id);
      continue;
    }
    // Byte fallback: <0xXX>, else the byte as a one-character token (llama.cpp aborts if neither
    // exists; we use the unknown token, or drop the byte when there is none).
    for (char c : piece) {
      const Token byte = byte_tokens_[static_cast<uint8_t>(c)];
      if (byte >= 0) out.push_back(byte);
      else if (unk_ >= 0) out.push_back(unk_);
    }
  }
}

void VocabImpl::tokenize_bpe(std::string_view text, std::vector<Token>& out) const {
  // Re-encode the way llama.cpp decodes: invalid bytes become U+FFFD. Code points PCRE2 cannot take
  // (surrogates) are replaced by U+E000 in the copy the regexes see; it has the same length and the
  // same character classes that matter ([^\s\p{L}\p{N}]), so the piece boundaries carry over.
  const std::vector<uint32_t> cpts = decode_utf8_lenient(text);
  std::string normalized;
  normalized.reserve(text.size() + 8);
  std::string shadow;
  for (uint32_t cpt : cpts) {
    if (cpt > 0x10FFFF) cpt = kReplacementChar;
    const size_t at = normalized.size();
    append_utf8(normalized, cpt);
    if (cpt >= 0xD800 && cpt <= 0xDFFF) {
      if (shadow.empty()) shadow = normalized.substr(0, at);
      append_utf8(shadow, 0xE000);
    } else if (!shadow.empty()) {
      shadow.append(normalized, at, std::string::npos);
    }
  }
  const std::vector<Piece> pieces = splitter_->split(shadow.empty() ? normalized : shadow);
  const auto& byte_map = gpt2_byte_to_utf8();
  std::string word;
  for (const Piece& piece : pieces) {
    word.clear();
    for (size_t i = piece.first; i < piece.second; ++i) word += byte_map[static_cast<uint8_t>(normalized[i])];
    tokenize_bpe_word(word, out);
  }
}

int32_t VocabImpl::merge_rank(Token left_id, std::string_view left, Token right_id, std::string_view right) const {
  if (left_id >= 0 && right_id >= 0) {
    const auto it = ranks_.find((static_cast<uint64_t>(left_id) << 32) | static_cast<uint32_t>(right_id));
    return it == ranks_.end() ? -1 : it->second;
  }
  if (ranks_by_text_.empty()) return -1;
  const auto it = ranks_by_text_.find(fmt::format("{}:{}{}", left.size(), left, right));
  return it == ranks_by_text_.end() ? -1 : it->second;
}

void VocabImpl::tokenize_bpe_word(std::string_view word, std::vector<Token>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (const Token id = find(word); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  std::vector<Symbol> symbols = split_chars(word);
  for (Symbol& s : symbols) s.id = find(word.substr(s.offset, s.length));
  auto text_of = [&](const Symbol& s) { return word.substr(s.offset, s.length); };

  std::priority_queue<BpeBigram, std::vector<BpeBigram>, BpeOrder> queue;
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[left];
    const Symbol& r = symbols[right];
    const int32_t rank = merge_rank(l.id, text_of(l), r.id, text_of(r));
    if (rank >= 0) queue.push(BpeBigram{left, right, rank, l.length + r.length});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const BpeBigram bigram = queue.top();
    queue.pop();
    Symbol& left = symbols[bigram.left];
    Symbol& right = symbols[bigram.right];
    if (left.length == 0 || right.length == 0 || left.length + right.length != bigram.size) continue;  // stale
    left.length += right.length;
    right.length = 0;
    left.id = find(text_of(left));
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = bigram.left;
    try_add(left.prev, bigram.left);
    try_add(bigram.left, left.next);
  }

  for (int i = 0; i != -1; i = symbols[i].next) {
    const Symbol& s = symbols[i];
    if (s.id >= 0) {
      out.push_back(s.id);
      continue;
    }
    // As llama.cpp: look each byte up as a one-byte token and drop the bytes that are not tokens.
    for (char c : text_of(s)) {
      if (const Token byte = byte_tokens_[static_cast<uint8_t>(c)]; byte >= 0) out.push_back(byte);
    }
  }
}

}  // namespace strata::text::detail
