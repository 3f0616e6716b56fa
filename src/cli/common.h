// Flags shared by the subcommands, with llama.cpp's names, and small helpers.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "runtime/engine.h"
#include "sampling/sampler.h"

namespace strata::cli {

struct ModelFlags {
  std::string model;
  int32_t n_ctx = 0;
  int32_t n_threads = 0;
  int32_t n_batch = 512;
  runtime::EngineOptions engine_options() const;
};

// -m, -c, -t, -b
void add_model_flags(CLI::App& cmd, ModelFlags& f, bool with_context = true);
// --temp --top-k --top-p --min-p --seed --repeat-penalty --repeat-last-n --frequency-penalty --presence-penalty
void add_sampling_flags(CLI::App& cmd, sampling::Params& p);

// Prints "error: ..." to stderr; returns the exit status for a failure.
int fail(const Error& e);

// Subcommand registration: each returns a callback that runs the parsed command.
using Command = std::function<int()>;
Command add_run(CLI::App& app);
Command add_info(CLI::App& app);
Command add_tokenize(CLI::App& app);
Command add_eval(CLI::App& app);
Command add_perplexity(CLI::App& app);
Command add_synth(CLI::App& app);

}  // namespace strata::cli
