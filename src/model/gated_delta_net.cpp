#include "model/gated_delta_net.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "memory/recurrent_state.h"
#include "model/delta_rule.h"
#include "model/ops.h"

namespace strata::model {
namespace {

// The batch's rows of each sequence, in batch order; sequences in order of first appearance.
std::vector<std::pair<int32_t, std::vector<int32_t>>> rows_by_sequence(const Batch& batch) {
  std::vector<std::pair<int32_t, std::vector<int32_t>>> out;
  for (int64_t t = 0; t < batch.size(); ++t) {
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& s) { return s.first == batch.seq[t]; });
    if (it == out.end()) it = out.insert(out.end(), {batch.seq[t], {}});
    it->second.push_back(static_cast<int32_t>(t));
  }
  return out;
}

// qwen3next's fused projections, grouped per k-head, into the layout of the separate ones:
// ssm_in rows per k-head [q (d_k) | k (d_k) | v (r d_v) | z (r d_v)] -> mix [q... | k... | v...] and z;
// ssm_ba rows per k-head [beta (r) | alpha (r)] -> beta, alpha. r = H_v / H_k.
void ungroup_qkvz(const HParams& hp, const float* in, float* mix, float* z) {
  const int32_t Hk = hp.ssm_n_k_heads, dk = hp.ssm_head_k_dim(), r = hp.ssm_n_v_heads / Hk;
  const int32_t dv = hp.ssm_head_v_dim();
  const int64_t group = 2 * dk + 2 * int64_t{r} * dv;
  for (int32_t h = 0; h < Hk; ++h) {
    const float* g = in + h * group;
    std::copy_n(g, dk, mix + h * dk);
    std::copy_n(g + dk, dk, mix + (Hk + h) * dk);
    std::copy_n(g + 2 * dk, r * dv, mix + 2 * Hk * dk + h * r * dv);
    std::copy_n(g + 2 * dk + r * dv, r * dv, z + h * r * dv);
  }
}

void ungroup_ba(const HParams& hp, const float* in, float* beta, float* alpha) {
  const int32_t Hk = hp.ssm_n_k_heads, r = hp.ssm_n_v_heads / Hk;
  for (int32_t h = 0; h < Hk; ++h) {
    std::copy_n(in + h * 2 * r, r, beta + h * r);
    std::copy_n(in + h * 2 * r + r, r, alpha + h * r);
  }
}

// mix = attn_qkv * xn (q, k, v channels before the conv), z = attn_gate * xn, beta = sigmoid(ssm_beta
// * xn), g = ssm_a * softplus(ssm_alpha * xn + ssm_dt.bias) (a log-decay <= 0), per token.
void project_inputs(const LayerContext& ctx, const LayerWeights& w, ProjectionInput& xn) {
  const HParams& hp = ctx.hp;
  Scratch& s = ctx.scratch;
  const int64_t T = ctx.batch.size(), C = hp.ssm_conv_channels(), V = hp.ssm_inner_size;
  const int32_t Hv = hp.ssm_n_v_heads;
  ensure_size(s.mix, T * C);
  ensure_size(s.z, T * V);
  ensure_size(s.beta, T * Hv);
  ensure_size(s.decay, T * Hv);
  if (!w.attn_qkv.empty()) {
    project(ctx, xn, w.attn_qkv, {}, s.mix.data());
    project(ctx, xn, w.attn_gate, {}, s.z.data());
  } else {
    ensure_size(s.ba, T * (C + V));
    project(ctx, xn, w.ssm_in, {}, s.ba.data());
    for (int64_t t = 0; t < T; ++t) ungroup_qkvz(hp, s.ba.data() + t * (C + V), s.mix.data() + t * C, s.z.data() + t * V);
  }
  if (!w.ssm_ba.empty()) {
    ensure_size(s.ba, T * 2 * Hv);
    project(ctx, xn, w.ssm_ba, {}, s.ba.data());
    for (int64_t t = 0; t < T; ++t) ungroup_ba(hp, s.ba.data() + t * 2 * Hv, s.beta.data() + t * Hv, s.decay.data() + t * Hv);
  } else {
    project(ctx, xn, w.ssm_beta, {}, s.beta.data());
    project(ctx, xn, w.ssm_alpha, {}, s.decay.data());
  }
  for (int64_t t = 0; t < T; ++t) {
    for (int32_t h = 0; h < Hv; ++h) {
      s.beta[t * Hv + h] = sigmoid(s.beta[t * Hv + h]);
      s.decay[t * Hv + h] = softplus(s.decay[t * Hv + h] + w.ssm_dt_bias.data[h]) * w.ssm_a.data[h];
    }
  }
}

