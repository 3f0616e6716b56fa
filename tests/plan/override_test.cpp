// -ot pins: whole-layer pins decide the owner (and say which flag they overrode), --strict-placement
// refuses that, and pins that split a layer are refused with the op, tensors and nodes named.
#include <gtest/gtest.h>

#include "plan/plan.h"
#include "plan_test_util.h"

namespace strata::plan {
namespace {

using namespace testing;

// The field report: -ot puts layers 0-24 on one worker and 25-39 on the other.
const char* kFieldReportOt = "blk\\.([0-9]|1[0-9]|2[0-4])\\.=127.0.0.1:50052,blk\\.(2[5-9]|3[0-9])\\.=127.0.0.1:50053";

class OverrideTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = make_model(TinyLlama{}, "override40"); }
  static void TearDownTestSuite() { model_.reset(); }
  static std::shared_ptr<const model::Model> model_;

  static Request with_ot(Request r, const std::string& ot, bool strict = false) {
    auto rules = parse_overrides(ot);
    EXPECT_TRUE(rules.ok()) << rules.error().message;
    if (rules.ok()) r.overrides = *rules;
    r.strict_placement = strict;
    return r;
  }
};
std::shared_ptr<const model::Model> OverrideTest::model_;

TEST_F(OverrideTest, ot_whole_layer_pins_override_ts_and_say_so) {
  auto p = make_plan(*model_, two_workers(), with_ot(request({1, 1}), kFieldReportOt));
  ASSERT_TRUE(p.ok()) << p.error().message;
  // -ot decides: layers 0-24 (weights, KV, compute) on W1, 25-39 on W2; the output stays where -ts put it.
  EXPECT_EQ(owners(*p), "0-24:1 25-39:2 out:2");
  // llama.cpp's -ts 1,1 gives W1 layers 0-20 (20/41 < 0.5 <= 21/41), so -ot moved layers 21-24.
  const std::string decisions = all_text(p->decision_texts());
  const std::string expected =
      "-ot decides layers 21-24: rule 'blk\\.([0-9]|1[0-9]|2[0-4])\\.=127.0.0.1:50052' pins all their tensors to "
      "127.0.0.1:50052, which owns their weights, KV cache, recurrent state and compute; -ts 1,1 had put them on "
      "127.0.0.1:50053. A -ts that agrees: -ts 25,16 (25 layers on 127.0.0.1:50052, 15 layers + output on "
      "127.0.0.1:50053)";
  EXPECT_NE(decisions.find(expected), std::string::npos) << decisions;
  // The same decision as data: what moved, from where to where, by which rule.
  const auto moved = std::find_if(p->decisions.begin(), p->decisions.end(),
                                  [](const Decision& d) { return d.kind == Decision::Kind::kPinMovedLayers; });
  ASSERT_NE(moved, p->decisions.end());
  EXPECT_EQ(moved->layers, (std::vector<int32_t>{21, 22, 23, 24}));
  EXPECT_EQ(moved->node, 1);
  EXPECT_EQ(moved->from_node, 2);
  EXPECT_EQ(moved->rules, std::vector<std::string>{"blk\\.([0-9]|1[0-9]|2[0-4])\\.=127.0.0.1:50052"});
  EXPECT_EQ(moved->flags, "-ts 1,1");
  EXPECT_NE(decisions.find("final placement: layers 0-24 127.0.0.1:50052, 25-39 127.0.0.1:50053; output 127.0.0.1:50053"),
            std::string::npos)
      << decisions;
  // KV cache follows the owner: 25 layers on W1.
  EXPECT_EQ(p->bytes[1].kv, 25u * 1024 * 64 * 2);
  EXPECT_EQ(p->bytes[2].kv, 15u * 1024 * 64 * 2);

  // The suggested -ts really agrees, with and without the pins.
  auto agree = make_plan(*model_, two_workers(), request({25, 16}));
  ASSERT_TRUE(agree.ok());
  EXPECT_EQ(owners(*agree), "0-24:1 25-39:2 out:2");

  // -ts 3,2 already gives 0-24 / 25-39 + output: nothing to override.
  auto q = make_plan(*model_, two_workers(), with_ot(request({3, 2}), kFieldReportOt, true));
  ASSERT_TRUE(q.ok()) << q.error().message;
  EXPECT_EQ(owners(*q), "0-24:1 25-39:2 out:2");
  const std::string q_decisions = all_text(q->decision_texts());
  EXPECT_EQ(q_decisions.find("-ot decides"), std::string::npos) << q_decisions;
  EXPECT_NE(q_decisions.find("-ot pins agree with -ts 3,2: no layer moved"), std::string::npos) << q_decisions;
}

