// GBNF text -> rules of alternatives (grammar_impl.h). A recursive-descent parser over bytes with a
// position for every error; groups, classes with non-ASCII characters and repetitions become
// generated rules, so a repetition costs one rule per optional copy and nothing is copied twice.
#include <algorithm>
#include <unordered_map>

#include "grammar/grammar_impl.h"

namespace strata::grammar {

namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

// Sorted, merged; the complement over all code points when `negated`.
Ranges normalize(Ranges r, bool negated) {
  std::sort(r.begin(), r.end());
  Ranges merged;
  for (auto [lo, hi] : r) {
    if (!merged.empty() && lo <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, hi);
    } else {
      merged.emplace_back(lo, hi);
    }
  }
  if (!negated) return merged;
  Ranges out;
  uint32_t next = 0;
  for (auto [lo, hi] : merged) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.emplace_back(next, kMaxCodePoint);
  return out;
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Result<std::shared_ptr<const Grammar>> run() {
    if (text_.size() > kMaxGrammarBytes) {
      return make_error(ErrorCode::kInvalidArgument, "grammar is {} bytes, over the limit of {}", text_.size(), kMaxGrammarBytes);
    }
    STRATA_TRY(parse_rules());
    for (uint32_t r = 0; r < rules_.size(); ++r) {
      if (!defined_[r]) return fail_at(first_use_[r], fmt::format("undefined rule '{}'", names_[r]));
    }
    const auto root = ids_.find("root");
    if (root == ids_.end()) return make_error(ErrorCode::kInvalidArgument, "grammar has no rule named 'root'");
    return finish_grammar(std::move(rules_), std::move(sets_), std::move(names_), root->second);
  }

 private:
  Error fail_at(size_t at, std::string what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return make_error(ErrorCode::kInvalidArgument, "grammar line {}, column {}: {}", line, col, what);
  }
  Error fail(std::string what) const { return fail_at(pos_, std::move(what)); }

  bool eof() const { return pos_ >= text_.size(); }
  char peek() const { return eof() ? '\0' : text_[pos_]; }

