#include "sampling/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

namespace strata::sampling {
namespace {

// temp 1 and every truncation off: candidates() then shows the penalized logits in id order.
Params plain(uint32_t seed = 1234) {
  Params p;
  p.temp = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = seed;
  return p;
}

std::vector<int32_t> ids_of(std::span<const Candidate> c) {
  std::vector<int32_t> ids;
  for (const auto& x : c) ids.push_back(x.id);
  return ids;
}

std::vector<float> random_logits(size_t n, uint32_t seed, float scale = 3.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

int32_t argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());  // first max
}

TEST(SamplerDefaults, MatchLlamaCpp) {
  Params p;
  EXPECT_FLOAT_EQ(p.temp, 0.8f);
  EXPECT_EQ(p.top_k, 40);
  EXPECT_FLOAT_EQ(p.top_p, 0.95f);
  EXPECT_FLOAT_EQ(p.min_p, 0.05f);
  EXPECT_EQ(p.penalty_last_n, 64);
  EXPECT_FLOAT_EQ(p.repeat_penalty, 1.0f);
  EXPECT_FLOAT_EQ(p.frequency_penalty, 0.0f);
  EXPECT_FLOAT_EQ(p.presence_penalty, 0.0f);
  EXPECT_EQ(p.seed, 0xFFFFFFFFu);
  EXPECT_TRUE(validate(p).ok());
}

// ---- greedy ----

TEST(SamplerGreedy, PicksArgmax) {
  Params p = plain();
  p.temp = 0.0f;
  std::vector<float> logits = {0.1f, -2.0f, 3.5f, 3.4f, 1.0f};
  Sampler s(p, 5);
  EXPECT_EQ(s.sample(logits), 2);
  ASSERT_EQ(s.candidates().size(), 1u);
  EXPECT_EQ(s.candidates()[0].id, 2);
  EXPECT_FLOAT_EQ(s.candidates()[0].p, 1.0f);
}

TEST(SamplerGreedy, LowestIdWinsTies) {
  Params p = plain();
  p.temp = -1.0f;  // any temp <= 0 is greedy
  std::vector<float> logits = {1.0f, 7.0f, 2.0f, 7.0f, 7.0f};
  Sampler s(p, 5);
  EXPECT_EQ(s.sample(logits), 1);
}

TEST(SamplerGreedy, IgnoresTruncationAndUsesPenalizedLogits) {
  Params p;  // default truncation
  p.temp = 0.0f;
  p.repeat_penalty = 2.0f;
  Sampler s(p, 3);
  std::vector<float> logits = {5.0f, 4.0f, -1.0f};
  EXPECT_EQ(s.sample(logits), 0);
  s.accept(0);  // 5 / 2 = 2.5 < 4
  EXPECT_EQ(s.sample(logits), 1);
}

TEST(SamplerGreedy, TopK1EqualsGreedyAtAnyTemperature) {
  for (float temp : {0.05f, 0.8f, 1.0f, 5.0f, 1000.0f}) {
    Params p = plain(7);
    p.top_k = 1;
    p.temp = temp;
    Sampler s(p, 512);
    for (uint32_t row = 0; row < 20; ++row) {
      auto logits = random_logits(512, row);
      EXPECT_EQ(s.sample(logits), argmax(logits)) << "temp " << temp << " row " << row;
    }
  }
  Params p = plain();
  p.top_k = 1;
  Sampler s(p, 4);
  std::vector<float> ties = {0.0f, 2.0f, 2.0f, 1.0f};
  EXPECT_EQ(s.sample(ties), 1);
}

// ---- seeds / distribution ----

std::vector<int32_t> draw_sequence(const Params& p, const std::vector<float>& logits, int n) {
  Sampler s(p, static_cast<int32_t>(logits.size()));
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) out.push_back(s.sample(logits));
  return out;
}

