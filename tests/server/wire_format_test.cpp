// The wire formats without a model: each request parses into the turn it describes, bad fields are
// refused with errors that name them, and a turn's events become each format's documented stream
// (Anthropic's event order and block indices, the Responses API's numbered events).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "server/anthropic_api.h"
#include "server/builtin_templates.h"
#include "server/openai_api.h"
#include "server/responses_api.h"

namespace strata::server {
namespace {

using nlohmann::json;

std::optional<ApiError> parse(WireFormat& wire, const std::string& body, TurnRequest& turn) {
  json j;
  if (auto e = parse_body(body, j)) return e;
  return wire.parse(j, turn);
}

// The param an invalid body is refused with ("<accepted>" when it is not refused).
template <typename Wire, typename... Args>
std::string refused_param(const std::string& body, Args... args) {
  Wire wire(args...);
  TurnRequest turn;
  auto e = parse(wire, body, turn);
  if (!e) return "<accepted>";
  EXPECT_EQ(e->status, 400) << body;
  EXPECT_NE(e->message.find(e->param.empty() ? "" : e->param), std::string::npos) << e->message;
  return e->param;
}

struct Sse {
  std::string event;
  json data;
};

// Splits a server-sent event stream into its events.
std::vector<Sse> parse_sse(const std::string& text) {
  std::vector<Sse> out;
  std::istringstream in(text);
  std::string line, event;
  while (std::getline(in, line)) {
    if (line.rfind("event: ", 0) == 0) event = line.substr(7);
    if (line.rfind("data: ", 0) == 0) {
      out.push_back({event, json::parse(line.substr(6), nullptr, false)});
      event.clear();
    }
  }
  return out;
}

TurnUsage usage(int32_t prompt, int32_t completion, int32_t cached) {
  TurnUsage u;
  u.prompt_tokens = prompt;
  u.completion_tokens = completion;
  u.cached_tokens = cached;
  return u;
}

TurnEvents content(std::string reasoning, std::string text) {
  TurnEvents ev;
  ev.reasoning = std::move(reasoning);
  ev.content = std::move(text);
  return ev;
}

TurnEvents call_delta(int32_t index, std::string id, std::string name, std::string arguments) {
  TurnEvents ev;
  ev.tool_calls.push_back({index, std::move(id), std::move(name), std::move(arguments)});
  return ev;
}

TurnEvents finish(std::string reason) {
  TurnEvents ev;
  ev.done = true;
  ev.finish_reason = std::move(reason);
  ev.usage = usage(12, 7, 4);
  return ev;
}

TEST(OpenAiWire, bad_tools_formats_and_kwargs_are_refused_naming_the_field) {
  const std::string msgs = R"("messages":[{"role":"user","content":"hi"}])";
  auto chat = [&](const std::string& extra) { return refused_param<OpenAiCompletions>("{" + msgs + "," + extra + "}", true); };
  EXPECT_EQ(chat(R"("tools": {"a": 1})"), "tools");
  EXPECT_EQ(chat(R"("response_format": {"type": "yaml"})"), "response_format.type");
  EXPECT_EQ(chat(R"("response_format": {"type": "json_schema", "json_schema": {"schema": 3}})"),
            "response_format.json_schema.schema");
  EXPECT_EQ(chat(R"("json_schema": "x")"), "json_schema");
  EXPECT_EQ(chat(R"("grammar": "root ::= \"a\"", "json_schema": {"type": "object"})"), "grammar");
  EXPECT_EQ(chat(R"("chat_template_kwargs": [1])"), "chat_template_kwargs");
  EXPECT_EQ(chat(R"("chat_template_kwargs": {"enable_thinking": "no"})"), "chat_template_kwargs.enable_thinking");
  EXPECT_EQ(chat(R"("parallel_tool_calls": 1)"), "parallel_tool_calls");
  EXPECT_EQ(chat(R"("messages": [{"role":"user","content":[{"type":"image_url"}]}])"), "messages[0].content[0].type");
  EXPECT_EQ(chat(R"("response_format": {"type": "json_object"})"), "<accepted>");
  // Today's fields: known ones keep their types, unknown ones are ignored as OpenAI ignores them.
  EXPECT_EQ(chat(R"("stream_options": true)"), "stream_options");
  EXPECT_EQ(chat(R"("stream_options": {"include_usage": "yes"})"), "stream_options.include_usage");
  EXPECT_EQ(chat(R"("reasoning_effort": 2)"), "reasoning_effort");
  EXPECT_EQ(chat(R"("max_completion_tokens": "many")"), "max_completion_tokens");
  EXPECT_EQ(chat(R"("reasoning_effort": "low", "max_completion_tokens": 9, "store": false, "metadata": {"a": "b"},
                    "service_tier": "auto", "user": "u1", "prediction": {"type": "content", "content": "x"},
                    "stream_options": {"include_usage": true}, "modalities": ["text"], "some_future_field": 1,
                    "messages": [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "hi"}])"),
            "<accepted>");
}

TEST(OpenAiWire, response_format_and_tools_reach_the_turn) {
  OpenAiCompletions wire(true);
  TurnRequest turn;
  ASSERT_FALSE(parse(wire, R"({"messages":[{"role":"user","content":"hi"}],
      "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "integer"}, "strict": true}},
      "tools": [{"type":"function","function":{"name":"f","parameters":{}}}], "tool_choice": "required",
      "parallel_tool_calls": false, "chat_template_kwargs": {"enable_thinking": false}})", turn));
  ASSERT_TRUE(turn.json_schema.has_value());
  EXPECT_EQ(*turn.json_schema, json({{"type", "integer"}}));
  EXPECT_EQ(turn.constraint_field, "response_format.json_schema.schema");
  EXPECT_EQ(turn.tools.size(), 1u);
  EXPECT_EQ(turn.tool_choice, "required");
  EXPECT_FALSE(turn.parallel_tool_calls);
  EXPECT_EQ(turn.template_kwargs, json({{"enable_thinking", false}}));
}

TEST(OpenAiWire, streamed_tool_calls_and_reasoning_use_openais_delta_fields) {
  OpenAiCompletions wire(true);
  TurnRequest turn;
  ASSERT_FALSE(parse(wire, R"({"messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}})", turn));
  wire.set_served("m", "chatcmpl-1", 5);
  std::string s = wire.stream_events(content("think", ""));
  s += wire.stream_events(call_delta(0, "call_1", "get", "{\"a\""));
  s += wire.stream_events(call_delta(0, "", "", ":1}"));
  s += wire.stream_events(finish("tool_calls"));
  const auto events = parse_sse(s);
  ASSERT_EQ(events.size(), 6u) << s;  // 3 deltas, the finish, the usage, then [DONE] (not JSON)
  EXPECT_TRUE(events[5].data.is_discarded());
  EXPECT_EQ(events[0].data["choices"][0]["delta"], json({{"role", "assistant"}, {"reasoning_content", "think"}}));
  EXPECT_EQ(events[1].data["choices"][0]["delta"]["tool_calls"][0],
            json({{"index", 0}, {"id", "call_1"}, {"type", "function"}, {"function", {{"name", "get"}, {"arguments", "{\"a\""}}}}));
  EXPECT_EQ(events[2].data["choices"][0]["delta"]["tool_calls"][0], json({{"index", 0}, {"function", {{"arguments", ":1}"}}}}));
  EXPECT_EQ(events[3].data["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(events[4].data["usage"]["prompt_tokens_details"]["cached_tokens"], 4);
  EXPECT_NE(s.find("data: [DONE]\n\n"), std::string::npos);
}

TEST(OpenAiWire, a_whole_answer_carries_calls_reasoning_and_cached_tokens) {
  OpenAiCompletions wire(true);
  TurnRequest turn;
  ASSERT_FALSE(parse(wire, R"({"messages":[{"role":"user","content":"hi"}]})", turn));
  wire.set_served("m", "chatcmpl-1", 5);
  TurnResult r;
  r.reasoning = "hmm";
  r.tool_calls.push_back({"call_9", "get", "{\"a\":1}"});
  r.finish_reason = "tool_calls";
  r.usage = usage(10, 3, 6);
  const json j = wire.response(r);
  const json& m = j["choices"][0]["message"];
  EXPECT_TRUE(m["content"].is_null());
  EXPECT_EQ(m["reasoning_content"], "hmm");
  EXPECT_EQ(m["tool_calls"][0], json({{"id", "call_9"}, {"type", "function"}, {"function", {{"name", "get"}, {"arguments", "{\"a\":1}"}}}}));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 6);
}

TEST(AnthropicWire, bad_requests_are_refused_naming_the_field) {
  auto msg = [](const std::string& body) { return refused_param<AnthropicMessages>(body); };
  EXPECT_EQ(msg(R"({"messages":[{"role":"user","content":"hi"}]})"), "max_tokens");
  EXPECT_EQ(msg(R"({"max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]})"),
            "messages[0].content[0].type");
  EXPECT_EQ(msg(R"({"max_tokens":5,"messages":[{"role":"tool","content":"x"}]})"), "messages[0].role");
  EXPECT_EQ(msg(R"({"max_tokens":5,"messages":[{"role":"system","content":[{"type":"image"}]}]})"),
            "messages[0].content[0].type");
  const std::string user = R"("max_tokens":5,"messages":[{"role":"user","content":"x"}])";
  EXPECT_EQ(msg("{" + user + R"(,"thinking":{"type":"sometimes"}})"), "thinking.type");
  EXPECT_EQ(msg("{" + user + R"(,"thinking":{"type":"enabled","budget_tokens":"many"}})"), "thinking.budget_tokens");
  EXPECT_EQ(msg("{" + user + R"(,"output_config":"high"})"), "output_config");
  EXPECT_EQ(msg("{" + user + R"(,"output_config":{"effort":3}})"), "output_config.effort");
  EXPECT_EQ(msg("{" + user + R"(,"metadata":"me"})"), "metadata");
  EXPECT_EQ(msg("{" + user + R"(,"context_management":[]})"), "context_management");
  EXPECT_EQ(msg(R"({"max_tokens":5,"messages":[{"role":"user","content":"x"}],"tools":[{"name":"f"}]})"),
            "tools[0].input_schema");
  EXPECT_EQ(msg(R"({"max_tokens":5,"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"maybe"}})"),
            "tool_choice.type");
  EXPECT_EQ(msg(R"({"max_tokens":5,"messages":[{"role":"user","content":"x"}],"temperature":1.5})"), "temperature");
  EXPECT_EQ(msg(R"({"max_tokens":5,"messages":[{"role":"user","content":"x"}],"stop_sequences":"x"})"), "stop_sequences");
}

