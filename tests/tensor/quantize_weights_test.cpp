// Weight quantizers: hand-checked Q8_0/Q4_0 blocks and round-trip error bounds through dequantize_row.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tensor/blocks.h"
#include "tensor/quantize_weights.h"
#include "tensor/quants.h"

namespace strata::tensor {
namespace {

using detail::BlockQ4_0;
using detail::BlockQ8_0;

TEST(QuantizeWeights, Q8_0HandChecked) {
  float x[32];
  for (int i = 0; i < 32; ++i) x[i] = static_cast<float>(i - 16);
  BlockQ8_0 b;
  quantize_row(DType::Q8_0, x, &b, 32);
  EXPECT_EQ(b.d, fp32_to_fp16(16.f / 127.f));
  EXPECT_EQ(b.qs[0], -127);     // -16
  EXPECT_EQ(b.qs[16], 0);       // 0
  EXPECT_EQ(b.qs[24], 64);      // 8 * 127/16 = 63.5, rounded away from zero
  EXPECT_EQ(b.qs[31], 119);     // 15 * 127/16 = 119.06
  float zero[32] = {};
  quantize_row(DType::Q8_0, zero, &b, 32);
  EXPECT_EQ(b.d, 0);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(b.qs[i], 0);
}

TEST(QuantizeWeights, Q4_0HandChecked) {
  float x[32];
  for (int i = 0; i < 32; ++i) x[i] = static_cast<float>(i - 8);  // -8 .. 23: signed max 23
  BlockQ4_0 b;
  quantize_row(DType::Q4_0, x, &b, 32);
  EXPECT_EQ(b.d, 0xC1C0);  // f16(-2.875) = 23 / -8
  // element 0 (-8): -8/-2.875 + 8.5 = 11.28 -> 11; element 16 (8): 5.72 -> 5
  EXPECT_EQ(b.qs[0], 11 | (5 << 4));
  // element 8 (0) -> 8; element 31 (23) -> 0
  EXPECT_EQ(b.qs[8] & 15, 8);
  EXPECT_EQ(b.qs[15] >> 4, 0);
  float y[32];
  dequantize_row(DType::Q4_0, &b, y, 32);
  EXPECT_FLOAT_EQ(y[31], 23.f);
  EXPECT_FLOAT_EQ(y[8], 0.f);
}

struct RoundTrip {
  DType type;
  double max_rel_rmse;  // RMS error / RMS of x
};

class QuantizeRoundTrip : public ::testing::TestWithParam<RoundTrip> {};

TEST_P(QuantizeRoundTrip, ErrorWithinBound) {
  const RoundTrip p = GetParam();
  const int64_t n = 256 * 64;
  std::mt19937 rng(1234);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> x(n), y(n);
  for (auto& v : x) v = nd(rng) * 0.05f;
  // a few outliers and an all-zero stretch exercise the edge cases
  x[7] = 0.9f;
  x[300] = -1.2f;
  for (int i = 512; i < 768; ++i) x[i] = 0;
  std::vector<uint8_t> q(row_bytes(p.type, n));
  quantize_row(p.type, x.data(), q.data(), n);
  dequantize_row(p.type, q.data(), y.data(), n);
  double se = 0, sx = 0, max_abs = 0;
  for (int64_t i = 0; i < n; ++i) {
    se += (x[i] - y[i]) * (x[i] - y[i]);
    sx += x[i] * x[i];
    max_abs = std::max(max_abs, static_cast<double>(std::fabs(x[i] - y[i])));
  }
  for (int i = 512; i < 768; ++i) EXPECT_EQ(y[i], 0.f) << dtype_name(p.type);
  const double rel = std::sqrt(se / sx);
  std::printf("[ round trip ] %-5s rel rmse %.5f  max abs %.5f\n", std::string(dtype_name(p.type)).c_str(), rel,
              max_abs);
  EXPECT_LT(rel, p.max_rel_rmse) << dtype_name(p.type);
}

INSTANTIATE_TEST_SUITE_P(Types, QuantizeRoundTrip,
                         ::testing::Values(RoundTrip{DType::Q8_0, 0.006}, RoundTrip{DType::Q6_K, 0.025},
                                           RoundTrip{DType::Q5_K, 0.045}, RoundTrip{DType::Q5_0, 0.05},
                                           RoundTrip{DType::Q5_1, 0.04}, RoundTrip{DType::Q4_K, 0.09},
                                           RoundTrip{DType::Q4_0, 0.11}),
                         [](const auto& info) { return std::string(dtype_name(info.param.type)); });

}  // namespace
}  // namespace strata::tensor
