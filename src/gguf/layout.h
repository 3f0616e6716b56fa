// Internal: GGUF format constants and helpers shared by the reader and the writer.
#pragma once

#include <bit>
#include <cstdint>
#include <optional>

#include "gguf/gguf.h"
#include "gguf/names.h"

namespace strata::gguf::layout {

// The reader decodes with memcpy into host integers; GGUF is little-endian.
static_assert(std::endian::native == std::endian::little, "Strata's GGUF code assumes a little-endian host");

inline constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
inline constexpr uint32_t kWriteVersion = 3;
inline constexpr uint64_t kDefaultAlignment = 32;
inline constexpr uint64_t kMaxStringLength = uint64_t{1} << 30;  // as llama.cpp: 1 GiB
inline constexpr uint64_t kMaxArrayElements = uint64_t{1} << 30;
inline constexpr uint64_t kMaxNameLength = 63;  // ggml names are char[64] with a NUL
inline constexpr uint32_t kMaxDims = 4;

// Smallest possible records, used to bound header counts by the bytes that remain.
inline constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;              // key len, 1-byte key, type, u8
inline constexpr uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 8 + 4 + 8;  // name, n_dims, ne[0], type, offset

inline bool is_known(int32_t t) { return t >= 0 && t <= static_cast<int32_t>(ValueType::F64); }

// Packed size of a fixed-size value type; nullopt for STRING, ARRAY and unknown ids.
inline std::optional<uint64_t> fixed_size(ValueType t) {
  switch (t) {
    case ValueType::U8: case ValueType::I8: case ValueType::BOOL: return 1;
    case ValueType::U16: case ValueType::I16: return 2;
    case ValueType::U32: case ValueType::I32: case ValueType::F32: return 4;
    case ValueType::U64: case ValueType::I64: case ValueType::F64: return 8;
    case ValueType::STRING: case ValueType::ARRAY: break;
  }
  return std::nullopt;
}

inline bool is_integer(ValueType t) {
  switch (t) {
    case ValueType::U8: case ValueType::I8: case ValueType::U16: case ValueType::I16:
    case ValueType::U32: case ValueType::I32: case ValueType::U64: case ValueType::I64: return true;
    default: return false;
  }
}

inline bool is_power_of_two(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

// Rounds v up to a multiple of `alignment` (a power of two); nullopt on overflow.
inline std::optional<uint64_t> pad(uint64_t v, uint64_t alignment) {
  const uint64_t mask = alignment - 1;
  if (v > UINT64_MAX - mask) return std::nullopt;
  return (v + mask) & ~mask;
}

// Element count of ne[0..n_dims), nullopt on int64 overflow. Zero dims are left out of the overflow
// check but not forgiven: TensorInfo::n_elements()/n_rows() multiply in a fixed order, and
// [2^40, 2^40, 0] would overflow there before reaching the zero.
inline std::optional<int64_t> element_count(const int64_t* ne, uint32_t n_dims) {
  int64_t nonzero_product = 1;
  bool has_zero = false;
  for (uint32_t k = 0; k < n_dims; ++k) {
    if (ne[k] == 0) {
      has_zero = true;
    } else if (__builtin_mul_overflow(nonzero_product, ne[k], &nonzero_product)) {
      return std::nullopt;
    }
  }
  return has_zero ? 0 : nonzero_product;
}

// Bytes of `n_elements` of a type (n_elements a multiple of the block size); nullopt on overflow.
inline std::optional<uint64_t> byte_size(const DTypeInfo& info, int64_t n_elements) {
  const uint64_t blocks = static_cast<uint64_t>(n_elements / info.block_elems);
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(blocks, static_cast<uint64_t>(info.block_bytes), &bytes)) return std::nullopt;
  return bytes;
}

}  // namespace strata::gguf::layout
