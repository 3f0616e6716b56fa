// Internal: the tiled online-softmax attention kernel, written once over a small vector interface
// `S` and instantiated by attention_scalar.cpp and x86/attention_{avx2,avx512}.cpp with their own
// compiler flags. Everything here has internal linkage (see blocks.h on why).
//
// S provides: W (lanes), V (vector type), kValueVectors (V accumulation width in vectors),
// kScoreRows (2 or 4) x kScoreVectors (score accumulators in registers), zero/set1/load/store/add/
// sub/mul/max/fma(a, b, c) = a*b + c, hsum/hmax, transpose(V r[W]) (in place: r[i] becomes column
// i), load_f16(src, lanes) (lanes < W: the rest zero, unread), f16_to_f32(src, dst, n, n_pad)
// (zero-filled to n_pad) and exp(x) for x <= 0 or -inf (exactly 0 for -inf). Q8_0 / Q4_0 rows are
// dequantized below, in the including file's vector width (d * q is exact in F32, so every ISA
// gets the same floats).
//
// Determinism: every (row, position) score is one accumulator over d in order (keys are transposed
// per tile so positions sit in lanes), every row's max, sum and accumulator updates are per row in
// position order, and the tiles sit at absolute positions. No loop runs across rows with arithmetic
// that mixes them, so a row's bits do not depend on which rows share its task or how many rows a
// micro-kernel handles at once.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "tensor/attention_kernels.h"
#include "tensor/blocks.h"

namespace strata::tensor::detail {
namespace {

constexpr int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// One cache row of n elements (whole blocks) to F32, zero-filled to n_pad: dequantize_row's formulas,
// with the including file's vector width (int8 -> float and one product by d are exact, so every
// version gives the same floats).
void dequantize_q8_0(const uint8_t* src, float* dst, int64_t n, int64_t n_pad) {
  const auto* b = reinterpret_cast<const BlockQ8_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = fp16_to_fp32(b[i].d);
#if defined(__AVX512F__)
    const __m512 dv = _mm512_set1_ps(d);
    for (int j = 0; j < kQK; j += 16) {
      const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[i].qs + j));
      _mm512_storeu_ps(dst + j, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), dv));
    }
#elif defined(__AVX2__)
    const __m256 dv = _mm256_set1_ps(d);
    for (int j = 0; j < kQK; j += 8) {
      const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b[i].qs + j));
      _mm256_storeu_ps(dst + j, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), dv));
    }
#else
    for (int j = 0; j < kQK; ++j) dst[j] = static_cast<float>(b[i].qs[j]) * d;
#endif
  }
  for (int64_t i = n; i < n_pad; ++i) dst[i - n] = 0.0f;
}

// Element j < 16 is byte j's low nibble, element j + 16 its high nibble, each minus 8.
void dequantize_q4_0(const uint8_t* src, float* dst, int64_t n, int64_t n_pad) {
  const auto* b = reinterpret_cast<const BlockQ4_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = fp16_to_fp32(b[i].d);
#if defined(__AVX2__)
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[i].qs));
    const __m128i nib = _mm_set1_epi8(15), eight = _mm_set1_epi8(8);
    const __m128i lo = _mm_sub_epi8(_mm_and_si128(bytes, nib), eight);
    const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(bytes, 4), nib), eight);
#if defined(__AVX512F__)
    const __m512 dv = _mm512_set1_ps(d);
    _mm512_storeu_ps(dst, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(lo)), dv));
    _mm512_storeu_ps(dst + 16, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(hi)), dv));
#else
    const __m256 dv = _mm256_set1_ps(d);
    _mm256_storeu_ps(dst, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)), dv));
    _mm256_storeu_ps(dst + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))), dv));
    _mm256_storeu_ps(dst + 16, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)), dv));
    _mm256_storeu_ps(dst + 24, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8))), dv));
#endif
#else
    for (int j = 0; j < kQK / 2; ++j) {
      dst[j] = static_cast<float>((b[i].qs[j] & 15) - 8) * d;
      dst[j + kQK / 2] = static_cast<float>((b[i].qs[j] >> 4) - 8) * d;
    }
#endif
  }
  for (int64_t i = n; i < n_pad; ++i) dst[i - n] = 0.0f;
}

// Per-thread working memory (each instantiating file has its own).
struct AttentionWork {
  std::vector<float> q, acc, kt, kT, vt, w, m, l, c;
  std::vector<int32_t> n_tile;
};

template <class S>
struct AttentionKernel {
  using V = typename S::V;
  static constexpr int W = S::W;

