// The OpenAI `tools` and `tool_choice` request fields, and template family detection.
#include <set>

#include "chat/chat_format.h"

namespace strata::chat {

namespace {

using nlohmann::json;

bool valid_tool_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

int json_depth(const json& j, int limit) {
  if (limit < 0) return 0;
  int deepest = 0;
  if (j.is_object() || j.is_array()) {
    for (const auto& item : j) deepest = std::max(deepest, json_depth(item, limit - 1));
    return deepest + 1;
  }
  return 0;
}

Result<ToolSpec> parse_tool(const json& tool, size_t i) {
  if (!tool.is_object()) return make_error(ErrorCode::kInvalidArgument, "tools[{}]: must be an object", i);
  auto type = tool.find("type");
  if (type == tool.end() || !type->is_string() || *type != "function") {
    return make_error(ErrorCode::kInvalidArgument, "tools[{}].type: must be \"function\"", i);
  }
  auto fn = tool.find("function");
  if (fn == tool.end() || !fn->is_object()) {
    return make_error(ErrorCode::kInvalidArgument, "tools[{}].function: must be an object", i);
  }
  ToolSpec spec;
  auto name = fn->find("name");
  if (name == fn->end() || !name->is_string() || !valid_tool_name(name->get<std::string>())) {
    return make_error(ErrorCode::kInvalidArgument,
                      "tools[{}].function.name: must be a string of 1 to 64 characters [A-Za-z0-9_-]", i);
  }
  spec.name = name->get<std::string>();
  if (auto d = fn->find("description"); d != fn->end() && !d->is_null()) {
    if (!d->is_string()) {
      return make_error(ErrorCode::kInvalidArgument, "tools[{}].function.description: must be a string", i);
    }
    spec.description = d->get<std::string>();
  }
  auto params = fn->find("parameters");
  if (params == fn->end() || params->is_null()) {
    spec.parameters = json{{"type", "object"}, {"properties", json::object()}};
  } else if (!params->is_object()) {
    return make_error(ErrorCode::kInvalidArgument, "tools[{}].function.parameters: must be an object", i);
  } else if (json_depth(*params, kMaxSchemaDepth + 1) > kMaxSchemaDepth) {
    return make_error(ErrorCode::kInvalidArgument, "tools[{}].function.parameters: nested deeper than {}", i,
                      kMaxSchemaDepth);
  } else {
    spec.parameters = *params;
    auto props = params->find("properties");
    if (props != params->end() && !props->is_object()) {
      return make_error(ErrorCode::kInvalidArgument,
                        "tools[{}].function.parameters.properties: must be an object", i);
    }
  }
  return spec;
}

}  // namespace

std::string_view tool_format_name(ToolFormat format) {
  switch (format) {
    case ToolFormat::kNone: return "none";
    case ToolFormat::kHermesJson: return "hermes-json";
    case ToolFormat::kQwenXml: return "qwen-xml";
    case ToolFormat::kLlama3Json: return "llama3-json";
    case ToolFormat::kGeneric: return "generic";
  }
  return "unknown";
}

ChatFormat detect_format(std::string_view src) {
  auto has = [&](std::string_view s) { return src.find(s) != std::string_view::npos; };
  ChatFormat f;
  if (has("<function=") && has("<parameter=")) {
    f.tools = ToolFormat::kQwenXml;
  } else if (has("<tool_call>")) {
    f.tools = ToolFormat::kHermesJson;
  } else if (has("<|start_header_id|>") && (has("<|python_tag|>") || has("\"parameters\""))) {
    f.tools = ToolFormat::kLlama3Json;
  }
  f.thinking = has(f.think_open) && has(f.think_close);
  return f;
}

bool prompt_opens_reasoning(const ChatFormat& format, std::string_view prompt) {
  if (!format.thinking || format.think_open.empty()) return false;
  while (!prompt.empty() && (prompt.back() == '\n' || prompt.back() == ' ' || prompt.back() == '\r')) {
    prompt.remove_suffix(1);
  }
  return prompt.ends_with(format.think_open);
}

Result<std::vector<ToolSpec>> parse_tools(const json& tools) {
  if (tools.is_null()) return std::vector<ToolSpec>{};
  if (!tools.is_array()) return make_error(ErrorCode::kInvalidArgument, "tools: must be an array");
  if (tools.size() > kMaxTools) {
    return make_error(ErrorCode::kInvalidArgument, "tools: {} tools, at most {}", tools.size(), kMaxTools);
  }
  std::vector<ToolSpec> out;
  std::set<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    STRATA_ASSIGN(ToolSpec spec, parse_tool(tools[i], i));
    if (!names.insert(spec.name).second) {
      return make_error(ErrorCode::kInvalidArgument, "tools[{}].function.name: \"{}\" is already used", i,
                        spec.name);
    }
    out.push_back(std::move(spec));
  }
  return out;
}

Result<std::vector<ToolSpec>> parse_tools_ordered(const nlohmann::ordered_json& tools) {
  // Validated as a json (same rules, same messages); the ordered schemas are kept beside.
  json plain = json::parse(tools.dump(-1, ' ', false, json::error_handler_t::replace), nullptr, false);
  STRATA_ASSIGN(std::vector<ToolSpec> specs, parse_tools(plain));
  for (size_t i = 0; i < specs.size(); ++i) {
    const auto& fn = tools[i]["function"];
    auto params = fn.find("parameters");
    if (params != fn.end() && params->is_object()) specs[i].parameters_in_order = *params;
  }
  return specs;
}

Result<ToolChoice> parse_tool_choice(const json& j, const std::vector<ToolSpec>& tools) {
  ToolChoice choice;
  if (j.is_null()) return choice;
  if (j.is_string()) {
    const auto& s = j.get_ref<const std::string&>();
    if (s == "auto") return choice;
    if (s == "none") {
      choice.kind = ToolChoice::kNone;
      return choice;
    }
    if (s == "required") {
      if (tools.empty()) return make_error(ErrorCode::kInvalidArgument, "tool_choice: \"required\" needs tools");
      choice.kind = ToolChoice::kRequired;
      return choice;
    }
    return make_error(ErrorCode::kInvalidArgument,
                      "tool_choice: must be \"auto\", \"none\", \"required\" or a function object");
  }
  if (!j.is_object()) return make_error(ErrorCode::kInvalidArgument, "tool_choice: must be a string or an object");
  auto type = j.find("type");
  if (type == j.end() || *type != "function") {
    return make_error(ErrorCode::kInvalidArgument, "tool_choice.type: must be \"function\"");
  }
  auto fn = j.find("function");
  const json* name = nullptr;
  if (fn != j.end() && fn->is_object() && fn->contains("name")) name = &(*fn)["name"];
  if (!name || !name->is_string()) {
    return make_error(ErrorCode::kInvalidArgument, "tool_choice.function.name: must be a string");
  }
  choice.kind = ToolChoice::kFunction;
  choice.function = name->get<std::string>();
  for (const auto& t : tools) {
    if (t.name == choice.function) return choice;
  }
  return make_error(ErrorCode::kInvalidArgument, "tool_choice.function.name: \"{}\" is not among the tools",
                    choice.function.substr(0, 64));
}

}  // namespace strata::chat
