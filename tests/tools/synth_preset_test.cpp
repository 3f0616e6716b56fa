// `strata synth` presets carry the real models' shapes; padded vocabularies and tied heads load back.
#include <gtest/gtest.h>

#include <filesystem>

#include "model/model.h"
#include "tools/synth.h"

namespace strata::tools {
namespace {

TEST(SynthPreset, llama_1b_has_llama_3_2_1b_shape) {
  auto s = synth_preset("llama-1b");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->arch, "llama");
  EXPECT_EQ(s->n_embd, 2048);
  EXPECT_EQ(s->n_layer, 16);
  EXPECT_EQ(s->n_head, 32);
  EXPECT_EQ(s->n_head_kv, 8);
  EXPECT_EQ(s->n_ff, 8192);
  EXPECT_EQ(s->n_vocab, 128256);
  EXPECT_TRUE(s->tied_output);
  EXPECT_TRUE(validate(*s).ok());
}

TEST(SynthPreset, qwen35moe_a3b_has_the_qwen3_6_35b_a3b_layer_shape) {
  auto s = synth_preset("qwen35moe-a3b");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->arch, "qwen35moe");
  EXPECT_EQ(s->n_embd, 2048);
  EXPECT_EQ(s->n_layer, 40);
  EXPECT_EQ(s->full_attention_interval, 4);
  EXPECT_EQ(s->n_head, 16);
  EXPECT_EQ(s->n_head_kv, 2);
  EXPECT_EQ(s->head_dim, 256);
  EXPECT_EQ(s->ssm_k_heads, 16);
  EXPECT_EQ(s->ssm_v_heads, 32);
  EXPECT_EQ(s->ssm_state, 128);
  EXPECT_EQ(s->ssm_conv_kernel, 4);
  EXPECT_EQ(s->n_expert_used, 8);
  EXPECT_EQ(s->n_ff_expert, 512);
  EXPECT_EQ(s->n_ff_shared_expert, 512);
  EXPECT_EQ(s->n_vocab, 248320);
  EXPECT_TRUE(validate(*s).ok());
  EXPECT_FALSE(synth_preset("gpt-5").ok());
}

TEST(SynthPreset, padded_vocabulary_and_tied_head_load_back) {
  auto s = synth_preset("llama-1b");
  ASSERT_TRUE(s.ok());
  s->n_layer = 1, s->n_embd = 64, s->n_head = 4, s->n_head_kv = 1, s->n_ff = 128, s->n_vocab = 1000;
  const auto path = std::filesystem::temp_directory_path() / "strata-synth-preset-test.gguf";
  ASSERT_TRUE(write_synth_model(*s, path.string()).ok());
  auto m = model::Model::open(path.string());
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ((*m)->hparams().n_vocab, 1000);
  EXPECT_FALSE((*m)->has_output_weight());
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace strata::tools
