// The OpenAI `tools` and `tool_choice` fields: what is accepted, and errors that name the field.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "chat/chat_format.h"

namespace strata::chat {
namespace {

using nlohmann::json;

std::string tools_error(const std::string& text) {
  auto r = parse_tools(json::parse(text));
  EXPECT_FALSE(r.ok()) << text;
  if (r.ok()) return "";
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  return r.error().message;
}

TEST(ParseTools, reads_functions_and_fills_absent_parameters) {
  auto r = parse_tools(json::parse(R"([{"type": "function", "function": {"name": "get_weather", "description": "d",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "now-1"}}])"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].name, "get_weather");
  EXPECT_EQ((*r)[0].description, "d");
  EXPECT_EQ((*r)[0].parameters["properties"]["city"]["type"], "string");
  EXPECT_EQ((*r)[1].parameters, json::parse(R"({"type": "object", "properties": {}})"));
  EXPECT_TRUE(parse_tools(nullptr)->empty());
}

TEST(ParseTools, errors_name_the_field) {
  EXPECT_EQ(tools_error(R"({"a": 1})"), "tools: must be an array");
  EXPECT_EQ(tools_error(R"([1])"), "tools[0]: must be an object");
  EXPECT_EQ(tools_error(R"([{"type": "retrieval"}])"), "tools[0].type: must be \"function\"");
  EXPECT_EQ(tools_error(R"([{"type": "function"}])"), "tools[0].function: must be an object");
  EXPECT_NE(tools_error(R"([{"type": "function", "function": {"name": "a b"}}])").find("tools[0].function.name"),
            std::string::npos);
  EXPECT_NE(tools_error(R"([{"type": "function", "function": {"name": ""}}])").find("tools[0].function.name"),
            std::string::npos);
  std::string long_name(65, 'a');
  EXPECT_NE(tools_error(R"([{"type": "function", "function": {"name": ")" + long_name + R"("}}])")
                .find("tools[0].function.name"), std::string::npos);
  EXPECT_EQ(tools_error(R"([{"type": "function", "function": {"name": "f", "description": 3}}])"),
            "tools[0].function.description: must be a string");
  EXPECT_EQ(tools_error(R"([{"type": "function", "function": {"name": "f", "parameters": []}}])"),
            "tools[0].function.parameters: must be an object");
  EXPECT_EQ(tools_error(R"([{"type": "function", "function": {"name": "f", "parameters": {"properties": 1}}}])"),
            "tools[0].function.parameters.properties: must be an object");
  EXPECT_EQ(tools_error(R"([{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "f"}}])"),
            "tools[1].function.name: \"f\" is already used");
  json deep = json::object();
  for (int i = 0; i < 100; ++i) deep = json{{"type", "object"}, {"properties", {{"x", deep}}}};
  json tool = json::array({json{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", deep}}}}});
  auto r = parse_tools(tool);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("nested deeper"), std::string::npos);
  json many = json::array();
  for (size_t i = 0; i <= kMaxTools; ++i) {
    many.push_back(json{{"type", "function"}, {"function", {{"name", "f" + std::to_string(i)}}}});
  }
  EXPECT_FALSE(parse_tools(many).ok());
}

TEST(ParseToolChoice, the_four_kinds_and_their_errors) {
  auto tools = *parse_tools(json::parse(R"([{"type": "function", "function": {"name": "f"}}])"));
  EXPECT_EQ(parse_tool_choice(nullptr, tools)->kind, ToolChoice::kAuto);
  EXPECT_EQ(parse_tool_choice("auto", tools)->kind, ToolChoice::kAuto);
  EXPECT_EQ(parse_tool_choice("none", tools)->kind, ToolChoice::kNone);
  EXPECT_EQ(parse_tool_choice("required", tools)->kind, ToolChoice::kRequired);
  auto f = parse_tool_choice(json::parse(R"({"type": "function", "function": {"name": "f"}})"), tools);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->kind, ToolChoice::kFunction);
  EXPECT_EQ(f->function, "f");
  EXPECT_FALSE(parse_tool_choice("required", {}).ok());
  EXPECT_FALSE(parse_tool_choice("sometimes", tools).ok());
  EXPECT_FALSE(parse_tool_choice(3, tools).ok());
  auto missing = parse_tool_choice(json::parse(R"({"type": "function", "function": {"name": "g"}})"), tools);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message, "tool_choice.function.name: \"g\" is not among the tools");
  EXPECT_FALSE(parse_tool_choice(json::parse(R"({"type": "function"})"), tools).ok());
  EXPECT_FALSE(parse_tool_choice(json::parse(R"({"type": "x", "function": {"name": "f"}})"), tools).ok());
}

TEST(PromptOpensReasoning, only_a_prompt_ending_in_an_open_think_tag) {
  ChatFormat f;
  f.thinking = true;
  EXPECT_TRUE(prompt_opens_reasoning(f, "<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(prompt_opens_reasoning(f, "<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(prompt_opens_reasoning(f, "<|im_start|>assistant\n"));
  f.thinking = false;
  EXPECT_FALSE(prompt_opens_reasoning(f, "<|im_start|>assistant\n<think>\n"));
}

}  // namespace
}  // namespace strata::chat
