// strata plan: the placement plan for a model over this machine and the workers, before a byte of
// weights is loaded.
#include <fmt/core.h>

#include "base/system.h"
#include "cli/common.h"
#include "net/remote_node.h"

namespace strata::cli {

Command add_plan(CLI::App& app) {
  auto f = std::make_shared<ModelFlags>();
  CLI::App* cmd = app.add_subcommand("plan", "print where every layer, cache and op would live, then exit");
  add_model_flags(*cmd, *f);
  cmd->add_option("--parallel", f->n_seq, "(-np) parallel sequences")->check(CLI::Range(1, 256));
  return [f]() -> int {
    runtime::LocalWorkers workers;
    auto options = engine_options(*f, workers);
    if (!options.ok()) return fail(options.error());
    auto model = model::Model::open(f->model);
    if (!model.ok()) return fail(model.error());
    const model::HParams& hp = (*model)->hparams();
    const int32_t threads = f->n_threads > 0 ? f->n_threads : hardware_threads();
    std::vector<plan::Node> nodes = {plan::local_node(threads)};
    for (const std::string& endpoint : options->cluster.workers) {
      auto link = net::RemoteNode::connect(endpoint, options->cluster.security, options->cluster.timeout_ms);
      if (!link.ok()) return fail(link.error());
      auto facts = (*link)->hello();
      if (!facts.ok()) return fail(facts.error());
      nodes.push_back(plan::worker_node(endpoint, facts->memory_available,
                                        f->cluster.worker_threads > 0 ? f->cluster.worker_threads : facts->threads));
    }
    plan::Request request;
    request.n_ctx = f->n_ctx > 0 ? f->n_ctx : std::min<int32_t>(4096, hp.n_ctx_train);
    request.n_seq = f->n_seq;
    request.n_batch = f->n_batch;
    request.tensor_split = options->cluster.tensor_split;
    request.n_gpu_layers = options->cluster.n_gpu_layers;
    request.overrides = options->cluster.overrides;
    request.strict_placement = options->cluster.strict_placement;
    plan::PlanErrorKind kind = plan::PlanErrorKind::kNone;
    auto p = plan::make_plan(**model, nodes, request, &kind);
    if (!p.ok()) {
      fmt::print(stderr, "error: {}\n", p.error().message);
      return kind == plan::PlanErrorKind::kStrictPlacement ? 2 : 1;
    }
    fmt::print("model: {} ({}), {} layers, {} params ({} active per token), context {} x {} seq\n\n", hp.name, hp.arch,
               hp.n_layer, (*model)->n_params(), (*model)->n_active_params(), request.n_ctx / request.n_seq, request.n_seq);
    fmt::print("{}", plan::render(*p));
    return 0;
  };
}

}  // namespace strata::cli
