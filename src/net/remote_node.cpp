#include "net/remote_node.h"

#include <chrono>

#include "net/forward_stream.h"
#include "net/stage_spec.h"

namespace strata::net {
namespace {

// Loading streams whole tensors: allow an hour for it, far beyond a LAN's needs.
constexpr int32_t kLoadTimeoutMs = 3600 * 1000;

}  // namespace

Result<std::unique_ptr<RemoteNode>> RemoteNode::connect(const std::string& endpoint, const LinkSecurity& security,
                                                        int32_t timeout_ms) {
  auto n = std::unique_ptr<RemoteNode>(new RemoteNode());
  n->endpoint_ = endpoint;
  n->security_ = security;
  n->timeout_ms_ = timeout_ms;
  STRATA_ASSIGN(n->channel_, make_channel(endpoint, security));
  n->stub_ = v1::Worker::NewStub(n->channel_);
  return n;
}

void RemoteNode::prepare(grpc::ClientContext& ctx, int32_t timeout_ms) const {
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
  authorize(ctx, security_.token);
}

Error RemoteNode::failure(const char* call, const grpc::Status& s) const {
  struct Kind {
    const char* why;
    ErrorCode code;
  };
  const Kind kind = [&]() -> Kind {
    switch (s.error_code()) {
      case grpc::StatusCode::UNAVAILABLE: return {"unreachable", ErrorCode::kUnavailable};
      case grpc::StatusCode::DEADLINE_EXCEEDED: return {"deadline exceeded", ErrorCode::kDeadlineExceeded};
      case grpc::StatusCode::UNAUTHENTICATED: return {"authentication failed", ErrorCode::kPermissionDenied};
      case grpc::StatusCode::PERMISSION_DENIED: return {"error", ErrorCode::kPermissionDenied};
      case grpc::StatusCode::RESOURCE_EXHAUSTED: return {"error", ErrorCode::kResourceExhausted};
      case grpc::StatusCode::INVALID_ARGUMENT: return {"error", ErrorCode::kInvalidArgument};
      default: return {"error", ErrorCode::kInternal};
    }
  }();
  return make_error(kind.code, "worker {}: {} ({}): {}", endpoint_, call, kind.why, s.error_message());
}

Result<NodeFacts> RemoteNode::hello() {
  grpc::ClientContext ctx;
  prepare(ctx, std::min(timeout_ms_, 10000));
  v1::HelloRequest req;
  req.set_protocol(kProtocolVersion);
  v1::HelloReply reply;
  grpc::Status s = call_one(&v1::Worker::Stub::Hello, *stub_, ctx, req, &reply);
  if (!s.ok()) return failure("Hello", s);
  if (reply.protocol() != kProtocolVersion) {
    return make_error("worker {}: protocol {} (this coordinator speaks {})", endpoint_, reply.protocol(), kProtocolVersion);
  }
  NodeFacts f;
  f.cpu_features.assign(reply.cpu_features().begin(), reply.cpu_features().end());
  f.threads = reply.threads();
  f.memory_limit = reply.memory_limit();
  f.memory_available = reply.memory_available();
  f.cgroup_limited = reply.cgroup_limited();
  f.model_sha256.assign(reply.model_sha256().begin(), reply.model_sha256().end());
  f.sessions = reply.sessions();
  f.speed.read_bandwidth = reply.speed().read_bandwidth();
  if (reply.speed().rates_size() > 64 || reply.speed().slice_rates_size() > 64 || reply.speed().decoded_size() > 64) {
    return make_error("worker {}: Hello gives too many speeds", endpoint_);
  }
  for (const auto& [rates, into] : {std::pair{&reply.speed().rates(), &f.speed.product_rates},
                                    std::pair{&reply.speed().slice_rates(), &f.speed.slice_rates}}) {
    for (const v1::TypeRate& r : *rates) {
      if (!dtype_info(r.type())) return make_error("worker {}: Hello gives a speed for unknown type {}", endpoint_, r.type());
      into->emplace_back(static_cast<DType>(r.type()), r.bytes_per_second());
    }
  }
  for (int32_t t : reply.speed().decoded()) {
    if (!dtype_info(t)) return make_error("worker {}: Hello marks unknown type {} decoded", endpoint_, t);
    f.speed.decoded.push_back(static_cast<DType>(t));
  }
  f.speed.layer_work = {reply.speed().kv_element_seconds(), reply.speed().kv_query_element_seconds(),
                        reply.speed().state_element_seconds()};
  if (auto s = f.speed.validate(); !s) return make_error("worker {}: Hello: {}", endpoint_, s.error().message);
  return f;
}

// The slices a worker asked for instead of whole tensors, checked against the model's tensors.
Result<std::map<std::string, model::SliceBytes>> RemoteNode::requested_slices(const v1::PrepareReply& prepared,
                                                                             const gguf::File& model_file) const {
  std::map<std::string, model::SliceBytes> out;
  for (const v1::TensorSlice& s : prepared.slices()) {
    const gguf::TensorInfo* t = model_file.find_tensor(s.name());
    if (!t) return make_error("worker {} asked for a slice of tensor '{}', which the model does not have", endpoint_, s.name().substr(0, 128));
    model::SliceBytes slice{false, {}};
    if (static_cast<size_t>(s.runs_size()) > model::kMaxByteRuns) {
      return make_error("worker {} asked for {} byte runs of '{}' (at most {})", endpoint_, s.runs_size(), s.name(), model::kMaxByteRuns);
    }
    for (const v1::ByteRun& r : s.runs()) slice.runs.push_back({r.offset(), r.length(), r.stride(), r.count()});
    if (auto ok = model::check_slice_bytes(slice, t->nbytes); !ok.ok()) {
      return make_error("worker {} asked for a bad slice of '{}': {}", endpoint_, s.name(), ok.error().message);
    }
    out[s.name()] = std::move(slice);
  }
  return out;
}

Result<uint64_t> RemoteNode::load(const v1::StageSpec& spec, const gguf::File& model_file,
                                  const std::function<void(const LoadProgress&)>& on_progress) {
  v1::PrepareReply prepared;
  {
    grpc::ClientContext ctx;
    prepare(ctx, timeout_ms_);
    grpc::Status s = call_one(&v1::Worker::Stub::PrepareStage, *stub_, ctx, spec, &prepared);
    if (!s.ok()) return failure("PrepareStage", s);
  }
  LoadProgress progress;
  progress.bytes_total = prepared.missing_bytes();
  const auto start = std::chrono::steady_clock::now();
  if (prepared.missing_size() > 0) {
    grpc::ClientContext ctx;
    prepare(ctx, kLoadTimeoutMs);
    v1::PushReply pushed;
    STRATA_ASSIGN(auto slices, requested_slices(prepared, model_file));
    auto writer = stub_->PushTensors(&ctx, &pushed);
    for (const std::string& name : prepared.missing()) {
      const gguf::TensorInfo* t = model_file.find_tensor(name);
      if (!t) return make_error("worker {} asked for tensor '{}', which the model does not have", endpoint_, name);
      const uint8_t* data = model_file.tensor_data(*t);
      const auto slice = slices.find(name);
      const model::SliceBytes whole;
      const model::SliceBytes& wanted = slice == slices.end() ? whole : slice->second;
      const uint64_t total = wanted.bytes(t->nbytes);
      for (uint64_t off = 0; off < total; off += kChunkBytes) {
        v1::TensorChunk chunk;
        chunk.set_session(spec.session());
        chunk.set_name(name);
        chunk.set_offset(off);
        std::string* bytes = chunk.mutable_data();
        bytes->reserve(std::min<uint64_t>(kChunkBytes, total - off));
        model::for_each_piece(wanted, off, std::min<uint64_t>(kChunkBytes, total - off),
                              [&](uint64_t at, uint64_t, uint64_t n) { bytes->append(reinterpret_cast<const char*>(data + at), n); });
        if (!writer->Write(chunk)) break;
        progress.bytes_sent += chunk.data().size();
        progress.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (on_progress) on_progress(progress);
      }
    }
    writer->WritesDone();
    grpc::Status s = writer->Finish();
    if (!s.ok()) return failure("PushTensors", s);
  }
  v1::LoadReply loaded;
  grpc::ClientContext ctx;
  prepare(ctx, kLoadTimeoutMs);
  grpc::Status s = call_one(&v1::Worker::Stub::LoadStage, *stub_, ctx, spec, &loaded);
  if (!s.ok()) return failure("LoadStage", s);
  data_port_ = loaded.data_port();
  return progress.bytes_sent;
}

Status RemoteNode::join_mesh(const std::string& session, const std::vector<std::string>& members,
                             bool steps_over_link) {
  v1::MeshSpec spec;
  spec.set_session(session);
  spec.set_steps_over_link(steps_over_link);
  for (const std::string& m : members) spec.add_members(m);
  v1::MeshReply reply;
  grpc::ClientContext ctx;
  prepare(ctx, timeout_ms_ + 5000);  // the worker waits up to its own link deadline first
  grpc::Status s = call_one(&v1::Worker::Stub::JoinMesh, *stub_, ctx, spec, &reply);
  if (!s.ok()) return failure("JoinMesh", s);
  return {};
}

Result<v1::ForwardReply> RemoteNode::forward(const v1::ForwardRequest& head, std::string_view hidden) {
  grpc::ClientContext ctx;
  prepare(ctx, timeout_ms_);
  v1::ForwardReply reply;
  grpc::Status s = send_forward(*stub_, ctx, head, hidden, &reply);
  if (!s.ok()) return failure("Forward", s);
  return reply;
}

Status RemoteNode::seq_op(const std::string& session, v1::SeqOpRequest::Op op, int32_t seq, int32_t p0, int32_t dst) {
  grpc::ClientContext ctx;
  prepare(ctx, timeout_ms_);
  v1::SeqOpRequest req;
  req.set_session(session);
  req.set_op(op);
  req.set_seq(seq);
  req.set_p0(p0);
  req.set_dst(dst);
  v1::SeqOpReply reply;
  grpc::Status s = call_one(&v1::Worker::Stub::SeqOp, *stub_, ctx, req, &reply);
  if (!s.ok()) return failure("SeqOp", s);
  return {};
}

Result<std::vector<int32_t>> RemoteNode::draft(const std::string& session, int32_t seq, int32_t token, int32_t pos,
                                               const model::MtpDraftOptions& options) {
  grpc::ClientContext ctx;
  prepare(ctx, timeout_ms_);
  v1::DraftRequest req;
  req.set_session(session);
  req.set_seq(seq);
  req.set_token(token);
  req.set_pos(pos);
  req.set_n_max(options.n_max);
  req.set_p_min(options.p_min);
  v1::DraftReply reply;
  grpc::Status s = call_one(&v1::Worker::Stub::Draft, *stub_, ctx, req, &reply);
  if (!s.ok()) return failure("Draft", s);
  if (reply.tokens_size() > options.n_max) {
    return make_error("worker {}: a draft of {} tokens, {} asked for", endpoint(), reply.tokens_size(), options.n_max);
  }
  return std::vector<int32_t>(reply.tokens().begin(), reply.tokens().end());
}

namespace {
constexpr size_t kStashChunkBytes = 4 << 20;
}  // namespace

Result<std::vector<uint8_t>> RemoteNode::read_stash(const std::string& session, int32_t id) {
  grpc::ClientContext ctx;
  prepare(ctx, timeout_ms_);
  auto stream = stub_->ReadStash(&ctx);
  v1::StashRef ref;
  ref.set_session(session);
  ref.set_id(id);
  stream->Write(ref);
  stream->WritesDone();
  std::vector<uint8_t> out;
  v1::StashChunk chunk;
  while (stream->Read(&chunk)) {
    // The coordinator asked for this stash; still, the size said first bounds what is kept.
    if (out.empty()) out.reserve(static_cast<size_t>(std::min<uint64_t>(chunk.total(), uint64_t{1} << 40)));
    if (out.size() + chunk.data().size() > chunk.total()) return make_error("worker {}: a stash longer than it said", endpoint_);
    out.insert(out.end(), chunk.data().begin(), chunk.data().end());
  }
  grpc::Status s = stream->Finish();
  if (!s.ok()) return failure("ReadStash", s);
  return out;
}

Status RemoteNode::write_stash(const std::string& session, int32_t id, std::span<const uint8_t> bytes) {
  grpc::ClientContext ctx;
  prepare(ctx, timeout_ms_);
  v1::SeqOpReply reply;
  auto writer = stub_->WriteStash(&ctx, &reply);
  size_t at = 0;
  do {
    v1::StashChunk chunk;
    chunk.set_session(session);
    chunk.set_id(id);
    chunk.set_total(bytes.size());
    const size_t n = std::min(kStashChunkBytes, bytes.size() - at);
    chunk.set_data(bytes.data() + at, n);
    at += n;
    if (!writer->Write(chunk)) break;
  } while (at < bytes.size());
  writer->WritesDone();
  grpc::Status s = writer->Finish();
  if (!s.ok()) return failure("WriteStash", s);
  return {};
}

Result<bool> RemoteNode::ping(const std::string& session) {
  // A Ping sent on the connection that died with a restarted worker fails (reset, broken pipe)
  // before the channel notices; Ping changes nothing, so it goes once more on a new connection.
  grpc::Status s;
  for (int attempt = 0; attempt < 2; ++attempt) {
    grpc::ClientContext ctx;
    prepare(ctx, std::min(timeout_ms_, 5000));
    ctx.set_wait_for_ready(true);  // a worker that just restarted: wait for the reconnect, not fail fast
    v1::SessionRef req;
    req.set_session(session);
    v1::PingReply reply;
    s = call_one(&v1::Worker::Stub::Ping, *stub_, ctx, req, &reply);
    if (s.ok()) return reply.known();
    if (s.error_code() != grpc::StatusCode::UNAVAILABLE) break;
  }
  return failure("Ping", s);
}

void RemoteNode::end_session(const std::string& session) {
  grpc::ClientContext ctx;
  prepare(ctx, 2000);
  v1::SessionRef req;
  req.set_session(session);
  v1::PingReply reply;
  (void)call_one(&v1::Worker::Stub::EndSession, *stub_, ctx, req, &reply);
}

}  // namespace strata::net
