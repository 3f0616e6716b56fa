// The field report that made llama.cpp's RPC mode crash: two workers, -ts 1,1, and -ot pinning layers
// 0-24 to the first and 25-39 to the second. With llama.cpp's split formula (40 layers + the output
// layer, 41 units), -ts 1,1 puts layers 21-39 on the second worker, so -ot decides layers 21-24.
// Strata runs it saying so, refuses it under --strict-placement, and gives single-node output
// either way (-ts 3,2 too, where the flags agree).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "testing/cluster.h"
#include "testing/process.h"
#include "testing/shared_data.h"
#include "tools/synth.h"

namespace strata {
namespace {

using testing::TestCluster;

const std::vector<int32_t> kPrompt = {1, 300, 301, 302, 303, 304, 305, 306};

std::string forty_layer_model() {
  const auto path = std::filesystem::temp_directory_path() / "strata-field-report-40L.gguf";
  if (!std::filesystem::exists(path)) {
    tools::SynthSpec s;
    s.n_layer = 40;
    s.n_embd = 64;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.n_ff = 128;
    s.type = DType::F16;
    auto st = tools::write_synth_model(s, path.string());
    EXPECT_TRUE(st.ok()) << st.error().message;
  }
  return path.string();
}

std::vector<plan::TensorOverride> field_report_pins(const TestCluster& c) {
  const auto ep = c.endpoints();
  return {{"blk\\.([0-9]|1[0-9]|2[0-4])\\.", ep[0]}, {"blk\\.(2[5-9]|3[0-9])\\.", ep[1]}};
}

// The 40-layer models: a llama made here, and the qwen35moe with Qwen3.6-35B-A3B's layer pattern
// (Gated DeltaNet layers with a full-attention layer every fourth) from ../shared.
std::string model_for(const std::string& name) {
  return name == "llama-40L" ? forty_layer_model() : testing::shared_file("models/synth/qwen35moe-40L-f16.gguf");
}

class FieldReport : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() { cluster_ = new TestCluster(2, 1, "field"); }
  static void TearDownTestSuite() { delete cluster_; }
  static TestCluster* cluster_;
};
TestCluster* FieldReport::cluster_ = nullptr;

TEST_P(FieldReport, ot_decides_layers_21_to_24_against_ts_1_1_and_output_matches_single_node) {
  ASSERT_TRUE(cluster_->ok()) << cluster_->error();
  const std::string model = model_for(GetParam());
  if (model.empty()) return;
  runtime::EngineOptions single;
  single.model_path = model;
  single.n_ctx = 256;
  single.n_threads = 1;
  auto reference_engine = runtime::Engine::load(single);
  ASSERT_TRUE(reference_engine.ok());
  const std::vector<float> reference = testing::run_reference(**reference_engine, kPrompt, 8);

  for (const std::vector<double>& ts : {std::vector<double>{1, 1}, std::vector<double>{3, 2}}) {
    runtime::EngineOptions o = testing::cluster_options(model, *cluster_);
    o.cluster.tensor_split = ts;
    o.cluster.overrides = field_report_pins(*cluster_);
    auto e = runtime::Engine::load(o);
    ASSERT_TRUE(e.ok()) << e.error().message;
    const plan::Plan& p = (*e)->plan();
    for (int il = 0; il < 40; ++il) EXPECT_EQ(p.layer_owner[il], il < 25 ? 1 : 2) << "layer " << il;
    bool named = false;
    for (const std::string& d : p.decision_texts()) named |= d.find("-ot decides layers 21-24") != std::string::npos;
    EXPECT_EQ(named, ts[0] == 1) << "-ts " << ts[0] << "," << ts[1] << ": a decision names layers 21-24 only "
                                 << "when -ot overrode -ts";
    const std::vector<float> got = testing::run_reference(**e, kPrompt, 8);
    ASSERT_EQ(got.size(), reference.size());
    EXPECT_EQ(0, std::memcmp(got.data(), reference.data(), got.size() * sizeof(float)));
  }
}

TEST_P(FieldReport, strict_placement_refuses_at_startup_with_the_layers_named) {
  ASSERT_TRUE(cluster_->ok()) << cluster_->error();
  const std::string model = model_for(GetParam());
  if (model.empty()) return;
  runtime::EngineOptions o = testing::cluster_options(model, *cluster_);
  o.cluster.tensor_split = {1, 1};
  o.cluster.overrides = field_report_pins(*cluster_);
  o.cluster.strict_placement = true;
  auto e = runtime::Engine::load(o);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().code, ErrorCode::kPlacementRefused);
  EXPECT_NE(e.error().message.find("layers 21-24"), std::string::npos) << e.error().message;
}

TEST_P(FieldReport, cli_exits_with_status_2_under_strict_placement_and_runs_without_it) {
  ASSERT_TRUE(cluster_->ok()) << cluster_->error();
  const std::string model = model_for(GetParam());
  if (model.empty()) return;
  const auto ep = cluster_->endpoints();
  const std::string base = testing::shell_quote(testing::strata_binary()) + " run -m " +
                           testing::shell_quote(model) + " -p 'Once upon a time' -n 8 --temp 0 -c 256" +
                           " --rpc " + ep[0] + "," + ep[1] + " --token-file " +
                           testing::shell_quote(cluster_->token_file()) + " -ts 1,1 -ot 'blk\\.([0-9]|1[0-9]|2[0-4])\\.=" +
                           ep[0] + ",blk\\.(2[5-9]|3[0-9])\\.=" + ep[1] + "'";
  auto r = testing::run_command(base + " --strict-placement");
  EXPECT_EQ(r.exit_code, 2) << r.err;  // from the error's code, kPlacementRefused
  EXPECT_NE(r.err.find("error: placement refused: plan: --strict-placement"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("layers 21-24"), std::string::npos) << r.err;
  r = testing::run_command(base);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("-ot decides layers 21-24"), std::string::npos) << r.err;
}

INSTANTIATE_TEST_SUITE_P(Models, FieldReport, ::testing::Values("llama-40L", "qwen35moe-40L-f16"),
                         [](const auto& info) { return info.param == "llama-40L" ? std::string("llama_40L")
                                                                                  : std::string("qwen35moe_40L_f16"); });

}  // namespace
}  // namespace strata