  // A K or V row of the cache's type to F32 (the F16 path is S's own conversion).
  static void to_f32(DType type, const uint8_t* src, float* dst, int64_t n, int64_t n_pad) {
    switch (type) {
      case DType::Q8_0: return dequantize_q8_0(src, dst, n, n_pad);
      case DType::Q4_0: return dequantize_q4_0(src, dst, n, n_pad);
      default: return S::f16_to_f32(reinterpret_cast<const uint16_t*>(src), dst, n, n_pad);
    }
  }

  // Stores the W x W block held in r (row i = r[i]) transposed: column i to dst + i * ds.
  static void store_transposed(V* r, float* dst, int64_t ds) {
    S::transpose(r);
    #pragma GCC unroll 16
    for (int i = 0; i < W; ++i) S::store(dst + i * ds, r[i]);
  }

  // The tile's keys transposed, kT[d * Pp + p] = key p's element d, for p < round_up(np, W) (keys
  // past np are zero) and d < dkp. F16 keys are converted on the way, in registers; quantized ones
  // are dequantized to kt first.
  static void transpose_keys(const AttentionTask& t, int32_t p0, int32_t np, int64_t dkp, float* kt, float* kT,
                             int64_t Pp) {
    V r[W];
    for (int32_t p = 0; p < np; p += W) {
      const int32_t rows = std::min(W, np - p);
      for (int64_t d = 0; d < dkp; d += W) {
        const int32_t lanes = static_cast<int32_t>(std::min<int64_t>(W, t.dk - d));
        #pragma GCC unroll 16
        for (int i = 0; i < W; ++i) {
          if (i >= rows) {
            r[i] = S::zero();
          } else if (t.k_type == DType::F16) {
            r[i] = S::load_f16(reinterpret_cast<const uint16_t*>(t.k + (p0 + p + i) * t.k_stride_bytes) + d, lanes);
          } else {
            if (d == 0) to_f32(t.k_type, t.k + (p0 + p + i) * t.k_stride_bytes, kt + i * dkp, t.dk, dkp);
            r[i] = S::load(kt + i * dkp + d);
          }
        }
        store_transposed(r, kT + d * Pp + p, Pp);
      }
    }
  }

  // Asks for the cache lines of positions [p0, p1) of K and V ahead of their use (the hardware
  // prefetchers ramp up too slowly on runs of a few KB).
  static void prefetch(const AttentionTask& t, int32_t p0, int32_t p1) {
    if (p1 <= p0) return;
    for (const auto& [base, stride] : {std::pair{t.k, t.k_stride_bytes}, std::pair{t.v, t.v_stride_bytes}}) {
      const uint8_t* b = base + p0 * stride;
      const int64_t bytes = (p1 - p0) * stride;
      for (int64_t i = 0; i < bytes; i += 64) __builtin_prefetch(b + i);
    }
  }

  // For NR rows, positions [0, NV * W) from p: w[r][p + i] = (q[r] . kT[., p + i]) * scale, each
  // score one accumulator over d = 0..dk-1 in order (positions sit in lanes, so no horizontal sums).
  template <int NR, int NV>
  static void score_block(const float* const* q, const float* kT, int64_t Pp, int32_t dk, int64_t p, float scale,
                          float* const* w) {
    V a[NR][NV];
    #pragma GCC unroll 16
    for (int r = 0; r < NR; ++r) {
      #pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) a[r][v] = S::zero();
    }
    for (int32_t d = 0; d < dk; ++d) {
      const float* k = kT + d * Pp + p;
      V kv[NV];
      #pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) kv[v] = S::load(k + v * W);
      #pragma GCC unroll 16
      for (int r = 0; r < NR; ++r) {
        const V qd = S::set1(q[r][d]);
        #pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) a[r][v] = S::fma(qd, kv[v], a[r][v]);
      }
    }
    const V sv = S::set1(scale);
    #pragma GCC unroll 16
    for (int r = 0; r < NR; ++r) {
      #pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) S::store(w[r] + p + v * W, S::mul(a[r][v], sv));
    }
  }

  // Scores of NR rows for positions [0, nvec * W), NV vectors at a time.
  template <int NR>
  static void score_rows(const float* const* q, const float* kT, int64_t Pp, int32_t dk, int32_t nvec, float scale,
                         float* const* w) {
    constexpr int NV = S::kScoreVectors;
    int32_t v = 0;
    for (; v + NV <= nvec; v += NV) score_block<NR, NV>(q, kT, Pp, dk, int64_t{v} * W, scale, w);
    for (; v < nvec; ++v) score_block<NR, 1>(q, kT, Pp, dk, int64_t{v} * W, scale, w);
  }

  static void scores(int nr, const float* const* q, const float* kT, int64_t Pp, int32_t dk, int32_t nvec,
                     float scale, float* const* w) {
    switch (nr) {  // nr <= S::kScoreRows
      case 4: return score_rows<4>(q, kT, Pp, dk, nvec, scale, w);
      case 3: return score_rows<3>(q, kT, Pp, dk, nvec, scale, w);
      case 2: return score_rows<2>(q, kT, Pp, dk, nvec, scale, w);
      default: return score_rows<1>(q, kT, Pp, dk, nvec, scale, w);
    }
  }

