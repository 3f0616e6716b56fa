// -ts auto and the prediction: nodes with measured speeds (test doubles of what their Hello reports)
// get layers by speed within memory, -sm tensor shares that equalize member times, a prediction per node
// that follows their bytes and rates, and warnings for explicit flags that leave a node idle. The layer
// split is checked against every split of a small model, planned through the public API.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "plan/plan.h"
#include "plan_test_util.h"

namespace strata::plan {
namespace {

using namespace testing;

// A node whose F32 products (the test models' weights) stream at `rate` bytes/s.
Node with_speed(Node n, double rate, double link_seconds = 0) {
  n.speed.read_bandwidth = rate;
  n.speed.product_rates = {{DType::F32, rate}};
  n.link_seconds = link_seconds;
  return n;
}

std::vector<Node> three(double here, double w1, double w2, uint64_t here_memory = 64 * kGiB) {
  std::vector<Node> n = two_workers(64 * kGiB, 64 * kGiB, here_memory);
  n[0] = with_speed(n[0], here);
  n[1] = with_speed(n[1], w1);
  n[2] = with_speed(n[2], w2);
  return n;
}

std::vector<int32_t> layer_counts(const Plan& p) {
  std::vector<int32_t> c(p.nodes.size(), 0);
  for (int32_t o : p.layer_owner) ++c[o];
  return c;
}

const Decision* find(const Plan& p, Decision::Kind kind) {
  for (const Decision& d : p.decisions) {
    if (d.kind == kind) return &d;
  }
  return nullptr;
}

class BalanceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = make_model(TinyLlama{}, "balance40");
    small_ = make_model(TinyLlama{.n_layer = 6}, "balance6");
    wide_ = make_model(TinyLlama{.n_layer = 8, .n_embd = 256, .n_head = 8, .n_head_kv = 8, .n_ff = 1024, .n_vocab = 1024},
                       "balance-wide");
  }
  static void TearDownTestSuite() { model_.reset(), small_.reset(), wide_.reset(); }
  static std::shared_ptr<const model::Model> model_, small_, wide_;
};
std::shared_ptr<const model::Model> BalanceTest::model_, BalanceTest::small_, BalanceTest::wide_;

TEST_F(BalanceTest, equal_speeds_share_the_layers_evenly_and_the_prediction_adds_the_stages) {
  auto p = make_plan(*model_, three(1e9, 1e9, 1e9), request());
  ASSERT_TRUE(p.ok()) << p.error().message;
  const Decision* d = find(*p, Decision::Kind::kSplitBySpeed);
  ASSERT_NE(d, nullptr) << all_text(p->decision_texts());
  const std::vector<int32_t> c = layer_counts(*p);
  EXPECT_LE(*std::max_element(c.begin(), c.end()) - *std::min_element(c.begin(), c.end()), 2) << owners(*p);
  ASSERT_EQ(p->predicted_ms.size(), 3u);
  const double sum = std::accumulate(p->predicted_ms.begin(), p->predicted_ms.end(), 0.0);
  EXPECT_LT(*std::max_element(p->predicted_ms.begin(), p->predicted_ms.end()) /
                *std::min_element(p->predicted_ms.begin(), p->predicted_ms.end()), 1.15);
  EXPECT_NEAR(p->predicted_tokens_per_s, 1e3 / (sum + p->predicted_link_ms), 1e-9);
  // Each node's share is its bytes per token over its rate: F32 weights, 1 GB/s.
  uint64_t bytes = 0;
  for (const auto& t : model_->tensors()) bytes += t.decl.name == "token_embd.weight" ? 0 : t.info->nbytes;
  EXPECT_NEAR(sum, 1e3 * static_cast<double>(bytes) / 1e9, 1e-6);
  const std::string text = describe(p->nodes, 40, *d);
  EXPECT_NE(text.find("-ts auto: the layers split for the least predicted time per token"), std::string::npos) << text;
  EXPECT_NE(text.find("local "), std::string::npos) << text;
}

