// The strata command: one binary, one subcommand per job.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "cli/common.h"

int main(int argc, char** argv) {
  CLI::App app{"strata: run GGUF language models across CPU machines"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "help for every subcommand");
  bool verbose = false, quiet = false;
  app.add_flag("-v,--verbose", verbose, "debug logging");
  app.add_flag("-q,--quiet", quiet, "warnings and errors only");

  using namespace strata::cli;
  std::vector<std::pair<CLI::App*, Command>> commands;
  for (auto add : {add_run, add_info, add_tokenize, add_eval, add_perplexity, add_synth}) {
    const size_t before = app.get_subcommands({}).size();
    Command run = add(app);
    commands.emplace_back(app.get_subcommands({})[before], std::move(run));
  }
  try {
    app.parse(argc, argv);
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
