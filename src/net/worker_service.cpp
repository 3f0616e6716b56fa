#include "net/worker_service.h"

#include <spdlog/spdlog.h>

#include <pthread.h>

#include <cstring>
#include <map>
#include <set>
#include <utility>

#include "base/system.h"
#include "base/checked.h"
#include "exec/local_executor.h"
#include "net/candidates.h"
#include "exec/link_emulation.h"
#include "net/data_mesh.h"
#include "net/forward_stream.h"
#include "net/model_identity.h"
#include "net/stage_spec.h"
#include "tensor/repack.h"

namespace strata::net {
namespace {

using grpc::Status;
using grpc::StatusCode;

Status error_status(StatusCode code, const std::string& message) { return {code, message}; }
Status invalid(const Error& e) { return {StatusCode::INVALID_ARGUMENT, e.message}; }

// How long a member waits for its links and for each exchange: the coordinator's calls time out at
// 30 s by default; the session timeout bounds it too.
int32_t session_link_timeout_ms(const WorkerOptions& o) { return std::min(30, std::max(1, o.session_timeout_s)) * 1000; }

// The token check, then the call's one request message: in that order, so that nothing from a peer
// without the token is read (see proto/strata.proto).
template <typename Request>
Status accept_one(const grpc::ServerContext& ctx, grpc::ServerReader<Request>& reader, const std::string& token,
                  Request& request) {
  if (auto s = check_token(ctx, token); !s.ok()) return s;
  if (!read_one(reader, request)) return error_status(StatusCode::INVALID_ARGUMENT, "expected one request message");
  return Status::OK;
}

}  // namespace

struct WorkerService::Session {
  std::mutex mu;  // one call at a time per session
  ParsedStage stage;
  std::string local_path;  // a local copy of the model, when the model dir has one
  std::unique_ptr<model::StageRunner> runner;
  std::map<std::string, std::shared_ptr<v1::Worker::Stub>> next_hops;  // endpoints of stage.forward_to
  std::unique_ptr<MeshListener> listener;  // tensor split: where the earlier members' links arrive
  std::unique_ptr<model::Collective> mesh;  // tensor split: the links, once joined (a DataMesh)
  std::chrono::steady_clock::time_point last_seen = std::chrono::steady_clock::now();
  // MeshSpec.steps_over_link: the thread that takes the batches from the coordinator's link. LoadStage
  // and JoinMesh hold `control` throughout (one at a time) and stop it before the mesh changes; it
  // never takes `control` itself, so joining it cannot deadlock.
  std::mutex control;
  std::thread stepper;
  std::atomic<bool> stop_steps{false};
  std::atomic<bool> steps_over_link{false};
  void stop_stepper() {
    stop_steps.store(true);
    if (stepper.joinable()) stepper.join();
    steps_over_link.store(false);
  }
  ~Session() { stop_stepper(); }
};

WorkerService::WorkerService(const WorkerOptions& options)
    : options_(options), store_(options.cache_dir, options.model_dir) {
  store_.scan_model_dir();
  reaper_ = std::thread([this] {
    while (!stop_.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      reap_idle_sessions();
    }
  });
}

WorkerService::~WorkerService() {
  stop_.store(true);
  reaper_.join();
}

// Sessions are freed outside the lock: one whose stepper is inside a batch stops only when the
// batch ends, and the other sessions' calls must not wait for that.
void WorkerService::reap_idle_sessions() {
  const auto now = std::chrono::steady_clock::now();
  std::vector<std::shared_ptr<Session>> gone;
  std::lock_guard lock(mu_);
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    if (now - it->second->last_seen > std::chrono::seconds(options_.session_timeout_s)) {
      spdlog::info("worker: session {} idle for {} s, freeing it", it->first, options_.session_timeout_s);
      gone.push_back(std::move(it->second));
      it = sessions_.erase(it);
    } else {
      ++it;
    }
  }
}

std::shared_ptr<WorkerService::Session> WorkerService::find(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return nullptr;
  it->second->last_seen = std::chrono::steady_clock::now();
  return it->second;
}

std::shared_ptr<v1::Worker::Stub> WorkerService::next_hop(Session& session, const std::string& endpoint) {
  std::lock_guard lock(session.mu);
  if (session.stage.forward_to.count(endpoint) == 0) return nullptr;
  auto& stub = session.next_hops[endpoint];
  if (!stub) {
    auto channel = make_channel(endpoint, options_.security);
    if (!channel.ok()) return nullptr;
    stub = v1::Worker::NewStub(*channel);
  }
  return stub;
}

