// Dequantization of hand-built blocks: each test packs chosen quants and scales into the byte
// layout (written here from the format description, independently of the library) and checks
// every element against the formula. Scales are powers of two or small integers so the expected
// floats are exact.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <vector>

#include "quant_test_util.h"

namespace strata::tensor {
namespace {

using namespace detail;
using testing::put_f16;

template <typename Block>
std::vector<float> deq(DType t, const Block& b) {
  return testing::dequant(t, &b, info(t).block_elems);
}

TEST(Dequantize, F32F16Bf16ConvertElementwise) {
  const float f[4] = {1.5f, -2.25f, 0.0f, 65504.0f};
  EXPECT_EQ(testing::dequant(DType::F32, f, 4), std::vector<float>(f, f + 4));
  const uint16_t h[4] = {0x3e00, 0xc080, 0x8000, 0x7bff};  // 1.5, -2.25, -0, 65504
  EXPECT_EQ(testing::dequant(DType::F16, h, 4), (std::vector<float>{1.5f, -2.25f, -0.0f, 65504.0f}));
  const uint16_t b[3] = {0x3fc0, 0xc010, 0x4780};  // 1.5, -2.25, 65536
  EXPECT_EQ(testing::dequant(DType::BF16, b, 3), (std::vector<float>{1.5f, -2.25f, 65536.0f}));
}

// 32-element formats: element e<16 is the low nibble of byte e, e>=16 the high nibble of byte e-16.
void pack_nibbles32(const int* q, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(q[j] | (q[j + 16] << 4));
}

TEST(Dequantize, Q4_0IsScaleTimesNibbleMinusEight) {
  BlockQ4_0 b{};
  int q[32];
  for (int e = 0; e < 32; ++e) q[e] = (e * 7) % 16;
  pack_nibbles32(q, b.qs);
  put_f16(reinterpret_cast<uint8_t*>(&b.d), -0.5f);
  const auto y = deq(DType::Q4_0, b);
  for (int e = 0; e < 32; ++e) EXPECT_EQ(y[e], -0.5f * (q[e] - 8)) << e;
}

TEST(Dequantize, Q4_1IsScaleTimesNibblePlusMin) {
  BlockQ4_1 b{};
  int q[32];
  for (int e = 0; e < 32; ++e) q[e] = (e * 5 + 3) % 16;
  pack_nibbles32(q, b.qs);
  put_f16(reinterpret_cast<uint8_t*>(&b.d), 0.25f);
  put_f16(reinterpret_cast<uint8_t*>(&b.m), -3.0f);
  const auto y = deq(DType::Q4_1, b);
  for (int e = 0; e < 32; ++e) EXPECT_EQ(y[e], 0.25f * q[e] - 3.0f) << e;
}

void pack_q5(const int* q, uint8_t* qs, uint8_t* qh) {
  int lo[32];
  uint32_t bits = 0;
  for (int e = 0; e < 32; ++e) {
    lo[e] = q[e] & 15;
    bits |= static_cast<uint32_t>(q[e] >> 4) << e;
  }
  pack_nibbles32(lo, qs);
  std::memcpy(qh, &bits, 4);
}

TEST(Dequantize, Q5_0UsesFifthBitFromQh) {
  BlockQ5_0 b{};
  int q[32];
  for (int e = 0; e < 32; ++e) q[e] = (e * 11 + 1) % 32;
  pack_q5(q, b.qs, b.qh);
  put_f16(reinterpret_cast<uint8_t*>(&b.d), 2.0f);
  const auto y = deq(DType::Q5_0, b);
  for (int e = 0; e < 32; ++e) EXPECT_EQ(y[e], 2.0f * (q[e] - 16)) << e;
}

TEST(Dequantize, Q5_1UsesFifthBitAndMin) {
  BlockQ5_1 b{};
  int q[32];
  for (int e = 0; e < 32; ++e) q[e] = 31 - e;
  pack_q5(q, b.qs, b.qh);
  put_f16(reinterpret_cast<uint8_t*>(&b.d), 0.125f);
  put_f16(reinterpret_cast<uint8_t*>(&b.m), 1.0f);
  const auto y = deq(DType::Q5_1, b);
  for (int e = 0; e < 32; ++e) EXPECT_EQ(y[e], 0.125f * q[e] + 1.0f) << e;
}

TEST(Dequantize, Q8_0IsScaleTimesByte) {
  BlockQ8_0 b{};
  for (int e = 0; e < 32; ++e) b.qs[e] = static_cast<int8_t>(e % 2 ? -128 + e : 127 - e);
  put_f16(reinterpret_cast<uint8_t*>(&b.d), 0.5f);
  const auto y = deq(DType::Q8_0, b);
  for (int e = 0; e < 32; ++e) EXPECT_EQ(y[e], 0.5f * b.qs[e]) << e;
}

TEST(Dequantize, Iq4NlLooksUpNonLinearTable) {
  static constexpr int kK[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  BlockIQ4NL b{};
  int q[32];
  for (int e = 0; e < 32; ++e) q[e] = (e * 3) % 16;
  pack_nibbles32(q, b.qs);
  put_f16(reinterpret_cast<uint8_t*>(&b.d), 0.5f);
  const auto y = deq(DType::IQ4_NL, b);
  for (int e = 0; e < 32; ++e) EXPECT_EQ(y[e], 0.5f * kK[q[e]]) << e;
}

// ---- super-blocks ----

// 2-bit planes used by Q2_K/Q3_K: element e = 128h + 32p + l lives in bits 2p of qs[32h + l].
void pack_2bit(const int* low2, uint8_t* qs) {
  std::memset(qs, 0, 64);
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, p = (e % 128) / 32, l = e % 32;
    qs[32 * h + l] |= static_cast<uint8_t>(low2[e] << (2 * p));
  }
}

TEST(Dequantize, Q2_KScalesAndMinsPerSixteen) {
  BlockQ2K b{};
  int q[256];
  for (int e = 0; e < 256; ++e) q[e] = (e * 13 + e / 7) % 4;
  pack_2bit(q, b.qs);
  int sc[16], mn[16];
  for (int g = 0; g < 16; ++g) {
    sc[g] = (g * 5 + 1) % 16;
    mn[g] = (g * 3 + 2) % 16;
    b.scales[g] = static_cast<uint8_t>(sc[g] | (mn[g] << 4));
  }
  put_f16(reinterpret_cast<uint8_t*>(&b.d), 0.5f);
  put_f16(reinterpret_cast<uint8_t*>(&b.dmin), 0.25f);
  const auto y = deq(DType::Q2_K, b);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], 0.5f * sc[e / 16] * q[e] - 0.25f * mn[e / 16]) << e;
}

