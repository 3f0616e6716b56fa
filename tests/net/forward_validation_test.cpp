// Regression tests from fuzzing (fuzz/worker_messages.cpp): a Forward request whose hop says "again"
// (this node already ran an earlier part of the batch) for rows that never ran here passed
// validation with position -1, and run_layers then wrote the KV cache before its start.
#include <gtest/gtest.h>

#include <vector>

#include "model/model.h"
#include "model/stage_runner.h"
#include "net/stage_spec.h"
#include "strata.pb.h"
#include "testing/shared_data.h"

namespace strata::model {
namespace {

std::unique_ptr<StageRunner> stories_runner(const std::string& path) {
  auto model = Model::open(path);
  EXPECT_TRUE(model.ok()) << model.error().message;
  if (!model.ok()) return nullptr;
  StageConfig config;
  config.owned.assign((*model)->hparams().n_layer, 1);
  config.input = config.output = true;
  config.n_seq = 2;
  config.n_ctx_per_seq = 32;
  config.n_batch = 16;
  config.tensors = tensors_needed(**model, config.owned, true, true);
  auto runner = StageRunner::create(*model, config);
  EXPECT_TRUE(runner.ok()) << runner.error().message;
  return runner.ok() ? std::move(runner).value() : nullptr;
}

// The fuzz input: one row of sequence 0 at position -1, hop again, all layers, output.
v1::ForwardRequest repeat_of_unrun_row(const StageRunner& runner) {
  v1::ForwardRequest req;
  req.mutable_hop()->set_first_layer(0);
  req.mutable_hop()->set_end_layer(runner.model().hparams().n_layer);
  req.mutable_hop()->set_again(true);
  req.mutable_hop()->set_output(true);
  req.add_seq(0);
  req.add_pos(-1);
  req.set_want_logits(std::string(1, '\1'));
  const std::vector<float> hidden(runner.model().hparams().n_embd, 0.5f);
  req.set_hidden(hidden.data(), hidden.size() * sizeof(float));
  return req;
}

TEST(StageRunnerValidate, AgainForRowsThatNeverRanHereIsAnError) {
  STRATA_SHARED_FILE(path, "models/stories260K.gguf");
  auto runner = stories_runner(path);
  ASSERT_NE(runner, nullptr);
  const v1::ForwardRequest req = repeat_of_unrun_row(*runner);
  auto batch = net::batch_from_request(req, *runner);
  ASSERT_TRUE(batch.ok()) << batch.error().message;
  const Status s = runner->validate(*batch, false, req.hop().again());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("only 0 positions"), std::string::npos) << s.error().message;
}

TEST(StageRunnerValidate, NegativePositionsAreAnError) {
  STRATA_SHARED_FILE(path, "models/stories260K.gguf");
  auto runner = stories_runner(path);
  ASSERT_NE(runner, nullptr);
  Batch b;
  b.add(0, -1, 0, true);
  EXPECT_FALSE(runner->validate(b, true).ok());
}

TEST(StageRunnerValidate, AgainForRowsThatRanHereIsAccepted) {
  STRATA_SHARED_FILE(path, "models/stories260K.gguf");
  auto runner = stories_runner(path);
  ASSERT_NE(runner, nullptr);
  const int32_t n_layer = runner->model().hparams().n_layer;
  Batch b;
  b.add(1, 0, 0, false);
  b.add(2, 1, 0, true);
  ASSERT_TRUE(runner->validate(b, true).ok());
  std::vector<float> hidden;
  runner->embed(b, hidden);
  ASSERT_TRUE(runner->run_layers(b, 0, n_layer / 2, hidden.data()).ok());
  // The second part of the same batch on this node: its positions are recorded already.
  EXPECT_TRUE(runner->validate(b, true, true).ok());
  EXPECT_TRUE(runner->run_layers(b, n_layer / 2, n_layer, hidden.data()).ok());
  // Once more than was run is an error.
  Batch three = b;
  three.add(3, 2, 0, false);
  EXPECT_FALSE(runner->validate(three, true, true).ok());
}

}  // namespace
}  // namespace strata::model
