// Attention KV cache: per layer and per sequence, F16 (llama.cpp's default), Q8_0 or Q4_0 rows
// (llama.cpp's -ctk / -ctv and block formats). Cell index = position, so a sequence's positions are
// 0..n_past-1 with no holes. K is stored after QK-norm and RoPE.
//
// Head-major: each (layer, sequence, KV head) holds its positions contiguously, so attention over one
// head streams one run of memory instead of a head-sized slice of every row (a 128-byte read every
// 1 KB defeats the hardware prefetchers, which stop at page boundaries).
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
  int32_t head_dim_k = 0;             // one head's slice of a row; must divide n_embd_k
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

// A sequence's first n positions, every kept layer and head, as the cache stores them (the host
// prompt cache keeps these between requests).
struct KvRows {
  int32_t n = 0;
  std::vector<uint8_t> k, v;
  uint64_t bytes() const { return k.size() + v.size(); }
};

class KvCache {
 public:
  // Refuses an unsupported type, a row that is not whole heads, and a quantized type whose head
  // slice is not a whole number of 32-element blocks (the attention kernels read heads block by block).
  static Result<KvCache> create(const KvConfig& config);
  // Saturates (kSaturated) instead of overflowing: the sizes come from outside input.
  static uint64_t bytes_needed(const KvConfig& config);

  const KvConfig& config() const { return config_; }
  size_t bytes() const { return k_.size() + v_.size(); }
  size_t k_row_bytes() const { return k_head_bytes_ * n_head_k_; }  // all heads of one position
  size_t v_row_bytes() const { return v_head_bytes_ * n_head_v_; }
  // One head's slice of one position (head_dim elements), and the number of heads per row.
  size_t k_head_bytes() const { return k_head_bytes_; }
  size_t v_head_bytes() const { return v_head_bytes_; }
  int32_t n_head_k() const { return n_head_k_; }
  int32_t n_head_v() const { return n_head_v_; }

  // Head `head` of position pos for (layer, seq); position pos + i is i * k_head_bytes() further on.
  // The layer must have a cache here.
  uint8_t* k(int il, int seq, int head, int pos) { return k_.data() + k_offset(il, seq, head, pos); }
  uint8_t* v(int il, int seq, int head, int pos) { return v_.data() + v_offset(il, seq, head, pos); }
  const uint8_t* k(int il, int seq, int head, int pos) const { return k_.data() + k_offset(il, seq, head, pos); }
  const uint8_t* v(int il, int seq, int head, int pos) const { return v_.data() + v_offset(il, seq, head, pos); }

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
  // A sequence's positions [0, n_past) copied out, and put back into a sequence (which then holds
  // exactly them). Bytes per position: k_row_bytes() + v_row_bytes() per kept layer.
  Result<KvRows> save_rows(int seq) const;
  Status load_rows(int seq, const KvRows& rows);
  // Whether saved rows have this cache's shape (load_rows checks it too).
  Status fits(const KvRows& rows) const;

 private:
  size_t offset(int il, int seq, int head, int pos, int32_t n_head, size_t head_bytes) const {
    const size_t run = (static_cast<size_t>(slot_[il]) * config_.n_seq + seq) * n_head + head;
    return (run * config_.n_ctx_per_seq + pos) * head_bytes;
  }
  size_t k_offset(int il, int seq, int head, int pos) const {
    return offset(il, seq, head, pos, n_head_k_, k_head_bytes_);
  }
  size_t v_offset(int il, int seq, int head, int pos) const {
    return offset(il, seq, head, pos, n_head_v_, v_head_bytes_);
  }
  void store(bool is_k, int il, int seq, int pos, const float* x);

  KvConfig config_;
  size_t k_head_bytes_ = 0, v_head_bytes_ = 0;
  int32_t n_head_k_ = 1, n_head_v_ = 1;
  std::vector<int32_t> slot_;  // layer -> index among the layers with a cache here
  std::vector<uint8_t> k_, v_;
  std::vector<int32_t> n_past_;
};

}  // namespace strata::memory
