// Continuous batching over the engine's sequences: each request gets a slot (a sequence), and one
// loop decodes the prompt chunks and next tokens of every active slot in a single batch per step.
// Requests wait in a queue when all slots are busy.
//
// Prompt caching: a slot keeps its tokens and caches after a request, and a new request goes to the
// free slot sharing the longest token prefix with its prompt, which then computes only the rest. A
// model with recurrent layers cannot cut its state back, so every node also keeps state checkpoints
// per slot (at the request's cache boundary, before its prompt's last token, every
// checkpoint_interval tokens, at its end), and reuse restores the newest one at or before the prefix.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "runtime/engine.h"
#include "runtime/generation.h"
#include "runtime/speculative.h"
#include "server/host_cache.h"

namespace strata::server {

// The request fields and logprobs are the shared generation's (runtime/generation.h).
using GenerationParams = runtime::GenerationParams;
using TokenLogprob = runtime::TokenLogprob;

// How a request may use the prompt cache.
struct CacheHints {
  bool cache_prompt = true;  // reuse a slot's common prefix (llama-server's field)
  // A prompt position worth a checkpoint: where the conversation so far ends and the generation
  // prompt begins, so the next turn (which re-renders this one) can resume there. -1: none.
  int32_t boundary = -1;
};

// One request's stream, shared by the HTTP handler (reader) and the scheduler (writer).
class Request {
 public:
  explicit Request(GenerationParams params, CacheHints hints = {}) : params_(std::move(params)), hints_(hints) {}
  const GenerationParams& params() const { return params_; }
  const CacheHints& hints() const { return hints_; }

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
  // Prompt tokens the slot's cache already held (not computed again); set before the first output.
  int32_t n_cached() const { return n_cached_.load(); }
  // Milliseconds from the start of prompt processing to the first token, and from there to the end.
  double prompt_ms() const { return prompt_ms_.load(); }
  double predicted_ms() const { return predicted_ms_.load(); }
  // Speculative decoding (--spec-type): whether the slot drafted, the drafted tokens checked and kept.
  bool speculative() const { return speculative_.load(); }
  int32_t draft_n() const { return draft_n_.load(); }
  int32_t draft_n_accepted() const { return draft_n_accepted_.load(); }

  // Scheduler side.
  void push(std::string text, std::vector<TokenLogprob> logprobs);
  void finish(std::string reason, std::string error = "", ErrorCode code = ErrorCode::kUnknown);
  std::atomic<int32_t> n_generated_{0};
  std::atomic<int32_t> n_cached_{0};
  std::atomic<double> prompt_ms_{0}, predicted_ms_{0};
  std::atomic<bool> speculative_{false};
  std::atomic<int32_t> draft_n_{0}, draft_n_accepted_{0};

 private:
  GenerationParams params_;
  CacheHints hints_;
  std::mutex mu_;
  std::condition_variable cv_;
  Chunk pending_;
  std::atomic<bool> cancelled_{false};
};

struct SchedulerStats {
  uint64_t requests_total = 0;
  uint64_t requests_failed = 0;
  uint64_t requests_cancelled = 0;  // their client went away (or asked) before the end
  uint64_t requests_resumed = 0;    // in flight when a node failed, and went on after the recovery
  uint64_t recoveries = 0;          // node failures recovered from while requests were in flight
  uint64_t prompt_tokens = 0;         // computed
  uint64_t prompt_tokens_cached = 0;  // taken from a slot's cache instead
  uint64_t checkpoints_saved = 0;
  uint64_t checkpoints_restored = 0;
  HostCache::Stats host_cache;  // --cache-ram
  runtime::SpecStats spec;      // speculative decoding, over every request
  uint64_t generated_tokens = 0;
  // Engine calls, and the slots fed over them: every call takes the next rows of every active slot,
  // so slots per call near the active count says they decode together (llama-server's
  // n_busy_slots_per_decode).
  uint64_t decode_calls = 0;
  uint64_t decode_slots = 0;
  double decode_seconds = 0;
  int32_t queue_depth = 0;
  int32_t active_slots = 0;
};

// A slot as GET /slots shows it.
struct SlotInfo {
  int32_t id = 0;
  bool is_processing = false;
  int32_t n_cached_tokens = 0;            // tokens its caches hold for the next request
  std::vector<int32_t> checkpoints;       // positions of its state checkpoints
};

// Where the conversation so far ends in a chat prompt's tokens (its generation prompt follows): the
// tokens `conversation` (the chat rendered without a generation prompt) has in common with it; -1
// when conversation is empty. The next turn re-renders this one, so a checkpoint there resumes it.
int32_t cache_boundary(const text::Vocab& vocab, const std::vector<text::Token>& prompt, const std::string& conversation);

struct SchedulerOptions {
  int32_t checkpoint_interval = 4096;  // a checkpoint every this many prompt tokens (recurrent models)
  // A slot is chosen for its cache when it shares at least this share of the prompt (llama-server's
  // --slot-prompt-similarity); otherwise the least recently used one, so one conversation does not
  // evict another that only shares a template header.
  double slot_prompt_similarity = 0.5;
  // Speculative decoding in every slot (--spec-type ...): a slot's draft is checked in the same
  // engine call as the other slots' rows. The engine must keep Speculation::checkpoints_needed
  // checkpoints per sequence beyond the prompt cache's.
  runtime::SpecParams spec;
};

class Scheduler {
 public:
  explicit Scheduler(runtime::Engine& engine, SchedulerOptions options = {});
  ~Scheduler();