TEST(SamplerSeed, SameSeedSameSequenceDifferentSeedDifferent) {
  std::vector<float> logits = {0.0f, 0.2f, 0.4f, 0.1f, 0.3f, 0.0f, 0.5f, 0.25f};
  const auto a = draw_sequence(plain(42), logits, 64);
  const auto b = draw_sequence(plain(42), logits, 64);
  const auto c = draw_sequence(plain(43), logits, 64);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(SamplerSeed, ExplicitSeedIsReportedAndResetRestartsTheSequence) {
  std::vector<float> logits = {0.0f, 0.2f, 0.4f, 0.1f};
  Sampler s(plain(99), 4);
  EXPECT_EQ(s.seed(), 99u);
  std::vector<int32_t> first, second;
  for (int i = 0; i < 32; ++i) first.push_back(s.sample(logits));
  s.reset();
  EXPECT_EQ(s.seed(), 99u);
  for (int i = 0; i < 32; ++i) second.push_back(s.sample(logits));
  EXPECT_EQ(first, second);
}

// llama.cpp's dist: p_i = exp(l_i - max) in float, double running sum, one
// uniform_real_distribution<double> draw from mt19937 per token, first index whose running sum
// reaches u * sum, in candidate order (id order when nothing sorted them).
TEST(SamplerSeed, DistMatchesReferenceInverseCdf) {
  const auto logits = random_logits(100, 5, 1.0f);
  std::mt19937 rng(2024);
  const float m = *std::max_element(logits.begin(), logits.end());
  std::vector<float> w(logits.size());
  double sum = 0.0;
  for (size_t i = 0; i < w.size(); ++i) {
    w[i] = std::exp(logits[i] - m);
    sum += w[i];
  }
  Sampler s(plain(2024), 100);
  for (int draw = 0; draw < 200; ++draw) {
    std::uniform_real_distribution<double> u(0.0, 1.0);
    const double target = sum * u(rng);
    double run = 0.0;
    int32_t expected = 99;
    for (size_t i = 0; i < w.size(); ++i) {
      run += w[i];
      if (run >= target) {
        expected = static_cast<int32_t>(i);
        break;
      }
    }
    ASSERT_EQ(s.sample(logits), expected) << "draw " << draw;
  }
}

TEST(SamplerDistribution, EmpiricalFrequenciesMatchSoftmax) {
  const std::vector<float> logits = {1.0f, 0.5f, 0.0f, -0.5f, -1.0f, 2.0f, -3.0f, 0.25f};
  std::vector<double> prob(logits.size());
  double z = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) z += std::exp(static_cast<double>(logits[i]));
  for (size_t i = 0; i < logits.size(); ++i) prob[i] = std::exp(static_cast<double>(logits[i])) / z;

  constexpr int kDraws = 100000;
  Sampler s(plain(31337), static_cast<int32_t>(logits.size()));
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < kDraws; ++i) ++counts[static_cast<size_t>(s.sample(logits))];

  double chi2 = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const double freq = static_cast<double>(counts[i]) / kDraws;
    const double sigma = std::sqrt(prob[i] * (1.0 - prob[i]) / kDraws);
    EXPECT_NEAR(freq, prob[i], 5.0 * sigma) << "token " << i;
    const double expected = prob[i] * kDraws;
    chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  // 7 degrees of freedom: P(chi2 > 24.3) ~ 0.001.
  EXPECT_LT(chi2, 24.3);
}

TEST(SamplerDistribution, ReportedProbabilitiesAreTheSoftmax) {
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f};
  Sampler s(plain(), 3);
  (void)s.sample(logits);
  auto c = s.candidates();
  ASSERT_EQ(c.size(), 3u);
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  for (const auto& x : c) EXPECT_NEAR(x.p, std::exp(static_cast<double>(logits[static_cast<size_t>(x.id)])) / z, 1e-6);
}

// ---- top_k ----

TEST(SamplerTopK, KeepsTheKHighestSortedOnALargeVocab) {
  constexpr int32_t kVocab = 150000;
  const auto logits = random_logits(kVocab, 11);
  Params p = plain();
  p.top_k = 40;
  Sampler s(p, kVocab);
  const int32_t tok = s.sample(logits);

  std::vector<int32_t> order(kVocab);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + 40, order.end(),
                    [&](int32_t a, int32_t b) { return logits[size_t(a)] > logits[size_t(b)]; });
  order.resize(40);
  EXPECT_EQ(ids_of(s.candidates()), order);
  EXPECT_NE(std::find(order.begin(), order.end(), tok), order.end());
}

TEST(SamplerTopK, NonPositiveOrOversizedKeepsEverything) {
  const std::vector<float> logits = {0.5f, 1.5f, -0.5f};
  for (int32_t k : {0, -1, 3, 100}) {
    Params p = plain();
    p.top_k = k;
    Sampler s(p, 3);
    (void)s.sample(logits);
    EXPECT_EQ(s.candidates().size(), 3u) << "k " << k;
  }
}

TEST(SamplerTopK, TiesAtTheCutKeepTheLowestIds) {
  std::vector<float> logits(2000, 0.0f);
  logits[1500] = 1.0f;
  Params p = plain();
  p.top_k = 4;
  Sampler s(p, 2000);
  (void)s.sample(logits);
  EXPECT_EQ(ids_of(s.candidates()), (std::vector<int32_t>{1500, 0, 1, 2}));
}

