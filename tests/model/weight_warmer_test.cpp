// The warmer replays, after each exchange, the weights the previous batch read after the same one,
// within its budget and step by step.
#include <gtest/gtest.h>

#include <vector>

#include "model/weight_warmer.h"

namespace strata::model {
namespace {

constexpr size_t kKiB = 1024;

// Steps until the work runs out; how many steps that took.
int run_out(WeightWarmer& w) {
  int steps = 1;
  while (w.step()) ++steps;
  return steps;
}

TEST(WeightWarmer, warms_what_the_last_batch_read_after_the_same_exchange) {
  std::vector<uint8_t> a(10 * kKiB), b(100 * kKiB), c(50 * kKiB), d(20 * kKiB);
  WeightWarmer w(64 << 20);
  const auto one_batch = [&] {
    w.begin_batch();
    w.note(a.data(), a.size());
    w.end_segment();  // exchange 1: b and c follow
    const uint64_t before_1 = w.warmed_bytes();
    const int steps_1 = run_out(w);
    const uint64_t warmed_1 = w.warmed_bytes() - before_1;
    w.note(b.data(), b.size());
    w.note(c.data(), c.size());
    w.end_segment();  // exchange 2: d follows
    const uint64_t before_2 = w.warmed_bytes();
    run_out(w);
    w.note(d.data(), d.size());
    return std::tuple{warmed_1, steps_1, w.warmed_bytes() - before_2};
  };
  EXPECT_EQ(one_batch(), std::tuple(0u, 1, 0u));  // nothing recorded yet
  // 150 KiB after exchange 1 in 64 KiB steps: 64, 64 and the last 22; then d's 20 KiB.
  EXPECT_EQ(one_batch(), std::tuple(150 * kKiB, 3, 20 * kKiB));
  EXPECT_EQ(one_batch(), std::tuple(150 * kKiB, 3, 20 * kKiB));
}

TEST(WeightWarmer, stops_at_its_budget) {
  std::vector<uint8_t> big(1 << 20);
  WeightWarmer w(200 * kKiB);
  for (int batch = 0; batch < 2; ++batch) {
    w.begin_batch();
    w.end_segment();
    run_out(w);
    w.note(big.data(), big.size());
  }
  EXPECT_EQ(w.warmed_bytes(), 200 * kKiB);
}

TEST(WeightWarmer, a_segment_the_last_batch_did_not_reach_has_nothing_to_warm) {
  std::vector<uint8_t> a(kKiB);
  WeightWarmer w(1 << 20);
  w.begin_batch();
  w.note(a.data(), a.size());
  w.begin_batch();
  w.end_segment();
  EXPECT_FALSE(w.step());
  EXPECT_EQ(w.warmed_bytes(), 0u);
}

TEST(WeightWarmer, a_zero_budget_warms_nothing) {
  std::vector<uint8_t> a(kKiB);
  WeightWarmer w(0);
  for (int batch = 0; batch < 2; ++batch) {
    w.begin_batch();
    w.end_segment();
    EXPECT_FALSE(w.step());
    w.note(a.data(), a.size());
  }
  EXPECT_EQ(w.warmed_bytes(), 0u);
}

}  // namespace
}  // namespace strata::model
