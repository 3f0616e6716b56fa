// Worker behaviour seen from outside: refusing to listen openly without a token, freeing the memory of
// a coordinator that vanished, mapping its own copy of the model, and TLS links.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "net/grpc_executor.h"
#include "net/model_identity.h"
#include "net/remote_node.h"
#include "net/stage_spec.h"
#include "runtime/generate.h"
#include "testing/cluster.h"
#include "testing/process.h"
#include "testing/shared_data.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

TEST(Worker, refuses_a_non_loopback_address_without_a_token) {
  const auto r = testing::run_command(testing::shell_quote(testing::strata_binary()) + " worker -H 0.0.0.0 -p 0");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("without a token"), std::string::npos) << r.err;
}

// Loads a stage by hand (as a coordinator would), then stops talking to the worker.
void load_and_vanish(const std::string& endpoint, const std::string& token, const std::string& model_path) {
  auto model = model::Model::open(model_path);
  ASSERT_TRUE(model.ok());
  const v1::StageSpec spec = testing::whole_model_spec(**model, model_path, endpoint, "vanishing");
  auto link = net::RemoteNode::connect(endpoint, {token, "", "", ""}, 5000);
  ASSERT_TRUE(link.ok());
  auto sent = (*link)->load(spec, (*model)->file(), nullptr);
  ASSERT_TRUE(sent.ok()) << sent.error().message;
}

TEST(Worker, frees_the_session_of_a_coordinator_that_vanished) {
  STRATA_SHARED_FILE(model, "models/stories260K.gguf");
  runtime::WorkerSpawn s;
  s.binary = testing::strata_binary();
  s.extra_args = {"--session-timeout", "1"};
  s.cache_dir = (fs::temp_directory_path() / "strata-test-vanish").string();
  s.log_path = s.cache_dir + ".log";
  fs::remove(s.log_path);
  auto w = runtime::WorkerProcess::spawn(s);
  ASSERT_TRUE(w.ok()) << w.error().message << testing::log_tail(s.log_path);
  load_and_vanish(w->endpoint(), "", model);
  auto link = net::RemoteNode::connect(w->endpoint(), {}, 5000);
  ASSERT_TRUE(link.ok());
  auto before = (*link)->hello();
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(before->sessions, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  auto after = (*link)->hello();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->sessions, 0);
  testing::expect_clean_exit(w->stop(), "worker " + w->endpoint(), s.log_path);
  fs::remove_all(s.cache_dir);
  fs::remove(s.log_path);
}

TEST(Worker, maps_its_own_copy_of_the_model_and_receives_no_weights) {
  STRATA_SHARED_FILE(model, "models/synth/llama-dense-q8_0.gguf");
  const fs::path dir = fs::temp_directory_path() / "strata-test-model-dir";
  fs::remove_all(dir);
  fs::create_directories(dir / "models");
  fs::copy_file(model, dir / "models" / "copy.gguf");
  runtime::WorkerSpawn s;
  s.binary = testing::strata_binary();
  s.cache_dir = (dir / "cache").string();
  s.extra_args = {"--model-dir", (dir / "models").string()};
  s.log_path = (dir / "worker.log").string();
  auto w = runtime::WorkerProcess::spawn(s);
  ASSERT_TRUE(w.ok()) << w.error().message << testing::log_tail(s.log_path);
  // The first start of a model the worker has no copy of sends its weights: bytes_sent counts them.
  STRATA_SHARED_FILE(other, "models/stories260K.gguf");
  auto load_on_worker = [&](const std::string& path) {
    runtime::EngineOptions o;
    o.model_path = path;
    o.n_ctx = 128;
    o.n_threads = 1;
    o.cluster.workers = {w->endpoint()};
    o.cluster.tensor_split = {1};
    o.cluster.transport = net::grpc_transport({}, o.cluster.timeout_ms);
    return runtime::Engine::load(o);
  };
  {
    auto e = load_on_worker(other);
    ASSERT_TRUE(e.ok()) << e.error().message;
    ASSERT_EQ((*e)->loads().size(), 1u);
    EXPECT_GT((*e)->loads()[0].bytes_sent, 0u) << "a model the worker lacks must be sent";
  }
  // The first start of the model it has a copy of sends nothing.
  auto e = load_on_worker(model);
  ASSERT_TRUE(e.ok()) << e.error().message;
  ASSERT_EQ((*e)->loads().size(), 1u);
  EXPECT_EQ((*e)->loads()[0].bytes_sent, 0u);
  auto logits = runtime::evaluate_prompt(**e, 0, {1, 403, 407}, false);
  EXPECT_TRUE(logits.ok()) << logits.error().message;
  e = make_error("done");
  testing::expect_clean_exit(w->stop(), "worker " + w->endpoint(), s.log_path);
  fs::remove_all(dir);
}

