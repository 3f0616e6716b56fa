// Scalar reference dot products, one per weight type, against the activation format
// vec_dot_type(w). Integer sums are formed per block (32) or super-block (256) exactly as in
// llama.cpp (reference notes 2.4) and scaled once per block; blocks are accumulated in f32.
// F32/F16/BF16 multiply in f32 (exact for F16/BF16 inputs) and accumulate in double, like
// llama.cpp's generic ggml_vec_dot_f16/bf16/f32.
#include <cstring>

#include "tensor/blocks.h"
#include "tensor/quants.h"

namespace strata::tensor::detail {
namespace {

float h2f(uint16_t h) { return fp16_to_fp32(h); }

float dot_f32(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const float*>(vw);
  const auto* a = static_cast<const float*>(va);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(w[i] * a[i]);
  return static_cast<float>(sum);
}

float dot_f16(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const uint16_t*>(vw);
  const auto* a = static_cast<const uint16_t*>(va);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(h2f(w[i]) * h2f(a[i]));
  return static_cast<float>(sum);
}

float dot_bf16(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const uint16_t*>(vw);
  const auto* a = static_cast<const uint16_t*>(va);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(bf16_to_fp32(w[i]) * bf16_to_fp32(a[i]));
  return static_cast<float>(sum);
}

// ---- 32-element blocks against Q8_0 / Q8_1 ----

float dot_q4_0(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const BlockQ4_0*>(vw);
  const auto* a = static_cast<const BlockQ8_0*>(va);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int sumi = 0;
    for (int j = 0; j < 16; ++j) {
      sumi += ((w[i].qs[j] & 15) - 8) * a[i].qs[j];
      sumi += ((w[i].qs[j] >> 4) - 8) * a[i].qs[j + 16];
    }
    sum += (h2f(w[i].d) * h2f(a[i].d)) * static_cast<float>(sumi);
  }
  return sum;
}

float dot_q4_1(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const BlockQ4_1*>(vw);
  const auto* a = static_cast<const BlockQ8_1*>(va);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int sumi = 0;
    for (int j = 0; j < 16; ++j) {
      sumi += (w[i].qs[j] & 15) * a[i].qs[j];
      sumi += (w[i].qs[j] >> 4) * a[i].qs[j + 16];
    }
    sum += (h2f(w[i].d) * h2f(a[i].d)) * static_cast<float>(sumi) + h2f(w[i].m) * h2f(a[i].s);
  }
  return sum;
}

int q5_value(const uint8_t* qs, uint32_t qh, int j) {
  const int nib = j < 16 ? (qs[j] & 15) : (qs[j - 16] >> 4);
  return nib | static_cast<int>(((qh >> j) & 1u) << 4);
}

float dot_q5_0(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const BlockQ5_0*>(vw);
  const auto* a = static_cast<const BlockQ8_0*>(va);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    uint32_t qh;
    std::memcpy(&qh, w[i].qh, 4);
    int sumi = 0;
    for (int j = 0; j < 32; ++j) sumi += (q5_value(w[i].qs, qh, j) - 16) * a[i].qs[j];
    sum += (h2f(w[i].d) * h2f(a[i].d)) * static_cast<float>(sumi);
  }
  return sum;
}

float dot_q5_1(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const BlockQ5_1*>(vw);
  const auto* a = static_cast<const BlockQ8_1*>(va);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    uint32_t qh;
    std::memcpy(&qh, w[i].qh, 4);
    int sumi = 0;
    for (int j = 0; j < 32; ++j) sumi += q5_value(w[i].qs, qh, j) * a[i].qs[j];
    sum += (h2f(w[i].d) * h2f(a[i].d)) * static_cast<float>(sumi) + h2f(w[i].m) * h2f(a[i].s);
  }
  return sum;
}

float dot_q8_0(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const BlockQ8_0*>(vw);
  const auto* a = static_cast<const BlockQ8_0*>(va);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int sumi = 0;
    for (int j = 0; j < 32; ++j) sumi += w[i].qs[j] * a[i].qs[j];
    sum += (h2f(w[i].d) * h2f(a[i].d)) * static_cast<float>(sumi);
  }
  return sum;
}

float dot_iq4_nl(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const BlockIQ4NL*>(vw);
  const auto* a = static_cast<const BlockQ8_0*>(va);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int sumi = 0;
    for (int j = 0; j < 16; ++j) {
      sumi += kIq4Values[w[i].qs[j] & 15] * a[i].qs[j];
      sumi += kIq4Values[w[i].qs[j] >> 4] * a[i].qs[j + 16];
    }
    sum += (h2f(w[i].d) * h2f(a[i].d)) * static_cast<float>(sumi);
  }
  return sum;
}

// ---- 256-element super-blocks against Q8_K ----
// Each returns, per super-block, d_a*d_w*sumi - d_a*dmin*summ with exact integer sumi/summ.

float dot_q2_k(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const BlockQ2K*>(vw);
  const auto* a = static_cast<const BlockQ8K*>(va);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQKK; ++i) {
    int sumi = 0, summ = 0;
    for (int g = 0; g < 16; ++g) {
      int s = 0;
      for (int l = 0; l < 16; ++l) {
        const int e = 16 * g + l, h = e / 128, r = e % 128;
        s += ((w[i].qs[32 * h + r % 32] >> (2 * (r / 32))) & 3) * a[i].qs[e];
      }
      sumi += (w[i].scales[g] & 15) * s;
      summ += (w[i].scales[g] >> 4) * a[i].bsums[g];
    }
    const float d = a[i].d * h2f(w[i].d), dmin = a[i].d * h2f(w[i].dmin);
    sum += d * static_cast<float>(sumi) - dmin * static_cast<float>(summ);
  }
  return sum;
}

