#include "server/http_routes.h"

#include <httplib.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "base/checked.h"
#include "base/system.h"
#include "server/cluster_json.h"
#include "server/http_framing.h"
#include "server/metrics.h"
#include "server/anthropic_api.h"
#include "server/builtin_templates.h"
#include "server/chat_turn.h"
#include "server/openai_api.h"
#include "server/responses_api.h"
#include "server/scheduler.h"
#include "server/slot_actions.h"
#include "server/tokenize_api.h"
#include "server/web_ui.h"
#include "text/chat_template.h"

namespace strata::server {
namespace {

using nlohmann::json;

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) { send_json(res, e.status, e.body()); }

std::string random_id(const char* prefix) {
  std::random_device rd;
  return fmt::format("{}{:08x}{:08x}", prefix, rd(), rd());
}

// Constant-time: the comparison takes as long whichever byte differs.
bool same_secret(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

bool key_matches(const std::string& header, const std::string& key) {
  if (header.rfind("Bearer ", 0) == 0) return same_secret(std::string_view(header).substr(7), key);
  if (header.rfind("Basic ", 0) != 0 || header.size() > 4096) return false;
  const std::string encoded = header.substr(6);
  std::string decoded(encoded.size(), '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(decoded.data()),
                                reinterpret_cast<const unsigned char*>(encoded.data()), static_cast<int>(encoded.size()));
  if (n < 0) return false;
  decoded.resize(static_cast<size_t>(n));
  while (!decoded.empty() && decoded.back() == '\0') decoded.pop_back();  // base64 padding
  const size_t colon = decoded.find(':');
  return colon != std::string::npos && same_secret(std::string_view(decoded).substr(colon + 1), key);
}

// The loaded model: everything the handlers share once it serves.
struct LoadedModel {
  runtime::Engine* engine = nullptr;
  Scheduler* scheduler = nullptr;
  text::ChatTemplate chat_template = text::ChatTemplate::chatml();
  TurnSetup setup;
  std::string model_id;
  int64_t created = 0;
};

// What the routes run: authorization, the loaded model (or a 503), turns streamed or whole, metrics.
class RequestHandlers {
 public:
  explicit RequestHandlers(const ServerOptions& options) : options_(options) {}

  void set_loaded(LoadedModel* model) { loaded_.store(model); }
  LoadedModel* loaded() const { return loaded_.load(); }
  Metrics& metrics() { return metrics_; }

  // With --api-key every endpoint but /health needs the key: "Authorization: Bearer KEY", HTTP Basic
  // with KEY as the password (what a browser sends for the web page after asking) or Anthropic's
  // "x-api-key: KEY".
  bool authorized(const httplib::Request& req, httplib::Response& res, bool browser_page = false,
                  const WireFormat* wire = nullptr) {
    if (options_.api_key.empty() || key_matches(req.get_header_value("Authorization"), options_.api_key)) return true;
    if (req.has_header("x-api-key") && same_secret(req.get_header_value("x-api-key"), options_.api_key)) return true;
    ApiError e;
    e.status = 401;
    e.type = "authentication_error";
    e.code = "invalid_api_key";
    const bool sent = req.has_header("Authorization") || req.has_header("x-api-key");
    e.message = sent ? "invalid API key" : "missing API key (Authorization: Bearer ...)";
    send_json(res, e.status, wire ? wire->error_body(e) : e.body());
    if (browser_page) res.set_header("WWW-Authenticate", "Basic realm=\"strata\", charset=\"UTF-8\"");
    return false;
  }

  // The loaded model, or a 503 answer while loading.
  LoadedModel* require_loaded(httplib::Response& res, const WireFormat* wire = nullptr) {
    LoadedModel* r = loaded();
    if (!r) {
      ApiError e;
      e.status = 503;
      e.type = "unavailable_error";
      e.message = "the model is loading";
      send_json(res, e.status, wire ? wire->error_body(e) : e.body());
    }
    return r;
  }

  // The start every turn endpoint shares: the key, a loaded model, a JSON body. Null after answering
  // with the wire format's error.
  LoadedModel* begin(const httplib::Request& http, httplib::Response& res, WireFormat& wire, json& body) {
    if (!authorized(http, res, false, &wire)) return nullptr;
    LoadedModel* r = require_loaded(res, &wire);
    if (!r) return nullptr;
    if (auto e = parse_body(http.body, body)) {
      send_json(res, e->status, wire.error_body(*e));
      return nullptr;
    }
    return r;
  }

  // Any chat-style endpoint: the wire format reads the body and words the answer; the turn runs it.
  void run_turn(const httplib::Request& http, httplib::Response& res, std::shared_ptr<WireFormat> wire) {
    metrics_.request_started();
    auto fail = [&](const ApiError& e) { send_json(res, e.status, wire->error_body(e)); };
    json body;
    LoadedModel* r = begin(http, res, *wire, body);
    if (!r) return;
    TurnRequest request;
    if (auto e = wire->parse(body, request)) return fail(*e);
    ApiError error;
    std::shared_ptr<ChatTurn> turn = ChatTurn::start(r->setup, std::move(request), error);
    if (!turn) return fail(error);
    wire->set_served(served_name(*r, wire->requested_model()), random_id(wire->id_prefix()), std::time(nullptr));
    if (wire->stream()) return stream(res, std::move(turn), std::move(wire));
    for (;;) {
      TurnEvents ev = turn->poll(std::chrono::milliseconds(200));
      if (!ev.done && FramingHttpServer::client_gone()) {
        turn->cancel();  // nobody is waiting for the answer any more
        metrics_.request_failed();
        res.status = 499;  // nginx's "client closed request"; nobody will read it
        return;
      }
      if (!ev.done) continue;
      if (ev.error) {
        metrics_.request_failed();
        return fail(*ev.error);
      }
      metrics_.request_finished(ev.usage.prompt_tokens, ev.usage.completion_tokens);
      return send_json(res, 200, wire->response(turn->result(ev)));
    }
  }

  // Anthropic's /v1/messages/count_tokens: the prompt's tokens as the turn would render it.
  void count_tokens(const httplib::Request& http, httplib::Response& res);

 private:
  // Any model name is served, as llama-server does (agents and SDKs send their own names); the answer
  // carries the name asked for, or the server's (--alias, else the file name) when none was given.
  static const std::string& served_name(const LoadedModel& r, const std::string& requested) {
    return requested.empty() ? r.model_id : requested;
  }

  void stream(httplib::Response& res, std::shared_ptr<ChatTurn> turn, std::shared_ptr<WireFormat> wire) {
    res.set_header("Cache-Control", "no-cache");
    auto opened = std::make_shared<bool>(false);
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, turn, wire, opened](size_t, httplib::DataSink& sink) {
          std::string out;
          if (!*opened) out = wire->stream_start(turn->usage());
          *opened = true;
          const TurnEvents ev = turn->poll(std::chrono::milliseconds(100));
          if (!sink.is_writable()) {
            turn->cancel();  // the client went away: stop generating for it
            return false;
          }
          if (ev.error) {
            out += wire->stream_error(*ev.error);
            sink.write(out.data(), out.size());
            sink.done();
            metrics_.request_failed();
            return true;
          }
          out += wire->stream_events(ev);
          if (!out.empty() && !sink.write(out.data(), out.size())) {
            turn->cancel();
            return false;
          }
          if (ev.done) {
            sink.done();
            metrics_.request_finished(ev.usage.prompt_tokens, ev.usage.completion_tokens);
          }
          return true;
        },
        [turn](bool) { turn->cancel(); });
  }

