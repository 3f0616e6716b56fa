#include "model/moe.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "model/ops.h"

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
void routed_experts(const LayerContext& ctx, const LayerWeights& w, const float* xn, const int32_t* ids,
                    const float* weights, float* out) {
  const HParams& hp = ctx.hp;
  Scratch& s = ctx.scratch;
  const int64_t T = ctx.batch.size(), E = hp.n_embd, F = hp.n_ff_expert;
  const int32_t k = hp.n_expert_used;
  // Group the (token, choice) slots by expert, in batch order.
  std::vector<std::vector<int64_t>> slots(hp.n_expert);
  for (int64_t i = 0; i < T * k; ++i) slots[ids[i]].push_back(i);
  ensure_size(s.slot_out, T * k * E);
  for (int32_t e = 0; e < hp.n_expert; ++e) {
    const std::vector<int64_t>& mine = slots[e];
    const int64_t n = static_cast<int64_t>(mine.size());
    if (n == 0) continue;
    ensure_size(s.expert_in, n * E);
    ensure_size(s.expert_out, n * E);
    for (int64_t r = 0; r < n; ++r) std::copy_n(xn + mine[r] / k * E, E, s.expert_in.data() + r * E);
    // Activations are quantized per row, so gathering the rows first changes nothing numerically.
    ProjectionInput in(ctx, s.expert_in.data(), n);
    const Expert x = expert(w, e, F, E);
    if (!x.gate_up.empty()) {
      ensure_size(s.expert_gate, n * 2 * F);
      ensure_size(s.expert_up, n * F);
      project(ctx, in, x.gate_up, {}, s.expert_gate.data());
      for (int64_t r = 0; r < n; ++r) {
        const float* gu = s.expert_gate.data() + r * 2 * F;
        for (int64_t f = 0; f < F; ++f) s.expert_up[r * F + f] = silu(gu[f]) * gu[F + f];
      }
      ProjectionInput act(ctx, s.expert_up.data(), n);
      project(ctx, act, x.down, {}, s.expert_out.data());
    } else {
      swiglu(ctx, in, {x.gate, x.up, x.down}, s.expert_gate, s.expert_up, s.expert_out.data());
    }
    for (int64_t r = 0; r < n; ++r) std::copy_n(s.expert_out.data() + r * E, E, s.slot_out.data() + mine[r] * E);
  }
  for (int64_t t = 0; t < T; ++t) {
    float* o = out + t * E;
    for (int32_t i = 0; i < k; ++i) {
      const float* y = s.slot_out.data() + (t * k + i) * E;
      const float wi = weights[t * k + i];
      if (i == 0) {
        for (int64_t c = 0; c < E; ++c) o[c] = y[c] * wi;
      } else {
        for (int64_t c = 0; c < E; ++c) o[c] += y[c] * wi;
      }
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
  Scratch& s = ctx.scratch;
  const int64_t T = ctx.batch.size(), E = hp.n_embd, X = hp.n_expert;
  const int32_t k = hp.n_expert_used;
  ensure_size(s.norm, T * E);
  ensure_size(s.router, T * X);
  ensure_size(s.proj, T * E);

  rms_norm_rows(x, s.norm.data(), T, E, hp.rms_eps, norm.data);
  ProjectionInput xn(ctx, s.norm.data());
  project(ctx, xn, w.ffn_gate_inp, {}, s.router.data());
  std::vector<int32_t> ids(T * k);
  std::vector<float> weights(T * k);
  for (int64_t t = 0; t < T; ++t) route_experts(s.router.data() + t * X, hp.n_expert, k, &ids[t * k], &weights[t * k]);
  routed_experts(ctx, w, s.norm.data(), ids.data(), weights.data(), s.proj.data());

  if (!w.ffn_gate_inp_shexp.empty()) {
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
  for (int64_t i = 0; i < T * E; ++i) x[i] += s.proj[i];
}

}  // namespace strata::model
