// The generation state machine shared by `strata run` and the server's slots: hand-made logits rows
// over a real vocabulary (llama's SentencePiece one) pin down prompt feeding, stop strings, UTF-8
// assembly, the end conditions and logprobs; on a real model, generate() and a scheduler slot agree.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "runtime/generate.h"
#include "runtime/generation.h"
#include "testing/shared_data.h"
#include "text/test_vocab.h"

namespace strata::runtime {
namespace {

class GenerationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    vocab_ = text::testing_util::load_shared_vocab("models/vocab/ggml-vocab-llama-spm.gguf");
    ASSERT_TRUE(vocab_);
  }

  GenerationModel model(int32_t n_ctx_per_seq = 64) const {
    return {vocab_.get(), vocab_->n_tokens(), n_ctx_per_seq};
  }

  // Greedy over a short prompt: the favourite of each row is what gets sampled.
  static GenerationParams greedy(int32_t max_tokens = -1) {
    GenerationParams p;
    p.prompt = {1, 15043, 3186};
    p.max_tokens = max_tokens;
    p.sampling.temp = 0;
    return p;
  }

  // A row whose clear favourite is `token`.
  std::vector<float> row_for(text::Token token) const {
    std::vector<float> row(static_cast<size_t>(vocab_->n_tokens()), 0.0f);
    row[static_cast<size_t>(token)] = 10.0f;
    return row;
  }

  // The token whose text is exactly `piece` (ids differ between vocabularies; the text does not).
  text::Token token_of(const std::string& piece) const {
    for (text::Token t = 0; t < vocab_->n_tokens(); ++t) {
      if (vocab_->token_to_piece(t, false) == piece) return t;
    }
    ADD_FAILURE() << "no token for '" << piece << "'";
    return 0;
  }

  text::Token byte_token(unsigned char byte) const {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", byte);
    for (text::Token t = 0; t < vocab_->n_tokens(); ++t) {
      if (vocab_->token_text(t) == name) return t;
    }
    ADD_FAILURE() << "no byte token " << name;
    return 0;
  }

  // Feeds the prompt in one batch, then makes each row's favourite the next token until done.
  static std::vector<GenerationStep> run(Generation& gen, const std::vector<std::vector<float>>& rows) {
    model::Batch batch;
    EXPECT_TRUE(gen.feed(batch, 512).wants_logits);
    std::vector<GenerationStep> steps;
    for (const auto& row : rows) {
      if (gen.done()) break;
      steps.push_back(gen.next_token(row));
      batch.clear();
      if (!gen.done()) {
        EXPECT_TRUE(gen.feed(batch, 512).wants_logits);
      }
    }
    return steps;
  }

  std::vector<std::vector<float>> rows_for(const std::vector<text::Token>& tokens) const {
    std::vector<std::vector<float>> rows;
    for (text::Token t : tokens) rows.push_back(row_for(t));
    return rows;
  }

  static std::string joined_text(const std::vector<GenerationStep>& steps) {
    std::string out;
    for (const auto& s : steps) out += s.text;
    return out;
  }

  std::shared_ptr<const text::Vocab> vocab_;
};

TEST_F(GenerationTest, the_prompt_is_fed_in_chunks_within_the_budget_and_only_its_last_row_wants_logits) {
  GenerationParams p = greedy();
  p.prompt = {1, 15043, 3186, 29991, 29889};
  Generation gen(p, 3, model());
  model::Batch batch;
  batch.add(7, 0, 0, true);  // another sequence's row already in the batch
  Feed fed = gen.feed(batch, 3);
  EXPECT_EQ(fed.prompt_rows, 2);
  EXPECT_FALSE(fed.wants_logits);
  EXPECT_TRUE(gen.started());
  EXPECT_EQ(gen.feed(batch, 3).prompt_rows, 0) << "the batch is full";
  batch.clear();
  fed = gen.feed(batch, 3);
  EXPECT_EQ(fed.prompt_rows, 3);
  EXPECT_TRUE(fed.wants_logits);
  EXPECT_EQ(batch.pos, (std::vector<int32_t>{2, 3, 4}));
  EXPECT_EQ(batch.seq, (std::vector<int32_t>{3, 3, 3}));
  EXPECT_EQ(batch.logits, (std::vector<uint8_t>{0, 0, 1}));
  EXPECT_FALSE(gen.generating());

  const GenerationStep step = gen.next_token(row_for(15043));
  EXPECT_EQ(step.token, 15043);
  EXPECT_FALSE(step.done);
  EXPECT_TRUE(gen.generating());
  batch.clear();
  fed = gen.feed(batch, 1);
  EXPECT_TRUE(fed.wants_logits);
  EXPECT_EQ(fed.prompt_rows, 0);
  EXPECT_EQ(batch.tokens, (std::vector<int32_t>{15043}));
  EXPECT_EQ(batch.pos, (std::vector<int32_t>{5}));
  EXPECT_EQ(gen.n_past(), 6);
}