  // Spaces, tabs and comments; newlines too when `newlines`.
  void skip_space(bool newlines) {
    while (!eof()) {
      const char c = text_[pos_];
      if (c == '#') {
        while (!eof() && text_[pos_] != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        ++pos_;
      } else {
        return;
      }
    }
  }

  Status parse_rules() {
    skip_space(true);
    while (!eof()) {
      const size_t start = pos_;
      std::string name = parse_name();
      if (name.empty()) return fail(fmt::format("expected a rule name, found '{}'", peek()));
      skip_space(false);
      if (text_.substr(pos_, 3) != "::=") return fail(fmt::format("expected '::=' after rule name '{}'", name));
      pos_ += 3;
      skip_space(true);
      STRATA_ASSIGN(const uint32_t id, rule_id(name, start));
      if (defined_[id]) return fail_at(start, fmt::format("rule '{}' is defined twice", name));
      defined_[id] = true;
      STRATA_TRY(parse_alternates(id, false));
      if (!eof() && peek() != '\n') return fail(fmt::format("unexpected '{}'", peek()));
      skip_space(true);
    }
    return ok_status();
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (!eof() && is_name_char(text_[pos_])) ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }

  Result<uint32_t> rule_id(const std::string& name, size_t at) {
    if (auto it = ids_.find(name); it != ids_.end()) return it->second;
    STRATA_ASSIGN(const uint32_t id, new_rule(name, at));
    ids_.emplace(name, id);
    return id;
  }

  Result<uint32_t> new_rule(std::string name, size_t at) {
    if (rules_.size() >= kMaxRules) return fail_at(at, fmt::format("more than {} rules (repetitions and groups count)", kMaxRules));
    rules_.emplace_back();
    names_.push_back(std::move(name));
    defined_.push_back(false);
    first_use_.push_back(at);
    return static_cast<uint32_t>(rules_.size() - 1);
  }

  Result<uint32_t> generated_rule(uint32_t parent, size_t at) {
    STRATA_ASSIGN(const uint32_t id, new_rule(fmt::format("{}_{}", names_[parent], rules_.size()), at));
    defined_[id] = true;
    return id;
  }

  Status add_alternative(uint32_t rule, Alternative alt) {
    n_symbols_ += alt.size() + 1;
    if (n_symbols_ > kMaxElements) return fail(fmt::format("grammar expands to more than {} symbols", kMaxElements));
    rules_[rule].push_back(std::move(alt));
    return ok_status();
  }

  Status parse_alternates(uint32_t rule, bool nested) {
    while (true) {
      Alternative alt;
      STRATA_TRY(parse_sequence(rule, nested, alt));
      STRATA_TRY(add_alternative(rule, std::move(alt)));
      if (peek() != '|') return ok_status();
      ++pos_;
      skip_space(true);
    }
  }

  // At a newline outside parentheses the rule ends, unless the next line goes on with '|'.
  bool continues_on_next_line() {
    size_t save = pos_;
    skip_space(true);
    if (peek() == '|') return true;
    pos_ = save;
    return false;
  }

  Status parse_sequence(uint32_t rule, bool nested, Alternative& alt) {
    size_t unit_start = alt.size();
    bool have_unit = false;
    while (true) {
      skip_space(nested);
      if (!nested && peek() == '\n' && continues_on_next_line()) return ok_status();
      const char c = peek();
      const size_t before = alt.size();
      if (c == '"') {
        STRATA_TRY(parse_literal(alt));
      } else if (c == '[' || c == '.') {
        STRATA_TRY(parse_class(rule, alt));
      } else if (c == '(') {
        STRATA_TRY(parse_group(rule, alt));
      } else if (is_name_char(c)) {
        const size_t at = pos_;
        STRATA_ASSIGN(const uint32_t id, rule_id(parse_name(), at));
        alt.push_back(Symbol{true, id});
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (!have_unit) return fail(fmt::format("'{}' repeats nothing", c));
        STRATA_TRY(parse_repetition(rule, alt, unit_start));
        have_unit = false;  // x** is refused
        continue;
      } else {
        return ok_status();
      }
      unit_start = before;
      have_unit = true;
    }
  }

  Status parse_group(uint32_t rule, Alternative& alt) {
    const size_t open = pos_++;
    if (++depth_ > kMaxNesting) return fail_at(open, fmt::format("parentheses nested deeper than {}", kMaxNesting));
    STRATA_ASSIGN(const uint32_t id, generated_rule(rule, open));
    skip_space(true);
    STRATA_TRY(parse_alternates(id, true));
    if (peek() != ')') return fail_at(open, eof() ? "unclosed '('" : fmt::format("expected ')', found '{}'", peek()));
    ++pos_;
    --depth_;
    alt.push_back(Symbol{true, id});
    return ok_status();
  }

  // One character of a literal or class: an escape or one UTF-8 encoded code point.
  Result<uint32_t> parse_char() {
    const size_t at = pos_;
    const auto b = static_cast<uint8_t>(text_[pos_]);
    if (b == '\\') {
      if (pos_ + 1 >= text_.size()) return fail("escape at the end of the grammar");
      const char e = text_[pos_ + 1];
      pos_ += 2;
      switch (e) {
        case 'n': return uint32_t{'\n'};
        case 'r': return uint32_t{'\r'};
        case 't': return uint32_t{'\t'};
        case '\\': case '"': case '[': case ']': case '-': case '/': case '\'': case '^': return uint32_t(e);
        case 'x': return parse_hex(2, at);
        case 'u': return parse_hex(4, at);
        case 'U': return parse_hex(8, at);
        default: return fail_at(at, fmt::format("unknown escape '\\{}'", e));
      }
    }
    int len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (len == 0 || pos_ + len > text_.size()) return fail("invalid UTF-8 in the grammar");
    uint32_t cp = len == 1 ? b : b & (0x7F >> len);
    for (int i = 1; i < len; ++i) {
      const auto c = static_cast<uint8_t>(text_[pos_ + i]);
      if ((c & 0xC0) != 0x80) return fail("invalid UTF-8 in the grammar");
      cp = (cp << 6) | (c & 0x3F);
    }
    static constexpr uint32_t kMinOfLength[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMinOfLength[len] || cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return fail("invalid UTF-8 in the grammar");  // overlong, a surrogate or past U+10FFFF
    }
    pos_ += len;
    return cp;
  }

  Result<uint32_t> parse_hex(int digits, size_t at) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const int d = eof() ? -1 : hex_digit(text_[pos_]);
      if (d < 0) return fail_at(at, fmt::format("escape needs {} hex digits", digits));
      v = v * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    if (v > kMaxCodePoint || (v >= 0xD800 && v <= 0xDFFF)) return fail_at(at, fmt::format("U+{:X} is not a character", v));
    return v;
  }