  const ServerOptions& options_;
  std::atomic<LoadedModel*> loaded_{nullptr};
  Metrics metrics_;
};

void RequestHandlers::count_tokens(const httplib::Request& http, httplib::Response& res) {
  auto wire = std::make_shared<AnthropicMessages>();
  auto fail = [&](const ApiError& e) { send_json(res, e.status, wire->error_body(e)); };
  json body;
  LoadedModel* r = begin(http, res, *wire, body);
  if (!r) return;
  TurnRequest request;
  if (!body.contains("max_tokens")) body["max_tokens"] = 1;  // count_tokens takes no max_tokens
  if (auto e = wire->parse(body, request)) return fail(*e);
  ApiError error;
  auto n = count_prompt_tokens(r->setup, std::move(request), error);
  if (!n) return fail(error);
  send_json(res, 200, {{"input_tokens", *n}});
}

// The chat template the flags choose: --chat-template-file, then --chat-template (a built-in name or
// the template text); nothing when the model's own is to be used.
Result<std::optional<text::ChatTemplate>> template_override(const ServerOptions& options) {
  if (!options.chat_template_file.empty()) {
    std::ifstream in(options.chat_template_file, std::ios::binary);
    if (!in) return make_error("--chat-template-file {}: cannot be read", options.chat_template_file);
    std::string text(size_t{1} << 20, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    if (in.gcount() == static_cast<std::streamsize>(text.size())) {
      return make_error("--chat-template-file {}: over 1 MiB", options.chat_template_file);
    }
    text.resize(static_cast<size_t>(in.gcount()));
    auto t = text::ChatTemplate::parse(text);
    if (!t.ok()) return make_error("--chat-template-file {}: {}", options.chat_template_file, t.error().message);
    return std::optional<text::ChatTemplate>(std::move(*t));
  }
  if (options.chat_template.empty()) return std::optional<text::ChatTemplate>();
  if (auto named = builtin_chat_template(options.chat_template)) return std::optional<text::ChatTemplate>(std::move(*named));
  if (options.chat_template.find("{%") == std::string::npos && options.chat_template.find("{{") == std::string::npos) {
    return make_error("--chat-template '{}' is neither a built-in name ({}) nor a Jinja template", options.chat_template,
                      builtin_chat_template_names());
  }
  auto t = text::ChatTemplate::parse(options.chat_template);
  if (!t.ok()) return make_error("--chat-template: {}", t.error().message);
  return std::optional<text::ChatTemplate>(std::move(*t));
}

// The template the flags chose, else the model's own (ChatML when it has none that works).
text::ChatTemplate served_template(std::optional<text::ChatTemplate> chosen, const gguf::File& file) {
  if (chosen) return std::move(*chosen);
  std::string warning;
  auto tmpl = text::load_chat_template(file, &warning);
  if (!warning.empty()) spdlog::warn("server: {}", warning);
  return tmpl.ok() ? std::move(*tmpl) : text::ChatTemplate::chatml();
}

// The turn settings the flags give, checked before the model loads.
Result<TurnSetup> turn_setup(const ServerOptions& options) {
  TurnSetup setup;
  if (options.reasoning_format != "none" && options.reasoning_format != "deepseek" && options.reasoning_format != "auto") {
    return make_error("--reasoning-format '{}' is not one of none, deepseek, auto", options.reasoning_format);
  }
  setup.split_reasoning = options.reasoning_format != "none";
  if (!options.chat_template_kwargs.empty()) {
    if (json_nesting_depth(options.chat_template_kwargs) > kMaxJsonDepth) {
      return make_error("--chat-template-kwargs nests deeper than {} levels", kMaxJsonDepth);
    }
    setup.template_kwargs = json::parse(options.chat_template_kwargs, nullptr, false);
    if (!setup.template_kwargs.is_object()) return make_error("--chat-template-kwargs must be a JSON object");
  }
  if (options.reasoning_budget < -1) return make_error("--reasoning-budget must be -1 (unrestricted), 0 (no thinking) or a token count");
  if (options.reasoning_budget == 0) setup.template_kwargs["enable_thinking"] = false;
  setup.reasoning_budget = options.reasoning_budget;
  setup.reasoning_budget_message = options.reasoning_budget_message;
  setup.n_predict = options.n_predict;
  setup.cache_prompt = options.cache_prompt;
  return setup;
}

// /health, /metrics and what the model and cluster are (/v1/models, /props, /v1/cluster).
void add_status_routes(FramingHttpServer& http, RequestHandlers& handlers) {
  http.Get("/health", [&](const httplib::Request&, httplib::Response& res) {
    LoadedModel* r = handlers.loaded();
    if (!r) return send_json(res, 503, {{"status", "loading"}, {"message", "loading the model"}});
    json down = json::array();
    for (const auto& h : r->engine->node_health()) {
      if (!h.reachable) down.push_back(h.node);
    }
    if (!down.empty()) return send_json(res, 503, {{"status", "error"}, {"message", "nodes down"}, {"nodes_down", down}});
    send_json(res, 200, {{"status", "ok"}});
  });
  http.Get("/metrics", [&](const httplib::Request& req, httplib::Response& res) {
    if (!handlers.authorized(req, res)) return;
    LoadedModel* r = handlers.loaded();
    res.set_content(handlers.metrics().render(r ? r->engine : nullptr, r ? r->scheduler : nullptr),
                    "text/plain; version=0.0.4");
  });
  http.Get("/v1/models", [&](const httplib::Request& req, httplib::Response& res) {
    if (!handlers.authorized(req, res)) return;
    LoadedModel* r = handlers.require_loaded(res);
    if (!r) return;
    send_json(res, 200, {{"object", "list"},
                         {"data", json::array({{{"id", r->model_id}, {"object", "model"}, {"created", r->created},
                                                {"owned_by", "strata"}}})}});
  });
  auto cluster = [&](const httplib::Request& req, httplib::Response& res) {
    if (!handlers.authorized(req, res)) return;
    LoadedModel* r = handlers.require_loaded(res);
    if (!r) return;
    send_json(res, 200, cluster_json(*r->engine, *r->scheduler, r->model_id));
  };
  http.Get("/props", cluster);
  http.Get("/v1/cluster", cluster);
}

// llama-server's GET /slots and POST /slots/ID?action=save|restore|erase.
void add_slot_routes(FramingHttpServer& http, RequestHandlers& handlers, const ServerOptions& options) {
  http.Get("/slots", [&](const httplib::Request& req, httplib::Response& res) {
    if (!handlers.authorized(req, res)) return;
    LoadedModel* r = handlers.require_loaded(res);
    if (!r) return;
    if (!options.slots) {
      ApiError e;
      e.status = 501;
      e.type = "not_supported_error";
      e.message = "this server has the slots endpoint switched off (--no-slots)";
      return send_error(res, e);
    }
    json out = json::array();
    for (const SlotInfo& s : r->scheduler->slots()) {
      out.push_back({{"id", s.id}, {"n_ctx", r->engine->n_ctx_per_seq()}, {"is_processing", s.is_processing},
                     {"n_cached_tokens", s.n_cached_tokens}, {"checkpoints", s.checkpoints}});
    }
    send_json(res, 200, out);
  });
  http.Post(R"(/slots/(\d{1,6}))", [&](const httplib::Request& req, httplib::Response& res) {
    if (!handlers.authorized(req, res)) return;
    LoadedModel* r = handlers.require_loaded(res);
    if (!r) return;
    const SlotActionAnswer a = slot_action_answer(*r->scheduler, options.slot_save_path, std::stoi(req.matches[1].str()),
                                                  req.get_param_value("action"), req.body);
    send_json(res, a.status, a.body);
  });
}

// The turn endpoints of every wire format, /tokenize and /detokenize, and the web page.
void add_turn_routes(FramingHttpServer& http, RequestHandlers& handlers) {
  auto route = [&](const char* path, auto make_wire) {
    http.Post(path, [&handlers, make_wire](const httplib::Request& req, httplib::Response& res) {
      handlers.run_turn(req, res, make_wire());
    });
  };
  route("/v1/chat/completions", [] { return std::make_shared<OpenAiCompletions>(true); });
  route("/chat/completions", [] { return std::make_shared<OpenAiCompletions>(true); });
  route("/v1/completions", [] { return std::make_shared<OpenAiCompletions>(false); });
  route("/v1/messages", [] { return std::make_shared<AnthropicMessages>(); });
  route("/v1/responses", [] { return std::make_shared<OpenAiResponses>(); });
  http.Post("/v1/messages/count_tokens",
            [&](const httplib::Request& req, httplib::Response& res) { handlers.count_tokens(req, res); });
  add_tokenize_routes(http, {[&](const httplib::Request& req, httplib::Response& res) { return handlers.authorized(req, res); },
                             [&](httplib::Response& res) -> const text::Vocab* {
                               LoadedModel* r = handlers.require_loaded(res);
                               return r ? &r->engine->vocab() : nullptr;
                             }});
  http.Get("/", [&](const httplib::Request& req, httplib::Response& res) {
    if (!handlers.authorized(req, res, true)) return;
    res.set_content(web_ui_html(), "text/html; charset=utf-8");
  });
}

// Every endpoint; the handlers run on the framing server's worker threads.
void add_routes(FramingHttpServer& http, RequestHandlers& handlers, const ServerOptions& options) {
  add_status_routes(http, handlers);
  add_slot_routes(http, handlers, options);
  add_turn_routes(http, handlers);
}

// SIGINT and SIGTERM, blocked before serve() starts its threads so they inherit the mask and only
// sigwait takes them. SIGPIPE is ignored: a client that leaves is no reason to exit.
sigset_t block_stop_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  return signals;
}

