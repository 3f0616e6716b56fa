#include "server/openai_api.h"

#include <ctime>

namespace strata::server {
namespace {

using nlohmann::json;

ApiError bad(const std::string& param, const std::string& message) {
  ApiError e;
  e.param = param;
  e.message = message;
  return e;
}

// Reads an optional numeric field, checking its type and range.
template <typename T>
std::optional<ApiError> number(const json& j, const char* key, T& out, double lo, double hi) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  const json& v = j[key];
  if (!v.is_number()) return bad(key, std::string("'") + key + "' must be a number");
  const double d = v.get<double>();
  if (!(d >= lo && d <= hi)) return bad(key, fmt::format("'{}' must be between {} and {}", key, lo, hi));
  if constexpr (std::is_integral_v<T>) {
    if (!v.is_number_integer()) return bad(key, std::string("'") + key + "' must be an integer");
    out = static_cast<T>(v.get<int64_t>());
  } else {
    out = static_cast<T>(d);
  }
  return std::nullopt;
}

std::optional<ApiError> boolean(const json& j, const char* key, bool& out) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  if (!j[key].is_boolean()) return bad(key, std::string("'") + key + "' must be a boolean");
  out = j[key].get<bool>();
  return std::nullopt;
}

// Message content: a string, or a list of {type: "text", text} parts.
std::optional<ApiError> content_text(const json& c, const std::string& where, std::string& out) {
  if (c.is_null()) return std::nullopt;
  if (c.is_string()) {
    out = c.get<std::string>();
    return std::nullopt;
  }
  if (!c.is_array()) return bad(where, where + " must be a string or a list of text parts");
  for (size_t i = 0; i < c.size(); ++i) {
    const json& part = c[i];
    const std::string at = fmt::format("{}[{}]", where, i);
    if (!part.is_object()) return bad(at, at + " must be an object");
    if (!part.contains("type") || !part["type"].is_string()) return bad(at + ".type", at + ".type must be a string");
    if (part["type"].get<std::string>() != "text") return bad(at + ".type", at + ": only text parts are supported");
    if (!part.contains("text") || !part["text"].is_string()) return bad(at + ".text", at + ".text must be a string");
    out += part["text"].get<std::string>();
  }
  return std::nullopt;
}

// An optional string field: absent or null leaves `out` alone; any other type is an error.
std::optional<ApiError> optional_string(const json& j, const char* key, const std::string& where, std::string& out) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  if (!j[key].is_string()) return bad(where + "." + key, where + "." + key + " must be a string");
  out = j[key].get<std::string>();
  return std::nullopt;
}

std::optional<ApiError> parse_tool_calls(const json& calls, const std::string& where, std::vector<text::ToolCall>& out) {
  if (!calls.is_array()) return bad(where, where + " must be an array");
  for (size_t i = 0; i < calls.size(); ++i) {
    const json& tc = calls[i];
    const std::string at = fmt::format("{}[{}]", where, i);
    if (!tc.is_object()) return bad(at, at + " must be an object");
    if (!tc.contains("function") || !tc["function"].is_object()) return bad(at + ".function", at + ".function must be an object");
    const json& f = tc["function"];
    text::ToolCall call;
    if (auto e = optional_string(tc, "id", at, call.id)) return e;
    if (auto e = optional_string(f, "name", at + ".function", call.name)) return e;
    call.arguments_json = "{}";
    if (f.contains("arguments") && f["arguments"].is_object()) {
      call.arguments_json = f["arguments"].dump();
    } else if (auto e = optional_string(f, "arguments", at + ".function", call.arguments_json)) {
      return e;
    }
    out.push_back(std::move(call));
  }
  return std::nullopt;
}

std::optional<ApiError> parse_messages(const json& j, std::vector<text::ChatMessage>& out) {
  if (!j.contains("messages")) return bad("messages", "'messages' is required");
  const json& msgs = j["messages"];
  if (!msgs.is_array() || msgs.empty()) return bad("messages", "'messages' must be a non-empty array");
  for (size_t i = 0; i < msgs.size(); ++i) {
    const json& m = msgs[i];
    const std::string where = fmt::format("messages[{}]", i);
    if (!m.is_object()) return bad(where, where + " must be an object");
    if (!m.contains("role") || !m["role"].is_string()) return bad(where + ".role", where + ".role must be a string");
    text::ChatMessage msg;
    msg.role = m["role"].get<std::string>();
    static const char* kRoles[] = {"system", "developer", "user", "assistant", "tool"};
    if (std::find(std::begin(kRoles), std::end(kRoles), msg.role) == std::end(kRoles)) {
      return bad(where + ".role", fmt::format("{}.role '{}' is not one of system, developer, user, assistant, tool", where, msg.role));
    }
    if (msg.role == "developer") msg.role = "system";
    if (m.contains("content")) {
      if (auto e = content_text(m["content"], where + ".content", msg.content)) return e;
    }
    if (auto e = optional_string(m, "reasoning_content", where, msg.reasoning_content)) return e;
    if (auto e = optional_string(m, "name", where, msg.name)) return e;
    if (auto e = optional_string(m, "tool_call_id", where, msg.tool_call_id)) return e;
    if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
      if (auto e = parse_tool_calls(m["tool_calls"], where + ".tool_calls", msg.tool_calls)) return e;
    }
    out.push_back(std::move(msg));
  }
  return std::nullopt;
}

