// Tensor element types with GGUF/ggml ids, block geometry, and scalar float conversions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace strata {

// Values are the ggml type ids stored in GGUF files.
enum class DType : int32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
  IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39, NVFP4 = 40, Q1_0 = 41, Q2_0 = 42,
};

struct DTypeInfo {
  std::string_view name;  // ggml spelling, e.g. "Q4_K"
  int64_t block_elems;    // elements per block
  size_t block_bytes;     // bytes per block
  bool supported;         // Strata can compute with it (dequantize + dot)
};

// Geometry of a type id read from a file; nullopt for ids that are unknown or removed.
std::optional<DTypeInfo> dtype_info(int32_t id);
const DTypeInfo& info(DType t);  // t must be a valid DType
inline std::string_view dtype_name(DType t) { return info(t).name; }
std::optional<DType> dtype_from_name(std::string_view name);  // case-insensitive

// Bytes of a row of n elements; n must be a multiple of the block size.
inline size_t row_bytes(DType t, int64_t n) {
  const DTypeInfo& i = info(t);
  return static_cast<size_t>(n / i.block_elems) * i.block_bytes;
}

// IEEE binary16 <-> float, round to nearest even.
float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);

// bfloat16 <-> float; float -> bf16 rounds to nearest even and keeps NaN quiet.
inline float bf16_to_fp32(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t fp32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((u >> 16) | 64);  // NaN
  return static_cast<uint16_t>((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}

}  // namespace strata
