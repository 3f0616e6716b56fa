// Python's str methods that search, split, join and rewrite text. Each one runs in linear time (glibc's
// memmem is the two-way algorithm, so no text can make a search quadratic), charges its work to the
// step budget and computes the size of what it builds before building it.
#include <string.h>  // memmem (a GNU extension)

#include <algorithm>
#include <cctype>
#include <climits>

#include "jinja/interp.h"

namespace strata::jinja {

bool is_py_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }

// memmem over growing windows (overlapping by len(sub) - 1, so no match is missed): each call costs about
// the distance to the match, not the rest of the text, so finding every match in turn (count, split,
// replace) stays linear. (AddressSanitizer checks the whole range given to memmem, so this matters there.)
size_t find_sub(std::string_view s, std::string_view sub, size_t from) {
  if (from > s.size()) return std::string_view::npos;
  if (sub.empty()) return from;
  size_t window = std::max<size_t>(2 * sub.size(), 256);
  for (size_t start = from; s.size() - start >= sub.size();) {
    const size_t len = std::min(window, s.size() - start);
    if (const void* at = memmem(s.data() + start, len, sub.data(), sub.size())) {
      return static_cast<size_t>(static_cast<const char*>(at) - s.data());
    }
    if (len == s.size() - start) break;
    start += len - sub.size() + 1;
    window *= 2;
  }
  return std::string_view::npos;
}

namespace {

std::string reversed(std::string_view s) { return std::string(s.rbegin(), s.rend()); }


// CPython's split with a separator: add(begin, end) for each part, left to right.
template <typename Add>
void split_sep(std::string_view s, std::string_view sep, int64_t maxsplit, Add add) {
  size_t i = 0;
  for (int64_t n = 0; maxsplit < 0 || n < maxsplit; ++n) {
    const size_t at = find_sub(s, sep, i);
    if (at == std::string_view::npos) break;
    add(i, at);
    i = at + sep.size();
  }
  add(i, s.size());
}

// CPython's split_whitespace / rsplit_whitespace: add(begin, end) for each part, in the order found.
template <typename Add>
void split_space(std::string_view s, int64_t maxsplit, bool from_right, Add add) {
  auto space = [&](size_t k) { return is_py_space(static_cast<unsigned char>(s[k])); };
  const size_t len = s.size();
  if (!from_right) {
    size_t i = 0;
    for (int64_t n = 0; maxsplit < 0 || n < maxsplit; ++n) {
      while (i < len && space(i)) ++i;
      if (i == len) break;
      const size_t j = i;
      while (i < len && !space(i)) ++i;
      add(j, i);
    }
    while (i < len && space(i)) ++i;
    if (i < len) add(i, len);
    return;
  }
  size_t i = len;  // one past the byte CPython's index points at
  for (int64_t n = 0; maxsplit < 0 || n < maxsplit; ++n) {
    while (i > 0 && space(i - 1)) --i;
    if (i == 0) break;
    const size_t j = i;
    while (i > 0 && !space(i - 1)) --i;
    add(i, j);
  }
  while (i > 0 && space(i - 1)) --i;
  if (i > 0) add(0, i);
}

}  // namespace

size_t rfind_sub(std::string_view s, std::string_view sub) {
  if (sub.size() > s.size()) return std::string_view::npos;
  // The last match is the first match of the reversed needle in the reversed text.
  const size_t at = find_sub(reversed(s), reversed(sub));
  return at == std::string_view::npos ? at : s.size() - at - sub.size();
}

