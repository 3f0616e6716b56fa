// Top-k candidates on the wire: pack then unpack keeps exactly each row's k best logits, and bytes
// of the wrong size or with ids outside the vocabulary are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "net/candidates.h"

namespace strata::net {
namespace {

std::vector<float> random_logits(int64_t rows, int32_t n_vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> v(static_cast<size_t>(rows) * n_vocab);
  for (float& x : v) x = dist(rng);
  return v;
}

// Indices of a row's k largest logits, ties to the lower id.
std::vector<int32_t> best_ids(const float* row, int32_t n_vocab, size_t k) {
  std::vector<int32_t> ids(static_cast<size_t>(n_vocab));
  for (int32_t i = 0; i < n_vocab; ++i) ids[i] = i;
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
  ids.resize(std::min<size_t>(k, ids.size()));
  std::sort(ids.begin(), ids.end());
  return ids;
}

TEST(Candidates, round_trip_keeps_each_rows_k_best_and_nothing_else) {
  const int64_t rows = 5;
  const int32_t n_vocab = 300;
  for (uint32_t k : {1u, 8u, 40u}) {
    const std::vector<float> logits = random_logits(rows, n_vocab, k);
    const std::string bytes = pack_candidates(logits.data(), rows, n_vocab, k);
    EXPECT_EQ(bytes.size(), static_cast<size_t>(rows) * k * 8);
    auto back = unpack_candidates(bytes, rows, n_vocab, k);
    ASSERT_TRUE(back.ok()) << back.error().message;
    ASSERT_EQ(back->size(), logits.size());
    for (int64_t r = 0; r < rows; ++r) {
      const float* in = logits.data() + r * n_vocab;
      const float* out = back->data() + r * n_vocab;
      std::vector<int32_t> kept;
      for (int32_t i = 0; i < n_vocab; ++i) {
        if (std::isinf(out[i]) && out[i] < 0) continue;
        kept.push_back(i);
        EXPECT_EQ(out[i], in[i]) << "row " << r << " id " << i;  // the logit itself, bit for bit
      }
      EXPECT_EQ(kept, best_ids(in, n_vocab, k)) << "row " << r << " k " << k;
    }
  }
}

TEST(Candidates, k_beyond_the_vocabulary_sends_whole_rows) {
  const int64_t rows = 2;
  const int32_t n_vocab = 16;
  const std::vector<float> logits = random_logits(rows, n_vocab, 3);
  const std::string bytes = pack_candidates(logits.data(), rows, n_vocab, 1000);
  EXPECT_EQ(bytes.size(), static_cast<size_t>(rows) * n_vocab * 8);
  auto back = unpack_candidates(bytes, rows, n_vocab, 1000);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, logits);
}

TEST(Candidates, ties_go_to_the_lower_id) {
  const std::vector<float> logits = {1.0f, 2.0f, 2.0f, 2.0f, 0.5f};
  auto back = unpack_candidates(pack_candidates(logits.data(), 1, 5, 2), 1, 5, 2);
  ASSERT_TRUE(back.ok()) << back.error().message;
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(*back, (std::vector<float>{-inf, 2.0f, 2.0f, -inf, -inf}));
}

TEST(Candidates, wrong_sizes_are_refused) {
  const std::vector<float> logits = random_logits(3, 50, 1);
  const std::string bytes = pack_candidates(logits.data(), 3, 50, 4);
  for (const std::string& bad : {bytes.substr(0, bytes.size() - 1), bytes + "x", bytes.substr(0, 8 * 4 * 2),
                                 std::string()}) {
    auto r = unpack_candidates(bad, 3, 50, 4);
    ASSERT_FALSE(r.ok()) << bad.size() << " bytes";
    EXPECT_NE(r.error().message.find("candidates of " + std::to_string(bad.size()) + " bytes, expected 3 rows of 4"),
              std::string::npos)
        << r.error().message;
  }
  // The same bytes read with another row count or k do not fit either.
  EXPECT_FALSE(unpack_candidates(bytes, 2, 50, 4).ok());
  EXPECT_FALSE(unpack_candidates(bytes, 3, 50, 5).ok());
}

TEST(Candidates, ids_outside_the_vocabulary_are_refused) {
  for (int32_t bad_id : {-1, 50, 1 << 30, std::numeric_limits<int32_t>::min()}) {
    const std::vector<float> logits = random_logits(2, 50, 2);
    std::string bytes = pack_candidates(logits.data(), 2, 50, 3);
    std::memcpy(bytes.data() + 8 * 4, &bad_id, sizeof bad_id);  // second row, second pair
    auto r = unpack_candidates(bytes, 2, 50, 3);
    ASSERT_FALSE(r.ok()) << bad_id;
    EXPECT_EQ(r.error().message, "candidate token id " + std::to_string(bad_id) + " outside the vocabulary");
  }
}

TEST(Candidates, no_rows_is_an_empty_message) {
  EXPECT_TRUE(pack_candidates(nullptr, 0, 10, 4).empty());
  auto r = unpack_candidates("", 0, 10, 4);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->empty());
}

}  // namespace
}  // namespace strata::net