// --reasoning-budget: after N tokens inside the think block the message and the closing tag are
// written whatever the logits say, then sampling goes on; an answer without a think block is left alone.
TEST_F(GenerationTest, a_spent_reasoning_budget_writes_the_message_and_the_close_tag) {
  const text::Token hello = 15043;
  auto params = [&](int32_t tokens, bool inside) {
    GenerationParams p = greedy(24);
    p.reasoning_budget.tokens = tokens;
    p.reasoning_budget.starts_inside = inside;
    p.reasoning_budget.open = "<think>";
    p.reasoning_budget.close = "</think>";
    p.reasoning_budget.forced = vocab_->tokenize(" Enough.</think>", false, false);
    return p;
  };
  std::string forced_text;
  for (text::Token t : params(0, false).reasoning_budget.forced) forced_text += vocab_->token_to_piece(t, false);
  const std::string h = vocab_->token_to_piece(hello, false);
  auto text_of = [&](const GenerationParams& p, const std::vector<text::Token>& favourites) {
    Generation gen(p, 0, model());
    return joined_text(run(gen, rows_for(favourites)));
  };
  const std::vector<text::Token> hellos(24, hello);
  // The prompt opened the block: three tokens of reasoning, then the forced text, then the answer.
  const std::string inside = text_of(params(3, true), hellos);
  EXPECT_EQ(inside.substr(0, 3 * h.size() + forced_text.size()), h + h + h + forced_text) << inside;
  EXPECT_EQ(inside.find(forced_text, 3 * h.size() + 1), std::string::npos) << "forced once: " << inside;
  // Budget 0: closed at once.
  EXPECT_EQ(text_of(params(0, true), hellos).rfind(forced_text, 0), 0u);
  // The model opens the block itself: its tag is not counted.
  std::vector<text::Token> opened = vocab_->tokenize("<think>", false, false);
  opened.resize(24, hello);
  const std::string by_model = text_of(params(2, false), opened);
  EXPECT_NE(by_model.find("<think>" + h + h + forced_text), std::string::npos) << by_model;
  // The model closes the block within the budget: nothing is forced.
  std::vector<text::Token> closed = vocab_->tokenize("<think> hi</think>", false, false);
  closed.resize(24, hello);
  EXPECT_EQ(text_of(params(5, false), closed).find("Enough"), std::string::npos);
  // No think block at all: nothing is forced.
  std::string all;
  for (int i = 0; i < 24; ++i) all += h;
  EXPECT_EQ(text_of(params(1, false), hellos), all);
}

TEST_F(GenerationTest, a_stop_string_split_across_tokens_ends_the_text_before_it) {
  GenerationParams p = greedy();
  p.stop = {"lo wo"};
  Generation gen(p, 0, model());
  const auto steps = run(gen, rows_for({token_of(" Hello"), token_of(" world"), token_of("!")}));
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].text, " Hel") << "'lo' may be the start of the stop string";
  EXPECT_TRUE(steps[1].done);
  EXPECT_EQ(steps[1].finish_reason, "stop");
  EXPECT_EQ(joined_text(steps), " Hel");
}

TEST_F(GenerationTest, held_back_text_is_released_once_it_cannot_become_a_stop_string) {
  GenerationParams p = greedy(3);
  p.stop = {"lo there", "!!"};
  Generation gen(p, 0, model());
  const auto steps = run(gen, rows_for({token_of(" Hello"), token_of(" world"), token_of("!")}));
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(steps[0].text, " Hel");
  EXPECT_EQ(steps[1].text, "lo world");
  EXPECT_EQ(steps[2].text, "!") << "held back for '!!', then released when the limit ends the generation";
  EXPECT_EQ(steps[2].finish_reason, "length");
}

