// Activation quantizers: exact hand-checked blocks (scale choice, ties to even, sign of the Q8_K
// scale) and round-trip error bounds on random rows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "quant_test_util.h"

namespace strata::tensor {
namespace {

using namespace detail;

float f16(uint16_t h) { return fp16_to_fp32(h); }

TEST(QuantizeQ8_0, UnitScaleRoundsHalfToEven) {
  // amax = 127 gives id = 1, so q = round-half-even(x).
  std::vector<float> x(32, 0.0f);
  const float in[] = {127.0f, 63.5f, -63.5f, 0.5f, -0.5f, 1.5f, 2.5f, -2.5f, 3.49f, -126.5f, 0.51f};
  const int want[] = {127, 64, -64, 0, 0, 2, 2, -2, 3, -126, 1};
  std::copy(std::begin(in), std::end(in), x.begin());
  BlockQ8_0 b;
  quantize_activations(DType::Q8_0, x.data(), &b, 32);
  EXPECT_EQ(f16(b.d), 1.0f);
  for (size_t j = 0; j < std::size(want); ++j) EXPECT_EQ(b.qs[j], want[j]) << j;
  for (size_t j = std::size(want); j < 32; ++j) EXPECT_EQ(b.qs[j], 0);
}

TEST(QuantizeQ8_0, ScaleIs127OverAmaxWithTiesToEven) {
  // amax = 254: id = 0.5, d = 2.
  std::vector<float> x = {3, 5, -7, -254, 9, 1, -1, 253};
  x.resize(32, 0.0f);
  BlockQ8_0 b;
  quantize_activations(DType::Q8_0, x.data(), &b, 32);
  EXPECT_EQ(f16(b.d), 2.0f);
  const int want[] = {2, 2, -4, -127, 4, 0, 0, 126};
  for (int j = 0; j < 8; ++j) EXPECT_EQ(b.qs[j], want[j]) << j;
}

TEST(QuantizeQ8_0, ScaleIsStoredAsHalfButQuantsUseExactScale) {
  // amax = 1: d = 1/127 (not representable in f16); q = round(x * 127).
  std::vector<float> x(32, 0.0f);
  x[0] = 1.0f;
  x[1] = 0.5f;    // 63.5 -> 64
  x[2] = -0.25f;  // -31.75 -> -32
  BlockQ8_0 b;
  quantize_activations(DType::Q8_0, x.data(), &b, 32);
  EXPECT_EQ(b.d, fp32_to_fp16(1.0f / 127.0f));
  EXPECT_EQ(b.qs[0], 127);
  EXPECT_EQ(b.qs[1], 64);
  EXPECT_EQ(b.qs[2], -32);
}

TEST(QuantizeQ8_0, AllZeroBlockHasZeroScale) {
  std::vector<float> x(64, 0.0f);
  x[40] = -3.0f;
  BlockQ8_0 b[2];
  quantize_activations(DType::Q8_0, x.data(), b, 64);
  EXPECT_EQ(b[0].d, 0);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(b[0].qs[j], 0);
  EXPECT_EQ(b[1].qs[8], -127);
}

TEST(QuantizeQ8_1, StoresHalfOfScaleTimesQuantSum) {
  std::vector<float> x(32, 0.0f);
  x[0] = 254.0f;  // d = 2
  x[1] = 5.0f;    // 2.5 -> 2
  x[2] = -7.0f;   // -3.5 -> -4
  BlockQ8_1 b;
  quantize_activations(DType::Q8_1, x.data(), &b, 32);
  EXPECT_EQ(f16(b.d), 2.0f);
  EXPECT_EQ(b.qs[0], 127);
  EXPECT_EQ(b.qs[1], 2);
  EXPECT_EQ(b.qs[2], -4);
  EXPECT_EQ(f16(b.s), 2.0f * (127 + 2 - 4));
}

TEST(QuantizeQ8_K, ScaleSignFollowsFirstLargestElement) {
  std::vector<float> x(256, 0.0f);
  x[5] = 3.0f;
  x[9] = -3.0f;  // same magnitude, later: ignored for the sign
  x[10] = 1.5f;
  BlockQ8K b;
  quantize_activations(DType::Q8_K, x.data(), &b, 256);
  const float iscale = -127.0f / 3.0f;
  EXPECT_EQ(b.d, 1.0f / iscale);
  EXPECT_LT(b.d, 0.0f);
  EXPECT_EQ(b.qs[5], -127);
  EXPECT_EQ(b.qs[9], 127);
  EXPECT_EQ(b.qs[10], static_cast<int>(std::nearbyint(iscale * 1.5f)));
  EXPECT_EQ(b.bsums[0], -127 + 127 + b.qs[10]);
  EXPECT_EQ(b.bsums[1], 0);
}

TEST(QuantizeQ8_K, UnitScaleRoundsHalfToEvenAndSumsGroups) {
  // Largest element -127: iscale = 1, d = 1, q = round-half-even(x).
  std::vector<float> x(256, 0.0f);
  x[0] = -127.0f;
  x[1] = 0.5f;
  x[2] = 1.5f;
  x[3] = 2.5f;
  x[4] = -2.5f;
  x[16] = 100.4f;
  x[255] = -99.5f;
  BlockQ8K b;
  quantize_activations(DType::Q8_K, x.data(), &b, 256);
  EXPECT_EQ(b.d, 1.0f);
  EXPECT_EQ(b.qs[0], -127);
  EXPECT_EQ(b.qs[1], 0);
  EXPECT_EQ(b.qs[2], 2);
  EXPECT_EQ(b.qs[3], 2);
  EXPECT_EQ(b.qs[4], -2);
  EXPECT_EQ(b.qs[16], 100);
  EXPECT_EQ(b.qs[255], -100);
  EXPECT_EQ(b.bsums[0], -127 + 0 + 2 + 2 - 2);
  EXPECT_EQ(b.bsums[1], 100);
  EXPECT_EQ(b.bsums[15], -100);
}

TEST(QuantizeQ8_K, AllZeroBlockIsAllZero) {
  std::vector<float> x(256, 0.0f);
  BlockQ8K b;
  std::memset(&b, 0x5a, sizeof b);
  quantize_activations(DType::Q8_K, x.data(), &b, 256);
  EXPECT_EQ(b.d, 0.0f);
  for (int j = 0; j < 256; ++j) EXPECT_EQ(b.qs[j], 0);
  for (int g = 0; g < 16; ++g) EXPECT_EQ(b.bsums[g], 0);
}

// Rows that exercise every branch of the quantizers: random values, exact ties at the unit scale,
// repeated largest magnitudes of either sign, zero blocks, and non-finite values.
std::vector<float> twin_rows(std::mt19937& rng, int64_t n) {
  std::vector<float> x(n);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int64_t b = 0; b < n / 256; ++b) {
    float* r = x.data() + 256 * b;
    for (int j = 0; j < 256; ++j) r[j] = normal(rng);
    switch (b % 6) {
      case 1:  // ties at the unit scale
        for (int j = 0; j < 256; ++j) r[j] = static_cast<float>(static_cast<int>(rng() % 254) - 127) + 0.5f;
        r[3] = 127.0f;
        break;
      case 2: r[7] = 50.0f; r[40] = -50.0f; r[200] = 50.0f; break;
      case 3: std::fill_n(r, 256, 0.0f); r[100] = -0.0f; break;
      case 4: r[11] = NAN; r[77] = INFINITY; break;
      case 5: std::fill_n(r, 256, NAN); break;
      default: break;
    }
  }
  return x;
}

TEST(QuantizeActivations, Avx2TwinsGiveTheScalarBits) {
  if (!cpu_has_avx2()) GTEST_SKIP() << "needs AVX2";
  std::mt19937 rng(7);
  constexpr int64_t kN = 256 * 60;
  for (int round = 0; round < 4; ++round) {
    const std::vector<float> x = twin_rows(rng, kN);
    std::vector<BlockQ8_0> a0(kN / 32), b0(kN / 32);
    quantize_row_q8_0(x.data(), a0.data(), kN);
    quantize_row_q8_0_avx2(x.data(), b0.data(), kN);
    ASSERT_EQ(std::memcmp(a0.data(), b0.data(), a0.size() * sizeof(BlockQ8_0)), 0) << "Q8_0, round " << round;
    std::vector<BlockQ8K> ak(kN / 256), bk(kN / 256);
    quantize_row_q8_k(x.data(), ak.data(), kN);
    quantize_row_q8_k_avx2(x.data(), bk.data(), kN);
    for (size_t i = 0; i < ak.size(); ++i) {
      ASSERT_EQ(std::memcmp(&ak[i], &bk[i], sizeof(BlockQ8K)), 0) << "Q8_K block " << i << ", round " << round;
    }
  }
}

TEST(QuantizeActivations, F16AndBf16RoundToNearestEven) {
  const float x[4] = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f};
  uint16_t h[4], b[4];
  quantize_activations(DType::F16, x, h, 4);
  quantize_activations(DType::BF16, x, b, 4);
  EXPECT_EQ(h[0], 0x3c00);  // tie -> even (1.0)
  EXPECT_EQ(h[1], 0x3c02);  // tie -> even (1 + 2^-9)
  EXPECT_EQ(b[2], 0x3f80);
  EXPECT_EQ(b[3], 0x3f82);
  float y[4];
  quantize_activations(DType::F32, x, y, 4);
  EXPECT_EQ(std::memcmp(x, y, sizeof x), 0);
}

