#include "runtime/engine.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <sstream>

#include <fmt/ranges.h>

#include "base/system.h"
#include "runtime/tensor_group.h"
#include "model/layer_speed.h"
#include "tensor/decode_rates.h"

namespace strata::runtime {
namespace {

std::string random_session_id() {
  std::random_device rd;
  return fmt::format("{:08x}{:08x}{:08x}", rd(), rd(), rd());
}

void log_block(const std::string& text) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) spdlog::info("{}", line);
}

}  // namespace

plan::Request plan_request(const EngineOptions& options, const model::HParams& hp) {
  plan::Request request;
  request.split_mode = options.cluster.split_mode;
  request.n_ctx = options.n_ctx != 0 ? options.n_ctx : std::min<int32_t>(4096, hp.n_ctx_train);  // < 0: refused
  request.n_seq = options.n_seq;
  request.n_batch = options.n_batch;
  request.n_checkpoints = hp.has_recurrent_layers() ? options.n_checkpoints : 0;
  request.cache_ram_bytes = options.cache_ram_bytes;
  request.mtp = options.mtp;
  request.tensor_split = options.cluster.tensor_split;
  request.tensor_split_auto = options.cluster.tensor_split_auto;
  request.expert_split = options.cluster.expert_split;
  request.n_gpu_layers = options.cluster.n_gpu_layers;
  request.overrides = options.cluster.overrides;
  request.strict_placement = options.cluster.strict_placement;
  request.type_k = options.type_k;
  request.type_v = options.type_v;
  request.failover = options.cluster.failover;
  request.recover_timeout_ms = options.cluster.recover_timeout_ms;
  request.replan_grace_ms = std::min(5000, options.cluster.recover_timeout_ms / 2);
  request.depth = options.cluster.depth;
  return request;
}

Result<plan::Node> worker_node(exec::StageExecutor& worker, const ClusterOptions& cluster) {
  STRATA_ASSIGN(exec::NodeFacts facts, worker.hello());
  plan::Node n = plan::worker_node(worker.name(), facts.memory_available,
                                   cluster.worker_threads > 0 ? cluster.worker_threads : facts.threads, facts.memory_limit,
                                   facts.cpu_features);
  // Its speed is for its own thread count; --worker-threads with another leaves it unknown.
  if (n.threads == facts.threads) n.speed = facts.speed;
  // The link's round trip: the best of a few Pings (the first may still set the connection up).
  for (int i = 0; i < 4; ++i) {
    const auto start = std::chrono::steady_clock::now();
    STRATA_TRY(worker.ping());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    n.link_seconds = i == 0 ? s : std::min(n.link_seconds, s);
  }
  spdlog::info("worker {}: {} threads, {} MiB usable of {} MiB{}; kernels: {}; speed: {}; round trip {:.0f} us", n.endpoint,
               n.threads, n.memory_usable >> 20, n.memory_limit >> 20, facts.cgroup_limited ? " (cgroup limit)" : "",
               n.kernels_text(), n.speed.text(), n.link_seconds * 1e6);
  return n;
}

plan::Node this_machine(int32_t threads, bool with_speed) {
  plan::Node n = plan::local_node(threads);
  if (!with_speed) return n;
  auto speed = model::cached_node_speed(threads, default_cache_dir());
  if (!speed.ok()) {
    spdlog::warn("this machine's speed is unknown ({}): the plan splits by usable memory", speed.error().message);
    return n;
  }
  n.speed = *speed;
  spdlog::info("this machine: speed with {} threads ({}): {}", threads, speed->from_cache ? "cached for this host" : "measured now",
               n.speed.text());
  return n;
}

exec::Connector connector(const ClusterOptions& cluster) {
  if (cluster.transport.connect) return cluster.transport.connect;
  return [](const std::string& endpoint) -> Result<std::unique_ptr<exec::StageExecutor>> {
    return make_error("worker {}: the engine was given no transport to reach workers", endpoint);
  };
}