Status WorkerService::Hello(grpc::ServerContext* ctx, grpc::ServerReader<v1::HelloRequest>* reader, v1::HelloReply* reply) {
  v1::HelloRequest message;
  if (auto s = accept_one(*ctx, *reader, options_.security.token, message); !s.ok()) return s;
  const MemoryFacts mem = read_memory_facts();
  reply->set_protocol(kProtocolVersion);
  reply->set_version("strata 0.1");
  for (const auto& f : tensor::kernel_features()) reply->add_cpu_features(f);
  reply->set_threads(options_.threads > 0 ? options_.threads : hardware_threads());
  reply->set_memory_limit(mem.limit);
  reply->set_memory_available(mem.available);
  reply->set_cgroup_limited(mem.cgroup_limited);
  for (const auto& h : store_.model_hashes()) reply->add_model_sha256(h);
  std::lock_guard lock(mu_);
  reply->set_sessions(static_cast<int32_t>(sessions_.size()));
  tensor::NodeSpeed speed = options_.speed;
  if (options_.speed_from_cache) {
    if (auto now = tensor::read_cached_node_speed(reply->threads(), options_.speed_cache_dir); now.ok()) speed = *now;
  }
  reply->mutable_speed()->set_read_bandwidth(speed.read_bandwidth);
  for (const auto& [list, into] : {std::pair{&speed.product_rates, reply->mutable_speed()->mutable_rates()},
                                   std::pair{&speed.slice_rates, reply->mutable_speed()->mutable_slice_rates()}}) {
    for (const auto& [type, rate] : *list) {
      v1::TypeRate* r = into->Add();
      r->set_type(static_cast<int32_t>(type));
      r->set_bytes_per_second(rate);
    }
  }
  for (DType t : speed.decoded) reply->mutable_speed()->add_decoded(static_cast<int32_t>(t));
  const tensor::LayerWork& w = speed.layer_work;
  reply->mutable_speed()->set_kv_element_seconds(w.kv_element);
  reply->mutable_speed()->set_kv_query_element_seconds(w.kv_query_element);
  reply->mutable_speed()->set_state_element_seconds(w.state_element);
  return Status::OK;
}

Status WorkerService::PrepareStage(grpc::ServerContext* ctx, grpc::ServerReader<v1::StageSpec>* reader, v1::PrepareReply* reply) {
  v1::StageSpec message;
  if (auto s = accept_one(*ctx, *reader, options_.security.token, message); !s.ok()) return s;
  const v1::StageSpec* spec = &message;
  auto parsed = parse_stage(*spec, options_.threads > 0 ? options_.threads : hardware_threads());
  if (!parsed.ok()) return invalid(parsed.error());
  if (options_.max_context > 0 && parsed->config.n_ctx_per_seq > options_.max_context) {
    return error_status(StatusCode::FAILED_PRECONDITION,
                        fmt::format("the stage asks for a context of {} tokens per sequence; this worker accepts at "
                                    "most {} (--max-context)", parsed->config.n_ctx_per_seq, options_.max_context));
  }
  auto session = std::make_shared<Session>();
  session->stage = std::move(*parsed);
  session->local_path = store_.model_path(spec->model_sha256());
  uint64_t missing_bytes = 0;
  if (!session->local_path.empty()) {
    reply->set_source("local file " + session->local_path);
  } else {
    for (const auto& [name, info] : session->stage.stage_tensors) {
      const model::SliceBytes& slice = session->stage.slice_of(name);
      if (store_.has_cached(spec->model_sha256(), info, slice)) continue;
      if (!slice.whole && slice.runs.empty()) {  // this member reads none of it: nothing to send
        TensorStore::Upload empty(store_);
        if (auto s = empty.write_chunk(spec->model_sha256(), info, slice, 0, {}); !s.ok()) {
          return error_status(StatusCode::INTERNAL, s.error().message);
        }
        continue;
      }
      reply->add_missing(name);
      missing_bytes = sat_add(missing_bytes, slice.bytes(info.nbytes));
      if (slice.whole) continue;
      v1::TensorSlice* out = reply->add_slices();
      out->set_name(name);
      for (const model::ByteRun& r : slice.runs) {
        v1::ByteRun* run = out->add_runs();
        run->set_offset(r.offset), run->set_length(r.length), run->set_stride(r.stride), run->set_count(r.count);
      }
    }
    reply->set_source(reply->missing_size() == 0 ? "cache" : "coordinator");
  }
  reply->set_missing_bytes(missing_bytes);
  const MemoryFacts mem = read_memory_facts();
  const model::StageBytes& b = session->stage.bytes;
  if (b.total() > mem.available) {
    return error_status(StatusCode::RESOURCE_EXHAUSTED,
                        fmt::format("stage needs {} bytes (weights {}, KV cache {}, recurrent state {}, scratch {}); {} "
                                    "available", b.total(), b.weights, b.kv, b.state, b.scratch, mem.available));
  }
  spdlog::info("worker: session {} prepared: {} tensors ({} bytes), {} missing, source: {}", spec->session(),
               session->stage.stage_tensors.size(), b.weights, reply->missing_size(), reply->source());
  std::shared_ptr<Session> replaced;  // freed after the lock, as in reap_idle_sessions
  std::lock_guard lock(mu_);
  if (!sessions_.count(spec->session()) && static_cast<int32_t>(sessions_.size()) >= options_.max_sessions) {
    return error_status(StatusCode::RESOURCE_EXHAUSTED,
                        fmt::format("this worker already serves {} coordinators (--max-sessions)", sessions_.size()));
  }
  replaced = std::exchange(sessions_[spec->session()], std::move(session));
  return Status::OK;
}