// Causal depthwise conv of every sequence's rows of s.mix into s.conv (before the SiLU): channel c of
// token t is sum_i kernel[c][i] * X[c][t - K + 1 + i] over the K-1 kept inputs then the new ones. The
// conv state keeps the last K-1 raw inputs. One parallel region covers all sequences (each thread
// takes channels of every one), so several slots decoding together cost one dispatch, not one each.
void causal_conv(const LayerContext& ctx, int il, const float* kernel,
                 const std::vector<std::pair<int32_t, std::vector<int32_t>>>& sequences) {
  const int64_t C = ctx.hp.ssm_conv_channels();
  const int32_t K = ctx.hp.ssm_conv_kernel;
  const float* mix = ctx.scratch.mix.data();
  ensure_size(ctx.scratch.conv, ctx.batch.size() * C);
  float* out = ctx.scratch.conv.data();
  // Rows in order, channels innermost (contiguous, so the loops vectorize); per channel the sum runs
  // over the window oldest first, as the definition reads.
  ctx.pool.parallel_for(C, 1024, [&](int64_t c0, int64_t c1) {
    for (const auto& [seq, rows] : sequences) {
      float* conv_state = ctx.recurrent->conv(il, seq);
      for (int32_t r : rows) {
        const float* x = mix + r * C;
        float* o = out + r * C;
        for (int64_t c = c0; c < c1; ++c) {
          const float* w = kernel + c * K;
          float sum = 0.0f;
          for (int32_t i = 0; i + 1 < K; ++i) sum += conv_state[i * C + c] * w[i];
          o[c] = sum + x[c] * w[K - 1];
        }
        for (int32_t i = 0; i + 2 < K; ++i) std::copy(conv_state + (i + 1) * C + c0, conv_state + (i + 1) * C + c1,
                                                      conv_state + i * C + c0);
        if (K > 1) std::copy(x + c0, x + c1, conv_state + (K - 2) * C + c0);
      }
    }
  });
}

// u = silu(conv output); then every q and k head is l2-normalized (eps = the RMS eps).
void activate_qkv(const LayerContext& ctx) {
  const HParams& hp = ctx.hp;
  const int64_t C = hp.ssm_conv_channels();
  const int32_t dk = hp.ssm_head_k_dim();
  ctx.pool.parallel_for(ctx.batch.size(), 4, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* u = ctx.scratch.conv.data() + t * C;
      for (int64_t c = 0; c < C; ++c) u[c] = silu(u[c]);
      for (int32_t h = 0; h < 2 * hp.ssm_n_k_heads; ++h) l2_norm(u + int64_t{h} * dk, dk, hp.rms_eps);
    }
  });
}

