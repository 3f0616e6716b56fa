// Layer split from -ts / -ngl / usable memory: llama.cpp's dev_layer formula on hand-computed cases.
#include <gtest/gtest.h>

#include <cmath>

#include "plan/plan.h"
#include "plan_test_util.h"

namespace strata::plan {
namespace {

using namespace testing;

class SplitTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = make_model(TinyLlama{}, "split40"); }
  static void TearDownTestSuite() { model_.reset(); }
  static std::shared_ptr<const model::Model> model_;

  Plan plan(const std::vector<Node>& nodes, const Request& r) {
    auto p = make_plan(*model_, nodes, r);
    EXPECT_TRUE(p.ok()) << p.error().message;
    return p.ok() ? *p : Plan{};
  }
};
std::shared_ptr<const model::Model> SplitTest::model_;

TEST_F(SplitTest, single_node_keeps_everything_local) {
  Plan p = plan({local()}, request());
  EXPECT_EQ(owners(p), "0-39:0 out:0");
  EXPECT_TRUE(p.transfers.empty());
  ASSERT_EQ(p.decisions.size(), 1u);
  EXPECT_EQ(p.decision_texts()[0], "all 40 layers on local (single node)");
  EXPECT_EQ(p.owned_by(0), std::vector<uint8_t>(40, 1));
}

TEST_F(SplitTest, plan_splits_by_memory_without_flags) {
  // splits [0.25, 1]: il/41 < 0.25 for il <= 10; the output goes with the last layer.
  Plan p = plan({local(1 * kGiB), worker_node(kW1, 3 * kGiB, 4)}, request());
  EXPECT_EQ(owners(p), "0-10:0 11-39:1 out:1");
  EXPECT_EQ(p.decision_texts()[0],
            "split by usable memory: local 1.00 GiB, 127.0.0.1:50052 3.00 GiB -> layers 0-10 local, 11-39 127.0.0.1:50052; "
            "output 127.0.0.1:50052");
  // Equal memory over three nodes: [1/3, 2/3, 1] -> 0-13, 14-27, 28-39.
  p = plan(two_workers(8 * kGiB, 8 * kGiB, 8 * kGiB), request());
  EXPECT_EQ(owners(p), "0-13:0 14-27:1 28-39:2 out:2");
  // -ts all zero means "not given" in llama.cpp: the memory split over the listed devices.
  p = plan(two_workers(8 * kGiB, 8 * kGiB, 8 * kGiB), request({0, 0, 0}));
  EXPECT_EQ(owners(p), "0-13:0 14-27:1 28-39:2 out:2");
}

TEST_F(SplitTest, plan_follows_tensor_split_over_workers) {
  // 41 slots (40 layers + output) all offloaded; -ts 1,1 -> il/41 < 0.5 for il <= 20.
  Plan p = plan(two_workers(), request({1, 1}));
  EXPECT_EQ(owners(p), "0-20:1 21-39:2 out:2");
  EXPECT_EQ(p.decision_texts()[0],
            "-ts 1,1 over 127.0.0.1:50052, 127.0.0.1:50053 -> layers 0-20 127.0.0.1:50052, 21-39 127.0.0.1:50053; "
            "output 127.0.0.1:50053");
  // -ts 3,2 -> il/41 < 0.6 for il <= 24.
  p = plan(two_workers(), request({3, 2}));
  EXPECT_EQ(owners(p), "0-24:1 25-39:2 out:2");
  // Local holds nothing but the input; a worker with a zero ratio gets nothing.
  EXPECT_EQ(p.owned_by(0), std::vector<uint8_t>(40, 0));
  p = plan(two_workers(), request({0, 1}));
  EXPECT_EQ(owners(p), "0-39:2 out:2");
  EXPECT_NE(all_text(p.warnings).find("127.0.0.1:50052 gets no layers"), std::string::npos) << all_text(p.warnings);
}

