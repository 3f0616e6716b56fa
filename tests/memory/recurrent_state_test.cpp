// RecurrentState: per-layer, per-sequence Gated DeltaNet state and its sequence operations.
#include "memory/recurrent_state.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace strata::memory {
namespace {

RecurrentConfig small_config() {
  RecurrentConfig c;
  c.n_layer = 4;
  c.layer_has_state = {1, 0, 1, 0};  // layers 1 and 3 are attention (or owned elsewhere)
  c.conv_rows = 3;
  c.conv_channels = 8;
  c.n_heads = 2;
  c.head_k_dim = 4;
  c.head_v_dim = 4;
  c.n_seq = 3;
  return c;
}

size_t conv_floats(const RecurrentConfig& c) { return static_cast<size_t>(c.conv_rows) * c.conv_channels; }
size_t ssm_floats(const RecurrentConfig& c) { return static_cast<size_t>(c.n_heads) * c.head_k_dim * c.head_v_dim; }

void fill(RecurrentState& s, int seq, float value) {
  const RecurrentConfig& c = s.config();
  for (int il = 0; il < c.n_layer; ++il) {
    if (!s.has_layer(il)) continue;
    std::fill_n(s.conv(il, seq), conv_floats(c), value);
    std::fill_n(s.ssm(il, seq), ssm_floats(c), value + 0.5f);
  }
}

bool all_equal(const RecurrentState& s, int seq, float conv_value, float ssm_value) {
  const RecurrentConfig& c = s.config();
  for (int il = 0; il < c.n_layer; ++il) {
    if (!s.has_layer(il)) continue;
    const float* conv = s.conv(il, seq);
    const float* ssm = s.ssm(il, seq);
    if (!std::all_of(conv, conv + conv_floats(c), [&](float v) { return v == conv_value; })) return false;
    if (!std::all_of(ssm, ssm + ssm_floats(c), [&](float v) { return v == ssm_value; })) return false;
  }
  return true;
}

TEST(RecurrentState, keeps_state_only_for_flagged_layers_and_starts_zeroed) {
  auto s = RecurrentState::create(small_config());
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_TRUE(s->has_layer(0));
  EXPECT_FALSE(s->has_layer(1));
  EXPECT_TRUE(s->has_layer(2));
  EXPECT_FALSE(s->has_layer(7));
  const size_t per = (3 * 8 + 2 * 4 * 4) * sizeof(float);
  EXPECT_EQ(RecurrentState::bytes_per_layer_seq(small_config()), per);
  EXPECT_EQ(s->bytes(), 2 * 3 * per);
  EXPECT_EQ(RecurrentState::bytes_needed(small_config()), s->bytes());
  for (int seq = 0; seq < 3; ++seq) EXPECT_TRUE(all_equal(*s, seq, 0.0f, 0.0f));
}

TEST(RecurrentState, sequences_and_layers_do_not_share_memory) {
  auto s = RecurrentState::create(small_config());
  ASSERT_TRUE(s.ok());
  fill(*s, 1, 3.0f);
  EXPECT_TRUE(all_equal(*s, 0, 0.0f, 0.0f));
  EXPECT_TRUE(all_equal(*s, 1, 3.0f, 3.5f));
  EXPECT_TRUE(all_equal(*s, 2, 0.0f, 0.0f));
  EXPECT_NE(s->conv(0, 1), s->conv(2, 1));
}

TEST(RecurrentState, clear_zeroes_the_sequence_and_its_position) {
  auto s = RecurrentState::create(small_config());
  ASSERT_TRUE(s.ok());
  fill(*s, 0, 1.0f);
  fill(*s, 2, 2.0f);
  s->set_n_past(0, 7);
  ASSERT_TRUE(s->clear(0).ok());
  EXPECT_EQ(s->n_past(0), 0);
  EXPECT_TRUE(all_equal(*s, 0, 0.0f, 0.0f));
  EXPECT_TRUE(all_equal(*s, 2, 2.0f, 2.5f));
  EXPECT_FALSE(s->clear(3).ok());
  EXPECT_FALSE(s->clear(-1).ok());
}

TEST(RecurrentState, copy_duplicates_state_and_position) {
  auto s = RecurrentState::create(small_config());
  ASSERT_TRUE(s.ok());
  fill(*s, 0, 4.0f);
  s->set_n_past(0, 5);
  ASSERT_TRUE(s->copy(0, 2).ok());
  EXPECT_EQ(s->n_past(2), 5);
  EXPECT_TRUE(all_equal(*s, 2, 4.0f, 4.5f));
  EXPECT_TRUE(s->copy(1, 1).ok());
  EXPECT_FALSE(s->copy(0, 3).ok());
}

TEST(RecurrentState, remove_at_or_past_the_end_is_a_no_op) {
  auto s = RecurrentState::create(small_config());
  ASSERT_TRUE(s.ok());
  fill(*s, 1, 6.0f);
  s->set_n_past(1, 10);
  EXPECT_TRUE(s->remove_from(1, 10).ok());
  EXPECT_TRUE(s->remove_from(1, 1000).ok());
  EXPECT_EQ(s->n_past(1), 10);
  EXPECT_TRUE(all_equal(*s, 1, 6.0f, 6.5f));
}

TEST(RecurrentState, remove_from_zero_clears_the_sequence) {
  auto s = RecurrentState::create(small_config());
  ASSERT_TRUE(s.ok());
  fill(*s, 1, 6.0f);
  s->set_n_past(1, 10);
  EXPECT_TRUE(s->remove_from(1, 0).ok());
  EXPECT_EQ(s->n_past(1), 0);
  EXPECT_TRUE(all_equal(*s, 1, 0.0f, 0.0f));
}

TEST(RecurrentState, partial_rollback_is_an_error_that_changes_nothing) {
  auto s = RecurrentState::create(small_config());
  ASSERT_TRUE(s.ok());
  fill(*s, 1, 6.0f);
  s->set_n_past(1, 10);
  const Status st = s->remove_from(1, 4);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("cannot be rolled back"), std::string::npos) << st.error().message;
  EXPECT_EQ(s->n_past(1), 10);
  EXPECT_TRUE(all_equal(*s, 1, 6.0f, 6.5f));
  EXPECT_FALSE(s->remove_from(1, -1).ok());
  EXPECT_FALSE(s->remove_from(5, 0).ok());
}

