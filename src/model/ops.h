// Element-wise and row-wise operations of the forward pass, with llama.cpp's CPU numerics.
#pragma once

#include <cmath>
#include <cstdint>

#include "model/hparams.h"
#include "model/weights.h"

namespace strata::model {

// y = x / sqrt(mean(x^2) + eps) (sum in double, as ggml does), then y *= w when w is given.
void rms_norm(const float* x, float* y, int64_t n, float eps, const float* w);
// rms_norm over each of `rows` rows of `n` values.
void rms_norm_rows(const float* x, float* y, int64_t rows, int64_t n, float eps, const float* w);

inline float silu(float x) { return x / (1.0f + std::exp(-x)); }
inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// Per-position rotary angles: cos/sin for each of n_rot/2 pairs.
struct RopeAngles {
  void compute(const HParams& hp, int32_t pos, const float* freq_factors);
  float cos[256];
  float sin[256];
  int32_t n_pairs = 0;
};

// Rotates the first n_rot dims of each of n_heads heads (head_dim apart) in place.
void apply_rope(RopeType type, float* x, int32_t n_heads, int32_t head_dim, int32_t n_rot, const RopeAngles& a);

// Adds a bias vector to each of `rows` rows of width b.n.
void add_bias_rows(float* x, int64_t rows, const VectorView& b);

}  // namespace strata::model
