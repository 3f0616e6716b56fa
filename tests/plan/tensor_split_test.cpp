// -sm tensor in the planner: the group and each member's slice from -ts or memory, bytes per member
// (slices, not whole tensors), the exchanges per token, and refusals that name the flag and the fix.
#include <gtest/gtest.h>

#include "plan/plan.h"
#include "plan_test_util.h"
#include "testing/shared_data.h"

#include <fmt/format.h>

namespace strata::plan {
namespace {

using namespace testing;

class TensorPlan : public ::testing::Test {
 protected:
  // F32 weights (block size 1): every KV head and every 16 FFN rows can be cut.
  static void SetUpTestSuite() { model_ = make_model(TinyLlama{.n_layer = 4, .n_head_kv = 4, .n_ff = 256}, "tensor"); }
  static void TearDownTestSuite() { model_.reset(); }
  static Request tensor(std::vector<double> ts = {}) {
    Request r = request(std::move(ts));
    r.split_mode = SplitMode::kTensor;
    return r;
  }
  static std::shared_ptr<const model::Model> model_;
};
std::shared_ptr<const model::Model> TensorPlan::model_;

TEST_F(TensorPlan, ts_with_one_value_per_node_puts_this_machine_first) {
  auto p = make_plan(*model_, two_workers(), tensor({2, 1, 1}));
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->tensor_group, (std::vector<int32_t>{0, 1, 2}));
  const model::Shard& s0 = p->node_stages[0].shard;
  const model::Shard& s2 = p->node_stages[2].shard;
  EXPECT_EQ(s0.kv_heads, (model::Range{0, 2}));
  EXPECT_EQ(p->node_stages[1].shard.kv_heads, (model::Range{2, 3}));
  EXPECT_EQ(s2.kv_heads, (model::Range{3, 4}));
  EXPECT_EQ(s0.ff, (model::Range{0, 128}));
  EXPECT_EQ(s2.vocab.end, 256);
  // Slices, not whole tensors: this machine holds about half the layer weights, each worker a quarter.
  EXPECT_LT(p->bytes[1].weights, p->bytes[0].weights);
  const std::string text = render(*p);
  EXPECT_NE(text.find("slices (-sm tensor"), std::string::npos) << text;
  EXPECT_NE(text.find("KV heads 3-3 of 4, FFN rows 192-255 of 256, vocabulary rows 192-255 of 256"), std::string::npos) << text;
  EXPECT_NE(text.find("8 exchanges of 64 floats"), std::string::npos) << text;
  ASSERT_EQ(p->decisions.size(), 2u);
  EXPECT_EQ(p->decisions[0].kind, Decision::Kind::kTensorSplit);
  // Every plan over workers says what a worker's failure does to the requests in flight.
  EXPECT_EQ(p->decisions[1].kind, Decision::Kind::kFailover);
  EXPECT_NE(p->decision_texts()[1].find("--failover replan --recover-timeout 60"), std::string::npos)
      << p->decision_texts()[1];
}

TEST_F(TensorPlan, ts_over_the_workers_leaves_this_machine_coordinating) {
  auto p = make_plan(*model_, two_workers(), tensor({1, 1}));
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->tensor_group, (std::vector<int32_t>{1, 2}));
  EXPECT_FALSE(p->node_stages[0].shard.split());
  EXPECT_TRUE(p->node_stages[0].input);
  EXPECT_EQ(p->node_stages[0].tensors, (std::vector<std::string>{"token_embd.weight"}));
}

TEST_F(TensorPlan, without_ts_the_shares_follow_usable_memory) {
  auto p = make_plan(*model_, two_workers(3 * kGiB, 1 * kGiB, 4 * kGiB), tensor());
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->node_stages[0].shard.ff.size(), 128);  // 4 of 8 GiB
  EXPECT_EQ(p->node_stages[1].shard.ff.size(), 96);
  EXPECT_EQ(p->node_stages[2].shard.ff.size(), 32);
}