// What current agent CLIs send beside the conversation: system notes inside `messages`, adaptive
// thinking, effort, context management, metadata and cache_control on blocks.
TEST(AnthropicWire, todays_agent_fields_are_accepted_and_system_notes_stay_in_place) {
  AnthropicMessages wire;
  TurnRequest turn;
  auto e = parse(wire, R"({"model": "claude-opus-4-8", "max_tokens": 64000, "stream": true,
    "system": [{"type":"text","text":"You are an agent."},{"type":"text","text":" Be brief.","cache_control":{"type":"ephemeral"}}],
    "messages": [
      {"role":"user","content":[{"type":"text","text":"<system-reminder>today</system-reminder>"},
                                {"type":"text","text":"Say hello","cache_control":{"type":"ephemeral"}}]},
      {"role":"system","content":"Available agent types: none."}],
    "thinking": {"type":"adaptive","budget_tokens":512}, "output_config": {"effort":"high"},
    "context_management": {"edits":[{"type":"clear_thinking_20251015","keep":"all"}]},
    "metadata": {"user_id":"{\"device_id\":\"x\"}"}, "some_future_field": [1]})", turn);
  ASSERT_FALSE(e) << e->message;
  ASSERT_EQ(turn.messages.size(), 3u);
  EXPECT_EQ(turn.messages[0].role, "system");
  EXPECT_EQ(turn.messages[0].content, "You are an agent. Be brief.");
  EXPECT_EQ(turn.messages[1].content, "<system-reminder>today</system-reminder>Say hello");
  EXPECT_EQ(turn.messages[2].role, "system");
  EXPECT_EQ(turn.messages[2].content, "Available agent types: none.");
  EXPECT_EQ(turn.template_kwargs["enable_thinking"], true);
  EXPECT_EQ(turn.reasoning_budget, 512);
  EXPECT_EQ(wire.requested_model(), "claude-opus-4-8");
  TurnRequest off;
  AnthropicMessages other;
  ASSERT_FALSE(parse(other, R"({"max_tokens":5,"messages":[{"role":"user","content":"x"}],
    "thinking":{"type":"disabled","budget_tokens":99}})", off));
  EXPECT_EQ(off.template_kwargs["enable_thinking"], false);
  EXPECT_FALSE(off.reasoning_budget.has_value());
}

