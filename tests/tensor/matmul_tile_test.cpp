// Tiled products (several weight rows x several tokens): every output bit-identical to the
// single-row dot of the same ISA, and matmul over a batch of tokens bit-identical to one matmul
// per token, for any thread count.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "quant_test_util.h"
#include "tensor/matmul.h"
#include "tensor/thread_pool.h"

namespace strata::tensor {
namespace {

using namespace detail;
using testing::dot_types;

struct TileKernel {
  std::string name;
  VecDotFn dot;
  VecDotTileFn tile;
};

// Every (dot, tile) pair this CPU can run for weight type t.
std::vector<TileKernel> tile_kernels(DType t) {
  std::vector<TileKernel> out;
  if (cpu_has_avx2() && avx2_vec_dot_tile(t)) out.push_back({"avx2", avx2_vec_dot(t), avx2_vec_dot_tile(t)});
  if (cpu_has_avx512()) {
    if (avx512_vec_dot_tile(t, false)) out.push_back({"avx512", avx512_vec_dot(t, false), avx512_vec_dot_tile(t, false)});
    if (cpu_has_avx512_vnni() && avx512_vec_dot_tile(t, true)) {
      out.push_back({"avx512-vnni", avx512_vec_dot(t, true), avx512_vec_dot_tile(t, true)});
    }
  }
  return out;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Rows of n weights and tokens of n activations, stored back to back with a given stride.
struct Operands {
  std::vector<uint8_t> w;
  size_t w_stride;
  std::vector<uint32_t> a;  // 4-byte aligned (Q8_K holds an f32)
  size_t a_stride;
};

Operands make_operands(DType t, int64_t n, int rows, int tokens, std::mt19937& rng) {
  Operands o;
  o.w_stride = row_bytes(t, n) + 2 * testing::block_bytes(t);  // a gap between rows
  o.w.resize(o.w_stride * rows);
  for (int r = 0; r < rows; ++r) {
    const auto row = testing::random_weights(t, n, rng);
    std::memcpy(o.w.data() + r * o.w_stride, row.data(), row.size());
  }
  o.a_stride = (row_bytes(vec_dot_type(t), n) + 7) / 4 * 4;
  o.a.resize(o.a_stride / 4 * tokens);
  for (int k = 0; k < tokens; ++k) {
    const auto row = testing::activations_for(t, testing::random_floats(n, rng));
    std::memcpy(reinterpret_cast<uint8_t*>(o.a.data()) + k * o.a_stride, row.data(), row.size() * 4);
  }
  return o;
}

std::vector<int64_t> lengths(DType t) {
  if (testing::block_elems(t) == 32) return {256, 1024, 32 * 9, 32 * 13};
  return {256, 768, 2048};
}

TEST(MatmulTile, EveryOutputMatchesTheSingleRowDot) {
  std::mt19937 rng(77);
  int compared = 0;
  for (DType t : dot_types()) {
    for (const auto& k : tile_kernels(t)) {
      for (int64_t n : lengths(t)) {
        const int kRows = 5, kTokens = 11;  // remainders of every tile shape up to 8
        const Operands o = make_operands(t, n, kRows, kTokens, rng);
        const auto* a = reinterpret_cast<const uint8_t*>(o.a.data());
        for (int rows = 1; rows <= kRows; ++rows) {
          for (int tokens = 1; tokens <= kTokens; ++tokens) {
            const int64_t ys = rows + 3;
            std::vector<float> y(static_cast<size_t>(ys * tokens), -1.0f);
            k.tile(n, o.w.data(), o.w_stride, rows, a, o.a_stride, tokens, y.data(), ys);
            for (int tk = 0; tk < tokens; ++tk) {
              for (int r = 0; r < rows; ++r) {
                const float want = k.dot(n, o.w.data() + r * o.w_stride, a + tk * o.a_stride);
                ASSERT_TRUE(same_bits(y[tk * ys + r], want))
                    << dtype_name(t) << " " << k.name << " n=" << n << " tile " << rows << "x" << tokens << " r=" << r
                    << " t=" << tk << ": " << y[tk * ys + r] << " vs " << want;
                ++compared;
              }
              for (int64_t r = rows; r < ys; ++r) ASSERT_EQ(y[tk * ys + r], -1.0f) << "wrote past the rows";
            }
          }
        }
      }
    }
  }
  if (cpu_has_avx512()) {
    EXPECT_GT(compared, 0);
  }
}

TEST(MatmulTile, CoversTheBenchmarkTypes) {
  if (!cpu_has_avx512()) GTEST_SKIP() << "no AVX-512";
  for (DType t : {DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_0}) {
    EXPECT_NE(avx512_vec_dot_tile(t, false), nullptr) << dtype_name(t);
    EXPECT_NE(avx512_vec_dot_tile(t, true), nullptr) << dtype_name(t);
  }
  if (best_isa() == Isa::Avx512) {
    EXPECT_NE(vec_dot_tile_fn(DType::Q4_K), nullptr);
  }
}

TEST(MatmulTile, TileFollowsTheDotKernelsIsa) {
  for (DType t : dot_types()) {
    for (int i = static_cast<int>(best_isa()); i >= 0; --i) {
      const auto isa = static_cast<Isa>(i);
      if (vec_dot_fn(t, isa)) {
        EXPECT_EQ(vec_dot_tile_fn(t), vec_dot_tile_fn(t, isa)) << dtype_name(t);
        break;
      }
    }
  }
}

// matmul over T tokens at once vs T single-token matmuls: the prompt and decode paths agree.
TEST(MatmulTile, BatchedMatmulMatchesTokenByToken) {
  std::mt19937 rng(9);
  const int64_t rows = 37, cols = 512;  // rows not a multiple of the row blocks
  for (DType t : dot_types()) {
    std::vector<uint8_t> w;
    for (int64_t r = 0; r < rows; ++r) {
      const auto row = testing::random_weights(t, cols, rng);
      w.insert(w.end(), row.begin(), row.end());
    }
    const MatrixView mv{t, cols, rows, w.data(), row_bytes(t, cols)};
    const auto x = testing::random_floats(64 * cols, rng);
    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      for (int64_t n_tokens : {1, 3, 4, 5, 17, 64}) {
        std::vector<float> batched(static_cast<size_t>(n_tokens * rows));
        matmul(mv, x.data(), n_tokens, batched.data(), pool);
        for (int64_t k = 0; k < n_tokens; ++k) {
          std::vector<float> single(static_cast<size_t>(rows));
          matmul(mv, x.data() + k * cols, 1, single.data(), pool);
          ASSERT_EQ(std::memcmp(single.data(), batched.data() + k * rows, rows * sizeof(float)), 0)
              << dtype_name(t) << " threads=" << threads << " tokens=" << n_tokens << " token " << k;
        }
      }
    }
  }
}

// matmul_rows over a slice of tokens and rows writes exactly that block, as matmul computes it.
TEST(MatmulTile, MatmulRowsMatchesMatmul) {
  std::mt19937 rng(3);
  const int64_t rows = 40, cols = 256, n_tokens = 9;
  for (DType t : {DType::Q4_K, DType::Q6_K, DType::Q8_0, DType::F32}) {
    std::vector<uint8_t> w;
    for (int64_t r = 0; r < rows; ++r) {
      const auto row = testing::random_weights(t, cols, rng);
      w.insert(w.end(), row.begin(), row.end());
    }
    const MatrixView mv{t, cols, rows, w.data(), row_bytes(t, cols)};
    const auto x = testing::random_floats(n_tokens * cols, rng);
    ThreadPool pool(1);
    QuantizedActivations q;
    q.quantize(t, x.data(), n_tokens, cols, pool);
    std::vector<float> full(static_cast<size_t>(n_tokens * rows));
    matmul(mv, q, n_tokens, full.data(), rows, pool);
    std::vector<float> part(static_cast<size_t>(5 * rows), 0.0f);
    matmul_rows(mv, q, 2, 5, part.data(), rows, 7, 30);
    for (int64_t k = 0; k < 5; ++k) {
      for (int64_t r = 0; r < rows; ++r) {
        const float want = r >= 7 && r < 30 ? full[(k + 2) * rows + r] : 0.0f;
        ASSERT_TRUE(same_bits(part[k * rows + r], want)) << dtype_name(t) << " t=" << k << " r=" << r;
      }
    }
  }
}

}  // namespace
}  // namespace strata::tensor
