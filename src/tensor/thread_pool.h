// One pool of persistent threads for all kernels. Dispatch and join are a generation counter and a
// countdown on atomics, so a decode step's ~100 parallel regions cost microseconds, not syscalls.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace strata::tensor {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);  // total threads, the calling thread included
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Runs fn(thread_index, n_threads) on every thread, the caller as index 0; returns when all are done.
  // Not reentrant: fn must not call run() on the same pool.
  void run(const std::function<void(int, int)>& fn);

  // Calls fn(begin, end) over [0, n) in chunks of `grain` items handed out dynamically. Which thread
  // computes a chunk may vary; callers keep results deterministic by making each item's result
  // depend only on the item.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker_loop(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  const std::function<void(int, int)>* job_ = nullptr;
  std::atomic<uint32_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace strata::tensor
