#include "grammar/token_trie.h"

#include <algorithm>
#include <functional>
#include <mutex>

namespace strata::grammar {

namespace {

constexpr size_t kMaxTokenBytes = 65535;  // depth is 16 bits; longer texts are never allowed
constexpr size_t kCachedVocabs = 4;

// The uncompressed trie in preorder (node 0 the root): byte, index past the subtree, tokens ending.
struct ByteTrie {
  std::vector<uint8_t> byte{0};
  std::vector<uint32_t> skip{0};
  std::vector<uint32_t> ends{0};
  void add(uint8_t b) {
    byte.push_back(b);
    skip.push_back(0);
    ends.push_back(0);
  }
};

// Merges each chain of nodes with one child and no token into one radix node. Tokens keep their
// preorder, so each radix node's tokens are those of its chain's last node.
void compress(const ByteTrie& bt, TokenTrie& trie) {
  const uint32_t n = static_cast<uint32_t>(bt.byte.size());
  trie.n_byte_nodes = n;
  std::vector<std::pair<uint32_t, uint32_t>> open;  // (radix node, byte-trie index past its subtree)
  uint32_t tokens_so_far = 0;
  for (uint32_t head = 1; head < n;) {
    uint32_t last = head;
    while (bt.ends[last] == 0 && last + 1 < bt.skip[last] && bt.skip[last + 1] == bt.skip[last]) ++last;
    while (!open.empty() && open.back().second <= head) {
      trie.skip[open.back().first] = static_cast<uint32_t>(trie.level.size());
      open.pop_back();
    }
    const auto node = static_cast<uint32_t>(trie.level.size());
    trie.edge_begin.push_back(static_cast<uint32_t>(trie.edges.size()));
    for (uint32_t i = head; i <= last; ++i) trie.edges += static_cast<char>(bt.byte[i]);
    trie.level.push_back(static_cast<uint16_t>(open.size() + 1));
    trie.max_level = std::max<uint16_t>(trie.max_level, static_cast<uint16_t>(open.size() + 1));
    trie.skip.push_back(0);
    trie.token_begin.push_back(tokens_so_far);
    tokens_so_far += bt.ends[last];
    open.emplace_back(node, bt.skip[last]);
    head = last + 1;
  }
  for (const auto& [node, unused] : open) trie.skip[node] = static_cast<uint32_t>(trie.level.size());
  trie.edge_begin.push_back(static_cast<uint32_t>(trie.edges.size()));
  trie.token_begin.push_back(tokens_so_far);
}

std::shared_ptr<TokenTrie> build(const text::Vocab& vocab) {
  auto trie = std::make_shared<TokenTrie>();
  const int32_t n = std::max(vocab.n_tokens(), 0);
  trie->n_tokens = n;
  trie->eog.resize(static_cast<size_t>(n));
  trie->text_begin.reserve(static_cast<size_t>(n) + 1);
  for (text::Token t = 0; t < n; ++t) {
    trie->eog[t] = vocab.is_eog(t);
    if (trie->eog[t]) trie->eog_tokens.push_back(t);
    trie->text_begin.push_back(static_cast<uint32_t>(trie->text_bytes.size()));
    std::string piece = trie->eog[t] ? std::string() : vocab.token_to_piece(t, false);
    if (piece.size() <= kMaxTokenBytes) trie->text_bytes += piece;
  }
  trie->text_begin.push_back(static_cast<uint32_t>(trie->text_bytes.size()));

  std::vector<text::Token> order;
  for (text::Token t = 0; t < n; ++t) {
    if (!trie->text(t).empty()) order.push_back(t);
  }
  std::sort(order.begin(), order.end(), [&](text::Token a, text::Token b) {
    const auto ta = trie->text(a), tb = trie->text(b);
    return ta != tb ? ta < tb : a < b;
  });
  // Sorted texts arrive in preorder: keep the path to the last one, close nodes as it shrinks.
  ByteTrie bt;
  std::vector<uint32_t> path(1, 0);
  std::string_view prev;
  for (text::Token t : order) {
    const std::string_view p = trie->text(t);
    size_t common = 0;
    while (common < prev.size() && common < p.size() && prev[common] == p[common]) ++common;
    while (path.size() - 1 > common) {
      bt.skip[path.back()] = static_cast<uint32_t>(bt.byte.size());
      path.pop_back();
    }
    for (size_t d = common; d < p.size(); ++d) {
      path.push_back(static_cast<uint32_t>(bt.byte.size()));
      bt.add(static_cast<uint8_t>(p[d]));
    }
    ++bt.ends[path.back()];
    trie->tokens.push_back(t);
    prev = p;
  }
  for (uint32_t node : path) bt.skip[node] = static_cast<uint32_t>(bt.byte.size());
  compress(bt, *trie);
  return trie;
}

size_t fingerprint(const text::Vocab& vocab) {
  size_t h = std::hash<int32_t>{}(vocab.n_tokens()) ^ static_cast<size_t>(vocab.kind());
  const int32_t n = vocab.n_tokens();
  for (int32_t i = 0; i < 64 && n > 0; ++i) {
    const text::Token t = static_cast<text::Token>((static_cast<int64_t>(n) * i) / 64);
    h = h * 1000003u ^ std::hash<std::string>{}(vocab.token_to_piece(t, true));
  }
  return h;
}

struct CacheEntry {
  const text::Vocab* vocab;
  size_t fingerprint;
  std::shared_ptr<const TokenTrie> trie;
};

}  // namespace

std::shared_ptr<const TokenTrie> token_trie(const text::Vocab& vocab) {
  static std::mutex mutex;
  static std::vector<CacheEntry> cache;  // most recent last
  const size_t fp = fingerprint(vocab);
  {
    std::lock_guard lock(mutex);
    for (size_t i = 0; i < cache.size(); ++i) {
      if (cache[i].vocab == &vocab && cache[i].fingerprint == fp) {
        CacheEntry hit = cache[i];
        cache.erase(cache.begin() + static_cast<ptrdiff_t>(i));
        cache.push_back(hit);
        return hit.trie;
      }
    }
  }
  std::shared_ptr<const TokenTrie> trie = build(vocab);
  std::lock_guard lock(mutex);
  if (cache.size() >= kCachedVocabs) cache.erase(cache.begin());
  cache.push_back(CacheEntry{&vocab, fp, trie});
  return trie;
}

}  // namespace strata::grammar