TEST(RecurrentState, rejects_a_bad_configuration) {
  RecurrentConfig c = small_config();
  c.layer_has_state.pop_back();
  EXPECT_FALSE(RecurrentState::create(c).ok());
  c = small_config();
  c.n_seq = 0;
  EXPECT_FALSE(RecurrentState::create(c).ok());
}

TEST(RecurrentState, a_checkpoint_brings_back_the_state_and_position_it_saved) {
  RecurrentConfig c = small_config();
  c.n_checkpoints = 2;
  auto s = RecurrentState::create(c);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(RecurrentState::checkpoint_bytes(c), 2 * 3 * 2 * RecurrentState::bytes_per_layer_seq(c));
  EXPECT_EQ(RecurrentState::bytes_needed(c), s->bytes() + RecurrentState::checkpoint_bytes(c));
  fill(*s, 1, 3.0f);
  s->set_n_past(1, 10);
  ASSERT_TRUE(s->save_checkpoint(1).ok());
  fill(*s, 1, 7.0f);
  s->set_n_past(1, 20);
  fill(*s, 2, 9.0f);  // another sequence is untouched by seq 1's checkpoints
  ASSERT_TRUE(s->restore_checkpoint(1, 10).ok());
  EXPECT_EQ(s->n_past(1), 10);
  EXPECT_TRUE(all_equal(*s, 1, 3.0f, 3.5f));
  EXPECT_TRUE(all_equal(*s, 2, 9.0f, 9.5f));
  EXPECT_EQ(s->checkpoint_positions(1), std::vector<int32_t>{10});
  // No checkpoint at 15: nothing changes.
  fill(*s, 1, 4.0f);
  s->set_n_past(1, 30);
  EXPECT_FALSE(s->restore_checkpoint(1, 15).ok());
  EXPECT_EQ(s->n_past(1), 30);
  EXPECT_TRUE(all_equal(*s, 1, 4.0f, 4.5f));
}

