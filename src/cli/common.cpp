#include "cli/common.h"

#include <fmt/core.h>

namespace strata::cli {

runtime::EngineOptions ModelFlags::engine_options() const {
  runtime::EngineOptions o;
  o.model_path = model;
  o.n_ctx = n_ctx;
  o.n_threads = n_threads;
  o.n_batch = n_batch;
  return o;
}

void add_model_flags(CLI::App& cmd, ModelFlags& f, bool with_context) {
  cmd.add_option("-m,--model", f.model, "GGUF model file")->required()->check(CLI::ExistingFile);
  if (with_context) {
    cmd.add_option("-c,--ctx-size", f.n_ctx, "context size in tokens (0: min(4096, training context))")
        ->check(CLI::Range(0, 1 << 24));
    cmd.add_option("-b,--batch-size", f.n_batch, "largest batch of prompt tokens per decode call")
        ->check(CLI::Range(1, 1 << 16));
  }
  cmd.add_option("-t,--threads", f.n_threads, "threads (0: all cores)")->check(CLI::Range(0, 1024));
}

void add_sampling_flags(CLI::App& cmd, sampling::Params& p) {
  cmd.add_option("--temp", p.temp, "temperature; <= 0 is greedy")->capture_default_str();
  cmd.add_option("--top-k", p.top_k, "keep the k most likely tokens (<= 0: all)")->capture_default_str();
  cmd.add_option("--top-p", p.top_p, "nucleus sampling threshold")->capture_default_str();
  cmd.add_option("--min-p", p.min_p, "drop tokens below min-p x the top probability")->capture_default_str();
  cmd.add_option("-s,--seed", p.seed, "random seed (0xFFFFFFFF: random)")->capture_default_str();
  cmd.add_option("--repeat-penalty", p.repeat_penalty, "penalty for repeated tokens")->capture_default_str();
  cmd.add_option("--repeat-last-n", p.penalty_last_n, "tokens considered for penalties (-1: all)")->capture_default_str();
  cmd.add_option("--frequency-penalty", p.frequency_penalty, "frequency penalty")->capture_default_str();
  cmd.add_option("--presence-penalty", p.presence_penalty, "presence penalty")->capture_default_str();
}

int fail(const Error& e) {
  fmt::print(stderr, "error: {}\n", e.message);
  return 1;
}

}  // namespace strata::cli