TEST(Worker, links_run_over_mutual_tls) {
  STRATA_SHARED_FILE(model, "models/stories260K.gguf");
  const fs::path dir = fs::temp_directory_path() / "strata-test-tls";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string cert = (dir / "cert.pem").string(), key = (dir / "key.pem").string();
  const auto gen = testing::run_command(
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost -addext "
      "subjectAltName=IP:127.0.0.1,DNS:localhost -keyout " + key + " -out " + cert);
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  std::vector<runtime::WorkerProcess> workers;
  for (int i = 0; i < 2; ++i) {
    runtime::WorkerSpawn s;
    s.binary = testing::strata_binary();
    s.cache_dir = (dir / ("cache" + std::to_string(i))).string();
    s.extra_args = {"--tls-cert", cert, "--tls-key", key, "--tls-ca", cert};
    s.log_path = (dir / ("worker" + std::to_string(i) + ".log")).string();
    auto w = runtime::WorkerProcess::spawn(s);
    ASSERT_TRUE(w.ok()) << w.error().message << testing::log_tail(s.log_path);
    workers.push_back(std::move(*w));
  }
  runtime::EngineOptions o;
  o.model_path = model;
  o.n_ctx = 128;
  o.n_threads = 1;
  o.cluster.workers = {workers[0].endpoint(), workers[1].endpoint()};
  o.cluster.tensor_split = {1, 1};
  o.cluster.transport = net::grpc_transport({"", cert, cert, key}, o.cluster.timeout_ms);
  auto e = runtime::Engine::load(o);
  ASSERT_TRUE(e.ok()) << e.error().message;
  auto logits = runtime::evaluate_prompt(**e, 0, {1, 403, 407}, false);
  EXPECT_TRUE(logits.ok()) << logits.error().message;
  // A TLS client with a client certificate the CA signed is served...
  auto full = net::RemoteNode::connect(workers[0].endpoint(), {"", cert, cert, key}, 3000);
  ASSERT_TRUE(full.ok()) << full.error().message;
  auto facts = (*full)->hello();
  EXPECT_TRUE(facts.ok()) << facts.error().message;
  // ...one that trusts the worker's certificate but has none of its own is refused: the TLS is mutual...
  auto no_cert = net::RemoteNode::connect(workers[0].endpoint(), {"", cert, "", ""}, 3000);
  ASSERT_TRUE(no_cert.ok()) << no_cert.error().message;
  EXPECT_FALSE((*no_cert)->hello().ok()) << "a TLS client without a client certificate was served";
  // ...and a plaintext client gets nowhere.
  auto plain = net::RemoteNode::connect(workers[0].endpoint(), {}, 3000);
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE((*plain)->hello().ok());
  e = make_error("done");
  for (size_t i = 0; i < workers.size(); ++i) {
    testing::expect_clean_exit(workers[i].stop(), "TLS worker " + workers[i].endpoint(),
                               (dir / ("worker" + std::to_string(i) + ".log")).string());
  }
  workers.clear();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace strata
