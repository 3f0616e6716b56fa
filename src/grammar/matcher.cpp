// The matcher's state is a set of parse stacks (llama.cpp's method), but stacks are hash-consed
// (a stack is a node: the next grammar element and the stack below it) and sets are interned, so a
// set is a number and "set after byte b" is a table lookup once computed. Walking the vocabulary's
// trie is then one lookup per trie node, and states repeat (inside a string, after each value), so
// masking a 150k-token vocabulary touches the grammar only for new states.
#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "grammar/grammar_impl.h"
#include "grammar/token_trie.h"

namespace strata::grammar {

namespace {

constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
constexpr uint32_t kUnknown = kNone;
constexpr uint32_t kDead = 0;           // the empty set of stacks
constexpr uint32_t kEmptyStack = 0;     // the stack with nothing left: the grammar may end
constexpr uint32_t kMaxDepth = 1024;    // deeper nesting (e.g. JSON arrays) is not generated
constexpr size_t kMaxStacks = 2048;     // per set; more is an ambiguous grammar
constexpr size_t kMaxNodes = 1 << 21;   // caches are rebuilt from the current state past these
constexpr size_t kMaxSets = 1 << 13;    // up to 1 KiB of transitions each (4 bytes per byte class)
// Within one mask no cache is rebuilt; past these a walk stops making states (the mask may then
// leave out tokens, never let a wrong one in). 32 MiB of transitions at most.
constexpr size_t kHardMaxNodes = kMaxNodes * 4;
constexpr size_t kHardMaxSets = kMaxSets * 4;
constexpr size_t kCachedMasks = 8;      // allowed-token vectors kept for recent states

}  // namespace

class MatcherState {
 public:
  MatcherState(const Grammar& g, std::shared_ptr<const TokenTrie> trie) : g_(g), trie_(std::move(trie)) {
    reset_tables();
    std::vector<uint32_t> stacks;
    begin_closure();
    for (uint32_t alt : g_.rule_alternatives[g_.root]) closure(make_node(alt, kEmptyStack), stacks);
    current = intern(std::move(stacks));
  }

  const TokenTrie& trie() const { return *trie_; }
  bool can_end(uint32_t set) const { return sets_[set].can_end; }
  bool finished(uint32_t set) const { return sets_[set].finished; }
  bool overflowed() const { return overflowed_; }

  uint32_t next(uint32_t set, uint8_t byte) {
    const size_t at = static_cast<size_t>(set) * g_.n_byte_classes + g_.byte_class[byte];
    const uint32_t to = table_[at];
    if (to != kUnknown) return to / g_.n_byte_classes;
    const uint32_t computed = compute_next(set, byte);  // may grow table_: index again
    table_[at] = computed * g_.n_byte_classes;
    return computed;
  }

  // The set after a whole text, kDead when some byte is refused.
  uint32_t walk(uint32_t set, std::string_view text) {
    for (char c : text) {
      set = next(set, static_cast<uint8_t>(c));
      if (set == kDead) return kDead;
    }
    return set;
  }

  // Rebuilds the caches when they grew past their bounds (only `current` survives).
  void compact() {
    if (nodes_.size() < kMaxNodes && sets_.size() < kMaxSets) return;
    std::vector<std::vector<uint32_t>> stacks;  // positions, bottom first
    for (uint32_t s : stacks_of(current)) {
      std::vector<uint32_t> positions;
      for (uint32_t n = s; n != kEmptyStack; n = nodes_[n].parent) positions.push_back(nodes_[n].pos);
      std::reverse(positions.begin(), positions.end());
      stacks.push_back(std::move(positions));
    }
    reset_tables();
    std::vector<uint32_t> ids;
    for (const auto& positions : stacks) {
      uint32_t n = kEmptyStack;
      for (uint32_t pos : positions) n = make_node(pos, n);
      ids.push_back(n);
    }
    std::sort(ids.begin(), ids.end());
    current = intern(std::move(ids));
  }

  // After an end-of-generation token: only the end is left.
  void end() { current = intern({kEmptyStack}); }

  uint32_t current = kDead;

 private:
  struct Node {
    uint32_t pos, parent, depth;
  };
  struct Set {
    uint32_t begin, size;
    bool can_end, finished;
  };

  void reset_tables() {
    nodes_.assign(1, Node{kNone, kNone, 0});
    node_ids_.clear();
    stamp_.assign(1, 0);
    sets_.clear();
    set_stacks_.clear();
    set_ids_.clear();
    table_.clear();
    masks_.clear();
    intern({});  // kDead
  }

  std::span<const uint32_t> stacks_of(uint32_t set) const {
    return std::span<const uint32_t>(set_stacks_).subspan(sets_[set].begin, sets_[set].size);
  }