TEST_F(BalanceTest, a_node_half_as_fast_gets_no_layers_while_the_fast_ones_hold_them) {
  auto p = make_plan(*model_, three(2e9, 2e9, 1e9), request());
  ASSERT_TRUE(p.ok()) << p.error().message;
  const std::vector<int32_t> c = layer_counts(*p);
  EXPECT_EQ(c[2], 0) << owners(*p);
  EXPECT_LE(std::abs(c[0] - c[1]), 2) << owners(*p);
  EXPECT_LT(p->predicted_ms[2], 0.1 * p->predicted_ms[0]) << owners(*p);  // at most the small output head
  // -ts 1,1 over the workers is slower, by the prediction, and warned: W1 idles half of W2's time.
  auto even = make_plan(*model_, three(2e9, 2e9, 1e9), request({1, 1}));
  ASSERT_TRUE(even.ok());
  EXPECT_GT(p->predicted_tokens_per_s, 1.3 * even->predicted_tokens_per_s);
  EXPECT_NE(all_text(even->warnings).find(std::string(kW1) + " is predicted idle 4"), std::string::npos)
      << all_text(even->warnings);
}

TEST_F(BalanceTest, memory_caps_the_fastest_node_and_the_next_fastest_takes_the_rest) {
  // What one layer adds on this machine (weights and KV), so its limit holds about ten.
  auto units_here = [&](double n) { return make_plan(*model_, three(1, 1, 1), request({n, 41 - n, 0}))->bytes[0].total(); };
  const uint64_t per_layer = units_here(2) - units_here(1);
  const uint64_t here = units_here(1) + 9 * per_layer + per_layer / 2;  // ten layers fit, not eleven
  auto p = make_plan(*model_, three(4e9, 2e9, 1e9, here), request());
  ASSERT_TRUE(p.ok()) << p.error().message;
  const std::vector<int32_t> c = layer_counts(*p);
  EXPECT_EQ(c[0], 10) << owners(*p);
  EXPECT_EQ(c[2], 0) << owners(*p);
  EXPECT_LE(p->bytes[0].total(), here);
}

// Every split of a 6-layer model over three nodes (7 units with the output), planned with the -ts
// that gives it: -ts auto's prediction is within 2% of the least total, and no split within that
// 2% has a less busy slowest node.
TEST_F(BalanceTest, the_layer_split_is_the_best_of_every_split_by_the_plans_own_prediction) {
  for (const auto& speeds : std::vector<std::vector<double>>{{1e9, 1e9, 1e9}, {3e9, 1e9, 2e9}, {1e9, 5e9, 5e9}}) {
    const std::vector<Node> nodes = three(speeds[0], speeds[1], speeds[2]);
    auto chosen = make_plan(*small_, nodes, request());
    ASSERT_TRUE(chosen.ok()) << chosen.error().message;
    auto total = [](const Plan& p) { return std::accumulate(p.predicted_ms.begin(), p.predicted_ms.end(), 0.0); };
    auto slowest = [](const Plan& p) { return *std::max_element(p.predicted_ms.begin(), p.predicted_ms.end()); };
    double least = 1e300;
    std::vector<Plan> all;
    for (int a = 0; a <= 7; ++a) {
      for (int b = 0; a + b <= 7; ++b) {
        auto p = make_plan(*small_, nodes, request({double(a), double(b), double(7 - a - b)}));
        ASSERT_TRUE(p.ok()) << p.error().message;
        least = std::min(least, total(*p));
        all.push_back(std::move(*p));
      }
    }
    EXPECT_LE(total(*chosen), least * 1.02 + 1e-12) << owners(*chosen);
    for (const Plan& p : all) {
      if (total(p) <= least * 1.02) {
        EXPECT_GE(slowest(p) + 1e-12, slowest(*chosen)) << owners(p) << " vs " << owners(*chosen);
      }
    }
  }
}