Result<std::unique_ptr<Engine>> Engine::load(const EngineOptions& options) {
  auto e = std::unique_ptr<Engine>(new Engine());
  e->options_ = options;
  STRATA_ASSIGN(e->model_, model::Model::open(options.model_path));
  STRATA_ASSIGN(e->vocab_, text::Vocab::load(e->model_->file()));
  const model::HParams& hp = e->model_->hparams();
  if (e->vocab_->n_tokens() != hp.n_vocab) {
    return make_error("{}: tokenizer has {} tokens but token_embd has {} rows", options.model_path,
                      e->vocab_->n_tokens(), hp.n_vocab);
  }
  e->request_ = plan_request(options, hp);
  const plan::Request& request = e->request_;
  STRATA_TRY(plan::check_request(request));  // before any worker is reached
  const int32_t n_ctx = request.n_ctx;
  if (n_ctx > hp.n_ctx_train) spdlog::warn("context {} exceeds the model's training context {}", n_ctx, hp.n_ctx_train);
  const int32_t n_threads = options.n_threads > 0 ? options.n_threads : hardware_threads();
  e->rate_keeper_ = std::make_unique<tensor::DecodeRateKeeper>(n_threads, default_cache_dir());

  // The cluster: this machine first, then the workers in --rpc order, with the facts they report.
  std::vector<plan::Node> nodes = {this_machine(n_threads, !options.cluster.workers.empty())};
  auto local = std::make_unique<exec::LocalExecutor>();
  e->local_ = local.get();
  e->nodes_.push_back(std::move(local));
  const exec::Connector connect = connector(options.cluster);
  for (const std::string& endpoint : options.cluster.workers) {
    STRATA_ASSIGN(std::unique_ptr<exec::StageExecutor> worker, connect(endpoint));
    STRATA_ASSIGN(plan::Node n, worker_node(*worker, options.cluster));
    nodes.push_back(std::move(n));
    e->nodes_.push_back(std::move(worker));
  }

  STRATA_TRY(e->place(nodes));
  if (e->nodes_.size() > 1) e->heartbeat_ = std::thread([raw = e.get()] { raw->heartbeat(); });
  spdlog::info("loaded {} ({}, {} layers, {} params, {} active per token) on {} node(s), context {} x {} seq, {} threads",
               hp.name, hp.arch, hp.n_layer, e->model_->n_params(), e->model_->n_active_params(), nodes.size(),
               e->n_ctx_per_seq(), e->n_seq(), n_threads);
  return e;
}

// Plans the model over `nodes` (nodes_[i] runs nodes[i]) and loads every node's stage: at startup,
// and again over the survivors when --failover replan drops a worker.
Status Engine::place(const std::vector<plan::Node>& nodes) {
  STRATA_ASSIGN(plan::Plan p, plan::make_plan(*model_, nodes, request_));
  if (nodes.size() > 1 || !request_.lost_nodes.empty()) {
    log_block(plan::render(p));  // the table, transfers, decisions and warnings
  } else {
    for (const std::string& d : p.decision_texts()) spdlog::info("plan: {}", d);
  }
  {
    std::lock_guard lock(health_mu_);
    plan_ = std::move(p);
  }
  session_ = random_session_id();
  const bool tensor = plan_.split_mode == plan::SplitMode::kTensor;
  if (tensor && (!options_.cluster.transport.join_links || !options_.cluster.transport.new_secret)) {
    return make_error("-sm tensor: the engine was given no transport for the group's data links");
  }
  mesh_secret_ = tensor ? options_.cluster.transport.new_secret() : "";
  stage_loads_.clear();
  for (int32_t n = 0; n < static_cast<int32_t>(nodes_.size()); ++n) {
    stage_loads_.push_back(exec::stage_load(plan_, n, model_, options_.model_path, session_));
    stage_loads_.back().mesh_secret = mesh_secret_;
  }
  for (int32_t n = 0; n < static_cast<int32_t>(nodes_.size()); ++n) STRATA_TRY(load_node(n));
  group_.reset();
  hops_.clear();
  if (tensor) {
    group_ = std::make_unique<TensorGroup>(plan_, nodes_, *local_);
    STRATA_TRY(join_group());
  } else {
    build_hops();
  }
  if (shape_.n_seq == 0) {  // the same for every plan of these options
    const auto& c = runner().config();
    shape_ = {c.n_ctx_per_seq, c.n_seq, c.n_batch, c.n_threads, c.n_checkpoints};
  }
  std::lock_guard lock(health_mu_);
  health_.clear();
  for (size_t n = 1; n < nodes_.size(); ++n) health_.push_back({nodes_[n]->name(), true, true, 0});
  return {};
}

