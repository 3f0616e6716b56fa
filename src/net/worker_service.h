// The worker: serves any number of coordinators, one session each. A session holds the stage the
// coordinator's plan gave this node (weights, KV cache, compute) and is freed when its coordinator
// ends it or stops pinging.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/system.h"
#include "model/stage_runner.h"
#include "net/credentials.h"
#include "net/tensor_store.h"
#include "tensor/node_speed.h"
#include "strata.grpc.pb.h"

namespace strata::net {

struct WorkerOptions {
  std::string host = "127.0.0.1";
  int32_t port = 50052;       // 0: pick a free port
  int32_t threads = 0;        // 0: all cores
  LinkSecurity security;
  bool insecure = false;      // allow a non-loopback address without a token
  std::string cache_dir;      // received tensors
  std::string model_dir;      // local GGUF files, found by content hash
  int32_t session_timeout_s = 60;
  int32_t max_context = 0;    // largest context per sequence a stage may ask for (0: any)
  int32_t max_sessions = 8;   // coordinators served at once; each session holds a stage and its metadata
  std::string speed_cache_dir = default_cache_dir();  // where this host's measured speed is kept
  tensor::NodeSpeed speed;    // what Hello reports (run_worker measures it, or reads it from the cache)
  bool speed_from_cache = false;  // Hello reports the speed cached now (decoding refines it), else `speed`
};

class WorkerService final : public v1::Worker::Service {
 public:
  explicit WorkerService(const WorkerOptions& options);
  ~WorkerService() override;

  grpc::Status Hello(grpc::ServerContext*, grpc::ServerReader<v1::HelloRequest>*, v1::HelloReply*) override;
  grpc::Status PrepareStage(grpc::ServerContext*, grpc::ServerReader<v1::StageSpec>*, v1::PrepareReply*) override;
  grpc::Status PushTensors(grpc::ServerContext*, grpc::ServerReader<v1::TensorChunk>*, v1::PushReply*) override;
  grpc::Status LoadStage(grpc::ServerContext*, grpc::ServerReader<v1::StageSpec>*, v1::LoadReply*) override;
  grpc::Status Forward(grpc::ServerContext*, grpc::ServerReader<v1::ForwardRequest>*, v1::ForwardReply*) override;
  grpc::Status SeqOp(grpc::ServerContext*, grpc::ServerReader<v1::SeqOpRequest>*, v1::SeqOpReply*) override;
  grpc::Status Draft(grpc::ServerContext*, grpc::ServerReader<v1::DraftRequest>*, v1::DraftReply*) override;
  grpc::Status ReadStash(grpc::ServerContext*, grpc::ServerReaderWriter<v1::StashChunk, v1::StashRef>*) override;
  grpc::Status WriteStash(grpc::ServerContext*, grpc::ServerReader<v1::StashChunk>*, v1::SeqOpReply*) override;
  grpc::Status JoinMesh(grpc::ServerContext*, grpc::ServerReader<v1::MeshSpec>*, v1::MeshReply*) override;
  grpc::Status Ping(grpc::ServerContext*, grpc::ServerReader<v1::SessionRef>*, v1::PingReply*) override;
  grpc::Status EndSession(grpc::ServerContext*, grpc::ServerReader<v1::SessionRef>*, v1::PingReply*) override;

  TensorStore& store() { return store_; }

 private:
  struct Session;
  std::shared_ptr<Session> find(const std::string& id);
  // The link to a next hop; null unless the session's plan names that endpoint.
  std::shared_ptr<v1::Worker::Stub> next_hop(Session& session, const std::string& endpoint);
  grpc::Status run_hop(Session& session, const v1::ForwardRequest& req, std::vector<float>& hidden,
                       v1::ForwardReply* reply);
  grpc::Status join_mesh(Session& session, const v1::MeshSpec& message, const std::string& peer);
  void take_steps(Session& session);
  grpc::Status reply_logits(const v1::ForwardRequest& req, const model::Batch& batch, const float* hidden,
                            model::StageRunner& runner, v1::ForwardReply* reply);
  grpc::Status forward_onward(grpc::ServerContext& ctx, Session& session, const v1::ForwardRequest& req,
                              const std::vector<float>& hidden, v1::ForwardReply* reply);
  void reap_idle_sessions();

  WorkerOptions options_;
  TensorStore store_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Session>> sessions_;
  std::atomic<bool> stop_{false};
  std::thread reaper_;
};

// Runs a worker until SIGINT/SIGTERM. Prints "strata worker listening on HOST:PORT" once ready.
Status run_worker(const WorkerOptions& options);

}  // namespace strata::net