TEST(RecurrentState, keeps_at_most_the_planned_checkpoints_and_clear_drops_them) {
  RecurrentConfig c = small_config();
  c.n_checkpoints = 2;
  auto s = RecurrentState::create(c);
  ASSERT_TRUE(s.ok());
  for (int32_t pos : {4, 8}) {
    s->set_n_past(0, pos);
    ASSERT_TRUE(s->save_checkpoint(0).ok());
  }
  s->set_n_past(0, 12);
  const Status full = s->save_checkpoint(0);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.error().code, ErrorCode::kResourceExhausted);
  s->set_n_past(0, 8);
  EXPECT_TRUE(s->save_checkpoint(0).ok()) << "saving at a kept position overwrites it";
  ASSERT_TRUE(s->drop_checkpoint(0, 4).ok());
  EXPECT_EQ(s->checkpoint_positions(0), std::vector<int32_t>{8});
  ASSERT_TRUE(s->clear(0).ok());
  EXPECT_TRUE(s->checkpoint_positions(0).empty());
  EXPECT_FALSE(s->save_checkpoint(5).ok());
  EXPECT_FALSE(s->restore_checkpoint(-1, 0).ok());
}

// Speculation drops a checkpoint and saves the next one every check; the dropped one's buffers are
// reused (bench: a check on a hybrid MoE cost 5 decode steps with a fresh zeroed allocation each time,
// 1.9 with reuse), and what a reused checkpoint brings back is what it saved last, never older data.
TEST(RecurrentState, a_dropped_checkpoint_is_reused_and_restores_only_what_it_saved_last) {
  RecurrentConfig c = small_config();
  c.n_checkpoints = 1;
  auto s = RecurrentState::create(c);
  ASSERT_TRUE(s.ok());
  for (int32_t step = 1; step <= 5; ++step) {
    fill(*s, 0, static_cast<float>(step));
    s->set_n_past(0, 10 * step);
    ASSERT_TRUE(s->save_checkpoint(0).ok()) << "step " << step << ": the dropped one makes room";
    fill(*s, 0, 100.0f);
    s->set_n_past(0, 10 * step + 3);
    ASSERT_TRUE(s->restore_checkpoint(0, 10 * step).ok());
    EXPECT_TRUE(all_equal(*s, 0, static_cast<float>(step), step + 0.5f)) << "step " << step;
    EXPECT_EQ(s->checkpoint_positions(0), std::vector<int32_t>{10 * step});
    ASSERT_TRUE(s->drop_checkpoint(0, 10 * step).ok());
    EXPECT_TRUE(s->checkpoint_positions(0).empty());
    EXPECT_FALSE(s->restore_checkpoint(0, 10 * step).ok()) << "a dropped checkpoint is gone";
  }
}

// A sequence's state and checkpoints copied out come back into another sequence, replacing its own;
// a saved state of another shape, or with more checkpoints than planned, is refused.
TEST(RecurrentState, a_saved_sequence_comes_back_with_its_checkpoints) {
  RecurrentConfig c = small_config();
  c.n_checkpoints = 2;
  auto s = RecurrentState::create(c);
  ASSERT_TRUE(s.ok());
  fill(*s, 0, 1.0f);
  s->set_n_past(0, 4);
  ASSERT_TRUE(s->save_checkpoint(0).ok());
  fill(*s, 0, 2.0f);
  s->set_n_past(0, 9);
  auto saved = s->save_seq(0);
  ASSERT_TRUE(saved.ok());
  EXPECT_EQ(saved->bytes(), 2 * 2 * (conv_floats(c) + ssm_floats(c)) * sizeof(float));  // now + 1 checkpoint, 2 layers
  fill(*s, 2, 7.0f);
  ASSERT_TRUE(s->load_seq(2, *saved).ok());
  EXPECT_EQ(s->n_past(2), 9);
  EXPECT_TRUE(all_equal(*s, 2, 2.0f, 2.5f));
  EXPECT_EQ(s->checkpoint_positions(2), std::vector<int32_t>{4});
  ASSERT_TRUE(s->restore_checkpoint(2, 4).ok());
  EXPECT_TRUE(all_equal(*s, 2, 1.0f, 1.5f));
  SeqState bad = *saved;
  bad.now.conv.pop_back();
  EXPECT_FALSE(s->load_seq(1, bad).ok());
  bad = *saved;
  bad.checkpoints.resize(3, bad.checkpoints[0]);
  EXPECT_FALSE(s->load_seq(1, bad).ok());
}

}  // namespace
}  // namespace strata::memory
