// tool_call_grammar: the GBNF parses, accepts what the real templates write for a call and refuses
// what is not a call; random walks through grammar::Matcher over the Qwen3 vocabulary write text
// that OutputParser reads back as calls whose arguments satisfy the tools' schemas.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>

#include "chat/parse_helpers.h"
#include "gguf/gguf.h"
#include "grammar/grammar.h"
#include "testing/shared_data.h"
#include "text/vocab.h"

namespace strata::chat {
namespace {

using nlohmann::json;

const text::Vocab& qwen3_vocab() {
  static std::shared_ptr<const text::Vocab> vocab = [] {
    std::string path = strata::testing::shared_file("models/vocab/ggml-vocab-qwen3.gguf");
    auto file = gguf::File::open(path);
    EXPECT_TRUE(file.ok());
    auto v = text::Vocab::load(**file);
    EXPECT_TRUE(v.ok());
    return *v;
  }();
  return *vocab;
}

std::vector<ToolSpec> walk_tools() {
  auto tools = parse_tools(json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
      "city": {"type": "string", "maxLength": 12}, "days": {"type": "integer", "minimum": 1, "maximum": 14},
      "units": {"enum": ["c", "f"]}, "hourly": {"type": "boolean"}}, "required": ["city", "days"]}}},
    {"type": "function", "function": {"name": "set_alarm", "parameters": {"type": "object", "properties": {
      "time": {"type": "object", "properties": {"h": {"type": "integer", "minimum": 0, "maximum": 23},
        "m": {"type": "integer", "minimum": 0, "maximum": 59}}, "required": ["h", "m"]},
      "labels": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 3}},
      "required": ["time"]}}}])"));
  EXPECT_TRUE(tools.ok()) << tools.error().message;
  return tools.ok() ? *tools : std::vector<ToolSpec>{};
}

size_t code_points(const std::string& s) {
  return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

// The schema keywords the test tools use, checked independently of the grammar code.
std::string violation(const json& v, const json& schema, const std::string& path) {
  if (auto e = schema.find("enum"); e != schema.end()) {
    return std::find(e->begin(), e->end(), v) == e->end() ? path + ": not in enum" : "";
  }
  std::string type = schema.value("type", "");
  if (type == "string") {
    if (!v.is_string()) return path + ": not a string";
    if (schema.contains("maxLength") && code_points(v.get<std::string>()) > schema["maxLength"].get<size_t>()) {
      return path + ": longer than maxLength";
    }
  } else if (type == "integer") {
    if (!v.is_number_integer()) return path + ": not an integer";
    if (schema.contains("minimum") && v.get<int64_t>() < schema["minimum"].get<int64_t>()) return path + ": below minimum";
    if (schema.contains("maximum") && v.get<int64_t>() > schema["maximum"].get<int64_t>()) return path + ": above maximum";
  } else if (type == "boolean") {
    if (!v.is_boolean()) return path + ": not a boolean";
  } else if (type == "array") {
    if (!v.is_array()) return path + ": not an array";
    if (schema.contains("maxItems") && v.size() > schema["maxItems"].get<size_t>()) return path + ": too many items";
    for (size_t i = 0; i < v.size(); ++i) {
      if (auto bad = violation(v[i], schema["items"], path + "[" + std::to_string(i) + "]"); !bad.empty()) return bad;
    }
  } else if (type == "object") {
    if (!v.is_object()) return path + ": not an object";
    for (const auto& r : schema.value("required", json::array())) {
      if (!v.contains(r.get<std::string>())) return path + ": missing " + r.get<std::string>();
    }
    for (const auto& [key, value] : v.items()) {
      auto props = schema.value("properties", json::object());
      if (!props.contains(key)) return path + ": unknown property " + key;
      if (auto bad = violation(value, props[key], path + "." + key); !bad.empty()) return bad;
    }
  }
  return "";
}

using GrammarOf = Result<std::string> (*)(const ChatFormat&, const std::vector<ToolSpec>&, const ToolChoice&, bool, bool);

// The tool-call grammar (or, with generic_tool_grammar, the generic format's), parsed.
std::shared_ptr<const grammar::Grammar> compile(const ChatFormat& f, const std::vector<ToolSpec>& tools,
                                                const ToolChoice& choice, bool parallel, bool in_reasoning,
                                                GrammarOf grammar_of = tool_call_grammar) {
  auto text = grammar_of(f, tools, choice, parallel, in_reasoning);
  EXPECT_TRUE(text.ok()) << text.error().message;
  if (!text.ok()) return nullptr;
  auto g = grammar::parse_gbnf(*text);
  EXPECT_TRUE(g.ok()) << g.error().message << "\n" << *text;
  return g.ok() ? *g : nullptr;
}

// Whether the grammar accepts `text` spelled with the vocabulary's own tokenization.
bool accepts(const std::shared_ptr<const grammar::Grammar>& g, const std::string& text) {
  if (!g) return false;
  const text::Vocab& vocab = qwen3_vocab();
  grammar::Matcher m(g, vocab);
  for (text::Token t : vocab.tokenize(text, false, false)) {
    if (!m.allows(t) || !m.accept(t).ok()) return false;
  }
  return m.can_end();
}

ChatFormat format_of(ToolFormat tf, bool thinking) {
  ChatFormat f;
  f.tools = tf;
  f.thinking = thinking;
  return f;
}

const ToolChoice kRequired{ToolChoice::kRequired, ""};

TEST(ToolCallGrammar, auto_and_none_need_no_grammar_and_a_format_without_calls_is_an_error) {
  auto tools = walk_tools();
  auto f = format_of(ToolFormat::kHermesJson, false);
  EXPECT_EQ(*tool_call_grammar(f, tools, ToolChoice{}, false, false), "");
  EXPECT_EQ(*tool_call_grammar(f, tools, ToolChoice{ToolChoice::kNone, ""}, false, false), "");
  auto none = tool_call_grammar(format_of(ToolFormat::kNone, false), tools, kRequired, false, false);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("no tool call format"), std::string::npos);
}