float dot_q3_k(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const BlockQ3K*>(vw);
  const auto* a = static_cast<const BlockQ8K*>(va);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQKK; ++i) {
    uint8_t sc[16];
    unpack_q3k_scales(w[i].scales, sc);
    int sumi = 0;
    for (int g = 0; g < 16; ++g) {
      int s = 0;
      for (int l = 0; l < 16; ++l) {
        const int e = 16 * g + l, h = e / 128, r = e % 128;
        const int low2 = (w[i].qs[32 * h + r % 32] >> (2 * (r / 32))) & 3;
        const int hb = (w[i].hmask[e % 32] >> (e / 32)) & 1;
        s += (low2 - (hb ? 0 : 4)) * a[i].qs[e];
      }
      sumi += (sc[g] - 32) * s;
    }
    sum += (a[i].d * h2f(w[i].d)) * static_cast<float>(sumi);
  }
  return sum;
}

// Q4_K and Q5_K share everything but the fifth bit.
template <bool kFive, typename Block>
float dot_q45_k(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const Block*>(vw);
  const auto* a = static_cast<const BlockQ8K*>(va);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQKK; ++i) {
    uint64_t sc8, m8;
    unpack_k4_scales(w[i].scales, &sc8, &m8);
    int sumi = 0, summ = 0;
    for (int sub = 0; sub < 8; ++sub) {
      const int c = sub / 2, shift = 4 * (sub % 2);
      int s = 0;
      for (int l = 0; l < 32; ++l) {
        int q = (w[i].qs[32 * c + l] >> shift) & 15;
        if constexpr (kFive) q += 16 * ((w[i].qh[l] >> sub) & 1);
        s += q * a[i].qs[32 * sub + l];
      }
      sumi += static_cast<int>((sc8 >> (8 * sub)) & 0xff) * s;
      summ += static_cast<int>((m8 >> (8 * sub)) & 0xff) * (a[i].bsums[2 * sub] + a[i].bsums[2 * sub + 1]);
    }
    const float d = a[i].d * h2f(w[i].d), dmin = a[i].d * h2f(w[i].dmin);
    sum += d * static_cast<float>(sumi) - dmin * static_cast<float>(summ);
  }
  return sum;
}

float dot_q6_k(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const BlockQ6K*>(vw);
  const auto* a = static_cast<const BlockQ8K*>(va);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQKK; ++i) {
    int sumi = 0;
    for (int g = 0; g < 16; ++g) {
      int s = 0;
      for (int l16 = 0; l16 < 16; ++l16) {
        const int e = 16 * g + l16, h = e / 128, r = e % 128, q32 = r / 32, l = r % 32;
        const uint8_t lb = w[i].ql[64 * h + 32 * (q32 & 1) + l];
        const int nib = q32 < 2 ? (lb & 15) : (lb >> 4);
        const int h2 = (w[i].qh[32 * h + l] >> (2 * q32)) & 3;
        s += ((nib | (h2 << 4)) - 32) * a[i].qs[e];
      }
      sumi += w[i].scales[g] * s;
    }
    sum += (a[i].d * h2f(w[i].d)) * static_cast<float>(sumi);
  }
  return sum;
}

float dot_iq4_xs(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const BlockIQ4XS*>(vw);
  const auto* a = static_cast<const BlockQ8K*>(va);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQKK; ++i) {
    int sumi = 0;
    for (int ib = 0; ib < 8; ++ib) {
      const uint8_t* qs = w[i].qs + 16 * ib;
      const int8_t* q8 = a[i].qs + 32 * ib;
      int s = 0;
      for (int j = 0; j < 16; ++j) {
        s += kIq4Values[qs[j] & 15] * q8[j];
        s += kIq4Values[qs[j] >> 4] * q8[j + 16];
      }
      sumi += (iq4xs_scale(w[i], ib) - 32) * s;
    }
    sum += (a[i].d * h2f(w[i].d)) * static_cast<float>(sumi);
  }
  return sum;
}

}  // namespace

VecDotFn scalar_vec_dot(DType w) {
  switch (w) {
    case DType::F32: return dot_f32;
    case DType::F16: return dot_f16;
    case DType::BF16: return dot_bf16;
    case DType::Q4_0: return dot_q4_0;
    case DType::Q4_1: return dot_q4_1;
    case DType::Q5_0: return dot_q5_0;
    case DType::Q5_1: return dot_q5_1;
    case DType::Q8_0: return dot_q8_0;
    case DType::IQ4_NL: return dot_iq4_nl;
    case DType::Q2_K: return dot_q2_k;
    case DType::Q3_K: return dot_q3_k;
    case DType::Q4_K: return dot_q45_k<false, BlockQ4K>;
    case DType::Q5_K: return dot_q45_k<true, BlockQ5K>;
    case DType::Q6_K: return dot_q6_k;
    case DType::IQ4_XS: return dot_iq4_xs;
    default: return nullptr;
  }
}

}  // namespace strata::tensor::detail