Status WorkerService::PushTensors(grpc::ServerContext* ctx, grpc::ServerReader<v1::TensorChunk>* reader,
                                  v1::PushReply* reply) {
  if (auto s = check_token(*ctx, options_.security.token); !s.ok()) return s;
  v1::TensorChunk chunk;
  TensorStore::Upload upload(store_);
  uint64_t received = 0;
  int32_t completed = 0;
  while (reader->Read(&chunk)) {
    auto session = find(chunk.session());
    if (!session) return error_status(StatusCode::NOT_FOUND, "push for unknown session '" + chunk.session() + "'");
    std::lock_guard lock(session->mu);
    auto it = session->stage.stage_tensors.find(chunk.name());
    if (it == session->stage.stage_tensors.end()) {
      return error_status(StatusCode::INVALID_ARGUMENT, "tensor '" + chunk.name() + "' is not part of this stage");
    }
    const std::string& sha = session->stage.model_sha256;
    const model::SliceBytes& slice = session->stage.slice_of(chunk.name());
    auto s = upload.write_chunk(sha, it->second, slice, chunk.offset(), chunk.data());
    if (!s.ok()) return invalid(s.error());
    received += chunk.data().size();
    if (store_.has_cached(sha, it->second, slice)) ++completed;
  }
  reply->set_bytes_received(received);
  reply->set_tensors_completed(completed);
  return Status::OK;
}

Status WorkerService::LoadStage(grpc::ServerContext* ctx, grpc::ServerReader<v1::StageSpec>* reader, v1::LoadReply* reply) {
  v1::StageSpec message;
  if (auto s = accept_one(*ctx, *reader, options_.security.token, message); !s.ok()) return s;
  const v1::StageSpec* spec = &message;
  auto session = find(spec->session());
  if (!session) return error_status(StatusCode::FAILED_PRECONDITION, "LoadStage before PrepareStage");
  std::lock_guard control(session->control);
  session->stop_stepper();
  std::lock_guard lock(session->mu);
  auto runner = load_stage_runner(session->stage, session->local_path, store_);
  if (!runner.ok()) return error_status(StatusCode::FAILED_PRECONDITION, runner.error().message);
  session->runner = std::move(*runner);
  session->mesh.reset();
  if (session->stage.config.shard.split()) {
    auto listener = MeshListener::open(options_.host);
    if (!listener.ok()) return error_status(StatusCode::UNAVAILABLE, listener.error().message);
    session->listener = std::move(*listener);
    reply->set_data_port(session->listener->port());
  }
  reply->set_weight_bytes(session->runner->weight_bytes());
  reply->set_kv_bytes(session->runner->kv_bytes());
  reply->set_source(session->local_path.empty() ? "cache" : "local file " + session->local_path);
  spdlog::info("worker: session {} loaded: {} bytes of weights from {}, {} bytes of KV cache, {} of recurrent state",
               spec->session(), session->runner->weight_bytes(), reply->source(), session->runner->kv_bytes(),
               session->runner->state_bytes());
  return Status::OK;
}