// Anthropic's defaults are OpenAI's; it reads temperature, top_p and top_k, and no OpenAI-only field.
TEST(AnthropicWire, sampling_starts_from_the_api_defaults_and_reads_only_anthropics_fields) {
  auto sampling_of = [](const std::string& fields) {
    AnthropicMessages wire;
    TurnRequest turn;
    turn.generation.sampling.seed = 7;
    auto e = parse(wire, R"({"max_tokens":5,"messages":[{"role":"user","content":"x"}])" + fields + "}", turn);
    EXPECT_FALSE(e) << e->message;
    const sampling::Params& s = turn.generation.sampling;
    return std::make_tuple(s.temp, s.top_p, s.top_k, s.min_p, s.seed);
  };
  EXPECT_EQ(sampling_of(""), std::make_tuple(1.0f, 1.0f, 0, 0.0f, sampling::kRandomSeed));
  EXPECT_EQ(sampling_of(R"(,"temperature":0.5,"top_p":0.25,"top_k":20,"min_p":0.3,"seed":11)"),
            std::make_tuple(0.5f, 0.25f, 20, 0.0f, sampling::kRandomSeed));
}

TEST(AnthropicWire, blocks_become_the_conversation_the_template_sees) {
  AnthropicMessages wire;
  TurnRequest turn;
  ASSERT_FALSE(parse(wire, R"({"max_tokens": 9, "system": [{"type":"text","text":"Be "},{"type":"text","text":"brief."}],
    "messages": [
      {"role":"user","content":"Weather?"},
      {"role":"assistant","content":[{"type":"thinking","thinking":"use the tool"},{"type":"tool_use","id":"t1","name":"get","input":{"city":"Oslo"}}]},
      {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"cold"},{"type":"text","text":"And now?"}]}],
    "tools": [{"name":"get","description":"d","input_schema":{"type":"object"}}],
    "tool_choice": {"type":"any","disable_parallel_tool_use":true}, "stop_sequences": ["END"],
    "thinking": {"type":"disabled"}})", turn));
  ASSERT_EQ(turn.messages.size(), 5u);
  EXPECT_EQ(turn.messages[0].role, "system");
  EXPECT_EQ(turn.messages[0].content, "Be brief.");
  EXPECT_EQ(turn.messages[2].reasoning_content, "use the tool");
  ASSERT_EQ(turn.messages[2].tool_calls.size(), 1u);
  EXPECT_EQ(json::parse(turn.messages[2].tool_calls[0].arguments_json), json({{"city", "Oslo"}}));
  EXPECT_EQ(turn.messages[3].role, "tool");
  EXPECT_EQ(turn.messages[3].tool_call_id, "t1");
  EXPECT_EQ(turn.messages[3].content, "cold");
  EXPECT_EQ(turn.messages[4].content, "And now?");
  EXPECT_EQ(turn.tools[0]["function"]["parameters"], json({{"type", "object"}}));
  EXPECT_EQ(turn.tool_choice, "required");
  EXPECT_FALSE(turn.parallel_tool_calls);
  EXPECT_TRUE(turn.report_stop_sequence);
  EXPECT_EQ(turn.template_kwargs["enable_thinking"], false);
  EXPECT_EQ(turn.generation.max_tokens, 9);
}