  // Queues a request. Fails (bad request) when the prompt does not fit the slot's context.
  Result<std::shared_ptr<Request>> submit(GenerationParams params, CacheHints hints = {});
  // Queues several requests under one lock, so that those with a free slot start in the same step;
  // none is queued when one fails submit()'s checks (the error names its index).
  Result<std::vector<std::shared_ptr<Request>>> submit_all(std::vector<GenerationParams> params);
  SchedulerStats stats() const;
  // llama-server's slot actions (POST /slots/ID?action=save|restore|erase), run on the scheduler's
  // thread between engine calls; a slot that is processing a request is refused (kUnavailable).
  enum class SlotAction { kSave, kRestore, kErase };
  struct SlotActionResult {
    int32_t n_tokens = 0;  // saved, restored or erased
    uint64_t bytes = 0;    // written or read
    double ms = 0;
  };
  Result<SlotActionResult> slot_action(int32_t id, SlotAction action, const std::string& path);
  std::vector<SlotInfo> slots() const;
  int32_t n_slots() const { return static_cast<int32_t>(slots_.size()); }
  void stop();

 private:
  struct Slot;
  void loop();
  bool assign_queued();
  Slot* pick_slot(const GenerationParams& params, bool cache_prompt);
  void step();
  bool drop_cancelled_and_prepare_new(bool prepare_new);
  Status prepare(Slot& slot);
  Status reuse_prefix(Slot& slot, int32_t n);
  Result<int32_t> use_host_cache(Slot& slot, const std::vector<text::Token>& prompt, int32_t n);
  Status save_checkpoint(Slot& slot, int32_t pos);
  void save_due_checkpoints(const std::vector<Slot*>& slots);
  // A slot's rows that want logits: one, or a speculative check's waiting token and draft.
  struct Row {
    Slot* slot;
    int32_t n = 1;
  };
  struct Filled {
    int64_t prompt_tokens = 0;
    int32_t slots = 0;
    std::vector<Slot*> fed;  // the slots with rows in the batch
  };
  void interrupt_active(const std::vector<Slot*>& fed, const Error& error);
  bool recovered();
  Filled fill_batch(model::Batch& batch, std::vector<Row>& rows);
  bool feed_draft(Slot& slot, model::Batch& batch);
  Status check_draft(Slot& slot, std::span<const float> logits);
  int32_t checkpoint_limit() const;
  Status check(const GenerationParams& params) const;
  void fail_active(const Error& error);
  void release(Slot& slot, bool cancelled = false);
  void emit(Slot& slot, std::span<const float> logits);
  void emit(Slot& slot, runtime::GenerationStep step);
  void run_tasks();
  Result<SlotActionResult> do_slot_action(Slot& slot, SlotAction action, const std::string& path);

  runtime::Engine& engine_;
  SchedulerOptions options_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::deque<std::shared_ptr<Request>> queue_;
  std::deque<std::function<void()>> tasks_;  // slot actions waiting for the scheduler's thread
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> stop_{false};
  SchedulerStats stats_;
  uint64_t uses_ = 0;  // assignments so far: slots remember when they were last used
  HostCache host_cache_;  // used by the scheduler's thread only
  // While a failed node's requests wait for the cluster to recover (--failover wait|replan).
  bool recovering_ = false;
  int32_t resumes_ = 0;  // recoveries since the last decode that went through
  std::optional<std::chrono::steady_clock::time_point> recover_until_;
  std::chrono::steady_clock::time_point recover_started_;
  std::string recover_cause_;
  std::thread thread_;
};

}  // namespace strata::server