TEST_F(OverrideTest, strict_placement_refuses_the_field_report_with_the_layers_named) {
  auto p = make_plan(*model_, two_workers(), with_ot(request({1, 1}), kFieldReportOt, true));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code, ErrorCode::kPlacementRefused);
  EXPECT_EQ(p.error().message,
            "plan: --strict-placement: -ot rule 'blk\\.([0-9]|1[0-9]|2[0-4])\\.=127.0.0.1:50052' pins layers 21-24 to "
            "127.0.0.1:50052, but -ts 1,1 puts them on 127.0.0.1:50053. Make the flags agree, e.g. -ts 25,16 (25 layers on "
            "127.0.0.1:50052, 15 layers + output on 127.0.0.1:50053), or drop --strict-placement to let -ot decide");
  // With -ngl, the pin that keeps layer 0 off this machine is named too.
  auto q = make_plan(*model_, two_workers(), with_ot(request({1, 1}, 40), kFieldReportOt, true));
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.error().code, ErrorCode::kPlacementRefused);
  EXPECT_NE(q.error().message.find("pins layer 0 to 127.0.0.1:50052, but -ngl 40 -ts 1,1 puts it on local"),
            std::string::npos)
      << q.error().message;
  EXPECT_NE(q.error().message.find("-ts 25,16 without -ngl"), std::string::npos) << q.error().message;
  // Without explicit -ts/-ngl (the memory split) the pins decide, strict or not.
  auto r = make_plan(*model_, two_workers(), with_ot(request(), kFieldReportOt, true));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(owners(*r), "0-24:1 25-39:2 out:2");
  EXPECT_NE(all_text(r->decision_texts()).find("the split by usable memory had put them on local"), std::string::npos)
      << all_text(r->decision_texts());
}

TEST_F(OverrideTest, rpc_buffer_names_and_cpu_pick_the_nodes) {
  auto p = make_plan(*model_, two_workers(),
                     with_ot(request({1, 1}), "blk\\.(3[0-9])\\.=CPU,^output=cpu,blk\\.([0-9]|1[0-9])\\.=RPC0[127.0.0.1:50053]"));
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(owners(*p), "0-19:2 20-20:1 21-29:2 30-39:0 out:0");
  const std::string d = all_text(p->decision_texts());
  EXPECT_NE(d.find("-ot decides layers 0-19: rule 'blk\\.([0-9]|1[0-9])\\.=RPC0[127.0.0.1:50053]'"), std::string::npos) << d;
  EXPECT_NE(d.find("-ot decides layers 30-39: rule 'blk\\.(3[0-9])\\.=CPU' pins all their tensors to local"),
            std::string::npos)
      << d;
  EXPECT_NE(d.find("-ot decides the output layer: rule '^output=cpu' pins all its tensors to local"), std::string::npos) << d;
  // No -ts can express W2, W1, W2, local in that order.
  EXPECT_NE(d.find("A -ts that agrees: none: no -ts can express this placement"), std::string::npos) << d;
  // Transfers at every node change.
  std::string t;
  for (const Transfer& x : p->transfers) t += x.what + "|";
  EXPECT_EQ(t, "embeddings (input of layer 0)|hidden state after layer 19|hidden state after layer 20|"
               "hidden state after layer 29|");
}

TEST_F(OverrideTest, plan_refuses_split_layer_across_nodes) {
  // The feed-forward of layer 20 pinned to W2 while -ts puts the layer (its attention) on W1.
  auto p = make_plan(*model_, two_workers(), with_ot(request({1, 1}), "blk\\.20\\.ffn_=127.0.0.1:50053"));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code, ErrorCode::kSplitLayer);
  EXPECT_EQ(p.error().message,
            "plan: -ot splits layer 20 across nodes: its ops would run on different nodes and exchange the hidden state "
            "inside the layer: the attention op on 127.0.0.1:50052 (blk.20.attn_norm.weight, blk.20.attn_q.weight, "
            "blk.20.attn_k.weight, blk.20.attn_v.weight, blk.20.attn_output.weight, by -ts 1,1); the feed-forward op on "
            "127.0.0.1:50053 (blk.20.ffn_norm.weight, blk.20.ffn_gate.weight, blk.20.ffn_up.weight, "
            "blk.20.ffn_down.weight, by -ot rule 'blk\\.20\\.ffn_=127.0.0.1:50053'). Explicit cross-node transfers inside "
            "a layer are not supported yet; pin the whole layer to one node, e.g. -ot 'blk\\.20\\.=127.0.0.1:50053'");
  // One op's operands on two nodes, in several layers.
  auto q = make_plan(*model_, two_workers(), with_ot(request({1, 1}), "attn_q=local"));
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.error().code, ErrorCode::kSplitLayer);
  EXPECT_NE(q.error().message.find("-ot splits layer 0 across nodes: its attention op would need operands on 2 nodes: "
                                   "on 127.0.0.1:50052 (blk.0.attn_norm.weight"),
            std::string::npos)
      << q.error().message;
  EXPECT_NE(q.error().message.find("on local (blk.0.attn_q.weight, by -ot rule 'attn_q=local')"), std::string::npos)
      << q.error().message;
  EXPECT_NE(q.error().message.find("(the same holds for layers 1-39)"), std::string::npos) << q.error().message;
  // Two rules to two nodes inside one layer.
  auto r = make_plan(*model_, two_workers(), with_ot(request({1, 1}), "blk\\.3\\.attn=127.0.0.1:50052,blk\\.3\\.=127.0.0.1:50053"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kSplitLayer);
  // Split output head.
  auto s = make_plan(*model_, two_workers(), with_ot(request({1, 1}), "^output\\.=local"));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kSplitLayer);
  EXPECT_NE(s.error().message.find("the output layer"), std::string::npos) << s.error().message;
  EXPECT_NE(s.error().message.find("-ot '^output=local'"), std::string::npos) << s.error().message;
}

