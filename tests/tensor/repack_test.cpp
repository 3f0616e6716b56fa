// Repacked weights (tensor/repack.h): the layout round-trips every byte, the kernels agree with an
// f64 dot of the dequantized weights and activations within the SIMD bound, and every output is
// bit-identical whether its token is alone, in a batch of any size, or split over threads.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "quant_test_util.h"
#include "tensor/matmul.h"
#include "tensor/repack.h"
#include "tensor/repack_blocks.h"
#include "tensor/thread_pool.h"

namespace strata::tensor {
namespace {

const DType kTypes[] = {DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};

struct Matrix {
  std::vector<uint8_t> bytes;
  MatrixView view;
};

Matrix random_matrix(DType t, int64_t rows, int64_t cols, std::mt19937& rng) {
  Matrix m;
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<uint8_t> row = testing::random_weights(t, cols, rng);
    m.bytes.insert(m.bytes.end(), row.begin(), row.end());
  }
  m.view = MatrixView{t, cols, rows, m.bytes.data(), row_bytes(t, cols)};
  return m;
}

Matrix repacked(const MatrixView& w) {
  Matrix m;
  m.bytes.resize(static_cast<size_t>(w.rows) * repacked_row_bytes(w.type, w.cols));
  m.view = repack_groups(w, m.bytes.data(), 0, w.rows / kRepackRows);
  return m;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

#define SKIP_WITHOUT_REPACKING(t)                                                  \
  if (!repacks(t, 16, 256)) GTEST_SKIP() << "this CPU has no repacked kernels (needs AVX2)"

TEST(Repack, EveryRowUnpacksToItsOriginalBytes) {
  std::mt19937 rng(3);
  for (DType t : kTypes) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    const Matrix w = random_matrix(t, 32, 512, rng);
    const Matrix p = repacked(w.view);
    ASSERT_TRUE(p.view.repacked);
    EXPECT_EQ(p.view.data + 16 * p.view.row_stride, p.view.slice_rows(16, 16).data);
    std::vector<uint8_t> row(w.view.row_stride);
    for (int64_t r = 0; r < w.view.rows; ++r) {
      unpack_row(p.view, r, row.data());
      ASSERT_EQ(0, std::memcmp(row.data(), w.view.row(r), row.size())) << "row " << r;
    }
    // Embedding lookups read repacked rows too.
    std::vector<float> a(512), b(512);
    dequantize_matrix_row(w.view, 21, a.data());
    dequantize_matrix_row(p.view, 21, b.data());
    EXPECT_EQ(a, b);
  }
}

TEST(Repack, GroupsSplitOverCallsWriteTheSameBytes) {
  // The loader's threads each repack a range of groups; odd block counts per row.
  std::mt19937 rng(4);
  for (DType t : kTypes) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    const Matrix w = random_matrix(t, 80, 768, rng);
    const Matrix whole = repacked(w.view);
    std::vector<uint8_t> split(whole.bytes.size(), 0xa5);
    repack_groups(w.view, split.data(), 3, 5);
    repack_groups(w.view, split.data(), 0, 3);
    EXPECT_EQ(split, whole.bytes);
  }
}

TEST(Repack, SizesAreStated) {
  EXPECT_EQ(repacked_row_bytes(DType::Q8_0, 4096), row_bytes(DType::Q8_0, 4096));
  EXPECT_EQ(repacked_row_bytes(DType::Q4_0, 4096), row_bytes(DType::Q4_0, 4096));
  EXPECT_EQ(repacked_row_bytes(DType::Q6_K, 4096), row_bytes(DType::Q6_K, 4096));
  EXPECT_EQ(repacked_row_bytes(DType::Q4_K, 4096), 4096 / 256 * 148u);
  EXPECT_EQ(repacked_row_bytes(DType::Q5_K, 4096), 4096 / 256 * 180u);
  EXPECT_EQ(repacked_row_bytes(DType::Q3_K, 4096), 0u);
  EXPECT_FALSE(repacks(DType::Q4_K, 24, 4096)) << "rows not a multiple of 16";
  EXPECT_FALSE(repacks(DType::Q4_K, 32, 100)) << "cols not a multiple of the block";
  EXPECT_FALSE(repacks(DType::F16, 32, 4096));
}

TEST(Repack, KernelMatchesTheDequantizedDot) {
  std::mt19937 rng(5);
  ThreadPool pool(1);
  for (DType t : kTypes) {
    SKIP_WITHOUT_REPACKING(t);
    SCOPED_TRACE(std::string(dtype_name(t)));
    const int64_t rows = 48, cols = 1024, tokens = 11;
    const Matrix w = random_matrix(t, rows, cols, rng);
    const Matrix p = repacked(w.view);
    const std::vector<float> x = testing::random_floats(tokens * cols, rng);
    QuantizedActivations q;
    q.quantize(t, x.data(), tokens, cols, pool);
    std::vector<float> y(static_cast<size_t>(rows * tokens));
    matmul(p.view, q, tokens, y.data(), rows, pool);
    for (int64_t k = 0; k < tokens; ++k) {
      const std::vector<float> ad = testing::dequant(vec_dot_type(t), q.row(k), cols);
      for (int64_t r = 0; r < rows; ++r) {
        const std::vector<uint8_t> wr(w.view.row(r), w.view.row(r) + w.view.row_stride);
        const std::vector<float> wd = testing::dequant(t, wr.data(), cols);
        double ref = 0.0;
        for (int64_t i = 0; i < cols; ++i) ref += static_cast<double>(wd[i]) * ad[i];
        const double tol = testing::simd_bound(cols, testing::magnitude(t, wr, ad));
        ASSERT_NEAR(y[k * rows + r], ref, tol) << "row " << r << " token " << k;
      }
    }
  }
}

