// IMRoPE: ggml's interleaved sector rule mapping rotary pairs to the t/h/w/e position streams, and
// the angles it gives, against hand-computed values.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "model/ops.h"

namespace strata::model {
namespace {

constexpr int T = 0, H = 1, W = 2, E = 3;

std::vector<int> streams(const std::vector<int32_t>& s, int n_pairs) {
  const int32_t sections[4] = {s[0], s[1], s[2], s[3]};
  std::vector<int> out;
  for (int j = 0; j < n_pairs; ++j) out.push_back(imrope_stream(j, sections));
  return out;
}

HParams imrope_hparams(int32_t n_rot, std::vector<int32_t> sections) {
  HParams hp;
  hp.rope_type = RopeType::IMrope;
  hp.n_rot = n_rot;
  hp.rope_base = 10000.0f;
  for (int i = 0; i < 4; ++i) hp.rope_sections[i] = sections[i];
  return hp;
}

TEST(ImRope, sections_3_3_2_0_deal_pairs_to_t_h_w_in_turn) {
  // The synthetic qwen35 models: 8 pairs, sector = pair % 8.
  EXPECT_EQ(streams({3, 3, 2, 0}, 8), (std::vector<int>{T, H, W, T, H, W, T, H}));
}

TEST(ImRope, converter_default_sections_cover_all_32_pairs_with_t_h_w) {
  const std::vector<int> s = streams({11, 11, 10, 0}, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(s[j], j % 3) << "pair " << j;
}

TEST(ImRope, sectors_beyond_a_streams_share_fall_to_e) {
  // Sections (1, 1, 1, 1), 4 sectors: sectors 0, 1, 2 -> t, h, w; sector 3 is 0 mod 3 but not
  // below 3 * 1, so it reads the e stream. The pattern repeats every 4 pairs.
  EXPECT_EQ(streams({1, 1, 1, 1}, 8), (std::vector<int>{T, H, W, E, T, H, W, E}));
  // Sections (2, 1, 1, 2), 6 sectors: 0 t, 1 h, 2 w, 3 t (3 < 6), 4 e (h's share ends at 3), 5 e.
  EXPECT_EQ(streams({2, 1, 1, 2}, 6), (std::vector<int>{T, H, W, T, E, E}));
  // Sections (1, 2, 0, 1), 4 sectors: 0 t, 1 h, 2 e (w has none), 3 e (t's share ends at 3).
  EXPECT_EQ(streams({1, 2, 0, 1}, 4), (std::vector<int>{T, H, E, E}));
}

TEST(ImRope, text_positions_rotate_t_h_w_pairs_by_the_position_and_e_pairs_not_at_all) {
  // n_rot 8 (4 pairs), sections (1, 1, 1, 1): pair 3 is an e pair.
  const HParams hp = imrope_hparams(8, {1, 1, 1, 1});
  RopeAngles a;
  a.compute(hp, 5, nullptr);
  ASSERT_EQ(a.n_pairs, 4);
  for (int j = 0; j < 3; ++j) {
    const double theta = 5.0 * std::pow(10000.0, -2.0 * j / 8.0);
    EXPECT_NEAR(a.cos[j], std::cos(theta), 1e-5) << "pair " << j;
    EXPECT_NEAR(a.sin[j], std::sin(theta), 1e-5) << "pair " << j;
  }
  EXPECT_EQ(a.cos[3], 1.0f);
  EXPECT_EQ(a.sin[3], 0.0f);
}

TEST(ImRope, each_pair_uses_its_own_streams_position) {
  const HParams hp = imrope_hparams(8, {1, 1, 1, 1});
  const int32_t pos[4] = {2, 3, 7, 11};  // t, h, w, e
  RopeAngles a;
  a.compute_multi(hp, pos, nullptr);
  for (int j = 0; j < 4; ++j) {
    const double theta = pos[j] * std::pow(10000.0, -2.0 * j / 8.0);  // pair j reads stream j here
    EXPECT_NEAR(a.cos[j], std::cos(theta), 1e-5) << "pair " << j;
    EXPECT_NEAR(a.sin[j], std::sin(theta), 1e-5) << "pair " << j;
  }
}

TEST(ImRope, with_full_t_h_w_coverage_text_imrope_equals_neox) {
  HParams im = imrope_hparams(16, {3, 3, 2, 0});
  HParams neox = im;
  neox.rope_type = RopeType::Neox;
  RopeAngles a, b;
  a.compute(im, 37, nullptr);
  b.compute(neox, 37, nullptr);
  for (int j = 0; j < 8; ++j) {
    EXPECT_EQ(a.cos[j], b.cos[j]);
    EXPECT_EQ(a.sin[j], b.sin[j]);
  }
}

TEST(ImRope, partial_rotary_pairs_j_with_j_plus_half_and_leaves_the_tail_alone) {
  // head_dim 8, n_rot 4: pairs (0, 2) and (1, 3) rotate; dims 4..7 pass through.
  const HParams hp = imrope_hparams(4, {1, 1, 0, 0});
  RopeAngles a;
  a.compute(hp, 1, nullptr);
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8};
  apply_rope(RopeType::IMrope, x.data(), 1, 8, 4, a);
  const double t0 = 1.0, t1 = std::pow(10000.0, -0.5);
  EXPECT_NEAR(x[0], 1 * std::cos(t0) - 3 * std::sin(t0), 1e-5);
  EXPECT_NEAR(x[2], 1 * std::sin(t0) + 3 * std::cos(t0), 1e-5);
  EXPECT_NEAR(x[1], 2 * std::cos(t1) - 4 * std::sin(t1), 1e-5);
  EXPECT_NEAR(x[3], 2 * std::sin(t1) + 4 * std::cos(t1), 1e-5);
  EXPECT_EQ(x[4], 5);
  EXPECT_EQ(x[7], 8);
}

}  // namespace
}  // namespace strata::model