Status WorkerService::Forward(grpc::ServerContext* ctx, grpc::ServerReader<v1::ForwardRequest>* reader,
                              v1::ForwardReply* reply) {
  if (auto s = check_token(*ctx, options_.security.token); !s.ok()) return s;  // before any message is read
  v1::ForwardRequest req;
  if (!reader->Read(&req)) return error_status(StatusCode::INVALID_ARGUMENT, "empty Forward stream");
  auto session = find(req.hop().session());
  if (!session) {
    return error_status(StatusCode::NOT_FOUND, "unknown session '" + req.hop().session() + "' (worker restarted?)");
  }
  if (session->steps_over_link.load()) {
    return error_status(StatusCode::FAILED_PRECONDITION, "this session takes its batches over the data link");
  }
  size_t want = 0;  // bytes of hidden state the rows need
  {
    std::lock_guard lock(session->mu);
    if (!session->runner) return error_status(StatusCode::FAILED_PRECONDITION, "session has no loaded stage");
    const model::StageRunner& runner = *session->runner;
    if (req.pos_size() < 1 || req.pos_size() > runner.config().n_batch) {
      return error_status(StatusCode::INVALID_ARGUMENT,
                          fmt::format("{} rows out of range 1..{}", req.pos_size(), runner.config().n_batch));
    }
    want = static_cast<size_t>(req.pos_size()) * runner.model().hparams().n_embd * sizeof(float);
  }
  // The rest of the hidden state, never more than the rows need; read without the session's lock,
  // so a sender that stalls holds up only its own call.
  const size_t max_messages = want / kChunkBytes + 2;
  v1::ForwardRequest more;
  for (size_t m = 1; reader->Read(&more); ++m) {
    if (m >= max_messages || more.hidden().size() > want - std::min(want, req.hidden().size())) {
      return error_status(StatusCode::INVALID_ARGUMENT, "hidden state longer than the rows need");
    }
    req.mutable_hidden()->append(more.hidden());
  }
  std::vector<float> hidden;
  {
    std::lock_guard lock(session->mu);
    if (auto s = run_hop(*session, req, hidden, reply); !s.ok() || req.hop().output()) return s;
  }
  if (req.next_size() == 0) {
    reply->set_hidden(hidden.data(), hidden.size() * sizeof(float));
    return Status::OK;
  }
  return forward_onward(*ctx, *session, req, hidden, reply);
}

// Under the session's lock: the request's rows through the hop's layers, then the output head's
// logits into `reply` when the hop is an output hop (which must be the last).
Status WorkerService::run_hop(Session& session, const v1::ForwardRequest& req, std::vector<float>& hidden,
                              v1::ForwardReply* reply) {
  if (!session.runner) return error_status(StatusCode::FAILED_PRECONDITION, "session has no loaded stage");
  model::StageRunner& runner = *session.runner;
  auto batch = batch_from_request(req, runner);
  if (!batch.ok()) return invalid(batch.error());
  if (auto s = runner.validate(*batch, false, req.hop().again()); !s.ok()) return invalid(s.error());
  hidden.resize(req.hidden().size() / sizeof(float));
  std::memcpy(hidden.data(), req.hidden().data(), req.hidden().size());
  if (auto s = runner.run_layers(*batch, req.hop().first_layer(), req.hop().end_layer(), hidden.data()); !s.ok()) {
    // A tensor group's link failing is the group's trouble, not a bad request.
    const ErrorCode code = s.error().code;
    if (code == ErrorCode::kUnavailable || code == ErrorCode::kDeadlineExceeded) {
      return error_status(code == ErrorCode::kUnavailable ? StatusCode::UNAVAILABLE : StatusCode::DEADLINE_EXCEEDED,
                          s.error().message);
    }
    return invalid(s.error());
  }
  if (!req.hop().output()) return Status::OK;
  if (req.next_size() > 0) return error_status(StatusCode::INVALID_ARGUMENT, "the output hop must be the last");
  if (!runner.config().output) return error_status(StatusCode::INVALID_ARGUMENT, "this stage has no output head");
  return reply_logits(req, *batch, hidden.data(), runner, reply);
}