TEST(AnthropicWire, a_stream_opens_and_closes_one_block_per_kind_in_order) {
  AnthropicMessages wire;
  wire.set_served("m", "msg_1", 5);
  std::string s = wire.stream_start(usage(12, 0, 4));
  s += wire.stream_events(content("th", ""));
  s += wire.stream_events(content("ink", "Hel"));
  s += wire.stream_events(content("", "lo"));
  s += wire.stream_events(call_delta(0, "toolu_1", "get", "{\"city\":"));
  s += wire.stream_events(call_delta(0, "", "", "\"Oslo\"}"));
  s += wire.stream_events(call_delta(1, "toolu_2", "get", "{}"));
  s += wire.stream_events(finish("tool_calls"));
  const auto events = parse_sse(s);
  std::vector<std::string> names;
  for (const auto& e : events) {
    names.push_back(e.event);
    EXPECT_EQ(e.data["type"], e.event);  // the data's type repeats the event name
  }
  const std::vector<std::string> want = {
      "message_start", "ping",
      "content_block_start", "content_block_delta", "content_block_delta", "content_block_delta", "content_block_stop",
      "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
      "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
      "content_block_start", "content_block_delta", "content_block_stop",
      "message_delta", "message_stop"};
  EXPECT_EQ(names, want) << s;
  EXPECT_EQ(events[0].data["message"]["usage"]["input_tokens"], 8);  // 12 prompt tokens, 4 of them cached
  EXPECT_EQ(events[0].data["message"]["usage"]["cache_read_input_tokens"], 4);
  EXPECT_EQ(events[2].data["content_block"]["type"], "thinking");
  EXPECT_EQ(events[5].data["delta"]["type"], "signature_delta");
  EXPECT_EQ(events[7].data["content_block"], json({{"type", "text"}, {"text", ""}}));
  EXPECT_EQ(events[7].data["index"], 1);
  EXPECT_EQ(events[11].data["content_block"], json({{"type", "tool_use"}, {"id", "toolu_1"}, {"name", "get"}, {"input", json::object()}}));
  EXPECT_EQ(events[12].data["delta"]["partial_json"].get<std::string>() + events[13].data["delta"]["partial_json"].get<std::string>(),
            "{\"city\":\"Oslo\"}");
  EXPECT_EQ(events[15].data["index"], 3);
  EXPECT_EQ(events[18].data["delta"]["stop_reason"], "tool_use");
  EXPECT_EQ(events[18].data["usage"]["output_tokens"], 7);
}

