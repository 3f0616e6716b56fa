#include "exec/link_emulation.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace strata::exec {
namespace {

using Clock = std::chrono::steady_clock;

// A send time crosses an all-reduce as three 21-bit pieces, each a float the sum keeps exactly: every
// member writes only its own slots, so the sum leaves each member's time where it wrote it.
constexpr int kStampFloats = 3;
constexpr int64_t kPiece = int64_t{1} << 21;
constexpr uint64_t kFrameHeader = 24;  // what a data link adds to each exchange and message

void write_stamp(float* slot, int64_t ns) {
  for (int i = 0; i < kStampFloats; ++i, ns /= kPiece) slot[i] = static_cast<float>(ns % kPiece);
}

int64_t read_stamp(const float* slot) {
  int64_t ns = 0;
  for (int i = kStampFloats - 1; i >= 0; --i) ns = ns * kPiece + static_cast<int64_t>(slot[i]);
  return ns;
}

int64_t now_ns() { return Clock::now().time_since_epoch().count(); }

class EmulatedLinks final : public model::Collective {
 public:
  EmulatedLinks(std::unique_ptr<model::Collective> inner, int32_t self, int32_t size, const LinkEmulation& e,
                int32_t timeout_ms)
      : inner_(std::move(inner)), self_(self), size_(size), emulation_(e), timeout_(std::chrono::milliseconds(timeout_ms)) {}

  void all_reduce_sum(float* data, int64_t n, model::IdleWork* idle) override {
    const auto start = Clock::now();
    buf_.assign(static_cast<size_t>(n) + static_cast<size_t>(kStampFloats) * size_, 0.0f);
    std::copy(data, data + n, buf_.begin());
    write_stamp(buf_.data() + n + kStampFloats * self_, start.time_since_epoch().count());
    inner_->all_reduce_sum(buf_.data(), static_cast<int64_t>(buf_.size()), idle);
    if (!inner_->error().ok()) return;
    // The last peer's data arrives its wire time after that peer sent it (a sender's clock trusted
    // no later than now).
    const auto wire = emulation_.wire(kFrameHeader + static_cast<uint64_t>(n) * sizeof(float));
    int64_t last_sent = 0;
    for (int32_t m = 0; m < size_; ++m) {
      if (m != self_) last_sent = std::max(last_sent, std::min(read_stamp(buf_.data() + n + kStampFloats * m), now_ns()));
    }
    wait_until(std::min(start + timeout_, Clock::time_point(Clock::duration(last_sent)) + wire), idle);
    std::copy(buf_.begin(), buf_.begin() + n, data);
  }

  Status error() const override { return inner_->error(); }

  Status send_message(int32_t to, std::string_view bytes) override {
    std::string stamped(sizeof(int64_t), '\0');
    const int64_t sent = now_ns();
    std::memcpy(stamped.data(), &sent, sizeof sent);
    stamped.append(bytes);
    return inner_->send_message(to, stamped);
  }

  Result<std::string> receive_message(int32_t from, size_t max_bytes, const std::atomic<bool>* stop) override {
    const auto start = Clock::now();
    if (max_bytes > SIZE_MAX - sizeof(int64_t)) return make_error("link emulation: a message bound of {} bytes", max_bytes);
    STRATA_ASSIGN(std::string stamped, inner_->receive_message(from, max_bytes + sizeof(int64_t), stop));
    if (stamped.size() < sizeof(int64_t)) return make_error("link emulation: a message without its send time");
    int64_t sent = 0;
    std::memcpy(&sent, stamped.data(), sizeof sent);
    std::string bytes = stamped.substr(sizeof sent);
    const auto wire = emulation_.wire(kFrameHeader + bytes.size());
    wait_until(std::min(start + timeout_, Clock::time_point(Clock::duration(std::min(sent, now_ns()))) + wire), nullptr);
    return bytes;
  }

 private:
  static void wait_until(Clock::time_point t, model::IdleWork* idle) {
    while (Clock::now() < t) {
      if (!(idle && idle->step())) std::this_thread::yield();
    }
  }

  std::unique_ptr<model::Collective> inner_;
  int32_t self_, size_;
  LinkEmulation emulation_;
  Clock::duration timeout_;
  std::vector<float> buf_;
};

}  // namespace

std::chrono::nanoseconds LinkEmulation::wire(uint64_t bytes) const {
  const double us = delay_us + (mbit > 0 ? static_cast<double>(bytes) * 8 / mbit : 0);
  return std::chrono::nanoseconds(static_cast<int64_t>(std::min(us, 1e12) * 1000));
}

LinkEmulation LinkEmulation::from_env() {
  LinkEmulation e;
  if (const char* d = std::getenv("STRATA_LINK_DELAY_US")) e.delay_us = std::clamp(std::atof(d), 0.0, 1e6);
  if (const char* r = std::getenv("STRATA_LINK_MBIT")) e.mbit = std::clamp(std::atof(r), 0.0, 1e6);
  return e;
}

std::unique_ptr<model::Collective> emulate_links(std::unique_ptr<model::Collective> inner, int32_t self, int32_t size,
                                                 const LinkEmulation& emulation, int32_t timeout_ms) {
  if (!emulation.active() || !inner) return inner;
  spdlog::info("data links: emulating {} us one way at {} Mbit/s", emulation.delay_us, emulation.mbit);
  return std::make_unique<EmulatedLinks>(std::move(inner), self, size, emulation, timeout_ms);
}

}  // namespace strata::exec
