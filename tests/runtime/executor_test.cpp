// The engine drives nodes only through exec::StageExecutor: a transport the runtime has never heard
// of (here, in-process "workers" that each hold a StageRunner of their own) plugs in through
// ClusterOptions::connect, and a plan over three such nodes gives logits bit-identical to one node.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "testing/cluster.h"
#include "testing/shared_data.h"

namespace strata {
namespace {

const std::vector<int32_t> kPrompt = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376};

class InProcessWorker final : public exec::StageExecutor {
 public:
  explicit InProcessWorker(std::string name, int* loads) : name_(std::move(name)), loads_(loads) {}
  const std::string& name() const override { return name_; }
  Result<exec::NodeFacts> hello() override {
    exec::NodeFacts f;
    f.threads = 1;
    f.memory_limit = f.memory_available = uint64_t{1} << 32;
    return f;
  }
  Result<uint64_t> load(const exec::StageLoad& load, const exec::ProgressFn&) override {
    ++*loads_;
    stage_ = load.stage;
    STRATA_ASSIGN(runner_, model::StageRunner::create(load.model, load.stage));
    return uint64_t{0};
  }
  Result<std::vector<float>> run(std::span<const exec::Hop> hops, const model::Batch& batch, std::vector<float>& hidden,
                                 int32_t) override {
    EXPECT_EQ(hops.size(), 1u) << "this transport does not chain";
    STRATA_TRY(runner_->validate(batch, false, hops[0].again));
    STRATA_TRY(runner_->run_layers(batch, hops[0].first, hops[0].end, hidden.data()));
    if (!hops[0].output) return std::vector<float>{};
    return runner_->logits(batch, hidden.data());
  }
  Status seq_op(exec::SeqOp op, int32_t seq, int32_t p0, int32_t dst) override {
    return exec::apply_seq_op(*runner_, op, seq, p0, dst);
  }
  Result<bool> ping() override { return runner_ != nullptr; }
  const model::StageConfig& stage() const { return stage_; }

 private:
  std::string name_;
  int* loads_;
  model::StageConfig stage_;
  std::unique_ptr<model::StageRunner> runner_;
};

TEST(Executors, a_new_transport_plugs_in_through_the_connector_and_matches_one_node) {
  STRATA_SHARED_FILE(model, "models/synth/qwen35moe-f32.gguf");
  const runtime::EngineOptions one = testing::single_node_options(model, 128);
  auto single = runtime::Engine::load(one);
  ASSERT_TRUE(single.ok()) << single.error().message;
  const std::vector<float> want = testing::run_reference(**single, kPrompt, 3);

  int loads = 0;
  std::vector<InProcessWorker*> workers;
  runtime::EngineOptions o = one;
  o.cluster.workers = {"mem:1", "mem:2"};
  o.cluster.tensor_split = {1, 2, 1};
  o.cluster.transport.connect = [&](const std::string& endpoint) -> Result<std::unique_ptr<exec::StageExecutor>> {
    auto w = std::make_unique<InProcessWorker>(endpoint, &loads);
    workers.push_back(w.get());
    return std::unique_ptr<exec::StageExecutor>(std::move(w));
  };
  auto three = runtime::Engine::load(o);
  ASSERT_TRUE(three.ok()) << three.error().message;
  EXPECT_EQ(loads, 2);
  ASSERT_EQ(workers.size(), 2u);
  // Each worker got exactly the plan's stage for it.
  for (int32_t n = 1; n <= 2; ++n) {
    EXPECT_EQ(workers[n - 1]->stage().tensors, (*three)->plan().tensors_on(n));
    EXPECT_EQ(workers[n - 1]->stage().owned, (*three)->plan().owned_by(n));
    EXPECT_GT(std::count(workers[n - 1]->stage().owned.begin(), workers[n - 1]->stage().owned.end(), 1), 0);
  }
  const std::vector<float> got = testing::run_reference(**three, kPrompt, 3);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float))) << "logits differ";
}

}  // namespace
}  // namespace strata
