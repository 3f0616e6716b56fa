#include "tensor/thread_pool.h"

#include <algorithm>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define STRATA_CPU_RELAX() _mm_pause()
#else
#define STRATA_CPU_RELAX() std::this_thread::yield()
#endif

namespace strata::tensor {
namespace {

// Spin briefly (the gap between two matmuls of one decode step is microseconds), then yield the core
// a few times (on a machine busy with other work, the thread we wait for may need it), then sleep on
// the futex so that an idle pool burns nothing.
constexpr int kSpinRounds = 1 << 12;
constexpr int kYieldRounds = 64;

template <typename T, typename Pred>
void spin_then_wait(std::atomic<T>& var, T seen, Pred done) {
  for (int i = 0; i < kSpinRounds; ++i) {
    if (done()) return;
    STRATA_CPU_RELAX();
  }
  for (int i = 0; i < kYieldRounds; ++i) {
    if (done()) return;
    std::this_thread::yield();
  }
  while (!done()) var.wait(seen, std::memory_order_acquire), seen = var.load(std::memory_order_acquire);
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  workers_.reserve(n_threads_ - 1);
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop(int index) {
  uint32_t seen = 0;
  for (;;) {
    spin_then_wait(generation_, seen, [&] { return generation_.load(std::memory_order_acquire) != seen; });
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load(std::memory_order_acquire)) return;
    (*job_)(index, n_threads_);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

void ThreadPool::run(const std::function<void(int, int)>& fn) {
  if (n_threads_ == 1) {
    fn(0, 1);
    return;
  }
  job_ = &fn;
  pending_.store(n_threads_ - 1, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  fn(0, n_threads_);
  int left = pending_.load(std::memory_order_acquire);
  spin_then_wait(pending_, left, [&] { return pending_.load(std::memory_order_acquire) == 0; });
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  if (n_threads_ == 1 || n <= grain) {
    fn(0, n);
    return;
  }
  std::atomic<int64_t> next{0};
  run([&](int, int) {
    for (;;) {
      const int64_t begin = next.fetch_add(grain, std::memory_order_relaxed);
      if (begin >= n) break;
      fn(begin, std::min(n, begin + grain));
    }
  });
}

}  // namespace strata::tensor