TEST(ToolCallGrammar, a_schema_that_cannot_be_converted_names_the_tool) {
  auto tools = parse_tools(json::parse(R"([{"type": "function", "function": {"name": "odd",
    "parameters": {"type": "object", "patternProperties": {"^x": {"type": "string"}}}}}])"));
  ASSERT_TRUE(tools.ok());
  for (ToolFormat tf : {ToolFormat::kHermesJson, ToolFormat::kLlama3Json}) {
    auto g = tool_call_grammar(format_of(tf, false), *tools, kRequired, false, false);
    ASSERT_FALSE(g.ok());
    EXPECT_NE(g.error().message.find("tools[0] (odd)"), std::string::npos) << g.error().message;
  }
}

TEST(ToolCallGrammar, accepts_the_calls_templates_write_and_refuses_other_text) {
  auto tools = walk_tools();
  const std::string hermes_call =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>";
  const std::string alarm_call =
      "<tool_call>\n{\"name\": \"set_alarm\", \"arguments\": {\"labels\": [\"a\"], \"time\": {\"h\": 7, \"m\": 30}}}\n</tool_call>";
  auto hermes = compile(format_of(ToolFormat::kHermesJson, true), tools, kRequired, true, false);
  EXPECT_TRUE(accepts(hermes, hermes_call));
  EXPECT_TRUE(accepts(hermes, "<think>\nPlan: weather.\n</think>\n\n" + hermes_call + "\n" + alarm_call));
  EXPECT_FALSE(accepts(hermes, "Sure. " + hermes_call));                        // content first
  EXPECT_FALSE(accepts(hermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"days\": 3}}\n</tool_call>"));
  EXPECT_FALSE(accepts(hermes, "<tool_call>\n{\"name\": \"other\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(accepts(hermes, "<think>a</think>b</think>" + hermes_call));     // reasoning holds no close tag
  auto single = compile(format_of(ToolFormat::kHermesJson, false), tools, kRequired, false, false);
  EXPECT_FALSE(accepts(single, hermes_call + "\n" + alarm_call));                // not parallel
  auto only_alarm = compile(format_of(ToolFormat::kHermesJson, false), tools, ToolChoice{ToolChoice::kFunction, "set_alarm"}, true, false);
  EXPECT_FALSE(accepts(only_alarm, hermes_call));
  EXPECT_TRUE(accepts(only_alarm, alarm_call));

  auto xml = compile(format_of(ToolFormat::kQwenXml, true), tools, kRequired, true, true);
  const std::string xml_call = "<tool_call>\n<function=get_weather>\n<parameter=city>\nSão Paulo\n</parameter>\n"
                               "<parameter=days>\n3\n</parameter>\n<parameter=units>\nc\n</parameter>\n</function>\n</tool_call>";
  EXPECT_TRUE(accepts(xml, "The user asks.\n</think>\n\n" + xml_call));
  EXPECT_FALSE(accepts(xml, xml_call));  // the prompt opened <think>: it must be closed first
  EXPECT_FALSE(accepts(xml, "x\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nA</parameter>B\n"
                            "</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"));
  EXPECT_FALSE(accepts(xml, "x\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nA\n</parameter>\n"
                            "<parameter=days>\nthree\n</parameter>\n</function>\n</tool_call>"));

  // maxLength counts characters (12 here); a string without bounds may hold markup.
  EXPECT_FALSE(accepts(xml, "x\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nSão Paulo, Bra\n"
                            "</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"));
  auto notes = parse_tools(json::parse(R"([{"type": "function", "function": {"name": "note", "parameters":
    {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}}])"));
  ASSERT_TRUE(notes.ok());
  auto note = compile(format_of(ToolFormat::kQwenXml, false), *notes, kRequired, false, false);
  EXPECT_TRUE(accepts(note, "<tool_call>\n<function=note>\n<parameter=text>\na <b>x</b>\n\n</p\n</parameter>\n"
                            "</function>\n</tool_call>"));
  EXPECT_FALSE(accepts(note, "<tool_call>\n<function=note>\n<parameter=text>\na </function> b\n</parameter>\n"
                             "</function>\n</tool_call>"));

  auto llama = compile(format_of(ToolFormat::kLlama3Json, false), tools, kRequired, false, false);
  EXPECT_TRUE(accepts(llama, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\", \"days\": 14}}"));
  EXPECT_FALSE(accepts(llama, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\", \"days\": 15}}"));
}

TEST(ToolCallGrammar, properties_come_in_the_clients_order_when_it_is_known) {
  const char* body = R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
    "properties": {"zeta": {"type": "integer"}, "alpha": {"type": "string"}}, "required": ["zeta", "alpha"]}}}])";
  auto ordered = parse_tools_ordered(nlohmann::ordered_json::parse(body));
  ASSERT_TRUE(ordered.ok()) << ordered.error().message;
  EXPECT_EQ((*ordered)[0].parameters_in_order["properties"].begin().key(), "zeta");
  auto sorted = parse_tools(json::parse(body));
  ASSERT_TRUE(sorted.ok());
  EXPECT_TRUE((*sorted)[0].parameters_in_order.is_null());
  const std::string zeta_first = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"zeta\": 1, \"alpha\": \"x\"}}\n</tool_call>";
  const std::string alpha_first = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"alpha\": \"x\", \"zeta\": 1}}\n</tool_call>";
  auto f = format_of(ToolFormat::kHermesJson, false);
  auto in_order = compile(f, *ordered, kRequired, false, false);
  EXPECT_TRUE(accepts(in_order, zeta_first));
  EXPECT_FALSE(accepts(in_order, alpha_first));
  auto by_key = compile(f, *sorted, kRequired, false, false);
  EXPECT_TRUE(accepts(by_key, alpha_first));
  EXPECT_FALSE(accepts(by_key, zeta_first));
  auto xml = compile(format_of(ToolFormat::kQwenXml, false), *ordered, kRequired, false, false);
  EXPECT_TRUE(accepts(xml, "<tool_call>\n<function=f>\n<parameter=zeta>\n1\n</parameter>\n<parameter=alpha>\nx\n"
                           "</parameter>\n</function>\n</tool_call>"));
  auto bad = parse_tools_ordered(nlohmann::ordered_json::parse(R"([{"type": "function", "function": {"name": "a b"}}])"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("tools[0].function.name"), std::string::npos);
}

