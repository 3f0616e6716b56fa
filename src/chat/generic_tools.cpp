// The generic tool-call format, for chat templates that have none of their own (llama-server's
// "generic" format): the tools are described in the system prompt, and the whole answer is one JSON
// object constrained by a grammar: {"tool_call": {"name", "arguments"}}, {"tool_calls": [...]} when
// parallel, or {"response": "..."} when the model may answer in text (tool_choice auto).
#include <fmt/format.h>

#include "chat/output_state.h"
#include "grammar/grammar.h"

namespace strata::chat {

namespace {

using nlohmann::ordered_json;

// One tool's call: the name first (models write what they were shown first), then its arguments.
ordered_json call_schema(const ToolSpec& tool) {
  ordered_json args = tool.parameters_in_order.is_null() ? ordered_json(tool.parameters) : tool.parameters_in_order;
  ordered_json props = ordered_json::object();
  props["name"] = {{"const", tool.name}};
  props["arguments"] = std::move(args);
  return {{"type", "object"}, {"properties", std::move(props)}, {"required", {"name", "arguments"}}};
}

ordered_json answer_schema(const std::vector<ToolSpec>& tools, const ToolChoice& choice, bool parallel) {
  ordered_json calls = ordered_json::array();
  for (const auto& t : tools) {
    if (choice.kind != ToolChoice::kFunction || t.name == choice.function) calls.push_back(call_schema(t));
  }
  ordered_json one = calls.size() == 1 ? calls[0] : ordered_json{{"anyOf", calls}};
  ordered_json props = ordered_json::object();
  const char* key = parallel ? "tool_calls" : "tool_call";
  if (parallel) {
    props[key] = {{"type", "array"}, {"items", std::move(one)}, {"minItems", 1}};
  } else {
    props[key] = std::move(one);
  }
  ordered_json call = {{"type", "object"}, {"properties", std::move(props)}, {"required", {key}}};
  if (choice.kind != ToolChoice::kAuto) return call;
  ordered_json text = {{"type", "object"},
                       {"properties", {{"response", {{"type", "string"}}}}},
                       {"required", {"response"}}};
  return {{"anyOf", {std::move(call), std::move(text)}}};
}

// A call object {"name", "arguments"} as a ToolCall; false when it is not one.
bool read_call(const nlohmann::json& c, ToolCall& call) {
  if (!c.is_object() || !c.contains("name") || !c["name"].is_string()) return false;
  call.name = c["name"].get<std::string>();
  const auto args = c.contains("arguments") ? c["arguments"] : nlohmann::json::object();
  call.arguments_json = args.is_object() ? args.dump() : "{}";
  return true;
}

}  // namespace

std::string generic_tools_instruction(const std::vector<ToolSpec>& tools, bool parallel) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const auto& t : tools) {
    list.push_back({{"name", t.name},
                    {"description", t.description},
                    {"parameters", t.parameters_in_order.is_null() ? nlohmann::ordered_json(t.parameters)
                                                                   : t.parameters_in_order}});
  }
  const std::string example =
      parallel ? R"({"tool_calls": [{"name": "tool_name", "arguments": {"arg1": "some_value"}}]})"
               : R"({"tool_call": {"name": "tool_name", "arguments": {"arg1": "some_value"}}})";
  return fmt::format(
      "Respond in JSON format, either with `{}` (a request to call tools) or with `response` reply to the "
      "user's request.\n\nYou can call any of the following tools to satisfy the user's requests:\n{}\n\n"
      "Example tool call syntax:\n\n{}",
      parallel ? "tool_calls" : "tool_call", list.dump(2), example);
}

Result<std::string> generic_tool_grammar(const ChatFormat& format, const std::vector<ToolSpec>& tools,
                                         const ToolChoice& choice, bool parallel, bool starts_in_reasoning) {
  if (choice.kind == ToolChoice::kNone || tools.empty()) return std::string();
  auto body = grammar::json_schema_to_gbnf(answer_schema(tools, choice, parallel), "answer-");
  if (!body.ok()) return make_error(ErrorCode::kInvalidArgument, "tools: {}", body.error().message);
  return reasoning_then(format, starts_in_reasoning, "answer-root", *body);
}

// The generic format's content: held whole (it is one JSON object) and read at the end. A text that
// is not such an object stays content as it was written.
Progress OutputParser::State::step_generic() {
  if (!finishing) {
    if (buf.size() - pos <= kMaxHeldBytes) return Progress::kNeedMore;
    parse_tools = false;  // too long to be held: plain content from here on
    return Progress::kMoved;
  }
  std::string_view r = rest();
  const auto j = nlohmann::json::parse(r, nullptr, false);
  bool read = false;
  if (j.is_object() && j.contains("response") && j["response"].is_string()) {
    emit_content(j["response"].get_ref<const std::string&>());
    read = true;
  } else if (j.is_object() && (j.contains("tool_call") || j.contains("tool_calls"))) {
    const nlohmann::json list = j.contains("tool_calls") ? j["tool_calls"] : nlohmann::json::array({j["tool_call"]});
    read = list.is_array() && !list.empty();
    for (size_t i = 0; read && i < list.size() && calls.size() < kMaxToolCalls; ++i) {
      ToolCall call;
      if (!read_call(list[i], call)) break;
      start_call(std::move(call.name));
      emit_arguments(call.arguments_json);
    }
  }
  if (!read) emit_content(r);
  consume(r.size());
  mode = Mode::kFinished;
  return Progress::kMoved;
}

}  // namespace strata::chat
