// The coordinator's side of -sm tensor: opens the group's data links after every member has loaded
// its slice, then runs each batch on all members at once (the same rows to each) and merges their
// logits, each member's vocabulary rows. The plan (tensor_group, node_stages[..].shard) says who
// holds what; this only drives it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "exec/local_executor.h"
#include "exec/stage_executor.h"
#include "exec/transport.h"
#include "plan/plan.h"

namespace strata::runtime {

class TensorGroup {
 public:
  // nodes[i] runs plan node i; nodes[0] is `local`.
  TensorGroup(const plan::Plan& plan, const std::vector<std::unique_ptr<exec::StageExecutor>>& nodes,
              exec::LocalExecutor& local)
      : plan_(plan), nodes_(nodes), local_(local) {}
  ~TensorGroup();

  // Opens (or reopens, after a failure) every link of the group through `join_links`; each end
  // proves the load's secret.
  Status join(const exec::LinkJoiner& join_links, const std::string& secret, const std::string& session,
              int32_t timeout_ms);
  // One batch on every member; `hidden` holds its embeddings. Logits as Engine::decode returns them.
  Result<std::vector<float>> run(const model::Batch& batch, const std::vector<float>& hidden, int32_t top_k);

 private:
  Result<std::vector<float>> merge(std::vector<Result<std::vector<float>>>& out) const;

  const plan::Plan& plan_;
  const std::vector<std::unique_ptr<exec::StageExecutor>>& nodes_;
  exec::LocalExecutor& local_;
  std::unique_ptr<model::Collective> mesh_;  // this machine's links, when it is a member
  std::vector<std::vector<float>> inputs_;
  bool steps_over_link_ = false;  // this machine is member 0 and hands the others their batches on the links
};

}  // namespace strata::runtime