// The output head's rows (a tensor-split member: its vocabulary rows), whole or as each row's top_k
// candidates with their token ids.
Status WorkerService::reply_logits(const v1::ForwardRequest& req, const model::Batch& batch, const float* hidden,
                                   model::StageRunner& runner, v1::ForwardReply* reply) {
  const std::vector<float> logits = runner.logits(batch, hidden);
  const model::Range vocab = model::output_rows(runner.config().shard, runner.model().hparams().n_vocab);
  const int32_t width = vocab.size();
  if (req.top_k() > 0 && req.top_k() < static_cast<uint32_t>(width) / 2) {  // else whole rows are smaller
    reply->set_candidates(pack_candidates(logits.data(), static_cast<int64_t>(logits.size()) / width, width,
                                          req.top_k(), vocab.begin));
  } else {
    reply->set_logits(logits.data(), logits.size() * sizeof(float));
  }
  return Status::OK;
}

Status WorkerService::JoinMesh(grpc::ServerContext* ctx, grpc::ServerReader<v1::MeshSpec>* reader, v1::MeshReply*) {
  v1::MeshSpec message;
  if (auto s = accept_one(*ctx, *reader, options_.security.token, message); !s.ok()) return s;
  auto session = find(message.session());
  if (!session) return error_status(StatusCode::NOT_FOUND, "unknown session '" + message.session() + "'");
  std::lock_guard control(session->control);
  session->stop_stepper();
  if (auto s = join_mesh(*session, message, ctx->peer()); !s.ok()) return s;
  if (message.steps_over_link()) {
    session->stop_steps.store(false);
    session->steps_over_link.store(true);
    session->stepper = std::thread([this, raw = session.get()] {
      ::pthread_setname_np(::pthread_self(), "strata-steps");
      take_steps(*raw);
    });
  }
  return Status::OK;
}

Status WorkerService::join_mesh(Session& session, const v1::MeshSpec& message, const std::string& peer) {
  std::lock_guard lock(session.mu);
  const model::Shard& shard = session.stage.config.shard;
  if (!session.runner || !shard.split() || !session.listener) {
    return error_status(StatusCode::FAILED_PRECONDITION, "the session holds no tensor-split stage");
  }
  if (message.members_size() != shard.count) {
    return error_status(StatusCode::INVALID_ARGUMENT,
                        fmt::format("{} mesh members for a split of {}", message.members_size(), shard.count));
  }
  if (message.steps_over_link() && shard.index == 0) {
    return error_status(StatusCode::INVALID_ARGUMENT, "member 0 sends the batches over the links; it takes none");
  }
  // Links go only to the hosts of this session's plan (the endpoints it may forward to).
  std::set<std::string> hosts;
  for (const std::string& e : session.stage.forward_to) hosts.insert(e.substr(0, e.rfind(':')));
  std::vector<MeshMember> members;
  for (int32_t m = 0; m < message.members_size(); ++m) {
    const std::string& endpoint = message.members(m);
    if (m > shard.index) {
      auto parsed = plan::parse_rpc_list(endpoint);
      if (endpoint.size() > 255 || !parsed.ok() || parsed->size() != 1 || !hosts.count(endpoint.substr(0, endpoint.rfind(':')))) {
        return error_status(StatusCode::PERMISSION_DENIED,
                            "mesh member '" + endpoint.substr(0, 64) + "' is not on a host of this session's plan");
      }
    }
    const std::string where = endpoint.empty() ? "the coordinator" : endpoint.substr(0, 64);
    members.push_back({m == shard.index ? "this worker" : fmt::format("member {} ({})", m, where), endpoint});
  }
  // Links are accepted only from the earlier members' hosts: a worker's from its endpoint, the
  // coordinator's (no endpoint) as this call came from it. A peer that is not an IP (an in-process
  // channel) leaves the listener open to any address.
  std::vector<std::string> earlier;
  bool known = true;
  for (int32_t m = 0; m < shard.index; ++m) {
    std::string host = message.members(m).empty() ? grpc_peer_address(peer)
                                                  : message.members(m).substr(0, message.members(m).rfind(':'));
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    known &= !host.empty();
    earlier.push_back(std::move(host));
  }
  if (auto s = session.listener->allow_only(known ? earlier : std::vector<std::string>{}); !s.ok()) {
    return error_status(StatusCode::INVALID_ARGUMENT, s.error().message);
  }
  session.runner->set_collective(nullptr);
  session.mesh.reset();
  auto mesh = DataMesh::join(shard.index, members, session.listener.get(),
                             link_key(options_.security.token, session.stage.mesh_secret), session.stage.session,
                             session_link_timeout_ms(options_), session.stage.config.n_threads);
  if (!mesh.ok()) return error_status(StatusCode::UNAVAILABLE, mesh.error().message);
  session.mesh = exec::emulate_links(std::move(*mesh), shard.index, shard.count, exec::LinkEmulation::from_env(),
                                     session_link_timeout_ms(options_));
  session.runner->set_collective(session.mesh.get());
  spdlog::info("worker: session {} joined its tensor group as member {} of {}{}", message.session(), shard.index,
               shard.count, message.steps_over_link() ? "; its batches come over the data link" : "");
  return Status::OK;
}

