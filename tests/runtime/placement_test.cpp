// The plan alone decides what a node holds: for the model with rope factors (read by every attention
// layer) and the one with a tied head (token_embd read by the output head), every placement over one
// and two workers gives logits bit-identical to one node, and each worker holds exactly what its
// layers and head read.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "testing/cluster.h"
#include "testing/shared_data.h"

namespace strata {
namespace {

using testing::TestCluster;

const std::vector<int32_t> kPrompt = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315};

class Placement : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cluster_ = new TestCluster(2, 1, "placement"); }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  static TestCluster* cluster_;
};
TestCluster* Placement::cluster_ = nullptr;

std::vector<float> reference(const std::string& model) {
  auto e = runtime::Engine::load(testing::single_node_options(model));
  EXPECT_TRUE(e.ok()) << e.error().message;
  return e.ok() ? testing::run_reference(**e, kPrompt, 3) : std::vector<float>{};
}

bool holds(const plan::Plan& p, int32_t node, const std::string& name) {
  const auto& on = p.tensors_on(node);
  return std::find(on.begin(), on.end(), name) != on.end();
}

// Runs `model` with -ngl 0..n_layer+1 over one worker (llama.cpp's `--rpc W -ngl N`), then with
// -ts splits over two; `check` looks at each plan.
void every_placement_matches(const std::string& model, TestCluster& cluster,
                             const std::function<void(const plan::Plan&, const std::string&)>& check) {
  const std::vector<float> want = reference(model);
  ASSERT_FALSE(want.empty());
  struct Case {
    std::string name;
    int workers;
    int32_t ngl;
    std::vector<double> split;
  };
  std::vector<Case> cases;
  auto m = model::Model::open(model);
  ASSERT_TRUE(m.ok()) << m.error().message;
  const int32_t n_layer = (*m)->hparams().n_layer;
  for (int32_t ngl = 0; ngl <= n_layer + 1; ++ngl) cases.push_back({fmt::format("-ngl {}", ngl), 1, ngl, {}});
  cases.push_back({"-ts 0,1,1", 2, -1, {0, 1, 1}});
  cases.push_back({"-ts 1,0,1", 2, -1, {1, 0, 1}});
  cases.push_back({"-ngl 1 -ts 0,1", 2, 1, {0, 1}});
  for (const Case& c : cases) {
    runtime::EngineOptions o = testing::cluster_options(model, cluster);
    o.cluster.workers.resize(c.workers);
    o.cluster.n_gpu_layers = c.ngl;
    o.cluster.tensor_split = c.split;
    auto e = runtime::Engine::load(o);
    ASSERT_TRUE(e.ok()) << c.name << ": " << e.error().message;
    check((*e)->plan(), c.name);
    const std::vector<float> got = testing::run_reference(**e, kPrompt, 3);
    ASSERT_EQ(got.size(), want.size()) << c.name;
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float))) << c.name << ": logits differ";
  }
}

TEST_F(Placement, rope_freqs_model_is_bit_identical_whatever_each_node_holds) {
  ASSERT_TRUE(cluster_->ok()) << cluster_->error();
  STRATA_SHARED_FILE(model, "models/synth/llama-ropefreqs-f32.gguf");
  every_placement_matches(model, *cluster_, [](const plan::Plan& p, const std::string& what) {
    for (int32_t n = 0; n < static_cast<int32_t>(p.nodes.size()); ++n) {
      const auto owned = p.owned_by(n);
      const bool runs_layers = std::count(owned.begin(), owned.end(), 1) > 0;
      // Rope factors go exactly where attention layers run (a head-only worker gets none).
      EXPECT_EQ(holds(p, n, "rope_freqs.weight"), runs_layers) << what << ", node " << n;
      EXPECT_EQ(holds(p, n, "output.weight"), p.output_node == n) << what << ", node " << n;
    }
  });
}

TEST_F(Placement, tied_head_on_a_worker_reads_its_copy_of_token_embd) {
  ASSERT_TRUE(cluster_->ok()) << cluster_->error();
  STRATA_SHARED_FILE(model, "models/TinyStories-656K-Q8_0.gguf");
  bool worker_head = false;
  every_placement_matches(model, *cluster_, [&](const plan::Plan& p, const std::string& what) {
    EXPECT_TRUE(holds(p, 0, "token_embd.weight")) << what << ": the coordinator embeds";
    for (int32_t n = 1; n < static_cast<int32_t>(p.nodes.size()); ++n) {
      EXPECT_EQ(holds(p, n, "token_embd.weight"), p.output_node == n) << what << ", node " << n;
    }
    worker_head |= p.output_node != 0;
  });
  EXPECT_TRUE(worker_head) << "no placement put the tied head on a worker";
}

}  // namespace
}  // namespace strata
