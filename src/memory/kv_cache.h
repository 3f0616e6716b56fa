// Attention KV cache: per layer and per sequence, F16 (llama.cpp's default), Q8_0 or Q4_0 rows
// (llama.cpp's -ctk / -ctv and block formats). Cell index = position, so a sequence's positions are
// 0..n_past-1 with no holes. K is stored after QK-norm and RoPE.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/dtype.h"
#include "base/result.h"

namespace strata::memory {

struct KvConfig {
  int32_t n_layer = 0;
  std::vector<uint8_t> layer_has_kv;  // n_layer flags: 1 where this node keeps the layer's cache
  int32_t n_embd_k = 0;               // n_head_kv * head_dim_k
  int32_t n_embd_v = 0;
  int32_t head_dim_k = 0;             // one head's slice of a row (0: unknown, only the row is checked)
  int32_t head_dim_v = 0;
  int32_t n_seq = 1;
  int32_t n_ctx_per_seq = 0;          // cells per sequence
  DType type_k = DType::F16;          // F16, Q8_0 or Q4_0
  DType type_v = DType::F16;
};

// The cache types, as llama.cpp spells them on its command line ("f16", "q8_0", "q4_0").
bool kv_type_supported(DType type);
std::string kv_type_name(DType type);  // lower case; "type <id>" for an id that is no DType
// "f16" / "q8_0" / "q4_0"; any other text is an error naming it and listing these.
Result<DType> parse_kv_type(std::string_view name);
// Bytes of one row of n elements of a cache type (whole blocks, rounded up).
uint64_t kv_row_bytes(DType type, int64_t n);

class KvCache {
 public:
  // Refuses an unsupported type, and a quantized type whose row or head slice is not a whole number
  // of 32-element blocks (the attention kernels read heads block by block).
  static Result<KvCache> create(const KvConfig& config);
  // Saturates (kSaturated) instead of overflowing: the sizes come from outside input.
  static uint64_t bytes_needed(const KvConfig& config);

  const KvConfig& config() const { return config_; }
  size_t bytes() const { return k_.size() + v_.size(); }
  size_t k_row_bytes() const { return k_row_bytes_; }
  size_t v_row_bytes() const { return v_row_bytes_; }

  // Row of n_embd_k (n_embd_v) elements of type_k (type_v) for (layer, seq, pos), k_row_bytes()
  // (v_row_bytes()) bytes. The layer must have a cache here.
  uint8_t* k(int il, int seq, int pos) { return k_.data() + offset(il, seq, pos, k_row_bytes_); }
  uint8_t* v(int il, int seq, int pos) { return v_.data() + offset(il, seq, pos, v_row_bytes_); }
  const uint8_t* k(int il, int seq, int pos) const { return k_.data() + offset(il, seq, pos, k_row_bytes_); }
  const uint8_t* v(int il, int seq, int pos) const { return v_.data() + offset(il, seq, pos, v_row_bytes_); }

  // Stores an f32 row (n_embd_k / n_embd_v floats) in the cache's type, converted as llama.cpp's CPU
  // copy into its cache does: F16 round to nearest even, Q8_0 its x86 quantize_row_q8_0, Q4_0
  // quantize_row_q4_0_ref.
  void write_k(int il, int seq, int pos, const float* x);
  void write_v(int il, int seq, int pos, const float* x);

  // Positions filled for a sequence.
  int32_t n_past(int seq) const { return n_past_[seq]; }
  void set_n_past(int seq, int32_t n) { n_past_[seq] = n; }

  // Sequence operations. Positions are contiguous, so "remove" keeps [0, p0) and drops the rest.
  void clear(int seq) { n_past_[seq] = 0; }
  Status remove_from(int seq, int32_t p0);
  Status copy(int src_seq, int dst_seq);

 private:
  size_t offset(int il, int seq, int pos, size_t row_bytes) const {
    return ((static_cast<size_t>(slot_[il]) * config_.n_seq + seq) * config_.n_ctx_per_seq + pos) * row_bytes;
  }

  KvConfig config_;
  size_t k_row_bytes_ = 0, v_row_bytes_ = 0;
  std::vector<int32_t> slot_;  // layer -> index among the layers with a cache here
  std::vector<uint8_t> k_, v_;
  std::vector<int32_t> n_past_;
};

}  // namespace strata::memory
