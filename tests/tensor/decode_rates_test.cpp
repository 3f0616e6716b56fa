// What decoding ran at (tensor/decode_rates.h): one-token products inside a stage's DecodingStage are
// recorded by type and kind (whole matrices or slices) and nothing else is; the window rule under a
// CPU quota; the rates folded into a host's cached speed and read back; and the keeper writing what a
// real run of products took, over a cached probe figure no CPU reaches.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tensor/decode_rates.h"
#include "tensor/matmul.h"
#include "tensor/node_speed.h"
#include "tensor/thread_pool.h"

namespace strata::tensor {
namespace {

DecodedProducts find(const std::vector<DecodedProducts>& v, DType type, bool slices) {
  for (const DecodedProducts& d : v) {
    if (d.type == type && d.slices == slices) return d;
  }
  return {type, slices, 0, 0};
}

// An F32 matrix of `rows` x 256 and one or more tokens of activations for it.
struct Product {
  std::vector<float> w, x, y;
  MatrixView view;
  int64_t rows;
  explicit Product(int64_t r) : w(static_cast<size_t>(r) * 256, 0.25f), x(256 * 4, 1.0f), y(static_cast<size_t>(r) * 4), rows(r) {
    view = {DType::F32, 256, r, reinterpret_cast<const uint8_t*>(w.data()), 256 * sizeof(float), false};
  }
  void run(int64_t tokens, ThreadPool& pool) { matmul(view, x.data(), tokens, y.data(), pool); }
  uint64_t bytes() const { return static_cast<uint64_t>(rows) * 256 * sizeof(float); }
};

TEST(DecodedProducts, OneTokenProductsInsideAStageAreRecordedByTypeAndKind) {
  ThreadPool pool(2);
  Product p(64);
  const auto before = decoded_products();
  p.run(1, pool);  // no stage open: a probe, a test
  EXPECT_EQ(find(decoded_products(), DType::F32, false).bytes, find(before, DType::F32, false).bytes);
  {
    const DecodingStage stage(false, true);
    p.run(1, pool);
    p.run(4, pool);  // a prompt's batch: not a decode step
    {
      const DecodingStage member(true, true);
      p.run(1, pool);
    }
    {
      const DecodingStage tiny(false, false);  // a stage too small to stream from memory
      p.run(1, pool);
    }
    p.run(1, pool);  // the outer kind again
  }
  p.run(1, pool);
  const auto after = decoded_products();
  const DecodedProducts whole = find(after, DType::F32, false), was = find(before, DType::F32, false);
  const DecodedProducts slices = find(after, DType::F32, true), slices_was = find(before, DType::F32, true);
  EXPECT_EQ(whole.bytes - was.bytes, 2 * p.bytes());
  EXPECT_EQ(slices.bytes - slices_was.bytes, p.bytes());
  EXPECT_GT(whole.seconds, was.seconds);
  EXPECT_GT(slices.seconds, slices_was.seconds);
}

// Only a decoded token's exchanges on a tensor-split member count as its waits.
TEST(DecodedProducts, ExchangeWaitsCountInsideASliceStageOnly) {
  const double before = exchange_wait_seconds();
  record_exchange_wait(0.5);  // no stage: a prompt, a test
  {
    const DecodingStage whole(false, true);
    record_exchange_wait(0.5);
  }
  {
    const DecodingStage prompt(true, false);
    record_exchange_wait(0.5);
  }
  EXPECT_DOUBLE_EQ(exchange_wait_seconds(), before);
  {
    const DecodingStage member(true, true);
    record_exchange_wait(0.25);
  }
  EXPECT_NEAR(exchange_wait_seconds() - before, 0.25, 1e-9);
}

TEST(DecodedProducts, UnderAQuotaOnlyBusyWindowsCountAndSlicesTakeTheWaits) {
  const std::vector<DecodedProducts> delta = {{DType::Q4_K, false, 3000, 0.2}, {DType::Q4_K, true, 1000, 0.2},
                                              {DType::Q6_K, true, 3000, 0.2}};
  EXPECT_EQ(kept_of_window(delta, 0.4, 1.0, false).size(), 3u);  // no quota: every window, waits apart
  EXPECT_DOUBLE_EQ(kept_of_window(delta, 0.4, 1.0, false)[1].seconds, 0.2);
  EXPECT_TRUE(kept_of_window(delta, 0.4, 1.5, true).empty());  // products 0.6 s of 1.5: mostly idle
  const auto kept = kept_of_window(delta, 0.4, 1.0, true);
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_DOUBLE_EQ(kept[0].seconds, 0.2);        // whole matrices: their own time
  EXPECT_DOUBLE_EQ(kept[1].seconds, 0.2 + 0.1);  // slices: the waits shared by bytes (1000 of 4000)
  EXPECT_DOUBLE_EQ(kept[2].seconds, 0.2 + 0.3);
  EXPECT_TRUE(kept_of_window({}, 0, 1.0, true).empty());
}

class FoldTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() / ("strata-decode-rates-" + std::to_string(::getpid()))).string();
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  // Caches a probe that read every type at 1 TB/s, which no CPU's one-token products reach.
  void cache_a_probe() {
    const SpeedProbe probe = [](int32_t) -> Result<NodeSpeed> {
      NodeSpeed s;
      s.read_bandwidth = 1e12;
      for (DType t : measured_types()) s.product_rates.emplace_back(t, 1e12);
      return s;
    };
    ASSERT_TRUE(cached_node_speed(1, dir_, probe).ok());
  }
  static double rate(const std::vector<std::pair<DType, double>>& rates, DType type) {
    for (const auto& [t, r] : rates) {
      if (t == type) return r;
    }
    return 0;
  }
  std::string dir_;
};

