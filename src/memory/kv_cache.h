// Attention KV cache: per layer and per sequence, F16 like llama.cpp's default. Cell index = position,
// so a sequence's positions are 0..n_past-1 with no holes. K is stored after QK-norm and RoPE.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/result.h"

namespace strata::memory {

struct KvConfig {
  int32_t n_layer = 0;
  std::vector<uint8_t> layer_has_kv;  // n_layer flags: 1 where this node keeps the layer's cache
  int32_t n_embd_k = 0;               // n_head_kv * head_dim_k
  int32_t n_embd_v = 0;
  int32_t n_seq = 1;
  int32_t n_ctx_per_seq = 0;          // cells per sequence
};

class KvCache {
 public:
  static Result<KvCache> create(const KvConfig& config);
  // Saturates (kSaturated) instead of overflowing: the sizes come from outside input.
  static uint64_t bytes_needed(const KvConfig& config);

  const KvConfig& config() const { return config_; }
  size_t bytes() const { return (k_.size() + v_.size()) * sizeof(uint16_t); }

  // Row of n_embd_k (n_embd_v) halves for (layer, seq, pos). The layer must have a cache here.
  uint16_t* k(int il, int seq, int pos) { return k_.data() + offset(il, seq, pos, config_.n_embd_k); }
  uint16_t* v(int il, int seq, int pos) { return v_.data() + offset(il, seq, pos, config_.n_embd_v); }
  const uint16_t* k(int il, int seq, int pos) const { return k_.data() + offset(il, seq, pos, config_.n_embd_k); }
  const uint16_t* v(int il, int seq, int pos) const { return v_.data() + offset(il, seq, pos, config_.n_embd_v); }

  // Positions filled for a sequence.
  int32_t n_past(int seq) const { return n_past_[seq]; }
  void set_n_past(int seq, int32_t n) { n_past_[seq] = n; }

  // Sequence operations. Positions are contiguous, so "remove" keeps [0, p0) and drops the rest.
  void clear(int seq) { n_past_[seq] = 0; }
  Status remove_from(int seq, int32_t p0);
  Status copy(int src_seq, int dst_seq);

 private:
  size_t offset(int il, int seq, int pos, int32_t width) const {
    return ((static_cast<size_t>(slot_[il]) * config_.n_seq + seq) * config_.n_ctx_per_seq + pos) * width;
  }

  KvConfig config_;
  std::vector<int32_t> slot_;  // layer -> index among the layers with a cache here
  std::vector<uint16_t> k_, v_;
  std::vector<int32_t> n_past_;
};

}  // namespace strata::memory
