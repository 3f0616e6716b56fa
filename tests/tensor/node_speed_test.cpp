// A node's speed facts (tensor/node_speed.h): the bandwidth probe refuses arguments it cannot honour;
// the product rates are measured for every type, checked when they come from outside, cached per host
// key and re-measured when the cache is damaged. Speeds themselves are not checked against a figure
// (the machine may be loaded); their ratios are, where the test controls the work.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "tensor/node_speed.h"
#include <unistd.h>

namespace strata::tensor {
namespace {

TEST(BandwidthProbe, RefusesThreadsBytesAndRunsOutOfRange) {
  const struct {
    int32_t threads;
    uint64_t bytes;
    int32_t runs;
    const char* names;
  } bad[] = {{0, 1 << 20, 1, "threads"},       {1025, 1 << 20, 1, "threads"}, {1, 1000, 1, "bytes"},
             {1, uint64_t{65} << 30, 1, "bytes"}, {1, 1 << 20, 0, "runs"},      {1, 1 << 20, 1001, "runs"}};
  for (const auto& b : bad) {
    const auto r = measure_read_bandwidth(b.threads, b.bytes, b.runs);
    ASSERT_FALSE(r.ok()) << b.names;
    EXPECT_NE(r.error().message.find(b.names), std::string::npos) << r.error().message;
  }
}

TEST(BandwidthProbe, ReadsASmallBufferOnEveryThread) {
  for (int32_t threads : {1, 3}) {
    const auto r = measure_read_bandwidth(threads, uint64_t{3} << 20, 2);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_GT(*r, 0.0);
    EXPECT_TRUE(std::isfinite(*r));
  }
}

TEST(NodeSpeed, SecondsUseTheTypesRateElseTheSlowestMeasured) {
  NodeSpeed s;
  EXPECT_EQ(s.seconds(DType::Q4_K, 1000), 0.0);  // nothing known
  s.product_rates = {{DType::Q4_K, 2e9}, {DType::Q8_0, 4e9}};
  EXPECT_DOUBLE_EQ(s.seconds(DType::Q4_K, 1'000'000'000), 0.5);
  EXPECT_DOUBLE_EQ(s.seconds(DType::Q8_0, 1'000'000'000), 0.25);
  EXPECT_DOUBLE_EQ(s.seconds(DType::Q3_K, 1'000'000'000), 0.5);
}

TEST(NodeSpeed, ValidateRefusesFiguresNoMachineHas) {
  const double nan = std::nan("");
  for (const auto& [speed, names] : std::vector<std::pair<NodeSpeed, std::string>>{
           {{nan, {}}, "read bandwidth"},
           {{1e9, {{DType::Q4_K, -1}}}, "Q4_K rate"},
           {{1e9, {{DType::Q4_K, 1e15}}}, "Q4_K rate"},
           {{1e9, {{DType::Q4_K, 1e9}, {DType::Q4_K, 2e9}}}, "listed twice"},
           {{1e9, {{static_cast<DType>(5), 1e9}}}, "type 5 unknown"}}) {
    const Status s = speed.validate();
    ASSERT_FALSE(s.ok()) << names;
    EXPECT_NE(s.error().message.find(names), std::string::npos) << s.error().message;
  }
  EXPECT_TRUE((NodeSpeed{2e10, {{DType::Q4_K, 1e10}}}.validate().ok()));
}

// Measured, then read from the cache (the same figures, no second measurement), then re-measured when
// the cached file is damaged; a second key (other threads) gets a file of its own.
TEST(NodeSpeed, IsMeasuredOnceThenCachedPerKey) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("strata-node-speed-" + std::to_string(::getpid()))).string();
  std::filesystem::remove_all(dir);
  auto first = cached_node_speed(1, dir);
  ASSERT_TRUE(first.ok()) << first.error().message;
  ASSERT_EQ(first->product_rates.size(), measured_types().size());
  for (const auto& [type, rate] : first->product_rates) EXPECT_GT(rate, 0) << dtype_name(type);
  EXPECT_GT(first->read_bandwidth, 0);
  auto again = cached_node_speed(1, dir);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->product_rates, first->product_rates);  // exact: read back, not measured again
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/node-speed")) {
    if (e.path().filename().string()[0] == '.') continue;
    ++files;
    std::ofstream(e.path(), std::ios::trunc) << node_speed_key(1) << "\nread nan\nQ4_K 1e999\n";
  }
  EXPECT_EQ(files, 1);
  auto remeasured = cached_node_speed(1, dir);
  ASSERT_TRUE(remeasured.ok()) << remeasured.error().message;
  EXPECT_TRUE(remeasured->validate().ok());
  EXPECT_NE(node_speed_key(1), node_speed_key(2));
  EXPECT_NE(node_speed_key(1).find("threads 1"), std::string::npos);
  std::filesystem::remove_all(dir);
}

// Every measured type gets a rate no CPU is outside of (a loose bound: the machine may be busy).
TEST(NodeSpeed, EveryTypeGetsAPlausibleRate) {
  auto one = measure_node_speed(1, 0.1);
  ASSERT_TRUE(one.ok()) << one.error().message;
  for (const auto& [type, rate] : one->product_rates) {
    EXPECT_GT(rate, 1e7) << dtype_name(type);  // 10 MB/s: any CPU streams faster than that
    EXPECT_LT(rate, 1e13) << dtype_name(type);
  }
}

}  // namespace
}  // namespace strata::tensor
