// Several nodes, one plan: logits over 2-3 workers on 127.0.0.1 are bit-identical to one node, for
// every golden model of the architectures built so far and several placements.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "model/synth.h"
#include "runtime/generate.h"
#include "testing/cluster.h"
#include "testing/golden.h"
#include "testing/shared_data.h"

namespace strata {
namespace {

using testing::TestCluster;

const std::vector<int32_t> kPrompt = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426};

class Cluster : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cluster_ = new TestCluster(3, 1, "placements"); }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  static TestCluster* cluster_;
};
TestCluster* Cluster::cluster_ = nullptr;

struct Placement {
  const char* name;
  int workers;                // first N of the cluster's workers
  std::vector<double> split;  // -ts
  std::vector<plan::TensorOverride> overrides;
  int32_t worker_threads = 0;
};

std::vector<float> single_node(const std::string& model, int threads) {
  runtime::EngineOptions o;
  o.model_path = model;
  o.n_ctx = 256;
  o.n_threads = threads;
  o.n_batch = 256;
  auto e = runtime::Engine::load(o);
  EXPECT_TRUE(e.ok()) << e.error().message;
  return e.ok() ? testing::run_reference(**e, kPrompt, 4) : std::vector<float>{};
}

void expect_bit_identical(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  ASSERT_FALSE(a.empty()) << what;
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << what << ": logits differ";
}

TEST_F(Cluster, distributed_logits_are_bit_identical_to_single_node_for_every_golden_model) {
  ASSERT_TRUE(cluster_->ok()) << cluster_->error();
  const auto endpoints = cluster_->endpoints();
  const std::vector<Placement> placements = {
      {"even split over 2 workers", 2, {1, 1}, {}},
      {"uneven split, this machine first", 3, {1, 3, 2, 1}, {}},
      {"-ot whole-layer pins", 2, {1, 1}, {{"blk\\.0\\.", endpoints[1]}, {"blk\\.1\\.", "local"}}},
      {"worker threads 2", 2, {1, 1}, {}, 2},
      // With 8 layers + output, layers 0-6 on the first worker and 7 on the second: in the hybrid models the
      // linear-attention layer 6 and the full-attention layer 7 have different owners.
      {"uneven -ts 3,1", 2, {3, 1}, {}},
  };
  for (const char* name : {"stories260K", "TinyStories-656K-Q8_0", "llama-dense-f32", "llama-dense-f16",
                           "llama-dense-bf16", "llama-dense-q8_0", "llama-dense-q6_k", "llama-dense-q5_k_m",
                           "llama-dense-q4_k_m", "llama-dense-q4_0", "llama-dense-iq4_xs", "qwen3-dense-f32",
                           "qwen3moe-f32", "qwen3moe-q4_k_m", "qwen35moe-f32", "qwen35moe-q4_k_m", "qwen35-dense-f32",
                           "qwen35moe-40L-f16"}) {
    testing::Golden g;
    if (!testing::load_golden(name, g)) continue;
    const std::vector<float> reference = single_node(g.model_path, 1);
    for (const Placement& p : placements) {
      runtime::EngineOptions o = testing::cluster_options(g.model_path, *cluster_);
      o.cluster.workers.resize(p.workers);
      o.cluster.tensor_split = p.split;
      o.cluster.overrides = p.overrides;
      o.cluster.worker_threads = p.worker_threads;
      auto e = runtime::Engine::load(o);
      ASSERT_TRUE(e.ok()) << name << " / " << p.name << ": " << e.error().message;
      int remote_layers = 0;
      for (int32_t owner : (*e)->plan().layer_owner) remote_layers += owner != 0;
      EXPECT_GT(remote_layers, 0) << p.name;
      expect_bit_identical(testing::run_reference(**e, kPrompt, 4), reference, std::string(name) + " / " + p.name);
    }
  }
}

TEST_F(Cluster, second_start_with_a_warm_cache_sends_no_weights) {
  ASSERT_TRUE(cluster_->ok()) << cluster_->error();
  STRATA_SHARED_FILE(model, "models/synth/llama-dense-q4_k_m.gguf");
  runtime::EngineOptions o = testing::cluster_options(model, *cluster_);
  o.cluster.workers.resize(2);
  o.cluster.tensor_split = {1, 1};
  uint64_t cold = 0, warm = 0;
  {
    auto e = runtime::Engine::load(o);
    ASSERT_TRUE(e.ok()) << e.error().message;
    for (const auto& l : (*e)->loads()) cold += l.bytes_sent;
  }
  {
    auto e = runtime::Engine::load(o);
    ASSERT_TRUE(e.ok()) << e.error().message;
    for (const auto& l : (*e)->loads()) warm += l.bytes_sent;
  }
  // The first start of this model on these workers may already be warm from another test; the
  // second never sends anything.
  EXPECT_EQ(warm, 0u);
  RecordProperty("cold_bytes", std::to_string(cold));
}

TEST_F(Cluster, sequence_operations_reach_every_owner) {
  ASSERT_TRUE(cluster_->ok()) << cluster_->error();
  STRATA_SHARED_FILE(model, "models/stories260K.gguf");
  runtime::EngineOptions o = testing::cluster_options(model, *cluster_);
  o.n_seq = 2;
  o.cluster.workers.resize(2);
  o.cluster.tensor_split = {1, 1, 1};
  auto e = runtime::Engine::load(o);
  ASSERT_TRUE(e.ok()) << e.error().message;
  auto full = runtime::evaluate_prompt(**e, 0, kPrompt, true);
  ASSERT_TRUE(full.ok()) << full.error().message;
  // Copy sequence 0 into 1, drop 1's tail, then re-run the tail on 1: the same logits.
  ASSERT_TRUE((*e)->copy_seq(0, 1).ok());
  ASSERT_TRUE((*e)->remove_from(1, 10).ok());
  model::Batch b;
  for (size_t i = 10; i < kPrompt.size(); ++i) b.add(kPrompt[i], static_cast<int32_t>(i), 1, true);
  auto tail = (*e)->decode(b);
  ASSERT_TRUE(tail.ok()) << tail.error().message;
  const size_t V = (*e)->n_vocab();
  EXPECT_EQ(0, std::memcmp(tail->data(), full->data() + 10 * V, tail->size() * sizeof(float)));
  // A cleared sequence restarts at position 0 on every node.
  ASSERT_TRUE((*e)->clear_seq(1).ok());
  b.clear();
  b.add(1, 0, 1, true);
  EXPECT_TRUE((*e)->decode(b).ok());
}

}  // namespace
}  // namespace strata
