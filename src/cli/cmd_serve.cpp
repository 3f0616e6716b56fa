// strata serve: the OpenAI-compatible server (llama-server's flag names).
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/common.h"
#include "server/builtin_templates.h"
#include "server/http_routes.h"
#include "server/openai_api.h"
#include "text/chat_template.h"

namespace strata::cli {
namespace {

constexpr size_t kMaxTemplateBytes = 1 << 20;
constexpr size_t kMaxKwargsBytes = 64 << 10;
constexpr size_t kMaxKwargsDepth = 32;

struct ServeFlags {
  ModelFlags model;
  server::ServerOptions server;
  SpecFlags spec;
  bool no_warmup = false;
  bool jinja = false, no_jinja = false;
  int32_t cache_reuse = 0;
  sampling::Params sampling;  // llama-server's defaults for requests; requests set their own here
  bool cont_batching = false, no_cont_batching = false;
  bool kv_unified = false, no_kv_unified = false, context_shift = false, no_context_shift = false;
  bool webui = false, no_webui = false;
  // Flags accepted without effect, with their notice (printed at startup).
  std::vector<std::pair<CLI::Option*, std::function<std::string()>>> notices;
};

Status check_kwargs(const std::string& text) {
  if (text.size() > kMaxKwargsBytes)
    return make_error("--chat-template-kwargs: {} bytes, at most {}", text.size(), kMaxKwargsBytes);
  if (server::json_nesting_depth(text) > kMaxKwargsDepth)
    return make_error("--chat-template-kwargs: nested deeper than {}", kMaxKwargsDepth);
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return make_error("--chat-template-kwargs: not valid JSON: {:.80}", text);
  if (!j.is_object())
    return make_error("--chat-template-kwargs: must be a JSON object like {{\"enable_thinking\": false}}");
  return {};
}

// A built-in name, or the template text itself (it must parse).
Status check_template_text(const std::string& flag, const std::string& text) {
  if (text.size() > kMaxTemplateBytes)
    return make_error("{}: {} bytes, at most {}", flag, text.size(), kMaxTemplateBytes);
  if (server::builtin_chat_template(text)) return {};
  if (text.find("{{") == std::string::npos && text.find("{%") == std::string::npos) {
    return make_error("{}: '{}' is neither a built-in template name ({}) nor Jinja template text", flag, text,
                      server::builtin_chat_template_names());
  }
  auto parsed = text::ChatTemplate::parse(text);
  if (!parsed.ok()) return make_error("{}: the template does not parse: {}", flag, parsed.error().message);
  return {};
}

Status check_template_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return make_error("--chat-template-file {}: not a readable file", path);
  if (std::filesystem::file_size(path, ec) > kMaxTemplateBytes) {
    return make_error("--chat-template-file {}: larger than {} bytes", path, kMaxTemplateBytes);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("--chat-template-file {}: cannot be read", path);
  std::stringstream text;
  text << in.rdbuf();
  auto parsed = text::ChatTemplate::parse(text.str());
  if (!parsed.ok())
    return make_error("--chat-template-file {}: the template does not parse: {}", path, parsed.error().message);
  return {};
}

Status check_serve_flags(const ServeFlags& f) {
  const server::ServerOptions& s = f.server;
  if (!s.chat_template.empty()) STRATA_TRY(check_template_text("--chat-template", s.chat_template));
  if (!s.chat_template_file.empty()) STRATA_TRY(check_template_file(s.chat_template_file));
  if (!s.chat_template_kwargs.empty()) STRATA_TRY(check_kwargs(s.chat_template_kwargs));
  return {};
}

void add_chat_flags(CLI::App& cmd, ServeFlags& f) {
  server::ServerOptions& s = f.server;
  cmd.add_flag("--jinja", f.jinja, "chat templates are Jinja (always)");
  f.notices.emplace_back(cmd.add_flag("--no-jinja", f.no_jinja, "ignored: templates are always Jinja"),
                         [] { return "chat templates are always rendered with the built-in Jinja interpreter"; });
  cmd.add_option("--chat-template", s.chat_template, "chat template: a built-in name (chatml, qwen3, llama3) or the template text");
  cmd.add_option("--chat-template-file", s.chat_template_file, "read the chat template from a file");
  cmd.add_option("--chat-template-kwargs", s.chat_template_kwargs, "JSON object of extra template variables");
  cmd.add_option("--reasoning-format", s.reasoning_format,
                 "where thinking goes: none (in content), deepseek "
                 "(reasoning_content) or auto")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "deepseek", "auto"}));
  cmd.add_option("--reasoning-budget", s.reasoning_budget,
                 "thinking tokens allowed: -1 unrestricted, 0 none, N: the think block is closed after N tokens")
      ->capture_default_str()
      ->check(CLI::Range(-1, 1 << 24));
  cmd.add_option("--reasoning-budget-message", s.reasoning_budget_message,
                 "text written before the closing think tag when the budget ends the thinking");
}