TEST_F(SplitTest, plan_puts_local_first_when_ts_has_one_more_value) {
  // [0.25, 0.5, 1]: 0-10 local, 11-20 W1, 21-40 W2.
  Plan p = plan(two_workers(), request({1, 1, 2}));
  EXPECT_EQ(owners(p), "0-10:0 11-20:1 21-39:2 out:2");
  p = plan({local(), worker_node(kW1, 64 * kGiB, 4)}, request({1, 0}));
  EXPECT_EQ(owners(p), "0-39:0 out:0");
}

TEST_F(SplitTest, plan_ngl_keeps_first_layers_local) {
  // -ngl 30: i_start = 41 - 30 = 11, act = 30; (il - 11)/30 < 0.5 for il <= 25.
  Plan p = plan(two_workers(), request({1, 1}, 30));
  EXPECT_EQ(owners(p), "0-10:0 11-25:1 26-39:2 out:2");
  EXPECT_EQ(p.decision_texts()[0],
            "-ngl 30 -ts 1,1 (layers 11-39 + output offloaded over 127.0.0.1:50052, 127.0.0.1:50053) -> layers 0-10 local, "
            "11-25 127.0.0.1:50052, 26-39 127.0.0.1:50053; output 127.0.0.1:50053");
  // Without -ts the offloaded layers split by the workers' memory: [0.25, 1] -> (il-11)/30 < 0.25 for il <= 18.
  p = plan(two_workers(1 * kGiB, 3 * kGiB), request({}, 30));
  EXPECT_EQ(owners(p), "0-10:0 11-18:1 19-39:2 out:2");
  // -ngl 99 and -ngl 41 offload everything.
  EXPECT_EQ(owners(plan(two_workers(), request({1, 1}, 99))), "0-20:1 21-39:2 out:2");
  EXPECT_EQ(owners(plan(two_workers(), request({1, 1}, 41))), "0-20:1 21-39:2 out:2");
  // -ngl 40: layer 0 stays local, (il-1)/40 < 0.5 for il <= 20.
  EXPECT_EQ(owners(plan(two_workers(), request({1, 1}, 40))), "0-0:0 1-20:1 21-39:2 out:2");
  // -ngl 1: only the output layer goes to the (first) worker.
  p = plan(two_workers(), request({1, 1}, 1));
  EXPECT_EQ(owners(p), "0-39:0 out:1");
  // -ngl 0: nothing offloaded.
  p = plan(two_workers(), request({}, 0));
  EXPECT_EQ(owners(p), "0-39:0 out:0");
  EXPECT_NE(all_text(p.warnings).find("127.0.0.1:50053 gets no layers"), std::string::npos);
  // -ngl with a local-first -ts: the offloaded slots split over local + workers.
  p = plan(two_workers(), request({1, 1, 2}, 21));  // i_start 20; (il-20)/21 < .25 -> il <= 25; < .5 -> il <= 30
  EXPECT_EQ(owners(p), "0-25:0 26-30:1 31-39:2 out:2");
}

TEST_F(SplitTest, tensor_split_values_are_checked) {
  auto p = make_plan(*model_, two_workers(), request({1, 1, 1, 1}));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(p.error().message.find("-ts has 4 values but there are 2 workers"), std::string::npos) << p.error().message;
  for (double bad : std::vector<double>{-1.0, std::nan(""), INFINITY}) {
    auto q = make_plan(*model_, two_workers(), request({1, bad}));
    ASSERT_FALSE(q.ok());
    EXPECT_EQ(q.error().code, ErrorCode::kInvalidArgument);
  }
  // Huge and tiny ratios still split evenly.
  EXPECT_EQ(owners(plan(two_workers(), request({1e300, 1e300}))), "0-20:1 21-39:2 out:2");
  EXPECT_EQ(owners(plan(two_workers(), request({1e-300, 1e-300}))), "0-20:1 21-39:2 out:2");
  EXPECT_FALSE(make_plan(*model_, two_workers(), request({}, -5)).ok());
  EXPECT_FALSE(make_plan(*model_, {local()}, request({1, 1})).ok());
  EXPECT_FALSE(make_plan(*model_, {}, request()).ok());
  Request r = request();
  r.n_ctx = 0;
  EXPECT_FALSE(make_plan(*model_, two_workers(), r).ok());
}

