// OutputParser per format: whole strings and the same strings in pieces give the same result, and
// the result is the reasoning, content and calls the text holds.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>

#include "chat/parse_helpers.h"

namespace strata::chat {
namespace {

using nlohmann::json;
using testing::Joined;
using testing::ParserSetup;
using testing::parse_all_ways;

ParserSetup hermes(bool thinking = false) {
  ParserSetup s;
  s.format.tools = ToolFormat::kHermesJson;
  s.format.thinking = thinking;
  return s;
}

ParserSetup qwen_xml(std::vector<ToolSpec> tools = {}) {
  ParserSetup s;
  s.format.tools = ToolFormat::kQwenXml;
  s.format.thinking = true;
  s.tools = std::move(tools);
  return s;
}

ParserSetup llama3() {
  ParserSetup s;
  s.format.tools = ToolFormat::kLlama3Json;
  return s;
}

json args_of(const Joined& j, size_t i) {
  EXPECT_LT(i, j.calls.size());
  if (i >= j.calls.size()) return nullptr;
  json a = json::parse(j.calls[i].arguments_json, nullptr, false);
  EXPECT_FALSE(a.is_discarded()) << "arguments are JSON: " << j.calls[i].arguments_json;
  EXPECT_TRUE(a.is_object()) << j.calls[i].arguments_json;
  return a;
}

TEST(HermesJson, content_before_a_call_then_the_call) {
  auto j = parse_all_ways(hermes(), "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                                    "{\"city\": \"Paris\", \"units\": [\"c\", 1.5e3, true, null]}}\n</tool_call>");
  EXPECT_EQ(j.content, "Let me check.");
  EXPECT_EQ(j.reasoning, "");
  ASSERT_EQ(j.calls.size(), 1u);
  EXPECT_EQ(j.calls[0].name, "get_weather");
  EXPECT_EQ(j.calls[0].arguments_json, "{\"city\": \"Paris\", \"units\": [\"c\", 1.5e3, true, null]}");
  EXPECT_EQ(j.calls[0].id.size(), 5u + 24u);
  EXPECT_EQ(j.calls[0].id.substr(0, 5), "call_");
}

TEST(HermesJson, two_parallel_calls_whitespace_between_is_dropped) {
  auto j = parse_all_ways(hermes(), "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n \n"
                                    "<tool_call>\n{\"name\": \"b\", \"arguments\": {\"x\": \"é😀\\u00e9\"}}\n</tool_call>\n");
  EXPECT_EQ(j.content, "");
  ASSERT_EQ(j.calls.size(), 2u);
  EXPECT_EQ(j.calls[0].name, "a");
  EXPECT_EQ(j.calls[0].arguments_json, "{}");
  EXPECT_EQ(j.calls[1].name, "b");
  EXPECT_EQ(args_of(j, 1), json::parse(R"({"x": "é😀é"})"));
  EXPECT_NE(j.calls[0].id, j.calls[1].id);
}

TEST(HermesJson, reasoning_then_call_tags_stripped_and_trimmed) {
  auto j = parse_all_ways(hermes(true), "<think>\nI should call it. 思考\n\n</think>\n\nSure.\n"
                                        "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"q\": 1}}\n</tool_call>");
  EXPECT_EQ(j.reasoning, "I should call it. 思考");
  EXPECT_EQ(j.content, "Sure.");
  ASSERT_EQ(j.calls.size(), 1u);
  EXPECT_EQ(args_of(j, 0), json::parse(R"({"q": 1})"));
}

TEST(HermesJson, keys_in_another_order_and_string_arguments_are_held_and_parsed) {
  auto j = parse_all_ways(hermes(), "<tool_call>\n{\"arguments\": {\"a\": [1, 2]}, \"name\": \"f\"}\n</tool_call>"
                                    "<tool_call>{\"name\": \"g\", \"arguments\": \"{\\\"b\\\": true}\"}</tool_call>");
  ASSERT_EQ(j.calls.size(), 2u);
  EXPECT_EQ(j.calls[0].name, "f");
  EXPECT_EQ(args_of(j, 0), json::parse(R"({"a": [1, 2]})"));
  EXPECT_EQ(j.calls[1].name, "g");
  EXPECT_EQ(args_of(j, 1), json::parse(R"({"b": true})"));
  EXPECT_EQ(j.content, "");
}

TEST(HermesJson, an_array_of_calls_in_one_block_is_several_calls) {
  auto j = parse_all_ways(hermes(), "<tool_call>\n[{\"name\": \"a\", \"arguments\": {\"x\": 1}}, "
                                    "{\"name\": \"b\", \"arguments\": {}}]\n</tool_call>");
  ASSERT_EQ(j.calls.size(), 2u);
  EXPECT_EQ(j.calls[0].name, "a");
  EXPECT_EQ(j.calls[0].arguments_json, "{\"x\":1}");
  EXPECT_EQ(j.calls[1].name, "b");
  auto bad = parse_all_ways(hermes(), "<tool_call>[{\"name\": \"a\"}, 3]</tool_call>");
  EXPECT_TRUE(bad.calls.empty());
  EXPECT_EQ(bad.content, "<tool_call>[{\"name\": \"a\"}, 3]</tool_call>");
}

TEST(HermesJson, malformed_arguments_close_the_call_and_the_rest_is_content) {
  auto j = parse_all_ways(hermes(), "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1,, \"b\": 2}}\n</tool_call>");
  ASSERT_EQ(j.calls.size(), 1u);
  EXPECT_EQ(args_of(j, 0), json::parse(R"({"a": 1})"));
  EXPECT_EQ(j.content, ",, \"b\": 2}}\n</tool_call>");
}

TEST(HermesJson, a_call_cut_off_inside_a_string_is_closed_into_valid_json) {
  auto j = parse_all_ways(hermes(), "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"city\": \"Par\\u00");
  ASSERT_EQ(j.calls.size(), 1u);
  EXPECT_EQ(j.calls[0].arguments_json, "{\"city\": \"Par\"}");
  EXPECT_EQ(j.content, "\\u00");
}

TEST(HermesJson, a_call_cut_off_after_a_key_keeps_the_complete_pairs) {
  auto j = parse_all_ways(hermes(), "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": {\"b\": [1, 2], \"c");
  ASSERT_EQ(j.calls.size(), 1u);
  EXPECT_EQ(args_of(j, 0), json::parse(R"({"a": {"b": [1, 2]}})"));
}

TEST(HermesJson, text_that_never_became_a_call_is_content) {
  auto s = hermes();
  EXPECT_EQ(parse_all_ways(s, "Hi <tool_call>\n{\"na").content, "Hi <tool_call>\n{\"na");
  EXPECT_EQ(parse_all_ways(s, "Hi <tool_call>hello</tool_call>").content, "Hi <tool_call>hello</tool_call>");
  EXPECT_EQ(parse_all_ways(s, "a <tool_ca").content, "a <tool_ca");
  EXPECT_EQ(parse_all_ways(s, "x <tool_call>{\"foo\": 1}</tool_call> y").content,
            "x <tool_call>{\"foo\": 1}</tool_call> y");
  EXPECT_TRUE(parse_all_ways(s, "x <tool_call>{\"foo\": 1}</tool_call> y").calls.empty());
}

TEST(HermesJson, an_unterminated_call_with_complete_json_is_a_call) {
  auto j = parse_all_ways(hermes(), "<tool_call>\n{\"arguments\": {\"a\": 1}, \"name\": \"f\"}");
  ASSERT_EQ(j.calls.size(), 1u);
  EXPECT_EQ(j.calls[0].name, "f");
  auto k = parse_all_ways(hermes(), "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}");
  ASSERT_EQ(k.calls.size(), 1u);
  EXPECT_EQ(k.calls[0].arguments_json, "{\"a\": 1}");
  EXPECT_EQ(k.content, "");
}

TEST(HermesJson, without_tools_markers_are_plain_content) {
  auto s = hermes();
  s.parse_tools = false;
  std::string text = "A <tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>  ";
  auto j = parse_all_ways(s, text);
  EXPECT_EQ(j.content, text);
  EXPECT_TRUE(j.calls.empty());
}

TEST(HermesJson, content_after_calls_is_content_and_plain_content_keeps_its_whitespace) {
  auto j = parse_all_ways(hermes(), "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>\n\nDone.\n");
  EXPECT_EQ(j.content, "Done.");
  EXPECT_EQ(parse_all_ways(hermes(), "  Hello,\n world.\n\n").content, "  Hello,\n world.\n\n");
}

TEST(Reasoning, starts_in_reasoning_until_the_close_tag) {
  auto s = hermes(true);
  s.starts_in_reasoning = true;
  auto j = parse_all_ways(s, "\nLet me think <b>.\n</think>\n\nThe answer is 4.");
  EXPECT_EQ(j.reasoning, "Let me think <b>.");
  EXPECT_EQ(j.content, "The answer is 4.");
  // Cut off while thinking: all of it is reasoning.
  auto k = parse_all_ways(s, "still thinking </thi");
  EXPECT_EQ(k.reasoning, "still thinking </thi");
  EXPECT_EQ(k.content, "");
}

TEST(Reasoning, not_split_keeps_everything_in_content_verbatim) {
  auto s = hermes(true);
  s.split_reasoning = false;
  std::string text = "<think>\nhmm\n</think>\n\nHi\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
  auto j = parse_all_ways(s, text);
  EXPECT_EQ(j.reasoning, "");
  EXPECT_EQ(j.content, "<think>\nhmm\n</think>\n\nHi");
  ASSERT_EQ(j.calls.size(), 1u);
  s.starts_in_reasoning = true;
  EXPECT_EQ(parse_all_ways(s, "hmm\n</think>\nok").content, "hmm\n</think>\nok");
}

TEST(Reasoning, a_format_without_thinking_leaves_think_tags_in_content) {
  EXPECT_EQ(parse_all_ways(hermes(false), "<think>x</think>y").content, "<think>x</think>y");
}

TEST(Reasoning, tool_markers_inside_reasoning_are_reasoning) {
  auto j = parse_all_ways(hermes(true), "<think>maybe <tool_call>{\"name\": \"f\"}</think>no");
  EXPECT_EQ(j.reasoning, "maybe <tool_call>{\"name\": \"f\"}");
  EXPECT_EQ(j.content, "no");
  EXPECT_TRUE(j.calls.empty());
}

std::vector<ToolSpec> weather_tools() {
  return {ToolSpec{"get_weather", "",
                   json::parse(R"({"type": "object", "properties": {"city": {"type": "string"},
                     "days": {"type": "integer"}, "hourly": {"type": "boolean"},
                     "ratio": {"type": ["number", "null"]}, "opts": {"type": "object"},
                     "tags": {"type": "array", "items": {"type": "string"}}}, "required": ["city"]})")}};
}

TEST(QwenXml, parameters_typed_by_the_schema) {
  auto j = parse_all_ways(qwen_xml(weather_tools()),
                          "<tool_call>\n<function=get_weather>\n<parameter=city>\nSão Paulo\n</parameter>\n"
                          "<parameter=days>\n3\n</parameter>\n<parameter=hourly>\nTrue\n</parameter>\n"
                          "<parameter=ratio>\nNone\n</parameter>\n<parameter=opts>\n{\"a\": [1]}\n</parameter>\n"
                          "<parameter=tags>\n[\"x\", \"y\"]\n</parameter>\n</function>\n</tool_call>");
  ASSERT_EQ(j.calls.size(), 1u);
  EXPECT_EQ(j.calls[0].name, "get_weather");
  EXPECT_EQ(args_of(j, 0), json::parse(R"({"city": "São Paulo", "days": 3, "hourly": true, "ratio": null,
                                           "opts": {"a": [1]}, "tags": ["x", "y"]})"));
  EXPECT_EQ(j.content, "");
}

TEST(QwenXml, values_that_do_not_fit_their_type_and_unknown_parameters_are_strings) {
  auto j = parse_all_ways(qwen_xml(weather_tools()),
                          "<tool_call>\n<function=get_weather>\n<parameter=days>\nthree\n</parameter>\n"
                          "<parameter=city>\n42\n</parameter>\n<parameter=other>\n{\"a\": 1}\n</parameter>\n"
                          "</function>\n</tool_call>");
  ASSERT_EQ(j.calls.size(), 1u);
  EXPECT_EQ(args_of(j, 0), json::parse(R"({"days": "three", "city": "42", "other": "{\"a\": 1}"})"));
}

TEST(QwenXml, multiline_values_with_markup_and_two_calls_after_content) {
  auto j = parse_all_ways(qwen_xml(), "Writing it.\n\n<tool_call>\n<function=write>\n<parameter=text>\n"
                                      "line 1 <b>\n\n  line 2 </p>\n</parameter>\n</function>\n</tool_call>\n"
                                      "<tool_call>\n<function=noargs>\n</function>\n</tool_call>");
  EXPECT_EQ(j.content, "Writing it.");
  ASSERT_EQ(j.calls.size(), 2u);
  EXPECT_EQ(args_of(j, 0), json({{"text", "line 1 <b>\n\n  line 2 </p>"}}));
  EXPECT_EQ(j.calls[1].name, "noargs");
  EXPECT_EQ(j.calls[1].arguments_json, "{}");
}

TEST(QwenXml, reasoning_opened_by_the_prompt_then_a_call) {
  auto s = qwen_xml(weather_tools());
  s.starts_in_reasoning = true;
  auto j = parse_all_ways(s, "The user wants weather.\n</think>\n\n<tool_call>\n<function=get_weather>\n"
                             "<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>");
  EXPECT_EQ(j.reasoning, "The user wants weather.");
  ASSERT_EQ(j.calls.size(), 1u);
  EXPECT_EQ(args_of(j, 0), json({{"city", "Paris"}}));
}

TEST(QwenXml, cut_off_and_malformed_calls_end_as_valid_json) {
  auto s = qwen_xml(weather_tools());
  auto cut = parse_all_ways(s, "<tool_call>\n<function=get_weather>\n<parameter=city>\nPar");
  ASSERT_EQ(cut.calls.size(), 1u);
  EXPECT_EQ(args_of(cut, 0), json({{"city", "Par"}}));
  auto bad = parse_all_ways(s, "<tool_call>\n<function=get_weather>\n<parameter=city>\nA\n</parameter>\njunk");
  ASSERT_EQ(bad.calls.size(), 1u);
  EXPECT_EQ(args_of(bad, 0), json({{"city", "A"}}));
  EXPECT_EQ(bad.content, "junk");
  auto no_close = parse_all_ways(s, "<tool_call>\n<function=get_weather>\n<parameter=city>\nB\n</function>");
  EXPECT_EQ(args_of(no_close, 0), json({{"city", "B"}}));
  auto bad_name = parse_all_ways(s, "<tool_call>\n<function=a\nb>");
  EXPECT_TRUE(bad_name.calls.empty());
  EXPECT_EQ(bad_name.content, "<tool_call>\n<function=a\nb>");
  auto repeated = parse_all_ways(s, "<tool_call><function=f><parameter=a>1</parameter><parameter=a>2</parameter>"
                                    "</function></tool_call>");
  EXPECT_EQ(args_of(repeated, 0), json({{"a", "1"}}));
}

TEST(QwenXml, a_json_body_in_the_xml_family_is_parsed_too) {
  auto j = parse_all_ways(qwen_xml(), "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>");
  ASSERT_EQ(j.calls.size(), 1u);
  EXPECT_EQ(args_of(j, 0), json({{"a", 1}}));
}

TEST(Llama3Json, the_whole_output_as_a_call_and_its_variants) {
  auto j = parse_all_ways(llama3(), " {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}");
  ASSERT_EQ(j.calls.size(), 1u);
  EXPECT_EQ(j.calls[0].arguments_json, "{\"city\": \"Paris\"}");
  EXPECT_EQ(j.content, "");
  auto typed = parse_all_ways(llama3(), "{\"type\": \"function\", \"name\": \"f\", \"parameters\": {}}");
  ASSERT_EQ(typed.calls.size(), 1u);
  EXPECT_EQ(typed.calls[0].name, "f");
  auto tagged = parse_all_ways(llama3(), "<|python_tag|>{\"name\": \"g\", \"parameters\": {\"n\": 2}}");
  ASSERT_EQ(tagged.calls.size(), 1u);
  EXPECT_EQ(tagged.calls[0].name, "g");
  auto two = parse_all_ways(llama3(), "{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": {}}");
  ASSERT_EQ(two.calls.size(), 2u);
  EXPECT_EQ(two.calls[1].name, "b");
}

TEST(Llama3Json, json_that_is_not_a_call_and_text_are_content) {
  EXPECT_EQ(parse_all_ways(llama3(), "{\"foo\": 1}").content, "{\"foo\": 1}");
  EXPECT_TRUE(parse_all_ways(llama3(), "{\"foo\": 1}").calls.empty());
  EXPECT_EQ(parse_all_ways(llama3(), "Hello {\"name\": \"f\"}").content, "Hello {\"name\": \"f\"}");
  auto code = parse_all_ways(llama3(), "<|python_tag|>print(1)");
  EXPECT_EQ(code.content, "<|python_tag|>print(1)");
  auto before = parse_all_ways(llama3(), "Calling.\n<|python_tag|>{\"name\": \"f\", \"parameters\": {}}");
  EXPECT_EQ(before.content, "Calling.");
  EXPECT_EQ(before.calls.size(), 1u);
}

TEST(OutputParser, pushes_after_finish_are_ignored_and_a_second_finish_is_empty) {
  OutputParser p(hermes().format, false, true, true);
  EXPECT_EQ(p.push("Hi").content, "Hi");
  EXPECT_EQ(p.push(" <tool").content, "");  // may still be a marker
  EXPECT_EQ(p.finish().content, " <tool");
  EXPECT_TRUE(p.push("more").empty());
  EXPECT_TRUE(p.finish().empty());
  EXPECT_EQ(p.content(), "Hi <tool");
}

TEST(OutputParser, held_text_is_bounded) {
  // A megabyte of whitespace before a marker that may come: only the last kMaxHeldWhitespace bytes
  // are held, and those are what a call that follows drops.
  OutputParser p(hermes().format, false, true, true);
  std::string ws(kMaxHeldBytes + 10, ' ');
  auto d = p.push("a" + ws);
  EXPECT_EQ(d.content.size(), 1 + ws.size() - kMaxHeldWhitespace);
  (void)p.push("<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>");
  (void)p.finish();
  EXPECT_EQ(p.content().size(), 1 + ws.size() - kMaxHeldWhitespace);
  EXPECT_EQ(p.tool_calls().size(), 1u);
  // A call larger than the cap is closed.
  OutputParser q(hermes().format, false, true, true);
  (void)q.push("<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": \"");
  (void)q.push(std::string(kMaxCallBytes + 10, 'x'));
  ASSERT_EQ(q.tool_calls().size(), 1u);
  EXPECT_LE(q.tool_calls()[0].arguments_json.size(), kMaxCallBytes + 8);
  EXPECT_TRUE(json::accept(q.tool_calls()[0].arguments_json));
}

// Text arriving in small pieces costs time in proportion to its size, whatever the parser is holding
// (whitespace before a possible marker, a held JSON call, a long XML value, a long reasoning).
TEST(OutputParser, long_texts_in_small_pieces_take_linear_time) {
  auto feed = [](const ParserSetup& s, const std::string& head, char fill, size_t n, const std::string& tail) {
    OutputParser p(s.format, s.starts_in_reasoning, s.split_reasoning, s.parse_tools, s.tools);
    (void)p.push(head);
    std::string piece(4, fill);
    for (size_t i = 0; i < n / 4; ++i) (void)p.push(piece);
    (void)p.push(tail);
    (void)p.finish();
    return p.content().size() + p.reasoning().size() + p.tool_calls().size();
  };
  auto start = std::chrono::steady_clock::now();
  const size_t n = 600000;
  EXPECT_GT(feed(hermes(), "a", ' ', n, "b"), n);
  EXPECT_GT(feed(hermes(true), "<think>", '\n', n, "x</think>"), 0u);
  EXPECT_EQ(feed(hermes(), "<tool_call>{\"arguments\": {\"a\": \"", 'x', n, "\"}, \"name\": \"f\"}</tool_call>"), 1u);
  EXPECT_EQ(feed(qwen_xml(), "<tool_call><function=f><parameter=a>", 'y', n, "</parameter></function></tool_call>"), 1u);
  EXPECT_GT(feed(hermes(), "<tool_call>", ' ', n, "!"), n);
  EXPECT_GT(feed(llama3(), "", ' ', n, "{}"), n);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 5.0) << "6 texts of 600 KB in 4-byte pieces";
}

}  // namespace
}  // namespace strata::chat