TEST(QuantizeActivations, RoundTripErrorWithinHalfStep) {
  std::mt19937 rng(7);
  const int64_t n = 4096;
  for (float scale : {0.05f, 1.0f, 300.0f}) {  // large enough that f16 scales stay normal
    const std::vector<float> x = testing::random_floats(n, rng, scale);
    {  // Q8_0: |x - fp16(d) q| <= amax (1/254 + 2^-11 + eps): rounding plus the f16 scale error.
      std::vector<BlockQ8_0> q(n / 32);
      quantize_activations(DType::Q8_0, x.data(), q.data(), n);
      const auto y = testing::dequant(DType::Q8_0, q.data(), n);
      for (int64_t b = 0; b < n / 32; ++b) {
        float amax = 0.0f;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[32 * b + j]));
        for (int j = 0; j < 32; ++j) {
          ASSERT_LE(std::fabs(x[32 * b + j] - y[32 * b + j]), amax * (1.0f / 254 + 0x1p-11f + 1e-6f));
        }
      }
    }
    {  // Q8_1: same quants as Q8_0, s consistent with d and the quants.
      std::vector<BlockQ8_0> q0(n / 32);
      std::vector<BlockQ8_1> q1(n / 32);
      quantize_activations(DType::Q8_0, x.data(), q0.data(), n);
      quantize_activations(DType::Q8_1, x.data(), q1.data(), n);
      for (int64_t b = 0; b < n / 32; ++b) {
        ASSERT_EQ(q0[b].d, q1[b].d);
        ASSERT_EQ(std::memcmp(q0[b].qs, q1[b].qs, 32), 0);
        int sum = 0;
        for (int j = 0; j < 32; ++j) sum += q1[b].qs[j];
        ASSERT_NEAR(f16(q1[b].s), f16(q1[b].d) * sum, std::fabs(f16(q1[b].d) * sum) * 0x1p-9f + 1e-6f);
      }
    }
    {  // Q8_K: |x - d q| <= |d|/2 (1 + eps); bsums are the group sums.
      std::vector<BlockQ8K> q(n / 256);
      quantize_activations(DType::Q8_K, x.data(), q.data(), n);
      const auto y = testing::dequant(DType::Q8_K, q.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_LE(std::fabs(x[i] - y[i]), std::fabs(q[i / 256].d) * 0.5f * (1 + 1e-5f)) << i;
      }
      for (const BlockQ8K& b : q) {
        for (int g = 0; g < 16; ++g) {
          int sum = 0;
          for (int l = 0; l < 16; ++l) sum += b.qs[16 * g + l];
          ASSERT_EQ(b.bsums[g], sum);
        }
        for (int j = 0; j < 256; ++j) ASSERT_GE(b.qs[j], -127);
      }
    }
  }
}

TEST(QuantizeActivations, NonFiniteInputsDoNotCrash) {
  std::vector<float> x(256, 1.0f);
  x[3] = INFINITY;
  x[7] = NAN;
  std::vector<uint8_t> buf(row_bytes(DType::Q8_K, 256));
  for (DType f : {DType::Q8_0, DType::Q8_1, DType::Q8_K}) quantize_activations(f, x.data(), buf.data(), 256);
  SUCCEED();
}

}  // namespace
}  // namespace strata::tensor
