// Real chat templates: detect_format names their family, and an assistant turn with tool calls
// rendered by text::ChatTemplate parses back into the same reasoning, content and calls.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "chat/parse_helpers.h"
#include "gguf/gguf.h"
#include "grammar/grammar.h"
#include "testing/shared_data.h"
#include "text/chat_template.h"

namespace strata::chat {
namespace {

using nlohmann::json;

std::string template_file(const std::string& name) {
  return strata::testing::read_text_file(std::string(STRATA_SOURCE_DIR) + "/tests/chat/templates/" + name);
}

std::string gguf_template(const std::string& relative) {
  std::string path = strata::testing::shared_file(relative);
  if (path.empty()) return "";
  auto file = gguf::File::open(path);
  EXPECT_TRUE(file.ok()) << file.error().message;
  if (!file.ok()) return "";
  auto src = (*file)->get_string("tokenizer.chat_template");
  EXPECT_TRUE(src.ok()) << src.error().message;
  return src.ok() ? std::string(*src) : "";
}

TEST(DetectFormat, families_of_the_real_templates) {
  ChatFormat qwen3 = detect_format(gguf_template("models/vocab/ggml-vocab-qwen3.gguf"));
  EXPECT_EQ(qwen3.tools, ToolFormat::kHermesJson);
  EXPECT_TRUE(qwen3.thinking);
  ChatFormat phi3 = detect_format(gguf_template("models/vocab/ggml-vocab-phi-3.gguf"));
  EXPECT_EQ(phi3.tools, ToolFormat::kNone);
  EXPECT_FALSE(phi3.thinking);
  ChatFormat coder = detect_format(template_file("Qwen3-Coder.jinja"));
  EXPECT_EQ(coder.tools, ToolFormat::kQwenXml);
  EXPECT_FALSE(coder.thinking);
  ChatFormat q36 = detect_format(template_file("Qwen3.6.jinja"));
  EXPECT_EQ(q36.tools, ToolFormat::kQwenXml);
  EXPECT_TRUE(q36.thinking);
  EXPECT_EQ(detect_format(template_file("llama3-style.jinja")).tools, ToolFormat::kLlama3Json);
  EXPECT_EQ(detect_format(text::ChatTemplate::chatml().source()).tools, ToolFormat::kNone);
  EXPECT_EQ(detect_format("").tools, ToolFormat::kNone);
  EXPECT_EQ(detect_format("{{ '<tool_call>' }}").tools, ToolFormat::kHermesJson);
}

const char* kTools = R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather",
  "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
  "hourly": {"type": "boolean"}, "tags": {"type": "array", "items": {"type": "string"}}},
  "required": ["city"]}}}, {"type": "function", "function": {"name": "get_time", "parameters":
  {"type": "object", "properties": {"zone": {"type": "string"}}}}}])";

struct Rendered {
  std::string prompt;     // with the generation prompt, no assistant turn
  std::string assistant;  // the rendered assistant turn, after the generation prompt
};

// Renders [system, user, assistant with two tool calls] and returns the assistant turn as the model
// would have written it: the full render minus the prompt with add_generation_prompt, up to `end`.
Rendered render(const std::string& source, const std::string& end, const std::string& content = "Let me check both.") {
  auto t = text::ChatTemplate::parse(source);
  EXPECT_TRUE(t.ok()) << t.error().message;
  if (!t.ok()) return {};
  std::vector<text::ChatMessage> messages = {{"system", "Be brief.", "", {}, "", ""},
                                             {"user", "Weather in Paris? 天気", "", {}, "", ""}};
  text::ChatRenderOptions opts;
  opts.tools_json = kTools;
  auto prompt = t->render(messages, opts);
  EXPECT_TRUE(prompt.ok()) << prompt.error().message;
  text::ChatMessage assistant{"assistant", content, "The user wants weather and time.", {}, "", ""};
  assistant.tool_calls = {{"call_1", "get_weather", R"({"city": "Paris", "days": 3, "hourly": true, "tags": ["a", "b"]})"},
                          {"call_2", "get_time", R"({"zone": "Europe/Paris"})"}};
  messages.push_back(assistant);
  opts.add_generation_prompt = false;
  auto full = t->render(messages, opts);
  EXPECT_TRUE(full.ok()) << full.error().message;
  if (!prompt.ok() || !full.ok()) return {};
  // The generation prompt may open a think block the assistant turn also writes: compare from the
  // assistant header on.
  std::string header = "<|im_start|>assistant";
  size_t p_at = prompt->rfind(header), f_at = full->rfind(header);
  if (header.empty() || p_at == std::string::npos || f_at == std::string::npos) {
    header = "<|start_header_id|>assistant<|end_header_id|>\n\n";
    p_at = prompt->rfind(header);
    f_at = full->rfind(header);
  }
  EXPECT_NE(f_at, std::string::npos);
  if (f_at == std::string::npos || p_at == std::string::npos) return {};
  std::string gen_prompt = prompt->substr(p_at);
  std::string turn = full->substr(f_at);
  EXPECT_EQ(turn.substr(0, header.size()), header);
  size_t stop = turn.find(end);
  EXPECT_NE(stop, std::string::npos) << turn;
  turn = turn.substr(0, stop);
  // What the model wrote is what follows its generation prompt.
  std::string written;
  if (turn.compare(0, gen_prompt.size(), gen_prompt) == 0) {
    written = turn.substr(gen_prompt.size());
  } else {
    written = turn.substr(header.size());
    if (!written.empty() && written[0] == '\n') written.erase(0, 1);
  }
  return {*prompt, written};
}

