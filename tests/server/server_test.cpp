// `strata serve` from outside: the official openai client, a load test, bad input, node failure
// mid-stream, the warm-up refusal, and the web page in headless Chromium.
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "gguf/gguf.h"
#include "gguf/names.h"
#include "runtime/local_workers.h"
#include "server/serve_process.h"
#include "testing/process.h"
#include "testing/shared_data.h"
#include "testing/sanitizers.h"
#include "text/chat_template.h"
#include "text/vocab.h"

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

std::string node_dir() { return testing::node_clients_dir(); }

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
  Server server({"-m", model_path(), "-c", "1024", "--parallel", "2", "--local-workers", "2", "-ts", "1,1,1"}, "openai");
  ASSERT_TRUE(server.ok()) << server.log();
  const auto r = testing::run_command("node " + testing::shell_quote(dir + "/openai_client.mjs") + " " + server.url() +
                                      " " + testing::shell_quote(dir + "/expected.json"));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  std::printf("%s", r.out.c_str());
}

// The real Qwen3 chat template, as the shared Qwen3 vocab GGUF stores it, written to a file for
// --chat-template-file. Empty when the shared data is missing.
std::string qwen3_template_file() {
  const std::string vocab = testing::shared_file("models/vocab/ggml-vocab-qwen3.gguf");
  if (vocab.empty()) return "";
  auto file = gguf::File::open(vocab);
  if (!file.ok()) return "";
  const gguf::KeyValue* kv = (*file)->find(gguf::names::tokenizer::kChatTemplate);
  if (!kv) return "";
  fs::create_directories(kTmp);
  const std::string path = (kTmp / "qwen3.jinja").string();
  std::ofstream(path) << kv->str;
  return path;
}

