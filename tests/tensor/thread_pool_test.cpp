// The thread pool and matmul: every item runs once, and results do not depend on the thread count.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>

#include "tensor/matmul.h"
#include "tensor/quants.h"
#include "tensor/thread_pool.h"

namespace strata::tensor {
namespace {

TEST(ThreadPool, run_calls_every_thread_index_once) {
  for (int n : {1, 2, 3, 5}) {
    ThreadPool pool(n);
    for (int round = 0; round < 200; ++round) {
      std::vector<std::atomic<int>> seen(n);
      pool.run([&](int i, int total) {
        EXPECT_EQ(total, n);
        seen[i]++;
      });
      for (int i = 0; i < n; ++i) ASSERT_EQ(seen[i].load(), 1);
    }
  }
}

TEST(ThreadPool, parallel_for_covers_the_range_exactly_once) {
  ThreadPool pool(3);
  for (int64_t n : {0, 1, 7, 64, 1000}) {
    std::vector<std::atomic<int>> hits(n);
    pool.parallel_for(n, 5, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[i]++;
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << i;
  }
}

TEST(ThreadPool, parallel_for_shares_covers_the_range_exactly_once) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 7, 31, 32, 33, 64, 1000, 4097}) {
      for (int64_t grain : {1, 5, 32}) {
        std::vector<std::atomic<int>> hits(n);
        pool.parallel_for_shares(n, grain, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[i]++;
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << threads << " " << n << " " << grain << " " << i;
      }
    }
  }
}

// parallel_for leaves late workers out and run() waits for all: interleaving the two many times
// must still run each run() index once and each parallel_for item once.
TEST(ThreadPool, run_and_parallel_for_interleaved) {
  for (int n : {2, 3}) {
    ThreadPool pool(n);
    for (int round = 0; round < 2000; ++round) {
      std::vector<std::atomic<int>> hits(37);
      auto count = [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[i]++;
      };
      if (round % 2) {
        pool.parallel_for(37, 1 + round % 5, count);
      } else {
        pool.parallel_for_shares(37, 1 + round % 5, count);
      }
      for (auto& h : hits) ASSERT_EQ(h.load(), 1);
      if (round % 3 == 0) {
        std::vector<std::atomic<int>> seen(n);
        pool.run([&](int i, int) { seen[i]++; });
        for (auto& s : seen) ASSERT_EQ(s.load(), 1);
      }
    }
  }
}

// Random blocks whose fp16 scales are small and finite (offsets of d/dmin per format).
std::vector<uint8_t> random_weights(DType type, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::vector<uint8_t> data(row_bytes(type, cols) * rows);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  std::vector<size_t> scale_offsets;
  if (type == DType::Q8_0) scale_offsets = {0};
  if (type == DType::Q4_K) scale_offsets = {0, 2};
  if (type == DType::Q6_K) scale_offsets = {208};
  if (type == DType::F32) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (size_t i = 0; i < data.size(); i += 4) {
      const float v = normal(rng);
      std::memcpy(&data[i], &v, 4);
    }
    return data;
  }
  const size_t block = info(type).block_bytes;
  for (size_t b = 0; b < data.size(); b += block) {
    for (size_t off : scale_offsets) {
      const uint16_t h = fp32_to_fp16(0.001f + 0.01f * static_cast<float>(rng() % 100) / 100.0f);
      std::memcpy(&data[b + off], &h, 2);
    }
  }
  return data;
}

TEST(Matmul, results_are_bit_identical_for_any_thread_count) {
  std::mt19937 rng(7);
  const int64_t rows = 96, cols = 512, tokens = 5;
  for (DType type : {DType::F32, DType::Q8_0, DType::Q4_K, DType::Q6_K}) {
    const std::vector<uint8_t> w = random_weights(type, rows, cols, rng);
    const MatrixView m{type, cols, rows, w.data(), row_bytes(type, cols)};
    std::vector<float> x(tokens * cols);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float& v : x) v = normal(rng);
    std::vector<float> ref(tokens * rows);
    {
      ThreadPool one(1);
      matmul(m, x.data(), tokens, ref.data(), one);
    }
    for (float v : ref) ASSERT_TRUE(std::isfinite(v)) << dtype_name(type);
    for (int n : {2, 3}) {
      ThreadPool pool(n);
      std::vector<float> y(tokens * rows);
      matmul(m, x.data(), tokens, y.data(), pool);
      EXPECT_EQ(0, std::memcmp(y.data(), ref.data(), y.size() * sizeof(float))) << dtype_name(type) << " threads " << n;
    }
  }
}

}  // namespace
}  // namespace strata::tensor
