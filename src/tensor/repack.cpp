#include "tensor/repack.h"

#include <cstdlib>
#include <cstring>

#include "base/system.h"
#include "tensor/quants.h"
#include "tensor/repack_blocks.h"
#include "tensor/repack_rows.h"

namespace strata::tensor {
namespace detail {
namespace {

// Unpacking (one row, for tests and embedding lookups) goes through one value per element
// (uint8_t v[256], the unsigned stored value). Repacking runs at load over every weight, so it works
// on 64-bit words straight from the GGUF bytes to the repacked ones (repack_rows.h).

template <int P>
void get_nibbles(const uint8_t (&qs)[P][16][4], int r, uint8_t* v, int e0 = 0) {
  for (int p = 0; p < P; ++p) {
    for (int j = 0; j < 4; ++j) {
      v[e0 + 8 * p + j] = qs[p][r][j] & 15;
      v[e0 + 8 * p + 4 + j] = qs[p][r][j] >> 4;
    }
  }
}

// The high bits (bit 4 and up, `width` bits per element) of elements e0 + 4b + j, stored in byte
// (r, j) at bits width*b.., for b < 8 / width, back into v.
void get_high(const uint8_t (&qh)[16][4], int r, uint8_t* v, int e0, int width) {
  for (int j = 0; j < 4; ++j) {
    for (int b = 0; b < 8 / width; ++b) {
      v[e0 + 4 * b + j] = static_cast<uint8_t>(v[e0 + 4 * b + j] | ((qh[r][j] >> (width * b)) & ((1 << width) - 1)) << 4);
    }
  }
}

// Q4_K / Q5_K low nibbles: qs[32c + l] holds element 64c + l (low) and 64c + 32 + l (high).
void k4_store(const uint8_t* v, uint8_t* qs) {
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) qs[32 * c + l] = static_cast<uint8_t>((v[64 * c + l] & 15) | ((v[64 * c + 32 + l] & 15) << 4));
  }
}

// Twelve packed bytes from eight 6-bit scales and mins (the inverse of unpack_k4_scales).
void pack_k4_scales(const uint8_t* sc, const uint8_t* m, uint8_t* out) {
  for (int j = 0; j < 4; ++j) {
    out[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    out[j + 4] = static_cast<uint8_t>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    out[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
  }
}

template <typename X, typename B>
void k4_unheader(const X& x, int r, B& b) {
  b.d = x.d[r];
  b.dmin = x.dmin[r];
  uint8_t sc[8], m[8];
  for (int s = 0; s < 8; ++s) sc[s] = x.sc[s / 2][r][s % 2], m[s] = x.m[s / 2][r][s % 2];
  pack_k4_scales(sc, m, b.scales);
}

// Q6_K: per half h, element 128h + 32g + l takes nibble g / 2 of ql[64h + 32(g % 2) + l] and crumb g
// of qh[32h + l].
void q6_store(const uint8_t* v, BlockQ6K& b) {
  std::memset(b.ql, 0, sizeof b.ql);
  std::memset(b.qh, 0, sizeof b.qh);
  for (int h = 0; h < 2; ++h) {
    for (int g = 0; g < 4; ++g) {
      for (int l = 0; l < 32; ++l) {
        const int q = v[128 * h + 32 * g + l];
        b.ql[64 * h + 32 * (g % 2) + l] |= static_cast<uint8_t>((q & 15) << (4 * (g / 2)));
        b.qh[32 * h + l] |= static_cast<uint8_t>((q >> 4) << (2 * g));
      }
    }
  }
}

// ---- one block column of 16 rows, per format

void unpack_block(const BlockQ8_0x16& x, int r, BlockQ8_0& b) {
  b.d = x.d[r];
  for (int k = 0; k < 8; ++k) {
    for (int j = 0; j < 4; ++j) b.qs[4 * k + j] = static_cast<int8_t>(x.qs[k][r][j] ^ 0x80);
  }
}

void unpack_block(const BlockQ4_0x16& x, int r, BlockQ4_0& b) {
  uint8_t v[32];
  get_nibbles(x.qs, r, v);
  b.d = x.d[r];
  for (int l = 0; l < 16; ++l) b.qs[l] = static_cast<uint8_t>(v[l] | v[l + 16] << 4);
}

void unpack_block(const BlockQ4Kx16& x, int r, BlockQ4K& b) {
  uint8_t v[256];
  get_nibbles(x.qs, r, v);
  k4_unheader(x, r, b);
  k4_store(v, b.qs);
}

void unpack_block(const BlockQ5Kx16& x, int r, BlockQ5K& b) {
  uint8_t v[256];
  for (int s = 0; s < 8; ++s) {
    get_nibbles(x.sub[s].qs, r, v, 32 * s);
    get_high(x.sub[s].qh, r, v, 32 * s, 1);
  }
  k4_unheader(x, r, b);
  k4_store(v, b.qs);
  std::memset(b.qh, 0, sizeof b.qh);
  for (int e = 0; e < 256; ++e) b.qh[e % 32] |= static_cast<uint8_t>((v[e] >> 4) << (2 * (e / 64) + (e / 32) % 2));
}

void unpack_block(const BlockQ6Kx16& x, int r, BlockQ6K& b) {
  uint8_t v[256];
  for (int s = 0; s < 16; ++s) {
    get_nibbles(x.sub[s].ql, r, v, 16 * s);
    get_high(x.sub[s].qh, r, v, 16 * s, 2);
  }
  q6_store(v, b);
  b.d = x.d[r];
  for (int s = 0; s < 16; ++s) b.scales[s] = x.sc[s / 2][r][s % 2];
}

template <typename B, typename X>
void repack_typed(const MatrixView& w, uint8_t* dst, int64_t g0, int64_t g1) {
  repack_rows<B, X, repack_row>(w.data, w.row_stride, w.cols / X::kElems, dst,
                                kRepackRows * repacked_row_bytes(w.type, w.cols), g0, g1);
}

template <typename B, typename X>
void unpack_typed(const MatrixView& w, int64_t r, uint8_t* out) {
  const int64_t nb = static_cast<int64_t>(w.row_stride * kRepackRows / sizeof(X));
  const X* x = reinterpret_cast<const X*>(w.data + static_cast<size_t>(r / 16) * kRepackRows * w.row_stride);
  B* b = reinterpret_cast<B*>(out);
  for (int64_t i = 0; i < nb; ++i) unpack_block(x[i], static_cast<int>(r % 16), b[i]);
}

}  // namespace

Gemm16Fn gemm16_fn(DType w) {
  static const bool avx512 = best_isa() == Isa::Avx512 && cpu_has_avx512_vnni();
  if (avx512) return avx512_gemm16(w);
  return best_isa() != Isa::Scalar ? avx2_gemm16(w) : nullptr;
}

}  // namespace detail

size_t repacked_row_bytes(DType type, int64_t cols) {
  using namespace detail;
  switch (type) {
    case DType::Q8_0: return static_cast<size_t>(cols / kQK) * sizeof(BlockQ8_0x16) / 16;
    case DType::Q4_0: return static_cast<size_t>(cols / kQK) * sizeof(BlockQ4_0x16) / 16;
    case DType::Q4_K: return static_cast<size_t>(cols / kQKK) * sizeof(BlockQ4Kx16) / 16;
    case DType::Q5_K: return static_cast<size_t>(cols / kQKK) * sizeof(BlockQ5Kx16) / 16;
    case DType::Q6_K: return static_cast<size_t>(cols / kQKK) * sizeof(BlockQ6Kx16) / 16;
    default: return 0;
  }
}

bool repack_shape(DType type, int64_t rows, int64_t cols) {
  const int64_t block = type == DType::Q8_0 || type == DType::Q4_0 ? detail::kQK : detail::kQKK;
  return repacked_row_bytes(type, cols) > 0 && rows > 0 && rows % kRepackRows == 0 && cols > 0 && cols % block == 0;
}

bool this_cpu_repacks() {
  static const bool disabled = std::getenv("STRATA_NO_REPACK") != nullptr;
  return !disabled && detail::gemm16_fn(DType::Q4_K) != nullptr;  // every repacked type has a kernel on an ISA
}

bool repacks(DType type, int64_t rows, int64_t cols) { return repack_shape(type, rows, cols) && this_cpu_repacks(); }

std::vector<std::string> kernel_features() {
  const Isa isa = best_isa();
  std::vector<std::string> out;
  for (std::string& f : cpu_features()) {
    const bool wide = f.rfind("avx512", 0) == 0;
    const bool simd = f == "avx2" || f == "fma" || f == "f16c";
    if ((wide && isa < Isa::Avx512) || (simd && isa < Isa::Avx2)) continue;  // capped by STRATA_MAX_ISA
    out.push_back(std::move(f));
  }
  if (this_cpu_repacks()) out.emplace_back(kRepackFeature);
  return out;
}

bool repackable(const MatrixView& w) {
  return !w.empty() && !w.repacked && w.row_stride == row_bytes(w.type, w.cols) && repacks(w.type, w.rows, w.cols);
}

MatrixView repacked_view(const MatrixView& w, const uint8_t* dst) {
  MatrixView v{w.type, w.cols, w.rows, dst, repacked_row_bytes(w.type, w.cols)};
  v.repacked = true;
  return v;
}

MatrixView repack_groups(const MatrixView& w, uint8_t* dst, int64_t g0, int64_t g1) {
  using namespace detail;
  switch (w.type) {
    case DType::Q8_0: repack_typed<BlockQ8_0, BlockQ8_0x16>(w, dst, g0, g1); break;
    case DType::Q4_0: repack_typed<BlockQ4_0, BlockQ4_0x16>(w, dst, g0, g1); break;
    case DType::Q4_K: repack_typed<BlockQ4K, BlockQ4Kx16>(w, dst, g0, g1); break;
    case DType::Q5_K: repack_typed<BlockQ5K, BlockQ5Kx16>(w, dst, g0, g1); break;
    case DType::Q6_K: repack_typed<BlockQ6K, BlockQ6Kx16>(w, dst, g0, g1); break;
    default: break;
  }
  return repacked_view(w, dst);
}

void unpack_row(const MatrixView& w, int64_t r, uint8_t* out) {
  using namespace detail;
  switch (w.type) {
    case DType::Q8_0: unpack_typed<BlockQ8_0, BlockQ8_0x16>(w, r, out); break;
    case DType::Q4_0: unpack_typed<BlockQ4_0, BlockQ4_0x16>(w, r, out); break;
    case DType::Q4_K: unpack_typed<BlockQ4K, BlockQ4Kx16>(w, r, out); break;
    case DType::Q5_K: unpack_typed<BlockQ5K, BlockQ5Kx16>(w, r, out); break;
    case DType::Q6_K: unpack_typed<BlockQ6K, BlockQ6Kx16>(w, r, out); break;
    default: break;
  }
}

}  // namespace strata::tensor
