#include "model/blocks.h"

#include <cmath>
#include <limits>

#include "memory/kv_cache.h"
#include "model/ops.h"
#include "tensor/quants.h"

namespace strata::model {
namespace {

void resize(std::vector<float>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(n);
}

}  // namespace

const tensor::QuantizedActivations& ProjectionInput::as(const MatrixView& w) {
  const DType format = tensor::vec_dot_type(w.type);
  for (const auto& f : formats_) {
    if (f.format() == format && f.cols() == w.cols) return f;
  }
  formats_.emplace_back().quantize(w.type, x_, ctx_.batch.size(), w.cols, ctx_.pool);
  return formats_.back();
}

void project(const LayerContext& ctx, ProjectionInput& in, const MatrixView& w, const VectorView& bias, float* y) {
  const int64_t T = ctx.batch.size();
  tensor::matmul(w, in.as(w), T, y, w.rows, ctx.pool);
  add_bias_rows(y, T, bias);
}

void attention_sublayer(const LayerContext& ctx, const LayerWeights& w, int il, float* x) {
  const HParams& hp = ctx.hp;
  Scratch& s = ctx.scratch;
  const int64_t T = ctx.batch.size();
  const int64_t E = hp.n_embd;
  const int32_t dk = hp.head_dim_k;
  resize(s.norm, T * E);
  resize(s.q, T * hp.n_head * dk);
  resize(s.k, T * hp.n_embd_k_gqa());
  resize(s.v, T * hp.n_embd_v_gqa());
  resize(s.attn, T * hp.n_head * hp.head_dim_v);
  resize(s.proj, T * E);

  rms_norm_rows(x, s.norm.data(), T, E, hp.rms_eps, w.attn_norm.data);
  ProjectionInput xn(ctx, s.norm.data());
  project(ctx, xn, w.attn_q, w.attn_q_bias, s.q.data());
  project(ctx, xn, w.attn_k, w.attn_k_bias, s.k.data());
  project(ctx, xn, w.attn_v, w.attn_v_bias, s.v.data());

  memory::KvCache& kv = ctx.kv;
  ctx.pool.parallel_for(T, 1, [&](int64_t t0, int64_t t1) {
    RopeAngles angles;
    for (int64_t t = t0; t < t1; ++t) {
      float* q = s.q.data() + t * hp.n_head * dk;
      float* k = s.k.data() + t * hp.n_embd_k_gqa();
      if (!w.attn_q_norm.empty()) rms_norm_rows(q, q, hp.n_head, dk, hp.rms_eps, w.attn_q_norm.data);
      if (!w.attn_k_norm.empty()) rms_norm_rows(k, k, hp.n_head_kv, dk, hp.rms_eps, w.attn_k_norm.data);
      angles.compute(hp, ctx.batch.pos[t], ctx.global.rope_freqs.data);
      apply_rope(hp.rope_type, q, hp.n_head, dk, hp.n_rot, angles);
      apply_rope(hp.rope_type, k, hp.n_head_kv, dk, hp.n_rot, angles);
      // The cache is F16, as llama.cpp's default.
      uint16_t* kc = kv.k(il, ctx.batch.seq[t], ctx.batch.pos[t]);
      uint16_t* vc = kv.v(il, ctx.batch.seq[t], ctx.batch.pos[t]);
      const float* vt = s.v.data() + t * hp.n_embd_v_gqa();
      for (int32_t i = 0; i < hp.n_embd_k_gqa(); ++i) kc[i] = fp32_to_fp16(k[i]);
      for (int32_t i = 0; i < hp.n_embd_v_gqa(); ++i) vc[i] = fp32_to_fp16(vt[i]);
    }
  });

  attend(ctx, il, s.q.data(), s.attn.data());
  ProjectionInput attn(ctx, s.attn.data());
  project(ctx, attn, w.attn_output, w.attn_output_bias, s.proj.data());
  for (int64_t i = 0; i < T * E; ++i) x[i] += s.proj[i];
}

void attend(const LayerContext& ctx, int il, const float* q_all, float* out) {
  const HParams& hp = ctx.hp;
  const memory::KvCache& kv = ctx.kv;
  const int64_t T = ctx.batch.size();
  const int32_t dk = hp.head_dim_k, dv = hp.head_dim_v;
  const int32_t group = hp.n_head / hp.n_head_kv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
  // One task per (token, head): an online softmax over the cached positions 0..pos of its sequence.
  ctx.pool.parallel_for(T * hp.n_head, 4, [&](int64_t i0, int64_t i1) {
    std::vector<float> qh(dk), acc(dv);
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t t = i / hp.n_head;
      const int32_t h = static_cast<int32_t>(i % hp.n_head);
      const int32_t hk = h / group;
      const int32_t seq = ctx.batch.seq[t];
      const int32_t pos = ctx.batch.pos[t];
      // Q meets the F16 keys in F16, as llama.cpp's flash attention does.
      const float* q = q_all + (t * hp.n_head + h) * dk;
      for (int32_t d = 0; d < dk; ++d) qh[d] = fp16_to_fp32(fp32_to_fp16(q[d]));
      float m = -std::numeric_limits<float>::infinity();
      float sum = 0.0f;
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int32_t p = 0; p <= pos; ++p) {
        const uint16_t* k = kv.k(il, seq, p) + hk * dk;
        float dot = 0.0f;
        for (int32_t d = 0; d < dk; ++d) dot += qh[d] * fp16_to_fp32(k[d]);
        const float score = dot * scale;
        const uint16_t* v = kv.v(il, seq, p) + hk * dv;
        if (score > m) {
          const float c = std::exp(m - score);
          sum *= c;
          for (int32_t d = 0; d < dv; ++d) acc[d] *= c;
          m = score;
        }
        const float e = std::exp(score - m);
        sum += e;
        for (int32_t d = 0; d < dv; ++d) acc[d] += e * fp16_to_fp32(v[d]);
      }
      float* o = out + (t * hp.n_head + h) * dv;
      const float inv = 1.0f / sum;
      for (int32_t d = 0; d < dv; ++d) o[d] = acc[d] * inv;
    }
  });
}

void swiglu_sublayer(const LayerContext& ctx, const VectorView& norm, const LayerWeights& w, float* x) {
  const HParams& hp = ctx.hp;
  Scratch& s = ctx.scratch;
  const int64_t T = ctx.batch.size();
  const int64_t E = hp.n_embd;
  const int64_t F = w.ffn_gate.rows;
  resize(s.norm, T * E);
  resize(s.gate, T * F);
  resize(s.up, T * F);
  resize(s.proj, T * E);
  rms_norm_rows(x, s.norm.data(), T, E, hp.rms_eps, norm.data);
  ProjectionInput xn(ctx, s.norm.data());
  project(ctx, xn, w.ffn_gate, w.ffn_gate_bias, s.gate.data());
  project(ctx, xn, w.ffn_up, w.ffn_up_bias, s.up.data());
  for (int64_t i = 0; i < T * F; ++i) s.gate[i] = silu(s.gate[i]) * s.up[i];
  ProjectionInput act(ctx, s.gate.data());
  project(ctx, act, w.ffn_down, w.ffn_down_bias, s.proj.data());
  for (int64_t i = 0; i < T * E; ++i) x[i] += s.proj[i];
}

}  // namespace strata::model
