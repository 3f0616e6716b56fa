// -sm tensor over worker processes on 127.0.0.1 (dense, hybrid DeltaNet and mixture-of-experts
// models): every member holds a slice of every layer and the
// members add their partial sums over their data links. Logits stay within the golden tolerance of
// one node's and of llama.cpp's, greedy tokens agree under the golden margin rule, results are the
// same bits run to run and for any thread count, and a member that dies mid-token ends the request
// with an error naming it, after which the cluster recovers.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "runtime/generate.h"
#include "testing/cluster.h"
#include "testing/golden.h"
#include "testing/shared_data.h"

namespace strata {
namespace {

using testing::TestCluster;

class TensorSplit : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cluster_ = new TestCluster(2, 1, "tensor"); }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  static runtime::EngineOptions tensor_options(const std::string& model, std::vector<double> split, int workers = 2) {
    runtime::EngineOptions o = testing::cluster_options(model, *cluster_);
    o.cluster.workers.resize(workers);
    o.cluster.split_mode = plan::SplitMode::kTensor;
    o.cluster.tensor_split = std::move(split);
    return o;
  }
  static TestCluster* cluster_;
};
TestCluster* TensorSplit::cluster_ = nullptr;

std::vector<float> reference_logits(runtime::EngineOptions o, const std::vector<int32_t>& prompt, int n_decode) {
  auto e = runtime::Engine::load(o);
  EXPECT_TRUE(e.ok()) << e.error().message;
  return e.ok() ? testing::run_reference(**e, prompt, n_decode) : std::vector<float>{};
}

// Positions' logits against one node's: within the golden max-abs tolerance, and the same argmax
// wherever one node's top two differ by more than twice that. The rows after the prompt follow each
// side's own greedy picks, so they are compared only up to the first pick that was that close a call
// (either side may take it; the random synthetic models have such near-ties).
void expect_close_to_one_node(const std::vector<float>& got, const std::vector<float>& want, int32_t n_vocab,
                              size_t n_prompt, double tolerance, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  ASSERT_FALSE(got.empty()) << what;
  for (size_t row = 0; row * n_vocab < want.size(); ++row) {
    const float* w = want.data() + row * n_vocab;
    const float* g = got.data() + row * n_vocab;
    double worst = 0;
    for (int32_t k = 0; k < n_vocab; ++k) worst = std::max(worst, double(std::abs(w[k] - g[k])));
    EXPECT_LE(worst, tolerance) << what << ", row " << row;
    std::vector<float> top(w, w + n_vocab);
    std::partial_sort(top.begin(), top.begin() + 2, top.end(), std::greater<>());
    const bool clear = top[0] - top[1] > 2 * tolerance;
    if (clear) {
      EXPECT_EQ(std::max_element(g, g + n_vocab) - g, std::max_element(w, w + n_vocab) - w) << what << ", row " << row;
    }
    if (row + 1 >= n_prompt && !clear) return;  // the next row decodes this row's pick
  }
}

TEST_F(TensorSplit, golden_models_over_two_and_three_members_match_one_node_and_llama_cpp) {
  ASSERT_TRUE(cluster_->ok()) << cluster_->error();
  struct Split {
    const char* name;
    std::vector<double> ts;
    int workers;
    plan::ExpertSplit experts = plan::ExpertSplit::kRows;
  };
  const std::vector<Split> splits = {{"this machine and one worker", {1, 1}, 1},
                                     {"two workers, this machine only coordinates", {1, 1}, 2},
                                     {"three members, uneven", {2, 1, 1}, 2},
                                     {"whole experts, this machine and one worker", {1, 1}, 1, plan::ExpertSplit::kWhole},
                                     {"whole experts, three members", {2, 1, 1}, 2, plan::ExpertSplit::kWhole}};
  for (const char* name : {"llama-dense-q8_0", "llama-dense-q4_k_m", "llama-dense-f16", "qwen3-dense-f32",
                           "stories260K", "llama-ropefreqs-f32", "qwen35moe-q4_k_m", "qwen35-dense-f32",
                           "qwen3moe-q4_k_m"}) {
    testing::Golden g;
    if (!testing::load_golden(name, g)) continue;
    const std::vector<float> one = reference_logits(testing::single_node_options(g.model_path), g.prompt_tokens, 4);
    for (size_t s = 0; s < splits.size(); ++s) {
      if (splits[s].experts == plan::ExpertSplit::kWhole && std::string(name).find("moe") == std::string::npos) continue;
      runtime::EngineOptions o = tensor_options(g.model_path, splits[s].ts, splits[s].workers);
      o.cluster.expert_split = splits[s].experts;
      const std::vector<float> got = reference_logits(o, g.prompt_tokens, 4);
      const std::string what = std::string(name) + ", " + splits[s].name;
      expect_close_to_one_node(got, one, g.n_vocab, g.prompt_tokens.size(), g.tolerance.max_abs, what);
      // The prompt rows against llama.cpp's golden logits.
      double worst = 0;
      for (size_t pos = 0; pos < g.logits.size() && !got.empty(); ++pos) {
        for (size_t k = 0; k < g.logits[pos].size(); ++k) {
          const size_t id = g.topk_ids.empty() ? k : static_cast<size_t>(g.topk_ids[pos][k]);
          worst = std::max(worst, std::abs(double(got[pos * g.n_vocab + id]) - g.logits[pos][k]));
        }
      }
      EXPECT_LE(worst, g.tolerance.max_abs) << what << ": against llama.cpp";
    }
  }
}