TEST_F(FoldTest, DecodedRatesReplaceTheProbesAndSlicesGetTheirOwn) {
  const std::vector<DecodedProducts> decoded = {{DType::Q4_K, false, 20'000'000'000, 1.0},
                                                {DType::Q6_K, false, 1'000'000'000, 0.1},  // too short to tell
                                                {DType::Q4_K, true, 9'000'000'000, 1.0}};
  auto none = fold_decoded_rates(1, dir_, decoded);
  ASSERT_TRUE(none.ok()) << none.error().message;
  EXPECT_TRUE(none->empty());  // nothing probed on this host: nothing to correct
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/node-speed"));
  cache_a_probe();
  auto folded = fold_decoded_rates(1, dir_, decoded);
  ASSERT_TRUE(folded.ok()) << folded.error().message;
  EXPECT_EQ(folded->size(), 2u);
  auto s = read_cached_node_speed(1, dir_);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_DOUBLE_EQ(rate(s->product_rates, DType::Q4_K), 2e10);
  EXPECT_DOUBLE_EQ(rate(s->product_rates, DType::Q6_K), 1e12);  // the probe's, kept
  EXPECT_DOUBLE_EQ(rate(s->slice_rates, DType::Q4_K), 9e9);
  EXPECT_EQ(s->decoded, std::vector<DType>{DType::Q4_K});
  EXPECT_DOUBLE_EQ(s->slice_seconds(DType::Q4_K, 9'000'000'000), 1.0);
  EXPECT_DOUBLE_EQ(s->slice_seconds(DType::Q6_K, 1'000'000'000'000), 1.0);  // no slice rate: the product rate
  EXPECT_NE(s->text().find("Q4_K 20.0 (decoded)"), std::string::npos) << s->text();
  EXPECT_NE(s->text().find("tensor-split slices Q4_K 9.0 GB/s (decoded)"), std::string::npos) << s->text();
  EXPECT_TRUE(s->validate().ok());
}

// Later runs weigh by their seconds against at most 10 s of the earlier ones: one slow run moves the
// rate by a part, a host that changed is learned within a few runs.
TEST_F(FoldTest, LaterRunsAverageWithTheEarlierOnesBySeconds) {
  cache_a_probe();
  auto first = fold_decoded_rates(1, dir_, {{DType::Q4_K, false, 20'000'000'000, 2.0}});  // 10 GB/s
  ASSERT_TRUE(first.ok()) << first.error().message;
  auto second = fold_decoded_rates(1, dir_, {{DType::Q4_K, false, 40'000'000'000, 2.0}});  // 20 GB/s
  ASSERT_TRUE(second.ok()) << second.error().message;
  ASSERT_EQ(second->size(), 1u);
  EXPECT_DOUBLE_EQ((*second)[0].rate(), 15e9);  // 2 s each
  EXPECT_DOUBLE_EQ((*second)[0].seconds, 4.0);
  for (int run = 0; run < 8; ++run) ASSERT_TRUE(fold_decoded_rates(1, dir_, {{DType::Q4_K, false, 20'000'000'000, 4.0}}).ok());
  auto s = read_cached_node_speed(1, dir_);  // 32 s at 5 GB/s since: what the host does now, nearly
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_LT(rate(s->product_rates, DType::Q4_K), 6e9);
  auto slow = fold_decoded_rates(1, dir_, {{DType::Q4_K, false, 2'500'000'000, 1.0}});  // one run at half that
  ASSERT_TRUE(slow.ok());
  EXPECT_GT((*slow)[0].rate(), 0.9 * rate(s->product_rates, DType::Q4_K));
}

TEST_F(FoldTest, ADamagedMarkIsRefusedNotRead) {
  cache_a_probe();
  for (const auto& e : std::filesystem::directory_iterator(dir_ + "/node-speed")) {
    if (e.path().filename().string()[0] == '.') continue;
    std::ofstream(e.path(), std::ios::app) << "slice Q8_0 1e9 nan\n";
  }
  EXPECT_FALSE(read_cached_node_speed(1, dir_).ok());
  for (const auto& e : std::filesystem::directory_iterator(dir_ + "/node-speed")) {
    if (e.path().filename().string()[0] == '.') continue;
    std::ofstream(e.path(), std::ios::app) << "Q8_0 1e9 guessed\n";
  }
  EXPECT_FALSE(read_cached_node_speed(1, dir_).ok());
  NodeSpeed s;
  s.product_rates = {{DType::Q4_K, 1e9}};
  s.decoded = {DType::Q6_K};
  EXPECT_FALSE(s.validate().ok());  // marked decoded without a rate
  s.decoded.clear();
  s.slice_rates = {{DType::Q4_K, 1e9}, {DType::Q4_K, 2e9}};
  EXPECT_FALSE(s.validate().ok());
}

// The keeper over real products: the cached 1 TB/s becomes what the products took.
TEST_F(FoldTest, TheKeeperWritesWhatDecodingRanAt) {
  cache_a_probe();
  ThreadPool pool(1);
  Product p(4096);  // 4 MiB of F32
  const auto before = decoded_products();
  {
    const DecodeRateKeeper keeper(1, dir_, std::chrono::milliseconds(50), 1000);  // saves once, when destroyed
    const DecodingStage stage(false, true);
    const auto start = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(700)) p.run(1, pool);
  }
  const DecodedProducts now = find(decoded_products(), DType::F32, false), was = find(before, DType::F32, false);
  const double expected = static_cast<double>(now.bytes - was.bytes) / (now.seconds - was.seconds);
  auto s = read_cached_node_speed(1, dir_);
  ASSERT_TRUE(s.ok()) << s.error().message;
  const double kept = rate(s->product_rates, DType::F32);
  EXPECT_LT(kept, 1e12);
  EXPECT_NEAR(kept / expected, 1.0, 0.02) << kept << " " << expected;
  EXPECT_EQ(s->decoded, std::vector<DType>{DType::F32});
}

}  // namespace
}  // namespace strata::tensor