TEST(AnthropicWire, stop_reasons_and_errors_are_anthropics) {
  EXPECT_EQ(anthropic_stop_reason("length", ""), "max_tokens");
  EXPECT_EQ(anthropic_stop_reason("stop", "END"), "stop_sequence");
  EXPECT_EQ(anthropic_stop_reason("stop", ""), "end_turn");
  EXPECT_EQ(anthropic_stop_reason("tool_calls", ""), "tool_use");
  AnthropicMessages wire;
  ApiError e = bad_field("max_tokens", "'max_tokens' is required");
  EXPECT_EQ(wire.error_body(e),
            json({{"type", "error"}, {"error", {{"type", "invalid_request_error"}, {"message", "'max_tokens' is required"}}}}));
  e.status = 503;
  EXPECT_EQ(wire.error_body(e)["error"]["type"], "overloaded_error");
}

TEST(ResponsesWire, bad_requests_are_refused_naming_the_field) {
  auto resp = [](const std::string& body) { return refused_param<OpenAiResponses>(body); };
  EXPECT_EQ(resp(R"({"input":"hi","previous_response_id":"resp_1"})"), "previous_response_id");
  EXPECT_EQ(resp(R"({"instructions":"x"})"), "input");
  EXPECT_EQ(resp(R"({"input":[{"type":"message","role":"user","content":[{"type":"input_image"}]}]})"), "input[0].content[0].type");
  EXPECT_EQ(resp(R"({"input":[{"type":"web_search_call"}]})"), "input[0].type");
  EXPECT_EQ(resp(R"({"input":"hi","tools":[{"type":"web_search"}]})"), "tools[0].type");
  EXPECT_EQ(resp(R"({"input":"hi","text":{"format":{"type":"json_schema"}}})"), "text.format.schema");
  EXPECT_EQ(resp(R"({"input":"hi","max_output_tokens":0})"), "max_output_tokens");
}

