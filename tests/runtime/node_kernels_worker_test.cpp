// A worker whose kernels do not repack (here one started with STRATA_MAX_ISA=scalar, as on a CPU
// without AVX2) says so at Hello; the plan sizes it by that, not by this machine's CPU, and the
// worker then holds exactly the bytes the plan counted.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>

#include "runtime/engine.h"
#include "tensor/repack.h"
#include "testing/cluster.h"
#include "testing/process.h"
#include "testing/shared_data.h"

namespace strata::runtime {
namespace {

// The weight bytes the worker's log says its last loaded session holds.
uint64_t logged_weight_bytes(const std::string& log_path) {
  std::ifstream in(log_path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  static const std::regex loaded(R"(loaded: (\d+) bytes of weights)");
  uint64_t last = 0;
  for (auto it = std::sregex_iterator(s.begin(), s.end(), loaded); it != std::sregex_iterator(); ++it) {
    last = std::stoull((*it)[1].str());
  }
  return last;
}

TEST(NodeKernels, a_worker_without_avx2_is_planned_by_its_own_kernels_and_holds_what_the_plan_counts) {
  STRATA_SHARED_FILE(model, "models/synth/llama-dense-q4_k_m.gguf");
  if (!tensor::this_cpu_repacks()) GTEST_SKIP() << "this machine does not repack either: nothing to tell apart";
  ::setenv("STRATA_MAX_ISA", "scalar", 1);  // for the worker only: this process chose its kernels already
  testing::TestCluster cluster(1, 1, "scalar-worker", {"-v"});  // -v: its load line in its log
  ::unsetenv("STRATA_MAX_ISA");
  ASSERT_TRUE(cluster.ok()) << cluster.error();
  EngineOptions o = testing::cluster_options(model, cluster);
  o.cluster.tensor_split = {1, 1};
  auto e = Engine::load(o);
  ASSERT_TRUE(e.ok()) << e.error().message;
  const plan::Plan& p = (*e)->plan();
  EXPECT_TRUE(p.node_stages[0].repack);
  EXPECT_FALSE(p.node_stages[1].repack);
  EXPECT_TRUE(p.nodes[1].cpu_features.empty()) << "a scalar worker reports no SIMD features";
  uint64_t file = 0;
  for (const std::string& name : p.node_stages[1].tensors) file += (*e)->model().file().find_tensor(name)->nbytes;
  EXPECT_EQ(p.bytes[1].weights, file);
  EXPECT_EQ(p.bytes[1].repacked, 0u);
  EXPECT_EQ(logged_weight_bytes(cluster.log_path(0)), p.bytes[1].weights) << testing::log_tail(cluster.log_path(0));

  // The scalar worker's layers give the tokens one node gives.
  testing::expect_greedy_tokens_of_one_node(**e, model);
}

}  // namespace
}  // namespace strata::runtime
