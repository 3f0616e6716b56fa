#include "net/grpc_executor.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>

#include "base/checked.h"
#include "net/candidates.h"
#include "exec/link_emulation.h"
#include "net/data_mesh.h"
#include "net/model_identity.h"
#include "net/remote_node.h"
#include "model/shard.h"
#include "net/stage_spec.h"

namespace strata::net {
namespace {

// The model's identity (hash and metadata image), computed once for all the workers one connector
// opens: one engine, one model file.
struct Identity {
  std::string sha256;
  std::vector<uint8_t> metadata;
};
class IdentityOnce {
 public:
  Result<Identity> of(const exec::StageLoad& load) {
    std::lock_guard lock(mu_);
    if (!known_) {
      Identity id;
      STRATA_ASSIGN(id.sha256, file_sha256(load.model_path, default_cache_dir()));
      STRATA_ASSIGN(id.metadata, metadata_image(load.model->file()));
      known_ = std::move(id);
    }
    return *known_;
  }

 private:
  std::mutex mu_;
  std::optional<Identity> known_;
};

v1::SeqOpRequest::Op to_proto(exec::SeqOp op) {
  switch (op) {
    case exec::SeqOp::kClear: return v1::SeqOpRequest::CLEAR;
    case exec::SeqOp::kRemoveFrom: return v1::SeqOpRequest::REMOVE_FROM;
    case exec::SeqOp::kCopy: return v1::SeqOpRequest::COPY;
    case exec::SeqOp::kSaveCheckpoint: return v1::SeqOpRequest::SAVE_CHECKPOINT;
    case exec::SeqOp::kRestoreCheckpoint: return v1::SeqOpRequest::RESTORE_CHECKPOINT;
    case exec::SeqOp::kDropCheckpoint: return v1::SeqOpRequest::DROP_CHECKPOINT;
    case exec::SeqOp::kStash: return v1::SeqOpRequest::STASH;
    case exec::SeqOp::kUnstash: return v1::SeqOpRequest::UNSTASH;
    case exec::SeqOp::kDropStash: return v1::SeqOpRequest::DROP_STASH;
  }
  return v1::SeqOpRequest::CLEAR;
}

class GrpcExecutor final : public exec::StageExecutor {
 public:
  GrpcExecutor(std::unique_ptr<RemoteNode> link, std::shared_ptr<IdentityOnce> identity)
      : link_(std::move(link)), identity_(std::move(identity)) {}

  const std::string& name() const override { return link_->endpoint(); }
  Result<exec::NodeFacts> hello() override { return link_->hello(); }

  // The spec is built on the first load and only read afterwards: a reload after a restart sends the
  // same stage while the heartbeat may be pinging with its session.
  Result<uint64_t> load(const exec::StageLoad& load, const exec::ProgressFn& progress) override {
    if (spec_.session().empty()) {
      STRATA_ASSIGN(Identity id, identity_->of(load));
      spec_ = to_stage_spec(*load.model, load.stage, load.session, id.sha256, id.metadata, load.forward_to,
                            load.mesh_secret);
      n_embd_ = load.model->hparams().n_embd;
      n_vocab_ = load.model->hparams().n_vocab;
      vocab_ = model::output_rows(load.stage.shard, n_vocab_);
    }
    return link_->load(spec_, load.model->file(), progress);
  }

  Result<std::vector<float>> run(std::span<const exec::Hop> hops, const model::Batch& batch, std::vector<float>& hidden,
                                 int32_t top_k) override;