TEST_F(GenerationTest, multi_byte_characters_are_assembled_from_byte_tokens) {
  Generation gen(greedy(), 0, model());
  // "é" (C3 A9) then "€" (E2 82 AC), one byte token each.
  const auto steps = run(gen, rows_for({byte_token(0xC3), byte_token(0xA9), byte_token(0xE2), byte_token(0x82),
                                        byte_token(0xAC)}));
  ASSERT_EQ(steps.size(), 5u);
  const std::vector<std::string> want = {"", "\xC3\xA9", "", "", "\xE2\x82\xAC"};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(steps[i].text, want[i]) << "step " << i;
}

TEST_F(GenerationTest, an_incomplete_character_at_the_end_is_flushed_with_the_last_token) {
  Generation gen(greedy(2), 0, model());
  const auto steps = run(gen, rows_for({token_of(" Hello"), byte_token(0xE2)}));
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[1].text, "\xE2");
  EXPECT_EQ(steps[1].finish_reason, "length");
}

TEST_F(GenerationTest, end_of_generation_stops_unless_ignore_eos) {
  const text::Token eos = vocab_->eos();
  ASSERT_TRUE(vocab_->is_eog(eos));
  {
    Generation gen(greedy(), 0, model());
    const auto steps = run(gen, rows_for({token_of(" Hello"), eos, token_of(" world")}));
    ASSERT_EQ(steps.size(), 2u);
    EXPECT_TRUE(steps[1].end_of_generation);
    EXPECT_TRUE(steps[1].done);
    EXPECT_EQ(steps[1].finish_reason, "stop");
    EXPECT_EQ(steps[1].text, "");
    EXPECT_EQ(gen.n_generated(), 2) << "the end-of-generation token counts as generated";
  }
  GenerationParams p = greedy(3);
  p.ignore_eos = true;
  Generation gen(p, 0, model());
  const auto steps = run(gen, rows_for({token_of(" Hello"), eos, token_of(" world")}));
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_FALSE(steps[1].end_of_generation);
  EXPECT_FALSE(steps[1].done);
  EXPECT_EQ(joined_text(steps), " Hello world");
  EXPECT_EQ(steps[2].finish_reason, "length");
}

TEST_F(GenerationTest, max_tokens_ends_with_length) {
  Generation gen(greedy(4), 0, model());
  const auto steps = run(gen, rows_for(std::vector<text::Token>(10, token_of(" world"))));
  ASSERT_EQ(steps.size(), 4u);
  for (size_t i = 0; i < 3; ++i) EXPECT_FALSE(steps[i].done);
  EXPECT_EQ(steps[3].finish_reason, "length");
  EXPECT_EQ(gen.n_generated(), 4);
  EXPECT_EQ(joined_text(steps), " world world world world");
}

TEST_F(GenerationTest, a_full_context_ends_with_length_when_prompt_and_completion_fill_it) {
  const GenerationParams p = greedy();  // 3 prompt tokens, no token limit
  Generation gen(p, 0, model(8));
  const auto steps = run(gen, rows_for(std::vector<text::Token>(20, token_of(" world"))));
  ASSERT_EQ(steps.size(), 5u) << "prompt + completion == n_ctx_per_seq";
  EXPECT_EQ(steps.back().finish_reason, "length");
  EXPECT_EQ(gen.n_past(), 7) << "the last token is never decoded";
}

TEST_F(GenerationTest, candidates_needed_follows_the_sampler_and_is_zero_for_logprobs) {
  EXPECT_EQ(Generation(greedy(), 0, model()).candidates_needed(), 1);
  GenerationParams p = greedy();
  p.sampling = sampling::Params{};
  p.sampling.seed = 1;
  EXPECT_EQ(Generation(p, 0, model()).candidates_needed(), 40);
  p.sampling.repeat_penalty = 1.1f;
  EXPECT_EQ(Generation(p, 0, model()).candidates_needed(), 0) << "penalties change logits outside any top-k";
  p = greedy();
  p.top_logprobs = 0;
  EXPECT_EQ(Generation(p, 0, model()).candidates_needed(), 0) << "logprobs normalize over the whole row";
}

