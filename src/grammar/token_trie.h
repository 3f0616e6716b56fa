// A vocabulary's token texts as a byte trie in preorder, built once per vocabulary and shared: the
// matcher walks it with the grammar's state so a prefix common to many tokens is checked once, and
// a subtree the grammar refuses is skipped whole.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "text/vocab.h"

namespace strata::grammar {

struct TokenTrie {
  // A radix trie (chains of single-child nodes without tokens merged) in preorder, root left out.
  // Node i: its edge bytes edges[edge_begin[i], edge_begin[i+1]), its level (1 below the root), the
  // index just past its subtree, the tokens whose text ends there: tokens[token_begin[i], token_begin[i+1]).
  std::string edges;
  std::vector<uint32_t> edge_begin;
  std::vector<uint16_t> level;
  std::vector<uint32_t> skip;
  std::vector<uint32_t> token_begin;
  std::vector<text::Token> tokens;
  uint16_t max_level = 0;
  size_t n_byte_nodes = 0;  // nodes of the uncompressed byte trie (for the benchmarks)
  // By token id: its text (what generation emits; empty for control tokens, never allowed) and
  // whether it ends generation.
  std::vector<uint32_t> text_begin;  // n_tokens + 1 offsets into text_bytes
  std::string text_bytes;
  std::vector<uint8_t> eog;
  std::vector<text::Token> eog_tokens;
  int32_t n_tokens = 0;

  std::string_view text(text::Token t) const {
    return std::string_view(text_bytes).substr(text_begin[t], text_begin[t + 1] - text_begin[t]);
  }
};

// The trie of `vocab`, from a small process-wide cache (keyed by the vocabulary's address, size and
// a sample of its texts) or built now (tens of milliseconds for 150k tokens).
std::shared_ptr<const TokenTrie> token_trie(const text::Vocab& vocab);

}  // namespace strata::grammar
