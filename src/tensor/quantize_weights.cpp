// Reference weight quantizers (the algorithms of ggml's quantize_row_*_ref, written anew).
#include "tensor/quantize_weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tensor/blocks.h"

namespace strata::tensor {
namespace {

using namespace detail;

constexpr float kGroupMaxEps = 1e-15f;

// Round to nearest, ties to even (valid for |v| < 2^22, as ggml's nearest_int).
inline int round_even(float v) {
  float shifted = v + 12582912.f;
  int32_t bits;
  std::memcpy(&bits, &shifted, 4);
  return (bits & 0x007fffff) - 0x00400000;
}

void q8_0(const float* x, BlockQ8_0* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kQK) {
    float amax = 0;
    for (int i = 0; i < kQK; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float d = amax / 127.f;
    const float id = d != 0 ? 1.f / d : 0.f;
    y[b].d = fp32_to_fp16(d);
    for (int i = 0; i < kQK; ++i) y[b].qs[i] = static_cast<int8_t>(std::round(x[i] * id));
  }
}

// Signed value of largest magnitude (first one on ties).
inline float signed_absmax(const float* x, int n) {
  float amax = 0, m = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      m = x[i];
    }
  }
  return m;
}

void q4_0(const float* x, BlockQ4_0* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kQK) {
    const float d = signed_absmax(x, kQK) / -8.f;
    const float id = d != 0 ? 1.f / d : 0.f;
    y[b].d = fp32_to_fp16(d);
    for (int j = 0; j < 16; ++j) {
      const int lo = std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f)));
      const int hi = std::min(15, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 8.5f)));
      y[b].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

// Packs 32 five-bit values: low nibbles into qs (element j and j+16 share byte j), bit 4 into qh.
inline void pack5(const int* q, uint8_t qs[16], uint8_t qh_bytes[4]) {
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>((q[j] & 15) | ((q[j + 16] & 15) << 4));
    qh |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
    qh |= static_cast<uint32_t>((q[j + 16] >> 4) & 1) << (j + 16);
  }
  std::memcpy(qh_bytes, &qh, 4);
}

void q5_0(const float* x, BlockQ5_0* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kQK) {
    const float d = signed_absmax(x, kQK) / -16.f;
    const float id = d != 0 ? 1.f / d : 0.f;
    y[b].d = fp32_to_fp16(d);
    int q[kQK];
    for (int i = 0; i < kQK; ++i) q[i] = std::min(31, static_cast<int>(static_cast<int8_t>(x[i] * id + 16.5f)));
    pack5(q, y[b].qs, y[b].qh);
  }
}

void q5_1(const float* x, BlockQ5_1* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kQK) {
    float mn = x[0], mx = x[0];
    for (int i = 1; i < kQK; ++i) {
      mn = std::min(mn, x[i]);
      mx = std::max(mx, x[i]);
    }
    const float d = (mx - mn) / 31.f;
    const float id = d != 0 ? 1.f / d : 0.f;
    y[b].d = fp32_to_fp16(d);
    y[b].m = fp32_to_fp16(mn);
    int q[kQK];
    for (int i = 0; i < kQK; ++i) q[i] = static_cast<uint8_t>((x[i] - mn) * id + 0.5f);
    pack5(q, y[b].qs, y[b].qh);
  }
}

