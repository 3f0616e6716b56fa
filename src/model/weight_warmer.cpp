#include "model/weight_warmer.h"

#include <algorithm>
#include <cstdlib>

namespace strata::model {

size_t WeightWarmer::budget_from_env() {
  const char* mb = std::getenv("STRATA_WARM_MB");
  return static_cast<size_t>(mb ? std::clamp(std::atoi(mb), 0, 1024) : kDefaultBudgetMiB) << 20;
}

void WeightWarmer::begin_batch() {
  if (!recorded_.empty()) {
    std::swap(previous_, recorded_);
    for (auto& s : recorded_) s.clear();
  }
  segment_ = 0;
  target_ = SIZE_MAX;
}

void WeightWarmer::note(const void* data, size_t bytes) {
  if (budget_ == 0 || !data || bytes == 0) return;
  if (recorded_.size() <= segment_) recorded_.resize(segment_ + 1);
  recorded_[segment_].push_back({static_cast<const uint8_t*>(data), bytes});
}

void WeightWarmer::end_segment() {
  ++segment_;
  target_ = segment_ < previous_.size() ? segment_ : SIZE_MAX;
  range_ = offset_ = warmed_ = 0;
}

bool WeightWarmer::step() {
  if (target_ == SIZE_MAX) return false;
  const std::vector<Range>& ranges = previous_[target_];
  size_t left = std::min(kStep, budget_ - warmed_);
  while (left > 0 && range_ < ranges.size()) {
    const Range& r = ranges[range_];
    const size_t n = std::min(left, r.bytes - offset_);
    for (size_t i = 0; i < n; i += 64) __builtin_prefetch(r.data + offset_ + i, 0, 3);
    offset_ += n, warmed_ += n, warmed_total_ += n, left -= n;
    if (offset_ == r.bytes) ++range_, offset_ = 0;
  }
  if (left > 0 || warmed_ >= budget_) target_ = SIZE_MAX;  // all of it, or the budget, is warm
  return target_ != SIZE_MAX;
}

}  // namespace strata::model
