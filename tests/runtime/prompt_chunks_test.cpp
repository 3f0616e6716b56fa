// The one prompt-chunking rule (runtime/prompt_chunks.h): chunks hold the prompt's tokens in order
// at their positions, no chunk is larger than the batch, the last holds the rest, and only the
// prompt's last token asks for logits unless every row must.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "runtime/prompt_chunks.h"

namespace strata::runtime {
namespace {

std::vector<text::Token> prompt_of(int32_t n) {
  std::vector<text::Token> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), 100);  // token i is 100 + i
  return p;
}

// Every batch feed_prompt_chunks hands over, copied.
std::vector<model::Batch> chunks_of(const std::vector<text::Token>& prompt, int32_t n_batch, const PromptRows& rows) {
  std::vector<model::Batch> chunks;
  const Status status = feed_prompt_chunks(prompt, n_batch, rows, [&](const model::Batch& batch) -> Status {
    chunks.push_back(batch);
    return {};
  });
  EXPECT_TRUE(status.ok()) << status.error().message;
  return chunks;
}

TEST(PromptChunks, a_prompt_goes_in_order_in_batch_sized_chunks_the_last_holding_the_rest) {
  const std::vector<text::Token> prompt = prompt_of(10);
  const std::vector<model::Batch> chunks = chunks_of(prompt, 4, {2, 7, false});
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0].size(), 4);
  EXPECT_EQ(chunks[1].size(), 4);
  EXPECT_EQ(chunks[2].size(), 2);
  int32_t i = 0;
  for (const model::Batch& chunk : chunks) {
    for (int64_t r = 0; r < chunk.size(); ++r, ++i) {
      EXPECT_EQ(chunk.tokens[r], prompt[i]) << "row " << i;
      EXPECT_EQ(chunk.pos[r], 7 + i) << "row " << i;
      EXPECT_EQ(chunk.seq[r], 2) << "row " << i;
      EXPECT_EQ(chunk.logits[r], i == 9 ? 1 : 0) << "only the prompt's last token asks for logits; row " << i;
    }
  }
  EXPECT_EQ(i, 10);
}

TEST(PromptChunks, a_prompt_of_whole_batches_ends_without_an_empty_chunk) {
  const std::vector<model::Batch> chunks = chunks_of(prompt_of(8), 4, {});
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[1].size(), 4);
  EXPECT_EQ(chunks[1].pos.back(), 7);
  EXPECT_EQ(chunks[0].logits, (std::vector<uint8_t>{0, 0, 0, 0}));
  EXPECT_EQ(chunks[1].logits, (std::vector<uint8_t>{0, 0, 0, 1}));
}

TEST(PromptChunks, a_prompt_shorter_than_a_batch_is_one_chunk) {
  const std::vector<model::Batch> chunks = chunks_of(prompt_of(3), 512, {});
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].pos, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(chunks[0].logits, (std::vector<uint8_t>{0, 0, 1}));
}

TEST(PromptChunks, all_logits_asks_for_every_row) {
  for (const model::Batch& chunk : chunks_of(prompt_of(5), 2, {0, 0, true})) {
    for (uint8_t wants : chunk.logits) EXPECT_EQ(wants, 1);
  }
}

TEST(PromptChunks, feeding_stops_at_the_first_failed_chunk) {
  int calls = 0;
  const Status status = feed_prompt_chunks(prompt_of(10), 3, {}, [&](const model::Batch&) -> Status {
    return ++calls == 2 ? Status(make_error("decode failed")) : Status{};
  });
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(calls, 2);
}

TEST(PromptChunks, an_empty_batch_size_is_an_error_not_an_endless_loop) {
  int calls = 0;
  const Status status = feed_prompt_chunks(prompt_of(3), 0, {}, [&](const model::Batch&) -> Status {
    ++calls;
    return {};
  });
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(calls, 0);
}

TEST(PromptChunks, a_chunk_follows_the_rows_a_batch_already_holds_and_takes_only_its_room) {
  const std::vector<text::Token> prompt = prompt_of(6);
  model::Batch batch;
  batch.add(9, 40, 1, true);  // another sequence's row
  EXPECT_EQ(add_prompt_chunk(batch, prompt, 2, 3, {0, 0, false}), 3u);
  EXPECT_EQ(batch.tokens, (std::vector<int32_t>{9, 102, 103, 104}));
  EXPECT_EQ(batch.pos, (std::vector<int32_t>{40, 2, 3, 4}));
  EXPECT_EQ(batch.seq, (std::vector<int32_t>{1, 0, 0, 0}));
  EXPECT_EQ(batch.logits, (std::vector<uint8_t>{1, 0, 0, 0})) << "the prompt's last token is not in this chunk";

  EXPECT_EQ(add_prompt_chunk(batch, prompt, 5, 8, {0, 0, false}), 1u) << "only the rest of the prompt";
  EXPECT_EQ(batch.pos.back(), 5);
  EXPECT_EQ(batch.logits.back(), 1);
  EXPECT_EQ(add_prompt_chunk(batch, prompt, 6, 8, {0, 0, false}), 0u) << "nothing is left";
  EXPECT_EQ(batch.size(), 5);
}

}  // namespace
}  // namespace strata::runtime
