#include "model/delta_rule.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tensor/quants.h"

namespace strata::model {
namespace {

// Eight interleaved partial sums added in a fixed tree: the order does not depend on how the
// compiler vectorizes, and independent sums run at the adder's throughput, not its latency (the
// state rows are dotted twice per token per head: 7,680 dots of 128 per token on an A3B model).
[[gnu::always_inline]] inline float dot(const float* a, const float* b, int32_t n) {
  float lane[8] = {};
  int32_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) lane[j] += a[i + j] * b[i + j];
  }
  for (int j = 0; i < n; ++i, ++j) lane[j] += a[i] * b[i];
  return ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
}

// One token's update of state rows s[0..R-1] (columns j..j+R-1 of S), R rows side by side: each
// row's dot products are one chain of dependent adds, and R independent chains keep the adder busy
// (one row at a time waited on each chain's latency; bench/README.md). Each element sees the
// operations of the one-row form in the same order (decay, then the lanes of S^T k; the rank-1
// update, then the lanes of S^T q), so the bits do not change. Eight lanes are one GCC vector: one
// ymm register in the AVX2 build, two xmm otherwise, the same operations. The row loops are
// unrolled so that the R sums stay in registers (rolled, GCC kept them on the stack).
// (Always inlined into the AVX2 and baseline builds, so the baseline ABI's warning about passing it
// does not apply.)
#pragma GCC diagnostic ignored "-Wpsabi"
using Lanes = float __attribute__((vector_size(32)));

[[gnu::always_inline]] inline Lanes load8(const float* p) {
  Lanes v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
[[gnu::always_inline]] inline void store8(float* p, Lanes v) { std::memcpy(p, &v, sizeof v); }
[[gnu::always_inline]] inline float tree8(Lanes v) {
  return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}

// dk a multiple of 8 (delta_rule_tokens falls back to the one-row loops otherwise).
template <int R>
[[gnu::always_inline]] inline void update_rows(float* (&s)[R], const float* k, const float* q, const float* v,
                                               float decay, float beta, float scale, int32_t dk, float* out) {
  Lanes lane[R] = {};
  for (int32_t c = 0; c < dk; c += 8) {
    const Lanes kc = load8(k + c);
    #pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const Lanes x = load8(s[r] + c) * decay;
      store8(s[r] + c, x);
      lane[r] += x * kc;
    }
  }
  Lanes delta[R];
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    delta[r] = Lanes{} + (v[r] - tree8(lane[r])) * beta;
    lane[r] = Lanes{};
  }
  for (int32_t c = 0; c < dk; c += 8) {
    const Lanes kc = load8(k + c), qc = load8(q + c);
    #pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const Lanes x = load8(s[r] + c) + kc * delta[r];
      store8(s[r] + c, x);
      lane[r] += x * qc;
    }
  }
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r) out[r] = tree8(lane[r]) * scale;
}

[[gnu::always_inline]] inline void tokens(const DeltaHead& h, const int32_t* rows, int64_t n, const DeltaShape& shape,
                                          float* state) {
  const int32_t dk = shape.d_k, dv = shape.d_v;
  // Row j of the state sees only each token's k, q, v[j], decay and beta, so a block of rows is
  // carried through a run of tokens while it sits in L1 (the state is 64 KiB per head, past L1),
  // instead of the whole state passing through L2 once per token. Every element still sees the same
  // operations in token order: the bits do not change.
  constexpr int64_t kTokens = 64;
  constexpr int32_t kBlock = 32, kRows = 8;
  float decay[kTokens], beta[kTokens];
  for (int64_t i0 = 0; i0 < n; i0 += kTokens) {
    const int64_t m = std::min(kTokens, n - i0);
    for (int64_t i = 0; i < m; ++i) {
      decay[i] = std::exp(h.g[rows[i0 + i] * h.gb_stride]);
      beta[i] = h.beta[rows[i0 + i] * h.gb_stride];
    }
    for (int32_t j0 = 0; j0 < dv; j0 += kBlock) {
      const int32_t j1 = std::min(dv, j0 + kBlock);
      for (int64_t i = 0; i < m; ++i) {
        const int64_t r = rows[i0 + i];
        const float* q = h.q + r * h.qk_stride;
        const float* k = h.k + r * h.qk_stride;
        const float* v = h.v + r * h.v_stride;
        float* out = h.out + r * h.out_stride;
        int32_t j = j0;
        for (; dk % 8 == 0 && j + kRows <= j1; j += kRows) {
          float* s[kRows];
          for (int e = 0; e < kRows; ++e) s[e] = state + int64_t{j + e} * dk;
          update_rows<kRows>(s, k, q, v + j, decay[i], beta[i], shape.scale, dk, out + j);
        }
        for (; j < j1; ++j) {
          float* s = state + int64_t{j} * dk;
          for (int32_t c = 0; c < dk; ++c) s[c] *= decay[i];
          const float delta = (v[j] - dot(s, k, dk)) * beta[i];
          for (int32_t c = 0; c < dk; ++c) s[c] += k[c] * delta;
          out[j] = dot(s, q, dk) * shape.scale;
        }
      }
    }
  }
}