  uint32_t make_node(uint32_t pos, uint32_t parent) {
    const uint32_t depth = nodes_[parent].depth + 1;
    if (depth > kMaxDepth || nodes_.size() >= kHardMaxNodes) return kNone;
    const uint64_t key = (static_cast<uint64_t>(pos) << 32) | parent;
    auto [it, added] = node_ids_.emplace(key, static_cast<uint32_t>(nodes_.size()));
    if (added) {
      nodes_.push_back(Node{pos, parent, depth});
      stamp_.push_back(0);
    }
    return it->second;
  }

  void begin_closure() { ++epoch_; }

  // The stacks whose top is a byte set, reached from `start` without consuming input.
  void closure(uint32_t start, std::vector<uint32_t>& out) {
    work_.clear();
    work_.push_back(start);
    while (!work_.empty()) {
      const uint32_t n = work_.back();
      work_.pop_back();
      if (n == kNone || stamp_[n] == epoch_) continue;
      stamp_[n] = epoch_;
      if (n == kEmptyStack) {
        out.push_back(n);
        continue;
      }
      const Node node = nodes_[n];
      const Element& e = g_.elements[node.pos];
      if (e.kind == Element::kBytes) {
        out.push_back(n);
      } else if (e.kind == Element::kEnd) {
        work_.push_back(node.parent);
      } else {
        const bool tail = g_.elements[node.pos + 1].kind == Element::kEnd;
        const uint32_t cont = tail ? node.parent : make_node(node.pos + 1, node.parent);
        if (cont == kNone) continue;
        for (uint32_t alt : g_.rule_alternatives[e.value]) work_.push_back(make_node(alt, cont));
      }
    }
  }

