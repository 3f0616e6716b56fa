// Recurrent state of Gated DeltaNet layers: per layer (those this node keeps) and per sequence, the
// conv state and the delta-rule state matrices, F32 like llama.cpp's.
//
// Layout, per (layer, sequence):
//   conv: conv_rows x conv_channels floats, row r = the raw (pre-conv) input r steps before the
//         newest kept one, oldest row first: the last K-1 inputs of each channel.
//   ssm:  n_heads blocks of head_v_dim x head_k_dim floats. In head h's block, row j (a value index)
//         holds column j of the d_k x d_v state S, i.e. S[i][j] is at j * head_k_dim + i (ggml's
//         "transposed" layout, so S^T k and S^T q read contiguous rows).
//
// Rolling back: a recurrent state summarizes every token it has seen and cannot be rewound. So
// remove_from(seq, p0) is a no-op when p0 >= n_past(seq), clears the sequence when p0 == 0, and is
// an error for 0 < p0 < n_past (nothing is changed then).
//
// Checkpoints make a prefix reusable anyway: save_checkpoint copies a sequence's state (tagged with
// its n_past) and restore_checkpoint puts it back, so a server slot can resume from the newest
// checkpoint at or before the prefix it shares with the next request. At most n_checkpoints per
// sequence are kept (the planner counts their bytes); their memory is taken when they are saved.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/result.h"

namespace strata::memory {

struct RecurrentConfig {
  int32_t n_layer = 0;
  std::vector<uint8_t> layer_has_state;  // n_layer flags: 1 where this node keeps the layer's state
  int32_t conv_rows = 0;                 // K - 1
  int32_t conv_channels = 0;
  int32_t n_heads = 0;                   // value heads
  int32_t head_k_dim = 0;
  int32_t head_v_dim = 0;
  int32_t n_seq = 1;
  int32_t n_checkpoints = 0;             // per sequence
};

// A sequence's state copied out: the current one (after n_past tokens) and its checkpoints, every
// kept layer in layer order (the host prompt cache keeps these between requests).
struct StateCheckpoint {
  int32_t pos = 0;
  std::vector<float> conv, ssm;  // every kept layer's state of the sequence, in layer order
};
struct SeqState {
  StateCheckpoint now;  // pos = n_past
  std::vector<StateCheckpoint> checkpoints;
  uint64_t bytes() const;
};

class RecurrentState {
 public:
  static Result<RecurrentState> create(const RecurrentConfig& config);
  // Bytes of one layer's state for one sequence.
  // Both saturate (kSaturated) instead of overflowing.
  static uint64_t bytes_per_layer_seq(const RecurrentConfig& config);
  static uint64_t bytes_needed(const RecurrentConfig& config);
  // The checkpoints' share of bytes_needed (n_checkpoints per sequence, every kept layer).
  static uint64_t checkpoint_bytes(const RecurrentConfig& config);

  const RecurrentConfig& config() const { return config_; }
  size_t bytes() const { return (conv_.size() + ssm_.size()) * sizeof(float); }
  bool has_layer(int il) const { return il >= 0 && il < config_.n_layer && slot_[il] >= 0; }

  // State of (layer, seq); the layer must be kept here.
  float* conv(int il, int seq) { return conv_.data() + index(il, seq) * conv_size(); }
  float* ssm(int il, int seq) { return ssm_.data() + index(il, seq) * ssm_size(); }
  const float* conv(int il, int seq) const { return conv_.data() + index(il, seq) * conv_size(); }
  const float* ssm(int il, int seq) const { return ssm_.data() + index(il, seq) * ssm_size(); }

  // Tokens the sequence's state has consumed.
  int32_t n_past(int seq) const { return n_past_[seq]; }
  void set_n_past(int seq, int32_t n) { n_past_[seq] = n; }

  // Sequence operations. clear zeroes the state; copy duplicates it (n_past included).
  Status clear(int seq);
  Status remove_from(int seq, int32_t p0);
  Status copy(int src_seq, int dst_seq);

  // Checkpoints of a sequence. save refuses when n_checkpoints are kept (drop one first); restore
  // needs a checkpoint at exactly `pos`; drop with pos < 0 drops them all. clear drops them too.
  Status save_checkpoint(int seq);
  Status restore_checkpoint(int seq, int32_t pos);
  Status drop_checkpoint(int seq, int32_t pos);
  std::vector<int32_t> checkpoint_positions(int seq) const;

  // The sequence's state and checkpoints copied out, and put back (replacing the sequence's own).
  Result<SeqState> save_seq(int seq) const;
  Status load_seq(int seq, const SeqState& saved);
  // Whether a saved state has this node's layers and at most its checkpoint count (load_seq checks it).
  Status fits(const SeqState& saved) const;

 private:
  using Checkpoint = StateCheckpoint;
  void copy_out(int seq, Checkpoint& into) const;
  void copy_in(int seq, const Checkpoint& from);
  Checkpoint* find_checkpoint(int seq, int32_t pos);
  size_t conv_size() const { return static_cast<size_t>(config_.conv_rows) * config_.conv_channels; }
  size_t ssm_size() const {
    return static_cast<size_t>(config_.n_heads) * config_.head_k_dim * config_.head_v_dim;
  }
  size_t index(int il, int seq) const { return static_cast<size_t>(slot_[il]) * config_.n_seq + seq; }
  bool valid_seq(int seq) const { return seq >= 0 && seq < config_.n_seq; }

  RecurrentConfig config_;
  std::vector<int32_t> slot_;  // layer -> index among the layers kept here, or -1
  std::vector<float> conv_, ssm_;
  std::vector<int32_t> n_past_;
  std::vector<std::vector<Checkpoint>> checkpoints_;  // per sequence
  // Per sequence: dropped checkpoints' buffers, reused by the next save (speculation drops and saves
  // one every check; allocating it again zeroed and faulted in as much memory as it copies). Their
  // count with the kept ones stays within n_checkpoints, the number the plan counts.
  std::vector<std::vector<Checkpoint>> spare_;
  int32_t n_kept_layers_ = 0;
};

}  // namespace strata::memory