Result<std::string_view> py_strip(Interp& in, std::string_view s, const Value& chars, bool left, bool right) {
  size_t b = 0, e = s.size();
  if (chars.is_none() || chars.is_undefined()) {
    while (left && b < e && is_py_space(static_cast<unsigned char>(s[b]))) ++b;
    while (right && e > b && is_py_space(static_cast<unsigned char>(s[e - 1]))) --e;
    STRATA_TRY(in.count_bytes(b + s.size() - e));
    return s.substr(b, e - b);
  }
  // A set of characters: single bytes in a table, longer UTF-8 sequences sorted for binary search.
  std::string holder;
  STRATA_ASSIGN(std::string_view set_text, in.text(chars, holder));
  STRATA_TRY(in.count_bytes(set_text.size()));
  STRATA_TRY(in.reserve_bytes(set_text.size() * sizeof(std::string_view)));
  bool single[256] = {};
  std::vector<std::string_view> multi;
  for (size_t i = 0; i < set_text.size();) {
    const size_t len = utf8_char_len(set_text, i);
    if (len == 1) {
      single[static_cast<unsigned char>(set_text[i])] = true;
    } else {
      multi.push_back(set_text.substr(i, len));
    }
    i += len;
  }
  std::sort(multi.begin(), multi.end());
  auto in_set = [&](size_t at, size_t len) {
    if (len == 1) return single[static_cast<unsigned char>(s[at])];
    return std::binary_search(multi.begin(), multi.end(), s.substr(at, len));
  };
  while (left && b < e) {
    const size_t len = utf8_char_len(s, b);
    if (!in_set(b, len)) break;
    b += len;
  }
  while (right && e > b) {
    const size_t start = utf8_prev_start(s, e);
    if (!in_set(start, e - start)) break;
    e = start;
  }
  STRATA_TRY(in.count_bytes(b + s.size() - e));
  return s.substr(b, e - b);
}

Result<Value> py_replace(Interp& in, std::string_view s, std::string_view old, std::string_view repl, int64_t count) {
  STRATA_TRY(in.count_bytes(s.size() + old.size()));
  // Count the replacements first, so the result's size is known before it is built.
  size_t n = 0;
  if (old.empty()) {  // Python inserts the replacement around every character
    n = utf8_length(s) + 1;
    if (count >= 0) n = std::min(n, static_cast<size_t>(count));
  } else {
    for (size_t at = find_sub(s, old); at != std::string_view::npos && (count < 0 || n < static_cast<size_t>(count));
         at = find_sub(s, old, at + old.size())) {
      ++n;
    }
  }
  const size_t size = checked_add(s.size() - n * old.size(), checked_mul(n, repl.size()));
  STRATA_TRY(in.reserve_string(size));
  std::string out;
  out.reserve(size);
  if (old.empty()) {
    size_t i = 0;
    for (size_t k = 0; k < n; ++k) {
      out.append(repl);
      if (i < s.size()) {
        const size_t len = utf8_char_len(s, i);
        out.append(s.substr(i, len));
        i += len;
      }
    }
    out.append(s.substr(i));
    return in.make_string(std::move(out), true);
  }
  size_t start = 0;
  for (size_t k = 0; k < n; ++k) {
    const size_t at = find_sub(s, old, start);
    out.append(s.substr(start, at - start)).append(repl);
    start = at + old.size();
  }
  out.append(s.substr(start));
  return in.make_string(std::move(out), true);
}

// The list of the substrings [b, e) of s that `run(add)` reports (reversed when asked): counted
// first, so that the budget refuses before anything is built, then built.
template <typename Run>
Result<Value> substrings(Interp& in, std::string_view s, const Run& run, bool reverse) {
  size_t parts = 0, bytes = 0;
  run([&](size_t b, size_t e) {
    ++parts;
    bytes += e - b;
  });
  STRATA_TRY(in.reserve_list(parts));
  STRATA_TRY(in.reserve_strings(parts, bytes));
  std::vector<Value> items;
  items.reserve(parts);
  run([&](size_t b, size_t e) { items.push_back(Value::string(std::string(s.substr(b, e - b)))); });
  if (reverse) std::reverse(items.begin(), items.end());
  return in.make_list(std::move(items), true);
}

