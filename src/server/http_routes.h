// `strata serve`: the OpenAI-compatible HTTP API over the engine and its cluster. This file routes each
// request to its handler; reading requests off the sockets is http_framing's.
#pragma once

#include <string>

#include "runtime/engine.h"
#include "runtime/speculative.h"

namespace strata::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int32_t port = 8080;
  std::string api_key;       // empty: no authentication
  std::string model_alias;   // the model id clients use (default: the file name)
  bool warmup = true;
  int32_t http_threads = 32;  // each open client connection holds one
  std::string ready_file;    // written with "host:port" once ready (tests, scripts)

  // Prompt cache (llama-server's flags): a slot keeps its tokens and caches after a request.
  bool cache_prompt = true;        // the default of a request's cache_prompt field
  int32_t ctx_checkpoints = 8;     // --ctx-checkpoints: recurrent-state checkpoints kept per slot
  double slot_prompt_similarity = 0.5;  // --slot-prompt-similarity: share of a prompt a slot's cache must hold
  int64_t cache_ram_mib = 8192;    // --cache-ram: host memory for evicted prefixes (0: off)
  int32_t n_predict = -1;          // -n: a request's max_tokens when it sets none (-1: no limit)

  // Chat: template choice, reasoning and the endpoints llama-server can switch off.
  std::string chat_template;         // --chat-template: a built-in name or the template text itself
  std::string chat_template_file;    // --chat-template-file
  std::string chat_template_kwargs;  // --chat-template-kwargs: a JSON object passed to the template
  std::string reasoning_format = "auto";  // --reasoning-format none|deepseek|auto
  int32_t reasoning_budget = -1;     // --reasoning-budget: -1 unrestricted, 0 no thinking, N tokens
  std::string reasoning_budget_message;  // --reasoning-budget-message: written before the close tag
  bool metrics = true;               // --metrics (served by default here)
  bool slots = true;                 // --slots / --no-slots: GET /slots
  std::string slot_save_path;        // --slot-save-path: where POST /slots/ID?action=save|restore keeps files
  runtime::SpecParams spec;          // --spec-type ...: speculative decoding in every slot
};

// Opens the port (serving /health as 503 while loading), loads the engine, warms every stage up,
// then serves until SIGINT/SIGTERM. A load or warm-up failure is returned as an error.
Status serve(const runtime::EngineOptions& engine_options, const ServerOptions& options);

}  // namespace strata::server
