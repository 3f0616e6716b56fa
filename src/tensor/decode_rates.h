// What this process's decoding actually ran at. The planner predicts a node's time per token from
// product rates a start-up probe measured (node_speed.h); decoding runs a model's own shapes between
// its other work, and a tensor-split member runs slices of them between exchanges: on the hosts
// measured, whole-matrix decoding ran 10-20% below the probe and slices a further 20% below. Every
// matmul_batch of one-token jobs inside a DecodingStage scope adds its seconds and GGUF bytes per
// weight type here, and DecodeRateKeeper writes the rates into this host's cached speed, so the next
// plan predicts from decoding as it ran.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "base/dtype.h"

namespace strata::tensor {

struct MatmulJob;

struct DecodedProducts {
  DType type = DType::F32;
  bool slices = false;  // a tensor-split member's slices, not whole matrices
  uint64_t bytes = 0;   // GGUF bytes of the weights read
  double seconds = 0;   // wall time of the products, with the process's threads
  double rate() const { return seconds > 0 ? static_cast<double>(bytes) / seconds : 0; }
};

// A stage whose weights are fewer bytes than this (a test's tiny model) reads them from the caches,
// not from memory: what its products run at says nothing of a model that streams its weights.
inline constexpr uint64_t kDecodeRatesMinStageBytes = uint64_t{96} << 20;  // as the probe's matrix

// One-token products (and a member's exchanges) run on this thread while one is open are a stage's
// decoding (of whole matrices, or of a tensor-split member's slices) and are recorded, unless `record`
// is false (a small stage, a prompt's batch); others (the speed probe, the prefetch calibration,
// tests) are not.
class DecodingStage {
 public:
  DecodingStage(bool slices, bool record);
  ~DecodingStage();
  DecodingStage(const DecodingStage&) = delete;
  DecodingStage& operator=(const DecodingStage&) = delete;

 private:
  int previous_;
};

// Whether products run on this thread now are recorded (a DecodingStage is open that records).
bool recording_decode();
// Adds one matmul_batch of one-token jobs run inside a DecodingStage: its seconds shared among the
// jobs' types by bytes.
void record_decoded_products(std::span<const MatmulJob> jobs, double seconds);
// The totals since this process started, one entry per type and kind seen.
std::vector<DecodedProducts> decoded_products();
// Adds a tensor-split exchange's wait for the peers' partial sums, when made inside a DecodingStage of
// slices (a decoded token's exchange, not a prompt's); the total since the process started.
void record_exchange_wait(double seconds);
double exchange_wait_seconds();

// Keeps what decoding ran at in this host's speed cache (tensor::fold_decoded_rates for `threads`
// under cache_dir), from a thread of its own so that no decode step waits for the file. It looks
// every `window`. Under a CPU quota below `threads` two things change: a node that idles through most
// of a token starts each with its quota unspent and decodes faster than it can when busy (as the plan
// keeps it), so a window is left out unless its products took at least half its wall time; and a
// tensor-split member's waits in exchanges are mostly its own (it sleeps, and wakes only when its
// quota allows), so they count in its slices' time. What is kept is written every `save_every`
// windows and once more when destroyed.
class DecodeRateKeeper {
 public:
  DecodeRateKeeper(int32_t threads, std::string cache_dir, std::chrono::milliseconds window = std::chrono::seconds(1),
                   int32_t save_every = 5);
  ~DecodeRateKeeper();
  DecodeRateKeeper(const DecodeRateKeeper&) = delete;
  DecodeRateKeeper& operator=(const DecodeRateKeeper&) = delete;

 private:
  void look(double window_seconds);
  void save();

  const int32_t threads_;
  const std::string cache_dir_;
  const bool quota_bound_;
  std::vector<DecodedProducts> seen_;  // the totals at the last look
  double seen_wait_ = 0;               // exchange_wait_seconds() at the last look
  std::vector<DecodedProducts> kept_;  // the windows kept so far
  bool changed_ = false;               // kept_ grew since the last save
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

// The windows' rule, apart for tests: `delta` is what a window of `window_seconds` added, `waited` its
// exchange waits; what is kept of it for a process with (or without) a quota below its threads.
std::vector<DecodedProducts> kept_of_window(std::vector<DecodedProducts> delta, double waited, double window_seconds,
                                            bool quota_bound);

}  // namespace strata::tensor