Result<Value> py_split(Interp& in, std::string_view s, const Value& sep, int64_t maxsplit, bool from_right) {
  const bool by_space = sep.is_none() || sep.is_undefined();
  if (!by_space && !sep.is_string()) return make_error("split: the separator must be a string");
  if (!by_space && sep.str().empty()) return make_error("split: empty separator");
  STRATA_TRY(in.count_bytes(2 * s.size()));  // two passes: count, then build
  // rsplit with a separator is split of the reversed text (its matches, right to left, do not overlap).
  std::string rev_s, rev_sep;
  if (!by_space && from_right) {
    STRATA_TRY(in.reserve_bytes(s.size() + sep.str().size()));
    rev_s = reversed(s);
    rev_sep = reversed(sep.str());
  }
  auto run = [&](auto add) {
    if (by_space) return split_space(s, maxsplit, from_right, add);
    if (!from_right) return split_sep(s, sep.str(), maxsplit, add);
    split_sep(rev_s, rev_sep, maxsplit, [&](size_t b, size_t e) { add(s.size() - e, s.size() - b); });
  };
  return substrings(in, s, run, from_right);
}

Result<Value> py_splitlines(Interp& in, std::string_view s) {
  STRATA_TRY(in.count_bytes(2 * s.size()));
  auto run = [&](auto add) {
    size_t start = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '\n' || s[i] == '\r') {
        add(start, i);
        if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
        start = i + 1;
      }
    }
    if (start < s.size()) add(start, s.size());
  };
  return substrings(in, s, run, false);
}

Result<Value> py_join(Interp& in, std::string_view sep, const std::vector<Value>& items, const Value& attribute,
                      bool strings_only) {
  // The text of every item first (converted items are kept), then the exact size, then the result.
  STRATA_TRY(in.reserve_list(items.size()));
  std::vector<Value> texts;
  texts.reserve(items.size());
  size_t size = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    Value item = items[i];
    if (attribute.is_string()) {
      STRATA_ASSIGN(item, attr_path(in, item, attribute.str()));
    }
    if (strings_only && !item.is_string()) {
      return make_error("join: item {} is '{}', not a string", i, type_name(item));
    }
    STRATA_ASSIGN(Value t, in.stringify(item));
    size = checked_add(size, checked_add(t.str().size(), i ? sep.size() : 0));
    texts.push_back(std::move(t));
  }
  STRATA_TRY(in.reserve_string(size));
  std::string out;
  out.reserve(size);
  for (size_t i = 0; i < texts.size(); ++i) {
    if (i) out.append(sep);
    out.append(texts[i].str());
  }
  return in.make_string(std::move(out), true);
}

Result<Value> map_case(Interp& in, std::string_view s, CaseMap how) {
  STRATA_TRY(in.reserve_string(s.size()));
  std::string out(s);
  auto upper = [](char& c) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  };
  auto lower = [](char& c) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  };
  bool word_start = true;
  for (size_t i = 0; i < out.size(); ++i) {
    char& c = out[i];
    const auto u = static_cast<unsigned char>(c);
    switch (how) {
      case CaseMap::Upper: upper(c); break;
      case CaseMap::Lower: lower(c); break;
      case CaseMap::Capitalize: i == 0 ? upper(c) : lower(c); break;
      case CaseMap::Title:
      case CaseMap::JinjaTitle: {
        const bool boundary = how == CaseMap::JinjaTitle
                                  ? is_py_space(u) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<'
                                  : !(std::isalpha(u) || u >= 0x80);
        if (boundary) {
          word_start = true;
          break;
        }
        word_start ? upper(c) : lower(c);
        word_start = false;
        break;
      }
    }
  }
  return in.make_string(std::move(out), true);
}

bool is_lower(std::string_view s) {
  bool cased = false;
  for (char c : s) {
    if (c >= 'A' && c <= 'Z') return false;
    cased = cased || (c >= 'a' && c <= 'z');
  }
  return cased;
}

bool is_upper(std::string_view s) {
  bool cased = false;
  for (char c : s) {
    if (c >= 'a' && c <= 'z') return false;
    cased = cased || (c >= 'A' && c <= 'Z');
  }
  return cased;
}

}  // namespace strata::jinja