[[gnu::always_inline]] inline void chunked(const DeltaHead& h, const int32_t* rows, int64_t n, const DeltaShape& shape,
                                           float* state, int32_t chunk, std::vector<float>& work) {
  const int32_t dk = shape.d_k, dv = shape.d_v;
  const int64_t C = std::max(chunk, 1);
  // Scratch: cumulative decay G (C), k.k and q.k (C x C each), delta (C x dv).
  work.resize(C + 2 * C * C + C * dv);
  float* G = work.data();
  float* kk = G + C;
  float* qk = kk + C * C;
  float* delta = qk + C * C;
  for (int64_t c0 = 0; c0 < n; c0 += C) {
    const int64_t L = std::min<int64_t>(C, n - c0);
    const int32_t* rc = rows + c0;
    auto q = [&](int64_t i) { return h.q + rc[i] * h.qk_stride; };
    auto k = [&](int64_t i) { return h.k + rc[i] * h.qk_stride; };
    float sum = 0.0f;
    for (int64_t i = 0; i < L; ++i) G[i] = sum += h.g[rc[i] * h.gb_stride];
    for (int64_t i = 0; i < L; ++i) {
      for (int64_t j = 0; j <= i; ++j) {
        kk[i * C + j] = dot(k(i), k(j), dk);
        qk[i * C + j] = dot(q(i), k(j), dk);
      }
    }
    // delta = (I + A)^-1 R by forward substitution, R_i = beta_i (v_i - e^{G_i} S^T k_i).
    for (int64_t i = 0; i < L; ++i) {
      const float beta = h.beta[rc[i] * h.gb_stride];
      const float* v = h.v + rc[i] * h.v_stride;
      const float gi = std::exp(G[i]);
      float* d = delta + i * dv;
      for (int32_t j = 0; j < dv; ++j) d[j] = beta * (v[j] - gi * dot(state + int64_t{j} * dk, k(i), dk));
      for (int64_t p = 0; p < i; ++p) {
        const float a = beta * std::exp(G[i] - G[p]) * kk[i * C + p];
        const float* dp = delta + p * dv;
        for (int32_t j = 0; j < dv; ++j) d[j] -= a * dp[j];
      }
    }
    // Outputs: the incoming state's contribution plus the chunk's own updates.
    for (int64_t i = 0; i < L; ++i) {
      float* out = h.out + rc[i] * h.out_stride;
      const float gi = std::exp(G[i]);
      for (int32_t j = 0; j < dv; ++j) out[j] = gi * dot(state + int64_t{j} * dk, q(i), dk);
      for (int64_t p = 0; p <= i; ++p) {
        const float a = std::exp(G[i] - G[p]) * qk[i * C + p];
        const float* dp = delta + p * dv;
        for (int32_t j = 0; j < dv; ++j) out[j] += a * dp[j];
      }
      for (int32_t j = 0; j < dv; ++j) out[j] *= shape.scale;
    }
    // State at the end of the chunk.
    const float g_last = G[L - 1];
    const float total = std::exp(g_last);
    for (int64_t e = 0; e < int64_t{dk} * dv; ++e) state[e] *= total;
    for (int64_t p = 0; p < L; ++p) {
      const float a = std::exp(g_last - G[p]);
      const float* kp = k(p);
      const float* dp = delta + p * dv;
      for (int32_t j = 0; j < dv; ++j) {
        const float f = a * dp[j];
        float* s = state + int64_t{j} * dk;
        for (int32_t c = 0; c < dk; ++c) s[c] += kp[c] * f;
      }
    }
  }
}

// Each form built for AVX2 and the baseline, picked by tensor::best_isa() so that STRATA_MAX_ISA
// caps it as it caps the matmul kernels: the same operations in the same order in both builds (no
// FMA contraction), only wider, so the bits do not depend on the machine. The eight lanes are one
// ymm register either way; an AVX-512 build measured slower (delta_rule/tokens, bench/README.md).
[[gnu::target("avx2")]] void tokens_avx2(const DeltaHead& h, const int32_t* rows, int64_t n, const DeltaShape& shape,
                                         float* state) {
  tokens(h, rows, n, shape, state);
}
void tokens_baseline(const DeltaHead& h, const int32_t* rows, int64_t n, const DeltaShape& shape, float* state) {
  tokens(h, rows, n, shape, state);
}
[[gnu::target("avx2")]] void chunked_avx2(const DeltaHead& h, const int32_t* rows, int64_t n, const DeltaShape& shape,
                                          float* state, int32_t chunk, std::vector<float>& work) {
  chunked(h, rows, n, shape, state, chunk, work);
}
void chunked_baseline(const DeltaHead& h, const int32_t* rows, int64_t n, const DeltaShape& shape, float* state,
                      int32_t chunk, std::vector<float>& work) {
  chunked(h, rows, n, shape, state, chunk, work);
}

}  // namespace

void delta_rule_tokens(const DeltaHead& h, const int32_t* rows, int64_t n, const DeltaShape& shape, float* state,
                       tensor::Isa isa) {
  if (std::min(isa, tensor::best_isa()) >= tensor::Isa::Avx2) return tokens_avx2(h, rows, n, shape, state);
  tokens_baseline(h, rows, n, shape, state);
}

void delta_rule_tokens(const DeltaHead& h, const int32_t* rows, int64_t n, const DeltaShape& shape, float* state) {
  delta_rule_tokens(h, rows, n, shape, state, tensor::best_isa());
}

void delta_rule_chunked(const DeltaHead& h, const int32_t* rows, int64_t n, const DeltaShape& shape, float* state,
                        int32_t chunk, std::vector<float>& work) {
  if (tensor::best_isa() >= tensor::Isa::Avx2) return chunked_avx2(h, rows, n, shape, state, chunk, work);
  chunked_baseline(h, rows, n, shape, state, chunk, work);
}

}  // namespace strata::model
