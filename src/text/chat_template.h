// Chat templates: renders a conversation into prompt text with a GGUF's `tokenizer.chat_template`
// (a Jinja2 template in the HF transformers dialect, interpreted by jinja/jinja.h), or with the built-in
// ChatML template when a file has none or it cannot be used.
//
// The template sees the variables transformers passes: `messages` (dicts with role and content, plus
// reasoning_content, tool_calls, tool_call_id and name when set; a tool call is
// {id, type: "function", function: {name, arguments}} with the arguments parsed from JSON), `tools`
// (the parsed tools JSON, undefined when none), `add_generation_prompt`, `enable_thinking`,
// `bos_token` and `eos_token`, then the members of `kwargs_json`.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "gguf/gguf.h"
#include "jinja/jinja.h"

namespace strata::text {

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments_json;  // a JSON object; passed as a string when it does not parse
};

struct ChatMessage {
  std::string role;
  std::string content;
  std::string reasoning_content;
  std::vector<ToolCall> tool_calls;
  std::string tool_call_id;
  std::string name;
};

struct ChatRenderOptions {
  bool add_generation_prompt = true;
  bool enable_thinking = true;
  std::string tools_json;  // JSON array of tool definitions, or empty
  // A JSON object (or empty) whose members become template variables, over the ones above
  // (llama-server's chat_template_kwargs, e.g. {"enable_thinking": false}).
  std::string kwargs_json;
  std::string bos_token;
  std::string eos_token;
};

class ChatTemplate {
 public:
  // Parses the template source; an error names the line/column and what is wrong.
  static Result<ChatTemplate> parse(std::string_view source);
  // The built-in ChatML fallback: <|im_start|>{role}\n{content}<|im_end|>\n per message, then
  // <|im_start|>assistant\n when a generation prompt is asked for.
  static ChatTemplate chatml();

  // `stats` (if given) says what the render used and whether a limit stopped it.
  Result<std::string> render(const std::vector<ChatMessage>& messages, const ChatRenderOptions& options,
                             jinja::RenderStats* stats = nullptr) const;

  // Limits that stop hostile templates (the defaults suit real ones) and strftime_now's clock.
  void set_render_options(const jinja::RenderOptions& options) { render_options_ = options; }
  const std::string& source() const { return source_; }

 private:
  jinja::Template template_;
  std::string source_;
  jinja::RenderOptions render_options_;
};

// From a GGUF (a vocab file or a model): tokenizer.chat_template when present, parseable and within the
// render limits on a small sample conversation (system, user, assistant; without and with a tools list);
// otherwise the ChatML template, with `warning` (if given) saying why. The template's own errors on the
// sample (raise_exception, say, for a role it does not support) do not reject it; only a limit does.
// `warning` is cleared when there is nothing to say.
Result<ChatTemplate> load_chat_template(const gguf::File& file, std::string* warning);

}  // namespace strata::text
