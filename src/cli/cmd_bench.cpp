// strata bench: pp and tg tokens/s in the spirit of llama-bench (same JSON field names).
#include <fmt/core.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <ctime>
#include <filesystem>

#include "base/system.h"
#include "cli/common.h"
#include "gguf/names.h"
#include "runtime/bench.h"

namespace strata::cli {

Command add_bench(CLI::App& app) {
  struct Flags {
    ModelFlags model;
    int32_t n_prompt = 512;
    int32_t n_gen = 128;
    int32_t n_depth = 0;
    int32_t repetitions = 5;
    std::string output = "md";
    bool roofline = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("bench", "prompt processing and generation speed (llama-bench style)");
  add_model_flags(*cmd, f->model, false);
  cmd->add_option("-p,--n-prompt", f->n_prompt, "prompt tokens (0: skip pp)")->capture_default_str()->check(CLI::Range(0, 1 << 16));
  cmd->add_option("-n,--n-gen", f->n_gen, "generated tokens (0: skip tg)")->capture_default_str()->check(CLI::Range(0, 1 << 16));
  cmd->add_option("-d,--n-depth", f->n_depth, "tokens already in the context before each test (llama-bench's n_depth)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("-r,--repetitions", f->repetitions, "repetitions")->capture_default_str()->check(CLI::Range(1, 1000));
  cmd->add_option("-o,--output", f->output, "md or json")->capture_default_str()->check(CLI::IsMember({"md", "json"}));
  cmd->add_flag("--roofline", f->roofline, "measure read bandwidth and print the decode upper bound");
  return [f]() -> int {
    f->model.n_ctx = std::max(f->n_prompt, f->n_gen) + 1 + f->n_depth;
    f->model.n_batch = std::max(1, f->n_prompt);
    runtime::LocalWorkers workers;
    // Each test goes back to its depth through a state checkpoint on recurrent models.
    auto engine = load_engine(f->model, workers, f->n_depth > 0 ? 1 : 0);
    if (!engine.ok()) return fail(engine.error());
    runtime::Engine& e = **engine;
    const model::Model& m = e.model();
    std::vector<runtime::BenchResult> results;
    if (f->n_prompt > 0) {
      auto r = runtime::bench_prompt(e, f->n_prompt, f->repetitions, f->n_depth);
      if (!r.ok()) return fail(r.error());
      results.push_back(*r);
    }
    if (f->n_gen > 0) {
      auto r = runtime::bench_generation(e, f->n_gen, f->repetitions, f->n_depth);
      if (!r.ok()) return fail(r.error());
      results.push_back(*r);
    }
    uint64_t model_size = 0;
    for (const auto& t : m.all_infos()) model_size += t.nbytes;
    const uint64_t per_token = runtime::bytes_read_per_token(m);
    const std::string key(gguf::names::kFileType);
    const auto file_type = m.file().get_int(key);
    const std::string type = m.file().has(key) ? fmt::format("file_type {}", file_type.ok() ? *file_type : -1) : "?";
    double bandwidth = 0;
    if (f->roofline) {
      auto bw = runtime::measure_read_bandwidth(e.n_threads());
      if (!bw.ok()) return fail(bw.error());
      bandwidth = *bw;
    }
    const std::string nodes = fmt::format("{}", e.plan().nodes.size());
    if (f->output == "json") {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& r : results) {
        nlohmann::json j = {{"build_commit", "strata"}, {"cpu_info", fmt::format("{}", fmt::join(cpu_features(), " "))},
                            {"backends", "CPU"}, {"model_filename", m.file().path()},
                            {"model_type", m.hparams().arch + " " + type}, {"model_size", model_size},
                            {"model_n_params", m.n_params()}, {"model_n_params_active", m.n_active_params()},
                            {"n_batch", f->model.n_batch}, {"n_ubatch", f->model.n_batch}, {"n_threads", e.n_threads()},
                            {"n_nodes", e.plan().nodes.size()}, {"type_k", f->model.llama.cache_type_k}, {"type_v", f->model.llama.cache_type_v},
                            {"n_prompt", r.n_prompt}, {"n_gen", r.n_gen}, {"n_depth", r.n_depth}, {"test_time", std::time(nullptr)},
                            {"avg_ns", r.avg_ns()}, {"stddev_ns", r.stddev_ns()}, {"avg_ts", r.avg_ts()},
                            {"stddev_ts", r.stddev_ts()}, {"samples_ns", r.samples_ns}};
        if (f->roofline && r.n_gen > 0) {
          j["read_bandwidth_bytes_per_s"] = bandwidth;
          j["bytes_per_token"] = per_token;
          j["roofline_ts"] = bandwidth / per_token;
          j["roofline_pct"] = 100.0 * r.avg_ts() / (bandwidth / per_token);
        }
        out.push_back(j);
      }
      fmt::print("{}\n", out.dump(2));
      return 0;
    }
    fmt::print("| model | size | params | active | type | threads | nodes | test | t/s |\n");
    fmt::print("| --- | ---: | ---: | ---: | --- | ---: | ---: | --- | ---: |\n");
    for (const auto& r : results) {
      fmt::print("| {} | {:.2f} MiB | {:.2f} M | {:.2f} M | {} | {} | {} | {} | {:.2f} ± {:.2f} |\n",
                 std::filesystem::path(m.file().path()).filename().string(), model_size / 1048576.0,
                 m.n_params() / 1e6, m.n_active_params() / 1e6, type, e.n_threads(), nodes, r.test, r.avg_ts(),
                 r.stddev_ts());
    }
    if (f->roofline) {
      for (const auto& r : results) {
        if (r.n_gen == 0) continue;
        const double bound = bandwidth / per_token;
        fmt::print("\nroofline: read bandwidth {:.1f} GB/s ({} threads), {:.1f} MB read per token -> at most {:.1f} t/s; "
                   "{} reached {:.1f} t/s = {:.0f}% of the bound\n",
                   bandwidth / 1e9, e.n_threads(), per_token / 1e6, bound, r.test, r.avg_ts(), 100.0 * r.avg_ts() / bound);
      }
    }
    return 0;
  };
}

}  // namespace strata::cli
