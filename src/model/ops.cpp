#include "model/ops.h"

namespace strata::model {

void rms_norm(const float* x, float* y, int64_t n, float eps, const float* w) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  if (w) {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * scale) * w[i];
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
  }
}

void rms_norm_rows(const float* x, float* y, int64_t rows, int64_t n, float eps, const float* w) {
  for (int64_t r = 0; r < rows; ++r) rms_norm(x + r * n, y + r * n, n, eps, w);
}

void RopeAngles::compute(const HParams& hp, int32_t pos, const float* freq_factors) {
  n_pairs = hp.n_rot / 2;
  // Angles grow by repeated float multiplication, exactly as ggml's rope cache does.
  const float theta_scale = std::pow(hp.rope_base, -2.0f / static_cast<float>(hp.n_rot));
  float theta = static_cast<float>(pos);
  for (int32_t j = 0; j < n_pairs; ++j) {
    const float ff = freq_factors ? freq_factors[j] : 1.0f;
    const float t = hp.rope_freq_scale * (theta / ff);
    cos[j] = std::cos(t);
    sin[j] = std::sin(t);
    theta *= theta_scale;
  }
}

void apply_rope(RopeType type, float* x, int32_t n_heads, int32_t head_dim, int32_t n_rot, const RopeAngles& a) {
  const int32_t half = n_rot / 2;
  for (int32_t h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * head_dim;
    for (int32_t j = 0; j < half; ++j) {
      // NORM pairs neighbours (2j, 2j+1); NEOX and IMROPE (text positions) pair j with j + n_rot/2.
      const int32_t i0 = type == RopeType::Norm ? 2 * j : j;
      const int32_t i1 = type == RopeType::Norm ? 2 * j + 1 : j + half;
      const float x0 = v[i0], x1 = v[i1];
      v[i0] = x0 * a.cos[j] - x1 * a.sin[j];
      v[i1] = x0 * a.sin[j] + x1 * a.cos[j];
    }
  }
}

void add_bias_rows(float* x, int64_t rows, const VectorView& b) {
  if (b.empty()) return;
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * b.n;
    for (int64_t i = 0; i < b.n; ++i) row[i] += b.data[i];
  }
}

}  // namespace strata::model
