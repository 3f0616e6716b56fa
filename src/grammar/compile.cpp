// From parsed rules to the matcher's form: UTF-8 byte sequences for code point ranges, the checks
// that keep matching finite (no left recursion; alternatives that can never finish are dropped),
// and flattening into one element array.
#include <algorithm>
#include <map>

#include "grammar/grammar_impl.h"

namespace strata::grammar {

namespace {

void encode(uint32_t cp, uint8_t* out, int& n) {
  if (cp < 0x80) {
    out[0] = static_cast<uint8_t>(cp);
    n = 1;
  } else if (cp < 0x800) {
    out[0] = static_cast<uint8_t>(0xC0 | (cp >> 6));
    out[1] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    n = 2;
  } else if (cp < 0x10000) {
    out[0] = static_cast<uint8_t>(0xE0 | (cp >> 12));
    out[1] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
    out[2] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    n = 3;
  } else {
    out[0] = static_cast<uint8_t>(0xF0 | (cp >> 18));
    out[1] = static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3F));
    out[2] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
    out[3] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    n = 4;
  }
}

// Splits [lo, hi] until each piece is one sequence of byte ranges (the method of RE2 and Rust's
// regex-syntax): same encoded length, and every continuation position spans a whole block or a
// single prefix.
void split_range(uint32_t lo, uint32_t hi, std::vector<std::vector<ByteRange>>& out) {
  if (lo > hi) return;
  if (lo <= 0xDFFF && hi >= 0xD800) {
    if (lo < 0xD800) split_range(lo, 0xD7FF, out);
    if (hi > 0xDFFF) split_range(0xE000, hi, out);
    return;
  }
  for (uint32_t max : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= max && hi > max) {
      split_range(lo, max, out);
      split_range(max + 1, hi, out);
      return;
    }
  }
  if (hi <= 0x7F) {
    out.push_back({ByteRange{static_cast<uint8_t>(lo), static_cast<uint8_t>(hi)}});
    return;
  }
  for (int i = 1; i < 4; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split_range(lo, lo | m, out);
        split_range((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split_range(lo, (hi & ~m) - 1, out);
        split_range(hi & ~m, hi, out);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  int na = 0, nb = 0;
  encode(lo, a, na);
  encode(hi, b, nb);
  std::vector<ByteRange> seq;
  for (int i = 0; i < na; ++i) seq.push_back(ByteRange{a[i], b[i]});
  out.push_back(std::move(seq));
}

// Occurrences of each rule inside alternatives: (rule, alternative) once per occurrence.
struct Uses {
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> of_rule;
};

Uses uses_of(const std::vector<std::vector<Alternative>>& rules) {
  Uses u;
  u.of_rule.resize(rules.size());
  for (uint32_t r = 0; r < rules.size(); ++r) {
    for (uint32_t a = 0; a < rules[r].size(); ++a) {
      for (const Symbol& s : rules[r][a]) {
        if (s.is_rule) u.of_rule[s.value].emplace_back(r, a);
      }
    }
  }
  return u;
}

// Least fixpoint "rule derives X" where an alternative derives X when all its rule symbols do and
// `terminal_ok` holds for each byte set (nullable: no byte set allowed; productive: non-empty sets).
std::vector<bool> fixpoint(const std::vector<std::vector<Alternative>>& rules, const Uses& uses,
                           const std::vector<std::bitset<256>>& sets, bool nullable) {
  std::vector<bool> has(rules.size(), false);
  std::vector<std::vector<int64_t>> pending(rules.size());
  std::vector<uint32_t> work;
  auto mark = [&](uint32_t r) {
    if (!has[r]) {
      has[r] = true;
      work.push_back(r);
    }
  };
  for (uint32_t r = 0; r < rules.size(); ++r) {
    pending[r].resize(rules[r].size());
    for (uint32_t a = 0; a < rules[r].size(); ++a) {
      int64_t n = 0;
      for (const Symbol& s : rules[r][a]) {
        if (s.is_rule) {
          ++n;
        } else if (nullable || sets[s.value].none()) {
          n = -1;  // a byte set blocks this alternative for good
          break;
        }
      }
      pending[r][a] = n;
      if (n == 0) mark(r);
    }
  }
  while (!work.empty()) {
    const uint32_t r = work.back();
    work.pop_back();
    for (auto [user, alt] : uses.of_rule[r]) {
      if (pending[user][alt] > 0 && --pending[user][alt] == 0) mark(user);
    }
  }
  return has;
}

// A cycle of rules each reachable from the previous one without consuming input, as "a -> b -> a".
std::string left_recursion(const std::vector<std::vector<Alternative>>& rules, const std::vector<bool>& nullable,
                           const std::vector<std::string>& names) {
  std::vector<std::vector<uint32_t>> edges(rules.size());
  for (uint32_t r = 0; r < rules.size(); ++r) {
    for (const Alternative& alt : rules[r]) {
      for (const Symbol& s : alt) {
        if (!s.is_rule) break;
        edges[r].push_back(s.value);
        if (!nullable[s.value]) break;
      }
    }
  }
  // Iterative DFS: 0 unseen, 1 on the path, 2 done.
  std::vector<uint8_t> color(rules.size(), 0);
  std::vector<std::pair<uint32_t, size_t>> path;
  for (uint32_t start = 0; start < rules.size(); ++start) {
    if (color[start]) continue;
    path.emplace_back(start, 0);
    color[start] = 1;
    while (!path.empty()) {
      auto& [r, next] = path.back();
      if (next == edges[r].size()) {
        color[r] = 2;
        path.pop_back();
        continue;
      }
      const uint32_t s = edges[r][next++];
      if (color[s] == 1) {
        std::string cycle;
        bool on = false;
        for (const auto& [p, unused] : path) {
          on = on || p == s;
          if (on) cycle += names[p] + " -> ";
        }
        return cycle + names[s];
      }
      if (color[s] == 0) {
        color[s] = 1;
        path.emplace_back(s, 0);
      }
    }
  }
  return {};
}

// Classes of bytes that belong to exactly the same byte sets.
void assign_byte_classes(Grammar& g) {
  std::map<std::vector<bool>, uint8_t> classes;
  for (int b = 0; b < 256; ++b) {
    std::vector<bool> membership(g.byte_sets.size());
    for (size_t i = 0; i < g.byte_sets.size(); ++i) membership[i] = g.byte_sets[i].test(static_cast<size_t>(b));
    auto [it, added] = classes.emplace(std::move(membership), static_cast<uint8_t>(classes.size()));
    g.byte_class[static_cast<size_t>(b)] = it->second;
  }
  g.n_byte_classes = static_cast<uint32_t>(classes.size());
}

}  // namespace

std::vector<std::vector<ByteRange>> utf8_sequences(uint32_t lo, uint32_t hi) {
  std::vector<std::vector<ByteRange>> out;
  split_range(lo, std::min<uint32_t>(hi, 0x10FFFF), out);
  return out;
}

Result<std::shared_ptr<const Grammar>> finish_grammar(std::vector<std::vector<Alternative>> rules,
                                                      std::vector<std::bitset<256>> byte_sets,
                                                      std::vector<std::string> names, uint32_t root) {
  const Uses uses = uses_of(rules);
  const std::vector<bool> productive = fixpoint(rules, uses, byte_sets, false);
  if (!productive[root]) return make_error(ErrorCode::kInvalidArgument, "grammar matches no finite text: rule 'root' never ends");
  // Alternatives that can never finish would lead generation into a dead end: drop them.
  for (auto& alts : rules) {
    std::erase_if(alts, [&](const Alternative& alt) {
      return std::any_of(alt.begin(), alt.end(), [&](const Symbol& s) {
        return s.is_rule ? !productive[s.value] : byte_sets[s.value].none();
      });
    });
  }
  const std::vector<bool> nullable = fixpoint(rules, uses_of(rules), byte_sets, true);
  if (std::string cycle = left_recursion(rules, nullable, names); !cycle.empty()) {
    return make_error(ErrorCode::kInvalidArgument, "left recursion is not supported: {}", cycle);
  }
  auto g = std::make_shared<Grammar>();
  g->rule_alternatives.resize(rules.size());
  for (uint32_t r = 0; r < rules.size(); ++r) {
    for (const Alternative& alt : rules[r]) {
      g->rule_alternatives[r].push_back(static_cast<uint32_t>(g->elements.size()));
      for (const Symbol& s : alt) {
        g->elements.push_back(Element{s.is_rule ? Element::kRule : Element::kBytes, s.value});
      }
      g->elements.push_back(Element{Element::kEnd, 0});
    }
  }
  g->byte_sets = std::move(byte_sets);
  g->rule_names = std::move(names);
  g->root = root;
  assign_byte_classes(*g);
  return std::shared_ptr<const Grammar>(std::move(g));
}

}  // namespace strata::grammar
