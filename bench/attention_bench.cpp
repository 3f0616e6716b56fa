// Attention over the F16 KV cache: the tiled flash-style kernel (model::attend, best ISA) against a
// copy of the scalar loop it replaced, in one run so the ratio is meaningful. One thread.
//   attention/<decode|prompt>/h<q heads>-<kv heads>/d<head dim>/ctx<positions>/<new|old>
// KV_GB/s: bytes of the attended K/V cache (each cached row counted once per call) per second.
// GFLOP/s: 2 (dk + dv) flops per (query row, attended position).
//
//   ./strata_microbench --benchmark_filter='attention/decode'
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "memory/kv_cache.h"
#include "model/attention.h"
#include "model/blocks.h"
#include "tensor/thread_pool.h"

namespace strata::model {
namespace {

// The attention loop before the flash kernel: one task per (token, head), position by position.
const float* fp16_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t i = 0; i < 65536; ++i) t[i] = fp16_to_fp32(static_cast<uint16_t>(i));
    return t;
  }();
  return table.data();
}

void attend_old(const LayerContext& ctx, int il, const float* q_all, float* out) {
  const HParams& hp = ctx.hp;
  const memory::KvCache& kv = ctx.kv;
  const int64_t T = ctx.batch.size();
  const int32_t dk = hp.head_dim_k, dv = hp.head_dim_v;
  const int32_t group = hp.n_head / hp.n_head_kv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
  const float* f16 = fp16_table();
  ctx.pool.parallel_for(T * hp.n_head, 4, [&](int64_t i0, int64_t i1) {
    std::vector<float> qh(dk), acc(dv);
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t t = i / hp.n_head;
      const int32_t h = static_cast<int32_t>(i % hp.n_head);
      const int32_t hk = h / group;
      const int32_t seq = ctx.batch.seq[t];
      const int32_t pos = ctx.batch.pos[t];
      const float* q = q_all + (t * hp.n_head + h) * dk;
      for (int32_t d = 0; d < dk; ++d) qh[d] = f16[fp32_to_fp16(q[d])];
      float m = -std::numeric_limits<float>::infinity();
      float sum = 0.0f;
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int32_t p = 0; p <= pos; ++p) {
        const uint16_t* k = reinterpret_cast<const uint16_t*>(kv.k(il, seq, hk, p));  // F16 cache
        float dot = 0.0f;
        for (int32_t d = 0; d < dk; ++d) dot += qh[d] * f16[k[d]];
        const float score = dot * scale;
        const uint16_t* v = reinterpret_cast<const uint16_t*>(kv.v(il, seq, hk, p));
        if (score > m) {
          const float c = std::exp(m - score);
          sum *= c;
          for (int32_t d = 0; d < dv; ++d) acc[d] *= c;
          m = score;
        }
        const float e = std::exp(score - m);
        sum += e;
        for (int32_t d = 0; d < dv; ++d) acc[d] += e * f16[v[d]];
      }
      float* o = out + (t * hp.n_head + h) * dv;
      const float inv = 1.0f / sum;
      for (int32_t d = 0; d < dv; ++d) o[d] = acc[d] * inv;
    }
  });
}

struct Case {
  const char* kind;
  int32_t n_head, n_head_kv, dim, ctx, tokens;
};

void run_case(benchmark::State& state, Case c, bool flash, DType type) {
  HParams hp;
  hp.n_layer = 1;
  hp.n_head = c.n_head;
  hp.n_head_kv = c.n_head_kv;
  hp.head_dim_k = hp.head_dim_v = c.dim;
  memory::KvConfig cfg;
  cfg.n_layer = 1;
  cfg.layer_has_kv = {1};
  cfg.n_embd_k = hp.n_embd_k_gqa();
  cfg.n_embd_v = hp.n_embd_v_gqa();
  cfg.head_dim_k = cfg.head_dim_v = c.dim;
  cfg.n_ctx_per_seq = c.ctx;
  cfg.type_k = cfg.type_v = type;
  auto kv = memory::KvCache::create(cfg);
  if (!kv.ok()) {
    state.SkipWithError("KV cache allocation failed");
    return;
  }
  memory::KvCache& cache = *kv;
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> row(std::max(cfg.n_embd_k, cfg.n_embd_v));
  for (int32_t p = 0; p < c.ctx; ++p) {
    for (float& x : row) x = u(rng);
    cache.write_k(0, 0, p, row.data());
    for (float& x : row) x = u(rng);
    cache.write_v(0, 0, p, row.data());
  }
  Batch batch;
  for (int32_t t = 0; t < c.tokens; ++t) batch.add(0, c.ctx - c.tokens + t, 0, true);
  std::vector<float> q(int64_t{c.tokens} * c.n_head * c.dim), out(q.size());
  for (float& x : q) x = 4.0f * u(rng);
  tensor::ThreadPool pool(1);
  GlobalWeights global;
  Scratch scratch;
  const LayerContext ctx{hp, global, pool, batch, cache, nullptr, scratch};
  for (auto _ : state) {
    if (flash) {
      attend(ctx, 0, q.data(), out.data());
    } else {
      attend_old(ctx, 0, q.data(), out.data());
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  double positions = 0;  // attended (query row, position) pairs per call
  for (int32_t t = 0; t < c.tokens; ++t) positions += static_cast<double>(c.n_head) * (batch.pos[t] + 1);
  const double kv_bytes = static_cast<double>(cache.bytes());  // the rows read, in the cache's type
  state.counters["KV_GB/s"] = benchmark::Counter(kv_bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP/s"] =
      benchmark::Counter(positions * 4.0 * c.dim * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

const bool registered = [] {
  const Case cases[] = {
      {"decode", 32, 8, 64, 512, 1},  {"decode", 32, 8, 64, 4096, 1},  {"decode", 16, 2, 256, 512, 1},
      {"decode", 16, 2, 256, 4096, 1}, {"prompt", 32, 8, 64, 512, 64}, {"prompt", 16, 2, 256, 512, 64},
  };
  for (const Case& c : cases) {
    const std::string base = std::string("attention/") + c.kind + "/h" + std::to_string(c.n_head) + "-" +
                             std::to_string(c.n_head_kv) + "/d" + std::to_string(c.dim) + "/ctx" + std::to_string(c.ctx);
    for (bool flash : {true, false}) {
      benchmark::RegisterBenchmark((base + (flash ? "/new" : "/old")).c_str(),
                                   [c, flash](benchmark::State& s) { run_case(s, c, flash, DType::F16); })
          ->Unit(benchmark::kMicrosecond);
    }
    for (DType type : {DType::Q8_0, DType::Q4_0}) {  // -ctk / -ctv: the tiles dequantize each row
      benchmark::RegisterBenchmark((base + "/new/" + memory::kv_type_name(type)).c_str(),
                                   [c, type](benchmark::State& s) { run_case(s, c, true, type); })
          ->Unit(benchmark::kMicrosecond);
    }
  }
  return true;
}();

}  // namespace
}  // namespace strata::model
