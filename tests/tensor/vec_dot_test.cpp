// Dot products: the scalar kernels against sum(dequant(w) * dequant(a)) (which ties the integer
// block formulas to the dequantizers), every SIMD kernel against scalar on random and extreme
// blocks, determinism, and run-time dispatch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "quant_test_util.h"

namespace strata::tensor {
namespace {

using namespace detail;
using testing::dot_types;

// Row lengths to try for type t: 1..8 super-blocks, plus odd block counts / element counts for
// the smaller block sizes (tails of the SIMD loops).
std::vector<int64_t> lengths(DType t) {
  std::vector<int64_t> n;
  for (int k = 1; k <= 8; ++k) n.push_back(256 * k);
  if (testing::block_elems(t) == 32) {
    for (int k : {1, 2, 3, 5, 7, 9, 13}) n.push_back(32 * k);
  }
  if (testing::block_elems(t) == 1) {
    for (int k : {1, 2, 7, 8, 15, 16, 17, 31, 33, 63, 65, 100, 255, 300}) n.push_back(k);
  }
  return n;
}

std::string label(DType t, int64_t n) { return std::string(dtype_name(t)) + " n=" + std::to_string(n); }

TEST(VecDotScalar, MatchesDotOfDequantizedRows) {
  std::mt19937 rng(42);
  for (DType t : dot_types()) {
    for (int64_t n : lengths(t)) {
      for (int rep = 0; rep < 3; ++rep) {
        const auto w = testing::random_weights(t, n, rng);
        const auto x = testing::random_floats(n, rng);
        const auto a = testing::activations_for(t, x);
        const auto wd = testing::dequant(t, w.data(), n);
        const auto ad = testing::dequant(vec_dot_type(t), a.data(), n);
        double ref = 0.0;
        for (int64_t i = 0; i < n; ++i) ref += static_cast<double>(wd[i]) * ad[i];
        const double m = testing::magnitude(t, w, ad);
        const int64_t blocks = n / testing::block_elems(t);
        double tol = std::ldexp(1.0, -22) * (static_cast<double>(blocks) + 16) * m;
        // Q8_1 carries s = f16(d * sum q): the m_w * s term is off by up to 2^-11 of the min part.
        if (vec_dot_type(t) == DType::Q8_1) tol += std::ldexp(1.0, -10) * m;
        const float got = scalar_vec_dot(t)(n, w.data(), a.data());
        ASSERT_NEAR(got, ref, tol) << label(t, n);
      }
    }
  }
}

TEST(VecDotScalar, HandCheckedQ4_KSuperBlock) {
  // One Q4_K super-block: d = 1, dmin = 0.5, sub-block j has scale j+1 and min j; every nibble
  // is 3. Activations: Q8_K with d = 0.25, all quants 2 (bsums 32).
  BlockQ4K w{};
  testing::put_f16(reinterpret_cast<uint8_t*>(&w.d), 1.0f);
  testing::put_f16(reinterpret_cast<uint8_t*>(&w.dmin), 0.5f);
  const int sc[8] = {1, 2, 3, 4, 5, 6, 7, 8}, mn[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  for (int j = 0; j < 4; ++j) {
    w.scales[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    w.scales[j + 4] = static_cast<uint8_t>(mn[j] | ((mn[j + 4] >> 4) << 6));
    w.scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
  }
  std::memset(w.qs, 0x33, sizeof w.qs);
  BlockQ8K a{};
  a.d = 0.25f;
  std::memset(a.qs, 2, sizeof a.qs);
  for (auto& b : a.bsums) b = 32;
  // sum_j 32 * (1*sc_j*3 - 0.5*m_j) * (0.25*2) = 16 * (3*36 - 0.5*28) = 16 * 94.
  const float want = 16.0f * 94.0f;
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    if (VecDotFn f = vec_dot_fn(DType::Q4_K, isa)) {
      EXPECT_EQ(f(256, &w, &a), want) << isa_name(isa);
    }
  }
}

TEST(VecDotSimd, MatchesScalarOnRandomBlocks) {
  std::mt19937 rng(1234);
  int compared = 0;
  for (DType t : dot_types()) {
    const auto kernels = testing::simd_kernels(t);
    for (int64_t n : lengths(t)) {
      for (int rep = 0; rep < 3; ++rep) {
        const auto w = testing::random_weights(t, n, rng);
        const auto x = testing::random_floats(n, rng);
        const auto a = testing::activations_for(t, x);
        const double m = testing::magnitude(t, w, testing::dequant(vec_dot_type(t), a.data(), n));
        const float want = scalar_vec_dot(t)(n, w.data(), a.data());
        for (const auto& k : kernels) {
          ASSERT_NEAR(k.fn(n, w.data(), a.data()), want, testing::simd_bound(n, m)) << label(t, n) << " " << k.name;
          ++compared;
        }
      }
    }
  }
  EXPECT_GT(compared, 0);
}

// Extreme bytes (all 0x00, all 0xff, 0x80 / 0x7f patterns) with activations at +-127 everywhere:
// the largest intermediate integer sums, where a saturating 16-bit step would show.
TEST(VecDotSimd, MatchesScalarOnExtremeBlocks) {
  const int64_t n = 512;
  for (DType t : dot_types()) {
    if (testing::block_elems(t) == 1) continue;
    const auto kernels = testing::simd_kernels(t);
    for (uint8_t fill : {uint8_t{0x00}, uint8_t{0xff}, uint8_t{0x80}, uint8_t{0x7f}, uint8_t{0x88}}) {
      std::vector<uint8_t> w(row_bytes(t, n), fill);
      for (size_t off = 0; off < w.size(); off += testing::block_bytes(t)) {
        testing::put_f16(w.data() + off + testing::d_offset(t), 0.5f);
        if (testing::min_offset(t) >= 0) testing::put_f16(w.data() + off + testing::min_offset(t), 0.25f);
      }
      for (int sign : {1, -1, 0}) {
        // Activations at full scale: quantizing +-127 (alternating when sign == 0).
        std::vector<float> x(n);
        for (int64_t i = 0; i < n; ++i) x[i] = 127.0f * (sign != 0 ? sign : (i % 2 ? -1 : 1));
        const auto a = testing::activations_for(t, x);
        const double m = testing::magnitude(t, w, testing::dequant(vec_dot_type(t), a.data(), n));
        const float want = scalar_vec_dot(t)(n, w.data(), a.data());
        for (const auto& k : kernels) {
          ASSERT_NEAR(k.fn(n, w.data(), a.data()), want, testing::simd_bound(n, m))
              << label(t, n) << " " << k.name << " fill=" << int{fill} << " sign=" << sign;
        }
      }
    }
  }
}

TEST(VecDot, ResultDependsOnlyOnInputs) {
  // Same bytes at different addresses (and repeated calls) give bit-identical results per kernel.
  std::mt19937 rng(5);
  for (DType t : dot_types()) {
    const int64_t n = 1024;
    const auto w = testing::random_weights(t, n, rng);
    const auto a = testing::activations_for(t, testing::random_floats(n, rng));
    std::vector<uint8_t> w2(w.size() + 64);
    std::vector<uint32_t> a2(a.size() + 16);
    std::memcpy(w2.data() + 4, w.data(), w.size());  // shifted, keeping the blocks' 2/4-byte alignment
    std::memcpy(a2.data() + 3, a.data(), a.size() * 4);
    std::vector<testing::NamedKernel> all = testing::simd_kernels(t);
    all.push_back({"scalar", scalar_vec_dot(t)});
    for (const auto& k : all) {
      const float r1 = k.fn(n, w.data(), a.data());
      const float r2 = k.fn(n, w2.data() + 4, a2.data() + 3);
      const float r3 = k.fn(n, w.data(), a.data());
      EXPECT_EQ(std::memcmp(&r1, &r2, 4), 0) << label(t, n) << " " << k.name;
      EXPECT_EQ(std::memcmp(&r1, &r3, 4), 0) << label(t, n) << " " << k.name;
    }
  }
}

TEST(VecDotDispatch, EverySupportedTypeHasAKernel) {
  for (DType t : dot_types()) {
    EXPECT_NE(vec_dot_fn(t), nullptr) << dtype_name(t);
    EXPECT_NE(vec_dot_fn(t, Isa::Scalar), nullptr) << dtype_name(t);
  }
  for (DType t : {DType::IQ2_XXS, DType::Q8_K, DType::Q8_1, DType::I32, DType::MXFP4}) {
    EXPECT_EQ(vec_dot_fn(t), nullptr) << dtype_name(t);
  }
}

TEST(VecDotDispatch, IsaAvailabilityMatchesCpu) {
  EXPECT_EQ(vec_dot_fn(DType::Q4_K, Isa::Avx2) != nullptr, cpu_has_avx2());
  EXPECT_EQ(vec_dot_fn(DType::Q4_K, Isa::Avx512) != nullptr, cpu_has_avx512());
  const Isa best = best_isa();
  EXPECT_NE(vec_dot_fn(DType::Q6_K, best), nullptr);
  EXPECT_EQ(vec_dot_fn(DType::Q6_K), vec_dot_fn(DType::Q6_K, best));
  EXPECT_EQ(isa_name(Isa::Avx512), "avx512");
}

TEST(VecDotDispatch, VecDotTypesFollowLlamaCpp) {
  EXPECT_EQ(vec_dot_type(DType::F32), DType::F32);
  EXPECT_EQ(vec_dot_type(DType::F16), DType::F16);
  EXPECT_EQ(vec_dot_type(DType::BF16), DType::BF16);
  for (DType t : {DType::Q4_0, DType::Q5_0, DType::Q8_0, DType::IQ4_NL}) EXPECT_EQ(vec_dot_type(t), DType::Q8_0);
  for (DType t : {DType::Q4_1, DType::Q5_1}) EXPECT_EQ(vec_dot_type(t), DType::Q8_1);
  for (DType t : {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS}) {
    EXPECT_EQ(vec_dot_type(t), DType::Q8_K);
  }
}

}  // namespace
}  // namespace strata::tensor
