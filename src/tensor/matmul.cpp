#include "tensor/matmul.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "tensor/decode_rates.h"
#include "tensor/quants.h"
#include "tensor/repack.h"
#include "tensor/repack_blocks.h"

namespace strata::tensor {

size_t QuantizedActivations::sums_per_row() const {
  return static_cast<size_t>(format_ == DType::Q8_K ? cols_ / 64 : cols_ / 32);
}

void QuantizedActivations::block_sums(const uint8_t* row, int32_t* out) const {
  if (format_ == DType::Q8_0) {
    const auto* blocks = reinterpret_cast<const detail::BlockQ8_0*>(row);
    for (size_t b = 0; b < sums_per_row(); ++b) {
      int32_t s = 0;
      for (int8_t q : blocks[b].qs) s += q;
      out[b] = s;
    }
    return;
  }
  // Q8_K: per 256-block the words S_2p | S_2p+1 << 16 (p < 4) of its 32-element sums S_k, the int16
  // pairs a vpmaddwd / vpdpwssd against two sub-blocks' mins takes.
  const auto* blocks = reinterpret_cast<const detail::BlockQ8K*>(row);
  for (int64_t b = 0; b < cols_ / 256; ++b) {
    for (int p = 0; p < 4; ++p) {
      const int16_t* bs = blocks[b].bsums + 4 * p;
      const auto lo = static_cast<uint16_t>(bs[0] + bs[1]), hi = static_cast<uint16_t>(bs[2] + bs[3]);
      out[4 * b + p] = static_cast<int32_t>(static_cast<uint32_t>(lo) | static_cast<uint32_t>(hi) << 16);
    }
  }
}

void QuantizedActivations::quantize(DType weight_type, const float* x, int64_t n_tokens, int64_t cols,
                                    ThreadPool& pool) {
  format_ = vec_dot_type(weight_type);
  cols_ = cols;
  row_bytes_ = row_bytes(format_, cols);
  buf_.resize(row_bytes_ * static_cast<size_t>(n_tokens));
  // The repacked kernels' per-block sums: computed once per token here, not once per row group.
  const bool sums = format_ == DType::Q8_0 || format_ == DType::Q8_K;
  sums_.resize(sums ? sums_per_row() * static_cast<size_t>(n_tokens) : 0);
  auto convert = [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      uint8_t* row = buf_.data() + t * row_bytes_;
      quantize_activations(format_, x + t * cols, row, cols);
      if (sums) block_sums(row, sums_.data() + static_cast<size_t>(t) * sums_per_row());
    }
  };
  if (n_tokens >= 4) {
    pool.parallel_for(n_tokens, 1, convert);
  } else {
    convert(0, n_tokens);
  }
}

void matmul_rows(const MatrixView& w, const QuantizedActivations& x, int64_t x_first, int64_t n_tokens, float* y,
                 int64_t y_stride, int64_t r0, int64_t r1) {
  const int64_t n = w.cols;
  if (w.repacked) {
    // Callers hand out rows in multiples of 16 (matmul_batch aligns every job).
    const detail::ActRows a{x.row(x_first), x.row_stride(), x.has_sums() ? x.sums(x_first) : nullptr,
                            x.sums_per_row()};
    detail::gemm16_fn(w.type)(n, w.row(r0), kRepackRows * w.row_stride, (r1 - r0) / kRepackRows, a, n_tokens,
                              y + r0, y_stride);
    return;
  }
  if (n_tokens > 1) {
    // Each weight block is unpacked once per tile of tokens; the kernel walks token tiles in the
    // outer loop so the tile's activations stay in L1 while these rows (L1/L2) stream past.
    if (const VecDotTileFn tile = vec_dot_tile_fn(w.type)) {
      tile(n, w.row(r0), w.row_stride, r1 - r0, x.row(x_first), x.row_stride(), n_tokens, y + r0, y_stride);
      return;
    }
  }
  const VecDotFn dot = vec_dot_fn(w.type);
  for (int64_t t = 0; t < n_tokens; ++t) {
    const uint8_t* a = x.row(x_first + t);
    float* yt = y + t * y_stride;
    for (int64_t r = r0; r < r1; ++r) yt[r] = dot(n, w.row(r), a);
  }
}

void matmul_batch(std::span<const MatmulJob> jobs, ThreadPool& pool) {
  // The jobs' rows side by side form one range. Up to kStreamTokens tokens (decode, and several
  // server slots decoding together) read every weight once and stream them: each thread walks a
  // contiguous share, so the prefetchers stay ahead (16-row blocks handed out in turn halve the read
  // speed, bench/README.md). More tokens are compute-bound: 16-row blocks every token reuses from
  // cache. Each job starts on a multiple of 16 so that repacked jobs get whole groups. Which thread
  // computes a row changes no bit of it.
  constexpr int64_t kStreamTokens = 8;
  std::vector<int64_t> first_row(jobs.size() + 1, 0);
  bool streaming = true, one_token = true;
  for (size_t j = 0; j < jobs.size(); ++j) {
    first_row[j + 1] = first_row[j] + (jobs[j].w.rows + kRepackRows - 1) / kRepackRows * kRepackRows;
    streaming = streaming && jobs[j].n_tokens <= kStreamTokens;
    one_token = one_token && jobs[j].n_tokens == 1;
  }
  const int64_t total = first_row.back();
  auto rows = [&](int64_t g0, int64_t g1) {
    // Jobs overlapping [g0, g1), each for its part of the range.
    size_t j = static_cast<size_t>(std::upper_bound(first_row.begin(), first_row.end(), g0) - first_row.begin()) - 1;
    for (; j < jobs.size() && first_row[j] < g1; ++j) {
      const MatmulJob& job = jobs[j];
      const int64_t r0 = std::max(g0, first_row[j]) - first_row[j];
      const int64_t r1 = std::min({g1, first_row[j + 1], first_row[j] + job.w.rows}) - first_row[j];
      if (r1 > r0) matmul_rows(job.w, *job.x, job.x_first, job.n_tokens, job.y, job.y_stride, r0, r1);
    }
  };
  if (one_token && recording_decode()) {  // a stage's decoding: timed, so the plan learns what it runs at
    const auto start = std::chrono::steady_clock::now();
    pool.parallel_for_shares(total, kDecodeRowsPerStep, rows);
    record_decoded_products(jobs, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  } else if (streaming) {
    pool.parallel_for_shares(total, kDecodeRowsPerStep, rows);
  } else {
    pool.parallel_for(total, 16, rows);
  }
}

void matmul(const MatrixView& w, const QuantizedActivations& x, int64_t n_tokens, float* y, int64_t y_stride,
            ThreadPool& pool) {
  const MatmulJob job{w, &x, 0, n_tokens, y, y_stride};
  matmul_batch({&job, 1}, pool);
}

void matmul(const MatrixView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  QuantizedActivations q;
  q.quantize(w.type, x, n_tokens, w.cols, pool);
  matmul(w, q, n_tokens, y, w.rows, pool);
}

void dequantize_matrix_row(const MatrixView& w, int64_t r, float* out) {
  if (!w.repacked) {
    dequantize_row(w.type, w.row(r), out, w.cols);
    return;
  }
  thread_local std::vector<uint8_t> row;  // embedding lookups run per token: no allocation each
  row.resize(row_bytes(w.type, w.cols));
  unpack_row(w, r, row.data());
  dequantize_row(w.type, row.data(), out, w.cols);
}

}  // namespace strata::tensor