TEST(Server, official_openai_and_anthropic_clients_get_valid_tool_calls_json_and_strata_runs_text) {
  if (model_path().empty()) return;
  const std::string tmpl_path = qwen3_template_file();
  ASSERT_FALSE(tmpl_path.empty()) << "the shared Qwen3 vocab GGUF has no chat template";
  // The reference: strata run at temperature 0 on the prompt the template renders.
  std::ifstream in(tmpl_path);
  const std::string source((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto tmpl = text::ChatTemplate::parse(source);
  ASSERT_TRUE(tmpl.ok()) << tmpl.error().message;
  const std::string user = "What is the weather in Paris?";
  text::ChatMessage m;
  m.role = "user";
  m.content = user;
  auto prompt = tmpl->render({m}, text::ChatRenderOptions{});
  ASSERT_TRUE(prompt.ok()) << prompt.error().message;
  const int n = 24;
  const std::string text = strata_run(*prompt, n);
  ASSERT_GE(text.size(), 8u);
  auto model = gguf::File::open(model_path());
  ASSERT_TRUE(model.ok());
  auto vocab = text::Vocab::load(**model);
  ASSERT_TRUE(vocab.ok()) << vocab.error().message;
  const std::string stop = text.substr(text.size() / 2, 3);
  json want = {{"model", "stories260K.gguf"}, {"user", user}, {"text", text}, {"max_tokens", n}, {"stop", stop},
               {"before_stop", text.substr(0, text.find(stop))},
               {"prompt_tokens", (*vocab)->tokenize(*prompt, true, true).size()}};
  const std::string dir = node_dir();
  std::ofstream(dir + "/chat_expected.json") << want.dump();
  Server server({"-m", model_path(), "-c", "2048", "--chat-template-file", tmpl_path}, "chat-clients");
  ASSERT_TRUE(server.ok()) << server.log();
  const auto r = testing::run_command("node " + testing::shell_quote(dir + "/chat_clients.mjs") + " " + server.url() +
                                      " " + testing::shell_quote(dir + "/chat_expected.json"));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  std::printf("%s", r.out.c_str());
}

// The same clients on a random-weight model (synth, built-in vocabulary) with the built-in Qwen3
// template: forced calls and JSON-schema answers still validate for 20 seeds each.
TEST(Server, a_random_weight_model_gives_valid_forced_tool_calls_and_json_schema_answers) {
#if STRATA_TEST_TSAN
  GTEST_SKIP() << "over 100 s under TSan (grammar masks per token); the optimized and ASan runs check it, and "
                  "the server's threads are the other server tests'";
#endif
  STRATA_SHARED_FILE(model, "models/synth/llama-dense-f32.gguf");
  json want = {{"model", "llama-dense-f32.gguf"}, {"user", "What is the weather in Paris?"}, {"max_tokens", 24},
               {"sections", {"1", "2", "3", "4"}}};
  const std::string dir = node_dir();
  std::ofstream(dir + "/random_expected.json") << want.dump();
  Server server({"-m", model, "-c", "2048", "--chat-template", "qwen3"}, "chat-clients-random");
  ASSERT_TRUE(server.ok()) << server.log();
  const auto r = testing::run_command("node " + testing::shell_quote(dir + "/chat_clients.mjs") + " " + server.url() +
                                      " " + testing::shell_quote(dir + "/random_expected.json"));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("ok   tool_choice required: 20 seeds"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ok   response_format json_schema: 20 seeds"), std::string::npos) << r.out;
  std::printf("%s", r.out.c_str());
}

std::string trim(std::string s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

// Streamed chat deltas: the concatenation of one delta field.
std::string streamed_field(const std::string& sse, const char* field) {
  std::string out;
  std::istringstream in(sse);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("data: {", 0) != 0) continue;
    const json j = json::parse(line.substr(6), nullptr, false);
    if (j.contains("choices") && !j["choices"].empty()) out += j["choices"][0]["delta"].value(field, "");
  }
  return out;
}

TEST(Server, reasoning_goes_to_reasoning_content_unless_the_format_is_none_or_thinking_is_off) {
  if (model_path().empty()) return;
  // A template whose generation prompt opens a think block (as Qwen3.5 and DeepSeek R1 do).
  const std::string tmpl =
      R"({%- for m in messages -%}{{- '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n' -}}{%- endfor -%})"
      R"({{- '<|im_start|>assistant\n' -}}{%- if enable_thinking -%}{{- '<think>\n' -}})"
      R"({%- else -%}{{- '<think>\n\n</think>\n\n' -}}{%- endif -%})";
  fs::create_directories(kTmp);
  const std::string path = (kTmp / "thinking.jinja").string();
  std::ofstream(path) << tmpl;
  const std::string prompt = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
  const int n = 16;
  const std::string thinking = strata_run(prompt + "<think>\n", n);
  const std::string answer = strata_run(prompt + "<think>\n\n</think>\n\n", n);
  ASSERT_EQ(thinking.find("</think>"), std::string::npos) << "the reference must stay inside the think block";
  json body = {{"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})}, {"max_tokens", n}, {"temperature", 0}};
  {
    Server server({"-m", model_path(), "-c", "1024", "--chat-template-file", path}, "reasoning");
    ASSERT_TRUE(server.ok()) << server.log();
    auto c = server.client();
    int status = 0;
    const json r = json::parse(post(c, "/v1/chat/completions", body, &status), nullptr, false);
    ASSERT_EQ(status, 200) << r.dump();
    EXPECT_EQ(r["choices"][0]["message"].value("reasoning_content", ""), trim(thinking)) << r.dump();
    EXPECT_EQ(r["choices"][0]["message"]["content"], "") << r.dump();
    json streamed = body;
    streamed["stream"] = true;
    const std::string sse = post(c, "/v1/chat/completions", streamed, &status);
    EXPECT_EQ(streamed_field(sse, "reasoning_content"), trim(thinking)) << sse;
    json off = body;
    off["chat_template_kwargs"] = {{"enable_thinking", false}};
    const json r2 = json::parse(post(c, "/v1/chat/completions", off, &status), nullptr, false);
    EXPECT_EQ(r2["choices"][0]["message"]["content"], answer) << r2.dump();
    EXPECT_FALSE(r2["choices"][0]["message"].contains("reasoning_content")) << r2.dump();
  }
  Server none({"-m", model_path(), "-c", "1024", "--chat-template-file", path, "--reasoning-format", "none"}, "reasoning-none");
  ASSERT_TRUE(none.ok()) << none.log();
  auto c = none.client();
  int status = 0;
  const json r = json::parse(post(c, "/v1/chat/completions", body, &status), nullptr, false);
  EXPECT_EQ(r["choices"][0]["message"]["content"], thinking) << r.dump();
  Server off({"-m", model_path(), "-c", "1024", "--chat-template-file", path, "--reasoning-budget", "0"}, "reasoning-off");
  ASSERT_TRUE(off.ok()) << off.log();
  auto c2 = off.client();
  const json r3 = json::parse(post(c2, "/v1/chat/completions", body, &status), nullptr, false);
  EXPECT_EQ(r3["choices"][0]["message"]["content"], answer) << r3.dump();
  // A budget of 4 tokens: the first 4 tokens of the thinking, the message, the close tag (written for
  // the model), then an answer. Anthropic's thinking.budget_tokens does the same per request.
  const std::string four = strata_run(prompt + "<think>\n", 4);
  // (This SentencePiece vocabulary starts a tokenized text with a space, as llama.cpp's does.)
  Server budget({"-m", model_path(), "-c", "1024", "--chat-template-file", path, "--reasoning-budget", "4",
                 "--reasoning-budget-message", "Enough."},
                "reasoning-budget");
  ASSERT_TRUE(budget.ok()) << budget.log();
  auto c3 = budget.client();
  json longer = body;
  longer["max_tokens"] = 40;
  const json r4 = json::parse(post(c3, "/v1/chat/completions", longer, &status), nullptr, false);
  EXPECT_EQ(r4["choices"][0]["message"].value("reasoning_content", ""), trim(four + " Enough.")) << r4.dump();
  EXPECT_NE(r4["choices"][0]["message"]["content"], "") << r4.dump();
  const json a = json::parse(post(c2, "/v1/messages",
                                  {{"max_tokens", 40}, {"temperature", 0}, {"messages", body["messages"]},
                                   {"thinking", {{"type", "enabled"}, {"budget_tokens", 4}}}},
                                  &status),
                             nullptr, false);
  ASSERT_EQ(status, 200) << a.dump();
  ASSERT_GE(a["content"].size(), 2u) << a.dump();
  EXPECT_EQ(a["content"][0]["thinking"], trim(four)) << a.dump();
  EXPECT_EQ(a["content"][1]["type"], "text") << a.dump();
}

// Agents send system notes mid-conversation. Qwen3.6's template renders a system message only first
// and drops the others without a word: the note is merged into the system prompt instead of lost.
TEST(Server, system_notes_inside_the_conversation_reach_the_prompt_when_the_template_drops_them) {
  if (model_path().empty()) return;
  const std::string tmpl = STRATA_SOURCE_DIR "/tests/chat/templates/Qwen3.6.jinja";
  Server server({"-m", model_path(), "-c", "2048", "--chat-template-file", tmpl}, "system-notes");
  ASSERT_TRUE(server.ok()) << server.log();
  auto c = server.client();
  const json user = {{"role", "user"}, {"content", "Hi"}};
  const std::string note = "Available agent types: explore, plan, general-purpose.";
  auto count = [&](const json& messages) {
    int status = 0;
    const json r = json::parse(post(c, "/v1/messages/count_tokens", {{"system", "Be brief."}, {"messages", messages}}, &status),
                               nullptr, false);
    EXPECT_EQ(status, 200) << r.dump();
    return r.value("input_tokens", 0);
  };
  const int without = count(json::array({user}));
  const int with = count(json::array({user, {{"role", "system"}, {"content", note}}}));
  EXPECT_GT(with, without + 20) << "the note's tokens are in the prompt";
  int status = 0;
  post(c, "/v1/messages", {{"max_tokens", 4}, {"messages", json::array({user, {{"role", "system"}, {"content", note}}})}},
       &status);
  EXPECT_EQ(status, 200);
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
  // Any model name is served, as by llama-server: clients and agents send their own names.
  auto other = c.Post("/v1/chat/completions", auth,
                      R"({"model":"gpt-9","messages":[{"role":"user","content":"hi"}],"max_tokens":2})", "application/json");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 200) << other->body;
  EXPECT_EQ(json::parse(other->body, nullptr, false).value("model", ""), "gpt-9") << other->body;
}

TEST(Server, bad_constraints_and_tools_are_refused_naming_the_field_in_each_formats_shape) {
  if (model_path().empty()) return;
  Server server({"-m", model_path(), "-c", "256", "--api-key", "sekrit"}, "bad-apis");
  ASSERT_TRUE(server.ok()) << server.log();
  auto c = server.client();
  const httplib::Headers bearer = {{"Authorization", "Bearer sekrit"}};
  const httplib::Headers x_api_key = {{"x-api-key", "sekrit"}};
  const std::string msgs = R"("messages":[{"role":"user","content":"hi"}])";
  struct Case {
    const char* path;
    std::string body;
    httplib::Headers headers;
    int status;
    const char* param;  // OpenAI's error.param; for Anthropic's shape a fragment of the message
  };
  const std::vector<Case> cases = {
      {"/v1/chat/completions", "{" + msgs + R"(,"grammar":"root ::= ("})", bearer, 400, "grammar"},
      {"/v1/chat/completions", "{" + msgs + R"(,"json_schema":{"type":"object","patternProperties":{}}})", bearer, 400, "json_schema"},
      {"/v1/chat/completions", "{" + msgs + R"(,"tool_choice":"required"})", bearer, 400, "tool_choice"},
      {"/v1/chat/completions", "{" + msgs + R"(,"tools":[{"type":"function","function":{"name":"bad name!"}}]})", bearer, 400, "tools"},
      {"/v1/chat/completions", "{" + msgs + R"(,"response_format":{"type":"json_schema","json_schema":{"schema":{"type":"nonsense"}}}})",
       bearer, 400, "response_format.json_schema.schema"},
      {"/v1/responses", R"({"input":"hi","text":{"format":{"type":"json_schema","schema":{"type":"nonsense"}}}})", bearer, 400,
       "text.format.schema"},
      {"/v1/responses", R"({"input":"hi","previous_response_id":"resp_1"})", bearer, 400, "previous_response_id"},
      {"/v1/messages", "{" + msgs + "}", x_api_key, 400, "max_tokens"},
      {"/v1/messages", "{" + msgs + R"(,"max_tokens":4})", {{"x-api-key", "nope"}}, 401, "API key"},
      {"/v1/messages", "{" + msgs + R"(,"max_tokens":4,"tool_choice":{"type":"tool","name":"nope"},"tools":[{"name":"f","input_schema":{"type":"object"}}]})",
       x_api_key, 400, "tool_choice"},
  };
  for (const Case& k : cases) {
    auto r = c.Post(k.path, k.headers, k.body, "application/json");
    ASSERT_TRUE(r) << k.body;
    EXPECT_EQ(r->status, k.status) << k.body << ": " << r->body;
    const json j = json::parse(r->body, nullptr, false);
    if (std::string(k.path) == "/v1/messages") {
      EXPECT_EQ(j.value("type", ""), "error") << r->body;
      EXPECT_NE(j["error"].value("message", "").find(k.param), std::string::npos) << r->body;
    } else {
      EXPECT_EQ(j["error"]["param"], k.param) << k.body << ": " << r->body;
    }
  }
  // Good requests in both key styles.
  auto good = c.Post("/v1/messages", x_api_key, "{" + msgs + R"(,"max_tokens":2})", "application/json");
  ASSERT_TRUE(good);
  EXPECT_EQ(good->status, 200) << good->body;
  good = c.Post("/v1/responses", bearer, R"({"input":"hi","max_output_tokens":2})", "application/json");
  ASSERT_TRUE(good);
  EXPECT_EQ(good->status, 200) << good->body;
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
  Server server({"-m", model_path(), "-c", "4096", "--rpc", worker->endpoint(), "-ts", "1,1", "--rpc-timeout", "3000",
                 "--failover", "off"},
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
  Server server({"-m", model_path(), "-c", "1024", "--local-workers", "2", "-ts", "1,1,1"}, "web");
  ASSERT_TRUE(server.ok()) << server.log();
  const std::string png = (fs::path(STRATA_BUILD_DIR) / "web-page.png").string();
  const auto r = testing::run_command("node " + testing::shell_quote(dir + "/web_page.mjs") + " " + server.url() + "/ " +
                                      testing::shell_quote(png) + " 3");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(fs::exists(png) && fs::file_size(png) > 10000);
}

}  // namespace
}  // namespace strata