TEST(ResponsesWire, items_become_the_conversation_and_flat_tools_openais_shape) {
  OpenAiResponses wire;
  TurnRequest turn;
  ASSERT_FALSE(parse(wire, R"({"instructions":"Be brief.", "input":[
      {"role":"user","content":"Weather?"},
      {"type":"function_call","call_id":"c1","name":"get","arguments":"{\"city\":\"Oslo\"}"},
      {"type":"function_call_output","call_id":"c1","output":"cold"},
      {"type":"message","role":"assistant","content":[{"type":"output_text","text":"Cold."}]}],
    "tools":[{"type":"function","name":"get","parameters":{"type":"object"}}],
    "tool_choice":{"type":"function","name":"get"}, "text":{"format":{"type":"json_schema","name":"n","schema":{"type":"object"}}}})",
                     turn));
  ASSERT_EQ(turn.messages.size(), 5u);
  EXPECT_EQ(turn.messages[0].content, "Be brief.");
  EXPECT_EQ(turn.messages[2].role, "assistant");
  ASSERT_EQ(turn.messages[2].tool_calls.size(), 1u);
  EXPECT_EQ(turn.messages[2].tool_calls[0].id, "c1");
  EXPECT_EQ(turn.messages[3].role, "tool");
  EXPECT_EQ(turn.messages[3].tool_call_id, "c1");
  EXPECT_EQ(turn.messages[4].content, "Cold.");
  EXPECT_EQ(turn.tools[0], json({{"type", "function"}, {"function", {{"name", "get"}, {"description", ""}, {"parameters", {{"type", "object"}}}}}}));
  EXPECT_EQ(turn.tool_choice, json({{"type", "function"}, {"function", {{"name", "get"}}}}));
  EXPECT_EQ(turn.constraint_field, "text.format.schema");
}

