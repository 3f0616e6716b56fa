// What a tensor-split member does while an exchange waits for the others: it pulls the weights it
// reads next into its caches, so waiting on a slower member (or on the LAN) is not idle memory time.
// The next weights are the ones the previous batch read after the same exchange: run_layers records
// every matrix a sub-layer reads (note) and where each exchange falls (end_segment). Routed experts
// change from token to token and are not recorded; everything else repeats exactly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/collective.h"

namespace strata::model {

class WeightWarmer final : public IdleWork {
 public:
  // Bytes warmed per exchange at most: about what one wait on a LAN covers, well inside the L3 cache.
  // STRATA_WARM_MB overrides it; 0 turns warming off (bench/README.md has the figures that chose it).
  static constexpr size_t kDefaultBudgetMiB = 4;
  static size_t budget_from_env();
  explicit WeightWarmer(size_t budget_bytes = budget_from_env()) : budget_(budget_bytes) {}
  size_t budget() const { return budget_; }

  // A batch starts: what the last one recorded becomes the guide, and recording starts afresh.
  void begin_batch();
  // A matrix the current segment reads, in order.
  void note(const void* data, size_t bytes);
  // An exchange starts: the segment ends, and the weights the next one read last time become the
  // idle work (up to the budget).
  void end_segment();
  // Prefetches the next kStep bytes of the idle work; false when none is left.
  bool step() override;
  uint64_t warmed_bytes() const { return warmed_total_; }

 private:
  struct Range {
    const uint8_t* data;
    size_t bytes;
  };
  static constexpr size_t kStep = 64 << 10;
  size_t budget_;
  std::vector<std::vector<Range>> recorded_, previous_;  // per segment of a batch
  size_t segment_ = 0;
  // The idle work: previous_[target_] from range_ + offset_, warmed_ bytes of the budget spent.
  size_t target_ = SIZE_MAX, range_ = 0, offset_ = 0, warmed_ = 0;
  uint64_t warmed_total_ = 0;
};

}  // namespace strata::model
