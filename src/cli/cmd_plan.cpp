// strata plan: the placement plan for a model over this machine and the workers, before a byte of
// weights is loaded.
#include <fmt/core.h>

#include "base/system.h"
#include "cli/common.h"

namespace strata::cli {

Command add_plan(CLI::App& app) {
  auto f = std::make_shared<ModelFlags>();
  auto checkpoints = std::make_shared<int32_t>(8);  // strata serve's default, so the plans agree
  CLI::App* cmd = app.add_subcommand("plan", "print where every layer, cache and op would live, then exit");
  add_model_flags(*cmd, *f);
  cmd->add_option("--parallel", f->n_seq, "(-np) parallel sequences")->check(CLI::Range(1, 256));
  cmd->add_option("--ctx-checkpoints,--swa-checkpoints", *checkpoints,
                  "(-ctxcp) recurrent-state checkpoints per slot, as strata serve keeps them")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  return [f, checkpoints]() -> int {
    runtime::LocalWorkers workers;
    auto options = engine_options(*f, workers);
    if (!options.ok()) return fail(options.error());
    options->n_checkpoints = *checkpoints;
    auto model = model::Model::open(f->model);
    if (!model.ok()) return fail(model.error());
    const model::HParams& hp = (*model)->hparams();
    const int32_t threads = f->n_threads > 0 ? f->n_threads : hardware_threads();
    std::vector<plan::Node> nodes = {plan::local_node(threads)};
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
    return 0;
  };
}

}  // namespace strata::cli