TEST_F(TensorPlan, flags_that_contradict_a_tensor_split_are_refused_with_the_fix) {
  Request pins = tensor({1, 1, 1});
  pins.overrides = {{"blk\\.0\\.", kW1}};
  auto p = make_plan(*model_, two_workers(), pins);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(p.error().message.find("drop -ot or use -sm layer"), std::string::npos) << p.error().message;

  Request ngl = tensor({1, 1, 1});
  ngl.n_gpu_layers = 2;
  p = make_plan(*model_, two_workers(), ngl);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("-ngl 5"), std::string::npos) << p.error().message;

  p = make_plan(*model_, {local()}, tensor());
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("--rpc"), std::string::npos) << p.error().message;

  p = make_plan(*model_, two_workers(), tensor({1, 1, 1, 1}));
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("takes 2 (the workers) or 3"), std::string::npos) << p.error().message;

  EXPECT_FALSE(parse_split_mode("row").ok());
  EXPECT_EQ(*parse_split_mode("tensor"), SplitMode::kTensor);
}

TEST_F(TensorPlan, a_member_over_its_memory_is_refused_naming_it) {
  auto p = make_plan(*model_, two_workers(64 * kGiB, 1024, 64 * kGiB), tensor({1, 1, 1}));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code, ErrorCode::kResourceExhausted);
  EXPECT_NE(p.error().message.find(kW2), std::string::npos) << p.error().message;
}


// The plan says why experts are cut by rows: the busiest member's expected load with whole experts
// (two equal members: a hypergeometric over the token's picks, worked out here on its own).
TEST(TensorPlanExperts, the_plan_gives_the_cost_of_whole_experts) {
  STRATA_SHARED_FILE(path, "models/synth/qwen3moe-f32.gguf");
  auto m = model::Model::open(path);
  ASSERT_TRUE(m.ok()) << m.error().message;
  Request r = request({1, 1});
  r.split_mode = SplitMode::kTensor;
  auto p = make_plan(**m, two_workers(), r);
  ASSERT_TRUE(p.ok()) << p.error().message;
  const model::HParams& hp = (*m)->hparams();
  const int N = hp.n_expert, k = hp.n_expert_used, half = N / 2;
  double busiest = 0, total = 0;
  for (int x = 0; x <= k; ++x) {
    double ways = 1;  // C(half, x) * C(half, k - x)
    for (int i = 0; i < x; ++i) ways = ways * (half - i) / (i + 1);
    for (int i = 0; i < k - x; ++i) ways = ways * (half - i) / (i + 1);
    busiest += ways * std::max(x, k - x), total += ways;
  }
  const std::string want = fmt::format("the busiest member would run {:.2f} of a token's {} experts", busiest / total, k);
  const std::string& detail = p->decisions.front().why;
  EXPECT_NE(detail.find(want), std::string::npos) << detail;
  EXPECT_NE(detail.find(fmt::format("{:.2f}x the {:.2f} expert-equivalents", busiest / total / (k / 2.0), k / 2.0)),
            std::string::npos) << detail;
}

TEST(TensorPlanExperts, whole_experts_are_planned_when_asked_with_their_cost) {
  STRATA_SHARED_FILE(path, "models/synth/qwen3moe-f32.gguf");
  auto m = model::Model::open(path);
  ASSERT_TRUE(m.ok()) << m.error().message;
  Request r = request({1, 1});
  r.split_mode = SplitMode::kTensor;
  r.expert_split = plan::ExpertSplit::kWhole;
  auto p = make_plan(**m, two_workers(), r);
  ASSERT_TRUE(p.ok()) << p.error().message;
  const model::HParams& hp = (*m)->hparams();
  const int half = hp.n_expert / 2;
  EXPECT_EQ(p->node_stages[1].shard.experts, (model::Range{0, half}));
  EXPECT_EQ(p->node_stages[2].shard.experts, (model::Range{half, hp.n_expert}));
  EXPECT_NE(p->slices[2].find(fmt::format("whole experts {}-{} of {}", half, hp.n_expert - 1, hp.n_expert)), std::string::npos)
      << p->slices[2];
  EXPECT_NE(p->decisions.front().why.find("handed out whole"), std::string::npos) << p->decisions.front().why;
  // Each member holds half the experts' bytes, and reads per token its expected share of them.
  auto rows = make_plan(**m, two_workers(), [&] { Request q = r; q.expert_split = plan::ExpertSplit::kRows; return q; }());
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(p->read_per_token[1], rows->read_per_token[1]);
  EXPECT_EQ(p->bytes[1].weights, rows->bytes[1].weights);
}

}  // namespace
}  // namespace strata::plan