// The stepper: each batch the coordinator (member 0) sends over its link runs like a Forward, and its
// answer (logits or the error) goes back the same way. Messages are bounded before they are read by
// the largest batch the stage takes.
void WorkerService::take_steps(Session& session) {
  uint64_t max_bytes = 0;
  {
    std::lock_guard lock(session.mu);
    const model::StageRunner& runner = *session.runner;
    const auto row = sat_add(sat_mul(runner.model().hparams().n_embd, sizeof(float)), 64);
    max_bytes = sat_add(sat_mul(static_cast<uint64_t>(runner.config().n_batch), row), 64 << 10);
  }
  model::Collective& mesh = *session.mesh;  // fixed while this runs: stop_stepper comes first
  std::vector<float> hidden;
  for (;;) {
    auto message = mesh.receive_message(0, max_bytes, &session.stop_steps);
    if (!message.ok()) {
      // The coordinator closing its link is how a run ends; the coordinator hears of any other failure.
      if (!session.stop_steps.load()) {
        spdlog::info("worker: session {}: no more batches over the data link: {}", session.stage.session,
                     message.error().message);
      }
      return;
    }
    v1::ForwardRequest req;
    v1::LinkStepReply answer;
    Status s;
    if (!req.ParseFromString(*message)) {
      s = error_status(StatusCode::INVALID_ARGUMENT, "a malformed batch on the data link");
    } else if (!req.hop().output()) {
      s = error_status(StatusCode::INVALID_ARGUMENT, "a batch over the data link must end at the output head");
    } else {
      std::lock_guard lock(session.mu);
      s = run_hop(session, req, hidden, answer.mutable_reply());
    }
    if (!s.ok()) {
      spdlog::warn("worker: session {}: a batch over the data link failed: {}", session.stage.session, s.error_message());
      answer.set_code(s.error_code());
      answer.set_error(s.error_message());
    }
    if (!mesh.send_message(0, answer.SerializeAsString()).ok()) return;
  }
}

// Straight to the next stage's worker (one the session's plan names); the reply comes back along
// the chain. The caller's token goes with it.
Status WorkerService::forward_onward(grpc::ServerContext& ctx, Session& session, const v1::ForwardRequest& req,
                                     const std::vector<float>& hidden, v1::ForwardReply* reply) {
  const v1::Hop& next = req.next(0);
  auto stub = next_hop(session, next.endpoint());
  if (!stub) {
    return error_status(StatusCode::PERMISSION_DENIED,
                        "next hop '" + next.endpoint().substr(0, 64) + "' is not a worker of this session's plan");
  }
  v1::ForwardRequest head;
  *head.mutable_hop() = next;
  for (int i = 1; i < req.next_size(); ++i) *head.add_next() = req.next(i);
  *head.mutable_pos() = req.pos();
  *head.mutable_seq() = req.seq();
  *head.mutable_tokens() = req.tokens();
  head.set_want_logits(req.want_logits());
  head.set_top_k(req.top_k());
  const std::string_view bytes(reinterpret_cast<const char*>(hidden.data()), hidden.size() * sizeof(float));
  const auto retry_deadline = std::min(ctx.deadline() - std::chrono::milliseconds(1000),
                                       std::chrono::system_clock::now() + std::chrono::milliseconds(2500));
  auto call = [&](bool wait_for_ready) {
    auto client = grpc::ClientContext::FromServerContext(ctx);
    const auto& md = ctx.client_metadata();
    if (auto it = md.find("authorization"); it != md.end()) {
      client->AddMetadata("authorization", std::string(it->second.data(), it->second.size()));
    }
    if (wait_for_ready) {
      // A next worker that just restarted: give the channel one reconnect, ending well before the
      // caller's deadline so that the caller still hears which worker is gone.
      client->set_wait_for_ready(true);
      client->set_deadline(retry_deadline);
    }
    return send_forward(*stub, *client, head, bytes, reply);
  };
  Status s = call(false);
  if (s.error_code() == StatusCode::UNAVAILABLE && retry_deadline > std::chrono::system_clock::now()) s = call(true);
  if (!s.ok()) return {s.error_code(), "stage on " + next.endpoint() + ": " + s.error_message()};
  return Status::OK;
}

