// The prediction and -ts auto count each layer's own work beside its products: attention over the
// cache at the request's depth (per cached element, and per query head reading it) and a Gated
// DeltaNet layer's delta rule (per state element), at each node's measured costs; the plan shows one
// layer of each kind the model has on every node.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "model/model.h"
#include "plan/plan.h"
#include "plan_test_util.h"
#include "testing/shared_data.h"

namespace strata::plan {
namespace {

using namespace testing;

// F32 products at `rate` bytes/s, and the given layer work.
Node with_speed(Node n, double rate, tensor::LayerWork work) {
  n.speed.read_bandwidth = rate;
  n.speed.product_rates = {{DType::F32, rate}};
  n.speed.layer_work = work;
  return n;
}

double total_ms(const Plan& p) { return std::accumulate(p.predicted_ms.begin(), p.predicted_ms.end(), 0.0); }

std::vector<int32_t> layer_counts(const Plan& p) {
  std::vector<int32_t> c(p.nodes.size(), 0);
  for (int32_t o : p.layer_owner) ++c[o];
  return c;
}

TEST(LayerWork, attention_at_depth_adds_its_cached_elements_at_the_nodes_cost) {
  const auto model = make_model(TinyLlama{}, "layer-work-depth");  // 40 layers, 2 KV heads of 16, 2 query heads each
  const tensor::LayerWork work{1e-9, 1e-10, 5e-9};
  const std::vector<Node> nodes = {with_speed(local(), 1e9, work)};
  Request shallow = request();
  Request deep = request();
  deep.depth = 511;
  auto a = make_plan(*model, nodes, shallow);
  auto b = make_plan(*model, nodes, deep);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->predicted_depth, 0);
  EXPECT_EQ(b->predicted_depth, 511);
  // 40 layers x (512 - 1) more positions x 2 KV heads x (16 + 16) elements x (1e-9 + 2 query heads x 1e-10) s.
  EXPECT_NEAR(total_ms(*b) - total_ms(*a), 1e3 * 40 * 511 * 2 * 32 * (1e-9 + 2 * 1e-10), 1e-9);
  EXPECT_LT(b->predicted_tokens_per_s, a->predicted_tokens_per_s);
  // A dense model has no recurrent layer: the delta rule's cost never enters.
  Node no_delta = nodes[0];
  no_delta.speed.layer_work.state_element = 1e-3;
  auto c = make_plan(*model, {no_delta}, deep);
  ASSERT_TRUE(c.ok());
  EXPECT_DOUBLE_EQ(total_ms(*c), total_ms(*b));
}

TEST(LayerWork, at_depth_the_node_with_slower_attention_gets_fewer_layers) {
  const auto model = make_model(TinyLlama{}, "layer-work-split");
  const tensor::LayerWork fast{1e-9, 0, 1e-9}, slow{1e-8, 0, 1e-9};
  const std::vector<Node> nodes = {with_speed(local(), 1e9, fast), with_speed(worker_node(kW1, 64 * kGiB, 4), 1e9, slow)};
  Request shallow = request(), deep = request();
  deep.depth = 1000;
  auto a = make_plan(*model, nodes, shallow);
  auto b = make_plan(*model, nodes, deep);
  ASSERT_TRUE(a.ok() && b.ok()) << (a.ok() ? b.error().message : a.error().message);
  const auto even = layer_counts(*a), by_depth = layer_counts(*b);
  EXPECT_LE(std::abs(even[0] - even[1]), 2) << owners(*a);  // the same products, little attention at depth 0
  EXPECT_GT(by_depth[0], by_depth[1] + 10) << owners(*b);
  // The split it chose is the one with the least predicted time at that depth, so it beats the even one.
  Request even_deep = deep;
  even_deep.tensor_split = {1, 1};
  auto c = make_plan(*model, nodes, even_deep);
  ASSERT_TRUE(c.ok());
  EXPECT_GT(b->predicted_tokens_per_s, c->predicted_tokens_per_s * 1.5);
}

TEST(LayerWork, a_hybrid_model_shows_each_layer_kind_and_its_delta_rule_counts_state_elements) {
  STRATA_SHARED_FILE(path, "models/synth/qwen35moe-q4_k_m.gguf");
  auto model = model::Model::open(path);
  ASSERT_TRUE(model.ok()) << model.error().message;
  const model::HParams& hp = (*model)->hparams();
  ASSERT_TRUE(hp.has_recurrent_layers());
  Node n = local();
  n.speed.read_bandwidth = 1e10;
  n.speed.product_rates = {{DType::Q4_K, 1e10}, {DType::F32, 1e10}};
  n.speed.layer_work = {1e-10, 1e-11, 1e-9};
  auto a = make_plan(**model, {n}, request());
  n.speed.layer_work.state_element = 3e-9;
  auto b = make_plan(**model, {n}, request());
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->layer_kinds.size(), 2u) << render(*a);
  for (const LayerKindSpeed& k : a->layer_kinds) {
    const bool recurrent = hp.is_recurrent(k.layer);
    EXPECT_EQ(k.kind, recurrent ? "Gated DeltaNet + MoE" : "attention + MoE");
    ASSERT_EQ(k.tokens_per_s.size(), 1u);
    EXPECT_GT(k.tokens_per_s[0], 0);
  }
  const int64_t state = int64_t{hp.ssm_n_v_heads} * hp.ssm_head_k_dim() * hp.ssm_head_v_dim();
  int32_t recurrent_layers = 0;
  for (int32_t il = 0; il < hp.n_layer; ++il) recurrent_layers += hp.is_recurrent(il);
  EXPECT_NEAR(total_ms(*b) - total_ms(*a), 1e3 * recurrent_layers * state * 2e-9, 1e-9);
  const std::string text = render(*a);
  EXPECT_NE(text.find("one Gated DeltaNet + MoE layer (layer "), std::string::npos) << text;
  EXPECT_NE(text.find("at depth 0"), std::string::npos) << text;
}

