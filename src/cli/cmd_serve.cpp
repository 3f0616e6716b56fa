// strata serve: the OpenAI-compatible server (llama-server's flag names).
#include "cli/common.h"
#include "server/http_server.h"

namespace strata::cli {

Command add_serve(CLI::App& app) {
  struct Flags {
    ModelFlags model;
    server::ServerOptions server;
    bool no_warmup = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("serve", "serve the model over an OpenAI-compatible HTTP API");
  add_model_flags(*cmd, f->model);
  cmd->add_option("--parallel", f->model.n_seq, "(-np) slots: requests decoded together; each gets ctx / np tokens")
      ->capture_default_str()->check(CLI::Range(1, 256));
  cmd->add_option("--host", f->server.host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", f->server.port, "port (0: pick a free one)")->capture_default_str()->check(CLI::Range(0, 65535));
  cmd->add_option("--api-key", f->server.api_key, "require Authorization: Bearer KEY");
  cmd->add_option("--alias", f->server.model_alias, "the model id clients use (default: the file name)");
  cmd->add_flag("--no-warmup", f->no_warmup, "skip the startup decode through every stage");
  cmd->add_option("--threads-http", f->server.http_threads, "HTTP worker threads")->capture_default_str()->check(CLI::Range(1, 256));
  cmd->add_option("--ready-file", f->server.ready_file, "write host:port to this file once ready");
  return [f]() -> int {
    f->server.warmup = !f->no_warmup;
    runtime::LocalWorkers workers;
    auto options = engine_options(f->model, workers);
    if (!options.ok()) return fail(options.error());
    auto s = server::serve(*options, f->server);
    // A local worker that does not exit cleanly (a crash, a sanitizer report) fails the server too.
    const bool workers_clean = workers.stop();
    if (!s.ok()) return fail(s.error());
    return workers_clean ? 0 : 1;
  };
}

}  // namespace strata::cli
