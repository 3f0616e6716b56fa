// The layer-work probe (model/layer_speed.h) times the layers' own kernels: it refuses thread counts
// it cannot run, gives every per-element cost a plausible value, and the whole probe is what the
// cache keeps. Speeds are not checked against a figure (the machine may be loaded).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "model/layer_speed.h"

namespace strata::model {
namespace {

TEST(LayerSpeed, RefusesThreadsOutOfRange) {
  for (int32_t threads : {0, 1025}) {
    const auto r = measure_layer_work(threads, 0.01);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("threads"), std::string::npos) << r.error().message;
  }
}

TEST(LayerSpeed, EveryPerElementCostIsPlausible) {
  for (int32_t threads : {1, 2}) {
    const auto w = measure_layer_work(threads, 0.05);
    ASSERT_TRUE(w.ok()) << w.error().message;
    EXPECT_TRUE(w->known());
    // A cached element or a state element takes more than 1 ps and less than 1 us on any CPU.
    EXPECT_GT(w->kv_element, 1e-12);
    EXPECT_LT(w->kv_element + 8 * w->kv_query_element, 1e-6);
    EXPECT_GT(w->state_element, 1e-12);
    EXPECT_LT(w->state_element, 1e-6);
    tensor::NodeSpeed s;
    s.layer_work = *w;
    EXPECT_TRUE(s.validate().ok()) << s.validate().error().message;
  }
}

// The cache keeps the whole probe: product rates and layer work, read back exactly.
TEST(LayerSpeed, TheCachedNodeSpeedHoldsTheLayerWork) {
  const std::string dir = (std::filesystem::temp_directory_path() / ("strata-layer-speed-" + std::to_string(::getpid()))).string();
  std::filesystem::remove_all(dir);
  const auto first = cached_node_speed(1, dir);
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_TRUE(first->known());
  EXPECT_TRUE(first->layer_work.known());
  const auto again = cached_node_speed(1, dir);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_TRUE(again->from_cache);
  EXPECT_EQ(again->layer_work, first->layer_work);
  EXPECT_EQ(again->product_rates, first->product_rates);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace strata::model
