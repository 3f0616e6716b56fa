// Tensor split inside one process: N stage runners, each with its shard of every layer, add their
// partial sub-layer outputs over threads (the same Collective contract the network links keep). The
// merged logits must match one whole-model runner up to float summation order and llama.cpp's
// golden logits within the golden tolerance, give the same greedy tokens, and be the same bits
// whatever the members' thread counts.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

#include "plan/shards.h"
#include "model/model.h"
#include "model/shard.h"
#include "model/stage_runner.h"
#include "testing/golden.h"
#include "testing/thread_group.h"
#include "testing/shared_data.h"

namespace strata::model {
namespace {

using plan::ExpertSplit;
using plan::expert_split_name;
using plan::parse_expert_split;
using plan::split_shards;

StageConfig whole_config(const Model& m, int32_t threads) {
  StageConfig c;
  c.owned.assign(m.hparams().n_layer, 1);
  c.input = c.output = true;
  c.n_ctx_per_seq = 256;
  c.n_batch = 256;
  c.n_threads = threads;
  c.tensors = tensors_needed(m, c.owned, true, true);
  return c;
}

Batch prompt_batch(const std::vector<int32_t>& tokens) {
  Batch b;
  for (size_t i = 0; i < tokens.size(); ++i) b.add(tokens[i], static_cast<int32_t>(i), 0, true);
  return b;
}

// Logits (n_vocab per prompt position) of one whole-model runner.
std::vector<float> whole_logits(const std::shared_ptr<const Model>& m, const Batch& batch) {
  auto r = StageRunner::create(m, whole_config(*m, 2));
  EXPECT_TRUE(r.ok()) << r.error().message;
  std::vector<float> hidden;
  (*r)->embed(batch, hidden);
  EXPECT_TRUE((*r)->run_layers(batch, 0, m->hparams().n_layer, hidden.data()).ok());
  return (*r)->logits(batch, hidden.data());
}

// The same through `shards.size()` members on threads, their vocabulary slices put together.
std::vector<float> split_logits(const std::shared_ptr<const Model>& m, const Batch& batch,
                                const std::vector<Shard>& shards, const std::vector<int32_t>& threads) {
  const int32_t n = static_cast<int32_t>(shards.size());
  const int32_t V = m->hparams().n_vocab;
  std::vector<float> out(batch.size() * V, 0.0f);
  testing::ThreadGroup group(n);
  std::vector<std::thread> members;
  for (int32_t i = 0; i < n; ++i) {
    members.emplace_back([&, i] {
      StageConfig c = whole_config(*m, threads[i]);
      c.shard = shards[i];
      auto r = StageRunner::create(m, c);
      ASSERT_TRUE(r.ok()) << r.error().message;
      testing::ThreadGroup::Member link(group, i);
      (*r)->set_collective(&link);
      std::vector<float> hidden;
      (*r)->embed(batch, hidden);
      ASSERT_TRUE((*r)->run_layers(batch, 0, m->hparams().n_layer, hidden.data()).ok());
      const std::vector<float> part = (*r)->logits(batch, hidden.data());
      const Range v = shards[i].vocab;
      ASSERT_EQ(part.size(), static_cast<size_t>(batch.size() * v.size()));
      for (int64_t t = 0; t < batch.size(); ++t) {
        std::copy_n(part.data() + t * v.size(), v.size(), out.data() + t * V + v.begin);
      }
    });
  }
  for (auto& t : members) t.join();
  return out;
}

int32_t argmax(const float* row, int32_t n) { return static_cast<int32_t>(std::max_element(row, row + n) - row); }

void check_model(const std::string& name, const std::vector<double>& weights, ExpertSplit experts = ExpertSplit::kRows) {
  SCOPED_TRACE(name + " over " + std::to_string(weights.size()) + " members, experts by " +
               std::string(expert_split_name(experts)));
  testing::Golden g;
  ASSERT_TRUE(testing::load_golden(name, g));
  auto m = Model::open(g.model_path);
  ASSERT_TRUE(m.ok()) << m.error().message;
  auto shards = split_shards(**m, weights, experts);
  ASSERT_TRUE(shards.ok()) << shards.error().message;
  const Batch batch = prompt_batch(g.prompt_tokens);
  const int32_t V = (*m)->hparams().n_vocab;
  const std::vector<float> whole = whole_logits(*m, batch);
  const std::vector<float> split = split_logits(*m, batch, *shards, std::vector<int32_t>(weights.size(), 1));
  ASSERT_EQ(split.size(), whole.size());

  // Only the order of float additions differs from one node, but a quantized activation may round
  // one step the other way and carry that on: the logits stay within the golden tolerance of one
  // node's, and greedy picks agree wherever one node's best beats its runner-up by twice that.
  double max_diff = 0;
  for (size_t i = 0; i < whole.size(); ++i) max_diff = std::max(max_diff, double(std::abs(whole[i] - split[i])));
  EXPECT_LE(max_diff, g.tolerance.max_abs) << "largest logit difference from one node";
  for (int64_t t = 0; t < batch.size(); ++t) {
    const float* w = whole.data() + t * V;
    std::vector<float> sorted(w, w + V);
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
    if (sorted[0] - sorted[1] > 2 * g.tolerance.max_abs) {
      EXPECT_EQ(argmax(split.data() + t * V, V), argmax(w, V)) << "position " << t;
    }
  }
  // llama.cpp's logits, within the golden tolerance.
  double worst = 0, sum = 0;
  int64_t count = 0;
  for (size_t pos = 0; pos < g.logits.size(); ++pos) {
    for (size_t k = 0; k < g.logits[pos].size(); ++k) {
      const int32_t id = g.topk_ids.empty() ? static_cast<int32_t>(k) : g.topk_ids[pos][k];
      const double d = std::abs(double(split[pos * V + id]) - g.logits[pos][k]);
      worst = std::max(worst, d), sum += d, ++count;
    }
  }
  EXPECT_LE(worst, g.tolerance.max_abs);
  EXPECT_LE(sum / std::max<int64_t>(count, 1), g.tolerance.mean_abs);
  // The same bits with other thread counts per member.
  EXPECT_EQ(split_logits(*m, batch, *shards, std::vector<int32_t>(weights.size(), 2)), split);
}

TEST(Shard, two_and_three_members_match_one_node_and_the_golden_logits) {
  for (const char* name : {"llama-dense-q8_0", "llama-dense-q4_k_m", "llama-dense-f16", "qwen3-dense-f32",
                           "stories260K", "llama-2-tiny-random", "qwen35-dense-f32", "qwen35moe-f32",
                           "qwen35moe-q4_k_m", "qwen3moe-f32", "qwen3moe-q4_k_m"}) {
    check_model(name, {1, 1});
    check_model(name, {2, 1, 1});
  }
}

TEST(Shard, whole_experts_match_one_node_and_the_golden_logits) {
  for (const char* name : {"qwen35moe-f32", "qwen35moe-q4_k_m", "qwen3moe-f32", "qwen3moe-q4_k_m"}) {
    check_model(name, {1, 1}, ExpertSplit::kWhole);
    check_model(name, {2, 1, 1}, ExpertSplit::kWhole);
  }
}

TEST(Shard, whole_experts_are_ranges_of_experts_with_every_row) {
  STRATA_SHARED_FILE(path, "models/synth/qwen3moe-f32.gguf");  // F32: expert rows cut in steps of 16
  auto m = Model::open(path);
  ASSERT_TRUE(m.ok());
  const HParams& hp = (*m)->hparams();
  auto s = split_shards(**m, {3, 1}, ExpertSplit::kWhole);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ((*s)[0].experts, (Range{0, hp.n_expert * 3 / 4}));
  EXPECT_EQ((*s)[1].experts, (Range{hp.n_expert * 3 / 4, hp.n_expert}));
  for (const Shard& x : *s) {
    EXPECT_EQ(x.ff_expert, (Range{0, hp.n_ff_expert}));
    EXPECT_TRUE(check_shard(**m, x).ok());
  }
  Shard both = (*s)[0];
  both.ff_expert = (*split_shards(**m, {1, 1}))[0].ff_expert;
  const Status refused = check_shard(**m, both);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("cut by rows or by experts"), std::string::npos) << refused.error().message;
  auto rows = split_shards(**m, {1, 1});
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ((*rows)[1].experts, (Range{0, hp.n_expert}));
  auto too_many = split_shards(**m, std::vector<double>(hp.n_expert + 1, 1.0), ExpertSplit::kWhole);
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.error().message.find("--expert-split rows"), std::string::npos) << too_many.error().message;
  EXPECT_FALSE(parse_expert_split("columns").ok());
}

