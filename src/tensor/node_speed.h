// How fast this node's kernels go: the facts the planner predicts a node's time per token from.
// Decoding one token streams each weight matrix once through a one-token product, so a node's time
// per token is, per weight type, the bytes its layers read over the rate its kernels stream that type
// (bound by memory bandwidth on one host, by the kernel's instructions on another: measuring the
// product itself covers both). Measured once per host, threads and CPU quota, and cached.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/dtype.h"
#include "base/result.h"

namespace strata::tensor {

struct NodeSpeed {
  double read_bandwidth = 0;  // bytes/s streaming reads with the node's threads
  // Per weight type: GGUF bytes per second through one-token products (this node's layout, repacked
  // or not), with the node's threads.
  std::vector<std::pair<DType, double>> product_rates;
  bool from_cache = false;  // read from this host's cache rather than measured by this process


  bool known() const { return !product_rates.empty(); }
  // Seconds one-token products of `bytes` of `type` weights take: its rate, or the slowest measured
  // type's for a type not measured. 0 when nothing is known.
  double seconds(DType type, uint64_t bytes) const;
  // Checks every figure is finite, positive and below 10 TB/s, types valid and not repeated: for a
  // speed that came over the network or from a file.
  Status validate() const;
  // "read 41.2 GB/s; products F32 20.1, ..., Q6_K 21.0 GB/s" ("not measured" when unknown).
  std::string text() const;
};

// The types measure_node_speed times (the ones decoding spends its time on).
const std::vector<DType>& measured_types();

// Read bandwidth with `threads` threads, bytes/s, measured as decode reads weights: each thread of a
// ThreadPool streams its own contiguous share of a `bytes` buffer (parallel_for_shares), with the
// widest loads the CPU has into independent sums. The buffer is faulted in before timing; the best of
// `runs` passes is kept. Errors on threads outside 1..1024, bytes outside 256 KiB..64 GiB or runs
// outside 1..1000.
Result<double> measure_read_bandwidth(int32_t threads, uint64_t bytes = uint64_t{1} << 30, int32_t runs = 10);

// Times one-token products of a matrix far larger than the caches for each measured type (repacked
// where this process repacks), each over at least `seconds_per_type` of wall time so that a CPU quota
// (cgroup cpu.max, enforced per 100 ms period) shows in the average, then the read bandwidth.
Result<NodeSpeed> measure_node_speed(int32_t threads, double seconds_per_type = 0.5);

// What names this host's speed in the cache: CPU model, kernel features, threads, CPU quota.
std::string node_speed_key(int32_t threads);
// The speed cached under cache_dir/node-speed for node_speed_key(threads), else measured and cached.
// One process measures at a time on a host (a lock file), so parallel workers do not time each other.
Result<NodeSpeed> cached_node_speed(int32_t threads, const std::string& cache_dir);

}  // namespace strata::tensor
