// The gated delta rule: the chunked form agrees with the token-by-token recurrence, and the
// recurrence does what its definition says on a hand-checkable case.
#include "model/delta_rule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace strata::model {
namespace {

struct Inputs {
  int32_t dk, dv;
  std::vector<float> q, k, v, g, beta;
  std::vector<int32_t> rows;
};

void l2(float* x, int n) {
  double s = 0;
  for (int i = 0; i < n; ++i) s += x[i] * x[i];
  for (int i = 0; i < n; ++i) x[i] /= static_cast<float>(std::sqrt(s));
}

// n tokens spread over every other row of a 2n-row batch (the rows of another sequence in between).
Inputs random_inputs(int64_t n, int32_t dk, int32_t dv, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  Inputs in{dk, dv, {}, {}, {}, {}, {}, {}};
  const int64_t rows = 2 * n;
  in.q.resize(rows * dk);
  in.k.resize(rows * dk);
  in.v.resize(rows * dv);
  in.g.resize(rows);
  in.beta.resize(rows);
  for (auto& x : in.q) x = normal(rng);
  for (auto& x : in.k) x = normal(rng);
  for (auto& x : in.v) x = normal(rng);
  for (int64_t r = 0; r < rows; ++r) {
    l2(&in.q[r * dk], dk);
    l2(&in.k[r * dk], dk);
    in.g[r] = -0.05f - 0.6f * unit(rng);  // log-decay, as softplus(...) * -exp(A_log)
    in.beta[r] = unit(rng);
  }
  for (int64_t i = 0; i < n; ++i) in.rows.push_back(static_cast<int32_t>(2 * i + 1));
  return in;
}

DeltaHead head(Inputs& in, std::vector<float>& out) {
  out.assign(in.rows.size() * 2 * in.dv + in.dv, 0.0f);
  return {in.q.data(), in.k.data(), in.dk, in.v.data(), in.dv, in.g.data(), in.beta.data(), 1, out.data(), in.dv};
}

void expect_close(const std::vector<float>& a, const std::vector<float>& b, double tol, const char* what) {
  ASSERT_EQ(a.size(), b.size());
  double max_diff = 0;
  for (size_t i = 0; i < a.size(); ++i) max_diff = std::max(max_diff, std::abs(double{a[i]} - b[i]));
  EXPECT_LE(max_diff, tol) << what;
}

TEST(DeltaRule, one_token_from_zero_state_writes_beta_v_along_k) {
  // S0 = 0: delta = beta v, S = k delta^T, o = scale (k . q) beta v.
  Inputs in{2, 2, {1, 0}, {0.6f, 0.8f}, {2, -4}, {-0.1f}, {0.5f}, {0}};
  std::vector<float> out;
  const DeltaHead h = head(in, out);
  std::vector<float> state(4, 0.0f);
  delta_rule_tokens(h, in.rows.data(), 1, {2, 2, 0.5f}, state.data());
  // S[i][j] = k_i * beta * v_j, stored at j * d_k + i.
  EXPECT_FLOAT_EQ(state[0], 0.6f * 1.0f);
  EXPECT_FLOAT_EQ(state[1], 0.8f * 1.0f);
  EXPECT_FLOAT_EQ(state[2], 0.6f * -2.0f);
  EXPECT_FLOAT_EQ(state[3], 0.8f * -2.0f);
  EXPECT_FLOAT_EQ(out[0], 0.5f * 0.6f * 1.0f);
  EXPECT_FLOAT_EQ(out[1], 0.5f * 0.6f * -2.0f);
}

TEST(DeltaRule, the_state_decays_before_the_update) {
  // beta 0: no write, only the decay e^g.
  Inputs in{2, 2, {1, 0}, {1, 0}, {0, 0}, {std::log(0.5f)}, {0.0f}, {0}};
  std::vector<float> out;
  const DeltaHead h = head(in, out);
  std::vector<float> state = {2, 4, 6, 8};
  delta_rule_tokens(h, in.rows.data(), 1, {2, 2, 1.0f}, state.data());
  EXPECT_FLOAT_EQ(state[0], 1.0f);
  EXPECT_FLOAT_EQ(state[3], 4.0f);
  EXPECT_FLOAT_EQ(out[0], 1.0f);  // S^T q with q = e0: row j's element 0
  EXPECT_FLOAT_EQ(out[1], 3.0f);
}

// The definition, one state row at a time with eight dot-product lanes summed in the fixed tree
// the kernel documents: the kernel's rows side by side must give exactly these bits.
float lanes_dot(const float* a, const float* b, int32_t n) {
  float lane[8] = {};
  for (int32_t i = 0; i < n; ++i) lane[i % 8] += a[i] * b[i];
  return ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
}

void reference_tokens(const Inputs& in, const DeltaShape& shape, std::vector<float>& state, std::vector<float>& out) {
  const int32_t dk = in.dk, dv = in.dv;
  out.assign(2 * in.rows.size() * dv, 0.0f);
  for (int32_t r : in.rows) {
    const float* q = in.q.data() + int64_t{r} * dk;
    const float* k = in.k.data() + int64_t{r} * dk;
    const float decay = std::exp(in.g[r]), beta = in.beta[r];
    for (int32_t j = 0; j < dv; ++j) {
      float* s = state.data() + int64_t{j} * dk;
      for (int32_t c = 0; c < dk; ++c) s[c] *= decay;
      const float delta = (in.v[int64_t{r} * dv + j] - lanes_dot(s, k, dk)) * beta;
      for (int32_t c = 0; c < dk; ++c) s[c] += k[c] * delta;
      out[int64_t{r} * dv + j] = lanes_dot(s, q, dk) * shape.scale;
    }
  }
}

TEST(DeltaRule, token_by_token_gives_the_one_row_definition_bit_for_bit) {
  // 128 x 128 (Qwen3.5/3.6 heads), rows in groups of 8 and blocks of 32 carried through runs of 64
  // tokens (150: two whole runs and a part); 24 x 13 and 12 x 20 take the remainders. Every vector
  // build the CPU runs (AVX2 and the baseline) gives the definition's bits.
  for (const auto& [dk, dv, n] : {std::tuple{128, 128, 150}, std::tuple{24, 13, 37}, std::tuple{12, 20, 37}}) {
    Inputs in = random_inputs(n, dk, dv, static_cast<uint32_t>(dk * 7 + dv));
    std::mt19937 rng(11);
    std::normal_distribution<float> normal(0.0f, 0.3f);
    std::vector<float> s0(static_cast<size_t>(dk) * dv);
    for (auto& x : s0) x = normal(rng);
    const DeltaShape shape{dk, dv, 1.0f / std::sqrt(static_cast<float>(dk))};
    std::vector<float> want_out, want_state = s0;
    reference_tokens(in, shape, want_state, want_out);
    for (const tensor::Isa isa : {tensor::Isa::Scalar, tensor::Isa::Avx2}) {
      if (isa > tensor::best_isa()) continue;
      SCOPED_TRACE(std::string(tensor::isa_name(isa)) + " " + std::to_string(dk) + "x" + std::to_string(dv));
      std::vector<float> out, state = s0;
      const DeltaHead h = head(in, out);
      delta_rule_tokens(h, in.rows.data(), n, shape, state.data(), isa);
      for (size_t i = 0; i < state.size(); ++i) ASSERT_EQ(state[i], want_state[i]) << "state " << i;
      for (int32_t r : in.rows) {
        for (int32_t j = 0; j < dv; ++j) ASSERT_EQ(out[int64_t{r} * dv + j], want_out[int64_t{r} * dv + j]) << "row " << r;
      }
    }
  }
}

class DeltaRuleChunks : public ::testing::TestWithParam<std::tuple<int64_t, int32_t>> {};

TEST_P(DeltaRuleChunks, chunked_form_matches_token_by_token) {
  const auto [n, chunk] = GetParam();
  const int32_t dk = 16, dv = 16;
  Inputs in = random_inputs(n, dk, dv, static_cast<uint32_t>(n * 131 + chunk));
  // A non-zero incoming state, as in the middle of a prompt.
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.3f);
  std::vector<float> s0(dk * dv);
  for (auto& x : s0) x = normal(rng);
  const DeltaShape shape{dk, dv, 1.0f / std::sqrt(16.0f)};

