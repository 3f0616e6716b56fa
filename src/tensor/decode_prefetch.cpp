// Whether one-token products of repacked matrices prefetch in software, measured per process on its
// own weights (tensor/repack.h says why it cannot be fixed in advance).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <vector>

#include "tensor/repack.h"
#include "tensor/repack_blocks.h"

namespace strata::tensor {
namespace {

// STRATA_DECODE_PREFETCH=on|off, when set to either.
std::optional<bool> forced_by_env() {
  const char* env = std::getenv("STRATA_DECODE_PREFETCH");
  if (!env || (std::string_view(env) != "on" && std::string_view(env) != "off")) return std::nullopt;
  return std::string_view(env) == "on";
}

// Until measured: on, unless the variable says off (so benchmarks of the bare kernels can compare).
std::atomic<bool> g_prefetch{forced_by_env().value_or(true)};

// Seconds of one one-token product of w.
double time_product(const MatrixView& w, const QuantizedActivations& x, std::vector<float>& y, ThreadPool& pool) {
  const auto start = std::chrono::steady_clock::now();
  matmul(w, x, 1, y.data(), w.rows, pool);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

namespace detail {
bool decode_prefetch() { return g_prefetch.load(std::memory_order_relaxed); }
}  // namespace detail

void set_decode_prefetch(bool on) { g_prefetch.store(on, std::memory_order_relaxed); }

PrefetchChoice calibrate_decode_prefetch(const MatrixView& w, ThreadPool& pool) {
  PrefetchChoice c;
  if (const std::optional<bool> forced = forced_by_env()) {
    c.on = *forced, c.forced = true;
    set_decode_prefetch(c.on);
    return c;
  }
  constexpr size_t kMin = size_t{16} << 20, kMax = size_t{64} << 20;
  const size_t group = kRepackRows * w.row_stride;
  if (!w.repacked || w.empty() || group == 0 || static_cast<size_t>(w.rows / kRepackRows) * group < kMin) {
    c.on = detail::decode_prefetch();
    return c;
  }
  const MatrixView m = w.slice_rows(0, std::min<int64_t>(w.rows / kRepackRows, kMax / group) * kRepackRows);
  std::vector<float> ones(static_cast<size_t>(m.cols), 1.0f), y(static_cast<size_t>(m.rows));
  QuantizedActivations x;
  x.quantize(m.type, ones.data(), 1, m.cols, pool);
  // Interleaved, best of four each: the first pass of either also faults nothing in (the weights
  // are resident), but a busy moment should not decide.
  double with = 1e30, without = 1e30;
  for (int round = 0; round < 4; ++round) {
    set_decode_prefetch(true);
    with = std::min(with, time_product(m, x, y, pool));
    set_decode_prefetch(false);
    without = std::min(without, time_product(m, x, y, pool));
  }
  const double bytes = static_cast<double>(m.rows / kRepackRows) * static_cast<double>(group);
  c.gbps_with = bytes / with / 1e9;
  c.gbps_without = bytes / without / 1e9;
  c.on = with < without;
  c.measured = true;
  set_decode_prefetch(c.on);
  return c;
}

}  // namespace strata::tensor
