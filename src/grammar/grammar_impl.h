// The compiled form of a grammar: rules of alternatives over byte sets and rule references, all
// alternatives flattened into one element array (each ends with an End element), as the matcher
// walks them. Character classes and literals are already UTF-8 byte sequences here.
#pragma once

#include <array>
#include <bitset>
#include <cstdint>
#include <string>
#include <vector>

#include "grammar/grammar.h"

namespace strata::grammar {

struct Element {
  enum Kind : uint8_t { kBytes, kRule, kEnd };
  Kind kind = kEnd;
  uint32_t value = 0;  // kBytes: index into byte_sets; kRule: rule index
};

struct Grammar {
  std::vector<Element> elements;
  std::vector<std::vector<uint32_t>> rule_alternatives;  // per rule: positions in `elements`
  std::vector<std::bitset<256>> byte_sets;
  std::vector<std::string> rule_names;
  uint32_t root = 0;
  // Bytes every byte set treats alike share a class: transitions are stored per class (a JSON
  // grammar has ~20 classes), which keeps the matcher's tables small enough for the caches.
  std::array<uint8_t, 256> byte_class{};
  uint32_t n_byte_classes = 1;
};

// One alternative's symbols while a grammar is built (before flattening).
struct Symbol {
  bool is_rule = false;
  uint32_t value = 0;  // byte set index or rule index
};
using Alternative = std::vector<Symbol>;

// UTF-8 byte-range sequences covering the code points [lo, hi] (surrogates left out): each
// sequence is 1-4 byte ranges (first, last).
struct ByteRange {
  uint8_t first, last;
};
std::vector<std::vector<ByteRange>> utf8_sequences(uint32_t lo, uint32_t hi);

// Checks a built grammar (left recursion, rules that match no finite text) and flattens it.
Result<std::shared_ptr<const Grammar>> finish_grammar(std::vector<std::vector<Alternative>> rules,
                                                      std::vector<std::bitset<256>> byte_sets,
                                                      std::vector<std::string> names, uint32_t root);

}  // namespace strata::grammar