struct Walked {
  std::string text;
  bool ended = false;
};

// Closing pieces of the formats: spelled now and then so that free text (reasoning, XML strings)
// ends in reasonable time. Random logits alone would almost never write "</parameter>".
const std::vector<std::string> kClosers = {"\n</think>\n\n", "</think>", "\n</parameter>\n", "</function>\n</tool_call>",
                                           "\"", "}", "]", "\n</tool_call>", "\n<tool_call>\n"};

// Tokens from random logits under the grammar (noise, plus on a random half of the steps a bonus
// for tokens that start with a structural character); on some steps one of kClosers is spelled with
// the vocabulary's tokens for as long as the grammar allows it. Stops at random once it may end.
Walked walk(const std::shared_ptr<const grammar::Grammar>& g, uint32_t seed, int max_steps) {
  const text::Vocab& vocab = qwen3_vocab();
  static const std::vector<float> bonus = [&] {
    std::vector<float> b(static_cast<size_t>(vocab.n_tokens()), 0.0f);
    for (text::Token t = 0; t < vocab.n_tokens(); ++t) {
      std::string piece = vocab.token_to_piece(t, false);
      if (!piece.empty() && std::string_view("\"<\n}],").find(piece[0]) != std::string_view::npos) b[t] = 2.0f;
    }
    return b;
  }();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> noise(0.0f, 1.0f);
  grammar::Matcher m(g, vocab);
  Walked w;
  std::vector<float> logits(bonus.size());
  for (int step = 0; step < max_steps; ++step) {
    if (m.finished() || (m.can_end() && rng() % 3 == 0)) {
      w.ended = true;
      break;
    }
    if (rng() % 8 == 0) {
      for (text::Token t : vocab.tokenize(kClosers[rng() % kClosers.size()], false, false)) {
        if (!m.allows(t)) break;
        EXPECT_TRUE(m.accept(t).ok());
        w.text += vocab.token_to_piece(t, false);
      }
      continue;
    }
    bool structural = rng() % 2;
    for (size_t i = 0; i < logits.size(); ++i) logits[i] = noise(rng) + (structural ? bonus[i] : 0.0f);
    // The favourite when the grammar allows it, else the favourite of the masked row.
    auto pick = [&] { return static_cast<text::Token>(std::max_element(logits.begin(), logits.end()) - logits.begin()); };
    text::Token t = pick();
    if (!m.allows(t)) {
      m.mask(logits);
      t = pick();
    }
    if (vocab.is_eog(t)) {
      w.ended = true;
      break;
    }
    EXPECT_TRUE(m.accept(t).ok());
    w.text += vocab.token_to_piece(t, false);
  }
  return w;
}

