// The strata command: one binary, one subcommand per job.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "cli/common.h"

namespace {

// llama.cpp's multi-letter single-dash flags (-ts, -ngl, -ot, -np), which CLI11 cannot declare, are
// rewritten to their long names so that a llama.cpp command line can be pasted in.
std::vector<std::string> translate_llama_flags(int argc, char** argv) {
  static const std::pair<const char*, const char*> kAliases[] = {
      {"-ts", "--tensor-split"}, {"-ngl", "--n-gpu-layers"}, {"-ot", "--override-tensor"}, {"-np", "--parallel"}};
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    for (const auto& [alias, name] : kAliases) {
      if (a == alias) a = name;
      else if (a.rfind(std::string(alias) + "=", 0) == 0) a = name + a.substr(std::string(alias).size());
    }
    args.push_back(std::move(a));
  }
  std::reverse(args.begin(), args.end());  // CLI11 takes them in reverse order
  return args;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"strata: run GGUF language models across CPU machines"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "help for every subcommand");
  bool verbose = false, quiet = false;
  app.add_flag("-v,--verbose", verbose, "debug logging");
  app.add_flag("-q,--quiet", quiet, "warnings and errors only");

  using namespace strata::cli;
  std::vector<std::pair<CLI::App*, Command>> commands;
  for (auto add : {add_run, add_serve, add_eval, add_perplexity, add_bench, add_plan, add_worker, add_info, add_tokenize, add_synth, add_quantize}) {
    const size_t before = app.get_subcommands({}).size();
    Command run = add(app);
    commands.emplace_back(app.get_subcommands({})[before], std::move(run));
  }
  try {
    std::vector<std::string> args = translate_llama_flags(argc, argv);
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  spdlog::set_default_logger(spdlog::stderr_color_mt("strata"));
  spdlog::set_pattern("%^[%l]%$ %v");
  spdlog::set_level(verbose ? spdlog::level::debug : quiet ? spdlog::level::warn : spdlog::level::info);
  for (auto& [cmd, run] : commands) {
    if (cmd->parsed()) return run();
  }
  return 1;
}
