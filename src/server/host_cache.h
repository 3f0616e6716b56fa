// The host prompt cache (llama-server's --cache-ram): when a slot's sequence is about to be replaced
// by a request that shares little of it (an agent's side request between two turns), every node
// copies its share (KV rows, recurrent state and checkpoints) into host memory; a later request that
// shares more with a kept sequence than with its slot gets it moved back and computes only the rest.
// Entries are evicted least recently used first, by the bytes the busiest node holds for them. The
// copies live where the KV cache lives (Engine::stash), so nothing crosses the network.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "runtime/engine.h"

namespace strata::server {

// The length of the common prefix of two token lists.
size_t common_prefix(const std::vector<text::Token>& a, const std::vector<text::Token>& b);

// How many of `prompt`'s tokens a sequence holding `tokens` can give it: their common prefix, less
// the prompt's last token (computed again for its logits), and with recurrent layers only up to the
// newest checkpoint at or before that.
int32_t usable_prefix(const std::vector<text::Token>& tokens, const std::vector<int32_t>& checkpoints,
                      const std::vector<text::Token>& prompt, bool recurrent);

class HostCache {
 public:
  struct Stats {
    uint64_t stored = 0, restored = 0, evicted = 0;
    uint64_t bytes = 0;
    int32_t entries = 0;
  };

  explicit HostCache(runtime::Engine& engine) : engine_(engine) {}
  bool enabled() const { return engine_.cache_ram_bytes() > 0; }

  // Keeps the sequence `seq` holding `tokens` (with its state checkpoints); false when it does not fit
  // (or a node refused it). Entries it makes redundant (prefixes of it) are dropped.
  bool keep(int32_t seq, const std::vector<text::Token>& tokens, const std::vector<int32_t>& checkpoints);
  // The entry that gives `prompt` the most tokens, and how many; nothing when none gives more than `beat`.
  std::optional<size_t> best(const std::vector<text::Token>& prompt, int32_t beat, int32_t& usable) const;
  // Moves entry `index` back into sequence `seq`; its tokens and checkpoints are what `seq` holds then.
  Status take(size_t index, int32_t seq, std::vector<text::Token>& tokens, std::vector<int32_t>& checkpoints);
  // After an engine recovery the nodes hold nothing any more.
  void forget_if_reset();
  Stats stats() const;

 private:
  struct Entry {
    int32_t id = 0;
    std::vector<text::Token> tokens;
    std::vector<int32_t> checkpoints;
    uint64_t bytes = 0;
    uint64_t last_used = 0;
  };
  void drop(size_t index);

  runtime::Engine& engine_;
  std::vector<Entry> entries_;
  Stats stats_;
  int32_t next_id_ = 0;
  uint64_t uses_ = 0;
  uint64_t resets_ = 0;
};

}  // namespace strata::server
