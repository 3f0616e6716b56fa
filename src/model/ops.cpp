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

void l2_norm(float* x, int64_t n, float eps) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float scale = 1.0f / std::fmax(std::sqrt(static_cast<float>(sum)), eps);
  for (int64_t i = 0; i < n; ++i) x[i] *= scale;
}

void softmax(float* x, int64_t n) {
  float max = -INFINITY;
  for (int64_t i = 0; i < n; ++i) max = std::fmax(max, x[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += static_cast<double>(x[i]);
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

int imrope_stream(int32_t pair, const int32_t sections[4]) {
  const int32_t total = sections[0] + sections[1] + sections[2] + sections[3];
  const int32_t sector = total > 0 ? pair % total : pair;
  // Sectors cycle t, h, w; a stream keeps 3 * its section count sectors, the rest fall to e.
  if (sector % 3 == 1 && sector < 3 * sections[1]) return 1;
  if (sector % 3 == 2 && sector < 3 * sections[2]) return 2;
  if (sector % 3 == 0 && sector < 3 * sections[0]) return 0;
  return 3;
}

void RopeAngles::compute(const HParams& hp, int32_t pos, const float* freq_factors) {
  const int32_t streams[4] = {pos, pos, pos, 0};
  compute_multi(hp, streams, freq_factors);
}

void RopeAngles::compute_multi(const HParams& hp, const int32_t pos[4], const float* freq_factors) {
  n_pairs = hp.n_rot / 2;
  const bool multi = hp.rope_type == RopeType::IMrope;
  // Angles grow by repeated float multiplication, exactly as ggml's rope cache does; each stream
  // keeps its own running angle.
  const float theta_scale = std::pow(hp.rope_base, -2.0f / static_cast<float>(hp.n_rot));
  float theta[4];
  for (int s = 0; s < 4; ++s) theta[s] = static_cast<float>(pos[s]);
  for (int32_t j = 0; j < n_pairs; ++j) {
    const float ff = freq_factors ? freq_factors[j] : 1.0f;
    const float base = theta[multi ? imrope_stream(j, hp.rope_sections) : 0];
    const float t = hp.rope_freq_scale * (base / ff);
    cos[j] = std::cos(t);
    sin[j] = std::sin(t);
    for (float& th : theta) th *= theta_scale;
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
