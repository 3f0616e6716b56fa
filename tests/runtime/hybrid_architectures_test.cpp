// The MoE and hybrid architectures (qwen3moe, qwen35, qwen35moe, qwen3next) on small synthetic models:
// synth writes them, hparams are validated key by key, alternative tensor forms give the same
// logits, and results do not depend on the batch split or the thread count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "model/model.h"
#include "model/stage_layout.h"
#include "engine_test_util.h"
#include "testing/shared_data.h"

namespace strata::model {
namespace {

using namespace strata::testing;

// Removes the generated models when the test program ends.
class ScratchCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(scratch_dir(), ec);
  }
};
[[maybe_unused]] ::testing::Environment* const kCleanup = ::testing::AddGlobalTestEnvironment(new ScratchCleanup);

const std::vector<int32_t> kPrompt = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426,
                                      287, 300, 312, 405};

class SynthArchitecture : public ::testing::TestWithParam<std::string> {};

TEST_P(SynthArchitecture, synth_writes_a_model_that_loads_and_runs_the_same_in_batch_and_token_by_token) {
  const std::string path = write_synth(tiny_spec(GetParam()), GetParam() + "-tiny.gguf");
  auto m = Model::open(path);
  ASSERT_TRUE(m.ok()) << m.error().message;
  const HParams& hp = (*m)->hparams();
  EXPECT_EQ(hp.arch, GetParam());
  auto batch = open_engine(path, 2, 64);
  auto single = open_engine(path, 1, 1);
  ASSERT_TRUE(batch && single);
  const std::vector<float> a = prompt_logits(*batch, kPrompt);
  const std::vector<float> b = prompt_logits(*single, kPrompt);
  ASSERT_TRUE(all_finite(a));
  EXPECT_LE(max_abs_diff(a, b), 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Arch, SynthArchitecture, ::testing::Values("qwen3moe", "qwen35", "qwen35moe", "qwen3next"));

TEST(HybridHparams, synth_writes_the_layer_pattern_experts_and_partial_rotary) {
  const std::string path = write_synth(tiny_spec("qwen35moe"), "qwen35moe-pattern.gguf");
  auto m = Model::open(path);
  ASSERT_TRUE(m.ok()) << m.error().message;
  const HParams& hp = (*m)->hparams();
  EXPECT_EQ(hp.recurrent, (std::vector<uint8_t>{1, 1, 1, 0}));
  EXPECT_EQ(hp.n_rot, 4);  // a quarter of head dim 16
  EXPECT_EQ(hp.rope_type, RopeType::IMrope);
  EXPECT_EQ(hp.rope_sections[0] + hp.rope_sections[1] + hp.rope_sections[2] + hp.rope_sections[3], 2);
  EXPECT_EQ(hp.n_expert, 4);
  EXPECT_EQ(hp.n_expert_used, 2);
  EXPECT_EQ(hp.n_ff_expert, 32);
  EXPECT_EQ(hp.n_ff_shared_expert, 48);
  EXPECT_EQ(hp.ssm_conv_channels(), 2 * 2 * 16 + 4 * 16);
  EXPECT_FALSE((*m)->architecture().layer_has_kv(hp, 0));
  EXPECT_TRUE((*m)->architecture().layer_has_kv(hp, 3));
  // Conv state (K-1 rows of 128 channels) + 4 heads of 16 x 16, F32, per sequence and recurrent layer;
  // layer 3 (attention) keeps none; checkpoints are the same per copy.
  const uint64_t per = (3 * 128 + 4 * 16 * 16) * 4;
  const RecurrentBytes first = recurrent_bytes(hp, {1, 0, 0, 0}, 2, 3);
  EXPECT_EQ(first.state, 2 * per);
  EXPECT_EQ(first.checkpoints, 2 * 3 * per);
  EXPECT_EQ(recurrent_bytes(hp, {0, 0, 0, 1}, 2, 3).state, 0u);
  EXPECT_EQ(recurrent_bytes(hp, {1, 1, 1, 1}, 2, 0).state, 3 * 2 * per);
}

TEST(HybridHparams, recurrent_layers_key_overrides_the_interval) {
  // Layers 0 and 2 recurrent; without the interval key the default (4) would say 0, 1 and 2.
  tools::SynthSpec spec = tiny_spec("qwen35");
  spec.full_attention_interval = 2;
  const std::string base = write_synth(spec, "qwen35-interval-2.gguf");
  const std::string path = rewrite(base, "qwen35-recurrent-layers.gguf",
                                   {.drop_key = [](const gguf::KeyValue& kv) {
                                      return kv.key == "qwen35.full_attention_interval";
                                    },
                                    .add_keys = [](gguf::Writer& w) {
                                      w.set_i32_array("qwen35.attention.recurrent_layers", {1, 0, 1, 0});
                                    }});
  auto m = Model::open(path);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ((*m)->hparams().recurrent, (std::vector<uint8_t>{1, 0, 1, 0}));
}

TEST(HybridHparams, an_incomplete_mtp_block_is_left_out_and_the_trunk_runs) {
  // A copy with one more block (blk.3's tensors renamed blk.4, plus nextn.eh_proj but no enorm or
  // hnorm) and block_count 5, nextn_predict_layers 1: the same 4-layer model runs, and the block is
  // refused for drafting, naming what it lacks.
  const std::string base = write_synth(tiny_spec("qwen35moe"), "qwen35moe-no-mtp.gguf");
  const std::string path = rewrite(
      base, "qwen35moe-mtp.gguf",
      {.drop_key = [](const gguf::KeyValue& kv) { return kv.key == "qwen35moe.block_count"; },
       .add_keys = [](gguf::Writer& w) {
         w.set_u32("qwen35moe.block_count", 5);
         w.set_u32("qwen35moe.nextn_predict_layers", 1);
       },
       .add_tensors = [](gguf::Writer& w, const gguf::File& f) {
         for (const auto& t : f.tensors()) {
           if (t.name.rfind("blk.3.", 0) != 0) continue;
           ASSERT_TRUE(w.add_tensor_bytes("blk.4." + t.name.substr(6), t.type,
                                          std::vector<int64_t>(t.ne, t.ne + t.n_dims), tensor_bytes(f, t)).ok());
         }
         ASSERT_TRUE(w.add_tensor_bytes("blk.4.nextn.eh_proj.weight", DType::F32, {128, 64},
                                        std::vector<uint8_t>(128 * 64 * 4, 0)).ok());
       }});
  auto m = Model::open(path);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ((*m)->hparams().n_layer, 4);
  EXPECT_EQ((*m)->hparams().n_layer_all, 5);
  EXPECT_EQ((*m)->hparams().n_nextn, 1);
  const Status mtp = (*m)->mtp_available();
  ASSERT_FALSE(mtp.ok());
  EXPECT_NE(mtp.error().message.find("nextn.enorm"), std::string::npos) << mtp.error().message;
  for (const auto& t : (*m)->tensors()) EXPECT_FALSE(t.decl.mtp) << t.decl.name;
  auto a = open_engine(base, 2, 64);
  auto b = open_engine(path, 2, 64);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(prompt_logits(*a, kPrompt), prompt_logits(*b, kPrompt));
}

// synth --mtp appends the block llama.cpp loads for draft-mtp (the reference runs it in
// speculative_test); the model declares it, a stage that does not draft leaves it unread, and the
// trunk's logits are those of the same file without it.
TEST(HybridHparams, synth_mtp_block_is_declared_and_leaves_the_trunk_unchanged) {
  for (const char* arch : {"qwen35", "qwen35moe"}) {
    tools::SynthSpec spec = tiny_spec(arch);
    const std::string base = write_synth(spec, std::string(arch) + "-trunk.gguf");
    spec.n_nextn = 1;
    const std::string path = write_synth(spec, std::string(arch) + "-mtp.gguf");
    auto m = Model::open(path);
    ASSERT_TRUE(m.ok()) << m.error().message;
    EXPECT_TRUE((*m)->mtp_available().ok());
    EXPECT_EQ((*m)->hparams().n_layer, spec.n_layer);
    std::vector<std::string> mtp;
    for (const auto& t : (*m)->tensors()) {
      if (t.decl.mtp) mtp.push_back(t.decl.name);
    }
    const std::string block = "blk." + std::to_string(spec.n_layer) + ".";
    for (const char* name : {"nextn.eh_proj.weight", "nextn.enorm.weight", "nextn.hnorm.weight",
                             "nextn.shared_head_norm.weight", "attn_q.weight", "post_attention_norm.weight"}) {
      EXPECT_NE(std::find(mtp.begin(), mtp.end(), block + name), mtp.end()) << arch << ": " << block + name;
    }
    const std::vector<uint8_t> all(static_cast<size_t>(spec.n_layer), 1);
    const auto plain = tensors_needed(**m, all, true, true);
    const auto drafting = tensors_needed(**m, all, true, true, true);
    EXPECT_EQ(drafting.size(), plain.size() + mtp.size());
    for (const std::string& name : mtp) EXPECT_EQ(std::find(plain.begin(), plain.end(), name), plain.end()) << name;
    auto a = open_engine(base, 2, 64);
    auto b = open_engine(path, 2, 64);
    ASSERT_TRUE(a && b);
    EXPECT_EQ(prompt_logits(*a, kPrompt), prompt_logits(*b, kPrompt)) << arch;
  }
}

struct BadKey {
  const char* what;
  std::string drop;  // key left out
  std::function<void(gguf::Writer&)> add;
  std::string expect_in_error;
};

TEST(HybridHparams, malformed_keys_are_errors_naming_the_key) {
  const std::string base = write_synth(tiny_spec("qwen35moe"), "qwen35moe-keys.gguf");
  const std::vector<BadKey> cases = {
      {"missing conv kernel", "qwen35moe.ssm.conv_kernel", {}, "ssm.conv_kernel"},
      {"missing expert count", "qwen35moe.expert_count", {}, "expert_count"},
      {"too many experts used", "qwen35moe.expert_used_count",
       [](gguf::Writer& w) { w.set_u32("qwen35moe.expert_used_count", 5); }, "expert_used_count"},
      {"inner size not heads x state", "qwen35moe.ssm.inner_size",
       [](gguf::Writer& w) { w.set_u32("qwen35moe.ssm.inner_size", 60); }, "ssm.inner_size"},
      {"v heads not a multiple of k heads", "qwen35moe.ssm.group_count",
       [](gguf::Writer& w) { w.set_u32("qwen35moe.ssm.group_count", 3); }, "ssm.group_count"},
      {"three rope sections", "qwen35moe.rope.dimension_sections",
       [](gguf::Writer& w) { w.set_i32_array("qwen35moe.rope.dimension_sections", {1, 1, 0}); },
       "rope.dimension_sections"},
      {"recurrent layers of the wrong length", "",
       [](gguf::Writer& w) { w.set_i32_array("qwen35moe.attention.recurrent_layers", {1, 1, 0}); },
       "attention.recurrent_layers"},
      {"zero interval", "qwen35moe.full_attention_interval",
       [](gguf::Writer& w) { w.set_u32("qwen35moe.full_attention_interval", 0); }, "full_attention_interval"},
  };
  int n = 0;
  for (const BadKey& c : cases) {
    Rewrite r;
    r.drop_key = [&](const gguf::KeyValue& kv) { return kv.key == c.drop; };
    if (c.add) r.add_keys = c.add;
    const std::string path = rewrite(base, "bad-key-" + std::to_string(n++) + ".gguf", r);
    auto m = Model::open(path);
    ASSERT_FALSE(m.ok()) << c.what;
    EXPECT_NE(m.error().message.find(c.expect_in_error), std::string::npos) << c.what << ": " << m.error().message;
  }
}

// ffn_gate_up_exps {E, 2F, X}: per expert, the F gate rows then the F up rows.
void add_fused_gate_up(gguf::Writer& w, const gguf::File& f, int n_layer) {
  for (int il = 0; il < n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    const gguf::TensorInfo* gate = find_tensor(f, p + "ffn_gate_exps.weight");
    const gguf::TensorInfo* up = find_tensor(f, p + "ffn_up_exps.weight");
    ASSERT_TRUE(gate && up);
    const size_t expert_bytes = gate->nbytes / gate->ne[2];
    std::vector<uint8_t> bytes;
    for (int64_t e = 0; e < gate->ne[2]; ++e) {
      const uint8_t* g = f.tensor_data(*gate) + e * expert_bytes;
      const uint8_t* u = f.tensor_data(*up) + e * expert_bytes;
      bytes.insert(bytes.end(), g, g + expert_bytes);
      bytes.insert(bytes.end(), u, u + expert_bytes);
    }
    ASSERT_TRUE(w.add_tensor_bytes(p + "ffn_gate_up_exps.weight", gate->type, {gate->ne[0], 2 * gate->ne[1], gate->ne[2]},
                                   bytes).ok());
  }
}

TEST(MoeTensors, fused_gate_up_experts_give_the_same_logits_as_separate_ones) {
  const std::string base = write_synth(tiny_spec("qwen35moe"), "qwen35moe-separate.gguf");
  const std::string fused = rewrite(base, "qwen35moe-fused.gguf",
                                    {.drop_tensor = [](const gguf::TensorInfo& t) {
                                       return t.name.find("ffn_gate_exps") != std::string::npos ||
                                              t.name.find("ffn_up_exps") != std::string::npos;
                                     },
                                     .add_tensors = [](gguf::Writer& w, const gguf::File& f) { add_fused_gate_up(w, f, 4); }});
  auto a = open_engine(base, 2, 64);
  auto b = open_engine(fused, 2, 64);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(prompt_logits(*a, kPrompt), prompt_logits(*b, kPrompt));
}

TEST(MoeTensors, missing_both_expert_forms_names_the_tensor_and_its_alternative) {
  const std::string base = write_synth(tiny_spec("qwen3moe"), "qwen3moe-no-experts.gguf");
  const std::string path = rewrite(base, "qwen3moe-no-gate.gguf", {.drop_tensor = [](const gguf::TensorInfo& t) {
                                     return t.name == "blk.2.ffn_gate_exps.weight";
                                   }});
  auto m = Model::open(path);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("blk.2.ffn_gate_exps.weight"), std::string::npos) << m.error().message;
  EXPECT_NE(m.error().message.find("ffn_gate_up_exps"), std::string::npos) << m.error().message;
}

