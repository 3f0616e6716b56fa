#include "model/moe.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "model/ops.h"
#include "model/shard.h"
#include "tensor/matmul.h"

namespace strata::model {
namespace {

// A routed expert's matrices: row slices of the 3-D expert tensors.
struct Expert {
  MatrixView gate_up;  // fused form: gate rows then up rows (empty when separate)
  MatrixView gate, up, down;
};

Expert expert(const LayerWeights& w, int32_t e, int64_t F, int64_t E) {
  Expert x;
  if (!w.ffn_gate_up_exps.empty()) {
    x.gate_up = w.ffn_gate_up_exps.slice_rows(e * 2 * F, 2 * F);
  } else {
    x.gate = w.ffn_gate_exps.slice_rows(e * F, F);
    x.up = w.ffn_up_exps.slice_rows(e * F, F);
  }
  x.down = w.ffn_down_exps.slice_rows(e * E, E);
  return x;
}

// The batch's (token, choice) rows grouped by held expert: a counting sort, stable (batch order
// within an expert). A choice of an expert held elsewhere gets no row (-1) and adds nothing here.
struct ExpertRows {
  std::vector<int64_t> first;   // expert e's rows are [first[e], first[e + 1]) (e from the held range's start)
  std::vector<int64_t> row_of;  // choice i (token i / k) -> its row, or -1
  int32_t experts() const { return static_cast<int32_t>(first.size()) - 1; }
  int64_t rows() const { return first.back(); }
  int64_t count(int32_t e) const { return first[e + 1] - first[e]; }
};

ExpertRows group_by_expert(const int32_t* ids, int64_t choices, Range held_experts) {
  const int32_t e0 = held_experts.begin, X = held_experts.size();
  const auto held = [&](int64_t i) { return ids[i] >= e0 && ids[i] - e0 < X; };
  ExpertRows g{std::vector<int64_t>(X + 1, 0), std::vector<int64_t>(choices, -1)};
  for (int64_t i = 0; i < choices; ++i) {
    if (held(i)) ++g.first[ids[i] - e0 + 1];
  }
  for (int32_t e = 0; e < X; ++e) g.first[e + 1] += g.first[e];
  std::vector<int64_t> next(g.first.begin(), g.first.end() - 1);
  for (int64_t i = 0; i < choices; ++i) {
    if (held(i)) g.row_of[i] = next[ids[i] - e0]++;
  }
  return g;
}

// Each held choice's token row of xn copied to its grouped row of s.expert_in.
void gather_expert_inputs(const LayerContext& ctx, const ExpertRows& g, const float* xn) {
  const int64_t T = ctx.batch.size(), E = ctx.hp.n_embd;
  const int32_t k = ctx.hp.n_expert_used;
  Scratch& s = ctx.scratch;
  ensure_size(s.expert_in, g.rows() * E);
  ctx.pool.parallel_for(T * k, 16, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      if (g.row_of[i] >= 0) std::copy_n(xn + i / k * E, E, s.expert_in.data() + g.row_of[i] * E);
    }
  });
}

// Every held expert's gate and up rows (or fused gate|up rows) for its rows of s.expert_in, in one
// parallel region: s.expert_gate holds GW-wide rows, s.expert_up (separate form) F-wide.
void expert_gate_up(const LayerContext& ctx, const LayerWeights& w, const ExpertRows& g) {
  const int64_t E = ctx.hp.n_embd, F = ctx.hp.n_ff_expert;
  const bool fused = !w.ffn_gate_up_exps.empty();
  const int64_t GW = fused ? 2 * F : F;
  Scratch& s = ctx.scratch;
  tensor::QuantizedActivations in;
  in.quantize((fused ? w.ffn_gate_up_exps : w.ffn_gate_exps).type, s.expert_in.data(), g.rows(), E, ctx.pool);
  ensure_size(s.expert_gate, g.rows() * GW);
  ensure_size(s.expert_up, g.rows() * F);
  std::vector<tensor::MatmulJob> jobs;
  for (int32_t e = 0; e < g.experts(); ++e) {
    const int64_t n = g.count(e), r = g.first[e];
    if (n == 0) continue;
    const Expert x = expert(w, e, F, E);
    if (fused) {
      jobs.push_back({x.gate_up, &in, r, n, s.expert_gate.data() + r * GW, GW});
    } else {
      jobs.push_back({x.gate, &in, r, n, s.expert_gate.data() + r * GW, GW});
      jobs.push_back({x.up, &in, r, n, s.expert_up.data() + r * F, F});
    }
  }
  tensor::matmul_batch(jobs, ctx.pool);
}

// SwiGLU of every row into s.expert_up (fused rows hold [gate | up]).
void expert_swiglu(const LayerContext& ctx, bool fused, int64_t rows) {
  const int64_t F = ctx.hp.n_ff_expert, GW = fused ? 2 * F : F;
  Scratch& s = ctx.scratch;
  ctx.pool.parallel_for(rows, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* g = s.expert_gate.data() + r * GW;
      const float* u = fused ? g + F : s.expert_up.data() + r * F;
      float* a = s.expert_up.data() + r * F;
      for (int64_t f = 0; f < F; ++f) a[f] = silu(g[f]) * u[f];
    }
  });
}

