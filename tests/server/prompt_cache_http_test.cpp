// The prompt cache seen by an HTTP client of `strata serve` over two local workers: the second turn of
// a chat reports cached tokens in usage and timings, its answer equals a server's that has no cache
// (cache_prompt: false), /slots shows what each slot keeps and /metrics counts the cached tokens.
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

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
  testing::ServeProcess server({"-m", model, "-c", "2048", "--local-workers", "2"},
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

}  // namespace
}  // namespace strata
