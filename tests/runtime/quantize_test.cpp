// strata quantize: per-tensor types match llama-quantize's and the quantized models match the golden
// logits of llama.cpp's own quantizations.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "gguf/gguf.h"
#include "engine_test_util.h"
#include "runtime/engine.h"
#include "runtime/generate.h"
#include "testing/golden.h"
#include "testing/shared_data.h"
#include "tools/quantize.h"

namespace strata::tools {
namespace {

// Quantizes the F32 llama-dense model and checks types, metadata and (optionally) logits.
void check_quantization(QuantType type, const std::string& stem, bool check_logits,
                        const std::string& source = "models/synth/llama-dense-f32.gguf") {
  STRATA_SHARED_FILE(src, source);
  STRATA_SHARED_FILE(ref_path, "models/synth/" + stem + ".gguf");
  const std::string out = (strata::testing::scratch_dir() / (stem + "-strata.gguf")).string();
  auto status = quantize_model(src, out, type, 2);
  ASSERT_TRUE(status.ok()) << status.error().message;

  auto ours = gguf::File::open(out);
  ASSERT_TRUE(ours.ok()) << ours.error().message;
  auto ref = gguf::File::open(ref_path);
  ASSERT_TRUE(ref.ok()) << ref.error().message;
  ASSERT_EQ((*ours)->tensors().size(), (*ref)->tensors().size());
  size_t identical = 0;
  for (const auto& t : (*ref)->tensors()) {
    const gguf::TensorInfo* o = (*ours)->find_tensor(t.name);
    ASSERT_NE(o, nullptr) << t.name;
    EXPECT_EQ(dtype_name(o->type), dtype_name(t.type)) << t.name;
    EXPECT_EQ(o->nbytes, t.nbytes) << t.name;
    if (o->nbytes == t.nbytes && std::memcmp((*ours)->tensor_data(*o), (*ref)->tensor_data(t), t.nbytes) == 0) {
      ++identical;
    }
  }
  std::printf("[ quantize ] %s: %zu of %zu tensors byte-identical to llama-quantize's\n", stem.c_str(), identical,
              (*ref)->tensors().size());
  EXPECT_EQ(identical, (*ref)->tensors().size());
  // Same metadata order, tensor order and reference quantizers as llama-quantize: the whole file matches.
  const auto a = (*ours)->bytes(), b = (*ref)->bytes();
  EXPECT_TRUE(a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size()) == 0) << "file differs from " << ref_path;
  auto ft = (*ours)->get_u32("general.file_type");
  ASSERT_TRUE(ft.ok());
  EXPECT_EQ(*ft, quant_file_type(type));
  auto qv = (*ours)->get_u32("general.quantization_version");
  ASSERT_TRUE(qv.ok());
  EXPECT_EQ(*qv, 2u);
  for (const auto& kv : (*ref)->kvs()) EXPECT_TRUE((*ours)->has(kv.key)) << kv.key;
  if (!check_logits) return;