TEST_F(TensorSplit, the_same_bits_run_to_run_and_for_any_thread_count) {
  ASSERT_TRUE(cluster_->ok()) << cluster_->error();
  STRATA_SHARED_FILE(model, "models/synth/llama-dense-q8_0.gguf");
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376};
  runtime::EngineOptions a = tensor_options(model, {1, 1, 1});
  const std::vector<float> first = reference_logits(a, prompt, 6);
  const std::vector<float> again = reference_logits(a, prompt, 6);
  runtime::EngineOptions b = a;
  b.n_threads = 2;
  b.cluster.worker_threads = 2;
  const std::vector<float> threads = reference_logits(b, prompt, 6);
  // The batches as Forward calls instead of messages on the data links: the same bits.
  ::setenv("STRATA_LINK_STEPS", "off", 1);
  const std::vector<float> calls = reference_logits(a, prompt, 6);
  ::unsetenv("STRATA_LINK_STEPS");
  ASSERT_FALSE(first.empty());
  EXPECT_EQ(first, again);
  EXPECT_EQ(first, threads);
  EXPECT_EQ(first, calls);
}

TEST(TensorSplitFault, a_member_killed_mid_token_fails_the_request_naming_it_then_the_group_recovers) {
  STRATA_SHARED_FILE(model, "models/synth/llama-dense-q8_0.gguf");
  TestCluster cluster(2, 1, "tensor-kill");
  ASSERT_TRUE(cluster.ok()) << cluster.error();
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 432, 383, 286};
  runtime::EngineOptions o = testing::cluster_options(model, cluster);
  o.cluster.split_mode = plan::SplitMode::kTensor;
  o.cluster.tensor_split = {1, 1, 1};
  o.cluster.timeout_ms = 3000;
  auto e = runtime::Engine::load(o);
  ASSERT_TRUE(e.ok()) << e.error().message;
  Status st;
  const std::vector<int32_t> want = testing::greedy_tokens(**e, prompt, 16, &st);
  ASSERT_TRUE(st.ok()) << st.error().message;

  const std::string victim = cluster.endpoints()[1];
  const auto start = std::chrono::steady_clock::now();
  testing::greedy_tokens(**e, prompt, 16, &st, [&](int produced) {
    if (produced == 3) cluster.worker(1).kill(SIGKILL);
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find(victim), std::string::npos) << st.error().message;
  EXPECT_TRUE(st.error().code == ErrorCode::kUnavailable || st.error().code == ErrorCode::kDeadlineExceeded)
      << error_code_name(st.error().code) << ": " << st.error().message;
  EXPECT_LT(seconds, 3.0 + 2.0) << "the failure must come within the deadline";

  // The coordinator survives; with the member back, the group links up again and answers as before.
  ASSERT_TRUE(cluster.restart(1));
  const std::vector<int32_t> got = testing::greedy_tokens(**e, prompt, 16, &st);
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_EQ(got, want);
}


// A worker without the model file receives only the bytes of its slices (and its head's rows of a
// tied token_embd, as it does not embed), keeps them as sparse slices in its cache, and needs
// nothing the next time.
TEST(TensorSplitLoad, a_member_without_the_file_receives_only_its_slices) {
  STRATA_SHARED_FILE(model, "models/synth/llama-dense-q8_0.gguf");
  TestCluster cluster(1, 1, "tensor-slices");
  ASSERT_TRUE(cluster.ok()) << cluster.error();
  runtime::EngineOptions o = testing::cluster_options(model, cluster);
  o.cluster.split_mode = plan::SplitMode::kTensor;
  o.cluster.tensor_split = {1, 1};
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 432, 383, 286};
  std::vector<int32_t> first;
  uint64_t whole = 0;
  {
    auto e = runtime::Engine::load(o);
    ASSERT_TRUE(e.ok()) << e.error().message;
    ASSERT_EQ((*e)->loads().size(), 1u);
    for (const std::string& name : (*e)->plan().node_stages[1].tensors) {
      whole += (*e)->model().file().find_tensor(name)->nbytes;
    }
    const uint64_t sent = (*e)->loads()[0].bytes_sent;
    EXPECT_GT(sent, whole * 4 / 10) << "of " << whole;
    EXPECT_LT(sent, whole * 6 / 10) << "of " << whole;
    Status st;
    first = testing::greedy_tokens(**e, prompt, 8, &st);
    ASSERT_TRUE(st.ok()) << st.error().message;
  }
  auto again = runtime::Engine::load(o);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ((*again)->loads()[0].bytes_sent, 0u);
  Status st;
  EXPECT_EQ(testing::greedy_tokens(**again, prompt, 8, &st), first);
  ASSERT_TRUE(st.ok()) << st.error().message;
  auto one = runtime::Engine::load(testing::single_node_options(model));
  ASSERT_TRUE(one.ok()) << one.error().message;
  EXPECT_EQ(testing::greedy_tokens(**one, prompt, 8, &st), first);
}

}  // namespace
}  // namespace strata