TEST(SamplerRobustness, NanLogitsAreNeverPicked) {
  std::vector<float> logits = random_logits(3000, 17);
  for (size_t i = 0; i < logits.size(); i += 3) logits[i] = std::nanf("");
  for (int32_t top_k : {0, 1, 40, 5000}) {
    for (float temp : {0.0f, 1.0f}) {
      Params p;
      p.top_k = top_k;
      p.temp = temp;
      p.seed = 8;
      Sampler s(p, 3000);
      for (int i = 0; i < 20; ++i) {
        const int32_t t = s.sample(logits);
        ASSERT_GE(t, 0);
        ASSERT_FALSE(std::isnan(logits[size_t(t)])) << "top_k " << top_k << " temp " << temp;
      }
    }
  }
}

// ---- top_p ----

TEST(SamplerTopP, KeepsSmallestPrefixReachingP) {
  // Probabilities 0.5, 0.3, 0.15, 0.05 placed at ids 2, 0, 3, 1.
  std::vector<float> logits(4);
  logits[2] = std::log(0.5f);
  logits[0] = std::log(0.3f);
  logits[3] = std::log(0.15f);
  logits[1] = std::log(0.05f);
  const std::vector<int32_t> by_prob = {2, 0, 3, 1};
  struct Case {
    float top_p;
    size_t kept;
  };
  for (Case c : {Case{0.0f, 1}, Case{0.49f, 1}, Case{0.51f, 2}, Case{0.79f, 2}, Case{0.81f, 3},
                 Case{0.94f, 3}, Case{0.96f, 4}, Case{1.0f, 4}}) {
    Params p = plain();
    p.top_p = c.top_p;
    Sampler s(p, 4);
    (void)s.sample(logits);
    auto ids = ids_of(s.candidates());
    if (c.top_p < 1.0f) {
      EXPECT_EQ(ids, std::vector<int32_t>(by_prob.begin(), by_prob.begin() + long(c.kept))) << "top_p " << c.top_p;
    } else {
      EXPECT_EQ(ids.size(), 4u);  // top_p = 1 is off: nothing sorted, nothing dropped
    }
  }
}

TEST(SamplerTopP, LargeUnsortedVocabBeyondTheSortedHead) {
  // 3000 candidates, no top_k, with a flat-ish distribution so top_p needs far more than 256.
  constexpr int32_t kVocab = 3000;
  std::vector<int32_t> perm(kVocab);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(3));
  std::vector<float> logits(kVocab);
  for (int32_t r = 0; r < kVocab; ++r) logits[size_t(perm[size_t(r)])] = -0.001f * static_cast<float>(r);

  // Expected cut computed in double; top_p is chosen away from a step boundary.
  double z = 0.0;
  for (int32_t r = 0; r < kVocab; ++r) z += std::exp(-0.001 * r);
  const float top_p = 0.6f;
  size_t expected = 0;
  double cum = 0.0;
  while (cum < top_p) cum += std::exp(-0.001 * static_cast<double>(expected++)) / z;
  ASSERT_GT(cum - top_p, 1e-5);
  ASSERT_GT(expected, 256u);

  Params p = plain();
  p.top_p = top_p;
  Sampler s(p, kVocab);
  (void)s.sample(logits);
  EXPECT_EQ(ids_of(s.candidates()), std::vector<int32_t>(perm.begin(), perm.begin() + long(expected)));
}

// ---- min_p ----

TEST(SamplerMinP, KeepsTokensWithProbabilityAtLeastPTimesTheMax) {
  // Probabilities relative to the best: 1, 0.5, 0.1, 0.04 at ids 0..3.
  const std::vector<float> logits = {0.0f, std::log(0.5f), std::log(0.1f), std::log(0.04f)};
  struct Case {
    float min_p;
    size_t kept;
  };
  for (Case c : {Case{0.0f, 4}, Case{0.03f, 4}, Case{0.05f, 3}, Case{0.3f, 2}, Case{0.6f, 1}, Case{1.0f, 1}}) {
    for (int32_t top_k : {0, 3, 4}) {  // unsorted and sorted paths agree
      Params p = plain();
      p.min_p = c.min_p;
      p.top_k = top_k;
      Sampler s(p, 4);
      (void)s.sample(logits);
      const size_t want = top_k > 0 ? std::min(c.kept, size_t(top_k)) : c.kept;
      const std::vector<int32_t> all = {0, 1, 2, 3};
      EXPECT_EQ(ids_of(s.candidates()), std::vector<int32_t>(all.begin(), all.begin() + long(want)))
          << "min_p " << c.min_p << " top_k " << top_k;
    }
  }
}

