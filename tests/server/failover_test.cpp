// A worker killed under a streamed request: the request waits for the cluster to recover (the worker
// coming back, or a new plan over the nodes left), computes its tokens again and goes on, and its
// text equals the undisturbed greedy answer.
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <csignal>
#include <sstream>
#include <thread>

#include "server/serve_process.h"
#include "testing/cluster.h"
#include "testing/shared_data.h"

namespace strata {
namespace {

using nlohmann::json;
using Server = testing::ServeProcess;

std::string model_path() { return testing::shared_file("models/stories260K.gguf"); }

const json kRequest = {{"prompt", "Once upon a time"}, {"max_tokens", 400}, {"temperature", 0}, {"ignore_eos", true}};

// The streamed completion's text and whether it ended with [DONE]; `on_event(n)` after the n-th event.
struct Streamed {
  std::string text, error;
  bool done = false;
};
Streamed stream(const Server& server, const std::function<void(int)>& on_event) {
  Streamed out;
  std::string buffer;
  int events = 0;
  auto c = server.client();
  json body = kRequest;
  body["stream"] = true;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
                      buffer.append(data, n);
                      for (size_t end; (end = buffer.find("\n\n")) != std::string::npos; buffer.erase(0, end + 2)) {
                        const std::string event = buffer.substr(0, end);
                        if (event.rfind("data: ", 0) != 0) continue;
                        if (event == "data: [DONE]") {
                          out.done = true;
                          continue;
                        }
                        const json j = json::parse(event.substr(6), nullptr, false);
                        if (j.contains("error")) out.error = j["error"].dump();
                        if (j.contains("choices") && !j["choices"].empty()) out.text += j["choices"][0].value("text", "");
                        on_event(++events);
                      }
                      return true;
  };
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  if (!c.send(req, res, error)) out.error = "no response: " + httplib::to_string(error);
  return out;
}

std::string undisturbed(const Server& server) {
  auto c = server.client();
  auto r = c.Post("/v1/completions", kRequest.dump(), "application/json");
  EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no response");
  return r ? json::parse(r->body)["choices"][0].value("text", "") : "";
}

double metric(const Server& server, const std::string& name) {
  auto c = server.client();
  auto r = c.Get("/metrics");
  if (!r) return -1;
  std::istringstream lines(r->body);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  }
  return -1;
}

