// strata plan: the placement plan for a model over this machine and the workers, before a byte of
// weights is loaded.
#include <fmt/core.h>

#include "base/system.h"
#include "cli/common.h"

namespace strata::cli {

namespace {

// What --cache-ram keeps on each node: a kept prompt prefix stays where its KV cache and state live.
void print_host_cache(const model::Model& model, const plan::Plan& p, int64_t cache_ram_mib, int32_t checkpoints) {
  if (cache_ram_mib == 0) return fmt::print("host prompt cache (--cache-ram): off\n");
  const std::string limit = cache_ram_mib < 0 ? "a quarter of its free memory" : fmt::format("{} MiB", cache_ram_mib);
  fmt::print("host prompt cache (--cache-ram): up to {} on each node; a kept 1k-token prefix takes\n", limit);
  const int32_t n_ckpt = model.hparams().has_recurrent_layers() ? checkpoints : 0;
  for (size_t n = 0; n < p.node_stages.size() && n < p.nodes.size(); ++n) {
    const uint64_t bytes = model::stash_bytes(model.hparams(), model.architecture(), p.node_stages[n], 1024, n_ckpt);
    fmt::print("  {}: {:.1f} MiB\n", p.nodes[n].name,
               static_cast<double>(bytes) / (1 << 20));
  }
}

}  // namespace

Command add_plan(CLI::App& app) {
  auto f = std::make_shared<ModelFlags>();
  auto checkpoints = std::make_shared<int32_t>(8);  // strata serve's default, so the plans agree
  auto cache_ram = std::make_shared<int64_t>(8192);  // strata serve's --cache-ram default (MiB)
  CLI::App* cmd = app.add_subcommand("plan", "print where every layer, cache and op would live, then exit");
  add_model_flags(*cmd, *f);
  cmd->add_option("--parallel", f->n_seq, "(-np) parallel sequences")->check(CLI::Range(1, 256));
  cmd->add_option("--ctx-checkpoints,--swa-checkpoints", *checkpoints,
                  "(-ctxcp) recurrent-state checkpoints per slot, as strata serve keeps them")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--cache-ram", *cache_ram, "(-cram) MiB of host memory per node for kept prompt prefixes, as strata serve")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{-1}, int64_t{1} << 40));
  add_depth_flag(*cmd, f->cluster, "-d,--n-depth");
  return [f, checkpoints, cache_ram]() -> int {
    runtime::LocalWorkers workers;
    auto options = engine_options(*f, workers);
    if (!options.ok()) return fail(options.error());
    options->n_checkpoints = *checkpoints;
    auto model = model::Model::open(f->model);
    if (!model.ok()) return fail(model.error());
    const model::HParams& hp = (*model)->hparams();
    const int32_t threads = f->n_threads > 0 ? f->n_threads : hardware_threads();
    std::vector<plan::Node> nodes = {runtime::this_machine(threads, !options->cluster.workers.empty())};
    for (const std::string& endpoint : options->cluster.workers) {
      auto worker = runtime::connector(options->cluster)(endpoint);
      if (!worker.ok()) return fail(worker.error());
      auto node = runtime::worker_node(**worker, options->cluster);
      if (!node.ok()) return fail(node.error());
      nodes.push_back(std::move(*node));
    }
    const plan::Request request = runtime::plan_request(*options, hp);
    auto p = plan::make_plan(**model, nodes, request);
    if (!p.ok()) return fail(p.error());
    fmt::print("model: {} ({}), {} layers, {} params ({} active per token), context {} x {} seq\n\n", hp.name, hp.arch,
               hp.n_layer, (*model)->n_params(), (*model)->n_active_params(), request.n_ctx / request.n_seq, request.n_seq);
    fmt::print("{}", plan::render(*p));
    print_host_cache(**model, *p, *cache_ram, *checkpoints);
    return 0;
  };
}

}  // namespace strata::cli