TEST(MoeTensors, active_parameters_leave_out_the_unused_experts) {
  const std::string path = write_synth(tiny_spec("qwen3moe"), "qwen3moe-active.gguf");
  auto m = Model::open(path);
  ASSERT_TRUE(m.ok()) << m.error().message;
  // Per layer, gate + up + down experts hold 3 * 64 * 32 * 4 parameters; 2 of the 4 experts are idle.
  const uint64_t idle = 4ull * 3 * 64 * 32 * 2;
  EXPECT_EQ((*m)->n_active_params(), (*m)->n_params() - idle);
  const std::string dense = write_synth(tiny_spec("qwen35"), "qwen35-active.gguf");
  auto d = Model::open(dense);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ((*d)->n_active_params(), (*d)->n_params());
}

// qwen3next's legacy ssm_in: per k-head [q | k | v (r heads) | z (r heads)].
void add_legacy_ssm_in(gguf::Writer& w, const gguf::File& f, const HParams& hp) {
  const int64_t E = hp.n_embd, Hk = hp.ssm_n_k_heads, dk = hp.ssm_state_size, r = hp.ssm_n_v_heads / Hk;
  const int64_t dv = hp.ssm_head_v_dim();
  for (int il = 0; il < hp.n_layer; ++il) {
    if (!hp.is_recurrent(il)) continue;
    const std::string p = "blk." + std::to_string(il) + ".";
    const gguf::TensorInfo* qkv = find_tensor(f, p + "attn_qkv.weight");
    const gguf::TensorInfo* z = find_tensor(f, p + "attn_gate.weight");
    ASSERT_TRUE(qkv && z && qkv->type == DType::F32);
    const float* q_rows = reinterpret_cast<const float*>(f.tensor_data(*qkv));
    const float* z_rows = reinterpret_cast<const float*>(f.tensor_data(*z));
    std::vector<float> out;
    auto take = [&](const float* rows, int64_t first, int64_t count) {
      out.insert(out.end(), rows + first * E, rows + (first + count) * E);
    };
    for (int64_t h = 0; h < Hk; ++h) {
      take(q_rows, h * dk, dk);
      take(q_rows, Hk * dk + h * dk, dk);
      take(q_rows, 2 * Hk * dk + h * r * dv, r * dv);
      take(z_rows, h * r * dv, r * dv);
    }
    std::vector<uint8_t> bytes(out.size() * 4);
    std::memcpy(bytes.data(), out.data(), bytes.size());
    ASSERT_TRUE(w.add_tensor_bytes(p + "ssm_in.weight", DType::F32, {E, static_cast<int64_t>(out.size()) / E}, bytes).ok());
  }
}

