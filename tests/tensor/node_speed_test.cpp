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
  const auto speed = [](double read, std::vector<std::pair<DType, double>> rates, LayerWork work = {}) {
    NodeSpeed s;
    s.read_bandwidth = read;
    s.product_rates = std::move(rates);
    s.layer_work = work;
    return s;
  };
  for (const auto& [bad, names] : std::vector<std::pair<NodeSpeed, std::string>>{
           {speed(nan, {}), "read bandwidth"},
           {speed(1e9, {{DType::Q4_K, -1}}), "Q4_K rate"},
           {speed(1e9, {{DType::Q4_K, 1e15}}), "Q4_K rate"},
           {speed(1e9, {{DType::Q4_K, 1e9}, {DType::Q4_K, 2e9}}), "listed twice"},
           {speed(1e9, {{static_cast<DType>(5), 1e9}}), "type 5 unknown"},
           {speed(1e9, {{DType::Q4_K, 1e9}}, {nan, 0, 0}), "attention seconds per element"},
           {speed(1e9, {{DType::Q4_K, 1e9}}, {1e-9, -1e-9, 0}), "per element and query head"},
           {speed(1e9, {{DType::Q4_K, 1e9}}, {1e-9, 1e-9, 1.0}), "delta rule seconds per state element"}}) {
    const Status s = bad.validate();
    ASSERT_FALSE(s.ok()) << names;
    EXPECT_NE(s.error().message.find(names), std::string::npos) << s.error().message;
  }
  EXPECT_TRUE(speed(2e10, {{DType::Q4_K, 1e10}}).validate().ok());
  EXPECT_TRUE(speed(2e10, {{DType::Q4_K, 1e10}}, {1e-10, 2e-11, 3e-10}).validate().ok());
}

TEST(NodeSpeed, LayerWorkIsPerElementAndPerQueryHead) {
  NodeSpeed s;
  EXPECT_EQ(s.attention_seconds(4096, 8, 256, 4), 0.0);  // not measured: no layer work predicted
  s.layer_work = {1e-10, 2e-11, 3e-10};
  EXPECT_DOUBLE_EQ(s.attention_seconds(1000, 2, 100, 3), 2e5 * (1e-10 + 3 * 2e-11));
  EXPECT_DOUBLE_EQ(s.recurrent_seconds(1 << 20), (1 << 20) * 3e-10);
  EXPECT_NE(s.text().find("not measured"), std::string::npos);  // no product rates yet
  s.product_rates = {{DType::Q4_K, 2e10}};
  EXPECT_NE(s.text().find("attention 0.100 ns per cached K/V element + 0.020 per query head"), std::string::npos) << s.text();
  EXPECT_NE(s.text().find("delta rule 0.300 ns"), std::string::npos) << s.text();
}

// Measured (by the probe given), then read from the cache (the same figures, no second
// measurement), then re-measured when the cached file is damaged; a second key (other threads) gets a
// file of its own.
TEST(NodeSpeed, IsMeasuredOnceThenCachedPerKey) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("strata-node-speed-" + std::to_string(::getpid()))).string();
  std::filesystem::remove_all(dir);
  int probes = 0;
  const SpeedProbe probe = [&](int32_t threads) -> Result<NodeSpeed> {
    ++probes;
    NodeSpeed s;
    s.read_bandwidth = 1e10 * threads + 0.1 * probes;
    for (DType t : measured_types()) s.product_rates.emplace_back(t, 3e9 + static_cast<double>(t) + 1.0 / 3);
    s.layer_work = {1.0 / 3e10, 1.0 / 7e11, 1.0 / 9e9};
    return s;
  };
  auto first = cached_node_speed(1, dir, probe);
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_FALSE(first->from_cache);
  auto again = cached_node_speed(1, dir, probe);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(probes, 1);
  EXPECT_TRUE(again->from_cache);
  EXPECT_EQ(again->read_bandwidth, first->read_bandwidth);  // exact: read back, not measured again
  EXPECT_EQ(again->product_rates, first->product_rates);
  EXPECT_EQ(again->layer_work, first->layer_work);
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/node-speed")) {
    if (e.path().filename().string()[0] == '.') continue;
    ++files;
    std::ofstream(e.path(), std::ios::trunc) << node_speed_key(1) << "\nread nan\nQ4_K 1e999\n";
  }
  EXPECT_EQ(files, 1);
  auto remeasured = cached_node_speed(1, dir, probe);
  ASSERT_TRUE(remeasured.ok()) << remeasured.error().message;
  EXPECT_EQ(probes, 2);
  EXPECT_TRUE(remeasured->validate().ok());
  ASSERT_TRUE(cached_node_speed(2, dir, probe).ok());
  EXPECT_EQ(probes, 3);
  EXPECT_NE(node_speed_key(1), node_speed_key(2));
  EXPECT_NE(node_speed_key(1).find("threads 1"), std::string::npos);
  EXPECT_NE(node_speed_key(1).find("v2"), std::string::npos);  // v1 files (no layer work) are not read
  std::filesystem::remove_all(dir);
}

// A probe whose figures no machine has is refused, and nothing is cached.
TEST(NodeSpeed, AnImplausibleMeasurementIsNotCached) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("strata-node-speed-bad-" + std::to_string(::getpid()))).string();
  std::filesystem::remove_all(dir);
  const SpeedProbe bad = [](int32_t) -> Result<NodeSpeed> {
    NodeSpeed s;
    s.product_rates = {{DType::Q4_K, std::nan("")}};
    return s;
  };
  EXPECT_FALSE(cached_node_speed(1, dir, bad).ok());
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/node-speed")) files += e.path().filename().string()[0] != '.';
  EXPECT_EQ(files, 0);
  std::filesystem::remove_all(dir);
}

// Every measured type gets a rate no CPU is outside of (a loose bound: the machine may be busy).
TEST(NodeSpeed, EveryTypeGetsAPlausibleRate) {
  auto one = measure_product_speed(1, 0.1);
  ASSERT_TRUE(one.ok()) << one.error().message;
  ASSERT_EQ(one->product_rates.size(), measured_types().size());
  for (const auto& [type, rate] : one->product_rates) {
    EXPECT_GT(rate, 1e7) << dtype_name(type);  // 10 MB/s: any CPU streams faster than that
    EXPECT_LT(rate, 1e13) << dtype_name(type);
  }
  EXPECT_GT(one->read_bandwidth, 0);
  EXPECT_FALSE(one->layer_work.known());  // model::measure_node_speed adds it
}

}  // namespace
}  // namespace strata::tensor