  // For NR rows with the same position count n, on CB vectors of dv at a time (NR * CB accumulators
  // in registers): acc = acc * c + sum_p w[p] * vt[p]. Every element sees the same operations in
  // the same order whatever NR and CB are.
  template <int NR, int CB>
  static void accumulate_block(float* const* acc, const float* const* w, const float* c, const float* vt,
                               int64_t dvp, int64_t j, int32_t n) {
    V a[NR][CB];
    #pragma GCC unroll 16
    for (int i = 0; i < NR; ++i) {
      #pragma GCC unroll 16
      for (int b = 0; b < CB; ++b) a[i][b] = S::mul(S::load(acc[i] + j + b * W), S::set1(c[i]));
    }
    for (int32_t p = 0; p < n; ++p) {
      V v[CB];
      #pragma GCC unroll 16
      for (int b = 0; b < CB; ++b) v[b] = S::load(vt + p * dvp + j + b * W);
      #pragma GCC unroll 16
      for (int i = 0; i < NR; ++i) {
        const V wi = S::set1(w[i][p]);
        #pragma GCC unroll 16
        for (int b = 0; b < CB; ++b) a[i][b] = S::fma(wi, v[b], a[i][b]);
      }
    }
    #pragma GCC unroll 16
    for (int i = 0; i < NR; ++i) {
      #pragma GCC unroll 16
      for (int b = 0; b < CB; ++b) S::store(acc[i] + j + b * W, a[i][b]);
    }
  }

  template <int NR>
  static void accumulate(float* const* acc, const float* const* w, const float* c, const float* vt, int64_t dvp,
                         int32_t n) {
    constexpr int CB = S::kValueVectors;
    int64_t j = 0;
    for (; j + CB * W <= dvp; j += CB * W) accumulate_block<NR, CB>(acc, w, c, vt, dvp, j, n);
    for (; j < dvp; j += W) accumulate_block<NR, 1>(acc, w, c, vt, dvp, j, n);
  }

  static void accumulate_rows(int nr, float* const* acc, const float* const* w, const float* c, const float* vt,
                              int64_t dvp, int32_t n) {
    switch (nr) {
      case 4: accumulate<4>(acc, w, c, vt, dvp, n); break;
      case 3: accumulate<3>(acc, w, c, vt, dvp, n); break;
      case 2: accumulate<2>(acc, w, c, vt, dvp, n); break;
      default: accumulate<1>(acc, w, c, vt, dvp, n); break;
    }
  }

  static constexpr float kNegInf = -std::numeric_limits<float>::infinity();

  // A task's padded sizes: dk and dv rounded up to whole vectors, P positions per tile (Pp rounded up).
  struct Sizes {
    int64_t dkp, dvp;
    int32_t P;
    int64_t Pp;
  };

  // The working memory for the task's rows: queries padded with zeros, accumulators zero, running
  // maxima -inf and sums 0. Returns the most positions any row sees.
  static int32_t prepare(const AttentionTask& t, const Sizes& z, AttentionWork& ws) {
    const int32_t R = t.n_rows;
    ws.q.assign(R * z.dkp, 0.0f);
    ws.acc.assign(R * z.dvp, 0.0f);
    ws.kt.resize(W * z.dkp);
    ws.kT.resize(z.dkp * z.Pp);
    ws.vt.resize(z.P * z.dvp);
    ws.w.resize(R * z.Pp);
    ws.m.assign(R, kNegInf);
    ws.l.assign(R, 0.0f);
    ws.c.resize(R);
    ws.n_tile.resize(R);
    int32_t n_max = 0;
    for (int32_t r = 0; r < R; ++r) {
      std::copy(t.q[r], t.q[r] + t.dk, ws.q.data() + r * z.dkp);
      n_max = std::max(n_max, t.n_kv[r]);
    }
    return n_max;
  }

  // The tile's values to F32 (vt) and its keys transposed (kT).
  static void load_tile(const AttentionTask& t, const Sizes& z, int32_t p0, int32_t np, AttentionWork& ws) {
    for (int32_t p = 0; p < np; ++p) {
      to_f32(t.v_type, t.v + (p0 + p) * t.v_stride_bytes, ws.vt.data() + p * z.dvp, t.dv, z.dvp);
    }
    transpose_keys(t, p0, np, z.dkp, ws.kt.data(), ws.kT.data(), z.Pp);
  }

