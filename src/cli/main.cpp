// The strata command: one binary, one subcommand per job.
#include <fmt/core.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>

#include "cli/common.h"

namespace {

using strata::cli::llama_short_aliases;

// The command line as typed and as CLI11 gets it: llama.cpp's multi-letter single-dash flags (-ts,
// -ngl, -lv, -fit ...), which CLI11 cannot declare, become their long names.
struct Args {
  std::vector<std::string> typed, translated;
};

Args translate_llama_flags(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    args.typed.push_back(a);
    for (const auto& [alias, name] : llama_short_aliases()) {
      if (a == alias) a = name;
      else if (a.rfind(alias + "=", 0) == 0) a = name + a.substr(alias.size());
    }
    args.translated.push_back(std::move(a));
  }
  return args;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// Every flag name a command accepts, spelled as on a command line (with llama.cpp's short aliases).
std::vector<std::string> flag_names(const CLI::App& cmd) {
  std::vector<std::string> names;
  for (const CLI::Option* o : cmd.get_options()) {
    for (const std::string& s : o->get_snames()) names.push_back("-" + s);
    for (const std::string& l : o->get_lnames()) names.push_back("--" + l);
  }
  for (const auto& [alias, name] : llama_short_aliases()) {
    if (std::find(names.begin(), names.end(), name) != names.end()) names.push_back(alias);
  }
  return names;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& names) {
  const size_t limit = std::clamp<size_t>(word.size() / 3, 1, 3);
  std::string best;
  size_t best_distance = limit + 1;
  for (const std::string& n : names) {
    const size_t d = edit_distance(word, n);
    if (d < best_distance) best_distance = d, best = n;
  }
  return best.empty() ? "" : fmt::format(" (did you mean '{}'?)", best);
}

// The first argument that no command took, in command-line order (CLI11 would list them all, last first).
std::optional<size_t> first_unknown(const CLI::App& app, const Args& args) {
  const std::vector<std::string> rest = app.remaining(true);
  if (rest.empty()) return std::nullopt;
  for (size_t i = 0; i < args.translated.size(); ++i) {
    if (std::find(rest.begin(), rest.end(), args.translated[i]) != rest.end()) return i;
  }
  return 0;
}

// "error: ..." naming the first unknown argument as typed, with a close name when there is one.
int unknown_argument(const CLI::App& app, const CLI::App* cmd, const Args& args, size_t at) {
  const std::string& typed = args.typed[at];
  const bool flag = !typed.empty() && typed[0] == '-' && typed != "-";
  if (!cmd && !flag) {
    std::vector<std::string> commands;
    for (const CLI::App* c : app.get_subcommands({})) commands.push_back(c->get_name());
    fmt::print(stderr, "error: unknown command '{}'{}; see strata --help\n", typed, did_you_mean(typed, commands));
    return 1;
  }
  const std::string where = cmd ? "strata " + cmd->get_name() : "strata";
  if (!flag) {
    fmt::print(stderr, "error: {}: unexpected argument '{}'; see {} --help\n", where, typed, where);
    return 1;
  }
  const std::string name = typed.substr(0, typed.find('='));
  fmt::print(stderr, "error: {}: unknown flag '{}'{}; see {} --help\n", where, name, did_you_mean(name, flag_names(cmd ? *cmd : app)),
             where);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"strata: run GGUF language models across CPU machines"};
  app.set_help_all_flag("--help-all", "help for every subcommand");
  bool verbose = false, quiet = false;
  app.add_flag("-v,--verbose", verbose, "debug logging");
  app.add_flag("-q,--quiet", quiet, "warnings and errors only");
  // Unknown arguments are collected and reported below, the first one by name.
  app.allow_extras();

  using namespace strata::cli;
  std::vector<std::pair<CLI::App*, Command>> commands;
  for (auto add : {add_run, add_serve, add_eval, add_perplexity, add_bench, add_plan, add_worker, add_info, add_tokenize, add_synth, add_quantize}) {
    const size_t before = app.get_subcommands({}).size();
    Command run = add(app);
    CLI::App* cmd = app.get_subcommands({})[before];
    cmd->allow_extras();
    cmd->fallthrough();  // -v and -q after the command name too, as llama.cpp takes them
    commands.emplace_back(cmd, std::move(run));
  }
  const Args args = translate_llama_flags(argc, argv);
  try {
    std::vector<std::string> reversed(args.translated.rbegin(), args.translated.rend());  // CLI11 takes them last first
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  CLI::App* parsed = nullptr;
  for (auto& [cmd, run] : commands) {
    if (cmd->parsed()) parsed = cmd;
  }
  if (auto at = first_unknown(app, args)) return unknown_argument(app, parsed, args, *at);
  if (!parsed) {
    fmt::print(stderr, "error: a command is required; see strata --help\n");
    return 1;
  }
  spdlog::set_default_logger(spdlog::stderr_color_mt("strata"));
  spdlog::set_pattern("%^[%l]%$ %v");
  spdlog::set_level(verbose ? spdlog::level::debug : quiet ? spdlog::level::warn : spdlog::level::info);
  for (auto& [cmd, run] : commands) {
    if (cmd == parsed) return run();
  }
  return 1;
}
