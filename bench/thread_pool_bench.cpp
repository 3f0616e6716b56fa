// Cost of one parallel region of the thread pool: a decode step runs ~100-200 of them, so this is
// the per-region overhead a token pays on top of the kernels. Reports nanoseconds per region.
//   ./strata_microbench --benchmark_filter='ThreadPool'
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>

#include "tensor/thread_pool.h"

namespace strata::tensor {
namespace {

// An empty region: dispatch plus join.
void BM_ThreadPoolRun(benchmark::State& state) {
  ThreadPool pool(static_cast<int>(state.range(0)));
  std::atomic<int64_t> sink{0};
  for (auto _ : state) {
    pool.run([&](int i, int) { sink.fetch_add(i, std::memory_order_relaxed); });
  }
  benchmark::DoNotOptimize(sink.load());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ThreadPoolRun)->Arg(1)->Arg(2)->UseRealTime();

// A region handing out 64 chunks (a matmul's row blocks), each doing almost nothing.
void BM_ThreadPoolParallelFor(benchmark::State& state) {
  ThreadPool pool(static_cast<int>(state.range(0)));
  std::atomic<int64_t> sink{0};
  for (auto _ : state) {
    pool.parallel_for(64 * 16, 16, [&](int64_t b, int64_t e) { sink.fetch_add(e - b, std::memory_order_relaxed); });
  }
  benchmark::DoNotOptimize(sink.load());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ThreadPoolParallelFor)->Arg(1)->Arg(2)->UseRealTime();

}  // namespace
}  // namespace strata::tensor
