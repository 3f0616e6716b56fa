// MoE routing: softmax over all experts, top-k with ties to the lower index, weights renormalized
// with llama.cpp's clamp.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "model/moe.h"

namespace strata::model {
namespace {

struct Route {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

Route route(const std::vector<float>& logits, int32_t k) {
  Route r{std::vector<int32_t>(k), std::vector<float>(k)};
  route_experts(logits.data(), static_cast<int32_t>(logits.size()), k, r.ids.data(), r.weights.data());
  return r;
}

TEST(MoeRouting, picks_the_k_most_probable_experts_highest_first) {
  const Route r = route({0.5f, 3.0f, -1.0f, 2.0f, 1.0f}, 3);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{1, 3, 4}));
}

TEST(MoeRouting, renormalizes_the_chosen_probabilities_to_sum_to_one) {
  // logits 1, 2, 3, 4, top 2: experts 3 and 2 with weights e^4 / (e^4 + e^3) and e^3 / (e^4 + e^3).
  const Route r = route({1.0f, 2.0f, 3.0f, 4.0f}, 2);
  ASSERT_EQ(r.ids, (std::vector<int32_t>{3, 2}));
  const double w0 = 1.0 / (1.0 + std::exp(-1.0));
  EXPECT_NEAR(r.weights[0], w0, 1e-6);        // 0.7310586
  EXPECT_NEAR(r.weights[1], 1.0 - w0, 1e-6);  // 0.2689414
  EXPECT_NEAR(r.weights[0] + r.weights[1], 1.0, 1e-6);
}

TEST(MoeRouting, renormalization_is_over_the_chosen_experts_only) {
  // softmax of (0, ln 2, ln 3, ln 4) is (0.1, 0.2, 0.3, 0.4); top 3 renormalized over 0.9.
  const Route r = route({0.0f, std::log(2.0f), std::log(3.0f), std::log(4.0f)}, 3);
  ASSERT_EQ(r.ids, (std::vector<int32_t>{3, 2, 1}));
  EXPECT_NEAR(r.weights[0], 0.4 / 0.9, 1e-6);
  EXPECT_NEAR(r.weights[1], 0.3 / 0.9, 1e-6);
  EXPECT_NEAR(r.weights[2], 0.2 / 0.9, 1e-6);
}

TEST(MoeRouting, ties_go_to_the_lower_expert_index) {
  const Route r = route({1.0f, 5.0f, 2.0f, 5.0f, 5.0f}, 2);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{1, 3}));
  EXPECT_FLOAT_EQ(r.weights[0], 0.5f);
  EXPECT_FLOAT_EQ(r.weights[1], 0.5f);
  const Route all_equal = route(std::vector<float>(8, 0.25f), 3);
  EXPECT_EQ(all_equal.ids, (std::vector<int32_t>{0, 1, 2}));
}

TEST(MoeRouting, a_single_expert_gets_weight_one) {
  const Route r = route({0.1f, -2.0f, 0.3f}, 1);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{2}));
  EXPECT_FLOAT_EQ(r.weights[0], 1.0f);
}

TEST(MoeRouting, a_tiny_chosen_mass_is_divided_by_the_clamp_not_its_sum) {
  // 20000 equal experts: each has p = 5e-5, below the 6.103515625e-5 floor of the sum.
  const Route r = route(std::vector<float>(20000, 0.0f), 1);
  EXPECT_EQ(r.ids[0], 0);
  EXPECT_NEAR(r.weights[0], 5e-5 / 6.103515625e-5, 1e-4);  // 0.8192, not 1
}

TEST(MoeRouting, choosing_every_expert_returns_the_softmax) {
  const Route r = route({0.0f, 1.0f}, 2);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{1, 0}));
  EXPECT_NEAR(r.weights[0], 1.0 / (1.0 + std::exp(-1.0)), 1e-6);
}

}  // namespace
}  // namespace strata::model
