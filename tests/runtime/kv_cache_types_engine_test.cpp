// Quantized KV caches (-ctk / -ctv) through the engine: greedy continuations with a q8_0 cache follow
// the f16 cache's, and a plan over two workers caching in q8_0 gives one node's logits bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "runtime/generate.h"
#include "testing/cluster.h"
#include "testing/shared_data.h"

namespace strata {
namespace {

const std::vector<int32_t> kPrompt = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426};
constexpr int kSteps = 24;

runtime::EngineOptions options(const std::string& model, DType k, DType v) {
  runtime::EngineOptions o = testing::single_node_options(model);
  o.type_k = k;
  o.type_v = v;
  return o;
}

std::vector<float> logits_of(const runtime::EngineOptions& o) {
  auto e = runtime::Engine::load(o);
  EXPECT_TRUE(e.ok()) << e.error().message;
  return e.ok() ? testing::run_reference(**e, kPrompt, kSteps) : std::vector<float>{};
}

// The argmax of every row: prompt rows, then the greedy steps (each fed the previous argmax).
std::vector<int32_t> argmax_rows(const std::vector<float>& logits, int32_t n_vocab) {
  std::vector<int32_t> ids;
  for (size_t r = 0; r + n_vocab <= logits.size(); r += n_vocab) {
    ids.push_back(static_cast<int32_t>(std::max_element(logits.begin() + r, logits.begin() + r + n_vocab) -
                                       logits.begin() - r));
  }
  return ids;
}

// Synthetic models whose heads are whole Q8_0 blocks (head_dim 32 and 64); their vocab is 512.
TEST(KvCacheTypes, greedy_continuation_with_a_q8_0_cache_follows_the_f16_cache) {
  for (const char* file : {"models/synth/llama-dense-f32.gguf", "models/synth/qwen3-dense-f32.gguf"}) {
    STRATA_SHARED_FILE(model, file);
    const std::vector<float> f16 = logits_of(options(model, DType::F16, DType::F16));
    const std::vector<float> q8 = logits_of(options(model, DType::Q8_0, DType::Q8_0));
    ASSERT_EQ(f16.size(), q8.size());
    ASSERT_FALSE(f16.empty());
    const std::vector<int32_t> a = argmax_rows(f16, 512), b = argmax_rows(q8, 512);
    size_t same = 0;
    while (same < a.size() && a[same] == b[same]) ++same;
    double max_diff = 0;
    for (size_t i = 0; i < f16.size(); ++i) max_diff = std::max(max_diff, double(std::fabs(f16[i] - q8[i])));
    std::printf("[ kv q8_0 ] %s: argmax equal for the first %zu of %zu rows, max |logit diff| %.3g\n", file, same,
                a.size(), max_diff);
    // Every prompt row and the first 16 greedy steps (the continuation is fed its own tokens).
    EXPECT_GE(same, kPrompt.size() + 16) << file;
    // q8_0 rounds K and V to ~0.4% of each block's largest value; the logits (std ~4) move far less
    // than the f16 cache's distance to llama.cpp would let a wrong cache through unnoticed.
    EXPECT_LT(max_diff, 0.25) << file;
    EXPECT_GT(max_diff, 0.0) << file << ": the q8_0 cache changed nothing";
  }
}

TEST(KvCacheTypes, two_workers_with_quantized_caches_give_one_nodes_logits_bit_for_bit) {
  STRATA_SHARED_FILE(model, "models/synth/llama-dense-f32.gguf");
  testing::TestCluster cluster(2, 1, "kv-types");
  ASSERT_TRUE(cluster.ok()) << cluster.error();
  struct Types {
    DType k, v;
  };
  for (const Types& t : {Types{DType::Q8_0, DType::Q8_0}, Types{DType::Q4_0, DType::Q8_0}}) {
    const std::vector<float> single = logits_of(options(model, t.k, t.v));
    runtime::EngineOptions o = testing::cluster_options(model, cluster);
    o.type_k = t.k;
    o.type_v = t.v;
    o.cluster.tensor_split = {1, 1};
    auto e = runtime::Engine::load(o);
    ASSERT_TRUE(e.ok()) << e.error().message;
    const plan::Plan& p = (*e)->plan();
    int remote_layers = 0;
    for (int32_t owner : p.layer_owner) remote_layers += owner != 0;
    EXPECT_EQ(remote_layers, 4);
    for (size_t n = 1; n < p.node_stages.size(); ++n) {
      EXPECT_EQ(p.node_stages[n].type_k, t.k);
      EXPECT_EQ(p.node_stages[n].type_v, t.v);
    }
    const std::vector<float> distributed = testing::run_reference(**e, kPrompt, kSteps);
    ASSERT_EQ(distributed.size(), single.size());
    ASSERT_FALSE(single.empty());
    EXPECT_EQ(0, std::memcmp(distributed.data(), single.data(), single.size() * sizeof(float)))
        << "logits differ over the workers";
    // And the quantized cache is really in use: f16 gives other logits.
    const std::vector<float> f16 = logits_of(options(model, DType::F16, DType::F16));
    EXPECT_NE(0, std::memcmp(f16.data(), single.data(), single.size() * sizeof(float)));
  }
}

}  // namespace
}  // namespace strata
