#include "server/http_server.h"

#include <httplib.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <semaphore>
#include <thread>

#include "base/checked.h"
#include "server/cluster_json.h"
#include "server/http_front.h"
#include "server/metrics.h"
#include "server/openai_api.h"
#include "server/scheduler.h"
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

// An engine or scheduler failure as an API error: a node down or the server stopping is 503 (the
// client may retry); other codes keep `otherwise`, the status each call site had chosen.
ApiError api_error(ErrorCode code, std::string message, int otherwise) {
  ApiError e;
  e.message = std::move(message);
  e.status = otherwise;
  if (code == ErrorCode::kUnavailable) {
    e.status = 503;
    e.type = "unavailable_error";
  } else if (otherwise >= 500) {
    e.type = "server_error";
  }
  return e;
}

std::string random_id(const char* prefix) {
  std::random_device rd;
  return fmt::format("{}-{:08x}{:08x}", prefix, rd(), rd());
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

std::string sse(const json& j) { return "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n"; }

// A prompt that cannot fit the context however it tokenizes is refused before it is tokenized.
std::optional<ApiError> check_prompt_size(const text::Vocab& vocab, const std::string& prompt, int32_t n_ctx) {
  const size_t per_token = vocab.max_bytes_per_token();
  if (per_token == 0 || prompt.size() <= sat_mul(uint64_t(n_ctx), per_token)) return std::nullopt;
  ApiError e;
  e.code = "context_length_exceeded";
  e.message = fmt::format("the prompt has {} bytes, more than a slot's context of {} tokens can hold", prompt.size(), n_ctx);
  return e;
}

// Prompts over 1 MiB are tokenized one at a time.
class BigPromptTurn {
 public:
  explicit BigPromptTurn(size_t bytes) : big_(bytes > (size_t{1} << 20)) {
    if (big_) got_ = turn().try_acquire_for(std::chrono::seconds(30));
  }
  ~BigPromptTurn() {
    if (got_) turn().release();
  }
  bool ok() const { return !big_ || got_; }

 private:
  static std::binary_semaphore& turn() {
    static std::binary_semaphore s(1);
    return s;
  }
  bool big_;
  bool got_ = false;
};

// Everything the handlers share once the model is ready.
struct Ready {
  runtime::Engine* engine = nullptr;
  Scheduler* scheduler = nullptr;
  text::ChatTemplate chat_template = text::ChatTemplate::chatml();
  std::string model_id;
  int64_t created = 0;
};

class Api {
 public:
  explicit Api(const ServerOptions& options) : options_(options) {}

  void set_ready(Ready* ready) { ready_.store(ready); }
  Ready* ready() const { return ready_.load(); }
  Metrics& metrics() { return metrics_; }

  // With --api-key every endpoint but /health needs the key: "Authorization: Bearer KEY", or HTTP
  // Basic with KEY as the password, which is what a browser sends for the web page after asking.
  bool authorized(const httplib::Request& req, httplib::Response& res, bool browser_page = false) {
    if (options_.api_key.empty() || key_matches(req.get_header_value("Authorization"), options_.api_key)) return true;
    ApiError e;
    e.status = 401;
    e.type = "authentication_error";
    e.code = "invalid_api_key";
    e.message = req.has_header("Authorization") ? "invalid API key" : "missing API key (Authorization: Bearer ...)";
    send_error(res, e);
    if (browser_page) res.set_header("WWW-Authenticate", "Basic realm=\"strata\", charset=\"UTF-8\"");
    return false;
  }

  // The ready state, or a 503 answer while loading.
  Ready* require_ready(httplib::Response& res) {
    Ready* r = ready();
    if (!r) {
      ApiError e;
      e.status = 503;
      e.type = "unavailable_error";
      e.message = "the model is loading";
      send_error(res, e);
    }
    return r;
  }

  void completions(const httplib::Request& http, httplib::Response& res, bool chat) {
    metrics_.request_started();
    if (!authorized(http, res)) return;
    Ready* r = require_ready(res);
    if (!r) return;
    ParsedRequest req;
    if (auto e = parse_request(http.body, chat, req)) return send_error(res, *e);
    if (!req.model.empty() && req.model != r->model_id) {
      ApiError e;
      e.status = 404;
      e.code = "model_not_found";
      e.param = "model";
      e.message = fmt::format("the model '{}' does not exist; this server serves '{}'", req.model, r->model_id);
      return send_error(res, e);
    }
    std::string prompt_text = req.prompt;
    if (chat) {
      text::ChatRenderOptions o;
      o.add_generation_prompt = true;
      o.enable_thinking = req.enable_thinking;
      o.tools_json = req.tools_json;
      auto rendered = r->chat_template.render(req.messages, o);
      if (!rendered.ok()) {
        ApiError e;
        e.message = "cannot apply the chat template: " + rendered.error().message;
        return send_error(res, e);
      }
      prompt_text = std::move(*rendered);
    }
    if (auto e = check_prompt_size(r->engine->vocab(), prompt_text, r->engine->n_ctx_per_seq())) return send_error(res, *e);
    {
      // Tokenizing costs memory in proportion to the text: big prompts take turns.
      BigPromptTurn turn(prompt_text.size());
      if (!turn.ok()) {
        ApiError e;
        e.status = 503;
        e.type = "unavailable_error";
        e.message = "the server is busy with other large prompts; try again";
        return send_error(res, e);
      }
      req.generation.prompt = r->engine->vocab().tokenize(prompt_text, true, true);
    }
    auto submitted = r->scheduler->submit(req.generation);
    if (!submitted.ok()) {
      ApiError e = api_error(submitted.error().code, submitted.error().message, 400);
      if (submitted.error().code == ErrorCode::kOutOfRange) e.code = "context_length_exceeded";
      return send_error(res, e);
    }
    std::shared_ptr<Request> job = *submitted;
    const std::string id = random_id(chat ? "chatcmpl" : "cmpl");
    if (!req.stream) {
      std::string text;
      std::vector<TokenLogprob> logprobs;
      for (;;) {
        Request::Chunk c = job->next(std::chrono::milliseconds(200));
        if (!c.done && HttpFront::client_gone()) {
          job->cancel();  // nobody is waiting for the answer any more
          metrics_.request_failed();
          res.status = 499;  // nginx's "client closed request"; nobody will read it
          return;
        }
        text += c.text;
        for (auto& l : c.logprobs) logprobs.push_back(std::move(l));
        if (!c.done) continue;
        if (!c.error.empty()) {
          metrics_.request_failed();
          return send_error(res, api_error(c.error_code, c.error, 500));
        }
        metrics_.request_finished(job->n_prompt(), job->n_generated());
        return send_json(res, 200, completion_response(req, id, r->model_id, text, logprobs, c.finish_reason,
                                                       job->n_prompt(), job->n_generated()));
      }
    }
    res.set_header("Cache-Control", "no-cache");
    auto first = std::make_shared<bool>(true);
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, job, req, id, model = r->model_id, first](size_t, httplib::DataSink& sink) {
          Request::Chunk c = job->next(std::chrono::milliseconds(100));
          if (!sink.is_writable()) {
            job->cancel();  // the client went away: stop generating for it
            return false;
          }
          if (!c.error.empty()) {
            const std::string msg = sse(api_error(c.error_code, c.error, 500).body());
            sink.write(msg.data(), msg.size());
            sink.done();
            metrics_.request_failed();
            return true;
          }
          if (!c.text.empty() || !c.logprobs.empty() || *first) {
            const std::string msg = sse(stream_chunk(req, id, model, c.text, c.logprobs, std::nullopt, *first));
            *first = false;
            if (!sink.write(msg.data(), msg.size())) {
              job->cancel();
              return false;
            }
          }
          if (c.done) {
            std::string tail = sse(stream_chunk(req, id, model, "", {}, c.finish_reason, false));
            if (req.include_usage) {
              json usage = stream_chunk(req, id, model, "", {}, std::nullopt, false);
              usage["choices"] = json::array();
              usage["usage"] = usage_json(job->n_prompt(), job->n_generated());
              tail += sse(usage);
            }
            tail += "data: [DONE]\n\n";
            sink.write(tail.data(), tail.size());
            sink.done();
            metrics_.request_finished(job->n_prompt(), job->n_generated());
          }
          return true;
        },
        [job](bool) { job->cancel(); });
  }

 private:
  const ServerOptions& options_;
  std::atomic<Ready*> ready_{nullptr};
  Metrics metrics_;
};

}  // namespace

