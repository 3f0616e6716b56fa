// Mixture-of-experts feed-forward block (qwen3moe, qwen35moe, qwen3next): a softmax router picks
// n_expert_used of n_expert SwiGLU experts per token; qwen35moe and qwen3next add a shared expert
// scaled by a sigmoid gate.
#pragma once

#include <cstdint>

#include "model/blocks.h"

namespace strata::model {

// Routing of one token: p = softmax(logits) over all n_expert experts; the k most probable are chosen
// (highest first; on a tie the lower expert index first) and their probabilities renormalized:
// w_i = p_i / max(sum of the chosen p, 6.103515625e-5). Writes k ids and k weights.
void route_experts(const float* logits, int32_t n_expert, int32_t k, int32_t* ids, float* weights);

// x += MoE(rms(x) * norm): the routed experts (each expert's weights read once per batch, for all the
// tokens that chose it) plus, when the layer has one, the gated shared expert.
void moe_sublayer(const LayerContext& ctx, const VectorView& norm, const LayerWeights& w, float* x);

}  // namespace strata::model
