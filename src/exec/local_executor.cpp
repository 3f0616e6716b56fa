#include "exec/local_executor.h"

#include "base/system.h"
#include "model/shard.h"
#include "tensor/repack.h"

namespace strata::exec {

StageLoad stage_load(const plan::Plan& plan, int32_t node, std::shared_ptr<const model::Model> model,
                     const std::string& model_path, const std::string& session) {
  StageLoad l;
  l.model = std::move(model);
  l.model_path = model_path;
  l.stage = plan.node_stages.at(static_cast<size_t>(node));
  l.session = session;
  for (size_t n = 1; n < plan.nodes.size(); ++n) {
    if (static_cast<int32_t>(n) != node) l.forward_to.push_back(plan.nodes[n].endpoint);
  }
  return l;
}

Result<NodeFacts> LocalExecutor::hello() {
  const MemoryFacts mem = read_memory_facts();
  NodeFacts f;
  f.cpu_features = tensor::kernel_features();
  f.threads = hardware_threads();
  f.memory_limit = mem.limit;
  f.memory_available = mem.available;
  f.cgroup_limited = mem.cgroup_limited;
  return f;
}

Result<uint64_t> LocalExecutor::load(const StageLoad& load, const ProgressFn&) {
  STRATA_ASSIGN(runner_, model::StageRunner::create(load.model, load.stage));
  return uint64_t{0};  // the weights are mapped from the file, nothing is sent
}

Result<std::vector<float>> LocalExecutor::run(std::span<const Hop> hops, const model::Batch& batch,
                                              std::vector<float>& hidden, int32_t) {
  if (!runner_) return make_error("local: no stage loaded");
  if (hops.size() != 1 || hops[0].node != this) return make_error("local: a hop chain must start and end here");
  STRATA_TRY(runner_->run_layers(batch, hops[0].first, hops[0].end, hidden.data()));
  if (!hops[0].output) return std::vector<float>{};
  const int32_t n_vocab = runner_->model().hparams().n_vocab;
  return model::widen_logits(runner_->logits(batch, hidden.data()), model::output_rows(runner_->config().shard, n_vocab),
                             n_vocab);
}

Status apply_seq_op(model::StageRunner& runner, SeqOp op, int32_t seq, int32_t p0, int32_t dst) {
  switch (op) {
    case SeqOp::kClear: return runner.clear_seq(seq);
    case SeqOp::kRemoveFrom: return runner.remove_from(seq, p0);
    case SeqOp::kCopy: return runner.copy_seq(seq, dst);
    case SeqOp::kSaveCheckpoint: return runner.save_checkpoint(seq, p0);
    case SeqOp::kRestoreCheckpoint: return runner.restore_checkpoint(seq, p0);
    case SeqOp::kDropCheckpoint: return runner.drop_checkpoint(seq, p0);
    case SeqOp::kStash: return runner.stash_seq(seq, dst);
    case SeqOp::kUnstash: return runner.unstash_seq(dst, seq);
    case SeqOp::kDropStash: return runner.drop_stash(dst);
  }
  return make_error("unknown sequence operation");
}

Status LocalExecutor::seq_op(SeqOp op, int32_t seq, int32_t p0, int32_t dst) {
  if (!runner_) return make_error("local: no stage loaded");
  return apply_seq_op(*runner_, op, seq, p0, dst);
}

Result<std::vector<uint8_t>> LocalExecutor::read_stash(int32_t id) {
  if (!runner_) return make_error("local: no stage loaded");
  return runner_->export_stash(id);
}

Status LocalExecutor::write_stash(int32_t id, std::span<const uint8_t> bytes) {
  if (!runner_) return make_error("local: no stage loaded");
  return runner_->import_stash(id, bytes);
}

}  // namespace strata::exec
