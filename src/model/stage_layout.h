// What one node's stage is (the layers it runs, whether it embeds tokens or computes logits, the
// tensors it holds, its cache shape) and what that costs in memory. The planner fills a StageConfig
// per node; the coordinator's runner, the worker's admission check and the runner itself size their
// memory with stage_bytes, so the three can never disagree.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/checked.h"
#include "memory/kv_cache.h"
#include "model/model.h"
#include "model/shard.h"

namespace strata::model {

struct StageConfig {
  std::vector<uint8_t> owned;        // per layer: 1 when this node runs it
  bool input = false;                // embeds the batch's tokens
  bool output = false;               // computes the logits (output norm + head)
  bool mtp = false;                  // with output: drafts with the MTP block (--spec-type draft-mtp)
  std::vector<std::string> tensors;  // every tensor whose bytes this node holds, as the plan lists them
  int32_t n_seq = 1;
  int32_t n_ctx_per_seq = 0;
  int32_t n_batch = 512;
  int32_t n_threads = 1;
  int32_t n_checkpoints = 0;  // recurrent-state checkpoints kept per sequence (prompt caching)
  uint64_t cache_ram_bytes = 0;  // --cache-ram: host memory for stashed sequences (0: none)
  DType type_k = DType::F16;  // KV cache types (memory::kv_type_supported)
  DType type_v = DType::F16;
  Shard shard;                // -sm tensor: this node's slice of every layer (count 1: all of it)
  bool repack = false;        // the node's kernels repack matrices at load (the planner, from its features)
};

struct StageBytes {
  uint64_t weights = 0;   // held sizes (held_bytes), repacking included
  uint64_t repacked = 0;  // of which: what repacking adds over the file (shown by the plan)
  uint64_t kv = 0;       // the MTP block's cache included when the stage drafts
  uint64_t state = 0;    // recurrent state (conv + delta-rule matrices)
  uint64_t scratch = 0;  // working memory of the largest batch (scratch_bytes)
  uint64_t checkpoints = 0;  // recurrent-state checkpoints, n_checkpoints per sequence
  uint64_t total() const { return sat_add(sat_add(sat_add(weights, kv), sat_add(state, scratch)), checkpoints); }
};

// The one rule for which tensors a stage reads: the tensors of the layers it runs, rope_freqs when it
// runs any layer (every attention layer reads it), the input tensors when it embeds, the output norm
// and head when it computes logits (token_embd too when the head is tied to it), and the MTP blocks'
// tensors when it computes logits and drafts with them (`mtp`). Declaration order.
std::vector<std::string> tensors_needed(const Model& model, const std::vector<uint8_t>& owned, bool input, bool output,
                                        bool mtp = false);

// Whether a node whose kernels repack (`repack`: StageConfig::repack) repacks this tensor at load for
// the prompt kernels (tensor/repack.h): every matrix with a 16-row form (embedding lookups unpack
// their rows from it). The node's own CPU decides `repack`, never the machine computing this.
bool repacks_tensor(const gguf::TensorInfo& t, bool repack);
// Bytes a node holds for the tensor: its repacked size when it repacks it, else its file size.
uint64_t held_bytes(const gguf::TensorInfo& t, bool repack);

// The bounds every stage is held to, whoever built it (the planner) or sent it (a stage spec).
inline constexpr int32_t kMaxStageSeqs = 256;
inline constexpr int32_t kMaxStageContext = 1 << 24;  // tokens per sequence
inline constexpr int32_t kMaxStageBatch = 1 << 16;
inline constexpr int32_t kMaxStageThreads = 1024;
inline constexpr int32_t kMaxStageCheckpoints = 2048;  // per sequence (their bytes are budgeted like the rest)

// Refuses a stage whose layer flags do not match the model or whose sequences, context, batch,
// threads or checkpoints are outside the bounds above: the one check of a stage's shape, made by the
// runner that builds it and by a worker reading a stage spec before anything is sized from it.
Status check_stage(const StageConfig& stage, const HParams& hp);

// The recurrent state (`state`) and its checkpoints (`checkpoints`) of the layers the stage owns, n_seq
// sequences of n_checkpoints each: memory::RecurrentState's own sizes for the runner's configuration
// (none when the layer flags do not match the model: check_stage refuses such a stage).
struct RecurrentBytes {
  uint64_t state = 0;
  uint64_t checkpoints = 0;
};
RecurrentBytes recurrent_bytes(const HParams& shard_hp, const std::vector<uint8_t>& owned, int32_t n_seq,
                               int32_t n_checkpoints);

// A tensor-split member that drafts with the MTP block needs every vocabulary row of an untied head:
// the file's whole head beside its slice (0 otherwise).
uint64_t mtp_head_bytes(const Model& model, const StageConfig& stage);

// The KV cache of the stage's attention layers.
memory::KvConfig kv_config(const HParams& hp, const Architecture& arch, const StageConfig& stage);

// Bytes a stashed sequence of n_tokens positions with n_checkpoints state checkpoints takes on this
// stage (its KV rows, its recurrent state and the checkpoints): the host prompt cache's accounting,
// shared by the coordinator (which decides what to keep) and each node (which enforces its limit).
uint64_t stash_bytes(const HParams& hp, const Architecture& arch, const StageConfig& stage, int32_t n_tokens,
                     int32_t n_checkpoints);

// Peak working memory of one batch of stage.n_batch rows: the Scratch buffers the layers grow, the
// per-call quantized activations, routing and per-thread tiles, the hidden rows and the logits.
uint64_t scratch_bytes(const HParams& hp, const StageConfig& stage);

// Weights (the listed tensors' bytes, from `infos`), KV cache, recurrent state and scratch.
StageBytes stage_bytes(const HParams& hp, const Architecture& arch, const StageConfig& stage, uint64_t weight_bytes);
StageBytes stage_bytes(const Model& model, const StageConfig& stage);

}  // namespace strata::model
