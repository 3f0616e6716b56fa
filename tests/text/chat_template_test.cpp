// Chat templates end to end: the real Qwen3 template stored in the shared Qwen3 vocab GGUF, small
// templates written for these tests in the style of Qwen2.5 / Qwen3.5 / Llama 3.1 (same constructs,
// not the originals), the ChatML fallback and loading from GGUF files. Every expected prompt is written
// out by hand from the model family's documented format.
#include "text/chat_template.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "testing/shared_data.h"

namespace strata::text {
namespace {

constexpr const char* kQwen3Vocab = "models/vocab/ggml-vocab-qwen3.gguf";

ChatMessage msg(std::string role, std::string content) {
  ChatMessage m;
  m.role = std::move(role);
  m.content = std::move(content);
  return m;
}

std::string render_ok(const ChatTemplate& t, const std::vector<ChatMessage>& messages,
                      const ChatRenderOptions& options = {}) {
  auto out = t.render(messages, options);
  if (!out.ok()) {
    ADD_FAILURE() << out.error().message;
    return "<render failed>";
  }
  return out.value();
}

// Loads tokenizer.chat_template from the shared Qwen3 vocab; the test stops when that fails.
#define LOAD_QWEN3(var)                                                        \
  STRATA_SHARED_FILE(var##_path, kQwen3Vocab);                                 \
  auto var##_file = gguf::File::open(var##_path);                              \
  ASSERT_TRUE(var##_file.ok()) << var##_file.error().message;                  \
  std::string var##_warning;                                                   \
  auto var##_loaded = load_chat_template(*var##_file.value(), &var##_warning); \
  ASSERT_TRUE(var##_loaded.ok()) << var##_loaded.error().message;              \
  ASSERT_EQ(var##_warning, "");                                                \
  const ChatTemplate& var = var##_loaded.value()

const std::string kToolsJson =
    R"([{"type":"function","function":{"name":"get_weather","description":"Get the weather",)"
    R"("parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}])";

// ---- the real Qwen3 template ------------------------------------------------------------------------

TEST(ChatTemplateQwen3, LoadsTheTemplateStoredInTheVocabGguf) {
  LOAD_QWEN3(t);
  EXPECT_NE(t.source().find("<tool_response>"), std::string::npos);
  EXPECT_NE(t.source().find("enable_thinking"), std::string::npos);
}

TEST(ChatTemplateQwen3, SystemAndUserWithGenerationPrompt) {
  LOAD_QWEN3(t);
  const std::vector<ChatMessage> messages = {msg("system", "You are a helpful assistant."), msg("user", "Hello!")};
  EXPECT_EQ(render_ok(t, messages),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHello!<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplateQwen3, NoGenerationPromptWhenNotAskedFor) {
  LOAD_QWEN3(t);
  ChatRenderOptions options;
  options.add_generation_prompt = false;
  EXPECT_EQ(render_ok(t, {msg("user", "Hello!")}, options), "<|im_start|>user\nHello!<|im_end|>\n");
}

TEST(ChatTemplateQwen3, EarlierTurnsDropTheirReasoning) {
  LOAD_QWEN3(t);
  ChatMessage answer = msg("assistant", "4");
  answer.reasoning_content = "Two plus two is four.";
  // An earlier turn whose thinking is inline in the content is stripped the same way.
  ChatMessage inline_thinking = msg("assistant", "<think>\nSix.\n</think>\n\n6");
  const std::vector<ChatMessage> messages = {msg("user", "What is 2+2?"), answer, msg("user", "And 3+3?"),
                                             inline_thinking, msg("user", "And 4+4?")};
  EXPECT_EQ(render_ok(t, messages),
            "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
            "<|im_start|>assistant\n4<|im_end|>\n"
            "<|im_start|>user\nAnd 3+3?<|im_end|>\n"
            "<|im_start|>assistant\n6<|im_end|>\n"
            "<|im_start|>user\nAnd 4+4?<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplateQwen3, TheFinalAssistantTurnKeepsItsReasoning) {
  LOAD_QWEN3(t);
  ChatMessage answer = msg("assistant", "Hello! How can I help?");
  answer.reasoning_content = "The user greets me.";
  ChatRenderOptions options;
  options.add_generation_prompt = false;
  EXPECT_EQ(render_ok(t, {msg("user", "Hi"), answer}, options),
            "<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n<think>\nThe user greets me.\n</think>\n\nHello! How can I help?<|im_end|>\n");
  // Reasoning given inline in the content is moved into the think block.
  ChatMessage inline_answer = msg("assistant", "<think>\nThe user greets me.\n</think>\n\nHello!");
  EXPECT_EQ(render_ok(t, {msg("user", "Hi"), inline_answer}, options),
            "<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n<think>\nThe user greets me.\n</think>\n\nHello!<|im_end|>\n");
  // The last assistant turn without any reasoning still gets an (empty) think block.
  EXPECT_EQ(render_ok(t, {msg("user", "Hi"), msg("assistant", "Hello!")}, options),
            "<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\nHello!<|im_end|>\n");
}

TEST(ChatTemplateQwen3, ThinkingDisabledAddsAnEmptyThinkBlock) {
  LOAD_QWEN3(t);
  ChatRenderOptions options;
  options.enable_thinking = false;
  EXPECT_EQ(render_ok(t, {msg("user", "Hi")}, options),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(ChatTemplateQwen3, ToolsToolCallsAndToolResponses) {
  LOAD_QWEN3(t);
  ChatMessage calls = msg("assistant", "");
  calls.reasoning_content = "I need the weather in both cities.";
  calls.tool_calls = {{"call_1", "get_weather", R"({"city":"Paris"})"},
                      {"call_2", "get_weather", R"({"city": "London"})"}};
  ChatMessage paris = msg("tool", R"({"temperature": 21})");
  paris.tool_call_id = "call_1";
  ChatMessage london = msg("tool", R"({"temperature": 15})");
  london.tool_call_id = "call_2";
  ChatMessage final_answer = msg("assistant", "It is 21°C in Paris and 15°C in London.");
  final_answer.reasoning_content = "Paris is warmer.";
  const std::vector<ChatMessage> messages = {
      msg("system", "You are a bot."), msg("user", "Weather in Paris and London?"), calls, paris, london, final_answer};
  ChatRenderOptions options;
  options.tools_json = kToolsJson;
  options.add_generation_prompt = false;
  const std::string expected =
      "<|im_start|>system\nYou are a bot.\n\n"
      "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
      "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
      R"({"type": "function", "function": {"name": "get_weather", "description": "Get the weather", )"
      R"("parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}})"
      "\n</tools>\n\n"
      "For each function call, return a json object with function name and arguments within "
      "<tool_call></tool_call> XML tags:\n<tool_call>\n"
      R"({"name": <function-name>, "arguments": <args-json-object>})"
      "\n</tool_call><|im_end|>\n"
      "<|im_start|>user\nWeather in Paris and London?<|im_end|>\n"
      // After the last user query: the tool-calling turn keeps its reasoning.
      "<|im_start|>assistant\n<think>\nI need the weather in both cities.\n</think>\n\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"London\"}}\n</tool_call><|im_end|>\n"
      // Consecutive tool results share one user turn.
      "<|im_start|>user\n<tool_response>\n{\"temperature\": 21}\n</tool_response>\n"
      "<tool_response>\n{\"temperature\": 15}\n</tool_response><|im_end|>\n"
      "<|im_start|>assistant\n<think>\nParis is warmer.\n</think>\n\n"
      "It is 21°C in Paris and 15°C in London.<|im_end|>\n";
  EXPECT_EQ(render_ok(t, messages, options), expected);
}

TEST(ChatTemplateQwen3, ToolsWithoutASystemMessage) {
  LOAD_QWEN3(t);
  ChatRenderOptions options;
  options.tools_json = R"([{"type":"function","function":{"name":"now","parameters":{}}}])";
  EXPECT_EQ(render_ok(t, {msg("user", "Time?")}, options),
            "<|im_start|>system\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
            "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
            R"({"type": "function", "function": {"name": "now", "parameters": {}}})"
            "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
            "<tool_call></tool_call> XML tags:\n<tool_call>\n"
            R"({"name": <function-name>, "arguments": <args-json-object>})"
            "\n</tool_call><|im_end|>\n"
            "<|im_start|>user\nTime?<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplateQwen3, ToolCallArgumentsThatAreNotJsonArePrintedAsGiven) {
  LOAD_QWEN3(t);
  ChatMessage call = msg("assistant", "Let me check.");
  call.tool_calls = {{"c1", "lookup", "not json"}};
  ChatRenderOptions options;
  options.add_generation_prompt = false;
  EXPECT_EQ(render_ok(t, {msg("user", "Q"), msg("assistant", "A"), msg("user", "Q2"), call}, options),
            "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\nA<|im_end|>\n<|im_start|>user\nQ2<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\nLet me check.\n"
            "<tool_call>\n{\"name\": \"lookup\", \"arguments\": not json}\n</tool_call><|im_end|>\n");
}

TEST(ChatTemplateQwen3, InvalidToolsJsonIsAnError) {
  LOAD_QWEN3(t);
  ChatRenderOptions options;
  options.tools_json = "[{";
  auto out = t.render({msg("user", "x")}, options);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.error().message.find("tools"), std::string::npos) << out.error().message;
  options.tools_json = R"({"type": "function"})";
  out = t.render({msg("user", "x")}, options);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.error().message.find("JSON array"), std::string::npos) << out.error().message;
}

// ---- templates written in the style of other model families -----------------------------------------

// Qwen2.5 style: a default system prompt when the conversation has none.
constexpr const char* kQwen25Style = R"TPL({%- if messages[0]['role'] == 'system' %}
    {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- set rest = messages[1:] %}
{%- else %}
    {{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}
    {%- set rest = messages %}
{%- endif %}
{%- for m in rest %}
    {{- '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
)TPL";

TEST(ChatTemplateStyles, Qwen25InsertsTheDefaultSystemPrompt) {
  auto t = ChatTemplate::parse(kQwen25Style);
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(render_ok(*t, {msg("user", "Hi")}),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render_ok(*t, {msg("system", "Be brief."), msg("user", "Hi")}),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

// Qwen3.5 style: a content-rendering macro, XML-ish tool calls with |items, previtem/nextitem,
// thinking opened by default in the generation prompt.
constexpr const char* kQwen35Style = R"TPL({%- macro render_content(content) -%}
    {%- if content is string -%}
        {{- content -}}
    {%- elif content is iterable and content is not mapping -%}
        {%- for part in content -%}
            {%- if part.type == 'text' -%}{{- part.text -}}{%- endif -%}
        {%- endfor -%}
    {%- endif -%}
{%- endmacro -%}
{%- if not messages %}{{ raise_exception('No messages provided.') }}{% endif %}
{%- for message in messages %}
    {%- set content = render_content(message.content) | trim %}
    {%- if message.role == 'assistant' %}
        {{- '<|im_start|>assistant\n' }}
        {%- if loop.last and message.reasoning_content is defined %}
            {{- '<think>\n' + message.reasoning_content | trim + '\n</think>\n\n' }}
        {%- endif %}
        {{- content }}
        {%- for call in message.tool_calls | default([]) %}
            {{- '\n<tool_call>\n<function=' + call.function.name + '>\n' }}
            {%- for key, value in call.function.arguments | items %}
                {{- '<parameter=' + key + '>\n' }}
                {%- if value is mapping or (value is sequence and value is not string) %}
                    {{- value | tojson | safe }}
                {%- else %}
                    {{- value | string }}
                {%- endif %}
                {{- '\n</parameter>\n' }}
            {%- endfor %}
            {{- '</function>\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == 'tool' %}
        {%- if loop.previtem is not defined or loop.previtem.role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}
        {{- '\n<tool_response>\n' + content + '\n</tool_response>' }}
        {%- if loop.nextitem is not defined or loop.nextitem.role != 'tool' %}{{- '<|im_end|>\n' }}{%- endif %}
    {%- else %}
        {{- '<|im_start|>' + message.role + '\n' + content + '<|im_end|>\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and not enable_thinking %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- else %}
        {{- '<think>\n' }}
    {%- endif %}
{%- endif %}
)TPL";

TEST(ChatTemplateStyles, Qwen35ToolCallsAsFunctionAndParameterTags) {
  auto t = ChatTemplate::parse(kQwen35Style);
  ASSERT_TRUE(t.ok()) << t.error().message;
  ChatMessage call = msg("assistant", "");
  call.tool_calls = {
      {"c1", "search", R"({"query": "cats", "filters": {"year": 2024}, "tags": ["a", "b"], "limit": 5})"}};
  const std::vector<ChatMessage> messages = {msg("user", "  Find cats  "), call, msg("tool", "found 3"),
                                             msg("tool", "found 4")};
  EXPECT_EQ(render_ok(*t, messages),
            "<|im_start|>user\nFind cats<|im_end|>\n"
            "<|im_start|>assistant\n\n<tool_call>\n<function=search>\n"
            "<parameter=query>\ncats\n</parameter>\n"
            "<parameter=filters>\n{\"year\": 2024}\n</parameter>\n"
            "<parameter=tags>\n[\"a\", \"b\"]\n</parameter>\n"
            "<parameter=limit>\n5\n</parameter>\n"
            "</function>\n</tool_call><|im_end|>\n"
            "<|im_start|>user\n<tool_response>\nfound 3\n</tool_response>\n<tool_response>\nfound 4\n</tool_response>"
            "<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n");
}

TEST(ChatTemplateStyles, Qwen35ThinkingSwitch) {
  auto t = ChatTemplate::parse(kQwen35Style);
  ASSERT_TRUE(t.ok()) << t.error().message;
  ChatRenderOptions options;
  options.enable_thinking = false;
  EXPECT_EQ(render_ok(*t, {msg("user", "Hi")}, options),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  ChatMessage answer = msg("assistant", "Hello");
  answer.reasoning_content = "  greet back  ";
  options.add_generation_prompt = false;
  EXPECT_EQ(
      render_ok(*t, {msg("user", "Hi"), answer}, options),
      "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\ngreet back\n</think>\n\nHello<|im_end|>\n");
}

TEST(ChatTemplateStyles, Qwen35RaisesForAnEmptyConversation) {
  auto t = ChatTemplate::parse(kQwen35Style);
  ASSERT_TRUE(t.ok()) << t.error().message;
  auto out = t->render({}, {});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.error().message.find("No messages provided."), std::string::npos) << out.error().message;
  EXPECT_NE(out.error().message.find("line 10"), std::string::npos) << out.error().message;
}

// Llama 3.1 style: bos_token, strftime_now date, the system message pulled out of messages, tools as
// indented JSON, tool calls as JSON with "parameters", tool results in an ipython turn.
constexpr const char* kLlama31Style = R"TPL({{- bos_token }}
{%- if not date_string is defined %}
    {%- set date_string = strftime_now("%d %b %Y") %}
{%- endif %}
{%- if messages[0].role == 'system' %}
    {%- set system_message = messages[0].content | trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{%- if tools is defined and tools is not none %}{{- "Environment: ipython\n" }}{%- endif %}
{{- "Cutting Knowledge Date: December 2023\n" }}
{{- "Today Date: " + date_string + "\n\n" }}
{%- if tools is defined and tools is not none %}
    {{- "You have access to the following functions:\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- for message in messages %}
    {%- if message.role == 'assistant' and message.tool_calls is defined %}
        {%- set call = message.tool_calls[0].function %}
        {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
        {{- '{"name": "' + call.name + '", "parameters": ' + call.arguments | tojson + '}' }}
        {{- "<|eot_id|>" }}
    {%- elif message.role == 'tool' %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\n\n" + message.content + "<|eot_id|>" }}
    {%- else %}
        {{- '<|start_header_id|>' + message.role + '<|end_header_id|>\n\n' + message.content | trim + '<|eot_id|>' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
)TPL";

TEST(ChatTemplateStyles, Llama31HeaderDateAndBos) {
  auto t = ChatTemplate::parse(kLlama31Style);
  ASSERT_TRUE(t.ok()) << t.error().message;
  jinja::RenderOptions fixed;
  fixed.now = 1721908800;  // 2024-07-25 12:00 UTC
  t->set_render_options(fixed);
  ChatRenderOptions options;
  options.bos_token = "<|begin_of_text|>";
  EXPECT_EQ(render_ok(*t, {msg("system", "You are helpful.  "), msg("user", "Hi ")}, options),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
            "Cutting Knowledge Date: December 2023\nToday Date: 25 Jul 2024\n\n"
            "You are helpful.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplateStyles, Llama31ToolsAndToolCalls) {
  auto t = ChatTemplate::parse(kLlama31Style);
  ASSERT_TRUE(t.ok()) << t.error().message;
  jinja::RenderOptions fixed;
  fixed.now = 1721908800;
  t->set_render_options(fixed);
  ChatMessage call = msg("assistant", "");
  call.tool_calls = {{"c1", "f", R"({"x": 1.5, "ok": true, "none": null})"}};
  ChatRenderOptions options;
  options.tools_json =
      R"([{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{}}}}])";
  options.add_generation_prompt = false;
  EXPECT_EQ(render_ok(*t, {msg("user", "go"), call, msg("tool", "done")}, options),
            "<|start_header_id|>system<|end_header_id|>\n\n"
            "Environment: ipython\nCutting Knowledge Date: December 2023\nToday Date: 25 Jul 2024\n\n"
            "You have access to the following functions:\n\n"
            "{\n"
            "    \"type\": \"function\",\n"
            "    \"function\": {\n"
            "        \"name\": \"f\",\n"
            "        \"parameters\": {\n"
            "            \"type\": \"object\",\n"
            "            \"properties\": {}\n"
            "        }\n"
            "    }\n"
            "}\n\n"
            "<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\ngo<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n"
            "{\"name\": \"f\", \"parameters\": {\"x\": 1.5, \"ok\": true, \"none\": null}}<|eot_id|>"
            "<|start_header_id|>ipython<|end_header_id|>\n\ndone<|eot_id|>");
}

// ---- ChatML fallback and loading ---------------------------------------------------------------------

TEST(ChatTemplateChatml, RendersEachMessageThenTheAssistantPrompt) {
  const ChatTemplate t = ChatTemplate::chatml();
  EXPECT_EQ(render_ok(t, {msg("system", "S"), msg("user", "U"), msg("assistant", "A"), msg("user", "U2")}),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n"
            "<|im_start|>assistant\nA<|im_end|>\n<|im_start|>user\nU2<|im_end|>\n<|im_start|>assistant\n");
  ChatRenderOptions options;
  options.add_generation_prompt = false;
  EXPECT_EQ(render_ok(t, {msg("user", "  spaced\n")}, options), "<|im_start|>user\n  spaced\n<|im_end|>\n");
  EXPECT_EQ(render_ok(t, {}, options), "");
}

gguf::Writer vocab_like_writer() {
  gguf::Writer w;
  w.set_string("general.architecture", "test");
  return w;
}

std::shared_ptr<const gguf::File> in_memory(const gguf::Writer& w) {
  auto bytes = w.write_to_memory();
  EXPECT_TRUE(bytes.ok());
  auto file = gguf::File::from_bytes(bytes.value(), "test.gguf");
  EXPECT_TRUE(file.ok()) << file.error().message;
  return file.value();
}

TEST(ChatTemplateLoad, FallsBackToChatmlWithAWarningWhenTheKeyIsMissing) {
  auto file = in_memory(vocab_like_writer());
  std::string warning = "stale";
  auto t = load_chat_template(*file, &warning);
  ASSERT_TRUE(t.ok());
  EXPECT_NE(warning.find("no tokenizer.chat_template"), std::string::npos) << warning;
  EXPECT_NE(warning.find("ChatML"), std::string::npos) << warning;
  EXPECT_EQ(render_ok(*t, {msg("user", "U")}), "<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplateLoad, FallsBackToChatmlWhenTheTemplateDoesNotParse) {
  gguf::Writer w = vocab_like_writer();
  w.set_string("tokenizer.chat_template", "{% for m in messages %}{{ m.content }}\n{% endif %}");
  auto file = in_memory(w);
  std::string warning;
  auto t = load_chat_template(*file, &warning);
  ASSERT_TRUE(t.ok());
  EXPECT_NE(warning.find("line 2"), std::string::npos) << warning;
  EXPECT_NE(warning.find("endif"), std::string::npos) << warning;
  EXPECT_EQ(render_ok(*t, {msg("user", "U")}), "<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplateLoad, UsesAValidTemplateWithoutWarning) {
  gguf::Writer w = vocab_like_writer();
  w.set_string("tokenizer.chat_template", "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}");
  auto file = in_memory(w);
  std::string warning = "stale";
  auto t = load_chat_template(*file, &warning);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(warning, "");
  EXPECT_EQ(render_ok(*t, {msg("user", "a"), msg("assistant", "b")}), "[user] a\n[assistant] b\n");
}

TEST(ChatTemplateParse, ErrorsNameTheLineAndColumn) {
  auto t = ChatTemplate::parse("Hello\n{{ name }}\n{% if x %}\n  {{ 1 + }}\n{% endif %}");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message.find("line 4, column 10"), std::string::npos) << t.error().message;
  EXPECT_NE(t.error().message.find("expected an expression"), std::string::npos) << t.error().message;
}

TEST(ChatTemplateKwargs, MembersBecomeVariablesAndReplaceTheStandardOnes) {
  auto t = ChatTemplate::parse("{{ enable_thinking }}|{{ flavour }}|{{ add_generation_prompt }}");
  ASSERT_TRUE(t.ok()) << t.error().message;
  ChatRenderOptions o;
  o.kwargs_json = R"({"enable_thinking": false, "flavour": "mint"})";
  EXPECT_EQ(render_ok(*t, {msg("user", "hi")}, o), "False|mint|True");
  o.kwargs_json = "[1]";
  auto bad = t->render({msg("user", "hi")}, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("kwargs must be a JSON object"), std::string::npos) << bad.error().message;
}

}  // namespace
}  // namespace strata::text
