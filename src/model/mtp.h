// The multi-token-prediction (MTP) block some Qwen3.5/3.6 files end with, run as a draft model for
// speculative decoding (--spec-type draft-mtp). It predicts the token after next from the trunk's
// last hidden state and the next token: row p takes token x_p and the trunk's output-normed hidden
// state of position p-1, goes through eh_proj, one full-attention layer with its own KV cache and
// the trunk's FFN kind, and the (shared) output head. The output stage that drafts owns one and
// shows it every batch the trunk runs, so its cache always mirrors the trunk's positions; drafting
// chains it on its own output and then cuts its cache back. The layout and the order of operations
// are llama.cpp's (--spec-type draft-mtp), so drafts match its drafts token for token.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "memory/kv_cache.h"
#include "model/blocks.h"
#include "model/model.h"
#include "model/stage_layout.h"

namespace strata::model {

struct MtpDraftOptions {
  int32_t n_max = 3;    // tokens drafted at most
  float p_min = 0.0f;   // stop before a token whose probability (among the 10 best) is below this
};

// The block's KV cache for a stage that drafts: one attention layer, the trunk's cache types.
memory::KvConfig mtp_kv_config(const HParams& hp, const Architecture& arch, const StageConfig& stage);

class MtpHead {
 public:
  // What the block reads, all owned by the stage's runner (which outlives the head).
  struct Parts {
    const Model& model;
    const HParams& hp;  // the model's (the block is never sliced)
    const Weights& weights;      // the block's layer
    const GlobalWeights& global;  // whole: every vocabulary row of the head
    tensor::ThreadPool& pool;
    Scratch& scratch;
  };
  static Result<std::unique_ptr<MtpHead>> create(const Parts& parts, const StageConfig& config);

  uint64_t kv_bytes() const { return kv_.bytes(); }
  // Mirrors one trunk batch: `normed` holds every row's output-normed hidden state (batch.size() x n_embd).
  void process(const Batch& batch, const float* normed);
  // Drafts up to options.n_max tokens to follow `token`, which the trunk will decode at `pos` next
  // (pos == the sequence's length). The block's cache is left as it was.
  std::vector<int32_t> draft(int32_t seq, int32_t token, int32_t pos, const MtpDraftOptions& options);

  // The trunk's sequence operations, mirrored.
  void clear(int32_t seq);
  void remove_from(int32_t seq, int32_t p0);
  void copy(int32_t src, int32_t dst);

 private:
  // Per sequence: the hidden state the next row at the end of the sequence reads, and the last batch's
  // rows (to find it again after the sequence is cut back inside that batch).
  struct SeqHidden {
    std::vector<float> pending;  // h of the sequence's last position (zeros when empty)
    std::vector<float> before;   // pending before the last batch
    std::vector<float> rows;     // that batch's normed rows of this sequence, in position order
    int32_t first = 0;           // the position of rows' first row
  };
  MtpHead(const Parts& parts, int il) : parts_(parts), il_(il) {}
  // Runs the block over batch with hidden inputs h_in (one per row); out: the head-normed outputs.
  void run(const Batch& batch, const float* h_in, std::vector<float>& out);
  // The logits of one head-normed row.
  void head_logits(const float* normed, std::vector<float>& logits);

  Parts parts_;
  int il_;  // the block's layer index (n_layer)
  memory::KvCache kv_;
  std::vector<SeqHidden> seqs_;
  std::vector<float> cat_, x_, in_, out_, logits_;
};

}  // namespace strata::model
