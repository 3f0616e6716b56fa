// Prometheus text exposition of the server's counters, the scheduler and the nodes.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "runtime/engine.h"
#include "server/scheduler.h"

namespace strata::server {

class Metrics {
 public:
  void request_started() { ++http_requests_; }
  void request_finished(int32_t n_prompt, int32_t n_generated) {
    ++completed_;
    tokens_in_ += n_prompt;
    tokens_out_ += n_generated;
  }
  void request_failed() { ++failed_; }
  // engine/scheduler may be null while loading.
  std::string render(const runtime::Engine* engine, const Scheduler* scheduler) const;

 private:
  std::atomic<uint64_t> http_requests_{0}, completed_{0}, failed_{0}, tokens_in_{0}, tokens_out_{0};
};

}  // namespace strata::server
