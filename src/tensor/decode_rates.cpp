#include "tensor/decode_rates.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <atomic>

#include "base/system.h"
#include "tensor/matmul.h"
#include "tensor/node_speed.h"

namespace strata::tensor {
namespace {

// Per kind (whole, slices), indexed by the type's GGUF id (all below 64).
constexpr size_t kTypes = 64;
std::array<std::array<std::atomic<uint64_t>, kTypes>, 2> g_bytes{};
std::array<std::array<std::atomic<uint64_t>, kTypes>, 2> g_nanos{};

std::atomic<uint64_t> g_wait_nanos{0};

constexpr int kNotDecoding = -1;
thread_local int t_kind = kNotDecoding;  // the open DecodingStage's kind: 0 whole, 1 slices

using Clock = std::chrono::steady_clock;

// a - b per type and kind (b taken earlier from the same totals).
std::vector<DecodedProducts> minus(const std::vector<DecodedProducts>& a, const std::vector<DecodedProducts>& b) {
  std::vector<DecodedProducts> out;
  for (DecodedProducts d : a) {
    for (const DecodedProducts& e : b) {
      if (e.type == d.type && e.slices == d.slices) d.bytes -= e.bytes, d.seconds -= e.seconds;
    }
    if (d.bytes > 0) out.push_back(d);
  }
  return out;
}

void add_to(std::vector<DecodedProducts>& sum, const std::vector<DecodedProducts>& delta) {
  for (const DecodedProducts& d : delta) {
    auto it = std::find_if(sum.begin(), sum.end(), [&](const DecodedProducts& s) { return s.type == d.type && s.slices == d.slices; });
    if (it == sum.end()) sum.push_back(d);
    else it->bytes += d.bytes, it->seconds += d.seconds;
  }
}

}  // namespace

DecodingStage::DecodingStage(bool slices, bool record) : previous_(t_kind) { t_kind = !record ? kNotDecoding : slices ? 1 : 0; }
DecodingStage::~DecodingStage() { t_kind = previous_; }

bool recording_decode() { return t_kind != kNotDecoding; }

void record_decoded_products(std::span<const MatmulJob> jobs, double seconds) {
  if (t_kind == kNotDecoding || !(seconds > 0)) return;
  uint64_t total = 0;
  for (const MatmulJob& j : jobs) total += static_cast<uint64_t>(j.w.rows) * row_bytes(j.w.type, j.w.cols);
  if (total == 0) return;
  for (const MatmulJob& j : jobs) {
    const auto id = static_cast<size_t>(j.w.type);
    if (id >= kTypes) continue;
    const uint64_t bytes = static_cast<uint64_t>(j.w.rows) * row_bytes(j.w.type, j.w.cols);
    const double share = static_cast<double>(bytes) / static_cast<double>(total);
    g_bytes[t_kind][id].fetch_add(bytes, std::memory_order_relaxed);
    g_nanos[t_kind][id].fetch_add(static_cast<uint64_t>(seconds * 1e9 * share), std::memory_order_relaxed);
  }
}

std::vector<DecodedProducts> decoded_products() {
  std::vector<DecodedProducts> out;
  for (int kind = 0; kind < 2; ++kind) {
    for (size_t id = 0; id < kTypes; ++id) {
      const uint64_t bytes = g_bytes[kind][id].load(std::memory_order_relaxed);
      if (bytes == 0 || !dtype_info(static_cast<int32_t>(id))) continue;
      const double seconds = static_cast<double>(g_nanos[kind][id].load(std::memory_order_relaxed)) * 1e-9;
      out.push_back({static_cast<DType>(id), kind == 1, bytes, seconds});
    }
  }
  return out;
}

void record_exchange_wait(double seconds) {
  if (t_kind == 1 && seconds > 0) g_wait_nanos.fetch_add(static_cast<uint64_t>(seconds * 1e9), std::memory_order_relaxed);
}

double exchange_wait_seconds() { return static_cast<double>(g_wait_nanos.load(std::memory_order_relaxed)) * 1e-9; }

std::vector<DecodedProducts> kept_of_window(std::vector<DecodedProducts> delta, double waited, double window_seconds,
                                            bool quota_bound) {
  if (!quota_bound || delta.empty()) return delta;
  double busy = 0;
  uint64_t slice_bytes = 0;
  for (const DecodedProducts& d : delta) busy += d.seconds, slice_bytes += d.slices ? d.bytes : 0;
  if (!(window_seconds > 0) || busy < 0.5 * window_seconds) return {};
  for (DecodedProducts& d : delta) {
    if (d.slices) d.seconds += waited * static_cast<double>(d.bytes) / static_cast<double>(slice_bytes);
  }
  return delta;
}

DecodeRateKeeper::DecodeRateKeeper(int32_t threads, std::string cache_dir, std::chrono::milliseconds window, int32_t save_every)
    : threads_(threads), cache_dir_(std::move(cache_dir)), quota_bound_([&] {
        const double quota = cpu_quota_cores();
        return quota > 0 && quota < threads;
      }()),
      seen_(decoded_products()),
      seen_wait_(exchange_wait_seconds()) {
  thread_ = std::thread([this, window, save_every] {
    std::unique_lock lock(mu_);
    auto last = Clock::now();
    for (int32_t n = 1; !wake_.wait_for(lock, window, [&] { return stop_; }); ++n) {
      const auto now = Clock::now();
      look(std::chrono::duration<double>(now - last).count());
      last = now;
      if (n % std::max(1, save_every) == 0) save();
    }
    look(std::chrono::duration<double>(Clock::now() - last).count());
  });
}

DecodeRateKeeper::~DecodeRateKeeper() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  save();
}

void DecodeRateKeeper::look(double window_seconds) {
  const std::vector<DecodedProducts> now = decoded_products();
  const double wait = exchange_wait_seconds();
  const std::vector<DecodedProducts> kept = kept_of_window(minus(now, seen_), wait - seen_wait_, window_seconds, quota_bound_);
  seen_ = now, seen_wait_ = wait;
  if (kept.empty()) return;
  add_to(kept_, kept);
  changed_ = true;
}

void DecodeRateKeeper::save() {
  if (!changed_) return;
  changed_ = false;
  const Result<std::vector<DecodedProducts>> folded = fold_decoded_rates(threads_, cache_dir_, kept_);
  if (!folded.ok()) {
    spdlog::debug("decoded product rates not kept: {}", folded.error().message);
    return;
  }
  for (const DecodedProducts& p : *folded) {
    // Folded once: what stays waits for more seconds of its type.
    std::erase_if(kept_, [&](const DecodedProducts& k) { return k.type == p.type && k.slices == p.slices; });
    spdlog::debug("this host's speed ({} threads) keeps {} {} at {:.1f} GB/s as decoded ({:.2f} s of products)", threads_,
                  dtype_name(p.type), p.slices ? "slices" : "matrices", p.rate() / 1e9, p.seconds);
  }
}

}  // namespace strata::tensor
