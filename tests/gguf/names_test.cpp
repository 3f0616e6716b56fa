// The names table: keys and tensor names are spelled as GGUF files spell them, and layer tensor names
// are built and parsed back.
#include <gtest/gtest.h>

#include "gguf/names.h"

namespace strata::gguf::names {
namespace {

TEST(Names, architecture_keys_are_prefixed_with_the_architecture) {
  EXPECT_EQ(arch_key("qwen2", hparam::kBlockCount), "qwen2.block_count");
  EXPECT_EQ(arch_key("llama", hparam::kHeadCountKv), "llama.attention.head_count_kv");
  EXPECT_EQ(arch_key("qwen35moe", hparam::kSsmTimeStepRank), "qwen35moe.ssm.time_step_rank");
  EXPECT_EQ(kArchitecture, "general.architecture");
  EXPECT_EQ(tokenizer::kBosId, "tokenizer.ggml.bos_token_id");
}

TEST(Names, layer_tensors_are_built_with_or_without_a_suffix) {
  EXPECT_EQ(layer_tensor(0, tensor::kAttnQ), "blk.0.attn_q.weight");
  EXPECT_EQ(layer_tensor(17, tensor::kAttnQ, tensor::kBias), "blk.17.attn_q.bias");
  EXPECT_EQ(layer_tensor(3, tensor::kSsmA, ""), "blk.3.ssm_a");
  EXPECT_EQ(layer_tensor(2, tensor::kSsmDt, tensor::kBias), "blk.2.ssm_dt.bias");
  EXPECT_EQ(layer_prefix(20), "blk.20.");
  EXPECT_TRUE(layer_tensor(20, tensor::kFfnUp).starts_with(layer_prefix(20)));
}

TEST(Names, layer_tensor_names_parse_back) {
  for (const std::string& name : {layer_tensor(12, tensor::kFfnGateUpExps), layer_tensor(0, tensor::kSsmA, ""),
                                  layer_tensor(511, tensor::kAttnOutput, tensor::kBias)}) {
    const auto parsed = parse_layer_tensor(name);
    ASSERT_TRUE(parsed.has_value()) << name;
    EXPECT_EQ(layer_tensor(parsed->layer, parsed->base, parsed->suffix), name);
  }
  const auto p = parse_layer_tensor("blk.12.ffn_down_exps.weight");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->layer, 12);
  EXPECT_EQ(p->base, "ffn_down_exps");
  EXPECT_EQ(p->suffix, "weight");
}

TEST(Names, model_wide_and_malformed_names_are_not_layer_tensors) {
  for (std::string_view name : {tensor::kTokenEmbd, tensor::kOutput, std::string_view("blk."),
                                std::string_view("blk.x.attn_q.weight"),
                                std::string_view("blk.1"), std::string_view("blk.1."),
                                std::string_view("blk.-1.attn_q.weight"), std::string_view("blk.+1.attn_q"),
                                std::string_view("blk.01.attn_q.weight"), std::string_view("blk.1..weight"),
                                std::string_view("blk.1.attn_q."), std::string_view("blk1.attn_q.weight")}) {
    EXPECT_FALSE(parse_layer_tensor(name).has_value()) << name;
  }
}

}  // namespace
}  // namespace strata::gguf::names
