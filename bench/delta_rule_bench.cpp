// The gated delta rule of one value head over a prompt: token by token (what every batch runs, so a
// prompt resumed from a state checkpoint matches a fresh run bit for bit) against the chunked form,
// in one run so the ratio is meaningful. One thread. Qwen3.5/3.6 heads: d_k = d_v = 128.
//   delta_rule/<tokens|chunked>/tokens:<prompt rows>
// GFLOP/s counts 8 d_k d_v flops per token (decay, S^T k, rank-1 update, S^T q).
//
//   ./strata_microbench --benchmark_filter='delta_rule'
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <vector>

#include "model/delta_rule.h"

namespace strata::model {
namespace {

struct HeadInputs {
  std::vector<float> q, k, v, g, beta, out, state;
  std::vector<int32_t> rows;
};

HeadInputs inputs(int64_t n, int32_t d) {
  HeadInputs in;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto fill = [&](std::vector<float>& x, size_t size, float scale) {
    x.resize(size);
    for (float& f : x) f = normal(rng) * scale;
  };
  fill(in.q, n * d, 1.0f / std::sqrt(float(d)));
  fill(in.k, n * d, 1.0f / std::sqrt(float(d)));
  fill(in.v, n * d, 1.0f);
  in.g.assign(n, -0.05f);
  in.beta.assign(n, 0.5f);
  in.out.assign(n * d, 0.0f);
  in.state.assign(size_t(d) * d, 0.0f);
  for (int64_t i = 0; i < n; ++i) in.rows.push_back(static_cast<int32_t>(i));
  return in;
}

void run(benchmark::State& st, bool chunked) {
  const int64_t n = st.range(0);
  const int32_t d = 128;
  HeadInputs in = inputs(n, d);
  const DeltaHead head{in.q.data(), in.k.data(), d, in.v.data(), d, in.g.data(), in.beta.data(), 1, in.out.data(), d};
  const DeltaShape shape{d, d, 1.0f / std::sqrt(float(d))};
  std::vector<float> work;
  for (auto _ : st) {
    std::fill(in.state.begin(), in.state.end(), 0.0f);
    if (chunked) {
      delta_rule_chunked(head, in.rows.data(), n, shape, in.state.data(), kDeltaChunk, work);
    } else {
      delta_rule_tokens(head, in.rows.data(), n, shape, in.state.data());
    }
    benchmark::DoNotOptimize(in.out.data());
  }
  st.counters["GFLOP/s"] = benchmark::Counter(8.0 * d * d * n * st.iterations() / 1e9, benchmark::Counter::kIsRate);
  st.counters["us/token"] = benchmark::Counter(double(n) * st.iterations() / 1e6,
                                               benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_tokens(benchmark::State& st) { run(st, false); }
void BM_chunked(benchmark::State& st) { run(st, true); }
BENCHMARK(BM_tokens)->Name("delta_rule/tokens")->Arg(512)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_chunked)->Name("delta_rule/chunked")->Arg(512)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace strata::model