// Every held expert's down rows for its rows of s.expert_up (the SwiGLU activations), into
// s.expert_out.
void expert_down(const LayerContext& ctx, const LayerWeights& w, const ExpertRows& g) {
  const int64_t E = ctx.hp.n_embd, F = ctx.hp.n_ff_expert;
  Scratch& s = ctx.scratch;
  tensor::QuantizedActivations act;
  act.quantize(w.ffn_down_exps.type, s.expert_up.data(), g.rows(), F, ctx.pool);
  ensure_size(s.expert_out, g.rows() * E);
  std::vector<tensor::MatmulJob> jobs;
  for (int32_t e = 0; e < g.experts(); ++e) {
    const int64_t n = g.count(e), r = g.first[e];
    if (n > 0) jobs.push_back({expert(w, e, F, E).down, &act, r, n, s.expert_out.data() + r * E, E});
  }
  tensor::matmul_batch(jobs, ctx.pool);
}

// out[t] = sum over t's choices i, in choice order, of weights[t][i] * (row of choice i).
void combine_choices(const LayerContext& ctx, const ExpertRows& g, const float* weights, float* out) {
  const int64_t E = ctx.hp.n_embd;
  const int32_t k = ctx.hp.n_expert_used;
  ctx.pool.parallel_for(ctx.batch.size(), 4, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* o = out + t * E;
      std::fill_n(o, E, 0.0f);
      for (int32_t i = 0; i < k; ++i) {
        if (g.row_of[t * k + i] < 0) continue;
        const float* y = ctx.scratch.expert_out.data() + g.row_of[t * k + i] * E;
        const float wi = weights[t * k + i];
        for (int64_t c = 0; c < E; ++c) o[c] += y[c] * wi;
      }
    }
  });
}

// out[t] = sum over t's chosen experts i of weights[t][i] * expert_i(xn[t]), summed in choice order.
// The (token, choice) rows are grouped by expert, so each expert's rows are read once per batch, and
// all experts' gate/up products run in one parallel region, their down products in another.
// Activations are quantized per row, so gathering the rows first changes nothing numerically.
void routed_experts(const LayerContext& ctx, const LayerWeights& w, Range held_experts, const float* xn,
                    const int32_t* ids, const float* weights, float* out) {
  const int64_t T = ctx.batch.size();
  const ExpertRows g = group_by_expert(ids, T * ctx.hp.n_expert_used, held_experts);
  if (g.rows() == 0) {  // none of the batch's choices is held here
    std::fill_n(out, T * ctx.hp.n_embd, 0.0f);
    return;
  }
  gather_expert_inputs(ctx, g, xn);
  expert_gate_up(ctx, w, g);
  expert_swiglu(ctx, !w.ffn_gate_up_exps.empty(), g.rows());
  expert_down(ctx, w, g);
  combine_choices(ctx, g, weights, out);
}

}  // namespace

void route_experts(const float* logits, int32_t n_expert, int32_t k, int32_t* ids, float* weights) {
  std::vector<float> p(logits, logits + n_expert);
  softmax(p.data(), n_expert);
  std::vector<int32_t> order(n_expert);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
  float sum = 0.0f;
  for (int32_t i = 0; i < k; ++i) {
    ids[i] = order[i];
    weights[i] = p[order[i]];
    sum += weights[i];
  }
  sum = std::max(sum, 6.103515625e-5f);
  for (int32_t i = 0; i < k; ++i) weights[i] /= sum;
}

void moe_sublayer(const LayerContext& ctx, const VectorView& norm, const LayerWeights& w, float* x) {
  const HParams& hp = ctx.hp;
  // A member may hold routed experts but no shared-expert rows, or the other way round.
  const Range held{std::max(0, ctx.first_expert), std::min(hp.n_expert, ctx.end_expert)};
  const bool routed = hp.n_ff_expert > 0 && held.size() > 0;
  const bool shared = !w.ffn_gate_inp_shexp.empty() && hp.n_ff_shared_expert > 0;
  if (no_slice_here(ctx, routed || shared ? 1 : 0, x)) return;
  Scratch& s = ctx.scratch;
  const int64_t T = ctx.batch.size(), E = hp.n_embd, X = hp.n_expert;
  const int32_t k = hp.n_expert_used;
  ensure_size(s.norm, T * E);
  ensure_size(s.router, T * X);
  ensure_size(s.proj, T * E);

  rms_norm_rows(x, s.norm.data(), T, E, hp.rms_eps, norm.data);
  ProjectionInput xn(ctx, s.norm.data());
  if (routed) {
    project(ctx, xn, w.ffn_gate_inp, {}, s.router.data());
    std::vector<int32_t> ids(T * k);
    std::vector<float> weights(T * k);
    ctx.pool.parallel_for(T, 16, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) route_experts(s.router.data() + t * X, hp.n_expert, k, &ids[t * k], &weights[t * k]);
    });
    routed_experts(ctx, w, held, s.norm.data(), ids.data(), weights.data(), s.proj.data());
  } else {
    std::fill_n(s.proj.data(), T * E, 0.0f);
  }

  if (shared) {
    // Shared expert, scaled per token by sigmoid(ffn_gate_inp_shexp . xn).
    ensure_size(s.shared, T * E);
    std::vector<float> gate(T);
    swiglu(ctx, xn, {w.ffn_gate_shexp, w.ffn_up_shexp, w.ffn_down_shexp}, s.gate, s.up, s.shared.data());
    project(ctx, xn, w.ffn_gate_inp_shexp, {}, gate.data());
    ctx.pool.parallel_for(T, 4, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const float g = sigmoid(gate[t]);
        for (int64_t c = 0; c < E; ++c) s.proj[t * E + c] += s.shared[t * E + c] * g;
      }
    });
  }
  add_sublayer_output(ctx, x, s.proj.data(), T * E);
}

}  // namespace strata::model