TEST_F(BalanceTest, tensor_split_shares_follow_speed_so_member_times_are_equal) {
  Request r = request();
  r.split_mode = SplitMode::kTensor;
  auto p = make_plan(*wide_, three(2e9, 1e9, 1e9), r);
  ASSERT_TRUE(p.ok()) << p.error().message;
  ASSERT_EQ(p->predicted_ms.size(), 3u);
  const auto [lo, hi] = std::minmax_element(p->predicted_ms.begin(), p->predicted_ms.end());
  EXPECT_LT(*hi / *lo, 1.35) << p->predicted_ms[0] << " " << p->predicted_ms[1] << " " << p->predicted_ms[2];
  EXPECT_GT(p->read_per_token[0], p->read_per_token[1]);  // the faster member reads more
  const Decision* d = find(*p, Decision::Kind::kTensorSplit);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->flags, "-ts auto");
  EXPECT_NE(d->why.find("every member's predicted time per token equal"), std::string::npos) << d->why;
  // Even shares leave this machine idle half the time: predicted slower and warned.
  r.tensor_split = {1, 1, 1};
  auto even = make_plan(*wide_, three(2e9, 1e9, 1e9), r);
  ASSERT_TRUE(even.ok());
  EXPECT_GT(p->predicted_tokens_per_s, 1.2 * even->predicted_tokens_per_s);
  EXPECT_NE(all_text(even->warnings).find("local is predicted idle"), std::string::npos) << all_text(even->warnings);
}

// A tensor-split member's slices run at the rate its decoding measured for slices where it has one:
// equal whole-matrix rates, but one worker's slices at half speed, get it the smaller share; a layer
// split of the same nodes does not read slice rates.
TEST_F(BalanceTest, tensor_split_reads_the_slice_rates_decoding_measured) {
  Request r = request();
  r.split_mode = SplitMode::kTensor;
  std::vector<Node> nodes = three(1e9, 1e9, 1e9);
  auto even = make_plan(*wide_, nodes, r);
  ASSERT_TRUE(even.ok()) << even.error().message;
  nodes[2].speed.slice_rates = {{DType::F32, 0.5e9}};
  auto p = make_plan(*wide_, nodes, r);
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_LT(p->read_per_token[2], 0.75 * p->read_per_token[1]);
  EXPECT_LT(p->predicted_tokens_per_s, even->predicted_tokens_per_s);
  const auto [lo, hi] = std::minmax_element(p->predicted_ms.begin(), p->predicted_ms.end());
  EXPECT_LT(*hi / *lo, 1.35) << p->predicted_ms[0] << " " << p->predicted_ms[1] << " " << p->predicted_ms[2];
  // Given even shares, its time per token is its slices' bytes at the slice rate: twice the others'.
  r.tensor_split = {1, 1, 1};
  auto forced = make_plan(*wide_, nodes, r);
  ASSERT_TRUE(forced.ok());
  EXPECT_NEAR(forced->predicted_ms[2] / forced->predicted_ms[1], 2.0, 0.2);
  Request layers = request();
  auto by_layer = make_plan(*wide_, nodes, layers);
  auto by_layer_even = make_plan(*wide_, three(1e9, 1e9, 1e9), layers);
  ASSERT_TRUE(by_layer.ok() && by_layer_even.ok());
  EXPECT_EQ(by_layer->layer_owner, by_layer_even->layer_owner);
  EXPECT_DOUBLE_EQ(by_layer->predicted_tokens_per_s, by_layer_even->predicted_tokens_per_s);
}

TEST_F(BalanceTest, tensor_split_auto_shrinks_a_share_that_does_not_fit) {
  Request r = request();
  r.split_mode = SplitMode::kTensor;
  auto roomy = make_plan(*wide_, three(8e9, 1e9, 1e9), r);
  ASSERT_TRUE(roomy.ok());
  const uint64_t here = roomy->bytes[0].total() * 3 / 4;
  auto p = make_plan(*wide_, three(8e9, 1e9, 1e9, here), r);
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_LE(p->bytes[0].total(), here);
  EXPECT_LT(p->read_per_token[0], roomy->read_per_token[0]);
}