// ---- temperature ----

TEST(SamplerTemperature, AppliedAfterTopP) {
  // Untempered softmax of {2, 1, 0} is {0.665, 0.245, 0.090}: top_p 0.7 keeps two. Tempering first
  // (temp 100) would make it nearly uniform and keep all three.
  const std::vector<float> logits = {2.0f, 1.0f, 0.0f};
  Params p = plain();
  p.top_p = 0.7f;
  p.temp = 100.0f;
  Sampler s(p, 3);
  for (int i = 0; i < 200; ++i) ASSERT_NE(s.sample(logits), 2);
  auto c = s.candidates();
  ASSERT_EQ(ids_of(c), (std::vector<int32_t>{0, 1}));
  EXPECT_FLOAT_EQ(c[0].logit, 0.02f);
  EXPECT_FLOAT_EQ(c[1].logit, 0.01f);
  EXPECT_NEAR(c[0].p, 1.0 / (1.0 + std::exp(-0.01)), 1e-6);
}

TEST(SamplerTemperature, AppliedAfterMinPAndTopK) {
  // exp(-3) = 0.0498 < min_p 0.1: token 1 goes, although at temp 100 it would be nearly as likely.
  const std::vector<float> logits = {0.0f, -3.0f};
  Params p = plain();
  p.min_p = 0.1f;
  p.temp = 100.0f;
  Sampler s(p, 2);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(s.sample(logits), 0);
  EXPECT_EQ(s.candidates().size(), 1u);
}

TEST(SamplerTemperature, ScalesTheDistribution) {
  const std::vector<float> logits = {1.0f, 0.0f};
  Params p = plain();
  p.temp = 0.5f;
  Sampler s(p, 2);
  (void)s.sample(logits);
  auto c = s.candidates();
  ASSERT_EQ(c.size(), 2u);
  EXPECT_FLOAT_EQ(c[0].logit, 2.0f);
  EXPECT_NEAR(c[0].p, 1.0 / (1.0 + std::exp(-2.0)), 1e-6);
}

// ---- penalties ----

std::vector<float> penalized(const Params& p, const std::vector<float>& logits, const std::vector<int32_t>& history) {
  Sampler s(p, static_cast<int32_t>(logits.size()));
  for (int32_t t : history) s.accept(t);
  (void)s.sample(logits);
  std::vector<float> out(logits.size());
  for (const auto& c : s.candidates()) out[size_t(c.id)] = c.logit;
  return out;
}

TEST(SamplerPenalties, RepeatFrequencyPresenceFormulas) {
  Params p = plain();
  p.repeat_penalty = 2.0f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  const std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f, 0.0f};
  // counts: 0 -> 2, 1 -> 1, 4 -> 1
  const auto out = penalized(p, logits, {0, 1, 0, 4});
  EXPECT_FLOAT_EQ(out[0], 2.0f / 2.0f - (2 * 0.5f + 0.25f));   // positive: divided
  EXPECT_FLOAT_EQ(out[1], -1.0f * 2.0f - (1 * 0.5f + 0.25f));  // negative: multiplied
  EXPECT_FLOAT_EQ(out[2], 0.5f);                               // unseen
  EXPECT_FLOAT_EQ(out[3], 3.0f);
  EXPECT_FLOAT_EQ(out[4], 0.0f * 2.0f - (1 * 0.5f + 0.25f));   // zero counts as non-positive
}

TEST(SamplerPenalties, RepeatPenaltyAlone) {
  Params p = plain();
  p.repeat_penalty = 1.25f;
  const auto out = penalized(p, {4.0f, -4.0f, 1.0f}, {0, 1, 0});
  EXPECT_FLOAT_EQ(out[0], 3.2f);
  EXPECT_FLOAT_EQ(out[1], -5.0f);
  EXPECT_FLOAT_EQ(out[2], 1.0f);
}

TEST(SamplerPenalties, OnlyTheLastNTokensCount) {
  Params p = plain();
  p.penalty_last_n = 2;
  p.frequency_penalty = 1.0f;
  // window is {0, 4}: the first 0 and the 1 have left it
  const auto out = penalized(p, {0.0f, 0.0f, 0.0f, 0.0f, 0.0f}, {0, 1, 0, 4});
  EXPECT_FLOAT_EQ(out[0], -1.0f);
  EXPECT_FLOAT_EQ(out[1], 0.0f);
  EXPECT_FLOAT_EQ(out[4], -1.0f);
}

