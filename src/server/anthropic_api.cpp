#include "server/anthropic_api.h"

#include <fmt/format.h>

#include "server/request_fields.h"

namespace strata::server {
namespace {

using nlohmann::json;

// A string, or text blocks ([{type: "text", text}]) joined.
std::optional<ApiError> text_blocks(const json& c, const std::string& where, std::string& out) {
  if (c.is_string()) {
    out += c.get<std::string>();
    return std::nullopt;
  }
  if (!c.is_array()) return bad_field(where, "'" + where + "' must be a string or an array of text blocks");
  for (size_t i = 0; i < c.size(); ++i) {
    const std::string at = fmt::format("{}[{}]", where, i);
    std::string type;
    if (!c[i].is_object()) return bad_field(at, "'" + at + "' must be an object");
    if (auto e = need_string(c[i], "type", type, at)) return e;
    if (type != "text") return bad_field(at + ".type", "'" + at + ".type' must be text here, not '" + type + "'");
    std::string text;
    if (auto e = need_string(c[i], "text", text, at)) return e;
    out += text;
  }
  return std::nullopt;
}

// One content block of a message: text and thinking add to `msg`; tool_use adds a call; tool_result
// becomes a tool message of its own (before the message's text, as the conversation had it).
std::optional<ApiError> content_block(const json& b, const std::string& at, text::ChatMessage& msg,
                                      std::vector<text::ChatMessage>& tool_results) {
  if (!b.is_object()) return bad_field(at, "'" + at + "' must be an object");
  std::string type;
  if (auto e = need_string(b, "type", type, at)) return e;
  if (type == "text" || type == "thinking") {
    std::string text;
    if (auto e = need_string(b, type.c_str(), text, at)) return e;
    (type == "text" ? msg.content : msg.reasoning_content) += text;
    return std::nullopt;
  }
  if (type == "redacted_thinking") return std::nullopt;
  if (type == "tool_use") {
    if (msg.role != "assistant") return bad_field(at + ".type", "'" + at + "': tool_use blocks belong to assistant messages");
    text::ToolCall call;
    if (auto e = need_string(b, "id", call.id, at)) return e;
    if (auto e = need_string(b, "name", call.name, at)) return e;
    if (b.contains("input") && !b["input"].is_object()) return bad_field(at + ".input", "'" + at + ".input' must be an object");
    call.arguments_json = b.contains("input") ? b["input"].dump() : "{}";
    msg.tool_calls.push_back(std::move(call));
    return std::nullopt;
  }
  if (type == "tool_result") {
    text::ChatMessage result;
    result.role = "tool";
    if (auto e = need_string(b, "tool_use_id", result.tool_call_id, at)) return e;
    if (const json* content = optional_field(b, "content")) {
      if (auto e = text_blocks(*content, at + ".content", result.content)) return e;
    }
    tool_results.push_back(std::move(result));
    return std::nullopt;
  }
  return bad_field(at + ".type", "'" + at + ".type' " + type + " is not supported (text, tool_use, tool_result, thinking)");
}

std::optional<ApiError> parse_messages(const json& j, TurnRequest& turn) {
  if (!j.contains("messages") || !j["messages"].is_array() || j["messages"].empty()) {
    return bad_field("messages", "'messages' must be a non-empty array");
  }
  const json& msgs = j["messages"];
  for (size_t i = 0; i < msgs.size(); ++i) {
    const std::string at = fmt::format("messages[{}]", i);
    if (!msgs[i].is_object()) return bad_field(at, "'" + at + "' must be an object");
    text::ChatMessage msg;
    if (auto e = need_string(msgs[i], "role", msg.role, at)) return e;
    if (msg.role != "user" && msg.role != "assistant" && msg.role != "system") {
      return bad_field(at + ".role", "'" + at + ".role' must be user, assistant or system, not '" + msg.role + "'");
    }
    if (!msgs[i].contains("content")) return bad_field(at + ".content", "'" + at + ".content' is required");
    const json& c = msgs[i]["content"];
    if (msg.role == "system") {  // a note mid-conversation (current clients): text only, rendered in place
      if (auto e = text_blocks(c, at + ".content", msg.content)) return e;
      turn.messages.push_back(std::move(msg));
      continue;
    }
    std::vector<text::ChatMessage> tool_results;
    if (c.is_string()) {
      msg.content = c.get<std::string>();
    } else if (c.is_array()) {
      for (size_t k = 0; k < c.size(); ++k) {
        if (auto e = content_block(c[k], fmt::format("{}.content[{}]", at, k), msg, tool_results)) return e;
      }
    } else {
      return bad_field(at + ".content", "'" + at + ".content' must be a string or an array of content blocks");
    }
    for (auto& r : tool_results) turn.messages.push_back(std::move(r));
    if (tool_results.empty() || !msg.content.empty() || !msg.tool_calls.empty()) turn.messages.push_back(std::move(msg));
  }
  return std::nullopt;
}

// tools [{name, description, input_schema}] in OpenAI chat's shape; tool_choice {type, name,
// disable_parallel_tool_use}.
std::optional<ApiError> parse_tools(const json& j, TurnRequest& turn) {
  if (const json* tools = optional_field(j, "tools")) {
    if (!tools->is_array()) return bad_field("tools", "'tools' must be an array");
    for (size_t i = 0; i < tools->size(); ++i) {
      const json& t = (*tools)[i];
      const std::string at = fmt::format("tools[{}]", i);
      if (!t.is_object()) return bad_field(at, "'" + at + "' must be an object");
      if (t.contains("type") && t["type"] != "custom") return bad_field(at + ".type", "'" + at + ".type': only custom (function) tools are supported");
      if (auto e = read_flat_tool(t, at, "input_schema", true, turn.tools)) return e;
    }
  }
  const json* choice = optional_field(j, "tool_choice");
  if (!choice) return std::nullopt;
  const json& c = *choice;
  if (!c.is_object()) return bad_field("tool_choice", "'tool_choice' must be an object");
  std::string type, name;
  if (auto e = need_string(c, "type", type, "tool_choice")) return e;
  bool no_parallel = false;
  if (auto e = read_bool(c, "disable_parallel_tool_use", no_parallel, "tool_choice")) return e;
  turn.parallel_tool_calls = !no_parallel;
  if (type == "auto" || type == "none") turn.tool_choice = type;
  else if (type == "any") turn.tool_choice = "required";
  else if (type == "tool") {
    if (auto e = need_string(c, "name", name, "tool_choice")) return e;
    turn.tool_choice = function_tool_choice(name);
  } else {
    return bad_field("tool_choice.type", "'tool_choice.type' must be auto, any, tool or none, not '" + type + "'");
  }
  return std::nullopt;
}

std::optional<ApiError> parse_stops_and_thinking(const json& j, TurnRequest& turn) {
  if (const json* stops = optional_field(j, "stop_sequences")) {
    const json& s = *stops;
    if (!s.is_array() || s.size() > 16) return bad_field("stop_sequences", "'stop_sequences' must be an array of at most 16 strings");
    for (const json& x : s) {
      if (!x.is_string()) return bad_field("stop_sequences", "'stop_sequences' must be an array of strings");
      turn.generation.stop.push_back(x.get<std::string>());
    }
    turn.report_stop_sequence = true;
  }
  if (const json* thinking = optional_field(j, "thinking")) {
    const json& t = *thinking;
    std::string type;
    if (!t.is_object()) return bad_field("thinking", "'thinking' must be an object");
    if (auto e = need_string(t, "type", type, "thinking")) return e;
    // adaptive: the model decides how long to think, which is what a thinking template does anyway.
    if (type != "enabled" && type != "disabled" && type != "adaptive") {
      return bad_field("thinking.type", "'thinking.type' must be enabled, adaptive or disabled, not '" + type + "'");
    }
    turn.template_kwargs["enable_thinking"] = type != "disabled";
    if (type != "disabled" && optional_field(t, "budget_tokens")) {
      int32_t budget = 0;
      if (auto e = read_number_as(t, "budget_tokens", budget, 0, 1 << 24, "thinking")) return e;
      turn.reasoning_budget = budget;
    }
  }
  // output_config {effort}, context_management, metadata and blocks' cache_control change nothing
  // here; they are checked for their shape so a malformed one is still named.
  if (const json* config = optional_field(j, "output_config")) {
    if (!config->is_object()) return bad_field("output_config", "'output_config' must be an object");
    std::string effort;
    if (auto e = read_string(*config, "effort", effort, "output_config")) return e;
  }
  for (const char* key : {"context_management", "metadata"}) {
    if (const json* v = optional_field(j, key); v && !v->is_object()) {
      return bad_field(key, fmt::format("'{}' must be an object", key));
    }
  }
  return std::nullopt;
}

json usage_json(const TurnUsage& u) {
  return {{"input_tokens", u.prompt_tokens - u.cached_tokens}, {"output_tokens", u.completion_tokens},
          {"cache_read_input_tokens", u.cached_tokens}, {"cache_creation_input_tokens", 0}};
}

json tool_input(const std::string& arguments) {
  json input = json::parse(arguments, nullptr, false);
  return input.is_object() ? input : json::object();
}

}  // namespace

std::string anthropic_stop_reason(const std::string& finish_reason, const std::string& stop_sequence) {
  if (finish_reason == "length") return "max_tokens";
  if (finish_reason == "tool_calls") return "tool_use";
  if (!stop_sequence.empty()) return "stop_sequence";
  return "end_turn";
}

std::optional<ApiError> AnthropicMessages::parse(const json& j, TurnRequest& turn) {
  if (auto e = read_string(j, "model", requested_model_)) return e;
  if (!j.contains("max_tokens")) return bad_field("max_tokens", "'max_tokens' is required");
  if (auto e = read_number_as(j, "max_tokens", turn.generation.max_tokens, 1, 1 << 24)) return e;
  if (const json* system_text = optional_field(j, "system")) {
    text::ChatMessage system;
    system.role = "system";
    if (auto e = text_blocks(*system_text, "system", system.content)) return e;
    turn.messages.push_back(std::move(system));
  }
  if (auto e = parse_messages(j, turn)) return e;
  if (auto e = parse_tools(j, turn)) return e;
  if (auto e = parse_stops_and_thinking(j, turn)) return e;
  if (auto e = parse_server_extras(j, turn)) return e;
  if (auto e = read_bool(j, "stream", stream_)) return e;
  sampling::Params& s = turn.generation.sampling;
  set_api_sampling_defaults(s);  // then only Anthropic's own fields, with its temperature range
  if (auto e = read_number_as(j, "temperature", s.temp, 0, 1)) return e;
  if (auto e = read_number_as(j, "top_p", s.top_p, 0, 1)) return e;
  if (auto e = read_number_as(j, "top_k", s.top_k, 0, 1 << 20)) return e;
  return std::nullopt;
}

json AnthropicMessages::error_body(const ApiError& e) const {
  std::string type = e.type;
  if (e.status == 404) type = "not_found_error";
  else if (e.status == 503) type = "overloaded_error";
  else if (e.status >= 500) type = "api_error";
  return {{"type", "error"}, {"error", {{"type", type}, {"message", e.message}}}};
}

json AnthropicMessages::response(const TurnResult& r) {
  json content = json::array();
  if (!r.reasoning.empty()) content.push_back({{"type", "thinking"}, {"thinking", r.reasoning}, {"signature", ""}});
  if (!r.content.empty()) content.push_back({{"type", "text"}, {"text", r.content}});
  for (const auto& c : r.tool_calls) {
    content.push_back({{"type", "tool_use"}, {"id", c.id}, {"name", c.name}, {"input", tool_input(c.arguments_json)}});
  }
  return {{"id", id_}, {"type", "message"}, {"role", "assistant"}, {"model", model_id_}, {"content", content},
          {"stop_reason", anthropic_stop_reason(r.finish_reason, r.stop_sequence)},
          {"stop_sequence", r.stop_sequence.empty() ? json(nullptr) : json(r.stop_sequence)},
          {"usage", usage_json(r.usage)}};
}

std::string AnthropicMessages::stream_start(const TurnUsage& at_start) {
  json message = {{"id", id_}, {"type", "message"}, {"role", "assistant"}, {"model", model_id_},
                  {"content", json::array()}, {"stop_reason", nullptr}, {"stop_sequence", nullptr},
                  {"usage", usage_json(at_start)}};
  return sse_event("message_start", {{"type", "message_start"}, {"message", message}}) +
         sse_event("ping", {{"type", "ping"}});
}

std::string AnthropicMessages::open_block(Block kind, const json& content_block) {
  std::string out = close_block();
  block_ = kind;
  ++block_index_;
  out += sse_event("content_block_start",
                   {{"type", "content_block_start"}, {"index", block_index_}, {"content_block", content_block}});
  return out;
}

std::string AnthropicMessages::close_block() {
  if (block_ == Block::kNone) return "";
  std::string out;
  if (block_ == Block::kThinking) {
    out += sse_event("content_block_delta", {{"type", "content_block_delta"}, {"index", block_index_},
                                             {"delta", {{"type", "signature_delta"}, {"signature", ""}}}});
  }
  block_ = Block::kNone;
  return out + sse_event("content_block_stop", {{"type", "content_block_stop"}, {"index", block_index_}});
}

std::string AnthropicMessages::stream_events(const TurnEvents& ev) {
  std::string out;
  auto delta = [&](const json& d) {
    out += sse_event("content_block_delta", {{"type", "content_block_delta"}, {"index", block_index_}, {"delta", d}});
  };
  if (!ev.reasoning.empty()) {
    if (block_ != Block::kThinking) out += open_block(Block::kThinking, {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
    delta({{"type", "thinking_delta"}, {"thinking", ev.reasoning}});
  }
  if (!ev.content.empty()) {
    if (block_ != Block::kText) out += open_block(Block::kText, {{"type", "text"}, {"text", ""}});
    delta({{"type", "text_delta"}, {"text", ev.content}});
  }
  for (const auto& d : ev.tool_calls) {
    if (block_ != Block::kToolUse || d.index != tool_index_) {
      out += open_block(Block::kToolUse, {{"type", "tool_use"}, {"id", d.id}, {"name", d.name}, {"input", json::object()}});
      tool_index_ = d.index;
    }
    if (!d.arguments.empty()) delta({{"type", "input_json_delta"}, {"partial_json", d.arguments}});
  }
  if (!ev.done) return out;
  out += close_block();
  const std::string reason = anthropic_stop_reason(ev.finish_reason, ev.stop_sequence);
  json usage = usage_json(ev.usage);
  out += sse_event("message_delta",
                   {{"type", "message_delta"},
                    {"delta", {{"stop_reason", reason},
                               {"stop_sequence", ev.stop_sequence.empty() ? json(nullptr) : json(ev.stop_sequence)}}},
                    {"usage", usage}});
  return out + sse_event("message_stop", {{"type", "message_stop"}});
}

std::string AnthropicMessages::stream_error(const ApiError& e) { return sse_event("error", error_body(e)); }

}  // namespace strata::server