  bool can_chain_to(const exec::StageExecutor& next) const override {
    return dynamic_cast<const GrpcExecutor*>(&next) != nullptr;
  }
  Status seq_op(exec::SeqOp op, int32_t seq, int32_t p0, int32_t dst) override {
    return link_->seq_op(spec_.session(), to_proto(op), seq, p0, dst);
  }
  Result<std::vector<int32_t>> draft(int32_t seq, int32_t token, int32_t pos, const model::MtpDraftOptions& options) override {
    return link_->draft(spec_.session(), seq, token, pos, options);
  }
  Result<std::vector<uint8_t>> read_stash(int32_t id) override { return link_->read_stash(spec_.session(), id); }
  Status write_stash(int32_t id, std::span<const uint8_t> bytes) override {
    return link_->write_stash(spec_.session(), id, bytes);
  }
  Result<bool> ping() override { return link_->ping(spec_.session()); }
  int32_t data_port() const override { return link_->data_port(); }
  Status join_mesh(const std::vector<std::string>& members, bool steps_over_link) override {
    return link_->join_mesh(spec_.session(), members, steps_over_link);
  }
  Status send_batch_over_link(model::Collective& links, int32_t member, const exec::Hop& hop,
                              const model::Batch& batch, const std::vector<float>& hidden, int32_t top_k) override;
  Result<std::vector<float>> receive_logits_over_link(model::Collective& links, int32_t member,
                                                      const model::Batch& batch, int32_t top_k) override;
  void end() override {
    if (!spec_.session().empty()) link_->end_session(spec_.session());
  }

  const std::string& session() const { return spec_.session(); }

 private:
  Result<v1::ForwardRequest> request(std::span<const exec::Hop> hops, const model::Batch& batch, int32_t top_k) const;
  Result<std::vector<float>> take_logits(const v1::ForwardReply& reply, const model::Batch& batch, int32_t top_k,
                                         const std::string& last) const;

