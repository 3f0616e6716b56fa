// Continuous batching over the engine's sequences: each request gets a slot (a sequence), and one
// loop decodes the prompt chunks and next tokens of every active slot in a single batch per step.
// Requests wait in a queue when all slots are busy.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "runtime/engine.h"
#include "runtime/generation.h"

namespace strata::server {

// The request fields and logprobs are the shared generation's (runtime/generation.h).
using GenerationParams = runtime::GenerationParams;
using TokenLogprob = runtime::TokenLogprob;

// One request's stream, shared by the HTTP handler (reader) and the scheduler (writer).
class Request {
 public:
  explicit Request(GenerationParams params) : params_(std::move(params)) {}
  const GenerationParams& params() const { return params_; }

  struct Chunk {
    std::string text;
    std::vector<TokenLogprob> logprobs;
    bool done = false;
    std::string finish_reason;  // "stop" or "length" when done
    std::string error;          // set when the request failed (e.g. a node went down)
    ErrorCode error_code = ErrorCode::kUnknown;  // the failure's kind, for the HTTP status
  };
  // Blocks until new output, completion or the timeout; returns what arrived (possibly empty).
  Chunk next(std::chrono::milliseconds timeout);
  void cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }
  int32_t n_prompt() const { return static_cast<int32_t>(params_.prompt.size()); }
  int32_t n_generated() const { return n_generated_.load(); }

  // Scheduler side.
  void push(std::string text, std::vector<TokenLogprob> logprobs);
  void finish(std::string reason, std::string error = "", ErrorCode code = ErrorCode::kUnknown);
  std::atomic<int32_t> n_generated_{0};

 private:
  GenerationParams params_;
  std::mutex mu_;
  std::condition_variable cv_;
  Chunk pending_;
  std::atomic<bool> cancelled_{false};
};

struct SchedulerStats {
  uint64_t requests_total = 0;
  uint64_t requests_failed = 0;
  uint64_t requests_cancelled = 0;  // their client went away (or asked) before the end
  uint64_t prompt_tokens = 0;
  uint64_t generated_tokens = 0;
  double decode_seconds = 0;
  int32_t queue_depth = 0;
  int32_t active_slots = 0;
};

class Scheduler {
 public:
  explicit Scheduler(runtime::Engine& engine);
  ~Scheduler();

  // Queues a request. Fails (bad request) when the prompt does not fit the slot's context.
  Result<std::shared_ptr<Request>> submit(GenerationParams params);
  SchedulerStats stats() const;
  int32_t n_slots() const { return static_cast<int32_t>(slots_.size()); }
  void stop();

 private:
  struct Slot;
  void loop();
  bool assign_queued();
  void step();
  bool drop_cancelled_and_clear_new();
  int64_t fill_batch(model::Batch& batch, std::vector<Slot*>& rows);
  void fail_active(const Error& error);
  void release(Slot& slot, bool cancelled = false);
  void emit(Slot& slot, std::span<const float> logits);

  runtime::Engine& engine_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::deque<std::shared_ptr<Request>> queue_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> stop_{false};
  SchedulerStats stats_;
  std::thread thread_;
};

}  // namespace strata::server
