// llama.cpp command lines pasted into strata: the field report's llama-server line over two workers,
// every accepted flag, the notices of flags without effect, unknown flags and bad values.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "server/serve_process.h"
#include "testing/golden.h"
#include "testing/process.h"
#include "testing/shared_data.h"

namespace strata {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::run_command;
using testing::shell_quote;

std::string strata() { return shell_quote(testing::strata_binary()); }

// A `strata worker` on a free loopback port; its endpoint once it listens.
struct Worker {
  testing::ChildProcess process;
  std::string endpoint;
  std::string log;

  bool start(const std::string& name) {
    const fs::path dir = testing::server_tmp_dir() / name;
    fs::create_directories(dir);
    log = (dir.string() + ".log");
    fs::remove(log);
    if (!testing::ChildProcess::start({testing::strata_binary(), "-q", "worker", "-H", "127.0.0.1", "-p", "0", "-t",
                                       "1", "--cache-dir", dir.string()},
                                      log, process) ||
        !process.wait_for_file(log, 30000)) {
      return false;
    }
    const std::string text = testing::read_text_file(log);
    const std::string prefix = "strata worker listening on ";
    const size_t at = text.find(prefix);
    if (at == std::string::npos) return false;
    endpoint = text.substr(at + prefix.size(), text.find('\n', at) - at - prefix.size());
    return true;
  }
};

// `strata run` at temperature 0 on the prompt the server renders for one user message (ChatML: this
// GGUF has no template).
std::string greedy_chat_reference(const std::string& model, const std::string& user, int n) {
  const std::string prompt = "<|im_start|>user\n" + user + "<|im_end|>\n<|im_start|>assistant\n";
  const auto r =
      run_command(strata() + " -q run -m " + shell_quote(model) + " -c 1024 --temp 0 --no-display-prompt -n " +
                  std::to_string(n) + " -p " + shell_quote(prompt));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::string out = r.out;
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

TEST(LlamaFlags, the_field_reports_llama_server_command_line_serves_over_two_workers) {
  STRATA_SHARED_FILE(model, "models/stories260K.gguf");
  Worker a, b;
  ASSERT_TRUE(a.start("field-worker-a")) << testing::log_tail(a.log);
  ASSERT_TRUE(b.start("field-worker-b")) << testing::log_tail(b.log);
  // GGML_RPC_DEBUG=1 strata serve -m M --rpc A,B -ngl 99 -ts 1,1 -ot "REGEX=RPC0[A]" -c 262144 -t 2 -np 1
  //   -fit off --no-warmup -lv 4
  ::setenv("GGML_RPC_DEBUG", "1", 1);
  testing::ServeProcess server({"-m",
                                model,
                                "--rpc",
                                a.endpoint + "," + b.endpoint,
                                "-ngl",
                                "99",
                                "-ts",
                                "1,1",
                                "-ot",
                                "blk\\.[0-2]\\.=RPC0[" + a.endpoint + "]",
                                "-c",
                                "262144",
                                "-t",
                                "2",
                                "-np",
                                "1",
                                "-fit",
                                "off",
                                "--no-warmup",
                                "-lv",
                                "4"},
                               "field-report");
  ::unsetenv("GGML_RPC_DEBUG");
  ASSERT_TRUE(server.ok()) << server.log();
  const std::string user = "Tell me a story about a dog.";
  auto c = server.client();
  auto r =
      c.Post("/v1/chat/completions",
             json{{"messages", {{{"role", "user"}, {"content", user}}}}, {"max_tokens", 16}, {"temperature", 0}}.dump(),
             "application/json");
  ASSERT_TRUE(r) << server.log();
  ASSERT_EQ(r->status, 200) << r->body;
  const std::string content = json::parse(r->body)["choices"][0]["message"]["content"];
  EXPECT_EQ(content, greedy_chat_reference(model, user, 16));
  const std::string log = server.log();
  EXPECT_NE(log.find("on 3 node(s), context 262144 x 1 seq"), std::string::npos) << log;
  EXPECT_NE(log.find("GGML_RPC_DEBUG is set but not used"), std::string::npos) << log;
  EXPECT_NE(log.find("-fit/--fit has no effect here"), std::string::npos) << log;
  EXPECT_EQ(server.process().stop(), 0) << log;
  EXPECT_EQ(a.process.stop(), 0) << testing::log_tail(a.log);
  EXPECT_EQ(b.process.stop(), 0) << testing::log_tail(b.log);
}

struct FlagCase {
  std::string args;
  std::string notice;  // "" when the flag takes effect, else what its notice line starts with
};

// Model flags, on `strata plan` (which plans and exits).
const FlagCase kModelFlags[] = {
    {"-lv 3", ""},
    {"--verbosity 2", ""},
    {"--log-verbosity 4", ""},
    {"--log-disable", ""},
    {"--log-colors", ""},
    {"--log-colors off", ""},
    {"-ub 64", ""},
    {"--ubatch-size 128", ""},
    {"-ngl 99", ""},
    {"--gpu-layers all", ""},
    {"--n-gpu-layers auto", ""},
    {"-sm layer", ""},
    {"--split-mode layer", ""},
    {"-ctk f16", ""},
    {"--mmap", ""},
    {"-fa", "-fa/--flash-attn has no effect here"},
    {"-fa on", "-fa/--flash-attn has no effect here"},
    {"--flash-attn auto", "-fa/--flash-attn has no effect here"},
    {"-fa 1", "-fa/--flash-attn has no effect here"},
    {"-fit off", "-fit/--fit has no effect here"},
    {"--fit on", "-fit/--fit has no effect here"},
    {"--cache-type-v f16", ""},  // q8_0 / q4_0 need heads of whole blocks: kv_cache_types_test.cpp
    {"--mlock", "--mlock has no effect here"},
    {"--no-mmap", "--no-mmap has no effect here"},
    {"-mg 1", "-mg/--main-gpu has no effect here"},
    {"--main-gpu 0", "-mg/--main-gpu has no effect here"},
    {"-dev CUDA0", "-dev/--device has no effect here"},
    {"--device none", "-dev/--device has no effect here"},
    {"--numa distribute", "--numa has no effect here"},
    {"--prio 2", "--prio has no effect here"},
    {"--poll 0", "--poll has no effect here"},
    {"-cmoe", "-cmoe/--cpu-moe has no effect here"},
    {"--cpu-moe", "-cmoe/--cpu-moe has no effect here"},
    {"-ncmoe 4", "-ncmoe/--n-cpu-moe has no effect here"},
    {"--n-cpu-moe 2", "-ncmoe/--n-cpu-moe has no effect here"},
    {"-tb 4", "-tb/--threads-batch has no effect here"},
    {"-kvo", "-kvo/--kv-offload has no effect here"},
    {"-nkvo", "-nkvo/--no-kv-offload has no effect here"},
    {"--offline", "--offline has no effect here"},
};

// Serve-only flags, on `strata serve` with an address that cannot resolve: it parses, prints its
// notices, then fails to bind before loading anything.
const FlagCase kServeFlags[] = {
    {"--jinja", ""},
    {"-v", ""},
    {"--log-verbose", ""},
    {"-q", ""},
    {"--chat-template chatml", ""},
    {"--chat-template qwen3", ""},
    {"--chat-template llama3", ""},
    {"--chat-template '{{ messages[0].content }}'", ""},
    {"-n 64", ""},
    {"--n-predict -1", ""},
    {"--predict 8", ""},
    {"--ctx-checkpoints 4", ""},
    {"--swa-checkpoints 2", ""},
    {"-ctxcp 3", ""},
    {"-sps 0.1", ""},
    {"--slot-prompt-similarity 0.9", ""},
    {"--cache-ram 0", ""},
    {"-cram -1", ""},
    {"--cache-ram 8192", ""},
    {"--cache-prompt", ""},
    {"--no-cache-prompt", ""},
    {"--metrics", ""},
    {"--slots", ""},
    {"--no-slots", ""},
    {"-a mymodel", ""},
    {"--alias x", ""},
    {"--reasoning-format deepseek", ""},
    {"--reasoning-format none", ""},
    {"--reasoning-budget 0", ""},
    {"--chat-template-kwargs '{\"enable_thinking\": false}'", ""},
    {"-np 2", ""},
    {"--parallel 1", ""},
    {"-cb", ""},
    {"--cont-batching", ""},
    {"--cache-reuse 0", ""},
    {"--no-jinja", "--no-jinja has no effect here"},
    {"--no-cont-batching", "-nocb/--no-cont-batching has no effect here"},
    {"-nocb", "-nocb/--no-cont-batching has no effect here"},
    {"--cache-reuse 256", "--cache-reuse has no effect here"},
    {"--temp 0.7", "--temp has no effect here"},
    {"--top-k 5", "--top-k has no effect here"},
    {"--top-p 0.9", "--top-p has no effect here"},
    {"--min-p 0.1", "--min-p has no effect here"},
    {"-s 7", "--seed has no effect here"},
    {"--repeat-penalty 1.1", "--repeat-penalty has no effect here"},
    {"--repeat-last-n 32", "--repeat-last-n has no effect here"},
    {"--frequency-penalty 0.5", "--frequency-penalty has no effect here"},
    {"--presence-penalty 0.5", "--presence-penalty has no effect here"},
    {"-kvu", "-kvu/--kv-unified has no effect here"},
    {"-no-kvu", ""},
    {"--no-context-shift", ""},
    {"--webui", ""},
    {"--context-shift", "--context-shift has no effect here"},
    {"--no-webui", "--no-webui has no effect here"},
};

TEST(LlamaFlags, every_accepted_flag_parses_and_each_flag_without_effect_prints_one_notice) {
  STRATA_SHARED_FILE(model, "models/stories260K.gguf");
  const std::string m = " -m " + shell_quote(model) + " ";
  for (const FlagCase& f : kModelFlags) {
    const auto r = run_command(strata() + " plan" + m + f.args);
    EXPECT_EQ(r.exit_code, 0) << f.args << ": " << r.err;
    EXPECT_NE(r.out.find("decision:"), std::string::npos) << f.args;
    const std::string notice = "[info] " + f.notice;
    if (f.notice.empty()) {
      EXPECT_EQ(r.err.find("has no effect here"), std::string::npos) << f.args << ": " << r.err;
    } else {
      EXPECT_NE(r.err.find(notice), std::string::npos) << f.args << ": " << r.err;
    }
  }
  for (const FlagCase& f : kServeFlags) {
    const auto r = run_command(strata() + " serve --host 999.1.1.1" + m + f.args);
    EXPECT_EQ(r.exit_code, 1) << f.args;
    EXPECT_NE(r.err.find("cannot resolve '999.1.1.1'"), std::string::npos) << f.args << ": " << r.err;
    if (f.notice.empty()) {
      EXPECT_EQ(r.err.find("has no effect here"), std::string::npos) << f.args << ": " << r.err;
    } else {
      EXPECT_NE(r.err.find("[info] " + f.notice), std::string::npos) << f.args << ": " << r.err;
    }
  }
  // The notices come once each, however many flags are given.
  const auto r = run_command(strata() + " plan" + m + "-fa on -fit off -mg 0 --mlock");
  for (const char* n : {"-fa/--flash-attn has", "-fit/--fit has", "-mg/--main-gpu has", "--mlock has"}) {
    const size_t first = r.err.find(n);
    EXPECT_NE(first, std::string::npos) << n;
    EXPECT_EQ(r.err.find(n, first + 1), std::string::npos) << n << " twice";
  }
}

TEST(LlamaFlags, logging_flags_set_the_level_the_file_and_silence) {
  STRATA_SHARED_FILE(model, "models/stories260K.gguf");
  const std::string run = strata() + " run -m " + shell_quote(model) + " -p Once -n 2 --temp 0 ";
  // -c 4096 is over the model's training context: a warning.
  auto r = run_command(run + "-c 4096 -lv 3");
  EXPECT_NE(r.err.find("[info] sampling:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("[warning] context 4096 exceeds"), std::string::npos) << r.err;
  r = run_command(run + "-c 4096 -lv 2");
  EXPECT_EQ(r.err.find("[info]"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("[warning] context 4096 exceeds"), std::string::npos) << r.err;
  r = run_command(run + "-c 4096 -lv 1");
  EXPECT_EQ(r.err.find("[warning]"), std::string::npos) << r.err;
  r = run_command(run + "-lv 4");
  EXPECT_NE(r.err.find("[info] sampling:"), std::string::npos) << r.err;
  r = run_command(run + "--log-disable -lv 4");
  EXPECT_EQ(r.err.find("[info]"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("generation: 2 tokens"), std::string::npos) << "the run's own report is not a log line";
  // stderr is a pipe here: colours only when asked for.
  r = run_command(run + "--log-colors on");
  EXPECT_NE(r.err.find("\x1b["), std::string::npos) << r.err;
  for (const char* mode : {"off", "auto"}) {
    r = run_command(run + "--log-colors " + mode);
    EXPECT_EQ(r.err.find("\x1b["), std::string::npos) << mode << ": " << r.err;
  }
  const fs::path file = fs::temp_directory_path() / "strata_cli_log_file_test.log";
  fs::remove(file);
  r = run_command(run + "--log-file " + shell_quote(file.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(testing::read_text_file(file).find("[info] sampling:"), std::string::npos);
  fs::remove(file);
}

TEST(LlamaFlags, an_unknown_flag_is_named_first_with_a_close_name) {
  STRATA_SHARED_FILE(model, "models/stories260K.gguf");
  const std::string m = " -m " + shell_quote(model) + " ";
  struct Case {
    std::string args, error;
  };
  const Case cases[] = {
      {"serve" + m + "-c 64 --bogus-one 3 --bogus-two", "strata serve: unknown flag '--bogus-one'"},
      {"serve" + m + "--ctx-chekpoints 3", "unknown flag '--ctx-chekpoints' (did you mean '--ctx-checkpoints'?)"},
      {"serve" + m + "-lvv 4 -fit off", "unknown flag '-lvv' (did you mean '-lv'?)"},
      {"run" + m + "-p hi --tmp 0", "strata run: unknown flag '--tmp' (did you mean '--temp'?)"},
      {"plan" + m + "--rcp 127.0.0.1:1", "strata plan: unknown flag '--rcp' (did you mean '--rpc'?)"},
      {"serve" + m + "--flash-atn=on", "unknown flag '--flash-atn' (did you mean '--flash-attn'?)"},
      {"worker -fit off", "strata worker: unknown flag '-fit'"},
      {"serve" + m + "stray", "strata serve: unexpected argument 'stray'"},
      {"serve" + m + "-t 2 --bogus-one 2", "strata serve: unknown flag '--bogus-one'"},
      {"serve" + m + "-t 2 -fit off 2", "strata serve: unexpected argument '2'"},
      {"srve" + m, "unknown command 'srve' (did you mean 'serve'?)"},
  };
  for (const Case& c : cases) {
    const auto r = run_command(strata() + " " + c.args);
    EXPECT_EQ(r.exit_code, 1) << c.args;
    EXPECT_NE(r.err.find("error: "), std::string::npos) << c.args << ": " << r.err;
    EXPECT_NE(r.err.find(c.error), std::string::npos) << c.args << ": " << r.err;
    EXPECT_EQ(r.err.find("bogus-two"), std::string::npos) << "only the first unknown flag: " << r.err;
    EXPECT_EQ(r.err.find("were not expected"), std::string::npos) << r.err;
  }
}

TEST(LlamaFlags, bad_values_are_refused_naming_the_flag) {
  STRATA_SHARED_FILE(model, "models/stories260K.gguf");
  const std::string m = " -m " + shell_quote(model) + " ";
  struct Case {
    std::string args, error;
  };
  const Case cases[] = {
      {"plan" + m + "-fit maybe", "--fit"},
      {"plan" + m + "-fa sometimes", "--flash-attn"},
      {"plan" + m + "-lv x", "--verbosity"},
      {"plan" + m + "-lv -1", "--verbosity"},
      {"plan" + m + "-ctk q9", "--cache-type-k"},
      {"plan" + m + "-ctv f8", "--cache-type-v"},
      {"plan" + m + "-ub 0", "--ubatch-size"},
      {"plan" + m + "-ngl many", "--n-gpu-layers"},
      {"plan" + m + "-sm tensor", "-sm tensor splits every layer over several nodes; give workers with --rpc"},
      {"plan" + m + "-sm row", "-sm row: Strata splits rows within layers as -sm tensor does; use -sm tensor"},
      {"plan" + m + "-sm diagonal", "--split-mode"},
      {"plan" + m + "--numa everywhere", "--numa"},
      {"plan" + m + "--prio 9", "--prio"},
      {"plan" + m + "--poll 101", "--poll"},
      {"plan" + m + "--log-colors purple", "--log-colors"},
      {"plan" + m + "--log-file /dev/null/x.log", "--log-file /dev/null/x.log: cannot open it"},
      {"serve" + m + "--reasoning-format xml", "--reasoning-format"},
      {"serve" + m + "--reasoning-budget -2", "--reasoning-budget"},
      {"serve" + m + "--chat-template-kwargs '[1]'", "--chat-template-kwargs: must be a JSON object"},
      {"serve" + m + "--chat-template-kwargs '{\"a\":'", "--chat-template-kwargs: not valid JSON"},
      {"serve" + m + "--chat-template-kwargs '" + std::string(40, '[') + std::string(40, ']') + "'",
       "--chat-template-kwargs: nested deeper"},
      {"serve" + m + "--chat-template-file /nonexistent.jinja",
       "--chat-template-file /nonexistent.jinja: not a readable"},
      {"serve" + m + "--chat-template llama9", "--chat-template: 'llama9' is neither a built-in template name"},
      {"serve" + m + "--chat-template '{% if %}'", "--chat-template: the template does not parse"},
      {"serve" + m + "--cache-ram -2", "--cache-ram"},
      {"serve" + m + "--ctx-checkpoints -1", "--ctx-checkpoints"},
      {"serve" + m + "-n -5", "--n-predict"},
      {"serve" + m + "-np 0", "--parallel"},
  };
  for (const Case& c : cases) {
    const auto r = run_command(strata() + " " + c.args);
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_LT(r.exit_code, 128) << c.args << " crashed";
    EXPECT_NE(r.err.find(c.error), std::string::npos) << c.args << ": " << r.err;
  }
}

// The demo's model is the shared stories260K, byte for byte, and scripts/demo.sh's run of it over two
// local workers writes the greedy English the single-node golden output has.
TEST(Demo, the_repositorys_model_is_stories260K_and_speaks_across_three_nodes) {
  testing::Golden g;
  if (!testing::load_golden("stories260K", g)) return;
  const fs::path repo_model = fs::path(STRATA_SOURCE_DIR) / "models" / "stories260K.gguf";
  ASSERT_TRUE(fs::exists(repo_model)) << repo_model;
  EXPECT_EQ(testing::read_text_file(repo_model), testing::read_text_file(g.model_path));
  const auto r = run_command(strata() + " run -m " + shell_quote(repo_model.string()) +
                             " --local-workers 2 -ngl 99 -ts 1,1 -c 512 -n 32 --temp 0 -t 2"
                             " -p 'Once upon a time, there was a little girl named Lily.'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("on 3 node(s)"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find(g.json["greedy_text"].get<std::string>()), std::string::npos) << r.out;
}

}  // namespace
}  // namespace strata
