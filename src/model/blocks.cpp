#include "model/blocks.h"

#include <algorithm>
#include <cmath>

#include "memory/kv_cache.h"
#include "model/attention.h"
#include "model/collective.h"
#include "model/ops.h"
#include "model/weight_warmer.h"
#include "tensor/quants.h"

namespace strata::model {
namespace {

// Per token: QK-norm (when bound), rotary embedding of q and k, and k, v written to the cache in its
// type (F16 by default, as llama.cpp's) at the token's position.
void rotate_and_cache(const LayerContext& ctx, const LayerWeights& w, int il, float* q_all, float* k_all,
                      const float* v_all) {
  const HParams& hp = ctx.hp;
  const int32_t dk = hp.head_dim_k;
  memory::KvCache& kv = ctx.kv;
  ctx.pool.parallel_for(ctx.batch.size(), 1, [&](int64_t t0, int64_t t1) {
    RopeAngles angles;
    for (int64_t t = t0; t < t1; ++t) {
      float* q = q_all + t * hp.n_head * dk;
      float* k = k_all + t * hp.n_embd_k_gqa();
      if (!w.attn_q_norm.empty()) rms_norm_rows(q, q, hp.n_head, dk, hp.rms_eps, w.attn_q_norm.data);
      if (!w.attn_k_norm.empty()) rms_norm_rows(k, k, hp.n_head_kv, dk, hp.rms_eps, w.attn_k_norm.data);
      angles.compute(hp, ctx.batch.pos[t], ctx.global.rope_freqs.data);
      apply_rope(hp.rope_type, q, hp.n_head, dk, hp.n_rot, angles);
      apply_rope(hp.rope_type, k, hp.n_head_kv, dk, hp.n_rot, angles);
      kv.write_k(il, ctx.batch.seq[t], ctx.batch.pos[t], k);
      kv.write_v(il, ctx.batch.seq[t], ctx.batch.pos[t], v_all + t * hp.n_embd_v_gqa());
    }
  });
}

void add_rows(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

}  // namespace

void add_sublayer_output(const LayerContext& ctx, float* x, float* out, int64_t n) {
  if (ctx.collective) {
    if (ctx.warmer) ctx.warmer->end_segment();
    ctx.collective->all_reduce_sum(out, n, ctx.warmer);
  }
  add_rows(x, out, n);
}

bool no_slice_here(const LayerContext& ctx, int64_t width, float* x) {
  if (width > 0) return false;
  const int64_t n = ctx.batch.size() * ctx.hp.n_embd;
  ensure_size(ctx.scratch.proj, n);
  std::fill_n(ctx.scratch.proj.data(), n, 0.0f);
  add_sublayer_output(ctx, x, ctx.scratch.proj.data(), n);
  return true;
}

const tensor::QuantizedActivations& ProjectionInput::as(const MatrixView& w) {
  const DType format = tensor::vec_dot_type(w.type);
  for (const auto& f : formats_) {
    if (f.format() == format && f.cols() == w.cols) return f;
  }
  formats_.emplace_back().quantize(w.type, x_, rows_, w.cols, ctx_.pool);
  return formats_.back();
}

void project(const LayerContext& ctx, ProjectionInput& in, const MatrixView& w, const VectorView& bias, float* y) {
  if (ctx.warmer) ctx.warmer->note(w.data, static_cast<size_t>(w.rows) * w.row_stride);
  tensor::matmul(w, in.as(w), in.rows(), y, w.rows, ctx.pool);
  add_bias_rows(y, in.rows(), bias);
}

void attention_sublayer(const LayerContext& ctx, const LayerWeights& w, int il, float* x) {
  if (no_slice_here(ctx, ctx.hp.n_head_kv, x)) return;
  const HParams& hp = ctx.hp;
  Scratch& s = ctx.scratch;
  const int64_t T = ctx.batch.size();
  const int64_t E = hp.n_embd;
  ensure_size(s.norm, T * E);
  ensure_size(s.q, T * hp.n_head * hp.head_dim_k);
  ensure_size(s.k, T * hp.n_embd_k_gqa());
  ensure_size(s.v, T * hp.n_embd_v_gqa());
  ensure_size(s.attn, T * hp.n_head * hp.head_dim_v);
  ensure_size(s.proj, T * E);

  rms_norm_rows(x, s.norm.data(), T, E, hp.rms_eps, w.attn_norm.data);
  ProjectionInput xn(ctx, s.norm.data());
  project(ctx, xn, w.attn_q, w.attn_q_bias, s.q.data());
  project(ctx, xn, w.attn_k, w.attn_k_bias, s.k.data());
  project(ctx, xn, w.attn_v, w.attn_v_bias, s.v.data());
  rotate_and_cache(ctx, w, il, s.q.data(), s.k.data(), s.v.data());
  attend(ctx, il, s.q.data(), s.attn.data());
  ProjectionInput attn(ctx, s.attn.data());
  project(ctx, attn, w.attn_output, w.attn_output_bias, s.proj.data());
  add_sublayer_output(ctx, x, s.proj.data(), T * E);
}

void gated_attention_sublayer(const LayerContext& ctx, const LayerWeights& w, int il, float* x) {
  if (no_slice_here(ctx, ctx.hp.n_head_kv, x)) return;
  const HParams& hp = ctx.hp;
  Scratch& s = ctx.scratch;
  const int64_t T = ctx.batch.size();
  const int64_t E = hp.n_embd;
  const int32_t d = hp.head_dim_k;
  const int64_t q_width = int64_t{hp.n_head} * d;
  ensure_size(s.norm, T * E);
  ensure_size(s.qg, T * 2 * q_width);
  ensure_size(s.q, T * q_width);
  ensure_size(s.gate, T * q_width);
  ensure_size(s.k, T * hp.n_embd_k_gqa());
  ensure_size(s.v, T * hp.n_embd_v_gqa());
  ensure_size(s.attn, T * q_width);
  ensure_size(s.proj, T * E);

  rms_norm_rows(x, s.norm.data(), T, E, hp.rms_eps, w.attn_norm.data);
  ProjectionInput xn(ctx, s.norm.data());
  project(ctx, xn, w.attn_q, {}, s.qg.data());
  project(ctx, xn, w.attn_k, {}, s.k.data());
  project(ctx, xn, w.attn_v, {}, s.v.data());
  // Per head, the joint projection holds [query (d) | gate (d)].
  for (int64_t t = 0; t < T; ++t) {
    for (int32_t h = 0; h < hp.n_head; ++h) {
      const float* qg = s.qg.data() + (t * hp.n_head + h) * 2 * d;
      std::copy(qg, qg + d, s.q.data() + (t * hp.n_head + h) * d);
      std::copy(qg + d, qg + 2 * d, s.gate.data() + (t * hp.n_head + h) * d);
    }
  }
  rotate_and_cache(ctx, w, il, s.q.data(), s.k.data(), s.v.data());
  attend(ctx, il, s.q.data(), s.attn.data());
  for (int64_t i = 0; i < T * q_width; ++i) s.attn[i] *= sigmoid(s.gate[i]);
  ProjectionInput attn(ctx, s.attn.data());
  project(ctx, attn, w.attn_output, {}, s.proj.data());
  add_sublayer_output(ctx, x, s.proj.data(), T * E);
}

void swiglu(const LayerContext& ctx, ProjectionInput& in, const SwigluWeights& w, std::vector<float>& gate_buf,
            std::vector<float>& up_buf, float* out) {
  const int64_t n = in.rows() * w.gate.rows;
  ensure_size(gate_buf, n);
  ensure_size(up_buf, n);
  project(ctx, in, w.gate, w.gate_bias, gate_buf.data());
  project(ctx, in, w.up, w.up_bias, up_buf.data());
  for (int64_t i = 0; i < n; ++i) gate_buf[i] = silu(gate_buf[i]) * up_buf[i];
  ProjectionInput act(ctx, gate_buf.data(), in.rows());
  project(ctx, act, w.down, w.down_bias, out);
}

void swiglu_sublayer(const LayerContext& ctx, const VectorView& norm, const LayerWeights& w, float* x) {
  if (no_slice_here(ctx, ctx.hp.n_ff, x)) return;
  const HParams& hp = ctx.hp;
  Scratch& s = ctx.scratch;
  const int64_t T = ctx.batch.size();
  const int64_t E = hp.n_embd;
  ensure_size(s.norm, T * E);
  ensure_size(s.proj, T * E);
  rms_norm_rows(x, s.norm.data(), T, E, hp.rms_eps, norm.data);
  ProjectionInput xn(ctx, s.norm.data());
  swiglu(ctx, xn, {w.ffn_gate, w.ffn_up, w.ffn_down, w.ffn_gate_bias, w.ffn_up_bias, w.ffn_down_bias}, s.gate, s.up,
         s.proj.data());
  add_sublayer_output(ctx, x, s.proj.data(), T * E);
}

}  // namespace strata::model
