// text::ChatTemplate::parse + render. Input: the template source, optionally followed by a NUL byte
// and a message content, and another NUL byte and a tools JSON array. Small jinja limits keep each
// input fast; hitting a limit is an ordinary error, not a finding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "text/chat_template.h"

namespace {

strata::jinja::RenderOptions small_limits() {
  strata::jinja::RenderOptions o;
  o.limits.max_output = 64 << 10;
  o.limits.max_steps = 20'000;
  o.limits.max_recursion = 64;
  o.limits.max_call_depth = 16;
  o.limits.max_list = 4'096;
  o.limits.max_value_depth = 32;
  o.now = 1'700'000'000;  // strftime_now is deterministic
  return o;
}

std::vector<strata::text::ChatMessage> conversation(std::string_view content) {
  using strata::text::ChatMessage;
  std::vector<ChatMessage> messages;
  messages.push_back({.role = "system", .content = "You are a helpful assistant."});
  messages.push_back({.role = "user", .content = std::string(content)});
  ChatMessage call{.role = "assistant", .content = "", .reasoning_content = std::string(content)};
  call.tool_calls.push_back({.id = "call_1", .name = "get_weather", .arguments_json = std::string(content)});
  call.tool_calls.push_back({.id = "call_2", .name = "noop", .arguments_json = R"({"city": "Paris", "days": [1, 2]})"});
  messages.push_back(std::move(call));
  messages.push_back({.role = "tool", .content = "{\"temp\": 21}", .tool_call_id = "call_1", .name = "get_weather"});
  messages.push_back({.role = "assistant", .content = std::string(content)});
  messages.push_back({.role = "user", .content = "thanks"});
  return messages;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace std::string_view_literals;
  const auto [source, rest] = strata::fuzz::split_once(strata::fuzz::as_text(data, size), "\0"sv);
  const auto [content, tools] = strata::fuzz::split_once(rest, "\0"sv);
  auto tmpl = strata::text::ChatTemplate::parse(source);
  if (!tmpl.ok()) return 0;
  tmpl->set_render_options(small_limits());
  const auto messages = conversation(content);
  strata::text::ChatRenderOptions options;
  options.bos_token = "<s>";
  options.eos_token = "</s>";
  options.tools_json = std::string(tools);
  (void)tmpl->render(messages, options);
  // The other flag values, without tools, and an empty conversation.
  options.add_generation_prompt = false;
  options.enable_thinking = false;
  options.tools_json.clear();
  (void)tmpl->render(messages, options);
  (void)tmpl->render({}, options);
  return 0;
}