// Every quant byte at its largest magnitude (0xFF: nibbles 15, 6-bit scales 63, Q6_K q 63 with
// scales -1; Q8_0 -128) against activations all at the quantizers' extreme (Q8_K -128, Q8_0 127):
// the AVX2 kernels sum int16 pairs over several k-steps, and a bound one step too loose overflows.
TEST(Repack, ExtremeQuantsDoNotOverflow) {
  ThreadPool pool(1);
  for (DType t : kTypes) {
    SKIP_WITHOUT_REPACKING(t);
    SCOPED_TRACE(std::string(dtype_name(t)));
    const int64_t rows = 16, cols = 512;
    std::vector<uint8_t> row(row_bytes(t, cols), t == DType::Q8_0 ? 0x80 : 0xFF);
    for (size_t off = 0; off < row.size(); off += testing::block_bytes(t)) {
      testing::put_f16(row.data() + off + testing::d_offset(t), 0.5f);
      if (testing::min_offset(t) >= 0) testing::put_f16(row.data() + off + testing::min_offset(t), 0.25f);
    }
    Matrix w;
    for (int64_t r = 0; r < rows; ++r) w.bytes.insert(w.bytes.end(), row.begin(), row.end());
    w.view = MatrixView{t, cols, rows, w.bytes.data(), row.size()};
    const Matrix p = repacked(w.view);
    for (const float sign : {1.0f, -1.0f}) {
      const std::vector<float> x(3 * cols, sign);
      QuantizedActivations q;
      q.quantize(t, x.data(), 3, cols, pool);
      std::vector<float> y(rows * 3);
      matmul(p.view, q, 3, y.data(), rows, pool);
      const std::vector<float> ad = testing::dequant(vec_dot_type(t), q.row(0), cols);
      const std::vector<float> wd = testing::dequant(t, row.data(), cols);
      double ref = 0.0;
      for (int64_t i = 0; i < cols; ++i) ref += static_cast<double>(wd[i]) * ad[i];
      const double tol = testing::simd_bound(cols, testing::magnitude(t, row, ad));
      for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], ref, tol) << "output " << i << " sign " << sign;
    }
  }
}

TEST(Repack, OutputsDoNotDependOnBatchOrThreads) {
  std::mt19937 rng(9);
  ThreadPool one(1), two(2);
  for (DType t : kTypes) {
    SKIP_WITHOUT_REPACKING(t);
    SCOPED_TRACE(std::string(dtype_name(t)));
    const int64_t rows = 64, cols = 512, tokens = 19;  // two full tiles of 8 and a remainder of 3
    const Matrix w = random_matrix(t, rows, cols, rng);
    const Matrix p = repacked(w.view);
    const std::vector<float> x = testing::random_floats(tokens * cols, rng);
    std::vector<float> batched(static_cast<size_t>(rows * tokens)), threaded(batched.size()), single(rows);
    matmul(p.view, x.data(), tokens, batched.data(), one);
    matmul(p.view, x.data(), tokens, threaded.data(), two);
    for (int64_t k = 0; k < tokens; ++k) {
      matmul(p.view, x.data() + k * cols, 1, single.data(), two);
      for (int64_t r = 0; r < rows; ++r) {
        ASSERT_TRUE(same_bits(single[r], batched[k * rows + r])) << "row " << r << " token " << k;
        ASSERT_TRUE(same_bits(threaded[k * rows + r], batched[k * rows + r])) << "row " << r << " token " << k;
      }
    }
  }
}

// Software prefetch in one-token products changes when bytes arrive, never what is computed.
TEST(Repack, DecodePrefetchOnOrOffGivesTheSameBits) {
  std::mt19937 rng(12);
  ThreadPool two(2);
  for (DType t : kTypes) {
    SKIP_WITHOUT_REPACKING(t);
    SCOPED_TRACE(std::string(dtype_name(t)));
    const int64_t rows = 256, cols = 1024;
    const Matrix p = repacked(random_matrix(t, rows, cols, rng).view);
    const std::vector<float> x = testing::random_floats(cols, rng);
    std::vector<float> on(rows), off(rows);
    set_decode_prefetch(true);
    matmul(p.view, x.data(), 1, on.data(), two);
    set_decode_prefetch(false);
    matmul(p.view, x.data(), 1, off.data(), two);
    set_decode_prefetch(true);
    for (int64_t r = 0; r < rows; ++r) ASSERT_TRUE(same_bits(on[r], off[r])) << "row " << r;
  }
}

