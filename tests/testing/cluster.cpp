#include "testing/cluster.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "net/grpc_executor.h"
#include "net/model_identity.h"
#include "net/stage_spec.h"
#include "runtime/generate.h"
#include "testing/process.h"
#include "testing/shared_data.h"

namespace strata::testing {

TestCluster::TestCluster(int n, int threads, const std::string& name, const std::vector<std::string>& worker_args,
                         const std::function<void(int, runtime::WorkerSpawn&)>& adjust) {
  root_ = (std::filesystem::temp_directory_path() / ("strata-test-" + name + "-" + std::to_string(::getpid()))).string();
  std::filesystem::remove_all(root_);
  std::filesystem::create_directories(root_);
  token_ = runtime::random_token();
  auto file = runtime::write_token_file(token_);
  if (!file.ok()) {
    error_ = file.error().message;
    return;
  }
  token_file_ = *file;
  for (int i = 0; i < n; ++i) {
    runtime::WorkerSpawn s;
    s.binary = strata_binary();
    s.threads = threads;
    s.token_file = token_file_;
    s.cache_dir = cache_dir(i);
    s.log_path = log_path(i);
    s.extra_args = worker_args;
    if (adjust) adjust(i, s);
    auto w = runtime::WorkerProcess::spawn(s);
    if (!w.ok()) {
      error_ = w.error().message + "\n" + testing::log_tail(s.log_path);
      return;
    }
    workers_.push_back(std::move(*w));
  }
}

TestCluster::~TestCluster() {
  // Workers killed on purpose (kill(SIGKILL) in fault tests) are already reaped and not checked.
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (!workers_[i].running()) continue;
    const std::string what = "worker " + std::to_string(i) + " (" + workers_[i].endpoint() + ", pid " +
                             std::to_string(workers_[i].pid()) + ")";
    expect_clean_exit(workers_[i].stop(), what, log_path(static_cast<int>(i)));
  }
  workers_.clear();
  std::filesystem::remove(token_file_);
  std::filesystem::remove_all(root_);
}

std::vector<std::string> TestCluster::endpoints() const {
  std::vector<std::string> out;
  for (const auto& w : workers_) out.push_back(w.endpoint());
  return out;
}

bool TestCluster::restart(int i, int threads) {
  runtime::WorkerSpawn s;
  s.binary = strata_binary();
  s.port = workers_[i].port() ? workers_[i].port() : 0;
  s.threads = threads;
  s.token_file = token_file_;
  s.cache_dir = cache_dir(i);
  s.log_path = log_path(i);
  const std::string endpoint = workers_[i].endpoint();
  s.port = std::stoi(endpoint.substr(endpoint.rfind(':') + 1));
  for (int attempt = 0; attempt < 50; ++attempt) {  // the old socket may linger briefly
    auto w = runtime::WorkerProcess::spawn(s);
    if (w.ok()) {
      workers_[i] = std::move(*w);
      return true;
    }
    ::usleep(100000);
  }
  return false;
}

void expect_greedy_tokens_of_one_node(runtime::Engine& e, const std::string& model_path) {
  auto one = runtime::Engine::load(single_node_options(model_path));
  ASSERT_TRUE(one.ok()) << one.error().message;
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 432, 383, 286};
  Status st;
  const std::vector<int32_t> want = greedy_tokens(**one, prompt, 8, &st);
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_EQ(greedy_tokens(e, prompt, 8, &st), want);
  ASSERT_TRUE(st.ok()) << st.error().message;
}

runtime::EngineOptions single_node_options(const std::string& model, int32_t n_ctx) {
  runtime::EngineOptions o;
  o.model_path = model;
  o.n_ctx = n_ctx;
  o.n_threads = 1;
  o.n_batch = 256;
  return o;
}

runtime::EngineOptions cluster_options(const std::string& model, const TestCluster& cluster, int32_t n_ctx) {
  runtime::EngineOptions o = single_node_options(model, n_ctx);
  o.cluster.workers = cluster.endpoints();
  o.cluster.transport = net::grpc_transport({cluster.token(), "", "", ""}, o.cluster.timeout_ms);
  o.cluster.timeout_ms = 20000;
  return o;
}

std::vector<int32_t> greedy_tokens(runtime::Engine& e, const std::vector<int32_t>& prompt, int n, Status* status,
                                   const std::function<void(int)>& on_token) {
  runtime::GenerationRequest req;
  req.prompt = prompt;
  req.n_predict = n;
  req.ignore_eos = true;
  sampling::Params p;
  p.temp = 0;
  sampling::Sampler sampler(p, e.n_vocab());
  std::vector<int32_t> out;
  auto r = runtime::generate(e, req, sampler, [&](text::Token t, const std::string&) {
    if (t >= 0) out.push_back(t);
    if (on_token) on_token(static_cast<int>(out.size()));
    return true;
  });
  *status = r.ok() ? Status{} : Status{r.error()};
  return out;
}

std::vector<float> run_reference(runtime::Engine& engine, const std::vector<int32_t>& prompt, int n_decode) {
  auto logits = runtime::evaluate_prompt(engine, 0, prompt, true);
  if (!logits.ok()) {
    ADD_FAILURE() << logits.error().message;
    return {};
  }
  std::vector<float> all = std::move(*logits);
  const int32_t V = engine.n_vocab();
  for (int i = 0; i < n_decode; ++i) {
    const float* last = all.data() + all.size() - V;
    const int32_t token = static_cast<int32_t>(std::max_element(last, last + V) - last);
    model::Batch b;
    b.add(token, static_cast<int32_t>(prompt.size()) + i, 0, true);
    auto next = engine.decode(b);
    if (!next.ok()) {
      ADD_FAILURE() << next.error().message;
      return {};
    }
    all.insert(all.end(), next->begin(), next->end());
  }
  return all;
}

v1::StageSpec whole_model_spec(const model::Model& model, const std::string& model_path, const std::string& endpoint,
                               const std::string& session) {
  std::vector<plan::Node> nodes = {plan::local_node(1), plan::worker_node(endpoint, uint64_t{1} << 34, 1)};
  plan::Request req;
  req.n_ctx = 64;
  req.n_batch = 16;
  req.tensor_split = {1};
  auto p = plan::make_plan(model, nodes, req);
  EXPECT_TRUE(p.ok()) << p.error().message;
  auto sha = net::file_sha256(model_path, "");
  auto metadata = net::metadata_image(model.file());
  EXPECT_TRUE(sha.ok() && metadata.ok());
  if (!p.ok() || !sha.ok() || !metadata.ok()) return {};
  return net::make_stage_spec(model, *p, 1, session, *sha, *metadata);
}

}  // namespace strata::testing
