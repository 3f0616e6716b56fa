// Deterministic random inputs for the microbenchmarks.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "base/dtype.h"
#include "tensor/blocks.h"

namespace strata::tensor::bench {

inline uint64_t next(uint64_t& s) {  // xorshift64*
  s ^= s >> 12;
  s ^= s << 25;
  s ^= s >> 27;
  return s * 0x2545F4914F6CDD1Dull;
}

inline float uniform(uint64_t& s) { return static_cast<float>(next(s) >> 40) * 0x1p-24f * 2.0f - 1.0f; }

// Random bytes for a Q4_K / Q5_K / Q6_K / Q8_0 matrix with small, finite f16 scales (d at byte 0 of
// every block but Q6_K's, at 208; the K-quants with mins keep dmin at byte 2).
inline std::vector<uint8_t> random_quant_matrix(DType t, int64_t cols, int64_t rows) {
  const size_t size = row_bytes(t, cols) * static_cast<size_t>(rows);
  std::vector<uint8_t> m(size);
  uint64_t s = 0x9E3779B97F4A7C15ull;
  for (size_t i = 0; i + 8 <= size; i += 8) {
    const uint64_t r = next(s);
    std::memcpy(m.data() + i, &r, 8);
  }
  const size_t bb = info(t).block_bytes;
  const size_t d_off = t == DType::Q6_K ? 208 : 0;
  const bool has_min = t == DType::Q4_K || t == DType::Q5_K;
  for (size_t off = 0; off < size; off += bb) {
    const uint16_t d = fp32_to_fp16(0.01f + 0.01f * uniform(s));
    std::memcpy(m.data() + off + d_off, &d, 2);
    if (has_min) std::memcpy(m.data() + off + 2, &d, 2);
  }
  return m;
}

}  // namespace strata::tensor::bench
