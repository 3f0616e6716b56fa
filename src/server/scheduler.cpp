#include "server/scheduler.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <span>

#include "runtime/generate.h"

namespace strata::server {

Request::Chunk Request::next(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return !pending_.text.empty() || !pending_.logprobs.empty() || pending_.done; });
  Chunk out = std::move(pending_);
  pending_ = Chunk{};
  if (out.done) pending_ = Chunk{"", {}, true, out.finish_reason, out.error, out.error_code};  // stays done
  return out;
}

void Request::push(std::string text, std::vector<TokenLogprob> logprobs) {
  {
    std::lock_guard lock(mu_);
    pending_.text += text;
    for (auto& l : logprobs) pending_.logprobs.push_back(std::move(l));
  }
  cv_.notify_all();
}

void Request::finish(std::string reason, std::string error, ErrorCode code) {
  {
    std::lock_guard lock(mu_);
    pending_.done = true;
    pending_.finish_reason = std::move(reason);
    pending_.error = std::move(error);
    pending_.error_code = code;
  }
  cv_.notify_all();
}

struct Scheduler::Slot {
  int32_t seq = 0;
  std::shared_ptr<Request> req;
  std::optional<runtime::Generation> gen;  // set while req is
  bool active() const { return req != nullptr; }
};

Scheduler::Scheduler(runtime::Engine& engine) : engine_(engine) {
  for (int32_t s = 0; s < engine.n_seq(); ++s) {
    slots_.push_back(std::make_unique<Slot>());
    slots_.back()->seq = s;
  }
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() { stop(); }

void Scheduler::stop() {
  if (stop_.exchange(true)) return;
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (auto& s : slots_) {
    if (s->active()) s->req->finish("", "server shutting down", ErrorCode::kUnavailable);
  }
  for (auto& r : queue_) r->finish("", "server shutting down", ErrorCode::kUnavailable);
}

Result<std::shared_ptr<Request>> Scheduler::submit(GenerationParams params) {
  if (params.prompt.empty()) return make_error(ErrorCode::kInvalidArgument, "the prompt is empty");
  const int32_t ctx = engine_.n_ctx_per_seq();
  if (static_cast<int32_t>(params.prompt.size()) >= ctx) {
    return make_error(ErrorCode::kOutOfRange,
                      "the prompt has {} tokens but a slot's context holds {} (prompt plus at least one generated token)",
                      params.prompt.size(), ctx);
  }
  if (auto s = sampling::validate(params.sampling); !s.ok()) {
    return with_code(std::move(s).error(), ErrorCode::kInvalidArgument);
  }
  auto req = std::make_shared<Request>(std::move(params));
  {
    std::lock_guard lock(mu_);
    if (stop_) return make_error(ErrorCode::kUnavailable, "server shutting down");
    queue_.push_back(req);
    ++stats_.requests_total;
  }
  cv_.notify_all();
  return req;
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard lock(mu_);
  SchedulerStats s = stats_;
  s.queue_depth = static_cast<int32_t>(queue_.size());
  s.active_slots = 0;
  for (const auto& slot : slots_) s.active_slots += slot->active();
  return s;
}

bool Scheduler::assign_queued() {
  std::lock_guard lock(mu_);
  bool any_active = false;
  for (auto& slot : slots_) {
    if (!slot->active() && !queue_.empty()) {
      std::shared_ptr<Request> req = std::move(queue_.front());
      queue_.pop_front();
      if (req->cancelled()) {
        req->finish("", "cancelled");
        ++stats_.requests_cancelled;
        continue;
      }
      slot->req = req;
      slot->gen.emplace(req->params(), slot->seq, runtime::generation_model(engine_));
    }
    any_active |= slot->active();
  }
  return any_active;
}

void Scheduler::loop() {
  while (!stop_) {
    if (!assign_queued()) {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      continue;
    }
    step();
  }
}

// stats() reads the slots under the same mutex.
void Scheduler::release(Slot& slot, bool cancelled) {
  std::lock_guard lock(mu_);
  slot.req.reset();
  slot.gen.reset();
  if (cancelled) ++stats_.requests_cancelled;
}

void Scheduler::fail_active(const Error& error) {
  std::lock_guard lock(mu_);
  for (auto& slot : slots_) {
    if (!slot->active()) continue;
    slot->req->finish("", error.message, error.code);
    slot->req.reset();
    slot->gen.reset();
    ++stats_.requests_failed;
  }
}

// Ends the slots whose client left, and clears the sequence of those not started yet.
bool Scheduler::drop_cancelled_and_clear_new() {
  for (auto& slot : slots_) {
    if (!slot->active()) continue;
    if (slot->req->cancelled()) {
      spdlog::info("request cancelled by its client after {} generated tokens", slot->gen->n_generated());
      slot->req->finish("", "cancelled");
      release(*slot, /*cancelled=*/true);
      continue;
    }
    if (!slot->gen->started()) {
      if (auto s = engine_.clear_seq(slot->seq); !s.ok()) {
        fail_active(s.error());
        return false;
      }
    }
  }
  return true;
}

// Tokens being generated go first, one row each; prompt chunks fill the rest of the batch. Returns the
// prompt tokens added; rows gets the slot of each row that wants logits, in batch order.
int64_t Scheduler::fill_batch(model::Batch& batch, std::vector<Slot*>& rows) {
  std::vector<Slot*> prompting;
  for (auto& slot : slots_) {
    if (!slot->active()) continue;
    if (!slot->gen->generating()) {
      prompting.push_back(slot.get());
    } else if (slot->gen->feed(batch, engine_.n_batch()).wants_logits) {
      rows.push_back(slot.get());
    }
  }
  int64_t prompt_tokens = 0;
  for (Slot* slot : prompting) {
    const runtime::Feed fed = slot->gen->feed(batch, engine_.n_batch());
    prompt_tokens += fed.prompt_rows;
    if (fed.wants_logits) rows.push_back(slot);
  }
  return prompt_tokens;
}

void Scheduler::step() {
  if (!drop_cancelled_and_clear_new()) return;
  model::Batch batch;
  std::vector<Slot*> rows;
  const int64_t prompt_tokens = fill_batch(batch, rows);
  if (batch.size() == 0) return;

  // A remote output stage sends only the candidates every row's sampler can keep (0: whole rows).
  int32_t top_k = 1;
  for (const Slot* slot : rows) {
    const int32_t need = slot->gen->candidates_needed();
    top_k = need == 0 || top_k == 0 ? 0 : std::max(top_k, need);
  }
  const auto start = std::chrono::steady_clock::now();
  auto logits = engine_.decode(batch, rows.empty() ? 0 : top_k);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!logits.ok()) {
    spdlog::error("decode failed: {}", logits.error().message);
    fail_active(logits.error());
    return;
  }
  {
    std::lock_guard lock(mu_);
    stats_.decode_seconds += seconds;
    stats_.prompt_tokens += prompt_tokens;
  }
  const size_t V = static_cast<size_t>(engine_.n_vocab());
  for (size_t r = 0; r < rows.size(); ++r) emit(*rows[r], std::span<const float>(logits->data() + r * V, V));
}

void Scheduler::emit(Slot& slot, std::span<const float> logits) {
  runtime::GenerationStep step = slot.gen->next_token(logits);
  slot.req->n_generated_.store(slot.gen->n_generated());
  {
    std::lock_guard lock(mu_);
    ++stats_.generated_tokens;
  }
  slot.req->push(std::move(step.text), std::move(step.logprobs));
  if (!step.done) return;
  slot.req->finish(step.finish_reason);
  release(slot);
}

}  // namespace strata::server
