// The coordinator's engine: plans the model over this machine and the workers, loads every stage
// per the plan, and runs batches through the stages in order. Embeddings and sampling stay here.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "exec/local_executor.h"
#include "exec/stage_executor.h"
#include "exec/transport.h"
#include "plan/plan.h"
#include "text/vocab.h"

namespace strata::tensor {
class DecodeRateKeeper;
}

namespace strata::runtime {

class TensorGroup;

using Failover = plan::Failover;  // --failover
using plan::failover_name;

struct ClusterOptions {
  plan::SplitMode split_mode = plan::SplitMode::kLayer;  // -sm
  std::vector<std::string> workers;       // --rpc endpoints, in order
  std::vector<double> tensor_split;       // -ts
  bool tensor_split_auto = false;         // -ts auto (what no -ts, -ngl or -ot means too)
  plan::ExpertSplit expert_split = plan::ExpertSplit::kRows;  // --expert-split
  int32_t n_gpu_layers = -1;              // -ngl
  std::vector<plan::TensorOverride> overrides;  // -ot
  bool strict_placement = false;
  int32_t timeout_ms = 30000;             // deadline of every call to a worker
  int32_t worker_threads = 0;             // threads each worker uses (0: its own -t)
  int32_t depth = 0;                      // context depth -ts auto balances and the plan predicts for
  Failover failover = Failover::kReplan;  // --failover
  int32_t recover_timeout_ms = 60000;     // --recover-timeout: how long requests in flight wait for it
  exec::Transport transport;              // how workers are reached (net::grpc_transport); needed with workers
};

struct EngineOptions {
  std::string model_path;
  int32_t n_ctx = 0;      // 0: min(4096, the model's training context)
  int32_t n_threads = 0;  // 0: all cores
  int32_t n_seq = 1;      // parallel sequences; each gets n_ctx / n_seq cells
  int32_t n_batch = 512;  // the largest batch decode() accepts
  int32_t n_checkpoints = 0;  // recurrent-state checkpoints per sequence each node keeps (prompt cache)
  uint64_t cache_ram_bytes = 0;  // --cache-ram: host memory each node may keep stashed sequences in
  bool mtp = false;  // --spec-type draft-mtp: load the model's MTP block beside the output head to draft
  DType type_k = DType::F16;  // KV cache types (-ctk / -ctv): F16, Q8_0 or Q4_0
  DType type_v = DType::F16;
  ClusterOptions cluster;
};

// What the planner is asked for these options (the default context resolved against the model).
plan::Request plan_request(const EngineOptions& options, const model::HParams& hp);
// A worker as a planner node, from the facts it reports, with the round trip to it.
Result<plan::Node> worker_node(exec::StageExecutor& worker, const ClusterOptions& cluster);
// This machine as a planner node; `with_speed` (when there are workers to weigh it against): its
// speed too, from this host's cache or measured now (a few seconds, once per host).
plan::Node this_machine(int32_t threads, bool with_speed);
// The options' connector; without a transport, one that refuses every endpoint, saying so.
exec::Connector connector(const ClusterOptions& cluster);

// Per-node load outcome, for logs and tests.
struct NodeLoad {
  std::string node;
  uint64_t bytes_sent = 0;
  double seconds = 0;
};

class Engine {
 public:
  // A refused plan keeps the planner's error code (plan::make_plan lists them).
  static Result<std::unique_ptr<Engine>> load(const EngineOptions& options);
  ~Engine();

  const model::Model& model() const { return *model_; }
  const model::HParams& hparams() const { return model_->hparams(); }
  const text::Vocab& vocab() const { return *vocab_; }
  // The plan, for the thread that drives the engine; other threads take a snapshot (a failover may
  // plan again meanwhile).
  const plan::Plan& plan() const { return plan_; }
  plan::Plan plan_snapshot() const;
  const std::vector<NodeLoad>& loads() const { return loads_; }
  // The same for every plan of these options, so they are read without a lock.
  int32_t n_ctx_per_seq() const { return shape_.n_ctx_per_seq; }
  int32_t n_seq() const { return shape_.n_seq; }
  int32_t n_batch() const { return shape_.n_batch; }
  int32_t n_threads() const { return shape_.n_threads; }
  int32_t n_vocab() const { return hparams().n_vocab; }

  // Runs one batch through every stage. Returns the logits (n_vocab floats per row) of the rows
  // flagged in batch.logits, in batch order. A worker failure is an error naming the worker; the
  // next call reconnects (reloading the worker if it restarted) and starts from empty sequences.
  // top_k > 0: the caller samples only among each row's k best logits (sampling::candidates_needed);
  // a remote output stage then sends just those and the other entries come back as -inf.
  Result<std::vector<float>> decode(const model::Batch& batch, int32_t top_k = 0);

  int32_t n_past(int32_t seq) const { return runner().n_past(seq); }
  // Drafts with the MTP block (EngineOptions::mtp): up to options.n_max tokens to follow `token`, which
  // is decoded next at `pos` (the sequence's length).
  Result<std::vector<int32_t>> draft_mtp(int32_t seq, int32_t token, int32_t pos, const model::MtpDraftOptions& options);

  const ClusterOptions& cluster_options() const { return options_.cluster; }
  // A worker failed mid-batch: the nodes' caches disagree until a recovery empties them.
  bool needs_recovery();
  // Recovers now rather than failing fast while a worker is down: reconnects, reloads a worker that
  // restarted (or with --failover replan, past its grace, plans the model over the nodes that
  // answer), rejoins the tensor group and empties every sequence. The error names a node that does
  // not answer.
  Status recover_now();