TEST_F(SplitTest, transfers_listed_with_bytes_per_token) {
  Plan p = plan(two_workers(), request({1, 1, 2}));
  ASSERT_EQ(p.transfers.size(), 3u);
  EXPECT_EQ(p.transfers[0].from_node, 0);
  EXPECT_EQ(p.transfers[0].to_node, 1);
  EXPECT_EQ(p.transfers[0].what, "hidden state after layer 10");
  EXPECT_EQ(p.transfers[0].bytes_per_token, 64u * 4);
  EXPECT_EQ(p.transfers[1].from_node, 1);
  EXPECT_EQ(p.transfers[1].to_node, 2);
  EXPECT_EQ(p.transfers[1].what, "hidden state after layer 20");
  EXPECT_EQ(p.transfers[2].from_node, 2);
  EXPECT_EQ(p.transfers[2].to_node, 0);
  EXPECT_EQ(p.transfers[2].what, "logits");
  EXPECT_EQ(p.transfers[2].bytes_per_token, 256u * 4);
  // All on workers: the embeddings go out first.
  p = plan(two_workers(), request({1, 1}));
  ASSERT_EQ(p.transfers.size(), 3u);
  EXPECT_EQ(p.transfers[0].what, "embeddings (input of layer 0)");
  // Output on another node than the last layer: the hidden state moves to it.
  p = plan(two_workers(), request({1, 1}, 1));
  ASSERT_EQ(p.transfers.size(), 2u);
  EXPECT_EQ(p.transfers[0].what, "hidden state after layer 39");
  EXPECT_EQ(p.transfers[0].to_node, 1);
  EXPECT_EQ(p.transfers[1].what, "logits");
  const std::string table = render(p);
  EXPECT_NE(table.find("local -> 127.0.0.1:50052: hidden state after layer 39, 256 B per token"), std::string::npos) << table;
  EXPECT_NE(table.find("127.0.0.1:50052 -> local: logits, 1.0 KiB per token that wants logits"), std::string::npos) << table;
}

TEST_F(SplitTest, bytes_add_up_and_render_shows_a_row_per_node) {
  Plan p = plan(two_workers(), request({1, 1, 2}));
  uint64_t weights = 0, file = 0;
  for (const NodeBytes& b : p.bytes) weights += b.weights;
  for (const auto& t : model_->tensors()) file += t.info->nbytes;
  EXPECT_EQ(weights, file);
  for (const auto& t : model_->tensors()) {
    const int32_t home = p.tensor_home.at(t.decl.name);
    const int32_t want = t.decl.layer < 0 ? 0 : t.decl.layer >= 40 ? p.output_node : p.layer_owner[t.decl.layer];
    EXPECT_EQ(home, want) << t.decl.name;
  }
  // KV: layers * ctx * (k + v widths) * f16.
  EXPECT_EQ(p.bytes[0].kv, 11u * 1024 * (32 + 32) * 2);
  EXPECT_EQ(p.bytes[1].kv, 10u * 1024 * (32 + 32) * 2);
  EXPECT_EQ(p.bytes[2].state, 0u);
  EXPECT_GT(p.bytes[1].scratch, 0u);
  const std::string table = render(p);
  EXPECT_NE(table.find("input + 0-10"), std::string::npos) << table;
  EXPECT_NE(table.find("21-39 + output"), std::string::npos) << table;
  EXPECT_NE(table.find("/ 64.00 GiB"), std::string::npos) << table;
  EXPECT_NE(table.find("decision: -ts 1,1,2"), std::string::npos) << table;
}

}  // namespace
}  // namespace strata::plan
