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
#include "tensor/node_speed.h"

namespace strata::cli {

namespace {

// What every row of the report says about the model and the run.
struct Report {
  const runtime::Engine* engine = nullptr;
  const ModelFlags* flags = nullptr;
  uint64_t model_size = 0, per_token = 0;
  std::string type;
  double bandwidth = 0;  // --roofline
};

Report describe(const runtime::Engine& e, const ModelFlags& flags) {
  const model::Model& m = e.model();
  Report r;
  r.engine = &e;
  r.flags = &flags;
  for (const auto& t : m.all_infos()) r.model_size += t.nbytes;
  r.per_token = runtime::bytes_read_per_token(m);
  const std::string key(gguf::names::kFileType);
  const auto file_type = m.file().get_int(key);
  r.type = m.file().has(key) ? fmt::format("file_type {}", file_type.ok() ? *file_type : -1) : "?";
  return r;
}

// The one-token generation result the checks compare with.
const runtime::BenchResult* generation_of(const std::vector<runtime::BenchResult>& results) {
  for (const auto& r : results) {
    if (r.n_gen > 0 && r.rows_per_step == 1) return &r;
  }
  return nullptr;
}

constexpr double kAcceptance[] = {0.5, 0.7, 0.9};

void print_json(const Report& rep, const std::vector<runtime::BenchResult>& results, bool roofline) {
  const runtime::Engine& e = *rep.engine;
  const model::Model& m = e.model();
  const runtime::BenchResult* generation = generation_of(results);
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : results) {
    nlohmann::json j = {{"build_commit", "strata"}, {"cpu_info", fmt::format("{}", fmt::join(cpu_features(), " "))},
                        {"backends", "CPU"}, {"model_filename", m.file().path()},
                        {"model_type", m.hparams().arch + " " + rep.type}, {"model_size", rep.model_size},
                        {"model_n_params", m.n_params()}, {"model_n_params_active", m.n_active_params()},
                        {"n_batch", rep.flags->n_batch}, {"n_ubatch", rep.flags->n_batch}, {"n_threads", e.n_threads()},
                        {"n_nodes", e.plan().nodes.size()}, {"type_k", rep.flags->llama.cache_type_k},
                        {"type_v", rep.flags->llama.cache_type_v}, {"n_prompt", r.n_prompt}, {"n_gen", r.n_gen},
                        {"n_depth", r.n_depth}, {"test_time", std::time(nullptr)}, {"avg_ns", r.avg_ns()},
                        {"stddev_ns", r.stddev_ns()}, {"avg_ts", r.avg_ts()}, {"stddev_ts", r.stddev_ts()},
                        {"samples_ns", r.samples_ns}};
    if (r.rows_per_step > 1 && generation) {
      const int32_t k = r.rows_per_step - 1;
      const double cost = runtime::check_cost(r, *generation);
      j["spec_draft_n"] = k;
      j["spec_type"] = r.draft_mtp ? "draft-mtp" : "none";
      j["check_cost_steps"] = cost;
      for (double a : kAcceptance) j["speedup_at_" + fmt::format("{:.0f}", 100 * a)] = runtime::implied_speedup(cost, k, a);
    } else if (roofline && r.n_gen > 0) {
      j["read_bandwidth_bytes_per_s"] = rep.bandwidth;
      j["bytes_per_token"] = rep.per_token;
      j["roofline_ts"] = rep.bandwidth / rep.per_token;
      j["roofline_pct"] = 100.0 * r.avg_ts() / (rep.bandwidth / rep.per_token);
    }
    out.push_back(j);
  }
  fmt::print("{}\n", out.dump(2));
}

void print_markdown(const Report& rep, const std::vector<runtime::BenchResult>& results, bool roofline) {
  const runtime::Engine& e = *rep.engine;
  const model::Model& m = e.model();
  fmt::print("| model | size | params | active | type | threads | nodes | test | t/s |\n");
  fmt::print("| --- | ---: | ---: | ---: | --- | ---: | ---: | --- | ---: |\n");
  for (const auto& r : results) {
    if (r.rows_per_step > 1) continue;
    fmt::print("| {} | {:.2f} MiB | {:.2f} M | {:.2f} M | {} | {} | {} | {} | {:.2f} ± {:.2f} |\n",
               std::filesystem::path(m.file().path()).filename().string(), rep.model_size / 1048576.0,
               m.n_params() / 1e6, m.n_active_params() / 1e6, rep.type, e.n_threads(), e.plan().nodes.size(), r.test,
               r.avg_ts(), r.stddev_ts());
  }
  const runtime::BenchResult* generation = generation_of(results);
  if (roofline && generation) {
    const double bound = rep.bandwidth / rep.per_token;
    fmt::print("\nroofline: read bandwidth {:.1f} GB/s ({} threads), {:.1f} MB read per token -> at most {:.1f} t/s; "
               "{} reached {:.1f} t/s = {:.0f}% of the bound\n",
               rep.bandwidth / 1e9, e.n_threads(), rep.per_token / 1e6, bound, generation->test, generation->avg_ts(),
               100.0 * generation->avg_ts() / bound);
  }
  bool header = false;
  for (const auto& r : results) {
    if (r.rows_per_step == 1 || !generation) continue;
    if (!header) {
      fmt::print("\nspeculative checks against one decode step ({}; speedup if each drafted token is kept with "
                 "probability a; drafting counted in the draft-mtp rows):\n\n| test | ms per check | cost in steps | a = 50% | a = 70% | "
                 "a = 90% |\n| --- | ---: | ---: | ---: | ---: | ---: |\n", generation->test);
      header = true;
    }
    const int32_t k = r.rows_per_step - 1;
    const double cost = runtime::check_cost(r, *generation);
    fmt::print("| {} | {:.3f} | {:.2f} |", r.test, r.avg_ns() / r.n_gen / 1e6, cost);
    for (double a : kAcceptance) fmt::print(" {:.2f}x |", runtime::implied_speedup(cost, k, a));
    fmt::print("\n");
  }
}

struct BenchFlags {
  ModelFlags model;
  int32_t n_prompt = 512;
  int32_t n_gen = 128;
  int32_t n_depth = 0;
  int32_t repetitions = 5;
  std::string output = "md";
  bool roofline = false;
  int32_t spec_n_max = 0;
  std::string spec_type = "none";
};

// Checks of k = 1..--spec-draft-n-max drafted tokens (with `draft_mtp`, each drafted first).
Status run_checks(runtime::Engine& e, const BenchFlags& f, bool draft_mtp, std::vector<runtime::BenchResult>& results) {
  for (int32_t k = 1; k <= f.spec_n_max; ++k) {
    for (bool drafts : {false, true}) {
      if (drafts && !draft_mtp) continue;
      STRATA_ASSIGN(runtime::BenchResult r, runtime::bench_check(e, k, f.n_gen, f.repetitions, f.n_depth, drafts));
      results.push_back(std::move(r));
    }
  }
  return {};
}

// pp and tg, and the checks unless they draft with the MTP block (which needs an engine of its own).
Status run_tests(runtime::Engine& e, const BenchFlags& f, std::vector<runtime::BenchResult>& results) {
  if (f.n_prompt > 0) {
    STRATA_ASSIGN(runtime::BenchResult r, runtime::bench_prompt(e, f.n_prompt, f.repetitions, f.n_depth));
    results.push_back(std::move(r));
  }
  if (f.n_gen > 0) {
    STRATA_ASSIGN(runtime::BenchResult r, runtime::bench_generation(e, f.n_gen, f.repetitions, f.n_depth));
    results.push_back(std::move(r));
  }
  if (f.spec_type == "draft-mtp") return {};
  return run_checks(e, f, false, results);
}

}  // namespace