TEST(Shard, steps_follow_the_block_sizes_and_the_weights) {
  STRATA_SHARED_FILE(path, "models/synth/llama-dense-q8_0.gguf");
  auto m = Model::open(path);
  ASSERT_TRUE(m.ok());
  auto u = shard_units(**m);
  ASSERT_TRUE(u.ok()) << u.error().message;
  EXPECT_EQ(u->kv_heads, 1);  // Q8_0 attn_output: 2 heads x 32 columns hold whole 32-blocks
  auto shards = split_shards(**m, {3, 1});
  ASSERT_TRUE(shards.ok());
  EXPECT_EQ((*shards)[0].kv_heads, (Range{0, 3}));
  EXPECT_EQ((*shards)[1].kv_heads, (Range{3, 4}));
  EXPECT_EQ((*shards)[0].ff.begin, 0);
  EXPECT_EQ((*shards)[1].ff.end, 640);
  EXPECT_EQ((*shards)[0].ff.end % u->ff, 0);

  STRATA_SHARED_FILE(q4, "models/synth/llama-dense-q4_k_m.gguf");
  auto m4 = Model::open(q4);
  ASSERT_TRUE(m4.ok());
  auto u4 = shard_units(**m4);
  ASSERT_TRUE(u4.ok());
  EXPECT_EQ(u4->kv_heads, 4);  // Q4_K attn_output: 256-blocks need all 4 KV heads (8 x 32 columns)
  auto s4 = split_shards(**m4, {1, 1});
  ASSERT_TRUE(s4.ok());
  EXPECT_EQ((*s4)[0].kv_heads.size() + (*s4)[1].kv_heads.size(), 4);
  EXPECT_TRUE((*s4)[0].kv_heads.size() == 0 || (*s4)[1].kv_heads.size() == 0);
}

