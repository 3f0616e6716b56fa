// Several nodes, one plan: logits over 2-3 workers on 127.0.0.1 are bit-identical to one node, for
// every golden model of the architectures built so far and several placements.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

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
                           "qwen35moe-40L-f16", "qwen3next-f32", "llama-ropefreqs-f32", "llama-dense-q2_k",
                           "llama-dense-q3_k_m", "llama-dense-q4_1", "llama-dense-q5_1", "llama-dense-iq4_nl"}) {
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

// A remote output stage sending only each row's k best logits: the rows keep exactly those entries
// (bit-identical to the full row's), and sampling from them draws the same tokens as one node does
// with the whole vocabulary, for greedy and for seeded top-k sampling.
TEST_F(Cluster, output_stage_candidates_sample_like_full_logits) {
  ASSERT_TRUE(cluster_->ok()) << cluster_->error();
  STRATA_SHARED_FILE(model, "models/synth/llama-dense-q4_k_m.gguf");
  runtime::EngineOptions single;
  single.model_path = model;
  single.n_ctx = 256;
  single.n_threads = 1;
  auto one = runtime::Engine::load(single);
  ASSERT_TRUE(one.ok()) << one.error().message;
  runtime::EngineOptions o = testing::cluster_options(model, *cluster_);
  o.cluster.workers.resize(2);
  o.cluster.tensor_split = {1, 1};
  auto two = runtime::Engine::load(o);
  ASSERT_TRUE(two.ok()) << two.error().message;
  ASSERT_NE((*two)->plan().layer_owner.back(), 0) << "the output stage must be remote for this test";

  const std::vector<text::Token> prompt(kPrompt.begin(), kPrompt.end());
  auto full = runtime::evaluate_prompt(**one, 0, prompt, false);
  auto top = runtime::evaluate_prompt(**two, 0, prompt, false, 40);
  ASSERT_TRUE(full.ok()) << full.error().message;
  ASSERT_TRUE(top.ok()) << top.error().message;
  ASSERT_EQ(full->size(), top->size());
  int kept = 0;
  for (size_t i = 0; i < full->size(); ++i) {
    if (std::isinf((*top)[i])) continue;
    ++kept;
    ASSERT_EQ((*top)[i], (*full)[i]) << "token " << i;
  }
  EXPECT_EQ(kept, 40);
  const auto best = sampling::top_candidates(*full, 40);
  for (const auto& c : best) EXPECT_FALSE(std::isinf((*top)[c.id])) << "candidate " << c.id << " missing";

  for (float temp : {0.0f, 0.8f}) {
    sampling::Params p;
    p.temp = temp;
    p.seed = 1234;
    std::vector<text::Token> tokens[2];
    runtime::Engine* engines[2] = {one->get(), two->get()};
    for (int k = 0; k < 2; ++k) {
      sampling::Sampler sampler(p, engines[k]->n_vocab());
      runtime::GenerationRequest req{prompt, 24, 0, true};
      auto stats = runtime::generate(*engines[k], req, sampler, [&](text::Token t, const std::string&) {
        if (t >= 0) tokens[k].push_back(t);
        return true;
      });
      ASSERT_TRUE(stats.ok()) << stats.error().message;
    }
    EXPECT_EQ(tokens[0].size(), 24u);
    EXPECT_EQ(tokens[0], tokens[1]) << "temp " << temp;
  }
}

TEST(ClusterCache, first_start_sends_the_weights_and_a_second_with_the_warm_cache_sends_none) {
  STRATA_SHARED_FILE(model, "models/synth/llama-dense-q4_k_m.gguf");
  TestCluster cluster(2, 1, "warm-cache");  // fresh, empty caches
  ASSERT_TRUE(cluster.ok()) << cluster.error();
  runtime::EngineOptions o = testing::cluster_options(model, cluster);
  o.cluster.tensor_split = {1, 1};
  uint64_t cold = 0, warm = 0;
  {
    auto e = runtime::Engine::load(o);
    ASSERT_TRUE(e.ok()) << e.error().message;
    ASSERT_EQ((*e)->loads().size(), 2u);
    for (const auto& l : (*e)->loads()) {
      cold += l.bytes_sent;
      EXPECT_GT(l.bytes_sent, 0u) << l.node << ": a cold cache receives its stage's weights";
    }
  }
  {
    auto e = runtime::Engine::load(o);
    ASSERT_TRUE(e.ok()) << e.error().message;
    for (const auto& l : (*e)->loads()) warm += l.bytes_sent;
    auto logits = runtime::evaluate_prompt(**e, 0, kPrompt, false);
    EXPECT_TRUE(logits.ok()) << logits.error().message;
  }
  EXPECT_GT(cold, 0u);
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
