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
// x /= max(||x||_2, eps) in place (ggml_l2_norm: the sum of squares in double).
void l2_norm(float* x, int64_t n, float eps);

inline float silu(float x) { return x / (1.0f + std::exp(-x)); }
inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
inline float softplus(float x) { return x > 20.0f ? x : std::log(1.0f + std::exp(x)); }

// p = softmax(x) over n values in place: exp(x - max) summed in double, then scaled by the float
// reciprocal, as ggml_soft_max does.
void softmax(float* x, int64_t n);

// IMRoPE: the position stream (0 = t, 1 = h, 2 = w, 3 = e) that rotary pair `pair` takes its angle
// from, given rope.dimension_sections (ggml's interleaved sector rule).
int imrope_stream(int32_t pair, const int32_t sections[4]);

// Per-position rotary angles: cos/sin for each of n_rot/2 pairs.
struct RopeAngles {
  // Text positions: NORM and NEOX rotate every pair by `pos`; IMROPE gives the t, h and w streams
  // position `pos` and the e stream 0 (so pairs mapped to e are not rotated).
  void compute(const HParams& hp, int32_t pos, const float* freq_factors);
  // Multi-stream positions {t, h, w, e}; each pair uses its IMRoPE stream's position.
  void compute_multi(const HParams& hp, const int32_t pos[4], const float* freq_factors);
  float cos[256];
  float sin[256];
  int32_t n_pairs = 0;
};

// Rotates the first n_rot dims of each of n_heads heads (head_dim apart) in place.
void apply_rope(RopeType type, float* x, int32_t n_heads, int32_t head_dim, int32_t n_rot, const RopeAngles& a);

// Adds a bias vector to each of `rows` rows of width b.n.
void add_bias_rows(float* x, int64_t rows, const VectorView& b);

}  // namespace strata::model