int wait_for_signal(const sigset_t& signals) {
  int sig = 0;
  sigwait(&signals, &sig);
  return sig;
}

// httplib's settings for the framing limits; an exception in a handler is answered with a 500.
void configure_http(FramingHttpServer& http, const FramingLimits& limits) {
  http.set_payload_max_length(limits.max_body_bytes);
  http.set_keep_alive_max_count(100000);  // what the Keep-Alive response header announces
  http.set_keep_alive_timeout(limits.idle_timeout_ms / 1000);
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    ApiError err;
    err.status = 500;
    err.type = "server_error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      err.message = std::string("internal error: ") + e.what();
    } catch (...) {
      err.message = "internal error";
    }
    send_error(res, err);
  });
}

// The engine's options with what serving adds to its plan: checkpoints, MTP and the host cache.
runtime::EngineOptions planned_engine_options(const runtime::EngineOptions& engine_options, const ServerOptions& options) {
  runtime::EngineOptions planned = engine_options;
  // Kept by every node for its recurrent layers: the prompt cache's, and speculation's one.
  planned.n_checkpoints = options.ctx_checkpoints + runtime::Speculation::checkpoints_needed(options.spec);
  planned.mtp = options.spec.mtp();
  // -1: no limit of its own; each node still keeps it within a quarter of its free memory.
  planned.cache_ram_bytes = options.cache_ram_mib < 0 ? read_memory_facts().available / 4
                                                      : sat_mul(uint64_t(options.cache_ram_mib), uint64_t(1) << 20);
  return planned;
}