// The calibration times both on a matrix too large for the cache and keeps the faster; a small one
// or STRATA_DECODE_PREFETCH decides without timing.
TEST(Repack, DecodePrefetchIsMeasuredAndTheFasterKept) {
  SKIP_WITHOUT_REPACKING(DType::Q8_0);
  ::unsetenv("STRATA_DECODE_PREFETCH");  // a run under the variable would skip the timing
  ThreadPool one(1);
  const int64_t cols = 4096, rows = 5120;  // Q8_0: 4352 bytes a row, 21 MiB
  std::vector<uint8_t> bytes(static_cast<size_t>(rows) * repacked_row_bytes(DType::Q8_0, cols), 7);
  const MatrixView big = repacked_view(MatrixView{DType::Q8_0, cols, rows, nullptr, row_bytes(DType::Q8_0, cols)},
                                       bytes.data());
  const PrefetchChoice c = calibrate_decode_prefetch(big, one);
  ASSERT_TRUE(c.measured);
  EXPECT_GT(c.gbps_with, 0.1);
  EXPECT_GT(c.gbps_without, 0.1);
  EXPECT_EQ(c.on, c.gbps_with > c.gbps_without);
  EXPECT_EQ(detail::decode_prefetch(), c.on);

  set_decode_prefetch(true);
  EXPECT_FALSE(calibrate_decode_prefetch(big.slice_rows(0, 256), one).measured);  // 1 MiB: in cache
  EXPECT_TRUE(detail::decode_prefetch());
  ::setenv("STRATA_DECODE_PREFETCH", "off", 1);
  const PrefetchChoice forced = calibrate_decode_prefetch(big, one);
  ::unsetenv("STRATA_DECODE_PREFETCH");
  EXPECT_FALSE(forced.measured);
  EXPECT_TRUE(forced.forced);
  EXPECT_FALSE(forced.on);
  EXPECT_FALSE(detail::decode_prefetch());
  set_decode_prefetch(true);
}

// The AVX2 kernels reach the AVX-512 ones' integers by other instructions and then run the same
// float operations, so a machine with both gives the same bits from either (runs where AVX-512
// VNNI is present; elsewhere there is nothing to compare with).
TEST(Repack, Avx2AndAvx512KernelsGiveTheSameBits) {
  std::mt19937 rng(13);
  ThreadPool pool(1);
  for (DType t : kTypes) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    const detail::Gemm16Fn avx2 = detail::avx2_gemm16(t), avx512 = detail::avx512_gemm16(t);
    if (!avx2 || !avx512) GTEST_SKIP() << "needs a CPU with both AVX2 and AVX-512 VNNI";
    const int64_t rows = 32, cols = 1024;
    const Matrix w = random_matrix(t, rows, cols, rng);
    const Matrix p = repacked(w.view);
    for (const int64_t tokens : {1, 2, 3, 5, 8, 11}) {
      const std::vector<float> x = testing::random_floats(tokens * cols, rng);
      QuantizedActivations q;
      q.quantize(t, x.data(), tokens, cols, pool);
      const detail::ActRows a{q.row(0), q.row_stride(), q.has_sums() ? q.sums(0) : nullptr,
                              q.sums_per_row()};
      std::vector<float> y2(static_cast<size_t>(rows * tokens)), y512(y2.size());
      avx2(cols, p.view.data, kRepackRows * p.view.row_stride, rows / kRepackRows, a, tokens, y2.data(), rows);
      avx512(cols, p.view.data, kRepackRows * p.view.row_stride, rows / kRepackRows, a, tokens, y512.data(), rows);
      for (size_t i = 0; i < y2.size(); ++i) ASSERT_TRUE(same_bits(y2[i], y512[i])) << "output " << i << " of " << tokens << " tokens";
    }
  }
}

TEST(Repack, BatchedJobsMixRepackedAndPlainMatrices) {
  // matmul_batch puts jobs side by side: a plain matrix of 24 rows before a repacked one must not
  // shift the repacked job off its 16-row groups.
  std::mt19937 rng(11);
  ThreadPool pool(2);
  const DType t = DType::Q4_K;
  SKIP_WITHOUT_REPACKING(t);
  const Matrix plain = random_matrix(t, 24, 256, rng);
  const Matrix w = random_matrix(t, 32, 256, rng);
  const Matrix p = repacked(w.view);
  const std::vector<float> x = testing::random_floats(3 * 256, rng);
  QuantizedActivations q;
  q.quantize(t, x.data(), 3, 256, pool);
  std::vector<float> y0(24 * 3), y1(32 * 3), alone(32 * 3);
  const MatmulJob jobs[] = {{plain.view, &q, 0, 3, y0.data(), 24}, {p.view, &q, 0, 3, y1.data(), 32}};
  matmul_batch(jobs, pool);
  matmul(p.view, q, 3, alone.data(), 32, pool);
  for (size_t i = 0; i < alone.size(); ++i) ASSERT_TRUE(same_bits(alone[i], y1[i])) << i;
}

}  // namespace
}  // namespace strata::tensor