Command add_bench(CLI::App& app) {
  auto f = std::make_shared<BenchFlags>();
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
  cmd->add_option("--spec-draft-n-max", f->spec_n_max,
                  "also time speculative checks of k = 1..N drafted tokens against one decode step (-n checks each)")
      ->capture_default_str()->check(CLI::Range(0, 16));
  cmd->add_option("--spec-type", f->spec_type,
                  "none, or draft-mtp: the checks also draft with the model's MTP block (loaded for them alone, so "
                  "pp and tg run without it)")
      ->capture_default_str()->check(CLI::IsMember({"none", "draft-mtp"}));
  return [f]() -> int {
    const bool mtp = f->spec_type == "draft-mtp";
    if (f->spec_n_max > 0 && f->n_gen == 0) return fail(make_error("--spec-draft-n-max needs -n > 0"));
    if (mtp && f->spec_n_max == 0) return fail(make_error("--spec-type draft-mtp times checks: give --spec-draft-n-max"));
    f->model.n_ctx = std::max(f->n_prompt, f->n_gen * (f->spec_n_max + 1)) + 1 + f->n_depth;
    f->model.n_batch = std::max({1, f->n_prompt, f->spec_n_max + 1});
    f->model.cluster.depth = f->n_depth;  // -ts auto balances, and the plan predicts, at the tests' depth
    runtime::LocalWorkers workers;
    // Each test goes back to its depth through a state checkpoint on recurrent models, and a check
    // takes one before it.
    const int32_t n_checkpoints = (f->n_depth > 0 ? 1 : 0) + (f->spec_n_max > 0 ? 1 : 0);
    auto engine = load_engine(f->model, workers, n_checkpoints);
    if (!engine.ok()) return fail(engine.error());
    std::vector<runtime::BenchResult> results;
    if (auto s = run_tests(**engine, *f, results); !s) return fail(s.error());
    if (mtp) {  // the block mirrors every batch: pp and tg above ran without it, as plain decoding does
      engine->reset();
      engine = load_engine(f->model, workers, n_checkpoints, true);
      if (!engine.ok()) return fail(engine.error());
      if (auto s = run_checks(**engine, *f, true, results); !s) return fail(s.error());
    }
    runtime::Engine& e = **engine;
    Report report = describe(e, f->model);
    if (f->roofline) {
      auto bw = tensor::measure_read_bandwidth(e.n_threads());
      if (!bw.ok()) return fail(bw.error());
      report.bandwidth = *bw;
    }
    if (f->output == "json") {
      print_json(report, results, f->roofline);
    } else {
      print_markdown(report, results, f->roofline);
    }
    return 0;
  };
}

}  // namespace strata::cli