TEST_F(GenerationTest, logprobs_are_over_the_full_vocabulary_with_the_top_alternatives) {
  GenerationParams p = greedy(1);
  p.top_logprobs = 2;
  Generation gen(p, 0, model());
  const text::Token hello = token_of(" Hello");
  const auto steps = run(gen, rows_for({hello}));
  ASSERT_EQ(steps.size(), 1u);
  ASSERT_EQ(steps[0].logprobs.size(), 1u);
  const TokenLogprob& lp = steps[0].logprobs[0];
  const double log_z = std::log(std::exp(10.0) + (vocab_->n_tokens() - 1));
  EXPECT_EQ(lp.token, hello);
  EXPECT_EQ(lp.text, " Hello");
  EXPECT_NEAR(lp.logprob, 10.0 - log_z, 1e-4);
  ASSERT_EQ(lp.top.size(), 2u);
  EXPECT_EQ(lp.top[0].first, " Hello");
  EXPECT_NEAR(lp.top[0].second, 10.0 - log_z, 1e-4);
  EXPECT_EQ(lp.top[1].first, vocab_->token_to_piece(0, true)) << "ties go to the lowest id";
  EXPECT_NEAR(lp.top[1].second, -log_z, 1e-4);
  EXPECT_TRUE(Generation(greedy(), 0, model()).next_token(row_for(hello)).logprobs.empty());
}

TEST_F(GenerationTest, finishing_early_returns_the_held_text) {
  GenerationParams p = greedy();
  p.stop = {"lo wo"};
  Generation gen(p, 0, model());
  const auto steps = run(gen, rows_for({token_of(" Hello")}));
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(gen.finish_early(), "lo");
  EXPECT_TRUE(gen.done());
  model::Batch batch;
  EXPECT_FALSE(gen.feed(batch, 8).wants_logits);
  EXPECT_EQ(batch.size(), 0);
}

// A decode fails (a node died) and the recovery empties the caches: the generation forgets the failed
// rows, feeds the tokens the sequence held again at their positions without logits, then goes on
// with the row it had, whether it failed in its prompt, in generation or in the replay itself.
TEST_F(GenerationTest, a_failed_decode_replays_the_lost_cache_then_goes_on_where_it_was) {
  GenerationParams p = greedy();
  p.prompt = {1, 15043, 3186, 338, 263, 1243, 29889, 13};
  Generation gen(p, 3, model());
  struct Rows {
    std::vector<int32_t> tokens, pos;
    int logits = 0;
  };
  auto feed = [&](int32_t budget) {
    model::Batch batch;
    gen.feed(batch, budget);
    Rows r{batch.tokens, batch.pos, 0};
    for (uint8_t l : batch.logits) r.logits += l;
    for (int32_t s : batch.seq) EXPECT_EQ(s, 3);
    return r;
  };
  EXPECT_EQ(feed(3).pos, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(feed(3).pos, (std::vector<int32_t>{3, 4, 5}));  // this batch fails
  gen.replay_after_failure(true);
  ASSERT_TRUE(gen.replaying());
  Rows r = feed(2);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{1, 15043}));
  EXPECT_EQ(r.logits, 0);
  gen.replay_after_failure(true);  // fails again inside the replay: from the start once more
  EXPECT_EQ(feed(8).tokens, (std::vector<int32_t>{1, 15043, 3186}));
  EXPECT_FALSE(gen.replaying());
  r = feed(8);
  EXPECT_EQ(r.pos, (std::vector<int32_t>{3, 4, 5, 6, 7}));
  EXPECT_EQ(r.logits, 1);
  const text::Token first = gen.next_token(row_for(450)).token;
  EXPECT_EQ(first, 450);
  r = feed(8);  // the sampled token goes in; this batch fails too
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{450}));
  EXPECT_EQ(r.pos, (std::vector<int32_t>{8}));
  gen.replay_after_failure(true);
  EXPECT_FALSE(gen.generating());  // the replay goes first
  r = feed(100);
  EXPECT_EQ(r.tokens, p.prompt);
  EXPECT_EQ(r.logits, 0);
  EXPECT_TRUE(gen.generating());
  r = feed(100);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{450}));
  EXPECT_EQ(r.pos, (std::vector<int32_t>{8}));
  EXPECT_EQ(r.logits, 1);
  std::vector<text::Token> cached = p.prompt;
  cached.push_back(450);
  EXPECT_EQ(gen.tokens_in_cache(), cached);
  // A slot whose rows were not in the failed batch replays all it holds and loses nothing.
  gen.next_token(row_for(263));
  gen.replay_after_failure(false);
  cached.push_back(263);  // sampled, not yet fed: it is fed after the replay
  r = feed(100);
  EXPECT_EQ(r.tokens, std::vector<int32_t>(cached.begin(), cached.end() - 1));
  r = feed(100);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{263}));
  EXPECT_EQ(r.pos, (std::vector<int32_t>{9}));
  EXPECT_EQ(gen.replays(), 4);
}

}  // namespace
}  // namespace strata::runtime
