// The flash-style attention kernels against a two-pass softmax in double over the same F16-rounded
// q, k, v, for every ISA this CPU has; bit-identity across thread counts and batch compositions.
//
// Stated bound, per output element of a row attending to n positions (u = 2^-24, P = tile size):
//   |o - o_ref| <= 2 max|v| (delta_s + eps_exp + (R + 1)(P + 3 ceil(n/P) + 4) u)
// where delta_s = (dk + 2) u scale max_p sum_i |q_i k_pi| bounds a score's F32 error, R = max_p
// (s_max - s_p) bounds the exponent's size, and eps_exp = 2^-22 (AVX2/AVX-512 polynomial) or u
// (std::exp). Each weight w_p then carries a relative error <= the bracket, and the same error in
// numerator and denominator of sum w v / sum w at most doubles it. That worst case is loose (up to
// ~3e-4 max|v| for dk 256 over 1000 positions), so on this random data the test also holds every
// ISA to 4e-6 max|v|; observed errors are 2e-7 .. 7e-7 max|v| (printed for 1000 positions).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "memory/kv_cache.h"
#include "model/attention.h"
#include "model/blocks.h"
#include "tensor/attention_kernels.h"
#include "tensor/thread_pool.h"

namespace strata::model {
namespace {

using tensor::Isa;

constexpr double kU = 0x1p-24;
constexpr uint16_t kF16Nan = 0x7e00;

std::vector<Isa> available_isas() {
  std::vector<Isa> isas;
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    if (tensor::attention_fn(isa)) isas.push_back(isa);
  }
  return isas;
}

struct Shape {
  int32_t dk, dv, n_head, n_head_kv;
};

std::string name(const Shape& s) {
  return "dk" + std::to_string(s.dk) + "_dv" + std::to_string(s.dv) + "_h" + std::to_string(s.n_head) + "/" +
         std::to_string(s.n_head_kv);
}

// A one-layer cache with random K/V, poisoned (F16 NaN) beyond what each sequence's tokens may see,
// and random queries for a batch.
class Fixture {
 public:
  Fixture(const Shape& s, int32_t n_seq, int32_t n_ctx, float q_gain, uint32_t seed) : shape_(s), rng_(seed) {
    hp_.n_layer = 1;
    hp_.n_head = s.n_head;
    hp_.n_head_kv = s.n_head_kv;
    hp_.head_dim_k = s.dk;
    hp_.head_dim_v = s.dv;
    memory::KvConfig c;
    c.n_layer = 1;
    c.layer_has_kv = {1};
    c.n_embd_k = hp_.n_embd_k_gqa();
    c.n_embd_v = hp_.n_embd_v_gqa();
    c.head_dim_k = s.dk;
    c.head_dim_v = s.dv;
    c.n_seq = n_seq;
    c.n_ctx_per_seq = n_ctx;
    auto kv = memory::KvCache::create(c);
    EXPECT_TRUE(kv.ok());
    kv_ = std::make_unique<memory::KvCache>(std::move(*kv));
    q_gain_ = q_gain;
  }

  void add(int32_t pos, int32_t seq) { batch_.add(0, pos, seq, true); }

  // Fills K/V of positions a batch token may see with random halves, the rest with NaN.
  void fill() {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const auto& c = kv_->config();
    for (int32_t seq = 0; seq < c.n_seq; ++seq) {
      int32_t visible = 0;
      for (int64_t t = 0; t < batch_.size(); ++t) {
        if (batch_.seq[t] == seq) visible = std::max(visible, batch_.pos[t] + 1);
      }
      for (int32_t p = 0; p < c.n_ctx_per_seq; ++p) {
        for (int32_t h = 0; h < kv_->n_head_k(); ++h) {
          auto* k = reinterpret_cast<uint16_t*>(kv_->k(0, seq, h, p));
          for (int32_t i = 0; i < c.head_dim_k; ++i) k[i] = p < visible ? fp32_to_fp16(u(rng_)) : kF16Nan;
        }
        for (int32_t h = 0; h < kv_->n_head_v(); ++h) {
          auto* v = reinterpret_cast<uint16_t*>(kv_->v(0, seq, h, p));
          for (int32_t i = 0; i < c.head_dim_v; ++i) v[i] = p < visible ? fp32_to_fp16(u(rng_)) : kF16Nan;
        }
      }
    }
    q_.resize(batch_.size() * hp_.n_head * hp_.head_dim_k);
    for (float& x : q_) x = q_gain_ * u(rng_);
  }

