// strata worker: serve pipeline stages to coordinators.
#include "cli/common.h"
#include "net/model_identity.h"
#include "net/worker_service.h"

namespace strata::cli {

Command add_worker(CLI::App& app) {
  auto o = std::make_shared<net::WorkerOptions>();
  auto token_file = std::make_shared<std::string>();
  o->cache_dir = default_cache_dir();
  CLI::App* cmd = app.add_subcommand("worker", "serve pipeline stages to coordinators over gRPC");
  cmd->add_option("-H,--host", o->host, "address to listen on")->capture_default_str();
  cmd->add_option("-p,--port", o->port, "port (0: pick a free one; the chosen port is printed)")
      ->capture_default_str()->check(CLI::Range(0, 65535));
  cmd->add_option("-t,--threads", o->threads, "threads (0: all cores)")->check(CLI::Range(0, 1024));
  cmd->add_option("--token", o->security.token, "shared token coordinators must present");
  cmd->add_option("--token-file", *token_file, "read the token from a file")->check(CLI::ExistingFile);
  cmd->add_option("--tls-cert", o->security.tls_cert, "server certificate (PEM)")->check(CLI::ExistingFile);
  cmd->add_option("--tls-key", o->security.tls_key, "server key (PEM)")->check(CLI::ExistingFile);
  cmd->add_option("--tls-ca", o->security.tls_ca, "CA (PEM) for client certificates and next-stage links")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--insecure", o->insecure, "allow a non-loopback address without a token");
  cmd->add_option("--cache-dir", o->cache_dir, "where received weights are kept")->capture_default_str();
  cmd->add_option("--model-dir", o->model_dir, "folder of local GGUF files (matched by content hash)");
  cmd->add_option("--max-context", o->max_context, "refuse stages asking for more context per sequence (0: any)")
      ->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--max-sessions", o->max_sessions, "coordinators served at once")
      ->capture_default_str()->check(CLI::Range(1, 1024));
  cmd->add_option("--session-timeout", o->session_timeout_s, "free a session not heard from for this many s")
      ->capture_default_str()->check(CLI::Range(1, 86400));
  return [o, token_file]() -> int {
    if (!token_file->empty()) {
      auto token = net::read_token_file(*token_file);
      if (!token.ok()) return fail(token.error());
      o->security.token = *token;
    }
    auto s = net::run_worker(*o);
    return s.ok() ? 0 : fail(s.error());
  };
}

}  // namespace strata::cli
