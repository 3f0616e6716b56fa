// Worker processes on 127.0.0.1 for integration tests, and engines over them.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "runtime/local_workers.h"
#include "strata.pb.h"

namespace strata::testing {

class TestCluster {
 public:
  // Starts n workers (strata binary, random ports, a shared token, a fresh cache dir per worker).
  // The destructor stops them and records a test failure for each one that does not exit with 0.
  // `worker_args` go to every worker's command line (e.g. "-v" for its info lines in its log).
  // `adjust(i, spawn)` may change worker i's spawn (its threads, CPU share, ...) before it starts.
  explicit TestCluster(int n, int threads = 1, const std::string& name = "cluster",
                       const std::vector<std::string>& worker_args = {},
                       const std::function<void(int, runtime::WorkerSpawn&)>& adjust = {});
  ~TestCluster();

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  std::vector<std::string> endpoints() const;
  const std::string& token() const { return token_; }
  const std::string& token_file() const { return token_file_; }
  runtime::WorkerProcess& worker(int i) { return workers_[i]; }
  // Starts worker i again on its old port (after kill()).
  bool restart(int i, int threads = 1);
  std::string cache_dir(int i) const { return root_ + "/worker-" + std::to_string(i); }
  // Worker i's log (its stderr; a restarted worker appends to it).
  std::string log_path(int i) const { return root_ + "/worker-" + std::to_string(i) + ".log"; }

 private:
  std::string root_, token_, token_file_, error_;
  std::vector<runtime::WorkerProcess> workers_;
};

// The spec a coordinator would send for the whole of `model` (from `model_path`) on the one worker at
// `endpoint`, with a 64-token context and batches of 16: for tests that talk to a worker by hand.
v1::StageSpec whole_model_spec(const model::Model& model, const std::string& model_path, const std::string& endpoint,
                               const std::string& session);

// Engine options for a model on this machine alone: one thread, batches of 256.
runtime::EngineOptions single_node_options(const std::string& model, int32_t n_ctx = 256);
// Engine options for a model over these workers.
runtime::EngineOptions cluster_options(const std::string& model, const TestCluster& cluster, int32_t n_ctx = 256);

// `n` greedy tokens after `prompt` (EOS ignored); `on_token(count)` after each. The outcome goes to
// *status: a failure names what failed.
std::vector<int32_t> greedy_tokens(runtime::Engine& e, const std::vector<int32_t>& prompt, int n, Status* status,
                                   const std::function<void(int)>& on_token = {});

// Checks that `e` gives the greedy tokens a one-node engine on `model_path` gives (8 after a fixed
// 8-token prompt of small ids), failing the test (with what failed) otherwise.
void expect_greedy_tokens_of_one_node(runtime::Engine& e, const std::string& model_path);

// Single-node logits of every prompt position followed by `n_decode` greedy steps' logits.
std::vector<float> run_reference(runtime::Engine& engine, const std::vector<int32_t>& prompt, int n_decode);

}  // namespace strata::testing