Status WorkerService::SeqOp(grpc::ServerContext* ctx, grpc::ServerReader<v1::SeqOpRequest>* reader, v1::SeqOpReply*) {
  v1::SeqOpRequest message;
  if (auto s = accept_one(*ctx, *reader, options_.security.token, message); !s.ok()) return s;
  const v1::SeqOpRequest* req = &message;
  auto session = find(req->session());
  if (!session) return error_status(StatusCode::NOT_FOUND, "unknown session '" + req->session() + "'");
  std::lock_guard lock(session->mu);
  if (!session->runner) return error_status(StatusCode::FAILED_PRECONDITION, "session has no loaded stage");
  static const std::map<v1::SeqOpRequest::Op, exec::SeqOp> kOps = {
      {v1::SeqOpRequest::CLEAR, exec::SeqOp::kClear},
      {v1::SeqOpRequest::REMOVE_FROM, exec::SeqOp::kRemoveFrom},
      {v1::SeqOpRequest::COPY, exec::SeqOp::kCopy},
      {v1::SeqOpRequest::SAVE_CHECKPOINT, exec::SeqOp::kSaveCheckpoint},
      {v1::SeqOpRequest::RESTORE_CHECKPOINT, exec::SeqOp::kRestoreCheckpoint},
      {v1::SeqOpRequest::DROP_CHECKPOINT, exec::SeqOp::kDropCheckpoint},
      {v1::SeqOpRequest::STASH, exec::SeqOp::kStash},
      {v1::SeqOpRequest::UNSTASH, exec::SeqOp::kUnstash},
      {v1::SeqOpRequest::DROP_STASH, exec::SeqOp::kDropStash}};
  const auto op = kOps.find(req->op());
  if (op == kOps.end()) return error_status(StatusCode::INVALID_ARGUMENT, "unknown sequence operation");
  const strata::Status s = exec::apply_seq_op(*session->runner, op->second, req->seq(), req->p0(), req->dst());
  return s.ok() ? Status::OK : invalid(s.error());
}

Status WorkerService::Draft(grpc::ServerContext* ctx, grpc::ServerReader<v1::DraftRequest>* reader, v1::DraftReply* reply) {
  v1::DraftRequest req;
  if (auto s = accept_one(*ctx, *reader, options_.security.token, req); !s.ok()) return s;
  constexpr int32_t kMaxDraft = 256;
  if (req.n_max() < 1 || req.n_max() > kMaxDraft) {
    return error_status(StatusCode::INVALID_ARGUMENT, "n_max " + std::to_string(req.n_max()) + " out of range 1..256");
  }
  if (!(req.p_min() >= 0.0f && req.p_min() <= 1.0f)) return error_status(StatusCode::INVALID_ARGUMENT, "p_min out of [0, 1]");
  auto session = find(req.session());
  if (!session) return error_status(StatusCode::NOT_FOUND, "unknown session '" + req.session() + "'");
  std::lock_guard lock(session->mu);
  if (!session->runner) return error_status(StatusCode::FAILED_PRECONDITION, "session has no loaded stage");
  auto drafted = session->runner->draft_mtp(req.seq(), req.token(), req.pos(), {.n_max = req.n_max(), .p_min = req.p_min()});
  if (!drafted.ok()) return invalid(drafted.error());
  for (int32_t t : *drafted) reply->add_tokens(t);
  return Status::OK;
}

