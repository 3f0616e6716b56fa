// The executor of this machine's own stage: a StageRunner in this process.
#pragma once

#include "exec/stage_executor.h"
#include "model/stage_runner.h"

namespace strata::exec {

// A sequence operation on a runner: what every executor that holds a stage (this process's, a worker
// session's) does with one.
Status apply_seq_op(model::StageRunner& runner, SeqOp op, int32_t seq, int32_t p0, int32_t dst);

class LocalExecutor final : public StageExecutor {
 public:
  const std::string& name() const override { return name_; }
  Result<NodeFacts> hello() override;
  Result<uint64_t> load(const StageLoad& load, const ProgressFn& progress) override;
  Result<std::vector<float>> run(std::span<const Hop> hops, const model::Batch& batch, std::vector<float>& hidden,
                                 int32_t top_k) override;
  Status seq_op(SeqOp op, int32_t seq, int32_t p0, int32_t dst) override;
  Result<std::vector<int32_t>> draft(int32_t seq, int32_t token, int32_t pos, const model::MtpDraftOptions& options) override {
    if (!runner_) return make_error("local: no stage loaded");
    return runner_->draft_mtp(seq, token, pos, options);
  }
  Result<std::vector<uint8_t>> read_stash(int32_t id) override;
  Status write_stash(int32_t id, std::span<const uint8_t> bytes) override;
  Result<bool> ping() override { return true; }

  // The runner (after load): the engine validates, embeds and records positions with it.
  bool loaded() const { return runner_ != nullptr; }
  model::StageRunner& runner() { return *runner_; }
  const model::StageRunner& runner() const { return *runner_; }

 private:
  std::string name_ = "local";
  std::unique_ptr<model::StageRunner> runner_;
};

}  // namespace strata::exec
