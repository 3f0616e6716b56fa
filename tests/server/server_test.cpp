// `strata serve` from outside: the official openai client, a load test, bad input, node failure
// mid-stream, the warm-up refusal, and the web page in headless Chromium.
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "runtime/local_workers.h"
#include "server/serve_process.h"
#include "testing/process.h"
#include "testing/shared_data.h"

namespace strata {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::ChildProcess;

const fs::path kTmp = testing::server_tmp_dir();

using Server = testing::ServeProcess;

std::string model_path() { return testing::shared_file("models/stories260K.gguf"); }

// `strata run` at temperature 0: the reference every server answer is compared with.
std::string strata_run(const std::string& prompt, int n) {
  const auto r = testing::run_command(testing::shell_quote(testing::strata_binary()) + " -q run -m " +
                                      testing::shell_quote(model_path()) + " -c 1024 --temp 0 --no-display-prompt -n " +
                                      std::to_string(n) + " -p " + testing::shell_quote(prompt));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::string out = r.out;
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// npm packages for the client-side tests, installed once into the build tree.
std::string node_dir() {
  const fs::path dir = fs::path(STRATA_BUILD_DIR) / "node";
  if (!fs::exists(dir / "node_modules" / "openai") || !fs::exists(dir / "node_modules" / "playwright-core")) {
    fs::create_directories(dir);
    const auto r = testing::run_command("npm install --no-audit --no-fund --loglevel=error --prefix " +
                                        testing::shell_quote(dir.string()) + " openai@7 playwright-core@1");
    EXPECT_EQ(r.exit_code, 0) << "npm install failed: " << r.err;
  }
  for (const char* script : {"openai_client.mjs", "web_page.mjs"}) {
    fs::copy_file(fs::path(STRATA_SOURCE_DIR) / "tests" / "server" / script, dir / script,
                  fs::copy_options::overwrite_existing);
  }
  return dir.string();
}

std::string post(httplib::Client& c, const std::string& path, const json& body, int* status) {
  auto r = c.Post(path.c_str(), body.dump(), "application/json");
  *status = r ? r->status : -1;
  return r ? r->body : "";
}

TEST(Server, official_openai_client_gets_strata_runs_greedy_outputs_over_two_local_workers) {
  if (model_path().empty()) return;
  const std::string prompt = "Once upon a time, there was a little girl named Lily.";
  const std::string user = "Tell me a story about a dog.";
  const int n = 24;
  json want = {{"model", "stories260K.gguf"}, {"prompt", prompt}, {"max_tokens", n}, {"chat_user", user},
               {"completion", strata_run(prompt, n)},
               // No chat template in this GGUF: the server falls back to ChatML.
               {"chat_completion", strata_run("<|im_start|>user\n" + user + "<|im_end|>\n<|im_start|>assistant\n", n)}};
  const std::string dir = node_dir();
  std::ofstream(dir + "/expected.json") << want.dump();
  Server server({"-m", model_path(), "-c", "1024", "--parallel", "2", "--local-workers", "2"}, "openai");
  ASSERT_TRUE(server.ok()) << server.log();
  const auto r = testing::run_command("node " + testing::shell_quote(dir + "/openai_client.mjs") + " " + server.url() +
                                      " " + testing::shell_quote(dir + "/expected.json"));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  std::printf("%s", r.out.c_str());
}

TEST(Server, concurrent_load_gives_the_outputs_of_requests_run_alone) {
  if (model_path().empty()) return;
  Server server({"-m", model_path(), "-c", "1024", "--parallel", "4", "-t", "2"}, "load");
  ASSERT_TRUE(server.ok()) << server.log();
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog", "Lily and Tom went", "One day, a bird",
                                            "The sun was", "Sue had a red ball", "Mom said", "In the park"};
  std::vector<std::string> alone;
  auto body = [](const std::string& p) { return json{{"prompt", p}, {"max_tokens", 24}, {"temperature", 0}}; };
  for (const auto& p : prompts) {
    auto c = server.client();
    int status = 0;
    const json r = json::parse(post(c, "/v1/completions", body(p), &status), nullptr, false);
    ASSERT_EQ(status, 200);
    alone.push_back(r["choices"][0]["text"].get<std::string>());
  }
  std::atomic<int> next{0}, ok{0}, mismatched{0};
  std::mutex failures_mu;
  std::vector<std::string> failures;
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> clients;
  for (int t = 0; t < 16; ++t) {
    clients.emplace_back([&] {
      auto c = server.client();
      for (int i; (i = next++) < 200;) {
        int status = 0;
        const json r = json::parse(post(c, "/v1/completions", body(prompts[i % prompts.size()]), &status), nullptr, false);
        if (status != 200) {
          std::lock_guard lock(failures_mu);
          failures.push_back(std::to_string(status) + ": " + r.dump());
          continue;
        }
        ++ok;
        if (r["choices"][0]["text"] != alone[i % prompts.size()]) ++mismatched;
      }
    });
  }
  for (auto& t : clients) t.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(ok.load(), 200) << (failures.empty() ? "" : failures[0]);
  EXPECT_EQ(mismatched.load(), 0);
  std::printf("[ load     ] 200 requests, 16 clients, -np 4: %.2f s, %.1f requests/s\n", seconds, 200 / seconds);
}

TEST(Server, bad_input_gets_openai_errors_and_the_server_stays_up) {
  if (model_path().empty()) return;
  Server server({"-m", model_path(), "-c", "256", "--api-key", "sekrit"}, "bad");
  ASSERT_TRUE(server.ok()) << server.log();
  auto c = server.client();
  httplib::Headers auth = {{"Authorization", "Bearer sekrit"}};
  struct Case {
    const char* name;
    std::string body;
    httplib::Headers headers;
    int status;
    const char* fragment;
  };
  const std::vector<Case> cases = {
      {"malformed JSON", "{\"messages\": [", auth, 400, "not valid JSON"},
      {"wrong type", R"({"messages":[{"role":"user","content":"hi"}],"temperature":"hot"})", auth, 400, "temperature"},
      {"n = 2", R"({"messages":[{"role":"user","content":"hi"}],"n":2})", auth, 400, "n = 1"},
      {"no messages", R"({"model":"stories260K.gguf"})", auth, 400, "messages"},
      {"bad role", R"({"messages":[{"role":"wizard","content":"hi"}]})", auth, 400, "role"},
      {"unknown model", R"({"model":"gpt-9","messages":[{"role":"user","content":"hi"}]})", auth, 404, "gpt-9"},
      {"missing key", R"({"messages":[{"role":"user","content":"hi"}]})", {}, 401, "API key"},
      {"wrong key", R"({"messages":[{"role":"user","content":"hi"}]})", {{"Authorization", "Bearer nope"}}, 401, "API key"},
      {"negative max_tokens", R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":-1})", auth, 400, "max_tokens"},
      {"prompt too long", json{{"prompt", std::string(3000, 'a')}}.dump(), auth, 400, "context"},
  };
  for (const Case& k : cases) {
    const bool chat = k.body.find("prompt") == std::string::npos;
    auto r = c.Post(chat ? "/v1/chat/completions" : "/v1/completions", k.headers, k.body, "application/json");
    ASSERT_TRUE(r) << k.name;
    EXPECT_EQ(r->status, k.status) << k.name << ": " << r->body;
    const json j = json::parse(r->body, nullptr, false);
    ASSERT_TRUE(j.contains("error")) << k.name << ": " << r->body;
    EXPECT_NE(j["error"]["message"].get<std::string>().find(k.fragment), std::string::npos) << k.name << ": " << r->body;
    // The server answers a good request right after.
    auto good = c.Post("/v1/chat/completions", auth, R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":2})",
                       "application/json");
    ASSERT_TRUE(good) << "after " << k.name;
    EXPECT_EQ(good->status, 200) << "after " << k.name << ": " << good->body;
  }
}

TEST(Server, node_failure_ends_the_stream_with_an_error_and_the_server_recovers) {
  if (model_path().empty()) return;
  runtime::WorkerSpawn spawn;
  spawn.binary = testing::strata_binary();
  spawn.cache_dir = (kTmp / "fail-worker").string();
  spawn.log_path = (kTmp / "fail-worker.log").string();
  fs::create_directories(kTmp);
  fs::remove(spawn.log_path);
  auto worker = runtime::WorkerProcess::spawn(spawn);
  ASSERT_TRUE(worker.ok()) << worker.error().message << testing::log_tail(spawn.log_path);
  const int port = worker->port();
  Server server({"-m", model_path(), "-c", "4096", "--rpc", worker->endpoint(), "-ts", "1,1", "--rpc-timeout", "3000"},
                "fail");
  ASSERT_TRUE(server.ok()) << server.log();
  auto c = server.client();
  // A long streamed generation; the worker dies while it runs.
  std::string body;
  std::thread streamer([&] {
    auto c2 = server.client();
    auto res = c2.Post("/v1/completions", json{{"prompt", "Once upon a time"}, {"max_tokens", 4000}, {"temperature", 0},
                                               {"stream", true}}.dump(), "application/json");
    if (res) body = res->body;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  worker->kill(SIGKILL);
  streamer.join();
  EXPECT_NE(body.find("\"error\""), std::string::npos) << body.substr(body.size() > 400 ? body.size() - 400 : 0);
  EXPECT_EQ(body.find("[DONE]"), std::string::npos);
  // Health turns 503 while the node is down, naming it...
  int status = 0;
  std::string health;
  for (int i = 0; i < 300 && status != 503; ++i) {  // the heartbeat pings every 2 s
    auto h = c.Get("/health");
    status = h ? h->status : -1;
    health = h ? h->body : "";
    if (status != 503) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(status, 503) << "health while the worker is down: " << health;
  const json down = json::parse(health, nullptr, false);
  ASSERT_TRUE(down.is_object()) << health;
  EXPECT_EQ(down.value("nodes_down", json::array()), json::array({worker->endpoint()})) << health;
  // ...and stays 503 until the node returns.
  auto still = c.Get("/health");
  ASSERT_TRUE(still);
  EXPECT_EQ(still->status, 503) << still->body;
  // A request meanwhile is refused at once as unavailable (503, worth retrying), not as a server bug.
  auto refused = c.Post("/v1/completions", json{{"prompt", "Once upon a time"}, {"max_tokens", 8}, {"temperature", 0}}.dump(),
                        "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503) << refused->body;
  EXPECT_NE(refused->body.find("unavailable_error"), std::string::npos) << refused->body;
  // Then back to 200 once it returns.
  spawn.port = port;
  auto again = runtime::WorkerProcess::spawn(spawn);
  ASSERT_TRUE(again.ok()) << again.error().message << testing::log_tail(spawn.log_path);
  status = 0;
  for (int i = 0; i < 100 && status != 200; ++i) {
    auto h = c.Get("/health");
    status = h ? h->status : -1;
    if (status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_EQ(status, 200);
  auto good = c.Post("/v1/completions", json{{"prompt", "Once upon a time"}, {"max_tokens", 8}, {"temperature", 0}}.dump(),
                     "application/json");
  ASSERT_TRUE(good);
  EXPECT_EQ(good->status, 200) << good->body;
  testing::expect_clean_exit(again->stop(), "restarted worker " + again->endpoint(), spawn.log_path);
}

TEST(Server, a_worker_that_refuses_its_stage_stops_startup_with_status_1) {
  if (model_path().empty()) return;
  runtime::WorkerSpawn spawn;
  spawn.binary = testing::strata_binary();
  spawn.cache_dir = (kTmp / "refusing-worker").string();
  spawn.extra_args = {"--max-context", "64"};
  spawn.log_path = (kTmp / "refusing-worker.log").string();
  fs::create_directories(kTmp);
  fs::remove(spawn.log_path);
  auto worker = runtime::WorkerProcess::spawn(spawn);
  ASSERT_TRUE(worker.ok()) << worker.error().message << testing::log_tail(spawn.log_path);
  ChildProcess p;
  const std::string log = (kTmp / "refuse.log").string();
  ASSERT_TRUE(ChildProcess::start({testing::strata_binary(), "serve", "--port", "0", "-m", model_path(), "-c", "1024",
                                   "--rpc", worker->endpoint(), "-ts", "1,1"},
                                  log, p));
  EXPECT_EQ(p.wait_exit(60000), 1);
  const std::string text = testing::read_text_file(log);
  EXPECT_NE(text.find(worker->endpoint()), std::string::npos) << text;
  EXPECT_NE(text.find("--max-context"), std::string::npos) << text;
  testing::expect_clean_exit(worker->stop(), "worker " + worker->endpoint() + " (--max-context 64)", spawn.log_path);
}

TEST(Server, web_page_streams_an_answer_and_shows_the_cluster_in_headless_chromium) {
  if (model_path().empty()) return;
  ASSERT_TRUE(fs::exists("/usr/bin/chromium")) << "Debian's chromium package is missing (scripts/setup.sh installs it)";
  const std::string dir = node_dir();
  Server server({"-m", model_path(), "-c", "1024", "--local-workers", "2"}, "web");
  ASSERT_TRUE(server.ok()) << server.log();
  const std::string png = (fs::path(STRATA_BUILD_DIR) / "web-page.png").string();
  const auto r = testing::run_command("node " + testing::shell_quote(dir + "/web_page.mjs") + " " + server.url() + "/ " +
                                      testing::shell_quote(png) + " 3");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(fs::exists(png) && fs::file_size(png) > 10000);
}

}  // namespace
}  // namespace strata
