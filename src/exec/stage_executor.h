// A stage executor runs one node's part of the plan: it loads the node's stage, runs hops of layers
// over a batch's hidden rows, applies sequence operations to the node's caches and reports health.
// The coordinator's engine drives every node through this interface alone: the local executor runs
// on this machine, net/ implements it over gRPC, and another transport only has to implement it too.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "model/batch.h"
#include "model/collective.h"
#include "model/model.h"
#include "model/mtp.h"
#include "model/stage_layout.h"
#include "plan/plan.h"
#include "tensor/node_speed.h"

namespace strata::exec {

class StageExecutor;

// Layers [first, end) of one node's stage, then its output head when `output`.
struct Hop {
  StageExecutor* node = nullptr;
  int32_t first = 0, end = 0;
  bool output = false;
  bool again = false;  // the node already ran an earlier hop of the same batch
};

// What a node reports before it is planned.
struct NodeFacts {
  std::vector<std::string> cpu_features;
  tensor::NodeSpeed speed;  // measured at the node's start (unknown from a node that did not measure)
  int32_t threads = 0;
  uint64_t memory_limit = 0;      // cgroup or physical limit
  uint64_t memory_available = 0;  // what is free under it now
  bool cgroup_limited = false;
  std::vector<std::string> model_sha256;  // models it has as local files
  int32_t sessions = 0;                   // coordinators it serves now
};

// Everything a node needs to hold its stage: the plan's stage for it and the model it is part of.
struct StageLoad {
  std::shared_ptr<const model::Model> model;  // the coordinator's whole model
  std::string model_path;
  model::StageConfig stage;
  std::string session;                 // one id per coordinator run
  std::vector<std::string> forward_to;  // the other nodes' endpoints (hidden states may go there)
  std::string mesh_secret;              // tensor split: the load's random link secret
};
// The load the plan gives `node`.
StageLoad stage_load(const plan::Plan& plan, int32_t node, std::shared_ptr<const model::Model> model,
                     const std::string& model_path, const std::string& session);

struct LoadProgress {
  uint64_t bytes_sent = 0;
  uint64_t bytes_total = 0;
  double seconds = 0;
};
using ProgressFn = std::function<void(const LoadProgress&)>;

// kCopy copies seq to dst. The checkpoint operations take the position in p0; the stash operations
// (the host prompt cache) the stash id in dst (model::StageRunner).
enum class SeqOp {
  kClear, kRemoveFrom, kCopy, kSaveCheckpoint, kRestoreCheckpoint, kDropCheckpoint, kStash, kUnstash, kDropStash
};

class StageExecutor {
 public:
  virtual ~StageExecutor() = default;
  // How logs and errors name the node ("local" or host:port).
  virtual const std::string& name() const = 0;
  virtual Result<NodeFacts> hello() = 0;
  // Loads the stage (again, after a restart). Returns the weight bytes that had to be sent.
  virtual Result<uint64_t> load(const StageLoad& load, const ProgressFn& progress) = 0;
  // Runs `hops` (hops[0].node is this executor; later hops are nodes it reaches itself, see
  // can_chain_to) over `hidden` (batch.size() x n_embd floats, updated in place). When the last hop is
  // an output hop, returns the logits of the rows that want them (n_vocab each; with top_k > 0 only
  // each row's top_k entries are real, the others -inf); otherwise an empty vector.
  virtual Result<std::vector<float>> run(std::span<const Hop> hops, const model::Batch& batch,
                                         std::vector<float>& hidden, int32_t top_k) = 0;
  // True when this node can hand its output to `next` directly (one call for a chain of nodes).
  virtual bool can_chain_to(const StageExecutor& /*next*/) const { return false; }
  virtual Status seq_op(SeqOp op, int32_t seq, int32_t p0, int32_t dst) = 0;
  // Drafts with the MTP block of an output stage that holds one (model::StageRunner::draft_mtp).
  virtual Result<std::vector<int32_t>> draft(int32_t /*seq*/, int32_t /*token*/, int32_t /*pos*/,
                                             const model::MtpDraftOptions& /*options*/) {
    return make_error("{}: this node cannot draft", name());
  }
  // A stash (SeqOp::kStash) as bytes, and bytes back as a stash: how a saved slot's share leaves the
  // node and comes back (model::StageRunner::export_stash / import_stash).
  virtual Result<std::vector<uint8_t>> read_stash(int32_t /*id*/) {
    return make_error("{}: this node cannot hand out saved sequences", name());
  }
  virtual Status write_stash(int32_t /*id*/, std::span<const uint8_t> /*bytes*/) {
    return make_error("{}: this node cannot take saved sequences", name());
  }
  // Tensor split: the port of the node's data link listener once loaded (0: none), and the call that
  // opens its links to the group (every member's data endpoint, in member order). With
  // steps_over_link the coordinator is member 0 and hands the node its batches over those links.
  virtual int32_t data_port() const { return 0; }
  virtual Status join_mesh(const std::vector<std::string>& /*members*/, bool /*steps_over_link*/) {
    return make_error("{}: this node cannot join a tensor group", name());
  }
  // Tensor split led by this machine (steps_over_link): send_batch_over_link sends the node, member
  // `member` of `links`, the batch and its hidden rows; receive_logits_over_link waits for its logits
  // (as run() returns them). Between the two this machine runs its own slice, whose exchanges the
  // node's answer follows.
  virtual Status send_batch_over_link(model::Collective& /*links*/, int32_t /*member*/, const Hop& /*hop*/,
                                      const model::Batch& /*batch*/, const std::vector<float>& /*hidden*/,
                                      int32_t /*top_k*/) {
    return make_error("{}: this node takes no batches over data links", name());
  }
  virtual Result<std::vector<float>> receive_logits_over_link(model::Collective& /*links*/, int32_t /*member*/,
                                                              const model::Batch& /*batch*/, int32_t /*top_k*/) {
    return make_error("{}: this node takes no batches over data links", name());
  }
  // True when the node answers and still holds its stage; an error when it does not answer.
  virtual Result<bool> ping() = 0;
  // Releases the stage on the node (the process ends).
  virtual void end() {}
};

// Opens an executor for a worker endpoint (net::grpc_connector for gRPC).
using Connector = std::function<Result<std::unique_ptr<StageExecutor>>(const std::string& endpoint)>;

}  // namespace strata::exec