  uint32_t compute_next(uint32_t set, uint8_t byte) {
    if (sets_.size() >= kHardMaxSets) {
      overflowed_ = true;
      return kDead;
    }
    std::vector<uint32_t> out;
    begin_closure();
    for (uint32_t s : stacks_of(set)) {  // (intern, which grows set_stacks_, comes after the loop)
      if (s == kEmptyStack) continue;
      const Node node = nodes_[s];
      if (!g_.byte_sets[g_.elements[node.pos].value].test(byte)) continue;
      const bool tail = g_.elements[node.pos + 1].kind == Element::kEnd;
      closure(tail ? node.parent : make_node(node.pos + 1, node.parent), out);
      if (out.size() > kMaxStacks) {
        overflowed_ = true;
        return kDead;
      }
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return intern(std::move(out));
  }

  uint32_t intern(std::vector<uint32_t> stacks) {
    std::string key(reinterpret_cast<const char*>(stacks.data()), stacks.size() * sizeof(uint32_t));
    auto [it, added] = set_ids_.emplace(std::move(key), static_cast<uint32_t>(sets_.size()));
    if (!added) return it->second;
    const bool can_end = !stacks.empty() && stacks[0] == kEmptyStack;
    sets_.push_back(Set{static_cast<uint32_t>(set_stacks_.size()), static_cast<uint32_t>(stacks.size()), can_end,
                        can_end && stacks.size() == 1});
    set_stacks_.insert(set_stacks_.end(), stacks.begin(), stacks.end());
    table_.resize(table_.size() + g_.n_byte_classes, kUnknown);
    return it->second;
  }

  const Grammar& g_;
  std::shared_ptr<const TokenTrie> trie_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, uint32_t> node_ids_;
  std::vector<uint32_t> stamp_;
  uint32_t epoch_ = 0;
  std::vector<uint32_t> work_;
  std::vector<Set> sets_;
  std::vector<uint32_t> set_stacks_;
  std::unordered_map<std::string, uint32_t> set_ids_;
  // [set * n_byte_classes + class of a byte] -> the next set times n_byte_classes (its row's offset,
  // so the walk needs no multiply), kUnknown until computed.
  std::vector<uint32_t> table_;
  bool overflowed_ = false;
  struct CachedMask {
    uint32_t set;
    std::vector<uint8_t> allowed;
  };
  std::vector<CachedMask> masks_;  // most recent last
  std::vector<uint32_t> at_level_;

 public:
  // By token id: 1 when the grammar allows the token's text from `set` (EOG tokens 0). One walk of
  // the trie, or a copy of a recent state's answer (states recur: inside a string, after a comma).
  const std::vector<uint8_t>& allowed_tokens(uint32_t set) {
    for (size_t i = 0; i < masks_.size(); ++i) {
      if (masks_[i].set == set) {
        std::rotate(masks_.begin() + static_cast<ptrdiff_t>(i), masks_.begin() + static_cast<ptrdiff_t>(i) + 1, masks_.end());
        return masks_.back().allowed;
      }
    }
    std::vector<uint8_t> allowed;
    if (masks_.size() >= kCachedMasks) {
      allowed = std::move(masks_.front().allowed);
      masks_.erase(masks_.begin());
    }
    walk_trie(set, allowed);
    masks_.push_back(CachedMask{set, std::move(allowed)});
    return masks_.back().allowed;
  }

 private:
  // The hot loop of mask(). States are carried as table row offsets (set * n_classes) and every
  // array is read through a local pointer: the byte stores into `allowed` may alias anything, so
  // members would be reloaded after each one.
  void walk_trie(uint32_t set, std::vector<uint8_t>& allowed) {
    const TokenTrie& trie = *trie_;
    allowed.assign(static_cast<size_t>(trie.n_tokens), 0);
    at_level_.resize(static_cast<size_t>(trie.max_level) + 1);
    const uint32_t n_classes = g_.n_byte_classes;
    at_level_[0] = set * n_classes;
    const auto n_nodes = static_cast<uint32_t>(trie.level.size());
    const auto* edges = reinterpret_cast<const uint8_t*>(trie.edges.data());
    const uint32_t* edge_begin = trie.edge_begin.data();
    const uint16_t* level = trie.level.data();
    const uint32_t* skip = trie.skip.data();
    const uint32_t* token_begin = trie.token_begin.data();
    const text::Token* tokens = trie.tokens.data();
    const uint8_t* byte_class = g_.byte_class.data();
    uint32_t* at_level = at_level_.data();
    uint32_t* table = table_.data();
    uint8_t* ok = allowed.data();
    constexpr uint32_t kDeadRow = kDead;  // set 0's row starts at 0
    for (uint32_t i = 0; i < n_nodes;) {
      const uint32_t lvl = level[i];
      uint32_t row = at_level[lvl - 1];
      for (uint32_t e = edge_begin[i], end = edge_begin[i + 1]; e < end; ++e) {
        const uint32_t at = row + byte_class[edges[e]];
        uint32_t nx = table[at];
        if (nx == kUnknown) {
          nx = compute_next(row / n_classes, edges[e]) * n_classes;
          table = table_.data();
          table[at] = nx;
        }
        row = nx;
        if (row == kDeadRow) break;
      }
      if (row == kDeadRow) {
        i = skip[i];
        continue;
      }
      at_level[lvl] = row;
      for (uint32_t k = token_begin[i], end = token_begin[i + 1]; k < end; ++k) ok[tokens[k]] = 1;
      ++i;
    }
  }
};

Matcher::Matcher(std::shared_ptr<const Grammar> grammar, const text::Vocab& vocab)
    : grammar_(std::move(grammar)), vocab_(&vocab),
      state_(std::make_unique<MatcherState>(*grammar_, token_trie(vocab))) {}

Matcher::~Matcher() = default;
Matcher::Matcher(Matcher&&) noexcept = default;
Matcher& Matcher::operator=(Matcher&&) noexcept = default;

bool Matcher::can_end() const { return state_->can_end(state_->current); }
bool Matcher::finished() const { return state_->finished(state_->current); }

bool Matcher::allows(text::Token token) const {
  const TokenTrie& trie = state_->trie();
  if (token < 0 || token >= trie.n_tokens) return false;
  if (trie.eog[token]) return can_end();
  const std::string_view text = trie.text(token);
  if (text.empty()) return false;
  state_->compact();
  return state_->walk(state_->current, text) != kDead;
}

void Matcher::mask(std::span<float> logits) const {
  MatcherState& st = *state_;
  st.compact();
  const std::vector<uint8_t>& allowed = st.allowed_tokens(st.current);
  const std::vector<text::Token>& eog = st.trie().eog_tokens;
  float* row = logits.data();
  // End-of-generation tokens keep their logits where the grammar may end.
  std::vector<float> eog_logits;
  const bool end_ok = can_end();
  for (text::Token t : eog) eog_logits.push_back(end_ok && static_cast<size_t>(t) < logits.size() ? row[t] : 0.0f);
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const size_t n = std::min(logits.size(), allowed.size());
  const uint8_t* ok = allowed.data();
  for (size_t t = 0; t < n; ++t) row[t] = ok[t] ? row[t] : kNegInf;
  for (size_t t = n; t < logits.size(); ++t) row[t] = kNegInf;  // rows wider than the vocabulary
  if (!end_ok) return;
  for (size_t i = 0; i < eog.size(); ++i) {
    if (static_cast<size_t>(eog[i]) < logits.size()) row[eog[i]] = eog_logits[i];
  }
}

Status Matcher::accept(text::Token token) {
  const TokenTrie& trie = state_->trie();
  if (token < 0 || token >= trie.n_tokens) {
    return make_error(ErrorCode::kInvalidArgument, "token {} is outside the vocabulary", token);
  }
  if (trie.eog[token]) {
    if (!can_end()) return make_error(ErrorCode::kInvalidArgument, "end of generation before the grammar is complete");
    state_->end();
    return ok_status();
  }
  state_->compact();
  const uint32_t next = state_->walk(state_->current, trie.text(token));
  if (next == kDead) {
    if (state_->overflowed()) {
      return make_error(ErrorCode::kResourceExhausted, "grammar is too ambiguous: more than {} parse stacks", kMaxStacks);
    }
    return make_error(ErrorCode::kInvalidArgument, "token {} ('{}') is not allowed by the grammar here", token,
                      trie.text(token));
  }
  state_->current = next;
  return ok_status();
}

}  // namespace strata::grammar