// One decode through every stage of the plan before the first request.
Status warm_up(runtime::Engine& engine) {
  model::Batch batch;
  const text::Token t = engine.vocab().bos() >= 0 ? engine.vocab().bos() : 0;
  batch.add(t, 0, 0, true);
  auto warm = engine.decode(batch);
  if (!warm.ok()) return std::move(warm).error();
  (void)engine.clear_seq(0);
  spdlog::info("server: warm-up decode went through all {} stage(s)", engine.plan().stages.size());
  return {};
}

// The handlers' engine, template and turn settings; the template's chat format is logged.
void set_engine(LoadedModel& loaded, runtime::Engine& engine, text::ChatTemplate chat_template, const TurnSetup& setup) {
  loaded.engine = &engine;
  loaded.chat_template = std::move(chat_template);
  loaded.setup = setup;
  loaded.setup.engine = &engine;
  loaded.setup.chat_template = &loaded.chat_template;
  loaded.setup.format = chat::detect_format(loaded.chat_template.source());
  spdlog::info("server: chat format: tool calls {}, thinking {}", chat::tool_format_name(loaded.setup.format.tools),
               loaded.setup.format.thinking ? "yes" : "no");
}

SchedulerOptions scheduler_options(const ServerOptions& options) {
  SchedulerOptions scheduling;
  scheduling.slot_prompt_similarity = options.slot_prompt_similarity;
  scheduling.spec = options.spec;
  if (options.spec.enabled()) spdlog::info("server: speculative decoding {} in every slot (draft n-max {})",
                                           runtime::spec_type_name(options.spec.type), options.spec.n_max);
  return scheduling;
}

}  // namespace

