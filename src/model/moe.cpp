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

// out[t] = sum over t's chosen experts i of weights[t][i] * expert_i(xn[t]), summed in choice order.
// The (token, choice) rows are grouped by expert, so each expert's rows are read once per batch, and
// all experts' gate/up products run in one parallel region, their down products in another.
void routed_experts(const LayerContext& ctx, const LayerWeights& w, Range held_experts, const float* xn,
                    const int32_t* ids, const float* weights, float* out) {
  const HParams& hp = ctx.hp;
  Scratch& s = ctx.scratch;
  const int64_t T = ctx.batch.size(), E = hp.n_embd, F = hp.n_ff_expert;
  const int32_t k = hp.n_expert_used;
  const int64_t R = T * k;
  const bool fused = !w.ffn_gate_up_exps.empty();
  const int64_t GW = fused ? 2 * F : F;  // width of a row of gate (or fused gate|up) outputs

  // Counting sort of the rows by held expert (index from held_experts.begin), stable (batch order
  // within an expert); a choice of an expert held elsewhere gets no row (-1) and adds nothing here.
  const int32_t e0 = held_experts.begin, X = held_experts.size();
  const auto held = [&](int64_t i) { return ids[i] >= e0 && ids[i] - e0 < X; };
  std::vector<int64_t> first(X + 1, 0), row_of(R, -1);
  for (int64_t i = 0; i < R; ++i) {
    if (held(i)) ++first[ids[i] - e0 + 1];
  }
  for (int32_t e = 0; e < X; ++e) first[e + 1] += first[e];
  {
    std::vector<int64_t> next(first.begin(), first.end() - 1);
    for (int64_t i = 0; i < R; ++i) {
      if (held(i)) row_of[i] = next[ids[i] - e0]++;
    }
  }
  const int64_t rows = first[X];
  if (rows == 0) {  // none of the batch's choices is held here
    std::fill_n(out, T * E, 0.0f);
    return;
  }
  ensure_size(s.expert_in, R * E);
  for (int64_t i = 0; i < R; ++i) {
    if (row_of[i] >= 0) std::copy_n(xn + i / k * E, E, s.expert_in.data() + row_of[i] * E);
  }

  // Activations are quantized per row, so gathering the rows first changes nothing numerically.
  const MatrixView& gate_w = fused ? w.ffn_gate_up_exps : w.ffn_gate_exps;
  tensor::QuantizedActivations in;
  in.quantize(gate_w.type, s.expert_in.data(), rows, E, ctx.pool);
  ensure_size(s.expert_gate, R * GW);
  ensure_size(s.expert_up, R * F);
  std::vector<tensor::MatmulJob> jobs;
  for (int32_t e = 0; e < X; ++e) {
    const int64_t n = first[e + 1] - first[e];
    if (n == 0) continue;
    const Expert x = expert(w, e, F, E);
    if (fused) {
      jobs.push_back({x.gate_up, &in, first[e], n, s.expert_gate.data() + first[e] * GW, GW});
    } else {
      jobs.push_back({x.gate, &in, first[e], n, s.expert_gate.data() + first[e] * GW, GW});
      jobs.push_back({x.up, &in, first[e], n, s.expert_up.data() + first[e] * F, F});
    }
  }
  tensor::matmul_batch(jobs, ctx.pool);

  // SwiGLU into expert_up (fused rows hold [gate | up]).
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = s.expert_gate.data() + r * GW;
    const float* u = fused ? g + F : s.expert_up.data() + r * F;
    float* a = s.expert_up.data() + r * F;
    for (int64_t f = 0; f < F; ++f) a[f] = silu(g[f]) * u[f];
  }
  tensor::QuantizedActivations act;
  act.quantize(w.ffn_down_exps.type, s.expert_up.data(), rows, F, ctx.pool);
  ensure_size(s.expert_out, R * E);
  jobs.clear();
  for (int32_t e = 0; e < X; ++e) {
    const int64_t n = first[e + 1] - first[e];
    if (n > 0) jobs.push_back({expert(w, e, F, E).down, &act, first[e], n, s.expert_out.data() + first[e] * E, E});
  }
  tensor::matmul_batch(jobs, ctx.pool);

  for (int64_t t = 0; t < T; ++t) {
    float* o = out + t * E;
    std::fill_n(o, E, 0.0f);
    for (int32_t i = 0; i < k; ++i) {
      if (row_of[t * k + i] < 0) continue;
      const float* y = s.expert_out.data() + row_of[t * k + i] * E;
      const float wi = weights[t * k + i];
      for (int64_t c = 0; c < E; ++c) o[c] += y[c] * wi;
    }
  }
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
    for (int64_t t = 0; t < T; ++t) route_experts(s.router.data() + t * X, hp.n_expert, k, &ids[t * k], &weights[t * k]);
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
    for (int64_t t = 0; t < T; ++t) {
      const float g = sigmoid(gate[t]);
      for (int64_t c = 0; c < E; ++c) s.proj[t * E + c] += s.shared[t * E + c] * g;
    }
  }
  add_sublayer_output(ctx, x, s.proj.data(), T * E);
}

}  // namespace strata::model