  uint32_t byte_set(const std::bitset<256>& set) {
    auto [it, added] = set_ids_.emplace(set, static_cast<uint32_t>(sets_.size()));
    if (added) sets_.push_back(set);
    return it->second;
  }

  Status parse_literal(Alternative& alt) {
    const size_t open = pos_++;
    while (true) {
      if (eof() || peek() == '\n') return fail_at(open, "unterminated literal");
      if (peek() == '"') break;
      STRATA_ASSIGN(const uint32_t cp, parse_char());
      uint8_t bytes[4];
      const int n = encode_utf8(cp, bytes);
      for (int i = 0; i < n; ++i) {
        std::bitset<256> one;
        one.set(bytes[i]);
        alt.push_back(Symbol{false, byte_set(one)});
      }
    }
    ++pos_;
    return ok_status();
  }

  static int encode_utf8(uint32_t cp, uint8_t* out) {
    const auto seqs = utf8_sequences(cp, cp);
    for (size_t i = 0; i < seqs[0].size(); ++i) out[i] = seqs[0][i].first;
    return static_cast<int>(seqs[0].size());
  }

  Status parse_class(uint32_t rule, Alternative& alt) {
    const size_t open = pos_;
    Ranges ranges;
    bool negated = false;
    if (peek() == '.') {
      ++pos_;
      negated = true;
    } else {
      ++pos_;
      if (peek() == '^') {
        negated = true;
        ++pos_;
      }
      while (true) {
        if (eof() || peek() == '\n') return fail_at(open, "unterminated character class");
        if (peek() == ']') break;
        STRATA_ASSIGN(const uint32_t lo, parse_char());
        uint32_t hi = lo;
        if (peek() == '-' && pos_ + 1 < text_.size() && text_[pos_ + 1] != ']') {
          ++pos_;
          if (eof()) return fail_at(open, "unterminated character class");
          STRATA_ASSIGN(hi, parse_char());
          if (hi < lo) return fail_at(open, fmt::format("class range U+{:X}-U+{:X} is reversed", lo, hi));
        }
        ranges.emplace_back(lo, hi);
      }
      ++pos_;
    }
    return add_class(rule, normalize(std::move(ranges), negated), open, alt);
  }

  // ASCII-only classes are one byte set; others a rule whose alternatives are UTF-8 sequences.
  Status add_class(uint32_t rule, const Ranges& ranges, size_t at, Alternative& alt) {
    std::bitset<256> ascii;
    std::vector<std::vector<ByteRange>> multi;
    for (auto [lo, hi] : ranges) {
      for (auto& seq : utf8_sequences(lo, hi)) {
        if (seq.size() == 1) {
          for (int b = seq[0].first; b <= seq[0].last; ++b) ascii.set(static_cast<size_t>(b));
        } else {
          multi.push_back(std::move(seq));
        }
      }
    }
    if (multi.empty()) {
      alt.push_back(Symbol{false, byte_set(ascii)});
      return ok_status();
    }
    std::string key;
    for (auto [lo, hi] : ranges) key += fmt::format("{:x}-{:x},", lo, hi);
    if (auto it = class_rules_.find(key); it != class_rules_.end()) {
      alt.push_back(Symbol{true, it->second});
      return ok_status();
    }
    STRATA_ASSIGN(const uint32_t id, generated_rule(rule, at));
    if (ascii.any()) {
      STRATA_TRY(add_alternative(id, {Symbol{false, byte_set(ascii)}}));
    }
    for (const auto& seq : multi) {
      Alternative a;
      for (ByteRange r : seq) {
        std::bitset<256> set;
        for (int b = r.first; b <= r.last; ++b) set.set(static_cast<size_t>(b));
        a.push_back(Symbol{false, byte_set(set)});
      }
      STRATA_TRY(add_alternative(id, std::move(a)));
    }
    class_rules_.emplace(std::move(key), id);
    alt.push_back(Symbol{true, id});
    return ok_status();
  }

