#include "server/scheduler.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>

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
  std::unique_ptr<sampling::Sampler> sampler;
  int32_t n_past = 0;        // positions in the cache
  size_t prompt_done = 0;    // prompt tokens decoded
  text::Token next = -1;     // sampled and not yet decoded
  text::Utf8Stream utf8;
  std::string held;          // text held back while it may be the start of a stop string
  int32_t generated = 0;
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
      slot->sampler = std::make_unique<sampling::Sampler>(req->params().sampling, engine_.n_vocab());
      for (text::Token t : req->params().prompt) slot->sampler->accept(t);
      slot->n_past = 0;
      slot->prompt_done = 0;
      slot->next = -1;
      slot->utf8 = text::Utf8Stream();
      slot->held.clear();
      slot->generated = 0;
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
  if (cancelled) ++stats_.requests_cancelled;
}

void Scheduler::fail_active(const Error& error) {
  std::lock_guard lock(mu_);
  for (auto& slot : slots_) {
    if (!slot->active()) continue;
    slot->req->finish("", error.message, error.code);
    slot->req.reset();
    ++stats_.requests_failed;
  }
}

void Scheduler::step() {
  model::Batch batch;
  std::vector<Slot*> rows;  // slot of each row that wants logits
  const int32_t budget = engine_.n_batch();
  for (auto& slot : slots_) {
    if (!slot->active()) continue;
    if (slot->req->cancelled()) {
      spdlog::info("request cancelled by its client after {} generated tokens", slot->generated);
      slot->req->finish("", "cancelled");
      release(*slot, /*cancelled=*/true);
      continue;
    }
    if (slot->prompt_done == 0 && slot->n_past == 0) {
      if (auto s = engine_.clear_seq(slot->seq); !s.ok()) {
        fail_active(s.error());
        return;
      }
    }
    if (slot->next >= 0 && batch.size() < budget) {
      batch.add(slot->next, slot->n_past, slot->seq, true);
      rows.push_back(slot.get());
    }
  }
  // Prompt chunks fill the rest of the batch.
  std::vector<std::pair<Slot*, size_t>> prompt_taken;
  for (auto& slot : slots_) {
    if (!slot->active() || slot->next >= 0) continue;
    const auto& prompt = slot->req->params().prompt;
    const size_t room = static_cast<size_t>(budget - batch.size());
    const size_t take = std::min(room, prompt.size() - slot->prompt_done);
    for (size_t i = 0; i < take; ++i) {
      const size_t at = slot->prompt_done + i;
      const bool last = at + 1 == prompt.size();
      batch.add(prompt[at], static_cast<int32_t>(at), slot->seq, last);
      if (last) rows.push_back(slot.get());
    }
    if (take > 0) prompt_taken.emplace_back(slot.get(), take);
  }
  if (batch.size() == 0) return;

  // A remote output stage sends only the candidates every row's sampler can keep; logprobs need
  // whole rows (their normalizer is over the full vocabulary).
  int32_t top_k = 1;
  for (const Slot* slot : rows) {
    const int32_t need = slot->req->params().top_logprobs >= 0
                             ? 0
                             : sampling::candidates_needed(slot->sampler->params(), engine_.n_vocab());
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
    for (auto& [slot, n] : prompt_taken) stats_.prompt_tokens += n;
  }
  for (auto& [slot, n] : prompt_taken) {
    slot->prompt_done += n;
    slot->n_past += static_cast<int32_t>(n);
  }
  const int32_t V = engine_.n_vocab();
  for (size_t r = 0; r < rows.size(); ++r) {
    Slot& slot = *rows[r];
    if (slot.next >= 0) ++slot.n_past;  // the generated token just decoded
    emit(slot, -1, logits->data() + r * V);
  }
}

void Scheduler::emit(Slot& slot, text::Token, const float* logits) {
  const GenerationParams& p = slot.req->params();
  const int32_t V = engine_.n_vocab();
  const std::span<const float> row(logits, static_cast<size_t>(V));
  const text::Token token = slot.sampler->sample(row);
  slot.sampler->accept(token);
  ++slot.generated;
  slot.req->n_generated_.store(slot.generated);
  {
    std::lock_guard lock(mu_);
    ++stats_.generated_tokens;
  }
  const text::Vocab& vocab = engine_.vocab();
  std::vector<TokenLogprob> logprobs;
  if (p.top_logprobs >= 0) {
    float max = row[0];
    for (float v : row) max = std::max(max, v);
    double sum = 0;
    for (float v : row) sum += std::exp(static_cast<double>(v - max));
    const float log_z = max + static_cast<float>(std::log(sum));
    TokenLogprob lp{token, vocab.token_to_piece(token, true), row[token] - log_z, {}};
    for (const auto& c : sampling::Sampler::top_logprobs(row, p.top_logprobs)) {
      lp.top.emplace_back(vocab.token_to_piece(c.id, true), c.p);
    }
    logprobs.push_back(std::move(lp));
  }
  auto finish = [&](const char* reason) {
    slot.held += slot.utf8.flush();
    slot.req->push(std::move(slot.held), std::move(logprobs));
    slot.req->finish(reason);
    release(slot);
    slot.next = -1;
  };
  if (vocab.is_eog(token) && !p.ignore_eos) return finish("stop");
  slot.held += slot.utf8.push(vocab.token_to_piece(token, false));
  // A stop string ends the text before it; text that could still become one is held back.
  size_t keep_from = slot.held.size();
  for (const std::string& stop : p.stop) {
    if (stop.empty()) continue;
    if (const size_t at = slot.held.find(stop); at != std::string::npos) {
      slot.held.resize(at);
      slot.utf8 = text::Utf8Stream();
      return finish("stop");
    }
    for (size_t n = std::min(stop.size() - 1, slot.held.size()); n > 0; --n) {
      if (slot.held.compare(slot.held.size() - n, n, stop, 0, n) == 0) {
        keep_from = std::min(keep_from, slot.held.size() - n);
        break;
      }
    }
  }
  if (p.max_tokens >= 0 && slot.generated >= p.max_tokens) return finish("length");
  if (slot.n_past + 1 >= engine_.n_ctx_per_seq()) return finish("length");
  slot.req->push(slot.held.substr(0, keep_from), std::move(logprobs));
  slot.held.erase(0, keep_from);
  slot.next = token;
}

}  // namespace strata::server
