#include "server/scheduler.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <future>
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
  std::optional<runtime::Speculation> spec;  // with --spec-type, while req is
  bool prepared = false;                   // the sequence holds the reused prefix, nothing more
  // The prompt cache: what the sequence holds between requests, and its checkpoints (ascending).
  std::vector<text::Token> cached;
  std::vector<int32_t> checkpoints;
  std::vector<int32_t> due;  // positions of this request's prompt to checkpoint, ascending
  uint64_t resets = 0;       // engine.reset_count() when `cached` was filled
  uint64_t last_used = 0;
  std::chrono::steady_clock::time_point started, first_token;
  bool active() const { return req != nullptr; }
};

namespace {

double ms_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

int32_t cache_boundary(const text::Vocab& vocab, const std::vector<text::Token>& prompt, const std::string& conversation) {
  if (conversation.empty()) return -1;
  return static_cast<int32_t>(common_prefix(vocab.tokenize(conversation, true, true), prompt));
}

Scheduler::Scheduler(runtime::Engine& engine, SchedulerOptions options)
    : engine_(engine), options_(options), host_cache_(engine) {
  for (int32_t s = 0; s < engine.n_seq(); ++s) {
    slots_.push_back(std::make_unique<Slot>());
    slots_.back()->seq = s;
  }
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() { stop(); }

void Scheduler::stop() {
  {
    // Under the lock: the loop checks stop_ under it before it waits, so the notice cannot fall
    // between its check and its wait (it would sleep for ever).
    std::lock_guard lock(mu_);
    if (stop_.exchange(true)) return;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (auto& s : slots_) {
    if (s->active()) s->req->finish("", "server shutting down", ErrorCode::kUnavailable);
  }
  for (auto& r : queue_) r->finish("", "server shutting down", ErrorCode::kUnavailable);
}

Status Scheduler::check(const GenerationParams& params) const {
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
  return {};
}

Result<std::shared_ptr<Request>> Scheduler::submit(GenerationParams params, CacheHints hints) {
  STRATA_TRY(check(params));
  auto req = std::make_shared<Request>(std::move(params), hints);
  {
    std::lock_guard lock(mu_);
    if (stop_) return make_error(ErrorCode::kUnavailable, "server shutting down");
    queue_.push_back(req);
    ++stats_.requests_total;
  }
  cv_.notify_all();
  return req;
}

Result<std::vector<std::shared_ptr<Request>>> Scheduler::submit_all(std::vector<GenerationParams> params) {
  std::vector<std::shared_ptr<Request>> reqs;
  for (size_t i = 0; i < params.size(); ++i) {
    if (auto s = check(params[i]); !s.ok()) {
      Error e = std::move(s).error();
      e.message = fmt::format("request {}: {}", i, e.message);
      return e;
    }
    reqs.push_back(std::make_shared<Request>(std::move(params[i])));
  }
  {
    std::lock_guard lock(mu_);
    if (stop_) return make_error(ErrorCode::kUnavailable, "server shutting down");
    for (const auto& r : reqs) queue_.push_back(r);
    stats_.requests_total += reqs.size();
  }
  cv_.notify_all();
  return reqs;
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard lock(mu_);
  SchedulerStats s = stats_;
  s.queue_depth = static_cast<int32_t>(queue_.size());
  s.active_slots = 0;
  for (const auto& slot : slots_) s.active_slots += slot->active();
  return s;
}

std::vector<SlotInfo> Scheduler::slots() const {
  std::lock_guard lock(mu_);
  std::vector<SlotInfo> out;
  for (const auto& slot : slots_) {
    out.push_back({slot->seq, slot->active(), static_cast<int32_t>(slot->cached.size()), slot->checkpoints});
  }
  return out;
}

// The free slot whose cache shares the longest prefix with the prompt when that is a real share of
// it (slot_prompt_similarity); the least recently used otherwise, and among equals.
Scheduler::Slot* Scheduler::pick_slot(const GenerationParams& params, bool cache_prompt) {
  Slot* best = nullptr;
  size_t best_prefix = 0;
  const double enough = options_.slot_prompt_similarity * static_cast<double>(params.prompt.size());
  for (auto& slot : slots_) {
    if (slot->active()) continue;
    size_t prefix = cache_prompt ? common_prefix(slot->cached, params.prompt) : 0;
    if (static_cast<double>(prefix) < enough) prefix = 0;
    if (!best || prefix > best_prefix || (prefix == best_prefix && slot->last_used < best->last_used)) {
      best = slot.get();
      best_prefix = prefix;
    }
  }
  return best;
}

bool Scheduler::assign_queued() {
  std::lock_guard lock(mu_);
  while (!queue_.empty()) {
    std::shared_ptr<Request> req = queue_.front();
    if (req->cancelled()) {
      queue_.pop_front();
      req->finish("", "cancelled");
      ++stats_.requests_cancelled;
      continue;
    }
    Slot* slot = pick_slot(req->params(), req->hints().cache_prompt);
    if (!slot) break;
    queue_.pop_front();
    slot->req = std::move(req);
    slot->gen.emplace(slot->req->params(), slot->seq, runtime::generation_model(engine_));
    if (options_.spec.enabled()) slot->spec.emplace(options_.spec);
    slot->req->speculative_.store(options_.spec.enabled());
    slot->prepared = false;
    slot->last_used = ++uses_;
  }
  return std::any_of(slots_.begin(), slots_.end(), [](const auto& s) { return s->active(); });
}

void Scheduler::loop() {
  while (!stop_) {
    run_tasks();
    if (!assign_queued()) {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty() || !tasks_.empty(); });
      continue;
    }
    step();
  }
  run_tasks();  // each answers "shutting down" once stop_ is set
}

void Scheduler::run_tasks() {
  for (;;) {
    std::function<void()> task;
    {
      std::lock_guard lock(mu_);
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

Result<Scheduler::SlotActionResult> Scheduler::slot_action(int32_t id, SlotAction action, const std::string& path) {
  if (id < 0 || id >= n_slots()) return make_error(ErrorCode::kInvalidArgument, "no slot {} (this server has {})", id, n_slots());
  auto done = std::make_shared<std::promise<Result<SlotActionResult>>>();
  auto answer = done->get_future();
  {
    std::lock_guard lock(mu_);
    if (stop_) return make_error(ErrorCode::kUnavailable, "server shutting down");
    tasks_.push_back([this, id, action, path, done] {
      if (stop_) return done->set_value(make_error(ErrorCode::kUnavailable, "server shutting down"));
      done->set_value(do_slot_action(*slots_[static_cast<size_t>(id)], action, path));
    });
  }
  cv_.notify_all();
  return answer.get();
}

Result<Scheduler::SlotActionResult> Scheduler::do_slot_action(Slot& slot, SlotAction action, const std::string& path) {
  if (slot.active()) return make_error(ErrorCode::kUnavailable, "slot {} is processing a request", slot.seq);
  const auto start = std::chrono::steady_clock::now();
  SlotActionResult r;
  if (slot.resets != engine_.reset_count()) {  // a recovery emptied every node's caches
    std::lock_guard lock(mu_);
    slot.cached.clear();
    slot.checkpoints.clear();
  }
  if (action == SlotAction::kSave) {
    if (slot.cached.empty()) return make_error(ErrorCode::kInvalidArgument, "slot {} holds nothing to save", slot.seq);
    STRATA_ASSIGN(r.bytes, engine_.save_slot(slot.seq, {slot.cached, slot.checkpoints}, path));
    r.n_tokens = static_cast<int32_t>(slot.cached.size());
  } else if (action == SlotAction::kRestore) {
    auto restored = engine_.restore_slot(slot.seq, path);
    std::lock_guard lock(mu_);
    if (!restored.ok()) {
      // The sequence may hold part of the file now: the slot forgets what it held.
      slot.cached.clear();
      slot.checkpoints.clear();
      return std::move(restored).error();
    }
    r.n_tokens = static_cast<int32_t>(restored->tokens.size());
    r.bytes = std::filesystem::file_size(path);
    slot.cached = std::move(restored->tokens);
    slot.checkpoints = std::move(restored->checkpoints);
    slot.resets = engine_.reset_count();
  } else {
    r.n_tokens = static_cast<int32_t>(slot.cached.size());
    STRATA_TRY(engine_.clear_seq(slot.seq));
    std::lock_guard lock(mu_);
    slot.cached.clear();
    slot.checkpoints.clear();
  }
  r.ms = ms_between(start, std::chrono::steady_clock::now());
  spdlog::info("slot {}: {} {} tokens ({} bytes) in {:.0f} ms", slot.seq,
               action == SlotAction::kSave ? "saved" : action == SlotAction::kRestore ? "restored" : "erased", r.n_tokens,
               r.bytes, r.ms);
  return r;
}

// stats() reads the slots under the same mutex. The sequence keeps what was decoded for the next
// request, with a checkpoint of its end when the model needs one to resume there.
void Scheduler::release(Slot& slot, bool cancelled) {
  std::vector<text::Token> cached = slot.prepared ? slot.gen->tokens_in_cache() : std::vector<text::Token>{};
  if (!cached.empty() && engine_.needs_checkpoints() && !save_checkpoint(slot, static_cast<int32_t>(cached.size())).ok()) {
    cached.clear();
  }
  std::lock_guard lock(mu_);
  slot.cached = std::move(cached);
  slot.resets = engine_.reset_count();
  slot.req.reset();
  slot.gen.reset();
  slot.spec.reset();
  if (cancelled) ++stats_.requests_cancelled;
}

// After a failed decode the caches may disagree with what the slots think they hold: forget it all
// (the next request of each slot clears its sequence and checkpoints).
void Scheduler::fail_active(const Error& error) {
  std::lock_guard lock(mu_);
  for (auto& slot : slots_) {
    slot->cached.clear();
    slot->checkpoints.clear();
    if (!slot->active()) continue;
    slot->req->finish("", error.message, error.code);
    slot->req.reset();
    slot->gen.reset();
    slot->spec.reset();
    ++stats_.requests_failed;
  }
}

// A node failed under the active requests. With --failover off, or when the failure was not a
// node's (the engine needs no recovery), they end with the error; otherwise they wait for the
// recovery, which empties every cache, and then feed the tokens they held again and go on.
void Scheduler::interrupt_active(const std::vector<Slot*>& fed, const Error& error) {
  const runtime::ClusterOptions& cluster = engine_.cluster_options();
  if (cluster.failover == runtime::Failover::kOff || !engine_.needs_recovery()) return fail_active(error);
  // The window runs from the first failure until a decode succeeds again, so a failure that comes
  // back after every recovery cannot hold the requests for ever.
  constexpr int32_t kMaxResumes = 3;
  const auto now = std::chrono::steady_clock::now();
  if (!recover_until_) {
    recover_started_ = now;
    recover_until_ = now + std::chrono::milliseconds(cluster.recover_timeout_ms);
    recover_cause_ = error.message;
    resumes_ = 0;
  } else if (resumes_ >= kMaxResumes || now >= *recover_until_) {
    Error e = error;
    e.message = fmt::format("{} (it failed again after {} recoveries)", error.message, resumes_);
    recover_until_.reset();
    return fail_active(e);
  }
  recovering_ = true;
  int32_t waiting = 0;
  for (auto& slot : slots_) {
    if (!slot->active() || !slot->prepared) continue;
    slot->gen->replay_after_failure(std::find(fed.begin(), fed.end(), slot.get()) != fed.end());
    ++waiting;
  }
  spdlog::warn("{} request(s) wait up to {} ms for the cluster to recover (--failover {}): {}", waiting,
               cluster.recover_timeout_ms, runtime::failover_name(cluster.failover), error.message);
}

// One attempt at the recovery the active requests wait for; false while they still wait. Past
// --recover-timeout they end with the error that started it and why recovery failed.
bool Scheduler::recovered() {
  const auto start = std::chrono::steady_clock::now();
  Status s = engine_.recover_now();
  if (s.ok()) {
    const double waited = ms_between(recover_started_, std::chrono::steady_clock::now());
    recovering_ = false;
    ++resumes_;
    std::lock_guard lock(mu_);
    int32_t resumed = 0;
    for (auto& slot : slots_) {
      slot->cached.clear();  // every node starts empty
      slot->checkpoints.clear();
      slot->resets = engine_.reset_count();
      resumed += slot->active() && slot->prepared;
    }
    stats_.requests_resumed += static_cast<uint64_t>(resumed);
    ++stats_.recoveries;
    spdlog::info("cluster recovered after {:.0f} ms: {} request(s) resume by computing their tokens again", waited,
                 resumed);
    return true;
  }
  if (start >= *recover_until_) {
    Error e = std::move(s).error();
    e.message = fmt::format("{} (the cluster did not recover within {} ms: {})", recover_cause_,
                            engine_.cluster_options().recover_timeout_ms, e.message);
    recover_until_.reset();
    recovering_ = false;
    fail_active(e);
    return false;
  }
  std::unique_lock lock(mu_);  // a pause between attempts that a stop ends
  cv_.wait_for(lock, std::chrono::milliseconds(250), [&] { return stop_.load(); });
  return false;
}

// Saves a checkpoint of the slot's sequence at `pos` (its length now) on every node, dropping the
// oldest first when the slot keeps as many as planned.
// The engine's checkpoints per sequence, less the one speculation takes before each check.
int32_t Scheduler::checkpoint_limit() const {
  return engine_.n_checkpoints() - runtime::Speculation::checkpoints_needed(options_.spec);
}

Status Scheduler::save_checkpoint(Slot& slot, int32_t pos) {
  const int32_t limit = checkpoint_limit();
  if (limit <= 0) return make_error(ErrorCode::kResourceExhausted, "no state checkpoints planned");
  if (std::binary_search(slot.checkpoints.begin(), slot.checkpoints.end(), pos)) return {};
  if (static_cast<int32_t>(slot.checkpoints.size()) >= limit) {
    STRATA_TRY(engine_.drop_checkpoint(slot.seq, slot.checkpoints.front()));
    std::lock_guard lock(mu_);
    slot.checkpoints.erase(slot.checkpoints.begin());
  }
  STRATA_TRY(engine_.save_checkpoint(slot.seq, pos));
  std::lock_guard lock(mu_);
  slot.checkpoints.insert(std::upper_bound(slot.checkpoints.begin(), slot.checkpoints.end(), pos), pos);
  ++stats_.checkpoints_saved;
  return {};
}

// Cuts the slot's sequence back to its first n tokens (0: empty), restoring the checkpoint at n when
// the model has recurrent layers, and forgets the checkpoints past n.
Status Scheduler::reuse_prefix(Slot& slot, int32_t n) {
  if (n == 0) {
    STRATA_TRY(engine_.clear_seq(slot.seq));  // drops the sequence's checkpoints everywhere too
    std::lock_guard lock(mu_);
    slot.checkpoints.clear();
    slot.cached.clear();
    return {};
  }
  while (!slot.checkpoints.empty() && slot.checkpoints.back() > n) {
    STRATA_TRY(engine_.drop_checkpoint(slot.seq, slot.checkpoints.back()));
    std::lock_guard lock(mu_);
    slot.checkpoints.pop_back();
  }
  if (engine_.needs_checkpoints()) {
    STRATA_TRY(engine_.restore_checkpoint(slot.seq, n));
    std::lock_guard lock(mu_);
    ++stats_.checkpoints_restored;
  } else {
    STRATA_TRY(engine_.remove_from(slot.seq, n));
  }
  std::lock_guard lock(mu_);
  slot.cached.resize(static_cast<size_t>(n));
  return {};
}

// With --cache-ram: what the slot holds past the prefix this request reuses is kept in host memory
// first (an agent's conversation that a side request is about to replace), and a kept sequence that
// gives the prompt more than the slot does is moved back into it. Returns the tokens reused.
Result<int32_t> Scheduler::use_host_cache(Slot& slot, const std::vector<text::Token>& prompt, int32_t n) {
  constexpr int32_t kWorthKeeping = 32;  // fewer lost tokens are cheaper to compute again than to copy
  int32_t from_host = 0;
  const int32_t reused = host_cache_.best(prompt, n, from_host) ? from_host : n;
  if (static_cast<int32_t>(slot.cached.size()) >= reused + kWorthKeeping) {
    host_cache_.keep(slot.seq, slot.cached, slot.checkpoints);
  }
  const auto entry = host_cache_.best(prompt, n, from_host);  // keep() may have dropped entries
  if (entry) {
    std::vector<text::Token> tokens;
    std::vector<int32_t> checkpoints;
    STRATA_TRY(host_cache_.take(*entry, slot.seq, tokens, checkpoints));
    n = from_host;
    std::lock_guard lock(mu_);
    slot.cached = std::move(tokens);
    slot.checkpoints = std::move(checkpoints);
  }
  std::lock_guard lock(mu_);
  stats_.host_cache = host_cache_.stats();
  return n;
}

// A new request's slot: reuse the longest cached prefix it can (at least the prompt's last token is
// computed again, for its logits), and plan the checkpoints of its prompt.
Status Scheduler::prepare(Slot& slot) {
  const std::vector<text::Token>& prompt = slot.gen->params().prompt;
  const int32_t n_prompt = static_cast<int32_t>(prompt.size());
  if (slot.resets != engine_.reset_count()) {
    std::lock_guard lock(mu_);
    slot.cached.clear();
    slot.checkpoints.clear();
  }
  int32_t n = 0;
  if (slot.req->hints().cache_prompt) {
    n = usable_prefix(slot.cached, slot.checkpoints, prompt, engine_.needs_checkpoints());
    if (host_cache_.enabled()) {
      STRATA_ASSIGN(n, use_host_cache(slot, prompt, n));
    }
  }
  STRATA_TRY(reuse_prefix(slot, n));
  slot.gen->resume_from(n);
  slot.req->n_cached_.store(n);
  slot.due.clear();
  if (engine_.needs_checkpoints() && checkpoint_limit() > 0) {
    const int32_t every = std::max(1, options_.checkpoint_interval);
    for (int32_t p = (n / every + 1) * every; p < n_prompt - 1; p += every) slot.due.push_back(p);
    if (slot.req->hints().boundary > n && slot.req->hints().boundary < n_prompt) slot.due.push_back(slot.req->hints().boundary);
    if (n_prompt - 1 > n) slot.due.push_back(n_prompt - 1);
    std::sort(slot.due.begin(), slot.due.end());
    slot.due.erase(std::unique(slot.due.begin(), slot.due.end()), slot.due.end());
    slot.gen->set_prompt_breaks(slot.due);
  }
  slot.prepared = true;
  slot.started = std::chrono::steady_clock::now();
  std::lock_guard lock(mu_);
  stats_.prompt_tokens_cached += static_cast<uint64_t>(n);
  if (n > 0) spdlog::info("slot {}: reusing {} of {} prompt tokens from its cache", slot.seq, n, n_prompt);
  return {};
}

// After a decode: checkpoints of the prompt positions just reached.
void Scheduler::save_due_checkpoints(const std::vector<Slot*>& slots) {
  for (Slot* slot : slots) {
    if (!slot->active() || slot->due.empty() || slot->gen->n_past() != slot->due.front()) continue;
    if (auto s = save_checkpoint(*slot, slot->due.front()); !s.ok()) {
      spdlog::warn("slot {}: no checkpoint at {}: {}", slot->seq, slot->due.front(), s.error().message);
    }
    slot->due.erase(slot->due.begin());
  }
}

// Ends the slots whose client left, and prepares the sequence of those new (unless told not to).
bool Scheduler::drop_cancelled_and_prepare_new(bool prepare_new) {
  for (auto& slot : slots_) {
    if (!slot->active()) continue;
    if (slot->req->cancelled()) {
      spdlog::info("request cancelled by its client after {} generated tokens", slot->gen->n_generated());
      std::shared_ptr<Request> req = slot->req;
      release(*slot, /*cancelled=*/true);
      req->finish("", "cancelled");
      continue;
    }
    if (!slot->prepared && prepare_new) {
      if (auto s = prepare(*slot); !s.ok()) {
        interrupt_active({}, s.error());
        return false;
      }
    }
  }
  return true;
}

// Tokens being generated go first, one row each; prompt chunks fill the rest of the batch, so one
// engine call reads the weights once for every active slot. rows gets the slot of each row that
// wants logits, in batch order.
Scheduler::Filled Scheduler::fill_batch(model::Batch& batch, std::vector<Row>& rows) {
  Filled filled;
  std::vector<Slot*> prompting;
  for (auto& slot : slots_) {
    if (!slot->active()) continue;
    if (!slot->gen->generating()) {
      prompting.push_back(slot.get());
      continue;
    }
    ++filled.slots;
    filled.fed.push_back(slot.get());
    const int64_t before = batch.size();
    if (feed_draft(*slot, batch)) {
      rows.push_back({slot.get(), static_cast<int32_t>(batch.size() - before)});
    } else if (slot->gen->feed(batch, engine_.n_batch()).wants_logits) {
      rows.push_back({slot.get()});
    }
  }
  for (Slot* slot : prompting) {
    const runtime::Feed fed = slot->gen->feed(batch, engine_.n_batch());
    filled.prompt_tokens += fed.prompt_rows;
    filled.slots += fed.prompt_rows > 0;
    if (fed.prompt_rows > 0 || fed.wants_logits) filled.fed.push_back(slot);
    if (fed.wants_logits) rows.push_back({slot});
  }
  return filled;
}

// With speculation: the slot's waiting token and a draft for it, as much as the batch has room for
// (other generating slots keep a row each). False when nothing was drafted: feed the token alone.
bool Scheduler::feed_draft(Slot& slot, model::Batch& batch) {
  if (!slot.spec) return false;
  auto draft = slot.spec->draft(engine_, *slot.gen);
  if (!draft.ok()) {
    spdlog::warn("slot {}: no draft: {}", slot.seq, draft.error().message);
    return false;
  }
  const int64_t room = engine_.n_batch() - batch.size() - n_slots();
  if (room < 1 || draft->empty()) return false;
  if (static_cast<int64_t>(draft->size()) > room) draft->resize(static_cast<size_t>(room));
  if (auto s = slot.spec->feed(engine_, *slot.gen, *draft, batch); !s.ok()) {
    spdlog::warn("slot {}: draft not checked: {}", slot.seq, s.error().message);
    return false;
  }
  slot.req->draft_n_.fetch_add(static_cast<int32_t>(draft->size()));
  return true;
}

// The check's rows: the tokens the model samples there, as far as they agree with the draft; the
// sequence is cut back to them.
Status Scheduler::check_draft(Slot& slot, std::span<const float> logits) {
  const int64_t drafted = static_cast<int64_t>(logits.size() / static_cast<size_t>(engine_.n_vocab())) - 1;
  STRATA_ASSIGN(runtime::Generation::DraftResult checked, slot.spec->accept(engine_, *slot.gen, logits));
  slot.req->draft_n_accepted_.fetch_add(checked.accepted);
  {
    std::lock_guard lock(mu_);
    stats_.spec.add_check(drafted, checked.accepted);
  }
  for (runtime::GenerationStep& step : checked.steps) {
    const bool done = step.done;
    emit(slot, std::move(step));
    if (done) break;
  }
  return {};
}

void Scheduler::step() {
  if (recovering_) {
    drop_cancelled_and_prepare_new(/*prepare=*/false);
    if (!recovered()) return;
  }
  if (!drop_cancelled_and_prepare_new(/*prepare=*/true)) return;
  model::Batch batch;
  std::vector<Row> rows;
  const Filled filled = fill_batch(batch, rows);
  if (batch.size() == 0) return;
  spdlog::debug("decode: {} rows ({} of prompts) for {} slots", batch.size(), filled.prompt_tokens, filled.slots);

  // A remote output stage sends only the candidates every row's sampler can keep (0: whole rows).
  int32_t top_k = 1;
  for (const Row& row : rows) {
    const int32_t need = row.slot->gen->candidates_needed();
    top_k = need == 0 || top_k == 0 ? 0 : std::max(top_k, need);
  }
  const auto start = std::chrono::steady_clock::now();
  auto logits = engine_.decode(batch, rows.empty() ? 0 : top_k);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!logits.ok()) {
    spdlog::error("decode failed: {}", logits.error().message);
    interrupt_active(filled.fed, logits.error());
    return;
  }
  recover_until_.reset();  // the cluster works again: a later failure gets a whole window
  {
    std::lock_guard lock(mu_);
    stats_.decode_seconds += seconds;
    stats_.prompt_tokens += filled.prompt_tokens;
    ++stats_.decode_calls;
    stats_.decode_slots += filled.slots;
  }
  std::vector<Slot*> all;
  for (auto& slot : slots_) all.push_back(slot.get());
  save_due_checkpoints(all);
  const size_t V = static_cast<size_t>(engine_.n_vocab());
  size_t at = 0;
  for (const Row& row : rows) {
    const std::span<const float> part(logits->data() + at * V, static_cast<size_t>(row.n) * V);
    at += static_cast<size_t>(row.n);
    if (row.n == 1) {
      emit(*row.slot, part);
    } else if (auto s = check_draft(*row.slot, part); !s.ok()) {
      spdlog::error("slot {}: cutting the sequence back after a draft failed: {}", row.slot->seq, s.error().message);
      return interrupt_active(filled.fed, s.error());
    }
  }
}

void Scheduler::emit(Slot& slot, std::span<const float> logits) { emit(slot, slot.gen->next_token(logits)); }

void Scheduler::emit(Slot& slot, runtime::GenerationStep step) {
  const auto now = std::chrono::steady_clock::now();
  if (slot.gen->n_generated() == 1) {
    slot.first_token = now;
    slot.req->prompt_ms_.store(ms_between(slot.started, now));
  }
  slot.req->predicted_ms_.store(ms_between(slot.first_token, now));
  slot.req->n_generated_.store(slot.gen->n_generated());
  {
    std::lock_guard lock(mu_);
    ++stats_.generated_tokens;
  }
  slot.req->push(std::move(step.text), std::move(step.logprobs));
  if (!step.done) return;
  // The slot's cache is recorded before the client hears of the end, so a next request (or GET
  // /slots) sees it.
  std::shared_ptr<Request> req = slot.req;
  release(slot);
  req->finish(step.finish_reason);
}

}  // namespace strata::server
