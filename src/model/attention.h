// Causal self-attention of a batch's queries over the F16 KV cache (the flash-style kernels are in
// tensor/attention_kernels.h).
#pragma once

#include "model/architecture.h"
#include "tensor/quants.h"

namespace strata::model {

// Causal attention of the batch's queries over the KV cache of layer il, written to out
// (n_tokens x n_head*head_dim_v). q holds n_tokens x n_head*head_dim_k after RoPE. Token t attends
// to positions 0..batch.pos[t] of sequence batch.seq[t] (its own K and V are already cached). Q is
// rounded to F16 before meeting the keys, as llama.cpp's flash attention does. A (token, head)
// result depends neither on the thread count nor on the other tokens of the batch.
void attend(const LayerContext& ctx, int il, const float* q, float* out);

// The same with a given ISA's kernel (tests and benchmarks); the CPU must support it.
void attend(const LayerContext& ctx, int il, const float* q, float* out, tensor::Isa isa);

}  // namespace strata::model
