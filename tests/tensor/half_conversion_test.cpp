// fp16/bf16 <-> f32 conversions (base/dtype.h), which every block scale goes through: exhaustive
// round trips over all 65536 bit patterns, agreement with the F16C hardware converter, and the
// rounding corner cases (ties to even, subnormals, overflow, NaN).
#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>

#include "base/dtype.h"

namespace strata {
namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

bool half_is_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }
bool bf16_is_nan(uint16_t h) { return (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0; }

TEST(HalfConversion, EveryHalfRoundTripsExactly) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<uint16_t>(i);
    const float f = fp16_to_fp32(h);
    if (half_is_nan(h)) {
      ASSERT_TRUE(std::isnan(f)) << i;
      ASSERT_TRUE(half_is_nan(fp32_to_fp16(f))) << i;
    } else {
      ASSERT_EQ(fp32_to_fp16(f), h) << i;
    }
  }
}

TEST(HalfConversion, HalfValuesFollowTheFormat) {
  EXPECT_EQ(fp16_to_fp32(0x3c00), 1.0f);
  EXPECT_EQ(fp16_to_fp32(0x0001), 0x1p-24f);    // smallest subnormal
  EXPECT_EQ(fp16_to_fp32(0x03ff), 0x3ffp-24f);  // largest subnormal
  EXPECT_EQ(fp16_to_fp32(0x0400), 0x1p-14f);    // smallest normal
  EXPECT_EQ(fp16_to_fp32(0x7bff), 65504.0f);
  EXPECT_EQ(fp16_to_fp32(0xfc00), -INFINITY);
  EXPECT_EQ(bits(fp16_to_fp32(0x8000)), 0x80000000u);
}

TEST(HalfConversion, FloatToHalfRoundsToNearestEven) {
  EXPECT_EQ(fp32_to_fp16(1.0f + 0x1p-11f), 0x3c00);      // tie -> even (down)
  EXPECT_EQ(fp32_to_fp16(1.0f + 3 * 0x1p-11f), 0x3c02);  // tie -> even (up)
  EXPECT_EQ(fp32_to_fp16(std::nextafter(1.0f + 0x1p-11f, 2.0f)), 0x3c01);
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(fp32_to_fp16(65519.996f), 0x7bff);
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);  // tie between 65504 and 2^16 -> even = inf
  EXPECT_EQ(fp32_to_fp16(1e10f), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(-INFINITY), 0xfc00);
  EXPECT_EQ(fp32_to_fp16(0x1p-24f), 0x0001);
  EXPECT_EQ(fp32_to_fp16(0x1p-25f), 0x0000);             // tie -> even (zero)
  EXPECT_EQ(fp32_to_fp16(-0x1p-25f), 0x8000);
  EXPECT_EQ(fp32_to_fp16(std::nextafter(0x1p-25f, 1.0f)), 0x0001);
  EXPECT_EQ(fp32_to_fp16(3 * 0x1p-25f), 0x0002);         // 1.5 ulp -> even
  EXPECT_EQ(fp32_to_fp16(0x1p-14f - 0x1p-25f), 0x0400);  // tie at the subnormal/normal boundary
  EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
  EXPECT_TRUE(half_is_nan(fp32_to_fp16(NAN)));
}

__attribute__((target("f16c"))) uint16_t hw_to_half(float f) {
  return static_cast<uint16_t>(_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(f), _MM_FROUND_TO_NEAREST_INT), 0));
}
__attribute__((target("f16c"))) float hw_to_float(uint16_t h) {
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}

TEST(HalfConversion, MatchesF16cHardware) {
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "no F16C";
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<uint16_t>(i);
    if (half_is_nan(h)) continue;
    ASSERT_EQ(bits(fp16_to_fp32(h)), bits(hw_to_float(h))) << i;
  }
  std::mt19937 rng(1);
  for (int i = 0; i < 1 << 20; ++i) {
    // Random bit patterns concentrated on the half range (exponents 100..150) plus anything.
    uint32_t u = rng();
    if (i & 1) u = (u & 0x807fffffu) | ((100 + (u >> 23) % 51) << 23);
    const float f = from_bits(u);
    if (std::isnan(f)) continue;
    ASSERT_EQ(fp32_to_fp16(f), hw_to_half(f)) << std::hex << u;
  }
}

TEST(Bf16Conversion, EveryBf16RoundTripsExactly) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<uint16_t>(i);
    const float f = bf16_to_fp32(h);
    ASSERT_EQ(bits(f), i << 16);
    if (bf16_is_nan(h)) {
      ASSERT_TRUE(bf16_is_nan(fp32_to_bf16(f))) << i;
    } else {
      ASSERT_EQ(fp32_to_bf16(f), h) << i;
    }
  }
}

TEST(Bf16Conversion, RoundsToNearestEvenAndKeepsNanQuiet) {
  EXPECT_EQ(fp32_to_bf16(1.0f + 0x1p-8f), 0x3f80);       // tie -> even (down)
  EXPECT_EQ(fp32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);   // tie -> even (up)
  EXPECT_EQ(fp32_to_bf16(std::nextafter(1.0f + 0x1p-8f, 2.0f)), 0x3f81);
  EXPECT_EQ(fp32_to_bf16(from_bits(0x7f7fffffu)), 0x7f80);  // FLT_MAX rounds to inf
  EXPECT_EQ(fp32_to_bf16(-0.0f), 0x8000);
  // A signalling NaN whose payload sits only in the low 16 bits must not become infinity.
  const uint16_t n = fp32_to_bf16(from_bits(0x7f800001u));
  EXPECT_TRUE(bf16_is_nan(n));
  EXPECT_NE(n & 0x40, 0);  // quiet bit set
}

}  // namespace
}  // namespace strata
