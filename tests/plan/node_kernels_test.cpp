// Every size that depends on a CPU comes from the node's own kernel features (plan::Node::cpu_features,
// from its Hello): a node that does not repack is sized at the file's bytes, one that does at the
// repacked sizes, whatever the machine computing the plan runs.
#include <gtest/gtest.h>

#include "model/model.h"
#include "plan/plan.h"
#include "plan_test_util.h"
#include "testing/shared_data.h"

namespace strata::plan {
namespace {

const std::vector<std::string> kRepacking = {"avx2", "fma", "f16c", "repack"};

uint64_t file_bytes(const model::Model& m, const std::vector<std::string>& names) {
  uint64_t n = 0;
  for (const std::string& name : names) n += m.file().find_tensor(name)->nbytes;
  return n;
}

TEST(NodeKernels, each_node_is_sized_by_its_own_kernels_never_by_this_machines) {
  STRATA_SHARED_FILE(path, "models/synth/qwen35moe-q4_k_m.gguf");
  auto model = model::Model::open(path);
  ASSERT_TRUE(model.ok()) << model.error().message;
  for (SplitMode mode : {SplitMode::kLayer, SplitMode::kTensor}) {
    Request r = testing::request({1, 1, 1});
    r.split_mode = mode;
    std::vector<Node> nodes = {testing::local(), worker_node(testing::kW1, 64 * testing::kGiB, 4, kUnlimited, kRepacking),
                               worker_node(testing::kW2, 64 * testing::kGiB, 4, kUnlimited, {"fma"})};
    auto p = make_plan(**model, nodes, r);
    ASSERT_TRUE(p.ok()) << p.error().message;
    EXPECT_TRUE(p->node_stages[1].repack);
    EXPECT_FALSE(p->node_stages[2].repack);
    EXPECT_GT(p->bytes[1].repacked, 0u);  // Q4_K grows by its unpacked scales
    EXPECT_EQ(p->bytes[2].repacked, 0u);
    const std::string text = render(*p);
    EXPECT_NE(text.find("kernels: " + std::string(testing::kW2) + " does not repack (its kernels: fma)"), std::string::npos) << text;
    EXPECT_EQ(text.find("kernels: " + std::string(testing::kW1)), std::string::npos) << text;
    if (mode == SplitMode::kLayer) {
      EXPECT_EQ(p->bytes[2].weights, file_bytes(**model, p->node_stages[2].tensors));
    }
    // This machine's kernels, repacking or not, change no worker's numbers.
    for (const auto& here : {std::vector<std::string>{}, kRepacking}) {
      nodes[0].cpu_features = here;
      auto q = make_plan(**model, nodes, r);
      ASSERT_TRUE(q.ok()) << q.error().message;
      EXPECT_EQ(q->node_stages[0].repack, !here.empty());
      for (size_t n = 1; n < 3; ++n) {
        EXPECT_EQ(q->bytes[n].weights, p->bytes[n].weights) << "node " << n;
        EXPECT_EQ(q->bytes[n].repacked, p->bytes[n].repacked) << "node " << n;
      }
    }
  }
}

}  // namespace
}  // namespace strata::plan