  std::vector<float> out_tokens, out_chunks, work;
  std::vector<float> s_tokens = s0, s_chunks = s0;
  const DeltaHead a = head(in, out_tokens);
  delta_rule_tokens(a, in.rows.data(), n, shape, s_tokens.data());
  const DeltaHead b = head(in, out_chunks);
  delta_rule_chunked(b, in.rows.data(), n, shape, s_chunks.data(), chunk, work);
  expect_close(out_tokens, out_chunks, 2e-5, "outputs");
  expect_close(s_tokens, s_chunks, 2e-5, "final state");
  // Rows of the other sequence are untouched.
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(out_chunks[2 * i * dv], 0.0f);
}

INSTANTIATE_TEST_SUITE_P(Lengths, DeltaRuleChunks,
                         ::testing::Values(std::tuple<int64_t, int32_t>{1, 64}, std::tuple<int64_t, int32_t>{2, 64},
                                           std::tuple<int64_t, int32_t>{17, 64}, std::tuple<int64_t, int32_t>{64, 64},
                                           std::tuple<int64_t, int32_t>{65, 64}, std::tuple<int64_t, int32_t>{150, 64},
                                           std::tuple<int64_t, int32_t>{40, 7}, std::tuple<int64_t, int32_t>{9, 1}));

}  // namespace
}  // namespace strata::model
