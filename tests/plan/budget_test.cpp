// Memory budget: every node's total against its limit, refused with numbers and a fix that works;
// tied heads count token_embd on the output node too.
#include <gtest/gtest.h>

#include <iostream>
// GCC 12 reports a false -Wmaybe-uninitialized inside <regex>'s std::function states at -O2 (GCC bug
// 105562); the warning is about the library's code, not this file's.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <regex>
#include <sstream>

#include "plan/internal.h"
#include "plan/plan.h"
#include "plan_test_util.h"

namespace strata::plan {
namespace {

using namespace testing;

class BudgetTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = make_model(TinyLlama{}, "budget40");
    tied_ = make_model(TinyLlama{.tied = true}, "tied40");
  }
  static void TearDownTestSuite() {
    model_.reset();
    tied_.reset();
  }
  static std::shared_ptr<const model::Model> model_, tied_;
};
std::shared_ptr<const model::Model> BudgetTest::model_, BudgetTest::tied_;

TEST_F(BudgetTest, plan_refuses_node_over_memory_limit_with_numbers) {
  Request r = request({1, 1});
  r.n_ctx = 4096;  // 128 B per token per layer of KV: 10.5 MiB for W1's 21 layers
  const std::vector<Node> roomy = two_workers();
  auto fits = make_plan(*model_, roomy, r);
  ASSERT_TRUE(fits.ok()) << fits.error().message;
  const NodeBytes w1 = fits->bytes[1];
  EXPECT_EQ(w1.kv, 21u * 4096 * 128);

  const std::vector<Node> tight = two_workers(8 * kMiB, 8 * kMiB, 64 * kMiB);
  auto p = make_plan(*model_, tight, r);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code, ErrorCode::kResourceExhausted);
  const std::string& msg = p.error().message;
  using detail::human_bytes;
  const std::string w1_line = fmt::format("127.0.0.1:50052 needs {} (weights {}, KV {}, state 0 B, scratch {}) but its limit is 8.0 MiB",
                                          human_bytes(w1.total()), human_bytes(w1.weights), human_bytes(w1.kv),
                                          human_bytes(w1.scratch));
  EXPECT_NE(msg.find("plan: does not fit in memory: " + w1_line), std::string::npos) << msg;
  EXPECT_NE(msg.find("127.0.0.1:50053 needs"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("local needs"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Fix: "), std::string::npos) << msg;

  // Both fixes it proposes work.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(msg, m, std::regex("-ts ([0-9,]+) fits"))) << msg;
  auto ts = parse_tensor_split(m[1].str());
  ASSERT_TRUE(ts.ok());
  Request fixed = r;
  fixed.tensor_split = *ts;
  auto with_ts = make_plan(*model_, tight, fixed);
  EXPECT_TRUE(with_ts.ok()) << with_ts.error().message;
  ASSERT_TRUE(std::regex_search(msg, m, std::regex("-c ([0-9]+) fits with this placement"))) << msg;
  fixed = r;
  fixed.n_ctx = std::stoi(m[1].str());
  EXPECT_LT(fixed.n_ctx, r.n_ctx);
  auto with_c = make_plan(*model_, tight, fixed);
  EXPECT_TRUE(with_c.ok()) << with_c.error().message;
  EXPECT_EQ(owners(*with_c), "0-20:1 21-39:2 out:2");

  // Nothing fits anywhere.
  auto none = make_plan(*model_, two_workers(kMiB, kMiB, kMiB), r);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code, ErrorCode::kResourceExhausted);
  EXPECT_NE(none.error().message.find("no split or smaller context fits"), std::string::npos) << none.error().message;

  // A single node too small.
  Request single = r;
  single.tensor_split.clear();
  auto alone = make_plan(*model_, {local(8 * kMiB)}, single);
  ASSERT_FALSE(alone.ok());
  EXPECT_NE(alone.error().message.find("local needs"), std::string::npos) << alone.error().message;
  EXPECT_NE(alone.error().message.find("-c "), std::string::npos) << alone.error().message;
  alone = make_plan(*model_, {local(4 * kMiB)}, single);
  ASSERT_FALSE(alone.ok());
  EXPECT_NE(alone.error().message.find("no split or smaller context fits"), std::string::npos) << alone.error().message;
}

TEST_F(BudgetTest, tied_output_counts_token_embd_on_output_node) {
  auto p = make_plan(*tied_, two_workers(), request({1, 1}));
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->output_node, 2);
  EXPECT_EQ(p->tensor_home.count("output.weight"), 0u);
  EXPECT_EQ(p->tensor_home.at("token_embd.weight"), 0);
  auto holds = [](const Plan& plan, int32_t node, const std::string& name) {
    const auto& on = plan.tensors_on(node);
    return std::find(on.begin(), on.end(), name) != on.end();
  };
  ASSERT_EQ(p->node_stages.size(), 3u);
  EXPECT_TRUE(holds(*p, 0, "token_embd.weight"));   // the coordinator embeds
  EXPECT_FALSE(holds(*p, 1, "token_embd.weight"));
  EXPECT_TRUE(holds(*p, 2, "token_embd.weight"));   // the tied head's copy
  const auto on_w2 = p->tensors_on(2);
  EXPECT_NE(std::find(on_w2.begin(), on_w2.end(), "token_embd.weight"), on_w2.end());
  EXPECT_NE(std::find(on_w2.begin(), on_w2.end(), "output_norm.weight"), on_w2.end());

  uint64_t embd = 0, homed_w2 = 0;
  for (const auto& t : tied_->tensors()) {
    if (t.decl.name == "token_embd.weight") embd = t.info->nbytes;
    if (p->tensor_home.at(t.decl.name) == 2) homed_w2 += t.info->nbytes;
  }
  EXPECT_EQ(embd, 64u * 256 * 4);
  EXPECT_EQ(p->bytes[2].weights, homed_w2 + embd);
  EXPECT_EQ(p->bytes[0].weights, embd);
  EXPECT_NE(all_text(p->decision_texts()).find("the output head is tied to token_embd.weight: 127.0.0.1:50053 holds a copy"),
            std::string::npos)
      << all_text(p->decision_texts());

  // Output on the coordinator: no copy needed.
  auto q = make_plan(*tied_, two_workers(), request({1, 1}, 0));
  ASSERT_TRUE(q.ok()) << q.error().message;
  EXPECT_EQ(q->output_node, 0);
  EXPECT_FALSE(holds(*q, 1, "token_embd.weight"));
  EXPECT_FALSE(holds(*q, 2, "token_embd.weight"));
  // Untied model: no copy either.
  auto u = make_plan(*model_, two_workers(), request({1, 1}));
  ASSERT_TRUE(u.ok());
  EXPECT_FALSE(holds(*u, 2, "token_embd.weight"));
  // The copy is part of the budget: a W2 limit that fits the untied head's share but not the copy.
  const uint64_t w2_need = p->bytes[2].total();
  auto tight = make_plan(*tied_, two_workers(64 * kGiB, w2_need - embd / 2), request({1, 1}));
  EXPECT_FALSE(tight.ok());
}