TEST_F(OverrideTest, pins_agreeing_with_the_flags_or_covering_a_layer_in_parts_are_fine) {
  // Parts of layer 3 pinned by two rules to the node that owns it anyway.
  auto p = make_plan(*model_, two_workers(), with_ot(request({1, 1}), "blk\\.3\\.attn=127.0.0.1:50052,blk\\.3\\.ffn_up=RPC0[127.0.0.1:50052]"));
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(owners(*p), "0-20:1 21-39:2 out:2");
  // Layer 30 pinned whole by two rules to W1.
  auto q = make_plan(*model_, two_workers(), with_ot(request({1, 1}), "blk\\.30\\.attn=127.0.0.1:50052,blk\\.30\\.ffn=127.0.0.1:50052"));
  ASSERT_TRUE(q.ok()) << q.error().message;
  EXPECT_EQ(owners(*q), "0-20:1 21-29:2 30-30:1 31-39:2 out:2");
  EXPECT_NE(all_text(q->decision_texts()).find("-ot decides layer 30: rules 'blk\\.30\\.attn=127.0.0.1:50052', "
                                        "'blk\\.30\\.ffn=127.0.0.1:50052' pins all its tensors"),
            std::string::npos)
      << all_text(q->decision_texts());
}

TEST_F(OverrideTest, rules_that_match_nothing_or_input_tensors_are_reported) {
  auto p = make_plan(*model_, two_workers(),
                     with_ot(request({1, 1}), "nothing_here=local,blk\\.1\\.=127.0.0.1:50052,blk\\.1\\.attn=local,token_embd=127.0.0.1:50053"));
  ASSERT_TRUE(p.ok()) << p.error().message;
  const std::string w = all_text(p->warnings);
  EXPECT_NE(w.find("-ot rule 'nothing_here=local' matches no tensor of this model"), std::string::npos) << w;
  EXPECT_NE(w.find("-ot rule 'blk\\.1\\.attn=local' has no effect"), std::string::npos) << w;
  EXPECT_NE(w.find("pins token_embd.weight to 127.0.0.1:50053, but input tensors stay on local"), std::string::npos) << w;
  EXPECT_EQ(p->tensor_home.at("token_embd.weight"), 0);
  // Strict placement turns the ignored input pin into an error.
  auto q = make_plan(*model_, two_workers(), with_ot(request({1, 1}), "token_embd=127.0.0.1:50053", true));
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.error().code, ErrorCode::kPlacementRefused);
}

TEST_F(OverrideTest, bad_rules_are_refused_with_their_text) {
  Request r = request({1, 1});
  r.overrides = {{"blk\\.1\\.", "CUDA0"}};
  auto p = make_plan(*model_, two_workers(), r);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(p.error().message,
            "plan: -ot rule 'blk\\.1\\.=CUDA0': unknown node 'CUDA0'; valid names: local, CPU, 127.0.0.1:50052, "
            "RPC0[127.0.0.1:50052], 127.0.0.1:50053, RPC0[127.0.0.1:50053]");
  r.overrides = {{"blk\\.(1", "local"}};
  p = make_plan(*model_, two_workers(), r);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("invalid regex 'blk\\.(1'"), std::string::npos) << p.error().message;
  r.overrides = {{"", "local"}};
  EXPECT_FALSE(make_plan(*model_, two_workers(), r).ok());
  r.overrides = {{std::string(5000, 'a'), "local"}};
  EXPECT_FALSE(make_plan(*model_, two_workers(), r).ok());
}

}  // namespace
}  // namespace strata::plan