Status serve(const runtime::EngineOptions& engine_options, const ServerOptions& options) {
  if (options.port < 0 || options.port > 65535) return make_error("--port {} out of range", options.port);
  const sigset_t stop_signals = block_stop_signals();
  STRATA_ASSIGN(auto chosen_template, template_override(options));
  STRATA_ASSIGN(TurnSetup setup, turn_setup(options));
  RequestHandlers handlers(options);
  FramingLimits limits;
  limits.worker_threads = options.http_threads;
  FramingHttpServer http(limits);
  configure_http(http, limits);
  add_routes(http, handlers, options);
  STRATA_ASSIGN(const int port, http.bind(options.host, options.port));
  http.run();
  spdlog::info("server: listening on http://{}:{} (health 503 until the model is ready)", options.host, port);

  auto engine = runtime::Engine::load(planned_engine_options(engine_options, options));
  if (!engine.ok()) {
    http.stop();
    return make_error("loading failed: {}", engine.error().message);
  }
  if (Status warm = options.warmup ? warm_up(**engine) : Status(); !warm.ok()) {
    http.stop();
    return make_error("warm-up failed: {}", warm.error().message);
  }
  LoadedModel loaded;
  set_engine(loaded, **engine, served_template(std::move(chosen_template), (*engine)->model().file()), setup);
  loaded.model_id = options.model_alias.empty() ? std::filesystem::path(engine_options.model_path).filename().string()
                                                : options.model_alias;
  loaded.created = std::time(nullptr);
  Scheduler scheduler(**engine, scheduler_options(options));
  loaded.scheduler = &scheduler;
  loaded.setup.scheduler = &scheduler;
  handlers.set_loaded(&loaded);
  spdlog::info("server: ready: model '{}', {} slot(s) of {} tokens", loaded.model_id, scheduler.n_slots(),
               (*engine)->n_ctx_per_seq());
  if (!options.ready_file.empty()) std::ofstream(options.ready_file) << options.host << ":" << port << "\n";

  spdlog::info("server: signal {}, shutting down", wait_for_signal(stop_signals));
  handlers.set_loaded(nullptr);
  scheduler.stop();
  http.stop();
  return {};
}

}  // namespace strata::server