void add_cache_flags(CLI::App& cmd, ServeFlags& f) {
  server::ServerOptions& s = f.server;
  cmd.add_flag("--cache-prompt,!--no-cache-prompt", s.cache_prompt, "keep a slot's prompt cache between requests");
  cmd.add_option("--slot-prompt-similarity", s.slot_prompt_similarity,
                 "(-sps) share of a prompt a free slot's cache must hold to be chosen for it (else the least "
                 "recently used slot)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd.add_option("--ctx-checkpoints,--swa-checkpoints", s.ctx_checkpoints,
                 "(-ctxcp) recurrent-state checkpoints kept per slot")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  cmd.add_option("--slot-save-path", s.slot_save_path,
                 "directory of slot files: POST /slots/ID?action=save|restore with {\"filename\": NAME}")
      ->check(CLI::ExistingDirectory);
  cmd.add_option("--cache-ram", s.cache_ram_mib,
                 "MiB of host memory each node keeps prompt prefixes of evicted slots in (-1: no limit but a quarter "
                 "of a node's free memory, 0: off)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{-1}, int64_t{1} << 40));
  f.notices.emplace_back(
      cmd.add_option("--cache-reuse", f.cache_reuse, "ignored: KV shifting is not implemented")
          ->check(CLI::Range(0, 1 << 24)),
      [&f] {
        return f.cache_reuse == 0
                   ? std::string()
                   : "KV shifting is not implemented; a prompt reuses a cached prefix only from its start";
      });
  cmd.add_flag("--cont-batching", f.cont_batching, "(-cb) slots decode together (always)");
  f.notices.emplace_back(cmd.add_flag("--no-cont-batching", f.no_cont_batching, "(-nocb) ignored: always on"),
                         [] { return "continuous batching cannot be switched off; slots always decode together"; });
}

// Common in pasted llama-server lines; here each is the fixed behaviour or cannot apply.
void add_fixed_behaviour_flags(CLI::App& cmd, ServeFlags& f) {
  const std::string per_slot = "each slot has its own -c / -np tokens of cache; a unified cache is not implemented";
  f.notices.emplace_back(cmd.add_flag("--kv-unified", f.kv_unified, "(-kvu) ignored: per-slot caches"),
                         [per_slot] { return per_slot; });
  cmd.add_flag("--no-kv-unified", f.no_kv_unified, "(-no-kvu) per-slot caches (always)");
  f.notices.emplace_back(
      cmd.add_flag("--context-shift", f.context_shift, "ignored: a full slot stops with length"), [] {
        return "context shifting is not implemented: a slot whose context is full stops with finish_reason length";
      });
  cmd.add_flag("--no-context-shift", f.no_context_shift, "a full slot stops with length (always)");
  f.notices.emplace_back(cmd.add_flag("--no-webui", f.no_webui, "ignored: the chat page at / stays"),
                         [] { return "the chat page at / is always served (behind --api-key when one is set)"; });
  cmd.add_flag("--webui", f.webui, "the chat page at / (always)");
}

}  // namespace

Command add_serve(CLI::App& app) {
  auto f = std::make_shared<ServeFlags>();
  CLI::App* cmd = app.add_subcommand("serve", "serve the model over an OpenAI-compatible HTTP API");
  add_model_flags(*cmd, f->model);
  add_depth_flag(*cmd, f->model.cluster, "--n-depth");
  cmd->add_option("--parallel", f->model.n_seq, "(-np) slots: requests decoded together; each gets ctx / np tokens")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd->add_option("--host", f->server.host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", f->server.port, "port (0: pick a free one)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--api-key", f->server.api_key, "require Authorization: Bearer KEY");
  cmd->add_option("-a,--alias", f->server.model_alias, "the model id clients use (default: the file name)");
  cmd->add_flag("--no-warmup", f->no_warmup, "skip the startup decode through every stage");
  cmd->add_option("--threads-http", f->server.http_threads, "HTTP worker threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd->add_option("--ready-file", f->server.ready_file, "write host:port to this file once ready");
  cmd->add_option("-n,--n-predict,--predict", f->server.n_predict,
                  "max_tokens of a request that sets none, and the most any request gets (-1: no limit)")
      ->capture_default_str()
      ->check(CLI::Range(-1, 1 << 24));
  cmd->add_flag("--metrics", f->server.metrics, "GET /metrics (Prometheus; served by default here)");
  cmd->add_flag("--slots,!--no-slots", f->server.slots, "GET /slots");
  add_chat_flags(*cmd, *f);
  add_cache_flags(*cmd, *f);
  add_fixed_behaviour_flags(*cmd, *f);
  add_sampling_flags(*cmd, f->sampling);
  add_spec_flags(*cmd, f->spec);
  for (const char* name : {"--temp", "--top-k", "--top-p", "--min-p", "--seed", "--repeat-penalty", "--repeat-last-n",
                           "--frequency-penalty", "--presence-penalty"}) {
    f->notices.emplace_back(cmd->get_option(name), [] {
      return "server-wide sampling defaults are not implemented; each request's own fields apply (OpenAI's defaults)";
    });
  }
  return [f]() -> int {
    f->server.warmup = !f->no_warmup;
    if (auto s = check_serve_flags(*f); !s.ok()) return fail(s.error());
    auto spec = spec_params(f->spec);
    if (!spec.ok()) return fail(spec.error());
    f->server.spec = *spec;
    runtime::LocalWorkers workers;
    auto options = engine_options(f->model, workers);  // logging flags first, then every notice
    if (!options.ok()) return fail(options.error());
    print_notices(f->notices);
    auto s = server::serve(*options, f->server);
    // A local worker that does not exit cleanly (a crash, a sanitizer report) fails the server too.
    const bool workers_clean = workers.stop();
    if (!s.ok()) return fail(s.error());
    return workers_clean ? 0 : 1;
  };
}

}  // namespace strata::cli
