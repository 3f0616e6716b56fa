// The strata binary end to end: the commands a user types, on the shared models.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <nlohmann/json.hpp>

#include "testing/golden.h"
#include "testing/process.h"
#include "testing/shared_data.h"

namespace strata {
namespace {

using testing::run_command;
using testing::shell_quote;

std::string strata() { return shell_quote(testing::strata_binary()); }

TEST(Cli, run_prints_the_golden_greedy_continuation_of_stories260K) {
  testing::Golden g;
  if (!testing::load_golden("stories260K", g)) return;
  const auto r = run_command(strata() + " run -m " + shell_quote(g.model_path) +
                             " -p 'Once upon a time, there was a little girl named Lily.' -n 32 --temp 0 -t 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(g.json["greedy_text"].get<std::string>()), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("tokens/s"), std::string::npos) << r.err;
}

// --spec-type ngram-simple prints the same text as plain decoding and says what it drafted; a name
// llama.cpp has but Strata does not build is refused by name.
TEST(Cli, run_with_ngram_speculation_prints_the_same_text_and_its_acceptance) {
  STRATA_SHARED_FILE(model, "models/stories260K.gguf");
  const std::string run = strata() + " run -m " + shell_quote(model) + " -p 'Once upon a time' -n 300 --temp 0 -t 1";
  const auto plain = run_command(run);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const auto spec = run_command(run + " --spec-type ngram-simple --spec-ngram-simple-size-n 3");
  ASSERT_EQ(spec.exit_code, 0) << spec.err;
  EXPECT_EQ(spec.out, plain.out);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(spec.err, m, std::regex(R"((\d+) tokens drafted, (\d+) accepted)"))) << spec.err;
  EXPECT_GT(std::stoi(m[2]), 0) << spec.err;
  const auto eagle = run_command(run + " --spec-type draft-eagle3");
  EXPECT_NE(eagle.exit_code, 0);
  EXPECT_NE(eagle.err.find("draft-eagle3"), std::string::npos) << eagle.err;
  const auto bad = run_command(run + " --spec-type ngram-simple --spec-ngram-simple-size-m 0");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--spec-ngram-simple-size-m"), std::string::npos) << bad.err;
}

// bench --spec-draft-n-max times checks of k = 1..N drafted tokens, on a hybrid model with the state
// checkpoint each takes, and reports their cost in decode steps and the speedups they imply.
TEST(Cli, bench_reports_the_cost_of_speculative_checks) {
  STRATA_SHARED_FILE(model, "models/synth/qwen35moe-q4_k_m.gguf");
  const auto r = run_command(strata() + " bench -m " + shell_quote(model) +
                             " -p 0 -n 8 -r 1 -t 1 --spec-draft-n-max 3 -d 16 -o json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto rows = nlohmann::json::parse(r.out);
  ASSERT_EQ(rows.size(), 4u) << r.out;
  for (int k = 1; k <= 3; ++k) {
    const auto& row = rows[k];
    EXPECT_EQ(row["spec_draft_n"].get<int>(), k);
    const double cost = row["check_cost_steps"].get<double>();
    EXPECT_GT(cost, 0.0);
    // At 90% acceptance the speedup is the expected tokens per check over its cost.
    const double tokens = (1 - std::pow(0.9, k + 1)) / 0.1;
    EXPECT_NEAR(row["speedup_at_90"].get<double>(), tokens / cost, 1e-9);
  }
  const auto md = run_command(strata() + " bench -m " + shell_quote(model) + " -p 0 -n 4 -r 1 -t 1 --spec-draft-n-max 1");
  ASSERT_EQ(md.exit_code, 0) << md.err;
  EXPECT_NE(md.out.find("| check k=1 (2 rows) |"), std::string::npos) << md.out;
  EXPECT_NE(run_command(strata() + " bench -m " + shell_quote(model) + " -n 0 --spec-draft-n-max 2").exit_code, 0);
}

// --spec-type draft-mtp: tg on the model alone, then every check twice on an engine with the MTP
// block: verifying only, and drafting its k tokens first (what one draft-mtp step costs).
TEST(Cli, bench_draft_mtp_times_drafting_and_checking_against_plain_decoding) {
  const std::string model = (std::filesystem::temp_directory_path() / "strata-cli-bench-mtp.gguf").string();
  const auto synth = run_command(strata() + " synth --arch qwen35moe --mtp -o " + shell_quote(model));
  ASSERT_EQ(synth.exit_code, 0) << synth.err;
  const std::string bench = strata() + " bench -m " + shell_quote(model) + " -p 0 -n 8 -r 1 -t 1";
  const auto r = run_command(bench + " --spec-type draft-mtp --spec-draft-n-max 2 -o json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto rows = nlohmann::json::parse(r.out);
  ASSERT_EQ(rows.size(), 5u) << r.out;
  EXPECT_EQ(rows[0]["n_gen"].get<int>(), 8);
  EXPECT_FALSE(rows[0].contains("spec_draft_n"));
  for (int i = 1; i < 5; ++i) {
    EXPECT_EQ(rows[i]["spec_draft_n"].get<int>(), (i + 1) / 2) << r.out;
    EXPECT_EQ(rows[i]["spec_type"].get<std::string>(), i % 2 == 0 ? "draft-mtp" : "none") << r.out;
    EXPECT_GT(rows[i]["check_cost_steps"].get<double>(), 0.0);
  }
  EXPECT_NE(r.err.find("MTP block"), std::string::npos) << "the checks ran on an engine with the block";
  const auto md = run_command(bench + " --spec-type draft-mtp --spec-draft-n-max 1");
  ASSERT_EQ(md.exit_code, 0) << md.err;
  EXPECT_NE(md.out.find("| draft-mtp + check k=1 (2 rows) |"), std::string::npos) << md.out;
  // Refused: no checks asked for; a file without the block.
  EXPECT_NE(run_command(bench + " --spec-type draft-mtp").exit_code, 0);
  STRATA_SHARED_FILE(plain, "models/synth/qwen35moe-q4_k_m.gguf");
  const auto none = run_command(strata() + " bench -m " + shell_quote(plain) +
                                " -p 0 -n 4 -r 1 -t 1 --spec-type draft-mtp --spec-draft-n-max 1");
  EXPECT_NE(none.exit_code, 0);
  EXPECT_NE(none.err.find("multi-token-prediction"), std::string::npos) << none.err;
}

// strata plan counts the prompt cache's state checkpoints per node, as strata serve keeps them.
TEST(Cli, plan_shows_the_state_checkpoints_of_a_hybrid_model) {
  STRATA_SHARED_FILE(model, "models/synth/qwen35moe-f32.gguf");
  const std::string plan = strata() + " plan -m " + shell_quote(model) + " -c 4096 -np 2";
  const auto with = run_command(plan + " --ctx-checkpoints 4");
  ASSERT_EQ(with.exit_code, 0) << with.err;
  EXPECT_NE(with.out.find(" ckpt"), std::string::npos) << with.out;
  const auto without = run_command(plan + " -ctxcp 0");
  ASSERT_EQ(without.exit_code, 0) << without.err;
  EXPECT_EQ(without.out.find(" ckpt"), std::string::npos) << without.out;
}

// `strata bench -d N` means what llama-bench's does: the same rows with the same n_prompt, n_gen and
// n_depth, so ../shared/peer/side-by-side.sh pairs them. On a hybrid model each run goes back to the
// depth through a state checkpoint; a depth out of range is refused.
TEST(Cli, bench_with_depth_reports_the_rows_llama_bench_reports) {
  STRATA_SHARED_FILE(model, "models/synth/qwen35moe-q4_k_m.gguf");
  STRATA_SHARED_FILE(llama_run, "peer/llama.cpp/run");
  const std::string flags = " -m " + shell_quote(model) + " -p 16 -n 4 -d 40 -r 1 -t 2 -o json";
  const auto ours = run_command(strata() + " bench" + flags);
  ASSERT_EQ(ours.exit_code, 0) << ours.err;
  auto rows = [](const std::string& out) {
    std::vector<std::array<int, 3>> v;
    for (const auto& r : nlohmann::json::parse(out)) {
      v.push_back({r["n_prompt"].get<int>(), r["n_gen"].get<int>(), r["n_depth"].get<int>()});
      EXPECT_GT(r["avg_ts"].get<double>(), 0.0);
    }
    return v;
  };
  const std::string recorded_path = STRATA_SOURCE_DIR "/tests/cli/llama_bench_depth_rows.json";
  const auto recorded = nlohmann::json::parse(testing::read_text_file(recorded_path))["rows"]
                            .get<std::vector<std::array<int, 3>>>();
  const auto theirs = run_command("bash " + shell_quote(llama_run) + " llama-bench" + flags);
  ASSERT_EQ(theirs.exit_code, 0) << "llama-bench" << flags << ": " << theirs.err;
  EXPECT_EQ(rows(theirs.out), recorded) << recorded_path << " no longer holds what llama-bench prints";
  EXPECT_EQ(rows(ours.out), recorded);
  EXPECT_EQ(rows(ours.out).size(), 2u);
  const auto deep = run_command(strata() + " bench -m " + shell_quote(model) + " -p 16 -n 4 -d 2000000 -r 1");
  EXPECT_NE(deep.exit_code, 0);
  EXPECT_NE(deep.err.find("n-depth"), std::string::npos) << deep.err;
}

// --cache-ram's host copies stay where each node's KV cache and state live: the plan says what a
// kept prefix costs on each node, and that the cache is off at 0.
TEST(Cli, plan_shows_what_the_host_prompt_cache_keeps_on_each_node) {
  STRATA_SHARED_FILE(model, "models/synth/qwen35moe-q4_k_m.gguf");
  auto r = run_command(strata() + " plan -m " + shell_quote(model) + " -c 8192 --cache-ram 512 -ts 1,1 --local-workers 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("host prompt cache (--cache-ram): up to 512 MiB on each node"), std::string::npos) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("\\n  local: [0-9.]+ MiB\\n  127\\.0\\.0\\.1:[0-9]+: [0-9.]+ MiB"))) << r.out;
  r = run_command(strata() + " plan -m " + shell_quote(model) + " --cache-ram 0");
  EXPECT_NE(r.out.find("host prompt cache (--cache-ram): off"), std::string::npos) << r.out;
}

// With workers, strata plan places by the nodes' measured speeds unless flags say otherwise, and
// prints each node's predicted ms per token, the tokens/s and the speeds it used; "-ts auto" is the
// same as no -ts, and a -ts that is neither numbers nor auto is refused by name.
TEST(Cli, plan_predicts_each_nodes_time_per_token_and_ts_auto_places_by_speed) {
  STRATA_SHARED_FILE(model, "models/synth/llama-dense-q4_k_m.gguf");
  const std::string base = strata() + " plan -m " + shell_quote(model) + " -c 512 -t 1 --local-workers 1";
  for (const char* ts : {"", " -ts auto"}) {
    auto r = run_command(base + ts);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(std::regex_search(r.out, std::regex("total / usable +ms/token\\n"))) << r.out;
    EXPECT_TRUE(std::regex_search(r.out, std::regex("\\npredicted: [0-9.]+ tokens/s for one sequence"))) << r.out;
    EXPECT_TRUE(std::regex_search(r.out, std::regex("\\n  speed of 127\\.0\\.0\\.1:[0-9]+ \\(1 threads\\): read [0-9.]+ GB/s; "
                                                     "one-token products F32 [0-9.]+, .*Q6_K [0-9.]+( \\(decoded\\))? GB/s; "
                                                     "(tensor-split slices [^;]+ GB/s \\(decoded\\); )?"
                                                     "attention [0-9.]+ ns per cached K/V element \\+ [0-9.]+ per query head; "
                                                     "delta rule [0-9.]+ ns per state element\\n"))) << r.out;
    EXPECT_TRUE(std::regex_search(r.out, std::regex("\\n  one attention \\+ FFN layer \\(layer 0\\), tokens/s: local [0-9]+, "
                                                     "127\\.0\\.0\\.1:[0-9]+ [0-9]+\\n"))) << r.out;
    EXPECT_NE(r.out.find("decision: -ts auto: the layers split for the least predicted time per token"), std::string::npos)
        << r.out;
  }
  auto r = run_command(base + " -ts 1,1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("decision: -ts 1,1 over"), std::string::npos) << r.out;
  r = run_command(base + " -ts fast");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("fast"), std::string::npos) << r.err;
}

TEST(Cli, info_reads_every_shared_model_and_refuses_gguf_v1) {
  const auto dir = testing::shared_dir() / "models";
  ASSERT_TRUE(std::filesystem::exists(dir)) << "shared test data missing: " << dir;
  int checked = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (entry.path().extension() != ".gguf") continue;
    const auto r = run_command(strata() + " info -m " + shell_quote(entry.path().string()));
    if (entry.path().parent_path().filename() == "legacy") {
      EXPECT_NE(r.exit_code, 0) << entry.path();
      EXPECT_NE(r.err.find("version 1"), std::string::npos) << r.err;
    } else {
      EXPECT_EQ(r.exit_code, 0) << entry.path() << ": " << r.err;
      EXPECT_NE(r.out.find("GGUF version"), std::string::npos);
    }
    ++checked;
  }
  EXPECT_GT(checked, 30);
}

TEST(Cli, eval_json_has_the_documented_fields) {
  testing::Golden g;
  if (!testing::load_golden("stories260K", g)) return;
  const auto r = run_command(strata() + " eval -m " + shell_quote(g.model_path) +
                             " -p 'Once upon a time, there was a little girl named Lily.' --top 3 -n 8 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["prompt_tokens"].get<std::vector<int32_t>>(), g.prompt_tokens);
  ASSERT_EQ(j["top"].size(), g.prompt_tokens.size());
  EXPECT_EQ(j["top"][0].size(), 3u);
  const auto greedy = j["greedy_tokens"].get<std::vector<int32_t>>();
  const auto want = g.json["greedy_tokens"].get<std::vector<int32_t>>();
  ASSERT_EQ(greedy.size(), 8u);
  EXPECT_TRUE(std::equal(greedy.begin(), greedy.end(), want.begin()));
}

TEST(Cli, tokenize_prints_the_prompt_ids_with_bos) {
  STRATA_SHARED_FILE(model, "models/stories260K.gguf");
  const auto r = run_command(strata() + " tokenize -m " + shell_quote(model) +
                             " -p 'Once upon a time, there was a little girl named Lily.'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426]\n");
}

TEST(Cli, perplexity_of_stories260K_matches_llama_perplexity_within_a_tenth_of_a_percent) {
  STRATA_SHARED_FILE(model, "models/stories260K.gguf");
  STRATA_SHARED_FILE(text, "golden/ppl-text.txt");
  STRATA_SHARED_FILE(golden_path, "golden/stories260K.ppl.json");
  const double want = nlohmann::json::parse(testing::read_text_file(golden_path))["ppl"].get<double>();
  const auto r = run_command(strata() + " perplexity -m " + shell_quote(model) + " -f " + shell_quote(text) +
                             " -c 128 -b 128 -t 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto at = r.out.find("PPL = ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const double ppl = std::stod(r.out.substr(at + 6));
  EXPECT_NEAR(ppl, want, want * 0.001) << r.out;
}

TEST(Cli, synth_writes_a_model_that_runs) {
  const auto path = std::filesystem::temp_directory_path() / "strata_cli_synth_test.gguf";
  auto r = run_command(strata() + " synth --arch llama --layers 2 --embd 64 --heads 4 --kv-heads 2 --ff 128 -o " +
                       shell_quote(path.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_command(strata() + " run -m " + shell_quote(path.string()) + " -p 'Once upon a time' -n 8 --temp 0");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("generation: 8 tokens"), std::string::npos) << r.err;
  // Deterministic: the same flags give the same bytes.
  const auto path2 = std::filesystem::temp_directory_path() / "strata_cli_synth_test2.gguf";
  r = run_command(strata() + " synth --arch llama --layers 2 --embd 64 --heads 4 --kv-heads 2 --ff 128 -o " +
                  shell_quote(path2.string()));
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_EQ(testing::read_text_file(path), testing::read_text_file(path2));
  std::filesystem::remove(path);
  std::filesystem::remove(path2);
}

TEST(Cli, quantize_writes_a_file_llama_cpp_would_write_and_refuses_bad_types) {
  STRATA_SHARED_FILE(f32, "models/synth/llama-dense-f32.gguf");
  STRATA_SHARED_FILE(reference, "models/synth/llama-dense-q8_0.gguf");
  const auto out = std::filesystem::temp_directory_path() / "strata_cli_quantize_q8_0.gguf";
  auto r = run_command(strata() + " quantize " + shell_quote(f32) + " " + shell_quote(out.string()) + " Q8_0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(testing::read_text_file(out), testing::read_text_file(reference)) << "differs from llama-quantize's file";
  r = run_command(strata() + " quantize " + shell_quote(f32) + " " + shell_quote(out.string()) + " Q9_9");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_FALSE(r.err.empty());
  std::filesystem::remove(out);
}

TEST(Cli, bad_flags_and_missing_files_give_an_error_and_nonzero_status) {
  for (const std::string args : {"run -m /nonexistent.gguf -p hi", "run", "frobnicate",
                                 "synth --layers 0 -o /tmp/x.gguf", "run -m /dev/null -p hi -n -5"}) {
    const auto r = run_command(strata() + " " + args);
    EXPECT_NE(r.exit_code, 0) << args;
    EXPECT_FALSE(r.err.empty()) << args;
    EXPECT_LT(r.exit_code, 128) << args << " crashed";
  }
}

}  // namespace
}  // namespace strata