TEST_F(BudgetTest, render_prints_one_row_per_node_then_transfers_decisions_warnings) {
  auto p = make_plan(*model_, two_workers(64 * kGiB, 64 * kGiB, 64 * kGiB),
                     [] {
                       Request r = request({1, 1});
                       r.overrides = {{"blk\\.2[1-4]\\.", kW1}, {"nothing", "local"}};
                       return r;
                     }());
  ASSERT_TRUE(p.ok()) << p.error().message;
  const std::string out = render(*p);
  std::istringstream lines(out);
  std::string header, row0, row1, row2, predicted, transfers;
  std::getline(lines, header);
  std::getline(lines, row0);
  std::getline(lines, row1);
  std::getline(lines, row2);
  std::getline(lines, predicted);
  std::getline(lines, transfers);
  EXPECT_EQ(header.substr(0, 4), "node") << out;
  EXPECT_EQ(row0.substr(0, 5), "local") << out;
  EXPECT_NE(row0.find("input "), std::string::npos) << out;
  EXPECT_NE(row1.find("127.0.0.1:50052  0-24 "), std::string::npos) << out;
  EXPECT_NE(row2.find("127.0.0.1:50053  25-39 + output"), std::string::npos) << out;
  // Nodes without a measured speed: nothing predicted, and the row says so.
  EXPECT_EQ(predicted, "predicted: unknown (no measured speed for local, 127.0.0.1:50052, 127.0.0.1:50053)") << out;
  EXPECT_EQ(row1.substr(row1.size() - 1), "?") << out;
  EXPECT_EQ(transfers, "transfers:") << out;
  EXPECT_NE(out.find("decision: -ot decides layers 21-24"), std::string::npos) << out;
  EXPECT_NE(out.find("warning: -ot rule 'nothing=local' matches no tensor"), std::string::npos) << out;
  EXPECT_LT(out.find("transfers:"), out.find("decision:"));
  EXPECT_LT(out.find("decision:"), out.find("warning:"));
}

}  // namespace
}  // namespace strata::plan
