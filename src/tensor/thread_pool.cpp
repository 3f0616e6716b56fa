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
void spin_then_wait(std::atomic<T>& var, Pred done) {
  for (int i = 0; i < kSpinRounds; ++i) {
    if (done()) return;
    STRATA_CPU_RELAX();
  }
  for (int i = 0; i < kYieldRounds; ++i) {
    if (done()) return;
    std::this_thread::yield();
  }
  for (T seen = var.load(std::memory_order_acquire); !done(); seen = var.load(std::memory_order_acquire)) {
    var.wait(seen, std::memory_order_acquire);
  }
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  workers_.reserve(n_threads_ - 1);
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(2, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

bool ThreadPool::try_enter(uint32_t generation) {
  uint64_t r = region_.load(std::memory_order_acquire);
  while ((r >> 32) == generation && !(r & kClosed)) {
    if (region_.compare_exchange_weak(r, r + 1, std::memory_order_acq_rel, std::memory_order_acquire)) return true;
  }
  return false;  // closed (or already a later region): the caller did all the work
}

void ThreadPool::worker_loop(int index) {
  uint32_t seen = 0;
  for (;;) {
    spin_then_wait(generation_, [&] { return generation_.load(std::memory_order_acquire) != seen; });
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load(std::memory_order_acquire)) return;
    if (!(seen & kOptional)) {
      // The caller waits for every worker, so job_ stays this generation's until we report.
      (*job_)(index, n_threads_);
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
    } else if (try_enter(seen)) {
      (*job_)(index, n_threads_);
      const uint64_t before = region_.fetch_sub(1, std::memory_order_acq_rel);
      if ((before & kClosed) && (before & kInsideMask) == 1) region_.notify_one();
    }
  }
}

void ThreadPool::publish(const std::function<void(int, int)>& fn, bool optional) {
  job_ = &fn;
  const uint32_t next = ((generation_.load(std::memory_order_relaxed) >> 1) + 1) << 1 | (optional ? kOptional : 0);
  if (optional) {
    region_.store(uint64_t{next} << 32, std::memory_order_release);
  } else {
    pending_.store(n_threads_ - 1, std::memory_order_release);
  }
  generation_.store(next, std::memory_order_release);
  generation_.notify_all();
}

void ThreadPool::run(const std::function<void(int, int)>& fn) {
  if (n_threads_ == 1) {
    fn(0, 1);
    return;
  }
  publish(fn, false);
  fn(0, n_threads_);
  spin_then_wait(pending_, [&] { return pending_.load(std::memory_order_acquire) == 0; });
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  if (n_threads_ == 1 || n <= grain) {
    fn(0, n);
    return;
  }
  std::atomic<int64_t> next{0};
  const std::function<void(int, int)> take_chunks = [&](int, int) {
    for (;;) {
      const int64_t begin = next.fetch_add(grain, std::memory_order_relaxed);
      if (begin >= n) break;
      fn(begin, std::min(n, begin + grain));
    }
  };
  run_optional(take_chunks);
}

void ThreadPool::run_optional(const std::function<void(int, int)>& fn) {
  publish(fn, true);
  fn(0, n_threads_);
  // The caller's fn returns once all work is taken; wait only for workers that entered (they may
  // still be computing theirs). Later ones find the region closed and skip it.
  region_.fetch_or(kClosed, std::memory_order_acq_rel);
  spin_then_wait(region_, [&] { return (region_.load(std::memory_order_acquire) & kInsideMask) == 0; });
}

void ThreadPool::parallel_for_shares(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t steps = (n + grain - 1) / grain;
  if (n_threads_ == 1 || steps == 1 || steps >= (int64_t{1} << 31)) {
    if (n_threads_ == 1 || steps == 1) {
      fn(0, n);
    } else {
      parallel_for(n, grain, fn);
    }
    return;
  }
  // Share i holds steps [front, back), packed front << 32 | back in one word so that the owner
  // (taking the front) and thieves (taking the back) agree on who gets the last step.
  struct alignas(64) Share {
    std::atomic<uint64_t> span;
  };
  std::vector<Share> shares(n_threads_);
  for (int i = 0; i < n_threads_; ++i) {
    const uint64_t front = static_cast<uint64_t>(steps * i / n_threads_);
    const uint64_t back = static_cast<uint64_t>(steps * (i + 1) / n_threads_);
    shares[i].span.store(front << 32 | back, std::memory_order_relaxed);
  }
  auto run_step = [&](uint64_t step) {
    const int64_t begin = static_cast<int64_t>(step) * grain;
    fn(begin, std::min(n, begin + grain));
  };
  // Takes one step off share s, from the front or the back; false when the share is empty.
  auto take = [&](Share& s, bool from_front, uint64_t& step) {
    uint64_t span = s.span.load(std::memory_order_relaxed);
    for (;;) {
      const uint64_t front = span >> 32, back = span & 0xffffffffu;
      if (front >= back) return false;
      const uint64_t next = from_front ? (front + 1) << 32 | back : front << 32 | (back - 1);
      if (s.span.compare_exchange_weak(span, next, std::memory_order_relaxed)) {
        step = from_front ? front : back - 1;
        return true;
      }
    }
  };
  const std::function<void(int, int)> walk = [&](int index, int) {
    uint64_t step;
    while (take(shares[index], true, step)) run_step(step);
    for (int k = 1; k < n_threads_; ++k) {
      Share& other = shares[(index + k) % n_threads_];
      while (take(other, false, step)) run_step(step);
    }
  };
  run_optional(walk);
}

}  // namespace strata::tensor