TEST_F(BalanceTest, without_every_nodes_speed_the_layers_split_by_memory) {
  std::vector<Node> nodes = three(1e9, 1e9, 1e9);
  nodes[2].speed = {};  // a worker that measured nothing
  auto p = make_plan(*model_, nodes, request());
  ASSERT_TRUE(p.ok());
  EXPECT_NE(find(*p, Decision::Kind::kSplitByMemory), nullptr) << all_text(p->decision_texts());
  EXPECT_TRUE(p->predicted_ms.empty());
  EXPECT_NE(render(*p).find("predicted: unknown (no measured speed for 127.0.0.1:50053)"), std::string::npos);
  EXPECT_EQ(all_text(p->warnings).find("-ts auto"), std::string::npos);
  Request asked = request();
  asked.tensor_split_auto = true;  // -ts auto given: the fallback is said
  auto q = make_plan(*model_, nodes, asked);
  ASSERT_TRUE(q.ok());
  EXPECT_NE(all_text(q->warnings).find("-ts auto: a node's speed is unknown"), std::string::npos) << all_text(q->warnings);
}

TEST_F(BalanceTest, explicit_ngl_or_ot_keep_their_placement_and_ts_auto_goes_under_ot_pins) {
  auto ngl = make_plan(*model_, three(4e9, 1e9, 1e9), request({}, 20));
  ASSERT_TRUE(ngl.ok());
  EXPECT_EQ(find(*ngl, Decision::Kind::kSplitBySpeed), nullptr);
  EXPECT_EQ(layer_counts(*ngl)[0], 21);  // -ngl 20: the last 20 of 41 (the output included) on the workers
  Request pinned = request();
  pinned.overrides = {{"blk\\.3[0-9]\\.", kW2}};
  auto ot = make_plan(*model_, three(4e9, 1e9, 1e9), pinned);
  ASSERT_TRUE(ot.ok());
  EXPECT_EQ(find(*ot, Decision::Kind::kSplitBySpeed), nullptr);
  pinned.tensor_split_auto = true;
  auto both = make_plan(*model_, three(4e9, 1e9, 1e9), pinned);
  ASSERT_TRUE(both.ok()) << both.error().message;
  EXPECT_NE(find(*both, Decision::Kind::kSplitBySpeed), nullptr);
  for (int32_t il = 30; il < 40; ++il) EXPECT_EQ(both->layer_owner[il], 2) << il;
  EXPECT_EQ(both->layer_owner[0], 0);
}

TEST_F(BalanceTest, plan_table_prints_each_nodes_ms_per_token_and_the_speeds) {
  auto p = make_plan(*model_, three(1e9, 1e9, 1e9), request());
  ASSERT_TRUE(p.ok());
  const std::string out = render(*p);
  EXPECT_NE(out.find("ms/token"), std::string::npos) << out;
  EXPECT_NE(out.find(fmt::format("{:.2f}", p->predicted_ms[1])), std::string::npos) << out;
  EXPECT_NE(out.find(fmt::format("predicted: {:.1f} tokens/s for one sequence", p->predicted_tokens_per_s)), std::string::npos) << out;
  EXPECT_NE(out.find("speed of 127.0.0.1:50052 (4 threads): read 1.0 GB/s; one-token products F32 1.0 GB/s"), std::string::npos) << out;
  // One node measures no speed (a single-node run needs none): no column, no prediction line.
  auto alone = make_plan(*model_, {local()}, request());
  ASSERT_TRUE(alone.ok());
  const std::string one = render(*alone);
  EXPECT_EQ(one.find("ms/token"), std::string::npos) << one;
  EXPECT_EQ(one.find("predicted"), std::string::npos) << one;
}

}  // namespace
}  // namespace strata::plan
