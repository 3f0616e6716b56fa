// `strata serve`: the OpenAI-compatible HTTP API over the engine and its cluster.
#pragma once

#include <string>

#include "runtime/engine.h"

namespace strata::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int32_t port = 8080;
  std::string api_key;       // empty: no authentication
  std::string model_alias;   // the model id clients use (default: the file name)
  bool warmup = true;
  int32_t http_threads = 32;  // each open client connection holds one
  std::string ready_file;    // written with "host:port" once ready (tests, scripts)
};

// Opens the port (serving /health as 503 while loading), loads the engine, warms every stage up,
// then serves until SIGINT/SIGTERM. A load or warm-up failure is returned as an error.
Status serve(const runtime::EngineOptions& engine_options, const ServerOptions& options);

}  // namespace strata::server
