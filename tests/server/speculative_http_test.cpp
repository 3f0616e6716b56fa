// `strata serve --spec-type ...`: answers are the greedy text `strata run` gives without speculation,
// each answer's timings carry llama-server's draft_n / draft_n_accepted, and /metrics counts the same
// drafts; without a --spec-type the fields are absent, as in llama-server.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "serve_process.h"
#include "testing/process.h"
#include "testing/shared_data.h"

namespace strata {
namespace {

using nlohmann::json;

std::string strata_run(const std::string& model, const std::string& prompt, int n) {
  const auto r = testing::run_command(testing::shell_quote(testing::strata_binary()) + " -q run -m " +
                                      testing::shell_quote(model) + " -c 1024 --temp 0 --no-display-prompt -n " +
                                      std::to_string(n) + " -p " + testing::shell_quote(prompt));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::string out = r.out;
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

double metric(const std::string& text, const std::string& name) {
  std::smatch m;
  const std::regex line("\n" + name + " ([0-9.e+]+)");
  return std::regex_search(text, m, line) ? std::stod(m[1]) : -1;
}

TEST(ServerSpeculation, answers_are_strata_runs_greedy_text_with_draft_timings_and_metrics) {
  STRATA_SHARED_FILE(model, "models/stories260K.gguf");
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog ran to the", "Lily and Tom"};
  constexpr int kTokens = 48;
  std::vector<std::string> want;
  for (const std::string& p : prompts) want.push_back(strata_run(model, p, kTokens));

  testing::ServeProcess server({"-m", model, "-c", "2048", "--parallel", "3", "--spec-type", "ngram-simple",
                                "--spec-ngram-simple-size-n", "1", "--spec-ngram-simple-size-m", "4"},
                               "speculation");
  ASSERT_TRUE(server.ok()) << server.log();
  std::vector<json> answers(prompts.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < prompts.size(); ++i) {
    clients.emplace_back([&, i] {
      auto c = server.client();
      const json body = {{"prompt", prompts[i]}, {"max_tokens", kTokens}, {"temperature", 0}};
      auto r = c.Post("/v1/completions", body.dump(), "application/json");
      if (r && r->status == 200) answers[i] = json::parse(r->body, nullptr, false);
    });
  }
  for (auto& t : clients) t.join();
  int64_t drafted = 0, kept = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_TRUE(answers[i].is_object()) << "request " << i << " failed: " << server.log();
    EXPECT_EQ(answers[i]["choices"][0]["text"], want[i]) << prompts[i];
    const json& t = answers[i]["timings"];
    ASSERT_TRUE(t.contains("draft_n") && t.contains("draft_n_accepted")) << t.dump();
    EXPECT_LE(t["draft_n_accepted"].get<int64_t>(), t["draft_n"].get<int64_t>());
    drafted += t["draft_n"].get<int64_t>();
    kept += t["draft_n_accepted"].get<int64_t>();
  }
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, drafted);
  auto c = server.client();
  auto m = c.Get("/metrics");
  ASSERT_TRUE(m && m->status == 200);
  EXPECT_EQ(metric(m->body, "strata_spec_decode_num_draft_tokens_total"), static_cast<double>(drafted)) << m->body;
  EXPECT_EQ(metric(m->body, "strata_spec_decode_num_accepted_tokens_total"), static_cast<double>(kept));
  EXPECT_GT(metric(m->body, "strata_spec_decode_num_drafts_total"), 0);
  EXPECT_NE(m->body.find("strata_spec_decode_num_accepted_tokens_per_pos_total{position=\"0\"}"), std::string::npos);
}

TEST(ServerSpeculation, without_a_spec_type_the_timings_have_no_draft_fields) {
  STRATA_SHARED_FILE(model, "models/stories260K.gguf");
  testing::ServeProcess server({"-m", model, "-c", "512"}, "no-speculation");
  ASSERT_TRUE(server.ok()) << server.log();
  auto c = server.client();
  const json body = {{"prompt", "Once"}, {"max_tokens", 4}};
  auto r = c.Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(r && r->status == 200);
  const json t = json::parse(r->body)["timings"];
  EXPECT_TRUE(t.contains("predicted_n")) << t.dump();
  EXPECT_FALSE(t.contains("draft_n")) << t.dump();
}

TEST(ServerSpeculation, draft_mtp_on_a_model_without_the_block_stops_startup_naming_it) {
  STRATA_SHARED_FILE(model, "models/stories260K.gguf");
  testing::ServeProcess server({"-m", model, "-c", "512", "--spec-type", "draft-mtp"}, "mtp-missing");
  EXPECT_FALSE(server.ok());
  EXPECT_EQ(server.process().wait_exit(30000), 1);
  EXPECT_NE(server.log().find("draft-mtp"), std::string::npos) << server.log();
}

}  // namespace
}  // namespace strata