  std::vector<float> run(Isa isa, int threads, const Batch* batch = nullptr, const float* q = nullptr) {
    const Batch& b = batch ? *batch : batch_;
    tensor::ThreadPool pool(threads);
    Scratch scratch;
    const LayerContext ctx{hp_, global_, pool, b, *kv_, nullptr, scratch};
    std::vector<float> out(b.size() * hp_.n_head * hp_.head_dim_v, -1.0f);
    attend(ctx, 0, q ? q : q_.data(), out.data(), isa);
    return out;
  }

  // Checks `out` against the double reference; returns the largest error / max|v| seen.
  double check(const std::vector<float>& out, Isa isa, const std::string& what) {
    const int32_t dk = hp_.head_dim_k, dv = hp_.head_dim_v, group = hp_.n_head / hp_.n_head_kv;
    const double scale = 1.0 / std::sqrt(static_cast<double>(dk));
    const double eps_exp = isa == Isa::Scalar ? kU : 0x1p-22;
    const double P = tensor::attention_tile_positions(dk, dv);
    double worst = 0.0;
    for (int64_t t = 0; t < batch_.size(); ++t) {
      const int32_t n = batch_.pos[t] + 1, seq = batch_.seq[t];
      for (int32_t h = 0; h < hp_.n_head; ++h) {
        const int32_t hk = h / group;
        const float* q = q_.data() + (t * hp_.n_head + h) * dk;
        std::vector<double> qh(dk), s(n);
        for (int32_t d = 0; d < dk; ++d) qh[d] = fp16_to_fp32(fp32_to_fp16(q[d]));
        double s_max = -1e300, abs_max = 0.0, v_max = 0.0;
        for (int32_t p = 0; p < n; ++p) {
          const uint16_t* k = reinterpret_cast<const uint16_t*>(kv_->k(0, seq, hk, p));
          double dot = 0.0, abs = 0.0;
          for (int32_t d = 0; d < dk; ++d) {
            dot += qh[d] * fp16_to_fp32(k[d]);
            abs += std::fabs(qh[d] * fp16_to_fp32(k[d]));
          }
          s[p] = dot * scale;
          s_max = std::max(s_max, s[p]);
          abs_max = std::max(abs_max, abs * scale);
        }
        double sum = 0.0, R = 0.0;
        std::vector<double> o(dv, 0.0);
        for (int32_t p = 0; p < n; ++p) {
          const double w = std::exp(s[p] - s_max);
          R = std::max(R, s_max - s[p]);
          sum += w;
          const uint16_t* v = reinterpret_cast<const uint16_t*>(kv_->v(0, seq, hk, p));
          for (int32_t d = 0; d < dv; ++d) {
            o[d] += w * fp16_to_fp32(v[d]);
            v_max = std::max(v_max, std::fabs(static_cast<double>(fp16_to_fp32(v[d]))));
          }
        }
        const double delta_s = (dk + 2) * kU * abs_max;
        const double eps = delta_s + eps_exp + (R + 1) * (P + 3 * std::ceil(n / P) + 4) * kU;
        const double bound = std::min(2 * v_max * eps, 4e-6 * v_max);
        const float* got = out.data() + (t * hp_.n_head + h) * dv;
        for (int32_t d = 0; d < dv; ++d) {
          const double err = std::fabs(got[d] - o[d] / sum);
          worst = std::max(worst, err / v_max);
          if (!(err <= bound)) {
            ADD_FAILURE() << what << " " << tensor::isa_name(isa) << ": token " << t << " head " << h << " dim " << d
                          << ": got " << got[d] << ", want " << o[d] / sum << " (bound " << bound << ")";
            return worst;
          }
        }
      }
    }
    return worst;
  }

