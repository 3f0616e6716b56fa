// Scalar dequantization of every supported block format. The float operations follow the order of
// llama.cpp's dequantize_row_* (e.g. Q4_K: (d*sc)*q - dmin*m) so results are bit-identical to it.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tensor/blocks.h"
#include "tensor/quants.h"

namespace strata::tensor {
namespace detail {
void f16_to_f32_f16c(const uint16_t* h, float* out, int64_t n);  // x86/vec_dot_avx2.cpp
}

namespace {

using namespace detail;

float h2f(uint16_t h) { return fp16_to_fp32(h); }

void deq_q4_0(const BlockQ4_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = h2f(x[i].d);
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>((x[i].qs[j] & 15) - 8) * d;
      y[j + 16] = static_cast<float>((x[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void deq_q4_1(const BlockQ4_1* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = h2f(x[i].d), m = h2f(x[i].m);
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>(x[i].qs[j] & 15) * d + m;
      y[j + 16] = static_cast<float>(x[i].qs[j] >> 4) * d + m;
    }
  }
}

// 5-bit value of element j (0..31) of a Q5_0/Q5_1 block.
int q5_value(const uint8_t* qs, uint32_t qh, int j) {
  const int nib = j < 16 ? (qs[j] & 15) : (qs[j - 16] >> 4);
  return nib | static_cast<int>(((qh >> j) & 1u) << 4);
}

void deq_q5_0(const BlockQ5_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = h2f(x[i].d);
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, 4);
    for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(q5_value(x[i].qs, qh, j) - 16) * d;
  }
}

void deq_q5_1(const BlockQ5_1* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = h2f(x[i].d), m = h2f(x[i].m);
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, 4);
    for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(q5_value(x[i].qs, qh, j)) * d + m;
  }
}

void deq_q8_0(const BlockQ8_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = h2f(x[i].d);
    for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(x[i].qs[j]) * d;
  }
}

void deq_q8_1(const BlockQ8_1* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = h2f(x[i].d);
    for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(x[i].qs[j]) * d;
  }
}

void deq_iq4_nl(const BlockIQ4NL* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = h2f(x[i].d);
    for (int j = 0; j < 16; ++j) {
      y[j] = d * static_cast<float>(kIq4Values[x[i].qs[j] & 15]);
      y[j + 16] = d * static_cast<float>(kIq4Values[x[i].qs[j] >> 4]);
    }
  }
}

void deq_q2_k(const BlockQ2K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQKK) {
    const float d = h2f(x[i].d), dmin = h2f(x[i].dmin);
    for (int e = 0; e < kQKK; ++e) {
      const int h = e / 128, r = e % 128;
      const int q = (x[i].qs[32 * h + r % 32] >> (2 * (r / 32))) & 3;
      const int sc = x[i].scales[e / 16];
      const float dl = d * static_cast<float>(sc & 15);
      const float ml = dmin * static_cast<float>(sc >> 4);
      y[e] = dl * static_cast<float>(q) - ml;
    }
  }
}

void deq_q3_k(const BlockQ3K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQKK) {
    const float d = h2f(x[i].d);
    uint8_t sc[16];
    unpack_q3k_scales(x[i].scales, sc);
    for (int e = 0; e < kQKK; ++e) {
      const int h = e / 128, r = e % 128;
      const int low2 = (x[i].qs[32 * h + r % 32] >> (2 * (r / 32))) & 3;
      const int hb = (x[i].hmask[e % 32] >> (e / 32)) & 1;
      const float dl = d * static_cast<float>(sc[e / 16] - 32);
      y[e] = dl * static_cast<float>(low2 - (hb ? 0 : 4));
    }
  }
}

void deq_q4_k(const BlockQ4K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQKK) {
    const float d = h2f(x[i].d), dmin = h2f(x[i].dmin);
    uint64_t sc8, m8;
    unpack_k4_scales(x[i].scales, &sc8, &m8);
    for (int e = 0; e < kQKK; ++e) {
      const int sub = e / 32, c = e / 64, half = (e % 64) / 32;
      const int q = (x[i].qs[32 * c + e % 32] >> (4 * half)) & 15;
      const float d1 = d * static_cast<float>((sc8 >> (8 * sub)) & 0xff);
      const float m1 = dmin * static_cast<float>((m8 >> (8 * sub)) & 0xff);
      y[e] = d1 * static_cast<float>(q) - m1;
    }
  }
}

