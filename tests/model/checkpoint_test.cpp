// State checkpoints through a StageRunner on a real hybrid model: their bytes are planned per node
// (n_checkpoints copies of each sequence's state, only for the recurrent layers the stage owns), and a
// restored checkpoint continues exactly as the uninterrupted run.
#include <gtest/gtest.h>

#include <vector>

#include "model/model.h"
#include "model/stage_layout.h"
#include "model/stage_runner.h"
#include "testing/shared_data.h"

namespace strata::model {
namespace {

StageConfig whole_model(const Model& model, int32_t n_checkpoints) {
  StageConfig c;
  c.owned.assign(model.hparams().n_layer, 1);
  c.input = c.output = true;
  c.tensors = tensors_needed(model, c.owned, true, true);
  c.n_seq = 2;
  c.n_ctx_per_seq = 64;
  c.n_batch = 16;
  c.n_checkpoints = n_checkpoints;
  return c;
}

TEST(Checkpoints, planned_bytes_are_n_copies_of_the_owned_layers_state) {
  STRATA_SHARED_FILE(path, "models/synth/qwen35moe-f32.gguf");
  auto model = Model::open(path);
  ASSERT_TRUE(model.ok()) << model.error().message;
  const StageBytes none = stage_bytes(**model, whole_model(**model, 0));
  const StageBytes three = stage_bytes(**model, whole_model(**model, 3));
  EXPECT_EQ(none.checkpoints, 0u);
  EXPECT_GT(none.state, 0u);
  EXPECT_EQ(three.checkpoints, 3 * none.state) << "3 checkpoints of each of the 2 sequences' state";
  EXPECT_EQ(three.total(), none.total() + three.checkpoints);
  // A stage of attention layers only keeps no recurrent state, hence no checkpoint bytes.
  StageConfig attention_only = whole_model(**model, 3);
  for (int il = 0; il < (*model)->hparams().n_layer; ++il) attention_only.owned[il] = !(*model)->hparams().is_recurrent(il);
  attention_only.tensors = tensors_needed(**model, attention_only.owned, true, true);
  EXPECT_EQ(stage_bytes(**model, attention_only).checkpoints, 0u);
  // A dense model has nothing to checkpoint.
  STRATA_SHARED_FILE(dense_path, "models/synth/llama-dense-f32.gguf");
  auto dense = Model::open(dense_path);
  ASSERT_TRUE(dense.ok());
  EXPECT_EQ(stage_bytes(**dense, whole_model(**dense, 8)).checkpoints, 0u);
}

std::vector<float> run(StageRunner& r, const std::vector<int32_t>& tokens, int32_t pos0) {
  Batch b;
  for (size_t i = 0; i < tokens.size(); ++i) b.add(tokens[i], pos0 + static_cast<int32_t>(i), 0, i + 1 == tokens.size());
  std::vector<float> hidden;
  r.embed(b, hidden);
  EXPECT_TRUE(r.run_layers(b, 0, r.model().hparams().n_layer, hidden.data()).ok());
  return r.logits(b, hidden.data());
}

TEST(Checkpoints, a_restored_checkpoint_continues_like_the_uninterrupted_run) {
  STRATA_SHARED_FILE(path, "models/synth/qwen35moe-f32.gguf");
  auto model = Model::open(path);
  ASSERT_TRUE(model.ok()) << model.error().message;
  auto runner = StageRunner::create(*model, whole_model(**model, 2));
  ASSERT_TRUE(runner.ok()) << runner.error().message;
  StageRunner& r = **runner;
  const std::vector<int32_t> prefix = {1, 50, 60, 70, 80}, a = {90, 100, 110}, b = {120, 130};
  run(r, prefix, 0);
  ASSERT_TRUE(r.save_checkpoint(0, 5).ok());
  EXPECT_FALSE(r.save_checkpoint(0, 4).ok()) << "a checkpoint is of the sequence as it is now";
  const std::vector<float> after_a = run(r, a, 5);
  run(r, b, 8);  // something else goes on in the sequence
  ASSERT_TRUE(r.restore_checkpoint(0, 5).ok());
  EXPECT_EQ(r.n_past(0), 5);
  EXPECT_EQ(run(r, a, 5), after_a) << "the restored state continues bit for bit";
  EXPECT_FALSE(r.restore_checkpoint(0, 3).ok()) << "no checkpoint at 3";
  EXPECT_FALSE(r.restore_checkpoint(0, 20).ok()) << "past the sequence's end";
  ASSERT_TRUE(r.drop_checkpoint(0, -1).ok());
  EXPECT_FALSE(r.restore_checkpoint(0, 5).ok());
}

}  // namespace
}  // namespace strata::model
