// Random texts built from the pieces the formats are made of: whatever the text, the parser gives the
// same result however the text is cut into pieces, and every call it reports has a JSON object as its
// arguments.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "chat/parse_helpers.h"

namespace strata::chat {
namespace {

const std::vector<std::string> kFragments = {
    "<tool_call>", "\n", " ", "<tool_", "</tool_call>", "<think>", "</think>", "</thi", "{", "}", "[", "]",
    "\"", "\\", ",", ":", "\"name\"", "\"arguments\"", "\"parameters\"", "\"type\": \"function\", ",
    "{\"name\": \"f\", \"arguments\": {", "{\"name\": \"g\", \"parameters\": {", "\"a\": 1", "\"b\": \"x",
    "true", "nul", "-1.5e", "<function=f>", "<function=", "<parameter=a>", "<parameter=n>", "</parameter>",
    "</function>", "<|python_tag|>", "é", "😀", "漢字", "hello", "Let me", "\\u00e9", "\\u00", ";", "\t",
    std::string(200, ' '), std::string(300, '\n')};  // runs around kMaxHeldWhitespace

// Half the texts have a call start in the middle, so the call paths get their share of noise.
std::string random_text(std::mt19937& rng) {
  static const std::vector<std::string> starts = {
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {", "<tool_call>\n<function=f>\n<parameter=a>\n",
      "{\"name\": \"f\", \"parameters\": {", "</think>\n<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": "};
  std::uniform_int_distribution<size_t> count(0, 20), pick(0, kFragments.size() - 1), start(0, starts.size() - 1);
  std::string text;
  for (size_t n = count(rng); n > 0; --n) text += kFragments[pick(rng)];
  if (rng() % 2) text = text.substr(0, text.size() / 4) + starts[start(rng)] + text.substr(text.size() / 4);
  return text;
}

TEST(StreamingProperty, any_text_parses_the_same_in_any_pieces_and_calls_have_object_arguments) {
  std::mt19937 rng(2024);
  std::vector<ToolSpec> tools = {
      {"f", "", nlohmann::json::parse(R"({"type":"object","properties":{"a":{"type":"integer"},"n":{"type":"string"}}})")}};
  size_t texts = 0, with_calls = 0;
  for (ToolFormat tf : {ToolFormat::kHermesJson, ToolFormat::kQwenXml, ToolFormat::kLlama3Json}) {
    for (int flags = 0; flags < 4; ++flags) {
      testing::ParserSetup s;
      s.format.tools = tf;
      s.format.thinking = true;
      s.starts_in_reasoning = flags & 1;
      s.split_reasoning = !(flags & 2);
      s.tools = tools;
      for (int i = 0; i < 60; ++i) {
        std::string text = random_text(rng);
        SCOPED_TRACE(text);
        testing::Joined j = testing::parse_all_ways(s, text);
        ++texts;
        with_calls += !j.calls.empty();
        for (const auto& c : j.calls) {
          auto args = nlohmann::json::parse(c.arguments_json, nullptr, false);
          EXPECT_TRUE(args.is_object()) << c.arguments_json;
          EXPECT_FALSE(c.name.empty());
        }
        // Nothing is lost or invented: every byte of output comes from the text (a loose bound:
        // parsed arguments may be re-serialized, closers add a few bytes per call).
        EXPECT_LE(j.reasoning.size() + j.content.size(), text.size());
      }
    }
  }
  EXPECT_GT(with_calls, texts / 10) << "the random texts should reach the call paths";
}

}  // namespace
}  // namespace strata::chat
