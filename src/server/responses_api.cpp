#include "server/responses_api.h"

#include <fmt/format.h>

#include <random>

#include "server/request_fields.h"

namespace strata::server {
namespace {

using nlohmann::json;

// Content: a string or parts of type input_text / output_text.
std::optional<ApiError> text_parts(const json& c, const std::string& where, std::string& out) {
  if (c.is_string()) {
    out += c.get<std::string>();
    return std::nullopt;
  }
  if (!c.is_array()) return bad_field(where, "'" + where + "' must be a string or an array of text parts");
  for (size_t i = 0; i < c.size(); ++i) {
    const std::string at = fmt::format("{}[{}]", where, i);
    if (!c[i].is_object()) return bad_field(at, "'" + at + "' must be an object");
    std::string type, text;
    if (auto e = need_string(c[i], "type", type, at)) return e;
    if (type != "input_text" && type != "output_text") {
      return bad_field(at + ".type", "'" + at + ".type' " + type + " is not supported (input_text, output_text)");
    }
    if (auto e = need_string(c[i], "text", text, at)) return e;
    out += text;
  }
  return std::nullopt;
}

std::optional<ApiError> message_item(const json& it, const std::string& at, std::vector<text::ChatMessage>& out) {
  text::ChatMessage msg;
  if (auto e = need_string(it, "role", msg.role, at)) return e;
  if (msg.role == "developer") msg.role = "system";
  if (msg.role != "user" && msg.role != "assistant" && msg.role != "system") {
    return bad_field(at + ".role", "'" + at + ".role' must be user, assistant, system or developer");
  }
  if (!it.contains("content")) return bad_field(at + ".content", "'" + at + ".content' is required");
  if (auto e = text_parts(it["content"], at + ".content", msg.content)) return e;
  out.push_back(std::move(msg));
  return std::nullopt;
}

// function_call items join the assistant message before them (or start one).
std::optional<ApiError> function_call_item(const json& it, const std::string& at, std::vector<text::ChatMessage>& out) {
  text::ToolCall call;
  if (auto e = need_string(it, "call_id", call.id, at)) return e;
  if (auto e = need_string(it, "name", call.name, at)) return e;
  if (auto e = need_string(it, "arguments", call.arguments_json, at)) return e;
  if (out.empty() || out.back().role != "assistant") {
    out.emplace_back();
    out.back().role = "assistant";
  }
  out.back().tool_calls.push_back(std::move(call));
  return std::nullopt;
}

std::optional<ApiError> input_items(const json& input, std::vector<text::ChatMessage>& out) {
  if (input.is_string()) {
    out.emplace_back();
    out.back().role = "user";
    out.back().content = input.get<std::string>();
    return std::nullopt;
  }
  if (!input.is_array() || input.empty()) return bad_field("input", "'input' must be a string or a non-empty array of items");
  for (size_t i = 0; i < input.size(); ++i) {
    const json& it = input[i];
    const std::string at = fmt::format("input[{}]", i);
    if (!it.is_object()) return bad_field(at, "'" + at + "' must be an object");
    std::string type = it.contains("role") ? "message" : "";
    if (auto e = read_string(it, "type", type, at)) return e;
    std::optional<ApiError> e;
    if (type == "message") {
      e = message_item(it, at, out);
    } else if (type == "function_call") {
      e = function_call_item(it, at, out);
    } else if (type == "function_call_output") {
      text::ChatMessage result;
      result.role = "tool";
      e = need_string(it, "call_id", result.tool_call_id, at);
      if (!e) e = it.contains("output") ? text_parts(it["output"], at + ".output", result.content)
                                        : bad_field(at + ".output", "'" + at + ".output' is required");
      if (!e) out.push_back(std::move(result));
    } else if (type != "reasoning") {  // earlier reasoning is not shown to the model again
      e = bad_field(at + ".type", "'" + at + ".type' '" + type +
                                      "' is not supported (message, function_call, function_call_output, reasoning)");
    }
    if (e) return e;
  }
  return std::nullopt;
}

// Flat function tools {type: function, name, description, parameters} in OpenAI chat's shape.
std::optional<ApiError> parse_tools(const json& j, TurnRequest& turn) {
  const json* tools = optional_field(j, "tools");
  if (!tools) return std::nullopt;
  if (!tools->is_array()) return bad_field("tools", "'tools' must be an array");
  for (size_t i = 0; i < tools->size(); ++i) {
    const json& t = (*tools)[i];
    const std::string at = fmt::format("tools[{}]", i);
    if (!t.is_object()) return bad_field(at, "'" + at + "' must be an object");
    std::string type;
    if (auto e = need_string(t, "type", type, at)) return e;
    if (type != "function") return bad_field(at + ".type", "'" + at + ".type' " + type + " is not supported (function)");
    if (auto e = read_flat_tool(t, at, "parameters", false, turn.tools)) return e;
  }
  return std::nullopt;
}

std::optional<ApiError> parse_tool_choice(const json& j, TurnRequest& turn) {
  const json* choice = optional_field(j, "tool_choice");
  if (!choice) return std::nullopt;
  const json& c = *choice;
  if (c.is_string()) {
    turn.tool_choice = c;
    return std::nullopt;
  }
  std::string type, name;
  if (!c.is_object()) return bad_field("tool_choice", "'tool_choice' must be a string or an object");
  if (auto e = need_string(c, "type", type, "tool_choice")) return e;
  if (type != "function") return bad_field("tool_choice.type", "'tool_choice.type' must be function");
  if (auto e = need_string(c, "name", name, "tool_choice")) return e;
  turn.tool_choice = function_tool_choice(name);
  return std::nullopt;
}

// text.format {type: text | json_object | json_schema {name, schema, strict}}.
std::optional<ApiError> parse_text_format(const json& j, TurnRequest& turn) {
  const json* text = optional_field(j, "text");
  if (!text) return std::nullopt;
  if (!text->is_object()) return bad_field("text", "'text' must be an object");
  const json* format = optional_field(*text, "format");
  if (!format) return std::nullopt;
  const json& f = *format;
  if (!f.is_object()) return bad_field("text.format", "'text.format' must be an object");
  std::string type;
  if (auto e = need_string(f, "type", type, "text.format")) return e;
  turn.constraint_field = "text.format";
  if (type == "json_object") {
    turn.json_object = true;
  } else if (type == "json_schema") {
    if (!f.contains("schema") || !f["schema"].is_object()) return bad_field("text.format.schema", "'text.format.schema' must be an object");
    turn.json_schema = f["schema"];
    turn.constraint_field = "text.format.schema";
  } else if (type != "text") {
    return bad_field("text.format.type", "'text.format.type' must be text, json_object or json_schema");
  }
  return std::nullopt;
}

json usage_json(const TurnUsage& u) {
  return {{"input_tokens", u.prompt_tokens}, {"input_tokens_details", {{"cached_tokens", u.cached_tokens}}},
          {"output_tokens", u.completion_tokens}, {"output_tokens_details", {{"reasoning_tokens", 0}}},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

json output_text_part(const std::string& text) {
  return {{"type", "output_text"}, {"text", text}, {"annotations", json::array()}, {"logprobs", json::array()}};
}

}  // namespace

std::optional<ApiError> OpenAiResponses::parse(const json& j, TurnRequest& turn) {
  if (auto e = read_string(j, "model", requested_model_)) return e;
  if (optional_field(j, "previous_response_id")) {
    return bad_field("previous_response_id", "'previous_response_id' is not supported: this server keeps no responses; "
                                             "send the whole conversation as input items");
  }
  std::string instructions;
  if (auto e = read_string(j, "instructions", instructions)) return e;
  if (!instructions.empty()) {
    turn.messages.emplace_back();
    turn.messages.back().role = "system";
    turn.messages.back().content = instructions;
  }
  if (!j.contains("input")) return bad_field("input", "'input' is required");
  if (auto e = input_items(j["input"], turn.messages)) return e;
  if (auto e = parse_tools(j, turn)) return e;
  if (auto e = parse_tool_choice(j, turn)) return e;
  if (auto e = read_bool(j, "parallel_tool_calls", turn.parallel_tool_calls)) return e;
  if (auto e = parse_text_format(j, turn)) return e;
  if (auto e = parse_template_kwargs(j, turn)) return e;
  if (auto e = parse_server_extras(j, turn)) return e;
  if (auto e = read_number_as(j, "max_output_tokens", turn.generation.max_tokens, 1, 1 << 24)) return e;
  if (auto e = read_bool(j, "stream", stream_)) return e;
  if (auto e = parse_sampling(j, turn.generation.sampling)) return e;
  echo_ = {{"instructions", instructions.empty() ? json(nullptr) : json(instructions)},
           {"tools", j.value("tools", json::array())}, {"tool_choice", j.value("tool_choice", json("auto"))},
           {"parallel_tool_calls", turn.parallel_tool_calls}, {"temperature", turn.generation.sampling.temp},
           {"top_p", turn.generation.sampling.top_p},
           {"max_output_tokens", turn.generation.max_tokens > 0 ? json(turn.generation.max_tokens) : json(nullptr)},
           {"text", j.contains("text") && j["text"].is_object() ? j["text"] : json{{"format", {{"type", "text"}}}}}};
  return std::nullopt;
}

std::string OpenAiResponses::item_id(const char* prefix) const {
  std::random_device rd;
  return fmt::format("{}_{:08x}{:08x}", prefix, rd(), rd());
}

json OpenAiResponses::response_object(const json& output, const std::string& status, const TurnUsage* usage,
                                      const std::string& finish_reason) const {
  std::string text;
  for (const auto& item : output) {
    if (item["type"] != "message") continue;
    for (const auto& part : item["content"]) text += part.value("text", "");
  }
  json r = {{"id", id_}, {"object", "response"}, {"created_at", created_}, {"status", status}, {"error", nullptr},
            {"incomplete_details", finish_reason == "length" ? json{{"reason", "max_output_tokens"}} : json(nullptr)},
            {"model", model_id_}, {"output", output}, {"output_text", text}, {"metadata", json::object()},
            {"usage", usage ? usage_json(*usage) : json(nullptr)}};
  for (auto it = echo_.begin(); it != echo_.end(); ++it) r[it.key()] = it.value();
  return r;
}

json OpenAiResponses::response(const TurnResult& r) {
  json output = json::array();
  if (!r.reasoning.empty()) {
    output.push_back({{"id", item_id("rs")}, {"type", "reasoning"}, {"summary", json::array()},
                      {"content", json::array({{{"type", "reasoning_text"}, {"text", r.reasoning}}})},
                      {"status", "completed"}});
  }
  if (!r.content.empty() || r.tool_calls.empty()) {
    output.push_back({{"id", item_id("msg")}, {"type", "message"}, {"role", "assistant"}, {"status", "completed"},
                      {"content", json::array({output_text_part(r.content)})}});
  }
  for (const auto& c : r.tool_calls) {
    output.push_back({{"id", item_id("fc")}, {"type", "function_call"}, {"call_id", c.id}, {"name", c.name},
                      {"arguments", c.arguments_json}, {"status", "completed"}});
  }
  const std::string status = r.finish_reason == "length" ? "incomplete" : "completed";
  return response_object(output, status, &r.usage, r.finish_reason);
}

std::string OpenAiResponses::event(const std::string& type, json body) {
  body["type"] = type;
  body["sequence_number"] = sequence_++;
  return sse_event(type, body);
}

std::string OpenAiResponses::stream_start(const TurnUsage&) {
  const json r = response_object(json::array(), "in_progress", nullptr, "");
  std::string out = event("response.created", {{"response", r}});
  return out + event("response.in_progress", {{"response", r}});
}

std::string OpenAiResponses::open_item(Item kind, json item) {
  std::string out = close_item();
  item_ = kind;
  ++output_index_;
  item_json_ = std::move(item);
  const std::string id = item_json_["id"];
  out += event("response.output_item.added", {{"output_index", output_index_}, {"item", item_json_}});
  if (kind == Item::kMessage || kind == Item::kReasoning) {
    const json part = kind == Item::kMessage ? output_text_part("") : json{{"type", "reasoning_text"}, {"text", ""}};
    out += event("response.content_part.added",
                 {{"item_id", id}, {"output_index", output_index_}, {"content_index", 0}, {"part", part}});
    item_json_["content"] = json::array({part});
  }
  return out;
}

std::string OpenAiResponses::close_item() {
  if (item_ == Item::kNone) return "";
  std::string out;
  const json at = {{"item_id", item_json_["id"]}, {"output_index", output_index_}};
  if (item_ == Item::kFunctionCall) {
    json done = at;
    done["arguments"] = item_json_["arguments"];
    done["name"] = item_json_["name"];
    out += event("response.function_call_arguments.done", done);
  } else {
    json done = at;
    done["content_index"] = 0;
    const json& part = item_json_["content"][0];
    done["text"] = part["text"];
    if (item_ == Item::kMessage) done["logprobs"] = json::array();
    out += event(item_ == Item::kMessage ? "response.output_text.done" : "response.reasoning_text.done", done);
    json part_done = at;
    part_done["content_index"] = 0;
    part_done["part"] = part;
    out += event("response.content_part.done", part_done);
  }
  item_json_["status"] = "completed";
  out += event("response.output_item.done", {{"output_index", output_index_}, {"item", item_json_}});
  output_.push_back(item_json_);
  item_ = Item::kNone;
  return out;
}

std::string OpenAiResponses::stream_events(const TurnEvents& ev) {
  std::string out;
  auto text_delta = [&](const char* type, const std::string& delta) {
    item_json_["content"][0]["text"] = item_json_["content"][0]["text"].get<std::string>() + delta;
    json body = {{"item_id", item_json_["id"]}, {"output_index", output_index_}, {"content_index", 0}, {"delta", delta}};
    if (item_ == Item::kMessage) body["logprobs"] = json::array();
    out += event(type, body);
  };
  if (!ev.reasoning.empty()) {
    if (item_ != Item::kReasoning) {
      out += open_item(Item::kReasoning, {{"id", item_id("rs")}, {"type", "reasoning"}, {"summary", json::array()},
                                          {"status", "in_progress"}});
    }
    text_delta("response.reasoning_text.delta", ev.reasoning);
  }
  if (!ev.content.empty()) {
    if (item_ != Item::kMessage) {
      out += open_item(Item::kMessage, {{"id", item_id("msg")}, {"type", "message"}, {"role", "assistant"},
                                        {"status", "in_progress"}, {"content", json::array()}});
    }
    text_delta("response.output_text.delta", ev.content);
  }
  for (const auto& d : ev.tool_calls) {
    if (item_ != Item::kFunctionCall || d.index != tool_index_) {
      out += open_item(Item::kFunctionCall, {{"id", item_id("fc")}, {"type", "function_call"}, {"call_id", d.id},
                                             {"name", d.name}, {"arguments", ""}, {"status", "in_progress"}});
      tool_index_ = d.index;
    }
    if (d.arguments.empty()) continue;
    item_json_["arguments"] = item_json_["arguments"].get<std::string>() + d.arguments;
    out += event("response.function_call_arguments.delta",
                 {{"item_id", item_json_["id"]}, {"output_index", output_index_}, {"delta", d.arguments}});
  }
  if (!ev.done) return out;
  out += close_item();
  const bool incomplete = ev.finish_reason == "length";
  const json r = response_object(output_, incomplete ? "incomplete" : "completed", &ev.usage, ev.finish_reason);
  return out + event(incomplete ? "response.incomplete" : "response.completed", {{"response", r}});
}

std::string OpenAiResponses::stream_error(const ApiError& e) {
  return event("error", {{"code", e.code.empty() ? json(e.type) : json(e.code)}, {"message", e.message},
                         {"param", e.param.empty() ? json(nullptr) : json(e.param)}});
}

}  // namespace strata::server