// Q3_K 6-bit scales (stored value s+32): low 4 bits in byte j (j<8) or high nibble of byte j-8,
// top 2 bits in byte 8 + j%4 at bit 2*(j/4).
void pack_q3k_scales(const int* s, uint8_t* scales) {
  std::memset(scales, 0, 12);
  for (int j = 0; j < 16; ++j) {
    const int v = s[j] + 32;
    if (j < 8) {
      scales[j] |= static_cast<uint8_t>(v & 15);
    } else {
      scales[j - 8] |= static_cast<uint8_t>((v & 15) << 4);
    }
    scales[8 + j % 4] |= static_cast<uint8_t>((v >> 4) << (2 * (j / 4)));
  }
}

TEST(Dequantize, Q3_KSignedSixBitScalesAndHighMask) {
  BlockQ3K b{};
  int q[256], low2[256];
  std::memset(b.hmask, 0, 32);
  for (int e = 0; e < 256; ++e) {
    q[e] = (e * 7 + e / 16) % 8 - 4;  // [-4, 3]
    // q >= 0: high bit set and low2 = q; q < 0: high bit clear and low2 = q + 4.
    low2[e] = q[e] >= 0 ? q[e] : q[e] + 4;
    if (q[e] >= 0) b.hmask[e % 32] |= static_cast<uint8_t>(1 << (e / 32));
  }
  pack_2bit(low2, b.qs);
  int s[16];
  for (int j = 0; j < 16; ++j) s[j] = (j * 9) % 64 - 32;  // [-32, 31]
  s[3] = -32;
  s[12] = 31;
  pack_q3k_scales(s, b.scales);
  put_f16(reinterpret_cast<uint8_t*>(&b.d), 0.5f);
  const auto y = deq(DType::Q3_K, b);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], 0.5f * s[e / 16] * q[e]) << e;
}

// Q4_K/Q5_K 6-bit scale/min packing for sub-blocks j = 0..7.
void pack_k4_scales(const int* sc, const int* m, uint8_t* scales) {
  for (int j = 0; j < 4; ++j) {
    scales[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    scales[j + 4] = static_cast<uint8_t>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
  }
}

// Nibbles: 64-element chunk c uses qs[32c..32c+31], low nibbles first then high nibbles.
void pack_k4_nibbles(const int* q, uint8_t* qs) {
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) qs[32 * c + l] = static_cast<uint8_t>((q[64 * c + l] & 15) | ((q[64 * c + 32 + l] & 15) << 4));
  }
}