// -sm tensor members add partial sums after every attention and every FFN: a member slow at attention
// and one slow at products each hold up their own sub-layer, so the pair is slower than its busiest
// member's total (though not as slow as two members with the worse of both figures).
TEST(LayerWork, a_tensor_split_waits_for_each_sub_layers_slowest_member) {
  const auto model = make_model(TinyLlama{}, "layer-work-segments");
  const tensor::LayerWork fast{1e-10, 0, 1e-9}, slow{1e-8, 0, 1e-9};
  const Node here = local(), worker = worker_node(kW1, 64 * kGiB, 4);
  Request r = request();
  r.split_mode = SplitMode::kTensor;
  r.tensor_split = {1, 1};
  r.depth = 1000;
  // This machine: slow attention, fast products; the worker: the reverse.
  auto mixed = make_plan(*model, {with_speed(here, 1e10, slow), with_speed(worker, 2.5e8, fast)}, r);
  auto worst = make_plan(*model, {with_speed(here, 2.5e8, slow), with_speed(worker, 2.5e8, slow)}, r);
  ASSERT_TRUE(mixed.ok() && worst.ok()) << (mixed.ok() ? worst.error().message : mixed.error().message);
  const double busiest = *std::max_element(mixed->predicted_ms.begin(), mixed->predicted_ms.end());
  EXPECT_LT(mixed->predicted_tokens_per_s, 0.8e3 / (busiest + mixed->predicted_link_ms))
      << mixed->predicted_ms[0] << " " << mixed->predicted_ms[1] << " " << worst->predicted_ms[0];
  EXPECT_GT(mixed->predicted_tokens_per_s, worst->predicted_tokens_per_s);
  // Equal members: every sub-layer ends together, so the token is each member's total.
  auto equal = make_plan(*model, {with_speed(here, 1e9, fast), with_speed(worker, 1e9, fast)}, r);
  ASSERT_TRUE(equal.ok());
  EXPECT_NEAR(1e3 / equal->predicted_tokens_per_s, equal->predicted_ms[0] + equal->predicted_link_ms, 1e-9);
}

TEST(LayerWork, a_depth_outside_a_sequences_context_is_refused_naming_the_flag) {
  for (int32_t depth : {-1, 1024, 1 << 30}) {
    Request r = request();
    r.depth = depth;
    const Status s = check_request(r);
    ASSERT_FALSE(s.ok()) << depth;
    EXPECT_NE(s.error().message.find("(-d/--n-depth)"), std::string::npos) << s.error().message;
  }
  Request r = request();
  r.depth = 1023;
  EXPECT_TRUE(check_request(r).ok());
}

}  // namespace
}  // namespace strata::plan