// The calls a walk parsed into: at most one unless parallel, each of a known tool (the named one for
// kFunction) with arguments its schema allows. Returns how many were checked.
int check_calls(const testing::Joined& j, const std::vector<ToolSpec>& tools, const ToolChoice& choice, bool parallel) {
  if (!parallel) {
    EXPECT_EQ(j.calls.size(), 1u);
  }
  int checked = 0;
  for (const auto& call : j.calls) {
    auto tool = std::find_if(tools.begin(), tools.end(), [&](const ToolSpec& t) { return t.name == call.name; });
    EXPECT_NE(tool, tools.end()) << call.name;
    if (tool == tools.end()) continue;
    if (choice.kind == ToolChoice::kFunction) {
      EXPECT_EQ(call.name, "set_alarm");
    }
    EXPECT_EQ(violation(json::parse(call.arguments_json, nullptr, false), tool->parameters, call.name), "")
        << call.arguments_json;
    ++checked;
  }
  return checked;
}

TEST(ToolCallGrammar, random_walks_parse_into_calls_that_satisfy_the_schemas) {
  auto tools = walk_tools();
  int calls_checked = 0;
  for (ToolFormat tf : {ToolFormat::kHermesJson, ToolFormat::kQwenXml, ToolFormat::kLlama3Json}) {
    for (uint32_t seed = 0; seed < 20; ++seed) {
      bool parallel = seed % 2, thinking = tf != ToolFormat::kLlama3Json && seed % 4 >= 2;
      bool in_reasoning = thinking && seed % 8 >= 4;
      ToolChoice choice = seed % 5 == 4 ? ToolChoice{ToolChoice::kFunction, "set_alarm"} : kRequired;
      auto g = compile(format_of(tf, thinking), tools, choice, parallel, in_reasoning);
      ASSERT_TRUE(g);
      Walked w = walk(g, seed, 3000);
      SCOPED_TRACE(std::string(tool_format_name(tf)) + " seed " + std::to_string(seed) + ": " + w.text);
      ASSERT_TRUE(w.ended) << "the walk did not end";
      testing::ParserSetup s;
      s.format = format_of(tf, thinking);
      s.starts_in_reasoning = in_reasoning;
      s.tools = tools;
      testing::Joined j = testing::parse_all_ways(s, w.text);
      EXPECT_EQ(j.content, "");
      ASSERT_GE(j.calls.size(), 1u);
      calls_checked += check_calls(j, tools, choice, parallel);
    }
  }
  EXPECT_GE(calls_checked, 60);
}