  Batch& batch() { return batch_; }
  const std::vector<float>& q() const { return q_; }
  const HParams& hp() const { return hp_; }

 private:
  Shape shape_;
  std::mt19937 rng_;
  HParams hp_;
  GlobalWeights global_;
  Batch batch_;
  std::unique_ptr<memory::KvCache> kv_;
  std::vector<float> q_;
  float q_gain_ = 1.0f;
};

const std::vector<Shape> kShapes = {
    {64, 64, 32, 8},   {128, 128, 16, 8}, {256, 256, 16, 2}, {80, 80, 8, 8},  {128, 64, 8, 4},
    {72, 40, 6, 3},    {36, 20, 4, 2},    {64, 64, 40, 1},  // a 40-head group: more rows than one task takes
};

TEST(Attention, exp_matches_std_exp_within_2_pow_minus_22) {
  std::vector<float> x;
  for (float v = 0.0f; v >= -87.0f; v = v * 1.0001f - 1e-6f) x.push_back(v);
  x.push_back(-87.0f);
  x.push_back(-0.0f);
  while (x.size() % 16) x.push_back(-1.0f);
  std::vector<float> y(x.size());
  for (Isa isa : {Isa::Avx2, Isa::Avx512}) {
    const tensor::ExpFn fn = tensor::attention_exp_fn(isa);
    if (!fn) continue;
    fn(x.data(), y.data(), static_cast<int64_t>(x.size()));
    double worst = 0.0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double want = std::exp(static_cast<double>(x[i]));
      worst = std::max(worst, std::fabs(y[i] - want) / want);
    }
    EXPECT_LE(worst, 0x1p-22) << tensor::isa_name(isa);
    std::printf("[ exp      ] %s: %zu points in [-87, 0], max relative error %.3g (%.2f ulp of 1)\n",
                std::string(tensor::isa_name(isa)).c_str(), x.size(), worst, worst / 0x1p-24);
    std::vector<float> edge(16, -std::numeric_limits<float>::infinity()), e(16);
    edge[1] = -87.5f;
    edge[2] = -1000.0f;
    fn(edge.data(), e.data(), 16);
    for (float v : e) EXPECT_EQ(v, 0.0f) << tensor::isa_name(isa);
  }
}

TEST(Attention, single_token_matches_double_reference_for_every_isa) {
  for (const Shape& s : kShapes) {
    for (int32_t n : {1, 63, 64, 65, 1000}) {
      for (float gain : {1.0f, 6.0f}) {  // flat and peaked softmax
        Fixture f(s, 1, 1024, gain, 17 + n);
        f.add(n - 1, 0);
        f.fill();
        for (Isa isa : available_isas()) {
          const double worst = f.check(f.run(isa, 1), isa, name(s) + " n" + std::to_string(n));
          if (n == 1000 && gain > 1.0f) {
            std::printf("[ decode   ] %-22s ctx %4d %-6s max err / max|v| %.2g\n", name(s).c_str(), n,
                        std::string(tensor::isa_name(isa)).c_str(), worst);
          }
        }
      }
    }
  }
}