  std::unique_ptr<RemoteNode> link_;
  std::shared_ptr<IdentityOnce> identity_;
  v1::StageSpec spec_;
  int64_t n_embd_ = 0;
  int32_t n_vocab_ = 0;
  model::Range vocab_;  // the logits' rows this node computes (a tensor-split member: its slice)
};

// One request: this worker runs the first hop and forwards to the next workers itself.
Result<v1::ForwardRequest> GrpcExecutor::request(std::span<const exec::Hop> hops, const model::Batch& batch,
                                                 int32_t top_k) const {
  v1::ForwardRequest req;
  for (size_t j = 0; j < hops.size(); ++j) {
    const auto* node = dynamic_cast<const GrpcExecutor*>(hops[j].node);
    if (!node) return make_error("worker {}: hop {} is not a gRPC worker", name(), j);
    v1::Hop* hop = j == 0 ? req.mutable_hop() : req.add_next();
    hop->set_endpoint(node->name());
    hop->set_session(node->session());
    hop->set_first_layer(hops[j].first);
    hop->set_end_layer(hops[j].end);
    hop->set_output(hops[j].output);
    hop->set_again(hops[j].again);
  }
  for (int64_t t = 0; t < batch.size(); ++t) {
    req.add_pos(batch.pos[t]);
    req.add_seq(batch.seq[t]);
    req.add_tokens(batch.tokens[t]);
  }
  req.set_want_logits(std::string(batch.logits.begin(), batch.logits.end()));
  if (top_k > 0) req.set_top_k(static_cast<uint32_t>(top_k));
  return req;
}

Result<std::vector<float>> GrpcExecutor::run(std::span<const exec::Hop> hops, const model::Batch& batch,
                                             std::vector<float>& hidden, int32_t top_k) {
  STRATA_ASSIGN(const v1::ForwardRequest req, request(hops, batch, top_k));
  const std::string_view bytes(reinterpret_cast<const char*>(hidden.data()), hidden.size() * sizeof(float));
  STRATA_ASSIGN(v1::ForwardReply reply, link_->forward(req, bytes));
  const std::string& last = hops.back().node->name();
  if (hops.back().output) return take_logits(reply, batch, top_k, last);
  const size_t row_bytes = static_cast<size_t>(n_embd_) * sizeof(float);
  if (reply.hidden().size() != static_cast<size_t>(batch.size()) * row_bytes) {
    return make_error("worker {}: hidden state of {} bytes, expected {}", last, reply.hidden().size(),
                      static_cast<size_t>(batch.size()) * row_bytes);
  }
  std::memcpy(hidden.data(), reply.hidden().data(), reply.hidden().size());
  return std::vector<float>{};
}

Result<std::vector<float>> GrpcExecutor::take_logits(const v1::ForwardReply& reply, const model::Batch& batch,
                                                     int32_t top_k, const std::string& last) const {
  const int64_t n_out = std::count(batch.logits.begin(), batch.logits.end(), 1);
  // A worker that does not know top_k (an older build) sends whole rows: take those.
  if (top_k > 0 && reply.logits().empty()) {
    auto rows = unpack_candidates(reply.candidates(), n_out, n_vocab_, static_cast<uint32_t>(top_k));
    if (!rows.ok()) return make_error("worker {}: {}", last, rows.error().message);
    return rows;
  }
  const int32_t width = vocab_.size();
  if (reply.logits().size() != static_cast<size_t>(n_out) * width * sizeof(float)) {
    return make_error("worker {}: logits of {} bytes, expected {} rows of {}", last, reply.logits().size(), n_out, width);
  }
  // A batch may want no logits at all (a prompt chunk that ends at a cache checkpoint).
  std::vector<float> logits(reply.logits().size() / sizeof(float));
  if (!logits.empty()) std::memcpy(logits.data(), reply.logits().data(), reply.logits().size());
  return model::widen_logits(std::move(logits), vocab_, n_vocab_);
}

Status GrpcExecutor::send_batch_over_link(model::Collective& links, int32_t member, const exec::Hop& hop,
                                          const model::Batch& batch, const std::vector<float>& hidden, int32_t top_k) {
  STRATA_ASSIGN(v1::ForwardRequest req, request({&hop, 1}, batch, top_k));
  req.set_hidden(hidden.data(), hidden.size() * sizeof(float));
  return links.send_message(member, req.SerializeAsString());
}

// The answer is bounded before it is read: the rows that want logits, each the member's vocabulary
// rows or top_k candidates, and room for an error.
Result<std::vector<float>> GrpcExecutor::receive_logits_over_link(model::Collective& links, int32_t member,
                                                                  const model::Batch& batch, int32_t top_k) {
  const auto n_out = static_cast<uint64_t>(std::count(batch.logits.begin(), batch.logits.end(), 1));
  const uint64_t row = std::max<uint64_t>(uint64_t{4} * static_cast<uint32_t>(vocab_.size()),
                                          uint64_t{8} * static_cast<uint32_t>(std::max(top_k, 0)));
  STRATA_ASSIGN(std::string bytes, links.receive_message(member, sat_add(sat_mul(n_out, row), 64 << 10)));
  v1::LinkStepReply answer;
  if (!answer.ParseFromString(bytes)) return make_error(ErrorCode::kInternal, "worker {}: a malformed step reply", name());
  if (answer.code() != 0) return link_->failure("step", grpc::Status(grpc::StatusCode(answer.code()), answer.error()));
  return take_logits(answer.reply(), batch, top_k, name());
}

}  // namespace

exec::Connector grpc_connector(const LinkSecurity& security, int32_t timeout_ms) {
  auto identity = std::make_shared<IdentityOnce>();
  return [security, timeout_ms, identity](const std::string& endpoint) -> Result<std::unique_ptr<exec::StageExecutor>> {
    STRATA_ASSIGN(std::unique_ptr<RemoteNode> link, RemoteNode::connect(endpoint, security, timeout_ms));
    return std::unique_ptr<exec::StageExecutor>(new GrpcExecutor(std::move(link), identity));
  };
}

exec::Transport grpc_transport(const LinkSecurity& security, int32_t timeout_ms) {
  exec::Transport t;
  t.connect = grpc_connector(security, timeout_ms);
  t.join_links = [token = security.token](const std::vector<exec::LinkMember>& members, const std::string& secret,
                                          const std::string& session, int32_t timeout,
                                          int32_t threads) -> Result<std::unique_ptr<model::Collective>> {
    std::vector<MeshMember> mesh;
    for (const exec::LinkMember& m : members) mesh.push_back({m.name, m.endpoint});
    STRATA_ASSIGN(std::unique_ptr<DataMesh> joined,
                  DataMesh::join(0, mesh, nullptr, link_key(token, secret), session, timeout, threads));
    return exec::emulate_links(std::move(joined), 0, static_cast<int32_t>(mesh.size()), exec::LinkEmulation::from_env(),
                               timeout);
  };
  t.new_secret = random_secret;
  return t;
}

}  // namespace strata::net
