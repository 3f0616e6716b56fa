// llama.cpp's common flags (common/arg.cpp names), so a llama-server or llama-cli command line runs as
// pasted. Flags with a meaning here take effect; flags that cannot apply on a cluster of CPUs (GPU and
// device choice, flash attention, fitting) are accepted and print one notice each saying why.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"

namespace strata::cli {

struct LlamaFlags {
  // Logging (these take effect)
  int32_t verbosity = -1;    // -lv: llama's scale, 0 output, 1 error, 2 warning, 3 info, 4 debug, 5+ trace; -1 unset
  std::string log_file;      // --log-file: an extra file sink
  bool log_disable = false;  // --log-disable: no log at all
  std::string log_colors;    // --log-colors on|off|auto; empty: unset
  int32_t n_ubatch = 0;      // -ub: caps -b (both are the largest batch one decode call takes); 0 unset
  std::string cache_type_k = "f16", cache_type_v = "f16";  // -ctk / -ctv: f16, q8_0 or q4_0 (checked)

  // Accepted for compatibility; each one given prints why it has no effect here.
  std::string flash_attn, fit, split_mode = "layer", numa, device;
  int32_t main_gpu = 0, prio = 0, poll = 50, n_cpu_moe = 0, threads_batch = 0;
  bool mlock = false, no_mmap = false, mmap = false, cpu_moe = false, kv_offload = false, no_kv_offload = false;
  bool offline = false;

  // For each accepted flag without effect: its option and the notice (empty: none for this value).
  std::vector<std::pair<CLI::Option*, std::function<std::string()>>> notices;
};

// Adds the flags above to a model command (run, serve, eval, perplexity, bench, plan).
void add_llama_flags(CLI::App& cmd, LlamaFlags& f);

// -lv / --log-file / --log-disable / --log-colors on the default logger, and the -sm check; an error
// names the flag.
Status apply_llama_flags(const LlamaFlags& f);

// One info line per given flag that has no effect here, named as llama.cpp spells it ("-fa/--flash-attn").
void print_notices(const std::vector<std::pair<CLI::Option*, std::function<std::string()>>>& notices);
// One info line for GGML_RPC_DEBUG in the environment, which nothing here reads.
void print_environment_notices();

// llama.cpp's multi-letter single-dash names (-ngl, -lv, -fit, ...), which CLI11 cannot declare,
// with the long names main() rewrites them to before parsing.
const std::vector<std::pair<std::string, std::string>>& llama_short_aliases();

}  // namespace strata::cli