Status serve(const runtime::EngineOptions& engine_options, const ServerOptions& options) {
  if (options.port < 0 || options.port > 65535) return make_error("--port {} out of range", options.port);
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  Api api(options);
  FrontLimits limits;
  limits.worker_threads = options.http_threads;
  HttpFront http(limits);
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

  http.Get("/health", [&](const httplib::Request&, httplib::Response& res) {
    Ready* r = api.ready();
    if (!r) return send_json(res, 503, {{"status", "loading"}, {"message", "loading the model"}});
    json down = json::array();
    for (const auto& h : r->engine->node_health()) {
      if (!h.reachable) down.push_back(h.node);
    }
    if (!down.empty()) return send_json(res, 503, {{"status", "error"}, {"message", "nodes down"}, {"nodes_down", down}});
    send_json(res, 200, {{"status", "ok"}});
  });
  http.Get("/metrics", [&](const httplib::Request& req, httplib::Response& res) {
    if (!api.authorized(req, res)) return;
    Ready* r = api.ready();
    res.set_content(api.metrics().render(r ? r->engine : nullptr, r ? r->scheduler : nullptr),
                    "text/plain; version=0.0.4");
  });
  http.Get("/v1/models", [&](const httplib::Request& req, httplib::Response& res) {
    if (!api.authorized(req, res)) return;
    Ready* r = api.require_ready(res);
    if (!r) return;
    send_json(res, 200, {{"object", "list"},
                         {"data", json::array({{{"id", r->model_id}, {"object", "model"}, {"created", r->created},
                                                {"owned_by", "strata"}}})}});
  });
  auto cluster = [&](const httplib::Request& req, httplib::Response& res) {
    if (!api.authorized(req, res)) return;
    Ready* r = api.require_ready(res);
    if (!r) return;
    send_json(res, 200, cluster_json(*r->engine, *r->scheduler, r->model_id));
  };
  http.Get("/props", cluster);
  http.Get("/v1/cluster", cluster);
  http.Post("/v1/chat/completions", [&](const httplib::Request& req, httplib::Response& res) { api.completions(req, res, true); });
  http.Post("/v1/completions", [&](const httplib::Request& req, httplib::Response& res) { api.completions(req, res, false); });
  add_tokenize_routes(http, {[&](const httplib::Request& req, httplib::Response& res) { return api.authorized(req, res); },
                             [&](httplib::Response& res) -> const text::Vocab* {
                               Ready* r = api.require_ready(res);
                               return r ? &r->engine->vocab() : nullptr;
                             }});
  http.Get("/", [&](const httplib::Request& req, httplib::Response& res) {
    if (!api.authorized(req, res, true)) return;
    res.set_content(web_ui_html(), "text/html; charset=utf-8");
  });

  STRATA_ASSIGN(const int port, http.bind(options.host, options.port));
  http.run();
  spdlog::info("server: listening on http://{}:{} (health 503 until the model is ready)", options.host, port);

  auto stop_http = [&] { http.stop(); };
  auto engine = runtime::Engine::load(engine_options);
  if (!engine.ok()) {
    stop_http();
    return make_error("loading failed: {}", engine.error().message);
  }
  if (options.warmup) {
    // One decode through every stage of the plan before the first request.
    model::Batch batch;
    const text::Token t = (*engine)->vocab().bos() >= 0 ? (*engine)->vocab().bos() : 0;
    batch.add(t, 0, 0, true);
    auto warm = (*engine)->decode(batch);
    if (!warm.ok()) {
      stop_http();
      return make_error("warm-up failed: {}", warm.error().message);
    }
    (void)(*engine)->clear_seq(0);
    spdlog::info("server: warm-up decode went through all {} stage(s)", (*engine)->plan().stages.size());
  }
  Ready ready;
  ready.engine = engine->get();
  std::string warning;
  auto tmpl = text::load_chat_template((*engine)->model().file(), &warning);
  if (tmpl.ok()) ready.chat_template = std::move(*tmpl);
  if (!warning.empty()) spdlog::warn("server: {}", warning);
  ready.model_id = options.model_alias.empty() ? std::filesystem::path(engine_options.model_path).filename().string()
                                               : options.model_alias;
  ready.created = std::time(nullptr);
  Scheduler scheduler(**engine);
  ready.scheduler = &scheduler;
  api.set_ready(&ready);
  spdlog::info("server: ready: model '{}', {} slot(s) of {} tokens", ready.model_id, scheduler.n_slots(),
               (*engine)->n_ctx_per_seq());
  if (!options.ready_file.empty()) std::ofstream(options.ready_file) << options.host << ":" << port << "\n";

  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("server: signal {}, shutting down", sig);
  api.set_ready(nullptr);
  scheduler.stop();
  stop_http();
  return {};
}

}  // namespace strata::server
