#include "runtime/engine.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <sstream>

#include "base/system.h"
#include "net/candidates.h"
#include "net/model_identity.h"
#include "net/stage_spec.h"

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
  request.n_ctx = options.n_ctx > 0 ? options.n_ctx : std::min<int32_t>(4096, hp.n_ctx_train);
  request.n_seq = options.n_seq;
  request.n_batch = options.n_batch;
  request.tensor_split = options.cluster.tensor_split;
  request.n_gpu_layers = options.cluster.n_gpu_layers;
  request.overrides = options.cluster.overrides;
  request.strict_placement = options.cluster.strict_placement;
  return request;
}

Result<plan::Node> worker_node(net::RemoteNode& link, const ClusterOptions& cluster) {
  STRATA_ASSIGN(net::NodeFacts facts, link.hello());
  plan::Node n = plan::worker_node(link.endpoint(), facts.memory_available,
                                   cluster.worker_threads > 0 ? cluster.worker_threads : facts.threads);
  spdlog::info("worker {}: {} threads, {} MiB usable{}", n.endpoint, n.threads, n.memory_limit >> 20,
               facts.cgroup_limited ? " (cgroup limit)" : "");
  return n;
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
  if (options.n_seq < 1 || options.n_seq > 256) return make_error("number of sequences {} out of range 1..256", options.n_seq);
  if (options.n_batch < 1 || options.n_batch > (1 << 16)) return make_error("batch size {} out of range", options.n_batch);
  if (options.n_ctx < 0) return make_error("context size {} is negative", options.n_ctx);
  e->request_ = plan_request(options, hp);
  const plan::Request& request = e->request_;
  const int32_t n_ctx = request.n_ctx;
  if (n_ctx < options.n_seq) return make_error("context {} is smaller than the number of sequences {}", n_ctx, options.n_seq);
  if (n_ctx > hp.n_ctx_train) spdlog::warn("context {} exceeds the model's training context {}", n_ctx, hp.n_ctx_train);
  const int32_t n_threads = options.n_threads > 0 ? options.n_threads : hardware_threads();

  // The cluster: this machine first, then the workers in --rpc order, with the facts they report.
  std::vector<plan::Node> nodes = {plan::local_node(n_threads)};
  for (const std::string& endpoint : options.cluster.workers) {
    Remote r;
    r.node = static_cast<int32_t>(nodes.size());
    STRATA_ASSIGN(r.link, net::RemoteNode::connect(endpoint, options.cluster.security, options.cluster.timeout_ms));
    STRATA_ASSIGN(plan::Node n, worker_node(*r.link, options.cluster));
    nodes.push_back(std::move(n));
    e->remotes_.push_back(std::move(r));
  }

  STRATA_ASSIGN(e->plan_, plan::make_plan(*e->model_, nodes, request));
  if (nodes.size() > 1) {
    log_block(plan::render(e->plan_));  // the table, transfers, decisions and warnings
  } else {
    for (const std::string& d : e->plan_.decisions) spdlog::info("plan: {}", d);
  }

  model::StageConfig local;
  local.owned = e->plan_.owned_by(0);
  local.input = e->plan_.input_node == 0;
  local.output = e->plan_.output_node == 0;
  local.n_seq = options.n_seq;
  local.n_ctx_per_seq = n_ctx / options.n_seq;
  local.n_batch = options.n_batch;
  local.n_threads = n_threads;
  STRATA_ASSIGN(e->local_, model::StageRunner::create(e->model_, local));

  // Execution order: the plan's stages, then the output head where the plan put it.
  for (const plan::Stage& s : e->plan_.stages) e->hops_.push_back({s.node, s.first_layer, s.end_layer, false});
  if (!e->hops_.empty() && e->hops_.back().node == e->plan_.output_node) {
    e->hops_.back().output = true;
  } else {
    e->hops_.push_back({e->plan_.output_node, hp.n_layer, hp.n_layer, true});
  }

  if (!e->remotes_.empty()) {
    STRATA_ASSIGN(std::string sha, net::file_sha256(options.model_path, net::default_cache_dir()));
    STRATA_ASSIGN(std::vector<uint8_t> metadata, net::metadata_image(e->model_->file()));
    const std::string session = random_session_id();
    for (Remote& r : e->remotes_) {
      r.spec = net::make_stage_spec(*e->model_, e->plan_, r.node, session, sha, metadata, request,
                                    e->plan_.nodes[r.node].threads);
      STRATA_TRY(e->load_remote(r));
    }
    for (const Remote& r : e->remotes_) e->health_.push_back({r.link->endpoint(), true, true, 0});
    // Keeps the sessions alive on the workers and records their health for /health and /metrics.
    e->heartbeat_ = std::thread([raw = e.get()] {
      while (!raw->stop_.load()) {
        for (int i = 0; i < 20 && !raw->stop_.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        bool all_known = true;
        for (size_t k = 0; k < raw->remotes_.size() && !raw->stop_.load(); ++k) {
          const auto start = std::chrono::steady_clock::now();
          const auto known = raw->remotes_[k].link->ping(raw->remotes_[k].spec.session());
          const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
          all_known &= known.ok() && *known;
          std::lock_guard lock(raw->health_mu_);
          raw->health_[k].reachable = known.ok() && *known;
          raw->health_[k].answers = known.ok();
          raw->health_[k].ping_ms = ms;
        }
        // A worker that came back without our session (restarted): reload it now rather than at the
        // next request, so that health turns green on its own. Never waits for a running decode.
        const bool lost = !all_known;
        std::unique_lock lock(raw->mu_, std::try_to_lock);
        if (lock.owns_lock() && (raw->broken_ || lost)) {
          bool reachable = true;
          for (const Remote& r : raw->remotes_) reachable &= r.link->ping(r.spec.session()).ok();
          if (reachable) (void)raw->recover();
        }
      }
    });
  }
  spdlog::info("loaded {} ({}, {} layers, {} params, {} active per token) on {} node(s), context {} x {} seq, {} threads",
               hp.name, hp.arch, hp.n_layer, e->model_->n_params(), e->model_->n_active_params(), nodes.size(),
               local.n_ctx_per_seq, local.n_seq, n_threads);
  return e;
}

Engine::~Engine() {
  stop_.store(true);
  if (heartbeat_.joinable()) heartbeat_.join();
  for (Remote& r : remotes_) r.link->end_session(r.spec.session());
}

std::vector<Engine::NodeHealth> Engine::node_health() const {
  std::lock_guard lock(health_mu_);
  return health_;
}

Status Engine::load_remote(Remote& r) {
  const auto start = std::chrono::steady_clock::now();
  auto sent = r.link->load(r.spec, model_->file(), [&](const net::LoadProgress& p) {
    static thread_local double last = -1;
    if (p.bytes_sent == p.bytes_total || p.seconds - last >= 1.0) {
      last = p.seconds;
      spdlog::info("worker {}: sent {:.1f} / {:.1f} MiB ({:.1f} MiB/s)", r.link->endpoint(), p.bytes_sent / 1048576.0,
                   p.bytes_total / 1048576.0, p.seconds > 0 ? p.bytes_sent / 1048576.0 / p.seconds : 0.0);
    }
  });
  if (!sent.ok()) return std::move(sent).error();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  loads_.push_back({r.link->endpoint(), *sent, seconds});
  spdlog::info("worker {}: stage loaded in {:.2f} s, {} weight bytes sent{}", r.link->endpoint(), seconds, *sent,
               *sent == 0 ? " (the worker had them: local file or cache)" : "");
  return {};
}

Engine::Remote* Engine::remote_for(int32_t node) {
  for (Remote& r : remotes_) {
    if (r.node == node) return &r;
  }
  return nullptr;
}

Status Engine::recover() {
  for (Remote& r : remotes_) {
    STRATA_ASSIGN(bool known, r.link->ping(r.spec.session()));
    if (!known) {
      spdlog::warn("worker {} lost its session (restarted?): loading its stage again", r.link->endpoint());
      STRATA_TRY(load_remote(r));
    }
  }
  for (int32_t s = 0; s < n_seq(); ++s) {
    STRATA_TRY(local_->clear_seq(s));
    STRATA_TRY(for_each_remote_seq_op(v1::SeqOpRequest::CLEAR, s, 0, 0));
  }
  broken_ = false;
  {
    std::lock_guard lock(health_mu_);
    for (auto& h : health_) h.reachable = h.answers = true;
  }
  spdlog::info("cluster recovered; all sequences start empty");
  return {};
}

// While the heartbeat sees a worker not answering, requests fail at once instead of each waiting
// for a reconnect; once it answers again, the next request (or the heartbeat) recovers the cluster.
Status Engine::recover_or_fail_fast() {
  {
    std::lock_guard lock(health_mu_);
    for (const NodeHealth& h : health_) {
      if (!h.answers) {
        return make_error(ErrorCode::kUnavailable, "worker {} is down; the cluster recovers when it is back", h.node);
      }
    }
  }
  return recover();
}

Result<std::vector<float>> Engine::decode(const model::Batch& batch, int32_t top_k) {
  std::lock_guard lock(mu_);
  if (broken_) STRATA_TRY(recover_or_fail_fast());
  STRATA_TRY(local_->validate(batch, true));
  local_->embed(batch, hidden_);
  auto logits = run_hops(batch, hidden_, top_k);
  if (!logits.ok()) {
    if (!remotes_.empty()) broken_ = true;
    return logits;
  }
  local_->record_positions(batch);
  return logits;
}

Result<std::vector<float>> Engine::run_hops(const model::Batch& batch, std::vector<float>& hidden, int32_t top_k) {
  const size_t row_bytes = static_cast<size_t>(hparams().n_embd) * sizeof(float);
  std::vector<uint8_t> ran(plan_.nodes.size(), 0);  // nodes that already ran a hop of this batch
  for (size_t i = 0; i < hops_.size();) {
    const Hop& h = hops_[i];
    if (h.node == 0) {
      STRATA_TRY(local_->run_layers(batch, h.first, h.end, hidden.data()));
      if (h.output) return local_->logits(batch, hidden.data());
      ++i;
      continue;
    }
    // A run of remote hops: the first worker forwards to the next directly.
    size_t j = i;
    v1::ForwardRequest req;
    while (j < hops_.size() && hops_[j].node != 0) {
      v1::Hop* hop = j == i ? req.mutable_hop() : req.add_next();
      hop->set_endpoint(plan_.nodes[hops_[j].node].endpoint);
      hop->set_session(remote_for(hops_[j].node)->spec.session());
      hop->set_first_layer(hops_[j].first);
      hop->set_end_layer(hops_[j].end);
      hop->set_output(hops_[j].output);
      hop->set_again(ran[hops_[j].node] != 0);
      ran[hops_[j].node] = 1;
      ++j;
    }
    for (int64_t t = 0; t < batch.size(); ++t) {
      req.add_pos(batch.pos[t]);
      req.add_seq(batch.seq[t]);
    }
    req.set_want_logits(std::string(batch.logits.begin(), batch.logits.end()));
    if (top_k > 0) req.set_top_k(static_cast<uint32_t>(top_k));
    const std::string_view bytes(reinterpret_cast<const char*>(hidden.data()), hidden.size() * sizeof(float));
    STRATA_ASSIGN(v1::ForwardReply reply, remote_for(h.node)->link->forward(req, bytes));
    if (hops_[j - 1].output) {
      const int64_t n_out = std::count(batch.logits.begin(), batch.logits.end(), 1);
      // A worker that does not know top_k (an older build) sends whole rows: take those.
      if (top_k > 0 && reply.logits().empty()) {
        auto rows = net::unpack_candidates(reply.candidates(), n_out, n_vocab(), static_cast<uint32_t>(top_k));
        if (!rows.ok()) return make_error("worker {}: {}", plan_.nodes[hops_[j - 1].node].name, rows.error().message);
        return rows;
      }
      if (reply.logits().size() != static_cast<size_t>(n_out) * n_vocab() * sizeof(float)) {
        return make_error("worker {}: logits of {} bytes, expected {} rows", plan_.nodes[hops_[j - 1].node].name,
                          reply.logits().size(), n_out);
      }
      std::vector<float> logits(reply.logits().size() / sizeof(float));
      std::memcpy(logits.data(), reply.logits().data(), reply.logits().size());
      return logits;
    }
    if (reply.hidden().size() != batch.size() * row_bytes) {
      return make_error("worker {}: hidden state of {} bytes, expected {}", plan_.nodes[hops_[j - 1].node].name,
                        reply.hidden().size(), batch.size() * row_bytes);
    }
    std::memcpy(hidden.data(), reply.hidden().data(), reply.hidden().size());
    i = j;
  }
  return make_error("the plan has no output stage");
}

Status Engine::for_each_remote_seq_op(v1::SeqOpRequest::Op op, int32_t seq, int32_t p0, int32_t dst) {
  for (Remote& r : remotes_) {
    if (auto s = r.link->seq_op(r.spec.session(), op, seq, p0, dst); !s.ok()) {
      broken_ = true;  // the caches may disagree now: the next call recovers first
      return s;
    }
  }
  return {};
}

Status Engine::clear_seq(int32_t seq) {
  std::lock_guard lock(mu_);
  if (broken_) STRATA_TRY(recover_or_fail_fast());
  STRATA_TRY(local_->clear_seq(seq));
  return for_each_remote_seq_op(v1::SeqOpRequest::CLEAR, seq, 0, 0);
}

Status Engine::remove_from(int32_t seq, int32_t p0) {
  std::lock_guard lock(mu_);
  if (broken_) STRATA_TRY(recover_or_fail_fast());
  STRATA_TRY(local_->remove_from(seq, p0));
  return for_each_remote_seq_op(v1::SeqOpRequest::REMOVE_FROM, seq, p0, 0);
}

Status Engine::copy_seq(int32_t src, int32_t dst) {
  std::lock_guard lock(mu_);
  if (broken_) STRATA_TRY(recover_or_fail_fast());
  STRATA_TRY(local_->copy_seq(src, dst));
  return for_each_remote_seq_op(v1::SeqOpRequest::COPY, src, 0, dst);
}

}  // namespace strata::runtime
