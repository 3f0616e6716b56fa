// memory::encode_seq / decode_seq: a saved sequence comes back whole, and bytes from outside (a slot
// file, a worker's WriteStash) that are cut short, have the wrong magic, claim lengths past their end
// or are flipped at random are refused without reading or allocating past what they hold.
#include "memory/seq_blob.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

namespace strata::memory {
namespace {

SeqBlob sample() {
  SeqBlob b;
  b.kv.n = 3;
  b.kv.k = {1, 2, 3, 4, 5, 6};
  b.kv.v = {7, 8, 9};
  SeqState s;
  s.now = {3, {0.5f, 1.5f}, {2.5f, 3.5f, 4.5f}};
  s.checkpoints.push_back({1, {0.25f, 0.75f}, {1.0f, 2.0f, 3.0f}});
  b.state = s;
  return b;
}

TEST(SeqBlob, a_sequence_comes_back_whole) {
  const SeqBlob b = sample();
  auto back = decode_seq(encode_seq(b));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->kv.n, 3);
  EXPECT_EQ(back->kv.k, b.kv.k);
  EXPECT_EQ(back->kv.v, b.kv.v);
  ASSERT_TRUE(back->state.has_value());
  EXPECT_EQ(back->state->now.ssm, b.state->now.ssm);
  ASSERT_EQ(back->state->checkpoints.size(), 1u);
  EXPECT_EQ(back->state->checkpoints[0].pos, 1);
  EXPECT_EQ(back->state->checkpoints[0].conv, b.state->checkpoints[0].conv);
  SeqBlob no_state = b;
  no_state.state.reset();
  auto plain = decode_seq(encode_seq(no_state));
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->state.has_value());
  // A node without attention layers holds no KV rows: empty lists come back empty (under UBSan, the
  // read of zero bytes into an empty vector was a memcpy to null).
  SeqBlob empty = b;
  empty.kv = {};
  empty.state->checkpoints.push_back({2, {}, {}});
  auto none = decode_seq(encode_seq(empty));
  ASSERT_TRUE(none.ok()) << none.error().message;
  EXPECT_TRUE(none->kv.k.empty());
  EXPECT_EQ(none->state->checkpoints.size(), 2u);
}

TEST(SeqBlob, cut_wrong_or_lying_bytes_are_refused) {
  const std::vector<uint8_t> good = encode_seq(sample());
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(decode_seq(std::span(good.data(), n)).ok()) << "cut at " << n;
  }
  std::vector<uint8_t> longer = good;
  longer.push_back(0);
  EXPECT_FALSE(decode_seq(longer).ok());
  std::vector<uint8_t> magic = good;
  magic[0] ^= 1;
  EXPECT_FALSE(decode_seq(magic).ok());
  // The K bytes' length (after the magic and n) claims 2^60 bytes: refused before any allocation.
  std::vector<uint8_t> huge = good;
  const uint64_t lie = uint64_t{1} << 60;
  std::memcpy(huge.data() + 12 + 4, &lie, sizeof lie);
  auto r = decode_seq(huge);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("longer than the data"), std::string::npos) << r.error().message;
  std::mt19937 rng(9);
  for (int i = 0; i < 2000; ++i) {
    std::vector<uint8_t> m = good;
    for (int k = 0; k < 3; ++k) m[rng() % m.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
    (void)decode_seq(m);  // any outcome but a crash or a huge allocation
  }
}

}  // namespace
}  // namespace strata::memory
