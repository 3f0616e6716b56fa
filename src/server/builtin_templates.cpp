#include "server/builtin_templates.h"

#include <utility>

namespace strata::server {
namespace {

// ChatML with Hermes-style tools (<tools> in the system turn, <tool_call>{"name", "arguments"}</tool_call>
// in the answer, <tool_response> turns) and <think> reasoning: the generation prompt opens a think block,
// or closes an empty one when enable_thinking is false.
constexpr std::string_view kQwen3 = R"TMPL(
{%- set sys = messages[0].content if messages and messages[0].role == 'system' else '' -%}
{%- if tools -%}
{{- '<|im_start|>system\n' -}}
{%- if sys %}{{- sys ~ '\n\n' -}}{%- endif -%}
{{- '# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>' -}}
{%- for tool in tools -%}{{- '\n' ~ (tool | tojson) -}}{%- endfor -%}
{{- '\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n' -}}
{%- elif sys -%}
{{- '<|im_start|>system\n' ~ sys ~ '<|im_end|>\n' -}}
{%- endif -%}
{%- for message in messages -%}
{%- if message.role == 'system' and loop.first -%}
{%- elif message.role == 'assistant' -%}
{{- '<|im_start|>assistant\n' -}}
{%- if message.reasoning_content -%}{{- '<think>\n' ~ message.reasoning_content ~ '\n</think>\n\n' -}}{%- endif -%}
{{- message.content -}}
{%- for call in message.tool_calls or [] -%}
{%- set args = call.function.arguments -%}
{{- '\n<tool_call>\n{"name": "' ~ call.function.name ~ '", "arguments": ' ~ (args if args is string else args | tojson) ~ '}\n</tool_call>' -}}
{%- endfor -%}
{{- '<|im_end|>\n' -}}
{%- elif message.role == 'tool' -%}
{{- '<|im_start|>user\n<tool_response>\n' ~ message.content ~ '\n</tool_response><|im_end|>\n' -}}
{%- else -%}
{{- '<|im_start|>' ~ message.role ~ '\n' ~ message.content ~ '<|im_end|>\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|im_start|>assistant\n' -}}
{%- if enable_thinking is defined and not enable_thinking -%}{{- '<think>\n\n</think>\n\n' -}}{%- else -%}{{- '<think>\n' -}}{%- endif -%}
{%- endif -%}
)TMPL";

// Llama 3 headers; tools as JSON in the system turn, calls as {"name", "parameters"} objects.
constexpr std::string_view kLlama3 = R"TMPL(
{{- bos_token -}}
{%- set sys = messages[0].content if messages and messages[0].role == 'system' else '' -%}
{%- if sys or tools -%}
{{- '<|start_header_id|>system<|end_header_id|>\n\n' ~ sys -}}
{%- if tools -%}
{{- (sys and '\n\n' or '') ~ 'You have these functions. To call one, answer with only a JSON object {"name": function name, "parameters": arguments}.\n' -}}
{%- for tool in tools -%}{{- '\n' ~ (tool | tojson) -}}{%- endfor -%}
{%- endif -%}
{{- '<|eot_id|>' -}}
{%- endif -%}
{%- for message in messages -%}
{%- if message.role == 'system' and loop.first -%}
{%- else -%}
{%- set role = 'ipython' if message.role == 'tool' else message.role -%}
{{- '<|start_header_id|>' ~ role ~ '<|end_header_id|>\n\n' ~ message.content -}}
{%- for call in message.tool_calls or [] -%}
{%- set args = call.function.arguments -%}
{{- '{"name": "' ~ call.function.name ~ '", "parameters": ' ~ (args if args is string else args | tojson) ~ '}' -}}
{%- endfor -%}
{{- '<|eot_id|>' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}{%- endif -%}
)TMPL";

}  // namespace

std::optional<text::ChatTemplate> builtin_chat_template(std::string_view name) {
  if (name == "chatml") return text::ChatTemplate::chatml();
  std::string_view source;
  if (name == "qwen3") source = kQwen3;
  else if (name == "llama3") source = kLlama3;
  else return std::nullopt;
  auto t = text::ChatTemplate::parse(source);
  if (!t.ok()) return std::nullopt;  // our own templates parse (covered by the tests)
  return std::move(*t);
}

std::string builtin_chat_template_names() { return "chatml, qwen3, llama3"; }

}  // namespace strata::server
