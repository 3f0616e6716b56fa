// Gated DeltaNet (linear attention) sub-layer of the hybrid models (qwen35, qwen35moe, qwen3next).
#pragma once

#include <vector>

#include "memory/recurrent_state.h"
#include "model/blocks.h"

namespace strata::model {

struct DeltaNetOptions {
  // Which k-head (q and k) a value head reads. qwen35 GGUFs reorder value heads so that v-head h uses
  // k-head h mod H_k ("tiled"); qwen3next GGUFs keep the grouped order, h / (H_v / H_k).
  bool grouped_heads = false;
};

// The recurrent state for the Gated DeltaNet layers among `owned` (all layers when empty), n_seq
// sequences.
memory::RecurrentConfig recurrent_config(const HParams& hp, const std::vector<uint8_t>& owned, int32_t n_seq);

// x += ssm_out * (rmsnorm(o) * ssm_norm * silu(z)) where, for xn = rms(x) * attn_norm:
//   [q|k|v] = silu(causal_conv1d(attn_qkv * xn)), z = attn_gate * xn,
//   beta = sigmoid(ssm_beta * xn), g = ssm_a * softplus(ssm_alpha * xn + ssm_dt.bias),
//   o = gated delta rule over l2norm(q), l2norm(k), v (state in ctx.recurrent).
// Each sequence's tokens run in batch order: in chunks when a sequence brings several tokens, one
// at a time otherwise.
void gated_delta_net_sublayer(const LayerContext& ctx, const LayerWeights& w, int il, float* x,
                              const DeltaNetOptions& options);

}  // namespace strata::model
