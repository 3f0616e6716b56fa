// Saturating size arithmetic for sizes computed from outside input (GGUF files, network messages):
// a result that would overflow becomes kSaturated, which no memory or size check accepts.
#pragma once

#include <cstdint>
#include <limits>

namespace strata {

inline constexpr uint64_t kSaturated = std::numeric_limits<uint64_t>::max();

inline uint64_t sat_add(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_add_overflow(a, b, &r) ? kSaturated : r;
}

inline uint64_t sat_mul(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_mul_overflow(a, b, &r) ? kSaturated : r;
}

template <typename... Rest>
uint64_t sat_mul(uint64_t a, uint64_t b, Rest... rest) {
  return sat_mul(sat_mul(a, b), static_cast<uint64_t>(rest)...);
}

}  // namespace strata
