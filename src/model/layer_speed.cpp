#include "model/layer_speed.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <vector>

#include "memory/kv_cache.h"
#include "model/architecture.h"
#include "model/attention.h"
#include "model/batch.h"
#include "model/blocks.h"
#include "model/delta_rule.h"
#include "model/weights.h"
#include "tensor/thread_pool.h"

namespace strata::model {
namespace {

// Shapes of the probes: common head widths, and buffers walked layer after layer as decoding walks
// the model's layers. Decoding reads a layer's weights between two layers' attention or delta rule,
// so their cache or state comes from memory: the probes cycle through 128 MiB (more than any L3 they
// run on keeps), so each call finds its layer evicted by the others.
constexpr int32_t kKvHeads = 8;
constexpr int32_t kHeadDim = 128;
constexpr int32_t kDepth = 4096;
constexpr int32_t kKvLayers = 8;      // 16 MiB of F16 K and V each
constexpr int32_t kValueHeads = 32;
constexpr int32_t kStateLayers = 64;  // 2 MiB of F32 state each

using Clock = std::chrono::steady_clock;

// Calls fn(0), fn(1), ... back to back until they took `seconds`; their average seconds. Timed as one
// stretch, as a token's work runs: under a CPU quota the throttled time lands in it (short calls timed
// one by one, with untimed work between them, caught fresh quota and measured a held node too fast).
template <typename Fn>
double seconds_per_call(double seconds, Fn fn) {
  fn(0);  // warm-up: threads awake, buffers touched
  int64_t calls = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  for (; calls == 0 || elapsed < seconds; elapsed = std::chrono::duration<double>(Clock::now() - start).count()) {
    fn(++calls);
  }
  return elapsed / static_cast<double>(calls);
}

std::vector<float> random_values(size_t n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Seconds per cached element of one token's attention at the deepest position, with `group` query
// heads per KV head.
double attention_element_seconds(memory::KvCache& kv, int32_t group, tensor::ThreadPool& pool, double seconds) {
  HParams hp;
  hp.n_layer = kKvLayers;
  hp.n_head_kv = kKvHeads;
  hp.n_head = kKvHeads * group;
  hp.head_dim_k = hp.head_dim_v = kHeadDim;
  Batch batch;
  batch.add(0, kDepth - 1, 0, true);
  GlobalWeights global;
  Scratch scratch;
  const LayerContext ctx{hp, global, pool, batch, kv, nullptr, scratch};
  const std::vector<float> q = random_values(static_cast<size_t>(hp.n_head) * kHeadDim, 1.0f, 3);
  std::vector<float> out(q.size());
  const double call = seconds_per_call(seconds, [&](int64_t i) { attend(ctx, static_cast<int>(i % kKvLayers), q.data(), out.data()); });
  return call / (double{kDepth} * kKvHeads * 2 * kHeadDim);
}

Result<memory::KvCache> filled_cache() {
  memory::KvConfig config;
  config.n_layer = kKvLayers;
  config.layer_has_kv.assign(kKvLayers, 1);
  config.n_embd_k = config.n_embd_v = kKvHeads * kHeadDim;
  config.head_dim_k = config.head_dim_v = kHeadDim;
  config.n_ctx_per_seq = kDepth;
  STRATA_ASSIGN(memory::KvCache kv, memory::KvCache::create(config));
  const std::vector<float> row = random_values(static_cast<size_t>(kKvHeads) * kHeadDim * 2, 1.0f, 5);
  for (int il = 0; il < kKvLayers; ++il) {
    for (int pos = 0; pos < kDepth; ++pos) {
      // Rows shifted per position so the scores differ (the softmax rescales as it would).
      const float* r = row.data() + pos % (kKvHeads * kHeadDim);
      kv.write_k(il, 0, pos, r);
      kv.write_v(il, 0, pos, r);
    }
  }
  return kv;
}

// Seconds per state element of one token's gated delta rule, one task per value head as the layer
// runs it.
double state_element_seconds(tensor::ThreadPool& pool, double seconds) {
  const int64_t per_head = int64_t{kHeadDim} * kHeadDim;
  std::vector<float> state(static_cast<size_t>(kStateLayers) * kValueHeads * per_head, 0.0f);
  // Keys of norm 1/2, so the state stays bounded however many tokens the probe runs.
  const std::vector<float> qkv = random_values(static_cast<size_t>(3) * kValueHeads * kHeadDim, 0.5f / std::sqrt(float{kHeadDim}), 9);
  const std::vector<float> g(kValueHeads, -0.05f), beta(kValueHeads, 0.5f);
  std::vector<float> out(static_cast<size_t>(kValueHeads) * kHeadDim);
  const DeltaShape shape{kHeadDim, kHeadDim, 1.0f / std::sqrt(float{kHeadDim})};
  const int32_t row = 0;
  const double call = seconds_per_call(seconds, [&](int64_t i) {
    float* layer = state.data() + (i % kStateLayers) * kValueHeads * per_head;
    pool.parallel_for(kValueHeads, 1, [&](int64_t h0, int64_t h1) {
      for (int64_t h = h0; h < h1; ++h) {
        const float* x = qkv.data() + h * 3 * kHeadDim;
        const DeltaHead head{x, x + kHeadDim, 0, x + 2 * kHeadDim, 0, g.data() + h, beta.data() + h, 0,
                             out.data() + h * kHeadDim, 0};
        delta_rule_tokens(head, &row, 1, shape, layer + h * per_head);
      }
    });
  });
  return call / (double{kValueHeads} * static_cast<double>(per_head));
}

}  // namespace

Result<tensor::LayerWork> measure_layer_work(int32_t threads, double seconds_per_probe) {
  if (threads < 1 || threads > 1024) return make_error("layer speed: {} threads out of range 1..1024", threads);
  tensor::ThreadPool pool(threads);
  tensor::LayerWork w;
  {
    STRATA_ASSIGN(memory::KvCache kv, filled_cache());
    // Time per element is linear in the query heads a KV head serves: a tile is converted once and
    // read by every one of them.
    const double one = attention_element_seconds(kv, 1, pool, seconds_per_probe);
    const double eight = attention_element_seconds(kv, 8, pool, seconds_per_probe);
    w.kv_query_element = std::max(0.0, (eight - one) / 7);
    w.kv_element = std::max(one - w.kv_query_element, one / 100);
  }
  w.state_element = state_element_seconds(pool, seconds_per_probe);
  return w;
}

Result<tensor::NodeSpeed> measure_node_speed(int32_t threads, double seconds_per_type) {
  STRATA_ASSIGN(tensor::NodeSpeed s, tensor::measure_product_speed(threads, seconds_per_type));
  STRATA_ASSIGN(s.layer_work, measure_layer_work(threads, seconds_per_type / 2));
  STRATA_TRY(s.validate());
  return s;
}

Result<tensor::NodeSpeed> cached_node_speed(int32_t threads, const std::string& cache_dir) {
  return tensor::cached_node_speed(threads, cache_dir, [](int32_t t) { return measure_node_speed(t); });
}

}  // namespace strata::model