Result<std::vector<int32_t>> Engine::draft_mtp(int32_t seq, int32_t token, int32_t pos, const model::MtpDraftOptions& options) {
  std::lock_guard lock(mu_);
  if (broken_) return make_error(ErrorCode::kUnavailable, "a worker failed: no draft until the cluster recovers");
  return nodes_.at(static_cast<size_t>(plan_.output_node))->draft(seq, token, pos, options);
}

plan::Plan Engine::plan_snapshot() const {
  std::lock_guard lock(health_mu_);
  return plan_;
}

// Execution order: the plan's stages, then the output head where the plan put it. A node's second
// hop in one batch is marked, so that it checks positions against what it already recorded.
void Engine::build_hops() {
  std::vector<uint8_t> ran(nodes_.size(), 0);
  auto add_hop = [&](int32_t node, int32_t first, int32_t end, bool output) {
    hops_.push_back({nodes_[node].get(), first, end, output, ran[node] != 0});
    ran[node] = 1;
  };
  for (const plan::Stage& st : plan_.stages) add_hop(st.node, st.first_layer, st.end_layer, false);
  if (!hops_.empty() && hops_.back().node == nodes_[plan_.output_node].get()) {
    hops_.back().output = true;
  } else {
    add_hop(plan_.output_node, hparams().n_layer, hparams().n_layer, true);
  }
}