TEST(ResponsesWire, a_stream_numbers_its_events_and_ends_with_the_whole_response) {
  OpenAiResponses wire;
  TurnRequest turn;
  ASSERT_FALSE(parse(wire, R"({"input":"hi","stream":true})", turn));
  wire.set_served("m", "resp_1", 5);
  std::string s = wire.stream_start(usage(12, 0, 0));
  s += wire.stream_events(content("why", ""));
  s += wire.stream_events(content("", "Hi"));
  s += wire.stream_events(call_delta(0, "call_1", "get", "{}"));
  s += wire.stream_events(finish("tool_calls"));
  const auto events = parse_sse(s);
  std::vector<std::string> names;
  for (size_t i = 0; i < events.size(); ++i) {
    names.push_back(events[i].event);
    EXPECT_EQ(events[i].data["sequence_number"], i);
    EXPECT_EQ(events[i].data["type"], events[i].event);
  }
  const std::vector<std::string> want = {
      "response.created", "response.in_progress",
      "response.output_item.added", "response.content_part.added", "response.reasoning_text.delta",
      "response.reasoning_text.done", "response.content_part.done", "response.output_item.done",
      "response.output_item.added", "response.content_part.added", "response.output_text.delta",
      "response.output_text.done", "response.content_part.done", "response.output_item.done",
      "response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.done",
      "response.output_item.done", "response.completed"};
  EXPECT_EQ(names, want) << s;
  const json& r = events.back().data["response"];
  EXPECT_EQ(r["status"], "completed");
  ASSERT_EQ(r["output"].size(), 3u);
  EXPECT_EQ(r["output"][0]["type"], "reasoning");
  EXPECT_EQ(r["output"][1]["content"][0]["text"], "Hi");
  EXPECT_EQ(r["output"][2], json({{"id", r["output"][2]["id"]}, {"type", "function_call"}, {"call_id", "call_1"}, {"name", "get"},
                                  {"arguments", "{}"}, {"status", "completed"}}));
  EXPECT_EQ(r["usage"]["input_tokens"], 12);
  EXPECT_EQ(r["usage"]["output_tokens"], 7);
  EXPECT_EQ(r["usage"]["input_tokens_details"]["cached_tokens"], 4);
}

// True when `s` is whole UTF-8 characters: each lead byte is followed by all its continuation bytes.
bool whole_characters(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const uint8_t b = static_cast<uint8_t>(s[i]);
    const size_t n = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<uint8_t>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

TEST(ChatTurnText, streamed_pieces_never_split_a_utf8_character) {
  const std::string text = "a\xC3\xA9" "b\xE2\x82\xAC\xF0\x9F\x98\x80" "z";  // a é b € 😀 z
  for (size_t cut1 = 0; cut1 <= text.size(); ++cut1) {
    for (size_t cut2 = cut1; cut2 <= text.size(); ++cut2) {
      std::string tail, out;
      const std::string pieces[] = {text.substr(0, cut1), text.substr(cut1, cut2 - cut1), text.substr(cut2)};
      for (int i = 0; i < 3; ++i) {
        const std::string got = take_whole_utf8(tail, pieces[i], i == 2);
        EXPECT_TRUE(whole_characters(got)) << cut1 << "," << cut2 << ": piece " << i;
        out += got;
      }
      EXPECT_EQ(out, text) << cut1 << "," << cut2;
      EXPECT_EQ(tail, "");
    }
  }
}

TEST(BuiltinTemplates, qwen3_lists_tools_and_opens_or_closes_the_think_block) {
  auto t = builtin_chat_template("qwen3");
  ASSERT_TRUE(t.has_value());
  text::ChatMessage user;
  user.role = "user";
  user.content = "hi";
  text::ChatRenderOptions o;
  o.tools_json = R"([{"type":"function","function":{"name":"get","parameters":{}}}])";
  auto with_tools = t->render({user}, o);
  ASSERT_TRUE(with_tools.ok()) << with_tools.error().message;
  EXPECT_NE(with_tools->find("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get\""), std::string::npos) << *with_tools;
  EXPECT_TRUE(with_tools->ends_with("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n")) << *with_tools;
  o.tools_json.clear();
  o.kwargs_json = R"({"enable_thinking": false})";
  auto no_think = t->render({user}, o);
  ASSERT_TRUE(no_think.ok());
  EXPECT_EQ(*no_think, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_TRUE(builtin_chat_template("llama3").has_value());
  EXPECT_FALSE(builtin_chat_template("nonesuch").has_value());
}

}  // namespace
}  // namespace strata::server