  // Worker health as the heartbeat last saw it (every 2 s): reachable, and the ping round trip.
  struct NodeHealth {
    std::string node;
    bool reachable = true;  // answers and holds its stage
    bool answers = true;    // answers pings (it may have restarted and lost its stage)
    double ping_ms = 0;
  };
  std::vector<NodeHealth> node_health() const;
  Status clear_seq(int32_t seq);
  Status remove_from(int32_t seq, int32_t p0);
  Status copy_seq(int32_t src, int32_t dst);

  // Prompt-cache checkpoints on every node (each keeps those of the layers the plan gave it; see
  // model::StageRunner::save_checkpoint). Only a model with recurrent layers needs them: without,
  // remove_from cuts any sequence back.
  bool needs_checkpoints() const { return hparams().has_recurrent_layers(); }
  int32_t n_checkpoints() const { return shape_.n_checkpoints; }
  Status save_checkpoint(int32_t seq, int32_t pos);
  Status restore_checkpoint(int32_t seq, int32_t pos);
  Status drop_checkpoint(int32_t seq, int32_t pos);
  // The host prompt cache (--cache-ram): every node copies its share of a sequence (KV rows, state,
  // checkpoints) under `id`, and moves it back later. A stash some node refuses (its limit) is
  // dropped everywhere and the error returned; the engine stays usable.
  Status stash(int32_t seq, int32_t id);
  Status unstash(int32_t id, int32_t seq);
  Status drop_stash(int32_t id);
  // The most any node's limit allows, and the most bytes a stash of n_tokens positions (with
  // n_checkpoints state checkpoints) takes on one node: what the coordinator evicts by.
  uint64_t cache_ram_bytes() const;
  uint64_t stash_bytes(int32_t n_tokens, int32_t n_checkpoints) const;

  // llama-server's slot files (slot_file.cpp): every node's share of a sequence (KV rows, state,
  // checkpoints) in one file, with the tokens it holds, its checkpoint positions and a fingerprint of
  // the model and the plan; restoring refuses a file whose model or plan differs, naming what. Each
  // node stages its share through its host cache, so a restore needs room there (--cache-ram).
  struct SlotContents {
    std::vector<text::Token> tokens;
    std::vector<int32_t> checkpoints;
  };
  Result<uint64_t> save_slot(int32_t seq, const SlotContents& contents, const std::string& path);  // bytes written
  Result<SlotContents> restore_slot(int32_t seq, const std::string& path);
  // What a slot file must match: the model (architecture, shape, file size) and each node's stage.
  std::string slot_fingerprint() const;
  // Counts recoveries: every one starts all sequences (and checkpoints) empty, so a cache keeper
  // compares it with the value it saw when it last filled a sequence.
  uint64_t reset_count() const { return resets_.load(); }

 private:
  Engine() = default;
  Status place(const std::vector<plan::Node>& nodes);
  Status replan_without(const std::vector<size_t>& lost);
  Status load_node(int32_t node);
  void mark_broken();
  Status recover();
  Status recover_or_fail_fast();
  // Whether node n keeps sequence state (KV cache, recurrent state, positions): it embeds, runs a
  // layer or the output head. A worker the plan left without any holds nothing to clear or restore.
  bool keeps_sequences(size_t n) const;
  Status seq_op_everywhere(exec::SeqOp op, int32_t seq, int32_t p0, int32_t dst);
  Status join_group();
  Result<std::vector<float>> run_hops(const model::Batch& batch, std::vector<float>& hidden, int32_t top_k);
  void build_hops();
  void heartbeat();
  const model::StageRunner& runner() const { return local_->runner(); }

  // Keeps the rates this process's decoding runs at in this host's cached speed; destroyed last, so
  // it saves once more after the final step.
  std::unique_ptr<tensor::DecodeRateKeeper> rate_keeper_;
  EngineOptions options_;
  std::shared_ptr<const model::Model> model_;
  std::shared_ptr<const text::Vocab> vocab_;
  plan::Plan plan_;
  plan::Request request_;
  std::vector<std::unique_ptr<exec::StageExecutor>> nodes_;  // per plan node; nodes_[0] is local_
  exec::LocalExecutor* local_ = nullptr;
  std::vector<exec::StageLoad> stage_loads_;  // per plan node, kept to reload a restarted worker
  std::vector<exec::Hop> hops_;               // execution order: the plan's stages, then the output head
  std::unique_ptr<TensorGroup> group_;        // -sm tensor: the group's links and runs
  std::string session_, mesh_secret_;
  std::vector<NodeLoad> loads_;
  std::vector<float> hidden_;
  bool broken_ = false;  // a worker failed mid-batch: caches may disagree until recover()
  std::chrono::steady_clock::time_point broken_since_;
  struct Shape {
    int32_t n_ctx_per_seq = 0, n_seq = 0, n_batch = 0, n_threads = 0, n_checkpoints = 0;
  } shape_;
  // Workers dropped by a replan: kept (never called again) so that a heartbeat still holding a
  // pointer to one does not reach freed memory.
  std::vector<std::unique_ptr<exec::StageExecutor>> retired_;

  std::mutex mu_;
  mutable std::mutex health_mu_;     // guards health_, plan_ and nodes_ against readers outside mu_
  std::vector<NodeHealth> health_;  // per worker (nodes_[1..])
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> resets_{0};
  std::thread heartbeat_;
};

}  // namespace strata::runtime