TEST(Shard, fused_delta_net_projections_are_refused_by_name) {
  STRATA_SHARED_FILE(path, "models/synth/qwen3next-f32.gguf");
  auto m = Model::open(path);
  ASSERT_TRUE(m.ok());
  auto s = split_shards(**m, {1, 1});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("fused Gated DeltaNet projections"), std::string::npos) << s.error().message;
}

TEST(Shard, hybrid_and_expert_models_split_by_key_heads_and_expert_rows) {
  STRATA_SHARED_FILE(path, "models/synth/qwen35moe-f32.gguf");
  auto m = Model::open(path);
  ASSERT_TRUE(m.ok());
  auto s = split_shards(**m, {1, 1});
  ASSERT_TRUE(s.ok()) << s.error().message;
  const HParams& hp = (*m)->hparams();
  EXPECT_EQ((*s)[0].ssm_k_heads, (Range{0, hp.ssm_n_k_heads / 2}));
  EXPECT_EQ((*s)[1].ff_expert.end, hp.n_ff_expert);
  const HParams local = shard_hparams(hp, (*s)[1]);
  EXPECT_EQ(local.ssm_n_v_heads, hp.ssm_n_v_heads / 2);
  EXPECT_EQ(local.ssm_inner_size, hp.ssm_inner_size / 2);
  EXPECT_EQ(local.n_ff_expert + shard_hparams(hp, (*s)[0]).n_ff_expert, hp.n_ff_expert);
}

TEST(Shard, bad_shards_are_refused_before_anything_loads) {
  STRATA_SHARED_FILE(path, "models/synth/llama-dense-q8_0.gguf");
  auto m = Model::open(path);
  ASSERT_TRUE(m.ok());
  Shard s;
  s.count = 2;
  s.kv_heads = {0, 2};
  s.ff = {0, 320};
  EXPECT_FALSE(check_shard(**m, s).ok());  // no vocabulary rows
  s.vocab = {0, 256};
  EXPECT_TRUE(check_shard(**m, s).ok());
  s.ff = {0, 700};
  EXPECT_FALSE(check_shard(**m, s).ok());  // past n_ff
  s.ff = {0, 100};
  EXPECT_FALSE(check_shard(**m, s).ok());  // not on a step
  s.ff = {0, 320};
  s.index = 2;
  EXPECT_FALSE(check_shard(**m, s).ok());
}

}  // namespace
}  // namespace strata::model