void deq_q5_k(const BlockQ5K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQKK) {
    const float d = h2f(x[i].d), dmin = h2f(x[i].dmin);
    uint64_t sc8, m8;
    unpack_k4_scales(x[i].scales, &sc8, &m8);
    for (int e = 0; e < kQKK; ++e) {
      const int sub = e / 32, c = e / 64, half = (e % 64) / 32;
      const int nib = (x[i].qs[32 * c + e % 32] >> (4 * half)) & 15;
      const int q = nib + 16 * ((x[i].qh[e % 32] >> sub) & 1);
      const float d1 = d * static_cast<float>((sc8 >> (8 * sub)) & 0xff);
      const float m1 = dmin * static_cast<float>((m8 >> (8 * sub)) & 0xff);
      y[e] = d1 * static_cast<float>(q) - m1;
    }
  }
}

void deq_q6_k(const BlockQ6K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQKK) {
    const float d = h2f(x[i].d);
    for (int e = 0; e < kQKK; ++e) {
      const int h = e / 128, r = e % 128, g = r / 32, l = r % 32;
      const uint8_t lb = x[i].ql[64 * h + 32 * (g & 1) + l];
      const int nib = g < 2 ? (lb & 15) : (lb >> 4);
      const int h2 = (x[i].qh[32 * h + l] >> (2 * g)) & 3;
      const int q = (nib | (h2 << 4)) - 32;
      y[e] = d * static_cast<float>(x[i].scales[e / 16]) * static_cast<float>(q);
    }
  }
}

void deq_q8_k(const BlockQ8K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQKK) {
    for (int e = 0; e < kQKK; ++e) y[e] = x[i].d * static_cast<float>(x[i].qs[e]);
  }
}

void deq_iq4_xs(const BlockIQ4XS* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = h2f(x[i].d);
    for (int ib = 0; ib < 8; ++ib, y += 32) {
      const float dl = d * static_cast<float>(iq4xs_scale(x[i], ib) - 32);
      const uint8_t* qs = x[i].qs + 16 * ib;
      for (int j = 0; j < 16; ++j) {
        y[j] = dl * static_cast<float>(kIq4Values[qs[j] & 15]);
        y[j + 16] = dl * static_cast<float>(kIq4Values[qs[j] >> 4]);
      }
    }
  }
}

[[noreturn]] void unsupported(const char* what, DType t) {
  std::fprintf(stderr, "strata: %s: unsupported type %.*s\n", what,
               static_cast<int>(dtype_name(t).size()), dtype_name(t).data());
  std::abort();
}

}  // namespace

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
  const int64_t nb = n / info(t).block_elems;
  switch (t) {
    case DType::F32: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); return;
    case DType::F16: {  // exact either way; F16C is just faster
      const auto* h = static_cast<const uint16_t*>(src);
      if (best_isa() >= Isa::Avx2) return detail::f16_to_f32_f16c(h, dst, n);
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(h[i]);
      return;
    }
    case DType::BF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(h[i]);
      return;
    }
    case DType::Q4_0: return deq_q4_0(static_cast<const BlockQ4_0*>(src), dst, nb);
    case DType::Q4_1: return deq_q4_1(static_cast<const BlockQ4_1*>(src), dst, nb);
    case DType::Q5_0: return deq_q5_0(static_cast<const BlockQ5_0*>(src), dst, nb);
    case DType::Q5_1: return deq_q5_1(static_cast<const BlockQ5_1*>(src), dst, nb);
    case DType::Q8_0: return deq_q8_0(static_cast<const BlockQ8_0*>(src), dst, nb);
    case DType::Q8_1: return deq_q8_1(static_cast<const BlockQ8_1*>(src), dst, nb);
    case DType::IQ4_NL: return deq_iq4_nl(static_cast<const BlockIQ4NL*>(src), dst, nb);
    case DType::Q2_K: return deq_q2_k(static_cast<const BlockQ2K*>(src), dst, nb);
    case DType::Q3_K: return deq_q3_k(static_cast<const BlockQ3K*>(src), dst, nb);
    case DType::Q4_K: return deq_q4_k(static_cast<const BlockQ4K*>(src), dst, nb);
    case DType::Q5_K: return deq_q5_k(static_cast<const BlockQ5K*>(src), dst, nb);
    case DType::Q6_K: return deq_q6_k(static_cast<const BlockQ6K*>(src), dst, nb);
    case DType::Q8_K: return deq_q8_k(static_cast<const BlockQ8K*>(src), dst, nb);
    case DType::IQ4_XS: return deq_iq4_xs(static_cast<const BlockIQ4XS*>(src), dst, nb);
    default: unsupported("dequantize_row", t);
  }
}

}  // namespace strata::tensor
