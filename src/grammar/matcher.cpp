// The matcher's state is a set of parse stacks (llama.cpp's method), but stacks are hash-consed
// (a stack is a node: the next grammar element and the stack below it) and sets are interned, so a
// set is a number and "set after byte b" is a table lookup once computed. Walking the vocabulary's
// trie is then one lookup per trie node, and states repeat (inside a string, after each value), so
// masking a 150k-token vocabulary touches the grammar only for new states.
#include <algorithm>
#include <array>
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
constexpr size_t kMaxSets = 1 << 16;

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
    std::array<uint32_t, 256>* table = tables_[set].get();
    if (table == nullptr) {
      tables_[set] = std::make_unique<std::array<uint32_t, 256>>();
      table = tables_[set].get();
      table->fill(kUnknown);
    }
    uint32_t& to = (*table)[byte];
    if (to == kUnknown) {
      const uint32_t computed = compute_next(set, byte);
      // intern() may have grown tables_, but the array itself does not move.
      (*table)[byte] = computed;
      return computed;
    }
    return to;
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
    tables_.clear();
    intern({});  // kDead
  }

  std::span<const uint32_t> stacks_of(uint32_t set) const {
    return std::span<const uint32_t>(set_stacks_).subspan(sets_[set].begin, sets_[set].size);
  }

  uint32_t make_node(uint32_t pos, uint32_t parent) {
    const uint32_t depth = nodes_[parent].depth + 1;
    if (depth > kMaxDepth) return kNone;
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
    tables_.emplace_back();
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
  std::vector<std::unique_ptr<std::array<uint32_t, 256>>> tables_;
  bool overflowed_ = false;

 public:
  std::vector<uint8_t> allowed;      // scratch for mask(), by token id
  std::vector<uint32_t> at_depth;    // scratch for mask(): the set at each trie depth
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
  const TokenTrie& trie = st.trie();
  st.allowed.assign(static_cast<size_t>(trie.n_tokens), 0);
  st.at_depth.resize(static_cast<size_t>(trie.max_depth) + 1);
  st.at_depth[0] = st.current;
  const uint32_t n_nodes = static_cast<uint32_t>(trie.byte.size());
  for (uint32_t i = 1; i < n_nodes;) {
    const uint32_t d = trie.depth[i];
    const uint32_t set = st.next(st.at_depth[d - 1], trie.byte[i]);
    if (set == kDead) {
      i = trie.skip[i];
      continue;
    }
    st.at_depth[d] = set;
    for (uint32_t k = trie.token_begin[i]; k < trie.token_begin[i + 1]; ++k) st.allowed[trie.tokens[k]] = 1;
    ++i;
  }
  const uint8_t end_ok = can_end() ? 1 : 0;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const size_t n = std::min(logits.size(), st.allowed.size());
  for (size_t t = 0; t < n; ++t) {
    if (!(trie.eog[t] ? end_ok : st.allowed[t])) logits[t] = kNegInf;
  }
  for (size_t t = n; t < logits.size(); ++t) logits[t] = kNegInf;  // rows wider than the vocabulary
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
