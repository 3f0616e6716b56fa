// The coordinator's engine: loads a model per the plan, keeps the KV cache, and runs batches through
// the stages in order.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "memory/kv_cache.h"
#include "model/blocks.h"
#include "model/model.h"
#include "plan/plan.h"
#include "tensor/thread_pool.h"
#include "text/vocab.h"

namespace strata::runtime {

struct EngineOptions {
  std::string model_path;
  int32_t n_ctx = 0;      // 0: min(4096, the model's training context)
  int32_t n_threads = 0;  // 0: all cores
  int32_t n_seq = 1;      // parallel sequences; each gets n_ctx / n_seq cells
  int32_t n_batch = 512;  // the largest batch decode() accepts
};

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> load(const EngineOptions& options);

  const model::Model& model() const { return *model_; }
  const model::HParams& hparams() const { return model_->hparams(); }
  const text::Vocab& vocab() const { return *vocab_; }
  const plan::Plan& plan() const { return plan_; }
  int32_t n_ctx_per_seq() const { return kv_.config().n_ctx_per_seq; }
  int32_t n_seq() const { return kv_.config().n_seq; }
  int32_t n_batch() const { return n_batch_; }
  int32_t n_threads() const { return pool_->size(); }
  int32_t n_vocab() const { return hparams().n_vocab; }

  // Runs one batch. Returns the logits (n_vocab floats per row) of the rows flagged in batch.logits,
  // in batch order. Positions must continue each sequence's cache without gaps.
  Result<std::vector<float>> decode(const model::Batch& batch);

  int32_t n_past(int32_t seq) const { return kv_.n_past(seq); }
  Status clear_seq(int32_t seq);
  Status remove_from(int32_t seq, int32_t p0);
  Status copy_seq(int32_t src, int32_t dst);

 private:
  Engine() = default;
  Status validate(const model::Batch& batch) const;

  std::shared_ptr<const model::Model> model_;
  std::shared_ptr<const text::Vocab> vocab_;
  plan::Plan plan_;
  model::Weights weights_;
  memory::KvCache kv_;
  std::unique_ptr<tensor::ThreadPool> pool_;
  model::Scratch scratch_;
  std::vector<float> hidden_;
  int32_t n_batch_ = 512;
};

}  // namespace strata::runtime