void expect_calls(const testing::Joined& j) {
  ASSERT_EQ(j.calls.size(), 2u);
  EXPECT_EQ(j.calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(j.calls[0].arguments_json),
            json::parse(R"({"city": "Paris", "days": 3, "hourly": true, "tags": ["a", "b"]})"));
  EXPECT_EQ(j.calls[1].name, "get_time");
  EXPECT_EQ(json::parse(j.calls[1].arguments_json), json::parse(R"({"zone": "Europe/Paris"})"));
}

testing::ParserSetup setup_for(const std::string& source, const Rendered& r) {
  testing::ParserSetup s;
  s.format = detect_format(source);
  s.starts_in_reasoning = prompt_opens_reasoning(s.format, r.prompt);
  auto tools = parse_tools(json::parse(kTools));
  EXPECT_TRUE(tools.ok());
  if (tools.ok()) s.tools = *tools;
  return s;
}

TEST(TemplateRoundTrip, qwen3_hermes_json_with_reasoning) {
  std::string src = gguf_template("models/vocab/ggml-vocab-qwen3.gguf");
  Rendered r = render(src, "<|im_end|>");
  auto s = setup_for(src, r);
  EXPECT_FALSE(s.starts_in_reasoning);
  auto j = testing::parse_all_ways(s, r.assistant);
  EXPECT_EQ(j.reasoning, "The user wants weather and time.") << r.assistant;
  EXPECT_EQ(j.content, "Let me check both.");
  expect_calls(j);
}

TEST(TemplateRoundTrip, qwen36_xml_with_reasoning_opened_by_the_prompt) {
  std::string src = template_file("Qwen3.6.jinja");
  Rendered r = render(src, "<|im_end|>");
  auto s = setup_for(src, r);
  EXPECT_TRUE(s.starts_in_reasoning) << r.prompt;
  auto j = testing::parse_all_ways(s, r.assistant);
  EXPECT_EQ(j.reasoning, "The user wants weather and time.") << r.assistant;
  EXPECT_EQ(j.content, "Let me check both.");
  expect_calls(j);
}

TEST(TemplateRoundTrip, qwen3_coder_xml) {
  std::string src = template_file("Qwen3-Coder.jinja");
  Rendered r = render(src, "<|im_end|>");
  auto s = setup_for(src, r);
  auto j = testing::parse_all_ways(s, r.assistant);
  EXPECT_EQ(j.content, "Let me check both.") << r.assistant;
  ASSERT_EQ(j.calls.size(), 2u);
  // Qwen3-Coder writes non-string values with Python's str(): True, ['a', 'b'] (not JSON).
  json a = json::parse(j.calls[0].arguments_json);
  EXPECT_EQ(a["city"], "Paris");
  EXPECT_EQ(a["days"], 3);
  EXPECT_EQ(a["hourly"], true);
  EXPECT_EQ(json::parse(j.calls[1].arguments_json), json::parse(R"({"zone": "Europe/Paris"})"));
}

TEST(TemplateRoundTrip, llama3_json_after_python_tag) {
  std::string src = template_file("llama3-style.jinja");
  Rendered r = render(src, "<|eom_id|>");
  auto s = setup_for(src, r);
  auto j = testing::parse_all_ways(s, r.assistant);
  EXPECT_EQ(j.content, "") << r.assistant;
  expect_calls(j);
}

// What the templates write for a turn of calls alone is in the language of tool_call_grammar for the
// detected format (parallel, tool_choice required), spelled with the Qwen3 vocabulary's tokens.
TEST(TemplateRoundTrip, the_tool_call_grammar_accepts_what_the_templates_write) {
  auto file = gguf::File::open(strata::testing::shared_file("models/vocab/ggml-vocab-qwen3.gguf"));
  ASSERT_TRUE(file.ok());
  auto vocab = text::Vocab::load(**file);
  ASSERT_TRUE(vocab.ok());
  for (const std::string& src : {gguf_template("models/vocab/ggml-vocab-qwen3.gguf"), template_file("Qwen3.6.jinja")}) {
    Rendered r = render(src, "<|im_end|>", "");
    auto s = setup_for(src, r);
    auto text = tool_call_grammar(s.format, s.tools, ToolChoice{ToolChoice::kRequired, ""}, true, s.starts_in_reasoning);
    ASSERT_TRUE(text.ok()) << text.error().message;
    auto g = grammar::parse_gbnf(*text);
    ASSERT_TRUE(g.ok()) << g.error().message;
    grammar::Matcher m(*g, **vocab);
    bool all = true;
    for (text::Token t : (*vocab)->tokenize(r.assistant, false, false)) {
      all = all && m.allows(t) && m.accept(t).ok();
    }
    EXPECT_TRUE(all && m.can_end()) << r.assistant;
    auto single = tool_call_grammar(s.format, s.tools, ToolChoice{ToolChoice::kFunction, "get_time"}, true,
                                    s.starts_in_reasoning);
    ASSERT_TRUE(single.ok());
    grammar::Matcher only_time(*grammar::parse_gbnf(*single), **vocab);
    bool refused = false;
    for (text::Token t : (*vocab)->tokenize(r.assistant, false, false)) {
      if (!only_time.allows(t)) {
        refused = true;
        break;
      }
      (void)only_time.accept(t);
    }
    EXPECT_TRUE(refused) << "a grammar for get_time alone refuses the get_weather call";
  }
}

}  // namespace
}  // namespace strata::chat
