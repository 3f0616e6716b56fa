#include "tensor/matmul_batch.h"

#include <algorithm>
#include <vector>

#include "tensor/quants.h"

namespace strata::tensor {

void matmul_batch(std::span<const MatmulJob> jobs, ThreadPool& pool) {
  // Row blocks of every job, numbered consecutively: task i belongs to the job whose range holds it.
  constexpr int64_t kRowsPerTask = 32;
  std::vector<int64_t> first_task(jobs.size() + 1, 0);
  for (size_t j = 0; j < jobs.size(); ++j) {
    first_task[j + 1] = first_task[j] + (jobs[j].w.rows + kRowsPerTask - 1) / kRowsPerTask;
  }
  pool.parallel_for(first_task.back(), 1, [&](int64_t t0, int64_t t1) {
    for (int64_t task = t0; task < t1; ++task) {
      const size_t j = static_cast<size_t>(std::upper_bound(first_task.begin(), first_task.end(), task) -
                                           first_task.begin()) - 1;
      const MatmulJob& job = jobs[j];
      const int64_t r0 = (task - first_task[j]) * kRowsPerTask;
      const int64_t r1 = std::min(job.w.rows, r0 + kRowsPerTask);
      matmul_rows(job.w, *job.x, job.x_first, job.n_tokens, job.y, job.y_stride, r0, r1);
    }
  });
}

}  // namespace strata::tensor
