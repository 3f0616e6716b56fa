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
      if (a == alias) {
        a = name;
      } else if (a.rfind(alias + "=", 0) == 0) {
        a = name + a.substr(alias.size());
      }
    }
    args.translated.push_back(std::move(a));
  }
  return args;
}

// Edits (insert, delete, substitute, swap two neighbours) that turn a into b.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);  // two neighbours swapped
      }
    }
  }
  return d[a.size()][b.size()];
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
  const size_t limit = std::clamp<size_t>(word.size() / 4, 1, 3);
  std::string best;
  size_t best_distance = limit + 1;
  for (const std::string& n : names) {
    const size_t d = edit_distance(word, n);
    if (d < best_distance) best_distance = d, best = n;
  }
  return best.empty() ? "" : fmt::format(" (did you mean '{}'?)", best);
}

// The first argument that no command took, as typed. CLI11 keeps them in command-line order (it
// would list them all, last first); only flags were translated, so only a flag needs mapping back.
std::optional<std::string> first_unknown(const CLI::App& app, const Args& args) {
  const std::vector<std::string> rest = app.remaining(true);
  if (rest.empty()) return std::nullopt;
  const std::string& first = rest.front();
  if (first.empty() || first[0] != '-') return first;
  for (size_t i = 0; i < args.translated.size(); ++i) {
    if (args.translated[i] == first) return args.typed[i];
  }
  return first;
}

// "error: ..." naming the first unknown argument, with a close name when there is one.
int unknown_argument(const CLI::App& app, const CLI::App* cmd, const std::string& typed) {
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
  const std::string close = did_you_mean(name, flag_names(cmd ? *cmd : app));
  fmt::print(stderr, "error: {}: unknown flag '{}'{}; see {} --help\n", where, name, close, where);
  return 1;
}

// A value CLI11 refused ("--fit: maybe not in {on,off}"), with the command and the flag as llama.cpp
// spells it when that is how it was typed.
int bad_value(const CLI::App& app, const Args& args, std::string message) {
  for (const auto& pair : llama_short_aliases()) {
    const std::string& alias = pair.first;  // clang 14 cannot capture a structured binding in a lambda
    const std::string& name = pair.second;
    const bool typed = std::any_of(args.typed.begin(), args.typed.end(),
                                   [&](const std::string& a) { return a == alias || a.rfind(alias + "=", 0) == 0; });
    if (typed && message.rfind(name + ":", 0) == 0) message = alias + "/" + message;
  }
  std::string where = "strata";
  for (const CLI::App* c : app.get_subcommands({})) {
    if (c->parsed()) where += " " + c->get_name();
  }
  fmt::print(stderr, "error: {}: {}; see {} --help\n", where, message, where);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"strata: run GGUF language models across CPU machines"};
  app.set_help_all_flag("--help-all", "help for every subcommand");
  bool verbose = false, quiet = false;
  app.add_flag("-v,--verbose,--log-verbose", verbose, "debug logging (also after the command, as in llama.cpp)");
  app.add_flag("-q,--quiet", quiet, "warnings and errors only");
  // Unknown arguments are collected and reported below, the first one by name.
  app.allow_extras();

  using namespace strata::cli;
  std::vector<std::pair<CLI::App*, Command>> commands;
  for (auto add : {add_run, add_serve, add_eval, add_perplexity, add_bench, add_plan, add_worker, add_info,
                   add_tokenize, add_synth, add_quantize}) {
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
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return bad_value(app, args, e.what());
  }
  CLI::App* parsed = nullptr;
  for (auto& [cmd, run] : commands) {
    if (cmd->parsed()) parsed = cmd;
  }
  if (auto typed = first_unknown(app, args)) return unknown_argument(app, parsed, *typed);
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