TEST(HybridTensors, qwen3next_legacy_ssm_in_gives_the_same_logits_as_attn_qkv_and_attn_gate) {
  const std::string base = write_synth(tiny_spec("qwen3next"), "qwen3next-qkv.gguf");
  auto m = Model::open(base);
  ASSERT_TRUE(m.ok()) << m.error().message;
  const HParams hp = (*m)->hparams();
  const std::string legacy = rewrite(base, "qwen3next-ssm-in.gguf",
                                     {.drop_tensor = [](const gguf::TensorInfo& t) {
                                        return t.name.find("attn_qkv") != std::string::npos ||
                                               t.name.find("attn_gate") != std::string::npos;
                                      },
                                      .add_tensors = [&](gguf::Writer& w, const gguf::File& f) { add_legacy_ssm_in(w, f, hp); }});
  auto a = open_engine(base, 2, 64);
  auto b = open_engine(legacy, 2, 64);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(prompt_logits(*a, kPrompt), prompt_logits(*b, kPrompt));
}

TEST(HybridDeterminism, logits_do_not_depend_on_the_thread_count) {
  STRATA_SHARED_FILE(path, "models/synth/qwen35moe-f32.gguf");
  auto one = open_engine(path, 1, 256);
  auto three = open_engine(path, 3, 256);
  ASSERT_TRUE(one && three);
  EXPECT_EQ(prompt_logits(*one, kPrompt), prompt_logits(*three, kPrompt));
}

}  // namespace
}  // namespace strata::model
