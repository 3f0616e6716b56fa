// The coordinator's link to one worker: facts, stage loading (with weight streaming and progress),
// forward along a chain of hops, sequence operations. Every call has a deadline; failures are error
// values naming the worker.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "exec/stage_executor.h"
#include "gguf/gguf.h"
#include "model/shard.h"
#include "net/credentials.h"
#include "strata.grpc.pb.h"

namespace strata::net {

using NodeFacts = exec::NodeFacts;
using LoadProgress = exec::LoadProgress;

class RemoteNode {
 public:
  static Result<std::unique_ptr<RemoteNode>> connect(const std::string& endpoint, const LinkSecurity& security,
                                                     int32_t timeout_ms);

  const std::string& endpoint() const { return endpoint_; }
  Result<NodeFacts> hello();
  // PrepareStage, PushTensors for what the worker lacks (reading bytes from `model_file`), LoadStage.
  // Returns the bytes sent over the network.
  Result<uint64_t> load(const v1::StageSpec& spec, const gguf::File& model_file,
                        const std::function<void(const LoadProgress&)>& on_progress);
  // `head` holds the hops and rows; `hidden` (rows x n_embd f32) goes in chunks (see forward_stream.h).
  Result<v1::ForwardReply> forward(const v1::ForwardRequest& head, std::string_view hidden);
  Status seq_op(const std::string& session, v1::SeqOpRequest::Op op, int32_t seq, int32_t p0, int32_t dst);
  Result<std::vector<int32_t>> draft(const std::string& session, int32_t seq, int32_t token, int32_t pos,
                                     const model::MtpDraftOptions& options);
  // ReadStash / WriteStash, in chunks of at most 4 MiB.
  Result<std::vector<uint8_t>> read_stash(const std::string& session, int32_t id);
  Status write_stash(const std::string& session, int32_t id, std::span<const uint8_t> bytes);
  // Tensor split: the data port the last load reported, and JoinMesh.
  int32_t data_port() const { return data_port_; }
  Status join_mesh(const std::string& session, const std::vector<std::string>& members, bool steps_over_link);
  // True when the worker still holds the session.
  Result<bool> ping(const std::string& session);
  void end_session(const std::string& session);
  // A failed call (or a step over a data link that ended in `s`) as an error naming the worker.
  Error failure(const char* call, const grpc::Status& s) const;

 private:
  RemoteNode() = default;
  void prepare(grpc::ClientContext& ctx, int32_t timeout_ms) const;
  Result<std::map<std::string, model::SliceBytes>> requested_slices(const v1::PrepareReply& prepared,
                                                                    const gguf::File& model_file) const;

  std::string endpoint_;
  LinkSecurity security_;
  int32_t timeout_ms_ = 30000;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Worker::Stub> stub_;
  int32_t data_port_ = 0;
};

}  // namespace strata::net