TEST(Dequantize, Q4_KSixBitScalesAndMins) {
  BlockQ4K b{};
  int q[256];
  for (int e = 0; e < 256; ++e) q[e] = (e * 5 + e / 32) % 16;
  pack_k4_nibbles(q, b.qs);
  const int sc[8] = {1, 63, 17, 32, 48, 5, 60, 33}, m[8] = {0, 7, 63, 40, 16, 31, 2, 59};
  pack_k4_scales(sc, m, b.scales);
  put_f16(reinterpret_cast<uint8_t*>(&b.d), 0.5f);
  put_f16(reinterpret_cast<uint8_t*>(&b.dmin), 0.125f);
  const auto y = deq(DType::Q4_K, b);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], 0.5f * sc[e / 32] * q[e] - 0.125f * m[e / 32]) << e;
}

TEST(Dequantize, Q5_KAddsHighBitPlane) {
  BlockQ5K b{};
  int q[256];
  std::memset(b.qh, 0, 32);
  for (int e = 0; e < 256; ++e) {
    q[e] = (e * 11 + e / 64) % 32;
    if (q[e] >= 16) b.qh[e % 32] |= static_cast<uint8_t>(1 << (e / 32));
  }
  pack_k4_nibbles(q, b.qs);
  const int sc[8] = {63, 1, 2, 62, 40, 41, 12, 0}, m[8] = {63, 62, 0, 1, 35, 20, 48, 9};
  pack_k4_scales(sc, m, b.scales);
  put_f16(reinterpret_cast<uint8_t*>(&b.d), 0.25f);
  put_f16(reinterpret_cast<uint8_t*>(&b.dmin), 2.0f);
  const auto y = deq(DType::Q5_K, b);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], 0.25f * sc[e / 32] * q[e] - 2.0f * m[e / 32]) << e;
}

TEST(Dequantize, Q6_KSixBitQuantsWithInt8Scales) {
  BlockQ6K b{};
  std::memset(&b, 0, sizeof b);
  int q[256];
  for (int e = 0; e < 256; ++e) {
    q[e] = (e * 29 + e / 16) % 64 - 32;  // [-32, 31]
    const int v = q[e] + 32, h = e / 128, r = e % 128, g = r / 32, l = r % 32;
    uint8_t& lb = b.ql[64 * h + 32 * (g & 1) + l];
    lb |= static_cast<uint8_t>(g < 2 ? (v & 15) : ((v & 15) << 4));
    b.qh[32 * h + l] |= static_cast<uint8_t>((v >> 4) << (2 * g));
  }
  for (int g = 0; g < 16; ++g) b.scales[g] = static_cast<int8_t>(g * 17 - 128);  // -128 .. 127
  put_f16(reinterpret_cast<uint8_t*>(&b.d), 0.5f);
  const auto y = deq(DType::Q6_K, b);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], 0.5f * b.scales[e / 16] * q[e]) << e;
}

TEST(Dequantize, Q8_KHasFloatScale) {
  BlockQ8K b{};
  b.d = -0.375f;
  for (int e = 0; e < 256; ++e) b.qs[e] = static_cast<int8_t>(e - 128);
  const auto y = deq(DType::Q8_K, b);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], -0.375f * (e - 128)) << e;
}

TEST(Dequantize, Iq4XsSubBlockScalesAndTable) {
  static constexpr int kK[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  BlockIQ4XS b{};
  int q[256];
  for (int e = 0; e < 256; ++e) q[e] = (e * 7 + e / 32) % 16;
  for (int ib = 0; ib < 8; ++ib) pack_nibbles32(q + 32 * ib, b.qs + 16 * ib);
  const int ls[8] = {0, 63, 32, 31, 1, 62, 17, 45};  // multiplier ls - 32
  b.scales_h = 0;
  std::memset(b.scales_l, 0, 4);
  for (int ib = 0; ib < 8; ++ib) {
    b.scales_l[ib / 2] |= static_cast<uint8_t>((ls[ib] & 15) << (4 * (ib % 2)));
    b.scales_h |= static_cast<uint16_t>((ls[ib] >> 4) << (2 * ib));
  }
  put_f16(reinterpret_cast<uint8_t*>(&b.d), 0.5f);
  const auto y = deq(DType::IQ4_XS, b);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], 0.5f * (ls[e / 32] - 32) * kK[q[e]]) << e;
}

TEST(Dequantize, MultipleBlocksAreIndependent) {
  // Two Q4_0 blocks with different scales: the second block's output starts at element 32.
  BlockQ4_0 b[2]{};
  for (int j = 0; j < 16; ++j) b[0].qs[j] = b[1].qs[j] = 0x9a;  // low 10, high 9
  put_f16(reinterpret_cast<uint8_t*>(&b[0].d), 1.0f);
  put_f16(reinterpret_cast<uint8_t*>(&b[1].d), -2.0f);
  const auto y = testing::dequant(DType::Q4_0, b, 64);
  EXPECT_EQ(y[0], 2.0f);
  EXPECT_EQ(y[16], 1.0f);
  EXPECT_EQ(y[32], -4.0f);
  EXPECT_EQ(y[63], -2.0f);
}

}  // namespace
}  // namespace strata::tensor
