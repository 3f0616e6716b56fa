// Runs the layers a node owns over a batch's hidden states, with that node's KV cache (attention
// layers) and recurrent state (Gated DeltaNet layers). The coordinator
// uses one for its own layers (plus embeddings and, when it owns it, the output head); each worker
// session uses one for the layers the plan gave it.
#pragma once

#include <map>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <vector>

#include "memory/kv_cache.h"
#include "memory/recurrent_state.h"
#include "memory/seq_blob.h"
#include "model/blocks.h"
#include "model/collective.h"
#include "model/model.h"
#include "model/mtp.h"
#include "model/stage_layout.h"
#include "model/weight_warmer.h"
#include "tensor/thread_pool.h"

namespace strata::model {


class StageRunner {
 public:
  static Result<std::unique_ptr<StageRunner>> create(std::shared_ptr<const Model> model, const StageConfig& config);

  const Model& model() const { return *model_; }
  const StageConfig& config() const { return config_; }
  size_t kv_bytes() const { return kv_.bytes() + (mtp_ ? mtp_->kv_bytes() : 0); }
  size_t state_bytes() const { return recurrent_ ? recurrent_->bytes() : 0; }
  uint64_t weight_bytes() const { return weight_bytes_; }
  int32_t n_past(int32_t seq) const { return kv_.n_past(seq); }

  // Checks ids, sequences and positions against this node's cache; nothing runs on a bad batch.
  // `again`: this node already ran an earlier part of the same batch, so its positions are recorded.
  Status validate(const Batch& batch, bool check_tokens, bool again = false) const;
  // hidden = embeddings of batch.tokens (needs the input tensors).
  void embed(const Batch& batch, std::vector<float>& hidden);
  // Runs layers [first, end), all owned here, over hidden (batch.size() x n_embd) and records the
  // batch's positions in this node's cache.
  Status run_layers(const Batch& batch, int32_t first, int32_t end, float* hidden);
  // Records the batch's positions in this node's cache (run_layers does it too).
  void record_positions(const Batch& batch);
  // Logits of the rows flagged in batch.logits (needs the output tensors): n_vocab per row, or under
  // a tensor split the shard's vocabulary rows (config().shard.vocab) per row.
  std::vector<float> logits(const Batch& batch, const float* hidden);
  // Tensor split: the group's links, which run_layers adds the partial sub-layer outputs over (null:
  // none). A failed exchange makes run_layers return the collective's error.
  void set_collective(Collective* collective);
  // Drafts with the MTP block (a stage with config().mtp): up to n_max tokens to follow `token`, which
  // comes next at `pos` (the sequence's length).
  Result<std::vector<int32_t>> draft_mtp(int32_t seq, int32_t token, int32_t pos, const MtpDraftOptions& options);

  // Sequence operations reach the KV cache and the recurrent state. On a model with recurrent layers
  // (owned here or not, so every node answers alike) remove_from follows RecurrentState's rule: no-op
  // at or past the end, clear at 0, an error in between (nothing changes then).
  Status clear_seq(int32_t seq);
  Status remove_from(int32_t seq, int32_t p0);
  Status copy_seq(int32_t src, int32_t dst);
  // Prompt-cache checkpoints (memory::RecurrentState): save needs pos == n_past(seq); restore rolls the
  // KV cache back to pos and, on a model with recurrent layers, puts the saved state back. A model
  // without recurrent layers keeps nothing: its KV cache can always be cut back.
  Status save_checkpoint(int32_t seq, int32_t pos);
  Status restore_checkpoint(int32_t seq, int32_t pos);
  Status drop_checkpoint(int32_t seq, int32_t pos);
  // The host prompt cache (--cache-ram): a sequence's KV rows, recurrent state and checkpoints copied
  // under an id the coordinator chose, and moved back into a sequence later (the stash is dropped
  // then). A stash that would take this node past config().cache_ram_bytes is refused. drop_stash
  // with id < 0 drops them all.
  Status stash_seq(int32_t seq, int32_t id);
  Status unstash_seq(int32_t id, int32_t seq);
  Status drop_stash(int32_t id);
  uint64_t stashed_bytes() const { return stashed_bytes_; }
  // A stash as bytes (memory::encode_seq), and bytes back as a stash: how a saved slot leaves and
  // reaches the node. Imported bytes must have this stage's shape and fit the limit.
  Result<std::vector<uint8_t>> export_stash(int32_t id) const;
  Status import_stash(int32_t id, std::span<const uint8_t> bytes);

 private:
  struct Stash {
    memory::SeqBlob blob;
    uint64_t bytes = 0;
  };
  Status add_stash(int32_t id, Stash stash);
  StageRunner() = default;
  // Repacks the stage's matrices for the prompt kernels (repacks_tensor) and releases the mapped
  // pages they replace. Returns the bytes of the listed tensors' views as they are then held.
  uint64_t repack_weights();
  void choose_decode_prefetch(const MatrixView& w, const std::string& name);

  std::shared_ptr<const Model> model_;
  StageConfig config_;
  HParams shard_hp_;  // what the layers run with: the shard's heads and FFN width under a tensor split
  Weights weights_;
  uint64_t weight_bytes_ = 0;
  memory::KvCache kv_;
  std::optional<memory::RecurrentState> recurrent_;  // when the model has recurrent layers
  std::unique_ptr<tensor::ThreadPool> pool_;
  std::vector<AlignedBuffer> repacked_;  // what the repacked views point at
  std::vector<AlignedBuffer> sliced_;    // column slices of a tensor split
  Scratch scratch_;
  Collective* collective_ = nullptr;
  WeightWarmer warmer_;  // used with a collective only
  std::unique_ptr<MtpHead> mtp_;  // config().mtp: sees every batch's hidden states, drafts on request
  GlobalWeights mtp_global_;      // with mtp_: the head etc. whole (under a tensor split, before slicing)
  std::vector<float> normed_;     // with mtp_: every row's output-normed hidden state
  std::map<int32_t, Stash> stashes_;
  uint64_t stashed_bytes_ = 0;
};

}  // namespace strata::model