// Keeps the sessions alive on the workers and records their health for /health and /metrics. The
// pings run outside both locks, on a snapshot of the workers (a replan may change them meanwhile).
void Engine::heartbeat() {
  while (!stop_.load()) {
    for (int i = 0; i < 20 && !stop_.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::vector<exec::StageExecutor*> workers;
    {
      std::lock_guard lock(health_mu_);
      for (size_t k = 1; k < nodes_.size(); ++k) workers.push_back(nodes_[k].get());
    }
    bool all_known = true;
    std::vector<NodeHealth> seen;
    for (exec::StageExecutor* w : workers) {
      if (stop_.load()) break;
      const auto start = std::chrono::steady_clock::now();
      const auto known = w->ping();
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      all_known &= known.ok() && *known;
      seen.push_back({w->name(), known.ok() && *known, known.ok(), ms});
    }
    {
      std::lock_guard lock(health_mu_);
      bool same = seen.size() == nodes_.size() - 1;
      for (size_t k = 0; same && k < seen.size(); ++k) same = nodes_[k + 1].get() == workers[k];
      if (same) health_ = std::move(seen);
    }
    // A worker that came back without our session (restarted): reload it now rather than at the
    // next request, so that health turns green on its own. Never waits for a running decode.
    std::unique_lock lock(mu_, std::try_to_lock);
    if (lock.owns_lock() && (broken_ || !all_known)) {
      bool reachable = true;
      for (size_t k = 1; k < nodes_.size(); ++k) reachable &= nodes_[k]->ping().ok();
      if (reachable) (void)recover();
    }
  }
}

Status Engine::join_group() {
  return group_->join(options_.cluster.transport.join_links, mesh_secret_, session_, options_.cluster.timeout_ms);
}

Engine::~Engine() {
  stop_.store(true);
  if (heartbeat_.joinable()) heartbeat_.join();
  group_.reset();
  for (size_t n = 1; n < nodes_.size(); ++n) nodes_[n]->end();
}

std::vector<Engine::NodeHealth> Engine::node_health() const {
  std::lock_guard lock(health_mu_);
  return health_;
}

Status Engine::load_node(int32_t node) {
  exec::StageExecutor& x = *nodes_[node];
  const auto start = std::chrono::steady_clock::now();
  double last = -1;
  auto sent = x.load(stage_loads_[node], [&](const exec::LoadProgress& p) {
    if (p.bytes_sent == p.bytes_total || p.seconds - last >= 1.0) {
      last = p.seconds;
      spdlog::info("worker {}: sent {:.1f} / {:.1f} MiB ({:.1f} MiB/s)", x.name(), p.bytes_sent / 1048576.0,
                   p.bytes_total / 1048576.0, p.seconds > 0 ? p.bytes_sent / 1048576.0 / p.seconds : 0.0);
    }
  });
  if (!sent.ok()) return std::move(sent).error();
  if (node == 0) return {};
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  loads_.push_back({x.name(), *sent, seconds});
  spdlog::info("worker {}: stage loaded in {:.2f} s, {} weight bytes sent{}", x.name(), seconds, *sent,
               *sent == 0 ? " (the worker had them: local file or cache)" : "");
  return {};
}

Status Engine::recover() {
  for (int32_t n = 1; n < static_cast<int32_t>(nodes_.size()); ++n) {
    STRATA_ASSIGN(bool known, nodes_[n]->ping());
    if (!known) {
      spdlog::warn("worker {} lost its session (restarted?): loading its stage again", nodes_[n]->name());
      STRATA_TRY(load_node(n));
    }
  }
  if (group_) STRATA_TRY(join_group());  // a failed exchange leaves every member's links failed
  for (int32_t s = 0; s < n_seq(); ++s) {
    for (size_t n = 0; n < nodes_.size(); ++n) {
      if (keeps_sequences(n)) STRATA_TRY(nodes_[n]->seq_op(exec::SeqOp::kClear, s, 0, 0));
    }
  }
  broken_ = false;
  ++resets_;
  {
    std::lock_guard lock(health_mu_);
    for (auto& h : health_) h.reachable = h.answers = true;
  }
  spdlog::info("cluster recovered; all sequences start empty");
  return {};
}

void Engine::mark_broken() {
  if (!broken_) broken_since_ = std::chrono::steady_clock::now();
  broken_ = true;
}

bool Engine::needs_recovery() {
  std::lock_guard lock(mu_);
  return broken_;
}

Status Engine::recover_now() {
  std::lock_guard lock(mu_);
  if (!broken_) return {};
  return recover_or_fail_fast();
}

// While the heartbeat sees a worker not answering, requests fail at once instead of each waiting
// for a reconnect; once it answers again, the next request (or the heartbeat) recovers the cluster.
// With --failover replan, a worker that has not answered for the grace period is planned without.
Status Engine::recover_or_fail_fast() {
  std::vector<size_t> down;
  std::string names;
  {
    std::lock_guard lock(health_mu_);
    for (size_t k = 0; k < health_.size(); ++k) {
      if (health_[k].answers) continue;
      down.push_back(k + 1);
      names += (names.empty() ? "" : ", ") + health_[k].node;
    }
  }
  if (down.empty()) return recover();
  const auto waited = std::chrono::steady_clock::now() - broken_since_;
  if (request_.failover == Failover::kReplan && broken_ && waited >= std::chrono::milliseconds(request_.replan_grace_ms)) {
    auto s = replan_without(down);
    if (s.ok()) return s;
    return make_error(ErrorCode::kUnavailable, "worker {} is down and the nodes that answer cannot take its layers: {}",
                      names, s.error().message);
  }
  return make_error(ErrorCode::kUnavailable, "worker {} is down; the cluster recovers when it is back", names);
}

// --failover replan: the model planned over the nodes that still answer, their memory counted as if
// their current stages were gone (they are ended first). The lost workers' -ts entries are dropped.
// Nothing changes when the plan is refused (the lost workers may still come back).
Status Engine::replan_without(const std::vector<size_t>& lost) {
  plan::Request request = request_;
  auto is_lost = [&](size_t n) { return std::find(lost.begin(), lost.end(), n) != lost.end(); };
  const size_t n_nodes = nodes_.size();
  std::vector<double> ts;
  for (size_t i = 0; i < request.tensor_split.size(); ++i) {
    const size_t node = request.tensor_split.size() == n_nodes ? i : i + 1;  // -ts over workers only, or all
    if (!is_lost(node)) ts.push_back(request.tensor_split[i]);
  }
  request.tensor_split = ts;
  std::vector<plan::Node> nodes;
  for (size_t n = 0; n < n_nodes; ++n) {
    if (is_lost(n)) {
      request.lost_nodes.push_back(nodes_[n]->name());
      continue;
    }
    plan::Node node = plan_.nodes[n];
    if (n == 0) {
      node = plan::local_node(node.threads);
      node.speed = plan_.nodes[0].speed;
      node.memory_usable = sat_add(node.memory_usable, plan_.bytes[n].total() - plan_.bytes[n].weights);  // mapped weights stay in the page cache
    } else {
      STRATA_ASSIGN(node, worker_node(*nodes_[n], options_.cluster));
      node.memory_usable = sat_add(node.memory_usable, plan_.bytes[n].total());
    }
    nodes.push_back(std::move(node));
  }
  if (nodes.size() == 1) request.split_mode = plan::SplitMode::kLayer;  // no group left to slice over
  STRATA_TRY(plan::make_plan(*model_, nodes, request));  // checked before anything changes
  spdlog::warn("failover: planning again without {} (not answering for {} ms)", fmt::join(request.lost_nodes, ", "),
               request.replan_grace_ms);
  // Survivors get fresh executors (an executor keeps its first stage; the heartbeat may be pinging
  // the old ones, which are ended and retired, not freed).
  const exec::Connector connect = connector(options_.cluster);
  std::vector<std::unique_ptr<exec::StageExecutor>> fresh(n_nodes);
  for (size_t n = 1; n < n_nodes; ++n) {
    if (is_lost(n)) continue;
    STRATA_ASSIGN(fresh[n], connect(nodes_[n]->name()));
  }
  group_.reset();
  for (size_t n = 1; n < n_nodes; ++n) {
    if (!is_lost(n)) nodes_[n]->end();
  }
  {
    std::lock_guard lock(health_mu_);
    for (size_t n = n_nodes; n-- > 1;) {
      retired_.push_back(std::move(nodes_[n]));
      if (is_lost(n)) nodes_.erase(nodes_.begin() + static_cast<ptrdiff_t>(n));
      else nodes_[n] = std::move(fresh[n]);
    }
  }
  request_ = request;
  STRATA_TRY(place(nodes));
  broken_ = false;
  ++resets_;
  spdlog::info("failover: the model runs on {} node(s); all sequences start empty", nodes_.size());
  return {};
}

Result<std::vector<float>> Engine::decode(const model::Batch& batch, int32_t top_k) {
  std::lock_guard lock(mu_);
  if (broken_) STRATA_TRY(recover_or_fail_fast());
  model::StageRunner& runner = local_->runner();
  STRATA_TRY(runner.validate(batch, true));
  runner.embed(batch, hidden_);
  auto logits = group_ ? group_->run(batch, hidden_, top_k) : run_hops(batch, hidden_, top_k);
  if (!logits.ok()) {
    if (nodes_.size() > 1) mark_broken();
    return logits;
  }
  runner.record_positions(batch);
  return logits;
}

// Hops in plan order; consecutive nodes that reach each other directly (workers forwarding to
// workers) take one call for their whole run.
Result<std::vector<float>> Engine::run_hops(const model::Batch& batch, std::vector<float>& hidden, int32_t top_k) {
  for (size_t i = 0; i < hops_.size();) {
    size_t j = i + 1;
    while (j < hops_.size() && hops_[j - 1].node->can_chain_to(*hops_[j].node)) ++j;
    const std::span<const exec::Hop> run(hops_.data() + i, j - i);
    STRATA_ASSIGN(std::vector<float> logits, hops_[i].node->run(run, batch, hidden, top_k));
    if (run.back().output) return logits;
    i = j;
  }
  return make_error("the plan has no output stage");
}

// The coordinator first, then every worker; a worker failure leaves the caches disagreeing, so the
// next call recovers first.
bool Engine::keeps_sequences(size_t n) const {
  if (n == 0 || n >= plan_.node_stages.size()) return true;
  const model::StageConfig& s = plan_.node_stages[n];
  return s.output || std::find(s.owned.begin(), s.owned.end(), 1) != s.owned.end();
}

Status Engine::seq_op_everywhere(exec::SeqOp op, int32_t seq, int32_t p0, int32_t dst) {
  std::lock_guard lock(mu_);
  if (broken_) STRATA_TRY(recover_or_fail_fast());
  for (size_t n = 0; n < nodes_.size(); ++n) {
    if (!keeps_sequences(n)) continue;
    if (auto s = nodes_[n]->seq_op(op, seq, p0, dst); !s.ok()) {
      if (n > 0) mark_broken();
      return s;
    }
  }
  return {};
}

Status Engine::clear_seq(int32_t seq) { return seq_op_everywhere(exec::SeqOp::kClear, seq, 0, 0); }
Status Engine::remove_from(int32_t seq, int32_t p0) { return seq_op_everywhere(exec::SeqOp::kRemoveFrom, seq, p0, 0); }
Status Engine::copy_seq(int32_t src, int32_t dst) { return seq_op_everywhere(exec::SeqOp::kCopy, src, 0, dst); }
Status Engine::save_checkpoint(int32_t seq, int32_t pos) {
  return seq_op_everywhere(exec::SeqOp::kSaveCheckpoint, seq, pos, 0);
}
Status Engine::restore_checkpoint(int32_t seq, int32_t pos) {
  return seq_op_everywhere(exec::SeqOp::kRestoreCheckpoint, seq, pos, 0);
}
Status Engine::drop_checkpoint(int32_t seq, int32_t pos) {
  return seq_op_everywhere(exec::SeqOp::kDropCheckpoint, seq, pos, 0);
}

Status Engine::stash(int32_t seq, int32_t id) {
  std::lock_guard lock(mu_);
  if (broken_) STRATA_TRY(recover_or_fail_fast());
  for (size_t n = 0; n < nodes_.size(); ++n) {
    if (!keeps_sequences(n)) continue;
    auto s = nodes_[n]->seq_op(exec::SeqOp::kStash, seq, 0, id);
    if (s.ok()) continue;
    if (s.error().code != ErrorCode::kResourceExhausted) {
      if (n > 0) mark_broken();
      return s;
    }
    for (size_t m = 0; m < n; ++m) {
      if (keeps_sequences(m) && !nodes_[m]->seq_op(exec::SeqOp::kDropStash, seq, 0, id).ok() && m > 0) mark_broken();
    }
    return s;
  }
  return {};
}

Status Engine::unstash(int32_t id, int32_t seq) { return seq_op_everywhere(exec::SeqOp::kUnstash, seq, 0, id); }
Status Engine::drop_stash(int32_t id) { return seq_op_everywhere(exec::SeqOp::kDropStash, 0, 0, id); }

uint64_t Engine::cache_ram_bytes() const {
  uint64_t least = 0;
  for (size_t n = 0; n < plan_.node_stages.size(); ++n) {
    const uint64_t cap = plan_.node_stages[n].cache_ram_bytes;
    least = n == 0 ? cap : std::min(least, cap);
  }
  return least;
}

uint64_t Engine::stash_bytes(int32_t n_tokens, int32_t n_checkpoints) const {
  uint64_t most = 0;
  for (const auto& stage : plan_.node_stages) {
    most = std::max(most, model::stash_bytes(hparams(), model_->architecture(), stage, n_tokens, n_checkpoints));
  }
  return most;
}

}  // namespace strata::runtime
