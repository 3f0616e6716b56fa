// A node's speed for the layer kinds: the one-token products (tensor/node_speed.h) and the work a
// decoded token does beside them, timed with the kernels the layers run: attention over an F16 KV
// cache (model::attend, flash-decoding over the node's threads) and the gated delta rule of a Gated
// DeltaNet layer (delta_rule_tokens, one task per value head). The planner predicts one layer of each
// kind from these per-element figures and the model's shapes (plan/balance.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "base/result.h"
#include "tensor/node_speed.h"

namespace strata::model {

// The per-element seconds of attention (at one and at eight query heads per KV head, from which the
// per-query-head share follows) and of the delta rule, each timed over at least `seconds_per_probe`
// on buffers larger than the caches. Errors on threads outside 1..1024.
Result<tensor::LayerWork> measure_layer_work(int32_t threads, double seconds_per_probe = 0.3);

// The whole probe: tensor::measure_product_speed, then measure_layer_work.
Result<tensor::NodeSpeed> measure_node_speed(int32_t threads, double seconds_per_type = 0.5);

// tensor::cached_node_speed with the whole probe: what a node reports and the planner reads.
Result<tensor::NodeSpeed> cached_node_speed(int32_t threads, const std::string& cache_dir);

}  // namespace strata::model
