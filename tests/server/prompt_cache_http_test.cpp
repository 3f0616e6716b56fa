// The prompt cache seen by an HTTP client of `strata serve` over two local workers: the second turn of
// a chat reports cached tokens in usage and timings, its answer equals a server's that has no cache
// (cache_prompt: false), /slots shows what each slot keeps and /metrics counts the cached tokens. An
// agent's side requests between its turns (-np 1) leave its conversation in host memory (--cache-ram).
// A saved slot (POST /slots/0?action=save) resumes in a restarted server.
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

#include "server/serve_process.h"
#include "testing/shared_data.h"

namespace strata {
namespace {

using nlohmann::json;

json post_chat(httplib::Client& c, const json& body) {
  auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
  EXPECT_TRUE(r) << "no answer";
  if (!r) return json::object();
  EXPECT_EQ(r->status, 200) << r->body;
  return json::parse(r->body, nullptr, false);
}

json chat_body(const json& messages, bool cache) {
  return {{"messages", messages}, {"max_tokens", 10}, {"temperature", 0}, {"logprobs", true}, {"top_logprobs", 2},
          {"cache_prompt", cache}};
}

TEST(PromptCacheHttp, second_turn_reports_cached_tokens_and_matches_an_uncached_answer) {
  STRATA_SHARED_FILE(model, "models/synth/qwen35moe-f32.gguf");
  testing::ServeProcess server({"-m", model, "-c", "2048", "--local-workers", "2", "-ts", "1,1,1"},
                               "prompt-cache-http");
  ASSERT_TRUE(server.ok()) << server.log();
  httplib::Client c = server.client();
  std::string system = "You are a careful assistant.";
  for (int i = 0; i < 12; ++i) system += " Rule " + std::to_string(i) + ": keep answers short.";
  json messages = json::array({{{"role", "system"}, {"content", system}}, {{"role", "user"}, {"content", "Hello!"}}});
  const json turn1 = post_chat(c, chat_body(messages, true));
  ASSERT_TRUE(turn1.contains("usage")) << turn1.dump();
  const int n1 = turn1["usage"]["prompt_tokens"];
  EXPECT_EQ(turn1["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  messages.push_back({{"role", "assistant"}, {"content", turn1["choices"][0]["message"]["content"]}});
  messages.push_back({{"role", "user"}, {"content", "Tell me more."}});
  const json turn2 = post_chat(c, chat_body(messages, true));
  const int cached = turn2["usage"]["prompt_tokens_details"]["cached_tokens"];
  EXPECT_GE(cached, n1 * 9 / 10) << turn2["usage"].dump();
  EXPECT_EQ(turn2["timings"]["cache_n"], cached);
  EXPECT_EQ(turn2["timings"]["prompt_n"].get<int>() + cached, turn2["usage"]["prompt_tokens"].get<int>());

  auto slots = c.Get("/slots");
  ASSERT_TRUE(slots);
  const json s = json::parse(slots->body);
  ASSERT_EQ(s.size(), 1u) << slots->body;
  EXPECT_GT(s[0]["n_cached_tokens"].get<int>(), cached);
  EXPECT_FALSE(s[0]["checkpoints"].empty());

  const json uncached = post_chat(c, chat_body(messages, false));
  EXPECT_EQ(uncached["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(uncached["choices"][0]["message"], turn2["choices"][0]["message"]);
  EXPECT_EQ(uncached["choices"][0]["logprobs"], turn2["choices"][0]["logprobs"]) << "cached logits differ";

  auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("strata_prompt_tokens_cached_total " + std::to_string(cached)), std::string::npos)
      << metrics->body;
}

// A coding agent's pattern with one slot: before every turn a side request with another system prompt
// (a title, a summary) takes the slot. With --cache-ram the conversation waits in host memory and each
// turn computes only its new tokens; without it every turn starts over. Answers equal a fresh
// server's that caches nothing.
TEST(PromptCacheHttp, side_requests_between_turns_leave_the_conversation_in_host_memory) {
  STRATA_SHARED_FILE(model, "models/synth/qwen35moe-f32.gguf");
  std::string system = "You are a coding agent.";
  for (int i = 0; i < 40; ++i) system += " Rule " + std::to_string(i) + ": read the file before you edit it.";
  // Runs three turns, each after a side request; returns each turn's answer.
  auto agent = [&](httplib::Client& c, bool cache, std::vector<int>* cached_share) {
    json messages = json::array({{{"role", "system"}, {"content", system}}, {{"role", "user"}, {"content", "Fix the bug."}}});
    std::vector<json> answers;
    int previous = 0;
    for (int turn = 0; turn < 3; ++turn) {
      json side = json::array({{{"role", "system"}, {"content", "Write a five-word title for this conversation."}},
                               {{"role", "user"}, {"content", "Turn " + std::to_string(turn) + " of a bug fix."}}});
      post_chat(c, chat_body(side, cache));
      const json r = post_chat(c, chat_body(messages, cache));
      if (!r.contains("usage")) return answers;
      if (cached_share && turn > 0) {
        cached_share->push_back(100 * r["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>() / previous);
      }
      previous = r["usage"]["prompt_tokens"];
      answers.push_back(r["choices"][0]);
      messages.push_back({{"role", "assistant"}, {"content", r["choices"][0]["message"]["content"]}});
      messages.push_back({{"role", "user"}, {"content", "Now run the tests, turn " + std::to_string(turn) + "."}});
    }
    return answers;
  };
  std::vector<int> kept, lost;
  std::vector<json> with_cache, fresh;
  {
    testing::ServeProcess server({"-m", model, "-c", "4096", "-np", "1", "--cache-ram", "64", "--local-workers", "2", "-ts", "1,1,1"},
                                 "agent-host-cache");
    ASSERT_TRUE(server.ok()) << server.log();
    httplib::Client c = server.client();
    with_cache = agent(c, true, &kept);
    auto metrics = c.Get("/metrics");
    ASSERT_TRUE(metrics);
    EXPECT_NE(metrics->body.find("strata_host_cache_restored_total 2"), std::string::npos) << metrics->body;
  }
  {
    testing::ServeProcess server({"-m", model, "-c", "4096", "-np", "1", "--cache-ram", "0", "--local-workers", "2", "-ts", "1,1,1"},
                                 "agent-no-host-cache");
    ASSERT_TRUE(server.ok()) << server.log();
    httplib::Client c = server.client();
    agent(c, true, &lost);
    fresh = agent(c, false, nullptr);
  }
  ASSERT_EQ(kept.size(), 2u);
  ASSERT_EQ(lost.size(), 2u);
  for (int share : kept) EXPECT_GE(share, 90) << "percent of the previous turn's prompt reused";
  for (int share : lost) EXPECT_LT(share, 50) << "without --cache-ram the side request evicts the conversation";
  ASSERT_EQ(with_cache.size(), fresh.size());
  for (size_t i = 0; i < fresh.size(); ++i) {
    EXPECT_EQ(with_cache[i]["message"], fresh[i]["message"]) << "turn " << i;
    EXPECT_EQ(with_cache[i]["logprobs"], fresh[i]["logprobs"]) << "turn " << i << ": logits after a restore differ";
  }
}

json post_slot(httplib::Client& c, const std::string& query, const json& body, int* status) {
  auto r = c.Post("/slots/0?" + query, body.dump(), "application/json");
  *status = r ? r->status : -1;
  return r ? json::parse(r->body, nullptr, false) : json();
}

// Save, stop the server (and its workers), start it again, restore: the next turn computes only its
// new tokens and answers as a server that never stopped; a file from another plan is refused by name.
TEST(PromptCacheHttp, a_saved_slot_resumes_in_a_restarted_server_computing_only_new_tokens) {
  STRATA_SHARED_FILE(model, "models/synth/qwen35moe-f32.gguf");
  const std::filesystem::path dir = testing::server_tmp_dir() / "slot-files";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::vector<std::string> flags = {"-m", model, "-c", "2048", "-np", "1", "--local-workers", "2", "-ts", "1,1,1",
                                          "--slot-save-path", dir.string()};
  std::string system = "You are a careful assistant.";
  for (int i = 0; i < 20; ++i) system += " Rule " + std::to_string(i) + ": keep answers short.";
  json messages = json::array({{{"role", "system"}, {"content", system}}, {{"role", "user"}, {"content", "Hello!"}}});
  int status = 0;
  int n1 = 0;
  {
    testing::ServeProcess first(flags, "slot-save");
    ASSERT_TRUE(first.ok()) << first.log();
    httplib::Client c = first.client();
    const json turn1 = post_chat(c, chat_body(messages, true));
    n1 = turn1["usage"]["prompt_tokens"];
    messages.push_back({{"role", "assistant"}, {"content", turn1["choices"][0]["message"]["content"]}});
    const json saved = post_slot(c, "action=save", {{"filename", "chat.bin"}}, &status);
    ASSERT_EQ(status, 200) << saved.dump();
    EXPECT_GT(saved["n_saved"].get<int>(), n1) << saved.dump();
    EXPECT_EQ(saved["n_written"].get<uint64_t>(), std::filesystem::file_size(dir / "chat.bin"));
    EXPECT_EQ(post_slot(c, "action=save", {{"filename", "../chat.bin"}}, &status)["error"]["param"], "filename");
    EXPECT_EQ(status, 400);
  }
  messages.push_back({{"role", "user"}, {"content", "Tell me more."}});
  testing::ServeProcess second(flags, "slot-restore");
  ASSERT_TRUE(second.ok()) << second.log();
  httplib::Client c = second.client();
  const json restored = post_slot(c, "action=restore", {{"filename", "chat.bin"}}, &status);
  ASSERT_EQ(status, 200) << restored.dump();
  const json turn2 = post_chat(c, chat_body(messages, true));
  const int cached = turn2["usage"]["prompt_tokens_details"]["cached_tokens"];
  EXPECT_GE(cached, n1 * 9 / 10) << turn2["usage"].dump();
  EXPECT_EQ(turn2["timings"]["prompt_n"].get<int>(), turn2["usage"]["prompt_tokens"].get<int>() - cached);
  const json uncached = post_chat(c, chat_body(messages, false));
  EXPECT_EQ(uncached["choices"][0]["message"], turn2["choices"][0]["message"]);
  EXPECT_EQ(uncached["choices"][0]["logprobs"], turn2["choices"][0]["logprobs"]) << "logits after a restore differ";
  const json erased = post_slot(c, "action=erase", json::object(), &status);
  EXPECT_EQ(status, 200) << erased.dump();
  EXPECT_GT(erased["n_erased"].get<int>(), 0);
  EXPECT_EQ(post_slot(c, "action=restore", {{"filename", "none.bin"}}, &status).contains("error"), true);
  EXPECT_EQ(status, 404);

  std::vector<std::string> other = flags;
  other[3] = "4096";  // another context: another plan
  testing::ServeProcess third(other, "slot-other-plan");
  ASSERT_TRUE(third.ok()) << third.log();
  httplib::Client c3 = third.client();
  const json refused = post_slot(c3, "action=restore", {{"filename", "chat.bin"}}, &status);
  EXPECT_EQ(status, 400) << refused.dump();
  EXPECT_NE(refused["error"]["message"].get<std::string>().find("another model or plan"), std::string::npos) << refused.dump();
}

}  // namespace
}  // namespace strata