std::optional<ApiError> parse_stop(const json& j, std::vector<std::string>& out) {
  if (!j.contains("stop") || j["stop"].is_null()) return std::nullopt;
  const json& s = j["stop"];
  if (s.is_string()) {
    out.push_back(s.get<std::string>());
  } else if (s.is_array()) {
    if (s.size() > 16) return bad("stop", "'stop' has more than 16 strings");
    for (const json& x : s) {
      if (!x.is_string()) return bad("stop", "'stop' must be a string or an array of strings");
      out.push_back(x.get<std::string>());
    }
  } else {
    return bad("stop", "'stop' must be a string or an array of strings");
  }
  return std::nullopt;
}

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(c);
  return b;
}

json logprobs_json(bool chat, const std::vector<TokenLogprob>& lps) {
  if (chat) {
    json content = json::array();
    for (const auto& lp : lps) {
      json top = json::array();
      for (const auto& [t, v] : lp.top) top.push_back({{"token", t}, {"logprob", v}, {"bytes", bytes_of(t)}});
      content.push_back({{"token", lp.text}, {"logprob", lp.logprob}, {"bytes", bytes_of(lp.text)}, {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  json tokens = json::array(), token_logprobs = json::array(), top = json::array();
  for (const auto& lp : lps) {
    tokens.push_back(lp.text);
    token_logprobs.push_back(lp.logprob);
    json alt = json::object();
    for (const auto& [t, v] : lp.top) alt[t] = v;
    top.push_back(alt);
  }
  return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top}};
}

}  // namespace

json ApiError::body() const {
  return {{"error",
           {{"message", message}, {"type", type}, {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", code.empty() ? json(nullptr) : json(code)}}}};
}

size_t json_nesting_depth(std::string_view text) {
  size_t depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

std::optional<ApiError> parse_request(const std::string& body, bool chat, ParsedRequest& r) {
  // The JSON parser, dump() and the template's values all recurse per level: refuse deep bodies first.
  if (json_nesting_depth(body) > kMaxJsonDepth) {
    return bad("", fmt::format("the request body nests arrays and objects deeper than {} levels", kMaxJsonDepth));
  }
  const json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) return bad("", "the request body is not valid JSON");
  if (!j.is_object()) return bad("", "the request body must be a JSON object");
  r.chat = chat;
  if (j.contains("model") && !j["model"].is_null()) {
    if (!j["model"].is_string()) return bad("model", "'model' must be a string");
    r.model = j["model"].get<std::string>();
  }
  if (chat) {
    if (auto e = parse_messages(j, r.messages)) return e;
    if (j.contains("tools") && !j["tools"].is_null()) {
      if (!j["tools"].is_array()) return bad("tools", "'tools' must be an array");
      r.tools_json = j["tools"].dump();
    }
    if (j.contains("chat_template_kwargs") && j["chat_template_kwargs"].is_object()) {
      if (auto e = boolean(j["chat_template_kwargs"], "enable_thinking", r.enable_thinking)) return e;
    }
  } else {
    if (!j.contains("prompt")) return bad("prompt", "'prompt' is required");
    const json& p = j["prompt"];
    if (p.is_string()) {
      r.prompt = p.get<std::string>();
    } else if (p.is_array() && p.size() == 1 && p[0].is_string()) {
      r.prompt = p[0].get<std::string>();
    } else {
      return bad("prompt", "'prompt' must be a string (one prompt per request)");
    }
  }
  GenerationParams& g = r.generation;
  sampling::Params& s = g.sampling;
  s.temp = 1.0f;  // OpenAI's default; llama.cpp's 0.8 applies only to its own tools
  s.top_p = 1.0f;
  s.top_k = 0;
  s.min_p = 0.0f;
  if (auto e = boolean(j, "stream", r.stream)) return e;
  if (j.contains("stream_options") && j["stream_options"].is_object()) {
    if (auto e = boolean(j["stream_options"], "include_usage", r.include_usage)) return e;
  }
  int32_t n = 1;
  if (auto e = number(j, "n", n, 1, 1 << 20)) return e;
  if (n != 1) return bad("n", "only n = 1 is supported");
  if (auto e = number(j, "max_tokens", g.max_tokens, 1, 1 << 24)) return e;
  if (auto e = number(j, "max_completion_tokens", g.max_tokens, 1, 1 << 24)) return e;
  if (auto e = number(j, "temperature", s.temp, 0, 2)) return e;
  if (auto e = number(j, "top_p", s.top_p, 0, 1)) return e;
  if (auto e = number(j, "top_k", s.top_k, 0, 1 << 20)) return e;
  if (auto e = number(j, "min_p", s.min_p, 0, 1)) return e;
  if (auto e = number(j, "presence_penalty", s.presence_penalty, -2, 2)) return e;
  if (auto e = number(j, "frequency_penalty", s.frequency_penalty, -2, 2)) return e;
  if (auto e = number(j, "repeat_penalty", s.repeat_penalty, 0.01, 10)) return e;
  int64_t seed = -1;
  if (auto e = number(j, "seed", seed, -1, 4294967295.0)) return e;
  s.seed = seed < 0 ? sampling::kRandomSeed : static_cast<uint32_t>(seed);
  if (auto e = parse_stop(j, g.stop)) return e;
  if (auto e = boolean(j, "ignore_eos", g.ignore_eos)) return e;
  if (j.contains("cache_prompt") && !j["cache_prompt"].is_null()) {
    bool cache = true;
    if (auto e = boolean(j, "cache_prompt", cache)) return e;
    r.cache_prompt = cache;
  }
  if (chat) {
    bool logprobs = false;
    if (auto e = boolean(j, "logprobs", logprobs)) return e;
    int32_t top = 0;
    if (auto e = number(j, "top_logprobs", top, 0, 20)) return e;
    if (!logprobs && j.contains("top_logprobs") && !j["top_logprobs"].is_null()) {
      return bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    }
    g.top_logprobs = logprobs ? top : -1;
  } else if (j.contains("logprobs") && !j["logprobs"].is_null()) {
    int32_t top = 0;
    if (auto e = number(j, "logprobs", top, 0, 20)) return e;
    g.top_logprobs = top;
  }
  return std::nullopt;
}

json usage_json(int32_t n_prompt, int32_t n_completion, int32_t n_cached) {
  return {{"prompt_tokens", n_prompt},
          {"completion_tokens", n_completion},
          {"total_tokens", n_prompt + n_completion},
          {"prompt_tokens_details", {{"cached_tokens", n_cached}}}};
}

json timings_json(const Request& r) {
  const int32_t computed = r.n_prompt() - r.n_cached();
  const double prompt_ms = r.prompt_ms(), predicted_ms = r.predicted_ms();
  // The first token closes the prompt's time; the others are the generation's.
  const int32_t predicted = std::max(0, r.n_generated() - 1);
  return {{"cache_n", r.n_cached()},
          {"prompt_n", computed},
          {"prompt_ms", prompt_ms},
          {"prompt_per_second", prompt_ms > 0 ? computed * 1000.0 / prompt_ms : 0.0},
          {"predicted_n", r.n_generated()},
          {"predicted_ms", predicted_ms},
          {"predicted_per_second", predicted_ms > 0 ? predicted * 1000.0 / predicted_ms : 0.0}};
}

json completion_response(const ParsedRequest& req, const std::string& id, const std::string& model,
                         const std::string& text, const std::vector<TokenLogprob>& logprobs,
                         const std::string& finish_reason, int32_t n_prompt, int32_t n_completion,
                         int32_t n_cached) {
  json choice = {{"index", 0}, {"finish_reason", finish_reason},
                 {"logprobs", req.generation.top_logprobs >= 0 ? logprobs_json(req.chat, logprobs) : json(nullptr)}};
  if (req.chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    choice["text"] = text;
  }
  return {{"id", id}, {"object", req.chat ? "chat.completion" : "text_completion"}, {"created", std::time(nullptr)},
          {"model", model}, {"choices", json::array({choice})}, {"usage", usage_json(n_prompt, n_completion, n_cached)}};
}

json stream_chunk(const ParsedRequest& req, const std::string& id, const std::string& model, const std::string& text,
                  const std::vector<TokenLogprob>& logprobs, const std::optional<std::string>& finish_reason,
                  bool first) {
  json choice = {{"index", 0}, {"finish_reason", finish_reason ? json(*finish_reason) : json(nullptr)},
                 {"logprobs", req.generation.top_logprobs >= 0 && !logprobs.empty() ? logprobs_json(req.chat, logprobs)
                                                                                     : json(nullptr)}};
  if (req.chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || (!finish_reason && !first)) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  return {{"id", id}, {"object", req.chat ? "chat.completion.chunk" : "text_completion"},
          {"created", std::time(nullptr)}, {"model", model}, {"choices", json::array({choice})}};
}

}  // namespace strata::server
