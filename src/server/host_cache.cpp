#include "server/host_cache.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>

namespace strata::server {
namespace {

double mib(uint64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

}  // namespace

size_t common_prefix(const std::vector<text::Token>& a, const std::vector<text::Token>& b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

int32_t usable_prefix(const std::vector<text::Token>& tokens, const std::vector<int32_t>& checkpoints,
                      const std::vector<text::Token>& prompt, bool recurrent) {
  const int32_t n_prompt = static_cast<int32_t>(prompt.size());
  int32_t n = std::min(static_cast<int32_t>(common_prefix(tokens, prompt)), n_prompt - 1);
  if (recurrent) {
    auto at = std::upper_bound(checkpoints.begin(), checkpoints.end(), n);
    n = at == checkpoints.begin() ? 0 : *std::prev(at);
  }
  return std::max(n, 0);
}

bool HostCache::keep(int32_t seq, const std::vector<text::Token>& tokens, const std::vector<int32_t>& checkpoints) {
  forget_if_reset();
  const uint64_t cap = engine_.cache_ram_bytes();
  const uint64_t bytes = engine_.stash_bytes(static_cast<int32_t>(tokens.size()), static_cast<int32_t>(checkpoints.size()));
  if (tokens.empty() || bytes > cap) return false;
  for (size_t i = entries_.size(); i-- > 0;) {
    if (common_prefix(entries_[i].tokens, tokens) == entries_[i].tokens.size()) drop(i);  // superseded
  }
  while (stats_.bytes + bytes > cap && !entries_.empty()) {
    const auto lru = std::min_element(entries_.begin(), entries_.end(),
                                      [](const Entry& a, const Entry& b) { return a.last_used < b.last_used; });
    drop(static_cast<size_t>(lru - entries_.begin()));
    ++stats_.evicted;
  }
  const int32_t id = next_id_;
  next_id_ = next_id_ == std::numeric_limits<int32_t>::max() ? 0 : next_id_ + 1;
  if (auto s = engine_.stash(seq, id); !s.ok()) {
    spdlog::warn("host cache: slot {}'s {} tokens not kept: {}", seq, tokens.size(), s.error().message);
    return false;
  }
  entries_.push_back({id, tokens, checkpoints, bytes, ++uses_});
  stats_.bytes += bytes;
  ++stats_.stored;
  spdlog::info("host cache: kept slot {}'s {} tokens ({:.1f} MiB on the busiest node; {} entries, {:.1f} of {:.1f} MiB)",
               seq, tokens.size(), mib(bytes), entries_.size(), mib(stats_.bytes), mib(cap));
  return true;
}

std::optional<size_t> HostCache::best(const std::vector<text::Token>& prompt, int32_t beat, int32_t& usable) const {
  std::optional<size_t> found;
  usable = beat;
  if (resets_ != engine_.reset_count()) return found;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const int32_t n = usable_prefix(entries_[i].tokens, entries_[i].checkpoints, prompt, engine_.needs_checkpoints());
    if (n > usable) {
      usable = n;
      found = i;
    }
  }
  return found;
}

Status HostCache::take(size_t index, int32_t seq, std::vector<text::Token>& tokens, std::vector<int32_t>& checkpoints) {
  Entry e = std::move(entries_[index]);
  entries_.erase(entries_.begin() + static_cast<ptrdiff_t>(index));
  stats_.bytes -= e.bytes;
  STRATA_TRY(engine_.unstash(e.id, seq));
  ++stats_.restored;
  spdlog::info("host cache: slot {} takes back {} kept tokens", seq, e.tokens.size());
  tokens = std::move(e.tokens);
  checkpoints = std::move(e.checkpoints);
  return {};
}

void HostCache::drop(size_t index) {
  if (auto s = engine_.drop_stash(entries_[index].id); !s.ok()) {
    spdlog::warn("host cache: dropping an entry failed: {}", s.error().message);
  }
  stats_.bytes -= entries_[index].bytes;
  entries_.erase(entries_.begin() + static_cast<ptrdiff_t>(index));
}

void HostCache::forget_if_reset() {
  if (resets_ == engine_.reset_count()) return;
  resets_ = engine_.reset_count();
  entries_.clear();
  stats_.bytes = 0;
}

HostCache::Stats HostCache::stats() const {
  Stats s = stats_;
  s.entries = static_cast<int32_t>(entries_.size());
  return s;
}

}  // namespace strata::server
