#include "base/dtype.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace strata {
namespace {

constexpr int kTypeCount = 43;

struct Row {
  int32_t id;
  DTypeInfo info;
};

// Removed ids (4, 5, 31-33, 36-38) are absent: dtype_info() returns nullopt for them.
constexpr Row kRows[] = {
    {0, {"F32", 1, 4, true}},       {1, {"F16", 1, 2, true}},        {2, {"Q4_0", 32, 18, true}},
    {3, {"Q4_1", 32, 20, true}},    {6, {"Q5_0", 32, 22, true}},     {7, {"Q5_1", 32, 24, true}},
    {8, {"Q8_0", 32, 34, true}},    {9, {"Q8_1", 32, 36, false}},    {10, {"Q2_K", 256, 84, true}},
    {11, {"Q3_K", 256, 110, true}}, {12, {"Q4_K", 256, 144, true}},  {13, {"Q5_K", 256, 176, true}},
    {14, {"Q6_K", 256, 210, true}}, {15, {"Q8_K", 256, 292, false}}, {16, {"IQ2_XXS", 256, 66, false}},
    {17, {"IQ2_XS", 256, 74, false}}, {18, {"IQ3_XXS", 256, 98, false}}, {19, {"IQ1_S", 256, 50, false}},
    {20, {"IQ4_NL", 32, 18, true}}, {21, {"IQ3_S", 256, 110, false}}, {22, {"IQ2_S", 256, 82, false}},
    {23, {"IQ4_XS", 256, 136, true}}, {24, {"I8", 1, 1, false}},     {25, {"I16", 1, 2, false}},
    {26, {"I32", 1, 4, false}},     {27, {"I64", 1, 8, false}},      {28, {"F64", 1, 8, false}},
    {29, {"IQ1_M", 256, 56, false}}, {30, {"BF16", 1, 2, true}},     {34, {"TQ1_0", 256, 54, false}},
    {35, {"TQ2_0", 256, 66, false}}, {39, {"MXFP4", 32, 17, false}}, {40, {"NVFP4", 64, 36, false}},
    {41, {"Q1_0", 128, 18, false}}, {42, {"Q2_0", 64, 18, false}},
};

const std::array<std::optional<DTypeInfo>, kTypeCount>& table() {
  static const auto t = [] {
    std::array<std::optional<DTypeInfo>, kTypeCount> a{};
    for (const Row& r : kRows) a[r.id] = r.info;
    return a;
  }();
  return t;
}

}  // namespace

std::optional<DTypeInfo> dtype_info(int32_t id) {
  if (id < 0 || id >= kTypeCount) return std::nullopt;
  return table()[id];
}

const DTypeInfo& info(DType t) { return *table()[static_cast<int32_t>(t)]; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const Row& r : kRows) {
    if (r.info.name.size() == name.size() &&
        std::equal(name.begin(), name.end(), r.info.name.begin(),
                   [](char a, char b) { return std::toupper(a) == std::toupper(b); })) {
      return static_cast<DType>(r.id);
    }
  }
  return std::nullopt;
}

float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      exp = 127 - 15 + 1;
      while ((mant & 0x400) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ff;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t fp32_to_fp16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00;           // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00;          // overflow (rounds to inf) or inf
  if (abs < 0x38800000u) {                               // subnormal or zero in half
    if (abs < 0x33000000u) return sign;                  // below half of the smallest subnormal
    const uint32_t mant = (abs & 0x7fffff) | 0x800000;
    const int shift = 126 - static_cast<int>(abs >> 23);  // 14..24
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) ++h;
    return sign | static_cast<uint16_t>(h);
  }
  uint32_t h = ((abs >> 13) - ((127 - 15) << 10));
  const uint32_t rem = abs & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;
  return sign | static_cast<uint16_t>(h);
}

}  // namespace strata