  strata::testing::Golden g;
  if (!strata::testing::load_golden(stem, g)) return;
  runtime::EngineOptions opt;
  opt.model_path = out;
  opt.n_ctx = 256;
  opt.n_threads = 2;
  auto engine = runtime::Engine::load(opt);
  ASSERT_TRUE(engine.ok()) << engine.error().message;
  auto logits = runtime::evaluate_prompt(**engine, 0, g.prompt_tokens, true);
  ASSERT_TRUE(logits.ok()) << logits.error().message;
  const size_t n_vocab = static_cast<size_t>(g.n_vocab);
  ASSERT_EQ(logits->size(), g.prompt_tokens.size() * n_vocab);
  double max_abs = 0, sum = 0;
  size_t n = 0;
  for (size_t pos = 0; pos < g.logits.size(); ++pos) {
    for (size_t k = 0; k < g.logits[pos].size(); ++k) {
      const size_t id = g.topk_ids.empty() ? k : static_cast<size_t>(g.topk_ids[pos][k]);
      const double d = std::fabs((*logits)[pos * n_vocab + id] - g.logits[pos][k]);
      max_abs = std::max(max_abs, d);
      sum += d;
      ++n;
    }
  }
  const double mean_abs = sum / static_cast<double>(n);
  std::printf("[ quantize ] %s vs golden: max abs %.4f, mean abs %.5f\n", stem.c_str(), max_abs, mean_abs);
  EXPECT_LT(max_abs, 0.5);
  EXPECT_LT(mean_abs, 0.06);
  std::filesystem::remove(out);
}

TEST(Quantize, LlamaDenseQ4_K_M) { check_quantization(QuantType::Q4_K_M, "llama-dense-q4_k_m", true); }
TEST(Quantize, LlamaDenseQ8_0) { check_quantization(QuantType::Q8_0, "llama-dense-q8_0", true); }
TEST(Quantize, LlamaDenseQ6_K) { check_quantization(QuantType::Q6_K, "llama-dense-q6_k", true); }
TEST(Quantize, LlamaDenseQ5_K_M) { check_quantization(QuantType::Q5_K_M, "llama-dense-q5_k_m", true); }
TEST(Quantize, LlamaDenseQ4_0) { check_quantization(QuantType::Q4_0, "llama-dense-q4_0", true); }

// MoE rules (8 experts: attn_k/attn_v Q8_0, attn_output Q5_K; ffn_down_exps layer from the name).
TEST(Quantize, Qwen3MoeQ4_K_MTypes) {
  check_quantization(QuantType::Q4_K_M, "qwen3moe-q4_k_m", false, "models/synth/qwen3moe-f32.gguf");
}

TEST(Quantize, TypeNames) {
  EXPECT_EQ(quant_type_from_name("Q4_K_M"), QuantType::Q4_K_M);
  EXPECT_EQ(quant_type_from_name("q8_0"), QuantType::Q8_0);
  EXPECT_EQ(quant_type_from_name("q6_K"), QuantType::Q6_K);
  EXPECT_FALSE(quant_type_from_name("q3_k_m").has_value());
}

TEST(Quantize, RejectsQuantizedInputNamingTheTensor) {
  STRATA_SHARED_FILE(src, "models/synth/llama-dense-q8_0.gguf");
  const std::string out = (strata::testing::scratch_dir() / "rejected.gguf").string();
  auto status = quantize_model(src, out, QuantType::Q4_K_M, 2);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message.find("tensor 'output.weight'"), std::string::npos) << status.error().message;
}

// Rows are handed to the thread pool in chunks; the bytes must not depend on how many threads took them.
TEST(Quantize, OutputDoesNotDependOnTheThreadCount) {
  STRATA_SHARED_FILE(src, "models/synth/llama-dense-f32.gguf");
  std::vector<std::string> files;
  for (int32_t threads : {1, 3}) {
    const std::string out =
        (strata::testing::scratch_dir() / ("threads-" + std::to_string(threads) + ".gguf")).string();
    size_t reported = 0;
    auto status = quantize_model(src, out, QuantType::Q4_K_M, threads, [&](const QuantizeProgress& p) {
      EXPECT_EQ(p.index, ++reported);
    });
    ASSERT_TRUE(status.ok()) << status.error().message;
    EXPECT_GT(reported, 0u);
    std::ifstream in(out, std::ios::binary);
    files.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  EXPECT_FALSE(files[0].empty());
  EXPECT_TRUE(files[0] == files[1]) << "1 and 3 threads wrote different files";
}

TEST(Quantize, MissingInputIsAnError) {
  auto status = quantize_model("/nonexistent/model.gguf", "/tmp/never.gguf", QuantType::Q8_0, 1);
  EXPECT_FALSE(status.ok());
}

}  // namespace
}  // namespace strata::tools