TEST(SamplerPenalties, LastNZeroDisablesAndMinusOneUsesWholeHistory) {
  Params p = plain();
  p.frequency_penalty = 1.0f;
  p.penalty_last_n = 0;
  EXPECT_FLOAT_EQ(penalized(p, {0.0f, 0.0f}, {0, 0, 0})[0], 0.0f);
  p.penalty_last_n = -1;
  std::vector<int32_t> history(500, 1);
  history.push_back(0);
  const auto out = penalized(p, {0.0f, 0.0f}, history);
  EXPECT_FLOAT_EQ(out[0], -1.0f);
  EXPECT_FLOAT_EQ(out[1], -500.0f);
}

TEST(SamplerPenalties, ResetClearsHistory) {
  Params p = plain();
  p.presence_penalty = 1.0f;
  Sampler s(p, 2);
  s.accept(0);
  s.reset();
  (void)s.sample(std::vector<float>{1.0f, 1.0f});
  for (const auto& c : s.candidates()) EXPECT_FLOAT_EQ(c.logit, 1.0f);
}

// ---- logprobs ----

TEST(SamplerLogprobs, TopLogprobsAreLogSoftmaxOfRawLogits) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f};
  const double lse = std::log(std::exp(1.0) + 2 * std::exp(3.0) + std::exp(2.0));
  auto top = Sampler::top_logprobs(logits, 3);
  ASSERT_EQ(ids_of(top), (std::vector<int32_t>{1, 3, 2}));  // tie: lower id first
  EXPECT_NEAR(top[0].p, 3.0 - lse, 1e-6);
  EXPECT_NEAR(top[2].p, 2.0 - lse, 1e-6);
  EXPECT_FLOAT_EQ(top[2].logit, 2.0f);
  EXPECT_EQ(Sampler::top_logprobs(logits, 10).size(), 4u);
  EXPECT_TRUE(Sampler::top_logprobs(logits, 0).empty());
}

// ---- validation ----

TEST(SamplerValidate, RejectsOutOfRangeNamingTheParameter) {
  const float nan = std::nanf("");
  const float inf = INFINITY;
  struct Case {
    Params p;
    const char* name;
  };
  std::vector<Case> cases;
  auto with = [](auto set) {
    Params p;
    set(p);
    return p;
  };
  cases.push_back({with([&](Params& p) { p.temp = nan; }), "temp"});
  cases.push_back({with([&](Params& p) { p.temp = inf; }), "temp"});
  cases.push_back({with([&](Params& p) { p.top_p = 1.5f; }), "top_p"});
  cases.push_back({with([&](Params& p) { p.top_p = -0.1f; }), "top_p"});
  cases.push_back({with([&](Params& p) { p.top_p = nan; }), "top_p"});
  cases.push_back({with([&](Params& p) { p.min_p = 1.01f; }), "min_p"});
  cases.push_back({with([&](Params& p) { p.min_p = -0.5f; }), "min_p"});
  cases.push_back({with([&](Params& p) { p.min_p = nan; }), "min_p"});
  cases.push_back({with([&](Params& p) { p.penalty_last_n = -2; }), "penalty_last_n"});
  cases.push_back({with([&](Params& p) { p.repeat_penalty = -1.0f; }), "repeat_penalty"});
  cases.push_back({with([&](Params& p) { p.repeat_penalty = 0.0f; }), "repeat_penalty"});
  cases.push_back({with([&](Params& p) { p.repeat_penalty = nan; }), "repeat_penalty"});
  cases.push_back({with([&](Params& p) { p.frequency_penalty = inf; }), "frequency_penalty"});
  cases.push_back({with([&](Params& p) { p.presence_penalty = nan; }), "presence_penalty"});
  for (const auto& c : cases) {
    auto st = validate(c.p);
    ASSERT_FALSE(st.ok()) << c.name;
    EXPECT_NE(st.error().message.find(c.name), std::string::npos) << st.error().message;
  }
}

TEST(SamplerValidate, AcceptsEdgeValues) {
  Params p;
  p.temp = -1.0f;  // greedy
  p.top_k = -5;    // off
  p.top_p = 0.0f;
  p.min_p = 1.0f;
  p.penalty_last_n = -1;
  p.frequency_penalty = -2.0f;  // negative frequency/presence encourage repetition; allowed
  p.presence_penalty = -2.0f;
  p.repeat_penalty = 0.5f;
  EXPECT_TRUE(validate(p).ok());
}

}  // namespace
}  // namespace strata::sampling
