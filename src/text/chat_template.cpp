#include "text/chat_template.h"

#include <fmt/format.h>

#include <algorithm>

#include "gguf/names.h"

namespace strata::text {

namespace {

constexpr int kMaxJsonDepth = 64;

// Our own ChatML template (whitespace control keeps the template's layout out of the prompt).
constexpr std::string_view kChatml =
    "{%- for message in messages -%}\n"
    "  {{- '<|im_start|>' ~ message.role ~ '\\n' ~ message.content ~ '<|im_end|>\\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "  {{- '<|im_start|>assistant\\n' -}}\n"
    "{%- endif -%}\n";

using jinja::Value;

Value tool_call_value(const ToolCall& call) {
  Value arguments;
  if (call.arguments_json.empty()) {
    arguments = Value::dict({});
  } else if (auto parsed = jinja::parse_json(call.arguments_json, kMaxJsonDepth); parsed.ok()) {
    arguments = std::move(parsed).value();
  } else {
    arguments = Value::string(call.arguments_json);  // templates that test `arguments is string` print it as is
  }
  return Value::dict({
      {"id", Value::string(call.id)},
      {"type", Value::string("function")},
      {"function", Value::dict({{"name", Value::string(call.name)}, {"arguments", std::move(arguments)}})},
  });
}

Value message_value(const ChatMessage& m) {
  std::vector<std::pair<std::string, Value>> fields;
  fields.emplace_back("role", Value::string(m.role));
  fields.emplace_back("content", Value::string(m.content));
  if (!m.reasoning_content.empty()) fields.emplace_back("reasoning_content", Value::string(m.reasoning_content));
  if (!m.tool_calls.empty()) {
    std::vector<Value> calls;
    for (const auto& call : m.tool_calls) calls.push_back(tool_call_value(call));
    fields.emplace_back("tool_calls", Value::list(std::move(calls)));
  }
  if (!m.tool_call_id.empty()) fields.emplace_back("tool_call_id", Value::string(m.tool_call_id));
  if (!m.name.empty()) fields.emplace_back("name", Value::string(m.name));
  return Value::dict(std::move(fields));
}

// A template that a real request would stop at a limit is of no use; found by rendering a conversation
// every chat template supports, the way requests do (with and without tools).
Status test_render(const ChatTemplate& t) {
  static const std::string kSampleTools =
      R"([{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather",)"
      R"( "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])";
  std::vector<ChatMessage> sample(3);
  sample[0].role = "system";
  sample[0].content = "You are a helpful assistant.";
  sample[1].role = "user";
  sample[1].content = "What is the weather in Paris?";
  sample[2].role = "assistant";
  sample[2].content = "It is sunny in Paris.";
  for (bool with_tools : {false, true}) {
    ChatRenderOptions options;
    if (with_tools) options.tools_json = kSampleTools;
    jinja::RenderStats stats;
    auto out = t.render(sample, options, &stats);
    if (!out.ok() && stats.limit_exceeded) return std::move(out).error();
  }
  return ok_status();
}

// Each member of the kwargs object replaces the variable of its name, or adds one.
Status add_kwargs(const std::string& kwargs_json, jinja::Vars& vars) {
  if (kwargs_json.empty()) return ok_status();
  auto kwargs = jinja::parse_json(kwargs_json, kMaxJsonDepth);
  if (!kwargs.ok()) return make_error("chat template: kwargs: {}", kwargs.error().message);
  if (!kwargs->is_mapping()) return make_error("chat template: kwargs must be a JSON object");
  for (const auto& item : kwargs->dict_obj().items) {
    const auto& key = item.first;  // not a structured binding: clang 14 cannot capture those
    auto same = std::find_if(vars.begin(), vars.end(), [&](const auto& v) { return v.first == key; });
    if (same != vars.end()) same->second = item.second;
    else vars.emplace_back(key, item.second);
  }
  return ok_status();
}

}  // namespace

Result<ChatTemplate> ChatTemplate::parse(std::string_view source) {
  auto parsed = jinja::Template::parse(source);
  if (!parsed.ok()) return make_error("chat template: {}", parsed.error().message);
  ChatTemplate t;
  t.template_ = std::move(parsed).value();
  t.source_ = std::string(source);
  return t;
}

ChatTemplate ChatTemplate::chatml() {
  auto t = parse(kChatml);
  return std::move(t).value();  // our own template always parses (covered by the tests)
}

Result<std::string> ChatTemplate::render(const std::vector<ChatMessage>& messages, const ChatRenderOptions& options,
                                         jinja::RenderStats* stats) const {
  std::vector<Value> list;
  list.reserve(messages.size());
  for (const auto& m : messages) list.push_back(message_value(m));
  jinja::Vars vars;
  vars.emplace_back("messages", Value::list(std::move(list)));
  if (!options.tools_json.empty()) {
    auto tools = jinja::parse_json(options.tools_json, kMaxJsonDepth);
    if (!tools.ok()) return make_error("chat template: tools: {}", tools.error().message);
    if (!tools->is_list()) return make_error("chat template: tools must be a JSON array");
    vars.emplace_back("tools", std::move(tools).value());
  }
  vars.emplace_back("add_generation_prompt", Value::boolean(options.add_generation_prompt));
  vars.emplace_back("enable_thinking", Value::boolean(options.enable_thinking));
  vars.emplace_back("bos_token", Value::string(options.bos_token));
  vars.emplace_back("eos_token", Value::string(options.eos_token));
  if (auto s = add_kwargs(options.kwargs_json, vars); !s.ok()) return std::move(s).error();
  auto out = template_.render(vars, render_options_, stats);
  if (!out.ok()) return make_error("chat template: {}", out.error().message);
  return out;
}

Result<ChatTemplate> load_chat_template(const gguf::File& file, std::string* warning) {
  if (warning) warning->clear();
  auto fallback = [&](const std::string& why) {
    if (warning) *warning = fmt::format("{}: {}; using the built-in ChatML template", file.path(), why);
    return ChatTemplate::chatml();
  };
  const gguf::KeyValue* kv = file.find(gguf::names::tokenizer::kChatTemplate);
  if (!kv) return fallback("no tokenizer.chat_template");
  if (kv->type != gguf::ValueType::STRING) return fallback("tokenizer.chat_template is not a string");
  auto parsed = ChatTemplate::parse(kv->str);
  if (!parsed.ok()) return fallback(fmt::format("tokenizer.chat_template cannot be used ({})", parsed.error().message));
  if (auto s = test_render(*parsed); !s.ok()) {
    return fallback(fmt::format("tokenizer.chat_template stops at a render limit on a sample conversation ({})",
                                s.error().message));
  }
  return parsed;
}

}  // namespace strata::text