std::shared_ptr<const grammar::Grammar> compile_generic(const ChatFormat& f, const std::vector<ToolSpec>& tools,
                                                        const ToolChoice& choice, bool parallel, bool in_reasoning) {
  return compile(f, tools, choice, parallel, in_reasoning, generic_tool_grammar);
}

// llama-server's generic format for templates without a call format: one JSON object, a call (or a
// list of them when parallel) or, for auto, {"response": text}.
TEST(GenericTools, the_grammar_accepts_calls_and_responses_as_the_choice_allows) {
  auto tools = walk_tools();
  const ChatFormat f = format_of(ToolFormat::kGeneric, false);
  const std::string call = R"({"tool_call": {"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}}})";
  const std::string answer = R"({"response": "It is cold."})";
  auto required = compile_generic(f, tools, kRequired, false, false);
  EXPECT_TRUE(accepts(required, call));
  EXPECT_FALSE(accepts(required, answer));
  EXPECT_FALSE(accepts(required, R"({"tool_call": {"name": "get_weather", "arguments": {"city": "Oslo"}}})"));
  EXPECT_FALSE(accepts(required, R"({"tool_call": {"name": "nope", "arguments": {}}})"));
  auto any = compile_generic(f, tools, ToolChoice{}, false, false);
  EXPECT_TRUE(accepts(any, call));
  EXPECT_TRUE(accepts(any, answer));
  EXPECT_FALSE(accepts(any, "It is cold."));
  auto alarm = compile_generic(f, tools, ToolChoice{ToolChoice::kFunction, "set_alarm"}, true, false);
  EXPECT_FALSE(accepts(alarm, call));
  EXPECT_TRUE(accepts(alarm, R"({"tool_calls": [{"name": "set_alarm", "arguments": {"time": {"h": 7, "m": 0}}}]})"));
  EXPECT_EQ(*generic_tool_grammar(f, tools, ToolChoice{ToolChoice::kNone, ""}, false, false), "");
  const std::string told = generic_tools_instruction(tools, false);
  EXPECT_NE(told.find("Respond in JSON format, either with `tool_call`"), std::string::npos) << told;
  EXPECT_NE(told.find("\"set_alarm\""), std::string::npos) << told;
}

TEST(GenericTools, the_parser_reads_calls_and_responses_and_keeps_other_text_as_content) {
  testing::ParserSetup s;
  s.format = format_of(ToolFormat::kGeneric, false);
  auto j = testing::parse_all_ways(s, R"({"tool_calls": [{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {}}]})");
  ASSERT_EQ(j.calls.size(), 2u);
  EXPECT_EQ(j.calls[0].name, "a");
  EXPECT_EQ(json::parse(j.calls[0].arguments_json), json({{"x", 1}}));
  EXPECT_EQ(j.calls[1].arguments_json, "{}");
  EXPECT_EQ(j.content, "");
  EXPECT_EQ(testing::parse_all_ways(s, R"({"response": "Hello \"you\""})").content, "Hello \"you\"");
  EXPECT_EQ(testing::parse_all_ways(s, "not json {").content, "not json {");
  s.format.thinking = true;
  auto r = testing::parse_all_ways(s, "<think>plan</think>\n{\"tool_call\": {\"name\": \"a\", \"arguments\": {}}}");
  EXPECT_EQ(r.reasoning, "plan");
  ASSERT_EQ(r.calls.size(), 1u);
}

