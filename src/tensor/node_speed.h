// How fast this node's kernels go: the facts the planner predicts a node's time per token from.
// Decoding one token streams each weight matrix once through a one-token product, so a node's time
// per token is, per weight type, the bytes its layers read over the rate its kernels stream that type
// (bound by memory bandwidth on one host, by the kernel's instructions on another: measuring the
// product itself covers both). Beside the products, a token's attention reads the KV cache and a
// Gated DeltaNet layer updates its recurrent state: their per-element costs (LayerWork) are measured
// with the layers' own kernels (model/layer_speed.h). Measured once per host, threads and CPU quota,
// and cached.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "base/dtype.h"
#include "base/result.h"

namespace strata::tensor {

struct DecodedProducts;  // decode_rates.h

// Seconds a decoded token's non-product work takes per element, with the node's threads.
struct LayerWork {
  double kv_element = 0;        // attention: per cached K or V element read (positions x KV heads x (d_k + d_v))
  double kv_query_element = 0;  // attention: that again for every query head that reads the KV head
  double state_element = 0;     // Gated DeltaNet: per recurrent state element (value heads x d_k x d_v)
  bool known() const { return kv_element > 0 && state_element > 0; }
  bool operator==(const LayerWork&) const = default;
};

struct NodeSpeed {
  double read_bandwidth = 0;  // bytes/s streaming reads with the node's threads
  // Per weight type: GGUF bytes per second through one-token products (this node's layout, repacked
  // or not), with the node's threads.
  std::vector<std::pair<DType, double>> product_rates;
  LayerWork layer_work;     // zero where not measured (then only the products are predicted)
  // Types whose rate is what this host's decoding ran at (fold_decoded_rates), not the probe's.
  std::vector<DType> decoded;
  // Per weight type: what a tensor-split member's one-token products of its slices ran at (decoded,
  // never probed; empty until this host decoded in a tensor split).
  std::vector<std::pair<DType, double>> slice_rates;
  bool from_cache = false;  // read from this host's cache rather than measured by this process

  bool known() const { return !product_rates.empty(); }
  // Seconds one-token products of `bytes` of `type` weights take: its rate, or the slowest measured
  // type's for a type not measured. 0 when nothing is known.
  double seconds(DType type, uint64_t bytes) const;
  // The same for a tensor-split member's slices: the type's slice rate where decoding measured one.
  double slice_seconds(DType type, uint64_t bytes) const;
  // Seconds one token's attention over `positions` cached positions takes: `kv_heads` heads of
  // d_k + d_v elements each, every one read by `group` query heads.
  double attention_seconds(int64_t positions, int64_t kv_heads, int64_t dk_plus_dv, int64_t group) const;
  // Seconds one token's gated delta rule takes over `state_elements` (value heads x d_k x d_v).
  double recurrent_seconds(int64_t state_elements) const;
  // Checks every figure is finite, positive and below 10 TB/s, types valid and not repeated: for a
  // speed that came over the network or from a file.
  Status validate() const;
  // "read 41.2 GB/s; one-token products F32 20.1, ..., Q6_K 21.0 GB/s; attention ..." ("not measured"
  // when unknown); a rate decoding ran at is marked "(decoded)".
  std::string text() const;
};

// The types measure_product_speed times (the ones decoding spends its time on).
const std::vector<DType>& measured_types();

// Read bandwidth with `threads` threads, bytes/s, measured as decode reads weights: each thread of a
// ThreadPool streams its own contiguous share of a `bytes` buffer (parallel_for_shares), with the
// widest loads the CPU has into independent sums. The buffer is faulted in before timing; the best of
// `runs` passes is kept. Errors on threads outside 1..1024, bytes outside 256 KiB..64 GiB or runs
// outside 1..1000.
Result<double> measure_read_bandwidth(int32_t threads, uint64_t bytes = uint64_t{1} << 30, int32_t runs = 10);

// Times one-token products of a matrix far larger than the caches for each measured type (repacked
// where this process repacks), each over at least `seconds_per_type` of wall time so that a CPU quota
// (cgroup cpu.max, enforced per 100 ms period) shows in the average, then the read bandwidth. The
// layer work is left unknown (model::measure_node_speed adds it).
Result<NodeSpeed> measure_product_speed(int32_t threads, double seconds_per_type = 0.5);

// What names this host's speed in the cache: CPU model and revision, memory, kernel features,
// threads, CPU quota.
std::string node_speed_key(int32_t threads);
// The speed cached under cache_dir/node-speed for node_speed_key(threads), else `measure(threads)`
// cached. One process measures at a time on a host (a lock file), so parallel workers do not time
// each other. model::cached_node_speed passes the whole probe (products and layer work).
using SpeedProbe = std::function<Result<NodeSpeed>(int32_t threads)>;
Result<NodeSpeed> cached_node_speed(int32_t threads, const std::string& cache_dir, const SpeedProbe& measure);
// The speed cached for `threads` under cache_dir, without measuring: an error when there is none.
Result<NodeSpeed> read_cached_node_speed(int32_t threads, const std::string& cache_dir);

// Folds what decoding ran at (tensor/decode_rates.h) into the rates cached for `threads` under
// cache_dir, for each type and kind whose one-token products took at least `min_seconds` in
// `products`: whole matrices into the product rate (replacing the probe's, marked decoded), slices
// into the slice rate; weighed by seconds against at most 10 s of the products folded before. The
// probe times one large product in a loop; decoding runs a model's shapes between its other work,
// and the next plan predicts from that. Returns each rate as now kept (bytes and seconds behind
// it); nothing when the host has no cached speed for `threads` (no probe to correct).
Result<std::vector<DecodedProducts>> fold_decoded_rates(int32_t threads, const std::string& cache_dir,
                                              const std::vector<DecodedProducts>& products, double min_seconds = 0.5);

}  // namespace strata::tensor