  Result<int> parse_count() {
    skip_space(true);
    const size_t at = pos_;
    int64_t v = 0;
    while (!eof() && peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      ++pos_;
      if (v > kMaxRepetition) return fail_at(at, fmt::format("repetition count is over the limit of {}", kMaxRepetition));
    }
    if (pos_ == at) return fail("expected a number in the repetition");
    skip_space(true);
    return static_cast<int>(v);
  }

  Status parse_repetition(uint32_t rule, Alternative& alt, size_t unit_start) {
    const size_t at = pos_;
    const char op = text_[pos_++];
    int min = 0, max = -1;  // max -1: unbounded
    if (op == '+') min = 1;
    if (op == '?') max = 1;
    if (op == '{') {
      STRATA_ASSIGN(min, parse_count());
      max = min;
      if (peek() == ',') {
        ++pos_;
        skip_space(true);
        max = -1;
        if (peek() != '}') {
          STRATA_ASSIGN(max, parse_count());
        }
      }
      if (peek() != '}') return fail_at(at, "expected '}' to close the repetition");
      ++pos_;
      if (max >= 0 && max < min) return fail_at(at, fmt::format("repetition {{{},{}}} has max below min", min, max));
    }
    if (alt.size() == unit_start) return ok_status();  // repeating "" is ""
    Symbol unit = alt[unit_start];
    if (alt.size() - unit_start > 1) {  // a literal of several bytes repeats as a whole
      STRATA_ASSIGN(const uint32_t id, generated_rule(rule, at));
      STRATA_TRY(add_alternative(id, Alternative(alt.begin() + static_cast<ptrdiff_t>(unit_start), alt.end())));
      unit = Symbol{true, id};
    }
    n_symbols_ += static_cast<size_t>(min) + 1;
    if (n_symbols_ > kMaxElements) return fail_at(at, fmt::format("grammar expands to more than {} symbols", kMaxElements));
    alt.resize(unit_start);
    for (int i = 0; i < min; ++i) alt.push_back(unit);
    if (max < 0) {  // R ::= unit R | ""  (the tail call keeps parse stacks flat)
      STRATA_ASSIGN(const uint32_t star, generated_rule(rule, at));
      STRATA_TRY(add_alternative(star, {unit, Symbol{true, star}}));
      STRATA_TRY(add_alternative(star, {}));
      alt.push_back(Symbol{true, star});
    } else if (max > min) {  // C_k ::= unit C_(k-1) | "", C_1 ::= unit | ""
      uint32_t prev = 0;
      for (int k = 1; k <= max - min; ++k) {
        STRATA_ASSIGN(const uint32_t c, generated_rule(rule, at));
        Alternative a{unit};
        if (k > 1) a.push_back(Symbol{true, prev});
        STRATA_TRY(add_alternative(c, std::move(a)));
        STRATA_TRY(add_alternative(c, {}));
        prev = c;
      }
      alt.push_back(Symbol{true, prev});
    }
    return ok_status();
  }

  std::string_view text_;
  size_t pos_ = 0;
  int depth_ = 0;
  size_t n_symbols_ = 0;
  std::vector<std::vector<Alternative>> rules_;
  std::vector<std::string> names_;
  std::vector<bool> defined_;
  std::vector<size_t> first_use_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<std::bitset<256>> sets_;
  std::unordered_map<std::bitset<256>, uint32_t> set_ids_;
  std::unordered_map<std::string, uint32_t> class_rules_;
};

}  // namespace

Result<std::shared_ptr<const Grammar>> parse_gbnf(std::string_view text) { return Parser(text).run(); }

}  // namespace strata::grammar
