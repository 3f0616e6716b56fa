// Attention over Q8_0 and Q4_0 KV caches against a two-pass softmax in double over the values the
// cache holds (dequantized here from the bytes, by ggml's definitions) and the query rounded as
// llama.cpp rounds it for quantized keys (through Q8_0): every ISA this CPU has, several depths
// (tile multiples and not), GQA groups, and bit-identity across thread counts and batches.
//
// The kernel's arithmetic after each row's conversion to F32 is the F16 path's, so the bound is
// attention_test.cpp's: |o - o_ref| <= min(2 max|v| eps, 4e-6 max|v|) with eps from the scores' size.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
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

std::vector<Isa> available_isas() {
  std::vector<Isa> isas;
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    if (tensor::attention_fn(isa)) isas.push_back(isa);
  }
  return isas;
}

uint16_t load_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

// ggml's block layouts: Q8_0 {f16 d, int8 q[32]}: d q; Q4_0 {f16 d, uint8 qs[16]}: d (nibble - 8),
// element j in byte j's low nibble, j + 16 in its high one.
void dequantize(DType type, const uint8_t* src, double* dst, int32_t n) {
  for (int32_t b = 0; b < n / 32; ++b) {
    if (type == DType::F16) break;
    const uint8_t* blk = src + b * (type == DType::Q8_0 ? 34 : 18);
    const double d = fp16_to_fp32(load_u16(blk));
    for (int j = 0; j < 32; ++j) {
      const int q = type == DType::Q8_0 ? static_cast<int8_t>(blk[2 + j])
                                        : (j < 16 ? blk[2 + j] & 15 : blk[2 + j - 16] >> 4) - 8;
      dst[b * 32 + j] = d * q;
    }
  }
  if (type == DType::F16) {
    for (int32_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(load_u16(src + 2 * i));
  }
}

// llama.cpp's x86 quantize_row_q8_0 and back: d = f16(amax / 127), q = nearest-even(x * 127 / amax).
void round_through_q8_0(const float* x, double* out, int32_t n) {
  for (int32_t b = 0; b < n; b += 32) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b + j]));
    const double d = fp16_to_fp32(fp32_to_fp16(amax / 127.0f));
    const float id = amax != 0 ? 127.0f / amax : 0.0f;
    for (int j = 0; j < 32; ++j) out[b + j] = d * std::nearbyint(x[b + j] * id);
  }
}

struct Shape {
  int32_t dk, dv, n_head, n_head_kv;
};

std::string name(const Shape& s, DType k, DType v) {
  return memory::kv_type_name(k) + "/" + memory::kv_type_name(v) + " dk" + std::to_string(s.dk) + "_dv" +
         std::to_string(s.dv) + "_h" + std::to_string(s.n_head) + "/" + std::to_string(s.n_head_kv);
}

// A one-layer cache written through KvCache::write_k/v from random rows; blocks no batch token may
// see get a NaN scale, so reading past a row's n_kv shows.
class Fixture {
 public:
  Fixture(const Shape& s, DType k_type, DType v_type, int32_t n_seq, int32_t n_ctx, float q_gain, uint32_t seed)
      : rng_(seed), q_gain_(q_gain) {
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
    c.type_k = k_type;
    c.type_v = v_type;
    auto kv = memory::KvCache::create(c);
    EXPECT_TRUE(kv.ok()) << kv.error().message;
    kv_ = std::make_unique<memory::KvCache>(std::move(*kv));
  }

  void add(int32_t pos, int32_t seq) { batch_.add(0, pos, seq, true); }