TEST(GenericTools, random_walks_are_calls_that_satisfy_the_schemas_or_responses) {
  auto tools = walk_tools();
  int calls_checked = 0, responses = 0;
  for (uint32_t seed = 0; seed < 30; ++seed) {
    const bool parallel = seed % 2, thinking = seed % 4 >= 2, in_reasoning = thinking && seed % 8 >= 4;
    const ToolChoice choice = seed % 3 == 0   ? ToolChoice{}
                              : seed % 3 == 1 ? kRequired
                                              : ToolChoice{ToolChoice::kFunction, "set_alarm"};
    auto g = compile_generic(format_of(ToolFormat::kGeneric, thinking), tools, choice, parallel, in_reasoning);
    ASSERT_TRUE(g);
    Walked w = walk(g, seed, 3000);
    SCOPED_TRACE("seed " + std::to_string(seed) + ": " + w.text);
    ASSERT_TRUE(w.ended) << "the walk did not end";
    testing::ParserSetup s;
    s.format = format_of(ToolFormat::kGeneric, thinking);
    s.starts_in_reasoning = in_reasoning;
    s.tools = tools;
    testing::Joined j = testing::parse_all_ways(s, w.text);
    if (j.calls.empty()) {
      EXPECT_EQ(choice.kind, ToolChoice::kAuto) << "only auto may answer in text";
      ++responses;
      continue;
    }
    EXPECT_EQ(j.content, "");
    calls_checked += check_calls(j, tools, choice, parallel);
  }
  EXPECT_GE(calls_checked, 20);
  std::printf("[ generic  ] %d calls checked, %d text responses\n", calls_checked, responses);
}

// A JSON-schema answer of a thinking model: the reasoning the prompt opened is closed first (else
// the JSON would be parsed as reasoning); without an open think block it is optional.
TEST(ReasoningThen, a_constrained_answer_may_or_must_close_its_reasoning_first) {
  auto rules = grammar::json_schema_to_gbnf(nlohmann::json{{"type", "object"},
                                                           {"properties", {{"a", {{"type", "integer"}}}}},
                                                           {"required", {"a"}}},
                                            "answer-");
  ASSERT_TRUE(rules.ok()) << rules.error().message;
  const ChatFormat thinking = format_of(ToolFormat::kHermesJson, true);
  auto open = grammar::parse_gbnf(reasoning_then(thinking, true, "answer-root", *rules));
  ASSERT_TRUE(open.ok()) << open.error().message;
  EXPECT_TRUE(accepts(*open, "Think a bit.\n</think>\n\n{\"a\": 3}"));
  EXPECT_FALSE(accepts(*open, "{\"a\": 3}"));
  auto optional = grammar::parse_gbnf(reasoning_then(thinking, false, "answer-root", *rules));
  ASSERT_TRUE(optional.ok()) << optional.error().message;
  EXPECT_TRUE(accepts(*optional, "{\"a\": 3}"));
  EXPECT_TRUE(accepts(*optional, "<think>\nhm\n</think>\n{\"a\": 3}"));
  EXPECT_FALSE(accepts(*optional, "hm</think>{\"a\": 3}"));
  auto plain = grammar::parse_gbnf(reasoning_then(format_of(ToolFormat::kHermesJson, false), true, "answer-root", *rules));
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  EXPECT_TRUE(accepts(*plain, "{\"a\": 3}"));
  EXPECT_FALSE(accepts(*plain, "<think>\nhm\n</think>\n{\"a\": 3}"));
}

}  // namespace
}  // namespace strata::chat