TEST(Attention, prompt_and_interleaved_sequences_match_double_reference) {
  for (const Shape& s : kShapes) {
    // A 70-token prompt chunk at positions 10..79 of one sequence.
    Fixture prompt(s, 1, 128, 4.0f, 5);
    for (int32_t p = 10; p < 80; ++p) prompt.add(p, 0);
    prompt.fill();
    // Two sequences interleaved token by token, at different depths.
    Fixture mixed(s, 2, 256, 4.0f, 6);
    for (int32_t i = 0; i < 9; ++i) {
      mixed.add(200 + i, 1);
      if (i < 6) mixed.add(30 + i, 0);
    }
    mixed.fill();
    for (Isa isa : available_isas()) {
      prompt.check(prompt.run(isa, 2), isa, name(s) + " prompt");
      mixed.check(mixed.run(isa, 2), isa, name(s) + " mixed");
    }
  }
}

TEST(Attention, results_are_bit_identical_across_threads_and_batch_compositions) {
  for (const Shape& s : {Shape{128, 128, 32, 8}, Shape{64, 64, 40, 1}, Shape{80, 48, 6, 2}}) {
    Fixture f(s, 2, 512, 4.0f, 11);
    for (int32_t i = 0; i < 20; ++i) {
      f.add(300 + i, 0);
      if (i % 3 == 0) f.add(100 + i, 1);
    }
    f.fill();
    const HParams& hp = f.hp();
    const int64_t q_row = int64_t{hp.n_head} * hp.head_dim_k, o_row = int64_t{hp.n_head} * hp.head_dim_v;
    for (Isa isa : available_isas()) {
      const std::vector<float> one = f.run(isa, 1);
      const std::vector<float> two = f.run(isa, 2);
      ASSERT_EQ(one, two) << name(s) << " " << tensor::isa_name(isa);
      // Each token alone in its batch gives the same bits as inside the full batch.
      for (int64_t t = 0; t < f.batch().size(); t += 5) {
        Batch alone;
        alone.add(0, f.batch().pos[t], f.batch().seq[t], true);
        const std::vector<float> o = f.run(isa, 2, &alone, f.q().data() + t * q_row);
        ASSERT_TRUE(std::equal(o.begin(), o.end(), one.begin() + t * o_row))
            << name(s) << " " << tensor::isa_name(isa) << " token " << t;
      }
    }
  }
}

// Past one span (16 tiles) a row's positions are cut into spans combined in order: a lone decode
// token splits its spans over the threads (flash-decoding), a token inside a prompt runs them in
// turn, and both give the same bits as each other, on any thread count, and match the reference.
TEST(Attention, long_contexts_split_into_spans_keep_the_bits_and_the_reference) {
  // One KV head: a lone token is one work item, so its spans go to the threads; 8 KV heads: not.
  for (const Shape& s : {Shape{64, 64, 8, 1}, Shape{64, 64, 16, 8}}) {
    const int32_t span = 16 * tensor::attention_tile_positions(s.dk, s.dv);
    Fixture f(s, 1, 3 * span + 100, 4.0f, 23);
    for (int32_t p = 3 * span - 3; p < 3 * span + 2; ++p) f.add(p, 0);  // rows of 3 and 4 spans
    f.fill();
    const HParams& hp = f.hp();
    const int64_t q_row = int64_t{hp.n_head} * hp.head_dim_k, o_row = int64_t{hp.n_head} * hp.head_dim_v;
    for (Isa isa : available_isas()) {
      const std::vector<float> batched = f.run(isa, 2);
      f.check(batched, isa, name(s) + " spans");
      ASSERT_EQ(batched, f.run(isa, 1)) << name(s);
      for (int64_t t = 0; t < f.batch().size(); t += 2) {
        Batch alone;
        alone.add(0, f.batch().pos[t], f.batch().seq[t], true);
        for (int threads : {1, 2}) {
          const std::vector<float> o = f.run(isa, threads, &alone, f.q().data() + t * q_row);
          ASSERT_TRUE(std::equal(o.begin(), o.end(), batched.begin() + t * o_row))
              << name(s) << " " << tensor::isa_name(isa) << " token " << t << " threads " << threads;
        }
      }
    }
  }
}

}  // namespace
}  // namespace strata::model