  void fill() {
    std::normal_distribution<float> g(0.0f, 1.0f);
    const auto& c = kv_->config();
    std::vector<float> k(c.n_embd_k), v(c.n_embd_v);
    for (int32_t seq = 0; seq < c.n_seq; ++seq) {
      int32_t visible = 0;
      for (int64_t t = 0; t < batch_.size(); ++t) {
        if (batch_.seq[t] == seq) visible = std::max(visible, batch_.pos[t] + 1);
      }
      for (int32_t p = 0; p < c.n_ctx_per_seq; ++p) {
        for (float& x : k) x = g(rng_);
        for (float& x : v) x = g(rng_);
        kv_->write_k(0, seq, p, k.data());
        kv_->write_v(0, seq, p, v.data());
        if (p >= visible) {
          for (int32_t h = 0; h < kv_->n_head_k(); ++h) poison(c.type_k, kv_->k(0, seq, h, p), kv_->k_head_bytes());
          for (int32_t h = 0; h < kv_->n_head_v(); ++h) poison(c.type_v, kv_->v(0, seq, h, p), kv_->v_head_bytes());
        }
      }
    }
    q_.resize(batch_.size() * hp_.n_head * hp_.head_dim_k);
    for (float& x : q_) x = q_gain_ * g(rng_);
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
    const DType kt = kv_->config().type_k, vt = kv_->config().type_v;
    const double scale = 1.0 / std::sqrt(static_cast<double>(dk));
    const double eps_exp = isa == Isa::Scalar ? kU : 0x1p-22;
    const double P = tensor::attention_tile_positions(dk, dv);
    double worst = 0.0;
    std::vector<double> qh(dk), kd(dk), vd(dv);
    for (int64_t t = 0; t < batch_.size(); ++t) {
      const int32_t n = batch_.pos[t] + 1, seq = batch_.seq[t];
      for (int32_t h = 0; h < hp_.n_head; ++h) {
        const int32_t hk = h / group;
        round_through_q8_0(q_.data() + (t * hp_.n_head + h) * dk, qh.data(), dk);
        std::vector<double> s(n);
        double s_max = -1e300, abs_max = 0.0, v_max = 0.0;
        for (int32_t p = 0; p < n; ++p) {
          dequantize(kt, kv_->k(0, seq, hk, p), kd.data(), dk);
          double dot = 0.0, abs = 0.0;
          for (int32_t d = 0; d < dk; ++d) {
            dot += qh[d] * kd[d];
            abs += std::fabs(qh[d] * kd[d]);
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
          dequantize(vt, kv_->v(0, seq, hk, p), vd.data(), dv);
          for (int32_t d = 0; d < dv; ++d) {
            o[d] += w * vd[d];
            v_max = std::max(v_max, std::fabs(vd[d]));
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
  // A NaN scale in every block (F16: every element).
  static void poison(DType type, uint8_t* row, size_t bytes) {
    const size_t step = type == DType::Q8_0 ? 34 : type == DType::Q4_0 ? 18 : 2;
    for (size_t i = 0; i < bytes; i += step) row[i] = 0x00, row[i + 1] = 0x7e;
  }

  std::mt19937 rng_;
  float q_gain_;
  HParams hp_;
  GlobalWeights global_;
  Batch batch_;
  std::unique_ptr<memory::KvCache> kv_;
  std::vector<float> q_;
};

const std::vector<Shape> kShapes = {
    {64, 64, 32, 8}, {128, 128, 16, 8}, {128, 64, 8, 4}, {32, 32, 4, 2}, {96, 32, 6, 3},
    {64, 64, 40, 1},  // a 40-head group: more rows than one task takes
};

struct Types {
  DType k, v;
};
const std::vector<Types> kTypes = {{DType::Q8_0, DType::Q8_0}, {DType::Q4_0, DType::Q4_0}, {DType::Q8_0, DType::Q4_0},
                                   {DType::Q4_0, DType::F16}};

TEST(AttentionQuantized, single_token_matches_double_reference_of_the_dequantized_cache) {
  for (const Types& ty : kTypes) {
    for (const Shape& s : kShapes) {
      for (int32_t n : {1, 31, 65, 1000}) {  // 65 and 1000 are no multiple of any tile (16..64)
        for (float gain : {1.0f, 4.0f}) {
          Fixture f(s, ty.k, ty.v, 1, 1024, gain, 29 + n);
          f.add(n - 1, 0);
          f.fill();
          for (Isa isa : available_isas()) {
            const double worst = f.check(f.run(isa, 1), isa, name(s, ty.k, ty.v) + " n" + std::to_string(n));
            if (n == 1000 && gain > 1.0f && s.dk == 128 && s.dv == 128) {
              std::printf("[ decode   ] %-32s ctx %4d %-6s max err / max|v| %.2g\n", name(s, ty.k, ty.v).c_str(), n,
                          std::string(tensor::isa_name(isa)).c_str(), worst);
            }
          }
        }
      }
    }
  }
}

TEST(AttentionQuantized, prompt_and_interleaved_sequences_match_double_reference) {
  for (const Types& ty : kTypes) {
    for (const Shape& s : kShapes) {
      Fixture prompt(s, ty.k, ty.v, 1, 128, 3.0f, 5);
      for (int32_t p = 10; p < 80; ++p) prompt.add(p, 0);
      prompt.fill();
      Fixture mixed(s, ty.k, ty.v, 2, 256, 3.0f, 6);
      for (int32_t i = 0; i < 9; ++i) {
        mixed.add(200 + i, 1);
        if (i < 6) mixed.add(30 + i, 0);
      }
      mixed.fill();
      for (Isa isa : available_isas()) {
        prompt.check(prompt.run(isa, 2), isa, name(s, ty.k, ty.v) + " prompt");
        mixed.check(mixed.run(isa, 2), isa, name(s, ty.k, ty.v) + " mixed");
      }
    }
  }
}

TEST(AttentionQuantized, results_are_bit_identical_across_threads_and_batch_compositions) {
  for (const Types& ty : kTypes) {
    for (const Shape& s : {Shape{128, 128, 32, 8}, Shape{64, 64, 40, 1}, Shape{96, 32, 6, 2}}) {
      Fixture f(s, ty.k, ty.v, 2, 512, 3.0f, 11);
      for (int32_t i = 0; i < 20; ++i) {
        f.add(300 + i, 0);
        if (i % 3 == 0) f.add(100 + i, 1);
      }
      f.fill();
      const HParams& hp = f.hp();
      const int64_t q_row = int64_t{hp.n_head} * hp.head_dim_k, o_row = int64_t{hp.n_head} * hp.head_dim_v;
      for (Isa isa : available_isas()) {
        const std::vector<float> one = f.run(isa, 1);
        ASSERT_EQ(one, f.run(isa, 2)) << name(s, ty.k, ty.v) << " " << tensor::isa_name(isa);
        ASSERT_EQ(one, f.run(isa, 3)) << name(s, ty.k, ty.v) << " " << tensor::isa_name(isa);
        for (int64_t t = 0; t < f.batch().size(); t += 5) {
          Batch alone;
          alone.add(0, f.batch().pos[t], f.batch().seq[t], true);
          const std::vector<float> o = f.run(isa, 2, &alone, f.q().data() + t * q_row);
          ASSERT_TRUE(std::equal(o.begin(), o.end(), one.begin() + t * o_row))
              << name(s, ty.k, ty.v) << " " << tensor::isa_name(isa) << " token " << t;
        }
      }
    }
  }
}

}  // namespace
}  // namespace strata::model