// Kills worker `victim` after the 20th streamed event; with --failover wait it is started again on its
// port 1.5 s later, with replan it never comes back and the other two nodes take the model.
void kill_mid_stream_and_expect_the_same_text(const std::vector<std::string>& split_flags, int victim,
                                              const std::string& failover) {
  if (model_path().empty()) return;
  testing::TestCluster cluster(2, 1, "failover");
  ASSERT_TRUE(cluster.ok()) << cluster.error();
  std::vector<std::string> args = {"-m", model_path(), "-c", "2048", "--token-file", cluster.token_file(),
                                   "--rpc", cluster.endpoints()[0] + "," + cluster.endpoints()[1], "--rpc-timeout",
                                   "3000", "--failover", failover, "--recover-timeout", "60", "--no-cache-prompt"};
  args.insert(args.end(), split_flags.begin(), split_flags.end());
  Server server(args, "failover");
  ASSERT_TRUE(server.ok()) << server.log();
  const std::string want = undisturbed(server);
  ASSERT_FALSE(want.empty());

  // The worker is killed and started again from this thread: a worker dies with the thread that
  // started it (PR_SET_PDEATHSIG), so a helper thread could not restart it.
  std::atomic<int> events{0};
  Streamed got;
  std::thread streamer([&] { got = stream(server, [&](int n) { events.store(n); }); });
  while (events.load() < 20 && !got.done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  cluster.worker(victim).kill(SIGKILL);
  if (failover == "wait") {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    EXPECT_TRUE(cluster.restart(victim));
  }
  streamer.join();
  EXPECT_GT(events.load(), 20);
  EXPECT_TRUE(got.error.empty()) << got.error << "\n" << server.log();
  EXPECT_TRUE(got.done);
  EXPECT_EQ(got.text, want);
  EXPECT_EQ(metric(server, "strata_requests_resumed_total"), 1) << server.log();
  EXPECT_NE(server.log().find("request(s) wait up to"), std::string::npos);
  const bool replanned = server.log().find("failover: planning again without " + cluster.endpoints()[victim]) != std::string::npos;
  EXPECT_EQ(replanned, failover == "replan") << server.log();
  if (failover == "replan") {  // the worker's process is gone for good: nothing to stop at the end
    ASSERT_TRUE(cluster.restart(victim));
  }
}

// The tests below run as parallel processes and each names its server "failover": each needs its
// own log (they once shared one, and one test found its own warning overwritten by another's).
TEST(Failover, servers_named_alike_in_parallel_tests_keep_their_own_logs) {
  const std::string a = testing::server_file("failover", ".log").string();
  const std::string b = testing::server_file("failover", ".log").string();
  EXPECT_NE(a, b);
  EXPECT_NE(a.find("-" + std::to_string(::getpid()) + "-"), std::string::npos) << a;
}

TEST(Failover, a_killed_layer_worker_comes_back_and_the_stream_goes_on_to_the_same_text) {
  kill_mid_stream_and_expect_the_same_text({"-ts", "1,1,1"}, 1, "wait");
}

TEST(Failover, a_killed_tensor_member_comes_back_and_the_stream_goes_on_to_the_same_text) {
  kill_mid_stream_and_expect_the_same_text({"-sm", "tensor", "-ts", "1,1,1"}, 0, "wait");
}

TEST(Failover, without_the_killed_layer_worker_the_others_take_its_layers_and_the_stream_goes_on) {
  kill_mid_stream_and_expect_the_same_text({"-ts", "1,1,1"}, 0, "replan");
}

TEST(Failover, without_the_killed_tensor_member_the_group_is_sliced_again_and_the_stream_goes_on) {
  kill_mid_stream_and_expect_the_same_text({"-sm", "tensor", "-ts", "1,1,1"}, 1, "replan");
}

// A worker that never comes back under --failover wait: past --recover-timeout the stream ends
// with an error naming it, not sooner and not never.
TEST(Failover, past_the_recover_timeout_the_stream_ends_with_an_error_naming_the_node) {
  if (model_path().empty()) return;
  testing::TestCluster cluster(1, 1, "failover-timeout");
  ASSERT_TRUE(cluster.ok()) << cluster.error();
  Server server({"-m", model_path(), "-c", "2048", "--token-file", cluster.token_file(), "--rpc", cluster.endpoints()[0],
                 "-ts", "1,1", "--rpc-timeout", "2000", "--failover", "wait", "--recover-timeout", "4"},
                "failover-timeout");
  ASSERT_TRUE(server.ok()) << server.log();
  std::atomic<int> events{0};
  Streamed got;
  std::thread streamer([&] { got = stream(server, [&](int n) { events.store(n); }); });
  while (events.load() < 20 && !got.done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const auto killed = std::chrono::steady_clock::now();
  cluster.worker(0).kill(SIGKILL);
  streamer.join();
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  EXPECT_FALSE(got.done);
  EXPECT_NE(got.error.find(cluster.endpoints()[0]), std::string::npos) << got.error;
  EXPECT_NE(got.error.find("did not recover within 4000 ms"), std::string::npos) << got.error;
  EXPECT_GE(waited, 4.0);
  EXPECT_LT(waited, 15.0);
  EXPECT_EQ(metric(server, "strata_requests_resumed_total"), 0);
  ASSERT_TRUE(cluster.restart(0));  // for the cluster's clean stop at the end
}

}  // namespace
}  // namespace strata