  // Scores for runs of up to kScoreRows rows that have positions in the tile (each row's scores are
  // the same whichever rows share its run).
  static void score_tile(const AttentionTask& t, const Sizes& z, AttentionWork& ws) {
    const int32_t R = t.n_rows;
    const float* q_ptr[4] = {};
    float* w_rows[4] = {};
    for (int32_t r = 0; r < R;) {
      if (ws.n_tile[r] == 0) {
        ++r;
        continue;
      }
      int32_t e = r, n_run = 0;
      for (; e < R && e - r < S::kScoreRows && ws.n_tile[e] > 0; ++e) {
        q_ptr[e - r] = ws.q.data() + e * z.dkp;
        w_rows[e - r] = ws.w.data() + e * z.Pp;
        n_run = std::max(n_run, ws.n_tile[e]);
      }
      scores(e - r, q_ptr, ws.kT.data(), z.Pp, t.dk, static_cast<int32_t>(round_up(n_run, W) / W), t.scale, w_rows);
      r = e;
    }
  }

  // Scores to weights row by row (online softmax): the max moves once a tile, and c rescales what
  // the row accumulated before.
  static void softmax_tile(int32_t R, const Sizes& z, AttentionWork& ws) {
    for (int32_t r = 0; r < R; ++r) {
      const int32_t n = ws.n_tile[r];
      if (n == 0) continue;
      float* w = ws.w.data() + r * z.Pp;
      const int64_t nv = round_up(n, W);
      std::fill(w + n, w + nv, kNegInf);
      V mx = S::set1(kNegInf);
      for (int64_t i = 0; i < nv; i += W) mx = S::max(mx, S::load(w + i));
      const float m_new = std::max(ws.m[r], S::hmax(mx));
      const V mv = S::set1(m_new);
      V sum = S::zero();
      for (int64_t i = 0; i < nv; i += W) {
        const V e = S::exp(S::sub(S::load(w + i), mv));
        S::store(w + i, e);
        sum = S::add(sum, e);
      }
      const float c = std::exp(ws.m[r] - m_new);  // 0 on the first tile (m = -inf)
      ws.c[r] = c;
      ws.l[r] = ws.l[r] * c + S::hsum(sum);
      ws.m[r] = m_new;
    }
  }

  // Values: runs of rows with the same count (one token's heads) share each V load.
  static void accumulate_tile(int32_t R, const Sizes& z, AttentionWork& ws) {
    float* acc_ptr[4];
    const float* w_ptr[4];
    float c_blk[4];
    for (int32_t r = 0; r < R;) {
      const int32_t n = ws.n_tile[r];
      int32_t e = r + 1;
      while (e < R && e - r < 4 && ws.n_tile[e] == n) ++e;
      if (n > 0) {
        for (int32_t i = r; i < e; ++i) {
          acc_ptr[i - r] = ws.acc.data() + i * z.dvp;
          w_ptr[i - r] = ws.w.data() + i * z.Pp;
          c_blk[i - r] = ws.c[i];
        }
        accumulate_rows(e - r, acc_ptr, w_ptr, c_blk, ws.vt.data(), z.dvp, n);
      }
      r = e;
    }
  }

  // Each row's output: acc / l, or with t.m set (one span of several) acc, m and l to combine.
  static void write_rows(const AttentionTask& t, const Sizes& z, const AttentionWork& ws) {
    for (int32_t r = 0; r < t.n_rows; ++r) {
      const float* a = ws.acc.data() + r * z.dvp;
      if (t.m) {
        t.m[r] = ws.m[r];
        t.l[r] = ws.l[r];
        std::copy(a, a + t.dv, t.out[r]);
        continue;
      }
      const float inv = 1.0f / ws.l[r];
      for (int32_t d = 0; d < t.dv; ++d) t.out[r][d] = a[d] * inv;
    }
  }

  static void run(const AttentionTask& t) {
    thread_local AttentionWork ws;
    const int32_t R = t.n_rows;
    const int32_t P = attention_tile_positions(t.dk, t.dv);
    const Sizes z{round_up(t.dk, W), round_up(t.dv, W), P, round_up(P, W)};
    const int32_t n_max = prepare(t, z, ws);
    const int32_t p_stop = std::min(n_max, t.p_end);
    for (int32_t p0 = t.p_begin; p0 < p_stop; p0 += P) {
      const int32_t np = std::min(P, p_stop - p0);
      prefetch(t, p0 + P, std::min(p0 + 2 * P, p_stop));
      load_tile(t, z, p0, np, ws);
      for (int32_t r = 0; r < R; ++r) ws.n_tile[r] = std::clamp(std::min(t.n_kv[r], t.p_end) - p0, 0, np);
      score_tile(t, z, ws);
      softmax_tile(R, z, ws);
      accumulate_tile(R, z, ws);
    }
    write_rows(t, z, ws);
  }
};

}  // namespace
}  // namespace strata::tensor::detail
