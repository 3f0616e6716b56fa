// Flags shared by the subcommands, with llama.cpp's names, and small helpers.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "cli/llama_flags.h"
#include "runtime/engine.h"
#include "runtime/local_workers.h"
#include "runtime/speculative.h"
#include "sampling/sampler.h"

namespace strata::cli {

// Where the model runs: --rpc, -ts, -ngl, -ot, --strict-placement, --local-workers, link security.
struct ClusterFlags {
  std::string rpc;
  std::string tensor_split;
  std::string expert_split = "rows";
  int32_t n_gpu_layers = -1;
  std::vector<std::string> overrides;
  bool strict_placement = false;
  int32_t local_workers = 0;
  std::string local_worker_cpus;  // "1,0.5": CPU time per local worker, in cores
  int32_t worker_threads = 0;
  std::string token, token_file, tls_ca, tls_cert, tls_key;
  int32_t timeout_ms = 30000;
  std::string failover = "replan";
  int32_t recover_timeout_s = 60;
  int32_t depth = 0;  // the context depth -ts auto balances for (bench and plan -d)
};

struct ModelFlags {
  std::string model;
  int32_t n_ctx = 0;
  int32_t n_threads = 0;
  int32_t n_batch = 512;
  int32_t n_seq = 1;
  ClusterFlags cluster;
  LlamaFlags llama;
};

// -m, -c, -t, -b, the cluster flags and llama.cpp's common flags (llama_flags.h)
void add_model_flags(CLI::App& cmd, ModelFlags& f, bool with_context = true);
void add_cluster_flags(CLI::App& cmd, ClusterFlags& f);
// The context depth the plan balances and predicts for (plan -d, serve --n-depth; bench sets it to its -d).
void add_depth_flag(CLI::App& cmd, ClusterFlags& f, const std::string& names);

// Turns flags into engine options, starting --local-workers (kept alive in `workers`). Applies the
// logging flags and prints the notices of flags without effect first.
Result<runtime::EngineOptions> engine_options(const ModelFlags& f, runtime::LocalWorkers& workers);
// Loads the engine (with n_checkpoints recurrent-state checkpoints per sequence, and the MTP block
// when `mtp`); a placement the planner refuses keeps its code, its message says so.
Result<std::unique_ptr<runtime::Engine>> load_engine(const ModelFlags& f, runtime::LocalWorkers& workers,
                                                     int32_t n_checkpoints = 0, bool mtp = false);
// --temp --top-k --top-p --min-p --seed --repeat-penalty --repeat-last-n --frequency-penalty --presence-penalty
void add_sampling_flags(CLI::App& cmd, sampling::Params& p);

// Speculative decoding, with llama-server's names: --spec-type, --spec-draft-n-max, --spec-draft-n-min,
// --spec-draft-p-min, --spec-ngram-simple-size-n, --spec-ngram-simple-size-m, --spec-ngram-simple-min-hits.
struct SpecFlags {
  std::string type = "none";
  runtime::SpecParams params;
};
void add_spec_flags(CLI::App& cmd, SpecFlags& f);
Result<runtime::SpecParams> spec_params(const SpecFlags& f);

// Prints "error: ..." to stderr; returns the exit status for a failure: 2 for
// ErrorCode::kPlacementRefused (--strict-placement), else 1.
int fail(const Error& e);

// Subcommand registration: each returns a callback that runs the parsed command.
using Command = std::function<int()>;
Command add_run(CLI::App& app);
Command add_info(CLI::App& app);
Command add_tokenize(CLI::App& app);
Command add_eval(CLI::App& app);
Command add_perplexity(CLI::App& app);
Command add_synth(CLI::App& app);
Command add_worker(CLI::App& app);
Command add_plan(CLI::App& app);
Command add_serve(CLI::App& app);
Command add_bench(CLI::App& app);
Command add_quantize(CLI::App& app);

}  // namespace strata::cli