Status WorkerService::ReadStash(grpc::ServerContext* ctx, grpc::ServerReaderWriter<v1::StashChunk, v1::StashRef>* stream) {
  if (auto s = check_token(*ctx, options_.security.token); !s.ok()) return s;
  v1::StashRef ref;
  if (!stream->Read(&ref)) return error_status(StatusCode::INVALID_ARGUMENT, "expected one request message");
  auto session = find(ref.session());
  if (!session) return error_status(StatusCode::NOT_FOUND, "unknown session '" + ref.session() + "'");
  std::lock_guard lock(session->mu);
  if (!session->runner) return error_status(StatusCode::FAILED_PRECONDITION, "session has no loaded stage");
  auto bytes = session->runner->export_stash(ref.id());
  if (!bytes.ok()) return invalid(bytes.error());
  constexpr size_t kChunk = 4 << 20;
  size_t at = 0;
  do {
    v1::StashChunk chunk;
    chunk.set_id(ref.id());
    chunk.set_total(bytes->size());
    const size_t n = std::min(kChunk, bytes->size() - at);
    chunk.set_data(bytes->data() + at, n);
    at += n;
    if (!stream->Write(chunk)) return error_status(StatusCode::CANCELLED, "the coordinator stopped reading");
  } while (at < bytes->size());
  return Status::OK;
}

Status WorkerService::WriteStash(grpc::ServerContext* ctx, grpc::ServerReader<v1::StashChunk>* reader, v1::SeqOpReply*) {
  if (auto s = check_token(*ctx, options_.security.token); !s.ok()) return s;
  v1::StashChunk chunk;
  std::shared_ptr<Session> session;
  std::vector<uint8_t> bytes;
  uint64_t total = 0;
  int32_t id = -1;
  std::string session_id;
  while (reader->Read(&chunk)) {
    if (!session) {
      session_id = chunk.session();
      session = find(chunk.session());
      if (!session) return error_status(StatusCode::NOT_FOUND, "unknown session '" + chunk.session() + "'");
      std::lock_guard lock(session->mu);
      if (!session->runner) return error_status(StatusCode::FAILED_PRECONDITION, "session has no loaded stage");
      const uint64_t room = session->runner->config().cache_ram_bytes - session->runner->stashed_bytes();
      if (chunk.total() > room) {
        return error_status(StatusCode::RESOURCE_EXHAUSTED, fmt::format("a saved sequence of {} bytes: this node has "
                                                                        "{} left of its --cache-ram share", chunk.total(), room));
      }
      total = chunk.total();
      id = chunk.id();
      bytes.reserve(static_cast<size_t>(total));
    }
    if (chunk.session() != session_id || chunk.id() != id || chunk.total() != total ||
        bytes.size() + chunk.data().size() > total) {
      return error_status(StatusCode::INVALID_ARGUMENT, "stash chunks disagree on their session, id or size");
    }
    bytes.insert(bytes.end(), chunk.data().begin(), chunk.data().end());
  }
  if (!session || bytes.size() != total) return error_status(StatusCode::INVALID_ARGUMENT, "the stash ended early");
  std::lock_guard lock(session->mu);
  if (!session->runner) return error_status(StatusCode::FAILED_PRECONDITION, "session has no loaded stage");
  const strata::Status s = session->runner->import_stash(id, bytes);
  return s.ok() ? Status::OK : invalid(s.error());
}

Status WorkerService::Ping(grpc::ServerContext* ctx, grpc::ServerReader<v1::SessionRef>* reader, v1::PingReply* reply) {
  v1::SessionRef message;
  if (auto s = accept_one(*ctx, *reader, options_.security.token, message); !s.ok()) return s;
  const v1::SessionRef* req = &message;
  reply->set_known(find(req->session()) != nullptr);
  return Status::OK;
}

Status WorkerService::EndSession(grpc::ServerContext* ctx, grpc::ServerReader<v1::SessionRef>* reader, v1::PingReply* reply) {
  v1::SessionRef message;
  if (auto s = accept_one(*ctx, *reader, options_.security.token, message); !s.ok()) return s;
  const v1::SessionRef* req = &message;
  std::shared_ptr<Session> gone;  // freed after the lock, as in reap_idle_sessions
  std::lock_guard lock(mu_);
  if (auto it = sessions_.find(req->session()); it != sessions_.end()) {
    gone = std::move(it->second);
    sessions_.erase(it);
  }
  reply->set_known(gone != nullptr);
  if (reply->known()) spdlog::info("worker: session {} ended", req->session());
  return Status::OK;
}

}  // namespace strata::net
