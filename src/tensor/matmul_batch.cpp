#include "tensor/matmul_batch.h"

#include <algorithm>
#include <vector>

#include "tensor/quants.h"

namespace strata::tensor {

void matmul_batch(std::span<const MatmulJob> jobs, ThreadPool& pool) {
  // The jobs' rows side by side form one range, split like one matrix's rows (see matmul).
  std::vector<int64_t> first_row(jobs.size() + 1, 0);
  bool one_token = true;
  for (size_t j = 0; j < jobs.size(); ++j) {
    first_row[j + 1] = first_row[j] + jobs[j].w.rows;
    one_token = one_token && jobs[j].n_tokens == 1;
  }
  const int64_t total = first_row.back();
  auto rows = [&](int64_t g0, int64_t g1) {
    // Jobs overlapping [g0, g1), each for its part of the range.
    size_t j = static_cast<size_t>(std::upper_bound(first_row.begin(), first_row.end(), g0) - first_row.begin()) - 1;
    for (; j < jobs.size() && first_row[j] < g1; ++j) {
      const MatmulJob& job = jobs[j];
      const int64_t r0 = std::max(g0, first_row[j]) - first_row[j];
      const int64_t r1 = std::min(g1, first_row[j + 1]) - first_row[j];
      if (r1 > r0) matmul_rows(job.w, *job.x, job.x_first, job.n_tokens, job.y, job.y_stride, r0, r1);
    }
  };
  if (one_token) {
    pool.parallel_for_shares(total, kDecodeRowsPerStep, rows);
  } else {
    pool.parallel_for(total, 16, rows);
  }
}

}  // namespace strata::tensor