// Symmetric fit of n values to integers in [-nmax, nmax-1] with weights x^2 (ggml's make_qx_quants,
// rmse_type 1): tries 19 candidate inverse scales, keeps the one with the least weighted error.
// L receives the quants offset by nmax; returns the scale.
float fit_symmetric(int n, int nmax, const float* x, int8_t* L) {
  const float m = signed_absmax(x, n);
  if (std::fabs(m) < kGroupMaxEps) {
    std::fill(L, L + n, 0);
    return 0.f;
  }
  auto trial = [&](float iscale, float& sumlx, float& suml2, bool store) {
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(round_even(iscale * x[i]), -nmax, nmax - 1);
      if (store) L[i] = static_cast<int8_t>(l + nmax);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
  };
  float sumlx, suml2;
  trial(-nmax / m, sumlx, suml2, true);
  float scale = suml2 != 0 ? sumlx / suml2 : 0.f;
  float best = scale * sumlx;
  for (int k = -9; k <= 9; ++k) {
    if (k == 0) continue;
    const float iscale = -(nmax + 0.1f * k) / m;
    trial(iscale, sumlx, suml2, false);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      trial(iscale, sumlx, suml2, true);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Asymmetric weighted fit of n values to scale*L - min, L in [0, nmax] (ggml's make_qkx2_quants
// without MAD). Returns the scale; *neg_min receives -min (>= 0).
float fit_affine(int n, int nmax, const float* x, const float* w, uint8_t* L, float* neg_min, float rmin,
                 float rdelta, int nstep) {
  float mn = x[0], mx = x[0], sum_w = w[0], sum_x = w[0] * x[0];
  for (int i = 1; i < n; ++i) {
    mn = std::min(mn, x[i]);
    mx = std::max(mx, x[i]);
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (mn > 0) mn = 0;
  if (mx == mn) {
    std::fill(L, L + n, 0);
    *neg_min = -mn;
    return 0.f;
  }
  float iscale = nmax / (mx - mn);
  float scale = 1.f / iscale;
  float best_err = 0;
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<uint8_t>(std::clamp(round_even(iscale * (x[i] - mn)), 0, nmax));
    const float diff = scale * L[i] + mn - x[i];
    best_err += w[i] * diff * diff;
  }
  uint8_t aux[32];
  for (int s = 0; s <= nstep; ++s) {
    iscale = (rmin + rdelta * s + nmax) / (mx - mn);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(round_even(iscale * (x[i] - mn)), 0, nmax);
      aux[i] = static_cast<uint8_t>(l);
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det <= 0) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (this_min > 0) {
      this_min = 0;
      this_scale = sum_xl / sum_l2;
    }
    float err = 0;
    for (int i = 0; i < n; ++i) {
      const float diff = this_scale * aux[i] + this_min - x[i];
      err += w[i] * diff * diff;
    }
    if (err < best_err) {
      std::memcpy(L, aux, static_cast<size_t>(n));
      best_err = err;
      scale = this_scale;
      mn = this_min;
    }
  }
  *neg_min = -mn;
  return scale;
}

// Shared Q4_K/Q5_K path: fits eight 32-element sub-blocks, packs their 6-bit scales and mins into
// `scales`, writes d/dmin and returns the final quants (0..nmax) in L.
void kquant_affine(const float* x, int nmax, float rmin, int nstep, uint16_t* d_out, uint16_t* dmin_out,
                   uint8_t scales[12], uint8_t L[256]) {
  float sub_scale[8], sub_min[8], w[32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) w[l] = av_x + std::fabs(xs[l]);
    sub_scale[j] = fit_affine(32, nmax, xs, w, L + 32 * j, &sub_min[j], rmin, 0.1f, nstep);
    max_scale = std::max(max_scale, sub_scale[j]);
    max_min = std::max(max_min, sub_min[j]);
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  std::memset(scales, 0, 12);
  for (int j = 0; j < 8; ++j) {
    const int ls = std::min(63, round_even(inv_scale * sub_scale[j]));
    const int lm = std::min(63, round_even(inv_min * sub_min[j]));
    if (j < 4) {
      scales[j] = static_cast<uint8_t>(ls);
      scales[j + 4] = static_cast<uint8_t>(lm);
    } else {
      scales[j + 4] = static_cast<uint8_t>((ls & 15) | ((lm & 15) << 4));
      scales[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      scales[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  *d_out = fp32_to_fp16(max_scale / 63.f);
  *dmin_out = fp32_to_fp16(max_min / 63.f);
  uint64_t sc_packed, m_packed;
  unpack_k4_scales(scales, &sc_packed, &m_packed);
  for (int j = 0; j < 8; ++j) {
    const int sc = static_cast<int>((sc_packed >> (8 * j)) & 0xff);
    const int m = static_cast<int>((m_packed >> (8 * j)) & 0xff);
    const float d = fp16_to_fp32(*d_out) * sc;
    if (d == 0) continue;
    const float dm = fp16_to_fp32(*dmin_out) * m;
    for (int l = 0; l < 32; ++l) {
      L[32 * j + l] = static_cast<uint8_t>(std::clamp(round_even((x[32 * j + l] + dm) / d), 0, nmax));
    }
  }
}

void q4_k(const float* x, BlockQ4K* y, int64_t nb) {
  uint8_t L[256];
  for (int64_t b = 0; b < nb; ++b, x += kQKK) {
    kquant_affine(x, 15, -1.f, 20, &y[b].d, &y[b].dmin, y[b].scales, L);
    uint8_t* q = y[b].qs;
    for (int j = 0; j < kQKK; j += 64, q += 32) {
      for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
    }
  }
}

void q5_k(const float* x, BlockQ5K* y, int64_t nb) {
  uint8_t L[256];
  for (int64_t b = 0; b < nb; ++b, x += kQKK) {
    kquant_affine(x, 31, -0.5f, 15, &y[b].d, &y[b].dmin, y[b].scales, L);
    std::memset(y[b].qh, 0, 32);
    uint8_t* q = y[b].qs;
    uint8_t m1 = 1, m2 = 2;
    for (int n = 0; n < kQKK; n += 64, q += 32) {
      for (int j = 0; j < 32; ++j) {
        int l1 = L[n + j], l2 = L[n + j + 32];
        if (l1 > 15) {
          l1 -= 16;
          y[b].qh[j] |= m1;
        }
        if (l2 > 15) {
          l2 -= 16;
          y[b].qh[j] |= m2;
        }
        q[j] = static_cast<uint8_t>(l1 | (l2 << 4));
      }
      m1 = static_cast<uint8_t>(m1 << 2);
      m2 = static_cast<uint8_t>(m2 << 2);
    }
  }
}

void q6_k(const float* x, BlockQ6K* y, int64_t nb) {
  int8_t L[256];
  float sub_scale[16];
  for (int64_t b = 0; b < nb; ++b, x += kQKK) {
    float max_scale = 0, max_abs = 0;
    for (int j = 0; j < 16; ++j) {
      sub_scale[j] = fit_symmetric(16, 32, x + 16 * j, L + 16 * j);
      if (std::fabs(sub_scale[j]) > max_abs) {
        max_abs = std::fabs(sub_scale[j]);
        max_scale = sub_scale[j];
      }
    }
    BlockQ6K& blk = y[b];
    if (max_abs < kGroupMaxEps) {
      std::memset(&blk, 0, sizeof(blk));
      continue;
    }
    const float iscale = -128.f / max_scale;
    blk.d = fp32_to_fp16(1.f / iscale);
    for (int j = 0; j < 16; ++j) blk.scales[j] = static_cast<int8_t>(std::min(127, round_even(iscale * sub_scale[j])));
    for (int j = 0; j < 16; ++j) {
      const float d = fp16_to_fp32(blk.d) * blk.scales[j];
      if (d == 0) continue;
      for (int l = 0; l < 16; ++l) {
        L[16 * j + l] = static_cast<int8_t>(std::clamp(round_even(x[16 * j + l] / d), -32, 31) + 32);
      }
    }
    uint8_t* ql = blk.ql;
    uint8_t* qh = blk.qh;
    for (int j = 0; j < kQKK; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const int a = L[j + l], c = L[j + l + 32], e = L[j + l + 64], g = L[j + l + 96];
        ql[l] = static_cast<uint8_t>((a & 15) | ((e & 15) << 4));
        ql[l + 32] = static_cast<uint8_t>((c & 15) | ((g & 15) << 4));
        qh[l] = static_cast<uint8_t>((a >> 4) | ((c >> 4) << 2) | ((e >> 4) << 4) | ((g >> 4) << 6));
      }
    }
  }
}

}  // namespace

bool can_quantize(DType type) {
  switch (type) {
    case DType::F32: case DType::F16: case DType::BF16: case DType::Q4_0: case DType::Q5_0:
    case DType::Q5_1: case DType::Q8_0: case DType::Q4_K: case DType::Q5_K: case DType::Q6_K:
      return true;
    default:
      return false;
  }
}

void quantize_row(DType type, const float* x, void* dst, int64_t n) {
  const int64_t nb = n / info(type).block_elems;
  switch (type) {
    case DType::F32: std::memcpy(dst, x, static_cast<size_t>(n) * 4); break;
    case DType::F16: {
      auto* o = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) o[i] = fp32_to_fp16(x[i]);
      break;
    }
    case DType::BF16: {
      auto* o = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) o[i] = fp32_to_bf16(x[i]);
      break;
    }
    case DType::Q4_0: q4_0(x, static_cast<BlockQ4_0*>(dst), nb); break;
    case DType::Q5_0: q5_0(x, static_cast<BlockQ5_0*>(dst), nb); break;
    case DType::Q5_1: q5_1(x, static_cast<BlockQ5_1*>(dst), nb); break;
    case DType::Q8_0: q8_0(x, static_cast<BlockQ8_0*>(dst), nb); break;
    case DType::Q4_K: q4_k(x, static_cast<BlockQ4K*>(dst), nb); break;
    case DType::Q5_K: q5_k(x, static_cast<BlockQ5K*>(dst), nb); break;
    case DType::Q6_K: q6_k(x, static_cast<BlockQ6K*>(dst), nb); break;
    default: break;
  }
}

}  // namespace strata::tensor
