// One pool of persistent threads for all kernels. Dispatch and join are a generation counter and
// counters on atomics, so a decode step's ~100-200 parallel regions cost well under a microsecond
// each on an idle machine, not syscalls.
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
  // depend only on the item. Workers that have not woken up by the time the caller has taken every
  // chunk are not waited for, so a worker descheduled by another process costs no latency.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

  // Like parallel_for, but [0, n) is first cut into one contiguous share per thread, each walked
  // from its start in steps of `grain`; a thread done with its share takes steps from the end of
  // the others'. Long runs per thread keep the hardware prefetchers ahead when streaming weights
  // (decode), and stealing keeps a thread preempted by another process from holding up the rest.
  void parallel_for_shares(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  // Generation values: bit 0 tells how workers join (kEveryone: all must run the job; otherwise
  // a worker runs it only if it can enter before the caller closes the region).
  static constexpr uint32_t kOptional = 1;
  // region_: generation << 32 | kClosed | number of workers inside.
  static constexpr uint64_t kClosed = uint64_t{1} << 31;
  static constexpr uint64_t kInsideMask = kClosed - 1;

  void worker_loop(int index);
  void publish(const std::function<void(int, int)>& fn, bool optional);
  // Runs fn on the caller and on the workers that wake in time; fn must take work from shared state
  // until none is left, so that the caller's call alone completes the job.
  void run_optional(const std::function<void(int, int)>& fn);
  bool try_enter(uint32_t generation);

  int n_threads_;
  std::vector<std::thread> workers_;
  const std::function<void(int, int)>* job_ = nullptr;
  std::atomic<uint32_t> generation_{0};
  std::atomic<int> pending_{0};       // run(): workers yet to finish
  std::atomic<uint64_t> region_{0};   // parallel_for(): see kClosed
  std::atomic<bool> stop_{false};
};

}  // namespace strata::tensor
