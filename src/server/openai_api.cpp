#include "server/openai_api.h"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>

namespace strata::server {
namespace {

using nlohmann::json;

// Message content: a string, or a list of {type: "text", text} parts.
std::optional<ApiError> content_text(const json& c, const std::string& where, std::string& out) {
  if (c.is_string()) {
    out = c.get<std::string>();
    return std::nullopt;
  }
  if (!c.is_array()) return bad_field(where, where + " must be a string or a list of text parts");
  for (size_t i = 0; i < c.size(); ++i) {
    const json& part = c[i];
    const std::string at = fmt::format("{}[{}]", where, i);
    if (!part.is_object()) return bad_field(at, at + " must be an object");
    if (!part.contains("type") || !part["type"].is_string()) return bad_field(at + ".type", at + ".type must be a string");
    const std::string type = part["type"].get<std::string>();
    if (type != "text" && type != "input_text" && type != "output_text") {
      return bad_field(at + ".type", at + ".type: only text parts are supported, not '" + type + "'");
    }
    if (!part.contains("text") || !part["text"].is_string()) return bad_field(at + ".text", at + ".text must be a string");
    out += part["text"].get<std::string>();
  }
  return std::nullopt;
}

std::optional<ApiError> parse_tool_calls(const json& calls, const std::string& where, std::vector<text::ToolCall>& out) {
  if (!calls.is_array()) return bad_field(where, where + " must be an array");
  for (size_t i = 0; i < calls.size(); ++i) {
    const json& tc = calls[i];
    const std::string at = fmt::format("{}[{}]", where, i);
    if (!tc.is_object()) return bad_field(at, at + " must be an object");
    if (!tc.contains("function") || !tc["function"].is_object()) {
      return bad_field(at + ".function", at + ".function must be an object");
    }
    const json& f = tc["function"];
    text::ToolCall call;
    if (auto e = read_string(tc, "id", call.id, at)) return e;
    if (auto e = read_string(f, "name", call.name, at + ".function")) return e;
    call.arguments_json = "{}";
    if (f.contains("arguments") && f["arguments"].is_object()) {
      call.arguments_json = f["arguments"].dump();
    } else if (auto e = read_string(f, "arguments", call.arguments_json, at + ".function")) {
      return e;
    }
    out.push_back(std::move(call));
  }
  return std::nullopt;
}

std::optional<ApiError> parse_stop(const json& j, const char* key, std::vector<std::string>& out) {
  const json* field = optional_field(j, key);
  if (!field) return std::nullopt;
  const json& s = *field;
  const std::string msg = fmt::format("'{}' must be a string or an array of at most 16 strings", key);
  if (s.is_string()) {
    out.push_back(s.get<std::string>());
  } else if (s.is_array()) {
    if (s.size() > 16) return bad_field(key, msg);
    for (const json& x : s) {
      if (!x.is_string()) return bad_field(key, msg);
      out.push_back(x.get<std::string>());
    }
  } else {
    return bad_field(key, msg);
  }
  return std::nullopt;
}

// response_format {type: text | json_object [schema] | json_schema {name, schema, strict}}, and
// llama-server's `grammar` (GBNF) and `json_schema` fields.
std::optional<ApiError> parse_constraint(const json& j, TurnRequest& turn) {
  if (const json* format = optional_field(j, "response_format")) {
    const json& rf = *format;
    if (!rf.is_object()) return bad_field("response_format", "'response_format' must be an object");
    std::string type;
    if (auto e = need_string(rf, "type", type, "response_format")) return e;
    turn.constraint_field = "response_format";
    if (type == "json_object") {
      if (rf.contains("schema") && rf["schema"].is_object()) turn.json_schema = rf["schema"];
      else turn.json_object = true;
    } else if (type == "json_schema") {
      if (!rf.contains("json_schema") || !rf["json_schema"].is_object()) {
        return bad_field("response_format.json_schema", "'response_format.json_schema' must be an object");
      }
      const json& js = rf["json_schema"];
      turn.constraint_field = "response_format.json_schema.schema";
      const json* schema = optional_field(js, "schema");
      if (!schema) turn.json_object = true;
      else if (!schema->is_object()) return bad_field(turn.constraint_field, "'response_format.json_schema.schema' must be an object");
      else turn.json_schema = *schema;
    } else if (type != "text") {
      return bad_field("response_format.type", "'response_format.type' must be text, json_object or json_schema, not '" + type + "'");
    }
  }
  if (const json* schema = optional_field(j, "json_schema")) {
    if (!schema->is_object()) return bad_field("json_schema", "'json_schema' must be an object");
    if (turn.json_schema || turn.json_object) return bad_field("json_schema", "give 'json_schema' or 'response_format', not both");
    turn.json_schema = *schema;
    turn.constraint_field = "json_schema";
  }
  if (auto e = read_string(j, "grammar", turn.grammar)) return e;
  if (!turn.grammar.empty()) {
    if (turn.json_schema || turn.json_object) return bad_field("grammar", "give 'grammar' or a JSON schema, not both");
    turn.constraint_field = "grammar";
  }
  return std::nullopt;
}

// tools, tool_choice, parallel_tool_calls and chat_template_kwargs.
std::optional<ApiError> parse_chat_extras(const json& j, TurnRequest& turn) {
  if (const json* tools = optional_field(j, "tools")) {
    if (!tools->is_array()) return bad_field("tools", "'tools' must be an array");
    turn.tools = *tools;
  }
  if (const json* choice = optional_field(j, "tool_choice")) turn.tool_choice = *choice;
  if (auto e = read_bool(j, "parallel_tool_calls", turn.parallel_tool_calls)) return e;
  // reasoning_effort is a template variable (gpt-oss templates read it); chat_template_kwargs wins.
  std::string effort;
  if (auto e = read_string(j, "reasoning_effort", effort)) return e;
  if (!effort.empty()) turn.template_kwargs["reasoning_effort"] = effort;
  return parse_template_kwargs(j, turn);
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

std::optional<ApiError> parse_logprobs(const json& j, bool chat, int32_t& top_logprobs) {
  if (chat) {
    bool logprobs = false;
    if (auto e = read_bool(j, "logprobs", logprobs)) return e;
    int32_t top = 0;
    if (auto e = read_number_as(j, "top_logprobs", top, 0, 20)) return e;
    if (!logprobs && optional_field(j, "top_logprobs")) {
      return bad_field("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    }
    top_logprobs = logprobs ? top : -1;
  } else if (optional_field(j, "logprobs")) {
    int32_t top = 0;
    if (auto e = read_number_as(j, "logprobs", top, 0, 20)) return e;
    top_logprobs = top;
  }
  return std::nullopt;
}

std::optional<ApiError> parse_prompt(const json& j, std::string& out) {
  if (!j.contains("prompt")) return bad_field("prompt", "'prompt' is required");
  const json& p = j["prompt"];
  if (p.is_string()) {
    out = p.get<std::string>();
  } else if (p.is_array() && p.size() == 1 && p[0].is_string()) {
    out = p[0].get<std::string>();
  } else {
    return bad_field("prompt", "'prompt' must be a string (one prompt per request)");
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> parse_openai_messages(const json& msgs, const std::string& where,
                                              std::vector<text::ChatMessage>& out) {
  if (!msgs.is_array() || msgs.empty()) return bad_field(where, "'" + where + "' must be a non-empty array");
  for (size_t i = 0; i < msgs.size(); ++i) {
    const json& m = msgs[i];
    const std::string at = fmt::format("{}[{}]", where, i);
    if (!m.is_object()) return bad_field(at, at + " must be an object");
    if (!m.contains("role") || !m["role"].is_string()) return bad_field(at + ".role", at + ".role must be a string");
    text::ChatMessage msg;
    msg.role = m["role"].get<std::string>();
    static const char* kRoles[] = {"system", "developer", "user", "assistant", "tool"};
    if (std::find(std::begin(kRoles), std::end(kRoles), msg.role) == std::end(kRoles)) {
      return bad_field(at + ".role", fmt::format("{}.role '{}' is not one of system, developer, user, assistant, tool", at, msg.role));
    }
    if (msg.role == "developer") msg.role = "system";
    if (const json* content = optional_field(m, "content")) {
      if (auto e = content_text(*content, at + ".content", msg.content)) return e;
    }
    if (auto e = read_string(m, "reasoning_content", msg.reasoning_content, at)) return e;
    if (auto e = read_string(m, "name", msg.name, at)) return e;
    if (auto e = read_string(m, "tool_call_id", msg.tool_call_id, at)) return e;
    if (const json* calls = optional_field(m, "tool_calls")) {
      if (auto e = parse_tool_calls(*calls, at + ".tool_calls", msg.tool_calls)) return e;
    }
    out.push_back(std::move(msg));
  }
  return std::nullopt;
}

std::optional<ApiError> OpenAiCompletions::parse(const json& j, TurnRequest& turn) {
  if (auto e = read_string(j, "model", requested_model_)) return e;
  turn.chat = chat_;
  if (chat_) {
    if (!j.contains("messages")) return bad_field("messages", "'messages' is required");
    if (auto e = parse_openai_messages(j["messages"], "messages", turn.messages)) return e;
    if (auto e = parse_chat_extras(j, turn)) return e;
  } else if (auto e = parse_prompt(j, turn.prompt)) {
    return e;
  }
  if (auto e = parse_constraint(j, turn)) return e;
  GenerationParams& g = turn.generation;
  if (auto e = read_bool(j, "stream", stream_)) return e;
  if (const json* options = optional_field(j, "stream_options")) {
    if (!options->is_object()) return bad_field("stream_options", "'stream_options' must be an object");
    if (auto e = read_bool(*options, "include_usage", include_usage_, "stream_options")) return e;
  }
  int32_t n = 1;
  if (auto e = read_number_as(j, "n", n, 1, 1 << 20)) return e;
  if (n != 1) return bad_field("n", "only n = 1 is supported");
  if (auto e = read_number_as(j, "max_tokens", g.max_tokens, 1, 1 << 24)) return e;
  if (auto e = read_number_as(j, "max_completion_tokens", g.max_tokens, 1, 1 << 24)) return e;
  if (auto e = read_number_as(j, "n_predict", g.max_tokens, -1, 1 << 24)) return e;  // llama-server's name
  if (auto e = parse_sampling(j, g.sampling)) return e;
  if (auto e = parse_stop(j, "stop", g.stop)) return e;
  if (auto e = parse_server_extras(j, turn)) return e;
  if (auto e = parse_logprobs(j, chat_, top_logprobs_)) return e;
  g.top_logprobs = top_logprobs_;
  return std::nullopt;
}

json openai_usage(const TurnUsage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

json OpenAiCompletions::response(const TurnResult& r) {
  json choice = {{"index", 0}, {"finish_reason", r.finish_reason},
                 {"logprobs", top_logprobs_ >= 0 ? logprobs_json(chat_, r.logprobs) : json(nullptr)}};
  if (chat_) {
    json message = {{"role", "assistant"}, {"content", r.content}};
    if (!r.reasoning.empty()) message["reasoning_content"] = r.reasoning;
    if (!r.tool_calls.empty()) {
      json calls = json::array();
      for (const auto& c : r.tool_calls) {
        calls.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments_json}}}});
      }
      message["tool_calls"] = calls;
      if (r.content.empty()) message["content"] = nullptr;
    }
    choice["message"] = message;
  } else {
    choice["text"] = r.content;
  }
  return {{"id", id_}, {"object", chat_ ? "chat.completion" : "text_completion"}, {"created", created_},
          {"model", model_id_}, {"choices", json::array({choice})}, {"usage", openai_usage(r.usage)},
          {"timings", r.usage.timings}};
}

json OpenAiCompletions::chunk(json delta_or_text, const std::vector<TokenLogprob>& logprobs,
                              const std::optional<std::string>& finish_reason) const {
  json choice = {{"index", 0}, {"finish_reason", finish_reason ? json(*finish_reason) : json(nullptr)},
                 {"logprobs", top_logprobs_ >= 0 && !logprobs.empty() ? logprobs_json(chat_, logprobs) : json(nullptr)}};
  choice[chat_ ? "delta" : "text"] = std::move(delta_or_text);
  return {{"id", id_}, {"object", chat_ ? "chat.completion.chunk" : "text_completion"},
          {"created", created_}, {"model", model_id_}, {"choices", json::array({choice})}};
}

std::string OpenAiCompletions::stream_events(const TurnEvents& ev) {
  std::string out;
  const bool has_output = !ev.content.empty() || !ev.reasoning.empty() || !ev.tool_calls.empty() || !ev.logprobs.empty();
  if (has_output || first_chunk_) {
    if (!chat_) {
      out += sse_data(chunk(ev.content, ev.logprobs, std::nullopt));
    } else {
      json delta = json::object();
      if (first_chunk_) delta["role"] = "assistant";
      if (!ev.reasoning.empty()) delta["reasoning_content"] = ev.reasoning;
      if (!ev.content.empty() || (!first_chunk_ && ev.reasoning.empty() && ev.tool_calls.empty())) delta["content"] = ev.content;
      if (!ev.tool_calls.empty()) {
        json calls = json::array();
        for (const auto& d : ev.tool_calls) {
          json call = {{"index", d.index}};
          if (!d.id.empty()) call["id"] = d.id, call["type"] = "function";
          json function = {{"arguments", d.arguments}};
          if (!d.name.empty()) function["name"] = d.name;
          call["function"] = function;
          calls.push_back(call);
        }
        delta["tool_calls"] = calls;
      }
      out += sse_data(chunk(delta, ev.logprobs, std::nullopt));
    }
    first_chunk_ = false;
  }
  if (ev.done) {
    out += sse_data(chunk(chat_ ? json::object() : json(""), {}, ev.finish_reason));
    if (include_usage_) {
      json usage = chunk(json::object(), {}, std::nullopt);
      usage["choices"] = json::array();
      usage["usage"] = openai_usage(ev.usage);
      usage["timings"] = ev.usage.timings;
      out += sse_data(usage);
    }
    out += "data: [DONE]\n\n";
  }
  return out;
}

std::string OpenAiCompletions::stream_error(const ApiError& e) { return sse_data(e.body()); }

}  // namespace strata::server
