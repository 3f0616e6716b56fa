// Tensor parallelism (-sm tensor): every node of a tensor group holds a slice of every layer, runs
// its slice and adds the group's partial results after each sub-layer (Collective). A shard says
// which slice: attention by KV heads (with their query heads and their KV cache), the Gated DeltaNet
// by key heads (with the value heads that read them, their conv channels and recurrent state), the
// dense FFN and the shared expert by rows of gate/up and the same columns of down, the routed experts
// either the same way (rows of every expert) or whole (a range of experts each), the output head by
// vocabulary rows. Slices that are one run of rows are views of the file's
// rows; the others (columns of attn_output, ffn_down, ssm_out; several runs of rows) are copied out
// block by block, so columns start and end on the weight type's block boundaries (shard_units).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "model/architecture.h"
#include "model/hparams.h"
#include "model/weights.h"
#include "tensor/aligned_buffer.h"

namespace strata::model {

class Model;

struct Range {
  int32_t begin = 0, end = 0;
  int32_t size() const { return end - begin; }
  bool operator==(const Range&) const = default;
};

struct Shard {
  int32_t index = 0;  // among the tensor group
  int32_t count = 1;  // 1: the whole model, no tensor parallelism
  Range kv_heads;     // attention: KV heads [begin, end) and the query heads that read them
  Range ff;           // dense FFN: rows of gate and up, columns of down
  Range vocab;        // output head: rows (token ids) [begin, end)
  Range ssm_k_heads;  // Gated DeltaNet: key heads [begin, end) and every value head that reads them
  Range ff_expert;    // routed experts: rows of each expert's gate/up, columns of its down
  Range experts;      // routed experts held: [begin, end) whole (cut by experts) or all (cut by rows)
  Range ff_shared;    // shared expert: rows of gate/up, columns of down
  bool split() const { return count > 1; }
  bool operator==(const Shard&) const = default;
};

// The whole model as one shard (count 1, every range full).
Shard whole_shard(const HParams& hp);

// The steps a tensor split cuts in: KV heads, FFN rows and vocabulary rows per step. Column slices
// must hold whole quant blocks and row slices whole 16-row repack groups, in every layer.
struct ShardUnits {
  int32_t kv_heads = 1;
  int32_t ff = 1;
  int32_t vocab = 1;
  int32_t ssm_k_heads = 1;
  int32_t ff_expert = 1;
  int32_t ff_shared = 1;
};
// Refuses shapes that cannot be cut (fused qwen3next projections, heads that do not divide), naming
// the tensor or the numbers.
Result<ShardUnits> shard_units(const Model& model);

// Whether the shard holds a range of routed experts whole (else rows of every expert, or all of it).
inline bool holds_whole_experts(const HParams& hp, const Shard& s) { return s.experts.size() < hp.n_expert; }

// The hyperparameters the shard's layers run with: the head counts and widths of its slice.
HParams shard_hparams(const HParams& hp, const Shard& shard);

// Checks a shard against the model (ranges inside the model, non-empty, on unit boundaries).
Status check_shard(const Model& model, const Shard& shard);

// Bytes of a tensor's slice held by a node with this shard (its whole held size when not sliced);
// `embeds` as for shard_slice_bytes, `repack` as for held_bytes (stage_layout.h).
uint64_t shard_tensor_bytes(const HParams& hp, const TensorDecl& decl, const gguf::TensorInfo& info, const Shard& shard,
                            bool embeds, bool repack);
uint64_t shard_tensor_bytes(const Model& model, const std::string& name, const Shard& shard, bool repack);

// The output head's rows a stage with this shard computes: its vocabulary slice, or all n_vocab.
inline Range output_rows(const Shard& s, int32_t n_vocab) { return s.split() ? s.vocab : Range{0, n_vocab}; }

// A member's logits (rows x vocab.size()) as whole rows (rows x n_vocab), -inf outside its slice: the
// group's rows are then the elementwise max of its members' (merge_logits). Whole rows come back as
// they are.
std::vector<float> widen_logits(std::vector<float> slice, Range vocab, int32_t n_vocab);
void merge_logits(std::vector<float>& into, const std::vector<float>& from);

// The bytes of a tensor's data a slice reads, as strided runs: `count` pieces of `length` bytes,
// `stride` apart, from `offset`. A worker without the model file receives only these.
struct ByteRun {
  uint64_t offset = 0, length = 0, stride = 0, count = 1;
  bool operator==(const ByteRun&) const = default;
};
struct SliceBytes {
  bool whole = true;          // the whole tensor is read (runs unused)
  std::vector<ByteRun> runs;  // else exactly these bytes (none: the tensor is not read at all)
  // Bytes read: the runs' total, or `nbytes` when whole.
  uint64_t bytes(uint64_t nbytes) const;
  bool operator==(const SliceBytes&) const = default;
};
// A member that does not embed holds only its head's rows of a tied token_embd (the one rule for it:
// what it reads, receives, slices and repacks).
inline bool head_rows_only(const Shard& s, bool embeds) { return s.split() && !embeds; }
// Bytes held (repacked size included) of a tensor's slice: a slice repacks in the same proportion as
// the whole.
uint64_t held_slice_bytes(const gguf::TensorInfo& info, const SliceBytes& slice, bool repack);
// What a stage with this shard reads of a tensor. `embeds`: the stage looks up token embeddings (it
// reads token_embd whole); a member that does not reads a tied token_embd only as its head's rows.
SliceBytes shard_slice_bytes(const HParams& hp, const TensorDecl& decl, const gguf::TensorInfo& info, const Shard& shard,
                             bool embeds);
// Runs received from elsewhere: inside `nbytes`, non-empty, not overlapping within a run, at most
// kMaxByteRuns of them (checked arithmetic throughout).
inline constexpr size_t kMaxByteRuns = 4096;
Status check_slice_bytes(const SliceBytes& slice, uint64_t nbytes);
// The pieces of bytes [from, from + n) of the slice's gathered stream (its runs back to back, or the
// tensor when whole): f(offset in the tensor, offset in the stream, length), in stream order.
// check_slice_bytes must have passed.
void for_each_piece(const SliceBytes& slice, uint64_t from, uint64_t n,
                    const std::function<void(uint64_t tensor_offset, uint64_t stream_offset, uint64_t length)>& f);

// Aligned byte buffers that sliced and repacked views point into (tensor/aligned_buffer.h).
using tensor::AlignedBuffer;
using tensor::aligned_buffer;
using tensor::kHugePage;

// Replaces the bound views of the owned layers and the output head by the shard's slices (one run of
// rows as a view, anything else copied into `storage`). Biases that are added once per sum (attn
// output, ffn down) stay on shard 0 only; a member that does not embed keeps only its head's rows of
// a tied token_embd. check_shard must have passed.
void slice_weights(Weights& w, const Model& model, const Shard& shard, const std::vector<uint8_t>& owned, bool embeds,
                   std::vector<AlignedBuffer>& storage);

}  // namespace strata::model