// The gated delta rule, one task per (sequence, value head), token by token whatever the batch (as
// llama.cpp's CPU kernel). The chunked form rounds differently depending on where a batch starts and
// ends, so a prompt resumed from a cached state checkpoint would not match a fresh run bit for bit;
// token by token the state at every position is the same however the prompt was split. Outputs go
// to s.delta (per token, H_v x d_v).
void delta_rule(const LayerContext& ctx, int il, const std::vector<std::pair<int32_t, std::vector<int32_t>>>& sequences,
                const DeltaNetOptions& options) {
  const HParams& hp = ctx.hp;
  Scratch& s = ctx.scratch;
  const int64_t C = hp.ssm_conv_channels(), V = hp.ssm_inner_size;
  const int32_t Hk = hp.ssm_n_k_heads, Hv = hp.ssm_n_v_heads, dk = hp.ssm_head_k_dim(), dv = hp.ssm_head_v_dim();
  ensure_size(s.delta, ctx.batch.size() * V);
  const DeltaShape shape{dk, dv, 1.0f / std::sqrt(static_cast<float>(dk))};
  const int64_t n_tasks = static_cast<int64_t>(sequences.size()) * Hv;
  ctx.pool.parallel_for(n_tasks, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const auto& [seq, rows] = sequences[i / Hv];
      const int32_t h = static_cast<int32_t>(i % Hv);
      const int32_t hk = options.grouped_heads ? h / (Hv / Hk) : h % Hk;
      const float* u = s.conv.data();
      const DeltaHead head{u + int64_t{hk} * dk, u + int64_t{Hk + hk} * dk, C,
                           u + 2 * int64_t{Hk} * dk + int64_t{h} * dv, C,
                           s.decay.data() + h, s.beta.data() + h, Hv,
                           s.delta.data() + int64_t{h} * dv, V};
      float* S = ctx.recurrent->ssm(il, seq) + int64_t{h} * dk * dv;
      delta_rule_tokens(head, rows.data(), static_cast<int64_t>(rows.size()), shape, S);
    }
  });
}

// o = rmsnorm(o) * ssm_norm * silu(z), per token and value head.
void gated_norm(const LayerContext& ctx, const LayerWeights& w) {
  const int32_t dv = ctx.hp.ssm_head_v_dim();
  ctx.pool.parallel_for(ctx.batch.size() * ctx.hp.ssm_n_v_heads, 16, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      float* o = ctx.scratch.delta.data() + i * dv;  // token i / H_v, head i % H_v
      const float* z = ctx.scratch.z.data() + i * dv;
      rms_norm(o, o, dv, ctx.hp.rms_eps, w.ssm_norm.data);
      for (int32_t j = 0; j < dv; ++j) o[j] *= silu(z[j]);
    }
  });
}

}  // namespace

memory::RecurrentConfig recurrent_config(const HParams& hp, const std::vector<uint8_t>& owned, int32_t n_seq) {
  memory::RecurrentConfig c;
  c.n_layer = hp.n_layer;
  c.layer_has_state.assign(hp.n_layer, 0);
  for (int il = 0; il < hp.n_layer; ++il) {
    c.layer_has_state[il] = hp.is_recurrent(il) && (owned.empty() || owned[il]) && hp.ssm_n_v_heads > 0 ? 1 : 0;
  }
  c.conv_rows = hp.ssm_conv_kernel > 0 ? hp.ssm_conv_kernel - 1 : 0;
  c.conv_channels = hp.ssm_conv_channels();
  c.n_heads = hp.ssm_n_v_heads;
  c.head_k_dim = hp.ssm_head_k_dim();
  c.head_v_dim = hp.ssm_head_v_dim();
  c.n_seq = n_seq;
  return c;
}

void gated_delta_net_sublayer(const LayerContext& ctx, const LayerWeights& w, int il, float* x,
                              const DeltaNetOptions& options) {
  if (no_slice_here(ctx, ctx.hp.ssm_n_k_heads, x)) return;
  const HParams& hp = ctx.hp;
  Scratch& s = ctx.scratch;
  const int64_t T = ctx.batch.size(), E = hp.n_embd;
  ensure_size(s.norm, T * E);
  ensure_size(s.proj, T * E);
  rms_norm_rows(x, s.norm.data(), T, E, hp.rms_eps, w.attn_norm.data);
  ProjectionInput xn(ctx, s.norm.data());
  project_inputs(ctx, w, xn);  // s.mix = [q|k|v] (pre-conv), s.z, s.beta, s.decay (= g)
  const auto sequences = rows_by_sequence(ctx.batch);
  causal_conv(ctx, il, w.ssm_conv1d.data, sequences);  // s.conv
  activate_qkv(ctx);                                  // silu, l2norm(q), l2norm(k)
  delta_rule(ctx, il, sequences, options);            // s.delta = o, state updated
  gated_norm(ctx, w);                                 // o = rms(o) * ssm_norm * silu(z)
  ProjectionInput o(ctx, s.delta.data());
  project(ctx, o, w.ssm_out, {}, s.proj.data());
  add_sublayer_output(ctx, x, s.proj.data(), T * E);
}

}  // namespace strata::model
